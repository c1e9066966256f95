#!/usr/bin/python3
"""PyTorch reference values for rotary position embedding (rotate-half form) and SwiGLU (float64).

Writes tests/reference/fixtures/gpt_ops.bin, read by tests/ops/test_rope.c and tests/ops/test_swiglu.c.

Layout (little-endian), the same as nn.bin:
  header: 8 bytes magic b"TRITFIX1", uint32 version (1), uint32 number of records
  record: uint32 name length, name bytes (ASCII, no terminator),
          uint32 ndim, int64 shape[ndim], float64 data[prod(shape)] (row-major)

Each case <case> stores its inputs, <case>.r, the output <case>.out and the gradients
<case>.d<input> of the loss sum(out * r).

RoPE follows the GPT-NeoX / Llama convention: per head of size hs, inv_freq[i] = theta^(-2i/hs)
for i < hs/2, angles = t * inv_freq repeated for both halves, y = x cos + rotate_half(x) sin with
rotate_half([x1, x2]) = [-x2, x1].

Run: tests/reference/make_gpt_ops_fixtures.py  (from any directory)
"""

import torch
import torch.nn.functional as F

from tritfix import write_fixture

torch.manual_seed(2024)
torch.set_default_dtype(torch.float64)
records = []


def put(name, t):
    records.append((name, torch.as_tensor(t).detach().contiguous().to(torch.float64)))


def run_case(case, fn, inputs):
    leaves = {}
    for name, t in inputs:
        leaf = t.clone().requires_grad_(True)
        leaves[name] = leaf
        put(f"{case}.{name}", leaf)
    out = fn(**leaves)
    r = torch.rand(out.shape) - 0.5
    (out * r).sum().backward()
    put(f"{case}.r", r)
    put(f"{case}.out", out)
    for name in leaves:
        put(f"{case}.d{name}", leaves[name].grad)


def u(*shape, scale=1.0):
    return (torch.rand(shape) * 2 - 1) * scale


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def rope(x, n_head, theta):
    B, T, C = x.shape
    hs = C // n_head
    inv_freq = 1.0 / (theta ** (torch.arange(0, hs, 2, dtype=torch.float64) / hs))
    freqs = torch.outer(torch.arange(T, dtype=torch.float64), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)  # (T, hs)
    xh = x.view(B, T, n_head, hs)
    cos, sin = emb.cos()[None, :, None, :], emb.sin()[None, :, None, :]
    return (xh * cos + rotate_half(xh) * sin).reshape(B, T, C)


run_case("rope1", lambda x: rope(x, 2, 10000.0), [("x", u(2, 5, 8))])
run_case("rope2", lambda x: rope(x, 3, 100.0), [("x", u(1, 7, 12, scale=2.0))])
run_case("rope3", lambda x: rope(x, 1, 10000.0), [("x", u(2, 33, 6))])

run_case("swiglu1", lambda gate, up: F.silu(gate) * up, [("gate", u(3, 4, 6, scale=3.0)), ("up", u(3, 4, 6))])
run_case("swiglu2", lambda gate, up: F.silu(gate) * up, [("gate", u(2, 9, scale=40.0)), ("up", u(2, 9, scale=2.0))])

write_fixture("gpt_ops.bin", records)
