#!/usr/bin/env python3
"""The PyTorch side of `trit bench`: the same GPT-2 model, optimizer, step and figures.

Model: pre-LN GPT-2 (LayerNorm with bias, GELU tanh MLP of width 4C, learned positions, causal
attention, the head tied to the token embedding), as nanoGPT writes it: attention through
F.scaled_dot_product_attention(is_causal=True) where PyTorch has it (2.0 on; its CPU flash
kernel), else computed the straightforward way (1.13), initialised as
trit does: weights normal(0, 0.02), the residual output projections (attn.c_proj, mlp.c_proj)
normal(0, 0.02 / sqrt(2L)), biases 0, LayerNorm weights 1. Step: random tokens, forward, mean
cross-entropy, backward, clip the global gradient norm to 1.0, AdamW (lr 6e-4, betas 0.9/0.95,
eps 1e-8, weight decay 0.1 on tensors with >= 2 dims, none on the rest).

Figures (as trit bench): ms/step is the median over the timed steps; tokens/s = B T / median;
model FLOP/s = (6 N + 12 L T C) tokens/s with N all parameters (tied head counted once); MFU
against the best torch.mm rate on square n = 1024 and 2048 f32 matrices in the same run; peak RSS
of the process that ran the config (each config runs in its own process).

Precision: --precision bf16 runs each forward and the loss under torch.autocast("cpu",
dtype=torch.bfloat16) with fp32 weights and AdamW state, as mixed-precision training does in
PyTorch; the GEMM peak is then torch.mm on bf16 matrices. (PyTorch 1.13's CPU autocast has no
fp16.)

--compile MODE runs the model (forward and backward; AdamW and the clip stay eager, as nanoGPT
does) through torch.compile with Inductor, its CPU backend, in MODE (default or
max-autotune-no-cudagraphs); the warmup steps take the compilation, so --warmup is at least 2.
Every JSON object names the peer: torch_version, torch_blas (its BLAS and oneDNN, from
torch.__config__.show()), cpu_capability (torch.backends.cpu.get_cpu_capability(), the ISA level
ATen's kernels run at), peer ("eager" or "compile:MODE"), attention, and compile_s (the wall time
of the warmup steps, compilation included). --info prints only those facts.

PEER_NO_ONEDNN=1 in the environment turns PyTorch's oneDNN (mkldnn) backend off, as on CPUs it
does not support for bf16 (no AVX-512): bf16 matmuls then take PyTorch's own GEMM, which is what
an AVX2-only machine runs (bench/compare.sh --level avx2 sets it).

Usage: bench/pytorch_gpt.py [--config baby|small|bpe50k|all] [--steps N] [--warmup N]
                            [--threads N] [--precision fp32|bf16] [--json]
                            [--compile default|max-autotune-no-cudagraphs] [--info]
"""
import argparse
import contextlib
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import time

# Inductor compiles in a pool of worker processes by default, which may still run while the timed
# steps do; compiling in this process keeps the timing to the steps alone.
os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

CONFIGS = {  # name: (L, H, C, T, B, V), as include/trit/bench.h
    "baby": (4, 4, 128, 64, 12, 65),
    "small": (6, 6, 384, 256, 16, 65),
    "bpe50k": (4, 4, 256, 256, 8, 50304),
}


SDPA = hasattr(F, "scaled_dot_product_attention")


def peer_info():
    """What the PyTorch side is: version, BLAS and oneDNN, the ISA level of ATen's kernels."""
    shown = torch.__config__.show()
    blas = []
    for line in shown.splitlines():
        line = line.strip(" -")
        if "Math Kernel Library" in line:
            blas.append("MKL " + line.split("Version")[-1].split("-Product")[0].strip())
        elif line.startswith(("Intel(R) MKL-DNN", "oneDNN", "Intel(R) oneDNN")):
            blas.append("oneDNN " + line.split()[-4 if "Git" in line else -1].lstrip("v"))
    if not any(b.startswith("MKL") for b in blas):
        for part in shown.replace(",", " ").split():
            if part.startswith("BLAS_INFO="):
                blas.insert(0, part.split("=", 1)[1])
    try:
        cap = torch.backends.cpu.get_cpu_capability()
    except AttributeError:  # PyTorch 1.13 has no such call
        cap = os.environ.get("ATEN_CPU_CAPABILITY", "default")
    return {"torch_version": torch.__version__, "torch_blas": ", ".join(blas) or "?",
            "cpu_capability": cap, "attention": "sdpa" if SDPA else "manual"}


class Block(nn.Module):
    def __init__(self, C, H):
        super().__init__()
        self.H = H
        self.ln_1 = nn.LayerNorm(C, eps=1e-5)
        self.c_attn = nn.Linear(C, 3 * C)
        self.attn_proj = nn.Linear(C, C)
        self.ln_2 = nn.LayerNorm(C, eps=1e-5)
        self.c_fc = nn.Linear(C, 4 * C)
        self.mlp_proj = nn.Linear(4 * C, C)

    def attention(self, x, mask):
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        q = q.view(B, T, self.H, C // self.H).transpose(1, 2)  # (B, H, T, hs)
        k = k.view(B, T, self.H, C // self.H).transpose(1, 2)
        v = v.view(B, T, self.H, C // self.H).transpose(1, 2)
        if SDPA:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(mask[:T, :T] == 0, float("-inf"))
            y = F.softmax(att, dim=-1) @ v
        return self.attn_proj(y.transpose(1, 2).contiguous().view(B, T, C))

    def forward(self, x, mask):
        x = x + self.attention(self.ln_1(x), mask)
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, L, H, C, T, V):
        super().__init__()
        self.wte = nn.Embedding(V, C)
        self.wpe = nn.Embedding(T, C)
        self.h = nn.ModuleList([Block(C, H) for _ in range(L)])
        self.ln_f = nn.LayerNorm(C, eps=1e-5)
        self.register_buffer("mask", torch.tril(torch.ones(T, T)), persistent=False)
        for name, p in self.named_parameters():
            if name.endswith("bias"):
                nn.init.zeros_(p)
            elif "ln_" in name:
                nn.init.ones_(p)
            elif name.endswith("proj.weight"):
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * L))
            else:
                nn.init.normal_(p, 0.0, 0.02)

    def forward(self, idx, targets):
        T = idx.size(1)
        x = self.wte(idx) + self.wpe.weight[:T]
        for block in self.h:
            x = block(x, self.mask)
        logits = F.linear(self.ln_f(x), self.wte.weight)  # the head is tied to wte
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


def flops_per_token(L, C, T, n_params):
    return 6.0 * n_params + 12.0 * L * T * C


# PyTorch 1.13's CPU autocast takes bf16 only, so fp16 has no PyTorch side here.
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}


def gemm_peak(precision, reps=5):
    best = 0.0
    for n in (1024, 2048):
        a, b = torch.randn(n, n).to(DTYPES[precision]), torch.randn(n, n).to(DTYPES[precision])
        for r in range(reps + 1):
            t0 = time.perf_counter()
            torch.mm(a, b)
            dt = time.perf_counter() - t0
            if r > 0:  # run 0 warms up
                best = max(best, 2.0 * n ** 3 / dt)
    return best


def peak_rss_bytes():
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def run_config(name, steps, warmup, peak, log, precision, compile_mode):
    L, H, C, T, B, V = CONFIGS[name]
    torch.manual_seed(1)
    model = GPT(L, H, C, T, V)
    n_params = sum(p.numel() for p in model.parameters())
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=6e-4, betas=(0.9, 0.95), eps=1e-8)
    forward = model
    if compile_mode:
        forward = torch.compile(model, mode=compile_mode)
    print(f"{name}: L={L} H={H} C={C} T={T} B={B} V={V}, {n_params} parameters, "
          f"{torch.get_num_threads()} threads{', torch.compile ' + compile_mode if compile_mode else ''}",
          file=log, flush=True)
    times, losses = [], []
    start = time.perf_counter()
    compile_s = 0.0
    for i in range(warmup + steps):
        if i == warmup:
            compile_s = time.perf_counter() - start
        t0 = time.perf_counter()
        idx = torch.randint(0, V, (B, T))
        targets = torch.randint(0, V, (B, T))
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=DTYPES[precision]) if precision != "fp32" else contextlib.nullcontext():
            loss = forward(idx, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
        if i >= warmup:
            times.append((time.perf_counter() - t0) * 1e3)
    ms = statistics.median(times)
    tps = B * T / (ms / 1e3)
    mflops = flops_per_token(L, C, T, n_params) * tps
    print(f"  {steps} steps: {ms:.2f} ms/step median ({statistics.mean(times):.2f} mean, "
          f"{min(times):.2f} min), {tps:.0f} tokens/s, {mflops / 1e9:.2f} GFLOP/s model, "
          f"MFU {100 * mflops / peak if peak > 0 else 0:.1f}%, loss {losses[warmup]:.3f} -> "
          f"{losses[-1]:.3f}", file=log, flush=True)
    return {"config": name, "precision": precision, "ms_per_step": round(ms, 4),
            "tokens_per_s": round(tps, 1), "model_flops_per_s": mflops,
            "mfu": round(mflops / peak, 4) if peak > 0 else 0.0,
            "gemm_peak_flops_per_s": peak, "peak_rss_bytes": peak_rss_bytes(),
            "peer": "compile:" + compile_mode if compile_mode else "eager",
            "compile_s": round(compile_s, 2), **peer_info()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="baby", choices=list(CONFIGS) + ["all"])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--precision", default="fp32", choices=list(DTYPES))
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--compile", default="", choices=["", "default", "max-autotune-no-cudagraphs"])
    ap.add_argument("--info", action="store_true", help="print the peer's facts as JSON and exit")
    ap.add_argument("--gemm-peak", type=float, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.steps < 1 or args.warmup < 0 or args.threads < 1:
        ap.error("need --steps >= 1, --warmup >= 0, --threads >= 1")
    if args.info:
        print(json.dumps(peer_info()))
        return
    if args.compile and not hasattr(torch, "compile"):
        ap.error(f"--compile needs PyTorch 2.x (this is {torch.__version__})")
    if args.compile and args.warmup < 2:
        ap.error("--compile needs --warmup >= 2 (the first steps compile)")
    torch.set_num_threads(args.threads)
    if os.environ.get("PEER_NO_ONEDNN") == "1":
        torch.backends.mkldnn.enabled = False
    log = sys.stderr if args.json else sys.stdout
    peak = args.gemm_peak
    if peak is None:
        peak = gemm_peak(args.precision)
        print(f"{args.precision} GEMM peak (torch.mm): {peak / 1e9:.1f} GFLOP/s "
              "(best of 5 runs at n = 1024 and 2048)", file=log, flush=True)
    names = list(CONFIGS) if args.config == "all" else [args.config]
    if len(names) == 1 and args.gemm_peak is not None:  # a child: run here, JSON to stdout
        print(json.dumps(run_config(names[0], args.steps, args.warmup, peak, log, args.precision,
                                    args.compile)), flush=True)
        return
    rows = []
    for name in names:  # one process per config, so each peak RSS is that config's own
        out = subprocess.run([sys.executable, os.path.abspath(__file__), "--config", name,
                              "--steps", str(args.steps), "--warmup", str(args.warmup),
                              "--threads", str(args.threads), "--gemm-peak", repr(peak),
                              "--precision", args.precision, "--compile", args.compile]
                             + (["--json"] if args.json else []),
                             stdout=subprocess.PIPE, check=True, text=True).stdout
        lines = out.strip().splitlines()
        for extra in lines[:-1]:
            print(extra, file=log)
        row = json.loads(lines[-1])
        rows.append(row)
        if args.json:
            print(json.dumps(row), flush=True)
    if not args.json:
        print(f"\n{'config':<8} {'ms/step':>8} {'tokens/s':>10} {'GFLOP/s':>12} {'MFU':>7} "
              f"{'peak MB':>10}")
        for r in rows:
            print(f"{r['config']:<8} {r['ms_per_step']:8.2f} {r['tokens_per_s']:10.0f} "
                  f"{r['model_flops_per_s'] / 1e9:12.2f} {100 * r['mfu']:6.1f}% "
                  f"{r['peak_rss_bytes'] / 1e6:10.1f}")


if __name__ == "__main__":
    main()
