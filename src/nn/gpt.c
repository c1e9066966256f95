// The GPT model: configuration defaults and checks, parameter allocation with GPT-2 checkpoint
// names, reproducible initialisation, and parameter lookup. The graph lives in gpt_graph.c and
// incremental decoding in gpt_decode.c.
#include "nn/gpt_cache.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

trit_gpt_config trit_gpt_config_default(void) {
    return (trit_gpt_config){
        .vocab_size = 65,
        .seq_len = 64,
        .n_layer = 4,
        .n_head = 4,
        .n_embd = 128,
        .dropout = 0.0,
        .bias = true,
        .norm = TRIT_NORM_LAYER,
        .mlp = TRIT_MLP_GELU,
        .pos = TRIT_POS_LEARNED,
        .rope_theta = 10000.0,
        .mlp_hidden = 0,
        .norm_eps = 1e-5,
    };
}

int64_t trit_gpt_mlp_hidden(const trit_gpt_config *c) {
    if (!c) return 0;  // like the other getters: no config, no width
    if (c->mlp_hidden > 0) return c->mlp_hidden;
    if (c->mlp == TRIT_MLP_SWIGLU) {
        const int64_t h = (8 * c->n_embd + 2) / 3;  // ceil(8C / 3)
        return (h + 7) / 8 * 8;
    }
    return 4 * c->n_embd;
}

// Sizes are bounded so that every product below (3C * C, V * C, B * T * V) fits int64_t.
#define GPT_MAX_DIM (INT64_C(1) << 24)

static trit_status check_size(const char *what, int64_t v) {
    if (v < 1 || v > GPT_MAX_DIM)
        return trit_error(TRIT_ERR_INVALID, "gpt config: %s must be in [1, %lld], got %lld", what,
                          (long long)GPT_MAX_DIM, (long long)v);
    return TRIT_OK;
}

trit_status trit_gpt_config_check(const trit_gpt_config *c) {
    if (!c) return trit_error(TRIT_ERR_INVALID, "gpt config: NULL config");
    trit_status s;
    if ((s = check_size("vocab_size", c->vocab_size)) || (s = check_size("seq_len", c->seq_len)) ||
        (s = check_size("n_layer", c->n_layer)) || (s = check_size("n_head", c->n_head)) ||
        (s = check_size("n_embd", c->n_embd)))
        return s;
    if (c->n_embd % c->n_head != 0)
        return trit_error(TRIT_ERR_INVALID, "gpt config: n_embd = %lld is not divisible by n_head = %lld; choose n_embd as a multiple of n_head",
                          (long long)c->n_embd, (long long)c->n_head);
    if (!(c->dropout >= 0.0 && c->dropout < 1.0))
        return trit_error(TRIT_ERR_INVALID, "gpt config: dropout must be in [0, 1), got %g", c->dropout);
    if (c->norm != TRIT_NORM_LAYER && c->norm != TRIT_NORM_RMS)
        return trit_error(TRIT_ERR_INVALID, "gpt config: unknown norm kind %d (use TRIT_NORM_LAYER or TRIT_NORM_RMS)", (int)c->norm);
    if (c->mlp != TRIT_MLP_GELU && c->mlp != TRIT_MLP_SWIGLU)
        return trit_error(TRIT_ERR_INVALID, "gpt config: unknown mlp kind %d (use TRIT_MLP_GELU or TRIT_MLP_SWIGLU)", (int)c->mlp);
    if (c->pos != TRIT_POS_LEARNED && c->pos != TRIT_POS_ROPE)
        return trit_error(TRIT_ERR_INVALID, "gpt config: unknown position kind %d (use TRIT_POS_LEARNED or TRIT_POS_ROPE)", (int)c->pos);
    if (c->pos == TRIT_POS_ROPE) {
        const int64_t hs = c->n_embd / c->n_head;
        if (hs % 2 != 0)
            return trit_error(TRIT_ERR_INVALID, "gpt config: RoPE rotates pairs of channels, so the head size n_embd / n_head = %lld must be even",
                              (long long)hs);
    }
    // Checked for every model: it is saved with the config, and a checkpoint must read back as written.
    if (!(c->rope_theta > 0.0) || !isfinite(c->rope_theta))
        return trit_error(TRIT_ERR_INVALID, "gpt config: rope_theta must be a finite number > 0 (10000 is usual), got %g", c->rope_theta);
    if (c->mlp_hidden < 0 || c->mlp_hidden > GPT_MAX_DIM)
        return trit_error(TRIT_ERR_INVALID, "gpt config: mlp_hidden must be 0 (default) or in [1, %lld], got %lld",
                          (long long)GPT_MAX_DIM, (long long)c->mlp_hidden);
    if (!(c->norm_eps > 0.0) || !isfinite(c->norm_eps))
        return trit_error(TRIT_ERR_INVALID, "gpt config: norm_eps must be a finite number > 0 (1e-5 is usual), got %g", c->norm_eps);
    return trit_adapter_check(&c->adapter, c);
}

// ---- parameters ---------------------------------------------------------------------------


// The model is built in two passes over the same code: the first (m->tensors still NULL) only
// counts the parameters the config calls for, so the list is allocated to exactly that length.
typedef struct builder {
    trit_gpt *m;
    bool (*without)(const char *name, void *ctx);  // parameters made without values, or NULL
    bool zeroed;                                    // storage left zero: the caller fills every value
    void *ctx;
    bool *valued;  // (cap_tensors) which parameters get values
    uint64_t seed;
    double std, std_resid;
    int count;  // the counting pass's result
    trit_status status;
} builder;

trit_status trit_gpt_append_tensor(trit_gpt *m, trit_tensor *t) {
    if (!m || !t) return trit_error(TRIT_ERR_INVALID, "trit_gpt_append_tensor: NULL argument");
    if (!m->tensors || m->n_tensors >= m->cap_tensors)
        return trit_error(TRIT_ERR_RANGE, "gpt: parameter '%s' would be number %d, but the model's list holds %d (the "
                          "count its config gives): the builder made a tensor the count does not know", t->name,
                          m->n_tensors + 1, m->cap_tensors);
    m->tensors[m->n_tensors++] = t;
    return TRIT_OK;
}

// A parameter's shape and name without values (its values come as a quantized copy).
static trit_tensor *add_shape(builder *b, const char *name, int ndim, const int64_t *shape) {
    trit_tensor *t = calloc(1, sizeof *t);
    if (!t || trit_tensor_init_layout(t, TRIT_F32, ndim, shape) != TRIT_OK) {
        free(t);
        b->status = trit_error(TRIT_ERR_NOMEM, "gpt: out of memory for parameter %s", name);
        return NULL;
    }
    t->flags = TRIT_FLAG_PARAM;
    t->graph_value = -1;
    snprintf(t->name, sizeof t->name, "%s", name);
    if ((b->status = trit_gpt_append_tensor(b->m, t)) != TRIT_OK) {
        trit_tensor_free(t);
        return NULL;
    }
    return t;
}

// Allocates, names and initialises one parameter and appends it to the model's list.
static trit_tensor *add_param(builder *b, const char *name, int ndim, int64_t d0, int64_t d1, init_kind init) {
    if (b->status != TRIT_OK) return NULL;
    if (!b->m->tensors) {
        b->count++;
        return NULL;
    }
    const int64_t shape[2] = {d0, d1};
    trit_tensor *t = add_shape(b, name, ndim, shape);  // values come once the layout is known
    if (!t) return NULL;
    const int i = b->m->n_tensors - 1;
    b->m->init[i] = (uint8_t)init;
    b->valued[i] = !(b->without && b->without(name, b->ctx));
    return t;
}

// Parameter i's initial values, in its place in flat storage (which starts zeroed).
trit_status trit_gpt_init_param(trit_gpt *m, int i, uint64_t seed) {
    trit_tensor *t = m->tensors[i];
    switch ((init_kind)m->init[i]) {
    case INIT_NORMAL: return trit_tensor_fill_normal(t, 0.0, m->std, seed, trit_gpt_name_stream(t->name));
    case INIT_RESIDUAL: return trit_tensor_fill_normal(t, 0.0, m->std_resid, seed, trit_gpt_name_stream(t->name));
    case INIT_ZERO: return TRIT_OK;
    case INIT_ONE: return trit_tensor_fill(t, 1.0);
    case INIT_KAIMING: {
        const double bound = trit_gpt_kaiming_bound(t);
        return trit_tensor_fill_uniform(t, -bound, bound, seed, trit_gpt_name_stream(t->name));
    }
    }
    return TRIT_OK;
}

// A tensor-parallel shard (m->tp_size > 1) holds 1 / tp_size of each block matrix (gpt_tp.c).
static void add_block(builder *b, int64_t i) {
    const trit_gpt_config *c = &b->m->cfg;
    const int64_t S = b->m->tp_size > 1 ? b->m->tp_size : 1;
    const int64_t C = c->n_embd, F = (c->mlp == TRIT_MLP_SWIGLU ? 2 * b->m->hidden : b->m->hidden) / S;
    const bool ln_bias = c->bias && c->norm == TRIT_NORM_LAYER;
    trit_gpt_block *k = &b->m->blocks[i];
    char n[TRIT_NAME_MAX];
#define P(field, suffix, ndim, d0, d1, init)                                   \
    do {                                                                      \
        snprintf(n, sizeof n, "h.%lld.%s", (long long)i, suffix);              \
        k->field = add_param(b, n, ndim, d0, d1, init);                        \
    } while (0)
    P(ln1_w, "ln_1.weight", 1, C, 0, INIT_ONE);
    if (ln_bias) P(ln1_b, "ln_1.bias", 1, C, 0, INIT_ZERO);
    P(attn_w, "attn.c_attn.weight", 2, 3 * C / S, C, INIT_NORMAL);
    if (c->bias) P(attn_b, "attn.c_attn.bias", 1, 3 * C / S, 0, INIT_ZERO);
    if (c->subln) P(sub1_w, "attn.sub_norm.weight", 1, C, 0, INIT_ONE);
    if (c->subln && ln_bias) P(sub1_b, "attn.sub_norm.bias", 1, C, 0, INIT_ZERO);
    P(proj_w, "attn.c_proj.weight", 2, C, C / S, INIT_RESIDUAL);
    if (c->bias) P(proj_b, "attn.c_proj.bias", 1, C, 0, INIT_ZERO);
    P(ln2_w, "ln_2.weight", 1, C, 0, INIT_ONE);
    if (ln_bias) P(ln2_b, "ln_2.bias", 1, C, 0, INIT_ZERO);
    P(fc_w, "mlp.c_fc.weight", 2, F, C, INIT_NORMAL);
    if (c->bias) P(fc_b, "mlp.c_fc.bias", 1, F, 0, INIT_ZERO);
    if (c->subln) P(sub2_w, "mlp.sub_norm.weight", 1, b->m->hidden, 0, INIT_ONE);
    if (c->subln && ln_bias) P(sub2_b, "mlp.sub_norm.bias", 1, b->m->hidden, 0, INIT_ZERO);
    P(mlp_w, "mlp.c_proj.weight", 2, C, b->m->hidden / S, INIT_RESIDUAL);
    if (c->bias) P(mlp_b, "mlp.c_proj.bias", 1, C, 0, INIT_ZERO);
#undef P
}

// Moves the parameters into flat storage (one block per dtype) in reverse order of first use by
// the program: gradients final together in backward are neighbours, and the token embedding,
// first used and tied to the head, whose gradient is final last, comes last. Parameters in drop
// (or NULL) lose their values (a decode-only model's weights the kernels read as codes);
// parameters in give (or NULL), which have none yet, get zeroed storage; any other one without
// values is left out.
trit_status trit_gpt_lay_out(trit_gpt *m, const bool *drop, const bool *give) {
    trit_tensor **order = calloc((size_t)m->n_tensors + 1, sizeof *order);
    bool *seen = calloc((size_t)m->n_tensors + 1, sizeof *seen);
    trit_status s = TRIT_OK;
    if (!order || !seen) {
        s = trit_error(TRIT_ERR_NOMEM, "gpt: out of memory");
    } else {
        int k = m->n_tensors;
        for (int i = 0; i < m->n_prog; i++) {
            const int use[5] = {m->prog[i].w, m->prog[i].w2, m->prog[i].b, m->prog[i].la, m->prog[i].lb};
            for (int j = 0; j < 5; j++)
                if (use[j] >= 0 && !seen[use[j]]) seen[use[j]] = true, order[--k] = m->tensors[use[j]];
        }
        for (int i = m->n_tensors - 1; i >= 0; i--)
            if (!seen[i]) order[--k] = m->tensors[i];
        int n = 0;  // keep those that stay, in order
        for (int i = 0; i < m->n_tensors; i++) {
            const int idx = trit_gpt_index_of(m, order[i]);
            if ((order[i]->data || (give && give[idx])) && !(drop && drop[idx])) order[n++] = order[i];
        }
        trit_flat *f = trit_flat_new(order, n);
        if (!f) {
            s = TRIT_ERR_NOMEM;
        } else {
            const bool grads = m->flat && trit_flat_grads(m->flat, NULL);
            if (grads) s = trit_flat_attach_grads(f, TRIT_F32);
            for (int i = 0; drop && i < m->n_tensors; i++)
                if (drop[i]) m->tensors[i]->data = NULL;  // its storage goes with the old block
            trit_flat_free(m->flat);
            m->flat = f;
        }
    }
    free(order);
    free(seen);
    return s;
}

// Every parameter in the documented order: wte, wpe, the blocks, ln_f.
static void add_params(builder *b) {
    trit_gpt *m = b->m;
    const trit_gpt_config *c = &m->cfg;
    const int64_t C = c->n_embd;
    m->wte = add_param(b, "wte.weight", 2, c->vocab_size, C, INIT_NORMAL);
    if (c->pos == TRIT_POS_LEARNED) m->wpe = add_param(b, "wpe.weight", 2, c->seq_len, C, INIT_NORMAL);
    for (int64_t i = 0; i < c->n_layer; i++) add_block(b, i);
    m->lnf_w = add_param(b, "ln_f.weight", 1, C, 0, INIT_ONE);
    if (c->bias && c->norm == TRIT_NORM_LAYER) m->lnf_b = add_param(b, "ln_f.bias", 1, C, 0, INIT_ZERO);
}

static trit_gpt *make(const trit_gpt_config *c, uint64_t seed, bool (*without)(const char *name, void *ctx), void *ctx,
                      bool zeroed, int tp_rank, int tp_size);

trit_gpt *trit_gpt_new(const trit_gpt_config *c, uint64_t seed) { return make(c, seed, NULL, NULL, false, 0, 1); }

trit_gpt *trit_gpt_new_zeroed(const trit_gpt_config *c) { return make(c, 0, NULL, NULL, true, 0, 1); }

trit_gpt *trit_gpt_new_without(const trit_gpt_config *c, uint64_t seed, bool (*without)(const char *name, void *ctx),
                               void *ctx) {
    return make(c, seed, without, ctx, false, 0, 1);
}

trit_gpt *trit_gpt_new_zeroed_without(const trit_gpt_config *c, uint64_t seed, bool (*without)(const char *name, void *ctx),
                                      void *ctx) {
    return make(c, seed, without, ctx, true, 0, 1);
}

trit_gpt *trit_gpt_new_tp_layout(const trit_gpt_config *c, int rank, int size) {
    return make(c, 0, NULL, NULL, true, rank, size);
}

static trit_gpt *make(const trit_gpt_config *c, uint64_t seed, bool (*without)(const char *name, void *ctx), void *ctx,
                      bool zeroed, int tp_rank, int tp_size) {
    if (trit_gpt_config_check(c) != TRIT_OK) return NULL;
    trit_gpt *m = calloc(1, sizeof *m);
    if (!m) {
        trit_error(TRIT_ERR_NOMEM, "gpt: out of memory");
        return NULL;
    }
    m->cfg = *c;
    m->cfg.adapter = (trit_adapter_config){.kind = TRIT_ADAPTER_NONE};  // the base first, then the adapter (lora.c)
    m->policy = (trit_compute_policy){TRIT_F32, TRIT_F32, TRIT_MATMUL_HIGHEST};
    m->hidden = trit_gpt_mlp_hidden(c);
    m->tp_rank = tp_rank;
    m->tp_size = tp_size;
    const int64_t L = c->n_layer;
    builder b = {.m = m, .without = without, .ctx = ctx, .seed = seed, .zeroed = zeroed, .std = 0.02,
                 .std_resid = 0.02 / sqrt(2.0 * (double)L), .status = TRIT_OK};
    if ((m->blocks = calloc((size_t)L, sizeof *m->blocks))) {
        add_params(&b);  // counts
        m->cap_tensors = b.count;
        m->tensors = calloc((size_t)b.count, sizeof *m->tensors);
        m->init = calloc((size_t)b.count + 1, sizeof *m->init);
        b.valued = calloc((size_t)b.count + 1, sizeof *b.valued);
    }
    m->std = b.std, m->std_resid = b.std_resid;
    if (!m->blocks || !m->tensors || !m->init || !b.valued) {
        free(b.valued);
        trit_gpt_free(m);
        trit_error(TRIT_ERR_NOMEM, "gpt: out of memory for %lld layers", (long long)L);
        return NULL;
    }
    add_params(&b);
    if (b.status == TRIT_OK && m->n_tensors != m->cap_tensors)
        b.status = trit_error(TRIT_ERR_RANGE, "gpt: the builder made %d parameters after counting %d", m->n_tensors,
                              m->cap_tensors);
    if (b.status == TRIT_OK) b.status = trit_gpt_program_build(m);
    // Storage in place in one block (the adapter's too: one layout), then the values there: no
    // second copy of the model.
    const int base = m->n_tensors;
    if (b.status == TRIT_OK)
        b.status = c->adapter.kind != TRIT_ADAPTER_NONE ? trit_gpt_add_adapter_giving(m, &c->adapter, seed, b.valued)
                                                        : trit_gpt_lay_out(m, NULL, b.valued);
    for (int i = 0; b.status == TRIT_OK && !b.zeroed && i < base; i++)
        if (b.valued[i]) b.status = trit_gpt_init_param(m, i, seed);
    free(b.valued);
    if (b.status != TRIT_OK) {
        trit_gpt_free(m);
        return NULL;
    }
    return m;
}

void trit_gpt_free(trit_gpt *m) {
    if (!m) return;
    for (int i = 0; i < m->n_tensors; i++) {
        trit_tensor_free(m->tensors[i]);
        if (m->quantized) trit_tensor_free(m->quantized[i]);
    }
    free(m->quantized);
    free(m->tensors);
    free(m->init);
    free(m->blocks);
    free(m->prog);
    trit_flat_free(m->flat);  // after the tensors: they are views of it
    if (m->dec) trit_gpt_weights_free(m->dec);
    free(m->dec);
    trit_gpt_ternary_free(m);
    free(m);
}

const trit_gpt_config *trit_gpt_get_config(const trit_gpt *m) { return m ? &m->cfg : NULL; }

int trit_gpt_num_tensors(const trit_gpt *m) { return m ? m->n_tensors : 0; }

trit_tensor *trit_gpt_tensor(const trit_gpt *m, int i) {
    if (!m || i < 0 || i >= m->n_tensors) {
        trit_error(TRIT_ERR_RANGE, "gpt: tensor index %d out of range [0, %d)", i, m ? m->n_tensors : 0);
        return NULL;
    }
    return m->tensors[i];
}

trit_tensor *trit_gpt_find(const trit_gpt *m, const char *name) {
    if (!m || !name) {
        trit_error(TRIT_ERR_INVALID, "gpt: NULL model or name");
        return NULL;
    }
    for (int i = 0; i < m->n_tensors; i++)
        if (strcmp(m->tensors[i]->name, name) == 0) return m->tensors[i];
    trit_error(TRIT_ERR_INVALID, "gpt: no parameter named '%s' (names follow GPT-2: wte.weight, h.0.attn.c_attn.weight, ...)", name);
    return NULL;
}

int64_t trit_gpt_num_params(const trit_gpt *m) {
    int64_t n = 0;
    for (int i = 0; m && i < m->n_tensors; i++) n += trit_tensor_numel(m->tensors[i]);
    return n;
}

trit_status trit_gpt_set_policy(trit_gpt *m, const trit_compute_policy *policy) {
    if (!m || !policy) return trit_error(TRIT_ERR_INVALID, "trit_gpt_set_policy: NULL argument");
    if (policy->accumulate != TRIT_F32)
        return trit_error(TRIT_ERR_DTYPE, "gpt: the model accumulates in f32, the policy asks for %s",
                          trit_dtype_name(policy->accumulate));
    trit_graph *probe = trit_graph_new_policy(policy);  // the graph's own check of the combination
    if (!probe) return TRIT_ERR_DTYPE;
    trit_graph_free(probe);
    m->policy = *policy;
    return TRIT_OK;
}

trit_compute_policy trit_gpt_get_policy(const trit_gpt *m) { return m->policy; }

// Converts one parameter's storage in place of its old buffer (grad untouched).
static trit_status convert_param(trit_tensor *p, trit_dtype dt) {
    const int64_t n = trit_tensor_numel(p);
    void *data = trit_aligned_alloc(trit_dtype_nbytes(dt, n) + 1);
    float *row = malloc(sizeof(float) * (size_t)(n ? n : 1));
    if (!data || !row) {
        trit_aligned_free(data);
        free(row);
        return trit_error(TRIT_ERR_NOMEM, "gpt: out of memory converting '%s' to %s", p->name, trit_dtype_name(dt));
    }
    trit_dtype_traits_of(p->dtype)->to_f32(row, trit_tensor_ptr(p), n, NULL, 0);
    trit_dtype_traits_of(dt)->from_f32(data, row, n, NULL, 0);
    free(row);
    if (p->flags & TRIT_FLAG_OWNS_DATA) trit_aligned_free(p->data);
    p->data = data;
    p->offset = 0;
    p->dtype = dt;
    p->flags |= TRIT_FLAG_OWNS_DATA;
    return TRIT_OK;
}

trit_status trit_gpt_convert_params(trit_gpt *m, trit_dtype dt, bool (*which)(const trit_tensor *t)) {
    if (!m) return trit_error(TRIT_ERR_INVALID, "gpt: converting the parameters of a NULL model");
    if (m->dec) return trit_error(TRIT_ERR_STATE, "gpt: the model decodes only; its parameters cannot change dtype");
    if (dt != TRIT_F32 && dt != TRIT_BF16 && dt != TRIT_F16)
        return trit_error(TRIT_ERR_DTYPE, "gpt: parameters can be stored in f32, bf16 or f16, not %s",
                          trit_dtype_name(dt));
    bool changed = false;
    for (int i = 0; i < m->n_tensors; i++) {
        trit_tensor *t = m->tensors[i];
        if (t->dtype == dt || (which && !which(t))) continue;
        if (!t->data)  // a quantized base's matrix: its codes are its values
            return trit_error(TRIT_ERR_STATE, "gpt: '%s' has no values to store in %s (a quantized base keeps codes)",
                              t->name, trit_dtype_name(dt));
        trit_status s = convert_param(t, dt);
        if (s != TRIT_OK) return s;
        changed = true;
    }
    return changed ? trit_gpt_lay_out(m, NULL, NULL) : TRIT_OK;  // the converted values into a block of the new dtype
}

trit_status trit_gpt_set_param_dtype(trit_gpt *m, trit_dtype dt) { return trit_gpt_convert_params(m, dt, NULL); }

static const char *const precision_names[] = {"fp32", "bf16", "fp16"};

const char *trit_precision_name(trit_precision p) {
    return (unsigned)p < sizeof precision_names / sizeof precision_names[0] ? precision_names[p] : "invalid";
}

trit_status trit_precision_parse(const char *name, trit_precision *out) {
    for (int i = 0; name && out && i < 3; i++)
        if (strcmp(name, precision_names[i]) == 0) {
            *out = (trit_precision)i;
            return TRIT_OK;
        }
    return trit_error(TRIT_ERR_INVALID, "precision must be fp32, bf16 or fp16, got '%s'", name ? name : "(null)");
}

trit_compute_policy trit_precision_policy(trit_precision p, trit_matmul_precision matmul) {
    switch (p) {
    case TRIT_PRECISION_BF16: return (trit_compute_policy){TRIT_F32, TRIT_BF16, TRIT_MATMUL_MEDIUM};
    case TRIT_PRECISION_FP16: return (trit_compute_policy){TRIT_F32, TRIT_F16, matmul};
    case TRIT_PRECISION_FP32:
    default: return (trit_compute_policy){TRIT_F32, TRIT_F32, matmul};
    }
}

trit_status trit_gpt_attach_quantized(trit_gpt *m, int i, trit_tensor *q) {
    if (!m || !q || i < 0 || i >= m->n_tensors) {
        trit_tensor_free(q);
        return trit_error(TRIT_ERR_INVALID, "trit_gpt_attach_quantized: need a model, a tensor index in [0, %d) and a "
                          "tensor", m ? m->n_tensors : 0);
    }
    const trit_tensor *t = m->tensors[i];
    if (!q->quant || !trit_tensor_same_shape(q, t) || !trit_tensor_is_contiguous(q)) {
        trit_tensor_free(q);
        return trit_error(TRIT_ERR_SHAPE, "trit_gpt_attach_quantized: '%s' needs a contiguous quantized tensor of its "
                          "own shape", t->name);
    }
    if (!m->quantized && !(m->quantized = calloc((size_t)m->n_tensors, sizeof *m->quantized))) {
        trit_tensor_free(q);
        return trit_error(TRIT_ERR_NOMEM, "trit_gpt_attach_quantized: out of memory");
    }
    trit_tensor_free(m->quantized[i]);
    m->quantized[i] = q;
    return TRIT_OK;
}

const trit_tensor *trit_gpt_quantized(const trit_gpt *m, int i) {
    return m && m->quantized && i >= 0 && i < m->n_tensors ? m->quantized[i] : NULL;
}

trit_tensor *trit_gpt_detach_quantized(trit_gpt *m, int i) {
    if (!m || !m->quantized || i < 0 || i >= m->n_tensors) return NULL;
    trit_tensor *q = m->quantized[i];
    m->quantized[i] = NULL;
    return q;
}

const trit_flat *trit_gpt_flat(const trit_gpt *m) { return m ? m->flat : NULL; }

trit_status trit_gpt_init_values(const trit_gpt *m, int i, uint64_t seed, int64_t first, int64_t n, float *out) {
    if (!m || !out || i < 0 || i >= m->n_tensors || first < 0 || n < 0 || first + n > trit_tensor_numel(m->tensors[i]))
        return trit_error(TRIT_ERR_INVALID, "trit_gpt_init_values: no parameter %d or elements [%lld, %lld) outside it", i,
                          (long long)first, (long long)(first + n));
    const trit_tensor *t = m->tensors[i];
    switch ((init_kind)m->init[i]) {
    case INIT_NORMAL:
    case INIT_RESIDUAL:  // element k is Philox (seed, name, k) whatever the span asked for
        trit_rng_fill_normal(out, n, seed, trit_gpt_name_stream(t->name), (uint64_t)first, 0.0f,
                             (float)(m->init[i] == INIT_NORMAL ? m->std : m->std_resid));
        break;
    case INIT_ZERO:
    case INIT_ONE:
        for (int64_t k = 0; k < n; k++) out[k] = m->init[i] == INIT_ONE ? 1.0f : 0.0f;
        break;
    case INIT_KAIMING: {
        const float bound = (float)trit_gpt_kaiming_bound(t);
        trit_rng_fill_uniform(out, n, seed, trit_gpt_name_stream(t->name), (uint64_t)first, -bound, bound);
        break;
    }
    }
    return TRIT_OK;
}

trit_status trit_gpt_attach_grads(trit_gpt *m) {
    if (!m) return trit_error(TRIT_ERR_INVALID, "trit_gpt_attach_grads: NULL model");
    return trit_flat_attach_grads(m->flat, TRIT_F32);
}

trit_status trit_gpt_set_recompute_blocks(trit_gpt *m, trit_recompute_policy policy, int64_t n_blocks) {
    if (!m) return trit_error(TRIT_ERR_INVALID, "trit_gpt_set_recompute: NULL model");
    if (policy < TRIT_RECOMPUTE_NONE || policy > TRIT_RECOMPUTE_MLP)
        return trit_error(TRIT_ERR_INVALID, "gpt: unknown recompute policy %d (TRIT_RECOMPUTE_NONE, _BLOCK, _ATTN or "
                          "_MLP)", (int)policy);
    if (n_blocks < 0) return trit_error(TRIT_ERR_INVALID, "gpt: recompute of %lld blocks", (long long)n_blocks);
    m->recompute = policy;
    m->recompute_blocks = n_blocks;
    return TRIT_OK;
}

trit_status trit_gpt_set_recompute(trit_gpt *m, trit_recompute_policy policy) {
    return trit_gpt_set_recompute_blocks(m, policy, INT64_MAX);
}

trit_status trit_gpt_set_qat(trit_gpt *m, const trit_fake_quant_spec *weights, const trit_fake_quant_spec *acts) {
    if (!m) return trit_error(TRIT_ERR_INVALID, "trit_gpt_set_qat: NULL model");
    m->qat_weights = weights != NULL;
    m->qat_acts = acts != NULL;
    if (weights) m->qat_w = *weights;
    if (acts) m->qat_a = *acts;
    return TRIT_OK;
}
