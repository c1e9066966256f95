#!/usr/bin/env python3
"""PyTorch DDP on the same model as bench/pytorch_gpt.py: N ranks x 1 thread over gloo.

Each rank is a process (torch.multiprocessing), one thread each, the model wrapped in
torch.nn.parallel.DistributedDataParallel (gloo backend, 25 MB buckets, its all-reduce overlapped
with backward as PyTorch does it). A step: each rank one micro-batch of B x T random tokens
(the global batch N B T, as `trit train --dist ddp` with --total-batch-tokens N B T), forward,
mean cross-entropy, backward, the global gradient norm clipped to 1.0, AdamW (lr 6e-4, betas
0.9/0.95, eps 1e-8, weight decay 0.1 on >= 2-D tensors). Rank 0 times each step after a
barrier; ms/step is the median over the timed steps and tokens/s = N B T / median.

Usage: bench/ddp_pytorch.py [--config baby|small] [--ranks 2] [--steps N] [--warmup N] [--json]
"""
import argparse
import datetime
import json
import os
import statistics
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pytorch_gpt import CONFIGS, GPT  # noqa: E402


def rank_main(rank, args, port, out):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=args.ranks,
                            timeout=datetime.timedelta(seconds=120))
    L, H, C, T, B, V = CONFIGS[args.config]
    torch.manual_seed(1)
    model = GPT(L, H, C, T, V)
    ddp = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=25)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=6e-4, betas=(0.9, 0.95), eps=1e-8)
    gen = torch.Generator().manual_seed(1000 + rank)
    times, losses = [], []
    for i in range(args.warmup + args.steps):
        dist.barrier()
        t0 = time.perf_counter()
        idx = torch.randint(0, V, (B, T), generator=gen)
        targets = torch.randint(0, V, (B, T), generator=gen)
        opt.zero_grad(set_to_none=True)
        loss = ddp(idx, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
        if i >= args.warmup:
            times.append((time.perf_counter() - t0) * 1e3)
    if rank == 0:
        ms = statistics.median(times)
        out.put({"config": args.config, "ranks": args.ranks, "threads_per_rank": 1, "ms_per_step": round(ms, 3),
                 "tokens_per_s": round(args.ranks * B * T / (ms / 1e3), 1), "backend": "gloo",
                 "torch_version": torch.__version__, "loss_first": losses[args.warmup], "loss_last": losses[-1]})
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="baby", choices=["baby", "small"])
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--port", type=int, default=29512)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.ranks < 1 or args.steps < 1 or args.warmup < 0:
        ap.error("need --ranks >= 1, --steps >= 1, --warmup >= 0")
    ctx = mp.get_context("spawn")
    out = ctx.SimpleQueue()
    mp.start_processes(rank_main, args=(args, args.port, out), nprocs=args.ranks, join=True, start_method="spawn")
    row = out.get()
    if args.json:
        print(json.dumps(row))
    else:
        print(f"PyTorch {row['torch_version']} DDP (gloo) {args.config}: {args.ranks} ranks x 1 thread, "
              f"{row['ms_per_step']:.2f} ms/step, {row['tokens_per_s']:.0f} tokens/s, "
              f"loss {row['loss_first']:.3f} -> {row['loss_last']:.3f}")


if __name__ == "__main__":
    main()
