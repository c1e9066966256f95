// ZeRO's shards of the gradient block, and ZeRO-3's of the parameter block, in builds with and
// without MPI (a checkpoint's shards are merged by one process).
#include "trit/dist.h"

#include <stddef.h>

void trit_zero_shard_range(int64_t count, int ranks, int rank, int64_t *lo, int64_t *hi) {
    const int64_t line = 16;  // f32 values of a 64-byte line
    *lo = rank == 0 ? 0 : count * rank / ranks / line * line;
    *hi = rank == ranks - 1 ? count : count * (rank + 1) / ranks / line * line;
}

// The dtype of the trained parameters (one for all, a plain one).
static trit_status trained_dtype(const trit_flat *f, trit_dtype *dt) {
    int first = -1;
    for (int i = 0; i < trit_flat_count(f); i++) {
        if (trit_flat_grad_offset(f, i) < 0) continue;
        const trit_tensor *t = trit_flat_tensor(f, i);
        if (first < 0) first = i, *dt = t->dtype;
        if (t->dtype != *dt)
            return trit_error(TRIT_ERR_UNSUPPORTED, "zero3: the trained parameters mix dtypes ('%s' is %s, '%s' %s): "
                              "--dist zero3 shards the block of one; train with fp32 master weights",
                              trit_flat_tensor(f, first)->name, trit_dtype_name(*dt), t->name, trit_dtype_name(t->dtype));
    }
    if (first < 0) return trit_error(TRIT_ERR_STATE, "zero3: the model has no trained parameters");
    if (trit_dtype_block(*dt) != 1)
        return trit_error(TRIT_ERR_UNSUPPORTED, "zero3: the trained parameters are %s: --dist zero3 shards f32, bf16 "
                          "or f16 parameters", trit_dtype_name(*dt));
    return TRIT_OK;
}

// Tensor i's first element in its dtype's block.
static int64_t block_offset(const trit_flat *f, int i, const char *base, size_t es) {
    return (int64_t)(((const char *)trit_tensor_ptr(trit_flat_tensor(f, i)) - base) / (ptrdiff_t)es);
}

// The largest element x of the block (a line's first) whose cost C(x), the bytes a rank holds
// for the elements before it, is at most `target`: each tensor's elements (its padding included)
// cost `es`, a trained one's 12 more (its f32 gradient and AdamW's two f32 moments). With
// target INT64_MAX, *total gets C(count).
static int64_t cut_at(const trit_flat *f, trit_dtype dt, const char *base, int64_t count, int64_t target,
                      int64_t *total) {
    const size_t es = trit_dtype_size(dt);
    const int64_t line = TRIT_ALIGN / (int64_t)es;
    int64_t cost = 0, x = count;
    for (int i = 0, prev = -1; i <= trit_flat_count(f); i++) {
        if (i < trit_flat_count(f) && trit_flat_tensor(f, i)->dtype != dt) continue;
        const int64_t at = i < trit_flat_count(f) ? block_offset(f, i, base, es) : count;
        if (prev >= 0) {  // the run of tensor prev: [its offset, at)
            const int64_t from = block_offset(f, prev, base, es);
            const int64_t c = (int64_t)es + (trit_flat_grad_offset(f, prev) >= 0 ? 12 : 0);
            if (cost + c * (at - from) > target) {
                x = from + (target - cost) / c;
                break;
            }
            cost += c * (at - from);
        }
        prev = i;
    }
    if (total) *total = cost;
    return x / line * line;
}

// The gradient element of the first trained value at or after element x of the block.
static int64_t grad_at(const trit_flat *f, trit_dtype dt, const char *base, int64_t x, int64_t grad_count) {
    const size_t es = trit_dtype_size(dt);
    for (int i = 0; i < trit_flat_count(f); i++) {
        const int64_t g = trit_flat_grad_offset(f, i);
        if (g < 0) continue;
        const int64_t off = block_offset(f, i, base, es), n = trit_tensor_numel(trit_flat_tensor(f, i));
        if (off + n > x) return x > off ? g + (x - off) : g;
    }
    return grad_count;
}

trit_status trit_zero3_shard_bounds(const trit_flat *f, int ranks, trit_dtype *dt, int64_t *param, int64_t *grad) {
    int64_t grad_count = 0;
    if (!f || ranks < 1 || !dt || !param || !grad)
        return trit_error(TRIT_ERR_INVALID, "trit_zero3_shard_bounds: flat storage, at least one rank and outputs");
    if (!trit_flat_grads(f, &grad_count)) return trit_error(TRIT_ERR_STATE, "zero3: the model has no gradients");
    trit_status s = trained_dtype(f, dt);
    if (s != TRIT_OK) return s;
    size_t bytes = 0;
    const char *base = trit_flat_block(f, *dt, &bytes);
    const size_t es = trit_dtype_size(*dt);
    const int64_t count = (int64_t)(bytes / es);
    int64_t total = 0;
    cut_at(f, *dt, base, count, INT64_MAX, &total);
    param[0] = 0, param[ranks] = count;
    for (int r = 1; r < ranks; r++) param[r] = cut_at(f, *dt, base, count, total * r / ranks, NULL);
    for (int r = 0; r <= ranks; r++) grad[r] = r == ranks ? grad_count : grad_at(f, *dt, base, param[r], grad_count);
    return TRIT_OK;
}
