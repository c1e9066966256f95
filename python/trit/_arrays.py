"""NumPy arrays over trit's memory, without copies."""
import ctypes

import numpy as np

from ._lib import TensorHead, lib, libc

# trit dtype names (trit_dtype_name) with a NumPy equivalent; bf16 is shown as its raw uint16 bits.
NUMPY_DTYPES = {"f32": np.float32, "f64": np.float64, "f16": np.float16, "bf16": np.uint16, "i32": np.int32,
                "i64": np.int64, "i8": np.int8, "u8": np.uint8}


def tensor_view(tensor_ptr, owner):
    """A writable NumPy view of a trit_tensor's elements; it keeps `owner` (what frees the memory) alive."""
    t = ctypes.cast(tensor_ptr, ctypes.POINTER(TensorHead)).contents
    name = lib.trit_dtype_name(t.dtype).decode()
    if name not in NUMPY_DTYPES:
        raise TypeError(f"trit dtype {name} has no NumPy equivalent (quantized codes): dequantize it first")
    dt = np.dtype(NUMPY_DTYPES[name])
    shape = tuple(t.shape[i] for i in range(t.ndim))
    strides = tuple(t.strides[i] * dt.itemsize for i in range(t.ndim))
    # Bytes from the first to one past the last element (strides are non-negative in trit).
    span = dt.itemsize * (1 + sum((n - 1) * s for n, s in zip(shape, t.strides[: t.ndim]) if n > 0))
    if any(n == 0 for n in shape):
        span = 0
    addr = t.data + t.offset * dt.itemsize
    buf = (ctypes.c_char * max(span, 1)).from_address(addr)
    buf._trit_owner = owner  # the ctypes buffer is the array's base: it holds the owner alive
    return np.ndarray(shape, dtype=dt, buffer=buf, strides=strides)


class _Malloced:
    """Frees a block trit malloc'ed when the last array over it is gone."""

    def __init__(self, addr):
        self.addr = addr

    def __del__(self, free=libc.free):  # bound now: module globals may be gone at interpreter exit
        free(self.addr)


def owned_int32(ptr, n):
    """An int32 array over n values trit malloc'ed at ptr, freed when the array (and its views) go."""
    if n == 0:
        libc.free(ptr)
        return np.zeros(0, dtype=np.int32)
    addr = ctypes.cast(ptr, ctypes.c_void_p).value
    buf = (ctypes.c_int32 * n).from_address(addr)
    buf._trit_owner = _Malloced(addr)
    return np.ndarray((n,), dtype=np.int32, buffer=buf)


def int32_in(values):
    """values as a C-contiguous int32 array: the same object (no copy) when it already is one."""
    arr = np.ascontiguousarray(values, dtype=np.int32)
    if arr.ndim != 1:
        raise ValueError(f"expected a 1-D sequence of token ids, got shape {arr.shape}")
    return arr, arr.ctypes.data_as(ctypes.POINTER(ctypes.c_int32))
