// Finite-difference gradient checking for ops, in f64, plus an f32-vs-f64 comparison.
// A test gives a builder that turns parameter tensors into an output tensor; the checker
// reduces the output to a scalar with fixed random weights (loss = sum(out * r)), so every
// element of the output's gradient is exercised, and compares d loss / d param from backward
// with central differences.
#ifndef TRIT_TEST_GRADCHECK_H
#define TRIT_TEST_GRADCHECK_H

#include "trit/trit.h"

typedef trit_tensor *(*tg_build_fn)(trit_graph *g, trit_tensor **params, void *ctx);

// An f64 parameter of the given shape, uniform in [lo, hi), keyed by seed.
trit_tensor *tg_param(int ndim, const int64_t *shape, double lo, double hi, uint64_t seed);
// An f64 or f32 copy of a parameter.
trit_tensor *tg_clone(const trit_tensor *p, trit_dtype dt);
void tg_free_params(int n, trit_tensor **params);

// Max over all checked elements of |analytic - numeric| / max(|analytic|, |numeric|, 1e-2).
// At most max_per_param elements of each parameter are perturbed (spread evenly); <= 0 = all.
// Returns a negative number if the graph fails to build, compile or run (message printed).
double tg_gradcheck(tg_build_fn build, void *ctx, int n, trit_tensor **params, int max_per_param);

// Builds the same graph in f32 (parameters converted) and f64; returns the max relative
// difference of outputs and of parameter gradients, scaled by the max magnitude of each tensor.
double tg_f32_vs_f64(tg_build_fn build, void *ctx, int n, trit_tensor **params);

// cmocka helpers: fail with a message naming the check.
void tg_assert_gradcheck(const char *what, tg_build_fn build, void *ctx, int n, trit_tensor **params);
// tg_assert_gradcheck with every element of small parameters checked; of large ones (there to
// reach the threaded paths) an evenly spread few, which keeps the many forward passes cheap.
void tg_assert_gradcheck_sampled(const char *what, tg_build_fn build, void *ctx, int n, trit_tensor **params);
void tg_assert_f32_close(const char *what, tg_build_fn build, void *ctx, int n, trit_tensor **params, double tol);

// The weighted-sum reduction used as the loss (exported for tests of the graph itself).
trit_tensor *tg_weighted_sum(trit_graph *g, trit_tensor *x);
// Gradient check (<= 1e-6) and f32 vs f64 (<= f32_tol) of one builder, printing both errors.
void tg_check(const char *what, tg_build_fn build, void *ctx, int n, trit_tensor **params, double f32_tol);
// Compile with `loss`, zero the grads, run forward and backward; fails the test on an error.
void tg_run(trit_graph *g, trit_tensor *loss);
// An index tensor (i32 or i64) holding vals[0..n) with the given shape.
trit_tensor *tg_indices(trit_dtype dt, int ndim, const int64_t *shape, const int64_t *vals);
// A graph-building call that should have failed: r is NULL, the error mentions `text`, the graph
// reports `code` on compile; frees the graph.
void tg_expect_graph_error(trit_graph *g, trit_tensor *r, trit_status code, const char *text);

#endif
