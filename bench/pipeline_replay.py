#!/usr/bin/env python3
"""Where a pipeline step's idle time comes from.

Reads the per-action trace that `TRIT_LOG=debug mpirun ... trit train --dist pipeline` writes to
stderr ("pipeline: stage S F3 busy X wait Y ms" for each forward or backward, "pipeline: stage S
span Z ms" at each step's end) and, for each step, replays the stages' measured compute times
through the schedule's dependencies (a stage's forward of micro-batch m after the previous
stage's; a backward after the next stage's) with messages taking no time:

- replayed span against the measured span: what the messages and the schedule's bookkeeping
  cost;
- the bubble (the stages' mean idle share) measured; replayed; replayed with every action taking
  its step's mean for its stage and kind (the stages' imbalance kept, the variation of single
  actions gone); and with every stage taking the mean over all stages (which must give the
  formula (P - 1) / (M + P - 1): the replay's check). From the last to the first, the idle that
  the stages' imbalance, the variation of the compute times and the messages each add.

    python3 bench/pipeline_replay.py TRACE [--skip N]   (N first steps left out, default a quarter)
"""
import re
import statistics
import sys

ACTION = re.compile(r"pipeline: stage (\d+) ([FB])(\d+) busy ([0-9.]+) wait ([0-9.]+) ms")
SPAN = re.compile(r"pipeline: stage (\d+) span ([0-9.]+) ms")


def read(path):
    """Per stage, the list of steps; each step the ordered actions (kind, m, busy) and its span."""
    steps, current = {}, {}
    for line in open(path, errors="replace"):
        a = ACTION.search(line)
        if a:
            current.setdefault(int(a[1]), []).append((a[2], int(a[3]), float(a[4])))
            continue
        s = SPAN.search(line)
        if s:
            st = int(s[1])
            steps.setdefault(st, []).append((current.pop(st, []), float(s[2])))
    return steps


def replay(orders):
    """orders[s]: stage s's actions (kind, m, ms) in its order. Returns (span, mean busy)."""
    P = len(orders)
    end, clock, pos = {}, [0.0] * P, [0] * P
    while any(pos[s] < len(orders[s]) for s in range(P)):
        moved = False
        for s in range(P):
            while pos[s] < len(orders[s]):
                kind, m, ms = orders[s][pos[s]]
                dep = (s - 1, "F", m) if kind == "F" and s > 0 else (s + 1, "B", m) if kind == "B" and s < P - 1 else None
                if dep and dep not in end:
                    break
                clock[s] = max(clock[s], end[dep] if dep else 0.0) + ms
                end[(s, kind, m)] = clock[s]
                pos[s] += 1
                moved = True
        if not moved:
            sys.exit("pipeline_replay.py: the trace's orders deadlock (not one step of one run?)")
    return max(clock), sum(ms for o in orders for _, _, ms in o) / P


def evened(orders, across_stages=False):
    """Each action's time replaced by its kind's mean in the step: on its stage, or on all."""
    def means(acts):
        return {k: statistics.mean(ms for kk, _, ms in acts if kk == k) for k in "FB" if any(kk == k for kk, _, _ in acts)}
    every = means([a for o in orders for a in o])
    return [[(k, m, (every if across_stages else means(o))[k]) for k, m, _ in o] for o in orders]


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    steps = read(sys.argv[1])
    P = len(steps)
    if P < 2 or len({len(v) for v in steps.values()}) != 1:
        sys.exit("pipeline_replay.py: no complete trace of 2 or more stages in %s" % sys.argv[1])
    n = len(steps[0])
    skip = int(sys.argv[sys.argv.index("--skip") + 1]) if "--skip" in sys.argv else n // 4
    rows = []
    for i in range(skip, n):
        orders = [steps[s][i][0] for s in range(P)]
        measured = max(steps[s][i][1] for s in range(P))
        span, busy = replay(orders)
        stage_span, stage_busy = replay(evened(orders))
        even_span, even_busy = replay(evened(orders, True))
        rows.append((measured, span, 1 - busy / measured, 1 - busy / span, 1 - stage_busy / stage_span,
                     1 - even_busy / even_span))
    med = lambda j: statistics.median(r[j] for r in rows)
    print(f"{P} stages, {n - skip} steps (first {skip} left out)")
    for s in range(P):
        line = []
        for k, name in (("F", "forward"), ("B", "backward")):
            per = sorted(ms for i in range(skip, n) for kk, _, ms in steps[s][i][0] if kk == k)
            if per:
                q = lambda f: per[min(len(per) - 1, int(f * len(per)))]
                line.append(f"{name} median {q(0.5):.2f} ms (middle 80%: {q(0.1):.2f}-{q(0.9):.2f})")
        print(f"stage {s}: " + ", ".join(line))
    print(f"span: measured {med(0):.1f} ms, replayed without message time {med(1):.1f} ms "
          f"(messages and bookkeeping {100 * (med(0) / med(1) - 1):+.1f}%)")
    print(f"bubble: measured {med(2):.3f}; replayed {med(3):.3f}; each stage's actions at their means "
          f"{med(4):.3f}; every stage at the same means {med(5):.3f} (the formula's assumption)")


if __name__ == "__main__":
    main()
