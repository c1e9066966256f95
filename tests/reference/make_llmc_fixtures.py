"""llm.c fixtures for tests/train/test_interop_llmc.c, written by llm.c's own code.

  /work/venv/bin/python tests/reference/make_llmc_fixtures.py --llmc /work/ext/llm.c --trit build/trit

(llm.c fetched and its CPU trainer built beside the project: `make train_gpt2` in /work/ext/llm.c.)
fixtures/llmc/ gets:
  model_fp32.bin, model_bf16.bin  llm.c's train_gpt2.py write_model (versions 3 and 5) of its GPT
                  (L 2, H 2, C 32, T 64, V 100 padded to 128) with random weights. write_model's
                  pad_vocab asserts V == 50257 (GPT-2's); that assertion is lifted here, its
                  padding is the same, so the vocabulary fits a small fixture.
  tokenizer.bin   llm.c's write_tokenizer of a 40-token vocabulary (multi-byte, non-UTF-8 tokens)
  trit_export.bin a small trit run (`trit train`, 2 steps, char tokenizer, T 64) exported with
                  `trit export --format llmc`; llm.c's train_gpt2 loaded it and computed the
                  step-0 loss on llmc_tokens (B 4, T 64) recorded in logits.bin
  logits.bin      TRITFIX1: tokens (2, 16); fp32.logits and bf16.logits from llm.c's PyTorch GPT
                  (for bf16: its weights rounded to bf16); llmc_tokens (257) and llmc_step0_loss
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "fixtures", "llmc")
DATA = os.path.join(HERE, "..", "..", "..", "shared", "data", "tinyshakespeare.txt")
sys.path.insert(0, HERE)
from tritfix import write_fixture  # noqa: E402


def pad_vocab(tensor, multiple=128, value=0):
    V, C = tensor.shape
    Vp = ((V + multiple - 1) // multiple) * multiple
    return torch.nn.functional.pad(tensor, (0, 0, 0, Vp - V), value=value)


class SmallVocab:
    """What write_tokenizer asks of a tiktoken Encoding."""

    def __init__(self, tokens, eot):
        self.tokens, self.eot_token, self.max_token_value = tokens, eot, len(tokens) - 1

    def decode_bytes(self, ids):
        return b"".join(self.tokens[i] for i in ids)


def llmc_trainer_loss(trit, train_gpt2):
    """trit run -> llm.c file -> train_gpt2's step-0 loss on 257 tokens of the run's shard."""
    work = tempfile.mkdtemp()
    run = os.path.join(work, "run")
    subprocess.run([trit, "train", "--data", DATA, "--steps", "2", "--layers", "2", "--heads", "2", "--dim", "32",
                    "--seq", "64", "--batch", "4", "--eval-every", "0", "--sample-tokens", "0", "--out", run],
                   check=True, stdout=subprocess.DEVNULL)
    export = os.path.join(OUT, "trit_export.bin")
    subprocess.run([trit, "export", run, "--format", "llmc", "--out", export, "--tokenizer-out",
                    os.path.join(work, "gpt2_tokenizer.bin")], check=True, stdout=subprocess.DEVNULL)
    shard = np.fromfile(os.path.join(run, "val.bin"), dtype=np.uint8)
    header = np.frombuffer(shard[:1024].tobytes(), dtype=np.int32).copy()
    tokens = np.frombuffer(shard[1024:].tobytes(), dtype=np.uint16)[:257]
    header[2] = len(tokens)
    data = os.path.join(work, "dev", "data", "tinyshakespeare")
    os.makedirs(data)
    for split in ("train", "val"):  # one sample each: the trainer's shuffling cannot reorder it
        with open(os.path.join(data, f"tiny_shakespeare_{split}.bin"), "wb") as f:
            f.write(header.tobytes() + tokens.tobytes())
    shutil.copy(export, os.path.join(work, "gpt2_124M.bin"))
    out = subprocess.run([train_gpt2], cwd=work, check=True, capture_output=True, text=True,
                         env=dict(os.environ, OMP_NUM_THREADS="2")).stdout
    loss = float(re.search(r"step 0: train loss ([0-9.]+)", out).group(1))
    shutil.rmtree(work)
    print(f"llm.c train_gpt2 step 0 loss on trit's export: {loss}")
    return tokens.astype(np.int64), loss


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--llmc", required=True, help="llm.c checkout (its train_gpt2.py, and train_gpt2 built)")
    ap.add_argument("--trit", required=True, help="the trit binary")
    args = ap.parse_args()
    sys.path.insert(0, args.llmc)
    import train_gpt2 as llmc  # llm.c's PyTorch reference and its file writers

    llmc.pad_vocab = pad_vocab
    os.makedirs(OUT, exist_ok=True)
    torch.manual_seed(0)
    model = llmc.GPT(llmc.GPTConfig(block_size=64, vocab_size=100, n_layer=2, n_head=2, n_embd=32)).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_((1 if name.endswith(("ln_1.weight", "ln_2.weight", "ln_f.weight")) else 0) + 0.1 * torch.randn_like(p))
    torch.manual_seed(1)
    tokens = torch.randint(0, 100, (2, 16))
    records = [("tokens", tokens)]
    for dtype, tag in (("float32", "fp32"), ("bfloat16", "bf16")):
        llmc.write_model(model, os.path.join(OUT, f"model_{tag}.bin"), dtype)
        m = model if dtype == "float32" else model.to(torch.bfloat16).float()
        with torch.no_grad():
            logits, _ = m(tokens, targets=tokens)
        records.append((f"{tag}.logits", logits.double()))
    vocab = [bytes([b]) for b in b"\n !',.:;?abcdefghijklmnopqrstuvwxyz"][:33]
    vocab += [b"the", b" and", "é".encode(), b"\xff\xfe", b"\x00", "日本".encode(), b"<|endoftext|>"]
    llmc.write_tokenizer(SmallVocab(vocab, len(vocab) - 1), os.path.join(OUT, "tokenizer.bin"))
    llmc_tokens, loss = llmc_trainer_loss(args.trit, os.path.join(args.llmc, "train_gpt2"))
    records += [("llmc_tokens", torch.tensor(llmc_tokens)), ("llmc_step0_loss", torch.tensor([loss]))]
    write_fixture("llmc/logits.bin", records)


if __name__ == "__main__":
    main()
