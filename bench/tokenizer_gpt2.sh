#!/bin/sh
# GPT-2 tokenizer speed, trit against tiktoken, one thread each, same text, in alternating rounds
# (trit, tiktoken, trit, tiktoken, ...) so drift on a shared machine hits both sides alike.
# trit's figure is `trit tokenize --stats` (the encode alone, loading the files excluded);
# tiktoken's is bench/tiktoken_gpt2.py (the same). Prints each round and the medians.
#
# usage: bench/tokenizer_gpt2.sh [ROUNDS] [TEXT] [GPT2_DIR]
#   defaults: 7, ../shared/data/tinyshakespeare.txt, ../shared/data/gpt2 (beside the checkout)
#   TRIT=path/to/trit (default build/trit), PYTHON=python with tiktoken (default /work/venv/bin/python)
set -eu

root=$(cd "$(dirname "$0")/.." && pwd)
trit=${TRIT:-$root/build/trit}
python=${PYTHON:-/work/venv/bin/python}
rounds=${1:-7}
text=${2:-$root/../shared/data/tinyshakespeare.txt}
gpt2=${3:-$root/../shared/data/gpt2}

median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

printf 'cpu: %s\n' "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
printf 'text: %s (%s bytes)\n' "$text" "$(wc -c < "$text")"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
i=1
while [ "$i" -le "$rounds" ]; do
    OMP_NUM_THREADS=1 "$trit" tokenize --stats --tokenizer "gpt2:$gpt2" < "$text" 2> "$tmp/err" > "$tmp/ids"
    t=$(sed -n 's/.*: \([0-9.]*\) MB\/s$/\1/p' "$tmp/err")
    n=$(wc -w < "$tmp/ids")
    set -- $(RAYON_NUM_THREADS=1 "$python" "$root/bench/tiktoken_gpt2.py" "$gpt2" "$text")
    [ "$n" = "$1" ] || { echo "token counts differ: trit $n, tiktoken $1" >&2; exit 1; }
    printf 'round %d: trit %s MB/s, tiktoken %s MB/s (%s tokens)\n' "$i" "$t" "$2" "$n"
    echo "$t" >> "$tmp/trit"
    echo "$2" >> "$tmp/tiktoken"
    i=$((i + 1))
done
mt=$(median < "$tmp/trit")
mk=$(median < "$tmp/tiktoken")
printf 'median: trit %s MB/s, tiktoken %s MB/s, ratio %.2f\n' "$mt" "$mk" "$(echo "$mt $mk" | awk '{ print $1 / $2 }')"
