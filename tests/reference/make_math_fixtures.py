#!/usr/bin/python3
"""PyTorch reference values for trit's element-wise ops, reductions, matmul and linear.

Writes tests/reference/fixtures/math.bin, read by tests/ops/test_{binary,unary,reduce,matmul}.c
through tests/support/tritfix.h. Every case runs in float64: its named inputs, the output, an
upstream gradient r, and the gradient of sum(out * r) with respect to every input.

Layout (TRITFIX1, little endian):
  header: 8 bytes magic b"TRITFIX1", u32 version = 1, u32 record count
  record: u32 name length, name (UTF-8, no NUL), u32 ndim, i64 shape[ndim], f64 data[prod(shape)]
Record names are "<case>.<input>" (e.g. "mul_bcast.a"), "<case>.out", "<case>.r" and
"<case>.d<input>" (the input's gradient).
"""

import torch

from tritfix import write_fixture

torch.manual_seed(1234)
torch.set_default_dtype(torch.float64)
records = []


def add(name, t):
    records.append((name, t.detach().contiguous().to(torch.float64)))


def case(name, fn, names, *inputs):
    ins = [x.clone().requires_grad_(True) for x in inputs]
    out = fn(*ins)
    r = torch.rand(out.shape) - 0.5
    (out * r).sum().backward()
    for n, x in zip(names, ins):
        add(f"{name}.{n}", x)
    add(f"{name}.out", out)
    add(f"{name}.r", r)
    for n, x in zip(names, ins):
        add(f"{name}.d{n}", x.grad)


def u(*shape, lo=-1.0, hi=1.0):
    return torch.rand(shape) * (hi - lo) + lo


def away_from_zero(*shape, gap=0.1):
    x = u(*shape)
    return torch.sign(x) * (x.abs() + gap)


def distinct(*shape):
    # Values 0.1 apart in a random order: no ties, so max has one clear winner everywhere.
    n = 1
    for s in shape:
        n *= s
    return (torch.randperm(n).to(torch.float64) * 0.1 - 0.05 * n).reshape(shape)


# ---- binary (numpy broadcasting) ----
case("add_bcast", torch.add, ("a", "b"), u(2, 3, 4), u(3, 1))
case("sub_bcast", torch.sub, ("a", "b"), u(4, 1), u(2, 1, 5))
case("mul_bcast", torch.mul, ("a", "b"), u(2, 3, 4), u(4))
case("div_bcast", torch.div, ("a", "b"), u(3, 1, 4), u(2, 4, lo=0.5, hi=2.0))
case("mul_scalar", torch.mul, ("a", "b"), u(3, 4), u())
case("div_same", torch.div, ("a", "b"), u(3, 5), away_from_zero(3, 5, gap=0.5))

# ---- unary ----
x35 = u(3, 5, lo=-2.0, hi=2.0)
pos35 = u(3, 5, lo=0.5, hi=2.0)
case("scale", lambda x: 1.7 * x, ("x",), x35)
case("add_scalar", lambda x: x - 0.3, ("x",), x35)
case("pow3", lambda x: torch.pow(x, 3.0), ("x",), x35)
case("pow2_5", lambda x: torch.pow(x, 2.5), ("x",), pos35)
case("pow_m1_5", lambda x: torch.pow(x, -1.5), ("x",), pos35)
case("exp", torch.exp, ("x",), x35)
case("ln", torch.log, ("x",), pos35)
case("tanh", torch.tanh, ("x",), x35)
case("sigmoid", torch.sigmoid, ("x",), u(3, 5, lo=-8.0, hi=8.0))
case("relu", torch.relu, ("x",), away_from_zero(3, 5))
case("gelu", lambda x: torch.nn.functional.gelu(x, approximate="tanh"), ("x",), u(4, 6, lo=-7.0, hi=7.0))
case("silu", torch.nn.functional.silu, ("x",), u(3, 5, lo=-8.0, hi=8.0))

# ---- reductions ----
x234 = u(2, 3, 4)
case("sum_02", lambda x: x.sum(dim=(0, 2)), ("x",), x234)
case("sum_all", lambda x: x.sum(), ("x",), x234)
case("sum_1_keep", lambda x: x.sum(dim=1, keepdim=True), ("x",), x234)
case("mean_last_keep", lambda x: x.mean(dim=-1, keepdim=True), ("x",), x234)
case("mean_01", lambda x: x.mean(dim=(0, 1)), ("x",), x234)
case("max_1", lambda x: x.amax(dim=1), ("x",), distinct(2, 3, 4))
case("max_all", lambda x: x.amax(), ("x",), distinct(2, 3, 4))
case("max_02_keep", lambda x: x.amax(dim=(0, 2), keepdim=True), ("x",), distinct(2, 3, 4))

# ---- matmul and linear ----
case("matmul_bcast", torch.matmul, ("a", "b"), u(2, 3, 4), u(4, 5))
case("matmul_tt", lambda a, b: a.transpose(-1, -2) @ b.transpose(-1, -2), ("a", "b"), u(2, 1, 4, 3), u(3, 5, 4))
case("matmul_ta", lambda a, b: a.transpose(-1, -2) @ b, ("a", "b"), u(3, 2, 4), u(3, 2, 5))
case("linear_bias", torch.nn.functional.linear, ("x", "w", "b"), u(2, 3, 4), u(5, 4), u(5))
case("linear_nobias", lambda x, w: torch.nn.functional.linear(x, w), ("x", "w"), u(6, 4), u(3, 4))

write_fixture("math.bin", records)
