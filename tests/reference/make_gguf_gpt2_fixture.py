"""Writes tests/reference/fixtures/gguf_gpt2/{f32,q8_0}.gguf with the `gguf` Python package: the
transformers GPT-2 of fixtures/hf_gpt2/with_tokenizer (L 2, H 2, C 32, V 300, T 32) laid out as
llama.cpp's converter lays out the gpt2 architecture (gpt2.* keys, Conv1D weights transposed to
(out, in), output.weight a copy of token_embd.weight, the vocabulary and merges of its
tokenizer.json under tokenizer.ggml.*). q8_0.gguf has every 2-D matrix as Q8_0 (gguf.quants).
Read by tests/cli/test_import_gguf.c: `trit import gguf` of f32.gguf must give the same
model.safetensors and tokenizer.bin as `trit import hf` of the directory.

Run: /work/venv/bin/python tests/reference/make_gguf_gpt2_fixture.py
"""
import json
import os

import gguf
import numpy as np
from safetensors.numpy import load_file

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(HERE, "fixtures", "hf_gpt2", "with_tokenizer")
OUT = os.path.join(HERE, "fixtures", "gguf_gpt2")

PAIRS = [("ln_1.weight", "attn_norm.weight"), ("ln_1.bias", "attn_norm.bias"),
         ("attn.c_attn.weight", "attn_qkv.weight"), ("attn.c_attn.bias", "attn_qkv.bias"),
         ("attn.c_proj.weight", "attn_output.weight"), ("attn.c_proj.bias", "attn_output.bias"),
         ("ln_2.weight", "ffn_norm.weight"), ("ln_2.bias", "ffn_norm.bias"),
         ("mlp.c_fc.weight", "ffn_up.weight"), ("mlp.c_fc.bias", "ffn_up.bias"),
         ("mlp.c_proj.weight", "ffn_down.weight"), ("mlp.c_proj.bias", "ffn_down.bias")]


def write(path, quantize):
    cfg = json.load(open(os.path.join(SRC, "config.json")))
    tok = json.load(open(os.path.join(SRC, "tokenizer.json")))
    w = load_file(os.path.join(SRC, "model.safetensors"))
    g = lambda k: w["transformer." + k]
    vocab = sorted(tok["model"]["vocab"].items(), key=lambda kv: kv[1])
    assert [i for _, i in vocab] == list(range(len(vocab)))
    specials = {a["id"] for a in tok["added_tokens"] if a["special"]}
    merges = [m if isinstance(m, str) else " ".join(m) for m in tok["model"]["merges"]]

    wr = gguf.GGUFWriter(path + ".tmp", "gpt2")
    wr.add_name("gpt2-tiny")
    wr.add_context_length(cfg["n_positions"])
    wr.add_embedding_length(cfg["n_embd"])
    wr.add_feed_forward_length(4 * cfg["n_embd"])
    wr.add_block_count(cfg["n_layer"])
    wr.add_head_count(cfg["n_head"])
    wr.add_layer_norm_eps(cfg["layer_norm_epsilon"])
    wr.add_tokenizer_model("gpt2")
    wr.add_tokenizer_pre("gpt-2")
    wr.add_token_list([t for t, _ in vocab])
    wr.add_token_types([3 if i in specials else 1 for _, i in vocab])
    wr.add_token_merges(merges)
    wr.add_bos_token_id(0)
    wr.add_eos_token_id(0)

    def put(name, x):
        x = np.ascontiguousarray(x, dtype=np.float32)
        if quantize and x.ndim == 2:
            wr.add_tensor(name, gguf.quants.quantize(x, gguf.GGMLQuantizationType.Q8_0),
                          raw_dtype=gguf.GGMLQuantizationType.Q8_0)
        else:
            wr.add_tensor(name, x)

    put("token_embd.weight", g("wte.weight"))
    put("position_embd.weight", g("wpe.weight"))
    put("output_norm.weight", g("ln_f.weight"))
    put("output_norm.bias", g("ln_f.bias"))
    put("output.weight", g("wte.weight"))
    for i in range(cfg["n_layer"]):
        for hf, gg in PAIRS:
            x = g(f"h.{i}.{hf}")
            put(f"blk.{i}.{gg}", x.T if x.ndim == 2 else x)  # Conv1D (in, out) -> (out, in)
    wr.write_header_to_file()
    wr.write_kv_data_to_file()
    wr.write_tensors_to_file()
    wr.close()
    os.replace(path + ".tmp", path)


def main():
    os.makedirs(OUT, exist_ok=True)
    write(os.path.join(OUT, "f32.gguf"), False)
    write(os.path.join(OUT, "q8_0.gguf"), True)


if __name__ == "__main__":
    main()
