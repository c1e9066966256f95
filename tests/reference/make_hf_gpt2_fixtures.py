"""Hugging Face GPT-2 fixtures for tests/train/test_interop_hf.c, written by transformers itself.

  /work/venv/bin/python tests/reference/make_hf_gpt2_fixtures.py --trit build/trit

fixtures/hf_gpt2/ gets:
  fp32/            GPT2LMHeadModel.save_pretrained: config.json, model.safetensors (F32)
  fp32_sharded/    the same weights in model-0000N-of-0000M.safetensors shards with the index
  fp16_sharded/    the same model in F16, saved from its GPT2Model (names without "transformer.")
  bf16/            another config (n_inner 80, layer_norm_epsilon 1e-6, gelu_pytorch_tanh), BF16
  untied/          tie_word_embeddings false with an lm_head.weight of its own (trit refuses it)
  trit_run.safetensors, trit_export/   a small trit run (2 steps of `trit train` on
                   tinyshakespeare) and `trit export --format hf` of it
  logits.bin       TRITFIX1: tokens (2, 16) and each directory's logits from
                   GPT2LMHeadModel.from_pretrained(dir) in fp32 (<name>.logits); trit_export's
                   logits on trit_tokens
Weights are drawn with torch.manual_seed so biases and norm weights are not their zero/one init.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

import torch
from transformers import GPT2Config, GPT2LMHeadModel

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tritfix import write_fixture  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "fixtures", "hf_gpt2")
DATA = os.path.join(HERE, "..", "..", "..", "shared", "data", "tinyshakespeare.txt")


def random_model(seed, **cfg):
    torch.manual_seed(seed)
    m = GPT2LMHeadModel(GPT2Config(**cfg)).eval()
    with torch.no_grad():
        for name, p in m.named_parameters():
            if name.endswith("ln_1.weight") or name.endswith("ln_2.weight") or name.endswith("ln_f.weight"):
                p.copy_(1 + 0.1 * torch.randn_like(p))
            else:
                p.copy_(0.1 * torch.randn_like(p))
    return m


def logits_of(path, tokens):
    m = GPT2LMHeadModel.from_pretrained(path, torch_dtype=torch.float32).eval()
    with torch.no_grad():
        return m(tokens).logits.double()


def save(model, name, **kw):
    path = os.path.join(OUT, name)
    shutil.rmtree(path, ignore_errors=True)
    model.save_pretrained(path, safe_serialization=True, **kw)
    for extra in ("generation_config.json",):  # not part of the model
        if os.path.exists(os.path.join(path, extra)):
            os.remove(os.path.join(path, extra))
    return path


def trit_side(trit, tokens_v):
    """A small trit run and its hf export; returns the export's directory."""
    work = tempfile.mkdtemp()
    run = os.path.join(work, "run")
    subprocess.run([trit, "train", "--data", DATA, "--steps", "2", "--layers", "2", "--heads", "2", "--dim", "32",
                    "--seq", "32", "--batch", "4", "--eval-every", "0", "--sample-tokens", "0", "--out", run],
                   check=True, stdout=subprocess.DEVNULL)
    shutil.copy(os.path.join(run, "model.safetensors"), os.path.join(OUT, "trit_run.safetensors"))
    export = os.path.join(OUT, "trit_export")
    shutil.rmtree(export, ignore_errors=True)
    subprocess.run([trit, "export", run, "--format", "hf", "--out", export], check=True, stdout=subprocess.DEVNULL)
    shutil.rmtree(work)
    return export


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--trit", required=True, help="the trit binary (for the export direction)")
    args = ap.parse_args()
    os.makedirs(OUT, exist_ok=True)
    small = dict(n_layer=2, n_head=2, n_embd=32, n_positions=32, vocab_size=96)
    torch.manual_seed(1)
    tokens = torch.randint(0, 96, (2, 16))
    records = [("tokens", tokens)]

    m = random_model(0, **small)
    records.append(("fp32.logits", logits_of(save(m, "fp32"), tokens)))
    records.append(("fp32_sharded.logits", logits_of(save(m, "fp32_sharded", max_shard_size="40KB"), tokens)))
    half = random_model(0, **small).half()
    records.append(("fp16_sharded.logits", logits_of(save(half.transformer, "fp16_sharded", max_shard_size="20KB"), tokens)))

    other = random_model(2, **small, n_inner=80, layer_norm_epsilon=1e-6, activation_function="gelu_pytorch_tanh")
    records.append(("bf16.logits", logits_of(save(other.to(torch.bfloat16), "bf16"), tokens)))

    untied = random_model(3, **small, tie_word_embeddings=False)
    with torch.no_grad():
        untied.lm_head.weight = torch.nn.Parameter(0.1 * torch.randn(96, 32))
    save(untied, "untied")

    export = trit_side(args.trit, 65)
    torch.manual_seed(4)
    trit_tokens = torch.randint(0, 65, (2, 16))
    records.append(("trit_tokens", trit_tokens))
    records.append(("trit_export.logits", logits_of(export, trit_tokens)))
    write_fixture("hf_gpt2/logits.bin", records)


if __name__ == "__main__":
    main()
