// AVX2 per-token activation quantizer: x86/qact_simd.h in 8-float vectors.
#include "kernels/x86/simd_avx2.h"

#include "kernels/x86/qact_simd.h"
