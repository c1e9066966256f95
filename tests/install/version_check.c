// Built outside the tree against an installed trit (tests/install/test_install.sh): the
// library found at run time reports the version of the headers compiled against, and a public
// call fails with the library's message on bad input.
#include <stdio.h>
#include <string.h>

#include "trit/trit.h"

int main(void) {
    char want[48];
    snprintf(want, sizeof want, "%d.%d.%d", TRIT_VERSION_MAJOR, TRIT_VERSION_MINOR, TRIT_VERSION_PATCH);
    if (strcmp(trit_version(), want) != 0) {
        fprintf(stderr, "version_check: library says %s, headers say %s\n", trit_version(), want);
        return 1;
    }
    trit_tokenizer *tok = trit_tokenizer_load("/nonexistent/tokenizer.bin");
    if (tok || trit_last_error()[0] == '\0') {
        fprintf(stderr, "version_check: loading a missing tokenizer did not fail with a message\n");
        return 1;
    }
    printf("trit %s\n", trit_version());
    return 0;
}
