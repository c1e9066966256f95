"""The peft side of bench/peft_anchor.sh: LoRA on transformers' GPT-2 with the same base, data,
init and optimizer settings as `trit finetune --lora`.

  peft_anchor.py init  --hf DIR --out SEED [--r 8 --alpha 16 --seed 0]
      peft's LoRA init (A Kaiming-uniform, B zeros) on the base, saved with save_pretrained: the
      seed files trit reads with --lora-init.
  peft_anchor.py train --hf DIR --adapter SEED --data SHARD --steps N --batch B --seq T --lr LR
      AdamW (betas 0.9 / 0.999, eps 1e-8, no weight decay, constant lr, no clipping) on windows
      read as `trit train --order sequential` reads them (window w starts at (w mod W) * T, W =
      (n - 1) // T; step k takes windows k*B .. k*B + B - 1); one JSON line a step.
      --precision bf16: forward and loss under torch.autocast("cpu", torch.bfloat16), the
      mixed-precision recipe PyTorch's CPU side offers (weights, gradients and AdamW in fp32).
      --quantize-base nf4: QLoRA, the base's block matrices loaded through bitsandbytes
      (BitsAndBytesConfig: 4-bit NF4, double-quantized scales, compute in fp32 or bf16), as
      transformers does it; the tied head stays in fp32, as trit's --quantize-base leaves it.
"""
import contextlib
import argparse
import json
import time

import numpy as np
import torch
from peft import LoraConfig, PeftModel, get_peft_model
from transformers import GPT2LMHeadModel

TARGETS = ["c_attn", "c_proj", "c_fc"]  # c_proj: attn.c_proj and mlp.c_proj, as trit's targets


def load_tokens(path):
    raw = np.fromfile(path, dtype=np.uint8)
    header = raw[:1024].view(np.int32)
    n = int(header[2])
    return raw[1024:1024 + 2 * n].view(np.uint16).astype(np.int64)


def batch(tokens, step, B, T):
    W = (len(tokens) - 1) // T
    xs, ys = [], []
    for b in range(B):
        s = ((step * B + b) % W) * T
        xs.append(tokens[s:s + T])
        ys.append(tokens[s + 1:s + T + 1])
    return torch.from_numpy(np.stack(xs)), torch.from_numpy(np.stack(ys))


def init(a):
    torch.manual_seed(a.seed)
    model = GPT2LMHeadModel.from_pretrained(a.hf, torch_dtype=torch.float32)
    cfg = LoraConfig(r=a.r, lora_alpha=a.alpha, lora_dropout=0.0, target_modules=TARGETS, fan_in_fan_out=True)
    get_peft_model(model, cfg).save_pretrained(a.out)


def train(a):
    torch.set_num_threads(a.threads)
    extra = {}
    if a.quantize_base == "nf4":
        from transformers import BitsAndBytesConfig
        compute = torch.bfloat16 if a.precision == "bf16" else torch.float32
        extra = {"quantization_config": BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4",
                                                           bnb_4bit_use_double_quant=True,
                                                           bnb_4bit_compute_dtype=compute),
                 "device_map": "cpu"}
    model = GPT2LMHeadModel.from_pretrained(a.hf, torch_dtype=torch.float32, **extra)
    model = PeftModel.from_pretrained(model, a.adapter, is_trainable=True)
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=a.lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)
    tokens = load_tokens(a.data)
    autocast = (lambda: torch.autocast("cpu", dtype=torch.bfloat16)) if a.precision == "bf16" else contextlib.nullcontext
    for step in range(a.steps):
        x, y = batch(tokens, step, a.batch, a.seq)
        t0 = time.perf_counter()
        with autocast():
            logits = model(input_ids=x).logits
            loss = torch.nn.functional.cross_entropy(logits.view(-1, logits.size(-1)).float(), y.view(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        ms = (time.perf_counter() - t0) * 1e3
        print(json.dumps({"step": step + 1, "loss": loss.item(), "ms": ms}), flush=True)


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    i = sub.add_parser("init")
    i.add_argument("--hf", required=True)
    i.add_argument("--out", required=True)
    i.add_argument("--r", type=int, default=8)
    i.add_argument("--alpha", type=int, default=16)
    i.add_argument("--seed", type=int, default=0)
    t = sub.add_parser("train")
    t.add_argument("--hf", required=True)
    t.add_argument("--adapter", required=True)
    t.add_argument("--data", required=True)
    t.add_argument("--steps", type=int, default=10)
    t.add_argument("--batch", type=int, default=4)
    t.add_argument("--seq", type=int, default=512)
    t.add_argument("--lr", type=float, default=1e-3)
    t.add_argument("--threads", type=int, default=2)
    t.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    t.add_argument("--quantize-base", choices=["none", "nf4"], default="none")
    a = p.parse_args()
    init(a) if a.cmd == "init" else train(a)


if __name__ == "__main__":
    main()
