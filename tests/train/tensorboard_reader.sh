#!/usr/bin/env bash
# TensorBoard's own reader on trit's event files: a short run stopped and resumed with
# --tensorboard, then tests/reference/check_tensorboard.py (EventAccumulator) against
# metrics.jsonl. Skipped (exit 77) when VENV/.ready is missing or its python has no tensorboard.
#   tensorboard_reader.sh TRIT_BINARY SOURCE_DIR VENV
set -euo pipefail
trit=$1 src=$2 venv=$3
py=$venv/bin/python
if [ ! -e "$venv/.ready" ] || ! "$py" -c "import tensorboard" 2>/dev/null; then
  echo "tensorboard_reader: skipped: no $venv/.ready with tensorboard importable"
  exit 77
fi
# One thread, and 50 held-out problems scored at each evaluation rather than 1000: the decoding
# they take is most of this test's time on a busy machine.
export TRIT_THREADS=1
tmp=$(mktemp -d "${TMPDIR:-/tmp}/trit-tbreader.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
common=(--steps 40 --log-every 3 --eval-every 10 --task-test 50 --threads 1 --quiet 1 --out "$tmp/run")
"$trit" train "${common[@]}" --tensorboard "$tmp/tb" --stop-after 25 --ckpt-every 20 >/dev/null
"$trit" train --resume "$tmp/run" --threads 1 --quiet 1 >/dev/null
"$py" "$src/tests/reference/check_tensorboard.py" "$tmp/run" "$tmp/tb"
