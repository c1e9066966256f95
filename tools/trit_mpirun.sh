#!/usr/bin/env bash
# mpirun for a trit job whose Ctrl-C (or SIGTERM) stops the job after the step with a checkpoint
# and exits 0: usage tools/trit_mpirun.sh MPIRUN-ARGS... (as for mpirun).
#
# Why: Open MPI's mpirun (4.1) treats SIGINT and SIGTERM as an abort: it passes SIGTERM to the
# ranks (trit's ranks then agree to stop, checkpoint and exit 0) but exits 1 itself, and it refuses
# to forward either signal instead (ess_base_forward_signals). It does forward SIGUSR1, which trit
# takes as a stop request too. So mpirun runs here in a session of its own (the terminal's Ctrl-C
# reaches this script only), and this script turns SIGINT and SIGTERM into SIGUSR1 for mpirun,
# then exits with mpirun's status. A second Ctrl-C becomes a second SIGUSR1, which ends the ranks
# at once (as a second Ctrl-C ends one process), and the job exits non-zero.
set -u
command -v mpirun >/dev/null || { echo "trit_mpirun.sh: mpirun not found: install openmpi-bin" >&2; exit 127; }
command -v setsid >/dev/null || { echo "trit_mpirun.sh: setsid not found (util-linux)" >&2; exit 127; }
# setsid execs mpirun in place (this background child is no process group leader), so $! is mpirun.
setsid mpirun "$@" &
pid=$!
trap 'kill -USR1 "$pid" 2>/dev/null' INT TERM
while true; do
    wait "$pid"
    rc=$?
    kill -0 "$pid" 2>/dev/null || break  # else the wait was cut short by a trapped signal
done
exit "$rc"
