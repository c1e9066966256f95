"""A random BitNet b1.58 checkpoint of trit's gpt2 decode shape, for bitnet.cpp's converter.

Writes DIR/config.json (BitnetForCausalLM), DIR/model.safetensors (fp32, as the
1bitLLM checkpoints: the converter's TL2 path expects f32 data) and DIR/tokenizer.model
(a character-level SentencePiece model; the converter pads the vocabulary to vocab_size with
[PAD] tokens, which llama-bench never looks at: it feeds random token ids).

Shape: 12 layers, hidden 768, 12 heads, vocabulary 50257, as `trit bench --decode --config gpt2`.
BitNet b1.58 is llama-like with a gated FFN (gate, up, down); intermediate_size 2048 gives its
three FFN matrices 3 x 768 x 2048 = 4.72 M weights, the same as GPT-2's two 768 x 3072 ones, so
the ternary matrices hold 84.9 M weights in both models. The projections hold random ternary
values {-a, 0, +a} (a = 0.02), which the converter's absmean quantizer maps back to {-1, 0, +1};
the token embedding (also the head: the bitnet architecture of bitnet.cpp has no separate output
matrix) is N(0, 0.02), norms are ones. No lm_head is written.

  /work/ext/bitnet-venv/bin/python bench/bitnet_model.py --out DIR [--seed 1]
Needs numpy, torch, safetensors and sentencepiece.
"""
import argparse
import json
import os
import string
import sys

import numpy as np
import torch
from safetensors.torch import save_file


def ternary(rng, shape, a=0.02):
    # (out, in) as torch.nn.Linear stores it
    return torch.from_numpy((rng.integers(-1, 2, size=shape) * a).astype(np.float32))


def write_tokenizer(path):
    import sentencepiece as spm
    chars = string.ascii_letters + string.digits + string.punctuation + " "
    corpus = path + ".txt"
    rng = np.random.default_rng(0)
    with open(corpus, "w") as f:
        for _ in range(2000):
            f.write("".join(rng.choice(list(chars), size=64)) + "\n")
    # pieces: the distinct characters plus <unk>, <s>, </s>
    spm.SentencePieceTrainer.train(input=corpus, model_prefix=path, model_type="char",
                                   vocab_size=len(set(chars)) + 3, character_coverage=1.0,
                                   minloglevel=2)
    os.remove(corpus)
    os.remove(path + ".vocab")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="directory to write (created)")
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--dim", type=int, default=768)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--ff", type=int, default=2048)
    ap.add_argument("--vocab", type=int, default=50257)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    if args.dim % args.heads:
        sys.exit(f"bitnet_model.py: --dim {args.dim} is not a multiple of --heads {args.heads}")
    os.makedirs(args.out, exist_ok=True)
    rng = np.random.default_rng(args.seed)
    C, F = args.dim, args.ff
    t = {"model.embed_tokens.weight":
         torch.from_numpy((rng.standard_normal((args.vocab, C)) * 0.02).astype(np.float32)),
         "model.norm.weight": torch.ones(C, dtype=torch.float32)}
    for i in range(args.layers):
        p = f"model.layers.{i}."
        for name in ("q_proj", "k_proj", "v_proj", "o_proj"):
            t[p + f"self_attn.{name}.weight"] = ternary(rng, (C, C))
        t[p + "mlp.gate_proj.weight"] = ternary(rng, (F, C))
        t[p + "mlp.up_proj.weight"] = ternary(rng, (F, C))
        t[p + "mlp.down_proj.weight"] = ternary(rng, (C, F))
        t[p + "input_layernorm.weight"] = torch.ones(C, dtype=torch.float32)
        t[p + "post_attention_layernorm.weight"] = torch.ones(C, dtype=torch.float32)
        t[p + "self_attn.inner_attn_ln.weight"] = torch.ones(C, dtype=torch.float32)
        t[p + "mlp.ffn_layernorm.weight"] = torch.ones(F, dtype=torch.float32)
    save_file(t, os.path.join(args.out, "model.safetensors"), metadata={"format": "pt"})
    config = {
        "architectures": ["BitnetForCausalLM"], "model_type": "llama", "torch_dtype": "float32",
        "hidden_size": C, "intermediate_size": F, "num_hidden_layers": args.layers,
        "num_attention_heads": args.heads, "num_key_value_heads": args.heads,
        "vocab_size": args.vocab, "max_position_embeddings": 1024, "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0, "hidden_act": "silu", "tie_word_embeddings": True,
        "bos_token_id": 1, "eos_token_id": 2,
    }
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    write_tokenizer(os.path.join(args.out, "tokenizer"))
    n = args.layers * (4 * C * C + 3 * C * F)
    print(f"{args.out}: {args.layers} layers, {n / 1e6:.1f} M ternary weights, "
          f"embedding/head {args.vocab} x {C}")


if __name__ == "__main__":
    main()
