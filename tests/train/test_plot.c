// Metrics and their plot: metrics.jsonl lines read back (val_loss only where evaluated), and
// the SVG has the parts a reader needs (axes with tick labels, axis titles, both series, a
// legend), escapes the title, balances its tags, and maps the data into the plot area.
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>

#include "train_fixture.h"

static int count(const char *s, const char *what) {
    int n = 0;
    for (const char *p = s; (p = strstr(p, what)) != NULL; p++) n++;
    return n;
}

static void test_metrics_read(void **state) {
    (void)state;
    char root[512], path[600];
    tfile_mkdtemp(root, sizeof root, "metrics");
    snprintf(path, sizeof path, "%s/metrics.jsonl", root);
    const char *text = "{\"step\":10,\"loss\":2.5,\"lr\":0.001,\"grad_norm\":1,\"ms\":3,\"tokens_per_s\":100}\n"
                       "\n"
                       "{\"step\":20,\"loss\":2.25,\"val_loss\":2.375,\"lr\":0.001,\"grad_norm\":1,\"ms\":3,\"tokens_per_s\":100}\n";
    tfile_write(path, text, strlen(text));
    trit_metric_row *r;
    int64_t n;
    assert_int_equal(trit_metrics_read(path, &r, &n), TRIT_OK);
    assert_int_equal(n, 2);
    assert_int_equal(r[0].step, 10);
    assert_true(r[0].loss == 2.5 && isnan(r[0].val_loss));
    assert_true(r[1].loss == 2.25 && r[1].val_loss == 2.375);
    free(r);
    tfile_write(path, "{\"loss\": 1}\n", 12);
    assert_int_not_equal(trit_metrics_read(path, &r, &n), TRIT_OK);
    assert_non_null(strstr(trit_last_error(), "line 1"));
    tfile_rm_rf(root);
}

static void test_svg(void **state) {
    (void)state;
    char root[512], path[600];
    tfile_mkdtemp(root, sizeof root, "plot");
    snprintf(path, sizeof path, "%s/loss.svg", root);
    trit_metric_row rows[50];
    for (int i = 0; i < 50; i++)
        rows[i] = (trit_metric_row){(i + 1) * 10, 4.0 * exp(-i / 15.0) + 1, i % 10 == 9 ? 4.2 * exp(-i / 15.0) + 1.1 : NAN};
    assert_int_equal(trit_plot_svg(rows, 50, "run <a&b>", path), TRIT_OK);
    uint8_t *b;
    size_t n;
    assert_int_equal(trit_file_read_all(path, &b, &n), TRIT_OK);
    const char *s = (const char *)b;
    assert_non_null(strstr(s, "<svg xmlns=\"http://www.w3.org/2000/svg\""));
    assert_non_null(strstr(s, "run &lt;a&amp;b&gt;"));
    assert_null(strstr(s, "<a&b>"));
    assert_non_null(strstr(s, ">step</text>"));
    assert_non_null(strstr(s, ">loss (cross-entropy, nats)</text>"));
    assert_non_null(strstr(s, ">train loss</text>"));
    assert_non_null(strstr(s, ">val loss</text>"));
    assert_int_equal(count(s, "<polyline"), 2);
    assert_int_equal(count(s, "<circle"), 5 + 1);  // 5 val points + the legend marker
    assert_true(count(s, "text-anchor=\"middle\">") >= 5);  // x tick labels (and titles)
    assert_true(count(s, "text-anchor=\"end\">") >= 4);     // y tick labels
    // Steps run 10..500: ticks at 0 and 500 appear; every point lies in the plot area.
    assert_non_null(strstr(s, ">500</text>"));
    assert_int_equal(count(s, "<g"), count(s, "</g>"));
    assert_int_equal(count(s, "<svg"), count(s, "</svg>"));
    const char *pts = strstr(s, "points=\"") + 8;
    double x, y;
    int k = 0;
    while (sscanf(pts, "%lf,%lf", &x, &y) == 2) {
        assert_true(x >= 80 - 0.1 && x <= 770 + 0.1 && y >= 50 - 0.1 && y <= 430 + 0.1);
        pts = strchr(pts, ' ') + 1;
        k++;
    }
    assert_int_equal(k, 50);
    free(b);
    assert_int_not_equal(trit_plot_svg(rows, 0, "x", path), TRIT_OK);
    tfile_rm_rf(root);
}

// Several runs in one plot: one colour per run for both its curves, a legend row per run name.
static void test_svg_runs(void **state) {
    (void)state;
    char root[512], path[600];
    tfile_mkdtemp(root, sizeof root, "plot");
    snprintf(path, sizeof path, "%s/cmp.svg", root);
    trit_metric_row a[20], b[20];
    for (int i = 0; i < 20; i++) {
        a[i] = (trit_metric_row){(i + 1) * 100, 3.0 - 0.05 * i, i % 5 == 4 ? 3.1 - 0.05 * i : NAN};
        b[i] = (trit_metric_row){(i + 1) * 100, 3.0 - 0.04 * i, i % 5 == 4 ? 3.1 - 0.04 * i : NAN};
    }
    const trit_plot_run runs[2] = {{"fp32", a, 20}, {"bf16 <sr>", b, 20}};
    assert_int_equal(trit_plot_svg_runs(runs, 2, "fp32 vs bf16", path), TRIT_OK);
    uint8_t *buf;
    size_t n;
    assert_int_equal(trit_file_read_all(path, &buf, &n), TRIT_OK);
    const char *s = (const char *)buf;
    assert_int_equal(count(s, "<polyline"), 4);
    assert_int_equal(count(s, "<polyline fill=\"none\" stroke=\"#1f77b4\""), 2);  // run 0: train and val
    assert_int_equal(count(s, "<polyline fill=\"none\" stroke=\"#ff7f0e\""), 2);  // run 1
    assert_non_null(strstr(s, ">fp32</text>"));
    assert_non_null(strstr(s, ">bf16 &lt;sr&gt;</text>"));
    assert_int_equal(count(s, "<circle"), 4 + 4 + 2);  // val points of both runs + legend markers
    free(buf);
    assert_int_not_equal(trit_plot_svg_runs(runs, 0, "x", path), TRIT_OK);
    assert_int_not_equal(trit_plot_svg_runs(runs, 7, "x", path), TRIT_OK);
    tfile_rm_rf(root);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_metrics_read), cmocka_unit_test(test_svg),
                                       cmocka_unit_test(test_svg_runs)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
