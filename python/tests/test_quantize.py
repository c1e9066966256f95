"""trit.quantize: the run `trit quantize` writes, from Python."""
import os
import subprocess

import pytest

import trit


def test_quantize_int8(trained_run, tmp_path):
    out = str(tmp_path / "q8")
    rep = trit.quantize(trained_run["out"], format="int8", out=out)
    assert rep["out"] == out and rep["tensors"] == 4 and 0 < rep["params_quantized"] < rep["params_total"]
    assert rep["bytes_total"] < 4 * rep["params_total"]
    assert sorted(os.listdir(out)) == ["model.safetensors", "tokenizer.bin", "val.bin"]
    before = trit.load(trained_run["out"]).eval_loss(batches=2)
    after = trit.load(out).eval_loss(batches=2)
    assert after != before and abs(after - before) < 0.05 * before


def test_same_bytes_as_cli(trained_run, tmp_path, cli):
    py_out, cli_out = str(tmp_path / "py"), str(tmp_path / "cli")
    trit.quantize(trained_run["out"], format="int4", group=32, out=py_out)
    subprocess.run([cli, "quantize", trained_run["out"], "--format", "int4", "--group", "32", "--out", cli_out,
                    "--batches", "0"], check=True, capture_output=True)
    for name in ("model.safetensors", "tokenizer.bin", "val.bin"):
        with open(f"{py_out}/{name}", "rb") as a, open(f"{cli_out}/{name}", "rb") as b:
            assert a.read() == b.read(), name


def test_bad_format_names_the_choices(trained_run, tmp_path):
    with pytest.raises(trit.TritError, match="int8"):
        trit.quantize(trained_run["out"], format="int7", out=str(tmp_path / "x"))
    assert not os.path.exists(tmp_path / "x")
    with pytest.raises(trit.TritError, match="group"):
        trit.quantize(trained_run["out"], format="int4", group=7, out=str(tmp_path / "y"))
    assert not os.path.exists(tmp_path / "y")
