// --init-from RUN: a new run that starts from RUN's weights as RUN was trained (a --qat or
// --ternary run's block matrices quantized with its rule, a `trit quantize` run's decoded
// values), with RUN's architecture and tokenizer and a fresh optimizer and schedule (step 0):
// the base of fine-tuning. RUN is read and checked before the run directory is made, so a bad
// RUN, or data tokenized another way, leaves nothing behind.
#include "trit/io.h"
#include "trit/train.h"
#include "train/trainer.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

// The message of the failure that just happened, prefixed with "--init-from 'RUN': ".
static trit_status init_error(const char *run, trit_status s) {
    char why[768];
    snprintf(why, sizeof why, "%s", trit_last_error());
    return trit_error(s, "--init-from '%s': %s", run, why);
}

// ---- the architecture ---------------------------------------------------------------------

// One architecture flag: RUN's value, and how a value of it reads in a sentence ("4 layers",
// "RMSNorm") and on the command line ("4", "rms").
typedef struct arch_flag {
    const char *flag;
    int64_t *field;
    int64_t run;
    const char *counted;            // numbers read "4 layers" ("layer")
    const char *named;              // or "width 128" ("width")
    const char *const *described;   // enums and switches, by value
    const char *const *names;       // their flag values
} arch_flag;

static const char *const bias_described[] = {"no biases", "biases"}, *const switch_names[] = {"0", "1"};
static const char *const norm_described[] = {"LayerNorm", "RMSNorm"}, *const norm_names[] = {"layer", "rms"};
static const char *const mlp_described[] = {"a GELU MLP", "a SwiGLU MLP"}, *const mlp_names[] = {"gelu", "swiglu"};
static const char *const pos_described[] = {"learned positions", "RoPE"}, *const pos_names[] = {"learned", "rope"};
static const char *const subln_described[] = {"no SubLN", "SubLN"};

static void describe(const arch_flag *a, int64_t v, char *buf, size_t n) {
    if (a->counted) snprintf(buf, n, "%lld %s%s", (long long)v, a->counted, v == 1 ? "" : "s");
    else if (a->named) snprintf(buf, n, "%s %lld", a->named, (long long)v);
    else snprintf(buf, n, "%s", v == 0 || v == 1 ? a->described[v] : "(invalid)");
}

static void flag_value(const arch_flag *a, int64_t v, char *buf, size_t n) {
    if (a->counted || a->named) snprintf(buf, n, "%lld", (long long)v);
    else snprintf(buf, n, "%s", v == 0 || v == 1 ? a->names[v] : "(invalid)");
}

// cfg's architecture flags from RUN's model config; a flag given with another value is an error.
static trit_status take_architecture(trit_train_config *cfg, const trit_gpt_config *g) {
    const arch_flag flags[] = {
        {"layers", &cfg->layers, g->n_layer, "layer", NULL, NULL, NULL},
        {"heads", &cfg->heads, g->n_head, "head", NULL, NULL, NULL},
        {"dim", &cfg->dim, g->n_embd, NULL, "width", NULL, NULL},
        {"seq", &cfg->seq, g->seq_len, NULL, "context", NULL, NULL},
        {"bias", &cfg->bias, g->bias, NULL, NULL, bias_described, switch_names},
        {"norm", &cfg->norm, g->norm, NULL, NULL, norm_described, norm_names},
        {"mlp", &cfg->mlp, g->mlp, NULL, NULL, mlp_described, mlp_names},
        {"pos", &cfg->pos, g->pos, NULL, NULL, pos_described, pos_names},
        {"subln", &cfg->subln, g->subln, NULL, NULL, subln_described, switch_names},
    };
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++) {
        const arch_flag *a = &flags[i];
        if (*a->field != TRIT_TRAIN_UNSET && *a->field != a->run) {
            char has[64], says[64];
            describe(a, a->run, has, sizeof has);
            flag_value(a, *a->field, says, sizeof says);
            return trit_error(TRIT_ERR_INVALID, "'%s' has %s, --%s says %s: drop --%s or start from another run",
                              cfg->init_from, has, a->flag, says, a->flag);
        }
        *a->field = a->run;
    }
    if (isnan(cfg->dropout)) cfg->dropout = g->dropout;
    return TRIT_OK;
}

// What a run's config cannot say: the MLP width, RoPE's theta and the norms' epsilon are those
// `trit train` builds, or a resume of the new run would rebuild another model.
static trit_status check_expressible(const char *run, const trit_gpt_config *g) {
    const trit_gpt_config d = trit_gpt_config_default();
    trit_gpt_config plain = *g;
    plain.mlp_hidden = 0;
    if (g->mlp_hidden != 0 && g->mlp_hidden != trit_gpt_mlp_hidden(&plain))
        return trit_error(TRIT_ERR_INVALID, "'%s' has an MLP of width %lld where `trit train` builds %lld: it cannot "
                          "start from this model", run, (long long)g->mlp_hidden, (long long)trit_gpt_mlp_hidden(&plain));
    if (g->rope_theta != d.rope_theta || g->norm_eps != d.norm_eps)
        return trit_error(TRIT_ERR_INVALID, "'%s' has rope_theta %g and norm_eps %g where `trit train` builds %g and %g: "
                          "it cannot start from this model", run, g->rope_theta, g->norm_eps, d.rope_theta, d.norm_eps);
    return TRIT_OK;
}

// ---- the tokenizer --------------------------------------------------------------------------

static bool same_tokenizer(const trit_tokenizer *a, const trit_tokenizer *b) {
    if (trit_tokenizer_get_kind(a) != trit_tokenizer_get_kind(b) ||
        trit_tokenizer_vocab_size(a) != trit_tokenizer_vocab_size(b) ||
        trit_tokenizer_num_merges(a) != trit_tokenizer_num_merges(b))
        return false;
    for (int32_t i = 0; i < trit_tokenizer_vocab_size(a); i++) {
        const uint8_t *x, *y;
        size_t nx, ny;
        if (trit_tokenizer_token_bytes(a, i, &x, &nx) != TRIT_OK || trit_tokenizer_token_bytes(b, i, &y, &ny) != TRIT_OK ||
            nx != ny || memcmp(x, y, nx) != 0)
            return false;
    }
    for (int32_t r = 0; r < trit_tokenizer_num_merges(a); r++) {
        int32_t la, ra, lb, rb;
        if (trit_tokenizer_merge(a, r, &la, &ra) != TRIT_OK || trit_tokenizer_merge(b, r, &lb, &rb) != TRIT_OK ||
            la != lb || ra != rb)
            return false;
    }
    return true;
}

// --tokenizer and --vocab do not apply: the text is tokenized with RUN's tokenizer.
static trit_status check_tokenizer_flags(const trit_train_config *cfg, const trit_tokenizer *tok) {
    const trit_tokenizer_kind kind = trit_tokenizer_get_kind(tok);
    if (cfg->tokenizer != TRIT_TRAIN_UNSET && cfg->tokenizer != (int64_t)kind)
        return trit_error(TRIT_ERR_INVALID, "'%s' has a %s tokenizer, --tokenizer says %s: drop --tokenizer (the text "
                          "is tokenized with the run's own)", cfg->init_from, trit_tokenizer_kind_name(kind),
                          trit_tokenizer_kind_name((trit_tokenizer_kind)cfg->tokenizer));
    if (cfg->vocab != TRIT_TRAIN_UNSET && cfg->vocab != trit_tokenizer_vocab_size(tok))
        return trit_error(TRIT_ERR_INVALID, "'%s' has a vocabulary of %d tokens, --vocab says %lld: drop --vocab (the "
                          "text is tokenized with the run's own tokenizer)", cfg->init_from,
                          trit_tokenizer_vocab_size(tok), (long long)cfg->vocab);
    return TRIT_OK;
}

trit_status trit_trainer_init_check_tokenizer(const trainer *t, const trit_tokenizer *tok, const char *what) {
    if (!t->init || same_tokenizer(tok, t->init_tok)) return TRIT_OK;
    return trit_error(TRIT_ERR_INVALID, "%s (%s, %d tokens) is not the tokenizer of '%s' (%s, %d tokens), which "
                      "--init-from trains with: pass --data a text file (it is tokenized with the run's tokenizer) or "
                      "a directory prepared with that tokenizer", what,
                      trit_tokenizer_kind_name(trit_tokenizer_get_kind(tok)), trit_tokenizer_vocab_size(tok),
                      t->cfg.init_from, trit_tokenizer_kind_name(trit_tokenizer_get_kind(t->init_tok)),
                      trit_tokenizer_vocab_size(t->init_tok));
}

// ---- loading and taking the weights -------------------------------------------------------------

// The spec a QLoRA run's base is quantized with while it is read (paged base loading, so no
// f32 copy of the whole base is ever held), or NULL: --quantize-base to a format with an adapter.
static const trit_quant_spec *qbase_on_load(const trit_train_config *cfg, trit_quant_spec *spec) {
    const bool adapter = cfg->lora[0] || (cfg->adapter_type != TRIT_TRAIN_UNSET && cfg->adapter_type != TRIT_TRAIN_ADAPTER_OFF);
    if (!adapter || cfg->quantize_base < TRIT_QBASE_NF4 || cfg->quantize_base > TRIT_QBASE_TERNARY) return NULL;
    trit_train_config c = *cfg;
    c.double_quant = cfg->double_quant == 1;  // unset until the config is resolved: off
    *spec = trit_train_qbase_spec(&c);
    return spec;
}

trit_status trit_trainer_init_load(trainer *t, trit_train_config *cfg) {
    const char *run = cfg->init_from;
    trit_base_kind kind;
    trit_status s = trit_base_probe(run, &kind);
    if (s != TRIT_OK) return s;
    t->init = true;
    trit_base b;
    trit_quant_spec spec;
    // The base's float values are read later, straight into the model that trains (trit_trainer_init_weights).
    if ((s = trit_base_load_layout(run, qbase_on_load(cfg, &spec), &b)) != TRIT_OK) return init_error(run, s);
    t->init_model = b.model;
    t->init_deferred = b.values_deferred;
    t->init_kind = b.kind;
    t->init_tok = b.tok;
    t->init_step = b.step;
    t->base_codes = b.quantized_on_load;
    const trit_gpt_config *g = trit_gpt_get_config(t->init_model);
    if (g->adapter.kind != TRIT_ADAPTER_NONE)
        return trit_error(TRIT_ERR_INVALID, "--init-from '%s' carries a LoRA adapter: `trit merge` it into a plain run "
                          "and start from that", run);
    bool quantized = false;  // a `trit quantize` run: under --lora its codes are the base (QLoRA)
    for (int i = 0; !t->base_codes && i < trit_gpt_num_tensors(t->init_model); i++)
        quantized |= trit_gpt_quantized(t->init_model, i) != NULL;
    if (quantized && (cfg->lora[0] || (cfg->adapter_type != TRIT_TRAIN_UNSET && cfg->adapter_type != TRIT_TRAIN_ADAPTER_OFF))) {
        if (cfg->quantize_base != TRIT_TRAIN_UNSET && cfg->quantize_base != TRIT_QBASE_KEEP)
            return trit_error(TRIT_ERR_INVALID, "--init-from '%s' is quantized already: drop --quantize-base (its codes "
                              "are the base) or start from the run it was quantized from", run);
        cfg->quantize_base = TRIT_QBASE_KEEP;
    }
    s = check_expressible(run, g);
    if (s == TRIT_OK) s = check_tokenizer_flags(cfg, t->init_tok);
    if (s == TRIT_OK) s = take_architecture(cfg, g);
    return s;
}

trit_status trit_trainer_init_check_out(const trainer *t) {
    struct stat a, b;
    if (!t->init || stat(t->cfg.out, &a) != 0 || stat(t->cfg.init_from, &b) != 0) return TRIT_OK;
    if (a.st_dev == b.st_dev && a.st_ino == b.st_ino)
        return trit_error(TRIT_ERR_INVALID, "--out '%s' is the run --init-from starts from: the new run needs a "
                          "directory of its own", t->cfg.out);
    return TRIT_OK;
}

trit_status trit_trainer_init_weights(trainer *t) {
    // The base's tensors come first in a model with an adapter (which keeps its initial values).
    const int n = trit_gpt_num_tensors(t->init_model);
    if (trit_gpt_num_tensors(t->model) != n && !trit_gpt_get_config(t->model)->adapter.kind)
        return trit_error(TRIT_ERR_STATE, "--init-from: the new model has %d tensors, '%s' has %d",
                          trit_gpt_num_tensors(t->model), t->cfg.init_from, n);
    trit_status s = TRIT_OK;
    for (int i = 0; i < n && s == TRIT_OK; i++) {
        trit_tensor *dst = trit_gpt_tensor(t->model, i);
        const trit_tensor *src = trit_gpt_tensor(t->init_model, i);
        if (strcmp(dst->name, src->name) != 0 || !trit_tensor_same_shape(dst, src))
            return trit_error(TRIT_ERR_STATE, "--init-from: tensor %d is '%s' in the new model but '%s' in '%s'", i,
                              dst->name, src->name, t->cfg.init_from);
        // A base matrix kept only as codes (an imported GGUF's, a quantized run's) is decoded
        // where the new model trains it in f32; under QLoRA the new model has no values for it.
        const trit_tensor *q = trit_gpt_quantized(t->init_model, i);
        if (dst->data && (src->data || q)) s = trit_tensor_copy(dst, src->data ? src : q);
        else if (dst->data && !t->init_deferred)
            s = trit_error(TRIT_ERR_STATE, "--init-from: '%s' of '%s' has no values to start from", src->name,
                           t->cfg.init_from);
        if (s == TRIT_OK && (t->cfg.quantize_base == TRIT_QBASE_KEEP || t->base_codes) && trit_gpt_quantized(t->init_model, i))
            s = trit_gpt_attach_quantized(t->model, i, trit_gpt_detach_quantized(t->init_model, i));
    }
    if (s == TRIT_OK && t->init_deferred)
        s = trit_base_read_values(t->cfg.init_from, &(trit_base){.kind = t->init_kind, .model = t->init_model, .values_deferred = true}, t->model);
    trit_gpt_free(t->init_model);
    t->init_model = NULL;
    t->init_deferred = false;
    return s;
}
