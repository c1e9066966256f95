// Fuzzes the metrics.jsonl reader behind `trit plot` (src/train/metrics.c).
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    trit_metric_row *rows = NULL;
    int64_t k = 0;
    if (trit_metrics_read(fuzz_file(data, n), &rows, &k) == TRIT_OK) {
        for (int64_t i = 0; i < k; i++)
            if (rows[i].step < 0) abort();
        free(rows);
    }
    return 0;
}
