#!/usr/bin/env python3
"""SIGTERM with many queued streams: nothing is lost (issue 26, CTest: server_drain).

Each run starts `sift serve` (-np 4, --drain-timeout T), opens N streaming /completion
requests that cannot finish within T (every slot busy, the rest queued), waits until the
server holds all of them, sends SIGTERM and then checks:

  - every stream is a 200 whose chunked body is terminated (the 0-size chunk) and whose
    last `data:` event is complete: a final result ("stop": true) or an error object;
  - the process exits 0 within T + 1 s of the signal.

With --stuck the first stream carries an exponential grammar (20 levels of a ::= b b | [a-z]).
It once kept the engine inside one endless step at the deadline; since the grammar compiler's
ambiguity probe it is refused when compiled, so that stream must end as a complete 400 while
the other streams are held and drained.

usage: server_drain.py --sift build/sift --model ../shared/models/stories260K.gguf
                       [--runs 100] [--streams 60] [--drain-timeout 2]
Prints one line per run and a summary; exit status 1 on any failure. 127.0.0.1 only.
"""
import argparse
import json
import re
import signal
import socket
import subprocess
import sys
import threading
import time


EXP_GRAMMAR = "root ::= a0\n" + "".join("a%d ::= a%d a%d | [a-z]\n" % (i, i + 1, i + 1) for i in range(20)) + "a20 ::= [a-z]\n"


def read_stream(port, i, out, started, stuck=False):
    req = {"prompt": "Once upon a time", "n_predict": 3000, "ignore_eos": True, "stream": True, "seed": i}
    if stuck:  # a grammar whose parse stacks double at each of 20 levels (refused when compiled: a 400 amid the drain)
        req.update(n_predict=8, grammar=EXP_GRAMMAR)
    body = json.dumps(req).encode()
    raw = b""
    try:
        c = socket.create_connection(("127.0.0.1", port), timeout=30)
        c.sendall(b"POST /completion HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                  b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body) + body)
        started.release()
        while True:
            d = c.recv(65536)
            if not d:
                break
            raw += d
        c.close()
    except OSError as e:
        out[i] = ("oserror", repr(e), raw)
        return
    out[i] = ("ok", None, raw)


def check_stream(res, refused=False):
    """'' when the stream is complete, else what is wrong (refused: a 400 naming the stack limit)."""
    kind, err, raw = res
    if kind != "ok":
        return f"connection error {err} after {len(raw)} bytes"
    head, _, body = raw.partition(b"\r\n\r\n")
    status = head.split(b"\r\n", 1)[0]
    if refused:
        return "" if b" 400 " in status and b"SIFT_GRAMMAR_MAX_STACKS" in body else f"not refused: {status!r} {body[:120]!r}"
    if b" 200 " not in status:
        return f"status {status!r}"
    if not body.endswith(b"0\r\n\r\n"):
        return f"chunked body not terminated ({len(body)} bytes, ends {body[-40:]!r})"
    events = re.findall(rb"data: ([^\n]*)\n\n", body)
    if not events:
        return "no event"
    try:
        last = json.loads(events[-1])
    except ValueError:
        return f"last event not JSON: {events[-1][:80]!r}"
    if "error" in last or last.get("stop") is True:
        return ""
    return f"last event incomplete: {events[-1][:120]!r}"


def one_run(args, k):
    cmd = [args.sift, "serve", "-m", args.model, "--host", "127.0.0.1", "--port", "0", "-np", "4", "-c", "16384",
           "--max-queue", str(args.streams + 4), "--max-n-predict", "3000", "--drain-timeout", str(args.drain_timeout),
           "-t", "1", "--max-connections-per-client", "0"]
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
    log = []
    port = None
    while True:
        line = proc.stderr.readline()
        if not line:
            break
        log.append(line)
        m = re.search(r"listening on http://[^:]+:(\d+)", line)
        if m:
            port = int(m.group(1))
            break
    if not port:
        proc.kill()
        return False, "server did not start: " + "".join(log)
    threading.Thread(target=lambda: [log.append(l) for l in proc.stderr], daemon=True).start()
    out = [None] * args.streams
    started = threading.Semaphore(0)
    ths = [threading.Thread(target=read_stream, args=(port, i, out, started, args.stuck and i == 0))
           for i in range(args.streams)]
    for t in ths:
        t.start()
    for _ in ths:
        started.acquire()

    def held():
        c = socket.create_connection(("127.0.0.1", port), timeout=10)
        c.sendall(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        m = b""
        while True:
            d = c.recv(65536)
            if not d:
                break
            m += d
        c.close()
        m = m.decode()
        return sum(float(re.search(r"^sift_requests_%s (\S+)$" % w, m, re.M).group(1)) for w in ("processing", "deferred"))

    t0 = time.time()
    while held() < args.streams - (1 if args.stuck else 0):
        if time.time() - t0 > 20:
            proc.kill()
            return False, "the streams did not all arrive"
        time.sleep(0.01)
    proc.send_signal(signal.SIGTERM)
    t_sig = time.time()
    try:
        rc = proc.wait(timeout=args.drain_timeout + 30)
    except subprocess.TimeoutExpired:
        proc.kill()
        rc = None
    dt = time.time() - t_sig
    for t in ths:
        t.join(timeout=30)
    bad = [(i, check_stream(r, args.stuck and i == 0) if r else "no result") for i, r in enumerate(out)]
    bad = [(i, w) for i, w in bad if w]
    n_err = sum(1 for r in out if r and b'"error"' in r[2][-600:])
    ok = rc == 0 and dt <= args.drain_timeout + 1.0 and not bad
    what = f"run {k}: exit {rc} after {dt:.2f} s (limit {args.drain_timeout + 1.0:.0f} s); {args.streams - len(bad)}/" \
           f"{args.streams} streams complete ({n_err} ended with an error event)"
    if bad:
        what += "; incomplete: " + "; ".join(f"#{i} {w}" for i, w in bad[:5])
    if rc != 0 or dt > args.drain_timeout + 1.0:
        what += "\n" + "".join(log[-8:])
    return ok, what, dt


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sift", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--streams", type=int, default=60)
    ap.add_argument("--drain-timeout", type=int, default=1)
    ap.add_argument("--stuck", action="store_true",
                    help="the first stream asks for an exponential grammar: the engine may be inside one step at the deadline")
    args = ap.parse_args()
    n_ok, worst = 0, 0.0
    for k in range(args.runs):
        r = one_run(args, k)
        ok, what = r[0], r[1]
        if len(r) > 2:
            worst = max(worst, r[2])
        n_ok += ok
        print(("ok    " if ok else "FAIL  ") + what, flush=True)
    print(f"{n_ok}/{args.runs} runs clean; slowest exit {worst:.2f} s after SIGTERM (--drain-timeout {args.drain_timeout})")
    return 0 if n_ok == args.runs else 1


if __name__ == "__main__":
    sys.exit(main())
