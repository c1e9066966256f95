#!/usr/bin/env python3
"""tiktoken's gpt2 encoding on a text file, one thread: prints "<tokens> <MB/s>".

The Encoding is built from GPT-2's local files (DIR/encoder.json, DIR/vocab.bpe) with tiktoken's
gpt2 pattern and <|endoftext|> = 50256, nothing downloaded. One untimed warm-up encode of the
first 64 KiB, then the whole text encoded once, timed (Encoding.encode runs on the calling
thread; only the *_batch calls use a pool).

usage: tiktoken_gpt2.py GPT2_DIR TEXT
"""

import os
import sys
import time

os.environ["TIKTOKEN_CACHE_DIR"] = ""

import tiktoken
import tiktoken.load
import tiktoken_ext.openai_public as openai_public

gpt2_dir, text_path = sys.argv[1], sys.argv[2]
ranks = tiktoken.load.data_gym_to_mergeable_bpe_ranks(os.path.join(gpt2_dir, "vocab.bpe"),
                                                      os.path.join(gpt2_dir, "encoder.json"))
enc = tiktoken.Encoding(name="gpt2_local", pat_str=openai_public.r50k_pat_str, mergeable_ranks=ranks,
                        special_tokens={"<|endoftext|>": 50256})
with open(text_path, "rb") as f:
    raw = f.read()
text = raw.decode("utf-8")
enc.encode(text[:65536], allowed_special="all")
t0 = time.perf_counter()
ids = enc.encode(text, allowed_special="all")
dt = time.perf_counter() - t0
print(len(ids), f"{len(raw) / dt / 1e6:.3f}")
