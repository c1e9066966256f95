// The machine's limits, measured: the register-only multiply-add loops of the kernel table
// (kernels/peak.h) timed on 1 and N threads, and a streaming sum over a buffer far larger than
// the last-level cache. MFU and the decode's bandwidth fraction are taken against these figures.
//
// A compute figure is the best of short runs (RUN_S each) within a small time budget, a run's
// rate the sum over its threads of each thread's operations over its own CPU time: a thread that
// another process delays or shares a core with by time slices is not counted slower, so the
// figure is what N cores give with one thread each (two threads on the two hyper-threads of one
// core run at the same time and share its units: their sum is the core's rate). A read figure is
// the best pass by the wall clock, memory being shared by every core.
#define _POSIX_C_SOURCE 200809L  // clock_gettime
#include "trit/bench.h"

#include "kernels/kernel_table.h"
#include "kernels/peak.h"

#include <omp.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

enum { MIN_RUNS = 5, MAX_RUNS = 40 };
#define RUN_S 2e-3      // one timed run of a compute loop
#define BUDGET_S 0.04   // the runs of one compute figure (after about 5 ms of calibration)
#define READ_BUDGET_S 0.15

static double clock_s(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
static double now_s(void) { return clock_s(CLOCK_MONOTONIC); }

static volatile float sink_all;  // where the loops' sums go, so no run is dropped

// ---- the loops -----------------------------------------------------------------------------

static const char *kind_name(trit_dtype in) {
    return in == TRIT_F32 ? "fp32 FMA" : in == TRIT_BF16 ? "bf16 dot" : "int8 dot";
}

static trit_peak_kind kind_of(trit_dtype in) {
    return in == TRIT_F32 ? TRIT_PEAK_FP32 : in == TRIT_BF16 ? TRIT_PEAK_BF16 : TRIT_PEAK_INT8;
}

static const char *width_name(uint32_t needs) {
    return needs & TRIT_FEAT_AVX512 ? "AVX-512 zmm" : needs & TRIT_FEAT_AVX2 ? "AVX2 ymm" : "portable C";
}

// The features of `needs` that are missing, and whether the CPU lacks them or TRIT_CPU rules them out.
static void missing_features(uint32_t needs, char *buf, size_t n) {
    static const struct { uint32_t bit; const char *name; } names[] = {
        {TRIT_FEAT_AVX2, "avx2+fma"}, {TRIT_FEAT_AVX512, "avx512f/bw/vl/dq"},
        {TRIT_FEAT_AVX512_BF16, "avx512_bf16"}, {TRIT_FEAT_AVX512_VNNI, "avx512_vnni"},
    };
    const uint32_t usable = trit_cpu_usable_features(), detected = trit_cpu_detected_features();
    size_t k = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < sizeof names / sizeof names[0] && k < n; i++)
        if ((needs & names[i].bit) && !(usable & names[i].bit))
            k += (size_t)snprintf(buf + k, n - k, "%s%s (%s)", k ? ", " : "", names[i].name,
                                  detected & names[i].bit ? "ruled out by TRIT_CPU" : "this CPU lacks it");
}

int trit_bench_peak_loops(trit_peak_loop *out, int max) {
    int n_rows, n = 0;
    const trit_kernel_entry *t = trit_kernel_table(&n_rows);
    const uint32_t usable = trit_cpu_usable_features();
    for (int i = 0; i < n_rows; i++) {
        if (t[i].id != TRIT_KERNEL_PEAK) continue;
        if (n < max && out) {
            trit_peak_loop *l = &out[n];
            memset(l, 0, sizeof *l);
            l->row = i;
            l->kind = kind_of(t[i].in);
            snprintf(l->kernel, sizeof l->kernel, "%s", t[i].name);
            snprintf(l->label, sizeof l->label, "%s, %s", kind_name(t[i].in), width_name(t[i].needs));
            l->simd = t[i].needs != 0;
            l->usable = !(t[i].needs & ~usable);
            l->picked = trit_kernel_find(TRIT_KERNEL_PEAK, t[i].in, t[i].out) == &t[i];
            if (!l->usable) missing_features(t[i].needs, l->missing, sizeof l->missing);
        }
        n++;
    }
    return n < max || !out ? n : max;
}

// One run of fn on `threads` threads: the sum of the threads' operations/s on their own CPU clocks.
static trit_status time_run(trit_kernel_peak_fn *fn, int threads, int64_t iters, double *rate) {
    double total = 0, sink = 0;
    int ran = 0;
#pragma omp parallel num_threads(threads) reduction(+ : total, sink, ran)
    {
        float s = 0;
        const double t0 = clock_s(CLOCK_THREAD_CPUTIME_ID);
        const double ops = (double)fn(iters, &s);
        const double t = clock_s(CLOCK_THREAD_CPUTIME_ID) - t0;
        total += t > 0 ? ops / t : 0;
        sink += s;
        ran += 1;
    }
    *rate = total;
    sink_all = (float)sink;
    if (ran != threads)
        return trit_error(TRIT_ERR_STATE, "peak: asked OpenMP for %d threads and got %d (OMP_DYNAMIC or "
                          "OMP_THREAD_LIMIT?): unset them to measure %d", threads, ran, threads);
    return TRIT_OK;
}

// CPU seconds of the quickest of 3 calls fn(iters) on this thread.
static double quickest_call(trit_kernel_peak_fn *fn, int64_t iters) {
    double best = 1e30;
    for (int r = 0; r < 3; r++) {
        float s;
        const double t0 = clock_s(CLOCK_THREAD_CPUTIME_ID);
        fn(iters, &s);
        const double t = clock_s(CLOCK_THREAD_CPUTIME_ID) - t0;
        sink_all = s;
        if (t < best) best = t;
    }
    return best;
}

static trit_status measure_fn(trit_kernel_peak_fn *fn, int threads, double *ops_per_s) {
    // Calibrate on this thread: grow a call until the quickest of three lasts 0.25 ms (this also
    // brings the core's clock up), so one interrupted call cannot shrink the runs below.
    int64_t iters = 64;
    double t = quickest_call(fn, iters);
    while (t < 2.5e-4 && iters < ((int64_t)1 << 40)) t = quickest_call(fn, iters *= 4);
    const double scaled = (double)iters * RUN_S / (t > 1e-9 ? t : 1e-9);
    iters = scaled < 1 ? 1 : (int64_t)scaled;
    double best = 0, rate = 0;
    trit_status s;
    const double start = now_s();
    for (int run = 0; run < MAX_RUNS && (run < MIN_RUNS || now_s() - start < BUDGET_S); run++) {
        if ((s = time_run(fn, threads, iters, &rate)) != TRIT_OK) return s;
        if (rate > best) best = rate;
    }
    *ops_per_s = best;
    return TRIT_OK;
}

static trit_status check_threads(const char *what, int threads) {
    if (threads < 1 || threads > 4096)
        return trit_error(TRIT_ERR_INVALID, "%s: threads must be 1 to 4096, got %d", what, threads);
    return TRIT_OK;
}

trit_status trit_bench_peak_measure(int loop, int threads, double *ops_per_s) {
    trit_status s = check_threads("trit_bench_peak_measure", threads);
    if (s != TRIT_OK) return s;
    trit_peak_loop loops[TRIT_PEAK_MAX_LOOPS];
    const int n = trit_bench_peak_loops(loops, TRIT_PEAK_MAX_LOOPS);
    if (!ops_per_s || loop < 0 || loop >= n)
        return trit_error(TRIT_ERR_INVALID, "trit_bench_peak_measure: loop %d is not one of 0..%d", loop, n - 1);
    if (!loops[loop].usable)
        return trit_error(TRIT_ERR_UNSUPPORTED, "%s (%s) not run: it needs %s", loops[loop].label, loops[loop].kernel,
                          loops[loop].missing);
    int n_rows;
    const trit_kernel_entry *row = &trit_kernel_table(&n_rows)[loops[loop].row];
    return measure_fn((trit_kernel_peak_fn *)row->fn, threads, ops_per_s);
}

// ---- read bandwidth ------------------------------------------------------------------------

// Floats of the streamed buffer: 8 times the last-level cache, at least 256 MiB, at most 1 GiB.
static int64_t read_floats(void) {
    size_t llc = trit_cpu_cache_bytes(3);
    if (!llc) llc = trit_cpu_cache_bytes(2);
    size_t bytes = 8 * llc;
    if (bytes < ((size_t)256 << 20)) bytes = (size_t)256 << 20;
    if (bytes > ((size_t)1 << 30)) bytes = (size_t)1 << 30;
    return (int64_t)(bytes / sizeof(float));
}

// Thread t of `threads` takes floats [lo, hi) of n, boundaries on 64-byte lines.
static void share(int64_t n, int threads, int t, int64_t *lo, int64_t *hi) {
    const int64_t lines = n / 16;
    *lo = lines * t / threads * 16;
    *hi = t == threads - 1 ? n : lines * (t + 1) / threads * 16;
}

trit_status trit_bench_read_bandwidth(int threads, double *bytes_per_s) {
    trit_status s = check_threads("trit_bench_read_bandwidth", threads);
    if (s != TRIT_OK) return s;
    if (!bytes_per_s) return trit_error(TRIT_ERR_INVALID, "trit_bench_read_bandwidth: NULL output");
    const int64_t n = read_floats();
    float *x = trit_aligned_alloc((size_t)n * sizeof(float));  // (n)
    if (!x) return trit_error(TRIT_ERR_NOMEM, "peak: cannot allocate the %lld MB read buffer", (long long)(n >> 18));
    static trit_kernel_slot slot;
    trit_kernel_read_fn *fn = TRIT_KERNEL_FN_OR(trit_kernel_read_fn, &slot, TRIT_KERNEL_READ, TRIT_F32, TRIT_F32,
                                                trit_kernel_read_ref);
    // Written by the threads that will read it, so no page is the shared zero page.
#pragma omp parallel num_threads(threads)
    {
        int64_t lo, hi;
        share(n, omp_get_num_threads(), omp_get_thread_num(), &lo, &hi);
        for (int64_t i = lo; i < hi; i++) x[i] = 1.0f;
    }
    double best = 0;
    int ran = threads;
    const double start = now_s();
    for (int pass = 0; pass < 1000 && (pass < 4 || now_s() - start < READ_BUDGET_S); pass++) {
        double sum = 0, t0 = 0, t1 = 0;
#pragma omp parallel num_threads(threads) reduction(+ : sum) reduction(min : ran)
        {
            int64_t lo, hi;
            const int nt = omp_get_num_threads();
            share(n, nt, omp_get_thread_num(), &lo, &hi);
#pragma omp barrier
            if (omp_get_thread_num() == 0) t0 = now_s();
            sum += fn(x + lo, hi - lo);
#pragma omp barrier
            if (omp_get_thread_num() == 0) t1 = now_s();
            ran = nt;
        }
        const double t = t1 - t0;
        sink_all = (float)sum;
        if (pass > 0 && t > 0 && (double)n * sizeof(float) / t > best) best = (double)n * sizeof(float) / t;
    }
    trit_aligned_free(x);
    if (ran != threads)
        return trit_error(TRIT_ERR_STATE, "peak: asked OpenMP for %d threads and got %d (OMP_DYNAMIC or "
                          "OMP_THREAD_LIMIT?): unset them to measure %d", threads, ran, threads);
    *bytes_per_s = best;
    return TRIT_OK;
}

// ---- the summary every report prints ------------------------------------------------------

trit_status trit_bench_peaks(int threads, trit_peaks *out) {
    if (!out) return trit_error(TRIT_ERR_INVALID, "trit_bench_peaks: NULL output");
    if (threads <= 0) threads = trit_threads_get();
    trit_status s = check_threads("trit_bench_peaks", threads);
    if (s != TRIT_OK) return s;
    memset(out, 0, sizeof *out);
    out->threads = threads;
    trit_peak_loop loops[TRIT_PEAK_MAX_LOOPS];
    const int n = trit_bench_peak_loops(loops, TRIT_PEAK_MAX_LOOPS);
    const int counts[2] = {1, threads};
    for (int i = 0; i < n && s == TRIT_OK; i++) {
        if (!loops[i].picked) continue;
        snprintf(out->kernel[loops[i].kind], sizeof out->kernel[0], "%s", loops[i].label);
        for (int k = 0; k < 2 && s == TRIT_OK; k++) s = trit_bench_peak_measure(i, counts[k], &out->ops_per_s[loops[i].kind][k]);
    }
    for (int k = 0; k < 2 && s == TRIT_OK; k++) s = trit_bench_read_bandwidth(counts[k], &out->read_bytes_per_s[k]);
    return s;
}

double trit_bench_peak_for(const trit_peaks *p, trit_precision precision) {
    if (!p) return 0;
    const double fp32 = p->ops_per_s[TRIT_PEAK_FP32][1], bf16 = p->ops_per_s[TRIT_PEAK_BF16][1];
    return precision == TRIT_PRECISION_BF16 && bf16 > fp32 ? bf16 : fp32;
}

int trit_bench_peaks_line(const trit_peaks *p, char *buf, size_t n) {
    if (!p || !buf) return -1;
    return snprintf(buf, n,
                    "peak (1 / %d threads): %s %.1f / %.1f GFLOP/s, %s %.1f / %.1f GFLOP/s, %s %.1f / %.1f GOP/s; "
                    "read %.1f / %.1f GB/s",
                    p->threads, p->kernel[TRIT_PEAK_FP32], p->ops_per_s[TRIT_PEAK_FP32][0] / 1e9,
                    p->ops_per_s[TRIT_PEAK_FP32][1] / 1e9, p->kernel[TRIT_PEAK_BF16],
                    p->ops_per_s[TRIT_PEAK_BF16][0] / 1e9, p->ops_per_s[TRIT_PEAK_BF16][1] / 1e9,
                    p->kernel[TRIT_PEAK_INT8], p->ops_per_s[TRIT_PEAK_INT8][0] / 1e9,
                    p->ops_per_s[TRIT_PEAK_INT8][1] / 1e9, p->read_bytes_per_s[0] / 1e9, p->read_bytes_per_s[1] / 1e9);
}
