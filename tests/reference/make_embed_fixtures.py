#!/usr/bin/python3
"""PyTorch reference values for sentence-embedding pooling and losses, and the Huber loss (float64).

Writes tests/reference/fixtures/embed.bin, read by tests/ops/test_{seq_pool,embed_loss,loss}.c.

Each case <case> stores its inputs (masks, lengths and targets as float64), the output <case>.out
and the gradients <case>.d<input name>. Cases whose output is not a scalar also store <case>.r:
the gradients are those of the loss sum(out * r). Inputs are rounded to float32 first, so an f32
graph sees the same values and differs from the reference only by its own arithmetic.

  mean pooling          (x * mask).sum(1) / mask.sum(1)  (sentence-transformers' mean pooling)
  last-token pooling    x[b, last t with mask[b, t] = 1]
  info_nce              F.cross_entropy(F.normalize(a) @ F.normalize(p).T / tau, arange(B))
                        (sentence-transformers' MultipleNegativesRankingLoss with scale 1 / tau)
  triplet               F.triplet_margin_loss(a, p, n, margin, p=2, eps=1e-6)
  cosine                F.cosine_embedding_loss(x1, x2, y, margin)
  huber                 F.huber_loss(pred, target, delta=delta)

Hinge cases are drawn so that no row's hinge argument lies within 1e-3 of its kink.

Run: tests/reference/make_embed_fixtures.py  (from any directory)
"""

import torch
import torch.nn.functional as F

from tritfix import write_fixture

torch.manual_seed(2525)
torch.set_default_dtype(torch.float64)
records = []


def put(name, t):
    records.append((name, torch.as_tensor(t).detach().contiguous().to(torch.float64)))


def f32(t):
    return t.float().double()


def u(*shape, scale=1.0):
    return f32((torch.rand(shape) * 2 - 1) * scale)


def run_case(case, fn, inputs, want_grad):
    """inputs: list of (name, tensor); want_grad: names of inputs that get a gradient record."""
    leaves = {}
    for name, t in inputs:
        leaf = t.clone()
        if name in want_grad:
            leaf.requires_grad_(True)
        leaves[name] = leaf
        put(f"{case}.{name}", leaf)
    out = fn(**leaves)
    if out.dim() == 0:
        out.backward()
    else:
        r = f32(torch.rand(out.shape) - 0.5)
        (out * r).sum().backward()
        put(f"{case}.r", r)
    put(f"{case}.out", out)
    for name in want_grad:
        put(f"{case}.d{name}", leaves[name].grad)


# ---- pooling: x (3, 5, 4); row 0 full, row 1 right-padded, row 2 left-padded -----------------
mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 0, 0, 0], [0, 0, 1, 1, 1]], dtype=torch.float64)
lengths = torch.tensor([5, 2, 4], dtype=torch.float64)
len_mask = (torch.arange(5)[None, :] < lengths[:, None]).double()


def mean_pool(x, mask):
    m = mask[:, :, None]
    return (x * m).sum(1) / m.sum(1)


def last_pool(x, mask):
    last = torch.tensor([int(torch.nonzero(row).max()) for row in mask])
    return x[torch.arange(x.shape[0]), last]


x = u(3, 5, 4, scale=2.0)
run_case("mean_mask", mean_pool, [("x", x), ("mask", mask)], ["x"])
run_case("mean_len", lambda x, lengths: mean_pool(x, len_mask), [("x", x), ("lengths", lengths)], ["x"])
run_case("last_mask", last_pool, [("x", x), ("mask", mask)], ["x"])
run_case("last_len", lambda x, lengths: last_pool(x, len_mask), [("x", x), ("lengths", lengths)], ["x"])


# ---- InfoNCE -----------------------------------------------------------------------------
def info_nce(a, p, tau, reduction):
    s = F.normalize(a, dim=-1) @ F.normalize(p, dim=-1).T / tau
    return F.cross_entropy(s, torch.arange(a.shape[0]), reduction=reduction)


# 4 anchors, 4 positives and 2 hard negatives, tau 0.05 (MNRL's scale 20); positives near
# their anchors, so the loss is neither trivial nor saturated
a = u(4, 6)
p = f32(torch.cat([a + 0.6 * u(4, 6), u(2, 6)]))
run_case("nce_hard", lambda a, p: info_nce(a, p, 0.05, "mean"), [("a", a), ("p", p)], ["a", "p"])
# a zero anchor: scored 0 against every candidate; its gradient goes through the clamped norm
a0 = u(3, 4)
a0[0] = 0
run_case("nce_zero", lambda a, p: info_nce(a, p, 0.5, "mean"), [("a", a0), ("p", u(5, 4))], ["a", "p"])
run_case("nce_sum", lambda a, p: info_nce(a, p, 0.7, "sum"), [("a", u(5, 3, scale=3.0)), ("p", u(5, 3))], ["a", "p"])


# ---- triplet margin ------------------------------------------------------------------------
def hinge_far_from_kink(h):
    return bool((h.abs() > 1e-3).all())


def triplet_inputs(shape, margin):
    while True:
        a, p, n = u(*shape), u(*shape), u(*shape)
        h = F.pairwise_distance(a, p, eps=1e-6) - F.pairwise_distance(a, n, eps=1e-6) + margin
        if hinge_far_from_kink(h) and bool((h > 0).any()) and bool((h < 0).any()):
            return [("a", a), ("p", p), ("n", n)]


run_case("triplet_mean", lambda a, p, n: F.triplet_margin_loss(a, p, n, margin=1.0, p=2, eps=1e-6),
         triplet_inputs((6, 7), 1.0), ["a", "p", "n"])
run_case("triplet_sum", lambda a, p, n: F.triplet_margin_loss(a, p, n, margin=0.3, p=2, eps=1e-6, reduction="sum"),
         triplet_inputs((5, 4), 0.3), ["a", "p", "n"])


# ---- cosine embedding ----------------------------------------------------------------------
def cosine_inputs(rows, C, margin, y):
    while True:
        x1, x2 = u(rows, C), u(rows, C)
        h = F.cosine_similarity(x1, x2, eps=0) - margin
        neg = y == -1
        if hinge_far_from_kink(h[neg]) and bool((h[neg] > 0).any()) and bool((h[neg] < 0).any()):
            return [("x1", x1), ("x2", x2), ("y", y)]


y1 = torch.tensor([1, -1, -1, 1, -1, -1, 1, -1], dtype=torch.float64)
y2 = torch.tensor([-1, -1, 1, -1, -1, 1], dtype=torch.float64)
run_case("cos_mean", lambda x1, x2, y: F.cosine_embedding_loss(x1, x2, y, margin=0.2),
         cosine_inputs(8, 5, 0.2, y1), ["x1", "x2"])
run_case("cos_sum", lambda x1, x2, y: F.cosine_embedding_loss(x1, x2, y, margin=-0.1, reduction="sum"),
         cosine_inputs(6, 3, -0.1, y2), ["x1", "x2"])

# ---- Huber: differences on both sides of delta ---------------------------------------------
run_case("huber_mean", lambda pred, target: F.huber_loss(pred, target, delta=1.0),
         [("pred", u(4, 5, scale=2.0)), ("target", u(4, 5, scale=2.0))], ["pred", "target"])
run_case("huber_sum", lambda pred, target: F.huber_loss(pred, target, delta=0.5, reduction="sum"),
         [("pred", u(3, 2, 4)), ("target", u(3, 2, 4))], ["pred"])

write_fixture("embed.bin", records)
