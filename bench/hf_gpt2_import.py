"""GPT-2-124M-shaped import: transformers writes GPT2LMHeadModel(GPT2Config()) (random weights,
fp32 model.safetensors) and its logits on 2 x 64 random tokens; `trit import hf` (read, check,
transpose, write the run's model.safetensors with fsync) and, for scale, transformers'
GPT2LMHeadModel.from_pretrained (read only) are timed with /usr/bin/time in alternating rounds
(wall, CPU, peak RSS); examples/gpt_logits computes trit's logits of the imported run.

  /work/venv/bin/python bench/hf_gpt2_import.py --build build [--work /tmp/trit-hf124]
"""
import argparse
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import torch
from transformers import GPT2Config, GPT2LMHeadModel


def timed(cmd):
    r = subprocess.run(["/usr/bin/time", "-v"] + cmd, capture_output=True, text=True, check=True)
    field = lambda name: re.search(name + r".*: (\S+)", r.stderr).group(1)
    rss = int(field(r"Maximum resident set size \(kbytes\)"))
    return (f"wall {field(r'Elapsed [(]wall clock[)] time [(]h:mm:ss or m:ss[)]')}, user {field('User time')} s, "
            f"sys {field('System time')} s, peak RSS {rss / 1024:.0f} MiB")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--work", default="/tmp/trit-hf124")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    hf, run = os.path.join(args.work, "hf"), os.path.join(args.work, "run")
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config()).eval()
    model.save_pretrained(hf, safe_serialization=True)
    tokens = torch.randint(0, 50257, (2, 64))
    with torch.no_grad():
        ref = model(tokens).logits.numpy()
    del model
    tokens.numpy().astype("<i4").tofile(os.path.join(args.work, "tokens.bin"))
    print(f"model.safetensors {os.path.getsize(os.path.join(hf, 'model.safetensors')) / 2**20:.0f} MiB")
    hf_load = [sys.executable, "-c", "import sys; from transformers import GPT2LMHeadModel; "
               "GPT2LMHeadModel.from_pretrained(sys.argv[1])", hf]
    for k in range(args.rounds):
        shutil.rmtree(run, ignore_errors=True)
        print(f"round {k + 1}: trit import hf: " + timed([os.path.join(args.build, "trit"), "import", "hf", hf, "--out", run]))
        print(f"round {k + 1}: transformers from_pretrained: " + timed(hf_load))
    out = os.path.join(args.work, "logits.bin")
    subprocess.run([os.path.join(args.build, "gpt_logits"), run, os.path.join(args.work, "tokens.bin"), "2", "64", out],
                   check=True)
    got = np.fromfile(out, dtype="<f4").reshape(ref.shape)
    err = np.abs(got - ref).max() / np.abs(ref).max()
    print(f"logits (2, 64, 50257): max |trit - transformers| / max |transformers| = {err:.3g}; "
          f"max abs diff {np.abs(got - ref).max():.3g}")
    shutil.rmtree(args.work)


if __name__ == "__main__":
    main()
