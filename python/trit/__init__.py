"""trit from Python: a ctypes binding of libtrit.so (the C library of the `trit` command).

    import trit
    result = trit.train(data="input.txt", steps=200, out="run", callback=lambda info: print(info.loss))
    run = trit.load("run")
    run.eval_loss(batches=10); run.sample("ROMEO:", max_tokens=50, temperature=0.8)
    weights = run.tensors()                      # name -> NumPy view of trit's memory (no copy)
    tok = trit.Tokenizer("run"); ids = tok.encode("hello"); tok.decode(ids)
    trit.quantize("run", format="int8", out="run-int8")

Failures raise trit.TritError (ValueError / OSError subclasses by kind) with trit's message.
"""
from ._lib import TritError, TritIOError, TritValueError, lib
from .run import Run, load
from .tokenizer import Tokenizer
from .train import StepInfo, TrainResult, quantize, train

__version__ = "0.1.0"


def library_version():
    """The version of the libtrit.so loaded (trit_version())."""
    return lib.trit_version().decode()


def library_path():
    """The path of the libtrit.so loaded."""
    return lib._name


def set_threads(n):
    """Threads trit's kernels use; 0 or less: TRIT_THREADS or all cores. Results do not depend on it."""
    lib.trit_threads_set(int(n))


def get_threads():
    return int(lib.trit_threads_get())


__all__ = ["Run", "StepInfo", "Tokenizer", "TrainResult", "TritError", "TritIOError", "TritValueError", "__version__",
           "get_threads", "library_path", "library_version", "load", "quantize", "set_threads", "train"]
