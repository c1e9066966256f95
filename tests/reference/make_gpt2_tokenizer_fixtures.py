#!/usr/bin/python3
"""GPT-2 token ids from tiktoken, for tests/io/test_tokenizer_gpt2.c.

tiktoken's gpt2 Encoding is built from the local GPT-2 files (../shared/data/gpt2: encoder.json
and vocab.bpe, hashes in its README), its pattern and <|endoftext|> = 50256, nothing downloaded:

  /work/venv/bin/python tests/reference/make_gpt2_tokenizer_fixtures.py [DATA_DIR]

Writes into tests/reference/fixtures/:

  gpt2_text.txt      a test text: one character of every Unicode general category (but Cs,
                     which UTF-8 cannot hold), emoji with skin tones and ZWJ sequences,
                     combining marks, CRLF, runs of spaces and tabs, digits, contractions,
                     <|endoftext|>, and every code point U+0000..U+07FF in order
  gpt2_text.ids      its ids, space-separated (encode with every special token allowed)
  gpt2_tinyshakespeare.txt   "<tokens> <crc32>" of tinyshakespeare.txt's ids, the CRC-32
                     (zlib) over the ids as little-endian uint32
"""

import os
import sys
import unicodedata
import zlib

import tiktoken
import tiktoken.load
import tiktoken_ext.openai_public as openai_public

here = os.path.dirname(os.path.abspath(__file__))
data = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "..", "..", "..", "shared", "data")
out = os.path.join(here, "fixtures")
os.environ["TIKTOKEN_CACHE_DIR"] = ""  # read the local files directly, cache nothing

ranks = tiktoken.load.data_gym_to_mergeable_bpe_ranks(
    vocab_bpe_file=os.path.join(data, "gpt2", "vocab.bpe"),
    encoder_json_file=os.path.join(data, "gpt2", "encoder.json"),
    vocab_bpe_hash="1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5",
    encoder_json_hash="196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783",
)
enc = tiktoken.Encoding(name="gpt2_local", pat_str=openai_public.r50k_pat_str, mergeable_ranks=ranks,
                        special_tokens={"<|endoftext|>": 50256}, explicit_n_vocab=50257)
assert enc.encode("First Citizen:\n") == [5962, 22307, 25, 198]

# One character per general category (Unicode 6.0 or older, so every table agrees).
categories = {
    "Lu": "A\u00c9\u0394\u0416", "Ll": "a\u00e9\u03b4\u0436\u00df", "Lt": "\u01c5\u1f88", "Lm": "\u02b0\u3005",
    "Lo": "\u05d0\u4e2d\u0e01\uac00", "Mn": "\u0301\u0308\u064b", "Mc": "\u0903\u0bbe", "Me": "\u20dd\u0488",
    "Nd": "7\u0663\u0967\uff19", "Nl": "\u2162\u3007", "No": "\u00bd\u00b2\u2460", "Pc": "_\u203f",
    "Pd": "-\u2013\u2014", "Ps": "(\u300c", "Pe": ")\u300d", "Pi": "\u00ab\u2018", "Pf": "\u00bb\u2019",
    "Po": "!\u00bf\u3002", "Sm": "+\u2211\u221e", "Sc": "$\u20ac\u00a5", "Sk": "^\u02c2\u00a8", "So": "\u00a9\u2603",
    "Zs": " \u00a0\u3000\u2003", "Zl": "\u2028", "Zp": "\u2029", "Cc": "\x07\x1b\x85", "Cf": "\u200b\u200d\u00ad",
    "Co": "\ue000\U000f0000", "Cn": "\u0378\U000e0080",
}
for cat, chars in categories.items():
    for ch in chars:
        assert unicodedata.category(ch) == cat, (ch, cat, unicodedata.category(ch))

parts = []
for cat, chars in categories.items():
    parts += [f"{cat}: {chars} x{chars}y {chars}{chars}\n", f" {chars[0]}7{chars[-1]}'s "]
parts += [
    "Emoji: \U0001f600\U0001f44d\U0001f3fd \U0001f468\u200d\U0001f469\u200d\U0001f467\u200d\U0001f466 "
    "\U0001f1eb\U0001f1f7 \u2764\ufe0f 1\ufe0f\u20e3 \U0001f9d1\U0001f3ff\u200d\U0001f680!!\n",
    "Combining: e\u0301 n\u0303o a\u030a\u0323 Z\u0351\u0352\u0353\u0354 \u0915\u094d\u0937 \u1100\u1161\u11a8\n",
    "CRLF line\r\nnext line\r\n\r\n\rlone CR\n\n\n  \n",
    "Spaces:  two   three    four\t\ttabs \t mixed\t \t\n   \n\t\n \u3000 \u00a0ideographic\u2003em\n",
    "Digits: 0 12 345 6789 1234567890 3.14159 -42 1,000,000 \u0661\u0662\u0663 \uff11\uff12 \u00b2\u00b3\n",
    "Contractions: I'm you're we've they'll he'd it's don't CAN'T I'M O'Neil 'tis rock'n'roll ''s '\n",
    "Special: a<|endoftext|>b <|endoftext|> <|endoftext|><|endoftext|>\n<|endoftext|>  \n",
    "Other: caf\u00e9 na\u00efve \u0645\u0631\u062d\u0628\u0627 \u05e9\u05dc\u05d5\u05dd \u3053\u3093\u306b\u3061\u306f "
    "\u4f60\u597d\u4e16\u754c \ud55c\uad6d\uc5b4 \u0928\u092e\u0938\u094d\u0924\u0947 \u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35\n",
    "Symbols: <=> != === ... --- ___ ### @user #tag https://example.com/a?b=c&d=e\n",
    "   trailing spaces at the end   ",
]
sweep = "".join(chr(c) for c in range(0, 0x800))
text = "".join(parts) + "\n" + "".join(sweep[i:i + 24] + " " for i in range(0, len(sweep), 24)) + "end"

ids = enc.encode(text, allowed_special="all")
assert enc.decode_bytes(ids) == text.encode("utf-8")
with open(os.path.join(out, "gpt2_text.txt"), "wb") as f:
    f.write(text.encode("utf-8"))
with open(os.path.join(out, "gpt2_text.ids"), "w") as f:
    f.write(" ".join(map(str, ids)) + "\n")
print(f"gpt2_text: {len(text.encode('utf-8'))} bytes, {len(ids)} tokens")

with open(os.path.join(data, "tinyshakespeare.txt"), "rb") as f:
    shakespeare = f.read().decode("utf-8")
ids = enc.encode(shakespeare, allowed_special="all")
crc = zlib.crc32(b"".join(i.to_bytes(4, "little") for i in ids))
with open(os.path.join(out, "gpt2_tinyshakespeare.txt"), "w") as f:
    f.write(f"{len(ids)} {crc:08x}\n")
print(f"tinyshakespeare: {len(ids)} tokens, crc32 {crc:08x}, tiktoken {tiktoken.__version__}")
