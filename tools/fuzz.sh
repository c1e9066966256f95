#!/usr/bin/env bash
# Builds the libFuzzer harnesses (fuzz/, clang, ASan + UBSan) and runs each for SECONDS on a
# copy of its seed corpus (the committed corpus is never modified), FUZZ_JOBS of them at a time
# (default 1; each still fuzzes for SECONDS, so the budget per harness is the same).
# Fails if any harness crashes, leaks, trips UBSan, hangs (> 2 s on one input) or runs out of
# memory (> 2 GiB). Findings are kept in build-fuzz/findings/<harness>/.
#   [FUZZ_JOBS=N] bash tools/fuzz.sh SECONDS [harness...]     (default: every fuzz/fuzz_*.c)
# Extra libFuzzer flags can be passed in FUZZ_FLAGS (e.g. FUZZ_FLAGS=-runs=1000000).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -lt 1 ] || ! [[ "$1" =~ ^[0-9]+$ ]]; then
  echo "usage: bash tools/fuzz.sh SECONDS [harness...]" >&2
  exit 2
fi
seconds=$1
shift
if [ $# -gt 0 ]; then
  harnesses=("$@")
else
  harnesses=()
  for f in fuzz/fuzz_*.c; do harnesses+=("$(basename "$f" .c)"); done
fi
for h in "${harnesses[@]}"; do
  [ -f "fuzz/$h.c" ] || { echo "fuzz.sh: no harness fuzz/$h.c" >&2; exit 2; }
done

built=$SECONDS
cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DTRIT_FUZZ=ON -DTRIT_SANITIZE=ON -DTRIT_WERROR=ON >/dev/null
cmake --build build-fuzz -j"$(nproc)" --target "${harnesses[@]}"
echo "fuzz.sh: build took $((SECONDS - built)) s"

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:allocator_may_return_null=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
jobs=${FUZZ_JOBS:-1}
[[ "$jobs" =~ ^[1-9][0-9]*$ ]] || { echo "fuzz.sh: FUZZ_JOBS must be a positive integer, got '$jobs'" >&2; exit 2; }

# Runs one harness; its exit status says whether it found anything.
run_one() {
  local h=$1 work=build-fuzz/fuzz-work/$1 findings=build-fuzz/findings/$1
  rm -rf "$work"
  mkdir -p "$work" "$findings"
  [ -d "fuzz/corpus/$h" ] && cp -r "fuzz/corpus/$h/." "$work/"
  local dict=()
  [ -f "fuzz/dict/$h.dict" ] && dict=(-dict="fuzz/dict/$h.dict")
  # -close_fd_mask=3: the readers' own messages (and `train --help`) would flood the log;
  # libFuzzer and the sanitizers keep reporting on their own copy of stderr.
  "build-fuzz/fuzz/$h" "$work" "${dict[@]}" -max_total_time="$seconds" -timeout=2 \
    -rss_limit_mb=2048 -malloc_limit_mb=2048 -print_final_stats=1 \
    -close_fd_mask=3 -artifact_prefix="$findings/" ${FUZZ_FLAGS:-} 2>"$findings/log.txt"
}

# Reports a finished harness: its statistics, or the end of its log when it found something.
report() {
  local h=$1 rc=$2 findings=build-fuzz/findings/$1
  echo "== $h: ${seconds}s"
  if [ "$rc" -ne 0 ]; then
    failed+=("$h")
    tail -n 60 "$findings/log.txt"
  fi
  grep -E "^stat::(number_of_executed_units|average_exec_per_sec|peak_rss_mb)" "$findings/log.txt" | sed "s/^/  $h /" || true
}

failed=()
for ((i = 0; i < ${#harnesses[@]}; i += jobs)); do
  batch=("${harnesses[@]:i:jobs}")
  pids=()
  for h in "${batch[@]}"; do
    run_one "$h" &
    pids+=($!)
  done
  for k in "${!batch[@]}"; do
    rc=0
    wait "${pids[k]}" || rc=$?
    report "${batch[k]}" "$rc"
  done
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz.sh: FAILED: ${failed[*]} (inputs in build-fuzz/findings/)" >&2
  exit 1
fi
echo "fuzz.sh: ${#harnesses[@]} harnesses ran ${seconds}s each, $jobs at a time, without a finding"
