// trit tensors: one type for scalars, vectors, matrices and N-d arrays (up to 8 dims), with
// shape and strides (in elements), views that share storage, and 64-bit sizes throughout.
#ifndef TRIT_TENSOR_H
#define TRIT_TENSOR_H

#include "trit/base.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum trit_dtype {
    TRIT_F32 = 0,
    TRIT_F64,
    TRIT_BF16,
    TRIT_F16,
    TRIT_I32,
    TRIT_I64,
    TRIT_I8,
    TRIT_U8,
    TRIT_Q8_0,  // blocks of 32: f16 scale d = absmax / 127, then 32 int8 q; x = d * q (ggml's q8_0)
    TRIT_Q4_0,  // blocks of 32: f16 scale d, 16 bytes of 4-bit q (element j low, j + 16 high); x = d (q - 8)
    TRIT_TQ2_0,  // blocks of 256 ternary codes, 2 bits each (ggml's layout), then an f16 absmax d
    // Codes whose scales (and zero points) live in the tensor's trit_quant_info, one per group
    // (tensor, output channel, or 32..256 elements); x = (c - zero_point) * scale.
    TRIT_QINT8,    // int8 codes, two's complement: symmetric in [-127, 127], affine [-128, 127]
    TRIT_QINT4,    // 4-bit codes, two per byte (low nibble first), stored + 8: [-7, 7] / [-8, 7]
    TRIT_QINT2,    // 2-bit codes, four per byte (low bits first), stored + 2: [-1, 1] / [-2, 1]
    TRIT_NF4,      // QLoRA NormalFloat indices, two per byte; x = trit_nf4_values[c] * absmax
    TRIT_F8_E4M3,  // OCP fp8 e4m3fn bytes times a per-tensor/channel/group scale
    TRIT_F8_E5M2,  // OCP fp8 e5m2 bytes times a scale
    TRIT_TERNARY,     // ternary codes {-1, 0, 1} stored c + 1 in 2 bits, four per byte (low bits first)
    TRIT_TERNARY_B3,  // ternary codes base 3, 1.625 bits each: blocks of 64 in 13 bytes, bytes
                      // 0-11 hold 5 codes (sum of (c + 1) 3^i), byte 12 the last 4
    TRIT_TQ1_0,  // blocks of 256 ternary codes base 3 in 52 bytes (ggml's layout), then an f16 absmax d
    TRIT_DTYPE_COUNT
} trit_dtype;

// Scales, zero points, group size and second-level scales of a quantized tensor whose scales
// live beside the data (per tensor, per output channel or per group); NULL for plain dtypes and
// for blocked dtypes that carry their scales inside each block. A tensor owns the info it was
// given with trit_tensor_set_quant and frees it with itself; views share it.
typedef struct trit_quant_info {
    int64_t group_size;   // consecutive elements (row-major) sharing one scale: numel for per
                          // tensor, the last dim for per output channel, or 32/64/128/256
    int64_t num_groups;
    float *scales;        // (num_groups), NULL when double-quantized (then see qscales)
    float *zero_points;   // (num_groups) for affine quantization, NULL for symmetric
    // Double quantization (as bitsandbytes): the group scales minus their mean, as int8 codes in
    // blocks of dq_block, each block with one f32 scale: scale[g] = qscales[g] * scales2[g /
    // dq_block] + scales_mean.
    int8_t *qscales;      // (num_groups) or NULL
    float *scales2;       // (ceil(num_groups / dq_block)) or NULL
    float scales_mean;
    int64_t dq_block;
} trit_quant_info;

// A zeroed quant info for `numel` elements in groups of group_size (a divisor of numel), with
// zero points and double-quantized scales as asked (dq_block > 0 turns double quantization on).
trit_quant_info *trit_quant_info_new(int64_t numel, int64_t group_size, bool zero_points, int64_t dq_block);
void trit_quant_info_free(trit_quant_info *q);
// The scale of group g, decoding double quantization when present.
float trit_quant_info_scale(const trit_quant_info *q, int64_t g);
// Bytes its scales and zero points take as stored (int8 codes + block scales when
// double-quantized); 0 for NULL.
size_t trit_quant_info_bytes(const trit_quant_info *q);

// Row converters of a dtype over n elements, n a whole number of blocks. `first` is the flat
// (row-major) index of the first element in its tensor, so a converter with per-group scales in
// `q` finds the right ones. from_f32 rounds to nearest even; from_f32_sr rounds stochastically
// with the random bits of element first + i drawn from Philox (seed, stream, first + i), so a
// result never depends on how rows are split among threads.
typedef void trit_row_to_f32_fn(float *out /* (n) */, const void *in, int64_t n, const trit_quant_info *q,
                                int64_t first);
typedef void trit_row_from_f32_fn(void *out, const float *in /* (n) */, int64_t n, trit_quant_info *q,
                                  int64_t first);
typedef void trit_row_from_f32_sr_fn(void *out, const float *in /* (n) */, int64_t n, trit_quant_info *q,
                                     int64_t first, uint64_t seed, uint64_t stream);

// One row of the dtype table: adding a dtype is a row here plus its kernels.
typedef struct trit_dtype_traits {
    const char *name;
    int64_t block_elems;   // elements per block (1 for plain types)
    size_t block_bytes;    // bytes per block
    bool is_float;         // a floating-point value type (compute or storage)
    bool is_quantized;     // values are codes that need scales to mean anything
    trit_row_to_f32_fn *to_f32;          // NULL where the conversion does not exist
    trit_row_from_f32_fn *from_f32;
    trit_row_from_f32_sr_fn *from_f32_sr;
} trit_dtype_traits;

// The table row of dt, or NULL (with trit_last_error set) for a value outside the enum.
const trit_dtype_traits *trit_dtype_traits_of(trit_dtype dt);
// Bytes per element of a plain (block size 1) dtype; 0 for blocked dtypes and invalid values.
size_t trit_dtype_size(trit_dtype dt);
const char *trit_dtype_name(trit_dtype dt);
bool trit_dtype_is_float(trit_dtype dt);
bool trit_dtype_is_quantized(trit_dtype dt);
int64_t trit_dtype_block(trit_dtype dt);  // elements per block, 1 for plain, 0 for invalid
// Bytes of n elements (n a whole number of blocks).
size_t trit_dtype_nbytes(trit_dtype dt, int64_t n);

// How products are computed when an fp32 value meets a matmul (PyTorch's
// set_float32_matmul_precision): HIGHEST in fp32; HIGH with each fp32 operand split into two
// bf16 pieces (hi + lo) and three products summed in fp32 (about 16 mantissa bits); MEDIUM with
// the operands rounded to bf16. Products are always summed in fp32.
typedef enum trit_matmul_precision {
    TRIT_MATMUL_HIGHEST = 0,
    TRIT_MATMUL_HIGH,
    TRIT_MATMUL_MEDIUM,
} trit_matmul_precision;
#define TRIT_MATMUL_PRECISION_DEFINED 1
const char *trit_matmul_precision_name(trit_matmul_precision p);

#define TRIT_MAX_DIMS 8
#define TRIT_NAME_MAX 96

enum {
    TRIT_FLAG_PARAM = 1u << 0,     // trainable parameter: the graph computes its gradient
    TRIT_FLAG_FROZEN = 1u << 1,    // parameter excluded from gradient work
    TRIT_FLAG_INPUT = 1u << 2,     // graph input filled by the caller before forward
    TRIT_FLAG_OWNS_DATA = 1u << 3, // data was allocated by trit_tensor_new and is freed with it
    TRIT_FLAG_STATE = 1u << 4,     // persistent non-trainable state (e.g. batchnorm running stats)
    TRIT_FLAG_OWNS_QUANT = 1u << 5, // quant was given to the tensor and is freed with it
    TRIT_FLAG_MAPPED = 1u << 6,    // data lives in a shared file mapping that keeps the values: a
                                   // reader that streams drops its pages after reading (trit_tensor_drop_pages)
};

typedef struct trit_tensor {
    trit_dtype dtype;
    int ndim;                        // 0 for a scalar
    int64_t shape[TRIT_MAX_DIMS];
    int64_t strides[TRIT_MAX_DIMS];  // in elements; 0 on broadcast dims
    void *data;                      // storage base; element (i0..) is at data + offset + sum(i*stride)
    int64_t offset;                  // in elements
    struct trit_tensor *grad;        // same shape, contiguous, f32/f64; set for parameters
    uint32_t flags;
    char name[TRIT_NAME_MAX];
    trit_quant_info *quant;          // see trit_quant_info; owned when TRIT_FLAG_OWNS_QUANT
    int32_t graph_value;             // index of this tensor in the graph that made it, else -1
    void *graph;                     // the graph that made it, else NULL
} trit_tensor;

// A new contiguous zeroed tensor that owns its data. shape may be NULL when ndim == 0.
trit_tensor *trit_tensor_new(trit_dtype dt, int ndim, const int64_t *shape);
// A tensor over caller-owned contiguous data (not freed by trit_tensor_free).
trit_tensor *trit_tensor_wrap(trit_dtype dt, int ndim, const int64_t *shape, void *data);
// A new zeroed trainable parameter (TRIT_FLAG_PARAM) with a name (may be NULL).
trit_tensor *trit_tensor_new_param(trit_dtype dt, int ndim, const int64_t *shape, const char *name);
void trit_tensor_free(trit_tensor *t);  // frees owned data and the grad tensor
// Moves t's own data (trit_tensor_nbytes of it) to caller memory dst, which t then uses and no
// longer frees (several tensors' data gathered into one block the caller keeps).
trit_status trit_tensor_move_data(trit_tensor *t, void *dst);
// A TRIT_FLAG_MAPPED tensor's whole pages dropped from the process (the file keeps the values; the
// next read maps them again); nothing for any other tensor, whose pages are its only copy.
void trit_tensor_drop_pages(const trit_tensor *t);
trit_status trit_tensor_set_name(trit_tensor *t, const char *name);

// Fill a plain struct with a contiguous layout of `shape` (no data); checks dims and overflow.
trit_status trit_tensor_init_layout(trit_tensor *t, trit_dtype dt, int ndim, const int64_t *shape);

int64_t trit_tensor_numel(const trit_tensor *t);
size_t trit_tensor_nbytes(const trit_tensor *t);  // whole blocks x bytes per block
// Hands q to t (freed with it, or at once if this fails): q must describe t's element count.
trit_status trit_tensor_set_quant(trit_tensor *t, trit_quant_info *q);
bool trit_tensor_is_contiguous(const trit_tensor *t);
bool trit_tensor_same_shape(const trit_tensor *a, const trit_tensor *b);
// Pointer to the first element (data + offset).
void *trit_tensor_ptr(const trit_tensor *t);
// "(2, 3, 4)" into buf; returns buf.
const char *trit_tensor_shape_str(const trit_tensor *t, char *buf, size_t n);

// Views: `out` receives a tensor struct sharing t's storage (no allocation, no ownership).
// -1 in one reshape dim is inferred. Reshape fails when the strides cannot express it.
trit_status trit_tensor_view_reshape(const trit_tensor *t, int ndim, const int64_t *shape, trit_tensor *out);
trit_status trit_tensor_view_permute(const trit_tensor *t, const int *perm, trit_tensor *out);
trit_status trit_tensor_view_transpose(const trit_tensor *t, int d0, int d1, trit_tensor *out);
// Elements start, start+step, ... < stop along dim (step >= 1). Negative start/stop count from the end.
trit_status trit_tensor_view_slice(const trit_tensor *t, int dim, int64_t start, int64_t stop,
                                   int64_t step, trit_tensor *out);
// Broadcast size-1 dims (and new leading dims) to `shape` with stride 0.
trit_status trit_tensor_view_expand(const trit_tensor *t, int ndim, const int64_t *shape, trit_tensor *out);

// Element-wise copy between any layouts of equal shape (dtypes may differ: values are converted;
// into a blocked dtype, each block is encoded once from all its values, as the dtype table does).
trit_status trit_tensor_copy(trit_tensor *dst, const trit_tensor *src);
// A new owning contiguous copy.
trit_tensor *trit_tensor_contiguous(const trit_tensor *t);

// Element access by index (slow; for tests, tools and setup code).
double trit_tensor_get(const trit_tensor *t, const int64_t *idx);
void trit_tensor_set(trit_tensor *t, const int64_t *idx, double v);
// Element access by flat logical (row-major) index, whatever the strides.
double trit_tensor_get_flat(const trit_tensor *t, int64_t i);
void trit_tensor_set_flat(trit_tensor *t, int64_t i, double v);

trit_status trit_tensor_fill(trit_tensor *t, double v);
// Reproducible fills keyed by (seed, stream); independent of threads.
trit_status trit_tensor_fill_normal(trit_tensor *t, double mean, double std, uint64_t seed, uint64_t stream);
trit_status trit_tensor_fill_uniform(trit_tensor *t, double lo, double hi, uint64_t seed, uint64_t stream);

// ---- flat storage ------------------------------------------------------------------------------
// Tensors laid out in one block per dtype, in a given order, each 64-byte aligned, and their
// gradients in one block in the same order, so gradient exchange, sharding, clipping and
// checkpoints walk one array.
typedef struct trit_flat trit_flat;
// Moves each tensor's values into its dtype's block and makes the tensor a view of it (owned data
// freed; a tensor without data gets its place, zeroed). The tensors stay the caller's; they must
// outlive the store or be freed first.
trit_flat *trit_flat_new(trit_tensor *const *tensors, int n);
// Zeroed gradients of dtype dt (f32 or f64) for every parameter that is not frozen, in one block
// in the layout order, each tensor's grad a view into it. Does nothing when already attached.
trit_status trit_flat_attach_grads(trit_flat *f, trit_dtype dt);
void trit_flat_free(trit_flat *f);
// The block of dtype dt and its size in bytes (NULL, 0 when no tensor has that dtype).
void *trit_flat_block(const trit_flat *f, trit_dtype dt, size_t *bytes);
// The gradient block and its element count, padding included (NULL before attach).
void *trit_flat_grads(const trit_flat *f, int64_t *count);
int trit_flat_count(const trit_flat *f);
trit_tensor *trit_flat_tensor(const trit_flat *f, int i);  // in layout order
// Element offset of tensor i's gradient in the gradient block; -1 when it has none.
int64_t trit_flat_grad_offset(const trit_flat *f, int i);

// Broadcast shape of a and b (numpy rules) into shape/ndim; error names both shapes.
trit_status trit_broadcast_shape(const trit_tensor *a, const trit_tensor *b, int *ndim, int64_t *shape);

#ifdef __cplusplus
}
#endif
#endif
