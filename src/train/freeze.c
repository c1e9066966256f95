// Freezing by name: --freeze and --unfreeze globs over the GPT-2 parameter names, applied in the
// order they were given ("freeze all attention, then re-open block 0's" is
// --freeze 'h.*.attn.*' --unfreeze 'h.0.attn.*'). A frozen parameter gets no gradient buffer
// (trit_flat_attach_grads skips it), no optimizer state and no update; the graph computes no
// gradient into it.
#include "trit/train.h"

#include <fnmatch.h>
#include <stdio.h>
#include <string.h>

// "wte.weight, wpe.weight, h.0.ln_1.weight, ..., ln_f.weight": the first names of m and its last.
static void some_names(const trit_gpt *m, char *buf, size_t n) {
    const int count = trit_gpt_num_tensors(m), first = count < 8 ? count : 8;
    buf[0] = 0;
    for (int i = 0; i < first; i++) {
        size_t k = strlen(buf);
        snprintf(buf + k, n - k, "%s%s", i ? ", " : "", trit_gpt_tensor(m, i)->name);
    }
    if (count > first) {
        size_t k = strlen(buf);
        snprintf(buf + k, n - k, ", ..., %s", trit_gpt_tensor(m, count - 1)->name);
    }
}

// One rule: the glob (without its '!') into pat; returns whether it unfreezes.
static bool rule_at(const char *rule, size_t len, char *pat, size_t n) {
    const bool open = len > 0 && rule[0] == '!';
    snprintf(pat, n, "%.*s", (int)(len - open), rule + open);
    return open;
}

static trit_status apply_rule(trit_gpt *m, const char *pat, bool open) {
    int hits = 0;
    for (int i = 0; i < trit_gpt_num_tensors(m); i++) {
        trit_tensor *p = trit_gpt_tensor(m, i);
        if (fnmatch(pat, p->name, 0) != 0) continue;
        hits++;
        if (open) p->flags &= ~(uint32_t)TRIT_FLAG_FROZEN;
        else p->flags |= TRIT_FLAG_FROZEN;
    }
    if (hits > 0) return TRIT_OK;
    char names[512];
    some_names(m, names, sizeof names);
    return trit_error(TRIT_ERR_INVALID, "--%s '%s' matches no parameter of the model; its names are %s (globs: '*' "
                      "matches any characters, dots included; `trit info RUN` lists every name)",
                      open ? "unfreeze" : "freeze", pat, names);
}

trit_status trit_train_freeze(trit_gpt *m, const char *rules, int64_t *trainable) {
    if (!m || !rules) return trit_error(TRIT_ERR_INVALID, "trit_train_freeze: NULL argument");
    for (const char *r = rules; *r;) {
        const size_t len = strcspn(r, ",");
        char pat[TRIT_PATH_MAX];
        const bool open = rule_at(r, len, pat, sizeof pat);
        if (!pat[0]) return trit_error(TRIT_ERR_INVALID, "--%s needs a glob, got an empty one", open ? "unfreeze" : "freeze");
        trit_status s = apply_rule(m, pat, open);
        if (s != TRIT_OK) return s;
        r += len + (r[len] == ',');
    }
    int64_t n = 0;
    for (int i = 0; i < trit_gpt_num_tensors(m); i++) {
        const trit_tensor *p = trit_gpt_tensor(m, i);
        if (!(p->flags & TRIT_FLAG_FROZEN)) n += trit_tensor_numel(p);
    }
    if (trainable) *trainable = n;
    if (n == 0)
        return trit_error(TRIT_ERR_INVALID, "--freeze '%s' leaves no parameter to train: freeze less, or re-open some "
                          "with --unfreeze", rules);
    return TRIT_OK;
}

void trit_train_freeze_describe(const char *rules, char *buf, size_t n) {
    buf[0] = 0;
    for (const char *r = rules ? rules : ""; *r;) {
        const size_t len = strcspn(r, ",");
        char pat[TRIT_PATH_MAX];
        const bool open = rule_at(r, len, pat, sizeof pat);
        const size_t k = strlen(buf);
        snprintf(buf + k, n - k, "%s--%s '%s'", k ? " " : "", open ? "unfreeze" : "freeze", pat);
        r += len + (r[len] == ',');
    }
}
