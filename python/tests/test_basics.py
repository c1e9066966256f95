"""Version, library, errors, and the ctypes structs against the C headers."""
import re

import pytest

import trit
from trit import _lib


def test_versions_agree(source_dir):
    text = open(f"{source_dir}/include/trit/version.h").read()
    parts = [re.search(rf"#define TRIT_VERSION_{p} (\d+)", text).group(1) for p in ("MAJOR", "MINOR", "PATCH")]
    assert trit.library_version() == ".".join(parts)
    assert trit.__version__ == trit.library_version()
    assert _lib.SOVERSION == ".".join(parts[:2]) if parts[0] == "0" else parts[0]


def test_errors_carry_trits_message(tmp_path):
    with pytest.raises(trit.TritError, match="cannot open .*no-such-run"):
        trit.load(tmp_path / "no-such-run")
    with pytest.raises(trit.TritError, match="tokenizer") as e:
        trit.Tokenizer(tmp_path)  # a directory without tokenizer.bin
    assert str(e.value) and e.value.status == "failed"


def test_threads():
    before = trit.get_threads()
    trit.set_threads(1)
    assert trit.get_threads() == 1
    trit.set_threads(0)
    assert trit.get_threads() == before


def _c_fields(header, struct):
    """Field names of `typedef struct struct {...} struct;` in a header, in order."""
    text = open(header).read()
    body = re.search(r"typedef struct %s \{(.*?)\n\} %s;" % (struct, struct), text, re.S).group(1)
    body = re.sub(r"//[^\n]*|/\*.*?\*/", "", body, flags=re.S)
    names = []
    for decl in body.split(";"):
        decl = decl.strip()
        if not decl:
            continue
        # "double loss, val_loss" / "int64_t shape[TRIT_MAX_DIMS]" / "void (*on_step)(void *ctx, ...)"
        fn = re.match(r".*\(\s*\*\s*(\w+)\s*\)", decl)
        if fn:
            names.append(fn.group(1))
            continue
        head, _, rest = decl.partition(" ")
        for part in (head + " " + rest).split(","):
            names.append(re.findall(r"(\w+)\s*(?:\[[^\]]*\])?\s*$", part.strip())[0])
    return names


@pytest.mark.parametrize("header, struct, mirror, prefix_only", [
    ("train.h", "trit_train_step_info", _lib.StepInfo, False),
    ("train.h", "trit_train_hooks", _lib.TrainHooks, False),
    ("train.h", "trit_train_result", _lib.TrainResult, False),
    ("train.h", "trit_sample_config", _lib.SampleConfig, False),
    ("train.h", "trit_quantize_report", _lib.QuantizeReport, False),
    ("quant.h", "trit_quant_spec", _lib.QuantSpec, False),
    ("tensor.h", "trit_tensor", _lib.TensorHead, True),
])
def test_struct_mirrors_match_headers(source_dir, header, struct, mirror, prefix_only):
    c = _c_fields(f"{source_dir}/include/trit/{header}", struct)
    py = [f[0] for f in mirror._fields_]
    assert (c[: len(py)] if prefix_only else c) == py, f"{struct} changed: update python/trit/_lib.py"
