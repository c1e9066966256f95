// trit's version. CMake reads these three lines for the project version, the shared library's
// SONAME (libtrit.so.MAJOR) and the pkg-config and CMake package files, so they are the one place
// it is set.
#ifndef TRIT_VERSION_H
#define TRIT_VERSION_H

#define TRIT_VERSION_MAJOR 0
#define TRIT_VERSION_MINOR 1
#define TRIT_VERSION_PATCH 0

// TRIT_VERSION_AT_LEAST(0, 1, 0): whether the headers being compiled are at least that version.
#define TRIT_VERSION_AT_LEAST(major, minor, patch)                                                \
    (TRIT_VERSION_MAJOR > (major) ||                                                              \
     (TRIT_VERSION_MAJOR == (major) &&                                                            \
      (TRIT_VERSION_MINOR > (minor) || (TRIT_VERSION_MINOR == (minor) && TRIT_VERSION_PATCH >= (patch)))))

#ifdef __cplusplus
extern "C" {
#endif

// "MAJOR.MINOR.PATCH" of the library linked at run time (which may differ from the headers'
// macros when a program was built against another installed version).
const char *trit_version(void);

#ifdef __cplusplus
}
#endif
#endif
