// A pipeline stage's part of the GPT training graph (trit_gpt_build_stage): the program's steps of
// a range of blocks (gpt_graph.c builds them), entered by the tokens or by the residual stream of
// the stage before, and left by the loss or by the residual stream for the stage after.
#include "nn/gpt_internal.h"
#include "trit/ops.h"

#include <string.h>

static trit_status check(const trit_gpt *m, int64_t B, int64_t T, int64_t first, int64_t end) {
    const int64_t L = m->cfg.n_layer;
    if (first < 0 || first >= end || end > L)
        return trit_error(TRIT_ERR_INVALID, "gpt stage: blocks [%lld, %lld) are not a non-empty range of the model's %lld",
                          (long long)first, (long long)end, (long long)L);
    if (B < 1 || T < 1 || T > m->cfg.seq_len)
        return trit_error(TRIT_ERR_INVALID, "gpt stage: need B >= 1 and 1 <= T <= seq_len = %lld, got B = %lld, T = %lld",
                          (long long)m->cfg.seq_len, (long long)B, (long long)T);
    if (B > (INT64_C(1) << 40) / (T * (m->cfg.vocab_size > m->cfg.n_embd ? m->cfg.vocab_size : m->cfg.n_embd)))
        return trit_error(TRIT_ERR_INVALID, "gpt stage: B = %lld x T = %lld is too large; lower the batch size",
                          (long long)B, (long long)T);
    if (m->dec)
        return trit_error(TRIT_ERR_STATE, "gpt stage: the model decodes only; load it again to train through a graph");
    return TRIT_OK;
}

// The stage's ops into g; the graph remembers a failed op, compile reports it.
static void build_ops(trit_graph *g, trit_gpt *m, int64_t B, int64_t T, int64_t first, int64_t end,
                      trit_gpt_stage *out) {
    const int64_t bt[2] = {B, T}, btc[3] = {B, T, m->cfg.n_embd};
    trit_gpt_graph gg = {.graph = g};
    if (first == 0) {
        gg.idx = out->idx = trit_graph_input(g, TRIT_I32, 2, bt, "idx");
    } else {
        out->input = trit_graph_input(g, trit_graph_dtype(g), 3, btc, "stage_input");
        if (out->input) trit_graph_input_requires_grad(g, out->input);
    }
    gpt_range r = {.first = first, .end = end, .x = out->input};
    trit_gpt_graph_range(g, m, T, &gg, true, &r);
    if (end == m->cfg.n_layer) {
        out->targets = trit_graph_input(g, TRIT_I32, 2, bt, "targets");
        out->loss = trit_cross_entropy(g, gg.logits, out->targets, -1, TRIT_REDUCE_MEAN);
    } else {
        out->output = r.x;
    }
}

trit_status trit_gpt_build_stage(trit_gpt *m, int64_t B, int64_t T, int64_t first, int64_t end, trit_gpt_stage *out) {
    if (!out) return trit_error(TRIT_ERR_INVALID, "gpt stage: NULL output struct");
    memset(out, 0, sizeof *out);
    if (!m) return trit_error(TRIT_ERR_INVALID, "gpt stage: NULL model");
    trit_status s = check(m, B, T, first, end);
    if (s == TRIT_OK) s = trit_gpt_attach_grads(m);
    if (s != TRIT_OK) return s;
    trit_graph *g = trit_graph_new_policy(&m->policy);
    if (!g) return trit_error(TRIT_ERR_INVALID, "gpt stage: %s", trit_last_error());
    out->graph = g;
    build_ops(g, m, B, T, first, end, out);
    // The residual stream crosses between stages in the accumulate dtype, as the next stage's input.
    if (out->output && out->output->dtype != trit_graph_dtype(g))
        s = trit_error(TRIT_ERR_DTYPE, "gpt stage: the residual stream leaving block %lld is %s, not the graph's %s",
                       (long long)end - 1, trit_dtype_name(out->output->dtype), trit_dtype_name(trit_graph_dtype(g)));
    else s = out->loss ? trit_graph_compile(g, out->loss) : trit_graph_compile_output(g, out->output);
    if (s != TRIT_OK) trit_gpt_stage_free(out);
    return s;
}

void trit_gpt_stage_free(trit_gpt_stage *st) {
    if (!st) return;
    trit_graph_free(st->graph);
    memset(st, 0, sizeof *st);
}
