#!/usr/bin/env python3
"""The scale-out recipe of docs/scale-out.md, run on 127.0.0.1 (CTest: server_scaleout).

Reads the replica command lines (```sh block) and the HAProxy configuration (```haproxy block)
from the page itself, swaps in free ports, the model and the sift binary, and then:
  - 240 seeded non-streaming completions from 8 threads through HAProxy (12 distinct ones);
  - after 80 have finished, SIGKILL replica r1;
  - every request that started after the kill must succeed, a failure is allowed only for a
    request in flight at the kill, each distinct request must give one text whichever replica
    answered, and r2 must exit 0 on SIGTERM.
Prints requests served, errors and p99 latency. Bounded: 240 requests, 90 s in all.

usage: scaleout_test.py --sift build/sift --model ../shared/models/stories260K.gguf --haproxy /usr/sbin/haproxy
"""
import argparse
import concurrent.futures as cf
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
DOC = os.path.join(HERE, "..", "docs", "scale-out.md")
N_REQ, N_THREADS, KILL_AFTER, N_DISTINCT = 240, 8, 80, 12
PROMPTS = ["Once upon a time", "Lily and Tom", "The little dog", "One day, a bird"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def doc_blocks():
    text = open(DOC).read()
    sh = re.search(r"```sh\n(.*?)```", text, re.S).group(1)
    cfg = re.search(r"```haproxy\n(.*?)```", text, re.S).group(1)
    replicas = [l.split() for l in sh.splitlines() if l.startswith("sift serve")]
    assert len(replicas) == 2 and "127.0.0.1:8080" in cfg, "docs/scale-out.md lost its recipe"
    return replicas, cfg


def start_replica(argv, sift, model, port):
    argv = [sift if a == "sift" else model if a == "model.gguf" else a for a in argv]
    argv[argv.index("--port") + 1] = str(port)
    p = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True)
    log = []
    deadline = time.time() + 30
    while time.time() < deadline:
        line = p.stderr.readline()
        if not line:
            break
        log.append(line)
        if "listening on" in line:
            threading.Thread(target=lambda: [log.append(l) for l in p.stderr], daemon=True).start()
            return p, log
    p.kill()
    raise RuntimeError("replica did not start: " + "".join(log))


def request(port, i):
    k = i % N_DISTINCT
    body = {"prompt": PROMPTS[k % 4], "seed": 1000 + k, "n_predict": 64 + 16 * (k % 5), "ignore_eos": True}
    t0 = time.time()
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        c.request("POST", "/completion", body=json.dumps(body), headers={"Content-Type": "application/json"})
        r = c.getresponse()
        data = r.read()
        c.close()
        st, by = r.status, r.getheader("X-Served-By")
        text = json.loads(data)["content"] if st == 200 else None
        err = None if st == 200 else f"{st} {data[:200]!r}"
    except Exception as e:  # noqa: BLE001 - a lost request is a result here
        st, by, text, err = 0, None, None, f"{type(e).__name__}: {e}"
    return dict(i=i, key=k, t0=t0, t1=time.time(), status=st, by=by, text=text, err=err)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sift", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--haproxy", required=True)
    args = ap.parse_args()
    replicas, cfg = doc_blocks()
    fe, p1, p2 = free_port(), free_port(), free_port()
    cfg = cfg.replace("127.0.0.1:8080", f"127.0.0.1:{fe}").replace("127.0.0.1:8081", f"127.0.0.1:{p1}")
    cfg = cfg.replace("127.0.0.1:8082", f"127.0.0.1:{p2}")
    procs = []
    failures = []
    try:
        r1, log1 = start_replica(replicas[0], args.sift, args.model, p1)
        procs.append(r1)
        r2, log2 = start_replica(replicas[1], args.sift, args.model, p2)
        procs.append(r2)
        with tempfile.NamedTemporaryFile("w", suffix=".cfg", delete=False) as f:
            f.write(cfg)
            cfg_path = f.name
        hap = subprocess.Popen([args.haproxy, "-f", cfg_path, "-db"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               text=True)
        procs.append(hap)
        # both replicas up behind HAProxy (rise 2 checks at 500 ms)
        seen, deadline = set(), time.time() + 15
        while seen != {"r1", "r2"}:
            assert time.time() < deadline, f"HAProxy did not bring both replicas up (saw {seen})"
            r = request(fe, 0)
            if r["by"]:
                seen.add(r["by"])
            time.sleep(0.05)

        results, done = [], threading.Event()
        lock = threading.Lock()
        t_kill = [None]

        def one(i):
            r = request(fe, i)
            with lock:
                results.append(r)
                if len(results) == KILL_AFTER and t_kill[0] is None:
                    t_kill[0] = time.time()
                    r1.send_signal(signal.SIGKILL)
            return r

        t_all = time.time()
        with cf.ThreadPoolExecutor(N_THREADS) as ex:
            list(ex.map(one, range(N_REQ)))
        wall = time.time() - t_all
        done.set()
        tk = t_kill[0]
        assert tk is not None
        ok = [r for r in results if r["status"] == 200]
        errs = [r for r in results if r["status"] != 200]
        lat = sorted(1e3 * (r["t1"] - r["t0"]) for r in ok)
        p99 = lat[min(len(lat) - 1, int(0.99 * len(lat)))]
        by = {s: sum(r["by"] == s for r in ok) for s in ("r1", "r2")}
        print(f"served {len(ok)}/{N_REQ} in {wall:.1f} s through HAProxy (r1 {by['r1']}, r2 {by['r2']}; r1 SIGKILLed after "
              f"{KILL_AFTER}), errors {len(errs)}, p99 latency {p99:.0f} ms, median {lat[len(lat) // 2]:.0f} ms")
        for r in errs:
            print(f"  error: request {r['i']} started {r['t0'] - tk:+.3f} s from the kill: {r['err']}")
            if not (r["t0"] <= tk <= r["t1"]):
                failures.append(f"request {r['i']} failed though it was not in flight at the kill: {r['err']}")
        if len(errs) > N_THREADS:
            failures.append(f"{len(errs)} errors: more than the {N_THREADS} requests that can be in flight")
        inflight = sum(r["t0"] <= tk <= r["t1"] for r in results)
        print(f"{inflight} requests were in flight at the kill (on either replica)")
        after = [r for r in results if r["t0"] > tk]
        if not after or any(r["status"] != 200 for r in after):
            failures.append("a request started after the kill failed (or none started after it)")
        if not all(r["by"] == "r2" for r in after):
            failures.append("a request started after the kill was answered by the killed replica")
        texts, both = {}, 0
        for r in ok:
            texts.setdefault(r["key"], {}).setdefault(r["text"], set()).add(r["by"])
        for k, t in texts.items():
            if len(t) != 1:
                failures.append(f"distinct request {k} gave {len(t)} different texts: {t}")
            elif set().union(*t.values()) == {"r1", "r2"}:
                both += 1
        print(f"{len(texts)} distinct seeded requests: each gave one text; {both} of them answered by both replicas")
        if both == 0:
            failures.append("no seeded request was answered by both replicas")
        # the survivor drains and exits 0
        r2.send_signal(signal.SIGTERM)
        rc = r2.wait(timeout=30)
        if rc != 0:
            failures.append(f"r2 exited {rc} on SIGTERM: {''.join(log2[-10:])}")
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(timeout=10)
    for f in failures:
        print("FAIL", f)
    print("scale-out test:", "FAILED" if failures else "passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
