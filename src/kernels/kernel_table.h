// The kernel table: every implementation of every hot loop, keyed by (kernel, input dtype,
// output dtype) and the CPU features it needs (trit_cpu_feature bits). A lookup takes the first
// row, in the table's order of preference, whose features are all usable now
// (trit_cpu_usable_features(), which TRIT_CPU and trit_cpu_set_level limit), so machines with
// different feature sets (AVX2 only; AVX-512 with BF16 and VNNI; AMX) each get their best kernel
// without a single ladder of levels. Every (kernel, dtypes) key has a portable row that needs no
// feature, so a lookup of a listed key always succeeds.
#ifndef TRIT_KERNELS_KERNEL_TABLE_H
#define TRIT_KERNELS_KERNEL_TABLE_H

#include "trit/tensor.h"

#include <stdatomic.h>

typedef enum trit_kernel_id {
    TRIT_KERNEL_GEMM,
    TRIT_KERNEL_GEMV,
    TRIT_KERNEL_GEMM_MIXED,
    TRIT_KERNEL_NORM_FWD,
    TRIT_KERNEL_NORM_BWD_X,
    TRIT_KERNEL_NORM_BWD_PARAMS,
    TRIT_KERNEL_GELU_FWD,
    TRIT_KERNEL_GELU_BWD,
    TRIT_KERNEL_SOFTMAX_FWD,
    TRIT_KERNEL_SOFTMAX_BWD,
    TRIT_KERNEL_LOG_SOFTMAX_FWD,
    TRIT_KERNEL_LOG_SOFTMAX_BWD,
    TRIT_KERNEL_CE_FWD,
    TRIT_KERNEL_CE_BWD,
    TRIT_KERNEL_CE_DLOGITS,
    TRIT_KERNEL_ATTEND,
    TRIT_KERNEL_EMBEDDING_FWD,
    TRIT_KERNEL_EMBEDDING_BWD,
    TRIT_KERNEL_ADAM,
    TRIT_KERNEL_FLASH_SCORES,
    TRIT_KERNEL_FLASH_ACCUM,
    TRIT_KERNEL_FLASH_SOFTMAX,
    TRIT_KERNEL_FLASH_PROBS,
    TRIT_KERNEL_FLASH_DSCORES,
    TRIT_KERNEL_QGEMM,
    TRIT_KERNEL_QPANEL,
    TRIT_KERNEL_QACT,
    TRIT_KERNEL_QACT_DIV,
    TRIT_KERNEL_WGEMM,
    TRIT_KERNEL_DEQUANT,  // runs of weight-only codes decoded to f32 (dequant.h)
    TRIT_KERNEL_PEAK,   // register-only multiply-add loops: the machine's compute limit (peak.h)
    TRIT_KERNEL_READ,   // a streaming sum: its read bandwidth
    TRIT_KERNEL_COUNT
} trit_kernel_id;

typedef void (*trit_kernel_fn)(void);  // cast to the kernel's own signature by its caller

typedef struct trit_kernel_entry {
    trit_kernel_id id;
    trit_dtype in, out;  // the dtypes of the kernel's main input and output
    uint32_t needs;      // trit_cpu_feature bits, all required
    const char *name;    // e.g. "gemm_avx512_f32", for logs and tests
    trit_kernel_fn fn;
} trit_kernel_entry;

// "gemm", "qpanel", ...: the kernel's name in messages ("?" for an id outside the enum).
const char *trit_kernel_id_name(trit_kernel_id id);

// The best usable row for the key, or NULL (with trit_last_error set) if the table has no row
// for it. Choosing a row that needs AMX asks Linux for tile data first (trit_cpu_amx_request);
// if that is refused the next row is taken.
const trit_kernel_entry *trit_kernel_find(trit_kernel_id id, trit_dtype in, trit_dtype out);

// A call site's memory of its last choice, so hot entry points (called per tile) pay one atomic
// load instead of a table scan. It holds the usable-feature mask the choice was made for, so a
// change of level (trit_cpu_set_level) is seen at once; a key without a row is remembered too.
typedef _Atomic uint64_t trit_kernel_slot;
// The row trit_kernel_find gives, remembered in `slot`; NULL (trit_last_error names the key) when
// the table has none.
const trit_kernel_entry *trit_kernel_pick(trit_kernel_slot *slot, trit_kernel_id id, trit_dtype in, trit_dtype out);
// The picked row's function, or `portable` when the table has no row for the key: a key fixed
// in the code always has one (test_kernel_table checks that every key has a portable row), so
// this only keeps an edit that drops a key from crashing; it says so once, as a warning.
trit_kernel_fn trit_kernel_pick_or(trit_kernel_slot *slot, trit_kernel_id id, trit_dtype in, trit_dtype out,
                                   trit_kernel_fn portable);

// The implementation of key (id, in, out) remembered in `slot`, as a pointer of type `type`, or
// NULL when the table has no row for the key (trit_last_error says which): for keys that come
// from data (a weight's dtype), whose entry point then returns that error.
#define TRIT_KERNEL_FN(type, slot, id, in, out)                                                     \
    ((type *)trit_kernel_pick_or((slot), (id), (in), (out), (trit_kernel_fn)0))
// The same for a key fixed in the code, never NULL: `portable` (a function of type `type`, which
// the conditional checks) when the table has no row.
#define TRIT_KERNEL_FN_OR(type, slot, id, in, out, portable)                                        \
    ((type *)trit_kernel_pick_or((slot), (id), (in), (out), (trit_kernel_fn)(1 ? (portable) : (type *)0)))

// The table itself, for tests and reports.
const trit_kernel_entry *trit_kernel_table(int *n);

#endif
