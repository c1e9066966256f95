#!/usr/bin/python3
"""PyTorch reference for trit's GPT (float32): logits, loss, every parameter gradient and the
losses of 10 AdamW steps, for models whose weights trit wrote.

Inputs: tests/reference/fixtures/gpt_<layout>.safetensors for the layouts
  gpt2             LayerNorm, GELU (tanh form), learned positions, biases
  rms_swiglu_rope  RMSNorm, SwiGLU, rotary positions, no biases
written by the C test program: `TRIT_SOURCE_DIR=<repo> <build>/tests/test_nn_gpt --write-fixtures`
(the model config is in the file's __metadata__; tensor names and layouts are those of
include/trit/nn.h: weights (out, in), c_attn rows q|k|v, SwiGLU c_fc rows gate|up, tied head).

Outputs: tests/reference/fixtures/gpt_<layout>_ref.safetensors with
  idx, targets    I32 (2, T) fixed tokens; targets -1 are ignored by the loss
  logits          F32 (2, T, V)
  loss            F32 (1) mean cross-entropy (ignore_index -1)
  grad.<name>     F32, the gradient of loss for every parameter
  adamw_losses    F32 (11): the loss before each of 10 steps of AdamW (lr 1e-3, betas 0.9/0.95,
                  eps 1e-8, weight decay 0.1 on >= 2-d parameters only) with clip_grad_norm_(1.0)
                  before each step, all on the same batch, then the loss after the last step.

Also tests/reference/fixtures/gpt_<layout>_autocast_bf16.safetensors: the same batch under
torch.autocast("cpu", dtype=torch.bfloat16) (matmuls in bf16 with fp32 accumulation, norms,
softmax and the loss in fp32, as PyTorch's CPU autocast lists them), with fp32 weights:
  logits, loss, grad.<name> (fp32 gradients of the fp32 weights), adamw_losses (as above, each
  forward under autocast).

Safetensors are read and written by hand (struct + json + numpy): 8-byte little-endian header
length, JSON header, data.

RoPE: angles t * theta^(-2i/hs) are computed in float64 and cast to float32 (as trit does), then
y = x cos + rotate_half(x) sin per head.

Run: tests/reference/make_gpt_fixtures.py  (from any directory)
"""
import json
import math
import os
import struct

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
DTYPES = {"F32": np.float32, "I32": np.int32, "F64": np.float64, "I64": np.int64}


def read_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n].decode("utf-8"))
    data = raw[8 + n:]
    meta = header.pop("__metadata__", {})
    tensors = {}
    for name, info in header.items():
        b, e = info["data_offsets"]
        arr = np.frombuffer(data[b:e], dtype=np.dtype(DTYPES[info["dtype"]]).newbyteorder("<"))
        tensors[name] = arr.reshape(info["shape"]).copy()
    return tensors, meta


def write_safetensors(path, tensors):
    header, chunks, off = {}, [], 0
    for name, arr in tensors.items():
        arr = np.ascontiguousarray(arr)
        dt = {np.dtype(np.float32): "F32", np.dtype(np.int32): "I32"}[arr.dtype]
        b = arr.astype(arr.dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": dt, "shape": list(arr.shape), "data_offsets": [off, off + len(b)]}
        chunks.append(b)
        off += len(b)
    hb = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hb += b" " * ((8 - len(hb) % 8) % 8)
    with open(path + ".tmp", "wb") as f:
        f.write(struct.pack("<Q", len(hb)) + hb + b"".join(chunks))
    os.replace(path + ".tmp", path)


class GPT:
    def __init__(self, weights, meta):
        self.p = {k: torch.tensor(v, dtype=torch.float32, requires_grad=True) for k, v in weights.items()}
        self.V, self.T = int(meta["vocab_size"]), int(meta["seq_len"])
        self.L, self.H, self.C = int(meta["n_layer"]), int(meta["n_head"]), int(meta["n_embd"])
        self.hidden = int(meta["mlp_hidden"])
        self.theta, self.eps = float(meta["rope_theta"]), float(meta["norm_eps"])
        self.rms, self.swiglu = meta["norm"] == "rms", meta["mlp"] == "swiglu"
        self.rope, self.bias = meta["pos"] == "rope", meta["bias"] == "true"

    def get(self, name):
        return self.p.get(name)

    def norm(self, x, prefix):
        w, b = self.get(prefix + ".weight"), self.get(prefix + ".bias")
        if self.rms:
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * w
        return F.layer_norm(x, (self.C,), w, b, self.eps)

    def rotate(self, x, T):  # x: (B, H, T, hs)
        hs = self.C // self.H
        inv = np.array([self.theta ** (-2.0 * i / hs) for i in range(hs // 2)], dtype=np.float64)
        ang = np.outer(np.arange(T, dtype=np.float64), inv)
        ang = np.concatenate([ang, ang], axis=1)
        cos = torch.tensor(np.cos(ang), dtype=torch.float32)
        sin = torch.tensor(np.sin(ang), dtype=torch.float32)
        x1, x2 = x.chunk(2, dim=-1)
        return x * cos + torch.cat((-x2, x1), dim=-1) * sin

    def attn(self, x, i):
        B, T, C = x.shape
        H, hs = self.H, C // self.H
        pre = f"h.{i}.attn."
        qkv = F.linear(x, self.get(pre + "c_attn.weight"), self.get(pre + "c_attn.bias"))
        q, k, v = qkv.split(C, dim=2)
        q, k, v = [t.view(B, T, H, hs).transpose(1, 2) for t in (q, k, v)]
        if self.rope:
            q, k = self.rotate(q, T), self.rotate(k, T)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
        mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
        att = F.softmax(att.masked_fill(~mask, float("-inf")), dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return F.linear(y, self.get(pre + "c_proj.weight"), self.get(pre + "c_proj.bias"))

    def mlp(self, x, i):
        pre = f"h.{i}.mlp."
        h = F.linear(x, self.get(pre + "c_fc.weight"), self.get(pre + "c_fc.bias"))
        if self.swiglu:
            gate, up = h.split(self.hidden, dim=-1)
            h = F.silu(gate) * up
        else:
            h = F.gelu(h, approximate="tanh")
        return F.linear(h, self.get(pre + "c_proj.weight"), self.get(pre + "c_proj.bias"))

    def forward(self, idx, targets):
        T = idx.shape[1]
        wte = self.get("wte.weight")
        x = F.embedding(idx, wte)
        if not self.rope:
            x = x + self.get("wpe.weight")[:T]
        for i in range(self.L):
            x = x + self.attn(self.norm(x, f"h.{i}.ln_1"), i)
            x = x + self.mlp(self.norm(x, f"h.{i}.ln_2"), i)
        logits = F.linear(self.norm(x, "ln_f"), wte)
        loss = F.cross_entropy(logits.view(-1, self.V), targets.view(-1), ignore_index=-1)
        return logits, loss


def adamw_losses(weights, meta, idx, targets, autocast):
    model = GPT(weights, meta)
    params = [model.p[n] for n in weights]
    decay = [p for p in params if p.dim() >= 2]
    no_decay = [p for p in params if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=1e-3, betas=(0.9, 0.95), eps=1e-8)
    losses = []
    for step in range(10):
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            _, loss = model.forward(idx, targets)
        losses.append(loss.item())
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        losses.append(model.forward(idx, targets)[1].item())
    return np.array(losses, dtype=np.float32)


def make_autocast(layout, weights, meta, idx, targets, fp32_logits):
    model = GPT(weights, meta)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logits, loss = model.forward(idx, targets)
    loss.backward()
    out = {"logits": logits.float().detach().numpy(), "loss": loss.float().detach().numpy().reshape(1)}
    for name in weights:
        out["grad." + name] = model.p[name].grad.numpy().copy()
    out["adamw_losses"] = adamw_losses(weights, meta, idx, targets, True)
    path = os.path.join(HERE, f"gpt_{layout}_autocast_bf16.safetensors")
    write_safetensors(path, out)
    d = np.abs(out["logits"] - fp32_logits).max() / np.abs(fp32_logits).max()
    print(f"{layout} autocast bf16: loss {out['loss'][0]:.6f}, logits differ from fp32 by {d:.3g} of max; wrote {path}")


def make(layout, seed):
    weights, meta = read_safetensors(os.path.join(HERE, f"gpt_{layout}.safetensors"))
    model = GPT(weights, meta)
    g = torch.Generator().manual_seed(seed)
    B, T = 2, model.T
    idx = torch.randint(0, model.V, (B, T), generator=g)
    targets = torch.randint(0, model.V, (B, T), generator=g)
    targets[0, 3] = -1
    targets[1, 10] = -1
    logits, loss = model.forward(idx, targets)
    loss.backward()
    out = {"idx": idx.numpy().astype(np.int32), "targets": targets.numpy().astype(np.int32),
           "logits": logits.detach().numpy(), "loss": loss.detach().numpy().reshape(1)}
    for name in weights:
        out["grad." + name] = model.p[name].grad.numpy().copy()

    # Fresh copy of the weights for training.
    out["adamw_losses"] = adamw_losses(weights, meta, idx, targets, False)
    losses = out["adamw_losses"]
    path = os.path.join(HERE, f"gpt_{layout}_ref.safetensors")
    write_safetensors(path, out)
    print(f"{layout}: loss {losses[0]:.6f} -> {losses[-1]:.6f}; wrote {path}")
    make_autocast(layout, weights, meta, idx, targets, out["logits"])


torch.set_num_threads(1)
make("gpt2", 11)
make("rms_swiglu_rope", 12)
