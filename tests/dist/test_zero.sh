#!/usr/bin/env bash
# ZeRO sharding (--dist zero1|zero2, src/dist/zero_mpi.c, src/train/zero_*.c) through mpirun, ranks
# of one thread each: usage test_zero.sh TRIT CASE, CASE one of
#   zero_equal   zero1 and zero2 on 2 ranks, and zero2 on 4, give one process's losses within 1e-6
#                for 20 steps (the micro-batches of one process, gradients summed in another
#                order); zero1 on 2 ranks gives DDP's on 2 ranks bit for bit (the same all-reduce,
#                the same element-wise AdamW), and zero2 DDP's in bf16 without master weights (the
#                same stochastic rounding draws); the header shows each rank's shard and the memory
#                formula, and the memory report's optimizer bytes are about half of DDP's
#   zero_resume  a zero2 run stopped at step 10 and resumed on 2 ranks gives the uninterrupted
#                run's losses and weights bit for bit; the step-10 shard files are gone after
#   zero_merge   `trit merge-shards` of a zero1 run on 2 ranks gives DDP's checkpoint on 2 ranks,
#                tensor for tensor, bit for bit (a normal, single-process layout); a run stopped
#                at step 10, merged and resumed with --dist zero2 on 4 ranks ends within 1e-6 of
#                one process's losses
#   zero_finetune `trit finetune BASE` with frozen weights (--freeze, no gradients or state) under
#                zero2, and with a LoRA adapter under zero1, on 2 ranks: one process's losses
#                within 1e-6; the shards cover only the trained values
#   zero_bad     a sharded checkpoint resumed on 4 ranks or in one process, a shard of another
#                run, and --optimizer galore with zero1: a message on every rank, a non-zero exit
# mpirun missing is a failure (tools/setup.sh installs openmpi-bin).
set -u
TRIT=$1
CASE=$2
. "$(dirname "$0")/dist_common.sh"
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
MPI=(mpirun --allow-run-as-root --oversubscribe)
# dist_common.sh's tiny GPT, with buckets of 10 kB, so the 54 kB of gradients go in several
# exchanges started during backward.
FLAGS+=(--bucket-mb 0.01)

# same_state A B: the tensors of two train_state.bin files (format in src/train/checkpoint_state.c)
# by name, bit for bit, and the same optimizer step.
same_state() {
    python3 - "$1" "$2" <<'PY' || fail "the checkpoints $1 and $2 differ (above)"
import array, json, struct, sys
def read(path):
    b = open(path, "rb").read()
    assert b[:8] == b"TRITSTAT", path
    hn = struct.unpack("<Q", b[16:24])[0]
    h = json.loads(b[24:24 + hn]); d = b[24 + hn:]
    out = {}
    for t in h["tensors"]:
        o, c = int(t["offset"]), int(t["count"])
        a = array.array({"f32": "f", "f64": "d"}[t["dtype"]])
        a.frombytes(d[o:o + c * a.itemsize])
        out[t["name"]] = (t["role"], [int(x) for x in t["shape"]], a)
    return h, out
ha, a = read(sys.argv[1]); hb, b = read(sys.argv[2])
assert sorted(a) == sorted(b), f"names differ: {sorted(set(a) ^ set(b))}"
assert any(r == "optim" for r, _, _ in a.values()), "no optimizer state in the first"
bad = [k for k in a if a[k] != b[k]]
for k in bad: print(f"{k}: differs")
assert ha["optimizer"] == hb["optimizer"], (ha["optimizer"], hb["optimizer"])
print(f"{len(a)} tensors equal bit for bit, optimizer {ha['optimizer']}")
sys.exit(1 if bad else 0)
PY
}

case "$CASE" in
zero_equal)
    "$TRIT" train "${FLAGS[@]}" --out "$W/one" >"$W/one.log" 2>&1 || { cat "$W/one.log"; fail "one process failed"; }
    "${MPI[@]}" -np 2 "$TRIT" train --dist ddp "${FLAGS[@]}" --out "$W/ddp" >"$W/ddp.log" 2>&1 ||
        { cat "$W/ddp.log"; fail "ddp failed"; }
    for z in zero1 zero2; do
        "${MPI[@]}" -np 2 "$TRIT" train --dist $z "${FLAGS[@]}" --out "$W/$z" >"$W/$z.log" 2>&1 ||
            { cat "$W/$z.log"; fail "$z on 2 ranks failed"; }
        compare "$W/one" "$W/$z" 1e-6
        grep -Eq "^$z: rank 0 of 2 updates elements \[0, [0-9]+\) of [0-9]+: .* = [0-9.]+ MB a rank \(DDP [0-9.]+ MB; ZeRO's" \
            "$W/$z.log" || { grep -v "^step" "$W/$z.log"; fail "no $z shard and memory line in the header"; }
    done
    grep -q "gradients reduce-scattered in [4-9] buckets" "$W/zero2.log" || fail "zero2 does not say reduce-scattered"
    [ "$(losses "$W/ddp/metrics.jsonl")" = "$(losses "$W/zero1/metrics.jsonl")" ] ||
        { diff <(losses "$W/ddp/metrics.jsonl") <(losses "$W/zero1/metrics.jsonl"); fail "zero1 and ddp differ"; }
    # The memory report: zero1's optimizer is rank 0's half of DDP's (AdamW: 8 bytes a parameter,
    # the shard's pieces of the 13,408 values); zero2's gradients its shard too.
    opt() { grep -Eo "^memory: $2 +[0-9]+" "$1" | grep -Eo "[0-9]+$"; }
    python3 -c 'import sys; d, z1, g, g2 = map(int, sys.argv[1:])
r = z1 / d; print(f"optimizer bytes: zero1 rank 0 {z1}, ddp {d} ({r:.3f}); gradients: zero2 {g2}, ddp {g}")
sys.exit(0 if 0.45 < r < 0.55 and 0.45 < g2 / g < 0.55 else 1)' "$(opt "$W/ddp.log" optimizer)" \
        "$(opt "$W/zero1.log" optimizer)" "$(opt "$W/ddp.log" gradients)" "$(opt "$W/zero2.log" gradients)" ||
        fail "the memory report does not show the shard's halves"
    # bf16 weights without master copies, rounded stochastically: each piece of a shard draws the
    # bits its elements draw in one process, so zero2 equals DDP bit for bit here too.
    for d in ddp zero2; do
        "${MPI[@]}" -np 2 "$TRIT" train --dist $d "${FLAGS[@]}" --precision bf16 --master-weights off \
            --out "$W/bf$d" >"$W/bf$d.log" 2>&1 || { cat "$W/bf$d.log"; fail "$d in bf16 failed"; }
    done
    [ "$(losses "$W/bfddp/metrics.jsonl")" = "$(losses "$W/bfzero2/metrics.jsonl")" ] ||
        { diff <(losses "$W/bfddp/metrics.jsonl") <(losses "$W/bfzero2/metrics.jsonl"); fail "bf16: zero2 and ddp differ"; }
    "${MPI[@]}" -np 4 "$TRIT" train --dist zero2 "${FLAGS[@]}" --out "$W/four" >"$W/four.log" 2>&1 ||
        { cat "$W/four.log"; fail "zero2 on 4 ranks failed"; }
    compare "$W/one" "$W/four" 1e-6
    ;;
zero_resume)
    "${MPI[@]}" -np 2 "$TRIT" train --dist zero2 "${FLAGS[@]}" --out "$W/full" >"$W/full.log" 2>&1 ||
        { cat "$W/full.log"; fail "the uninterrupted run failed"; }
    "${MPI[@]}" -np 2 "$TRIT" train --dist zero2 "${FLAGS[@]}" --out "$W/part" --stop-after 10 >"$W/p1.log" 2>&1 ||
        { cat "$W/p1.log"; fail "the first half failed"; }
    for r in 0 1; do [ -f "$W/part/optim_shard.r$r-of-2.step10.bin" ] || fail "no shard file of rank $r at step 10"; done
    "${MPI[@]}" -np 2 "$TRIT" train --resume "$W/part" >"$W/p2.log" 2>&1 || { cat "$W/p2.log"; fail "the resume failed"; }
    grep -q "resuming .* at step 10" "$W/p2.log" || fail "no resume at step 10 in the log"
    [ "$(losses "$W/full/metrics.jsonl")" = "$(losses "$W/part/metrics.jsonl")" ] ||
        { diff <(losses "$W/full/metrics.jsonl") <(losses "$W/part/metrics.jsonl"); fail "resumed losses differ"; }
    cmp "$W/full/model.safetensors" "$W/part/model.safetensors" || fail "the resumed run's weights differ"
    for r in 0 1; do same_state "$W/full/optim_shard.r$r-of-2.step20.bin" "$W/part/optim_shard.r$r-of-2.step20.bin"; done
    [ -z "$(ls "$W/part" | grep step10)" ] || fail "the step-10 shards were left behind: $(ls "$W/part")"
    ;;
zero_merge)
    "${MPI[@]}" -np 2 "$TRIT" train --dist ddp "${FLAGS[@]}" --out "$W/ddp" >"$W/ddp.log" 2>&1 ||
        { cat "$W/ddp.log"; fail "ddp failed"; }
    "${MPI[@]}" -np 2 "$TRIT" train --dist zero1 "${FLAGS[@]}" --out "$W/z" >"$W/z.log" 2>&1 ||
        { cat "$W/z.log"; fail "zero1 failed"; }
    "$TRIT" merge-shards "$W/z" --out "$W/m" >"$W/m.log" 2>&1 || { cat "$W/m.log"; fail "merge-shards failed"; }
    grep -q "with the optimizer shards of its 2 ranks merged" "$W/m.log" || { cat "$W/m.log"; fail "no merge line"; }
    same_state "$W/m/train_state.bin" "$W/ddp/train_state.bin"
    [ -z "$(ls "$W/m" | grep optim_shard)" ] || fail "the merged run has shard files"
    cmp "$W/m/model.safetensors" "$W/z/model.safetensors" || fail "the merged run's model differs"
    # Re-sharding: 2 ranks to step 10, merged, resumed on 4 ranks to step 20.
    "$TRIT" train "${FLAGS[@]}" --out "$W/one" >"$W/one.log" 2>&1 || { cat "$W/one.log"; fail "one process failed"; }
    "${MPI[@]}" -np 2 "$TRIT" train --dist zero1 "${FLAGS[@]}" --out "$W/half" --stop-after 10 >"$W/h.log" 2>&1 ||
        { cat "$W/h.log"; fail "the first half failed"; }
    "$TRIT" merge-shards "$W/half" --out "$W/hm" >"$W/hm.log" 2>&1 || { cat "$W/hm.log"; fail "merging the half failed"; }
    "${MPI[@]}" -np 4 "$TRIT" train --resume "$W/hm" --dist zero2 >"$W/h4.log" 2>&1 ||
        { cat "$W/h4.log"; fail "the merged run did not resume on 4 ranks"; }
    grep -q "resuming .* at step 10" "$W/h4.log" || fail "no resume at step 10"
    compare "$W/one" "$W/hm" 1e-6
    ;;
zero_finetune)
    # A base on a generated text, fine-tuned on another (char tokenizer, T = 16).
    python3 -c 'import random; r = random.Random(7); print(" ".join(r.choice(["to", "be", "or", "not", "that", "is"]) for _ in range(3000)))' >"$W/a.txt"
    python3 -c 'import random; r = random.Random(8); print(" ".join(r.choice(["to", "be", "or", "not", "that", "is"]) for _ in range(3000)))' >"$W/b.txt"
    T=(--layers 1 --heads 2 --dim 32 --seq 16 --batch 4 --total-batch-tokens 256 --threads 1 --eval-every 0
       --eval-batches 2 --sample-tokens 0 --log-every 1 --warmup 2 --dropout 0.1 --bucket-mb 0.01)
    "$TRIT" train --data "$W/a.txt" "${T[@]}" --steps 5 --out "$W/base" >"$W/base.log" 2>&1 ||
        { cat "$W/base.log"; fail "the base run failed"; }
    for how in "zero2 --freeze h.*.attn.*" "zero1 --lora r=4,alpha=8"; do
        set -- $how
        "$TRIT" finetune "$W/base" --data "$W/b.txt" "${T[@]}" "$2" "$3" --steps 20 --out "$W/one$1" >"$W/one$1.log" 2>&1 ||
            { cat "$W/one$1.log"; fail "finetune $how in one process failed"; }
        "${MPI[@]}" -np 2 "$TRIT" finetune "$W/base" --dist "$1" --data "$W/b.txt" "${T[@]}" "$2" "$3" --steps 20 \
            --out "$W/two$1" >"$W/two$1.log" 2>&1 || { cat "$W/two$1.log"; fail "finetune $how on 2 ranks failed"; }
        compare "$W/one$1" "$W/two$1" 1e-6
        # The shards split the trained values only: the gradient block holds no frozen weight.
        trained=$(grep -Eo "parameters [(][0-9]+ trainable|: [0-9]+ of [0-9]+ parameters train|[0-9]+ trainable parameters" "$W/one$1.log" | grep -Eo "[0-9]+" | head -1)
        grep -Eo "^$1: rank 0 of 2 updates elements \[0, [0-9]+\) of [0-9]+: .* x [0-9]+ parameters" "$W/two$1.log" |
            grep -q "x $trained parameters" || { grep -E "^($1|frozen|lora)" "$W/two$1.log" "$W/one$1.log";
            fail "$how: the shards do not cover the $trained trained values"; }
    done
    ;;
zero_bad)
    "${MPI[@]}" -np 2 "$TRIT" train --dist zero1 "${FLAGS[@]}" --out "$W/a" --stop-after 10 >"$W/a.log" 2>&1 ||
        { cat "$W/a.log"; fail "run a failed"; }
    "${MPI[@]}" -np 4 "$TRIT" train --resume "$W/a" >"$W/four.log" 2>&1 && fail "a 2-rank shard set resumed on 4 ranks"
    # Counted as matches, not lines: mpirun may put two ranks' messages on one line.
    n=$(grep -o "'$W/a' holds a checkpoint whose optimizer state is sharded over 2 ranks (--dist zero1|zero2), and this job has 4: resume it with \`mpirun -np 2" "$W/four.log" | wc -l)
    [ "$n" -eq 4 ] || { cat "$W/four.log"; fail "expected the refusal on all 4 ranks, found it $n times"; }
    "$TRIT" train --resume "$W/a" >"$W/one.log" 2>&1 && fail "a sharded checkpoint resumed in one process"
    grep -q "sharded over 2 ranks (--dist zero1|zero2), and this job has 1: .*trit merge-shards" "$W/one.log" ||
        { cat "$W/one.log"; fail "no clear refusal in one process"; }
    # Another run's shards (another seed) in a's place: refused on both ranks.
    "${MPI[@]}" -np 2 "$TRIT" train --dist zero1 "${FLAGS[@]}" --seed 5 --out "$W/b" --stop-after 10 >"$W/b.log" 2>&1 ||
        { cat "$W/b.log"; fail "run b failed"; }
    cp "$W"/b/optim_shard.* "$W/a/"
    "${MPI[@]}" -np 2 "$TRIT" train --resume "$W/a" >"$W/mix.log" 2>&1 && fail "another run's shards were accepted"
    n=$(grep -o "is the optimizer shard of another run, or of another checkpoint of this one" "$W/mix.log" | wc -l)
    [ "$n" -eq 2 ] || { cat "$W/mix.log"; fail "expected the refusal on both ranks, found it $n times"; }
    "$TRIT" merge-shards "$W/a" --out "$W/am" >"$W/am.log" 2>&1 && fail "merge-shards took another run's shards"
    grep -q "is the optimizer shard of another run" "$W/am.log" || { cat "$W/am.log"; fail "merge-shards: no clear refusal"; }
    [ ! -e "$W/am/train_state.bin" ] || fail "merge-shards left a checkpoint after refusing"
    "$TRIT" merge-shards "$W/b" --out "$W/bm" >/dev/null 2>&1 || fail "merge-shards of run b failed"
    "$TRIT" merge-shards "$W/bm" --out "$W/bmm" >"$W/bmm.log" 2>&1 && fail "merge-shards took a normal run"
    grep -q "is not a sharded checkpoint" "$W/bmm.log" || { cat "$W/bmm.log"; fail "no clear refusal of a normal run"; }
    "${MPI[@]}" -np 2 "$TRIT" train --dist zero1 --optimizer galore "${FLAGS[@]}" --out "$W/g" >"$W/g.log" 2>&1 &&
        fail "zero1 with galore was accepted"
    grep -q "\-\-dist zero1 shards AdamW's state, element by element; --optimizer galore" "$W/g.log" ||
        { cat "$W/g.log"; fail "no clear refusal of galore"; }
    n=$(grep -o "shards AdamW's state, element by element; --optimizer galore" "$W/g.log" | wc -l)
    [ "$n" -ge 2 ] || { cat "$W/g.log"; fail "the refusal is not on both ranks"; }
    ;;
*) fail "unknown case" ;;
esac
echo "ok ($CASE)"
