// TernGrad's exchange on the ranks of an MPI job (tests/dist/test_dist.sh starts it with mpirun):
//   terngrad_ranks exchange G   each rank's gradients of five tensors (three ternary, two fp32)
//       are known to every rank (drawn from the rank's seed), so each rank recomputes what the
//       exchange must give from the definition: the group sums in fp32, every sender's scales,
//       their max, every sender's codes under it (trit_terngrad_encode_scaled, the draws keyed by
//       trit_terngrad_dist_stream), the codes decoded-summed in sender order; the exchange's
//       result must equal it bit for bit, for one scale per tensor with the clip and for scales
//       per 256 values; the bytes it reports must equal the formula; a rank that poisons its
//       gradients makes every rank's come out NaN.
//   terngrad_ranks train G DIR  20 steps of `--dist ddp --terngrad --terngrad-between-groups G`
//       on the addition task: at every step every rank holds the same parameters and the same
//       exchanged gradients, bit for bit (hashes compared over the job).
// Exit 0 when every check passed on this rank.
#include "trit/dist.h"
#include "trit/quant.h"
#include "trit/train.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { NT = 5 };
static const int64_t sizes[NT] = {3001, 100, 2048, 5, 1030};  // 100 and 5 under min_size: fp32
static const int64_t MIN_SIZE = 1024;
static int failures;

#define CHECK(cond, ...)                                                     \
    do {                                                                     \
        if (!(cond)) {                                                       \
            fprintf(stderr, "rank %d: FAIL: ", trit_dist_rank());            \
            fprintf(stderr, __VA_ARGS__);                                    \
            fputc('\n', stderr);                                             \
            failures++;                                                      \
        }                                                                    \
    } while (0)

// Rank r's gradient of tensor j: normal values, a few of them 40x larger (the clip has work).
static void gradient_of(int r, int j, float *g) {
    trit_rng_fill_normal(g, sizes[j], (uint64_t)(100 + r), (uint64_t)j, 0, 0.0f, 1e-3f);
    for (int64_t i = 0; i < sizes[j]; i += 97) g[i] *= 40.0f;
}

// What the exchange must give for tensor j (index in the layout) at `step`.
static void expected(int j, int64_t step, int G, const trit_terngrad_dist_config *c, float *out) {
    const int64_t n = sizes[j];
    const int senders = trit_dist_size() / G;
    const int64_t ns = trit_terngrad_nscales(n, c->scale_bucket);
    float *sum = calloc((size_t)(senders * n), sizeof(float)), *g = malloc(sizeof(float) * (size_t)n);
    float *scales = calloc((size_t)(senders * ns), sizeof(float)), *shared = calloc((size_t)ns, sizeof(float));
    float *bounds = calloc((size_t)senders, sizeof(float));
    uint8_t *codes = malloc(trit_terngrad_bytes(n));
    for (int a = 0; a < senders; a++)
        for (int r = a * G; r < (a + 1) * G; r++) {  // a group's fp32 sum (G <= 2: the order does not matter)
            gradient_of(r, j, g);
            for (int64_t i = 0; i < n; i++) sum[a * n + i] += g[i];
        }
    memset(out, 0, sizeof(float) * (size_t)n);
    if (n < MIN_SIZE) {
        for (int a = 0; a < senders; a++)
            for (int64_t i = 0; i < n; i++) out[i] += sum[a * n + i];
    } else {
        for (int a = 0; a < senders; a++) {
            CHECK(trit_terngrad_scales(sum + a * n, n, c->scale_bucket, c->clip_sigma, scales + a * ns, &bounds[a]) ==
                      TRIT_OK, "scales of tensor %d", j);
            for (int64_t q = 0; q < ns; q++) shared[q] = fmaxf(shared[q], scales[a * ns + q]);
        }
        for (int a = 0; a < senders; a++) {
            CHECK(trit_terngrad_encode_scaled(sum + a * n, n, c->scale_bucket, shared, bounds[a], c->seed,
                                              trit_terngrad_dist_stream(step, a, j), codes) == TRIT_OK,
                  "codes of tensor %d", j);
            trit_terngrad_accumulate(codes, shared, n, c->scale_bucket, out);
        }
    }
    free(sum), free(g), free(scales), free(shared), free(bounds), free(codes);
}

// One exchange of every rank's gradients at step 7 against the recomputation, and its bytes.
static void exchange_once(trit_flat *f, int G, const trit_terngrad_dist_config *c) {
    const int64_t step = 7;
    trit_terngrad_dist *x = trit_terngrad_dist_new(f, NULL, c);
    CHECK(x != NULL, "trit_terngrad_dist_new: %s", trit_last_error());
    if (!x) return;
    for (int j = 0; j < NT; j++) gradient_of(trit_dist_rank(), j, trit_flat_tensor(f, j)->grad->data);
    trit_terngrad_dist_begin(x, step);
    double ms = 0;
    CHECK(trit_terngrad_dist_finish(x, false, &ms) == TRIT_OK, "finish: %s", trit_last_error());
    float *want = malloc(sizeof(float) * 4096);
    int64_t codes = 0, fp32 = 0, nscales = 0;
    for (int j = 0; j < NT; j++) {
        expected(j, step, G, c, want);
        const float *got = trit_flat_tensor(f, j)->grad->data;
        int64_t bad = 0, first = -1;
        for (int64_t i = 0; i < sizes[j]; i++)
            if (memcmp(&got[i], &want[i], sizeof(float)) != 0 && bad++ == 0) first = i;
        CHECK(bad == 0, "tensor %d (%lld values, scale bucket %lld): %lld values differ from the recomputation, the "
              "first at %lld: %.9g against %.9g", j, (long long)sizes[j], (long long)c->scale_bucket, (long long)bad,
              (long long)first, first >= 0 ? (double)got[first] : 0.0, first >= 0 ? (double)want[first] : 0.0);
        if (sizes[j] >= MIN_SIZE) codes += (sizes[j] + 3) / 4, nscales += trit_terngrad_nscales(sizes[j], c->scale_bucket);
        else fp32 += 4 * sizes[j];
    }
    // The formula: 2 bits a ternary value (whole bytes per tensor), 4 bytes a small gradient's
    // value, 4 bytes a scale plus one flag a bucket, and with groups the fp32 block inside them.
    int64_t block = 0;
    trit_flat_grads(f, &block);
    const trit_terngrad_dist_bytes b = trit_terngrad_dist_bytes_per_step(x);
    const int nb = trit_terngrad_dist_num_buckets(x);
    const int64_t group = G > 1 ? 4 * block : 0, scales = 4 * (nscales + nb);
    CHECK(b.codes == codes && b.fp32 == fp32 && b.scales == scales && b.group_fp32 == group &&
              b.total == codes + fp32 + scales + group,
          "bytes: codes %lld fp32 %lld scales %lld group %lld total %lld, the formula gives %lld %lld %lld %lld %lld",
          (long long)b.codes, (long long)b.fp32, (long long)b.scales, (long long)b.group_fp32, (long long)b.total,
          (long long)codes, (long long)fp32, (long long)scales, (long long)group,
          (long long)(codes + fp32 + scales + group));
    if (trit_dist_rank() == 0)
        printf("exchange (scale bucket %lld, clip %g, groups of %d): %d buckets, %lld bytes a rank a step (codes "
               "%lld, fp32 %lld, scales %lld, group fp32 %lld) against %lld of fp32\n", (long long)c->scale_bucket,
               c->clip_sigma, G, nb, (long long)b.total, (long long)b.codes, (long long)b.fp32, (long long)b.scales,
               (long long)b.group_fp32, (long long)(4 * block));
    // The last rank poisons: every rank's gradients come out NaN (every rank then skips the step).
    for (int j = 0; j < NT; j++) gradient_of(trit_dist_rank(), j, trit_flat_tensor(f, j)->grad->data);
    trit_terngrad_dist_begin(x, step + 1);
    CHECK(trit_terngrad_dist_finish(x, trit_dist_rank() == trit_dist_size() - 1, &ms) == TRIT_OK, "finish: %s",
          trit_last_error());
    for (int j = 0; j < NT; j++) {
        const float *got = trit_flat_tensor(f, j)->grad->data;
        int64_t finite = 0;
        for (int64_t i = 0; i < sizes[j]; i++) finite += isfinite(got[i]) != 0;
        CHECK(finite == 0, "poisoned exchange: tensor %d has %lld finite values", j, (long long)finite);
    }
    free(want);
    trit_terngrad_dist_free(x);
}

static int run_exchange(int G) {
    if (G < 1 || G > 2 || trit_dist_size() % G) {
        fprintf(stderr, "exchange: groups of 1 or 2 dividing the ranks (the recomputation sums a group in rank order, "
                "which is MPI's sum for 2 ranks and not necessarily for more), got %d of %d\n", G, trit_dist_size());
        return 1;
    }
    trit_tensor *t[NT];
    for (int j = 0; j < NT; j++) {
        char name[16];
        snprintf(name, sizeof name, "t%d", j);
        t[j] = trit_tensor_new_param(TRIT_F32, 1, &sizes[j], name);
    }
    trit_flat *f = trit_flat_new(t, NT);
    CHECK(f && trit_flat_attach_grads(f, TRIT_F32) == TRIT_OK, "flat storage: %s", trit_last_error());
    if (!f) return 1;
    for (int j = 0; j < NT; j++) CHECK(trit_flat_tensor(f, j) == t[j], "the layout keeps the given order");
    // 6 kB buckets: the tensors go in several buckets, each with its own scales and packet.
    const trit_terngrad_dist_config per_tensor = {.bucket_mb = 0.006, .min_size = MIN_SIZE, .scale_bucket = 0,
                                                  .clip_sigma = 2.5, .seed = 1337, .group = G};
    const trit_terngrad_dist_config per_256 = {.bucket_mb = 25, .min_size = MIN_SIZE, .scale_bucket = 256,
                                               .clip_sigma = 0, .seed = 99, .group = G};
    exchange_once(f, G, &per_tensor);
    exchange_once(f, G, &per_256);
    for (int j = 0; j < NT; j++) trit_tensor_free(t[j]);
    trit_flat_free(f);
    return failures;
}

static const char *const train_flags[][2] = {
    {"digits", "2"}, {"layers", "1"}, {"heads", "2"}, {"dim", "32"}, {"batch", "4"}, {"total-batch-tokens", "128"},
    {"steps", "20"}, {"warmup", "2"}, {"threads", "1"}, {"eval-every", "0"}, {"log-every", "5"}, {"task-test", "8"},
    {"dropout", "0.1"}, {"lr", "3e-3"}, {"dist", "ddp"}, {"terngrad", "1"}, {"bucket-mb", "0.01"}, {"quiet", "1"},
};

static int steps_checked;

static void same_on_every_rank(void *ctx, int64_t step, trit_tensor *const *params, int n) {
    (void)ctx;
    for (int i = 0; i < n; i++) {
        char what[160];
        snprintf(what, sizeof what, "%s at step %lld", params[i]->name, (long long)step);
        CHECK(trit_dist_check_same(params[i]->data, trit_tensor_nbytes(params[i]), what) == TRIT_OK, "parameters: %s",
              trit_last_error());
        CHECK(trit_dist_check_same(params[i]->grad->data, trit_tensor_nbytes(params[i]->grad), what) == TRIT_OK,
              "exchanged gradients: %s", trit_last_error());
    }
    steps_checked++;
}

static int run_train(const char *groups, const char *dir) {
    trit_train_config *c = trit_train_config_new();
    for (size_t i = 0; i < sizeof train_flags / sizeof *train_flags; i++)
        CHECK(trit_train_config_set(c, train_flags[i][0], train_flags[i][1]) == TRIT_OK, "--%s: %s",
              train_flags[i][0], trit_last_error());
    CHECK(trit_train_config_set(c, "terngrad-between-groups", groups) == TRIT_OK, "groups: %s", trit_last_error());
    CHECK(trit_train_config_set(c, "out", dir) == TRIT_OK, "out: %s", trit_last_error());
    trit_train_hooks hooks = {.on_grads = same_on_every_rank};
    trit_train_result r;
    CHECK(trit_train_run(c, &hooks, &r) == TRIT_OK, "training: %s", trit_last_error());
    CHECK(steps_checked == 20, "%d steps compared, not 20", steps_checked);
    if (trit_dist_rank() == 0)
        printf("training on %d ranks, groups of %s: parameters and exchanged gradients the same on every rank at "
               "each of %d steps; final loss %.4f\n", trit_dist_size(), groups, steps_checked, r.loss);
    trit_train_config_free(c);
    return failures;
}

int main(int argc, char **argv) {
    if (argc < 3 || (strcmp(argv[1], "exchange") != 0 && (strcmp(argv[1], "train") != 0 || argc < 4))) {
        fprintf(stderr, "usage: mpirun -np N terngrad_ranks exchange G | train G DIR\n");
        return 2;
    }
    if (trit_dist_init() != TRIT_OK) {
        fprintf(stderr, "%s\n", trit_last_error());
        return 1;
    }
    const int rc = strcmp(argv[1], "exchange") == 0 ? run_exchange(atoi(argv[2])) : run_train(argv[2], argv[3]);
    if (rc == 0 && trit_dist_rank() == 0) printf("ok (%s on %d ranks)\n", argv[1], trit_dist_size());
    return rc ? 1 : 0;
}
