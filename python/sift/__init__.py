"""sift: llama.cpp's samplers (the same token streams for the same seeds), fast grammar and
JSON-schema constraints, and GGUF tokenizers, from Python over libsift.so.

    import numpy as np, sift
    chain = sift.Chain.from_spec("top_k(40);temp(0.8);dist(42)")
    token = chain.sample(logits)            # logits: float32 (n_vocab,) -> int
    tokens = chain.sample(batch)            # (batch, n_vocab) -> one id per row

docs/python.md has the whole API; libsift.so is found through SIFT_LIBRARY or the loader.
"""
from ._lib import SiftError, ffi as _ffi, lib as _clib
from .adapters import HFLogitsProcessor, LlamaCppLogitsProcessor
from .chain import Candidates, Chain
from .vocab import Grammar, Model, Vocab

__all__ = ["Chain", "Candidates", "Vocab", "Grammar", "Model", "HFLogitsProcessor", "LlamaCppLogitsProcessor",
           "SiftError", "library_version"]
__version__ = "0.1.0"


def library_version():
    """The version of the libsift.so this package loaded."""
    return _ffi.string(_clib.sift_version()).decode()
