// Adapters on a GPT (LoRA; the config and its checks, the parameters, merge and unmerge, and the
// LoRA product in a graph). The decoder's side is in gpt_decode.c; PEFT's file layout in
// train/peft.c. LoRA (Hu et al.): a frozen W (out, in) gets y = x W^T + b + s (drop(x) A^T) B^T
// with A (r, in) Kaiming-uniform, B (out, r) zero, so training starts from the base's outputs.
#include "nn/gpt_cache.h"
#include "nn/gpt_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const trit_gpt_matrix_roles[GPT_NUM_MATRICES] = {"attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj"};

void trit_gpt_matrix_shape(const trit_gpt_config *c, int role, int64_t *out, int64_t *in) {
    const int64_t C = c->n_embd, hid = trit_gpt_mlp_hidden(c);
    const int64_t shapes[GPT_NUM_MATRICES][2] = {
        {3 * C, C}, {C, C}, {c->mlp == TRIT_MLP_SWIGLU ? 2 * hid : hid, C}, {C, hid}};
    *out = shapes[role][0];
    *in = shapes[role][1];
}

// ---- the spec ---------------------------------------------------------------------------------

// Pattern p (n bytes) against a module name as PEFT matches a target_modules entry: equal, or
// the name's tail after a dot; the name may carry GPT-2's "transformer." prefix.
static bool matches(const char *p, size_t n, const char *module) {
    char full[TRIT_NAME_MAX + 16];
    snprintf(full, sizeof full, "transformer.%s", module);
    const char *names[2] = {module, full};
    for (int k = 0; k < 2; k++) {
        const size_t len = strlen(names[k]);
        if (len == n && memcmp(names[k], p, n) == 0) return true;
        if (len > n && memcmp(names[k] + len - n, p, n) == 0 && names[k][len - n - 1] == '.') return true;
    }
    return false;
}

bool trit_adapter_targets(const trit_adapter_config *a, const char *module) {
    if (!a || a->kind != TRIT_ADAPTER_LORA) return false;
    for (const char *p = a->targets; *p;) {
        const size_t n = strcspn(p, ",");
        if (n > 0 && matches(p, n, module)) return true;
        p += n + (p[n] == ',');
    }
    return false;
}

double trit_adapter_scale(const trit_adapter_config *a) {
    if (!a || a->r <= 0) return 0.0;
    return a->alpha / (a->rslora ? sqrt((double)a->r) : (double)a->r);
}

static trit_status spec_error(const char *spec, const char *what) {
    return trit_error(TRIT_ERR_INVALID, "--lora '%s': %s (expected r=8,alpha=16,dropout=0.05,targets=c_attn,"
                      "attn.c_proj,c_fc,mlp.c_proj[,rslora])", spec, what);
}

static trit_status spec_number(const char *spec, const char *key, const char *v, double *out) {
    char *end = NULL;
    const double x = strtod(v, &end);
    if (end == v || *end != 0 || !isfinite(x)) {
        char what[96];
        snprintf(what, sizeof what, "%.16s takes a number, got '%.40s'", key, v);
        return spec_error(spec, what);
    }
    *out = x;
    return TRIT_OK;
}

// One comma-separated word of the spec: key=value, a flag, or (after targets=) one more target.
static trit_status spec_word(const char *spec, char *w, trit_adapter_config *a, bool *in_targets) {
    char *eq = strchr(w, '=');
    if (!eq) {
        if (strcmp(w, "rslora") == 0) return a->rslora = true, *in_targets = false, TRIT_OK;
        if (!*in_targets || !*w) return spec_error(spec, "a word that is neither key=value nor rslora");
        const size_t have = strlen(a->targets);
        if (have + 1 + strlen(w) >= sizeof a->targets) return spec_error(spec, "the target list is too long");
        snprintf(a->targets + have, sizeof a->targets - have, ",%s", w);
        return TRIT_OK;
    }
    *eq = 0;
    const char *key = w, *v = eq + 1;
    *in_targets = false;
    double x = 0;
    trit_status s = TRIT_OK;
    if (strcmp(key, "targets") == 0) {
        if (!*v) return spec_error(spec, "targets= needs at least one module pattern");
        if (strlen(v) >= sizeof a->targets) return spec_error(spec, "the target list is too long");
        snprintf(a->targets, sizeof a->targets, "%s", v);
        *in_targets = true;
    } else if (strcmp(key, "r") == 0) {
        if ((s = spec_number(spec, key, v, &x)) == TRIT_OK && !(x >= 1 && x <= 65536 && x == floor(x)))
            s = spec_error(spec, "r must be a whole number in [1, 65536]");
        if (s == TRIT_OK) a->r = (int64_t)x;  // only in range: a cast of a huge double is undefined
    } else if (strcmp(key, "alpha") == 0) {
        if ((s = spec_number(spec, key, v, &a->alpha)) == TRIT_OK && !(a->alpha > 0 && a->alpha <= 1e6))
            s = spec_error(spec, "alpha must be in (0, 1e6]");
    } else if (strcmp(key, "dropout") == 0) {
        if ((s = spec_number(spec, key, v, &a->dropout)) == TRIT_OK && !(a->dropout >= 0 && a->dropout < 1))
            s = spec_error(spec, "dropout must be in [0, 1)");
    } else {
        char what[96];
        snprintf(what, sizeof what, "unknown key '%.40s' (r, alpha, dropout, targets, rslora)", key);
        s = spec_error(spec, what);
    }
    return s;
}

trit_status trit_adapter_parse_lora(const char *spec, trit_adapter_config *out) {
    if (!spec || !out) return trit_error(TRIT_ERR_INVALID, "trit_adapter_parse_lora: NULL argument");
    // PEFT's LoraConfig defaults (r 8, alpha 8, no dropout) and its target for GPT-2 (c_attn).
    trit_adapter_config a = {.kind = TRIT_ADAPTER_LORA, .r = 8, .alpha = NAN, .dropout = 0.0};
    snprintf(a.targets, sizeof a.targets, "c_attn");
    char buf[512];
    if (strlen(spec) >= sizeof buf) return spec_error("...", "the spec is longer than 511 bytes");
    snprintf(buf, sizeof buf, "%s", spec);
    bool in_targets = false;
    trit_status s = TRIT_OK;
    for (char *p = buf; s == TRIT_OK && *p;) {
        const size_t n = strcspn(p, ",");
        const bool last = p[n] == 0;
        p[n] = 0;
        s = spec_word(spec, p, &a, &in_targets);
        p += n + !last;
    }
    if (s != TRIT_OK) return s;
    if (isnan(a.alpha)) a.alpha = 8.0;
    *out = a;
    return TRIT_OK;
}

trit_status trit_adapter_format_lora(const trit_adapter_config *a, char *buf, size_t n) {
    if (!a || !buf || a->kind != TRIT_ADAPTER_LORA) return trit_error(TRIT_ERR_INVALID, "trit_adapter_format_lora: not a LoRA config");
    const int k = snprintf(buf, n, "r=%lld,alpha=%.17g,dropout=%.17g,targets=%s%s", (long long)a->r, a->alpha, a->dropout,
                           a->targets, a->rslora ? ",rslora" : "");
    if (k < 0 || (size_t)k >= n) return trit_error(TRIT_ERR_RANGE, "LoRA spec longer than %zu bytes", n - 1);
    return TRIT_OK;
}

// Every pattern of a's targets matches a block matrix of c, and r fits each matrix it adapts.
static trit_status check_lora_targets(const trit_adapter_config *a, const trit_gpt_config *c) {
    for (const char *p = a->targets; *p;) {
        const size_t n = strcspn(p, ",");
        bool any = false;
        for (int64_t i = 0; i < c->n_layer && n > 0; i++)
            for (int role = 0; role < GPT_NUM_MATRICES; role++) {
                char module[TRIT_NAME_MAX];
                snprintf(module, sizeof module, "h.%lld.%s", (long long)i, trit_gpt_matrix_roles[role]);
                if (!matches(p, n, module)) continue;
                any = true;
                int64_t out, in;
                trit_gpt_matrix_shape(c, role, &out, &in);
                if (a->r > (out < in ? out : in))
                    return trit_error(TRIT_ERR_INVALID, "LoRA rank r = %lld is larger than %s (%lld x %lld) allows: a "
                                      "rank at most %lld, the smaller side; lower r", (long long)a->r, module,
                                      (long long)out, (long long)in, (long long)(out < in ? out : in));
            }
        if (!any)
            return trit_error(TRIT_ERR_INVALID, "LoRA target '%.*s' matches no module of the model: the block matrices "
                              "are h.<i>.attn.c_attn, h.<i>.attn.c_proj, h.<i>.mlp.c_fc and h.<i>.mlp.c_proj (i < %lld), "
                              "matched by their name or its tail after a dot (c_attn, attn.c_proj, c_fc, mlp.c_proj)",
                              (int)n, p, (long long)c->n_layer);
        p += n + (p[n] == ',');
    }
    return TRIT_OK;
}

trit_adapter_config trit_adapter_bottleneck(int64_t size) {
    return (trit_adapter_config){.kind = TRIT_ADAPTER_BOTTLENECK, .r = size};
}

trit_status trit_adapter_check(const trit_adapter_config *a, const trit_gpt_config *c) {
    if (!a || !c) return trit_error(TRIT_ERR_INVALID, "trit_adapter_check: NULL argument");
    if (a->kind == TRIT_ADAPTER_NONE) return TRIT_OK;
    if (a->kind == TRIT_ADAPTER_BOTTLENECK) {
        if (a->r < 1 || a->r > c->n_embd)
            return trit_error(TRIT_ERR_INVALID, "bottleneck adapter: its size must be in [1, %lld] (the model's width: a "
                              "bottleneck narrows it), got %lld", (long long)c->n_embd, (long long)a->r);
        return TRIT_OK;
    }
    if (a->kind != TRIT_ADAPTER_LORA)
        return trit_error(TRIT_ERR_INVALID, "adapter: unknown kind %d (TRIT_ADAPTER_LORA or _BOTTLENECK)", (int)a->kind);
    if (a->r < 1 || a->r > 65536) return trit_error(TRIT_ERR_INVALID, "adapter: r must be in [1, 65536], got %lld", (long long)a->r);
    if (!(a->alpha > 0 && a->alpha <= 1e6)) return trit_error(TRIT_ERR_INVALID, "adapter: LoRA alpha must be in (0, 1e6], got %g", a->alpha);
    if (!(a->dropout >= 0 && a->dropout < 1))
        return trit_error(TRIT_ERR_INVALID, "adapter: LoRA dropout must be in [0, 1), got %g", a->dropout);
    if (!memchr(a->targets, 0, sizeof a->targets) || !a->targets[0])
        return trit_error(TRIT_ERR_INVALID, "adapter: LoRA needs at least one target module (targets=c_attn, ...)");
    return check_lora_targets(a, c);
}

// ---- the parameters ---------------------------------------------------------------------------

// A parameter (d0, d1), or (d0) when d1 is 0.
static trit_status new_param(trit_gpt *m, const char *name, int64_t d0, int64_t d1, init_kind init) {
    const int64_t shape[2] = {d0, d1};
    trit_tensor *t = calloc(1, sizeof *t);
    if (!t || trit_tensor_init_layout(t, TRIT_F32, d1 ? 2 : 1, shape) != TRIT_OK) {
        free(t);
        return trit_error(TRIT_ERR_NOMEM, "gpt: out of memory for adapter parameter %s", name);
    }
    t->flags = TRIT_FLAG_PARAM;
    t->graph_value = -1;
    snprintf(t->name, sizeof t->name, "%s", name);
    m->init[m->n_tensors] = (uint8_t)init;
    trit_status s = trit_gpt_append_tensor(m, t);
    if (s != TRIT_OK) trit_tensor_free(t);
    return s;
}

// Makes room for `more` parameters in m's lists (tensors, init rules, quantized copies).
static trit_status grow(trit_gpt *m, int more) {
    const int n = m->n_tensors + more;
    trit_tensor **t = realloc(m->tensors, sizeof *t * (size_t)n);
    if (t) m->tensors = t;
    uint8_t *init = realloc(m->init, (size_t)n + 1);
    if (init) m->init = init;
    trit_tensor **q = m->quantized ? realloc(m->quantized, sizeof *q * (size_t)n) : NULL;
    if (q) {
        m->quantized = q;
        memset(q + m->n_tensors, 0, sizeof *q * (size_t)more);
    }
    if (!t || !init || (m->quantized && !q)) return trit_error(TRIT_ERR_NOMEM, "gpt: out of memory for the adapter");
    m->cap_tensors = n;
    return TRIT_OK;
}

// The LoRA pairs of a's targets, in block order (A then B): counted when add is false.
static trit_status lora_params(trit_gpt *m, const trit_adapter_config *a, bool add, int *count) {
    trit_status s = TRIT_OK;
    *count = 0;
    for (int64_t i = 0; i < m->cfg.n_layer && s == TRIT_OK; i++)
        for (int role = 0; role < GPT_NUM_MATRICES && s == TRIT_OK; role++) {
            char module[TRIT_NAME_MAX], name[TRIT_NAME_MAX + 16];
            snprintf(module, sizeof module, "h.%lld.%s", (long long)i, trit_gpt_matrix_roles[role]);
            if (!trit_adapter_targets(a, module)) continue;
            *count += 2;
            if (!add) continue;
            int64_t out, in;
            trit_gpt_matrix_shape(&m->cfg, role, &out, &in);
            snprintf(name, sizeof name, "%s.lora_A.weight", module);
            s = new_param(m, name, a->r, in, INIT_KAIMING);
            snprintf(name, sizeof name, "%s.lora_B.weight", module);
            if (s == TRIT_OK) s = new_param(m, name, out, a->r, INIT_ZERO);
        }
    return s;
}

// A bottleneck per block and sub-layer: down (r, C) Kaiming-uniform and its bias, up (C, r) and
// its bias zero, so the adapter starts as the identity.
static trit_status bottleneck_params(trit_gpt *m, const trit_adapter_config *a, bool add, int *count) {
    static const char *const subs[2] = {"attn", "mlp"};
    const int64_t C = m->cfg.n_embd, r = a->r;
    trit_status s = TRIT_OK;
    *count = (int)(4 * 2 * m->cfg.n_layer);
    for (int64_t i = 0; add && i < m->cfg.n_layer && s == TRIT_OK; i++)
        for (int k = 0; k < 2 && s == TRIT_OK; k++) {
            char name[TRIT_NAME_MAX];
            snprintf(name, sizeof name, "h.%lld.%s.adapter.down.weight", (long long)i, subs[k]);
            s = new_param(m, name, r, C, INIT_KAIMING);
            snprintf(name, sizeof name, "h.%lld.%s.adapter.down.bias", (long long)i, subs[k]);
            if (s == TRIT_OK) s = new_param(m, name, r, 0, INIT_ZERO);
            snprintf(name, sizeof name, "h.%lld.%s.adapter.up.weight", (long long)i, subs[k]);
            if (s == TRIT_OK) s = new_param(m, name, C, r, INIT_ZERO);
            snprintf(name, sizeof name, "h.%lld.%s.adapter.up.bias", (long long)i, subs[k]);
            if (s == TRIT_OK) s = new_param(m, name, C, 0, INIT_ZERO);
        }
    return s;
}

static trit_status adapter_params(trit_gpt *m, const trit_adapter_config *a, bool add, int *count) {
    return a->kind == TRIT_ADAPTER_BOTTLENECK ? bottleneck_params(m, a, add, count) : lora_params(m, a, add, count);
}

trit_status trit_gpt_add_adapter(trit_gpt *m, const trit_adapter_config *a, uint64_t seed) {
    return trit_gpt_add_adapter_giving(m, a, seed, NULL);
}

trit_status trit_gpt_add_adapter_giving(trit_gpt *m, const trit_adapter_config *a, uint64_t seed, const bool *base_give) {
    if (!m || !a) return trit_error(TRIT_ERR_INVALID, "trit_gpt_add_adapter: NULL argument");
    if (m->dec)
        return trit_error(TRIT_ERR_STATE, "gpt: a decode-only model cannot take an adapter; add it first, then make the "
                          "model decode-only");
    if (m->cfg.adapter.kind != TRIT_ADAPTER_NONE) return trit_error(TRIT_ERR_STATE, "gpt: the model has an adapter already");
    trit_gpt_config c = m->cfg;
    c.adapter = *a;
    trit_status s = trit_adapter_check(a, &c);
    if (s != TRIT_OK || a->kind == TRIT_ADAPTER_NONE) return s;
    const int base = m->n_tensors;
    int more = 0;
    adapter_params(m, a, false, &more);
    if ((s = grow(m, more)) != TRIT_OK) return s;
    if ((s = adapter_params(m, a, true, &more)) != TRIT_OK) return s;
    bool *give = calloc((size_t)m->n_tensors, sizeof *give);
    if (!give) return trit_error(TRIT_ERR_NOMEM, "gpt: out of memory for the adapter");
    for (int i = 0; i < m->n_tensors; i++) {
        give[i] = i >= base || (base_give && base_give[i]);
        if (i < base) m->tensors[i]->flags |= TRIT_FLAG_FROZEN;
    }
    m->cfg.adapter = *a;
    s = trit_gpt_program_build(m);
    if (s == TRIT_OK) s = trit_gpt_lay_out(m, NULL, give);
    for (int i = base; s == TRIT_OK && i < m->n_tensors; i++) s = trit_gpt_init_param(m, i, seed);
    free(give);
    return s;
}

// An adapter's parameter, by the names lora_params and bottleneck_params give.
static bool is_adapter_param(const trit_tensor *t) {
    return strstr(t->name, ".lora_A.weight") || strstr(t->name, ".lora_B.weight") || strstr(t->name, ".adapter.");
}

trit_status trit_gpt_set_adapter_dtype(trit_gpt *m, trit_dtype dt) {
    if (!m) return trit_error(TRIT_ERR_INVALID, "trit_gpt_set_adapter_dtype: NULL model");
    if (m->cfg.adapter.kind == TRIT_ADAPTER_NONE) return trit_error(TRIT_ERR_STATE, "gpt: the model has no adapter");
    if (dt != TRIT_F32 && dt != TRIT_BF16)
        return trit_error(TRIT_ERR_DTYPE, "gpt: an adapter is stored in f32 or bf16, not %s", trit_dtype_name(dt));
    return trit_gpt_convert_params(m, dt, is_adapter_param);
}

int64_t trit_gpt_num_trainable(const trit_gpt *m) {
    int64_t n = 0;
    for (int i = 0; m && i < m->n_tensors; i++)
        if (!(m->tensors[i]->flags & TRIT_FLAG_FROZEN)) n += trit_tensor_numel(m->tensors[i]);
    return n;
}

// ---- merge and unmerge ------------------------------------------------------------------------

// An adapter matrix's values in f32: its own storage, or a widened copy of a bf16 one (exact)
// in *copy, which the caller frees.
static const float *adapter_f32(const trit_tensor *t, float **copy) {
    *copy = NULL;
    if (t->dtype == TRIT_F32) return trit_tensor_ptr(t);
    const int64_t n = trit_tensor_numel(t);
    if (!(*copy = malloc(sizeof(float) * (size_t)(n ? n : 1)))) return NULL;
    trit_dtype_traits_of(t->dtype)->to_f32(*copy, trit_tensor_ptr(t), n, NULL, 0);
    return *copy;
}

// W (out, in) += sign s B A for the LINEAR step st, in double sums rounded once per element; a
// bf16 adapter is widened first, so it folds as its f32 widening does.
static trit_status fold(trit_gpt *m, const gpt_step *st, double sign) {
    trit_tensor *w = m->tensors[st->w], *A = m->tensors[st->la], *B = m->tensors[st->lb];
    const bool adapter_ok = (A->dtype == TRIT_F32 || A->dtype == TRIT_BF16) && (B->dtype == TRIT_F32 || B->dtype == TRIT_BF16);
    if (w->dtype != TRIT_F32 || !adapter_ok || !w->data || !trit_tensor_is_contiguous(w))
        return trit_error(TRIT_ERR_DTYPE, "gpt: merging an adapter needs the f32 values of '%s' and an f32 or bf16 "
                          "adapter (a 16-bit or decode-only model has no f32 weights): load the model in f32", w->name);
    const int64_t out = w->shape[0], in = w->shape[1], r = A->shape[0];
    const double s = sign * trit_adapter_scale(&m->cfg.adapter);
    float *wd = trit_tensor_ptr(w);  // (out, in)
    float *acopy, *bcopy;
    const float *ad = adapter_f32(A, &acopy), *bd = adapter_f32(B, &bcopy);  // (r, in), (out, r)
    if (!ad || !bd) {
        free(acopy), free(bcopy);
        return trit_error(TRIT_ERR_NOMEM, "gpt: out of memory widening the adapter of '%s'", w->name);
    }
#pragma omp parallel for schedule(static) if (out * in * r >= (INT64_C(1) << 20))
    for (int64_t o = 0; o < out; o++)
        for (int64_t j = 0; j < in; j++) {
            double d = 0;
            for (int64_t k = 0; k < r; k++) d += (double)bd[o * r + k] * ad[k * in + j];
            wd[o * in + j] = (float)((double)wd[o * in + j] + s * d);
        }
    free(acopy), free(bcopy);
    if (m->quantized && m->quantized[st->w]) {  // the codes no longer hold W
        trit_tensor_free(m->quantized[st->w]);
        m->quantized[st->w] = NULL;
    }
    return TRIT_OK;
}

static trit_status fold_all(trit_gpt *m, bool merge) {
    if (!m) return trit_error(TRIT_ERR_INVALID, "gpt: NULL model");
    if (m->cfg.adapter.kind == TRIT_ADAPTER_BOTTLENECK)
        return trit_error(TRIT_ERR_STATE, "gpt: a bottleneck adapter is nonlinear (a GELU between its projections), so it "
                          "cannot be merged into the weights: keep it as an adapter (--adapter DIR)");
    if (m->cfg.adapter.kind != TRIT_ADAPTER_LORA) return trit_error(TRIT_ERR_STATE, "gpt: the model has no LoRA adapter to merge");
    if (m->adapters_merged == merge)
        return trit_error(TRIT_ERR_STATE, "gpt: the adapters are %s already", merge ? "merged" : "unmerged");
    if (m->dec) return trit_error(TRIT_ERR_STATE, "gpt: a decode-only model has no f32 weights to merge into");
    for (int i = 0; i < m->n_prog; i++) {
        if (m->prog[i].op != GPT_OP_LINEAR || m->prog[i].la < 0) continue;
        trit_status s = fold(m, &m->prog[i], merge ? 1.0 : -1.0);
        if (s != TRIT_OK) return s;
    }
    m->adapters_merged = merge;
    return TRIT_OK;
}

trit_status trit_gpt_merge_adapters(trit_gpt *m) { return fold_all(m, true); }
trit_status trit_gpt_unmerge_adapters(trit_gpt *m) { return fold_all(m, false); }
bool trit_gpt_adapters_merged(const trit_gpt *m) { return m && m->adapters_merged; }

// ---- the product in a graph -------------------------------------------------------------------

trit_tensor *trit_gpt_bottleneck_graph(trit_graph *g, const trit_gpt *m, const gpt_step *s, trit_tensor *x) {
    trit_tensor *h = trit_linear(g, x, m->tensors[s->w], m->tensors[s->b]);                // (B, T, r)
    trit_tensor *u = trit_linear(g, trit_gelu(g, h), m->tensors[s->la], m->tensors[s->lb]);  // (B, T, C)
    return trit_add(g, x, u);
}

trit_tensor *trit_gpt_lora_graph(trit_graph *g, const trit_gpt *m, const gpt_step *s, trit_tensor *x, trit_tensor *y) {
    const trit_adapter_config *a = &m->cfg.adapter;
    if (!x || !y) return NULL;
    if (a->dropout > 0) {
        if (x->dtype != trit_graph_dtype(g)) x = trit_cast(g, x, trit_graph_dtype(g));  // dropout takes the compute dtype
        x = trit_dropout_stream(g, x, a->dropout, s->lora_stream);
    }
    trit_tensor *down = trit_linear(g, x, m->tensors[s->la], NULL);  // (B, T, r)
    down = trit_scale(g, down, trit_adapter_scale(a));
    return trit_add_act(g, y, trit_linear(g, down, m->tensors[s->lb], NULL));  // (B, T, out)
}

// ---- a quantized base (QLoRA) -----------------------------------------------------------------

// Whether the decoder multiplies parameter i by its codes (panels or the integer / weight-only
// kernels): a matrix without f32 values must be.
static bool decoder_takes(const gpt_weights *w, int i) {
    return (w->panels && w->panels[i].codes) || (w->qscales && w->qscales[i]);
}

trit_status trit_gpt_use_quantized_base(trit_gpt *m) {
    if (!m) return trit_error(TRIT_ERR_INVALID, "trit_gpt_use_quantized_base: NULL model");
    if (m->dec || !m->quantized)
        return trit_error(TRIT_ERR_STATE, "gpt: a quantized base needs quantized copies of its matrices "
                          "(trit_gpt_quantize) on a model that is not decode-only");
    bool *drop = calloc((size_t)m->n_tensors, sizeof *drop);
    if (!drop) return trit_error(TRIT_ERR_NOMEM, "gpt: out of memory");
    gpt_weights w;
    memset(&w, 0, sizeof w);
    trit_status s = trit_gpt_weights_make(&w, m);
    for (int i = 0; s == TRIT_OK && i < m->n_tensors; i++) {
        const trit_tensor *t = m->tensors[i];
        trit_tensor *q = m->quantized[i];
        if (!q) continue;  // a matrix made without values (codes only) is checked as one that drops them
        if (!(t->flags & TRIT_FLAG_FROZEN))
            s = trit_error(TRIT_ERR_STATE, "gpt: '%s' is trainable, but a quantized base gets no gradient: give the "
                           "model an adapter first (its base is then frozen)", t->name);
        else if (!decoder_takes(&w, i))
            s = trit_error(TRIT_ERR_UNSUPPORTED, "gpt: no decoding kernel multiplies '%s' as %s (groups of %lld) by its "
                           "codes, and without f32 values it must be: choose nf4, int8 or int4 with groups of 32, or "
                           "ternary", t->name, trit_dtype_name(q->dtype), (long long)(q->quant ? q->quant->group_size : 0));
        drop[i] = true;
    }
    trit_gpt_weights_free(&w);
    bool any = false;
    for (int i = 0; s == TRIT_OK && i < m->n_tensors; i++) {
        if (!drop[i]) continue;
        trit_tensor *q = m->quantized[i];
        any |= m->tensors[i]->data != NULL;
        q->flags |= TRIT_FLAG_PARAM | TRIT_FLAG_FROZEN;  // a graph operand without gradient
        q->graph_value = -1;
        snprintf(q->name, sizeof q->name, "%s", m->tensors[i]->name);
    }
    if (s == TRIT_OK && any) s = trit_gpt_lay_out(m, drop, NULL);  // the f32 values go with the old storage
    free(drop);
    return s;
}
