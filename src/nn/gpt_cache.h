// The decoder's cache (gpt_cache.c makes it, gpt_decode.c runs the model's program over it):
// keys and values of earlier positions, the program's slots for a chunk of rows, and the weights
// as the kernels take them. Not a public header.
#ifndef TRIT_NN_GPT_CACHE_H
#define TRIT_NN_GPT_CACHE_H

#include "kernels/qgemm_panel.h"
#include "kernels/rowops.h"
#include "nn/gpt_internal.h"

// Positions a forward handles at once: a prompt's matmuls run as (ROWS x K) GEMMs.
enum { TRIT_DECODE_ROWS = 64 };
#define ROWS TRIT_DECODE_ROWS

// Key positions a head's cache holds: the context rounded up to whole key blocks (rowops.h).
static inline int64_t trit_gpt_key_positions(const trit_gpt_config *c) {
    return (c->seq_len + TRIT_ATTEND_KEY_BLOCK - 1) / TRIT_ATTEND_KEY_BLOCK * TRIT_ATTEND_KEY_BLOCK;
}

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
    void *block;           // one allocation holding all of the above
    // f32 copies of the parameters, made when the cache is created, for a model that stores
    // them in bf16/f16 (NULL when every parameter is f32): (n_tensors) pointers.
    float **f32;
    // For parameters with an attached quantized copy the integer kernels take: its group scales
    // decoded to f32 ((n_tensors) pointers, NULL elsewhere; the array NULL when there are none),
    // and the buffers of a quantized activation row.
    float **qscales;
    int64_t *qgroup; // (n_tensors): the group size the kernels see (a group spanning whole rows
                     // is given one scale per row)
    int8_t *xq;      // (ROWS, max K)
    float *xscale;   // (ROWS)
    int32_t *xgsum;  // (ROWS, max K / 64)
    float *xf;       // (ROWS, max K): input rows reordered for the weight-only NF4 kernel
    // (n_tensors) or NULL: 2-bit copies of ternary codes held in another dtype (base 3, symmetric
    // int2), which the ternary kernels take.
    trit_tensor **repacked;
    // (n_tensors) or NULL: under QAT, the block matrices quantized by the freeze rule, and their
    // decoded values where no kernel takes the codes (NULL elsewhere).
    trit_tensor **frozen;
    float **frozen_f32;
    // (n_tensors) or NULL: integer codes in 16-row panels, for the dtypes the CPU has panel
    // kernels for (qgemm_panel.h); a parameter's entry has codes == NULL when it has none. A base-3
    // parameter's 2-bit repack is dropped once its panels are made.
    trit_qpanels *panels;
};

// The quantized copy of parameter i the kernels multiply with (its repack, the QAT freeze or the
// attached one), or NULL when i is multiplied in f32.
const trit_tensor *trit_gpt_cache_quantized(const trit_gpt_cache *k, int i);
// Parameter i's values as f32 for the f32 paths: the QAT freeze's decoded values, the cache's
// f32 copy of a 16-bit parameter, or the parameter itself (NULL for i < 0).
const float *trit_gpt_cache_f32(const trit_gpt_cache *k, int i);

#endif
