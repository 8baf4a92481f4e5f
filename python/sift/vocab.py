"""Vocabularies and tokenizers (from a GGUF), grammars and JSON schemas, and a small model
runner for tests and examples.

Vocab(path) loads the tokenizer of any GGUF (a model, or a vocabulary-only file): tokenize,
detokenize, token pieces, special ids. Grammar(vocab, gbnf) and Grammar.from_json_schema()
make sift's grammar sampler for that vocabulary; pass it to Chain.sample(grammar=...) or
use it in the adapters. Model(path) runs sift's own llama-family forward pass, enough to
drive the samplers end to end (it is not a serving engine).
"""
import json

import numpy as np

from ._lib import ffi, lib, new_error, raise_error, TOKEN_NULL


class Vocab:
    """A GGUF's vocabulary and tokenizer."""

    def __init__(self, path=None, _ptr=None, _owner=None):
        if _ptr is None:
            err = new_error()
            p = lib.sift_vocab_load(str(path).encode(), err)
            if p == ffi.NULL:
                raise_error(err, f"vocabulary {path}")
            self._ptr = ffi.gc(p, lib.sift_vocab_free)
        else:
            self._ptr = _ptr  # borrowed from a model, which _owner keeps alive
        self._owner = _owner
        self._view = ffi.new("sift_vocab_view *")
        if lib.sift_vocab_view_get(self._ptr, self._view) != 0:
            raise RuntimeError("sift_vocab_view_get failed")

    @property
    def n_tokens(self):
        return int(lib.sift_vocab_n_tokens(self._ptr))

    def __len__(self):
        return self.n_tokens

    @property
    def bos(self):
        return int(lib.sift_vocab_bos(self._ptr))

    @property
    def eos(self):
        return int(lib.sift_vocab_eos(self._ptr))

    @property
    def eot(self):
        """EOT, or EOS when the vocabulary has no EOT (what infill() ends with)."""
        t = int(lib.sift_vocab_eot(self._ptr))
        return t if t != TOKEN_NULL else self.eos

    @property
    def suppress_tokens(self):
        """The ids the model asks never to be sampled (tokenizer.ggml.suppress_tokens, in the
        file's order, ids outside the vocabulary dropped), as an int32 numpy array. A chain
        made with Chain.from_params(vocab=...) bans them, as llama.cpp's common_sampler_init
        does."""
        n = ffi.new("int32_t *")
        p = lib.sift_vocab_suppress_tokens(self._ptr, n)
        if p == ffi.NULL or n[0] == 0:
            return np.empty(0, dtype=np.int32)
        return np.frombuffer(ffi.buffer(p, 4 * n[0]), dtype=np.int32).copy()

    def is_eog(self, token):
        return bool(lib.sift_vocab_is_eog(self._ptr, int(token)))

    def tokenize(self, text, add_special=True, parse_special=False):
        """Token ids of text (str or bytes) as an int32 numpy array."""
        b = text.encode() if isinstance(text, str) else bytes(text)
        cap = len(b) + 8
        while True:
            out = np.empty(cap, dtype=np.int32)
            n = lib.sift_tokenize(self._ptr, b, len(b), ffi.cast("sift_token *", ffi.from_buffer(out)), cap, add_special, parse_special)
            if n == -(2**31):
                raise ValueError("tokenize failed (text too long or out of memory)")
            if n >= 0:
                return out[:n].copy()
            cap = -n

    def detokenize(self, tokens, remove_special=False, unparse_special=False):
        """The text of a token sequence (bytes decoded as UTF-8, invalid bytes replaced)."""
        return self.detokenize_bytes(tokens, remove_special, unparse_special).decode("utf-8", "replace")

    def detokenize_bytes(self, tokens, remove_special=False, unparse_special=False):
        t = np.ascontiguousarray(np.asarray(tokens, dtype=np.int32))
        cap = 16 * len(t) + 16
        while True:
            buf = ffi.new("char[]", cap)
            n = lib.sift_detokenize(self._ptr, ffi.cast("sift_token *", ffi.from_buffer(t)), len(t), buf, cap, remove_special, unparse_special)
            if n == -(2**31):
                raise ValueError("detokenize: a token id is out of range")
            if n >= 0:
                return ffi.buffer(buf, n)[:]
            cap = -n

    def piece(self, token):
        """The bytes one token stands for (special tokens as their text)."""
        t = int(token)
        if not 0 <= t < self.n_tokens:
            raise IndexError(f"token {t} is not in [0, {self.n_tokens})")
        return ffi.buffer(self._view.piece[t], self._view.piece_len[t])[:]


class Grammar:
    """sift's grammar sampler for a vocabulary: a GBNF grammar (llama.cpp's syntax) or a
    JSON schema. It keeps its parse state: accept() advances it (Chain.sample(grammar=)
    and the adapters do that), reset() starts over."""

    def __init__(self, vocab, gbnf, root="root"):
        err = new_error()
        p = lib.sift_sampler_init_grammar(vocab._view, gbnf.encode(), root.encode() if root else ffi.NULL, err)
        if p == ffi.NULL:
            raise_error(err, "grammar")
        self._ptr = ffi.gc(p, lib.sift_sampler_free)
        self.vocab = vocab
        self.gbnf = gbnf

    @classmethod
    def from_json_schema(cls, vocab, schema, lenient=False):
        """schema: a dict or JSON text; lenient: ignore keywords that cannot be expressed
        (the grammar then accepts a superset) instead of failing on them."""
        text = schema if isinstance(schema, (str, bytes)) else json.dumps(schema)
        b = text.encode() if isinstance(text, str) else text
        err = new_error()
        g = lib.sift_json_schema_to_grammar(b, len(b), 1 if lenient else 0, err)
        if g == ffi.NULL:
            raise_error(err, "JSON schema")
        try:
            gbnf = ffi.string(g).decode()
        finally:
            lib.free(g)
        return cls(vocab, gbnf)

    def accept(self, token):
        lib.sift_sampler_accept(self._ptr, int(token))

    def reset(self):
        lib.sift_sampler_reset(self._ptr)

    def allows(self, token):
        return bool(lib.sift_grammar_sampler_allows(self._ptr, int(token)))

    @property
    def status(self):
        """"active", "can_end", "done", "awaiting_trigger" or "dead"."""
        return ("active", "can_end", "done", "awaiting_trigger", "dead")[lib.sift_grammar_sampler_status(self._ptr)]

    def clone(self):
        g = Grammar.__new__(Grammar)
        p = lib.sift_sampler_clone(self._ptr)
        if p == ffi.NULL:
            raise MemoryError("sift_sampler_clone")
        g._ptr = ffi.gc(p, lib.sift_sampler_free)
        g.vocab, g.gbnf = self.vocab, self.gbnf
        return g


class Model:
    """A GGUF model on sift's CPU runtime: eval(tokens) appends tokens to the context and
    returns the last token's logits (float32, n_vocab; valid until the next eval)."""

    def __init__(self, path, n_ctx=0, n_threads=0):
        err = new_error()
        m = lib.sift_model_load(str(path).encode(), err)
        if m == ffi.NULL:
            raise_error(err, f"model {path}")
        self._model = ffi.gc(m, lib.sift_model_free)
        cp = lib.sift_context_default_params()
        cp.n_ctx = n_ctx
        if n_threads:
            cp.n_threads = cp.n_threads_batch = n_threads
        c = lib.sift_context_new(self._model, cp, err)
        if c == ffi.NULL:
            raise_error(err, "context")
        self._ctx = ffi.gc(c, lib.sift_context_free)
        self.vocab = Vocab(_ptr=lib.sift_model_vocab(self._model), _owner=self)
        self.n_vocab = int(lib.sift_model_n_vocab(self._model))
        self.n_ctx = int(lib.sift_n_ctx_seq(self._ctx))

    def eval(self, tokens):
        t = np.ascontiguousarray(np.asarray(tokens, dtype=np.int32).reshape(-1))
        if len(t) == 0:
            raise ValueError("eval needs at least one token")
        batch = ffi.new("sift_batch *")
        batch.n_tokens = len(t)
        batch.token = ffi.cast("sift_token *", ffi.from_buffer(t))
        err = new_error()
        if lib.sift_decode(self._ctx, batch, err) != 0:
            raise_error(err, "decode")
        p = lib.sift_get_logits_ith(self._ctx, -1)
        return np.frombuffer(ffi.buffer(p, self.n_vocab * 4), dtype=np.float32)

    def reset(self):
        lib.sift_kv_clear(self._ctx)
