// The model a fine-tune or an --init-from run starts from, found from one path: what kind of base
// it is, then that kind's reader. Each reader gives the model as trained and its tokenizer. Kinds:
//   run   a trit run directory (model.safetensors + tokenizer.bin, `trit train` or `trit quantize`)
//   hf    a Hugging Face GPT-2 directory (config.json + model.safetensors) with GPT-2's tokenizer
//         files (vocab.json + merges.txt or tokenizer.json); without them it is refused
//   gguf  a GGUF of llama.cpp's gpt2 architecture with its tokenizer.ggml.* vocabulary
//         (trit_import_gguf); one without a tokenizer (placeholder tokens) is refused
#include "trit/interop.h"
#include "trit/io.h"
#include "trit/train.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

static bool has_file(const char *dir, const char *name) {
    char path[TRIT_PATH_MAX + 64];
    struct stat st;
    return trit_path_join(path, sizeof path, dir, name) == TRIT_OK && stat(path, &st) == 0;
}

static bool gguf_magic(const char *path) {
    FILE *fp = fopen(path, "rb");
    char magic[4] = {0};
    const bool ok = fp && fread(magic, 1, 4, fp) == 4 && memcmp(magic, "GGUF", 4) == 0;
    if (fp) fclose(fp);
    return ok;
}

const char *trit_base_kind_name(trit_base_kind k) {
    switch (k) {
    case TRIT_BASE_RUN: return "trit run";
    case TRIT_BASE_HF: return "Hugging Face directory";
    case TRIT_BASE_GGUF: return "GGUF file";
    }
    return "(unknown)";
}

trit_status trit_base_probe(const char *path, trit_base_kind *kind) {
    struct stat st;
    if (!path || !*path) return trit_error(TRIT_ERR_INVALID, "no base given: pass a trit run directory");
    if (stat(path, &st) != 0)
        return trit_error(TRIT_ERR_IO, "cannot start from '%s': no such directory (pass a run directory written by "
                          "`trit train` or `trit quantize`)", path);
    if (!S_ISDIR(st.st_mode)) {
        if (gguf_magic(path)) return *kind = TRIT_BASE_GGUF, TRIT_OK;
        return trit_error(TRIT_ERR_INVALID, "a base is a run directory (with %s and %s), but '%s' is a file",
                          TRIT_CKPT_MODEL, TRIT_CKPT_TOKENIZER, path);
    }
    if (has_file(path, "config.json") && !has_file(path, TRIT_CKPT_TOKENIZER)) return *kind = TRIT_BASE_HF, TRIT_OK;
    for (const char *const *f = (const char *const[]){TRIT_CKPT_MODEL, TRIT_CKPT_TOKENIZER, NULL}; *f; f++)
        if (!has_file(path, *f))
            return trit_error(TRIT_ERR_IO, "'%s' has no %s: pass a run directory written by `trit train` or "
                              "`trit quantize`", path, *f);
    *kind = TRIT_BASE_RUN;
    return TRIT_OK;
}

static bool trained_qat(const char *path) {
    trit_train_config qc;
    const bool qat = trit_train_run_config(path, &qc) == TRIT_OK && qc.qat != TRIT_QAT_OFF;
    trit_clear_error();
    return qat;
}

static trit_status load_run(const char *path, const trit_quant_spec *spec, bool layout, trit_base *b) {
    char tok[TRIT_PATH_MAX + 32];
    trit_status s = trit_path_join(tok, sizeof tok, path, TRIT_CKPT_TOKENIZER);
    if (s != TRIT_OK) return s;
    if (!(b->tok = trit_tokenizer_load(tok))) return TRIT_ERR_FORMAT;
    // A quantized run's codes are taken as codes: the new model attaches or decodes them, so
    // no f32 copy of the base is made for a QLoRA run. A --qat run's latent weights are frozen.
    // With spec (QLoRA), float block matrices become codes as they are read, one at a time.
    // With layout, no float values are read here (a --qat run's are quantized with its rule first).
    b->values_deferred = layout && !trained_qat(path);
    b->model = b->values_deferred ? trit_checkpoint_load_layout(path, &b->step, spec, &b->quantized_on_load)
                                  : trit_checkpoint_load_base(path, &b->step, spec, &b->quantized_on_load);
    if (!b->model) return TRIT_ERR_FORMAT;
    const trit_gpt_config *g = trit_gpt_get_config(b->model);
    if (g->vocab_size != trit_tokenizer_vocab_size(b->tok))
        return trit_error(TRIT_ERR_FORMAT, "'%s': its model has a vocabulary of %lld tokens but its %s has %d: the "
                          "directory mixes two runs", path, (long long)g->vocab_size, TRIT_CKPT_TOKENIZER,
                          trit_tokenizer_vocab_size(b->tok));
    return TRIT_OK;
}

// Any one of the files: a half pair is then reported by the tokenizer reader, naming the other.
static bool has_gpt2_tokenizer(const char *dir) {
    for (const char *const *f = (const char *const[]){"vocab.json", "merges.txt", "tokenizer.json", "encoder.json",
                                                      "vocab.bpe", NULL}; *f; f++)
        if (has_file(dir, *f)) return true;
    return false;
}

// The model through the transformers reader, the tokenizer through GPT-2's; both must agree on
// the vocabulary, since the run made from them saves one beside the other.
static trit_status load_hf(const char *path, const trit_quant_spec *spec, bool layout, trit_base *b) {
    if (!has_gpt2_tokenizer(path))
        return trit_error(TRIT_ERR_INVALID, "'%s' is a Hugging Face directory without tokenizer files (vocab.json + "
                          "merges.txt or tokenizer.json), so it has no tokenizer to train with: add them, or make a "
                          "run of it first with `trit import hf %s --out RUN --tokenizer-file F`", path, path);
    b->model = layout ? trit_import_hf_gpt2_layout(path, spec) : trit_import_hf_gpt2_quantizing(path, spec);
    if (!b->model) return TRIT_ERR_FORMAT;
    b->quantized_on_load = spec != NULL;
    for (int i = 0; layout && i < trit_gpt_num_tensors(b->model); i++)  // an untied head was read whole
        b->values_deferred |= !trit_gpt_tensor(b->model, i)->data && !trit_gpt_quantized(b->model, i);
    if (!(b->tok = trit_tokenizer_load_gpt2(path))) return TRIT_ERR_FORMAT;
    const int64_t V = trit_gpt_get_config(b->model)->vocab_size;
    if (V != trit_tokenizer_vocab_size(b->tok))
        return trit_error(TRIT_ERR_FORMAT, "'%s': config.json's vocab_size is %lld but its tokenizer files have %d "
                          "tokens: trit trains a model whose vocabulary is its tokenizer's", path, (long long)V,
                          trit_tokenizer_vocab_size(b->tok));
    b->step = 0;
    return TRIT_OK;
}

// The model and tokenizer through `trit import gguf`'s reader; failures say what the file is.
static trit_status load_gguf(const char *path, const trit_quant_spec *spec, bool layout, trit_base *b) {
    b->model = layout ? trit_import_gguf_layout(path, spec, &b->tok, &b->quantized_on_load)
                      : trit_import_gguf_quantizing(path, spec, &b->tok, &b->quantized_on_load);
    for (int i = 0; layout && b->model && i < trit_gpt_num_tensors(b->model); i++)
        b->values_deferred |= !trit_gpt_tensor(b->model, i)->data && !trit_gpt_quantized(b->model, i);
    if (b->model && b->tok) return b->step = 0, TRIT_OK;
    if (b->model)
        return trit_error(TRIT_ERR_INVALID, "'%s' is a GGUF file without a tokenizer (its vocabulary is placeholder "
                          "tokens), so it has nothing to train with: make a run of it first with `trit import gguf %s "
                          "--out RUN --tokenizer-file F`", path, path);
    char why[768];
    snprintf(why, sizeof why, "%s", trit_last_error());
    return trit_error(TRIT_ERR_FORMAT, "'%s' is a GGUF file trit cannot start from: %s", path, why);
}

trit_status trit_base_load(const char *path, trit_base *b) { return trit_base_load_quantizing(path, NULL, b); }

static trit_status load(const char *path, const trit_quant_spec *spec, bool layout, trit_base *b) {
    memset(b, 0, sizeof *b);
    trit_status s = trit_base_probe(path, &b->kind);
    if (s != TRIT_OK) return s;
    switch (b->kind) {
    case TRIT_BASE_RUN: s = load_run(path, spec, layout, b); break;
    case TRIT_BASE_HF: s = load_hf(path, spec, layout, b); break;
    case TRIT_BASE_GGUF: s = load_gguf(path, spec, layout, b); break;
    }
    if (s != TRIT_OK) trit_base_free(b);
    return s;
}

trit_status trit_base_load_quantizing(const char *path, const trit_quant_spec *spec, trit_base *b) {
    return load(path, spec, false, b);
}

trit_status trit_base_load_layout(const char *path, const trit_quant_spec *spec, trit_base *b) {
    return load(path, spec, true, b);
}

trit_status trit_base_read_values(const char *path, const trit_base *b, trit_gpt *dst) {
    if (!b || !dst) return trit_error(TRIT_ERR_INVALID, "trit_base_read_values: NULL argument");
    if (!b->values_deferred) return TRIT_OK;
    // A run and a Hugging Face directory: the checkpoint reader tells them apart by config.json.
    return b->kind == TRIT_BASE_GGUF ? trit_import_gguf_read_values(path, dst, b->model)
                                     : trit_checkpoint_read_values(path, dst, b->model);
}

void trit_base_free(trit_base *b) {
    if (!b) return;
    trit_gpt_free(b->model);
    trit_tokenizer_free(b->tok);
    b->model = NULL;
    b->tok = NULL;
}
