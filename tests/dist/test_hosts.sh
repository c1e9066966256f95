#!/usr/bin/env bash
# Training on two hosts, emulated on one machine: two network namespaces joined by a veth pair
# (10.77.0.1/24 and 10.77.0.2/24) stand for the hosts. mpirun runs inside the first with a hostfile
# of the two addresses (one slot each); Open MPI starts its daemon on the second through an rsh
# agent that enters that namespace where ssh would log in. Messages go over TCP only (btl
# tcp,self; no shared memory between the namespaces) on the veth link, and the second host does
# not see the first one's run directory (no shared file system).
# usage test_hosts.sh TRIT CASE, CASE
#   two_hosts   DDP with one rank on each host: losses equal one process's within 1e-6 for 20 steps,
#               each rank ran in its own host's namespace, and the gradients crossed the veth link;
#               ZeRO, which needs the run directory on every host, refused in setup with a message
# Making namespaces needs root (CAP_SYS_ADMIN, CAP_NET_ADMIN) and iproute2: where the machine does
# not allow it the test says so and exits 77, which ctest reports as skipped (never as passed).
# mpirun missing is a failure.
set -u
TRIT=$1
CASE=$2
. "$(dirname "$0")/dist_common.sh"
skip() { echo "SKIP ($CASE): $*"; exit 77; }
[ "$CASE" = two_hosts ] || fail "unknown case"
command -v ip >/dev/null || skip "no ip command (iproute2): cannot make the network namespaces that stand for two hosts"

# Names carry this shell's pid, so that runs in parallel do not collide (interface names: <= 15
# characters).
NA=trit-h$$-a NB=trit-h$$-b VA=trit$$a VB=trit$$b
# remove_ns NS...: ends whatever still runs in the namespaces and removes them (with them the
# veth ends they hold).
remove_ns() {
    for ns in "$@"; do
        pids=$(ip netns pids "$ns" 2>/dev/null)
        [ -z "$pids" ] || kill -9 $pids 2>/dev/null
        ip netns del "$ns" 2>/dev/null
    done
}
# Namespaces left by a run that was killed with SIGKILL (its pid gone) go first.
for ns in $(ip netns list 2>/dev/null | grep -Eo '^trit-h[0-9]+-[ab]\b'); do
    pid=${ns#trit-h}
    pid=${pid%-?}
    kill -0 "$pid" 2>/dev/null || remove_ns "$ns"
done
W=$(mktemp -d)
# On every way out (a failure, a skip, a signal, success) the namespaces go.
teardown() {
    remove_ns "$NA" "$NB"
    ip link del "$VA" 2>/dev/null  # still here if setup stopped before moving it
}
trap 'teardown; rm -rf "$W"' EXIT
trap 'exit 1' INT TERM HUP

ip netns add "$NA" 2>"$W/ip.err" ||
    skip "this machine does not allow network namespaces ($(head -1 "$W/ip.err")): two hosts need root (CAP_SYS_ADMIN and CAP_NET_ADMIN)"
ip netns add "$NB" 2>"$W/ip.err" || skip "a second network namespace was refused: $(head -1 "$W/ip.err")"
ip link add "$VA" type veth peer name "$VB" 2>"$W/ip.err" ||
    skip "no veth pair could be made ($(head -1 "$W/ip.err")): the kernel lacks veth or this user CAP_NET_ADMIN"
ip link set "$VA" netns "$NA" && ip link set "$VB" netns "$NB" &&
    ip -n "$NA" addr add 10.77.0.1/24 dev "$VA" && ip -n "$NB" addr add 10.77.0.2/24 dev "$VB" &&
    ip -n "$NA" link set lo up && ip -n "$NB" link set lo up &&
    ip -n "$NA" link set "$VA" up && ip -n "$NB" link set "$VB" up || fail "setting up the veth link failed"
echo "hosts: namespaces $NA (10.77.0.1, $VA) and $NB (10.77.0.2, $VB)"

# Open MPI calls its rsh agent as ssh: AGENT HOST COMMAND..., the command's words to be run by a
# shell on HOST. Here "logging in" is entering the host's namespace. The second host gets a disk of
# its own under $W/runs (an empty tmpfs in a mount namespace of its own): nothing rank 0 writes
# there reaches rank 1, as without a shared file system.
mkdir "$W/runs"
cat >"$W/agent.sh" <<EOF
#!/bin/sh
host=\$1
shift
[ "\$host" = 10.77.0.2 ] || { echo "agent: no host \$host" >&2; exit 1; }
exec ip netns exec $NB unshare --mount --propagation private sh -c "mount -t tmpfs tmpfs $W/runs && \$*"
EOF
chmod +x "$W/agent.sh"
printf '10.77.0.1 slots=1\n10.77.0.2 slots=1\n' >"$W/hosts"

"$TRIT" train "${FLAGS[@]}" --out "$W/one" >"$W/one.log" 2>&1 || { cat "$W/one.log"; fail "one process failed"; }

tx_bytes() { ip netns exec "$1" cat "/sys/class/net/$2/statistics/tx_bytes"; }
tx0=$(tx_bytes "$NB" "$VB") || fail "no byte counter for $VB"
# Each rank writes the network namespace it runs in and what it sees of $W/runs, then becomes trit
# (exec: the same process).
touch "$W/runs/made-on-host-a"
two_hosts() {
    timeout -k 5 60 ip netns exec "$NA" mpirun --allow-run-as-root --hostfile "$W/hosts" -np 2 \
        --mca plm_rsh_agent "$W/agent.sh" --mca btl tcp,self \
        --mca btl_tcp_if_include 10.77.0.0/24 --mca oob_tcp_if_include 10.77.0.0/24 \
        sh -c 'readlink /proc/self/ns/net >"$0/ns.$OMPI_COMM_WORLD_RANK"; ls "$0/runs" >"$0/disk.$OMPI_COMM_WORLD_RANK"; exec "$@"' "$W" \
        "$TRIT" "$@"
}
two_hosts train --dist ddp --bucket-mb 0.01 "${FLAGS[@]}" --out "$W/runs/two" >"$W/two.log" 2>&1 ||
    { cat "$W/two.log"; fail "mpirun over the two hosts failed (or took over 60 s)"; }
tx1=$(tx_bytes "$NB" "$VB") || fail "no byte counter for $VB"

for r in 0 1; do
    ns=$([ $r = 0 ] && echo "$NA" || echo "$NB")
    want="net:[$(stat -L -c %i "/run/netns/$ns")]"
    got=$(cat "$W/ns.$r" 2>/dev/null)
    [ "$got" = "$want" ] || fail "rank $r ran in network namespace '$got', not $ns's $want"
    echo "rank $r ran in $ns ($got)"
done
grep -qx made-on-host-a "$W/disk.0" || fail "rank 0 does not see its own host's $W/runs"
[ ! -s "$W/disk.1" ] || fail "rank 1 sees host a's files in $W/runs: $(cat "$W/disk.1")"
echo "rank 1 ran with a $W/runs of its own (rank 0's files out of its sight)"
grep -q "x 2 ranks" "$W/two.log" || { cat "$W/two.log"; fail "the header does not show 2 ranks"; }
grep -q "^ddp: 2 ranks" "$W/two.log" || { cat "$W/two.log"; fail "no ddp line in the header"; }
[ "$(grep -c '^done at step 20' "$W/two.log")" -eq 1 ] || fail "rank 1 reports the result too (or nobody does)"
[ "$(losses "$W/one/metrics.jsonl" | sed -n 1p)" = "$(losses "$W/runs/two/metrics.jsonl" | sed -n 1p)" ] ||
    fail "step 1's loss differs: $(losses "$W/one/metrics.jsonl" | sed -n 1p) against $(losses "$W/runs/two/metrics.jsonl" | sed -n 1p)"
compare "$W/one" "$W/runs/two" 1e-6

# An all-reduce of n bytes on 2 ranks sends at least n from each (half in the reduce-scatter, half in
# the all-gather, at best): rank 1's host sends 4 bytes a parameter each step, or more.
python3 - "$W/runs/two/model.safetensors" "$tx0" "$tx1" <<'PY' || fail "too few bytes left host 10.77.0.2 for 20 all-reduces"
import json, math, struct, sys
f = open(sys.argv[1], "rb")
head = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
params = sum(math.prod(v["shape"]) for k, v in head.items() if k != "__metadata__")
sent, least = int(sys.argv[3]) - int(sys.argv[2]), 20 * 4 * params
print(f"10.77.0.2 sent {sent} bytes over the veth link; 20 steps of {params} fp32 gradients are {least}")
sys.exit(0 if sent >= least else 1)
PY

# ZeRO writes every rank's shards into the run directory: rank 1, which does not see it, stops the
# job in setup with a message, before any step.
two_hosts train --dist zero1 "${FLAGS[@]}" --out "$W/runs/zero" >"$W/zero.log" 2>&1 &&
    fail "ZeRO with a run directory rank 1 cannot see was accepted"
grep -q "rank 1 does not see the run directory '$W/runs/zero' that rank 0 made" "$W/zero.log" ||
    { cat "$W/zero.log"; fail "no message from rank 1 about the run directory"; }
grep -q "rank 1 failed in setting up the run" "$W/zero.log" || { cat "$W/zero.log"; fail "rank 0 does not name rank 1"; }
! grep -q "^step" "$W/zero.log" || fail "ZeRO trained before refusing the run directory"
[ ! -e "$W/runs/zero" ] || fail "the refused run left $W/runs/zero behind on host a"
echo "ZeRO without a run directory every host sees: refused in setup, naming rank 1"

teardown
ip netns list | grep -Eq "^($NA|$NB)\b" && fail "the namespaces are still there after teardown"
echo "ok ($CASE)"
