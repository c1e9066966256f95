#!/usr/bin/env bash
# Builds trit twice (release, then AddressSanitizer + UndefinedBehaviorSanitizer) and runs the
# whole CTest suite in each (the release build also at TRIT_CPU=avx2 and ref), then runs every
# libFuzzer harness for 60 s (tools/fuzz.sh, clang, ASan + UBSan). Exits non-zero if a build or a test fails or a fuzzer finds anything.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DTRIT_WERROR=ON >/dev/null
cmake --build build -j"$jobs"
(cd build && ctest --output-on-failure -j"$jobs")
# Again with the kernels limited to AVX2 (as on AVX2-only machines) and to the portable C.
for level in avx2 ref; do (cd build && TRIT_CPU=$level ctest --output-on-failure -j"$jobs"); done
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTRIT_SANITIZE=ON -DTRIT_WERROR=ON >/dev/null
cmake --build build-asan -j"$jobs"
# OpenMP's runtime keeps thread pools alive at exit; those are not leaks of ours.
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
(cd build-asan && ctest --output-on-failure -j"$jobs")
# The readers of untrusted files and flags, fuzzed (about 1 minute each).
bash tools/fuzz.sh 60
