// Reader for TRITFIX1 fixture files (float64 arrays by name, written by the PyTorch scripts in
// tests/reference/) and a parity check that runs an f64 graph against a fixture case.
//
// Layout (little-endian): 8 bytes magic "TRITFIX1", uint32 version 1, uint32 record count; per
// record: uint32 name length, name, uint32 ndim, int64 shape[ndim], float64 data[prod(shape)].
#ifndef TRIT_TEST_TRITFIX_H
#define TRIT_TEST_TRITFIX_H

#include "gradcheck.h"

typedef struct tf_record {
    char name[64];
    int ndim;
    int64_t shape[TRIT_MAX_DIMS];
    int64_t n;
    double *data;
} tf_record;

typedef struct tf_file tf_file;

// Opens $TRIT_SOURCE_DIR/tests/reference/fixtures/<file>; fails the test (cmocka) if missing.
tf_file *tf_open(const char *file);
void tf_close(tf_file *f);
// The record named `name`; fails the test if absent.
const tf_record *tf_get(const tf_file *f, const char *name);
// A new tensor of dtype dt (float or integer) holding a record's values, with the given flags.
trit_tensor *tf_tensor(const tf_file *f, const char *name, trit_dtype dt, uint32_t flags);
// A new f64 parameter holding a record's values.
trit_tensor *tf_param(const tf_file *f, const char *name);
// The test loss sum(x * r) for a caller-owned r with x's element count (any float dtype), so a
// graph's gradients are those of a fixture's loss whose upstream gradient is r.
trit_tensor *tf_dot(trit_graph *g, trit_tensor *x, const trit_tensor *r);
// Max over elements of |got - want| / max(1, |want|); fails the test above tol.
double tf_compare(const tf_file *f, const char *what, const trit_tensor *got, const char *want_name, double tol);
// Builds `build` on the inputs <fcase>.<names[i]> in an f64 graph with loss sum(out * <fcase>.r),
// compares out with <fcase>.out and each input gradient with <fcase>.d<name> at tol. Returns the
// max relative error.
double tf_check_case(const tf_file *f, const char *fcase, tg_build_fn build, void *ctx, int n,
                     const char *const *names, double tol);

#endif
