// trit file I/O: whole-file reads, atomic writes (temp file, fsync, rename, fsync directory),
// token shards in the llm.c layout, and safetensors. Every reader validates sizes, magic numbers
// and offsets before trusting them; every writer leaves either the old file or the complete new
// one, never a half-written file.
#ifndef TRIT_IO_H
#define TRIT_IO_H

#include "trit/tensor.h"
#include "trit/tokenizer.h"

#ifdef __cplusplus
extern "C" {
#endif

// ---- whole files and atomic writes ---------------------------------------------------------

// Read a whole file into a malloc'ed buffer of *len bytes plus one terminating NUL (not counted).
trit_status trit_file_read_all(const char *path, uint8_t **data, size_t *len);
// Copies a whole file, written atomically.
trit_status trit_file_copy(const char *src, const char *dst);

// An atomic writer: bytes go to "<path>.tmp.<pid>"; commit flushes, fsyncs, renames the temp file
// over `path` and fsyncs the directory. The first failure is remembered, later writes do nothing,
// and commit then removes the temp file and returns that failure. abort removes the temp file.
typedef struct trit_atomic_file {
    void *fp;          // FILE* of the temp file, NULL once committed or aborted
    char *path;        // target path
    char *tmp_path;    // temp path beside it (same directory, so rename is atomic)
    trit_status status; // first failure, TRIT_OK while all is well
} trit_atomic_file;

trit_status trit_atomic_open(trit_atomic_file *f, const char *path);
trit_status trit_atomic_write(trit_atomic_file *f, const void *data, size_t n);
trit_status trit_atomic_commit(trit_atomic_file *f);
void trit_atomic_abort(trit_atomic_file *f);
// One-shot: write `n` bytes to `path` atomically.
trit_status trit_file_write_atomic(const char *path, const void *data, size_t n);

// ---- token shards (llm.c layout) -------------------------------------------------------------
// 1024-byte header of 256 little-endian int32: [0] magic 20240520, [1] version 1, [2] token
// count; then count uint16 tokens. So token ids must be < 65536.

#define TRIT_SHARD_MAGIC 20240520
#define TRIT_SHARD_VERSION 1
#define TRIT_SHARD_HEADER_BYTES 1024
#define TRIT_SHARD_MAX_VOCAB 65536
#define TRIT_DEFAULT_VAL_FRACTION 0.1

// Write n tokens (each in [0, 65535], n <= INT32_MAX) atomically.
trit_status trit_shard_write(const char *path, const int32_t *tokens, int64_t n);
// Read a shard: checks magic, version and that the count matches the file size exactly.
// *tokens is malloc'ed (free()), never NULL on success even when *n == 0.
trit_status trit_shard_read(const char *path, uint16_t **tokens, int64_t *n);
// Validate the header only and report the token count (cheap, for data loaders).
trit_status trit_shard_read_count(const char *path, int64_t *n);

// Tokenize the text file at `text_path` and write the first (1 - val_fraction) of the tokens to
// `train_path` and the rest to `val_path` (split at a token boundary). val_fraction in [0, 1);
// with 0, val_path may be NULL and no validation shard is written. The tokenizer's vocabulary
// must fit uint16. Counts are returned through n_train / n_val when not NULL.
trit_status trit_shards_prepare(const trit_tokenizer *tok, const char *text_path,
                                const char *train_path, const char *val_path, double val_fraction,
                                int64_t *n_train, int64_t *n_val);

// ---- safetensors -----------------------------------------------------------------------------
// 8-byte little-endian header length N, N bytes of JSON
// {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ...,
//  "__metadata__": {"key": "value"}}, then the data (offsets are relative to its start).

typedef struct trit_safetensors trit_safetensors;

typedef struct trit_safetensors_info {
    const char *name;       // owned by the open file
    const char *dtype_name; // as written in the file ("F32", "BOOL", ...)
    trit_dtype dtype;       // TRIT_DTYPE_COUNT when trit has no such dtype (listable, not loadable)
    int ndim;
    int64_t shape[TRIT_MAX_DIMS];
    int64_t begin, end;     // byte offsets into the data section
} trit_safetensors_info;

// A tensor to write under `name` (any layout; non-contiguous tensors are copied first).
typedef struct trit_safetensors_entry {
    const char *name;
    const trit_tensor *tensor;
} trit_safetensors_entry;

typedef struct trit_safetensors_kv {
    const char *key;
    const char *value;
} trit_safetensors_kv;

// Write tensors (in the given order) and string metadata (may be NULL when n_meta == 0) atomically.
trit_status trit_safetensors_write(const char *path, const trit_safetensors_entry *entries, int64_t n,
                                   const trit_safetensors_kv *meta, int64_t n_meta);

// Open and validate a file: header length against the file size, JSON, dtypes, shapes, offsets
// (inside the data, consistent with dtype * shape, no overlap, no holes). NULL on any problem.
trit_safetensors *trit_safetensors_open(const char *path);
void trit_safetensors_close(trit_safetensors *f);
int64_t trit_safetensors_count(const trit_safetensors *f);
const trit_safetensors_info *trit_safetensors_at(const trit_safetensors *f, int64_t i); // file order
const trit_safetensors_info *trit_safetensors_find(const trit_safetensors *f, const char *name);
// Read tensor `name` into `dst` (any layout) after checking that the shape matches exactly and
// the dtype too, except that float dtypes convert (bf16/f16 -> f32 exactly; to bf16/f16 rounded
// to nearest even).
trit_status trit_safetensors_load(const trit_safetensors *f, const char *name, trit_tensor *dst);
// Metadata: value for key (NULL if absent), or the i-th pair.
const char *trit_safetensors_meta(const trit_safetensors *f, const char *key);
int64_t trit_safetensors_meta_count(const trit_safetensors *f);
trit_status trit_safetensors_meta_at(const trit_safetensors *f, int64_t i, const char **key,
                                     const char **value);

// Like trit_safetensors_write, but a quantized tensor (a dtype with side scales: qint8/4/2, nf4,
// fp8 with scales) is stored as its packed codes plus <name>.scales (or .qscales and .scales2
// when double-quantized) and <name>.zero_points, and described in the metadata entry
// "quantization" (a JSON object: dtype, shape, group_size, scheme, double_quant_block,
// scales_mean per tensor; see docs/ARCHITECTURE.md).
trit_status trit_safetensors_write_quantized(const char *path, const trit_safetensors_entry *entries, int64_t n,
                                             const trit_safetensors_kv *meta, int64_t n_meta);
// The quantization map against the file's tensors, both ways: each entry is well formed and its
// codes and side tensors are in the file with the dtype and length it implies; each tensor named
// like a side tensor of a listed one (<name>.scales, .qscales, .scales2, .zero_points) is one its
// entry calls for. TRIT_OK for a file without a map; TRIT_ERR_FORMAT naming the first disagreement.
trit_status trit_safetensors_check_quantized(const trit_safetensors *f);
// Whether the file's quantization map lists `name`.
bool trit_safetensors_is_quantized(const trit_safetensors *f, const char *name);
// A new tensor holding `name`: quantized with its scales (the packed bytes as written) when the
// quantization map lists it, else in its stored dtype. NULL with trit_last_error set on failure.
trit_tensor *trit_safetensors_read_tensor(const trit_safetensors *f, const char *name);

// ---- GGUF (llama.cpp's model format) writer ---------------------------------------------
// Key-values and tensors are added in file order; tensor data is referenced, not copied, and
// must stay valid until trit_gguf_write, which writes the whole file atomically (alignment 32).
typedef struct trit_gguf trit_gguf;
enum { TRIT_GGML_F32 = 0, TRIT_GGML_F16 = 1, TRIT_GGML_Q4_0 = 2, TRIT_GGML_Q8_0 = 8, TRIT_GGML_TQ1_0 = 34, TRIT_GGML_TQ2_0 = 35 };
trit_gguf *trit_gguf_new(void);
void trit_gguf_free(trit_gguf *g);
void trit_gguf_kv_u32(trit_gguf *g, const char *key, uint32_t v);
void trit_gguf_kv_f32(trit_gguf *g, const char *key, float v);
void trit_gguf_kv_str(trit_gguf *g, const char *key, const char *v);
void trit_gguf_kv_strs(trit_gguf *g, const char *key, const char *const *v, const size_t *len, uint64_t n);
void trit_gguf_kv_i32s(trit_gguf *g, const char *key, const int32_t *v, uint64_t n);
// ne: dims innermost first (ggml's order: an (out, in) row-major matrix is {in, out}).
trit_status trit_gguf_add_tensor(trit_gguf *g, const char *name, uint32_t ggml_type, int ndim, const uint64_t *ne,
                                 const void *data, size_t nbytes);
trit_status trit_gguf_write(const trit_gguf *g, const char *path);

// ---- GGUF reader (src/io/gguf_read.c) -----------------------------------------------------
// A GGUF v2/v3 file checked whole on open: every count and length within the file, every
// tensor of a type trit reads (f32, f16, q4_0, q8_0, tq1_0, tq2_0) with its data, aligned,
// inside the file. Values are read through the key's name; nested arrays are refused.
typedef struct trit_gguf_file trit_gguf_file;
typedef struct trit_gguf_tensor {
    const char *name;
    uint32_t type;       // TRIT_GGML_*
    int ndim;
    uint64_t ne[4];      // innermost first
    const uint8_t *data; // nbytes of the file's bytes
    size_t nbytes;
} trit_gguf_tensor;
// `name` names the buffer in messages; data must outlive the handle.
trit_gguf_file *trit_gguf_parse(const uint8_t *data, size_t n, const char *name);
trit_gguf_file *trit_gguf_open(const char *path);  // maps the file read-only; owns the mapping
// Lets the resident pages of t's bytes go (a file opened by path; otherwise nothing): a reader
// done with a tensor keeps no copy of it in memory. Its bytes stay readable (read from the file
// again).
void trit_gguf_release(const trit_gguf_file *f, const trit_gguf_tensor *t);
void trit_gguf_close(trit_gguf_file *f);
// A string, u32 (any unsigned or non-negative signed integer that fits) or f32 value; a missing
// key or another type is TRIT_ERR_FORMAT with a message naming the key.
trit_status trit_gguf_get_str(const trit_gguf_file *f, const char *key, const char **s, size_t *n);
trit_status trit_gguf_get_u32(const trit_gguf_file *f, const char *key, uint32_t *v);
trit_status trit_gguf_get_f32(const trit_gguf_file *f, const char *key, float *v);
bool trit_gguf_has(const trit_gguf_file *f, const char *key);
// An array of strings or of i32: its length, then item i.
trit_status trit_gguf_get_arr(const trit_gguf_file *f, const char *key, uint32_t item_type, uint64_t *n);
void trit_gguf_arr_str(const trit_gguf_file *f, const char *key, uint64_t i, const char **s, size_t *n);
int32_t trit_gguf_arr_i32(const trit_gguf_file *f, const char *key, uint64_t i);
int64_t trit_gguf_num_tensors(const trit_gguf_file *f);
const trit_gguf_tensor *trit_gguf_tensor_at(const trit_gguf_file *f, int64_t i);
const trit_gguf_tensor *trit_gguf_find_tensor(const trit_gguf_file *f, const char *name);  // or NULL
enum { TRIT_GGUF_TYPE_I32 = 5, TRIT_GGUF_TYPE_STRING = 8 };
// The tokenizer of the first V tokens of f's tokenizer.ggml.* keys (src/io/tokenizer_gguf.c):
// a character table or trit's BPE when the vocabulary is one, else GPT-2's byte-level BPE. *tok
// stays NULL (TRIT_OK) for trit's export of a model without a tokenizer (placeholder tokens).
trit_status trit_tokenizer_from_gguf(const trit_gguf_file *f, int32_t V, trit_tokenizer **tok);

// "F32" etc. for a trit dtype; dtype by safetensors name (TRIT_DTYPE_COUNT if trit lacks it).
const char *trit_safetensors_dtype_name(trit_dtype dt);
trit_dtype trit_safetensors_dtype_from_name(const char *name);

// ---- TensorBoard event files --------------------------------------------------------------
// TensorBoard reads a directory of files named events.out.tfevents.<seconds>.<host>...: TFRecord
// records (u64 length, u32 masked CRC-32C of the length, the bytes, u32 masked CRC-32C of the
// bytes; all little-endian), each a serialized tensorflow.Event protobuf. The first record is
// Event{wall_time, file_version: "brain.Event:2"}; each later one here is Event{wall_time, step,
// summary: Summary{value: [Value{tag, simple_value}, ...]}}, the subset trit writes, encoded
// by hand (fields in number order, zero-valued non-oneof fields left out, as protobuf does).

// CRC-32C (Castagnoli, reflected 0x82F63B78); crc = 0 to start, or a previous result to go on.
uint32_t trit_crc32c(uint32_t crc, const void *data, size_t n);
// TFRecord's mask of a CRC: ((crc >> 15) | (crc << 17)) + 0xa282ead8.
uint32_t trit_tfrecord_mask(uint32_t crc);
// The record of n bytes into out (n + 16 bytes).
void trit_tfrecord_frame(uint8_t *out, const void *data, size_t n);
// Checks one record at buf (len bytes available): both CRCs and the size. *data and *n receive
// the payload, *used the record's bytes. TRIT_ERR_FORMAT with a message naming the bad part.
trit_status trit_tfrecord_read(const uint8_t *buf, size_t len, const uint8_t **data, size_t *n, size_t *used);

typedef struct trit_tb_scalar {
    const char *tag;
    float value;
} trit_tb_scalar;

typedef enum trit_tb_event_kind {
    TRIT_TB_SCALARS = 0,       // Event{wall_time, step, summary{value[n]}}
    TRIT_TB_FILE_VERSION = 1,  // Event{wall_time, file_version: "brain.Event:2"}, a file's first
    TRIT_TB_START = 2,         // Event{wall_time, step, session_log{status: START}}: a restart at
                               // `step`; readers drop what earlier files logged at steps >= step
} trit_tb_event_kind;

// The Event protobuf into buf: writes at most cap bytes (buf may be NULL with cap 0) and returns
// the full length, like snprintf; 0 when n is outside [1, 64] for scalars or a tag is longer
// than 4096 bytes.
size_t trit_tb_encode_event(uint8_t *buf, size_t cap, trit_tb_event_kind kind, double wall_time, int64_t step,
                            const trit_tb_scalar *v, int n);

typedef struct trit_tb_writer trit_tb_writer;
// A new event file in the existing directory dir, named events.out.tfevents.<wall_time
// seconds>.<host>.<pid>.trit, starting with the file-version event. NULL with a message.
trit_tb_writer *trit_tb_open(const char *dir, double wall_time);
// One event of n scalars (1 to 64), flushed to the file.
trit_status trit_tb_write_scalars(trit_tb_writer *w, double wall_time, int64_t step, const trit_tb_scalar *v, int n);
// A restart at `step` (TRIT_TB_START): a resumed run writes it first.
trit_status trit_tb_write_start(trit_tb_writer *w, double wall_time, int64_t step);
// The file's path (valid while w lives).
const char *trit_tb_path(const trit_tb_writer *w);
// Closes the file; the status of the final flush. NULL does nothing.
trit_status trit_tb_close(trit_tb_writer *w);

#ifdef __cplusplus
}
#endif
#endif
