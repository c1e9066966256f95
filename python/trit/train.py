"""trit.train(**flags, callback=fn) and trit.quantize(DIR, format=..., out=...)."""
import ctypes
import math
import os
import shutil
from dataclasses import dataclass
from typing import Optional

from . import _lib
from ._lib import (ON_GRADS, ON_STEP, QUANTIZE_BLOCKS, QUANTIZE_EMBEDDING, QSCHEME_AFFINE, QuantizeReport,
                   TrainHooks, check, check_ptr, lib)
from ._lib import TrainResult as CTrainResult
from .run import _val_shard


def _nan_none(x):
    return None if math.isnan(x) else x


@dataclass
class StepInfo:
    """What the callback of trit.train sees after every optimizer step."""
    step: int  # completed steps (1-based)
    steps: int
    loss: float
    val_loss: Optional[float]  # None unless evaluated at this step
    accuracy: Optional[float]  # addition task, when evaluated
    lr: float
    grad_norm: float
    ms: float
    loss_scale: Optional[float]  # None without a loss scaler
    skipped: int  # steps skipped so far (non-finite loss or gradient)
    was_skipped: bool


@dataclass
class TrainResult:
    """What trit.train returns."""
    step: int
    loss: float
    val_loss: Optional[float]
    accuracy: Optional[float]
    seconds: float
    interrupted: bool  # stopped early (a callback returned False, a signal, or an exception)
    num_params: int
    out: str  # the run directory: trit.load(result.out)


def _flag_value(v):
    if isinstance(v, bool):
        return "1" if v else "0"
    return os.fspath(v) if isinstance(v, os.PathLike) else str(v)


def train(callback=None, **flags):
    """Trains as `trit train` would with these flags (names with underscores: total_batch_tokens=...,
    values as on the command line or Python numbers/bools). callback(info: StepInfo) runs after every
    step; returning False stops the run after that step with a checkpoint. An exception in the
    callback stops the run the same way and is raised again when it has stopped."""
    cfg = check_ptr(lib.trit_train_config_new())
    try:
        for key, value in flags.items():
            check(lib.trit_train_config_set(cfg, key.replace("_", "-").encode(), _flag_value(value).encode()))
        raised = []

        def on_step(_ctx, p):
            if callback is None or raised:
                return
            i = p.contents
            info = StepInfo(i.step, i.steps, i.loss, _nan_none(i.val_loss), _nan_none(i.accuracy), i.lr, i.grad_norm,
                            i.ms, _nan_none(i.loss_scale), i.skipped, bool(i.was_skipped))
            try:
                if callback(info) is False:
                    lib.trit_train_request_stop()
            except BaseException as e:  # noqa: B902 - re-raised below, once the run has stopped cleanly
                raised.append(e)
                lib.trit_train_request_stop()

        hooks = TrainHooks(ON_STEP(on_step), None, ctypes.cast(None, ON_GRADS))
        res = CTrainResult()
        status = lib.trit_train_run(cfg, ctypes.byref(hooks), ctypes.byref(res))
        if raised:
            raise raised[0]
        check(status)
        return TrainResult(res.step, res.loss, _nan_none(res.val_loss), _nan_none(res.accuracy), res.seconds,
                            bool(res.interrupted), res.num_params, res.out.decode())
    finally:
        lib.trit_train_config_free(cfg)


def _spec(fmt, group=None, affine=False, double_quant=False, stochastic=False, seed=1):
    dt = lib.trit_quant_format_dtype(str(fmt).encode())
    if not lib.trit_quant_format_name(dt):
        raise _lib.error(1)
    spec = lib.trit_quant_spec_default(dt)
    if group is not None:
        spec.group_size = int(group)
    spec.scheme = QSCHEME_AFFINE if affine else 0
    spec.double_quant_block = 256 if double_quant else 0
    spec.stochastic = bool(stochastic)
    spec.seed = int(seed)
    return spec


def quantize(run, format, out=None, group=None, affine=False, double_quant=False, stochastic=False, seed=1,
             embeddings=False, head=None):
    """Post-training quantization of a run, as `trit quantize RUN --format F` does: writes the run
    directory `out` (default RUN-F) that trit.load, `trit eval` and `trit sample` read, with RUN's
    tokenizer.bin and val.bin. Returns the report (tensors, parameters and bytes quantized)."""
    run = os.fspath(run)
    if embeddings and head:
        raise ValueError("give embeddings=True (the blocks' format) or head=F, not both")
    spec = _spec(format, group, affine, double_quant, stochastic, seed)
    hspec = _spec(head) if head else None
    out = os.fspath(out) if out else f"{run.rstrip('/')}-{format}" + (f"-{head}" if head else "")
    m = check_ptr(lib.trit_checkpoint_load_model(run.encode(), None))
    try:
        r = QuantizeReport()
        which = QUANTIZE_BLOCKS | (QUANTIZE_EMBEDDING if embeddings else 0)
        check(lib.trit_gpt_quantize(m, ctypes.byref(spec), which, ctypes.byref(r)))
        if hspec is not None:
            h = QuantizeReport()
            check(lib.trit_gpt_quantize(m, ctypes.byref(hspec), QUANTIZE_EMBEDDING, ctypes.byref(h)))
            r.tensors += h.tensors
            r.params_quantized += h.params_quantized
            r.bytes_quantized += h.bytes_quantized
            r.bytes_total = h.bytes_total
        _write_run(run, out, m)
    finally:
        lib.trit_gpt_free(m)
    return {"out": out, "tensors": r.tensors, "params_quantized": r.params_quantized,
            "params_total": r.params_total, "bytes_quantized": r.bytes_quantized, "bytes_total": r.bytes_total}


def _write_run(run, out, m):
    made = not os.path.isdir(out)
    os.makedirs(out, exist_ok=True)
    written = []
    try:
        path = os.path.join(out, "model.safetensors")
        check(lib.trit_checkpoint_save_model(m, path.encode(), 0))
        written.append(path)
        sources = [os.path.join(run, "tokenizer.bin") if os.path.isdir(run) else None,
                   _val_shard(run) if os.path.isdir(run) else None]
        for src, name in zip(sources, ("tokenizer.bin", "val.bin")):
            if src and os.path.exists(src):
                dst = os.path.join(out, name)
                shutil.copyfile(src, dst + ".tmp")
                os.replace(dst + ".tmp", dst)
                written.append(dst)
    except BaseException:
        for p in written:
            os.unlink(p)
        if made:
            os.rmdir(out)
        raise
