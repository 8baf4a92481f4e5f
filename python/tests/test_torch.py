"""The torch path for real (Debian's python3-torch): a tiny torch language model generates
with sift's Hugging Face LogitsProcessor in the loop, the way transformers' generate() drives
a processor: each step the model's scores for a batch arrive as a float tensor, the processor
returns a tensor of the same shape, dtype and device, the engine picks from it and appends
to input_ids. The streams must be exactly what sift.Chain picks from the same logits."""
import numpy as np
import pytest

import sift

torch = pytest.importorskip("torch")

V = 512


class TinyLM(torch.nn.Module):
    """Embedding -> GRU -> vocabulary head: real torch modules, deterministic weights."""

    def __init__(self, seed=0):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.emb = torch.nn.Embedding(V, 32)
        self.rnn = torch.nn.GRU(32, 32, batch_first=True)
        self.head = torch.nn.Linear(32, V)
        with torch.no_grad():
            for p in self.parameters():
                p.copy_(torch.randn(p.shape, generator=g) * 0.5)

    @torch.no_grad()
    def forward(self, ids):
        h, _ = self.rnn(self.emb(ids))
        return self.head(h[:, -1, :]) * 3.0  # the next token's scores, [batch, V]


def generate(model, processor, prompts, steps, dtype=torch.float32):
    ids = torch.tensor(prompts, dtype=torch.long)
    for _ in range(steps):
        scores = model(ids).to(dtype)
        out = processor(ids, scores)
        assert isinstance(out, torch.Tensor) and out.shape == scores.shape and out.dtype == scores.dtype
        assert out.device == scores.device
        nxt = torch.argmax(out.float(), dim=-1, keepdim=True)
        ids = torch.cat([ids, nxt], dim=1)
    return ids[:, len(prompts[0]):]


def reference(model, spec, prompts, steps, dtype=torch.float32):
    """The same loop with one sift.Chain per row on numpy copies of the logits."""
    rows = []
    for p in prompts:
        chain = sift.Chain.from_spec(spec, n_vocab=V)
        for t in p:
            chain.accept(t)
        ids = list(p)
        for _ in range(steps):
            x = model(torch.tensor([ids])).to(dtype)[0].float().numpy()
            t = chain.sample(np.ascontiguousarray(x, dtype=np.float32))
            ids.append(t)
        rows.append(ids[len(p):])
    return rows


@pytest.mark.parametrize("spec", ["greedy()", "penalties(32,1.3,0,0);top_k(20);temp(0.7);dist(11)",
                                  "dry(0.8,1.75,2,-1);min_p(0.05);temp(1.0);dist(5)"])
def test_generate_loop_equals_chain(spec):
    model = TinyLM()
    prompts = [[1, 7, 42, 99], [3, 3, 8, 200]]
    got = generate(model, sift.HFLogitsProcessor(spec), prompts, 40)
    assert got.tolist() == reference(model, spec, prompts, 40)


def test_half_precision_scores():
    """float16 and bfloat16 scores (a model run in half precision) come back in their dtype."""
    model = TinyLM(1)
    for dt in (torch.float16, torch.bfloat16):
        got = generate(model, sift.HFLogitsProcessor("top_k(5);temp(0.9);dist(3)"), [[4, 5]], 12, dtype=dt)
        assert got.tolist() == reference(model, "top_k(5);temp(0.9);dist(3)", [[4, 5]], 12, dtype=dt)


def test_filter_processor_keeps_scores():
    """A chain that does not select (top_k, temp) leaves the survivors' scores, scaled, and -inf
    elsewhere, as a transformers warper would: torch.softmax of the result is a distribution."""
    model = TinyLM(2)
    scores = model(torch.tensor([[9, 10, 11], [12, 13, 14]]))
    out = sift.HFLogitsProcessor("top_k(8);temp(0.5)")(torch.tensor([[9, 10, 11], [12, 13, 14]]), scores)
    assert torch.isfinite(out).sum(dim=1).tolist() == [8, 8]
    top = torch.topk(scores, 8, dim=1)
    torch.testing.assert_close(torch.gather(out, 1, top.indices), top.values / 0.5)
    p = torch.softmax(out, dim=1)
    torch.testing.assert_close(p.sum(dim=1), torch.ones(2))


def test_bad_shapes_are_errors():
    proc = sift.HFLogitsProcessor("top_k(3)")
    with pytest.raises((ValueError, TypeError)):
        proc(torch.tensor([[1, 2]]), torch.randn(2, 3, V))  # a 3-d score tensor
