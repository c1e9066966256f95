// Loss curves as SVG: train loss (a line) and validation loss (a line with markers) against
// step, with axes, "nice" ticks (1, 2, 5 x 10^k) and their labels, axis titles and a legend;
// several runs in one plot (e.g. fp32 against bf16) get one colour each.
// Plain SVG 1.1 that any browser shows; written atomically.
#include "trit/io.h"
#include "trit/train.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { W = 800, H = 500, LEFT = 80, RIGHT = 30, TOP = 50, BOTTOM = 70 };

typedef struct svg {
    char *p;
    size_t n, cap;
    bool oom;
} svg;

static void put(svg *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(svg *s, const char *fmt, ...) {
    if (s->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(s->p ? s->p + s->n : NULL, s->p ? s->cap - s->n : 0, fmt, ap);
        va_end(ap);
        if (k < 0) {
            s->oom = true;
            return;
        }
        if (s->p && s->n + (size_t)k < s->cap) {
            s->n += (size_t)k;
            return;
        }
        size_t cap = s->cap ? s->cap * 2 : 4096;
        while (cap < s->n + (size_t)k + 1) cap *= 2;
        char *p = realloc(s->p, cap);
        if (!p) {
            s->oom = true;
            return;
        }
        s->p = p;
        s->cap = cap;
    }
}

// Text for XML: escape the five special characters.
static void put_text(svg *s, const char *t) {
    for (; *t; t++) {
        switch (*t) {
        case '<': put(s, "&lt;"); break;
        case '>': put(s, "&gt;"); break;
        case '&': put(s, "&amp;"); break;
        case '"': put(s, "&quot;"); break;
        case '\'': put(s, "&apos;"); break;
        default: put(s, "%c", *t);
        }
    }
}

// A tick spacing of 1, 2 or 5 x 10^k giving about `target` intervals over span.
static double nice_step(double span, int target) {
    double raw = span / target, p = pow(10, floor(log10(raw))), f = raw / p;
    return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * p;
}

typedef struct axis {
    double lo, hi, step;
} axis;

static axis make_axis(double lo, double hi, int target, bool from_zero_ok) {
    if (!(hi > lo)) {
        double pad = fabs(lo) > 0 ? fabs(lo) * 0.1 : 1;
        lo -= pad;
        hi += pad;
    }
    if (from_zero_ok && lo >= 0 && lo < (hi - lo) * 0.2) lo = 0;
    double st = nice_step(hi - lo, target);
    return (axis){floor(lo / st) * st, ceil(hi / st) * st, st};
}

static double px(const axis *a, double v) { return LEFT + (v - a->lo) / (a->hi - a->lo) * (W - LEFT - RIGHT); }
static double py(const axis *a, double v) { return H - BOTTOM - (v - a->lo) / (a->hi - a->lo) * (H - TOP - BOTTOM); }

static void put_ticks(svg *s, const axis *x, const axis *y) {
    put(s, "<g font-family=\"sans-serif\" font-size=\"12\" fill=\"#333\">\n");
    for (double v = x->lo; v <= x->hi + x->step * 0.5; v += x->step) {
        double X = px(x, v);
        put(s, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#e5e5e5\"/>\n", X, TOP, X, H - BOTTOM);
        put(s, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#333\"/>\n", X, H - BOTTOM, X, H - BOTTOM + 5);
        put(s, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%g</text>\n", X, H - BOTTOM + 20, v);
    }
    for (double v = y->lo; v <= y->hi + y->step * 0.5; v += y->step) {
        double Y = py(y, v);
        put(s, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#e5e5e5\"/>\n", LEFT, Y, W - RIGHT, Y);
        put(s, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#333\"/>\n", LEFT - 5, Y, LEFT, Y);
        put(s, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%.4g</text>\n", LEFT - 8, Y + 4, v);
    }
    put(s, "</g>\n");
}

static void put_series(svg *s, const trit_metric_row *r, int64_t n, bool val, const axis *x, const axis *y,
                       const char *color) {
    put(s, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"%s\" points=\"", color, val ? "2" : "1.5");
    for (int64_t i = 0; i < n; i++) {
        double v = val ? r[i].val_loss : r[i].loss;
        if (isfinite(v)) put(s, "%.1f,%.1f ", px(x, (double)r[i].step), py(y, v));
    }
    put(s, "\"/>\n");
    for (int64_t i = 0; val && i < n; i++)
        if (isfinite(r[i].val_loss))
            put(s, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" fill=\"%s\"/>\n", px(x, (double)r[i].step),
                py(y, r[i].val_loss), color);
}

// Train and val ranges of every run: the axes cover them all.
static int64_t data_ranges(const trit_plot_run *runs, int n_runs, double *x0, double *x1, double *y0, double *y1) {
    int64_t points = 0;
    *x0 = *y0 = INFINITY;
    *x1 = *y1 = -INFINITY;
    for (int k = 0; k < n_runs; k++)
        for (int64_t i = 0; i < runs[k].n; i++) {
            const trit_metric_row *r = &runs[k].rows[i];
            *x0 = fmin(*x0, (double)r->step);
            *x1 = fmax(*x1, (double)r->step);
            if (isfinite(r->loss)) points++, *y0 = fmin(*y0, r->loss), *y1 = fmax(*y1, r->loss);
            if (isfinite(r->val_loss)) points++, *y0 = fmin(*y0, r->val_loss), *y1 = fmax(*y1, r->val_loss);
        }
    return points;
}

static void put_frame(svg *s, const char *title, const axis *x, const axis *y) {
    put(s, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    put(s, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\">\n", W, H, W, H);
    put(s, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
    put(s, "<text x=\"%d\" y=\"28\" text-anchor=\"middle\" font-family=\"sans-serif\" font-size=\"16\">Loss: ",
        (LEFT + W - RIGHT) / 2);
    put_text(s, title ? title : "");
    put(s, "</text>\n");
    put_ticks(s, x, y);
    put(s, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#333\"/>\n", LEFT, TOP,
        W - LEFT - RIGHT, H - TOP - BOTTOM);
    put(s, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" font-family=\"sans-serif\" font-size=\"14\">step</text>\n",
        (LEFT + W - RIGHT) / 2, H - 20);
    put(s, "<text transform=\"translate(22,%d) rotate(-90)\" text-anchor=\"middle\" font-family=\"sans-serif\" "
           "font-size=\"14\">loss (cross-entropy, nats)</text>\n", (TOP + H - BOTTOM) / 2);
}

// One legend row: a line in `color` (with a marker for val curves) and its label.
static void put_legend_row(svg *s, int lx, int ly, const char *color, bool marker, const char *label) {
    put(s, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"%s\" stroke-width=\"2\"/>", lx + 10, ly, lx + 40,
        ly, color);
    if (marker) put(s, "<circle cx=\"%d\" cy=\"%d\" r=\"3.5\" fill=\"%s\"/>", lx + 25, ly, color);
    put(s, "<text x=\"%d\" y=\"%d\">", lx + 48, ly + 4);
    put_text(s, label);
    put(s, "</text>\n");
}

static const char *const COLORS[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b"};
enum { N_COLORS = 6, LEGEND_W = 230 };

trit_status trit_plot_svg_runs(const trit_plot_run *runs, int n_runs, const char *title, const char *svg_path) {
    if (!runs || n_runs < 1 || n_runs > N_COLORS)
        return trit_error(TRIT_ERR_INVALID, "plot: give 1 to %d runs, got %d", N_COLORS, n_runs);
    double x0, x1, y0, y1;
    if (data_ranges(runs, n_runs, &x0, &x1, &y0, &y1) == 0)
        return trit_error(TRIT_ERR_INVALID, "no loss values to plot: metrics.jsonl is empty (train for a few "
                          "steps first)");
    axis x = make_axis(x0, x1, 8, true), y = make_axis(y0, y1, 6, true);
    svg s = {0};
    put_frame(&s, title, &x, &y);
    // One run: train and val in two colours. Several: one colour per run, train thin, val with markers.
    const bool single = n_runs == 1;
    for (int k = 0; k < n_runs; k++) {
        put_series(&s, runs[k].rows, runs[k].n, false, &x, &y, single ? COLORS[0] : COLORS[k]);
        put_series(&s, runs[k].rows, runs[k].n, true, &x, &y, single ? COLORS[1] : COLORS[k]);
    }
    const int rows = single ? 2 : n_runs, lx = W - RIGHT - LEGEND_W - 10, ly = TOP + 12;
    put(&s, "<g font-family=\"sans-serif\" font-size=\"13\">\n"
            "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"white\" stroke=\"#999\"/>\n",
        lx, ly, LEGEND_W, 20 * rows + 10);
    if (single) {
        put_legend_row(&s, lx, ly + 17, COLORS[0], false, "train loss");
        put_legend_row(&s, lx, ly + 37, COLORS[1], true, "val loss");
    } else {
        for (int k = 0; k < n_runs; k++) put_legend_row(&s, lx, ly + 17 + 20 * k, COLORS[k], true, runs[k].name);
    }
    put(&s, "</g>\n</svg>\n");
    if (s.oom) {
        free(s.p);
        return trit_error(TRIT_ERR_NOMEM, "cannot build the SVG");
    }
    trit_status st = trit_file_write_atomic(svg_path, s.p, s.n);
    free(s.p);
    return st;
}

trit_status trit_plot_svg(const trit_metric_row *rows, int64_t n, const char *title, const char *svg_path) {
    const trit_plot_run run = {title ? title : "", rows, n};
    return trit_plot_svg_runs(&run, 1, title, svg_path);
}
