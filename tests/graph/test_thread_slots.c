// Per-thread scratch under a changing affinity: the slot count ops plan scratch by is fixed at
// first use, so a graph compiled while the process was bound to one core and run after the
// binding widened (taskset, MPI) uses no more threads than it planned for, and gives the bits a
// one-thread run gives (attention and flash attention, forward and backward).
#define _GNU_SOURCE
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <omp.h>
#include <stdio.h>
#include <string.h>

#include "trit/trit.h"

enum { B = 2, T = 48, C = 32, H = 4 };

typedef struct attn_graph {
    trit_graph *g;
    trit_tensor *q, *k, *v, *y;
} attn_graph;

static attn_graph build(bool flash) {
    attn_graph a;
    const int64_t s[3] = {B, T, C};
    a.g = trit_graph_new(TRIT_F32);
    a.q = trit_tensor_new_param(TRIT_F32, 3, s, "q");
    a.k = trit_tensor_new_param(TRIT_F32, 3, s, "k");
    a.v = trit_tensor_new_param(TRIT_F32, 3, s, "v");
    trit_tensor_fill_normal(a.q, 0, 1, 1, 1), trit_tensor_fill_normal(a.k, 0, 1, 1, 2), trit_tensor_fill_normal(a.v, 0, 1, 1, 3);
    a.y = flash ? trit_flash_attention(a.g, a.q, a.k, a.v, H) : trit_attention(a.g, a.q, a.k, a.v, H);
    trit_tensor *loss = trit_sum(a.g, trit_mul(a.g, a.y, a.y), 0, NULL, false);
    assert_int_equal(trit_graph_compile(a.g, loss), TRIT_OK);
    return a;
}

static void run(attn_graph *a, float *out) {
    trit_graph_zero_grad(a->g);
    assert_int_equal(trit_graph_forward(a->g), TRIT_OK);
    assert_int_equal(trit_graph_backward(a->g), TRIT_OK);
    memcpy(out, a->q->grad->data, sizeof(float) * B * T * C);
}

static void drop(attn_graph *a) {
    trit_graph_free(a->g);
    trit_tensor_free(a->q), trit_tensor_free(a->k), trit_tensor_free(a->v);
}

static void test_narrow_then_wide(void **state) {
    (void)state;
    cpu_set_t all, one;
    if (sched_getaffinity(0, sizeof all, &all) != 0 || CPU_COUNT(&all) < 2) {
        print_message("fewer than 2 CPUs: the affinity change cannot be tested here; skipped\n");
        skip();
    }
    CPU_ZERO(&one);
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &all)) {
            CPU_SET(c, &one);
            break;
        }
    assert_int_equal(sched_setaffinity(0, sizeof one, &one), 0);
    const int slots = trit_thread_slots();
    attn_graph g[2] = {build(false), build(true)};  // planned while bound to one core
    assert_int_equal(sched_setaffinity(0, sizeof all, &all), 0);
    trit_threads_set(CPU_COUNT(&all));
    assert_int_equal(trit_thread_slots(), slots);  // fixed, whatever the affinity
    assert_true(slots >= 1);
    static float wide[B * T * C], narrow[B * T * C];
    for (int f = 0; f < 2; f++) {
        run(&g[f], wide);
        trit_threads_set(1);
        run(&g[f], narrow);
        trit_threads_set(CPU_COUNT(&all));
        assert_memory_equal(wide, narrow, sizeof wide);
        drop(&g[f]);
    }
    trit_threads_set(0);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_narrow_then_wide)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
