#!/usr/bin/env python3
"""Speculative decoding in `sift serve`: the same 48 concurrent requests against a plain
server, one with a draft model (-md) and one with prompt lookup (--lookup), each with -np 4.
Prints the wall time of the whole load, the generated tokens, the drafted and accepted
tokens (/metrics), and whether every text equals the plain server's.

usage: bench/server_spec.py --sift build/sift -m TARGET.gguf [-md DRAFT.gguf] [--lookup N]
                            [-n 64] [--requests 48] [-np 4] [-t 2]
"""
import argparse
import concurrent.futures as cf
import json
import os
import re
import subprocess
import tempfile
import time
import urllib.request


def start(a, extra):
    log = tempfile.NamedTemporaryFile("w+", prefix="sift-spec-bench-", suffix=".log", delete=False)
    cmd = [a.sift, "serve", "-m", a.model, "--port", "0", "-np", str(a.np), "-c", str(a.np * 1024), "-t", str(a.threads),
           "--max-connections-per-client", "0", "--max-queue", "256", *extra]
    p = subprocess.Popen(cmd, stderr=log)
    for _ in range(1200):
        time.sleep(0.1)
        m = re.search(r"listening on http://[^:]+:(\d+)", open(log.name).read())
        if m:
            return p, int(m.group(1)), log.name
        if p.poll() is not None:
            break
    raise RuntimeError("server did not start: " + open(log.name).read())


def post(port, body):
    r = urllib.request.Request(f"http://127.0.0.1:{port}/completion", data=json.dumps(body).encode(),
                               headers={"Content-Type": "application/json"})
    return json.load(urllib.request.urlopen(r, timeout=3600))


def requests(a):
    # prompts that restate themselves (extraction-like: the reply may copy spans) and plain ones
    base = ["Once upon a time there was a", "Here is the list: apples, pears, plums. Again the list: apples,",
            "def add(a, b):\n    return a + b\n\ndef sub(a, b):\n", "The report says the meeting is on Monday. The report says",
            "Lily and Tom went to the park"]
    out = []
    for i in range(a.requests):
        b = {"prompt": base[i % len(base)] + " " * (i // len(base)), "n_predict": a.n, "seed": 7 + i, "cache_prompt": False}
        b.update({"temperature": 0} if i % 2 == 0 else {"temperature": 0.8, "top_k": 40, "top_p": 0.95})
        out.append(b)
    return out


def run(a, name, extra, reqs):
    p, port, log = start(a, extra)
    try:
        post(port, {"prompt": "warm up", "n_predict": 4})
        t0 = time.time()
        with cf.ThreadPoolExecutor(len(reqs)) as ex:
            res = list(ex.map(lambda b: post(port, b), reqs))
        wall = time.time() - t0
        m = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics").read().decode()
        val = lambda k: float(re.search(rf"^llamacpp:{k} (\S+)$", m, re.M).group(1))
        return {"name": name, "wall": wall, "tokens": sum(j["tokens_predicted"] for j in res), "texts": [j["content"] for j in res],
                "drafted": val("n_drafted_total"), "accepted": val("n_drafted_accepted_total"),
                "decodes": val("n_decode_total")}
    finally:
        p.terminate()
        p.wait()
        os.unlink(log)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sift", default="build/sift")
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("-md", "--model-draft")
    ap.add_argument("--lookup", type=int, default=0)
    ap.add_argument("-n", type=int, default=64)
    ap.add_argument("--requests", type=int, default=48)
    ap.add_argument("-np", type=int, default=4)
    ap.add_argument("-t", "--threads", type=int, default=2)
    a = ap.parse_args()
    reqs = requests(a)
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    runs = [run(a, "plain", [], reqs)]
    if a.model_draft:
        runs.append(run(a, "draft model", ["-md", a.model_draft], reqs))
    if a.lookup:
        runs.append(run(a, f"lookup {a.lookup}", ["--lookup", str(a.lookup)], reqs))
    print(f"{len(reqs)} concurrent requests x {a.n} tokens, -np {a.np}, -t {a.threads}; target {os.path.basename(a.model)}")
    print(f"{'server':<12} {'wall s':>8} {'tokens':>7} {'tok/s':>7} {'vs plain':>8} {'decodes':>8} {'drafted':>8} {'accepted':>9} {'same texts':>10}")
    for r in runs:
        same = sum(x == y for x, y in zip(r["texts"], runs[0]["texts"]))
        acc = f"{r['accepted']:.0f} ({100 * r['accepted'] / r['drafted']:.0f}%)" if r["drafted"] else "0"
        print(f"{r['name']:<12} {r['wall']:8.1f} {r['tokens']:7d} {r['tokens'] / r['wall']:7.1f} {runs[0]['wall'] / r['wall']:7.2f}x "
              f"{r['decodes']:8.0f} {r['drafted']:8.0f} {acc:>9} {same:>7}/{len(reqs)}")
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    return 0 if all(x == y for r in runs for x, y in zip(r["texts"], runs[0]["texts"])) else 1


if __name__ == "__main__":
    raise SystemExit(main())
