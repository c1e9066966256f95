// Offloaded optimizer state: an optimizer whose state lives in a memory-mapped file steps to the
// same bits as one in memory (AdamW, AdamW8bit and GaLore, whose state entries differ in dtype
// and shape), lists the same state, reports its file and resident bytes, and leaves no file
// behind; a second offload and an existing path are refused.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "trit/trit.h"
#include "scratch.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { NP = 4 };
static const int64_t shapes[NP][2] = {{64, 96}, {96, 64}, {1, 96}, {40, 300}};

static void make_params(trit_tensor **ps) {
    for (int i = 0; i < NP; i++) {
        char name[16];
        snprintf(name, sizeof name, "p%d", i);
        ps[i] = trit_tensor_new_param(TRIT_F32, shapes[i][0] == 1 ? 1 : 2,
                                      shapes[i][0] == 1 ? (int64_t[]){96} : (int64_t[]){shapes[i][0], shapes[i][1]}, name);
        trit_tensor_fill_normal(ps[i], 0, 0.5, 1, (uint64_t)i);
        ps[i]->grad = trit_tensor_new(TRIT_F32, ps[i]->ndim, ps[i]->shape);
    }
}

static int dir_entries(const char *dir) {
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

static void same_bits(trit_optim_config c, const char *dir) {
    trit_tensor *a[NP], *b[NP];
    make_params(a);
    make_params(b);
    trit_optim_group ga = {.params = a, .num_params = NP, .lr_scale = 1, .weight_decay = 0.1, .low_rank = true};
    trit_optim_group gb = ga;
    gb.params = b;
    trit_optim *oa = trit_optim_new(&c, &ga, 1), *ob = trit_optim_new(&c, &gb, 1);
    assert_non_null(oa);
    assert_non_null(ob);
    char path[600];
    snprintf(path, sizeof path, "%s/state.offload", dir);
    size_t off = 1, res = 1;
    trit_optim_offload_bytes(ob, &off, &res);
    assert_true(off == 0 && res == 0);
    assert_int_equal(trit_optim_offload(ob, path), TRIT_OK);
    assert_true(trit_optim_offloaded(ob));
    assert_int_equal(dir_entries(dir), 0);  // unlinked at once
    trit_optim_offload_bytes(ob, &off, &res);
    size_t total = 0, largest = 0;
    for (int i = 0; i < trit_optim_num_state(ob); i++) {
        trit_optim_state_buf s;
        assert_int_equal(trit_optim_get_state(ob, i, &s), TRIT_OK);
        total += trit_dtype_nbytes(s.dtype, s.count) + sizeof(float) * (size_t)s.num_scales;
    }
    assert_true(off >= total && off < total + 64 * 4 * NP * 2);
    // Resident: the largest parameter's state, p3's (40 x 300) for AdamW and AdamW8bit.
    for (int i = 0; i < trit_optim_num_state(ob); i++) {
        trit_optim_state_buf s;
        assert_int_equal(trit_optim_get_state(ob, i, &s), TRIT_OK);
        if (s.param == b[3]) largest += trit_dtype_nbytes(s.dtype, s.count) + sizeof(float) * (size_t)s.num_scales;
    }
    if (c.kind != TRIT_OPTIM_GALORE) assert_true(res >= largest && res < largest + 64 * 4 * 2);
    assert_true(res < off);
    assert_int_equal(trit_optim_offload(ob, path), TRIT_ERR_STATE);
    for (int step = 0; step < 5; step++) {
        for (int i = 0; i < NP; i++) {
            trit_tensor_fill_normal(a[i]->grad, 0, 1, 50 + (uint64_t)step, (uint64_t)i);
            trit_tensor_fill_normal(b[i]->grad, 0, 1, 50 + (uint64_t)step, (uint64_t)i);
        }
        assert_int_equal(trit_optim_step(oa, 1e-2), TRIT_OK);
        assert_int_equal(trit_optim_step(ob, 1e-2), TRIT_OK);
    }
    for (int i = 0; i < NP; i++) assert_memory_equal(trit_tensor_ptr(a[i]), trit_tensor_ptr(b[i]), trit_tensor_nbytes(a[i]));
    assert_int_equal(trit_optim_num_state(oa), trit_optim_num_state(ob));
    for (int i = 0; i < trit_optim_num_state(oa); i++) {
        trit_optim_state_buf x, y;
        assert_int_equal(trit_optim_get_state(oa, i, &x), TRIT_OK);
        assert_int_equal(trit_optim_get_state(ob, i, &y), TRIT_OK);
        assert_string_equal(x.name, y.name);
        assert_memory_equal(x.data, y.data, trit_dtype_nbytes(x.dtype, x.count));
        if (x.num_scales) assert_memory_equal(x.scales, y.scales, sizeof(float) * (size_t)x.num_scales);
    }
    trit_optim_free(oa);
    trit_optim_free(ob);
    assert_int_equal(dir_entries(dir), 0);
    for (int i = 0; i < NP; i++) trit_tensor_free(a[i]), trit_tensor_free(b[i]);
}

static void test_same_bits(void **state) {
    (void)state;
    char dir[512];
    tfile_mkdtemp(dir, sizeof dir, "offload");
    same_bits(trit_optim_adamw(0.9, 0.95, 1e-8), dir);
    same_bits(trit_optim_adamw8bit(0.9, 0.95, 1e-8), dir);
    same_bits(trit_optim_galore(8, 2, 0.25), dir);
    tfile_rm_rf(dir);
}

static void test_existing_path(void **state) {
    (void)state;
    char dir[512], path[600];
    tfile_mkdtemp(dir, sizeof dir, "offload_x");
    snprintf(path, sizeof path, "%s/taken", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fclose(f);
    trit_tensor *ps[NP];
    make_params(ps);
    const trit_optim_config c = trit_optim_adamw(0.9, 0.95, 1e-8);
    trit_optim *o = trit_optim_new_single(&c, ps, NP, 0.0);
    assert_int_equal(trit_optim_offload(o, path), TRIT_ERR_IO);
    assert_non_null(strstr(trit_last_error(), "cannot create"));
    assert_false(trit_optim_offloaded(o));
    assert_int_equal(trit_optim_step(o, 1e-3), TRIT_OK);  // still in memory, still usable
    trit_optim_free(o);
    for (int i = 0; i < NP; i++) trit_tensor_free(ps[i]);
    tfile_rm_rf(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_bits),
        cmocka_unit_test(test_existing_path),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
