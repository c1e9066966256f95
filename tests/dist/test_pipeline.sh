#!/usr/bin/env bash
# Pipeline parallelism (--dist pipeline, src/dist/pipeline_mpi.c) through mpirun with 2 ranks of
# one thread each, against one process: usage test_pipeline.sh TRIT CASE, CASE one of
#   gpipe        the baby model (4 blocks, dim 128, T 64) as 2 stages of 2 blocks, 4 micro-batches
#                a step under GPipe: the losses of one process accumulating the same 4 micro-batches
#                within 1e-6 for 20 steps (with dropout), the final validation loss (rank 0's, after
#                the stages' weights are brought over) too; the header shows the split, metrics.jsonl
#                the bubble beside (P - 1) / (M + P - 1)
#   1f1b         the same under 1F1B with 3 micro-batches (not a multiple of the stages)
#   four_stages  4 ranks, one block a stage (two middle stages, which receive and send both
#                ways), 1F1B with 5 micro-batches: one process's losses within 1e-6 for 20 steps
#   split        a head that costs about 3 blocks (dim 8, 300 BPE tokens: C V + 4 V = 3,600 against
#                4 C^2 + C F + hidden C + T C = 1,280 a block) leaves the last stage 1 of the 4 blocks
#   resume       a 1F1B run stopped at step 10 and resumed gives the uninterrupted run's losses and
#                weights bit for bit (each stage saved its own optimizer state); one process is
#                told how to resume it
#   bad_input    more stages than blocks, --stages other than the ranks, --micro-batches 0: a
#                message on every rank and a non-zero exit
# mpirun missing is a failure (tools/setup.sh installs openmpi-bin).
set -u
TRIT=$1
CASE=$2
. "$(dirname "$0")/dist_common.sh"
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
MPI=(mpirun --allow-run-as-root --oversubscribe -np 2)
python3 -c 'import random; r = random.Random(7); print(" ".join(r.choice(["to", "be", "or", "not", "that", "is", "the", "question"]) for _ in range(20000)))' >"$W/text.txt"
# The baby model on a small batch: 4 sequences of 64 characters a micro-batch.
FLAGS=(--data "$W/text.txt" --layers 4 --heads 4 --dim 128 --seq 64 --batch 4 --steps 20 --warmup 2 --threads 1
       --eval-every 0 --eval-batches 2 --sample-tokens 0 --log-every 1 --dropout 0.1 --lr 3e-3)

# equal SCHEDULE M: one process and 2 stages, M micro-batches a step.
equal() {
    "$TRIT" train "${FLAGS[@]}" --micro-batches "$2" --out "$W/one" >"$W/one.log" 2>&1 ||
        { cat "$W/one.log"; fail "one process failed"; }
    "${MPI[@]}" "$TRIT" train --dist pipeline --pipeline-schedule "$1" --micro-batches "$2" "${FLAGS[@]}" \
        --out "$W/two" >"$W/two.log" 2>&1 || { cat "$W/two.log"; fail "mpirun -np 2 failed"; }
    local name; name=$([ "$1" = gpipe ] && echo GPipe || echo 1F1B)
    grep -q "^pipeline: 2 stages, $name, $2 micro-batches a step" "$W/two.log" ||
        { cat "$W/two.log"; fail "no pipeline line in the header"; }
    # GPipe holds all M micro-batches in flight on each stage, 1F1B at most P - stage.
    local n0=$2 n1=$2
    [ "$1" = 1f1b ] && n0=2 n1=1
    grep -Eq "^  stage 0: embedding, blocks 0-1; activations [0-9.]+ MB in $n0 graphs " "$W/two.log" &&
        grep -Eq "^  stage 1: blocks 2-3, final norm, head and loss; activations [0-9.]+ MB in $n1 graphs? " "$W/two.log" ||
        { grep "^  stage" "$W/two.log"; fail "not blocks 0-1 in $n0 graphs and 2-3 in $n1 (the head is the only difference in cost)"; }
    grep -q "^batch: 4 x 64 tokens x $2 accumulation = $((4 * 64 * $2)) tokens/step" "$W/two.log" ||
        fail "the batch line does not count the step's tokens once"
    [ "$(grep -c '^step 20/20' "$W/two.log")" -eq 1 ] || fail "rank 1 logs too (or nobody does)"
    # The micro-batches and masks are one process's; the sums differ in order (the tied
    # embedding's two halves are added at the end, the stages' norms summed apart), so the
    # losses agree to float rounding: about 1e-7 of the loss a step.
    compare "$W/one" "$W/two" 1e-6
    python3 - "$W/two/metrics.jsonl" "$2" <<'PY' || fail "metrics.jsonl has no bubble figures"
import json, sys
j = [json.loads(l) for l in open(sys.argv[1])]
M = int(sys.argv[2])
ideal = 1 / (M + 1)
assert all(abs(x["bubble_ideal"] - ideal) < 1e-4 for x in j), f"bubble_ideal is not 1/(M+1) = {ideal:.4f}"
assert all(0 < x["bubble"] < 1 for x in j), "bubble out of (0, 1)"
print(f"bubble: measured median {sorted(x['bubble'] for x in j)[len(j) // 2]:.3f}, (P-1)/(M+P-1) = {ideal:.3f}")
PY
}

case "$CASE" in
gpipe) equal gpipe 4 ;;
1f1b) equal 1f1b 3 ;;
four_stages)
    "$TRIT" train "${FLAGS[@]}" --micro-batches 5 --out "$W/one" >"$W/one.log" 2>&1 ||
        { cat "$W/one.log"; fail "one process failed"; }
    mpirun --allow-run-as-root --oversubscribe -np 4 "$TRIT" train --dist pipeline --micro-batches 5 "${FLAGS[@]}" \
        --out "$W/four" >"$W/four.log" 2>&1 || { cat "$W/four.log"; fail "mpirun -np 4 failed"; }
    # 1F1B holds at most P - stage micro-batches in flight: 4, 3, 2, 1 graphs.
    for s in 0 1 2 3; do
        grep -Eq "^  stage $s: $([ $s = 0 ] && echo "embedding, ")block $s$([ $s = 3 ] && echo ", final norm, head and loss"); activations [0-9.]+ MB in $((4 - s)) graphs? " "$W/four.log" ||
            { grep "^  stage" "$W/four.log"; fail "stage $s is not block $s in $((4 - s)) graphs"; }
    done
    compare "$W/one" "$W/four" 1e-6
    ;;
split)
    python3 -c 'import random; r = random.Random(3); print(" ".join("".join(r.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(r.randint(2, 6))) for _ in range(20000)))' >"$W/words.txt"
    "${MPI[@]}" "$TRIT" train --dist pipeline --data "$W/words.txt" --tokenizer bpe --vocab 300 --layers 4 --heads 1 \
        --dim 8 --seq 64 --batch 2 --steps 1 --threads 1 --eval-every 0 --eval-batches 1 --sample-tokens 0 \
        --out "$W/split" >"$W/split.log" 2>&1 || { cat "$W/split.log"; fail "the run failed"; }
    grep -q "vocab 300:" "$W/split.log" || { grep "^model" "$W/split.log"; fail "the vocabulary is not 300 tokens"; }
    grep -q "^  stage 0: embedding, blocks 0-2; " "$W/split.log" && grep -q "^  stage 1: block 3, final norm, head and loss; " "$W/split.log" ||
        { grep "^  stage" "$W/split.log"; fail "the heavy head did not leave the last stage one block"; }
    ;;
resume)
    P=(--dist pipeline --pipeline-schedule 1f1b --micro-batches 2)
    "${MPI[@]}" "$TRIT" train "${P[@]}" "${FLAGS[@]}" --out "$W/full" >"$W/full.log" 2>&1 ||
        { cat "$W/full.log"; fail "the uninterrupted run failed"; }
    "${MPI[@]}" "$TRIT" train "${P[@]}" "${FLAGS[@]}" --out "$W/part" --stop-after 10 >"$W/p1.log" 2>&1 ||
        { cat "$W/p1.log"; fail "the first half failed"; }
    [ -f "$W/part/train_state.bin" ] && [ -f "$W/part/train_state.stage1of2.bin" ] ||
        { ls "$W/part"; fail "the stages' state files are missing"; }
    "${MPI[@]}" "$TRIT" train --dist pipeline --resume "$W/part" >"$W/p2.log" 2>&1 ||
        { cat "$W/p2.log"; fail "the resume failed"; }
    resumed_equal "$W/p2.log" "$W/full" "$W/part"
    # The other stage's optimizer state is in its own file: one process cannot resume the run.
    "$TRIT" train --resume "$W/full" >"$W/one.log" 2>&1 && fail "one process resumed a 2-stage run"
    grep -q "was saved by a pipeline of 2 stages .*: resume it as one, mpirun -np 2 trit train --dist pipeline" \
        "$W/one.log" || { cat "$W/one.log"; fail "no message saying how to resume the 2-stage run"; }
    ;;
bad_input)
    # 2 stages of a 1-block model.
    "${MPI[@]}" "$TRIT" train --dist pipeline "${FLAGS[@]}" --layers 1 --out "$W/b1" >"$W/b1.log" 2>&1 &&
        fail "2 stages of 1 block were accepted"
    n=$(grep -o "with 2 stages and --layers 1: a stage holds at least one block, so use at most 1 stages" "$W/b1.log" | wc -l)
    [ "$n" -eq 2 ] || { cat "$W/b1.log"; fail "more stages than blocks: expected the message on both ranks, found it $n times"; }
    [ ! -e "$W/b1" ] || fail "the refused run left $W/b1 behind"
    "${MPI[@]}" "$TRIT" train --dist pipeline --stages 3 "${FLAGS[@]}" --out "$W/b2" >"$W/b2.log" 2>&1 &&
        fail "--stages 3 on 2 ranks was accepted"
    n=$(grep -o -- "--stages 3, but the job has 2 ranks: a pipeline runs one stage a rank, so pass --stages 2" "$W/b2.log" | wc -l)
    [ "$n" -eq 2 ] || { cat "$W/b2.log"; fail "--stages 3: expected the message on both ranks, found it $n times"; }
    "${MPI[@]}" "$TRIT" train --dist pipeline --micro-batches 0 "${FLAGS[@]}" --out "$W/b3" >"$W/b3.log" 2>&1 &&
        fail "--micro-batches 0 was accepted"
    n=$(grep -o -- "--micro-batches must be in \[1, " "$W/b3.log" | wc -l)
    [ "$n" -eq 2 ] || { cat "$W/b3.log"; fail "--micro-batches 0: expected the message on both ranks, found it $n times"; }
    ;;
*) fail "unknown case" ;;
esac
echo "ok ($CASE)"
