// The decoder's cache (gpt_cache.c makes it, gpt_decode.c runs the model's program over it):
// keys and values of earlier positions, the program's slots for a chunk of rows, and the weights
// as the kernels take them. Not a public header.
#ifndef TRIT_NN_GPT_CACHE_H
#define TRIT_NN_GPT_CACHE_H

#include "kernels/qgemm_panel.h"
#include "kernels/rowops.h"
#include "nn/gpt_internal.h"

// Positions a forward handles at once: a prompt's matmuls run as (ROWS x K) GEMMs. An f32
// GEMM packs its weight operand on every call, so taller chunks pay that less often: 128 rows
// prefill fp32 10-19% faster than 64 (AMD EPYC Zen 4, gpt2 shape, 128-token prompt), the
// integer panels at the same speed within noise.
enum { TRIT_DECODE_ROWS = 128 };
#define ROWS TRIT_DECODE_ROWS

// Key positions a head's cache holds: the context rounded up to whole key blocks (rowops.h).
static inline int64_t trit_gpt_key_positions(const trit_gpt_config *c) {
    return (c->seq_len + TRIT_ATTEND_KEY_BLOCK - 1) / TRIT_ATTEND_KEY_BLOCK * TRIT_ATTEND_KEY_BLOCK;
}

// Every weight in the form its kernel reads (gpt_weights.c). Arrays are (n tensors) or NULL.
typedef struct gpt_weights {
    int n;
    // f32 copies of parameters stored in bf16/f16, taken when made (a cache sees the parameters
    // as they were when it was made; training code makes a new cache per evaluation)
    float **f32;
    // For quantized copies a kernel takes: the group scales as f32 and the group size the
    // kernels see (a group spanning whole rows is given one scale per row)
    float **qscales;
    int64_t *qgroup;
    // 2-bit copies of ternary codes held in another dtype (base 3, symmetric int2)
    trit_tensor **repacked;
    // under QAT, the block matrices quantized by the freeze rule, and their decoded values where
    // no kernel takes the codes
    trit_tensor **frozen;
    float **frozen_f32;
    // integer codes in 16-row panels, for the dtypes the CPU has panel kernels for (qgemm_panel.h);
    // an entry has codes == NULL when it has none. A repack is dropped once its panels are made.
    trit_qpanels *panels;
    void *weight_block;  // a decode-only model's kernel weights (panels, codes), in one block of pages, or NULL
    size_t weight_block_bytes;
    int64_t maxk;  // widest input of a quantized matrix the integer kernels take (0: none)
} gpt_weights;

trit_status trit_gpt_weights_make(gpt_weights *w, const trit_gpt *m);
void trit_gpt_weights_free(gpt_weights *w);
// The quantized copy of parameter i the kernels multiply with (its repack, the QAT freeze or the
// attached one), or NULL when i is multiplied in f32.
const trit_tensor *trit_gpt_weights_quantized(const gpt_weights *w, const trit_gpt *m, int i);
// Parameter i's values as f32 for the f32 paths: the QAT freeze's decoded values, the f32 copy of
// a 16-bit parameter, or the parameter itself (NULL for i < 0, and for a weight a decode-only
// model keeps only as codes).
const float *trit_gpt_weights_f32(const gpt_weights *w, const trit_gpt *m, int i);

struct trit_gpt_cache {
    const trit_gpt *m;
    int64_t len;           // tokens decoded so far
    trit_dtype kv;         // TRIT_F32 or TRIT_F16: how keys and values are stored
    void *k;               // (L, H, Tk / 64, hs, 64) keys (after RoPE), Tk = key_positions: per head
                           // the attention kernel's transposed key blocks
    void *v;               // (L, H, T, hs) values, each head's positions contiguous
    // Work buffers for up to ROWS positions fed at once (a prompt is fed in chunks of ROWS): the
    // program's slots, each (ROWS, the model's slot_width).
    float *slot[GPT_NUM_SLOTS];
    float *p;              // (H, T) attention probabilities, one row per head
    double stats[2 * ROWS];  // (ROWS, 2) norm statistics
    double *rope;          // (2, ROWS, hs / 2) cos and sin of the rotary angles, RoPE models only
    void *block;           // one block of pages holding all of the above (trit_pages_alloc)
    size_t block_bytes;
    const gpt_weights *w;  // &own, or a decode-only model's
    gpt_weights own;
    // A chunk's inputs quantized per token (integer kernels) and as f32 (the NF4 kernel's order,
    // or fake-quantized under QAT).
    int8_t *xq;            // (ROWS, max K)
    float *xscale;         // (ROWS)
    int32_t *xgsum;        // (ROWS, max K / 64)
    float *xf;             // (ROWS, max K)
    // A prompt runs a block at a time over all its chunks of ROWS positions (gpt_decode.c), its
    // residual stream kept whole, so a block's weights are read from cache for every chunk; a
    // decode-only model's weight-only (NF4, FP8) matrices, which keep no f32 values, are decoded
    // once per block for a prompt's GEMMs.
    float *xs;             // (T, C) the residual stream of the positions being fed
    float *wdec;           // (the most weight-only values a block holds), NULL when there are none
    int64_t *wdec_at;      // (n_tensors) where matrix i's values are in wdec for this block, or -1
    int64_t wdec_used;     // floats of wdec taken in this block
    float *lora;           // (2, ROWS, r) or NULL: a chunk's products with LoRA's A, or a bottleneck's
                           // down projection and its GELU
    float *xf_adapter;     // (ROWS, C) or NULL: a bottleneck's up projection
};

static inline const trit_tensor *trit_gpt_cache_quantized(const trit_gpt_cache *k, int i) {
    return trit_gpt_weights_quantized(k->w, k->m, i);
}
static inline const float *trit_gpt_cache_f32(const trit_gpt_cache *k, int i) { return trit_gpt_weights_f32(k->w, k->m, i); }
// Whether a prompt is multiplied by matrix i's values decoded per block: a weight-only (NF4,
// FP8) matrix without f32 values (a decode-only model's).
bool trit_gpt_cache_decodes(const trit_gpt_cache *k, int i);

#endif
