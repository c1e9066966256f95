# Sourced by bench/llama_compare.sh and bench/bitnet_compare.sh: trit's batch-1 decode and a
# llama-bench peer timed into one results file, which bench/decode_summary.py turns into a table.
# A results line is "trit ROUND TOKENS JSON" (one `trit bench --decode --json` object) or
# "peer ROUND FORMAT LABEL JSON" (llama-bench's -o json array, on one line); FORMAT is the trit
# format the file is compared with, or * for every one. BENCH_WRAP=CMD runs each timed process
# as CMD PROCESS ARGS (a script that pauses other work on the machine, for instance).

# need_bins DIR NAME...: every NAME is an executable in DIR, else a message and exit 1
need_bins() {
  local dir=$1 b
  shift
  for b in "$@"; do
    [ -x "$dir/$b" ] || { echo "$(basename "$0"): no $b in $dir" >&2; exit 1; }
  done
}

# trit_decode RESULTS ROUND FORMATS THREADS TOKENS: one `trit bench --decode` process over the
# formats on the gpt2 shape (a TOKENS-token prompt, then TOKENS tokens), f16 KV cache
trit_decode() {
  local out=$1 round=$2 formats=$3 threads=$4 tokens=$5
  ${BENCH_WRAP:-} "${build:-build}/trit" bench --decode --config gpt2 --format "$formats" --kv-cache f16 \
    --threads "$threads" --tokens "$tokens" --json 2> /dev/null | sed "s/^/trit $round $tokens /" >> "$out"
}

# peer_bench RESULTS ROUND FORMAT LABEL LLAMA_BENCH ARGS...: one llama-bench process, -o json
peer_bench() {
  local out=$1 round=$2 format=$3 label=$4
  shift 4
  ${BENCH_WRAP:-} "$@" -o json 2> /dev/null | tr -d '\n' | sed "s|^|peer $round $format $label |; s/$/\n/" >> "$out"
}
