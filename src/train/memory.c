// The memory report of a training setup: what the parameters, their gradients, the optimizer
// state, the graph's arena and the kernels' own buffers hold, read from the structures. A step
// allocates nothing, so after the first step this is the whole working set of the trainer, and
// the process's peak RSS should exceed it only by the program and its libraries.
#define _POSIX_C_SOURCE 200809L
#include "trit/bench.h"

#include "kernels/gemm_scratch.h"

#include <stdio.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

trit_status trit_memory_gemm_scratch(const trit_graph *g, size_t *per_thread) {
    if (!g || !per_thread) return trit_error(TRIT_ERR_INVALID, "trit_memory_gemm_scratch: NULL argument");
    const trit_compute_policy p = trit_graph_policy(g);
    const int n = trit_graph_num_params(g);
    int64_t *shapes = malloc(sizeof(int64_t) * 2 * (size_t)(n > 0 ? n : 1));
    if (!shapes) return trit_error(TRIT_ERR_NOMEM, "trit_memory_gemm_scratch: out of memory");
    // A matrix parameter (N, K) may be the weight of a linear whose output is in the activation
    // dtype: a product with a 16-bit C (the embeddings too, which makes this a bound).
    int n_c16 = 0;
    for (int i = 0; i < n; i++) {
        const trit_tensor *t = trit_graph_param(g, i);
        if (t && t->ndim == 2) shapes[2 * n_c16] = t->shape[0], shapes[2 * n_c16 + 1] = t->shape[1], n_c16++;
    }
    const trit_gemm_workload w = {.activation = p.activation, .matmul = p.matmul, .c16_shapes = shapes, .n_c16 = n_c16};
    trit_gemm_scratch s;
    const trit_status st = trit_gemm_scratch_plan(&w, &s);
    free(shapes);
    if (st == TRIT_OK) *per_thread = s.bytes;
    return st;
}

static void sum_total(trit_memory_report *r) {
    const size_t optimizer = r->optimizer_offloaded ? r->optimizer_resident : r->optimizer;
    const size_t params = r->params - r->params_offloaded + r->params_resident;
    r->total = params + r->grads + optimizer + r->arena + r->inputs + r->workspace;
}

trit_status trit_memory_report_make(const trit_graph *g, const trit_optim *o, int threads,
                                    trit_memory_report *out) {
    if (!g || !out) return trit_error(TRIT_ERR_INVALID, "trit_memory_report_make: graph and output must not be NULL");
    memset(out, 0, sizeof *out);
    trit_graph_memory gm;
    trit_status s = trit_graph_memory_report(g, &gm);
    if (s != TRIT_OK) return s;
    out->params = gm.param_bytes;
    out->params_offloaded = gm.streamed_bytes;
    out->params_resident = gm.streamed_resident;
    out->param_copies = gm.param_copy_bytes;
    out->num_params = gm.num_param_elems;
    out->grads = gm.grad_bytes;
    out->arena = gm.arena_bytes;
    out->inputs = gm.input_bytes;
    out->activations = gm.activation_bytes;
    for (int i = 0; o && i < trit_optim_num_state(o); i++) {
        trit_optim_state_buf b;
        s = trit_optim_get_state(o, i, &b);
        if (s != TRIT_OK) return s;
        // The values and scales themselves (the state block aligns each buffer to 64 bytes).
        const size_t values = trit_dtype_nbytes(b.dtype, b.count), scales = sizeof(float) * (size_t)b.num_scales;
        out->optimizer += values + scales;
        if (b.num_scales > 0) out->optimizer_codes += values, out->optimizer_scales += scales;
    }
    trit_optim_offload_bytes(o, &out->optimizer_offloaded, &out->optimizer_resident);
    out->threads = threads > 0 ? threads : trit_threads_get();
    size_t per_thread = 0;
    if ((s = trit_memory_gemm_scratch(g, &per_thread)) != TRIT_OK) return s;
    out->workspace = (size_t)out->threads * per_thread + trit_optim_scratch_bytes(o);
    sum_total(out);
    return TRIT_OK;
}

trit_status trit_memory_report_add_graph(trit_memory_report *r, const trit_graph *g) {
    if (!r || !g) return trit_error(TRIT_ERR_INVALID, "trit_memory_report_add_graph: NULL argument");
    trit_graph_memory gm;
    trit_status s = trit_graph_memory_report(g, &gm);
    if (s != TRIT_OK) return s;
    r->arena += gm.arena_bytes;
    r->inputs += gm.input_bytes;
    r->activations += gm.activation_bytes;
    sum_total(r);
    return TRIT_OK;
}

static void line(FILE *fp, const char *prefix, const char *what, size_t bytes) {
    fprintf(fp, "%s%-12s %14zu bytes %10.2f MB\n", prefix, what, bytes, (double)bytes / 1e6);
}

void trit_memory_report_print(const trit_memory_report *r, const char *prefix, FILE *fp) {
    if (!r || !fp) return;
    if (!prefix) prefix = "";
    line(fp, prefix, "parameters", r->params);
    if (r->params_offloaded)
        fprintf(fp, "%s(parameters: frozen weights offloaded %.2f MB in a memory-mapped file, resident at most "
                "%.2f MB: one weight at a time)\n", prefix, (double)r->params_offloaded / 1e6,
                (double)r->params_resident / 1e6);
    line(fp, prefix, "gradients", r->grads);
    line(fp, prefix, "optimizer", r->optimizer);
    if (r->optimizer_codes)
        fprintf(fp, "%s(optimizer: quantized codes %.2f MB + block scales %.2f MB, other state %.2f MB)\n",
                prefix, (double)r->optimizer_codes / 1e6, (double)r->optimizer_scales / 1e6,
                (double)(r->optimizer - r->optimizer_codes - r->optimizer_scales) / 1e6);
    if (r->optimizer_offloaded)
        fprintf(fp, "%s(optimizer: offloaded %.2f MB in a memory-mapped file, resident at most %.2f MB: one "
                "parameter's state at a time)\n", prefix, (double)r->optimizer_offloaded / 1e6,
                (double)r->optimizer_resident / 1e6);
    line(fp, prefix, "arena", r->arena);
    line(fp, prefix, "inputs", r->inputs);
    line(fp, prefix, "workspace", r->workspace);
    line(fp, prefix, "total", r->total);
    fprintf(fp, "%s(forward values before liveness reuse: %.2f MB; workspace for %d thread%s)\n", prefix,
            (double)r->activations / 1e6, r->threads, r->threads == 1 ? "" : "s");
    if (r->num_params <= 0) return;
    // Per parameter: with 16-bit compute copies the stored parameters are the fp32 master.
    const double n = (double)r->num_params;
    if (r->param_copies)
        fprintf(fp, "%sper parameter: weights %.2f B (compute copies in the arena), master %.2f B, gradients %.2f B, "
                "optimizer %.2f B\n", prefix, (double)r->param_copies / n, (double)r->params / n, (double)r->grads / n,
                (double)r->optimizer / n);
    else
        fprintf(fp, "%sper parameter: weights %.2f B%s, gradients %.2f B, optimizer %.2f B\n", prefix,
                (double)r->params / n, r->params < (size_t)(4 * r->num_params) ? " (no master copy)" : "",
                (double)r->grads / n, (double)r->optimizer / n);
    fprintf(fp, "%sactivations: %.2f MB planned in the arena (%.2f MB of forward values before reuse)\n", prefix,
            (double)(r->arena - r->param_copies) / 1e6, (double)r->activations / 1e6);
}

bool trit_peak_rss_reset(void) {
#ifdef __GLIBC__
    malloc_trim(0);  // hand freed heap pages back first, so the new peak starts from what is in use
#endif
    FILE *f = fopen("/proc/self/clear_refs", "w");  // "5": reset the peak resident set size (Linux 4.0)
    if (!f) return false;
    const bool ok = fputs("5", f) >= 0;
    return fclose(f) == 0 && ok;
}

size_t trit_peak_rss_bytes(void) {
    FILE *f = fopen("/proc/self/status", "r");
    if (f) {
        char buf[256];
        unsigned long long kb = 0;
        bool found = false;
        while (fgets(buf, sizeof buf, f))
            if (sscanf(buf, "VmHWM: %llu kB", &kb) == 1) {
                found = true;
                break;
            }
        fclose(f);
        if (found) return (size_t)kb * 1024;
    }
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) == 0 && ru.ru_maxrss > 0) return (size_t)ru.ru_maxrss * 1024;  // Linux: kB
    return 0;
}
