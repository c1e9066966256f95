// Fuzzes the TFRecord framing reader behind the TensorBoard event files (src/io/tfevents.c):
// record after record until the buffer ends or a frame is refused; every record it returns
// lies inside the buffer and inside the frame it consumed.
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    size_t at = 0;
    while (at < n) {
        const uint8_t *rec = NULL;
        size_t len = 0, used = 0;
        if (trit_tfrecord_read(data + at, n - at, &rec, &len, &used) != TRIT_OK) break;
        if (used == 0 || used > n - at || rec < data + at || rec + len > data + at + used) abort();
        at += used;
    }
    return 0;
}
