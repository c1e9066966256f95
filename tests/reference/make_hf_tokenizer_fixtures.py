#!/usr/bin/python3
"""A tokenizer.json written by Hugging Face's tokenizers, and its ids, for tests/io/test_tokenizer_gpt2.c.

A byte-level BPE (GPT-2's layout: ByteLevel pre-tokenizer without a prefix space, its regex) of
600 tokens trained by tokenizers on the first 200,000 characters of tinyshakespeare, with
<|endoftext|> as a special token (id 0, ahead of the byte tokens, unlike GPT-2's files). Its
merges are stored as [A, B] pairs (tokenizers >= 0.20). Nothing is downloaded:

  /work/venv/bin/python tests/reference/make_hf_tokenizer_fixtures.py [DATA_DIR]

Writes into tests/reference/fixtures/:

  hf_bpe600_tokenizer.json   the tokenizer as tokenizers saves it
  hf_bpe600_text.ids         its ids of gpt2_text.txt (tokenizer.encode(text).ids), space-separated
"""

import os
import sys

import tokenizers
from tokenizers import ByteLevelBPETokenizer

here = os.path.dirname(os.path.abspath(__file__))
data = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "..", "..", "..", "shared", "data")
out = os.path.join(here, "fixtures")

with open(os.path.join(data, "tinyshakespeare.txt"), encoding="utf-8", newline="") as f:
    shakespeare = f.read()
tok = ByteLevelBPETokenizer(add_prefix_space=False)
tok.train_from_iterator([shakespeare[:200000]], vocab_size=600, min_frequency=2, special_tokens=["<|endoftext|>"],
                        show_progress=False)
tok.save(os.path.join(out, "hf_bpe600_tokenizer.json"))

with open(os.path.join(out, "gpt2_text.txt"), encoding="utf-8", newline="") as f:  # keep its CRLFs
    text = f.read()
ids = tok.encode(text).ids
assert tok.decode(ids, skip_special_tokens=False) == text
with open(os.path.join(out, "hf_bpe600_text.ids"), "w") as f:
    f.write(" ".join(map(str, ids)) + "\n")
print(f"tokenizers {tokenizers.__version__}: {len(ids)} ids")
