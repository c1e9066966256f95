// AVX-512 row kernels: x86/rowops_simd.h in 16-float vectors.
#include "kernels/x86/simd_avx512.h"

#include "kernels/x86/rowops_simd.h"
