"""Checks that transformers loads the tokenizer files of `trit export RUN --format hf --out DIR`
and encodes like trit: for each text, GPT2TokenizerFast.from_pretrained(DIR) gives the ids that
`trit tokenize --tokenizer RUN` gives (RUN's own tokenizer.bin), and decodes them back to the text.
<|endoftext|> in a text is the special token on both sides, and is the tokenizer's eos token.

  /work/venv/bin/python tests/reference/check_hf_export_tokenizer.py TRIT RUN DIR TEXT...

(needs transformers; exits 1 on a mismatch). A run with GPT-2's tokenizer, for example:

  trit prepare --data tinyshakespeare.txt --out P --tokenizer gpt2:/work/shared/data/gpt2
  trit train --data P --out RUN --layers 1 --heads 2 --dim 32 --seq 32 --steps 2 --eval-every 0
  trit export RUN --format hf --out DIR
"""
import subprocess
import sys

from transformers import GPT2LMHeadModel, GPT2TokenizerFast


def trit_ids(trit, run, text):
    out = subprocess.run([trit, "tokenize", "--tokenizer", run], input=text.encode("utf-8"), capture_output=True,
                         check=True)
    return [int(t) for t in out.stdout.split()]


def main(trit, run, hf_dir, texts):
    tok = GPT2TokenizerFast.from_pretrained(hf_dir)
    model = GPT2LMHeadModel.from_pretrained(hf_dir)
    if len(tok) != model.config.vocab_size:
        raise SystemExit(f"tokenizer has {len(tok)} tokens, the model {model.config.vocab_size}")
    eot = tok.convert_tokens_to_ids("<|endoftext|>")
    if tok.eos_token != "<|endoftext|>" or eot != model.config.eos_token_id:
        raise SystemExit(f"eos token {tok.eos_token!r} id {eot}, config.json's eos_token_id {model.config.eos_token_id}")
    bad = 0
    for path in texts:
        with open(path, encoding="utf-8", newline="") as f:  # keep CRLFs
            text = f.read()
        text += "<|endoftext|>" + text[:200]
        want = trit_ids(trit, run, text)
        got = tok(text)["input_ids"]
        same = got == want
        back = tok.decode(got) == text
        first = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
        print(f"{path}: {len(want)} ids, transformers {'equal' if same else f'differs at {first}'}, "
              f"decode {'exact' if back else 'differs'}")
        bad += not (same and back and eot in got)
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) < 5:
        raise SystemExit(__doc__)
    sys.exit(main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]))
