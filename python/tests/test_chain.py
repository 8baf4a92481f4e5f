"""Chains from specs and from llama.cpp-style parameters, sample() on rows and batches of
numpy arrays and torch tensors, the candidates view, and the errors bad input gets."""
import os
import subprocess
import sys

import numpy as np
import pytest

import sift

N = 1000


def fake_logits(seed, n=N):
    return np.random.RandomState(seed).randn(n).astype(np.float32)


def test_minimum_api():
    chain = sift.Chain.from_spec("top_k(40);temp(0.8);dist(42)")
    tok = chain.sample(fake_logits(0))
    assert isinstance(tok, int) and 0 <= tok < N
    batch = np.stack([fake_logits(i) for i in range(4)])
    ids = chain.sample(batch)
    assert ids.shape == (4,) and all(0 <= t < N for t in ids)


def test_greedy_is_argmax_and_reads_in_place():
    chain = sift.Chain.from_spec("greedy()")
    big = np.stack([fake_logits(i) for i in range(3)])
    for i in range(3):
        assert chain.sample(big[i]) == int(np.argmax(big[i]))  # a row view, no copy needed
    # float64 and a strided view are converted, with the same answer
    assert chain.sample(big[1].astype(np.float64)) == int(np.argmax(big[1]))
    assert chain.sample(np.asfortranarray(big)[2]) == int(np.argmax(big[2]))
    assert chain.sample(big[0].tolist()) == int(np.argmax(big[0]))


def test_spec_and_params_agree():
    """--top-k 40 --temp 0.8 --seed 42 the llama.cpp way equals its chain spec."""
    a = sift.Chain.from_params(top_k=40, temperature=0.8, seed=42, samplers="top_k;temperature")
    b = sift.Chain.from_spec("top_k(40);temp_ext(0.8,0,1);dist(42)")
    xs = [fake_logits(i) for i in range(32)]
    assert [a.sample(x) for x in xs] == [b.sample(x) for x in xs]
    assert "top-k -> temp-ext -> dist" in a.describe()


def test_batch_rows_are_independent_sequences():
    """Row i of a batch is its own sequence: the same as a chain of its own."""
    spec = "penalties(8,1.5,0,0);top_k(20);dist(3)"
    batch_chain = sift.Chain.from_spec(spec)
    singles = [sift.Chain.from_spec(spec) for _ in range(3)]
    for step in range(10):
        rows = np.stack([fake_logits(100 * r + step) for r in range(3)])
        ids = batch_chain.sample(rows)
        assert list(ids) == [singles[r].sample(rows[r]) for r in range(3)]


def test_torch_tensors():
    torch = pytest.importorskip("torch")
    chain = sift.Chain.from_spec("greedy()")
    x = torch.randn(2, N)
    ids = chain.sample(x)
    assert isinstance(ids, torch.Tensor) and ids.tolist() == torch.argmax(x, dim=1).tolist()
    assert chain.sample(x[0]) == int(torch.argmax(x[0]))
    assert chain.sample(x.to(torch.float16)[1]) == int(torch.argmax(x.to(torch.float16)[1].float()))


def test_candidates_view():
    chain = sift.Chain.from_spec("top_k(5);temp(1.0);dist(7)")
    x = fake_logits(1)
    tok = chain.sample(x)
    c = chain.candidates
    assert c.size == 5 and len(c.ids) == 5
    assert set(c.ids.tolist()) == set(np.argsort(-x)[:5].tolist())
    assert c.selected == tok
    assert abs(float(c.probs.sum()) - 1.0) < 1e-5
    np.testing.assert_allclose(c.logits, x[c.ids], rtol=0, atol=0)
    # apply without accepting: a filter-only chain leaves survivors, selects nothing
    f = sift.Chain.from_spec("top_k(3)")
    assert f.apply(x) is None and sorted(f.candidates.ids.tolist()) == sorted(np.argsort(-x)[:3].tolist())


def test_params_rules_are_the_clis():
    with pytest.raises(ValueError, match=r"'top_p' \(--top-p\) must be a number in \[0, 1\], got 2"):
        sift.Chain.from_params(top_p=2)
    with pytest.raises(ValueError, match="repeat_penalty"):
        sift.Chain.from_params(repeat_penalty=0)
    with pytest.raises(ValueError, match="token 99999 is not in the vocabulary"):
        sift.Chain.from_params(n_vocab=512, logit_bias={99999: 1.0})
    with pytest.raises(TypeError, match="unknown sampling parameter"):
        sift.Chain.from_params(top_q=3)
    with pytest.raises(sift.SiftError, match="unknown sampler 'foo'"):
        sift.Chain.from_params(samplers="top_k;foo")
    # -1 windows are the context: the penalties sampler is on
    assert "?penalties" not in sift.Chain.from_params(n_vocab=N, repeat_last_n=-1, repeat_penalty=1.3, n_ctx=128).describe()
    assert "?penalties" in sift.Chain.from_params(n_vocab=N, repeat_last_n=0, repeat_penalty=1.3).describe()


def test_bad_input():
    with pytest.raises(sift.SiftError, match="col 7"):
        sift.Chain.from_spec("top_k(4.5)")
    chain = sift.Chain.from_spec("greedy()", n_vocab=N)
    with pytest.raises(ValueError, match="made for 1000"):
        chain.sample(np.zeros(10, dtype=np.float32))
    with pytest.raises(ValueError, match="shape"):
        chain.sample(np.zeros((2, 2, N), dtype=np.float32))
    with pytest.raises(RuntimeError, match="selected no token"):
        sift.Chain.from_spec("top_k(4)").sample(fake_logits(0))


def test_library_from_environment(tmp_path):
    """SIFT_LIBRARY must be a full path; a wrong one is a clear error, not a crash."""
    pkg_dir = os.path.dirname(os.path.dirname(sift.__file__))  # this copy of the package
    env = dict(os.environ, SIFT_LIBRARY=str(tmp_path / "nope.so"),
               PYTHONPATH=os.pathsep.join([pkg_dir] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    r = subprocess.run([sys.executable, "-c", "import sift"], env=env, capture_output=True, text=True)
    assert r.returncode != 0 and "SIFT_LIBRARY=" in r.stderr and "no such file" in r.stderr
