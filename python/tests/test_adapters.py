"""The adapters for other engines: a Hugging Face LogitsProcessor and a llama-cpp-python
LogitsProcessor, driven here the way those engines drive them (the engine picks the
token from the processed scores and appends it to input_ids)."""
import json

import numpy as np
import pytest

import sift

N = 1000


def fake_logits(seed, n=N):
    return np.random.RandomState(seed).randn(n).astype(np.float32)


def engine_loop(processor, prompt, steps, n=N, batch=1, pick=np.argmax):
    """What generate() does: scores -> processors -> pick -> append."""
    ids = np.array([prompt] * batch, dtype=np.int64)
    for step in range(steps):
        scores = np.stack([fake_logits(1000 * b + step, n) for b in range(batch)])
        out = processor(ids, scores)
        assert out.shape == scores.shape and out.dtype == scores.dtype
        nxt = np.array([[pick(out[b])] for b in range(batch)])
        ids = np.concatenate([ids, nxt], axis=1)
    return ids[:, len(prompt):]


def test_hf_selecting_chain_is_sifts_stream():
    """A chain that selects: the engine's argmax takes exactly sift's pick, so the stream
    equals Chain.sample's (penalties included: they see the prompt and each new token)."""
    spec = "penalties(16,1.4,0,0);top_k(40);temp(0.8);dist(42)"
    proc = sift.HFLogitsProcessor(spec)
    got = engine_loop(proc, [5, 6, 7], 24, batch=2)
    for b in range(2):
        ref = sift.Chain.from_spec(spec, n_vocab=N)
        for t in (5, 6, 7):
            ref.accept(t)
        want = [ref.sample(fake_logits(1000 * b + s)) for s in range(24)]
        assert got[b].tolist() == want


def test_hf_filter_chain_leaves_logits():
    proc = sift.HFLogitsProcessor("top_k(3);temp(0.5)")
    x = fake_logits(9)
    out = proc(np.array([[1, 2]]), x[None, :])[0]
    top = np.argsort(-x)[:3]
    assert np.isfinite(out).sum() == 3
    np.testing.assert_allclose(out[top], x[top] / 0.5, rtol=1e-6)


def test_hf_torch_tensors():
    torch = pytest.importorskip("torch")
    proc = sift.HFLogitsProcessor("top_k(2)")
    scores = torch.randn(2, N, dtype=torch.float32)
    out = proc(torch.tensor([[1], [2]]), scores)
    assert isinstance(out, torch.Tensor) and out.dtype == scores.dtype
    assert torch.isfinite(out).sum(dim=1).tolist() == [2, 2]


def test_grammar_through_the_adapters(shared):
    """JSON from noise: the grammar masks the engine's scores; both adapters."""
    vocab = sift.Vocab(shared / "models" / "vocab" / "ggml-vocab-llama-spm.gguf")
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"], "additionalProperties": False}
    g = sift.Grammar.from_json_schema(vocab, schema)
    for proc in (sift.HFLogitsProcessor("top_k(50)", grammar=g), sift.LlamaCppLogitsProcessor("top_k(50)", grammar=g)):
        ids = [1]
        for step in range(60):
            scores = fake_logits(step, 32000)
            if isinstance(proc, sift.HFLogitsProcessor):
                out = proc(np.array([ids]), scores[None, :])[0]
            else:
                out = proc(np.array(ids, dtype=np.intc), scores)
            finite = np.flatnonzero(np.isfinite(out))
            if len(finite) == 1 and finite[0] == vocab.eos or (vocab.eos in finite and proc._rows[0].grammar.status == "done"):
                break
            tok = int(np.argmax(np.where(np.arange(32000) == vocab.eos, -np.inf, out)))
            ids.append(tok)
        assert json.loads(vocab.detokenize(ids[1:])) in ({"ok": True}, {"ok": False})


def test_llama_cpp_processor_one_sequence():
    spec = "top_k(40);dist(5)"
    proc = sift.LlamaCppLogitsProcessor(spec)
    ref = sift.Chain.from_spec(spec)
    ids = [1, 2]
    for s in range(10):
        x = fake_logits(s)
        out = proc(np.array(ids, dtype=np.intc), x)
        tok = int(np.argmax(out))
        assert tok == ref.sample(x)
        ids.append(tok)
