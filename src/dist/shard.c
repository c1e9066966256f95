// ZeRO's shards of the gradient block, in builds with and without MPI (a checkpoint's shards are
// merged by one process).
#include "trit/dist.h"

void trit_zero_shard_range(int64_t count, int ranks, int rank, int64_t *lo, int64_t *hi) {
    const int64_t line = 16;  // f32 values of a 64-byte line
    *lo = rank == 0 ? 0 : count * rank / ranks / line * line;
    *hi = rank == ranks - 1 ? count : count * (rank + 1) / ranks / line * line;
}
