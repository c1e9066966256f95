#!/usr/bin/env bash
# Builds trit twice (release, then AddressSanitizer + UndefinedBehaviorSanitizer) and runs the
# whole CTest suite in each. Exits non-zero if either build or any test fails.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DTRIT_WERROR=ON >/dev/null
cmake --build build -j"$jobs"
(cd build && ctest --output-on-failure -j"$jobs")
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTRIT_SANITIZE=ON -DTRIT_WERROR=ON >/dev/null
cmake --build build-asan -j"$jobs"
# OpenMP's runtime keeps thread pools alive at exit; those are not leaks of ours.
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
(cd build-asan && ctest --output-on-failure -j"$jobs")
