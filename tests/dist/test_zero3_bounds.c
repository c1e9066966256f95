// ZeRO-3's shards with frozen weights (trit_zero3_shard_bounds, src/dist/shard.c), without MPI:
// against a recomputation element by element (each element's cost in an array, its prefix sums
// scanned for each cut, each trained value's gradient element looked up by walking its tensor),
// on layouts like a LoRA run's (large frozen matrices, small trained ones between them), a
// --freeze run's, 16-bit trained weights whose padding differs from their f32 gradients', and a
// frozen tensor of another dtype (kept whole, outside the block). Also: with every value trained
// the cuts are trit_zero_shard_range's; each rank's bytes are within one line of an even share;
// a trained value's gradient is in rank r's gradient shard exactly when the value is in rank r's
// part of the block; and trained parameters of two dtypes are refused with a message.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "trit/trit.h"

#include <stdlib.h>
#include <string.h>

enum { MAXT = 24, MAXR = 8 };

typedef struct spec {
    trit_dtype dt;
    int64_t n;
    bool trained;
} spec;

typedef struct layout {
    trit_tensor *t[MAXT];
    int n;
    trit_flat *f;
} layout;

static void make(layout *l, const spec *s, int n) {
    l->n = n;
    for (int i = 0; i < n; i++) {
        const int64_t shape[1] = {s[i].n};
        l->t[i] = trit_tensor_new(s[i].dt, 1, shape);
        assert_non_null(l->t[i]);
        snprintf(l->t[i]->name, sizeof l->t[i]->name, "t%d", i);
        l->t[i]->flags |= TRIT_FLAG_PARAM | (s[i].trained ? 0u : TRIT_FLAG_FROZEN);
    }
    l->f = trit_flat_new(l->t, n);
    assert_non_null(l->f);
    assert_int_equal(trit_flat_attach_grads(l->f, TRIT_F32), TRIT_OK);
}

static void drop(layout *l) {
    trit_flat_free(l->f);
    for (int i = 0; i < l->n; i++) trit_tensor_free(l->t[i]);
}

// The reference: element costs in an array, cuts by scanning prefix sums, gradient elements by
// walking every trained value.
static void reference(const layout *l, trit_dtype dt, int ranks, int64_t *param, int64_t *grad) {
    size_t bytes = 0;
    const char *base = trit_flat_block(l->f, dt, &bytes);
    const int64_t es = (int64_t)trit_dtype_size(dt), count = (int64_t)bytes / es, line = 64 / es;
    int64_t *cost = calloc((size_t)count + 1, sizeof *cost);  // cost[x]: element x's bytes
    int64_t *gof = malloc(sizeof(int64_t) * ((size_t)count + 1)); // gradient element of value x, -1: none
    assert_non_null(cost);
    assert_non_null(gof);
    for (int64_t x = 0; x < count; x++) gof[x] = -1;
    int64_t grad_count = 0;
    trit_flat_grads(l->f, &grad_count);
    for (int i = 0; i < l->n; i++) {
        if (l->t[i]->dtype != dt) continue;
        const int64_t off = ((const char *)l->t[i]->data - base) / es;
        int64_t end = count;  // up to the next tensor of the block
        for (int j = 0; j < l->n; j++) {
            const int64_t o = ((const char *)l->t[j]->data - base) / es;
            if (l->t[j]->dtype == dt && o > off && o < end) end = o;
        }
        const bool trained = !(l->t[i]->flags & TRIT_FLAG_FROZEN);
        for (int64_t x = off; x < end; x++) cost[x] = es + (trained ? 12 : 0);
        for (int64_t k = 0; trained && k < trit_tensor_numel(l->t[i]); k++)
            gof[off + k] = trit_flat_grad_offset(l->f, i) + k;
    }
    int64_t total = 0;
    for (int64_t x = 0; x < count; x++) total += cost[x];
    param[0] = 0, param[ranks] = count;
    for (int r = 1; r < ranks; r++) {
        const int64_t target = total * r / ranks;
        int64_t c = 0, best = 0;
        for (int64_t x = 0; x <= count; c += x < count ? cost[x] : 0, x++)
            if (c <= target && x % line == 0) best = x;
        param[r] = best;
    }
    for (int r = 0; r <= ranks; r++) {
        grad[r] = grad_count;
        for (int64_t x = param[r]; x < count && r < ranks; x++)
            if (gof[x] >= 0) {
                grad[r] = gof[x];
                break;
            }
    }
    free(cost);
    free(gof);
}

// Each rank's bytes against an even share: within one line of the block's costliest elements.
static void check_balance(const layout *l, trit_dtype dt, int ranks, const int64_t *param) {
    size_t bytes = 0;
    trit_flat_block(l->f, dt, &bytes);
    const int64_t es = (int64_t)trit_dtype_size(dt), line = 64 / es;
    int64_t trained = 0, frozen = 0;  // values of the block, their padding with them, by lines
    for (int i = 0; i < l->n; i++) {
        if (l->t[i]->dtype != dt) continue;
        const int64_t padded = (trit_tensor_numel(l->t[i]) + line - 1) / line * line;
        *(l->t[i]->flags & TRIT_FLAG_FROZEN ? &frozen : &trained) += padded;
    }
    assert_int_equal((trained + frozen) * es, (int64_t)bytes);
    const double share = ((double)trained * (double)(es + 12) + (double)frozen * (double)es) / ranks;
    const double slack = (double)line * (double)(es + 12);
    for (int r = 0; r < ranks; r++) {
        // The rank's cost from its range: count its trained and frozen elements.
        double c = 0;
        for (int i = 0; i < l->n; i++) {
            if (l->t[i]->dtype != dt) continue;
            const int64_t off = ((const char *)l->t[i]->data - (const char *)trit_flat_block(l->f, dt, NULL)) / es;
            const int64_t padded = (trit_tensor_numel(l->t[i]) + line - 1) / line * line;
            const int64_t a = off > param[r] ? off : param[r], b = off + padded < param[r + 1] ? off + padded : param[r + 1];
            if (b > a) c += (double)(b - a) * (double)(es + (l->t[i]->flags & TRIT_FLAG_FROZEN ? 0 : 12));
        }
        // Each cut's cost is within a line below its target (floor(total r / N)): +-1 for the floors.
        assert_true(c <= share + slack + 1);
        assert_true(c >= share - slack - 1);
    }
}

// trit_zero3_shard_bounds against the reference and the properties, on 1 to MAXR ranks.
static void check(const spec *s, int n, trit_dtype dt) {
    layout l;
    make(&l, s, n);
    for (int ranks = 1; ranks <= MAXR; ranks++) {
        int64_t param[MAXR + 1], grad[MAXR + 1], rp[MAXR + 1], rg[MAXR + 1];
        trit_dtype got = TRIT_F64;
        assert_int_equal(trit_zero3_shard_bounds(l.f, ranks, &got, param, grad), TRIT_OK);
        assert_int_equal(got, dt);
        reference(&l, dt, ranks, rp, rg);
        for (int r = 0; r <= ranks; r++) {
            assert_int_equal(param[r], rp[r]);
            assert_int_equal(grad[r], rg[r]);
        }
        check_balance(&l, dt, ranks, param);
        // A trained value and its gradient on the same rank.
        const char *base = trit_flat_block(l.f, dt, NULL);
        const int64_t es = (int64_t)trit_dtype_size(dt);
        for (int i = 0; i < n; i++) {
            const int64_t g0 = trit_flat_grad_offset(l.f, i);
            if (g0 < 0) continue;
            const int64_t off = ((const char *)l.t[i]->data - base) / es;
            for (int64_t k = 0; k < trit_tensor_numel(l.t[i]); k++)
                for (int r = 0; r < ranks; r++)
                    assert_int_equal(off + k >= param[r] && off + k < param[r + 1],
                                     g0 + k >= grad[r] && g0 + k < grad[r + 1]);
        }
    }
    drop(&l);
}

// Every value trained, in f32: the cuts of trit_zero_shard_range.
static void test_all_trained_is_even_split(void **state) {
    (void)state;
    const spec s[] = {{TRIT_F32, 32, true}, {TRIT_F32, 3 * 32 * 32, true}, {TRIT_F32, 96, true},
                      {TRIT_F32, 32 * 32, true}, {TRIT_F32, 7, true}, {TRIT_F32, 12 * 32, true}};
    layout l;
    make(&l, s, 6);
    int64_t count = 0;
    trit_flat_grads(l.f, &count);
    for (int ranks = 1; ranks <= MAXR; ranks++) {
        int64_t param[MAXR + 1], grad[MAXR + 1];
        trit_dtype dt;
        assert_int_equal(trit_zero3_shard_bounds(l.f, ranks, &dt, param, grad), TRIT_OK);
        for (int r = 0; r < ranks; r++) {
            int64_t lo, hi;
            trit_zero_shard_range(count, ranks, r, &lo, &hi);
            assert_int_equal(param[r], lo);
            assert_int_equal(param[r + 1], hi);
            assert_int_equal(grad[r], lo);
            assert_int_equal(grad[r + 1], hi);
        }
    }
    drop(&l);
}

// A LoRA run's layout: per block a frozen bias, a frozen matrix, its small A and B trained.
static void test_lora_layout(void **state) {
    (void)state;
    const int64_t C = 64, r = 4;
    spec s[MAXT];
    int n = 0;
    s[n++] = (spec){TRIT_F32, C, false};  // ln_f
    for (int b = 0; b < 3; b++) {
        s[n++] = (spec){TRIT_F32, 4 * C * C, false};  // mlp matrices, frozen
        s[n++] = (spec){TRIT_F32, C, false};
        s[n++] = (spec){TRIT_F32, 3 * C * r, true};   // lora_B of c_attn
        s[n++] = (spec){TRIT_F32, r * C, true};       // lora_A
        s[n++] = (spec){TRIT_F32, 3 * C * C, false};  // c_attn
    }
    s[n++] = (spec){TRIT_F32, 40 * C, false};  // wte
    check(s, n, TRIT_F32);
}

// --freeze h.*.attn.*: frozen and trained runs of similar sizes, odd lengths (padding), and a
// frozen f16 tensor (another block: not counted).
static void test_freeze_layout(void **state) {
    (void)state;
    const spec s[] = {{TRIT_F32, 40, true},       {TRIT_F32, 4 * 40 * 40, true}, {TRIT_F16, 999, false},
                      {TRIT_F32, 3 * 40 * 40, false}, {TRIT_F32, 37, false},     {TRIT_F32, 4 * 40 * 40 + 3, true},
                      {TRIT_F32, 40 * 40, false},  {TRIT_F32, 1, true},          {TRIT_F32, 50 * 40, true}};
    check(s, 9, TRIT_F32);
}

// bf16 trained weights (no master copies) with lengths that pad differently in 2 bytes than
// their gradients in 4, and frozen bf16 ones between them.
static void test_bf16_layout(void **state) {
    (void)state;
    const spec s[] = {{TRIT_BF16, 40, true}, {TRIT_BF16, 40 * 120, false}, {TRIT_BF16, 3 * 40 * 40, true},
                      {TRIT_BF16, 17, true}, {TRIT_BF16, 40 * 40, false},  {TRIT_BF16, 12 * 40, true}};
    check(s, 6, TRIT_BF16);
}

// Trained parameters of two dtypes, and none trained: refused with a message.
static void test_refusals(void **state) {
    (void)state;
    const spec mixed[] = {{TRIT_F32, 64, true}, {TRIT_BF16, 64, true}};
    layout l;
    make(&l, mixed, 2);
    int64_t param[3], grad[3];
    trit_dtype dt;
    assert_int_equal(trit_zero3_shard_bounds(l.f, 2, &dt, param, grad), TRIT_ERR_UNSUPPORTED);
    assert_non_null(strstr(trit_last_error(), "the trained parameters mix dtypes ('t0' is f32, 't1' bf16)"));
    assert_non_null(strstr(trit_last_error(), "train with fp32 master weights"));
    drop(&l);
    const spec none[] = {{TRIT_F32, 64, false}};
    make(&l, none, 1);
    assert_int_not_equal(trit_zero3_shard_bounds(l.f, 2, &dt, param, grad), TRIT_OK);
    assert_non_null(strstr(trit_last_error(), "zero3: the model has no gradients"));
    drop(&l);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_all_trained_is_even_split),
        cmocka_unit_test(test_lora_layout),
        cmocka_unit_test(test_freeze_layout),
        cmocka_unit_test(test_bf16_layout),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
