// NF4, the 4-bit NormalFloat of QLoRA: 16 values, quantiles of a standard normal scaled to
// [-1, 1], with an exact zero. The values are the published ones (QLoRA, appendix E; the same
// constants bitsandbytes uses).
#include "trit/base.h"

#include <math.h>

const float trit_nf4_values[16] = {
    -1.0f, -0.6961928009986877f, -0.5250730514526367f, -0.39491748809814453f,
    -0.28444138169288635f, -0.18477343022823334f, -0.09105003625154495f, 0.0f,
    0.07958029955625534f, 0.16093020141124725f, 0.24611230194568634f, 0.33791524171829224f,
    0.44070982933044434f, 0.5626170039176941f, 0.7229568362236023f, 1.0f,
};

// Index of the largest value <= v (v already clamped to [-1, 1]).
static int floor_index(float v) {
    int lo = 0, hi = 15;
    while (hi - lo > 1) {
        const int mid = (lo + hi) / 2;
        if (trit_nf4_values[mid] <= v) lo = mid;
        else hi = mid;
    }
    return trit_nf4_values[hi] <= v ? hi : lo;
}

// u < 0: nearest value (ties to the lower index); else the upper neighbour with probability
// equal to v's distance from the lower one over their gap, so the expected value is v.
uint8_t trit_nf4_encode(float v, float u) {
    if (isnan(v)) return 7;
    v = v < -1.0f ? -1.0f : v > 1.0f ? 1.0f : v;
    const int i = floor_index(v);
    if (i == 15) return 15;
    const float lo = trit_nf4_values[i], hi = trit_nf4_values[i + 1];
    if (u < 0) return (uint8_t)(v - lo <= hi - v ? i : i + 1);
    return (uint8_t)(u * (hi - lo) < v - lo ? i + 1 : i);
}
