// trit quantization codecs: f32 values to packed codes plus scales and back, on plain buffers
// and on tensors. Integer codes of 8, 4 or 2 bits, symmetric ("scale") or affine (scale + zero
// point), per tensor, per output channel or per group; NF4 (QLoRA); FP8 e4m3fn and e5m2 with a
// scale; double quantization of the scales (bitsandbytes); round to nearest or stochastic; the
// dynamic 8-bit maps of bitsandbytes' 8-bit optimizers, block-wise with an absmax per block.
#ifndef TRIT_QUANT_H
#define TRIT_QUANT_H

#include "trit/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum trit_quant_scheme {
    TRIT_QSCHEME_SYMMETRIC = 0,  // x = c * scale, scale = absmax / qmax (qmax 127, 7 or 1)
    TRIT_QSCHEME_AFFINE,         // x = (c - zero_point) * scale over [min(x, 0), max(x, 0)]
} trit_quant_scheme;

// Group sizes besides a positive count: the whole tensor, or one group per row (the last dim:
// per output channel for an (out, in) weight).
enum { TRIT_QGROUP_TENSOR = 0, TRIT_QGROUP_CHANNEL = -1 };

typedef struct trit_quant_spec {
    trit_dtype dtype;            // TRIT_QINT8/4/2, TRIT_NF4, TRIT_F8_E4M3 or TRIT_F8_E5M2
    int64_t group_size;          // TRIT_QGROUP_TENSOR, TRIT_QGROUP_CHANNEL, or > 0 dividing the rows
    trit_quant_scheme scheme;    // integer codes only; NF4 and FP8 are symmetric
    int64_t double_quant_block;  // 0: scales in f32; > 0: scales as int8 in blocks of this (256)
    bool stochastic;             // stochastic rounding of the codes with Philox (seed, stream, element)
    uint64_t seed, stream;
} trit_quant_spec;

// Format names as the command line spells them: int8, int4, int2, nf4, fp8 (e4m3) and fp8-e5m2.
// The dtype of a name, or TRIT_DTYPE_COUNT (with trit_last_error listing the names).
trit_dtype trit_quant_format_dtype(const char *name);
const char *trit_quant_format_name(trit_dtype dt);  // NULL for a dtype that is not a format

// The usual spec of a dtype: int8 and fp8 per output channel; int4 groups of 128; int2 groups
// of 64; NF4 absmax blocks of 64 (QLoRA); symmetric, no double quantization, nearest rounding.
trit_quant_spec trit_quant_spec_default(trit_dtype dt);
// Whether s can quantize numel values laid out in rows of row_len; the message says why not.
trit_status trit_quant_spec_check(const trit_quant_spec *s, int64_t numel, int64_t row_len);
// The group size s gives for rows of row_len and numel values.
int64_t trit_quant_group_elems(const trit_quant_spec *s, int64_t numel, int64_t row_len);

// codes (trit_dtype_nbytes(s->dtype, numel) bytes) and *info (new, the caller's) for x. A group
// of zeros gets scale 0 and decodes to zeros. A NaN or Inf in x is an error naming its index
// (TRIT_ERR_NUMERIC), and nothing is written to *info. Results do not depend on the thread count.
trit_status trit_quant_encode(const trit_quant_spec *s, const float *x /* (numel) */, int64_t numel, int64_t row_len,
                              void *codes, trit_quant_info **info);
// out = the values codes and q stand for; q may be NULL only for FP8 (scale 1).
trit_status trit_quant_decode(trit_dtype dt, const void *codes, int64_t numel, const trit_quant_info *q,
                              float *out /* (numel) */);
// Replaces q's f32 scales by int8 codes of (scale - mean) in blocks of `block`, one f32 scale per
// block (bitsandbytes' double quantization); trit_quant_info_scale decodes them.
trit_status trit_quant_double(trit_quant_info *q, int64_t block);

// ---- ternary gradients (TernGrad) -------------------------------------------------------
// g (n) becomes scales[q] * c with codes c in {-1, 0, 1}. With clip_sigma > 0, g is first
// clipped to +-clip_sigma * stddev(g) (2.5 in the paper); bound = that or max |g|, whichever is
// smaller. bucket = 0 gives one scale, the bound (the paper's per-layer scale); bucket > 0 (a
// multiple of 4) gives one scale per run of `bucket` values, the bound or the run's max |g|
// when smaller, which lowers the variance of small values next to large ones at 32 / bucket
// extra bits a value. P(c = sign g) = |g| / scale, so the expected result is (clipped) g.
// codes take trit_terngrad_bytes(n) bytes (the ternary dtype's layout: c + 1 in 2 bits, four
// per byte), scales trit_terngrad_nscales(n, bucket) floats. An all-zero run gets scale 0; a
// NaN or Inf is an error naming its index (TRIT_ERR_NUMERIC). Draws are Philox (seed, stream,
// element): thread-count independent and reproducible.
size_t trit_terngrad_bytes(int64_t n);
int64_t trit_terngrad_nscales(int64_t n, int64_t bucket);
trit_status trit_terngrad_encode(const float *g /* (n) */, int64_t n, int64_t bucket, double clip_sigma, uint64_t seed,
                                 uint64_t stream, uint8_t *codes, float *scales);
// The two halves of encode, for workers that share a scale (TernGrad's scale sharing: each
// worker's scales, then their max over the workers): scales and the clip bound of g as encode
// chooses them, then g's codes under given scales, each at least its run's largest clipped |g|
// (P(c = sign g) = |clip(g, bound)| / scale, so the result stays unbiased).
trit_status trit_terngrad_scales(const float *g /* (n) */, int64_t n, int64_t bucket, double clip_sigma, float *scales,
                                 float *bound);
trit_status trit_terngrad_encode_scaled(const float *g /* (n) */, int64_t n, int64_t bucket, const float *scales,
                                        float bound, uint64_t seed, uint64_t stream, uint8_t *codes);
// out (n) += scales[i / bucket] * codes (one scale when bucket is 0).
trit_status trit_terngrad_accumulate(const uint8_t *codes, const float *scales, int64_t n, int64_t bucket,
                                     float *out /* (n) */);

// ---- dynamic 8-bit maps (bitsandbytes' 8-bit optimizer states) ---------------------------
// A code is an index into a sorted map of 256 values in [-1, 1]; a block of `block` values is
// stored as codes plus one f32 absmax, and code c of a block decodes to map[c] * absmax.
// The maps are bitsandbytes' create_dynamic_map(signed) with 7 exponent bits: a dynamic
// exponent 10^-6 .. 10^0 and a linear fraction whose resolution shrinks as the exponent grows
// smaller (signed: 127 negative values, 0, 127 positive ones and 1; unsigned: 0, 254 positive
// values and 1), bit for bit as bitsandbytes 0.50 with PyTorch 2 builds them
// (tests/reference/make_dynamic_map_fixtures.py).
//
// Rounding: v = value / absmax (f32 division, so |v| <= 1) goes to the nearest map value,
// exactly: the code of the first map value above each midpoint is taken from the midpoint on,
// and a v on a midpoint keeps the lower code (bitsandbytes' kernels also search for the
// nearest code; they compare f32 distances, which can differ right at a midpoint). A block of
// zeros has absmax 0 and the code of 0; a NaN or Inf in a block makes its absmax NaN or Inf, so
// the block decodes to NaN rather than hiding it.
#define TRIT_DYNAMIC_MAP_SIZE 256
void trit_quant_dynamic_map(bool is_signed, float map[TRIT_DYNAMIC_MAP_SIZE]);

// A map with its decision thresholds and a table that finds the code of a float in two reads
// (by its sign, exponent and top mantissa bits), for encoding.
#define TRIT_DYNAMIC_LUT_SIZE (26 * 256)
typedef struct trit_dynamic_code {
    float values[TRIT_DYNAMIC_MAP_SIZE];  // the map, ascending
    float above[TRIT_DYNAMIC_MAP_SIZE];   // least float nearer to values[k + 1] than to values[k]; [255] NaN
    uint8_t lut[2][TRIT_DYNAMIC_LUT_SIZE];
    bool has_lut;                         // false: a binary search instead
} trit_dynamic_code;
void trit_quant_dynamic_code_init(trit_dynamic_code *c, bool is_signed);
uint8_t trit_quant_dynamic_nearest(const trit_dynamic_code *c, float v);
// One block: x, codes: (len); *absmax receives max |x|. No checks (len >= 0, valid pointers).
void trit_quant_dynamic_encode_block(const trit_dynamic_code *c, const float *x, int64_t len, uint8_t *codes,
                                     float *absmax);
// out (len) = map[codes] * absmax.
void trit_quant_dynamic_decode_block(const trit_dynamic_code *c, const uint8_t *codes, float absmax, int64_t len,
                                     float *out);
// Whole buffers of n values in blocks of `block` (the last may be short): codes (n), absmax
// (ceil(n / block)). Blocks are independent, so the thread count changes nothing.
trit_status trit_quant_dynamic_encode(const trit_dynamic_code *c, const float *x /* (n) */, int64_t n, int64_t block,
                                      uint8_t *codes, float *absmax);
trit_status trit_quant_dynamic_decode(const trit_dynamic_code *c, const uint8_t *codes, const float *absmax,
                                      int64_t n, int64_t block, float *out /* (n) */);

// ---- ggml's block formats as codes with side scales ---------------------------------------
// ggml's q8_0, q4_0, tq2_0 and tq1_0 blocks (TRIT_Q8_0 .. TRIT_TQ1_0) each carry an f16 scale d.
// The same values as codes with side scales, one group per block and d its scale:
//   q8_0  -> qint8 in groups of 32    x = c d, c in [-127, 127]
//   q4_0  -> qint4 in groups of 32    x = c d, c = q - 8 in [-8, 7] (symmetric, with ggml's -8)
//   tq2_0, tq1_0 -> ternary in groups of 256    x = c d, c in {-1, 0, 1}
// Both directions move codes and scales without rounding: a block decodes to the same bits
// either way (x = c d in f32, as ggml's dequantize_row_* computes it), and a tensor ggml's
// quantizer wrote goes there and back to the same bytes.
// The side dtype of a block dtype, or TRIT_DTYPE_COUNT.
trit_dtype trit_quant_ggml_side_dtype(trit_dtype blocked);
// A new contiguous tensor of b's shape and name in the side dtype, owning its quant info. NULL
// with TRIT_ERR_FORMAT naming the block where no side code stands for one: a q8_0 code -128
// (ggml's quantizer never writes it; trit's int8 kernels take [-127, 127]), a tq2_0 code 3 (the
// value 2d), a scale that is not finite. b: contiguous, rows of whole blocks.
trit_tensor *trit_quant_from_ggml(const trit_tensor *b);
// q's codes as `blocked` blocks when they are such blocks exactly: q of the side dtype, one
// symmetric f32 scale a block (no double quantization), each scale an f16 value, tq1_0's codes
// ternary. NULL with TRIT_ERR_UNSUPPORTED saying why otherwise (the caller then encodes values).
trit_tensor *trit_quant_to_ggml(const trit_tensor *q, trit_dtype blocked);

// A new tensor of s->dtype holding x (f32, any layout) quantized along its last dim, owning its
// quant info; NULL with trit_last_error set on failure.
trit_tensor *trit_quantize(const trit_tensor *x, const trit_quant_spec *s);
// A new contiguous f32 tensor with the values of a quantized (or any) tensor.
trit_tensor *trit_dequantize(const trit_tensor *q);

#ifdef __cplusplus
}
#endif
#endif
