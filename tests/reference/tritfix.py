"""Writes TRITFIX1 fixture files, read by tests/support/tritfix.c.

Layout (little endian):
  header: 8 bytes magic b"TRITFIX1", u32 version = 1, u32 record count
  record: u32 name length, name (ASCII, no NUL), u32 ndim, i64 shape[ndim],
          f64 data[prod(shape)] (row-major)
"""
import os
import struct

import torch


def write_fixture(filename, records):
    """records: list of (name, tensor); writes tests/reference/fixtures/<filename> atomically."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", filename)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path + ".tmp", "wb") as f:
        f.write(b"TRITFIX1" + struct.pack("<II", 1, len(records)))
        for name, t in records:
            t = torch.as_tensor(t).detach().contiguous().to(torch.float64)
            nb = name.encode("ascii")
            f.write(struct.pack("<I", len(nb)) + nb + struct.pack("<I", t.dim()))
            f.write(struct.pack(f"<{t.dim()}q", *t.shape))
            f.write(t.numpy().astype("<f8").tobytes())
    os.replace(path + ".tmp", path)
    print(f"wrote {len(records)} records to {path}")
