"""A Hugging Face GPT-2 directory with its tokenizer, as transformers saves one, for the tests of
a Hugging Face directory as a base (tests/train/test_base_hf.c, tests/cli/test_finetune.c).

A byte-level BPE of 300 tokens (GPT-2's layout: ByteLevel pre-tokenizer without a prefix space,
<|endoftext|> a special token) trained by tokenizers on the first 50,000 characters of
tinyshakespeare, saved through GPT2TokenizerFast, and a randomly initialised GPT2LMHeadModel of
that vocabulary (2 layers, 2 heads, width 32, 32 positions, seed 0). Nothing is downloaded:

  /work/venv/bin/python tests/reference/make_hf_gpt2_base_fixture.py [DATA_DIR]

Writes tests/reference/fixtures/hf_gpt2/with_tokenizer/ (config.json, model.safetensors and the
tokenizer's files) and hf_gpt2/with_tokenizer.ids: transformers' ids of gpt2_text.txt followed by
"<|endoftext|>", space-separated.
"""

import os
import shutil
import sys

import torch
import transformers
from tokenizers import ByteLevelBPETokenizer
from transformers import GPT2Config, GPT2LMHeadModel, GPT2TokenizerFast

here = os.path.dirname(os.path.abspath(__file__))
data = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "..", "..", "..", "shared", "data")
fixtures = os.path.join(here, "fixtures")
out = os.path.join(fixtures, "hf_gpt2", "with_tokenizer")

with open(os.path.join(data, "tinyshakespeare.txt"), encoding="utf-8", newline="") as f:
    shakespeare = f.read()
bpe = ByteLevelBPETokenizer(add_prefix_space=False)
bpe.train_from_iterator([shakespeare[:50000]], vocab_size=300, min_frequency=2, special_tokens=["<|endoftext|>"],
                        show_progress=False)
tok = GPT2TokenizerFast(tokenizer_object=bpe._tokenizer, bos_token="<|endoftext|>", eos_token="<|endoftext|>",
                        unk_token="<|endoftext|>", add_prefix_space=False)

torch.manual_seed(0)
eot = tok.convert_tokens_to_ids("<|endoftext|>")
cfg = GPT2Config(vocab_size=len(tok), n_layer=2, n_head=2, n_embd=32, n_positions=32, bos_token_id=eot,
                 eos_token_id=eot)
model = GPT2LMHeadModel(cfg)
shutil.rmtree(out, ignore_errors=True)
model.save_pretrained(out, safe_serialization=True)
tok.save_pretrained(out)

with open(os.path.join(fixtures, "gpt2_text.txt"), encoding="utf-8", newline="") as f:  # keep its CRLFs
    text = f.read() + "<|endoftext|>"
back = GPT2TokenizerFast.from_pretrained(out)
ids = back(text)["input_ids"]
assert back.decode(ids) == text and ids[-1] == eot
with open(os.path.join(fixtures, "hf_gpt2", "with_tokenizer.ids"), "w") as f:
    f.write(" ".join(map(str, ids)) + "\n")
print(f"transformers {transformers.__version__}: vocabulary {len(tok)}, {len(ids)} ids; {sorted(os.listdir(out))}")
