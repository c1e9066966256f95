"""Shared fixtures: a tiny run trained once per session on generated text (no data files needed).

Environment: TRIT_LIBRARY (libtrit.so to test), TRIT_CLI (the `trit` binary, for the tests that
compare with the command; skipped without it), TRIT_SOURCE_DIR (the checkout, for header checks).
"""
import os
import random

import pytest

import trit

WORDS = "the king and queen of a small land rode to sea where wind sang old songs by night".split()


def make_text(n_words=1500, seed=5):
    rng = random.Random(seed)
    words = [rng.choice(WORDS) + (".\n" if i % 11 == 10 else " ") for i in range(n_words)]
    return "".join(words)


TINY = dict(layers=1, heads=2, dim=32, seq=32, batch=4, steps=16, warmup=2, lr=3e-3, eval_every=8, eval_batches=2,
            log_every=4, sample_tokens=0, threads=1, quiet=True)


@pytest.fixture(scope="session")
def text_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("data") / "text.txt"
    path.write_text(make_text())
    return str(path)


@pytest.fixture(scope="session")
def trained_run(tmp_path_factory, text_file):
    out = str(tmp_path_factory.mktemp("runs") / "run")
    steps = []
    result = trit.train(data=text_file, out=out, callback=steps.append, **TINY)
    return {"out": out, "result": result, "steps": steps}


@pytest.fixture(scope="session")
def cli():
    path = os.environ.get("TRIT_CLI")
    if not path or not os.path.exists(path):
        pytest.skip("TRIT_CLI is not set to the trit binary")
    return path


@pytest.fixture(scope="session")
def source_dir():
    root = os.environ.get("TRIT_SOURCE_DIR") or os.path.join(os.path.dirname(__file__), "..", "..")
    if not os.path.exists(os.path.join(root, "include", "trit", "version.h")):
        pytest.skip("no trit checkout (set TRIT_SOURCE_DIR)")
    return root
