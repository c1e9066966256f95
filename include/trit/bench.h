// trit benchmarks: the memory report of a training setup, and timed GPT training steps on named
// configs with model FLOP/s and MFU against a GEMM peak measured in the same run.
//
// Model FLOPs per token (the estimate of the PaLM and Chinchilla papers, as nanoGPT uses it):
//   6 N + 12 L T C
// N = parameters (tied head counted once, position table included), L layers, T sequence length,
// C width. 6 N is the matmul work of forward (2 N) and backward (4 N) through every weight; 12 L T C
// is the attention itself (q k^T and p v, 2 T C multiply-adds each per token and layer, times 3 for
// forward + backward) counted over the full T x T square even though causal masking lets a kernel
// skip about half of it. The estimate leaves out layer norms, GELU, softmax and the optimizer; it is
// the figure peers quote, so MFU here compares directly with theirs.
//
// MFU = model FLOP/s / the machine's multiply-add peak measured in the same run with the same
// thread count (trit_bench_peaks: a register-only FMA loop, so a slow GEMM cannot hide itself);
// gemm_mfu, beside it, is against trit's own f32 GEMM on square matrices (2 n^3 per n x n x n).
#ifndef TRIT_BENCH_H
#define TRIT_BENCH_H

#include <stdio.h>

#include "trit/nn.h"
#include "trit/optim.h"
#include "trit/train.h"

#ifdef __cplusplus
extern "C" {
#endif

// ---- memory report ---------------------------------------------------------------------------
// What a training setup holds, from the structures themselves (no measurement), in bytes.

typedef struct trit_memory_report {
    int64_t num_params;  // parameter elements
    size_t params;       // parameter values the graph reads (the fp32 master copy when the
                         // compute copies are 16-bit; the weights themselves without one)
    size_t params_offloaded;  // of which frozen weights in a file mapping (--offload optimizer+frozen)
    size_t params_resident;   // and the most of those a step holds at once (the largest)
    size_t param_copies; // 16-bit compute copies of parameters (part of the arena)
    size_t grads;        // their gradients
    size_t optimizer;    // optimizer state (AdamW: first and second moments), all of the below
    size_t optimizer_codes;   // of which quantized codes (AdamW8bit's moments, Q-GaLore's int4 bases)
    size_t optimizer_scales;  // and their f32 block scales
    size_t optimizer_offloaded;  // of the optimizer state, bytes in the memory-mapped file (--offload)
    size_t optimizer_resident;   // and the most of it a step holds in memory at once
    size_t arena;        // the graph's arena: activations, saved tensors, activation grads, op scratch
    size_t inputs;       // graph inputs (token ids and targets)
    size_t workspace;    // kernel buffers outside the arena (GEMM packing, one set per thread; GaLore's projections)
    size_t total;        // sum of the above (offloaded weights and state counted as their resident part)
    size_t activations;  // forward values before liveness reuse (what a plan without reuse needs)
    int threads;
} trit_memory_report;

// Report of a compiled training graph and its optimizer (o may be NULL: no optimizer state) when
// kernels run on `threads` threads (<= 0: trit_threads_get()).
trit_status trit_memory_report_make(const trit_graph *g, const trit_optim *o, int threads,
                                    trit_memory_report *out);
// The GEMM packing scratch one thread keeps after running g's products on the kernels the table
// picks now (the per-thread part of `workspace`): each packed kernel file's largest buffer for
// g's compute policy and matrix shapes (kernels/gemm_scratch.h); 0 on the portable kernels.
trit_status trit_memory_gemm_scratch(const trit_graph *g, size_t *per_thread);
// Adds another graph over the same parameters (e.g. an evaluation graph): its arena and inputs.
trit_status trit_memory_report_add_graph(trit_memory_report *r, const trit_graph *g);
// Prints one line per item plus the total, in bytes and MB, each line starting with `prefix`.
void trit_memory_report_print(const trit_memory_report *r, const char *prefix, FILE *fp);

// Peak resident set size of this process so far (VmHWM of /proc/self/status, else
// getrusage ru_maxrss); 0 when neither is available.
size_t trit_peak_rss_bytes(void);
// Starts the peak over from the current resident set (Linux's /proc/self/clear_refs), so a later
// trit_peak_rss_bytes covers only what follows; false where the system does not allow it.
bool trit_peak_rss_reset(void);

// ---- named configs -----------------------------------------------------------------------------

#define TRIT_BENCH_NAME_MAX 32

typedef struct trit_bench_config {
    char name[TRIT_BENCH_NAME_MAX];
    trit_gpt_config model;  // model.seq_len is the T of the benchmark
    int64_t batch;          // B sequences per step
} trit_bench_config;

// "baby" (L=4 H=4 C=128 T=64 B=12 V=65), "small" (L=6 H=6 C=384 T=256 B=16 V=65), "bpe50k"
// (L=4 H=4 C=256 T=256 B=8 V=50304): GPT-2 layout (bias, LayerNorm, GELU, learned positions).
int trit_bench_num_configs(void);
const trit_bench_config *trit_bench_config_at(int i);
// By name; the message lists the names when there is no such config.
trit_status trit_bench_config_find(const char *name, trit_bench_config *out);

// 6 N + 12 L T C (see the top of this file).
double trit_bench_flops_per_token(const trit_gpt_config *c, int64_t n_params, int64_t T);

// ---- measuring ---------------------------------------------------------------------------------

typedef struct trit_bench_options {
    int64_t steps;   // timed steps, >= 1
    int64_t warmup;  // untimed steps before them, >= 0
    int64_t accum;   // micro-batches of B x T tokens per step (gradient accumulation); 0 = 1
    int threads;     // <= 0: trit_threads_get()
    uint64_t seed;   // model init and the random tokens
    FILE *log;       // the memory report and progress go here; NULL = silent
    trit_precision precision;  // the model's compute policy (trit_precision_policy, highest)
    bool ternary;              // BitNet ternary QAT of the block matrices (trit train --ternary)
    trit_ternary_matmul ternary_matmul;  // and how its matmuls run (--ternary-matmul)
} trit_bench_options;

typedef struct trit_bench_result {
    char config[TRIT_BENCH_NAME_MAX];
    trit_precision precision;
    int64_t params, batch, seq, accum, steps;
    int threads;
    double ms_median, ms_mean, ms_min;  // per step
    double tokens_per_s;                // B T accum / median step time
    double flops_per_token;             // trit_bench_flops_per_token
    double model_flops_per_s;           // flops_per_token * tokens_per_s
    double gemm_peak_flops_per_s;       // 0 until measured (trit_bench_gemm_peak)
    double gemm_mfu;                    // model / GEMM peak; 0 without a peak
    double fma_peak_flops_per_s;        // 0 until measured (trit_bench_peak_for)
    double mfu;                         // model / FMA peak; 0 without a peak
    double loss_first, loss_last;       // losses of the first and last timed step
    double loss_scale;                  // the last step's loss scale (fp16); NaN without a scaler
    int64_t skipped;                    // steps skipped for a non-finite loss or gradient
    size_t peak_rss_bytes;              // of the process that ran the steps
    trit_memory_report memory;
} trit_bench_result;

// The trainer's config of a bench run: c's model and batch, accum micro-batches a step,
// warmup + steps steps at a constant lr 6e-4, AdamW 0.9/0.95, eps 1e-8, weight decay 0.1 on
// matrices, clip 1.0, random windows, o's seed, threads and precision (fp32 master weights; fp16
// with the dynamic loss scaler). data and out are left unset.
void trit_bench_train_config(const trit_bench_config *c, const trit_bench_options *o, trit_train_config *out);
// The tokens a bench run trains on: 16 B (T + 1) uniform draws from [0, V) keyed by (seed, a
// stream of their own, position), malloc'ed into *tokens. V must fit a uint16 token shard.
trit_status trit_bench_tokens(const trit_bench_config *c, uint64_t seed, uint16_t **tokens, int64_t *n);

// Sets up the trainer over trit_bench_tokens with trit_bench_train_config (no run directory),
// runs warmup + steps of the trainer's own step (trit_train_run's: accumulation, loss scaling and
// the skip of a non-finite step, clipping, AdamW) and times each step. A run of
// trit_bench_train_config on those tokens as a shard gives the same losses. peak_rss_bytes is
// this process's peak, so a process that ran something larger before reports that;
// trit_bench_run_isolated avoids it.
trit_status trit_bench_run(const trit_bench_config *c, const trit_bench_options *o,
                           trit_bench_result *r);
// The same in a forked child, so peak_rss_bytes is that of this one model. The OpenMP runtime
// of GCC does not survive fork once it has started threads, so this fails with TRIT_ERR_STATE
// in a process that already runs more than one thread: isolate runs before any multi-threaded
// work (the `trit bench` parent runs no kernels at all).
trit_status trit_bench_run_isolated(const trit_bench_config *c, const trit_bench_options *o,
                                    trit_bench_result *r);

// The best GEMM rate (FLOP/s) over square n x n x n products for n in 1024 and 2048, best of
// `reps` runs each after one untimed run, on `threads` threads (<= 0: trit_threads_get()): the
// f32 GEMM for fp32, the mixed GEMM on bf16 or f16 operands (fp32 accumulation) otherwise.
trit_status trit_bench_gemm_peak(trit_precision p, int threads, int reps, double *flops_per_s);
// The same in a forked child (see trit_bench_run_isolated).
trit_status trit_bench_gemm_peak_isolated(trit_precision p, int threads, int reps, double *flops_per_s);
// Sets r->gemm_peak_flops_per_s and r->gemm_mfu.
void trit_bench_set_peak(trit_bench_result *r, double gemm_flops_per_s);
// Sets r->fma_peak_flops_per_s and r->mfu.
void trit_bench_set_fma_peak(trit_bench_result *r, double fma_flops_per_s);

// One JSON object, no newline: {"config": ..., "precision": "fp32", "ms_per_step": <median>,
// "tokens_per_s", "model_flops_per_s", "mfu", "fma_peak_flops_per_s", "gemm_mfu",
// "gemm_peak_flops_per_s", "peak_rss_bytes"}.
// Returns the length it needs (as snprintf); the text is complete when that is < n.
int trit_bench_json(const trit_bench_result *r, char *buf, size_t n);

// ---- the machine's limits ------------------------------------------------------------------
// Register-only multiply-add loops (the kernel table's TRIT_KERNEL_PEAK rows, 12 independent
// accumulator chains) and a streaming sum over a buffer of 8 times the last-level cache (at
// least 256 MiB). Operations count 2 per product, as GEMM FLOPs do. Each figure is the best of
// 2 ms runs within about 0.05 s (compute) or 0.15 s plus the buffer's first touch (read).

typedef enum trit_peak_kind { TRIT_PEAK_FP32, TRIT_PEAK_BF16, TRIT_PEAK_INT8, TRIT_PEAK_KINDS } trit_peak_kind;

enum { TRIT_PEAK_MAX_LOOPS = 16 };

typedef struct trit_peak_loop {
    int row;              // its row in the kernel table
    trit_peak_kind kind;
    char kernel[48];      // "trit_kernel_peak_fma_avx512"
    char label[48];       // "fp32 FMA, AVX-512 zmm"
    bool simd;            // false for the portable loop
    bool usable;          // the CPU, the OS and TRIT_CPU allow it
    bool picked;          // the loop the dispatch picks for its kind (the peak MFU is against)
    char missing[160];    // when not usable: the features it needs that are missing, and why
} trit_peak_loop;

// The peak loops, best first within each kind, into out[0..max); returns how many there are.
int trit_bench_peak_loops(trit_peak_loop *out, int max);
// Operations/s of loop `loop` (an index of trit_bench_peak_loops) on `threads` threads (1 to
// 4096); TRIT_ERR_UNSUPPORTED, naming the missing features, for a loop that is not usable.
trit_status trit_bench_peak_measure(int loop, int threads, double *ops_per_s);
// Bytes/s of a streaming sum on `threads` threads, each reading its own part of the buffer.
trit_status trit_bench_read_bandwidth(int threads, double *bytes_per_s);

typedef struct trit_peaks {
    int threads;                                 // N
    double ops_per_s[TRIT_PEAK_KINDS][2];        // the picked loop of each kind on 1 and N threads
    char kernel[TRIT_PEAK_KINDS][48];            // its label
    double read_bytes_per_s[2];                  // on 1 and N threads
} trit_peaks;

// The picked loop of each kind and the read bandwidth, on 1 and `threads` (<= 0:
// trit_threads_get()) threads: about 1 s in all.
trit_status trit_bench_peaks(int threads, trit_peaks *out);
// The same in a forked child (see trit_bench_run_isolated).
trit_status trit_bench_peaks_isolated(int threads, trit_peaks *out);
// The N-thread peak a precision's MFU is against: fp32 and fp16 (16-bit operands are widened to
// fp32 on every CPU) the fp32 FMA peak; bf16 the bf16 dot-product peak where it is higher (the
// GEMM then runs on vdpbf16ps), else the fp32 one.
double trit_bench_peak_for(const trit_peaks *p, trit_precision precision);
// "peak (1 / N threads): fp32 FMA, AVX-512 zmm a / b GFLOP/s, ...; read c / d GB/s" (as snprintf).
int trit_bench_peaks_line(const trit_peaks *p, char *buf, size_t n);

// ---- decoding ------------------------------------------------------------------------------

typedef struct trit_decode_result {
    char config[TRIT_BENCH_NAME_MAX];
    char format[40];
    trit_dtype kv_cache;          // how the decoder stored keys and values
    double decode_tokens_per_s;   // batch 1 with the KV cache, greedy
    double prefill_tokens_per_s;  // the prompt, fed through trit_gpt_prefill
    int64_t prompt_tokens, decode_tokens, params;
    size_t weight_bytes;          // the weights as the decoder holds them (panels, codes + scales, f32)
    double bytes_per_token;       // what a timed decode step reads, the mean over their positions
                                  // (trit_gpt_decode_read_bytes: weights, one position row, KV cache)
    double read_bytes_per_s;      // the read bandwidth it is held against (0 until set)
    double bandwidth_fraction;    // decode_tokens_per_s * bytes_per_token / read_bytes_per_s
    size_t peak_rss_bytes;        // the process's peak resident set while this format ran: its model,
                                  // made decode-only, cache and scratch (since the format started
                                  // where the system lets the peak be reset, else since the start)
    int threads;
} trit_decode_result;

// "gpt2" (L=12 H=12 C=768 T=1024 V=50257, GPT-2 small's shape) or a training config's model.
trit_status trit_bench_decode_config(const char *name, trit_gpt_config *out);
// A random model of `config` in `format`: "BLOCKS" or "BLOCKS/HEAD", each fp32 or a quantization
// format with its default groups, for the block matrices and the token embedding / head (the
// head follows the blocks, except ternary blocks get an int8 head): a prompt of
// min(tokens, T/2) tokens, then min(tokens, T - prompt) generated greedily; the second of two
// passes is timed. kv: the cache's key and value dtype, TRIT_F32 or TRIT_F16.
trit_status trit_bench_decode(const char *config, const char *format, trit_dtype kv, int64_t tokens, int threads,
                              trit_decode_result *r);
// Sets r->read_bytes_per_s and r->bandwidth_fraction (the share of the bandwidth bound
// read_bytes_per_s / bytes_per_token tokens/s that decoding reaches).
void trit_bench_decode_set_bandwidth(trit_decode_result *r, double read_bytes_per_s);
// One JSON object: config, format, kv_cache, decode_tokens_per_s, prefill_tokens_per_s,
// weight_bytes, bytes_per_token, read_bytes_per_s, bandwidth_fraction, peak_rss_bytes, threads.
int trit_bench_decode_json(const trit_decode_result *r, char *buf, size_t n);

#ifdef __cplusplus
}
#endif
#endif
