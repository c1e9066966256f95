# Shared by the MPI benchmarks (bench/ddp.sh, zero.sh, ddp_peers.sh); sourced after CFG, N (ranks)
# and USAGE are set. Sets M (the config's model and batch flags), TOK (N micro-batches of B x T),
# FLAGS (a run of STEPS steps on DATA, one thread, no evaluation or checkpoint), a work directory
# W removed at exit, and stats.
case "$CFG" in
baby) M=(--layers 4 --heads 4 --dim 128 --seq 64 --batch 12); TOK=$((N * 12 * 64)) ;;
small) M=(--layers 6 --heads 6 --dim 384 --seq 256 --batch 16); TOK=$((N * 16 * 256)) ;;
*) echo "usage: $USAGE" >&2; exit 2 ;;
esac
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
FLAGS=(--data "$DATA" "${M[@]}" --total-batch-tokens "$TOK" --steps "$STEPS" --warmup 5 --threads 1
       --eval-every 0 --eval-batches 1 --sample-tokens 0 --log-every 1 --ckpt-every 0)
export OMP_NUM_THREADS=1

# stats RUN: "tokens/s ms comm_ms", medians of the steps after the first quarter (warm caches);
# comm_ms nan for a run without an exchange.
stats() {
    python3 - "$1/metrics.jsonl" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
rows = rows[len(rows) // 4:]
tps = statistics.median(r["tokens_per_s"] for r in rows)
comm = [r["comm_ms"] for r in rows if "comm_ms" in r]
ms = statistics.median(r["ms"] for r in rows)
print(f"{tps:.0f} {ms:.2f} {statistics.median(comm) if comm else float('nan'):.2f}")
PY
}
