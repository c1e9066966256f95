"""Writes tests/reference/fixtures/gguf_quant/{q8_0,q4_0,tq2_0,tq1_0}.gguf with the `gguf` Python
package (gguf 0.19.0, numpy 2): small gpt2-architecture models laid out as llama.cpp's converter
lays them out (gpt2.* keys, (out, in) matrices, output.weight a copy of token_embd.weight, the
tokenizer of fixtures/hf_gpt2/with_tokenizer) whose matrices gguf.quants.quantize wrote in one
block type: every matrix in q8_0.gguf and q4_0.gguf (L 1, H 2, C 64, MLP 256, V 300, T 32); the
blocks' matrices in tq2_0.gguf and tq1_0.gguf (L 1, H 2, C 256, MLP 256, T 32), whose token
embedding is q8_0, as trit's ternary exports have it.

Beside each, <type>.ref.safetensors holds for every quantized tensor NAME, from the `gguf`
package alone (values = gguf.quants.dequantize of the file's blocks, ggml's values, f32):
  NAME.scales  f32 (rows, cols / block): each block's f16 scale d, read from the block's bytes
  NAME.head    f32 (256): the first 256 values
and in its metadata NAME.values_crc32 and NAME.codes_crc32: zlib.crc32 of all the values' bytes
(f32 little-endian, row-major) and of their int8 codes values / d (0 where d is 0); the script
checks that codes x d gives the values again. Read by tests/train/test_import_gguf_quant.c:
trit's import must keep these scales and codes and decode to these values bit for bit.

Run: /work/venv/bin/python tests/reference/make_gguf_quant_fixture.py
"""
import json
import os
import zlib

import gguf
import numpy as np
from safetensors.numpy import save_file

HERE = os.path.dirname(os.path.abspath(__file__))
TOK = os.path.join(HERE, "fixtures", "hf_gpt2", "with_tokenizer", "tokenizer.json")
OUT = os.path.join(HERE, "fixtures", "gguf_quant")
Q = gguf.GGMLQuantizationType

PAIRS = ["attn_norm.weight", "attn_norm.bias", "attn_qkv.weight", "attn_qkv.bias", "attn_output.weight",
         "attn_output.bias", "ffn_norm.weight", "ffn_norm.bias", "ffn_up.weight", "ffn_up.bias", "ffn_down.weight",
         "ffn_down.bias"]
# Where each block type keeps its f16 scale, and its elements and bytes per block.
LAYOUT = {Q.Q8_0: (0, 32, 34), Q.Q4_0: (0, 32, 18), Q.TQ2_0: (64, 256, 66), Q.TQ1_0: (52, 256, 54)}


def tensors(rng, L, C, F, V, T):
    """The model's f32 tensors in ggml's names, (out, in) matrices."""
    w = {"token_embd.weight": rng.normal(0, 0.5, (V, C)), "position_embd.weight": rng.normal(0, 0.1, (T, C)),
         "output_norm.weight": 1 + rng.normal(0, 0.1, C), "output_norm.bias": rng.normal(0, 0.1, C)}
    shapes = {"attn_qkv.weight": (3 * C, C), "attn_output.weight": (C, C), "ffn_up.weight": (F, C),
              "ffn_down.weight": (C, F)}
    for i in range(L):
        for name in PAIRS:
            key = f"blk.{i}.{name}"
            if name in shapes:
                w[key] = rng.normal(0, 1.0 / np.sqrt(shapes[name][1]), shapes[name])
            elif name.endswith("norm.weight"):
                w[key] = 1 + rng.normal(0, 0.1, C)
            else:
                w[key] = rng.normal(0, 0.05, 3 * C if "qkv" in name else F if "up" in name else C)
    return {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in w.items()}


def reference(blocks, qtype, rows, cols):
    """values, scales and codes of a quantized tensor, from its bytes through the gguf package."""
    at, blk, nb = LAYOUT[qtype]
    values = gguf.quants.dequantize(blocks, qtype).reshape(rows, cols).astype(np.float32)
    b = blocks.reshape(rows * cols // blk, nb)
    scales = b[:, at:at + 2].copy().view(np.float16).astype(np.float32).reshape(rows, cols // blk)
    d = np.repeat(scales, blk, axis=1)
    codes = np.where(d != 0, values / np.where(d != 0, d, 1), 0)
    assert np.array_equal(codes, np.rint(codes)) and np.abs(codes).max() <= 128
    assert np.array_equal((codes * d).astype(np.float32), values)
    return values, scales, codes.astype(np.int8)


def write(name, qtype, L, C, F, seed):
    tok = json.load(open(TOK))
    vocab = sorted(tok["model"]["vocab"].items(), key=lambda kv: kv[1])
    specials = {a["id"] for a in tok["added_tokens"] if a["special"]}
    merges = [m if isinstance(m, str) else " ".join(m) for m in tok["model"]["merges"]]
    V, T = len(vocab), 32
    rng = np.random.default_rng(seed)
    w = tensors(rng, L, C, F, V, T)
    ternary = qtype in (Q.TQ1_0, Q.TQ2_0)

    path = os.path.join(OUT, name + ".gguf")
    wr = gguf.GGUFWriter(path + ".tmp", "gpt2")
    wr.add_name("gpt2-" + name)
    wr.add_context_length(T)
    wr.add_embedding_length(C)
    wr.add_feed_forward_length(F)
    wr.add_block_count(L)
    wr.add_head_count(2)
    wr.add_layer_norm_eps(1e-5)
    wr.add_tokenizer_model("gpt2")
    wr.add_tokenizer_pre("gpt-2")
    wr.add_token_list([t for t, _ in vocab])
    wr.add_token_types([3 if i in specials else 1 for _, i in vocab])
    wr.add_token_merges(merges)
    wr.add_bos_token_id(0)
    wr.add_eos_token_id(0)
    ref, meta = {}, {}
    order = ["token_embd.weight", "position_embd.weight", "output_norm.weight", "output_norm.bias",
             "output.weight"] + [f"blk.{i}.{p}" for i in range(L) for p in PAIRS]
    for key in order:
        x = w["token_embd.weight" if key == "output.weight" else key]
        t = None
        if x.ndim == 2 and key != "position_embd.weight":
            t = Q.Q8_0 if ternary and key in ("token_embd.weight", "output.weight") else qtype
        if t is None:
            wr.add_tensor(key, x)
            continue
        blocks = gguf.quants.quantize(x, t)
        wr.add_tensor(key, blocks, raw_dtype=t)
        if key != "output.weight":
            values, scales, codes = reference(blocks, t, *x.shape)
            ref[key + ".scales"], ref[key + ".head"] = scales, values.reshape(-1)[:256].copy()
            meta[key + ".values_crc32"] = str(zlib.crc32(values.astype("<f4").tobytes()))
            meta[key + ".codes_crc32"] = str(zlib.crc32(codes.tobytes()))
    wr.write_header_to_file()
    wr.write_kv_data_to_file()
    wr.write_tensors_to_file()
    wr.close()
    os.replace(path + ".tmp", path)
    save_file(ref, os.path.join(OUT, name + ".ref.safetensors"), metadata=meta)


def main():
    os.makedirs(OUT, exist_ok=True)
    write("q8_0", Q.Q8_0, 1, 64, 256, 1)
    write("q4_0", Q.Q4_0, 1, 64, 256, 2)
    write("tq2_0", Q.TQ2_0, 1, 256, 256, 3)
    write("tq1_0", Q.TQ1_0, 1, 256, 256, 4)


if __name__ == "__main__":
    main()
