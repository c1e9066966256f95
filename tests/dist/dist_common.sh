# Shared by the dist tests that train through mpirun (test_dist.sh, test_hosts.sh, test_zero.sh,
# test_pipeline.sh, test_tensor.sh); sourced after TRIT and CASE are set. Checks mpirun and the binary; defines
# fail, the run's FLAGS (a test may set its own after), losses, compare and resumed_equal.

fail() { echo "FAIL ($CASE): $*"; exit 1; }

# mpirun missing is a failure, not a skip; TRIT is set before this file is sourced.
command -v mpirun >/dev/null || fail "mpirun not found: install openmpi-bin (tools/setup.sh); these tests need it"
[ -x "$TRIT" ] || fail "no trit binary at $TRIT: build it first"
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive

# A tiny GPT on the built-in addition task (2-digit problems, T = 8): 4 micro-batches of 4 a step.
FLAGS=(--digits 2 --layers 1 --heads 2 --dim 32 --batch 4 --total-batch-tokens 128 --steps 20 --warmup 2
       --threads 1 --eval-every 0 --log-every 1 --task-test 8 --dropout 0.1 --lr 3e-3)

# losses FILE: "step loss" lines of a metrics.jsonl, the loss printed exactly (repr).
losses() { python3 -c 'import json,sys
for l in open(sys.argv[1]): print(json.loads(l)["step"], repr(json.loads(l)["loss"]))' "$1"; }

# resumed_equal LOG FULL PART: LOG shows a resume at step 10, and run PART (stopped there and
# resumed) has FULL's losses and weights bit for bit.
resumed_equal() {
    grep -q "resuming .* at step 10" "$1" || fail "no resume at step 10 in the log"
    [ "$(losses "$2/metrics.jsonl")" = "$(losses "$3/metrics.jsonl")" ] ||
        { diff <(losses "$2/metrics.jsonl") <(losses "$3/metrics.jsonl"); fail "resumed losses differ"; }
    cmp "$2/model.safetensors" "$3/model.safetensors" || fail "the resumed run's weights differ"
}

# compare A B TOL: every step's loss in A/metrics.jsonl and B/metrics.jsonl within TOL
# (absolute), and the last validation loss too when the runs evaluated.
compare() {
    python3 - "$1/metrics.jsonl" "$2/metrics.jsonl" "$3" <<'PY' || fail "losses of $1 and $2 differ (above)"
import json, sys
ja = [json.loads(l) for l in open(sys.argv[1])]
jb = [json.loads(l) for l in open(sys.argv[2])]
a = {j["step"]: j["loss"] for j in ja}
b = {j["step"]: j["loss"] for j in jb}
tol = float(sys.argv[3])
assert sorted(a) == sorted(b) and len(a) == 20, f"steps {sorted(a)} against {sorted(b)}"
worst = max(abs(a[s] - b[s]) for s in a)
va, vb = ja[-1].get("val_loss"), jb[-1].get("val_loss")
val = f"; val loss {va!r} against {vb!r}" if va is not None or vb is not None else ""
print(f"largest loss difference over {len(a)} steps: {worst:.3g}{val} (bound {tol:g})")
bad = [s for s in a if not abs(a[s] - b[s]) <= tol]
for s in bad: print(f"step {s}: {a[s]!r} against {b[s]!r}")
val_bad = (va is None) != (vb is None) or (va is not None and not abs(va - vb) <= tol)
sys.exit(1 if bad or val_bad else 0)
PY
}
