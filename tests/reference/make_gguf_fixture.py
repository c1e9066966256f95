#!/usr/bin/python3
"""A GGUF file written by the `gguf` Python package (llama.cpp's own writer and quantizers).

Writes tests/reference/fixtures/gguf_writer.gguf, read by tests/io/test_gguf_reference.c, which
writes the same key-values and tensors with trit's GGUF writer and trit's encodings and wants the
same bytes. Made with gguf 0.19.0 and numpy 2.4.6 from PyPI in a virtual environment:

  python3 -m venv venv && venv/bin/pip install gguf numpy
  venv/bin/python tests/reference/make_gguf_fixture.py

Contents, in file order:
  key-values: general.architecture = "gpt2" (the writer adds it first), then one of each type
    trit writes: test.u32 (u32), test.f32 (f32), test.str (string), tokenizer.ggml.tokens (a
    string array, one entry with a newline and one empty), test.i32s (an i32 array)
  tensors (ne innermost first; every one from the values of `src`):
    src      f32 (256, 4): the values, each an integer over 2^k (exact in f32 and f64), blocks of
             32 at magnitudes 2^0..2^-4, one block of zeros
    f16      f16 of src (numpy's round to nearest even)
    q8_0     Q8_0 of src, q4_0: Q4_0 of src
    tern     f32 (256, 2): ternary values times a scale per 256, the values trit exports as
             TQ2_0/TQ1_0 (weights of a ternary model), and tq2_0, tq1_0: their encodings
    odd      f32 (5): a length that needs padding before the next tensor
    last     f32 (3): the file ends with its padding to the alignment (32)
"""

import importlib.metadata
import os

import gguf
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "fixtures", "gguf_writer.gguf")


def values():
    """(4, 256) f32: (hash(i) mod 2^16 - 2^15) / 2^15 scaled by 2^-(block mod 5); block 5 zeros."""
    i = np.arange(4 * 256, dtype=np.uint64)
    h = (i * np.uint64(2654435761)) % np.uint64(1 << 32) >> np.uint64(16)
    v = (h.astype(np.float64) - 32768.0) / 32768.0
    block = (i // 32).astype(np.int64)
    v = v * np.exp2(-(block % 5)).astype(np.float64)
    v[block == 5] = 0.0
    return v.astype(np.float32).reshape(4, 256)


def ternary():
    """(2, 256) f32: codes in {-1, 0, 1} (from i mod 3 scrambled) times 0.375 and 2^-6."""
    i = np.arange(2 * 256, dtype=np.int64)
    codes = ((i * 7 + i // 5) % 3 - 1).astype(np.float32)
    scale = np.where(i < 256, np.float32(0.375), np.float32(2.0**-6))
    return (codes * scale).astype(np.float32).reshape(2, 256)


def main():
    src, tern = values(), ternary()
    T = gguf.GGMLQuantizationType
    w = gguf.GGUFWriter(OUT + ".tmp", "gpt2")
    w.add_uint32("test.u32", 7)
    w.add_float32("test.f32", 0.1)
    w.add_string("test.str", "trit")
    w.add_array("tokenizer.ggml.tokens", ["a", "b\n", "", "<|endoftext|>"])
    w.add_array("test.i32s", [1, -2, 300000])
    w.add_tensor("src", src)
    w.add_tensor("f16", src.astype(np.float16))
    for name, qt in (("q8_0", T.Q8_0), ("q4_0", T.Q4_0)):
        w.add_tensor(name, gguf.quants.quantize(src, qt), raw_dtype=qt)
    w.add_tensor("tern", tern)
    for name, qt in (("tq2_0", T.TQ2_0), ("tq1_0", T.TQ1_0)):
        w.add_tensor(name, gguf.quants.quantize(tern, qt), raw_dtype=qt)
    w.add_tensor("odd", np.array([1.5, -2.25, 3.0, 0.0, -0.125], dtype=np.float32))
    w.add_tensor("last", np.array([4.0, 5.0, -6.5], dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    os.replace(OUT + ".tmp", OUT)
    print(f"gguf {importlib.metadata.version('gguf')}, numpy {np.__version__}: "
          f"wrote {os.path.getsize(OUT)} bytes to {OUT}")


if __name__ == "__main__":
    main()
