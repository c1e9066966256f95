#!/usr/bin/python3
"""PyTorch reference values for attention, concat, conv2d and the 2-d pools (float64).

Writes tests/reference/fixtures/spatial.bin, read by tests/ops/test_{attention,concat,conv2d,pool}.c.

Layout (little-endian), TRITFIX1 as read by tests/support/tritfix.c:
  header: 8 bytes magic b"TRITFIX1", uint32 version (1), uint32 number of records
  record: uint32 name length, name bytes (ASCII, no terminator),
          uint32 ndim, int64 shape[ndim], float64 data[prod(shape)] (row-major)

Each case <case> stores its inputs, the output <case>.out, the weights <case>.r of the loss
sum(out * r), and the gradients of that loss, <case>.d<input name>.

Run: tests/reference/make_spatial_fixtures.py  (from any directory)
"""
import math

import torch
import torch.nn.functional as F

from tritfix import write_fixture

torch.manual_seed(1234)
torch.set_default_dtype(torch.float64)
records = []


def put(name, t):
    records.append((name, t.detach().contiguous().to(torch.float64)))


def run_case(case, fn, inputs, want_grad):
    """inputs: list of (name, tensor); want_grad: names of inputs that get a gradient record."""
    leaves = {}
    for name, t in inputs:
        leaf = t.clone().requires_grad_(name in want_grad)
        leaves[name] = leaf
        put(f"{case}.{name}", leaf)
    out = fn(**leaves)
    r = torch.rand(out.shape) - 0.5
    (out * r).sum().backward()
    put(f"{case}.out", out)
    put(f"{case}.r", r)
    for name in want_grad:
        put(f"{case}.d{name}", leaves[name].grad)


def attention(q, k, v, n_head):
    B, T, C = q.shape
    hs = C // n_head
    def heads(x):  # (B, T, C) -> (B, H, T, hs)
        return x.view(B, T, n_head, hs).transpose(1, 2)
    att = (heads(q) @ heads(k).transpose(-2, -1)) * (1.0 / math.sqrt(hs))
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
    att = att.masked_fill(~mask, float("-inf"))
    att = F.softmax(att, dim=-1)
    return (att @ heads(v)).transpose(1, 2).contiguous().view(B, T, C)


def u(*shape, scale=1.0):
    return (torch.rand(shape) * 2 - 1) * scale


# attention: the small case of the gradient checks, and a longer one with larger logits
for case, (B, T, C, H, s) in {"attn1": (2, 5, 8, 2, 1.0), "attn2": (1, 9, 12, 3, 4.0)}.items():
    run_case(case, lambda q, k, v: attention(q, k, v, H),
             [("q", u(B, T, C, scale=s)), ("k", u(B, T, C, scale=s)), ("v", u(B, T, C))], ["q", "k", "v"])

# concat along a middle axis and along the last one
run_case("cat1", lambda a, b, c: torch.cat([a, b, c], dim=1),
         [("a", u(2, 3, 4)), ("b", u(2, 1, 4)), ("c", u(2, 2, 4))], ["a", "b", "c"])
run_case("cat2", lambda a, b: torch.cat([a, b], dim=-1), [("a", u(3, 2)), ("b", u(3, 5))], ["a", "b"])

# conv2d: stride 2 padding 1 with bias; stride 1 padding 0, a non-square kernel, no bias
run_case("conv1", lambda x, w, b: F.conv2d(x, w, b, stride=2, padding=1),
         [("x", u(2, 3, 7, 6)), ("w", u(4, 3, 3, 3)), ("b", u(4))], ["x", "w", "b"])
run_case("conv2", lambda x, w: F.conv2d(x, w, None, stride=1, padding=0),
         [("x", u(2, 3, 7, 6)), ("w", u(5, 3, 2, 3))], ["x", "w"])

# pools; "maxtie" has many equal values, so the first-maximum rule decides the gradient
run_case("max1", lambda x: F.max_pool2d(x, 3, 2, 1), [("x", u(2, 3, 7, 6))], ["x"])
run_case("max2", lambda x: F.max_pool2d(x, 2, 2, 0), [("x", u(1, 2, 5, 8))], ["x"])
run_case("maxtie", lambda x: F.max_pool2d(x, 3, 1, 1),
         [("x", torch.randint(0, 3, (1, 2, 6, 5)).to(torch.float64))], ["x"])
run_case("avg1", lambda x: F.avg_pool2d(x, 3, 2, 1, count_include_pad=True), [("x", u(2, 3, 7, 6))], ["x"])
run_case("avg2", lambda x: F.avg_pool2d(x, 2, 2, 0), [("x", u(1, 2, 5, 8))], ["x"])

write_fixture("spatial.bin", records)
