"""sift's samplers and grammars inside the engines people already run, in the shapes those
engines take:

  HFLogitsProcessor        Hugging Face transformers' LogitsProcessor:
                           (input_ids: LongTensor[batch, seq], scores: FloatTensor[batch, vocab])
                           -> scores
  LlamaCppLogitsProcessor  llama-cpp-python's LogitsProcessor:
                           (input_ids: ndarray[intc], scores: ndarray[single]) -> scores

Both work the same way. Each sequence (row) has its own copy of the chain and of the
grammar. On the first call a row's input_ids are its prompt: they are accepted into the
chain (penalties and DRY see them, as llama.cpp's CLI does) but not into the grammar. On
later calls the tokens the engine appended since are accepted into both. Then the row's
scores fill the candidates, the grammar (if any) masks them, and the chain runs:
  - a chain that ends in a filter (e.g. "top_k(40);top_p(0.9,1);temp(0.7)") gives back
    the surviving logits as the chain left them, -inf for everything else, and the engine
    samples as it would anyway;
  - a chain that selects (ends in dist / greedy / mirostat) gives back 0 for the token it
    chose and -inf elsewhere, so the engine's own greedy or sampling step can only take
    that token and sift's sampling (the same streams as llama.cpp) decides.
Scores come back in the type, dtype and device they came in; the input is not modified.
"""
import numpy as np

from ._lib import ffi, lib, TOKEN_NULL
from .chain import Chain, _as_rows, _float_ptr


class _RowState:
    def __init__(self, chain, grammar):
        self.chain = chain
        self.grammar = grammar
        self.seen = None  # tokens of input_ids already accepted


class _Processor:
    def __init__(self, chain, grammar=None, accept_prompt=True):
        self._template = Chain.from_spec(chain) if isinstance(chain, str) else chain
        self._grammar = grammar
        self._accept_prompt = accept_prompt
        self._rows = []

    def reset(self):
        """Forget every sequence (call between generations)."""
        self._rows = []

    def _row(self, i):
        while len(self._rows) <= i:
            g = self._grammar.clone() if self._grammar is not None else None
            self._rows.append(_RowState(self._template.clone(), g))
        return self._rows[i]

    def _process_row(self, st, ids, row, out):
        ids = np.asarray(ids).reshape(-1)
        chain = st.chain
        ptr = chain._ensure(row.shape[0])
        if st.seen is None:
            if self._accept_prompt:
                for t in ids:
                    lib.sift_chain_accept(ptr, int(t))
        else:
            for t in ids[st.seen :]:
                lib.sift_chain_accept(ptr, int(t))
                if st.grammar is not None:
                    st.grammar.accept(int(t))
        st.seen = len(ids)
        chain._last_logits = row
        if lib.sift_chain_fill(ptr, _float_ptr(row), row.shape[0], ffi.NULL) != 0:
            raise MemoryError("sift_chain_fill")
        cand = lib.sift_chain_candidates(ptr)
        if st.grammar is not None:
            lib.sift_sampler_apply(st.grammar._ptr, cand)
        tok = lib.sift_chain_apply(ptr, ffi.NULL)
        cand = lib.sift_chain_candidates(ptr)
        out.fill(-np.inf)
        if tok != TOKEN_NULL:
            out[tok] = 0.0
            return
        n = int(cand.size)
        if n:
            ids_v = np.frombuffer(ffi.buffer(cand.id, 4 * n), dtype=np.int32)
            lg = np.frombuffer(ffi.buffer(cand.logit, 4 * n), dtype=np.float32)
            out[ids_v] = lg

    def _process(self, input_ids, scores):
        a, was_torch, dev = _as_rows(scores)
        squeeze = a.ndim == 1
        rows = a.reshape(1, -1) if squeeze else a
        if type(input_ids).__module__.startswith("torch"):
            ids = input_ids.detach().cpu().numpy()
        else:
            ids = np.asarray(input_ids)
        if squeeze:
            ids = ids.reshape(1, -1)
        if ids.shape[0] != rows.shape[0]:
            raise ValueError(f"input_ids has {ids.shape[0]} rows, scores {rows.shape[0]}")
        out = np.empty_like(rows)
        for i in range(rows.shape[0]):
            self._process_row(self._row(i), ids[i], rows[i], out[i])
        if squeeze:
            out = out.reshape(-1)
        if was_torch:
            import torch

            return torch.from_numpy(out).to(device=dev, dtype=scores.dtype)
        return out.astype(np.asarray(scores).dtype, copy=False)


class HFLogitsProcessor(_Processor):
    """A transformers LogitsProcessor: pass it in a LogitsProcessorList to generate().
    chain: a sift.Chain or a chain spec; grammar: a sift.Grammar for the model's
    vocabulary (load it with sift.Vocab from the model's GGUF, or any GGUF with the same
    tokenizer)."""

    def __call__(self, input_ids, scores):
        return self._process(input_ids, scores)


class LlamaCppLogitsProcessor(_Processor):
    """A llama-cpp-python LogitsProcessor (one sequence): pass it in a
    llama_cpp.LogitsProcessorList as logits_processor=."""

    def __call__(self, input_ids, scores):
        return self._process(np.asarray(input_ids).reshape(-1), scores)
