// Timed GPT training steps on named configs: the step is the trainer's own (trit_trainer_step:
// accumulation, the loss scaler and the skip of non-finite steps, clipping, AdamW) over random
// tokens held in memory, so the figures are those of real training minus reading the data.
// Figures are taken per step and summarised by the median, which one slow step (another process
// waking up) does not move.
#define _POSIX_C_SOURCE 200809L
#include "trit/bench.h"
#include "train/trainer.h"

#include "kernels/gemm.h"
#include "kernels/gemm_lowp.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

// ---- configs -------------------------------------------------------------------------------

static trit_bench_config make_config(const char *name, int64_t L, int64_t H, int64_t C, int64_t T,
                                     int64_t B, int64_t V) {
    trit_bench_config c;
    memset(&c, 0, sizeof c);
    snprintf(c.name, sizeof c.name, "%s", name);
    c.model = trit_gpt_config_default();
    c.model.n_layer = L;
    c.model.n_head = H;
    c.model.n_embd = C;
    c.model.seq_len = T;
    c.model.vocab_size = V;
    c.batch = B;
    return c;
}

enum { NUM_CONFIGS = 3 };

static trit_bench_config configs[NUM_CONFIGS];
static bool configs_ready;

static void init_configs(void) {
    if (configs_ready) return;
    configs[0] = make_config("baby", 4, 4, 128, 64, 12, 65);
    configs[1] = make_config("small", 6, 6, 384, 256, 16, 65);
    // GPT-2's 50257 tokens padded to a multiple of 128, as llm.c and nanoGPT do.
    configs[2] = make_config("bpe50k", 4, 4, 256, 256, 8, 50304);
    configs_ready = true;
}

int trit_bench_num_configs(void) { return NUM_CONFIGS; }

const trit_bench_config *trit_bench_config_at(int i) {
    init_configs();
    return i >= 0 && i < NUM_CONFIGS ? &configs[i] : NULL;
}

trit_status trit_bench_config_find(const char *name, trit_bench_config *out) {
    init_configs();
    for (int i = 0; name && out && i < NUM_CONFIGS; i++)
        if (strcmp(name, configs[i].name) == 0) {
            *out = configs[i];
            return TRIT_OK;
        }
    return trit_error(TRIT_ERR_INVALID, "no benchmark config named '%s': use baby, small or bpe50k",
                      name ? name : "(null)");
}

double trit_bench_flops_per_token(const trit_gpt_config *c, int64_t n_params, int64_t T) {
    if (!c) return 0;
    return 6.0 * (double)n_params + 12.0 * (double)c->n_layer * (double)T * (double)c->n_embd;
}

void trit_bench_set_peak(trit_bench_result *r, double gemm_flops_per_s) {
    if (!r) return;
    r->gemm_peak_flops_per_s = gemm_flops_per_s;
    r->gemm_mfu = gemm_flops_per_s > 0 ? r->model_flops_per_s / gemm_flops_per_s : 0;
}

void trit_bench_set_fma_peak(trit_bench_result *r, double fma_flops_per_s) {
    if (!r) return;
    r->fma_peak_flops_per_s = fma_flops_per_s;
    r->mfu = fma_flops_per_s > 0 ? r->model_flops_per_s / fma_flops_per_s : 0;
}

int trit_bench_json(const trit_bench_result *r, char *buf, size_t n) {
    if (!r) return -1;
    return snprintf(buf, n,
                    "{\"config\": \"%s\", \"precision\": \"%s\", \"ms_per_step\": %.4f, "
                    "\"tokens_per_s\": %.1f, \"model_flops_per_s\": %.6g, \"mfu\": %.4f, "
                    "\"fma_peak_flops_per_s\": %.6g, \"gemm_mfu\": %.4f, \"gemm_peak_flops_per_s\": %.6g, "
                    "\"peak_rss_bytes\": %zu}",
                    r->config, trit_precision_name(r->precision), r->ms_median, r->tokens_per_s, r->model_flops_per_s, r->mfu,
                    r->fma_peak_flops_per_s, r->gemm_mfu, r->gemm_peak_flops_per_s, r->peak_rss_bytes);
}

// ---- one run -------------------------------------------------------------------------------

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

trit_status trit_bench_tokens(const trit_bench_config *c, uint64_t seed, uint16_t **tokens, int64_t *n) {
    if (!c || !tokens || !n) return trit_error(TRIT_ERR_INVALID, "trit_bench_tokens: NULL argument");
    const int64_t V = c->model.vocab_size, T = c->model.seq_len;
    if (V < 1 || V > TRIT_SHARD_MAX_VOCAB || T < 1 || c->batch < 1)
        return trit_error(TRIT_ERR_INVALID, "bench: config '%s' has V=%lld T=%lld B=%lld; the random tokens need "
                          "1 <= V <= %d (uint16 ids), T >= 1 and B >= 1", c->name, (long long)V, (long long)T,
                          (long long)c->batch, TRIT_SHARD_MAX_VOCAB);
    int64_t count = 0;
    if (!trit_mul_i64(16 * c->batch, T + 1, &count))
        return trit_error(TRIT_ERR_RANGE, "bench: 16 B (T + 1) tokens overflow for config '%s'", c->name);
    uint16_t *t = malloc((size_t)count * sizeof *t);
    if (!t) return trit_error(TRIT_ERR_NOMEM, "bench: cannot allocate %lld tokens", (long long)count);
    for (int64_t i = 0; i < count; i++)
        t[i] = (uint16_t)(trit_rng_u32(seed, TRIT_STREAM_BENCH, (uint64_t)i) % (uint32_t)V);
    *tokens = t;
    *n = count;
    return TRIT_OK;
}

void trit_bench_train_config(const trit_bench_config *c, const trit_bench_options *o, trit_train_config *out) {
    trit_train_config_init(out);
    const trit_gpt_config *g = &c->model;
    out->layers = g->n_layer;
    out->heads = g->n_head;
    out->dim = g->n_embd;
    out->seq = g->seq_len;
    out->dropout = g->dropout;
    out->bias = g->bias;
    out->norm = g->norm;
    out->mlp = g->mlp;
    out->pos = g->pos;
    out->subln = g->subln;
    out->batch = c->batch;
    out->total_batch_tokens = c->batch * g->seq_len * (o->accum > 1 ? o->accum : 1);
    out->steps = o->warmup + o->steps;
    out->warmup = 0;
    out->lr = out->min_lr = 6e-4;  // constant: the figures do not depend on it
    out->beta1 = 0.9;
    out->beta2 = 0.95;
    out->eps = 1e-8;
    out->weight_decay = 0.1;
    out->clip = 1.0;
    out->seed = (int64_t)(o->seed & INT64_MAX);
    out->precision = o->precision;
    out->matmul_precision = TRIT_MATMUL_HIGHEST;
    out->order = TRIT_DATA_RANDOM;
    out->threads = o->threads > 0 ? o->threads : trit_threads_get();
    out->sample_tokens = 0;
    out->quiet = 1;
    if (o->ternary) {
        out->qat = TRIT_QAT_TERNARY;
        out->ternary_matmul = o->ternary_matmul;
    }
}

static trit_status check_options(const trit_bench_config *c, const trit_bench_options *o, trit_bench_result *r) {
    if (!c || !o || !r) return trit_error(TRIT_ERR_INVALID, "trit_bench_run: NULL argument");
    if (o->steps < 1 || o->warmup < 0 || o->accum < 0)
        return trit_error(TRIT_ERR_INVALID, "bench: need steps >= 1, warmup >= 0 and accum >= 0, got %lld, %lld "
                          "and %lld", (long long)o->steps, (long long)o->warmup, (long long)o->accum);
    if (c->batch < 1) return trit_error(TRIT_ERR_INVALID, "bench: config '%s' has batch %lld; need >= 1", c->name,
                                        (long long)c->batch);
    return trit_gpt_config_check(&c->model);
}

static void summarise(trit_bench_result *r, const trit_bench_config *c, double *ms, int64_t n) {
    double sum = 0;
    for (int64_t i = 0; i < n; i++) sum += ms[i];
    qsort(ms, (size_t)n, sizeof *ms, cmp_double);
    r->ms_min = ms[0];
    r->ms_mean = sum / (double)n;
    r->ms_median = n % 2 ? ms[n / 2] : 0.5 * (ms[n / 2 - 1] + ms[n / 2]);
    r->tokens_per_s = (double)(c->batch * c->model.seq_len * r->accum) / (r->ms_median / 1e3);
    r->flops_per_token = trit_bench_flops_per_token(&c->model, r->params, c->model.seq_len);
    r->model_flops_per_s = r->flops_per_token * r->tokens_per_s;
    trit_bench_set_peak(r, 0);
    trit_bench_set_fma_peak(r, 0);
}

// The trainer over bench's random tokens, as trit_bench_train_config sets it up.
static trit_status run_setup(trainer *t, const trit_bench_config *c, const trit_bench_options *o) {
    uint16_t *tokens = NULL;
    int64_t n = 0;
    trit_status s = trit_bench_tokens(c, o->seed, &tokens, &n);
    trit_data *d = s == TRIT_OK ? trit_data_from_tokens(tokens, n, c->model.seq_len) : NULL;
    free(tokens);
    if (s == TRIT_OK && !d) s = TRIT_ERR_NOMEM;  // trit_data_from_tokens said why
    trit_train_config tc;
    trit_bench_train_config(c, o, &tc);
    return s == TRIT_OK ? trit_trainer_setup_tokens(t, &tc, &c->model, d) : s;
}

trit_status trit_bench_run(const trit_bench_config *c, const trit_bench_options *o, trit_bench_result *r) {
    trit_status s = check_options(c, o, r);
    if (s != TRIT_OK) return s;
    memset(r, 0, sizeof *r);
    if (o->threads > 0) trit_threads_set(o->threads);
    snprintf(r->config, sizeof r->config, "%s", c->name);
    r->precision = o->precision;
    r->batch = c->batch;
    r->seq = c->model.seq_len;
    r->accum = o->accum > 1 ? o->accum : 1;
    r->steps = o->steps;
    r->threads = trit_threads_get();
    trainer t;
    s = run_setup(&t, c, o);
    double *ms = s == TRIT_OK ? malloc((size_t)o->steps * sizeof *ms) : NULL;
    if (s == TRIT_OK && !ms) s = trit_error(TRIT_ERR_NOMEM, "bench: out of memory");
    if (s == TRIT_OK) s = trit_memory_report_make(t.gg.graph, t.opt, r->threads, &r->memory);
    if (s != TRIT_OK) {
        trit_trainer_free(&t, false);
        free(ms);
        return s;
    }
    r->params = trit_gpt_num_params(t.model);
    if (o->log) {
        fprintf(o->log, "%s: L=%lld H=%lld C=%lld T=%lld B=%lld V=%lld, %lld parameters, %d threads\n", c->name,
                (long long)c->model.n_layer, (long long)c->model.n_head, (long long)c->model.n_embd,
                (long long)c->model.seq_len, (long long)c->batch, (long long)c->model.vocab_size,
                (long long)r->params, r->threads);
        trit_memory_report_print(&r->memory, "  memory: ", o->log);
        fflush(o->log);
    }
    trit_train_step_info info = {.loss = NAN, .loss_scale = NAN};
    for (int64_t i = 0; s == TRIT_OK && i < o->warmup + o->steps; i++) {
        double t0 = now_ms();
        s = trit_trainer_step(&t, NULL, &info);
        int64_t k = i - o->warmup;
        if (k >= 0) ms[k] = now_ms() - t0;
        if (k == 0) r->loss_first = info.loss;
    }
    r->loss_last = info.loss;
    r->loss_scale = info.loss_scale;
    r->skipped = t.skipped;
    if (s == TRIT_OK) {
        summarise(r, c, ms, o->steps);
        r->peak_rss_bytes = trit_peak_rss_bytes();
    }
    trit_trainer_free(&t, false);
    free(ms);
    return s;
}

// ---- GEMM peak -----------------------------------------------------------------------------

// fp32: the f32 GEMM on A, B; bf16/fp16: the mixed GEMM on 16-bit operands (A and B then hold
// 16-bit values), fp32 accumulation and output.
static double gemm_rate(trit_precision p, int64_t n, int reps, float *A, float *B, float *C) {
    double best = 0;
    const trit_dtype dt = p == TRIT_PRECISION_BF16 ? TRIT_BF16 : TRIT_F16;
    const trit_gemm_operand a = {A, dt, n, false}, b = {B, dt, n, false};
    for (int r = 0; r <= reps; r++) {
        double t0 = now_ms();
        if (p == TRIT_PRECISION_FP32)
            trit_kernel_gemm_f32(false, false, n, n, n, A, n, B, n, C, n, false);
        else
            trit_kernel_gemm_mixed(n, n, n, &a, &b, C, TRIT_F32, n, false, TRIT_MATMUL_HIGHEST, NULL);
        double ms = now_ms() - t0;
        double rate = 2.0 * (double)n * (double)n * (double)n / (ms / 1e3);
        if (r > 0 && rate > best) best = rate;  // run 0 warms caches and packing buffers
    }
    return best;
}

trit_status trit_bench_gemm_peak(trit_precision p, int threads, int reps, double *flops_per_s) {
    if (!flops_per_s || reps < 1)
        return trit_error(TRIT_ERR_INVALID, "trit_bench_gemm_peak: need an output and reps >= 1");
    if (threads > 0) trit_threads_set(threads);
    const int64_t sizes[2] = {1024, 2048}, nmax = 2048;
    size_t bytes = (size_t)(nmax * nmax) * sizeof(float);
    float *A = trit_aligned_alloc(bytes), *B = trit_aligned_alloc(bytes), *C = trit_aligned_alloc(bytes);
    if (!A || !B || !C) {
        trit_aligned_free(A);
        trit_aligned_free(B);
        trit_aligned_free(C);
        return trit_error(TRIT_ERR_NOMEM, "trit_bench_gemm_peak: cannot allocate 3 x %zu bytes", bytes);
    }
    trit_rng_fill_uniform(A, nmax * nmax, 1, 1, 0, -1.0f, 1.0f);
    trit_rng_fill_uniform(B, nmax * nmax, 1, 2, 0, -1.0f, 1.0f);
    if (p != TRIT_PRECISION_FP32) {  // 16-bit operands: C's buffer holds them while they are made
        const trit_dtype_traits *tr = trit_dtype_traits_of(p == TRIT_PRECISION_BF16 ? TRIT_BF16 : TRIT_F16);
        for (float *m = A; m; m = m == A ? B : NULL) {
            tr->from_f32(C, m, nmax * nmax, NULL, 0);
            memcpy(m, C, (size_t)(nmax * nmax) * 2);
        }
    }
    double best = 0;
    for (int i = 0; i < 2; i++) {
        double rate = gemm_rate(p, sizes[i], reps, A, B, C);
        if (rate > best) best = rate;
    }
    trit_aligned_free(A);
    trit_aligned_free(B);
    trit_aligned_free(C);
    *flops_per_s = best;
    return TRIT_OK;
}

// ---- isolation in a child process ------------------------------------------------------------

// What a child sends back: its status and message, then the payload.
typedef struct child_reply {
    trit_status status;
    char message[512];
    trit_bench_result result;
    double peak;
    trit_peaks peaks;
} child_reply;

typedef void (*child_fn)(const void *arg, child_reply *out);

static bool write_all(int fd, const void *p, size_t n) {
    const char *c = p;
    while (n > 0) {
        ssize_t k = write(fd, c, n);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return false;
        c += k;
        n -= (size_t)k;
    }
    return true;
}

static bool read_all(int fd, void *p, size_t n) {
    char *c = p;
    while (n > 0) {
        ssize_t k = read(fd, c, n);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return false;
        c += k;
        n -= (size_t)k;
    }
    return true;
}

// Threads of this process (entries of /proc/self/task); 1 when that cannot be read.
static int count_threads(void) {
    DIR *d = opendir("/proc/self/task");
    if (!d) return 1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) n += e->d_name[0] != '.';
    closedir(d);
    return n > 0 ? n : 1;
}

static trit_status run_in_child(child_fn fn, const void *arg, child_reply *reply) {
    // GCC's OpenMP keeps its idle workers after a parallel region, and a forked child that
    // starts one would wait for threads it does not have: refuse instead of hanging.
    int threads = count_threads();
    if (threads > 1)
        return trit_error(TRIT_ERR_STATE, "bench: this process already runs %d threads (OpenMP workers), "
                          "so a forked child would hang in its first parallel kernel: isolate runs before "
                          "any multi-threaded work, or call trit_bench_run", threads);
    int fd[2];
    if (pipe(fd) != 0) return trit_error(TRIT_ERR_IO, "bench: pipe failed: %s", strerror(errno));
    fflush(NULL);  // or the child would print the parent's buffered output again
    pid_t pid = fork();
    if (pid < 0) {
        close(fd[0]);
        close(fd[1]);
        return trit_error(TRIT_ERR_IO, "bench: fork failed: %s", strerror(errno));
    }
    if (pid == 0) {
        close(fd[0]);
        child_reply *r = calloc(1, sizeof *r);
        if (r) {
            fn(arg, r);
            snprintf(r->message, sizeof r->message, "%s", trit_last_error());
        }
        fflush(NULL);
        bool ok = r && write_all(fd[1], r, sizeof *r);
        _exit(ok ? 0 : 1);
    }
    close(fd[1]);
    bool got = read_all(fd[0], reply, sizeof *reply);
    close(fd[0]);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
    if (!got) {
        if (WIFSIGNALED(st))
            return trit_error(TRIT_ERR_STATE, "bench: the child process died of signal %d", WTERMSIG(st));
        return trit_error(TRIT_ERR_IO, "bench: the child process sent no result (exit status %d)",
                          WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    }
    if (reply->status != TRIT_OK) return trit_error(reply->status, "%s", reply->message);
    return TRIT_OK;
}

typedef struct run_arg {
    const trit_bench_config *c;
    const trit_bench_options *o;
} run_arg;

static void child_run(const void *arg, child_reply *out) {
    const run_arg *a = arg;
    out->status = trit_bench_run(a->c, a->o, &out->result);
}

trit_status trit_bench_run_isolated(const trit_bench_config *c, const trit_bench_options *o,
                                    trit_bench_result *r) {
    trit_status s = check_options(c, o, r);
    if (s != TRIT_OK) return s;
    child_reply *reply = calloc(1, sizeof *reply);
    if (!reply) return trit_error(TRIT_ERR_NOMEM, "bench: out of memory");
    run_arg a = {c, o};
    s = run_in_child(child_run, &a, reply);
    if (s == TRIT_OK) *r = reply->result;
    free(reply);
    return s;
}

typedef struct peak_arg {
    trit_precision precision;
    int threads, reps;
} peak_arg;

static void child_peak(const void *arg, child_reply *out) {
    const peak_arg *a = arg;
    out->status = trit_bench_gemm_peak(a->precision, a->threads, a->reps, &out->peak);
}

trit_status trit_bench_gemm_peak_isolated(trit_precision p, int threads, int reps, double *flops_per_s) {
    if (!flops_per_s || reps < 1)
        return trit_error(TRIT_ERR_INVALID, "trit_bench_gemm_peak: need an output and reps >= 1");
    child_reply *reply = calloc(1, sizeof *reply);
    if (!reply) return trit_error(TRIT_ERR_NOMEM, "bench: out of memory");
    peak_arg a = {p, threads, reps};
    trit_status s = run_in_child(child_peak, &a, reply);
    if (s == TRIT_OK) *flops_per_s = reply->peak;
    free(reply);
    return s;
}

typedef struct peaks_arg {
    int threads;
} peaks_arg;

static void child_peaks(const void *arg, child_reply *out) {
    out->status = trit_bench_peaks(((const peaks_arg *)arg)->threads, &out->peaks);
}

trit_status trit_bench_peaks_isolated(int threads, trit_peaks *out) {
    if (!out) return trit_error(TRIT_ERR_INVALID, "trit_bench_peaks: NULL output");
    child_reply *reply = calloc(1, sizeof *reply);
    if (!reply) return trit_error(TRIT_ERR_NOMEM, "bench: out of memory");
    peaks_arg a = {threads};
    trit_status s = run_in_child(child_peaks, &a, reply);
    if (s == TRIT_OK) *out = reply->peaks;
    free(reply);
    return s;
}
