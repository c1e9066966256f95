"""trit.Tokenizer: trit's char and byte-level BPE tokenizers (include/trit/tokenizer.h)."""
import ctypes
import os


from . import _lib
from ._arrays import int32_in, owned_int32
from ._lib import check, check_ptr, lib


def _as_bytes(text):
    if isinstance(text, str):
        return text.encode("utf-8")
    return bytes(text)


class Tokenizer:
    """A tokenizer: Tokenizer(path) loads a tokenizer.bin (or a run directory's); Tokenizer.train_bpe
    and Tokenizer.train_char make one from text. encode gives an int32 NumPy array (trit's own
    buffer, not a copy); decode takes any int sequence (an int32 array is read in place)."""

    def __init__(self, path=None, _handle=None):
        if _handle is not None:
            self._h = _handle
            return
        if path is None:
            raise TypeError("Tokenizer(path): give a tokenizer.bin or a run directory")
        path = os.fspath(path)
        if os.path.isdir(path):
            path = os.path.join(path, "tokenizer.bin")
        self._h = check_ptr(lib.trit_tokenizer_load(path.encode()))

    @classmethod
    def train_bpe(cls, text, vocab_size):
        data = _as_bytes(text)
        return cls(_handle=check_ptr(lib.trit_tokenizer_train_bpe(data, len(data), int(vocab_size))))

    @classmethod
    def train_char(cls, text):
        data = _as_bytes(text)
        return cls(_handle=check_ptr(lib.trit_tokenizer_train_char(data, len(data))))

    def __del__(self, free=lib.trit_tokenizer_free):
        h = getattr(self, "_h", None)
        if h:
            free(h)
            self._h = None

    @property
    def vocab_size(self):
        return int(lib.trit_tokenizer_vocab_size(self._h))

    @property
    def kind(self):
        return lib.trit_tokenizer_kind_name(lib.trit_tokenizer_get_kind(self._h)).decode()

    def encode(self, text):
        data = _as_bytes(text)
        ids = ctypes.POINTER(ctypes.c_int32)()
        n = ctypes.c_size_t()
        check(lib.trit_tokenizer_encode(self._h, data, len(data), ctypes.byref(ids), ctypes.byref(n)))
        return owned_int32(ids, n.value)

    def decode_bytes(self, ids):
        arr, ptr = int32_in(ids)
        out = ctypes.c_void_p()
        n = ctypes.c_size_t()
        check(lib.trit_tokenizer_decode(self._h, ptr, arr.size, ctypes.byref(out), ctypes.byref(n)))
        try:
            return ctypes.string_at(out, n.value)
        finally:
            _lib.libc.free(out)

    def decode(self, ids, errors="replace"):
        return self.decode_bytes(ids).decode("utf-8", errors)

    def token_bytes(self, token):
        p = ctypes.c_void_p()
        n = ctypes.c_size_t()
        check(lib.trit_tokenizer_token_bytes(self._h, int(token), ctypes.byref(p), ctypes.byref(n)))
        return ctypes.string_at(p, n.value)

    def save(self, path):
        check(lib.trit_tokenizer_save(self._h, os.fspath(path).encode()))

    def __len__(self):
        return self.vocab_size

    def __repr__(self):
        return f"trit.Tokenizer({self.kind}, vocab_size={self.vocab_size})"


