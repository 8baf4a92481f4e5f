#!/usr/bin/env python3
"""PyTorch baselines for `sift bench --gpu` (run by it with --torch; torch with CUDA needed).

The same sampling as sift's device chain, the way PyTorch serving stacks do it:
  sort   vLLM's fallback: logits sorted once, top-k and top-p masks on the sorted logits
         (softmax + cumsum), scattered back, then sampled by an exponential race
         (argmax of probs / Exp(1) noise), as vLLM's sampler does; min-p on the
         probabilities; greedy is torch.argmax
  topk   torch.topk(k) and sampling among the k (top_k chains and the default chain)
Input: the base logit rows sift wrote (<logits-dir>/logits_<V>.f32, 8 rows), tiled over
the batch. Output: one CSV line per figure, `torch,<vocab>,<batch>,<chain>,<impl>,<us>`,
the median of --iters timed calls (CUDA events) after warm-up.
"""
import argparse
import math
import os
import sys

try:
    import numpy as np
    import torch
except ImportError as e:  # reported by sift bench, which goes on without the column
    print(f"gpu_torch.py: {e}; no PyTorch figures", file=sys.stderr)
    sys.exit(0)

N_BASE = 8


def race(probs, gen):
    q = torch.empty_like(probs).exponential_(generator=gen)
    return probs.div_(q).argmax(dim=-1)


def sort_mask(logits, k, p):
    """vLLM's apply_top_k_top_p: one ascending sort, masks, scatter back."""
    s, idx = logits.sort(dim=-1, descending=False)
    if k is not None:
        kth = s.gather(1, torch.full((s.size(0), 1), s.size(1) - k, device=s.device, dtype=torch.long))
        s.masked_fill_(s < kth, -math.inf)
    if p is not None:
        cum = s.softmax(dim=-1).cumsum(dim=-1)
        m = cum <= 1 - p
        m[:, -1] = False
        s.masked_fill_(m, -math.inf)
    return s.scatter(dim=-1, index=idx, src=s)


def min_p_mask(logits, p):
    probs = logits.softmax(dim=-1)
    top = probs.amax(dim=-1, keepdim=True)
    return logits.masked_fill(probs < p * top, -math.inf)


def chains(gen):
    def greedy(x):
        return x.argmax(dim=-1)

    def sort_k(k):
        return lambda x: race(sort_mask(x, k, None).softmax(dim=-1), gen)

    def topk_k(k):
        def f(x):
            v, i = torch.topk(x, k, dim=-1)
            j = race(v.softmax(dim=-1), gen)
            return i.gather(1, j.unsqueeze(1)).squeeze(1)
        return f

    def sort_p(x):
        return race(sort_mask(x, None, 0.95).softmax(dim=-1), gen)

    def minp(x):
        return race(min_p_mask(x, 0.05).softmax(dim=-1), gen)

    def default_sort(x):  # top_k 40 -> top_p 0.95 -> min_p 0.05 -> temp 0.8 -> sample
        y = min_p_mask(sort_mask(x, 40, 0.95), 0.05) / 0.8
        return race(y.softmax(dim=-1), gen)

    def default_topk(x):
        v, i = torch.topk(x, 40, dim=-1)  # sorted descending
        cum = v.softmax(dim=-1).cumsum(dim=-1)
        keep = (cum - v.softmax(dim=-1)) < 0.95
        v = v.masked_fill(~keep, -math.inf)
        v = min_p_mask(v, 0.05) / 0.8
        j = race(v.softmax(dim=-1), gen)
        return i.gather(1, j.unsqueeze(1)).squeeze(1)

    return {
        "greedy": {"sort": greedy},
        "topk40": {"sort": sort_k(40), "topk": topk_k(40)},
        "topk256": {"sort": sort_k(256), "topk": topk_k(256)},
        "topp0.95": {"sort": sort_p},
        "minp0.05": {"sort": minp},
        "default": {"sort": default_sort, "topk": default_topk},
    }


def timed(fn, x, iters):
    for _ in range(5):
        fn(x)
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        fn(x)
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1000.0)
    times.sort()
    return times[len(times) // 2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--logits-dir", required=True)
    ap.add_argument("--vocab", default="32000,131072,151936,262144")
    ap.add_argument("--batch", default="1,8,64,128,512")
    ap.add_argument("--iters", type=int, default=100)
    a = ap.parse_args()
    if not torch.cuda.is_available():
        print("gpu_torch.py: torch sees no CUDA device; no PyTorch figures", file=sys.stderr)
        return
    gen = torch.Generator(device="cuda")
    gen.manual_seed(1)
    fns = chains(gen)
    for V in [int(v) for v in a.vocab.split(",")]:
        path = os.path.join(a.logits_dir, f"logits_{V}.f32")
        base = torch.from_numpy(np.fromfile(path, dtype=np.float32).reshape(N_BASE, V)).cuda()
        for B in [int(b) for b in a.batch.split(",")]:
            x = base.repeat((B + N_BASE - 1) // N_BASE, 1)[:B].contiguous()
            for chain, impls in fns.items():
                for impl, fn in impls.items():
                    with torch.no_grad():
                        us = timed(fn, x.clone(), a.iters)
                    print(f"torch,{V},{B},{chain},{impl},{us:.2f}", flush=True)


if __name__ == "__main__":
    main()
