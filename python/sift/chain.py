"""Chains: a spec string or llama.cpp-style parameters in, token ids out.

A Chain wraps one sift_chain. sample() takes logits as a numpy array or a torch tensor:
  shape (n_vocab,)         one step: fill, apply, accept; returns the token id (an int)
  shape (batch, n_vocab)   one step for each row, each row its own sequence: row i is
                           sampled by its own copy of the chain (made on the first batched
                           call, a clone of this chain as it was then), so penalties and
                           RNG streams do not mix between rows; returns one id per row
float32 C-contiguous CPU memory is read in place (no copy); anything else is converted
once. A chain built from a spec without n_vocab is made on the first sample(), when the
logits give the vocabulary size (the spec is checked at construction all the same).
"""
import numpy as np

from . import _lib
from ._lib import ffi, lib, new_error, raise_error

_PROBE_N_VOCAB = 1 << 20  # a spec's syntax is checked with this stand-in vocabulary size


def _as_rows(logits):
    """(array float32 C-contiguous, was_torch, torch_device) from numpy / torch / sequences."""
    mod = type(logits).__module__
    if mod.startswith("torch"):
        import torch  # optional: only when a tensor is passed

        t = logits.detach()
        dev = t.device
        if t.dtype != torch.float32 or t.device.type != "cpu" or not t.is_contiguous():
            t = t.to(device="cpu", dtype=torch.float32).contiguous()
        return t.numpy(), True, dev  # shares the tensor's memory
    a = np.asarray(logits)
    if a.dtype != np.float32 or not a.flags.c_contiguous:
        a = np.ascontiguousarray(a, dtype=np.float32)
    return a, False, None


def _float_ptr(a):
    return ffi.cast("const float *", ffi.from_buffer(a))


class Candidates:
    """A view of what the samplers left after the last sample(): the live entries
    [0, size) as numpy arrays that share the chain's memory (valid until the next call
    on the chain; copy them to keep them)."""

    def __init__(self, chain_ptr, owner):
        self._c = lib.sift_chain_candidates(chain_ptr)
        self._owner = owner  # keeps the chain alive while the view is

    def _arr(self, ptr, dtype):
        n = int(self._c.size)
        if n == 0 or ptr == ffi.NULL:
            return np.zeros(0, dtype=dtype)
        return np.frombuffer(ffi.buffer(ptr, n * np.dtype(dtype).itemsize), dtype=dtype)

    @property
    def size(self):
        return int(self._c.size)

    def __len__(self):
        return self.size

    @property
    def ids(self):
        return self._arr(self._c.id, np.int32)

    @property
    def logits(self):
        return self._arr(self._c.logit, np.float32)

    @property
    def probs(self):
        """The probabilities of the live entries (softmax of their logits, computed if the
        samplers did not leave them)."""
        lib.sift_candidates_probs(self._c)
        return self._arr(self._c.p, np.float32)

    @property
    def selected(self):
        """The chosen token id, or None."""
        i = int(self._c.selected)
        return int(self._c.id[i]) if 0 <= i < self.size else None

    @property
    def sorted(self):
        return bool(self._c.sorted)

    def __repr__(self):
        return f"<sift.Candidates size={self.size} sorted={self.sorted} selected={self.selected}>"


def _env(n_vocab, vocab, seed):
    env = ffi.new("sift_chain_env *")
    env.n_vocab = n_vocab
    env.vocab = vocab._view if vocab is not None else ffi.NULL
    env.eot = vocab.eot if vocab is not None else _lib.TOKEN_NULL
    env.default_seed = seed
    return env


# llama-server's field names (and llama.cpp's common_params_sampling names) -> the struct's
_PARAM_ALIASES = {
    "temperature": "temp",
    "typical_p": "typ_p",
    "repeat_penalty": "penalty_repeat",
    "repeat_last_n": "penalty_last_n",
    "frequency_penalty": "penalty_freq",
    "presence_penalty": "penalty_present",
    "mirostat_tau": "mirostat_tau",
    "mirostat_eta": "mirostat_eta",
}


class Chain:
    """A sampler chain. Make one with Chain.from_spec() or Chain.from_params()."""

    def __init__(self, ptr, n_vocab, keep=None, builder=None):
        self._ptr = ptr  # None until built (a spec without n_vocab)
        self._n_vocab = n_vocab
        self._keep = keep  # objects the C chain borrows (vocabulary, biases)
        self._builder = builder
        self._rows = []  # per-row chains of batched sample()

    # ---- construction -------------------------------------------------------------------
    @classmethod
    def from_spec(cls, spec, n_vocab=None, vocab=None, seed=0):
        """A chain from a chain spec, e.g. "top_k(40);temp(0.8);dist(42)" (README: chain
        spec grammar). vocab (a sift.Vocab) gives the token texts DRY string breakers and
        infill() need, and n_vocab; seed is the seed of samplers written without one."""
        if vocab is not None and n_vocab is None:
            n_vocab = vocab.n_tokens
        spec_b = spec.encode()

        def build(nv):
            err = new_error()
            p = lib.sift_chain_from_spec(spec_b, _env(nv, vocab, seed), err)
            if p == ffi.NULL:
                raise_error(err, "chain spec")
            return ffi.gc(p, lib.sift_chain_free)

        if n_vocab is None:
            build(_PROBE_N_VOCAB)  # errors now, not at the first sample()
            return cls(None, None, keep=(vocab,), builder=build)
        return cls(build(int(n_vocab)), int(n_vocab), keep=(vocab,))

    @classmethod
    def from_params(cls, n_vocab=None, vocab=None, samplers=None, logit_bias=None, n_ctx=0, **params):
        """The chain llama.cpp's common_sampler_init builds from common_params_sampling:
        keyword arguments by llama.cpp's field names or llama-server's (top_k=40, top_p=0.95,
        temp / temperature=0.8, seed=42, penalty_last_n / repeat_last_n, mirostat=2, ...).
        samplers: "top_k;temperature" or a list of names; logit_bias: {token: bias}
        (float("-inf") bans). Values obey the CLI's and the server's rules
        (sift_sampling_params_validate); -1 windows mean n_ctx."""
        p = lib.sift_sampling_default_params()
        err = new_error()
        for k, v in params.items():
            name = _PARAM_ALIASES.get(k, k)
            if name == "seed":
                v = _lib.DEFAULT_SEED if v is None or v == -1 else int(v)
            elif name == "dry_sequence_breakers":
                if len(v) > 16:
                    raise ValueError("dry_sequence_breakers: at most 16")
                for i, s in enumerate(v):
                    b = s.encode()
                    if not b or len(b) >= 64:
                        raise ValueError(f"dry_sequence_breakers[{i}]: 1..63 bytes")
                    ffi.memmove(p.dry_sequence_breakers[i], b + b"\0", len(b) + 1)
                p.n_dry_sequence_breakers = len(v)
                continue
            if name in ("samplers", "logit_bias", "n_dry_sequence_breakers", "n_samplers", "n_logit_bias") or not hasattr(
                p, name
            ):
                raise TypeError(f"unknown sampling parameter '{k}'")
            setattr(p, name, v)
        if samplers is not None:
            names = samplers if isinstance(samplers, str) else ";".join(samplers)
            if lib.sift_sampling_set_samplers(ffi.addressof(p), names.encode(), err) != 0:
                raise_error(err, "samplers")
        bias = None
        if logit_bias:
            items = list(logit_bias.items())
            bias = ffi.new("sift_logit_bias[]", len(items))
            for i, (t, b) in enumerate(items):
                bias[i].token = int(t)
                bias[i].bias = float(b)
            p.logit_bias = bias
            p.n_logit_bias = len(items)
        if vocab is not None and n_vocab is None:
            n_vocab = vocab.n_tokens
        nv = int(n_vocab) if n_vocab is not None else 0
        if lib.sift_sampling_params_validate(ffi.addressof(p), nv, err) != 0:
            raise ValueError(ffi.string(err.msg).decode())
        lib.sift_sampling_params_set_context(ffi.addressof(p), int(n_ctx))

        def build(nvocab):
            e = new_error()
            c = lib.sift_chain_from_params(ffi.addressof(p), _env(nvocab, vocab, 0), e)
            if c == ffi.NULL:
                raise_error(e, "sampling params")
            return ffi.gc(c, lib.sift_chain_free)

        keep = (vocab, bias, p)
        if n_vocab is None:
            build(_PROBE_N_VOCAB)
            return cls(None, None, keep=keep, builder=build)
        return cls(build(nv), nv, keep=keep)

    def _ensure(self, n_vocab):
        if self._ptr is None:
            self._ptr = self._builder(n_vocab)
            self._n_vocab = n_vocab
        elif n_vocab != self._n_vocab:
            raise ValueError(f"logits have {n_vocab} entries, the chain was made for {self._n_vocab}")
        return self._ptr

    # ---- sampling -----------------------------------------------------------------------
    def sample(self, logits, grammar=None, grammar_first=False):
        """Sample one token per row (see the module comment). grammar: a sift.Grammar kept
        outside the chain, applied llama.cpp's way (rejection: only when the chain's pick is
        refused) or first (grammar_first=True); it is advanced with the token."""
        a, was_torch, dev = _as_rows(logits)
        if a.ndim == 1:
            return self._sample_row(self._ensure(a.shape[0]), a, grammar, grammar_first)
        if a.ndim != 2:
            raise ValueError(f"logits must have shape (n_vocab,) or (batch, n_vocab), got {a.shape}")
        n_rows, nv = a.shape
        base = self._ensure(nv)
        if grammar is not None and not isinstance(grammar, (list, tuple)):
            raise ValueError("a batch takes one grammar per row (a list), or none")
        while len(self._rows) < n_rows:
            c = lib.sift_chain_clone(base)
            if c == ffi.NULL:
                raise MemoryError("sift_chain_clone")
            self._rows.append(ffi.gc(c, lib.sift_chain_free))
        out = np.empty(n_rows, dtype=np.int64)
        for i in range(n_rows):
            g = grammar[i] if grammar is not None else None
            out[i] = self._sample_row(self._rows[i], a[i], g, grammar_first)
        if was_torch:
            import torch

            return torch.from_numpy(out).to(dev)
        return out

    def _sample_row(self, ptr, row, grammar, grammar_first):
        n = row.shape[0]
        # the candidates view of a fast greedy / dist step is rebuilt from these logits
        # later, so they must outlive the call (a converted copy would not)
        self._last_logits = row
        if grammar is None:
            tok = lib.sift_chain_sample(ptr, _float_ptr(row), n)
        else:
            tok = lib.sift_grammar_chain_sample(grammar._ptr, ptr, _float_ptr(row), n, 0 if grammar_first else 1, ffi.NULL)
        if tok == _lib.TOKEN_NULL:
            raise RuntimeError("the chain selected no token (its last sampler must select: greedy, dist, mirostat, adaptive_p)")
        return int(tok)

    def apply(self, logits):
        """Fill from one row of logits and run the samplers without accepting: the
        candidates view says what is left (and selected, if the chain selects)."""
        a, _, _ = _as_rows(logits)
        if a.ndim != 1:
            raise ValueError("apply takes one row of logits")
        ptr = self._ensure(a.shape[0])
        err = new_error()
        if lib.sift_chain_fill(ptr, _float_ptr(a), a.shape[0], err) != 0:
            raise_error(err, "fill")
        self._last_logits = a
        tok = lib.sift_chain_apply(ptr, ffi.NULL)
        return None if tok == _lib.TOKEN_NULL else int(tok)

    def accept(self, token):
        """Tell the samplers a token was chosen (penalties, DRY, mirostat state)."""
        if self._ptr is None:
            raise RuntimeError("the chain is not made yet (sample once, or give n_vocab)")
        lib.sift_chain_accept(self._ptr, int(token))

    def reset(self):
        if self._ptr is not None:
            lib.sift_chain_reset(self._ptr)
        self._rows = []

    def clone(self):
        if self._ptr is None:
            return Chain(None, None, keep=self._keep, builder=self._builder)
        c = lib.sift_chain_clone(self._ptr)
        if c == ffi.NULL:
            raise MemoryError("sift_chain_clone")
        return Chain(ffi.gc(c, lib.sift_chain_free), self._n_vocab, keep=self._keep, builder=self._builder)

    @property
    def candidates(self):
        """What the samplers left after the last sample() / apply() (a live view)."""
        if self._ptr is None:
            raise RuntimeError("the chain is not made yet")
        return Candidates(self._ptr, self)

    @property
    def n_vocab(self):
        return self._n_vocab

    def __len__(self):
        return 0 if self._ptr is None else int(lib.sift_chain_n(self._ptr))

    def describe(self):
        if self._ptr is None:
            return "<not made yet>"
        buf = ffi.new("char[]", 4096)
        lib.sift_chain_describe(self._ptr, buf, 4096)
        return ffi.string(buf).decode()

    def __repr__(self):
        return f"<sift.Chain {self.describe()}>"
