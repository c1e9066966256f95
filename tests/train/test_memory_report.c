// The memory report's GEMM workspace comes from the kernels: for a GPT graph under each compute
// policy and at each CPU level this machine has, it is the kernels' per-thread plan
// (kernels/gemm_scratch.h) times the threads; and a thread that runs a graph holds no more
// packing memory than the report gives it, also when a 16-bit output with a deep K makes the
// kernel pack more than the fp32 blocking bound (which the report used to give on every path).
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/gemm_blocking.h"
#include "kernels/gemm_scratch.h"
#include "kernels/thread_buffer.h"
#include "trit/bench.h"
#include "trit/trit.h"
#include "scratch.h"

static const trit_compute_policy POLICIES[] = {
    {TRIT_F32, TRIT_F32, TRIT_MATMUL_HIGHEST},
    {TRIT_F32, TRIT_BF16, TRIT_MATMUL_HIGHEST},
    {TRIT_F32, TRIT_F16, TRIT_MATMUL_HIGHEST},
    {TRIT_F32, TRIT_F32, TRIT_MATMUL_HIGH},
};

// The kernels' plan for a GPT's matrices under policy p.
static size_t kernels_say(const trit_gpt *m, const trit_compute_policy *p) {
    int64_t shapes[64][2];
    int n = 0;
    for (int i = 0; i < trit_gpt_num_tensors(m); i++) {
        const trit_tensor *t = trit_gpt_tensor(m, i);
        if (t->ndim == 2) shapes[n][0] = t->shape[0], shapes[n][1] = t->shape[1], n++;
    }
    const trit_gemm_workload w = {p->activation, p->matmul, &shapes[0][0], n, false};
    trit_gemm_scratch s;
    assert_int_equal(trit_gemm_scratch_plan(&w, &s), TRIT_OK);
    return s.bytes;
}

static void test_report_takes_the_kernels_figures(void **state) {
    (void)state;
    const trit_cpu_isa saved = trit_cpu_level();
    const trit_cpu_isa levels[] = {TRIT_CPU_REF, TRIT_CPU_AVX2, TRIT_CPU_AVX512};
    trit_gpt_config c = trit_gpt_config_default();
    c.vocab_size = 64, c.seq_len = 16, c.n_layer = 2, c.n_head = 2, c.n_embd = 32;
    for (size_t p = 0; p < sizeof POLICIES / sizeof POLICIES[0]; p++) {
        trit_gpt *m = trit_gpt_new(&c, 3);
        assert_non_null(m);
        assert_int_equal(trit_gpt_set_policy(m, &POLICIES[p]), TRIT_OK);
        trit_gpt_graph gg;
        assert_int_equal(trit_gpt_build_train(m, 2, 16, &gg), TRIT_OK);
        for (size_t l = 0; l < sizeof levels / sizeof levels[0]; l++) {
            if (levels[l] > trit_cpu_detected_level()) continue;
            assert_int_equal(trit_cpu_set_level(levels[l]), TRIT_OK);
            trit_memory_report r1, r2;
            assert_int_equal(trit_memory_report_make(gg.graph, NULL, 1, &r1), TRIT_OK);
            assert_int_equal(trit_memory_report_make(gg.graph, NULL, 2, &r2), TRIT_OK);
            const size_t want = kernels_say(m, &POLICIES[p]);
            if (r1.workspace != want)
                fail_msg("policy %zu at %s: report %zu bytes, kernels %zu", p, trit_cpu_level_name(levels[l]),
                         r1.workspace, want);
            assert_int_equal(r2.workspace, 2 * want);
            if (levels[l] == TRIT_CPU_REF) assert_int_equal(want, 0);
            // An fp32 graph on the AVX2 kernels: one KC x (NC + MC) buffer of the AVX2 file.
            if (levels[l] == TRIT_CPU_AVX2 && p == 0)
                assert_int_equal(want, trit_gemm_pack_bytes_max(&trit_gemm_blocking_avx2));
        }
        trit_gpt_graph_free(&gg);
        trit_gpt_free(m);
    }
    assert_int_equal(trit_cpu_set_level(saved), TRIT_OK);
}

typedef struct run {
    trit_graph *g;
    size_t held;
} run;

static void *forward_backward(void *arg) {
    run *r = arg;
    assert_int_equal(trit_graph_forward(r->g), TRIT_OK);
    assert_int_equal(trit_graph_backward(r->g), TRIT_OK);
    r->held = trit_thread_buffer_bytes();
    return NULL;
}

// A bf16 linear with K = 70000 whose output feeds another: its 16-bit output packs B for all of K, more than the fp32 C
// bound of the AVX2 file. A fresh thread running the graph alone holds what the report says or
// less.
static void test_thread_holds_no_more_than_reported(void **state) {
    (void)state;
    enum { ROWS = 16, N = 16, K = 70000 };
    if (trit_cpu_level() == TRIT_CPU_REF) {
        printf("  the portable kernels (TRIT_CPU=ref or no AVX2) pack nothing: nothing to check\n");
        skip();
    }
    const trit_compute_policy p = {TRIT_F32, TRIT_BF16, TRIT_MATMUL_HIGHEST};
    trit_graph *g = trit_graph_new_policy(&p);
    assert_non_null(g);
    trit_tensor *x = trit_graph_input(g, TRIT_F32, 2, (const int64_t[]){ROWS, K}, "x");
    trit_tensor *w = trit_tensor_new_param(TRIT_F32, 2, (const int64_t[]){N, K}, "w");
    assert_non_null(w);
    assert_int_equal(trit_tensor_fill_normal(w, 0.0, 0.01, 1, 1), TRIT_OK);
    trit_tensor *w2 = trit_tensor_new_param(TRIT_F32, 2, (const int64_t[]){4, N}, "w2");
    assert_non_null(w2);
    assert_int_equal(trit_tensor_fill_normal(w2, 0.0, 0.1, 1, 3), TRIT_OK);
    // The first linear's output is a matmul input, so it is stored in bf16: a 16-bit C.
    trit_tensor *loss = trit_mean(g, trit_linear(g, trit_linear(g, x, w, NULL), w2, NULL), 0, NULL, false);
    assert_int_equal(trit_graph_compile(g, loss), TRIT_OK);
    assert_int_equal(trit_tensor_fill_normal(x, 0.0, 1.0, 2, 2), TRIT_OK);
    trit_threads_set(1);
    trit_memory_report rep;
    assert_int_equal(trit_memory_report_make(g, NULL, 1, &rep), TRIT_OK);
    run r = {g, 0};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, forward_backward, &r), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    trit_threads_set(0);
    printf("  one thread held %zu bytes of GEMM packing; the report gives %zu\n", r.held, rep.workspace);
    if (trit_cpu_level() == TRIT_CPU_AVX2) assert_true(r.held > trit_gemm_pack_bytes_max(&trit_gemm_blocking_avx2));
    assert_true(r.held > 0);
    assert_true(r.held <= rep.workspace);
    trit_graph_free(g);
    trit_tensor_free(w);
    trit_tensor_free(w2);
}

// The optimizer line counts the state's own bytes: AdamW 8 per element; AdamW8bit 2 codes per
// element plus two f32 scales per block of 256 for tensors of 4096 values or more, 8 below.
static void test_optimizer_bytes(void **state) {
    (void)state;
    trit_gpt_config c = trit_gpt_config_default();
    c.vocab_size = 64, c.seq_len = 16, c.n_layer = 2, c.n_head = 2, c.n_embd = 32;
    trit_gpt *m = trit_gpt_new(&c, 3);
    assert_non_null(m);
    trit_gpt_graph gg;
    assert_int_equal(trit_gpt_build_train(m, 2, 16, &gg), TRIT_OK);
    const int n = trit_gpt_num_tensors(m);
    trit_tensor *params[64];
    size_t want32 = 0, want8 = 0, codes = 0, scales = 0;
    for (int i = 0; i < n; i++) {
        params[i] = trit_gpt_tensor(m, i);
        const size_t k = (size_t)trit_tensor_numel(params[i]);
        want32 += 8 * k;
        if (k < TRIT_OPTIM_8BIT_MIN_SIZE) {
            want8 += 8 * k;
            continue;
        }
        codes += 2 * k;
        scales += 2 * sizeof(float) * ((k + TRIT_OPTIM_8BIT_BLOCK - 1) / TRIT_OPTIM_8BIT_BLOCK);
    }
    want8 += codes + scales;
    assert_true(codes > 0 && want8 < want32);  // the config has tensors on both sides of 4096
    for (int k = 0; k < 2; k++) {
        const trit_optim_config oc = k ? trit_optim_adamw8bit(0.9, 0.95, 1e-8) : trit_optim_adamw(0.9, 0.95, 1e-8);
        trit_optim *o = trit_optim_new_gpt2(&oc, params, n, 0.1);
        assert_non_null(o);
        trit_memory_report r;
        assert_int_equal(trit_memory_report_make(gg.graph, o, 1, &r), TRIT_OK);
        assert_int_equal(r.optimizer, k ? want8 : want32);
        assert_int_equal(r.optimizer_codes, k ? codes : 0);
        assert_int_equal(r.optimizer_scales, k ? scales : 0);
        char buf[4096] = {0};
        FILE *f = fmemopen(buf, sizeof buf - 1, "w");
        trit_memory_report_print(&r, "", f);
        fclose(f);
        assert_true((strstr(buf, "quantized codes") != NULL) == (k == 1));
        trit_optim_free(o);
    }
    trit_gpt_graph_free(&gg);
    trit_gpt_free(m);
}

// GaLore's optimizer line: a projected (rows, cols) matrix holds 2 r max + r min values of state,
// the rest AdamW's 8 bytes per element; the projections' scratch is in the workspace. Offloaded,
// the report names the file's and the resident bytes and the total counts the resident part.
static void test_galore_and_offload_bytes(void **state) {
    (void)state;
    trit_gpt_config c = trit_gpt_config_default();
    c.vocab_size = 64, c.seq_len = 16, c.n_layer = 2, c.n_head = 2, c.n_embd = 32;
    trit_gpt *m = trit_gpt_new(&c, 3);
    assert_non_null(m);
    trit_gpt_graph gg;
    assert_int_equal(trit_gpt_build_train(m, 2, 16, &gg), TRIT_OK);
    const int n = trit_gpt_num_tensors(m);
    trit_tensor *params[64];
    trit_tensor *low[64];
    int nl = 0;
    size_t want = 0;
    const int64_t r = 4;
    for (int i = 0; i < n; i++) {
        params[i] = trit_gpt_tensor(m, i);
        const trit_tensor *t = params[i];
        if (t->ndim == 2 && strncmp(t->name, "h.", 2) == 0) {
            const int64_t a = t->shape[0], b = t->shape[1];
            want += sizeof(float) * (size_t)(2 * r * (a > b ? a : b) + r * (a < b ? a : b));
            low[nl++] = params[i];
        } else {
            want += 8 * (size_t)trit_tensor_numel(t);
        }
    }
    trit_tensor *rest[64];
    int nr = 0;
    for (int i = 0; i < n; i++)
        if (!(params[i]->ndim == 2 && strncmp(params[i]->name, "h.", 2) == 0)) rest[nr++] = params[i];
    const trit_optim_group g[2] = {{.params = low, .num_params = nl, .lr_scale = 1, .weight_decay = 0.1, .low_rank = true},
                                   {.params = rest, .num_params = nr, .lr_scale = 1}};
    const trit_optim_config oc = trit_optim_galore(r, 200, 0.25);
    trit_optim *o = trit_optim_new(&oc, g, 2);
    assert_non_null(o);
    trit_memory_report plain, r1;
    assert_int_equal(trit_memory_report_make(gg.graph, NULL, 1, &plain), TRIT_OK);
    assert_int_equal(trit_memory_report_make(gg.graph, o, 1, &r1), TRIT_OK);
    assert_int_equal(r1.optimizer, want);
    assert_true(r1.workspace > plain.workspace);
    assert_int_equal(r1.workspace - plain.workspace, trit_optim_scratch_bytes(o));
    char dir[512], path[600];
    tfile_mkdtemp(dir, sizeof dir, "memoff");
    snprintf(path, sizeof path, "%s/opt.offload", dir);
    assert_int_equal(trit_optim_offload(o, path), TRIT_OK);
    trit_memory_report r2;
    assert_int_equal(trit_memory_report_make(gg.graph, o, 1, &r2), TRIT_OK);
    assert_int_equal(r2.optimizer, want);
    assert_true(r2.optimizer_offloaded >= want && r2.optimizer_resident > 0 && r2.optimizer_resident < want / 2);
    assert_int_equal(r1.total - r2.total, r1.optimizer - r2.optimizer_resident);
    char buf[4096] = {0};
    FILE *f = fmemopen(buf, sizeof buf - 1, "w");
    trit_memory_report_print(&r2, "", f);
    fclose(f);
    assert_non_null(strstr(buf, "offloaded"));
    assert_non_null(strstr(buf, "resident at most"));
    trit_optim_free(o);
    tfile_rm_rf(dir);
    trit_gpt_graph_free(&gg);
    trit_gpt_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_report_takes_the_kernels_figures),
        cmocka_unit_test(test_thread_holds_no_more_than_reported),
        cmocka_unit_test(test_optimizer_bytes),
        cmocka_unit_test(test_galore_and_offload_bytes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
