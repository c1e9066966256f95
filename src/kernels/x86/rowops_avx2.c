// AVX2 (+FMA) row kernels: x86/rowops_simd.h in 8-float vectors.
#include "kernels/x86/simd_avx2.h"

#include "kernels/x86/rowops_simd.h"
