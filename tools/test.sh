#!/usr/bin/env bash
# The README's test command (CI runs it too). In order:
#   1. release build, the whole CTest suite (with the Python bindings' pytest suite, python/tests,
#      when /usr/bin/python3 has numpy and pytest, and the installed-library check);
#   2. the tests labelled "levels" (every area but train's whole training runs and the examples:
#      tests/CMakeLists.txt) again with the kernels forced to each CPU level below this
#      machine's own (`trit info --cpu`): avx2 and ref on AVX-512 machines, ref on AVX2-only
#      ones (their own level is step 1), none on machines without AVX2;
#   3. AddressSanitizer + UndefinedBehaviorSanitizer build, the whole suite;
#   4. every libFuzzer harness for 60 s of fuzzing each (tools/fuzz.sh, clang, ASan + UBSan), as
#      many at once as there are cores: 8 harnesses are 8 minutes of fuzzing, 4 minutes on 2 cores.
# Prints how long each step took. Exits non-zero if a build or a test fails or a fuzzer finds
# anything.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
t0=$SECONDS
step() { echo "test.sh: $1 took $((SECONDS - t0)) s"; t0=$SECONDS; }

cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DTRIT_WERROR=ON >/dev/null
cmake --build build -j"$jobs"
step "release build"
(cd build && ctest --output-on-failure -j"$jobs")
step "release tests"
# The Python bindings' pytest suite is the ctest python_bindings above; say so when it was skipped.
/usr/bin/python3 -c "import numpy, pytest" 2>/dev/null ||
  echo "test.sh: python bindings skipped: /usr/bin/python3 has no numpy or pytest (bash tools/setup.sh installs them)"

levels=(ref avx2 avx512)
best=$(build/trit info --cpu | sed -n 's/^detected level: //p')
for ((i = 0; i < ${#levels[@]}; i++)); do [ "${levels[i]}" = "$best" ] && break; done
[ "$i" -lt "${#levels[@]}" ] || { echo "test.sh: unknown detected level '$best'" >&2; exit 1; }
for ((l = i - 1; l >= 0; l--)); do
  (cd build && TRIT_CPU=${levels[l]} ctest --output-on-failure -j"$jobs" -L levels)
  step "tests at TRIT_CPU=${levels[l]} (this machine: $best)"
done

cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTRIT_SANITIZE=ON -DTRIT_WERROR=ON >/dev/null
cmake --build build-asan -j"$jobs"
step "sanitizer build"
# OpenMP's runtime keeps thread pools alive at exit; those are not leaks of ours.
(export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
 cd build-asan && ctest --output-on-failure -j"$jobs")
step "sanitizer tests"

# The readers of untrusted files and flags, fuzzed.
FUZZ_JOBS=$jobs bash tools/fuzz.sh 60
step "fuzzing (build and $(ls fuzz/fuzz_*.c | wc -l) harnesses x 60 s, $jobs at a time)"
