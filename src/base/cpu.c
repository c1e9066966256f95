// CPU features (cpuid), OS support (XCR0 via xgetbv, AMX permission via arch_prctl), and the
// dispatch level kernels choose by. A feature counts only when the OS saves its register state
// too: a CPU with AVX-512 under an OS that does not enable ZMM state must not run AVX-512 code.
#define _GNU_SOURCE // syscall()
#include "trit/base.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

// ---- detection -----------------------------------------------------------------------------

static trit_cpu_features features;
static pthread_once_t features_once = PTHREAD_ONCE_INIT;

#if defined(__x86_64__)
static bool bit(uint32_t reg, int n) { return (reg >> n) & 1u; }

// xgetbv by opcode, so this file needs no -mxsave; only valid once OSXSAVE is known to be set.
static uint64_t read_xcr0(void) {
    uint32_t lo, hi;
    __asm__ volatile(".byte 0x0f, 0x01, 0xd0" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}

static void detect_features(void) {
    trit_cpu_features f = {0};
    uint32_t a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) {
        features = f;
        return;
    }
    bool osxsave = bit(c, 27), avx = bit(c, 28);
    f.fma = bit(c, 12);
    f.f16c = bit(c, 29);
    if (osxsave) {
        uint64_t xcr0 = read_xcr0();
        f.os_avx = avx && (xcr0 & 0x6) == 0x6;              // XMM | YMM
        f.os_avx512 = f.os_avx && (xcr0 & 0xe0) == 0xe0;    // opmask | ZMM_Hi256 | Hi16_ZMM
        f.os_amx = (xcr0 & 0x60000) == 0x60000;             // XTILECFG | XTILEDATA
    }
    uint32_t max_leaf = __get_cpuid_max(0, NULL);
    if (max_leaf >= 7) {
        __cpuid_count(7, 0, a, b, c, d);
        uint32_t max_sub = a;
        f.avx2 = bit(b, 5);
        f.avx512f = bit(b, 16);
        f.avx512dq = bit(b, 17);
        f.avx512bw = bit(b, 30);
        f.avx512vl = bit(b, 31);
        f.avx512_vnni = bit(c, 11);
        f.amx_bf16 = bit(d, 22);
        f.amx_tile = bit(d, 24);
        f.amx_int8 = bit(d, 25);
        if (max_sub >= 1) {
            __cpuid_count(7, 1, a, b, c, d);
            f.avx512_bf16 = bit(a, 5);
        }
    }
    features = f;
}
#else
static void detect_features(void) { memset(&features, 0, sizeof features); }
#endif

const trit_cpu_features *trit_cpu_features_get(void) {
    pthread_once(&features_once, detect_features);
    return &features;
}

// ---- AMX permission ------------------------------------------------------------------------
// Linux hands out the (large) tile data state only to processes that ask for it. The request is
// made once; later calls return the first answer and re-raise its message on the calling thread.

#define ARCH_GET_XCOMP_PERM 0x1022
#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18

static pthread_once_t amx_once = PTHREAD_ONCE_INIT;
static trit_status amx_status;
static char amx_message[256];

static void amx_fail(const char *why) {
    amx_status = TRIT_ERR_UNSUPPORTED;
    strncpy(amx_message, why, sizeof amx_message - 1);
}

static void amx_request_once(void) {
    const trit_cpu_features *f = trit_cpu_features_get();
    if (!f->amx_tile || !f->amx_bf16) {
        amx_fail("AMX not available: this CPU has no AMX tiles; use TRIT_CPU=avx512 or lower");
        return;
    }
    if (!f->os_amx) {
        amx_fail("AMX not available: the OS does not enable tile state in XCR0 (Linux >= 5.16 "
                 "needed); use TRIT_CPU=avx512 or lower");
        return;
    }
#if defined(__x86_64__)
    if (syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) != 0) {
        char buf[200];
        snprintf(buf, sizeof buf, "AMX permission request (arch_prctl) failed: %s; use "
                 "TRIT_CPU=avx512 or lower", strerror(errno));
        amx_fail(buf);
        return;
    }
    unsigned long granted = 0;
    if (syscall(SYS_arch_prctl, ARCH_GET_XCOMP_PERM, &granted) != 0 ||
        !(granted & (1ul << XFEATURE_XTILEDATA))) {
        amx_fail("AMX permission request returned success but tile data is not granted; use "
                 "TRIT_CPU=avx512 or lower");
        return;
    }
    amx_status = TRIT_OK;
#endif
}

trit_status trit_cpu_amx_request(void) {
    pthread_once(&amx_once, amx_request_once);
    if (amx_status != TRIT_OK) return trit_error(amx_status, "%s", amx_message);
    return TRIT_OK;
}

// ---- levels --------------------------------------------------------------------------------

static pthread_once_t detected_once = PTHREAD_ONCE_INIT;
static trit_cpu_isa detected;

// AMX is not a level until trit has an AMX kernel: a level "amx" would run the AVX-512 kernels
// under another name, so an AMX machine dispatches at avx512 (its AMX features are still
// detected, trit_cpu_detected_features, for the kernel that will use them).
static void detect_level(void) {
    const trit_cpu_features *f = trit_cpu_features_get();
    bool avx2 = f->avx2 && f->fma && f->os_avx;
    bool avx512 = avx2 && f->avx512f && f->avx512bw && f->avx512vl && f->avx512dq && f->os_avx512;
    detected = avx512 ? TRIT_CPU_AVX512 : avx2 ? TRIT_CPU_AVX2 : TRIT_CPU_REF;
}

#define NO_AMX_KERNEL "trit has no AMX kernel yet, so level amx would run the AVX-512 kernels"


trit_cpu_isa trit_cpu_detected_level(void) {
    pthread_once(&detected_once, detect_level);
    return detected;
}

static const char *const level_names[] = {"ref", "avx2", "avx512", "amx"};

const char *trit_cpu_level_name(trit_cpu_isa level) {
    if ((int)level < TRIT_CPU_REF || level > TRIT_CPU_AMX) return "unknown";
    return level_names[level];
}

static pthread_once_t level_once = PTHREAD_ONCE_INIT;
// The level in the low 8 bits and the features it allows above them, in one value so the two
// always agree; -1 until the level is known. Row converters ask for the features once per row,
// so the answer is one load, not a pthread_once call through the PLT.
static atomic_int current = -1;

static uint32_t features_within(trit_cpu_isa level);
static void set_current(trit_cpu_isa level) { atomic_store(&current, (int)level | (int)(features_within(level) << 8)); }

// TRIT_CPU's level: TRIT_OK with *want set (-1 when TRIT_CPU is unset or empty), or the error
// that says why the value is refused.
static trit_status env_level(int *want) {
    *want = -1;
    const char *env = getenv("TRIT_CPU");
    if (!env || !*env) return TRIT_OK;
    for (int i = TRIT_CPU_REF; i <= TRIT_CPU_AVX512; i++)
        if (strcmp(env, level_names[i]) == 0) return *want = i, TRIT_OK;
    if (strcmp(env, "amx") == 0)
        return trit_error(TRIT_ERR_UNSUPPORTED, "TRIT_CPU=amx is refused: " NO_AMX_KERNEL "; set TRIT_CPU=avx512 "
                          "(which uses AVX512-BF16 and VNNI where the CPU has them) or leave TRIT_CPU unset");
    return trit_error(TRIT_ERR_INVALID, "TRIT_CPU=%s is not one of ref|avx2|avx512; unset it to use the best level "
                      "this machine has", env);
}

trit_status trit_cpu_env_check(void) {
    int want;
    return env_level(&want);
}

// TRIT_CPU only lowers the level: asking for more than the machine has is clamped with a warning.
// A value env_level refuses is ignored with its message as a warning (a library cannot refuse
// an environment variable; `trit` itself exits on it through trit_cpu_env_check).
static void init_level(void) {
    trit_cpu_isa det = trit_cpu_detected_level();
    trit_cpu_isa lvl = det;
    int want;
    if (env_level(&want) != TRIT_OK) {
        trit_log(TRIT_LOG_WARN, "%s; using %s", trit_last_error(), trit_cpu_level_name(det));
        trit_clear_error();
    } else if (want > (int)det) {
        trit_log(TRIT_LOG_WARN, "TRIT_CPU=%s but this machine supports only %s; using %s", level_names[want],
                 trit_cpu_level_name(det), trit_cpu_level_name(det));
    } else if (want >= 0) {
        lvl = (trit_cpu_isa)want;
    }
    set_current(lvl);
}

trit_cpu_isa trit_cpu_level(void) {
    pthread_once(&level_once, init_level);
    return (trit_cpu_isa)(atomic_load(&current) & 0xff);
}

trit_status trit_cpu_set_level(trit_cpu_isa level) {
    pthread_once(&level_once, init_level);
    if ((int)level < TRIT_CPU_REF || level > TRIT_CPU_AMX)
        return trit_error(TRIT_ERR_INVALID, "trit_cpu_set_level: level %d is not one of "
                          "TRIT_CPU_REF..TRIT_CPU_AMX (0..3)", (int)level);
    if (level == TRIT_CPU_AMX)
        return trit_error(TRIT_ERR_UNSUPPORTED, "cannot run at cpu level amx: " NO_AMX_KERNEL "; use TRIT_CPU_AVX512");
    trit_cpu_isa det = trit_cpu_detected_level();
    if (level > det)
        return trit_error(TRIT_ERR_UNSUPPORTED, "cannot run at cpu level %s: this machine "
                          "supports up to %s", trit_cpu_level_name(level),
                          trit_cpu_level_name(det));
    set_current(level);
    return TRIT_OK;
}

// ---- feature predicates ----------------------------------------------------------------------

uint32_t trit_cpu_detected_features(void) {
    const trit_cpu_features *f = trit_cpu_features_get();
    uint32_t m = 0;
    if (f->avx2 && f->fma && f->f16c && f->os_avx) m |= TRIT_FEAT_AVX2;
    if ((m & TRIT_FEAT_AVX2) && f->avx512f && f->avx512bw && f->avx512vl && f->avx512dq && f->os_avx512) {
        m |= TRIT_FEAT_AVX512;
        if (f->avx512_bf16) m |= TRIT_FEAT_AVX512_BF16;
        if (f->avx512_vnni) m |= TRIT_FEAT_AVX512_VNNI;
        if (f->amx_tile && f->os_amx && f->amx_bf16) m |= TRIT_FEAT_AMX_BF16;
        if (f->amx_tile && f->os_amx && f->amx_int8) m |= TRIT_FEAT_AMX_INT8;
    }
    return m;
}

static uint32_t features_within(trit_cpu_isa level) {
    static const uint32_t within[] = {
        [TRIT_CPU_REF] = 0,
        [TRIT_CPU_AVX2] = TRIT_FEAT_AVX2,
        [TRIT_CPU_AVX512] = TRIT_FEAT_AVX2 | TRIT_FEAT_AVX512 | TRIT_FEAT_AVX512_BF16 | TRIT_FEAT_AVX512_VNNI,
        [TRIT_CPU_AMX] = TRIT_FEAT_AVX2 | TRIT_FEAT_AVX512 | TRIT_FEAT_AVX512_BF16 | TRIT_FEAT_AVX512_VNNI |
                         TRIT_FEAT_AMX_BF16 | TRIT_FEAT_AMX_INT8,
    };
    return trit_cpu_detected_features() & within[level];
}

uint32_t trit_cpu_usable_features(void) {
    int u = atomic_load_explicit(&current, memory_order_relaxed);
    if (u < 0) {
        pthread_once(&level_once, init_level);
        u = atomic_load(&current);
    }
    return (uint32_t)u >> 8;
}

// ---- caches ----------------------------------------------------------------------------------

#if defined(__x86_64__)
static size_t cache_bytes[4];
static pthread_once_t cache_once = PTHREAD_ONCE_INIT;

// Intel's leaf 4 and AMD's 0x8000001D share one layout: subleaf i describes one cache until a
// type of 0; size = ways x partitions x line x sets.
static void detect_caches(void) {
    uint32_t a, b, c, d;
    __cpuid(0, a, b, c, d);
    const bool amd = (b == 0x68747541u /* "Auth" */) || (b == 0x6f677948u /* "Hygo" */);
    uint32_t leaf = 4;
    if (amd) {
        if ((uint32_t)__get_cpuid_max(0x80000000u, NULL) < 0x8000001Du) return;
        __cpuid(0x80000001u, a, b, c, d);
        if (!bit(c, 22)) return;  // no topology extensions: no 0x8000001D
        leaf = 0x8000001Du;
    } else if (a < 4) {
        return;
    }
    for (uint32_t i = 0; i < 16; i++) {
        __cpuid_count(leaf, i, a, b, c, d);
        const uint32_t type = a & 31, level = (a >> 5) & 7;
        if (type == 0) break;
        if (type == 2 || level < 1 || level > 3) continue;  // instruction caches
        cache_bytes[level] = (size_t)((b >> 22) + 1) * (((b >> 12) & 1023) + 1) * ((b & 4095) + 1) * ((size_t)c + 1);
    }
}

size_t trit_cpu_cache_bytes(int level) {
    pthread_once(&cache_once, detect_caches);
    return level >= 1 && level <= 3 ? cache_bytes[level] : 0;
}
#else
size_t trit_cpu_cache_bytes(int level) {
    (void)level;
    return 0;
}
#endif
