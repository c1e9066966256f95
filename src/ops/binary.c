// add, sub, mul, div with numpy broadcasting. Either input may be broadcast (stride 0 on the
// dims it lacks) and either may be a strided view; the output is contiguous. Backward folds the
// gradient back onto each input's shape by summing over the dims that input was broadcast along.
#include "ops/binary.h"

#include "ops/op_build.h"
#include "ops/reduce.h"
#include "trit/ops.h"

#include <string.h>

enum {
    EW_ADD,
    EW_SUB,
    EW_MUL,
    EW_DIV,
    EW_G_MUL,    // g * z         (d(x*z)/dx)
    EW_G_DIV,    // g / z         (d(x/z)/dx)
    EW_G_DIV_B,  // -g * x / z^2  (d(x/z)/dz)
};

// ---- shape rule -------------------------------------------------------------------------

static trit_status binary_infer(const trit_tensor *const *in, int n_in, const void *attr, trit_tensor *out,
                                const char *name) {
    (void)attr;
    char x[128], y[128];
    if (n_in != 2) return trit_error(TRIT_ERR_INVALID, "%s: expected 2 inputs, got %d", name, n_in);
    if (in[0]->dtype != TRIT_REAL_DTYPE || in[1]->dtype != TRIT_REAL_DTYPE)
        return trit_error(TRIT_ERR_DTYPE, "%s: expected %s inputs (the graph's compute dtype), got %s %s and %s %s", name,
                          trit_dtype_name(TRIT_REAL_DTYPE), trit_dtype_name(in[0]->dtype),
                          trit_tensor_shape_str(in[0], x, sizeof x), trit_dtype_name(in[1]->dtype),
                          trit_tensor_shape_str(in[1], y, sizeof y));
    int ndim;
    int64_t shape[TRIT_MAX_DIMS];
    if (trit_broadcast_shape(in[0], in[1], &ndim, shape) != TRIT_OK)
        return trit_error(TRIT_ERR_SHAPE, "%s: expected shapes that broadcast, got %s and %s; size-1 or missing dims "
                          "broadcast, other sizes must match", name, trit_tensor_shape_str(in[0], x, sizeof x),
                          trit_tensor_shape_str(in[1], y, sizeof y));
    return trit_tensor_init_layout(out, TRIT_REAL_DTYPE, ndim, shape);
}

#define INFER(NAME)                                                                                           \
    static trit_status NAME##_infer(const trit_tensor *const *in, int n_in, const void *attr, trit_tensor *out) { \
        return binary_infer(in, n_in, attr, out, #NAME);                                                     \
    }
INFER(add)
INFER(sub)
INFER(mul)
INFER(div)

// ---- the element loop -------------------------------------------------------------------

// Layout of {out (contiguous), a, b} over the output shape.
static void binary_layout(const trit_tensor *a, const trit_tensor *b, const trit_tensor *out, trit_ew_layout *l) {
    int64_t st[3][TRIT_MAX_DIMS];
    trit_ew_contig_strides(out->ndim, out->shape, st[0]);
    trit_ew_bcast_strides(a->ndim, a->shape, a->strides, out->ndim, st[1]);
    trit_ew_bcast_strides(b->ndim, b->shape, b->strides, out->ndim, st[2]);
    trit_ew_layout_init(l, out->ndim, out->shape, 3, (const int64_t(*)[TRIT_MAX_DIMS])st);
}

#define EW_STORE(EXPR)          \
    do {                        \
        if (acc) y[j] += (EXPR); \
        else y[j] = (EXPR);     \
    } while (0)

#define EW_LOOP(EXPR)                                                \
    do {                                                             \
        if (sa == 1 && sb == 1) {                                    \
            for (int64_t j = 0; j < n; j++) {                        \
                const real x = a[j], z = b[j];                       \
                (void)x;                                             \
                EW_STORE(EXPR);                                      \
            }                                                        \
        } else {                                                     \
            for (int64_t j = 0; j < n; j++) {                        \
                const real x = a[j * sa], z = b[j * sb];             \
                (void)x;                                             \
                EW_STORE(EXPR);                                      \
            }                                                        \
        }                                                            \
    } while (0)

// One row: y[j] (+)= f(g[j], a[j*sa], b[j*sb]) for j < n; y and g are contiguous.
static void ew_row(int kind, bool acc, real *y, const real *g, const real *a, int64_t sa, const real *b, int64_t sb,
                   int64_t n) {
    switch (kind) {
    case EW_ADD: EW_LOOP(x + z); break;
    case EW_SUB: EW_LOOP(x - z); break;
    case EW_MUL: EW_LOOP(x * z); break;
    case EW_DIV: EW_LOOP(x / z); break;
    case EW_G_MUL: EW_LOOP(g[j] * z); break;
    case EW_G_DIV: EW_LOOP(g[j] / z); break;
    case EW_G_DIV_B: EW_LOOP(-g[j] * x / (z * z)); break;
    }
}

// y (+)= f(g, a, b) over the layout {y and g: operand 0, a: operand 1, b: operand 2}.
static void ew_apply(int kind, bool acc, const trit_ew_layout *l, real *y, const real *g, const real *a,
                     const real *b) {
    const int last = l->ndim - 1;
    const int64_t n = l->shape[last], rows = trit_ew_rows(l);
    const int64_t sa = l->strides[1][last], sb = l->strides[2][last];
#pragma omp parallel for schedule(static) if (l->numel >= TRIT_EW_PAR_MIN)
    for (int64_t r = 0; r < rows; r++) {
        int64_t off[3];
        trit_ew_row_offsets(l, r, off);
        ew_row(kind, acc, y + off[0], g ? g + off[0] : NULL, a + off[1], sa, b + off[2], sb, n);
    }
}

static const real *in_ptr(const trit_tensor *t) { return (const real *)t->data + t->offset; }

static bool same_contiguous(const trit_tensor *a, const trit_tensor *b, const trit_tensor *out) {
    return trit_tensor_same_shape(a, out) && trit_tensor_same_shape(b, out) && trit_tensor_is_contiguous(a) &&
           trit_tensor_is_contiguous(b);
}

// ---- forward ----------------------------------------------------------------------------

enum { LOWP_CHUNK = 1024 };  // values of a 16-bit output summed in f32 at a time, on the stack

// add_act's 16-bit output (graph/lowp.c): the sums of each chunk of a row in f32, rounded once.
static void add_lowp(const trit_ew_layout *l, trit_tensor *out, const real *a, const real *b) {
#ifdef TRIT_REAL_F64
    (void)l, (void)out, (void)a, (void)b;
#else
    const int last = l->ndim - 1;
    const int64_t n = l->shape[last], per_row = (n + LOWP_CHUNK - 1) / LOWP_CHUNK, items = trit_ew_rows(l) * per_row;
    const int64_t sa = l->strides[1][last], sb = l->strides[2][last];
    const trit_dtype_traits *tr = trit_dtype_traits_of(out->dtype);
    char *y = out->data;
#pragma omp parallel for schedule(static) if (l->numel >= TRIT_EW_PAR_MIN)
    for (int64_t it = 0; it < items; it++) {
        int64_t off[3];
        trit_ew_row_offsets(l, it / per_row, off);
        const int64_t j0 = it % per_row * LOWP_CHUNK, m = n - j0 < LOWP_CHUNK ? n - j0 : LOWP_CHUNK;
        float sum[LOWP_CHUNK];
        ew_row(EW_ADD, false, sum, NULL, a + off[1] + j0 * sa, sa, b + off[2] + j0 * sb, sb, m);
        tr->from_f32(y + trit_dtype_nbytes(out->dtype, off[0] + j0), sum, m, NULL, off[0] + j0);
    }
#endif
}

static trit_status binary_forward(const trit_op_call *c, int kind) {
    const trit_tensor *a = c->in[0], *b = c->in[1];
    const int64_t n = trit_tensor_numel(c->out);
    if (n == 0) return TRIT_OK;
    real *y = c->out->data;
    const real *pa = in_ptr(a), *pb = in_ptr(b);
    if (trit_op_lowp_ok(c->out->dtype)) {  // add_act only (lowp_output)
        trit_ew_layout l;
        binary_layout(a, b, c->out, &l);
        add_lowp(&l, c->out, pa, pb);
        return TRIT_OK;
    }
    if (same_contiguous(a, b, c->out)) {  // the common case: one flat loop the compiler vectorizes
        const trit_ew_layout flat = {.ndim = 1, .nops = 3, .numel = n, .shape = {n}, .strides = {{1}, {1}, {1}}};
        ew_apply(kind, false, &flat, y, NULL, pa, pb);
        return TRIT_OK;
    }
    trit_ew_layout l;
    binary_layout(a, b, c->out, &l);
    ew_apply(kind, false, &l, y, NULL, pa, pb);
    return TRIT_OK;
}

static trit_status add_forward(const trit_op_call *c) { return binary_forward(c, EW_ADD); }
static trit_status sub_forward(const trit_op_call *c) { return binary_forward(c, EW_SUB); }
static trit_status mul_forward(const trit_op_call *c) { return binary_forward(c, EW_MUL); }
static trit_status div_forward(const trit_op_call *c) { return binary_forward(c, EW_DIV); }

// ---- backward ---------------------------------------------------------------------------

// gin (input i's shape, contiguous) += scale * src (output's shape, contiguous), summed over the
// dims input i was broadcast along.
static void fold_into(real *gin, const trit_tensor *in, const real *src, const trit_tensor *out, double scale,
                      bool store) {
    int64_t gstr[TRIT_MAX_DIMS], dst[TRIT_MAX_DIMS], sst[TRIT_MAX_DIMS];
    trit_ew_contig_strides(in->ndim, in->shape, gstr);
    trit_ew_bcast_strides(in->ndim, in->shape, gstr, out->ndim, dst);
    trit_ew_contig_strides(out->ndim, out->shape, sst);
    R(trit_reduce_sum_strided)(gin, dst, src, sst, out->ndim, out->shape, scale, !store);
}

// d loss / d in[i] for one input: `kind` computes the element term from (g, x, z), where x, z are
// (a, b), or (b, a) when `swap`. An input of the output's shape takes the term straight into its
// gradient; a broadcast one has it formed in scratch and folded. Stored where the call asks.
static void grad_term(const trit_op_call *c, int i, int kind, const trit_ew_layout *l, bool swap) {
    const trit_tensor *x = c->in[swap ? 1 : 0], *z = c->in[swap ? 0 : 1], *in = c->in[i];
    const real *g = c->gout->data;
    const bool store = c->store_inputs & TRIT_IN(i);
    trit_ew_layout sl = *l;
    if (swap) {
        memcpy(sl.strides[1], l->strides[2], sizeof sl.strides[1]);
        memcpy(sl.strides[2], l->strides[1], sizeof sl.strides[2]);
    }
    if (trit_tensor_same_shape(in, c->out)) {
        ew_apply(kind, !store, &sl, c->gin[i]->data, g, in_ptr(x), in_ptr(z));
    } else {
        real *t = c->scratch;
        ew_apply(kind, false, &sl, t, g, in_ptr(x), in_ptr(z));
        fold_into(c->gin[i]->data, in, t, c->out, 1.0, store);
    }
}

// An empty output: a broadcast input's gradient is zeros (stored ones are zeroed).
static trit_status zero_stored_inputs(const trit_op_call *c) {
    trit_op_zero_stored(c, 0);
    trit_op_zero_stored(c, 1);
    return TRIT_OK;
}

// add and sub: the gradient is gout itself (negated for sub's b), folded where broadcast. in[0]'s
// gradient may be gout's own buffer (bwd_in_place), and so may add's in[1]'s (bwd_passes_b),
// which then already holds it.
static void pass_through(const trit_op_call *c, int i, double sign) {
    const trit_tensor *in = c->in[i];
    real *gi = c->gin[i]->data;
    const real *g = c->gout->data;
    const bool store = c->store_inputs & TRIT_IN(i);
    if (gi == g) return;
    if (trit_tensor_same_shape(in, c->out)) {
        const int64_t n = trit_tensor_numel(c->out);
        const real s = (real)sign;
#pragma omp parallel for schedule(static) if (n >= TRIT_EW_PAR_MIN)
        for (int64_t j = 0; j < n; j++) gi[j] = store ? s * g[j] : gi[j] + s * g[j];
    } else {
        fold_into(gi, in, g, c->out, sign, store);
    }
}

static trit_status add_backward(const trit_op_call *c) {
    if (trit_tensor_numel(c->out) == 0) return zero_stored_inputs(c);
    if (c->gin[0]) pass_through(c, 0, 1.0);
    if (c->gin[1]) pass_through(c, 1, 1.0);
    return TRIT_OK;
}

static trit_status sub_backward(const trit_op_call *c) {
    if (trit_tensor_numel(c->out) == 0) return zero_stored_inputs(c);
    if (c->gin[0]) pass_through(c, 0, 1.0);
    if (c->gin[1]) pass_through(c, 1, -1.0);
    return TRIT_OK;
}

static void mul_div_layout(const trit_op_call *c, trit_ew_layout *l) {
    const int64_t n = trit_tensor_numel(c->out);
    if (same_contiguous(c->in[0], c->in[1], c->out)) {
        *l = (trit_ew_layout){.ndim = 1, .nops = 3, .numel = n, .shape = {n}, .strides = {{1}, {1}, {1}}};
        return;
    }
    binary_layout(c->in[0], c->in[1], c->out, l);
}

static trit_status mul_backward(const trit_op_call *c) {
    if (trit_tensor_numel(c->out) == 0) return zero_stored_inputs(c);
    trit_ew_layout l;
    mul_div_layout(c, &l);
    if (c->gin[0]) grad_term(c, 0, EW_G_MUL, &l, false);  // g * b
    if (c->gin[1]) grad_term(c, 1, EW_G_MUL, &l, true);   // g * a
    return TRIT_OK;
}

static trit_status div_backward(const trit_op_call *c) {
    if (trit_tensor_numel(c->out) == 0) return zero_stored_inputs(c);
    trit_ew_layout l;
    mul_div_layout(c, &l);
    if (c->gin[0]) grad_term(c, 0, EW_G_DIV, &l, false);    // g / b
    if (c->gin[1]) grad_term(c, 1, EW_G_DIV_B, &l, false);  // -g a / b^2
    return TRIT_OK;
}

// A broadcast input's gradient term is formed in scratch before it is folded.
static size_t binary_scratch(const trit_op_call *c) {
    if (trit_tensor_same_shape(c->in[0], c->out) && trit_tensor_same_shape(c->in[1], c->out)) return 0;
    return (size_t)trit_tensor_numel(c->out) * sizeof(real);
}

const trit_op_def R(trit_op_add) = {
    .name = "add", .infer = add_infer, .forward = add_forward, .backward = add_backward,
    .bwd_unread = TRIT_IN(0) | TRIT_IN(1) | TRIT_OUT, .bwd_stores = TRIT_IN(0) | TRIT_IN(1),
    .bwd_in_place = true, .bwd_passes_b = true,
};
// The same add, its output stored in the activation dtype where every reader takes 16 bits.
const trit_op_def R(trit_op_add_act) = {
    .name = "add_act", .infer = add_infer, .forward = add_forward, .backward = add_backward,
    .bwd_unread = TRIT_IN(0) | TRIT_IN(1) | TRIT_OUT, .lowp_output = true, .bwd_stores = TRIT_IN(0) | TRIT_IN(1),
    .bwd_in_place = true, .bwd_passes_b = true,
};
const trit_op_def R(trit_op_sub) = {
    .name = "sub", .infer = sub_infer, .forward = sub_forward, .backward = sub_backward,
    .bwd_unread = TRIT_IN(0) | TRIT_IN(1) | TRIT_OUT, .bwd_stores = TRIT_IN(0) | TRIT_IN(1),
    .bwd_in_place = true,
};
const trit_op_def R(trit_op_mul) = {
    .name = "mul", .infer = mul_infer, .forward = mul_forward, .backward = mul_backward,
    .scratch_bytes = binary_scratch, .bwd_stores = TRIT_IN(0) | TRIT_IN(1),
};
const trit_op_def R(trit_op_div) = {
    .name = "div", .infer = div_infer, .forward = div_forward, .backward = div_backward,
    .scratch_bytes = binary_scratch, .bwd_stores = TRIT_IN(0) | TRIT_IN(1),
};

// ---- graph constructors -----------------------------------------------------------------
// Float build only: this file is compiled twice (base/real.h), the public API must exist once.
#ifndef TRIT_REAL_F64

// The four constructors differ only in their op.
#define BINARY_CONSTRUCTOR(NAME)                                              \
    trit_tensor *trit_##NAME(trit_graph *g, trit_tensor *a, trit_tensor *b) { \
        trit_tensor *in[2] = {a, b};                                          \
        return TRIT_APPLY(g, trit_op_##NAME, 2, in, NULL);                    \
    }

BINARY_CONSTRUCTOR(add)
BINARY_CONSTRUCTOR(add_act)
BINARY_CONSTRUCTOR(sub)
BINARY_CONSTRUCTOR(mul)
BINARY_CONSTRUCTOR(div)

#endif
