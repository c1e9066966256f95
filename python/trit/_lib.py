"""libtrit.so through ctypes: finding the library, the C prototypes used, the structs mirrored
from include/trit/*.h (tests/test_abi.py checks their fields against the headers), and errors.

Where the library is looked for, first found wins:
  1. $TRIT_LIBRARY, a path to libtrit.so;
  2. the copy `pip install ./python` bundled in this package;
  3. the system's loader (libtrit.so.MAJOR.MINOR after `cmake --install` and ldconfig);
  4. pkg-config's libdir of trit (`cmake --install` to another prefix, PKG_CONFIG_PATH set).
"""
import ctypes
import os
import subprocess
from ctypes import (POINTER, Structure, c_bool, c_char, c_char_p, c_double, c_int, c_int32, c_int64, c_size_t,
                    c_uint64, c_void_p)

__all__ = ["lib", "libc", "TritError", "check", "check_ptr", "take_string"]

SOVERSION = "0.1"  # the SONAME's version (cmake/install.cmake): the ABI this package mirrors


def _candidates():
    env = os.environ.get("TRIT_LIBRARY")
    if env:
        yield env
        return
    here = os.path.dirname(os.path.abspath(__file__))
    bundled = os.path.join(here, "libtrit.so")
    if os.path.exists(bundled):
        yield bundled
    yield f"libtrit.so.{SOVERSION}"
    try:
        libdir = subprocess.run(["pkg-config", "--variable=libdir", "trit"], capture_output=True, text=True,
                                timeout=10).stdout.strip()
        if libdir:
            yield os.path.join(libdir, f"libtrit.so.{SOVERSION}")
    except (OSError, subprocess.SubprocessError):
        pass


def _load():
    tried = []
    for path in _candidates():
        try:
            return ctypes.CDLL(path)
        except OSError as e:
            tried.append(f"{path}: {e}")
    raise ImportError("trit: cannot load libtrit.so; build it (cmake --build build) and set TRIT_LIBRARY to "
                      "build/libtrit.so, or `cmake --install` it. Tried:\n  " + "\n  ".join(tried))


lib = _load()
libc = ctypes.CDLL(None)
libc.free.argtypes = [c_void_p]
libc.free.restype = None

# ---- status and errors ----------------------------------------------------------------------

STATUS_NAMES = ["ok", "invalid", "shape", "dtype", "nomem", "io", "format", "numeric", "state", "unsupported",
                "range"]


class TritError(RuntimeError):
    """A trit call failed: str(e) is trit's message (trit_last_error), e.status its status name."""

    def __init__(self, message, status="invalid"):
        super().__init__(message)
        self.status = status


class TritValueError(TritError, ValueError):
    """Bad argument, shape, dtype or range."""


class TritIOError(TritError, OSError):
    """File system error, or a file that is not what it claims to be."""


_BY_STATUS = {"invalid": TritValueError, "shape": TritValueError, "dtype": TritValueError, "range": TritValueError,
              "io": TritIOError, "format": TritIOError, "nomem": MemoryError}


def error(status=None):
    """The exception for trit's last error on this thread."""
    msg = lib.trit_last_error().decode("utf-8", "replace") or "trit call failed"
    if status is None:  # a call that returned NULL: trit keeps only the message
        return TritError(msg, "failed")
    name = STATUS_NAMES[status] if 0 <= status < len(STATUS_NAMES) else "invalid"
    cls = _BY_STATUS.get(name, TritError)
    return cls(msg) if cls is MemoryError else cls(msg, name)


def check(status):
    if status != 0:
        raise error(status)


def check_ptr(ptr):
    if not ptr:
        raise error()
    return ptr


def take_string(ptr):
    """A malloc'ed char* from trit as str, freed."""
    if not ptr:
        raise error()
    try:
        return ctypes.string_at(ptr).decode("utf-8", "replace")
    finally:
        libc.free(ptr)


# ---- structs (mirrors of the headers; see tests/test_abi.py) ----------------------------------

MAX_DIMS = 8  # TRIT_MAX_DIMS
PATH_MAX = 1024  # TRIT_PATH_MAX


NAME_MAX = 96  # TRIT_NAME_MAX


class TensorHead(Structure):
    """The leading fields of trit_tensor (include/trit/tensor.h): a NumPy view and the name."""
    _fields_ = [("dtype", c_int), ("ndim", c_int), ("shape", c_int64 * MAX_DIMS), ("strides", c_int64 * MAX_DIMS),
                ("data", c_void_p), ("offset", c_int64), ("grad", c_void_p), ("flags", ctypes.c_uint32),
                ("name", c_char * NAME_MAX)]


class StepInfo(Structure):
    _fields_ = [("step", c_int64), ("steps", c_int64), ("loss", c_double), ("val_loss", c_double),
                ("accuracy", c_double), ("lr", c_double), ("grad_norm", c_double), ("ms", c_double),
                ("loss_scale", c_double), ("skipped", c_int64), ("was_skipped", c_bool),
                ("comm_ms", c_double), ("comm_bytes", c_double), ("bubble", c_double), ("bubble_ideal", c_double)]


ON_STEP = ctypes.CFUNCTYPE(None, c_void_p, POINTER(StepInfo))
ON_GRADS = ctypes.CFUNCTYPE(None, c_void_p, c_int64, c_void_p, c_int)


class TrainHooks(Structure):
    _fields_ = [("on_step", ON_STEP), ("ctx", c_void_p), ("on_grads", ON_GRADS)]


class TrainResult(Structure):
    _fields_ = [("step", c_int64), ("loss", c_double), ("val_loss", c_double), ("accuracy", c_double),
                ("seconds", c_double), ("interrupted", c_bool), ("num_params", c_int64),
                ("peak_rss_setup", c_size_t), ("peak_rss_base", c_size_t), ("peak_rss_steps", c_size_t), ("out", c_char * PATH_MAX)]


class SampleConfig(Structure):
    _fields_ = [("temperature", c_double), ("top_k", c_int64), ("top_p", c_double), ("seed", c_uint64),
                ("max_tokens", c_int64), ("kv_cache", c_int)]


class QuantSpec(Structure):
    _fields_ = [("dtype", c_int), ("group_size", c_int64), ("scheme", c_int), ("double_quant_block", c_int64),
                ("stochastic", c_bool), ("seed", c_uint64), ("stream", c_uint64)]


class QuantizeReport(Structure):
    _fields_ = [("tensors", c_int64), ("params_quantized", c_int64), ("params_total", c_int64),
                ("bytes_quantized", c_size_t), ("bytes_total", c_size_t)]


# The ctypes copies above against the library's own sizes: a field added in C and not here
# would have the library write past these buffers.
lib.trit_abi_struct_size.restype = c_size_t
lib.trit_abi_struct_size.argtypes = [ctypes.c_char_p]
for _cls, _name in ((TensorHead, "trit_tensor head"), (StepInfo, "trit_train_step_info"),
                    (TrainHooks, "trit_train_hooks"), (TrainResult, "trit_train_result"),
                    (SampleConfig, "trit_sample_config"), (QuantSpec, "trit_quant_spec"),
                    (QuantizeReport, "trit_quantize_report")):
    _want = lib.trit_abi_struct_size(_name.encode())
    # TensorHead is trit_tensor's leading fields only: up to the end of its name, no tail padding.
    _have = TensorHead.name.offset + TensorHead.name.size if _cls is TensorHead else ctypes.sizeof(_cls)
    if _want != _have:
        raise ImportError(f"trit: {_cls.__name__} here is {_have} bytes but libtrit's {_name} is "
                          f"{_want}: python/trit/_lib.py does not match include/trit (rebuild or update it)")

QUANTIZE_BLOCKS = 1  # TRIT_QUANTIZE_BLOCKS
QUANTIZE_EMBEDDING = 2  # TRIT_QUANTIZE_EMBEDDING
QSCHEME_AFFINE = 1  # TRIT_QSCHEME_AFFINE

# ---- prototypes ---------------------------------------------------------------------------------


def _proto(name, restype, *argtypes):
    f = getattr(lib, name)
    f.restype = restype
    f.argtypes = list(argtypes)


P = c_void_p  # opaque handles: trit_gpt*, trit_tokenizer*, trit_train_config*, trit_tensor*
I32P = POINTER(c_int32)
_proto("trit_version", c_char_p)
_proto("trit_last_error", c_char_p)
_proto("trit_clear_error", None)
_proto("trit_threads_set", None, c_int)
_proto("trit_threads_get", c_int)
_proto("trit_dtype_name", c_char_p, c_int)
_proto("trit_dtype_size", c_size_t, c_int)
# tokenizer
_proto("trit_tokenizer_load", P, c_char_p)
_proto("trit_tokenizer_save", c_int, P, c_char_p)
_proto("trit_tokenizer_free", None, P)
_proto("trit_tokenizer_train_char", P, c_void_p, c_size_t)
_proto("trit_tokenizer_train_bpe", P, c_void_p, c_size_t, c_int32)
_proto("trit_tokenizer_get_kind", c_int, P)
_proto("trit_tokenizer_kind_name", c_char_p, c_int)
_proto("trit_tokenizer_vocab_size", c_int32, P)
_proto("trit_tokenizer_encode", c_int, P, c_void_p, c_size_t, POINTER(I32P), POINTER(c_size_t))
_proto("trit_tokenizer_decode", c_int, P, I32P, c_size_t, POINTER(c_void_p), POINTER(c_size_t))
_proto("trit_tokenizer_token_bytes", c_int, P, c_int32, POINTER(c_void_p), POINTER(c_size_t))
# models and checkpoints
_proto("trit_checkpoint_load_as_trained", P, c_char_p, POINTER(c_int64))
_proto("trit_checkpoint_load_model", P, c_char_p, POINTER(c_int64))
_proto("trit_checkpoint_save_model", c_int, P, c_char_p, c_int64)
_proto("trit_checkpoint_config_to_json", c_void_p, P)
_proto("trit_gpt_get_config", P, P)
_proto("trit_gpt_free", None, P)
_proto("trit_gpt_num_tensors", c_int, P)
_proto("trit_gpt_tensor", P, P, c_int)
_proto("trit_gpt_num_params", c_int64, P)
_proto("trit_eval_loss", c_int, P, c_char_p, c_int64, c_int64, c_int64, POINTER(c_double), POINTER(c_int64))
_proto("trit_sample_config_default", SampleConfig)
_proto("trit_sample_config_check", c_int, POINTER(SampleConfig))
_proto("trit_generate", c_int, P, I32P, c_int64, POINTER(SampleConfig), I32P, POINTER(c_int64), c_void_p, c_void_p)
# training
_proto("trit_train_config_new", P)
_proto("trit_train_config_free", None, P)
_proto("trit_train_config_set", c_int, P, c_char_p, c_char_p)
_proto("trit_train_config_to_json", c_void_p, P)
_proto("trit_train_run", c_int, P, POINTER(TrainHooks), POINTER(TrainResult))
_proto("trit_train_request_stop", None)
_proto("trit_train_run_info", c_int, c_char_p, P, POINTER(c_int64))
# quantization
_proto("trit_quant_format_dtype", c_int, c_char_p)
_proto("trit_quant_format_name", c_char_p, c_int)
_proto("trit_quant_spec_default", QuantSpec, c_int)
_proto("trit_gpt_quantize", c_int, P, POINTER(QuantSpec), ctypes.c_uint, POINTER(QuantizeReport))
