// Decode and prefill speed: a randomly initialised GPT of a named shape, optionally quantized
// (its block matrices and its token embedding, which is also the output head), fed a prompt
// through the KV-cache decoder (trit_gpt_prefill: 128 positions per GEMM) and then extended
// token by token at batch 1.
#define _POSIX_C_SOURCE 200809L  // clock_gettime
#include "trit/bench.h"
#include "trit/quant.h"
#include "trit/train.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// The decode loop's first token ends the prefill: its time goes to *(double *)ctx.
static void prefill_done(void *ctx, int64_t i, int32_t token) {
    (void)token;
    if (i == 0) *(double *)ctx = now_s();
}

trit_status trit_bench_decode_config(const char *name, trit_gpt_config *out) {
    if (name && strcmp(name, "gpt2") == 0) {
        trit_gpt_config c = trit_gpt_config_default();
        c.n_layer = 12, c.n_head = 12, c.n_embd = 768, c.seq_len = 1024, c.vocab_size = 50257;
        *out = c;
        return TRIT_OK;
    }
    trit_bench_config b;
    if (name && trit_bench_config_find(name, &b) == TRIT_OK) {
        *out = b.model;
        return TRIT_OK;
    }
    return trit_error(TRIT_ERR_INVALID, "no decode config '%s' (gpt2: L=12 H=12 C=768 T=1024 V=50257, or a training "
                      "config: baby, small, bpe50k)", name ? name : "");
}

trit_status trit_bench_decode(const char *config, const char *format, trit_dtype kv, int64_t tokens, int threads,
                              trit_decode_result *r) {
    trit_gpt_config c;
    trit_status s = trit_bench_decode_config(config, &c);
    if (s != TRIT_OK) return s;
    if (kv != TRIT_F32 && kv != TRIT_F16)
        return trit_error(TRIT_ERR_INVALID, "decode bench: the KV cache is f32 or f16, not %s", trit_dtype_name(kv));
    // "BLOCKS" or "BLOCKS/HEAD": the head (the token embedding) follows the blocks, except that
    // ternary models keep an int8 head as BitNet's keep a higher-precision one.
    char blocks[32] = "", head[32] = "";
    const char *slash = format ? strchr(format, '/') : NULL;
    if (format && strlen(format) < sizeof blocks) {
        snprintf(blocks, sizeof blocks, "%.*s", slash ? (int)(slash - format) : (int)strlen(format), format);
        snprintf(head, sizeof head, "%s", slash ? slash + 1 : "");
    }
    trit_dtype dt = TRIT_F32, ht = TRIT_F32;
    const bool ok = blocks[0] && (strcmp(blocks, "fp32") == 0 || (dt = trit_quant_format_dtype(blocks)) != TRIT_DTYPE_COUNT);
    if (ok && !head[0]) ht = dt == TRIT_TERNARY || dt == TRIT_TERNARY_B3 ? TRIT_QINT8 : dt;
    if (!ok || (head[0] && strcmp(head, "fp32") != 0 && (ht = trit_quant_format_dtype(head)) == TRIT_DTYPE_COUNT))
        return trit_error(TRIT_ERR_INVALID, "--format expects FORMAT or FORMAT/HEAD, each fp32, int8, int4, int2, nf4, "
                          "fp8, fp8-e5m2, ternary or ternary-b3; got '%s'", format ? format : "");
    const int64_t prompt = tokens < c.seq_len / 2 ? tokens : c.seq_len / 2;
    const int64_t gen = tokens < c.seq_len - prompt ? tokens : c.seq_len - prompt;
    if (prompt < 1 || gen < 1) return trit_error(TRIT_ERR_INVALID, "decode bench: need at least 1 token, got %lld",
                                                 (long long)tokens);
    memset(r, 0, sizeof *r);
    snprintf(r->config, sizeof r->config, "%s", config);
    snprintf(r->format, sizeof r->format, "%s", format);
    r->kv_cache = kv;
    if (threads > 0) trit_threads_set(threads);
    r->threads = trit_threads_get();
    // Decode-only, made a piece at a time: the peak is what decoding holds, never the f32 model.
    trit_peak_rss_reset();
    const trit_quant_spec bs = trit_quant_spec_default(dt), hs = trit_quant_spec_default(ht);
    trit_gpt *m = trit_gpt_new_quantized(&c, 1, dt != TRIT_F32 ? &bs : NULL, ht != TRIT_F32 ? &hs : NULL);
    if (!m) return trit_error(TRIT_ERR_NOMEM, "decode bench: cannot make the %s model: %s", format, trit_last_error());
    float *logits = trit_aligned_alloc(sizeof(float) * (size_t)c.vocab_size);
    trit_gpt_cache *k = s == TRIT_OK && logits ? trit_gpt_cache_new_kv(m, kv) : NULL;
    if (s == TRIT_OK && !k) s = logits ? TRIT_ERR_NOMEM : trit_error(TRIT_ERR_NOMEM, "decode bench: out of memory");
    int32_t *prompt_tokens = malloc(sizeof(int32_t) * (size_t)prompt);
    int32_t *made = malloc(sizeof(int32_t) * (size_t)(gen + 1));
    if (!prompt_tokens || !made) s = trit_error(TRIT_ERR_NOMEM, "decode bench: out of memory");
    for (int64_t i = 0; s == TRIT_OK && i < prompt; i++) prompt_tokens[i] = (int32_t)(i * 31 % c.vocab_size);
    // The first pass warms caches and pages; the rates are the means over the timed passes (as
    // llama-bench reports its repetitions), a single prompt being too short to time alone.
    // Greedy generation of gen + 1 tokens is the prompt's prefill, then gen decodes (each token
    // but the last is fed back); the clock between them stops when the first token is picked.
    enum { TIMED_PASSES = 3 };
    double prefill_sum = 0, decode_sum = 0;
    for (int pass = 0; pass <= TIMED_PASSES && s == TRIT_OK; pass++) {
        double t[3];
        const trit_decode_fns fns = {NULL, prefill_done, &t[1]};
        t[0] = now_s();
        s = trit_decode_tokens(m, k, prompt_tokens, prompt, gen + 1, &fns, made, logits);
        t[2] = now_s();
        if (pass > 0) prefill_sum += (double)prompt / (t[1] - t[0]), decode_sum += (double)gen / (t[2] - t[1]);
    }
    free(made);
    r->prefill_tokens_per_s = prefill_sum / TIMED_PASSES;
    r->decode_tokens_per_s = decode_sum / TIMED_PASSES;
    free(prompt_tokens);
    r->prompt_tokens = prompt, r->decode_tokens = gen;
    r->params = trit_gpt_num_params(m);
    r->weight_bytes = trit_gpt_weight_bytes(m);
    // The timed decode steps feed positions prompt .. prompt + gen - 1.
    double read = 0;
    for (int64_t p = prompt; p < prompt + gen; p++) read += (double)trit_gpt_decode_read_bytes(m, kv, p);
    r->bytes_per_token = read / (double)gen;
    r->peak_rss_bytes = trit_peak_rss_bytes();
    trit_gpt_cache_free(k);
    trit_aligned_free(logits);
    trit_gpt_free(m);
    return s;
}

void trit_bench_decode_set_bandwidth(trit_decode_result *r, double read_bytes_per_s) {
    if (!r) return;
    r->read_bytes_per_s = read_bytes_per_s;
    r->bandwidth_fraction = read_bytes_per_s > 0 ? r->decode_tokens_per_s * r->bytes_per_token / read_bytes_per_s : 0;
}

int trit_bench_decode_json(const trit_decode_result *r, char *buf, size_t n) {
    return snprintf(buf, n,
                    "{\"config\":\"%s\",\"format\":\"%s\",\"kv_cache\":\"%s\",\"decode_tokens_per_s\":%.2f,"
                    "\"prefill_tokens_per_s\":%.2f,\"weight_bytes\":%zu,\"bytes_per_token\":%.0f,"
                    "\"read_bytes_per_s\":%.6g,\"bandwidth_fraction\":%.4f,\"peak_rss_bytes\":%zu,\"threads\":%d}",
                    r->config, r->format, trit_dtype_name(r->kv_cache), r->decode_tokens_per_s, r->prefill_tokens_per_s,
                    r->weight_bytes, r->bytes_per_token, r->read_bytes_per_s, r->bandwidth_fraction, r->peak_rss_bytes,
                    r->threads);
}
