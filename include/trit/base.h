// trit base: status codes and error text, logging, arena, counter-based RNG, CPU features,
// threads, and the bf16/fp16 number formats. Everything else in trit stands on this.
#ifndef TRIT_BASE_H
#define TRIT_BASE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// ---- status and errors -------------------------------------------------------------------

typedef enum trit_status {
    TRIT_OK = 0,
    TRIT_ERR_INVALID,     // bad argument value
    TRIT_ERR_SHAPE,       // shapes do not agree
    TRIT_ERR_DTYPE,       // wrong element type
    TRIT_ERR_NOMEM,       // allocation failed
    TRIT_ERR_IO,          // file system or stream error
    TRIT_ERR_FORMAT,      // a file or buffer is not what it claims to be
    TRIT_ERR_NUMERIC,     // NaN or Inf where a finite number is required
    TRIT_ERR_STATE,       // API used out of order (e.g. forward before compile)
    TRIT_ERR_UNSUPPORTED, // valid request this build or CPU cannot do
    TRIT_ERR_RANGE,       // an index or value outside its allowed range
} trit_status;

// The message of the last error raised on this thread ("" if none).
const char *trit_last_error(void);
const char *trit_status_name(trit_status s);
// Records a formatted message for this thread and returns `code`, so callers write
// `return trit_error(TRIT_ERR_SHAPE, "...", ...);`.
trit_status trit_error(trit_status code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void trit_clear_error(void);

// ---- checked numbers ------------------------------------------------------------------------
// A double from a user or a file becomes an integer only through these (a cast of NaN or of a
// value outside the target type is undefined behaviour in C).

// x truncated toward zero and clamped to [lo, hi]; NaN gives 0 (or lo when 0 is outside).
int64_t trit_f64_to_i64_sat(double x, int64_t lo, int64_t hi);
// *out = x when x is a finite whole number in [lo, hi]; false (out untouched) otherwise.
bool trit_f64_to_i64_exact(double x, int64_t lo, int64_t hi, int64_t *out);
// *out = a * b; false (out untouched) when the product overflows int64_t.
bool trit_mul_i64(int64_t a, int64_t b, int64_t *out);

// ---- logging -------------------------------------------------------------------------------

typedef enum { TRIT_LOG_DEBUG, TRIT_LOG_INFO, TRIT_LOG_WARN, TRIT_LOG_ERROR, TRIT_LOG_OFF } trit_log_level;
void trit_log_set_level(trit_log_level level);
trit_log_level trit_log_get_level(void);
void trit_log(trit_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

// ---- arena: one aligned block, bump allocation, reset as a whole --------------------------

typedef struct trit_arena {
    uint8_t *base;
    size_t size;
    size_t used;
    size_t peak;
} trit_arena;

#define TRIT_ALIGN 64
// One zeroed block of `bytes` (whole pages, transparent huge pages asked for: trit_pages_alloc).
trit_status trit_arena_init(trit_arena *a, size_t bytes);
// Returns 64-byte aligned memory, or NULL (with trit_last_error set) when the arena is full.
void *trit_arena_alloc(trit_arena *a, size_t bytes);
void trit_arena_reset(trit_arena *a);
void trit_arena_free(trit_arena *a);
void *trit_aligned_alloc(size_t bytes); // 64-byte aligned, zeroed; free with trit_aligned_free
void trit_aligned_free(void *p);
// A block of whole pages, 2 MB aligned, in huge pages where the kernel gives them: zero, and
// resident only where written (in 2 MB steps where huge), so a block filled a piece at a time
// holds little more than what is filled. Free with trit_pages_free and the same byte count.
void *trit_pages_alloc(size_t bytes);
void trit_pages_free(void *p, size_t bytes);
// Gives the free pages inside the C library's heap back to the system (glibc's malloc_trim; a
// no-op elsewhere): blocks freed in the middle of the heap otherwise stay resident.
void trit_heap_trim(void);

// ---- counter-based random numbers (Philox 4x32-10) ----------------------------------------
// A number depends only on (seed, stream, counter), never on which thread asks or in what order,
// so init, dropout, data order and stochastic rounding are reproducible under any threading.

void trit_philox4x32(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]);
// Four 32-bit words for block `counter` of `stream` under `seed`.
void trit_rng_block(uint64_t seed, uint64_t stream, uint64_t counter, uint32_t out[4]);
// Element i of the sequence (seed, stream): uniform in [0, 1) with 24 random bits.
float trit_rng_uniform(uint64_t seed, uint64_t stream, uint64_t i);
uint32_t trit_rng_u32(uint64_t seed, uint64_t stream, uint64_t i);
// Fill out[0..n) with element offset+0 .. offset+n-1 of the sequence.
void trit_rng_fill_uniform(float *out, int64_t n, uint64_t seed, uint64_t stream, uint64_t offset,
                           float lo, float hi);
void trit_rng_fill_normal(float *out, int64_t n, uint64_t seed, uint64_t stream, uint64_t offset,
                          float mean, float std);
void trit_rng_fill_normal_f64(double *out, int64_t n, uint64_t seed, uint64_t stream,
                              uint64_t offset, double mean, double std);

// ---- CPU features and dispatch level -------------------------------------------------------

typedef enum { TRIT_CPU_REF = 0, TRIT_CPU_AVX2 = 1, TRIT_CPU_AVX512 = 2, TRIT_CPU_AMX = 3 } trit_cpu_isa;

typedef struct trit_cpu_features {
    bool avx2, fma, f16c;
    bool avx512f, avx512bw, avx512vl, avx512dq, avx512_bf16, avx512_vnni;
    bool amx_tile, amx_bf16, amx_int8;
    bool os_avx;     // XCR0 enables YMM state
    bool os_avx512;  // XCR0 enables opmask + ZMM state
    bool os_amx;     // XCR0 enables tile state (XTILECFG, XTILEDATA)
} trit_cpu_features;

const trit_cpu_features *trit_cpu_features_get(void);

// Feature predicates kernels are chosen by (src/kernels/kernel_table.c): each bit is a set of
// instructions a kernel needs, counted only where the OS saves the registers they use.
typedef enum trit_cpu_feature {
    TRIT_FEAT_AVX2 = 1u << 0,         // AVX2 + FMA + F16C
    TRIT_FEAT_AVX512 = 1u << 1,       // AVX-512 F, BW, VL, DQ
    TRIT_FEAT_AVX512_BF16 = 1u << 2,  // vdpbf16ps, vcvtne2ps2bf16
    TRIT_FEAT_AVX512_VNNI = 1u << 3,  // vpdpbusd
    TRIT_FEAT_AMX_BF16 = 1u << 4,     // AMX tiles with bf16 dot products
    TRIT_FEAT_AMX_INT8 = 1u << 5,     // AMX tiles with int8 dot products
} trit_cpu_feature;
// Every feature this CPU and OS have (AMX counts before Linux has granted tile data; the
// kernel table asks for it when it first chooses an AMX kernel).
uint32_t trit_cpu_detected_features(void);
// The features kernels may use now: the detected ones within the level in force (ref: none;
// avx2: AVX2; avx512: also AVX-512 and, where present, AVX512-BF16 and AVX512-VNNI; amx: all).
uint32_t trit_cpu_usable_features(void);
// The highest level both the CPU and the OS support (at most avx512: see trit_cpu_set_level).
trit_cpu_isa trit_cpu_detected_level(void);
// The level kernels dispatch on: detected, lowered by TRIT_CPU=ref|avx2|avx512 if set (a value
// that is not a level is ignored with a warning).
trit_cpu_isa trit_cpu_level(void);
// Whether TRIT_CPU (unset, or ref|avx2|avx512) can be honoured: TRIT_ERR_INVALID for a value that
// is not a level, TRIT_ERR_UNSUPPORTED for amx (no AMX kernel exists yet: it would run the
// AVX-512 kernels). Programs call it first, to refuse such a value instead of running on.
trit_status trit_cpu_env_check(void);
// Force a level (tests, benchmarks). Fails if the machine cannot run it, and for TRIT_CPU_AMX
// (refused until an AMX kernel exists; the detected level is at most TRIT_CPU_AVX512).
trit_status trit_cpu_set_level(trit_cpu_isa level);
const char *trit_cpu_level_name(trit_cpu_isa level);
// Bytes of one instance of the data or unified cache at `level` (1, 2 or 3) as CPUID's
// deterministic cache leaves give them (leaf 4, or 0x8000001D on AMD); 0 when unknown.
size_t trit_cpu_cache_bytes(int level);
// Ask Linux for permission to use AMX tile data (arch_prctl ARCH_REQ_XCOMP_PERM); idempotent.
// Called by the kernel table the first time it chooses an AMX kernel, never before.
trit_status trit_cpu_amx_request(void);

// ---- threads -------------------------------------------------------------------------------

// Threads used by kernels (OpenMP). n <= 0 restores the default (TRIT_THREADS or all cores).
void trit_threads_set(int n);
int trit_threads_get(void);
// How many threads per-thread scratch is planned for, fixed at first use (at least the cores
// then usable and the thread count then set): ops size scratch by it and run at most that many
// threads, whatever the affinity or thread count becomes later.
int trit_thread_slots(void);

// ---- number formats: bf16 and fp16 (round to nearest even; NaN stays NaN) ---------------

uint16_t trit_f32_to_bf16(float x);
float trit_bf16_to_f32(uint16_t h);
uint16_t trit_f32_to_f16(float x);
float trit_f16_to_f32(uint16_t h);
void trit_f32_to_bf16_n(uint16_t *out, const float *in, int64_t n);
void trit_bf16_to_f32_n(float *out, const uint16_t *in, int64_t n);
void trit_f32_to_f16_n(uint16_t *out, const float *in, int64_t n);
void trit_f16_to_f32_n(float *out, const uint16_t *in, int64_t n);
// Stochastic rounding with 32 random bits r: x rounds away from zero with probability equal to
// its distance from the value below (in units of the gap), so the expected result is x.
// NaN and Inf are kept; bf16 past the largest finite value may round to Inf as nearest does;
// f16 never rounds up into Inf (values past 65504 but below RNE's Inf threshold stay 65504).
uint16_t trit_f32_to_bf16_sr(float x, uint32_t r);
uint16_t trit_f32_to_f16_sr(float x, uint32_t r);
// out (n) = in (n) rounded with the random bits of element offset + i of Philox (seed, stream):
// the same value whatever thread converts which part.
void trit_f32_to_bf16_sr_n(uint16_t *out, const float *in, int64_t n, uint64_t seed, uint64_t stream,
                           uint64_t offset);
void trit_f32_to_f16_sr_n(uint16_t *out, const float *in, int64_t n, uint64_t seed, uint64_t stream,
                          uint64_t offset);

// ---- FP8 (OCP e4m3fn and e5m2): saturating, NaN kept -------------------------------------

typedef enum trit_fp8_kind { TRIT_FP8_E4M3 = 0, TRIT_FP8_E5M2 } trit_fp8_kind;

// Round to nearest even; finite values past the largest and +-Inf give +-largest (448 for e4m3,
// 57344 for e5m2); NaN stays NaN.
uint8_t trit_f32_to_fp8(float x, trit_fp8_kind kind);
// Stochastic rounding with u uniform in [0, 1): unbiased below the largest value.
uint8_t trit_f32_to_fp8_sr(float x, trit_fp8_kind kind, float u);
float trit_fp8_to_f32(uint8_t b, trit_fp8_kind kind);
const float *trit_fp8_table(trit_fp8_kind kind);  // the 256 decoded values
float trit_fp8_max(trit_fp8_kind kind);

// ---- NF4 (QLoRA's 4-bit NormalFloat codebook on [-1, 1]) --------------------------------

extern const float trit_nf4_values[16];
// The code of v / absmax: u < 0 nearest, else stochastic with u uniform in [0, 1) (unbiased
// inside [-1, 1]); v outside [-1, 1] is clamped, NaN gives the code of 0.
uint8_t trit_nf4_encode(float v, float u);

#ifdef __cplusplus
}
#endif
#endif
