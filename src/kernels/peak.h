// Loops that run one instruction mix at the rate the core sustains, for the machine's limits
// (`trit bench --peak`): multiply-adds on registers only, with more independent accumulator
// chains than the unit's latency times its issue rate (12 vectors: Zen 4 and Sapphire Rapids
// retire two 256-bit FMAs, or one or two 512-bit ones, a cycle at a latency of 4), and a
// streaming sum that reads memory as fast as the cores can.
//
// Keys (kernel_table.c), each with a portable row:
//   TRIT_KERNEL_PEAK  F32  -> F32: fp32 FMA (vfmadd231ps: AVX-512 zmm, AVX2 ymm)
//                     BF16 -> F32: bf16 pair dot products (vdpbf16ps zmm)
//                     QINT8 -> I32: u8 x s8 dot products into int32 (vpdpbusd zmm; on AVX2
//                                   vpmaddubsw + vpmaddwd + vpaddd, the integer kernels' mix)
//   TRIT_KERNEL_READ  F32  -> F32: sum of a float buffer (loads and adds, 8 chains)
// Operations are counted as GEMMs count them: 2 per multiply-add of one lane (one product).
#ifndef TRIT_KERNELS_PEAK_H
#define TRIT_KERNELS_PEAK_H

#include <stdint.h>

// Runs `iters` passes of the loop body and returns the operations done; the accumulators'
// sum goes to *sink so the work cannot be dropped by the compiler.
typedef int64_t trit_kernel_peak_fn(int64_t iters, float *sink);
// The sum of x[0..n), any n >= 0, x 64-byte aligned (the order of the additions is the kernel's).
typedef float trit_kernel_read_fn(const float *x, int64_t n);

trit_kernel_peak_fn trit_kernel_peak_fma_avx512, trit_kernel_peak_fma_avx2, trit_kernel_peak_fma_ref;
trit_kernel_peak_fn trit_kernel_peak_bf16_avx512bf16, trit_kernel_peak_bf16_ref;
trit_kernel_peak_fn trit_kernel_peak_int8_avx512vnni, trit_kernel_peak_int8_avx2, trit_kernel_peak_int8_ref;
trit_kernel_read_fn trit_kernel_read_avx512, trit_kernel_read_avx2, trit_kernel_read_ref;

#endif
