"""trit.load(DIR): a trained run's model (as `trit eval` and `trit sample` see it) and tokenizer."""
import ctypes
import json
import os
import weakref

import numpy as np

from ._arrays import int32_in, tensor_view
from ._lib import TensorHead, check, check_ptr, lib, take_string
from .tokenizer import Tokenizer


def _val_shard(path):
    """The run's val.bin, or that of the `trit prepare` directory it trained on (as `trit eval`)."""
    own = os.path.join(path, "val.bin")
    if os.path.exists(own):
        return own
    cfg = lib.trit_train_config_new()
    try:
        if cfg and lib.trit_train_run_info(path.encode(), cfg, None) == 0:
            data = json.loads(take_string(lib.trit_train_config_to_json(cfg))).get("data", "")
            if data and os.path.isdir(data) and os.path.exists(os.path.join(data, "val.bin")):
                return os.path.join(data, "val.bin")
    finally:
        lib.trit_train_config_free(cfg)
        lib.trit_clear_error()
    return None


class Run:
    """A model loaded from a run directory or a .safetensors file (trit.load)."""

    def __init__(self, path):
        self.path = os.fspath(path)
        step = ctypes.c_int64(0)
        self._m = check_ptr(lib.trit_checkpoint_load_as_trained(self.path.encode(), ctypes.byref(step)))
        self.step = step.value
        self.config = json.loads(take_string(lib.trit_checkpoint_config_to_json(lib.trit_gpt_get_config(self._m))))
        tok = os.path.join(self.path, "tokenizer.bin") if os.path.isdir(self.path) else None
        self.tokenizer = Tokenizer(tok) if tok and os.path.exists(tok) else None
        self._views = []  # weak references to the buffers under tensors()' arrays

    def close(self):
        """Frees the model now; refused while a NumPy view from tensors() is still alive (drop the
        views first, or let the last of them free the model)."""
        alive = sum(1 for r in self._views if r() is not None)
        if alive:
            raise ValueError(f"{alive} NumPy views of this run's tensors are alive: delete them before close()")
        self._free()

    def _free(self, free=lib.trit_gpt_free):
        m = getattr(self, "_m", None)
        if m:
            free(m)
            self._m = None

    def __del__(self):
        self._free()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def _model(self):
        if not self._m:
            raise ValueError("this trit run was closed")
        return self._m

    @property
    def num_params(self):
        return int(lib.trit_gpt_num_params(self._model()))

    def tensors(self):
        """name -> NumPy view of each parameter (f32 as trained; writing to a view changes the model)."""
        m = self._model()
        self._views = [r for r in self._views if r() is not None]
        out = {}
        for i in range(lib.trit_gpt_num_tensors(m)):
            t = lib.trit_gpt_tensor(m, i)
            name = ctypes.cast(t, ctypes.POINTER(TensorHead)).contents.name.decode()
            out[name] = tensor_view(t, self)
            self._views.append(weakref.ref(out[name].base))
        return out

    def eval_loss(self, batches=20, batch=8, seq=None, data=None):
        """Mean loss over `batches` batches of batch x seq windows from the start of a token shard
        (data: a shard or a `trit prepare` directory; default the run's val.bin)."""
        shard = data
        if shard is not None and os.path.isdir(shard):
            shard = os.path.join(shard, "val.bin")
        if shard is None:
            shard = _val_shard(self.path) if os.path.isdir(self.path) else None
            if shard is None:
                raise FileNotFoundError(f"found no val.bin for '{self.path}': pass data= with a token shard")
        T = int(seq) if seq is not None else int(self.config["seq_len"])
        loss = ctypes.c_double()
        check(lib.trit_eval_loss(self._model(), os.fspath(shard).encode(), int(batches), int(batch), T,
                                 ctypes.byref(loss), None))
        return loss.value

    def generate(self, tokens, max_tokens=256, temperature=0.8, top_k=0, top_p=1.0, seed=1):
        """New token ids (int32 array) after the prompt ids `tokens` (read in place when int32)."""
        arr, ptr = int32_in(tokens)
        if arr.size == 0:
            raise ValueError("generate needs at least one prompt token")
        sc = lib.trit_sample_config_default()
        sc.temperature, sc.top_k, sc.top_p = float(temperature), int(top_k), float(top_p)
        sc.seed, sc.max_tokens = int(seed), int(max_tokens)
        check(lib.trit_sample_config_check(ctypes.byref(sc)))
        out = np.zeros(max(int(max_tokens), 1), dtype=np.int32)
        n = ctypes.c_int64()
        check(lib.trit_generate(self._model(), ptr, arr.size, ctypes.byref(sc),
                                out.ctypes.data_as(ctypes.POINTER(ctypes.c_int32)), ctypes.byref(n), None, None))
        return out[: n.value]

    def sample(self, prompt="", max_tokens=256, temperature=0.8, top_k=0, top_p=1.0, seed=1):
        """The text generated after `prompt` (not included), as `trit sample` makes it."""
        if self.tokenizer is None:
            raise ValueError(f"'{self.path}' has no tokenizer.bin to turn text into tokens: use generate()")
        ids = self.tokenizer.encode(prompt) if prompt else None
        if ids is None or ids.size == 0:
            nl = self.tokenizer.encode("\n")  # `trit sample`'s start without a prompt
            ids = nl if nl.size == 1 else np.zeros(1, dtype=np.int32)
        return self.tokenizer.decode(self.generate(ids, max_tokens, temperature, top_k, top_p, seed))

    def save(self, path, step=None):
        """Writes the model (with any changes made through tensors()) as a .safetensors checkpoint."""
        check(lib.trit_checkpoint_save_model(self._model(), os.fspath(path).encode(),
                                             int(self.step if step is None else step)))

    def __repr__(self):
        c = self.config
        return (f"trit.Run('{self.path}', step={self.step}, layers={c.get('n_layer')}, dim={c.get('n_embd')}, "
                f"params={self.num_params})")


def load(path):
    """A run directory (or .safetensors file) as trit.Run; raises trit.TritError with trit's message."""
    return Run(path)

