"""trit.train: flags, the per-step callback, stopping, errors."""
import math

import pytest

import trit

from conftest import TINY


def test_callback_sees_every_step(trained_run):
    steps, r = trained_run["steps"], trained_run["result"]
    assert [s.step for s in steps] == list(range(1, 17))
    assert all(s.steps == 16 and math.isfinite(s.loss) and s.lr > 0 for s in steps)
    assert [s.step for s in steps if s.val_loss is not None] == [8, 16]
    assert steps[-1].loss < steps[0].loss
    assert r.step == 16 and not r.interrupted and r.val_loss == steps[-1].val_loss and r.num_params > 0


def test_same_flags_same_losses(trained_run, text_file, tmp_path):
    again = []
    trit.train(data=text_file, out=str(tmp_path / "again"), callback=again.append, **TINY)
    assert [s.loss for s in again] == [s.loss for s in trained_run["steps"]]


def test_callback_false_stops(text_file, tmp_path):
    r = trit.train(data=text_file, out=str(tmp_path / "stop"), callback=lambda s: s.step < 5, **TINY)
    assert r.interrupted and r.step == 5
    assert trit.load(r.out).step == 5  # stopped with a checkpoint
    more = []
    r2 = trit.train(resume=r.out, quiet=True, callback=more.append)
    assert more[0].step == 6 and r2.step == 16


def test_callback_exception_is_raised(text_file, tmp_path):
    def boom(s):
        if s.step == 3:
            raise KeyError("from the callback")

    with pytest.raises(KeyError, match="from the callback"):
        trit.train(data=text_file, out=str(tmp_path / "boom"), callback=boom, **TINY)
    assert trit.load(tmp_path / "boom").step == 3


def test_bad_flags(text_file, tmp_path):
    with pytest.raises(trit.TritError, match="layers"):
        trit.train(data=text_file, out=str(tmp_path / "bad"), **dict(TINY, layers=0))
    with pytest.raises(trit.TritError, match="no_such_flag|no-such-flag"):
        trit.train(no_such_flag=1)
    with pytest.raises(trit.TritError, match="missing.txt"):
        trit.train(data=str(tmp_path / "missing.txt"), out=str(tmp_path / "x"), quiet=True)
