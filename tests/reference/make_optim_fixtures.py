#!/usr/bin/python3
"""Writes tests/reference/fixtures/optim_fixtures.bin: params of torch.optim optimizers after each
of a fixed sequence of gradient steps, for tests/optim/test_parity.c.

Format (little-endian): magic b"TRITOPT1", u32 entry count, then per entry: u32 name length,
name bytes (ASCII), u32 dtype (0 = f32, 1 = f64), u64 element count, the elements.

Entries: init.w (6, 5), init.b (6); grad.w.<s>, grad.b.<s> for steps s = 0..STEPS-1 (the same
gradients for every case); <case>.w.<s>, <case>.b.<s> = params after step s; for the case
adamw_groups also lr.<s> and norm.<s> (f64: the scheduled lr and clip_grad_norm_'s result).
"""
import math
import os
import struct

import torch

STEPS = 8
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "optim_fixtures.bin")

entries = []


def add(name, t, f64=False):
    a = t.detach().reshape(-1).to(torch.float64 if f64 else torch.float32)
    entries.append((name, 1 if f64 else 0, a.tolist()))


def make_grads():
    g = torch.Generator().manual_seed(1234)
    grads = []
    for s in range(STEPS):
        # Scales from 0.05 to 0.6 put the global norm (about 7.4 * scale) on both sides of 1.0.
        scale = 0.05 + 0.55 * ((s * 5) % STEPS) / (STEPS - 1)
        grads.append((torch.randn(6, 5, generator=g) * scale, torch.randn(6, generator=g) * scale))
    return grads


def cosine_lr(s, peak, floor, warmup, total):
    if s < warmup:
        return peak * (s + 1) / warmup
    if s >= total:
        return floor
    ratio = (s - warmup) / (total - warmup)
    return floor + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (peak - floor)


def run(case, make_opt, grads, w0, b0, lr_at=None, scales=(1.0, 1.0), clip=None):
    w = torch.nn.Parameter(w0.clone())
    b = torch.nn.Parameter(b0.clone())
    opt = make_opt(w, b)
    for s in range(STEPS):
        w.grad = grads[s][0].clone()
        b.grad = grads[s][1].clone()
        if clip is not None:
            norm = torch.nn.utils.clip_grad_norm_([w, b], clip)
            add(f"{case}.norm.{s}", torch.tensor([float(norm)]), f64=True)
        if lr_at is not None:
            lr = lr_at(s)
            for group, scale in zip(opt.param_groups, scales):
                group["lr"] = lr * scale
            add(f"{case}.lr.{s}", torch.tensor([lr], dtype=torch.float64), f64=True)
        opt.step()
        add(f"{case}.w.{s}", w)
        add(f"{case}.b.{s}", b)


def main():
    torch.manual_seed(0)
    w0 = torch.randn(6, 5)
    b0 = torch.randn(6) * 0.1
    grads = make_grads()
    add("init.w", w0)
    add("init.b", b0)
    for s, (gw, gb) in enumerate(grads):
        add(f"grad.w.{s}", gw)
        add(f"grad.b.{s}", gb)

    O = torch.optim
    nf = dict(foreach=False)
    run("sgd", lambda w, b: O.SGD([w, b], lr=0.1), grads, w0, b0)
    run("sgd_wd", lambda w, b: O.SGD([w, b], lr=0.1, weight_decay=0.05), grads, w0, b0)
    run("momentum", lambda w, b: O.SGD([w, b], lr=0.1, momentum=0.9), grads, w0, b0)
    run("nesterov", lambda w, b: O.SGD([w, b], lr=0.1, momentum=0.9, nesterov=True,
                                       weight_decay=0.01), grads, w0, b0)
    run("rmsprop", lambda w, b: O.RMSprop([w, b], lr=0.01, alpha=0.99, eps=1e-4, **nf),
        grads, w0, b0)
    run("rmsprop_momentum", lambda w, b: O.RMSprop([w, b], lr=0.01, alpha=0.9, eps=1e-8,
                                                   momentum=0.9, weight_decay=0.01, **nf),
        grads, w0, b0)
    run("adam_wd", lambda w, b: O.Adam([w, b], lr=0.01, betas=(0.9, 0.999), eps=1e-4,
                                       weight_decay=0.01, **nf), grads, w0, b0)
    run("adamw_groups",
        lambda w, b: O.AdamW([{"params": [w], "weight_decay": 0.1},
                              {"params": [b], "weight_decay": 0.0}],
                             lr=0.02, betas=(0.9, 0.95), eps=1e-8, **nf),
        grads, w0, b0, lr_at=lambda s: cosine_lr(s, 0.02, 0.002, 2, 6), scales=(1.0, 0.5),
        clip=1.0)

    with open(OUT + ".tmp", "wb") as f:
        f.write(b"TRITOPT1")
        f.write(struct.pack("<I", len(entries)))
        for name, dtype, vals in entries:
            nb = name.encode("ascii")
            f.write(struct.pack("<I", len(nb)) + nb + struct.pack("<IQ", dtype, len(vals)))
            f.write(struct.pack("<%d%s" % (len(vals), "d" if dtype else "f"), *vals))
    os.replace(OUT + ".tmp", OUT)
    print(f"wrote {len(entries)} entries to {OUT}")


if __name__ == "__main__":
    main()
