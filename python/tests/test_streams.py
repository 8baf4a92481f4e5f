"""The 26 reference streams (13 chains x 2 vocabulary sizes, 256 steps each) through the
Python package: identical to llama.cpp's (../shared/reference/sampling) and to what
`sift replay` prints for the same chain and logits. The chains are those of
tests/replay.cmake."""
import subprocess

import numpy as np
import pytest

import sift

CHAINS = {
    "greedy": "greedy()",
    "dist_s42": "dist(42)",
    "topk40_temp08_dist_s1234": "top_k(40);temp(0.8);dist(1234)",
    "topp09_dist_s7": "top_p(0.9,1);dist(7)",
    "minp01_temp15_dist_s99": "min_p(0.1,1);temp(1.5);dist(99)",
    "penalties_topk50_dist_s5": "penalties(64,1.3,0.2,0.1);top_k(50);dist(5)",
    "typical09_dist_s3": "typical(0.9,1);dist(3)",
    "xtc_dist_s11": "xtc(0.5,0.1,1,11);dist(11)",
    "topnsigma1_dist_s13": "top_n_sigma(1.0);dist(13)",
    "mirostat2_s17": "mirostat_v2(17,5,0.1)",
    "tempext_dist_s19": "temp_ext(0.8,0.5,1.0);dist(19)",
    "default_s42": "penalties(64,1.0,0.0,0.0);top_k(40);typical(1.0,0);top_p(0.95,0);min_p(0.05,0);"
    "xtc(0.0,0.1,0,42);temp_ext(0.8,0.0,1.0);dist(42)",
}
DRY = {
    32000: "dry(0.8,1.75,2,256,[12009],[5644],[14116],[16941 31217]);dist(42)",
    151936: "dry(0.8,1.75,2,256,[101475],[30689],[20632],[58181 33492]);dist(42)",
}
STEPS = 256
CASES = [(v, name) for v in (32000, 151936) for name in list(CHAINS) + ["dry_dist_s42"]]
_logits = {}


def logits(shared, n_vocab):
    if n_vocab not in _logits:
        raw = np.fromfile(shared / "reference" / "sampling" / f"logits_v{n_vocab}.bin", dtype=np.uint8)
        nv, nvec = np.frombuffer(raw[:8], dtype="<u4")
        assert nv == n_vocab
        _logits[n_vocab] = np.frombuffer(raw[8:], dtype="<f4").reshape(nvec, nv)
    return _logits[n_vocab]


@pytest.mark.parametrize("n_vocab,name", CASES, ids=[f"{v}_{n}" for v, n in CASES])
def test_stream(shared, sift_cli, n_vocab, name):
    spec = DRY[n_vocab] if name == "dry_dist_s42" else CHAINS[name]
    x = logits(shared, n_vocab)
    chain = sift.Chain.from_spec(spec)
    got = [chain.sample(x[t % x.shape[0]]) for t in range(STEPS)]  # rows of the file, read in place

    ref = [int(line) for line in (shared / "reference" / "sampling" / f"v{n_vocab}" / f"{name}.txt").read_text().split()]
    assert len(ref) == STEPS
    first = next((i for i in range(STEPS) if got[i] != ref[i]), None)
    assert first is None, f"llama.cpp's stream differs from step {first}: {got[first]} != {ref[first]}"

    out = subprocess.run([sift_cli, "replay", "--logits", str(shared / "reference" / "sampling" / f"logits_v{n_vocab}.bin"),
                          "--steps", str(STEPS), "--chain", spec], capture_output=True, text=True, check=True).stdout
    assert [int(t) for t in out.split()] == got, "`sift replay` printed another stream"
