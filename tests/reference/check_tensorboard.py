"""Checks a `trit train --tensorboard DIR` run with TensorBoard's own reader: every number of
RUN/metrics.jsonl (null aside) is a scalar of the same tag at the same step in DIR, equal to the
float32 of the printed value, and DIR holds no other scalar values (what a resumed run's restart
event drops is gone).

  python check_tensorboard.py RUN_DIR TB_DIR      (needs tensorboard; exits 1 on a mismatch)
"""
import json
import sys

import numpy as np
from tensorboard.backend.event_processing import event_accumulator


def main(run_dir, tb_dir):
    acc = event_accumulator.EventAccumulator(tb_dir, size_guidance={event_accumulator.SCALARS: 0})
    acc.Reload()
    tb = {}
    for tag in acc.Tags()["scalars"]:
        for ev in acc.Scalars(tag):
            if (tag, ev.step) in tb:
                raise SystemExit(f"tag {tag} has two values at step {ev.step}")
            tb[(tag, ev.step)] = ev.value
    want = {}
    with open(f"{run_dir}/metrics.jsonl") as f:
        for line in f:
            row = json.loads(line)
            for key, value in row.items():
                if key != "step" and value is not None:
                    want[(key, row["step"])] = value
    errors = []
    for (tag, step), value in sorted(want.items()):
        if (tag, step) not in tb:
            errors.append(f"step {step} {tag}: missing from the event files")
        elif np.float32(tb[(tag, step)]) != np.float32(value):
            errors.append(f"step {step} {tag}: event {tb[(tag, step)]!r}, metrics.jsonl {value!r}")
    extra = sorted(set(tb) - set(want))
    if extra:
        errors.append(f"{len(extra)} scalars not in metrics.jsonl, e.g. {extra[:3]}")
    if errors:
        print("\n".join(errors[:20]))
        return 1
    tags = sorted({t for t, _ in want})
    print(f"check_tensorboard: {len(want)} values of {len(tags)} tags ({', '.join(tags)}) equal metrics.jsonl")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    sys.exit(main(sys.argv[1], sys.argv[2]))
