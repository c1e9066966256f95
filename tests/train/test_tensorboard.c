// `trit train --tensorboard DIR`: the event files hold, at each step metrics.jsonl has a line
// for, the same values (each as the float of the number printed there) under the same keys;
// every record's CRCs check. A run stopped and resumed writes a second file that starts with a
// restart at its first step, so TensorBoard drops what the first file logged past the
// checkpoint. (tests/reference/check_tensorboard.py checks the same with TensorBoard's reader.)
#define _DEFAULT_SOURCE  // scandir, alphasort
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <math.h>

#include "train_fixture.h"

enum { MAX_EVENTS = 256, MAX_VALUES = 16 };

typedef struct event {
    int64_t step;
    double wall;
    bool file_version, start;
    int n;
    char tag[MAX_VALUES][32];
    float value[MAX_VALUES];
} event;

static uint64_t varint(const uint8_t **p, const uint8_t *end) {
    uint64_t v = 0;
    for (int shift = 0; *p < end && shift < 64; shift += 7) {
        uint8_t b = *(*p)++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) return v;
    }
    fail_msg("truncated varint");
    return 0;
}

// Summary.Value{tag = 1, simple_value = 2} into e.
static void decode_value(const uint8_t *p, const uint8_t *end, event *e) {
    assert_true(e->n < MAX_VALUES);
    while (p < end) {
        uint64_t key = varint(&p, end);
        if (key == (1 << 3 | 2)) {
            uint64_t n = varint(&p, end);
            assert_true(n < sizeof e->tag[0] && p + n <= end);
            memcpy(e->tag[e->n], p, n);
            e->tag[e->n][n] = '\0';
            p += n;
        } else if (key == (2 << 3 | 5)) {
            assert_true(p + 4 <= end);
            memcpy(&e->value[e->n], p, 4);
            p += 4;
        } else {
            fail_msg("unexpected Summary.Value key %llu", (unsigned long long)key);
        }
    }
    e->n++;
}

static void decode_event(const uint8_t *p, const uint8_t *end, event *e) {
    memset(e, 0, sizeof *e);
    while (p < end) {
        uint64_t key = varint(&p, end);
        if (key == (1 << 3 | 1)) {
            memcpy(&e->wall, p, 8);
            p += 8;
        } else if (key == (2 << 3 | 0)) {
            e->step = (int64_t)varint(&p, end);
        } else if ((key & 7) == 2) {
            uint64_t n = varint(&p, end);
            assert_true(p + n <= end);
            const uint8_t *q = p, *qe = p + n;
            if (key >> 3 == 3) e->file_version = n == 13 && memcmp(p, "brain.Event:2", 13) == 0;
            else if (key >> 3 == 7) e->start = n == 2 && q[0] == 0x08 && q[1] == 1;
            else if (key >> 3 == 5)
                while (q < qe) {
                    assert_int_equal(varint(&q, qe), 1 << 3 | 2);
                    uint64_t vn = varint(&q, qe);
                    decode_value(q, q + vn, e);
                    q += vn;
                }
            else fail_msg("unexpected Event field %llu", (unsigned long long)(key >> 3));
            p += n;
        } else {
            fail_msg("unexpected Event key %llu", (unsigned long long)key);
        }
    }
}

// The event files of dir in name order (the order TensorBoard reads them), decoded.
static int read_events(const char *dir, event *out, int *files) {
    struct dirent **names;
    int nn = scandir(dir, &names, NULL, alphasort), n = 0;
    assert_true(nn >= 0);
    *files = 0;
    for (int i = 0; i < nn; i++) {
        if (strncmp(names[i]->d_name, "events.out.tfevents.", 20) == 0) {
            (*files)++;
            uint8_t *data = NULL;
            size_t len = 0;
            assert_int_equal(trit_file_read_all(tfile_join(dir, names[i]->d_name), &data, &len), TRIT_OK);
            for (size_t at = 0; at < len;) {
                const uint8_t *rec;
                size_t rn, used;
                if (trit_tfrecord_read(data + at, len - at, &rec, &rn, &used) != TRIT_OK) fail_msg("%s", trit_last_error());
                assert_true(n < MAX_EVENTS);
                decode_event(rec, rec + rn, &out[n++]);
                at += used;
            }
            free(data);
        }
        free(names[i]);
    }
    free(names);
    return n;
}

// Each metrics.jsonl line has one scalar event at its step, with every non-null key equal.
static void expect_same_as_metrics(const char *run, const event *ev, int n, int64_t from) {
    uint8_t *text = NULL;
    size_t len = 0;
    assert_int_equal(trit_file_read_all(tfile_join(run, TRIT_CKPT_METRICS), &text, &len), TRIT_OK);
    int lines = 0;
    char *save = NULL;
    for (char *line = strtok_r((char *)text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        cJSON *o = cJSON_Parse(line);
        int64_t step = (int64_t)cJSON_GetObjectItemCaseSensitive(o, "step")->valuedouble;
        if (step < from) {
            cJSON_Delete(o);
            continue;
        }
        const event *e = NULL;
        for (int i = 0; i < n; i++)
            if (!ev[i].file_version && !ev[i].start && ev[i].step == step) e = &ev[i];
        if (!e) fail_msg("no event at step %lld", (long long)step);
        int keys = 0;
        for (const cJSON *it = o->child; it; it = it->next) {
            if (strcmp(it->string, "step") == 0 || cJSON_IsNull(it)) continue;
            keys++;
            int k = 0;
            while (k < e->n && strcmp(e->tag[k], it->string) != 0) k++;
            if (k == e->n) fail_msg("step %lld: no scalar '%s'", (long long)step, it->string);
            if (e->value[k] != (float)it->valuedouble)
                fail_msg("step %lld %s: event %.9g, metrics.jsonl %.9g", (long long)step, it->string, e->value[k],
                         it->valuedouble);
        }
        assert_int_equal(keys, e->n);
        assert_true(e->wall > 1e9);
        lines++;
        cJSON_Delete(o);
    }
    free(text);
    assert_true(lines > 3);
}

static void test_events_match_metrics(void **state) {
    (void)state;
    char root[512];
    tfile_mkdtemp(root, sizeof root, "tensorboard");
    char text[600], run[600], tb[600];
    snprintf(text, sizeof text, "%s/corpus.txt", root);
    snprintf(run, sizeof run, "%s/run", root);
    snprintf(tb, sizeof tb, "%s/tb/nested", root);
    tf_write_corpus(text);

    trit_train_config c;
    tf_tiny_config(&c, text, run);
    assert_int_equal(trit_train_config_set(&c, "tensorboard", tb), TRIT_OK);
    c.ckpt_every = 6;
    c.stop_after = 6;
    trit_train_result r;
    assert_int_equal(trit_train_run(&c, NULL, &r), TRIT_OK);
    assert_int_equal(r.step, 6);

    static event ev[MAX_EVENTS];
    int files = 0, n = read_events(tb, ev, &files);
    assert_int_equal(files, 1);
    assert_true(ev[0].file_version);
    assert_int_equal(n, 1 + 6);  // --log-every 1
    expect_same_as_metrics(run, ev, n, 0);
    bool has_val = false;
    for (int i = 0; i < n; i++)
        for (int k = 0; k < ev[i].n; k++) has_val |= strcmp(ev[i].tag[k], "val_loss") == 0 && ev[i].step == 4;
    assert_true(has_val);

    // Resume to the end: the saved --tensorboard is kept; a second file starts with a restart at step 7.
    trit_train_config_init(&c);
    assert_int_equal(trit_train_config_set(&c, "resume", run), TRIT_OK);
    c.quiet = 1;
    assert_int_equal(trit_train_run(&c, NULL, &r), TRIT_OK);
    assert_int_equal(r.step, 12);
    n = read_events(tb, ev, &files);
    assert_true(files == 2 || files == 1);  // one file when both runs started in the same second and process
    int starts = 0;
    for (int i = 0; i < n; i++)
        if (ev[i].start) {
            starts++;
            assert_int_equal(ev[i].step, 7);
        }
    assert_int_equal(starts, 1);
    expect_same_as_metrics(run, ev, n, 7);
    tfile_rm_rf(root);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_events_match_metrics),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
