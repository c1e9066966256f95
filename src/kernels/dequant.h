// Decoding runs of quantized codes to f32, for matmuls that read a quantized weight through its
// decoded values (ops/qweight.h: a chunk of rows at a time, never the whole matrix). The values
// are bit for bit those of the dtype table's to_f32 converters (tensor/dtype.c), which remain
// the definition; this loop only takes each group's scale and zero point once and then runs a
// tight per-format loop the compiler vectorises, where the table's converters look both up
// per element (fp8 about 20 times faster, the others 2 to 4).
#ifndef TRIT_KERNELS_DEQUANT_H
#define TRIT_KERNELS_DEQUANT_H

#include "trit/tensor.h"

// out (n) = the values of n codes of dt starting at element `first` of their tensor (counted
// from the start of its storage, so the right groups of q are used); codes points at the byte
// holding element `first`, which must start a block of dt (trit_dtype_block). Any dtype with a
// to_f32 converter; the side-scaled ones (qint8/4/2, nf4, fp8, ternary 2-bit and base 3) take
// the fast loops, the others (q8_0, q4_0, tq1_0, tq2_0, plain dtypes) the table's rows.
void trit_kernel_dequant_f32(trit_dtype dt, float *out, const void *codes, int64_t n, const trit_quant_info *q,
                             int64_t first);

// One run of NF4 or FP8 codes inside one group, out (n) from codes (element 0 at the start of
// codes; NF4 two a byte, element 2j in byte j's low nibble): NF4 looks each code up in tab, the
// group's 16 values (codebook x scale); FP8 multiplies each code's value (tab: the format's 256
// decoded values, trit_fp8_table) by s. Keyed (DEQUANT, dt, F32) in the kernel table.
typedef void trit_kernel_dequant_fn(trit_dtype dt, float *out, const uint8_t *codes, int64_t n, float s, const float *tab);
trit_kernel_dequant_fn trit_kernel_dequant_ref, trit_kernel_dequant_avx2, trit_kernel_dequant_avx512;

#endif
