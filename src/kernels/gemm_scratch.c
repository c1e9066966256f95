// Per-thread GEMM scratch of a workload (kernels/gemm_scratch.h): which kernel files the table's
// choices route each kind of product to, and the largest buffer each is asked for.
#include "kernels/gemm_scratch.h"

#include "kernels/gemm.h"
#include "kernels/gemm_lowp.h"
#include "kernels/kernel_table.h"

#include <string.h>

// The kernel file of a table row, NULL for the portable kernels (no packing).
static const trit_gemm_blocking *file_of(const trit_kernel_entry *e) {
    if (!e) return NULL;
    if (e->fn == (trit_kernel_fn)trit_kernel_gemm_avx2_f32 || e->fn == (trit_kernel_fn)trit_kernel_gemm_mixed_avx2)
        return &trit_gemm_blocking_avx2;
    if (e->fn == (trit_kernel_fn)trit_kernel_gemm_avx512_f32 || e->fn == (trit_kernel_fn)trit_kernel_gemm_mixed_avx512)
        return &trit_gemm_blocking_avx512;
    if (e->fn == (trit_kernel_fn)trit_kernel_gemm_mixed_avx512bf16) return &trit_gemm_blocking_avx512bf16;
    return NULL;
}

size_t trit_gemm_pack_bytes_max(const trit_gemm_blocking *b) {
    return sizeof(float) * (size_t)trit_gemm_pack_floats(b, b->mc, b->nc, b->kc);
}

// A request of `bytes` to `file`'s buffer (blocking b, NULL for gemm_mixed.c's rows): the buffer
// grows to the largest.
static void request(trit_gemm_scratch *s, const char *file, const trit_gemm_blocking *b, size_t bytes) {
    for (int i = 0; i < s->n; i++)
        if (strcmp(s->buf[i].file, file) == 0) {
            if (bytes > s->buf[i].bytes) s->buf[i].bytes = bytes;
            return;
        }
    s->buf[s->n].file = file;
    s->buf[s->n].blocking = b;
    s->buf[s->n].bytes = bytes;
    s->n++;
}

trit_status trit_gemm_scratch_plan(const trit_gemm_workload *w, trit_gemm_scratch *out) {
    if (!w || !out || (w->n_c16 > 0 && !w->c16_shapes))
        return trit_error(TRIT_ERR_INVALID, "trit_gemm_scratch_plan: NULL workload, output or 16-bit C shapes");
    memset(out, 0, sizeof *out);
    const trit_gemm_blocking *f32 = file_of(trit_kernel_find(TRIT_KERNEL_GEMM, TRIT_F32, TRIT_F32));
    const trit_gemm_blocking *mixed = file_of(trit_kernel_find(TRIT_KERNEL_GEMM_MIXED, TRIT_BF16, TRIT_F32));
    trit_clear_error();  // both keys have portable rows: a NULL here is only "no packing"
    // The AVX512-BF16 file takes the products whose operands all enter as bf16 (bf16 values, or
    // f32 ones in bf16 pieces below TRIT_MATMUL_HIGHEST); f16 and fp32 ones go to the AVX-512 file.
    const bool bf16_file = mixed == &trit_gemm_blocking_avx512bf16;
    const trit_gemm_blocking *other = bf16_file ? &trit_gemm_blocking_avx512 : mixed;
    const bool uses_mixed = w->activation != TRIT_F32 || w->matmul != TRIT_MATMUL_HIGHEST;
    const bool c16 = w->activation == TRIT_BF16 || w->activation == TRIT_F16;
    // f32 C: the f32 GEMM always (attention, bias gradients, fp32 matmuls), the mixed one when used.
    if (f32) request(out, f32->file, f32, trit_gemm_pack_bytes_max(f32));
    if (uses_mixed && mixed) request(out, mixed->file, mixed, trit_gemm_pack_bytes_max(mixed));
    if (uses_mixed && other && other != mixed) request(out, other->file, other, trit_gemm_pack_bytes_max(other));
    // 16-bit C: a linear's output, both operands cast to the activation dtype.
    const trit_gemm_blocking *c16_file = bf16_file && w->activation == TRIT_F16 ? other : mixed;
    for (int i = 0; c16 && c16_file && i < w->n_c16; i++) {
        const int64_t N = w->c16_shapes[2 * i], K = w->c16_shapes[2 * i + 1];
        if (N > 0 && K > 0)
            request(out, c16_file->file, c16_file,
                    sizeof(float) * (size_t)trit_gemm_pack_c16_floats(c16_file, c16_file->mc, N, K));
    }
    for (int i = 0; c16 && mixed && w->c16_from_f32 && w->matmul == TRIT_MATMUL_HIGH && i < w->n_c16; i++)
        request(out, "gemm_mixed.c", NULL, sizeof(float) * (size_t)TRIT_GEMM_C16_SPLIT_ROWS * (size_t)w->c16_shapes[2 * i]);
    for (int i = 0; i < out->n; i++) out->bytes += out->buf[i].bytes;
    return TRIT_OK;
}
