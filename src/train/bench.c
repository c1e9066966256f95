// Timed GPT training steps on named configs: the step is the trainer's (forward, backward,
// clip, AdamW) on random tokens, so the figures are those of real training minus data loading.
// Figures are taken per step and summarised by the median, which one slow step (another process
// waking up) does not move.
#define _POSIX_C_SOURCE 200809L
#include "trit/bench.h"

#include "kernels/gemm.h"
#include "kernels/gemm_lowp.h"

#include <dirent.h>
#include <errno.h>
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
    r->mfu = gemm_flops_per_s > 0 ? r->model_flops_per_s / gemm_flops_per_s : 0;
}

int trit_bench_json(const trit_bench_result *r, char *buf, size_t n) {
    if (!r) return -1;
    return snprintf(buf, n,
                    "{\"config\": \"%s\", \"precision\": \"%s\", \"ms_per_step\": %.4f, "
                    "\"tokens_per_s\": %.1f, \"model_flops_per_s\": %.6g, \"mfu\": %.4f, "
                    "\"gemm_peak_flops_per_s\": %.6g, \"peak_rss_bytes\": %zu}",
                    r->config, trit_precision_name(r->precision), r->ms_median, r->tokens_per_s, r->model_flops_per_s, r->mfu,
                    r->gemm_peak_flops_per_s, r->peak_rss_bytes);
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

// What a run holds; freed in one place whatever stage it reached.
typedef struct bench_run {
    trit_gpt *model;
    trit_gpt_graph gg;
    trit_optim *opt;
    trit_tensor **params;
    double *ms;
} bench_run;

static void run_free(bench_run *b) {
    trit_optim_free(b->opt);
    free(b->params);
    if (b->gg.graph) trit_gpt_graph_free(&b->gg);
    trit_gpt_free(b->model);
    free(b->ms);
}

static trit_status run_setup(bench_run *b, const trit_bench_config *c, const trit_bench_options *o) {
    b->model = trit_gpt_new(&c->model, o->seed);
    if (!b->model) return TRIT_ERR_INVALID;
    const trit_compute_policy policy = trit_precision_policy(o->precision, TRIT_MATMUL_HIGHEST);
    trit_status s = trit_gpt_set_policy(b->model, &policy);
    if (s == TRIT_OK) s = trit_gpt_build_train(b->model, c->batch, c->model.seq_len, &b->gg);
    if (s != TRIT_OK) return s;
    int n = trit_gpt_num_tensors(b->model);
    b->params = malloc((size_t)n * sizeof *b->params);
    if (!b->params) return trit_error(TRIT_ERR_NOMEM, "bench: cannot list %d parameters", n);
    for (int i = 0; i < n; i++) b->params[i] = trit_gpt_tensor(b->model, i);
    trit_optim_config oc = trit_optim_adamw(0.9, 0.95, 1e-8);
    b->opt = trit_optim_new_gpt2(&oc, b->params, n, 0.1);
    return b->opt ? TRIT_OK : TRIT_ERR_INVALID;
}

// Uniform random tokens for step `step`: inputs and targets drawn independently.
static void fill_tokens(bench_run *b, uint64_t seed, int64_t step) {
    int64_t n = trit_tensor_numel(b->gg.idx);
    uint32_t V = (uint32_t)trit_gpt_get_config(b->model)->vocab_size;
    int32_t *x = b->gg.idx->data, *y = b->gg.targets->data;
    for (int64_t i = 0; i < n; i++) {
        uint64_t at = (uint64_t)(step * n + i);
        x[i] = (int32_t)(trit_rng_u32(seed, 0x6265u, at) % V);
        y[i] = (int32_t)(trit_rng_u32(seed, 0x6266u, at) % V);
    }
}

static trit_status train_step(bench_run *b, uint64_t seed, int64_t step, double *loss) {
    fill_tokens(b, seed, step);
    trit_optim_zero_grad(b->opt);
    trit_graph_set_rng(b->gg.graph, seed, (uint64_t)step);
    trit_status s = trit_graph_forward(b->gg.graph);
    if (s != TRIT_OK) return s;
    *loss = trit_tensor_get_flat(b->gg.loss, 0);
    s = trit_graph_backward(b->gg.graph);
    double norm = 0;
    if (s == TRIT_OK) s = trit_optim_clip_grads(b->opt, 1.0, &norm);
    if (s == TRIT_OK) s = trit_optim_step(b->opt, 6e-4);
    return s;
}

static trit_status check_options(const trit_bench_config *c, const trit_bench_options *o, trit_bench_result *r) {
    if (!c || !o || !r) return trit_error(TRIT_ERR_INVALID, "trit_bench_run: NULL argument");
    if (o->steps < 1 || o->warmup < 0)
        return trit_error(TRIT_ERR_INVALID, "bench: need steps >= 1 and warmup >= 0, got %lld and %lld",
                          (long long)o->steps, (long long)o->warmup);
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
    r->tokens_per_s = (double)(c->batch * c->model.seq_len) / (r->ms_median / 1e3);
    r->flops_per_token = trit_bench_flops_per_token(&c->model, r->params, c->model.seq_len);
    r->model_flops_per_s = r->flops_per_token * r->tokens_per_s;
    trit_bench_set_peak(r, 0);
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
    r->steps = o->steps;
    r->threads = trit_threads_get();
    bench_run b;
    memset(&b, 0, sizeof b);
    s = run_setup(&b, c, o);
    if (s == TRIT_OK && !(b.ms = malloc((size_t)o->steps * sizeof *b.ms)))
        s = trit_error(TRIT_ERR_NOMEM, "bench: out of memory");
    if (s == TRIT_OK) s = trit_memory_report_make(b.gg.graph, b.opt, r->threads, &r->memory);
    if (s != TRIT_OK) {
        run_free(&b);
        return s;
    }
    r->params = trit_gpt_num_params(b.model);
    if (o->log) {
        fprintf(o->log, "%s: L=%lld H=%lld C=%lld T=%lld B=%lld V=%lld, %lld parameters, %d threads\n", c->name,
                (long long)c->model.n_layer, (long long)c->model.n_head, (long long)c->model.n_embd,
                (long long)c->model.seq_len, (long long)c->batch, (long long)c->model.vocab_size,
                (long long)r->params, r->threads);
        trit_memory_report_print(&r->memory, "  memory: ", o->log);
        fflush(o->log);
    }
    double loss = 0;
    for (int64_t i = 0; s == TRIT_OK && i < o->warmup + o->steps; i++) {
        double t0 = now_ms();
        s = train_step(&b, o->seed, i, &loss);
        int64_t k = i - o->warmup;
        if (k >= 0) b.ms[k] = now_ms() - t0;
        if (k == 0) r->loss_first = loss;
    }
    r->loss_last = loss;
    if (s == TRIT_OK) {
        summarise(r, c, b.ms, o->steps);
        r->peak_rss_bytes = trit_peak_rss_bytes();
    }
    run_free(&b);
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
