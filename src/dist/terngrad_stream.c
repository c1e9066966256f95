// The draws of TernGrad's exchange (terngrad_mpi.c): a pure function of (step, sender, tensor),
// so a resumed run repeats them and a test can recompute them. In every build (no MPI needed).
#include "trit/dist.h"

// splitmix64's finalizer, chained over the three keys.
static uint64_t mix64(uint64_t z) {
    z += UINT64_C(0x9e3779b97f4a7c15);
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

uint64_t trit_terngrad_dist_stream(int64_t step, int sender, int tensor) {
    return mix64(mix64(mix64(UINT64_C(0x7e4a6d157) ^ (uint64_t)step) ^ (uint64_t)sender) ^ (uint64_t)tensor);
}
