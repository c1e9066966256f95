"""Writes tests/reference/fixtures/tfevents_scalars.bin with TensorBoard's own code: Event protos
from tensorboard.compat.proto, framed by tensorboard's RecordWriter (masked CRC-32C). The C test
tests/io/test_tfevents.c encodes the same events with trit and compares the bytes.

  /work/venv/bin/python tests/reference/make_tfevents_fixture.py   (needs tensorboard from PyPI)

The events (keep in step with EVENTS in test_tfevents.c):
  1. file version, wall_time 1700000000.25
  2. step 1: loss 2.5, lr 3e-4                          wall_time 1700000001.5
  3. step 0 (left out of the proto): grad_norm -1, zero 0   wall_time 0 (left out)
  4. restart (SessionLog START) at step 11              wall_time 1700000002.0
  5. step 123456789012, a 200-byte tag: 1e-30           wall_time 1700000003.0
  6. step -5: tokens_per_s 12345.67                      wall_time 1700000004.0
"""
import io
import os

from tensorboard.compat.proto import event_pb2, summary_pb2
from tensorboard.summary.writer.record_writer import RecordWriter


def scalars(wall, step, pairs):
    values = [summary_pb2.Summary.Value(tag=t, simple_value=v) for t, v in pairs]
    return event_pb2.Event(wall_time=wall, step=step, summary=summary_pb2.Summary(value=values))


def main():
    events = [
        event_pb2.Event(wall_time=1700000000.25, file_version="brain.Event:2"),
        scalars(1700000001.5, 1, [("loss", 2.5), ("lr", 3e-4)]),
        scalars(0.0, 0, [("grad_norm", -1.0), ("zero", 0.0)]),
        event_pb2.Event(wall_time=1700000002.0, step=11,
                        session_log=event_pb2.SessionLog(status=event_pb2.SessionLog.START)),
        scalars(1700000003.0, 123456789012, [("t" * 200, 1e-30)]),
        scalars(1700000004.0, -5, [("tokens_per_s", 12345.67)]),
    ]
    buf = io.BytesIO()
    writer = RecordWriter(buf)
    for e in events:
        writer.write(e.SerializeToString())
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "tfevents_scalars.bin")
    with open(path + ".tmp", "wb") as f:
        f.write(buf.getvalue())
    os.replace(path + ".tmp", path)
    print(f"wrote {len(events)} events, {len(buf.getvalue())} bytes to {path}")


if __name__ == "__main__":
    main()
