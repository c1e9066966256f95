// AVX-512 per-token activation quantizer: x86/qact_simd.h in 16-float vectors.
#include "kernels/x86/simd_avx512.h"

#include "kernels/x86/qact_simd.h"
