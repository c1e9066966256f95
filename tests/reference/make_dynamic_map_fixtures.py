#!/usr/bin/python3
"""bitsandbytes' dynamic 8-bit maps, the storage of its 8-bit optimizer states.

Writes tests/reference/fixtures/dynamic_map.bin, read by tests/quant/test_dynamic_map.c:

  dynamic_signed     bitsandbytes.functional.create_dynamic_map(signed=True)   (256 values)
  dynamic_unsigned   bitsandbytes.functional.create_dynamic_map(signed=False)  (256 values)

The values are float32 (stored as float64, exactly). They come from bitsandbytes itself, not a
copy of its algorithm: made with bitsandbytes 0.50.2 and PyTorch 2.15.0 from PyPI in a virtual
environment, on an x86-64 CPU:

  python3 -m venv venv && venv/bin/pip install torch numpy bitsandbytes
  venv/bin/python tests/reference/make_dynamic_map_fixtures.py

The map is built with torch.linspace in float32, so its last bits follow PyTorch's CPU linspace:
PyTorch 2's (one fused multiply-add per element, the first half counted from the start, the
second from the end) gives these values; Debian's PyTorch 1.13 (a vectorized linspace, used with
bitsandbytes 0.42) differs from them in the last bit of 42 signed and 43 unsigned entries.
trit builds the PyTorch 2 values (src/quant/dynamic_map.c).
"""

import bitsandbytes
import bitsandbytes.functional as F
import torch

from tritfix import write_fixture

print(f"bitsandbytes {bitsandbytes.__version__}, torch {torch.__version__}")
signed = F.create_dynamic_map(signed=True)
unsigned = F.create_dynamic_map(signed=False)
assert signed.dtype == torch.float32 and signed.numel() == 256 and unsigned.numel() == 256
write_fixture("dynamic_map.bin", [("dynamic_signed", signed), ("dynamic_unsigned", unsigned)])
