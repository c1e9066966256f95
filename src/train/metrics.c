// Progress output: the log line on stdout and the same numbers as one JSON object per line in
// DIR/metrics.jsonl (written with printf: the keys are fixed and the values are numbers; "%.9g"
// keeps every float bit). Reading the file back uses cJSON.
#define _POSIX_C_SOURCE 200809L
#include "trit/io.h"
#include "trit/train.h"
#include "train/train_internal.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void trit_format_duration(double seconds, char *buf, size_t n) {
    if (!(seconds >= 0) || seconds > 1e8) {
        snprintf(buf, n, "?");
        return;
    }
    long s = (long)(seconds + 0.5);
    if (s >= 3600) snprintf(buf, n, "%ldh%02ldm", s / 3600, s / 60 % 60);
    else if (s >= 60) snprintf(buf, n, "%ldm%02lds", s / 60, s % 60);
    else snprintf(buf, n, "%.1fs", seconds);
}

void trit_progress_print(const trit_train_step_info *in, double val_loss_known, double tokens_per_s,
                         double eta_seconds) {
    char eta[32], val[32] = "", acc[32] = "";
    trit_format_duration(eta_seconds, eta, sizeof eta);
    if (!isnan(val_loss_known)) snprintf(val, sizeof val, " | val %.4f", val_loss_known);
    if (!isnan(in->accuracy)) snprintf(acc, sizeof acc, " | acc %.2f%%", 100.0 * in->accuracy);
    char extra[192] = "";
    int k = 0;
    if (!isnan(in->loss_scale)) k = snprintf(extra, sizeof extra, " | scale %g", in->loss_scale);
    if (!isnan(in->comm_ms) && k >= 0 && (size_t)k < sizeof extra)
        k += snprintf(extra + k, sizeof extra - (size_t)k, " | comm wait %.1f ms", in->comm_ms);
    if (!isnan(in->comm_bytes) && k >= 0 && (size_t)k < sizeof extra)
        k += snprintf(extra + k, sizeof extra - (size_t)k, " | comm %.1f kB", in->comm_bytes / 1e3);
    if (!isnan(in->bubble) && k >= 0 && (size_t)k < sizeof extra)
        k += snprintf(extra + k, sizeof extra - (size_t)k, " | bubble %.1f%% (ideal %.1f%%)", 100.0 * in->bubble,
                      100.0 * in->bubble_ideal);
    if (in->skipped > 0 && k >= 0 && (size_t)k < sizeof extra)
        snprintf(extra + k, sizeof extra - (size_t)k, " | skipped %lld%s", (long long)in->skipped,
                 in->was_skipped ? " (this step)" : "");
    int w = snprintf(NULL, 0, "%lld", (long long)in->steps);
    printf("step %*lld/%lld | loss %.4f%s%s | lr %.2e | norm %.3f%s | %.1f ms/step | %.0f tok/s | ETA %s\n", w,
           (long long)in->step, (long long)in->steps, in->loss, val, acc, in->lr, in->grad_norm, extra, in->ms,
           tokens_per_s, eta);
    fflush(stdout);
}

double trit_wall_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

// The numbers of one metrics line, in the order written, each with the printf format that
// writes it: metrics.jsonl prints them, the TensorBoard file stores the printed values.
typedef struct metric {
    const char *key;
    double value;
    const char *fmt;
    bool null;  // JSON has no NaN or Inf: a skipped step's non-finite loss is written as null
} metric;
enum { MAX_METRICS = 12 };

static int metric_row(const trit_train_step_info *in, double tokens_per_s, metric *m) {
    int n = 0;
    m[n++] = (metric){"loss", in->loss, "%.9g", !isfinite(in->loss)};
    if (!isnan(in->val_loss)) m[n++] = (metric){"val_loss", in->val_loss, "%.9g", false};
    if (!isnan(in->accuracy)) m[n++] = (metric){"accuracy", in->accuracy, "%.9g", false};
    if (!isnan(in->loss_scale)) m[n++] = (metric){"loss_scale", in->loss_scale, "%.9g", false};
    m[n++] = (metric){"skipped", (double)in->skipped, "%.0f", false};
    m[n++] = (metric){"lr", in->lr, "%.9g", false};
    m[n++] = (metric){"grad_norm", isfinite(in->grad_norm) ? in->grad_norm : -1.0, "%.9g", false};
    m[n++] = (metric){"ms", in->ms, "%.4f", false};
    m[n++] = (metric){"tokens_per_s", tokens_per_s, "%.2f", false};
    if (!isnan(in->comm_ms)) m[n++] = (metric){"comm_ms", in->comm_ms, "%.4f", false};
    if (!isnan(in->comm_bytes)) m[n++] = (metric){"comm_bytes", in->comm_bytes, "%.0f", false};
    if (!isnan(in->bubble)) m[n++] = (metric){"bubble", in->bubble, "%.4f", false};
    if (!isnan(in->bubble_ideal)) m[n++] = (metric){"bubble_ideal", in->bubble_ideal, "%.4f", false};
    return n;
}

void trit_metrics_write(FILE *fp, const trit_train_step_info *in, double tokens_per_s) {
    if (!fp) return;
    metric m[MAX_METRICS];
    int n = metric_row(in, tokens_per_s, m);
    fprintf(fp, "{\"step\":%lld", (long long)in->step);
    for (int i = 0; i < n; i++) {
        fprintf(fp, ",\"%s\":", m[i].key);
        if (m[i].null) fputs("null", fp);
        else fprintf(fp, m[i].fmt, m[i].value);
    }
    fputs("}\n", fp);
    fflush(fp);
}

trit_status trit_metrics_tb_write(trit_tb_writer *w, double wall_time, const trit_train_step_info *in,
                                  double tokens_per_s) {
    if (!w) return TRIT_OK;
    metric m[MAX_METRICS];
    int n = metric_row(in, tokens_per_s, m), k = 0;
    trit_tb_scalar v[MAX_METRICS];
    for (int i = 0; i < n; i++) {
        if (m[i].null) continue;
        char text[64];
        snprintf(text, sizeof text, m[i].fmt, m[i].value);
        v[k++] = (trit_tb_scalar){m[i].key, (float)strtod(text, NULL)};
    }
    return trit_tb_write_scalars(w, wall_time, in->step, v, k);
}

// Step of one metrics line of n bytes, or -1 if it has none.
static int64_t line_step(const char *line, size_t n) {
    cJSON *o = cJSON_ParseWithLength(line, n);
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(o, "step");
    int64_t step = -1;
    if (cJSON_IsNumber(s) && !trit_f64_to_i64_exact(s->valuedouble, 0, INT64_MAX, &step)) step = -1;
    cJSON_Delete(o);
    return step;
}

// Rewrite the file at `path` (atomically) with only its complete lines of step <= keep_until.
static trit_status metrics_truncate(const char *path, int64_t keep_until) {
    uint8_t *text = NULL;
    size_t len = 0;
    if (trit_file_read_all(path, &text, &len) != TRIT_OK) {
        trit_clear_error();
        return TRIT_OK;  // no metrics yet
    }
    char *keep = malloc(len + 1);
    if (!keep) {
        free(text);
        return trit_error(TRIT_ERR_NOMEM, "cannot allocate %zu bytes", len);
    }
    size_t k = 0;
    for (size_t i = 0; i < len;) {
        const char *line = (const char *)text + i;
        const char *nl = memchr(line, '\n', len - i);
        if (!nl) break;  // a line cut short by a crash
        size_t n = (size_t)(nl - line) + 1;
        int64_t st = line_step(line, n - 1);
        if (st >= 0 && st <= keep_until) {
            memcpy(keep + k, line, n);
            k += n;
        }
        i += n;
    }
    trit_status s = trit_file_write_atomic(path, keep, k);
    free(keep);
    free(text);
    return s;
}

FILE *trit_metrics_open(const char *dir, int64_t keep_until) {
    char path[TRIT_PATH_MAX + 32];
    if (trit_path_join(path, sizeof path, dir, TRIT_CKPT_METRICS) != TRIT_OK) return NULL;
    if (keep_until >= 0 && metrics_truncate(path, keep_until) != TRIT_OK) return NULL;
    FILE *fp = fopen(path, keep_until >= 0 ? "a" : "w");
    if (!fp) trit_error(TRIT_ERR_IO, "cannot open '%s' for writing", path);
    return fp;
}

static double num_or_nan(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

trit_status trit_metrics_read(const char *path, trit_metric_row **rows, int64_t *n) {
    *rows = NULL;
    *n = 0;
    uint8_t *text = NULL;
    size_t len = 0;
    trit_status s = trit_file_read_all(path, &text, &len);
    if (s != TRIT_OK) return s;
    int64_t cap = 1;
    for (size_t i = 0; i < len; i++) cap += text[i] == '\n';
    trit_metric_row *r = malloc((size_t)cap * sizeof *r);
    if (!r) {
        free(text);
        return trit_error(TRIT_ERR_NOMEM, "cannot allocate %lld metric rows", (long long)cap);
    }
    int64_t k = 0, lineno = 0;
    char *save = NULL;
    for (char *line = strtok_r((char *)text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        lineno++;
        if (strspn(line, " \t\r") == strlen(line)) continue;
        cJSON *o = cJSON_Parse(line);
        const cJSON *step = cJSON_GetObjectItemCaseSensitive(o, "step");
        int64_t at = 0;
        if (!cJSON_IsObject(o) || !cJSON_IsNumber(step) || !trit_f64_to_i64_exact(step->valuedouble, 0, INT64_MAX, &at)) {
            cJSON_Delete(o);
            free(r);
            free(text);
            return trit_error(TRIT_ERR_FORMAT, "'%s' line %lld is not a metrics object with a whole, non-negative \"step\"",
                              path, (long long)lineno);
        }
        r[k++] = (trit_metric_row){at, num_or_nan(o, "loss"), num_or_nan(o, "val_loss")};
        cJSON_Delete(o);
    }
    free(text);
    *rows = r;
    *n = k;
    return TRIT_OK;
}
