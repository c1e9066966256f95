#!/usr/bin/env bash
# Training on many processes (src/dist) through mpirun with 2 ranks of one thread each, against
# one process: usage test_dist.sh TRIT CASE, CASE one of
#   ddp_equal    DDP's losses equal one process's within 1e-6 for 20 steps (the same micro-batches,
#                summed in another order), and 2 ranks' tokens/s line counts both ranks
#   finetune     `trit finetune BASE --dist ddp` on 2 ranks against one process: losses within 1e-6
#   ddp_resume   a DDP run stopped at step 10 and resumed gives the uninterrupted run's losses and
#                weights bit for bit
#   bad_input    a step's micro-batches that 2 ranks cannot share, and ranks started with
#                different flags: a message on every rank and a non-zero exit
#   killed_rank  rank 1 killed with SIGKILL, or stopped with SIGSTOP: rank 0 and mpirun end within
#                30 s, naming rank 1
#   sigterm      SIGTERM to rank 1: a checkpoint of the whole job and exit 0
#   mpirun_stop  SIGUSR1 to mpirun (which forwards it, unlike SIGINT and SIGTERM), and Ctrl-C (SIGINT
#                to the process group) of a job started by tools/trit_mpirun.sh: a checkpoint of the
#                whole job at the step it stopped at, and mpirun's exit status 0
#   ddp_equal_np4      DDP on 4 ranks (one micro-batch each): losses within 1e-6 of one process's
# TernGrad's exchange (--dist ddp --terngrad); PROG is tests/dist/terngrad_ranks.c's program:
#   terngrad_exchange  2 ranks: the exchanged gradients equal a recomputation from the same codes
#                      bit for bit, the bytes equal the formula, a poisoned rank makes all NaN
#   terngrad_groups    4 ranks in groups of 2 (fp32 inside, ternary between): the same checks, and
#                      20 training steps with the same parameters on every rank at every step
#   terngrad_train     2 ranks: the same parameters on every rank at every step; `trit train`'s
#                      header, and comm_bytes in every metrics line equal to the formula
#   terngrad_resume    a ternary run stopped at step 10 and resumed: the same losses and weights
#   terngrad_bad_input --terngrad-between-groups not dividing the ranks, or without --terngrad:
#                      a message on every rank and a non-zero exit
# usage for those: test_dist.sh TRIT CASE PROG
# mpirun missing is a failure (tools/setup.sh installs openmpi-bin).
set -u
TRIT=$1
CASE=$2
PROG=${3:-}
. "$(dirname "$0")/dist_common.sh"
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
MPI=(mpirun --allow-run-as-root --oversubscribe -np 2)

# rank_pid R: the pid of rank R of the mpirun job whose pid is $job.
rank_pid() {
    for p in $(pgrep -P "$job"); do
        tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$1" && { echo "$p"; return; }
    done
}
# Ends the job $job and its ranks (a test that gives up must not leave them running).
end_job() {
    for p in $(pgrep -P "$job"); do kill -9 "$p" 2>/dev/null; done
    kill -9 "$job" 2>/dev/null
}
# Waits up to 30 s for LOG to show step 20 of a long run.
wait_step20() { for _ in $(seq 300); do grep -Eq "^step +20/" "$1" 2>/dev/null && return 0; sleep 0.1; done; return 1; }

case "$CASE" in
ddp_equal)
    "$TRIT" train "${FLAGS[@]}" --out "$W/one" >"$W/one.log" 2>&1 || { cat "$W/one.log"; fail "one process failed"; }
    # Buckets of 10 kB: the 54 kB of gradients go in several all-reduces, started during backward.
    "${MPI[@]}" "$TRIT" train --dist ddp --bucket-mb 0.01 "${FLAGS[@]}" --out "$W/two" >"$W/two.log" 2>&1 ||
        { cat "$W/two.log"; fail "mpirun -np 2 failed"; }
    grep -q "x 2 ranks" "$W/two.log" || { cat "$W/two.log"; fail "the header does not show 2 ranks"; }
    grep -Eq "^ddp: 2 ranks, gradients all-reduced in [4-9] buckets of up to 0.01 MB" "$W/two.log" ||
        fail "no ddp line with several buckets in the header"
    [ "$(grep -c '^step 20/20' "$W/two.log")" -eq 1 ] || fail "rank 1 logs too (or nobody does)"
    [ "$(grep -c '^done at step 20' "$W/two.log")" -eq 1 ] || fail "rank 1 reports the result too (or nobody does)"
    # Step 1 runs the same micro-batches from the same weights: the same bits. Later steps differ
    # by the order of the gradient sums (float rounding, about 1e-7 of the loss each step).
    [ "$(losses "$W/one/metrics.jsonl" | sed -n 1p)" = "$(losses "$W/two/metrics.jsonl" | sed -n 1p)" ] ||
        fail "step 1's loss differs: $(losses "$W/one/metrics.jsonl" | sed -n 1p) against $(losses "$W/two/metrics.jsonl" | sed -n 1p)"
    compare "$W/one" "$W/two" 1e-6
    python3 -c 'import json,sys
j=[json.loads(l) for l in open(sys.argv[1])]
assert all("comm_ms" in x and x["comm_ms"] >= 0 for x in j), "comm_ms missing"' "$W/two/metrics.jsonl" ||
        fail "metrics.jsonl has no comm_ms per step"
    ;;
finetune)
    # A base on a generated text, fine-tuned on another (char tokenizer, T = 16).
    python3 -c 'import random; r = random.Random(7); print(" ".join(r.choice(["to", "be", "or", "not", "that", "is"]) for _ in range(3000)))' >"$W/a.txt"
    python3 -c 'import random; r = random.Random(8); print(" ".join(r.choice(["to", "be", "or", "not", "that", "is"]) for _ in range(3000)))' >"$W/b.txt"
    T=(--layers 1 --heads 2 --dim 32 --seq 16 --batch 4 --total-batch-tokens 256 --threads 1 --eval-every 0
       --eval-batches 2 --sample-tokens 0 --log-every 1 --warmup 2 --dropout 0.1)
    "$TRIT" train --data "$W/a.txt" "${T[@]}" --steps 5 --out "$W/base" >"$W/base.log" 2>&1 ||
        { cat "$W/base.log"; fail "the base run failed"; }
    "$TRIT" finetune "$W/base" --data "$W/b.txt" "${T[@]}" --steps 20 --out "$W/ft1" >"$W/ft1.log" 2>&1 ||
        { cat "$W/ft1.log"; fail "finetune in one process failed"; }
    "${MPI[@]}" "$TRIT" finetune "$W/base" --dist ddp --data "$W/b.txt" "${T[@]}" --steps 20 --out "$W/ft2" \
        >"$W/ft2.log" 2>&1 || { cat "$W/ft2.log"; fail "finetune on 2 ranks failed"; }
    grep -q "x 2 ranks" "$W/ft2.log" || fail "the fine-tune did not run on 2 ranks"
    compare "$W/ft1" "$W/ft2" 1e-6
    ;;
ddp_resume)
    "${MPI[@]}" "$TRIT" train --dist ddp "${FLAGS[@]}" --out "$W/full" >"$W/full.log" 2>&1 ||
        { cat "$W/full.log"; fail "the uninterrupted run failed"; }
    "${MPI[@]}" "$TRIT" train --dist ddp "${FLAGS[@]}" --out "$W/part" --stop-after 10 >"$W/p1.log" 2>&1 ||
        { cat "$W/p1.log"; fail "the first half failed"; }
    "${MPI[@]}" "$TRIT" train --dist ddp --resume "$W/part" >"$W/p2.log" 2>&1 ||
        { cat "$W/p2.log"; fail "the resume failed"; }
    resumed_equal "$W/p2.log" "$W/full" "$W/part"
    ;;
bad_input)
    # 3 micro-batches a step (96 tokens) cannot be shared by 2 ranks.
    "${MPI[@]}" "$TRIT" train --dist ddp "${FLAGS[@]}" --total-batch-tokens 96 --out "$W/bad" >"$W/bad.log" 2>&1 &&
        fail "a step of 3 micro-batches on 2 ranks was accepted"
    n=$(grep -o "which 2 ranks cannot share: pass a multiple of batch x seq x ranks = 64" "$W/bad.log" | wc -l)
    [ "$n" -eq 2 ] || { cat "$W/bad.log"; fail "expected the message on both ranks, found it $n times"; }
    [ ! -e "$W/bad" ] || fail "the refused run left $W/bad behind"
    # Ranks started with different flags (mpirun's colon form): refused on both ranks.
    mpirun --allow-run-as-root --oversubscribe -np 1 "$TRIT" train --dist ddp "${FLAGS[@]}" --out "$W/mix" : \
        -np 1 "$TRIT" train --dist ddp "${FLAGS[@]}" --lr 2e-3 --out "$W/mix" >"$W/mix.log" 2>&1 &&
        fail "ranks with different --lr were accepted"
    n=$(grep -o "rank 1 was started with another configuration" "$W/mix.log" | wc -l)
    [ "$n" -eq 2 ] || { cat "$W/mix.log"; fail "expected the refusal on both ranks, found it $n times"; }
    ;;
killed_rank)
    for sig in KILL STOP; do
        TRIT_DIST_TIMEOUT=5 "${MPI[@]}" -x TRIT_DIST_TIMEOUT "$TRIT" train --dist ddp "${FLAGS[@]}" --steps 100000 \
            --warmup 10 --out "$W/k$sig" >"$W/k$sig.log" 2>&1 &
        job=$!
        wait_step20 "$W/k$sig.log" || { end_job; tail "$W/k$sig.log"; fail "the job did not reach step 20 in 30 s"; }
        victim=$(rank_pid 1)
        [ -n "$victim" ] || { end_job; fail "no rank 1 process found under mpirun $job"; }
        t0=$(date +%s.%N)
        kill -"$sig" "$victim"
        for _ in $(seq 400); do kill -0 "$job" 2>/dev/null || break; sleep 0.1; done
        if kill -0 "$job" 2>/dev/null; then
            end_job; fail "SIG$sig to rank 1: the job still runs after 40 s"
        fi
        wait "$job" && fail "SIG$sig to rank 1: mpirun exited 0"
        took=$(python3 -c "import sys; print(round(float(sys.argv[2]) - float(sys.argv[1]), 1))" "$t0" "$(date +%s.%N)")
        python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) < 30 else 1)" "$took" ||
            { grep -v "^step" "$W/k$sig.log"; fail "SIG$sig to rank 1: the job took $took s to end"; }
        kill -9 "$victim" 2>/dev/null
        grep -Eq "rank 0 of 2: no answer .*(rank 1 last reported step|rank 1 has been silent)|process rank 1 with PID" "$W/k$sig.log" ||
            { tail -20 "$W/k$sig.log"; fail "SIG$sig to rank 1: no message names rank 1"; }
        echo "SIG$sig to rank 1: the job ended in $took s: $(grep -Eo "rank 0 of 2: no answer .*|process rank 1 [^(]*" "$W/k$sig.log" | head -1)"
    done
    ;;
sigterm)
    job_log="$W/t.log"
    "${MPI[@]}" "$TRIT" train --dist ddp "${FLAGS[@]}" --steps 100000 --warmup 10 --out "$W/t" >"$job_log" 2>&1 &
    job=$!
    wait_step20 "$job_log" || { end_job; tail "$job_log"; fail "the job did not reach step 20 in 30 s"; }
    victim=$(rank_pid 1)
    [ -n "$victim" ] || { end_job; fail "no rank 1 process found"; }
    kill -TERM "$victim"
    for _ in $(seq 300); do kill -0 "$job" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$job" 2>/dev/null && { end_job; fail "the job still runs 30 s after SIGTERM"; }
    wait "$job" || { cat "$job_log"; fail "the job exited non-zero after SIGTERM"; }
    step=$(grep -Eo "^stopped at step [0-9]+" "$job_log" | head -1 | grep -Eo "[0-9]+$")
    [ -n "$step" ] || { tail "$job_log"; fail "no 'stopped at step' line"; }
    [ -f "$W/t/train_state.bin" ] || fail "no checkpoint after SIGTERM"
    "$TRIT" info "$W/t" | grep -q "step $step" || { "$TRIT" info "$W/t"; fail "the checkpoint is not at step $step"; }
    echo "SIGTERM to rank 1: the job stopped at step $step with a checkpoint"
    ;;
mpirun_stop)
    # The launcher script's path, beside this file's directory.
    LAUNCH="$(cd "$(dirname "$0")/../.." && pwd)/tools/trit_mpirun.sh"
    [ -x "$LAUNCH" ] || fail "no launcher at $LAUNCH"
    for how in usr1 ctrl-c; do
        job_log="$W/$how.log"
        if [ $how = usr1 ]; then
            "${MPI[@]}" "$TRIT" train --dist ddp "${FLAGS[@]}" --steps 100000 --warmup 10 --out "$W/$how" >"$job_log" 2>&1 &
            job=$!
        else
            # Job control: the launcher in a process group of its own, as a terminal's foreground job.
            set -m
            "$LAUNCH" "${MPI[@]:1}" "$TRIT" train --dist ddp "${FLAGS[@]}" --steps 100000 --warmup 10 --out "$W/$how" \
                >"$job_log" 2>&1 &
            job=$!
            set +m
        fi
        wait_step20 "$job_log" || { end_job; tail "$job_log"; fail "$how: the job did not reach step 20 in 30 s"; }
        if [ $how = usr1 ]; then kill -USR1 "$job"; else kill -INT -- "-$job"; fi
        for _ in $(seq 300); do kill -0 "$job" 2>/dev/null || break; sleep 0.1; done
        kill -0 "$job" 2>/dev/null && { end_job; fail "$how: the job still runs 30 s after the signal"; }
        wait "$job" || { cat "$job_log"; fail "$how: the job exited non-zero"; }
        step=$(grep -Eo "^stopped at step [0-9]+" "$job_log" | head -1 | grep -Eo "[0-9]+$")
        [ -n "$step" ] || { tail "$job_log"; fail "$how: no 'stopped at step' line"; }
        "$TRIT" info "$W/$how" | grep -q "step $step" || { "$TRIT" info "$W/$how"; fail "$how: the checkpoint is not at step $step"; }
        echo "$how: the job stopped at step $step with a checkpoint, exit status 0"
    done
    ;;
ddp_equal_np4)
    # 4 micro-batches a step, one on each rank.
    "$TRIT" train "${FLAGS[@]}" --out "$W/one" >"$W/one.log" 2>&1 || { cat "$W/one.log"; fail "one process failed"; }
    mpirun --allow-run-as-root --oversubscribe -np 4 "$TRIT" train --dist ddp --bucket-mb 0.01 "${FLAGS[@]}" \
        --out "$W/four" >"$W/four.log" 2>&1 || { cat "$W/four.log"; fail "mpirun -np 4 failed"; }
    grep -q "x 4 ranks" "$W/four.log" || { cat "$W/four.log"; fail "the header does not show 4 ranks"; }
    grep -q "^batch: 4 x 8 tokens x 1 accumulation x 4 ranks" "$W/four.log" || fail "not one micro-batch a rank"
    compare "$W/one" "$W/four" 1e-6
    ;;
terngrad_exchange)
    [ -x "$PROG" ] || fail "no terngrad_ranks program at '$PROG': build it first"
    for G in 1 2; do
        "${MPI[@]}" "$PROG" exchange "$G" >"$W/x$G.log" 2>&1 || { cat "$W/x$G.log"; fail "the exchange in groups of $G failed"; }
        cat "$W/x$G.log"
    done
    ;;
terngrad_groups)
    [ -x "$PROG" ] || fail "no terngrad_ranks program at '$PROG': build it first"
    MPI4=(mpirun --allow-run-as-root --oversubscribe -np 4)
    for G in 2 1; do
        "${MPI4[@]}" "$PROG" exchange "$G" >"$W/x$G.log" 2>&1 || { cat "$W/x$G.log"; fail "the exchange on 4 ranks in groups of $G failed"; }
        cat "$W/x$G.log"
    done
    "${MPI4[@]}" "$PROG" train 2 "$W/g" >"$W/g.log" 2>&1 || { cat "$W/g.log"; fail "training on 4 ranks in groups of 2 failed"; }
    cat "$W/g.log"
    grep -q "parameters and exchanged gradients the same on every rank at each of 20 steps" "$W/g.log" || fail "no steps compared"
    ;;
terngrad_train)
    [ -x "$PROG" ] || fail "no terngrad_ranks program at '$PROG': build it first"
    "${MPI[@]}" "$PROG" train 1 "$W/p" >"$W/p.log" 2>&1 || { cat "$W/p.log"; fail "training on 2 ranks failed"; }
    cat "$W/p.log"
    grep -q "parameters and exchanged gradients the same on every rank at each of 20 steps" "$W/p.log" || fail "no steps compared"
    "${MPI[@]}" "$TRIT" train --dist ddp --terngrad --bucket-mb 0.01 "${FLAGS[@]}" --out "$W/t" >"$W/t.log" 2>&1 ||
        { cat "$W/t.log"; fail "trit train --dist ddp --terngrad failed"; }
    grep -E "^terngrad: 2 ranks, ternary gradients all-gathered in [0-9]+ buckets" "$W/t.log" || { cat "$W/t.log"; fail "no terngrad line in the header"; }
    grep -Eq "^step +20/20 .*\| comm wait [0-9.]+ ms \| comm [0-9.]+ kB" "$W/t.log" || fail "the step line shows no comm bytes"
    nb=$(grep -Eo "all-gathered in [0-9]+ bucket" "$W/t.log" | grep -Eo "[0-9]+")
    # The formula from the checkpoint's tensors: 2 bits a value of the ones of --terngrad-min-size
    # (1024) values or more (whole bytes per tensor) and a 4-byte scale each, 4 bytes a value of the
    # others, one 4-byte flag a bucket.
    python3 - "$W/t/model.safetensors" "$W/t/metrics.jsonl" "$nb" <<'PY' || fail "comm_bytes differs from the formula"
import json, math, struct, sys
f = open(sys.argv[1], "rb")
head = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
sizes = [math.prod(v["shape"]) for k, v in head.items() if k != "__metadata__"]
tern = [n for n in sizes if n >= 1024]
want = sum((n + 3) // 4 + 4 for n in tern) + sum(4 * n for n in sizes if n < 1024) + 4 * int(sys.argv[3])
rows = [json.loads(l) for l in open(sys.argv[2])]
got = {r["comm_bytes"] for r in rows}
print(f"{len(sizes)} tensors ({len(tern)} ternary), {sys.argv[3]} buckets: formula {want} bytes a step, metrics {sorted(got)}; "
      f"fp32 values {4 * sum(sizes)} bytes")
assert len(rows) == 20 and got == {want}
PY
    ;;
terngrad_resume)
    TG=(--terngrad --bucket-mb 0.01)
    "${MPI[@]}" "$TRIT" train --dist ddp "${TG[@]}" "${FLAGS[@]}" --out "$W/full" >"$W/full.log" 2>&1 ||
        { cat "$W/full.log"; fail "the uninterrupted run failed"; }
    "${MPI[@]}" "$TRIT" train --dist ddp "${TG[@]}" "${FLAGS[@]}" --out "$W/part" --stop-after 10 >"$W/p1.log" 2>&1 ||
        { cat "$W/p1.log"; fail "the first half failed"; }
    "${MPI[@]}" "$TRIT" train --dist ddp --resume "$W/part" >"$W/p2.log" 2>&1 || { cat "$W/p2.log"; fail "the resume failed"; }
    grep -q "resuming .* at step 10" "$W/p2.log" || fail "no resume at step 10 in the log"
    grep -q "^terngrad: 2 ranks" "$W/p2.log" || fail "the resumed run is not ternary"
    [ "$(losses "$W/full/metrics.jsonl")" = "$(losses "$W/part/metrics.jsonl")" ] ||
        { diff <(losses "$W/full/metrics.jsonl") <(losses "$W/part/metrics.jsonl"); fail "resumed losses differ"; }
    cmp "$W/full/model.safetensors" "$W/part/model.safetensors" || fail "the resumed run's weights differ"
    # The draws depend on the step: a run with another seed gives other losses (the check above can fail).
    "${MPI[@]}" "$TRIT" train --dist ddp "${TG[@]}" "${FLAGS[@]}" --seed 7 --out "$W/other" >"$W/o.log" 2>&1 ||
        { cat "$W/o.log"; fail "the run with --seed 7 failed"; }
    [ "$(losses "$W/full/metrics.jsonl")" != "$(losses "$W/other/metrics.jsonl")" ] || fail "--seed changed nothing"
    ;;
terngrad_bad_input)
    "${MPI[@]}" "$TRIT" train --dist ddp --terngrad --terngrad-between-groups 3 "${FLAGS[@]}" --out "$W/bad" \
        >"$W/bad.log" 2>&1 && fail "groups of 3 on 2 ranks were accepted"
    n=$(grep -o "terngrad-between-groups 3 does not divide the job's 2 ranks into groups: pass a divisor of 2" "$W/bad.log" | wc -l)
    [ "$n" -eq 2 ] || { cat "$W/bad.log"; fail "expected the message on both ranks, found it $n times"; }
    [ ! -e "$W/bad" ] || fail "the refused run left $W/bad behind"
    "${MPI[@]}" "$TRIT" train --dist ddp --terngrad-between-groups 2 "${FLAGS[@]}" --out "$W/bad2" \
        >"$W/bad2.log" 2>&1 && fail "--terngrad-between-groups without --terngrad was accepted"
    n=$(grep -o "terngrad-between-groups applies to --dist ddp --terngrad" "$W/bad2.log" | wc -l)
    [ "$n" -eq 2 ] || { cat "$W/bad2.log"; fail "expected the message on both ranks, found it $n times"; }
    # One process (no mpirun) is a job of one rank: groups of 2 do not divide it.
    "$TRIT" train --dist ddp --terngrad --terngrad-between-groups 2 "${FLAGS[@]}" --out "$W/bad3" >"$W/bad3.log" 2>&1 &&
        fail "groups of 2 in one process were accepted"
    grep -q "terngrad-between-groups 2 does not divide the job's 1 rank into groups" "$W/bad3.log" ||
        { cat "$W/bad3.log"; fail "no message for groups of 2 in one process"; }
    [ ! -e "$W/bad3" ] || fail "the refused run left $W/bad3 behind"
    ;;
*) fail "unknown case" ;;
esac
echo "ok ($CASE)"
