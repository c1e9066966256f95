#!/usr/bin/env bash
# A second public-domain English text for fine-tuning a tinyshakespeare model: the King James
# Bible (1611) as Debian's bible-kjv package serves it (`apt-get install bible-kjv`; the text is in
# bible-kjv-text), one verse a line, without the verse references. Characters that
# tinyshakespeare.txt does not have (digits, parentheses) are dropped, so that a model with
# tinyshakespeare's character vocabulary reads every character. About 4.3 MB.
#
#   bench/kjv_text.sh OUT
set -euo pipefail
out=${1:?usage: kjv_text.sh OUT}
command -v bible >/dev/null || { echo "kjv_text.sh: no 'bible' command: apt-get install bible-kjv" >&2; exit 2; }
tmp=$out.tmp.$$
trap 'rm -f "$tmp"' EXIT
# `bible -f` prints "Ge1:1 In the beginning ..." a verse a line; the reference goes.
bible -f Ge1:1-Re22:21 | sed -E 's/^[1-3]?[A-Za-z]+[0-9]+:[0-9]+ //' | tr -d '()0-9' >"$tmp"
lines=$(wc -l <"$tmp")
[ "$lines" -eq 31102 ] || { echo "kjv_text.sh: expected the 31102 verses of the KJV, got $lines lines" >&2; exit 1; }
mv "$tmp" "$out"
trap - EXIT
echo "kjv_text.sh: $out, $(wc -c <"$out") bytes, $lines verses"
