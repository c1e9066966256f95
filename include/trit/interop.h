// Other programs' GPT-2 files: Hugging Face transformers' GPT-2 directories (config.json and
// safetensors, one file or shards with an index) and llm.c's model and tokenizer files.
// The readers (src/io) know the formats and nothing of trit's model; the import and export
// functions (src/train) map them onto a trit_gpt. Every reader checks sizes, names and shapes
// before it trusts them; every writer leaves either nothing or complete files.
#ifndef TRIT_INTEROP_H
#define TRIT_INTEROP_H

#include "trit/io.h"
#include "trit/nn.h"
#include "trit/quant.h"

#ifdef __cplusplus
extern "C" {
#endif

// ---- Hugging Face GPT-2 (src/io/hf_gpt2.c) -------------------------------------------------

// The fields of a GPT2Config that decide the forward pass trit computes.
typedef struct trit_hf_gpt2_config {
    int64_t n_layer, n_head, n_embd, n_positions, vocab_size;
    int64_t n_inner;           // MLP width; 0 when the config has none (null): 4 n_embd
    double layer_norm_epsilon; // 1e-5 in GPT-2
    bool tie_word_embeddings;  // true unless the config says false
} trit_hf_gpt2_config;

// Parses a config.json text (len bytes). Refuses what trit cannot compute exactly: a model_type
// other than gpt2, an activation other than GPT-2's tanh GELU (gelu_new, gelu_pytorch_tanh,
// gelu_fast), scale_attn_by_inverse_layer_idx, reorder_and_upcast_attn, cross-attention,
// scale_attn_weights false. `where` names the file in messages.
trit_status trit_hf_gpt2_parse_config(const char *json, size_t len, const char *where, trit_hf_gpt2_config *out);

// An open GPT-2 directory: config.json and model.safetensors, or the shards that
// model.safetensors.index.json lists. Tensor names are taken without the "transformer." prefix
// ("h.0.attn.c_attn.weight"); the attention mask buffers (attn.bias, attn.masked_bias) are
// left out. A directory with only pytorch_model.bin is refused with how to convert it.
typedef struct trit_hf_gpt2 trit_hf_gpt2;
trit_hf_gpt2 *trit_hf_gpt2_open(const char *dir);
void trit_hf_gpt2_close(trit_hf_gpt2 *h);
const trit_hf_gpt2_config *trit_hf_gpt2_config_of(const trit_hf_gpt2 *h);
int64_t trit_hf_gpt2_count(const trit_hf_gpt2 *h);
const char *trit_hf_gpt2_name(const trit_hf_gpt2 *h, int64_t i);  // short name, NULL out of range
bool trit_hf_gpt2_has(const trit_hf_gpt2 *h, const char *name);
// The stored dtype, shape and size of tensor `name` (NULL when absent).
const trit_safetensors_info *trit_hf_gpt2_info(const trit_hf_gpt2 *h, const char *name);
// Whether a short name is one of GPT-2's Conv1D weights, stored (in, out).
bool trit_hf_gpt2_is_conv1d(const char *name);
// Tensor `name` into dst, a float tensor in trit's layout ((out, in) for a Conv1D weight, whose
// (in, out) storage is transposed on the way); F32, F16 and BF16 are read and converted.
trit_status trit_hf_gpt2_load(const trit_hf_gpt2 *h, const char *name, trit_tensor *dst);
// What trit_hf_gpt2_load checks before it reads (the tensor is there, with dst's shape in the
// file's layout, in a float dtype), without reading.
trit_status trit_hf_gpt2_check(const trit_hf_gpt2 *h, const char *name, const trit_tensor *dst);

// ---- llm.c's files (src/io/llmc.c) ---------------------------------------------------------
// Model: 256 little-endian int32 [magic 20240326, version (3: fp32, 5: bf16), maxT, V, L, H, C,
// Vp], then the parameters in llm.c's order, each kind for all layers at once:
//   wte (Vp, C)  wpe (maxT, C)  ln1w (L, C)  ln1b (L, C)  qkvw (L, 3C, C)  qkvb (L, 3C)
//   attprojw (L, C, C)  attprojb (L, C)  ln2w (L, C)  ln2b (L, C)  fcw (L, 4C, C)  fcb (L, 4C)
//   fcprojw (L, C, 4C)  fcprojb (L, C)  lnfw (C)  lnfb (C)
// Rows V..Vp of wte are padding (zeros when written by llm.c or trit).
// Tokenizer: 256 int32 [magic 20240328, version (1, or 2 with the end-of-text id), n, eot], then
// n tokens, each a length byte (1..255) and its bytes.

#define TRIT_LLMC_MODEL_MAGIC 20240326
#define TRIT_LLMC_TOKENIZER_MAGIC 20240328
#define TRIT_LLMC_HEADER_BYTES 1024
enum { TRIT_LLMC_NUM_KINDS = 16 };

typedef struct trit_llmc_header {
    int32_t version;  // 3 (fp32) or 5 (bf16)
    int32_t max_T, V, L, H, C, Vp;
} trit_llmc_header;

// Elements of each of the 16 parameter kinds (all layers), in file order.
void trit_llmc_kind_sizes(const trit_llmc_header *h, int64_t sizes[TRIT_LLMC_NUM_KINDS]);
int64_t trit_llmc_num_params(const trit_llmc_header *h);

// An open model file: the header is checked (magic, version, sizes >= 1, C % H == 0, V <= Vp)
// and the file's length must be exactly header + parameters.
typedef struct trit_llmc_file trit_llmc_file;
trit_llmc_file *trit_llmc_open(const char *path, trit_llmc_header *h);
void trit_llmc_close(trit_llmc_file *f);
// n elements from element offset `first` of the parameter array, as f32 (bf16 widened exactly).
trit_status trit_llmc_read(const trit_llmc_file *f, int64_t first, int64_t n, float *out /* (n) */);
// The 1024-byte header of h (magic and unused words filled in).
void trit_llmc_header_encode(const trit_llmc_header *h, uint8_t out[TRIT_LLMC_HEADER_BYTES]);
// Checks a header's fields (not the magic); the message names the bad one.
trit_status trit_llmc_header_check(const trit_llmc_header *h, const char *where);

// A tokenizer file as a table of token byte strings.
typedef struct trit_llmc_vocab {
    int32_t n, eot;   // eot: -1 in a version 1 file (which llm.c reads as 50256)
    uint8_t **bytes;  // (n) token i's bytes
    uint8_t *len;     // (n) their lengths, 1..255
} trit_llmc_vocab;
trit_status trit_llmc_vocab_read(const char *path, trit_llmc_vocab *out);
void trit_llmc_vocab_free(trit_llmc_vocab *v);
// tok's tokens as a version 2 file with end-of-text id eot (0 <= eot < vocab), atomically.
// Fails on a token of 0 or more than 255 bytes, which the format cannot hold.
trit_status trit_llmc_vocab_write(const trit_tokenizer *tok, int32_t eot, const char *path);

// ---- import and export (src/train/interop_hf.c, src/train/interop_llmc.c) ------------------

// A trit GPT with the weights of a Hugging Face GPT-2 directory, checked against its config:
// every tensor present with its shape, nothing unexpected; an untied lm_head.weight that
// differs from the token embedding is refused (trit's head is the embedding).
trit_gpt *trit_import_hf_gpt2(const char *dir);
// The same with the block matrices (c_attn, c_proj, c_fc of each block) quantized with spec as
// they are read, one f32 matrix at a time, and kept only as codes (trit_gpt_quantize_read: the
// codes of trit_gpt_quantize over the model loaded whole); spec NULL: trit_import_hf_gpt2.
trit_gpt *trit_import_hf_gpt2_quantizing(const char *dir, const trit_quant_spec *spec);
// The same checks, but the model's float tensors get no values (their shapes and dtypes checked,
// nothing read; spec's matrices read as codes): the layout of a base whose values
// trit_import_hf_gpt2_read_values reads later straight into another model. A directory with an
// lm_head.weight (compared with the embedding) loads as trit_import_hf_gpt2_quantizing loads it.
trit_gpt *trit_import_hf_gpt2_layout(const char *dir, const trit_quant_spec *spec);
// dst's tensors that have values where layout (from trit_import_hf_gpt2_layout on dir, the same
// names first) has neither values nor codes, read from dir's weights.
trit_status trit_import_hf_gpt2_read_values(const char *dir, trit_gpt *dst, const trit_gpt *layout);
// Writes dir (which must not exist, or be empty) with config.json and model.safetensors (fp32,
// Conv1D layout, "transformer." names) that transformers' GPT2LMHeadModel loads; a GPT-2
// shaped model only (LayerNorm, GELU, learned positions, biases, no SubLN). The directory is
// made beside dir under a temporary name and renamed into place when complete.
trit_status trit_export_hf_gpt2(const trit_gpt *m, const char *dir);
// The same with GPT-2's tokenizer files beside the model in the same staged write
// (trit_tokenizer_save_gpt2_hf): tok must be a GPT-2 tokenizer of the model's vocabulary size
// (NULL: the model only); config.json's bos/eos_token_id are then its <|endoftext|> (null if it
// has none) rather than guessed from the vocabulary's size.
trit_status trit_export_hf_gpt2_with(const trit_gpt *m, const trit_tokenizer *tok, const char *dir);
// The same two files written (each atomically) into the existing directory dir: for a caller
// that puts more beside them (the tokenizer's files) in a directory of its own staging.
trit_status trit_export_hf_gpt2_into(const trit_gpt *m, const char *dir);

// A trit GPT from a GGUF of llama.cpp's gpt2 architecture (src/train/import_gguf.c): f32, f16,
// q8_0, q4_0, tq1_0 and tq2_0 tensors decoded by the dtype table into the parameters; a tied
// head only. tok (or NULL): the tokenizer of its tokenizer.ggml.* keys (trit_tokenizer_from_gguf),
// NULL when it has none. trit's own export reads back as the model it wrote (its extra
// end-of-text token dropped).
trit_gpt *trit_import_gguf(const char *path, trit_tokenizer **tok);
// The same with a float file's block matrices quantized with spec as they are read
// (trit_gpt_quantize_read) and kept only as codes; a file with a matrix in a block type keeps
// its own codes and ignores spec. *made (may be NULL) tells whether spec was applied.
trit_gpt *trit_import_gguf_quantizing(const char *path, const trit_quant_spec *spec, trit_tokenizer **tok, bool *made);
// The same, but its float tensors get no values (dims checked, nothing read): the layout of a base
// whose values trit_import_gguf_read_values reads later straight into another model (dst's
// tensors with values where layout has neither values nor codes; the same names first).
trit_gpt *trit_import_gguf_layout(const char *path, const trit_quant_spec *spec, trit_tokenizer **tok, bool *made);
trit_status trit_import_gguf_read_values(const char *path, trit_gpt *dst, const trit_gpt *layout);
// A trit GPT from an llm.c model file (fp32 or bf16; the padded vocabulary rows dropped).
trit_gpt *trit_import_llmc(const char *path);
// A trit tokenizer with the table's tokens, when trit has a kind that encodes with exactly those
// ids: a table of distinct single bytes in increasing order is a character-level tokenizer. A
// table of multi-byte tokens lists no merges to encode with, and is refused with that message.
trit_tokenizer *trit_tokenizer_from_llmc(const trit_llmc_vocab *v);
// m as an llm.c model file of `version` 3 (fp32) or 5 (bf16, rounded to nearest even), the
// vocabulary padded with zero rows to a multiple of 128, atomically. GPT-2 shaped models only,
// MLP width 4C.
trit_status trit_export_llmc(const trit_gpt *m, int version, const char *path);

// Makes dir's parent-side staging directory "<dir>.tmp.<pid>" (dir must not exist or be empty):
// files are written there and trit_stage_commit renames it over dir; trit_stage_abort removes it.
trit_status trit_stage_open(const char *dir, char *stage, size_t n);
trit_status trit_stage_commit(const char *stage, const char *dir);
void trit_stage_abort(const char *stage);

#ifdef __cplusplus
}
#endif
#endif
