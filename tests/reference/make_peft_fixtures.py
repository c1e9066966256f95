"""LoRA adapters between trit and peft: writes tests/reference/fixtures/peft_lora/.

Trains a tiny GPT-2-shaped base with the trit binary, then a LoRA adapter on it (`trit train
--init-from BASE --lora ...`), and loads trit's adapter files with peft onto transformers'
GPT2LMHeadModel holding the same base weights. Writes:
  base.safetensors        the trit base (model.safetensors of the base run)
  adapter_trit/           adapter_model.safetensors + adapter_config.json as trit wrote them
  adapter_peft/           the same adapter saved again by peft's save_pretrained (peft's layout)
  logits.safetensors      "tokens" (T,) I32 and "logits" (T, V) F32: peft's outputs
tests/train/test_peft.c checks trit's logits with the adapter against peft's, and trit's files
against peft's names, shapes and config.

usage: /work/venv/bin/python tests/reference/make_peft_fixtures.py path/to/trit [text file]
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

import torch
from peft import PeftModel
from safetensors import safe_open
from safetensors.torch import load_file, save_file
from transformers import GPT2Config, GPT2LMHeadModel

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "fixtures", "peft_lora")
LORA = "r=4,alpha=8,dropout=0.05,targets=c_attn,attn.c_proj,c_fc,mlp.c_proj"
TOKENS = [(7 * t + 3) % 50 for t in range(16)]


def trit(binary, cwd, *args):
    subprocess.run([binary, *args], check=True, stdout=subprocess.DEVNULL, cwd=cwd)


def gpt2_from_trit(path):
    """transformers' GPT2 with the weights of a trit model.safetensors (Conv1D takes W^T)."""
    with safe_open(path, "pt") as f:
        cfg = json.loads(f.metadata()["config"])
    w = load_file(path)
    hf = GPT2Config(vocab_size=cfg["vocab_size"], n_positions=cfg["seq_len"], n_embd=cfg["n_embd"],
                    n_layer=cfg["n_layer"], n_head=cfg["n_head"], activation_function="gelu_new",
                    resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, layer_norm_epsilon=cfg["norm_eps"],
                    bos_token_id=0, eos_token_id=0)
    model = GPT2LMHeadModel(hf)
    sd = {}
    for name, t in w.items():
        conv = name.endswith(".weight") and t.dim() == 2 and name.startswith("h.")
        sd["transformer." + name] = t.t().contiguous() if conv else t
    sd["lm_head.weight"] = w["wte.weight"]
    missing, unexpected = model.load_state_dict(sd, strict=False)
    assert not unexpected and all(k.endswith("attn.bias") or k.endswith("masked_bias") for k in missing), (missing, unexpected)
    return model.eval()


def main():
    binary = os.path.abspath(sys.argv[1])
    text = sys.argv[2] if len(sys.argv) > 2 else os.path.join(HERE, "..", "..", "..", "shared", "data",
                                                               "tinyshakespeare.txt")
    tmp = tempfile.mkdtemp()
    try:
        data = os.path.join(tmp, "d.txt")
        with open(text, "rb") as f, open(data, "wb") as g:
            g.write(f.read(100000))
        base, lora = os.path.join(tmp, "base"), os.path.join(tmp, "lora")
        trit(binary, tmp, "train", "--data", "d.txt", "--layers", "2", "--dim", "32", "--heads", "2", "--seq", "32",
             "--batch", "4", "--steps", "40", "--eval-every", "0", "--sample-tokens", "0", "--quiet", "1", "--out", "base")
        trit(binary, tmp, "train", "--data", "d.txt", "--init-from", "base", "--lora", LORA, "--lr", "1e-2", "--steps", "40",
             "--eval-every", "0", "--sample-tokens", "0", "--quiet", "1", "--out", "lora")
        model = gpt2_from_trit(os.path.join(base, "model.safetensors"))
        peft_model = PeftModel.from_pretrained(model, lora).eval()
        # Every tensor of trit's file reached its LoRA layer.
        stored = load_file(os.path.join(lora, "adapter_model.safetensors"))
        params = dict(peft_model.named_parameters())
        for name, t in stored.items():
            key = name.replace(".lora_A.weight", ".lora_A.default.weight").replace(".lora_B.weight", ".lora_B.default.weight")
            assert torch.equal(params[key].detach(), t), name
        assert sum(1 for k in params if ".lora_" in k) == len(stored)
        tokens = torch.tensor([TOKENS])
        with torch.no_grad():
            logits = peft_model(tokens).logits[0].float().contiguous()
        os.makedirs(OUT, exist_ok=True)
        shutil.copy(os.path.join(base, "model.safetensors"), os.path.join(OUT, "base.safetensors"))
        for d in ("adapter_trit", "adapter_peft"):
            shutil.rmtree(os.path.join(OUT, d), ignore_errors=True)
            os.makedirs(os.path.join(OUT, d))
        for f in ("adapter_model.safetensors", "adapter_config.json"):
            shutil.copy(os.path.join(lora, f), os.path.join(OUT, "adapter_trit", f))
        peft_model.peft_config["default"].base_model_name_or_path = "base"
        peft_model.save_pretrained(os.path.join(OUT, "adapter_peft"))
        for f in os.listdir(os.path.join(OUT, "adapter_peft")):
            if f not in ("adapter_model.safetensors", "adapter_config.json"):
                os.remove(os.path.join(OUT, "adapter_peft", f))
        save_file({"tokens": torch.tensor(TOKENS, dtype=torch.int32), "logits": logits},
                  os.path.join(OUT, "logits.safetensors"))
        print(f"wrote {OUT}: peft logits max |x| {logits.abs().max():.4f}")
    finally:
        shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
