"""trit.load: evaluation, sampling and tensors as NumPy views of the model's memory."""
import re
import subprocess

import numpy as np
import pytest

import trit


def test_load_and_eval(trained_run):
    run = trit.load(trained_run["out"])
    assert run.step == 16
    assert run.config["n_layer"] == 1 and run.config["n_embd"] == 32
    loss = run.eval_loss(batches=2)
    assert 0 < loss < np.log(run.config["vocab_size"])  # learned something: below uniform
    assert run.eval_loss(batches=2) == loss  # deterministic
    assert abs(run.eval_loss(batches=2, batch=4, seq=16) - loss) < 0.5


def test_eval_matches_cli(trained_run, cli):
    out = subprocess.run([cli, "eval", "--ckpt", trained_run["out"], "--batches", "3", "--threads", "1"],
                         capture_output=True, text=True, check=True).stdout
    want = float(re.search(r"val loss ([0-9.]+)", out).group(1))
    assert abs(trit.load(trained_run["out"]).eval_loss(batches=3) - want) < 6e-5


def test_tensors_are_views(trained_run):
    run = trit.load(trained_run["out"])
    ts = run.tensors()
    assert "wte.weight" in ts and "h.0.attn.c_attn.weight" in ts
    wte = ts["wte.weight"]
    assert wte.dtype == np.float32 and wte.shape == (run.config["vocab_size"], 32)
    assert not wte.flags["OWNDATA"] and wte.flags["WRITEABLE"]
    assert np.shares_memory(wte, run.tensors()["wte.weight"])
    assert sum(t.size for t in ts.values()) == run.num_params
    before = run.eval_loss(batches=2)
    saved = wte.copy()
    wte[:] = 0  # writes into the model
    assert run.eval_loss(batches=2) != before
    wte[:] = saved
    assert run.eval_loss(batches=2) == before
    del run  # the views keep the model alive
    assert np.array_equal(ts["wte.weight"], saved)


def test_close_refuses_while_views_live(trained_run):
    run = trit.load(trained_run["out"])
    w = run.tensors()["wpe.weight"]
    with pytest.raises(ValueError, match="views"):
        run.close()
    assert w.sum() == w.sum()  # still valid memory
    del w
    run.close()
    with pytest.raises(ValueError, match="closed"):
        run.tensors()


def test_sample(trained_run):
    run = trit.load(trained_run["out"])
    a = run.sample("the king", max_tokens=20, temperature=0.0)
    assert isinstance(a, str) and len(a) > 0
    assert run.sample("the king", max_tokens=20, temperature=0.0) == a  # greedy is deterministic
    b1 = run.sample("the", max_tokens=30, temperature=1.0, seed=3)
    assert run.sample("the", max_tokens=30, temperature=1.0, seed=3) == b1
    ids = run.generate(run.tokenizer.encode("the queen"), max_tokens=7, temperature=0.0)
    assert ids.dtype == np.int32 and ids.size == 7
    with pytest.raises(trit.TritValueError, match="emperature"):
        run.sample("the", temperature=-1)


def test_save_round_trip(trained_run, tmp_path):
    run = trit.load(trained_run["out"])
    run.tensors()["ln_f.bias"][:] += 0.5
    path = tmp_path / "edited.safetensors"
    run.save(path)
    back = trit.load(path)
    assert np.array_equal(back.tensors()["ln_f.bias"], run.tensors()["ln_f.bias"])
