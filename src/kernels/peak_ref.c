// The portable loops of peak.h: what plain C sustains (the level the portable kernels run at).
// The compiler may vectorize them for the base ISA; an empty asm with a memory clobber each pass
// keeps the bf16 and int8 products from being hoisted out of the loop as constants.
#include "kernels/peak.h"

#include <string.h>

enum { LANES = 32 };

int64_t trit_kernel_peak_fma_ref(int64_t iters, float *sink) {
    float a[LANES];
    for (int j = 0; j < LANES; j++) a[j] = (float)j;
    for (int64_t it = 0; it < iters; it++)
        for (int j = 0; j < LANES; j++) a[j] = a[j] * 0.5f + 1.0f;  // converges to 2
    float s = 0;
    for (int j = 0; j < LANES; j++) s += a[j];
    *sink = s;
    return iters * LANES * 2;
}

static float bf16_value(uint16_t h) {
    const uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

// As vdpbf16ps: lane j adds the products of bf16 pairs 2j and 2j + 1.
int64_t trit_kernel_peak_bf16_ref(int64_t iters, float *sink) {
    uint16_t x[2 * LANES];
    for (int j = 0; j < 2 * LANES; j++) x[j] = 0x3c80;  // 2^-6
    float a[LANES] = {0};
    for (int64_t it = 0; it < iters; it++) {
        __asm__ volatile("" : : "r"(x) : "memory");
        for (int j = 0; j < LANES; j++)
            a[j] += bf16_value(x[2 * j]) * bf16_value(x[2 * j]) + bf16_value(x[2 * j + 1]) * bf16_value(x[2 * j + 1]);
    }
    float s = 0;
    for (int j = 0; j < LANES; j++) s += a[j];
    *sink = s;
    return iters * LANES * 2 * 2;
}

// u8 x s8 products summed into int32 lanes, four per lane as vpdpbusd does.
int64_t trit_kernel_peak_int8_ref(int64_t iters, float *sink) {
    uint8_t u[4 * LANES];
    int8_t v[4 * LANES];
    for (int j = 0; j < 4 * LANES; j++) u[j] = 1, v[j] = 1;
    uint32_t a[LANES] = {0};  // unsigned: wraps like the SIMD lanes instead of overflowing
    for (int64_t it = 0; it < iters; it++) {
        __asm__ volatile("" : : "r"(u), "r"(v) : "memory");
        for (int j = 0; j < LANES; j++)
            a[j] += (uint32_t)(u[4 * j] * v[4 * j] + u[4 * j + 1] * v[4 * j + 1] + u[4 * j + 2] * v[4 * j + 2] +
                               u[4 * j + 3] * v[4 * j + 3]);
    }
    uint32_t s = 0;
    for (int j = 0; j < LANES; j++) s += a[j];
    *sink = (float)s;
    return iters * LANES * 4 * 2;
}

float trit_kernel_read_ref(const float *x, int64_t n) {
    float s[8] = {0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) s[j] += x[i + j];
    float t = 0;
    for (; i < n; i++) t += x[i];
    return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7])) + t;
}
