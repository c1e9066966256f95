#!/usr/bin/env bash
# ZeRO sharding (--dist zero1|zero2|zero3, src/dist/zero_mpi.c, zero3_mpi.c, src/train/zero_*.c) through mpirun, ranks
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
#   zero3_equal  zero3 on 2 and 4 ranks, and hybrid (4 ranks, --shard-group 2), give one process's
#                losses within 1e-6 (a model of 2 blocks, so the gathers go block by block); zero3
#                gives zero2's losses bit for bit (the same reduce-scatter and update: the gathered
#                weights are the updated ones, exactly), also with bf16 weights without master
#                copies (2-byte gathers); the header shows the shard and the formula
#   zero3_memory the memory report of zero3 on 2 and 4 ranks (4 blocks): gradients 4 bytes and
#                AdamW 8 a shard element, parameters the shard's 4 a value plus the gathered
#                groups at most (the embeddings' group, kept through both phases, and two adjacent
#                groups, a block's attention and MLP halves: the one in use and the one started
#                ahead), recomputed here from the model's shapes; and every rank's peak RSS line
#   zero3_resume zero3 on 2 ranks and hybrid on 4 (G = 2), stopped at step 10 and resumed: the
#                uninterrupted run's losses, weights and shard files bit for bit; the hybrid run's
#                shards are its group's (2 files)
#   zero3_merge  `trit merge-shards` of zero3 on 2 ranks gives DDP's checkpoint on 2 ranks bit for
#                bit; a hybrid run stopped at step 10, merged and resumed with zero3 on 2 ranks ends
#                within 1e-6 of one process's losses
#   zero3_bad    --shard-group not dividing the ranks, --shard-group without zero3, zero3 with
#                --offload, a hybrid checkpoint resumed with another group size: a message on
#                every rank, a non-zero exit
#   zero3_frozen_equal  `trit finetune` under zero3 on 2 ranks with --freeze, LoRA, bottleneck
#                adapters and QLoRA (an NF4 base): one process's losses within 1e-6 for 20 steps and
#                zero2's bit for bit (the frozen f32 weights sharded and gathered like the trained
#                ones, the NF4 codes kept whole); the header counts the trained and frozen values
#                of the block (their sum the model's f32 parameters); LoRA on 4 ranks and hybrid;
#                --qat int8 gives DDP's losses bit for bit; bf16 weights without master copies at
#                C = 40 (padded unlike their f32 gradients) zero2's bit for bit
#   zero3_frozen_memory the memory report of a LoRA finetune under zero3 on 2 and 4 ranks (4
#                blocks, C = 64): parameters the rank's part of the f32 block (frozen values
#                included) plus the gathered groups at most, recomputed from the model's shapes;
#                gradients and AdamW the trained values of the gradient shard; per rank p + g + o
#                without the gathered groups at most 0.55 of DDP's at N = 2, 0.3 at N = 4
#   zero3_frozen_resume a LoRA and a --freeze finetune under zero3 on 2 ranks stopped at step 10
#                and resumed: the uninterrupted run's losses, weights, adapter and shards bit for bit
#   zero3_frozen_merge `trit merge-shards` of a LoRA finetune under zero3 on 2 ranks gives DDP's
#                checkpoint and adapter bit for bit, and `trit eval` reads it; a run stopped at step
#                10, merged and resumed with zero3 on 4 ranks ends within 1e-6 of one process
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


# finetune_bases: two generated texts of six words ($W/a.txt, $W/b.txt) and runs on the first to
# fine-tune on the second: $W/base32 (2 blocks, C = 32) and $W/base64 (C = 64, whose rows take
# NF4's blocks of 64); FT the flags the fine-tunes share (char tokenizer, T = 16).
FT=(--heads 2 --seq 16 --batch 4 --total-batch-tokens 256 --threads 1 --eval-every 0 --eval-batches 2 --sample-tokens 0
    --log-every 1 --warmup 2 --dropout 0.1 --bucket-mb 0.01)
finetune_bases() {
    python3 -c 'import random; r = random.Random(7); print(" ".join(r.choice(["to", "be", "or", "not", "that", "is"]) for _ in range(3000)))' >"$W/a.txt"
    python3 -c 'import random; r = random.Random(8); print(" ".join(r.choice(["to", "be", "or", "not", "that", "is"]) for _ in range(3000)))' >"$W/b.txt"
    for c in 32 64; do
        "$TRIT" train --data "$W/a.txt" --layers 2 --dim $c "${FT[@]}" --steps 5 --out "$W/base$c" >"$W/base$c.log" 2>&1 ||
            { cat "$W/base$c.log"; fail "the base run (C = $c) failed"; }
    done
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
    resumed_equal "$W/p2.log" "$W/full" "$W/part"
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
    n=$(grep -o "'$W/a' holds a checkpoint whose optimizer state is sharded over 2 ranks (--dist zero1|zero2|zero3), and this job has 4: resume it with \`mpirun -np 2" "$W/four.log" | wc -l)
    [ "$n" -eq 4 ] || { cat "$W/four.log"; fail "expected the refusal on all 4 ranks, found it $n times"; }
    "$TRIT" train --resume "$W/a" >"$W/one.log" 2>&1 && fail "a sharded checkpoint resumed in one process"
    grep -q "sharded over 2 ranks (--dist zero1|zero2|zero3), and this job has 1: .*trit merge-shards" "$W/one.log" ||
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
zero3_equal)
    Z3=(--layers 2)
    "$TRIT" train "${FLAGS[@]}" "${Z3[@]}" --out "$W/one" >"$W/one.log" 2>&1 || { cat "$W/one.log"; fail "one process failed"; }
    for how in "2 zero3" "4 zero3" "4 zero3 --shard-group 2" "2 zero2"; do
        set -- $how
        name="$1$2${4:-}"
        "${MPI[@]}" -np "$1" "$TRIT" train --dist "$2" ${3:+"$3" "$4"} "${FLAGS[@]}" "${Z3[@]}" --out "$W/$name" \
            >"$W/$name.log" 2>&1 || { cat "$W/$name.log"; fail "$how failed"; }
        [ "$2" = zero3 ] && compare "$W/one" "$W/$name" 1e-6
    done
    [ "$(losses "$W/2zero2/metrics.jsonl")" = "$(losses "$W/2zero3/metrics.jsonl")" ] ||
        { diff <(losses "$W/2zero2/metrics.jsonl") <(losses "$W/2zero3/metrics.jsonl"); fail "zero3 and zero2 differ"; }
    grep -Eq "^zero3: rank 0 of 2 keeps elements \[0, [0-9]+\) of 26112: .* \(DDP [0-9.]+ MB; ZeRO's \(4 \+ 4 \+ 8\) / N x 26112 parameters = [0-9.]+ MB, N = 2\)" \
        "$W/2zero3.log" || { grep -v "^step" "$W/2zero3.log"; fail "no zero3 shard and memory line in the header"; }
    grep -Eq "^zero3: rank 0 of 4 \(shard group 0 of 2, 2 ranks each\) keeps elements \[0, 13056\) of 26112" \
        "$W/4zero32.log" || { grep -v "^step" "$W/4zero32.log"; fail "no hybrid shard line"; }
    grep -q "gradients reduce-scattered in [4-9] buckets" "$W/2zero3.log" || fail "zero3 does not say reduce-scattered"
    for d in zero2 zero3; do
        "${MPI[@]}" -np 2 "$TRIT" train --dist $d "${FLAGS[@]}" "${Z3[@]}" --precision bf16 --master-weights off \
            --out "$W/bf$d" >"$W/bf$d.log" 2>&1 || { cat "$W/bf$d.log"; fail "$d in bf16 failed"; }
    done
    [ "$(losses "$W/bfzero2/metrics.jsonl")" = "$(losses "$W/bfzero3/metrics.jsonl")" ] ||
        { diff <(losses "$W/bfzero2/metrics.jsonl") <(losses "$W/bfzero3/metrics.jsonl"); fail "bf16: zero3 and zero2 differ"; }
    ;;
zero3_memory)
    for n in 2 4; do
        "${MPI[@]}" -np $n "$TRIT" train --dist zero3 "${FLAGS[@]}" --layers 4 --dim 64 --steps 1 --warmup 0 --out "$W/m$n" \
            >"$W/m$n.log" 2>&1 || { cat "$W/m$n.log"; fail "zero3 on $n ranks failed"; }
        # Every rank's peak RSS: rank 0's line, and the others'.
        [ "$(grep -c "^peak RSS of rank [1-9]: [0-9.]* MB in the steps" "$W/m$n.log")" -eq $((n - 1)) ] &&
            grep -q "^peak RSS: " "$W/m$n.log" || { cat "$W/m$n.log"; fail "not every rank's peak RSS on $n ranks"; }
        python3 - "$W/m$n.log" $n <<'PY' || fail "the zero3 memory report on $n ranks is not the formula's (above)"
import re, sys
log, N = open(sys.argv[1]).read(), int(sys.argv[2])
mem = {k: int(v) for k, v in re.findall(r"^memory: (\w+) +(\d+) bytes", log, re.M)}
lo, hi, count = map(int, re.search(r"^zero3: rank 0 of \d+ keeps elements \[(\d+), (\d+)\) of (\d+)", log, re.M).groups())
# The layout (reverse of first use, each tensor on a 64-byte line): ln_f, then h.3 .. h.0, each
# its MLP half (ln_2, mlp.*) then its attention half (ln_1, attn.*), then wpe and wte, the
# embeddings' group. C = 64, V = 12 (the addition task's vocabulary), T = 8.
C, V, T, L = 64, 12, 8, 4
pad = lambda n: -(-n // 16) * 16
mlp = sum(map(pad, [C, C, 4 * C * C, 4 * C, 4 * C * C, C]))
attn = sum(map(pad, [C, C, 3 * C * C, 3 * C, C * C, C]))
block = mlp + attn
groups = [pad(C) * 2] + [mlp, attn] * L + [pad(T * C) + pad(V * C)]  # ln_f, the halves, embeddings
assert sum(groups) == count, (sum(groups), count)
start = [sum(groups[:i]) for i in range(len(groups))]
shard = lambda r: (0 if r == 0 else count * r // N // 16 * 16, count if r == N - 1 else count * (r + 1) // N // 16 * 16)
lo0, hi0 = shard(0)
assert (lo, hi) == (lo0, hi0), ((lo, hi), (lo0, hi0))
out = lambda i: groups[i] - max(0, min(start[i] + groups[i], hi) - max(start[i], lo))
# Held at once: the embeddings and two neighbours in the layout (ln_f is h.3's MLP's neighbour).
gathered = out(2 * L + 1) + max(out(i) + out(i + 1) for i in range(2 * L))
want = {"parameters": 4 * (hi - lo + gathered), "gradients": 4 * (hi - lo)}
ok = all(mem[k] == v for k, v in want.items())
# AdamW's two moments of the trained values in the shard (the padding between tensors has none).
opt_ok = 8 * (hi - lo) - 8 * 16 * 13 <= mem["optimizer"] <= 8 * (hi - lo)
ddp = 16 * (4 * block + 2 * C + (T + V) * C)
per_rank = mem["parameters"] + mem["gradients"] + mem["optimizer"]
print(f"N = {N}: shard [{lo}, {hi}) of {count}, gathered at most {gathered} values; report {mem['parameters']} + "
      f"{mem['gradients']} + {mem['optimizer']} = {per_rank} bytes, expected {want} and optimizer <= {8 * (hi - lo)}; "
      f"{per_rank / ddp:.3f} of DDP's {ddp}")
sys.exit(0 if ok and opt_ok else 1)
PY
    done
    ;;
zero3_resume)
    for how in "2" "4 --shard-group 2"; do
        set -- $how
        "${MPI[@]}" -np "$1" "$TRIT" train --dist zero3 ${2:+"$2" "$3"} "${FLAGS[@]}" --layers 2 --out "$W/full$1" \
            >"$W/full$1.log" 2>&1 || { cat "$W/full$1.log"; fail "the uninterrupted run on $1 ranks failed"; }
        "${MPI[@]}" -np "$1" "$TRIT" train --dist zero3 ${2:+"$2" "$3"} "${FLAGS[@]}" --layers 2 --out "$W/part$1" \
            --stop-after 10 >"$W/p1$1.log" 2>&1 || { cat "$W/p1$1.log"; fail "the first half on $1 ranks failed"; }
        for r in 0 1; do [ -f "$W/part$1/optim_shard.r$r-of-2.step10.bin" ] || fail "no shard file of rank $r at step 10"; done
        [ "$(ls "$W/part$1" | grep -c optim_shard)" -eq 2 ] || fail "$how: shard files $(ls "$W/part$1")"
        "${MPI[@]}" -np "$1" "$TRIT" train --resume "$W/part$1" >"$W/p2$1.log" 2>&1 || { cat "$W/p2$1.log"; fail "the resume failed"; }
        resumed_equal "$W/p2$1.log" "$W/full$1" "$W/part$1"
        for r in 0 1; do same_state "$W/full$1/optim_shard.r$r-of-2.step20.bin" "$W/part$1/optim_shard.r$r-of-2.step20.bin"; done
        [ -z "$(ls "$W/part$1" | grep step10)" ] || fail "the step-10 shards were left behind: $(ls "$W/part$1")"
    done
    ;;
zero3_merge)
    "${MPI[@]}" -np 2 "$TRIT" train --dist ddp "${FLAGS[@]}" --layers 2 --out "$W/ddp" >"$W/ddp.log" 2>&1 ||
        { cat "$W/ddp.log"; fail "ddp failed"; }
    "${MPI[@]}" -np 2 "$TRIT" train --dist zero3 "${FLAGS[@]}" --layers 2 --out "$W/z" >"$W/z.log" 2>&1 ||
        { cat "$W/z.log"; fail "zero3 failed"; }
    "$TRIT" merge-shards "$W/z" --out "$W/m" >"$W/m.log" 2>&1 || { cat "$W/m.log"; fail "merge-shards failed"; }
    grep -q "with the optimizer shards of its 2 ranks merged" "$W/m.log" || { cat "$W/m.log"; fail "no merge line"; }
    same_state "$W/m/train_state.bin" "$W/ddp/train_state.bin"
    cmp "$W/m/model.safetensors" "$W/ddp/model.safetensors" || fail "the merged model differs from DDP's"
    # Re-sharding: hybrid on 4 ranks (G = 2) to step 10, merged, resumed with zero3 on 2 ranks.
    "$TRIT" train "${FLAGS[@]}" --layers 2 --out "$W/one" >"$W/one.log" 2>&1 || { cat "$W/one.log"; fail "one process failed"; }
    "${MPI[@]}" -np 4 "$TRIT" train --dist zero3 --shard-group 2 "${FLAGS[@]}" --layers 2 --out "$W/half" \
        --stop-after 10 >"$W/h.log" 2>&1 || { cat "$W/h.log"; fail "the first half failed"; }
    "$TRIT" merge-shards "$W/half" --out "$W/hm" >"$W/hm.log" 2>&1 || { cat "$W/hm.log"; fail "merging the half failed"; }
    "${MPI[@]}" -np 2 "$TRIT" train --resume "$W/hm" --dist zero3 --shard-group 0 >"$W/h2.log" 2>&1 ||
        { cat "$W/h2.log"; fail "the merged run did not resume on 2 ranks"; }
    grep -q "resuming .* at step 10" "$W/h2.log" || fail "no resume at step 10"
    compare "$W/one" "$W/hm" 1e-6
    ;;
zero3_bad)
    "${MPI[@]}" -np 4 "$TRIT" train --dist zero3 --shard-group 3 "${FLAGS[@]}" --out "$W/g3" >"$W/g3.log" 2>&1 &&
        fail "--shard-group 3 on 4 ranks was accepted"
    n=$(grep -o "\-\-shard-group 3 does not divide the job's 4 ranks: hybrid sharding makes groups of G consecutive ranks" "$W/g3.log" | wc -l)
    [ "$n" -eq 4 ] || { cat "$W/g3.log"; fail "expected the refusal of G = 3 on all 4 ranks, found it $n times"; }
    "${MPI[@]}" -np 2 "$TRIT" train --dist zero2 --shard-group 2 "${FLAGS[@]}" --out "$W/z2" >"$W/z2.log" 2>&1 &&
        fail "--shard-group with zero2 was accepted"
    n=$(grep -o "\-\-shard-group applies to --dist zero3 (hybrid sharding): add --dist zero3, or drop it" "$W/z2.log" | wc -l)
    [ "$n" -eq 2 ] || { cat "$W/z2.log"; fail "expected the refusal of --shard-group with zero2 on both ranks, found it $n times"; }
    "$TRIT" train --shard-group 2 "${FLAGS[@]}" --out "$W/one" >"$W/one.log" 2>&1 && fail "--shard-group without --dist was accepted"
    grep -q "\-\-shard-group applies to --dist zero3" "$W/one.log" || { cat "$W/one.log"; fail "no refusal in one process"; }
    # Offloading the frozen weights: zero3 shards them already.
    "${MPI[@]}" -np 2 "$TRIT" train --dist zero3 --freeze "h.*.attn.*" --offload optimizer+frozen "${FLAGS[@]}" \
        --out "$W/fr" >"$W/fr.log" 2>&1 && fail "zero3 with --offload was accepted"
    n=$(grep -o "\-\-offload with --dist zero3: the optimizer state and the frozen f32 weights are sharded already (a rank holds 1/2 of each" "$W/fr.log" | wc -l)
    [ "$n" -eq 2 ] || { cat "$W/fr.log"; fail "expected the refusal of --offload on both ranks, found it $n times"; }
    [ ! -e "$W/fr/train_state.bin" ] || fail "the refused run wrote a checkpoint"
    # A hybrid checkpoint (shards of groups of 2) resumed with groups of 4.
    "${MPI[@]}" -np 4 "$TRIT" train --dist zero3 --shard-group 2 "${FLAGS[@]}" --out "$W/h" --stop-after 10 >"$W/h.log" 2>&1 ||
        { cat "$W/h.log"; fail "the hybrid run failed"; }
    "${MPI[@]}" -np 4 "$TRIT" train --resume "$W/h" --shard-group 4 >"$W/h4.log" 2>&1 && fail "groups of 2's shards resumed in groups of 4"
    n=$(grep -o "'$W/h' holds a checkpoint whose optimizer state is sharded over 2 ranks (--dist zero1|zero2|zero3), and this job has 4: resume it with \`mpirun -np 2 trit train --resume $W/h\` (zero3: or --shard-group 2 on a multiple of 2 ranks)" "$W/h4.log" | wc -l)
    [ "$n" -eq 4 ] || { cat "$W/h4.log"; fail "expected the refusal on all 4 ranks, found it $n times"; }
    ;;
zero3_frozen_equal)
    finetune_bases
    for how in "freeze 32 --freeze h.*.attn.*" "lora 32 --lora r=4,alpha=8,targets=c_attn,c_fc" \
               "adapter 32 --adapter-type bottleneck --adapter-size 8" "qlora 64 --lora r=4,alpha=8 --quantize-base nf4"; do
        set -- $how
        name=$1 c=$2
        shift 2
        run=("$TRIT" finetune "$W/base$c" --data "$W/b.txt" --layers 2 --dim $c "${FT[@]}" "$@" --steps 20)
        "${run[@]}" --out "$W/one$name" >"$W/one$name.log" 2>&1 || { cat "$W/one$name.log"; fail "$name in one process failed"; }
        for d in zero2 zero3; do
            "${MPI[@]}" -np 2 "${run[@]}" --dist $d --out "$W/$d$name" >"$W/$d$name.log" 2>&1 ||
                { cat "$W/$d$name.log"; fail "$name under $d on 2 ranks failed"; }
        done
        compare "$W/one$name" "$W/zero3$name" 1e-6
        [ "$(losses "$W/zero2$name/metrics.jsonl")" = "$(losses "$W/zero3$name/metrics.jsonl")" ] ||
            { diff <(losses "$W/zero2$name/metrics.jsonl") <(losses "$W/zero3$name/metrics.jsonl"); fail "$name: zero3 and zero2 differ"; }
        # The header: the trained values (the adapter's or the unfrozen ones) and the frozen f32
        # values of the block, together the model's f32 parameters (QLoRA: its codes kept whole).
        python3 - "$W/zero3$name.log" "$name" <<'PY' || fail "$name: the zero3 header does not count the block (above)"
import re, sys
log, name = open(sys.argv[1]).read(), sys.argv[2]
total = int(re.search(r"^model: .*: (\d+) parameters", log, re.M).group(1))
t = re.search(r"(\d+) trainable parameters|: (\d+) of \d+ parameters train", log)
trained = int(t.group(1) or t.group(2))
m = re.search(r"^zero3: rank 0 of 2 keeps elements \[0, (\d+)\) of (\d+) and values \[0, (\d+)\) of the f32 parameter "
              r"block's (\d+) \((\d+) frozen\): .* ZeRO's \(\(4 \+ 4 \+ 8\) x (\d+) \+ 4 x (\d+) frozen\) / N( \+ whole)? = "
              r"[0-9.]+ MB, N = 2\)", log, re.M)
assert m, "no zero3 line with the frozen values"
hi, count, phi, pcount, frozen, p, f = map(int, m.groups()[:7])
whole = m.group(8) is not None
print(f"{name}: {p} trained + {f} frozen values of the block's {pcount}, model {total} ({trained} trainable); rank 0 keeps "
      f"[0, {phi}) and gradients [0, {hi}) of {count}{'; codes kept whole' if whole else ''}")
assert p == trained and f == frozen and 0 < phi < pcount and 0 < hi <= count
assert (p + f == total) != whole, "the block holds every parameter unless codes are kept whole"
assert whole == (name == "qlora") and (not whole or "kept whole (other dtypes)" in log)
PY
    done
    # LoRA on 4 ranks, and hybrid (ZeRO-3 in groups of 2 ranks, 2 replicas).
    for how in "4" "4 --shard-group 2"; do
        set -- $how
        name="lora$1${3:-}"
        "${MPI[@]}" -np "$1" "$TRIT" finetune "$W/base32" --data "$W/b.txt" --layers 2 --dim 32 "${FT[@]}" ${2:+"$2" "$3"} \
            --lora r=4,alpha=8,targets=c_attn,c_fc --steps 20 --dist zero3 --out "$W/$name" >"$W/$name.log" 2>&1 ||
            { cat "$W/$name.log"; fail "LoRA under zero3 on $how ranks failed"; }
        compare "$W/onelora" "$W/$name" 1e-6
    done
    # --qat int8 on a model of 2 blocks: DDP's exchange and update, so DDP's losses bit for bit (one
    # process's sums differ in the last bits, which the quantizer's rounding can flip: 2e-4 apart).
    for d in ddp zero3; do
        "${MPI[@]}" -np 2 "$TRIT" train --dist $d "${FLAGS[@]}" --layers 2 --dim 64 --qat int8 --out "$W/qat$d" \
            >"$W/qat$d.log" 2>&1 || { cat "$W/qat$d.log"; fail "--qat int8 under $d failed"; }
    done
    [ "$(losses "$W/qatddp/metrics.jsonl")" = "$(losses "$W/qatzero3/metrics.jsonl")" ] ||
        { diff <(losses "$W/qatddp/metrics.jsonl") <(losses "$W/qatzero3/metrics.jsonl"); fail "qat: zero3 and ddp differ"; }
    # bf16 weights without master copies at C = 40: 80-byte rows pad to 128 in the bf16 block, their
    # 160-byte gradients to 192, so values and gradients sit at different elements.
    for d in zero2 zero3; do
        "${MPI[@]}" -np 2 "$TRIT" train --dist $d "${FLAGS[@]}" --layers 2 --dim 40 --precision bf16 --master-weights off \
            --out "$W/bf$d" >"$W/bf$d.log" 2>&1 || { cat "$W/bf$d.log"; fail "bf16 at C = 40 under $d failed"; }
    done
    [ "$(losses "$W/bfzero2/metrics.jsonl")" = "$(losses "$W/bfzero3/metrics.jsonl")" ] ||
        { diff <(losses "$W/bfzero2/metrics.jsonl") <(losses "$W/bfzero3/metrics.jsonl"); fail "bf16: zero3 and zero2 differ"; }
    ;;
zero3_frozen_memory)
    finetune_bases
    "$TRIT" train --data "$W/a.txt" --layers 4 --dim 64 "${FT[@]}" --steps 2 --out "$W/base4" >"$W/base4.log" 2>&1 ||
        { cat "$W/base4.log"; fail "the base run of 4 blocks failed"; }
    run=("$TRIT" finetune "$W/base4" --data "$W/b.txt" --layers 4 --dim 64 "${FT[@]}" --lora r=4,alpha=8 --steps 1 --warmup 0)
    "${MPI[@]}" -np 2 "${run[@]}" --dist ddp --out "$W/ddp" >"$W/ddp.log" 2>&1 || { cat "$W/ddp.log"; fail "ddp failed"; }
    for n in 2 4; do
        "${MPI[@]}" -np $n "${run[@]}" --dist zero3 --out "$W/m$n" >"$W/m$n.log" 2>&1 || { cat "$W/m$n.log"; fail "zero3 on $n ranks failed"; }
        [ "$(grep -c "^peak RSS of rank [1-9]: [0-9.]* MB in the steps" "$W/m$n.log")" -eq $((n - 1)) ] &&
            grep -q "^peak RSS: " "$W/m$n.log" || { cat "$W/m$n.log"; fail "not every rank's peak RSS on $n ranks"; }
        python3 - "$W/m$n.log" $n "$W/ddp.log" <<'PY' || fail "the zero3 memory report of LoRA on $n ranks is not the formula's (above)"
import re, sys
log, N, ddp_log = open(sys.argv[1]).read(), int(sys.argv[2]), open(sys.argv[3]).read()
rep = lambda text: {k: int(v) for k, v in re.findall(r"^memory: (\w+) +(\d+) bytes", text, re.M)}
mem, ddp = rep(log), rep(ddp_log)
m = re.search(r"^zero3: rank 0 of \d+ keeps elements \[(\d+), (\d+)\) of (\d+) and values \[(\d+), (\d+)\) of the f32 "
              r"parameter block's (\d+) \((\d+) frozen\)", log, re.M)
lo, hi, count, plo, phi, pcount, frozen = map(int, m.groups())
# The layout (reverse of first use, each tensor on a 64-byte line): ln_f, then h.3 .. h.0, each
# its MLP half (ln_2, mlp.*) then its attention half (ln_1, attn.*, c_attn's LoRA A and B with
# it), then wpe and wte, the embeddings' group. C = 64, V = 12 (six words' characters), T = 16, r = 4.
C, V, T, L, r = 64, 12, 16, 4, 4
pad = lambda n: -(-n // 16) * 16
mlp = sum(map(pad, [C, C, 4 * C * C, 4 * C, 4 * C * C, C]))
attn = sum(map(pad, [C, C, 3 * C * C, 3 * C, C * C, C, r * C, 3 * C * r]))
groups = [pad(C) * 2] + [mlp, attn] * L + [pad(T * C) + pad(V * C)]
assert sum(groups) == pcount, (sum(groups), pcount)
assert count == L * (pad(r * C) + pad(3 * C * r)), count  # the gradient block: the adapters only
assert frozen == 2 * C + L * (2 * C + 8 * C * C + 5 * C + 2 * C + 4 * C * C + 4 * C) + (T + V) * C, frozen
start = [sum(groups[:i]) for i in range(len(groups))]
out = lambda i: groups[i] - max(0, min(start[i] + groups[i], phi) - max(start[i], plo))
gathered = out(2 * L + 1) + max(out(i) + out(i + 1) for i in range(2 * L))
# Parameters: 4 bytes a value of the rank's part of the f32 block (frozen ones too), and of the
# most held outside it at once; nothing kept whole (every parameter is f32).
want = {"parameters": 4 * (phi - plo + gathered), "gradients": 4 * (hi - lo)}
ok = all(mem[k] == v for k, v in want.items())
opt_ok = 8 * (hi - lo) - 8 * 16 * 2 * L <= mem["optimizer"] <= 8 * (hi - lo)
# Against DDP's p + g + o: what stays resident between the gathers is about 1/N of it (the frozen
# weights sharded too; kept whole they alone would be 0.93 of DDP's); with the gathered groups
# (here about a quarter of this small model) it is more.
per_rank = mem["parameters"] + mem["gradients"] + mem["optimizer"]
resident = per_rank - 4 * gathered
whole = ddp["parameters"] + ddp["gradients"] + ddp["optimizer"]
limit = {2: 0.55, 4: 0.3}[N]
print(f"N = {N}: part [{plo}, {phi}) of the block's {pcount} values ({frozen} frozen), gradients [{lo}, {hi}) of {count}, "
      f"gathered at most {gathered}; report {mem['parameters']} + {mem['gradients']} + {mem['optimizer']} = {per_rank} "
      f"bytes, expected {want}; of DDP's {whole}: {resident / whole:.3f} resident (limit {limit}), {per_rank / whole:.3f} "
      f"with the gathered")
sys.exit(0 if ok and opt_ok and resident <= limit * whole else 1)
PY
    done
    ;;
zero3_frozen_resume)
    finetune_bases
    for how in "lora --lora r=4,alpha=8" "freeze --freeze h.*.attn.*"; do
        set -- $how
        name=$1
        shift
        run=("${MPI[@]}" -np 2 "$TRIT" finetune "$W/base32" --data "$W/b.txt" --layers 2 --dim 32 "${FT[@]}" "$@" --steps 20 --dist zero3)
        "${run[@]}" --out "$W/full$name" >"$W/full$name.log" 2>&1 || { cat "$W/full$name.log"; fail "$name: the uninterrupted run failed"; }
        "${run[@]}" --out "$W/part$name" --stop-after 10 >"$W/p1$name.log" 2>&1 || { cat "$W/p1$name.log"; fail "$name: the first half failed"; }
        for r in 0 1; do [ -f "$W/part$name/optim_shard.r$r-of-2.step10.bin" ] || fail "$name: no shard file of rank $r at step 10"; done
        "${MPI[@]}" -np 2 "$TRIT" train --resume "$W/part$name" >"$W/p2$name.log" 2>&1 || { cat "$W/p2$name.log"; fail "$name: the resume failed"; }
        resumed_equal "$W/p2$name.log" "$W/full$name" "$W/part$name"
        for r in 0 1; do same_state "$W/full$name/optim_shard.r$r-of-2.step20.bin" "$W/part$name/optim_shard.r$r-of-2.step20.bin"; done
        if [ "$name" = lora ]; then
            cmp "$W/fulllora/adapter_model.safetensors" "$W/partlora/adapter_model.safetensors" || fail "the resumed adapter differs"
        fi
    done
    ;;
zero3_frozen_merge)
    finetune_bases
    run=("$TRIT" finetune "$W/base32" --data "$W/b.txt" --layers 2 --dim 32 "${FT[@]}" --lora r=4,alpha=8 --steps 20)
    for d in ddp zero3; do
        "${MPI[@]}" -np 2 "${run[@]}" --dist $d --out "$W/$d" >"$W/$d.log" 2>&1 || { cat "$W/$d.log"; fail "$d failed"; }
    done
    "$TRIT" merge-shards "$W/zero3" --out "$W/m" >"$W/m.log" 2>&1 || { cat "$W/m.log"; fail "merge-shards failed"; }
    grep -q "with the optimizer shards of its 2 ranks merged" "$W/m.log" || { cat "$W/m.log"; fail "no merge line"; }
    same_state "$W/m/train_state.bin" "$W/ddp/train_state.bin"
    for f in model.safetensors adapter_model.safetensors adapter_config.json; do
        cmp "$W/m/$f" "$W/ddp/$f" || fail "the merged run's $f differs from DDP's"
    done
    "$TRIT" eval --ckpt "$W/m" --batches 2 --batch 4 >"$W/eval.log" 2>&1 || { cat "$W/eval.log"; fail "trit eval of the merged run failed"; }
    grep -Eq "val loss [0-9]+\.[0-9]+" "$W/eval.log" || { cat "$W/eval.log"; fail "trit eval printed no loss"; }
    # Re-sharding: 2 ranks to step 10, merged, resumed on 4.
    "${run[@]}" --out "$W/one" >"$W/one.log" 2>&1 || { cat "$W/one.log"; fail "one process failed"; }
    "${MPI[@]}" -np 2 "${run[@]}" --dist zero3 --out "$W/half" --stop-after 10 >"$W/h.log" 2>&1 ||
        { cat "$W/h.log"; fail "the first half failed"; }
    "$TRIT" merge-shards "$W/half" --out "$W/hm" >"$W/hm.log" 2>&1 || { cat "$W/hm.log"; fail "merging the half failed"; }
    "${MPI[@]}" -np 4 "$TRIT" train --resume "$W/hm" --dist zero3 >"$W/h4.log" 2>&1 ||
        { cat "$W/h4.log"; fail "the merged run did not resume on 4 ranks"; }
    grep -q "resuming .* at step 10" "$W/h4.log" || fail "no resume at step 10"
    compare "$W/one" "$W/hm" 1e-6
    ;;
*) fail "unknown case" ;;
esac
echo "ok ($CASE)"
