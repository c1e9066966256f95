#!/usr/bin/python3
"""PyTorch reference values for softmax, log_softmax, cross_entropy, mse, embedding, layernorm,
rmsnorm and batchnorm (float64).

Writes tests/reference/fixtures/nn.bin, read by tests/ops/test_{softmax,loss,embedding,norm,batchnorm}.c.

Layout (little-endian):
  header: 8 bytes magic b"TRITFIX1", uint32 version (1), uint32 number of records
  record: uint32 name length, name bytes (ASCII, no terminator),
          uint32 ndim, int64 shape[ndim], float64 data[prod(shape)] (row-major)

Each case <case> stores its inputs (integer indices as float64), the output <case>.out and the
gradients <case>.d<input name>. Cases whose output is not a scalar also store <case>.r: the
gradients are those of the loss sum(out * r). Batchnorm cases store the running statistics
after the step as <case>.running_mean_after and <case>.running_var_after.

Run: tests/reference/make_nn_fixtures.py  (from any directory)
"""

import torch
import torch.nn.functional as F

from tritfix import write_fixture

torch.manual_seed(4321)
torch.set_default_dtype(torch.float64)
records = []


def put(name, t):
    records.append((name, torch.as_tensor(t).detach().contiguous().to(torch.float64)))


def run_case(case, fn, inputs, want_grad, extra=None):
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
        r = torch.rand(out.shape) - 0.5
        (out * r).sum().backward()
        put(f"{case}.r", r)
    put(f"{case}.out", out)
    for name in want_grad:
        put(f"{case}.d{name}", leaves[name].grad)
    if extra:
        extra(case, leaves)


def u(*shape, scale=1.0):
    return (torch.rand(shape) * 2 - 1) * scale


# softmax and log_softmax over the last dim; logits up to +-6 and up to +-30
run_case("softmax1", lambda x: F.softmax(x, dim=-1), [("x", u(3, 4, 7, scale=3.0))], ["x"])
run_case("softmax2", lambda x: F.softmax(x, dim=-1), [("x", u(2, 33, scale=30.0))], ["x"])
run_case("logsoftmax1", lambda x: F.log_softmax(x, dim=-1), [("x", u(5, 9, scale=3.0))], ["x"])
run_case("logsoftmax2", lambda x: F.log_softmax(x, dim=-1), [("x", u(2, 3, 17, scale=30.0))], ["x"])

# cross-entropy (integer targets are stored as float64 and cast back): mean with ignored rows (ignore_index -100), sum with ignore_index 2,
# unbatched logits (V) with a 0-d target
t1 = torch.randint(0, 11, (4, 5))
t1[0, 1] = -100
t1[2, 3] = -100
t1[3, 0] = -100
run_case("ce_mean", lambda logits, target: F.cross_entropy(logits.transpose(1, 2), target.long(), ignore_index=-100,
                                                           reduction="mean"),
         [("logits", u(4, 5, 11, scale=4.0)), ("target", t1.to(torch.float64))], ["logits"])
t2 = torch.randint(0, 8, (6,))
t2[1] = 2
t2[4] = 2
run_case("ce_sum", lambda logits, target: F.cross_entropy(logits, target.long(), ignore_index=2, reduction="sum"),
         [("logits", u(6, 8, scale=4.0)), ("target", t2.to(torch.float64))], ["logits"])
run_case("ce_1d", lambda logits, target: F.cross_entropy(logits, target.long()),
         [("logits", u(7, scale=2.0)), ("target", torch.tensor(3.0))], ["logits"])

# mse: both sides get gradients (mean); a constant target (sum)
run_case("mse_mean", lambda pred, target: F.mse_loss(pred, target, reduction="mean"),
         [("pred", u(3, 5)), ("target", u(3, 5))], ["pred", "target"])
run_case("mse_sum", lambda pred, target: F.mse_loss(pred, target, reduction="sum"),
         [("pred", u(2, 3, 4)), ("target", u(2, 3, 4))], ["pred"])

# embedding with repeated indices
idx = torch.tensor([[1, 4, 4, 0, 9], [4, 1, 7, 7, 7], [2, 2, 3, 8, 4]])
run_case("emb", lambda weight, idx: F.embedding(idx.long(), weight),
         [("weight", u(10, 6)), ("idx", idx.to(torch.float64))], ["weight"])

# layernorm with weight and bias, and without; rmsnorm written by hand (torch 1.13 has none)
run_case("ln_affine", lambda x, w, b: F.layer_norm(x, (16,), w, b, eps=1e-5),
         [("x", u(4, 3, 16, scale=2.0) + 0.7), ("w", u(16) + 1.0), ("b", u(16))], ["x", "w", "b"])
run_case("ln_plain", lambda x: F.layer_norm(x, (8,), None, None, eps=1e-5), [("x", u(5, 8, scale=3.0))], ["x"])


def rmsnorm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


run_case("rms", lambda x, w: rmsnorm(x, w, 1e-6), [("x", u(4, 2, 12, scale=2.0)), ("w", u(12) + 1.0)], ["x", "w"])


# batchnorm: training step with running statistics, eval mode, and a 2-d input
def bn_case(case, x, training, momentum=0.1, eps=1e-5):
    C = x.shape[1]
    rm0, rv0 = u(C, scale=0.5), torch.rand(C) + 0.5
    holder = {}

    def fn(x, w, b, running_mean, running_var):
        holder["rm"], holder["rv"] = running_mean.clone(), running_var.clone()
        return F.batch_norm(x, holder["rm"], holder["rv"], w, b, training=training, momentum=momentum, eps=eps)

    def extra(case, leaves):
        put(f"{case}.running_mean_after", holder["rm"])
        put(f"{case}.running_var_after", holder["rv"])

    run_case(case, fn, [("x", x), ("w", u(C) + 1.0), ("b", u(C)), ("running_mean", rm0), ("running_var", rv0)],
             ["x", "w", "b"], extra)


bn_case("bn_train", u(4, 3, 5, 2, scale=2.0) + 0.3, True)
bn_case("bn_eval", u(3, 4, 6, scale=2.0), False)
bn_case("bn_train2d", u(8, 5, scale=1.5), True, momentum=0.3)

write_fixture("nn.bin", records)
