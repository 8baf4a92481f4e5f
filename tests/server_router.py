#!/usr/bin/env python3
"""Router mode of `sift serve` (CTest: server_router): several models behind one server.

Makes a models directory (symbolic links to ../shared/models' stories260K and
llama-2-tiny-random, a `sift mkmodel` model in a subdirectory of its own, files that are no
model), starts `sift serve --models-dir DIR` on 127.0.0.1 and checks, with the standard
library only:

  - /props says role router; /models lists every model, unloaded, with the ids llama-server
    gives (file name without .gguf, the subdirectory's name);
  - a request loads its model on demand and answers exactly as a single-model `sift serve`
    of that model does (same seed, same text), streamed too (the same text, event by event,
    ending with [DONE]);
  - a client that goes away mid-stream frees the model server's slot at once;
  - bad requests get a clear 4xx: unknown model, no model, malformed JSON, GET /metrics with
    no ?model=, loading an unknown model, unloading one not loaded;
  - --models-max 2 unloads the least recently used model, not the first loaded;
  - ?reload=1 sees a model added to and one removed from the directory;
  - a model server killed with SIGKILL shows as unloaded and failed, and the next request
    loads it again;
  - --no-models-autoload: 400 until POST /models/load; --api-key guards the router's
    endpoints (/models/load, completions) while /health and /models stay open;
  - a preset (--models-preset): [*] options for all, [NAME] with model = PATH adds a model;
    a section naming no model, and a missing --models-dir, stop the start with a message;
  - llama.cpp's download cache (LLAMA_CACHE): its models listed as OWNER/REPO:TAG, a preset's
    hf-repo taken from it, no -m at all a router on it (an empty cache: -m is asked for);
  - SIGTERM: a stream running through the router ends with a complete event and the chunked
    terminator; the router exits 0 and leaves no model server running.

usage: server_router.py --sift build/sift --shared ../shared [-k NAME]
"""
import argparse
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

ARGS = None
ENV = None  # the environment: LLAMA_CACHE is a cache of our own (the user's would add models)


class Router:
    """A `sift serve` router on 127.0.0.1 with a free port."""

    every = []  # each router's log, checked at the end for sanitizer reports (the model servers' are in it)

    def __init__(self, *extra, single=None):
        model = ["-m", single] if single else []
        cmd = [ARGS.sift, "serve", *model, "--host", "127.0.0.1", "--port", "0", "-c", "512", "-np", "2", "-t", "1", *extra]
        self.proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, env=ENV)
        self.log, self.port = [], None
        Router.every.append(self.log)
        deadline = time.time() + 60
        while time.time() < deadline and not self.port:
            line = self.proc.stderr.readline()
            if not line:
                break
            self.log.append(line)
            m = re.match(r"sift serve: (?:loaded in \d+ ms; )?listening on http://[^:]+:(\d+)", line)
            if m:
                self.port = int(m.group(1))
        if not self.port:
            self.proc.kill()
            self.proc.wait()
            raise RuntimeError("router did not start: " + "".join(self.log))
        threading.Thread(target=lambda: [self.log.append(l) for l in self.proc.stderr], daemon=True).start()

    def req(self, method, path, body=None, headers=None, timeout=60):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        data = json.dumps(body) if isinstance(body, (dict, list)) else body
        c.request(method, path, body=data, headers={"Content-Type": "application/json", **(headers or {})})
        r = c.getresponse()
        raw = r.read()
        c.close()
        try:
            return r.status, json.loads(raw)
        except ValueError:
            return r.status, raw

    def status(self, model):
        st, body = self.req("GET", "/models")
        assert st == 200, (st, body)
        return {m["id"]: m["status"] for m in body["data"]}.get(model)

    def wait_status(self, model, want, timeout=30):
        deadline = time.time() + timeout
        while time.time() < deadline:
            s = self.status(model)
            if s and s["value"] == want:
                return s
            time.sleep(0.05)
        raise AssertionError(f"{model} did not become {want}: {self.status(model)}")

    def children(self):
        """The pids of the model servers (the router's children)."""
        out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(self.proc.pid)], capture_output=True, text=True).stdout
        return [int(x) for x in out.split()]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=40)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


def models_dir(tmp):
    d = os.path.join(tmp, "models")
    os.makedirs(os.path.join(d, "synth"), exist_ok=True)
    m = os.path.join(ARGS.shared, "models")
    os.symlink(os.path.join(m, "stories260K.gguf"), os.path.join(d, "stories.gguf"))
    os.symlink(os.path.join(m, "llama-2-tiny-random.gguf"), os.path.join(d, "tiny.gguf"))
    subprocess.run([ARGS.sift, "mkmodel", "-o", os.path.join(d, "synth", "synth-f16.gguf"), "--dim", "64", "--layers", "2",
                    "--type", "f16", "--ctx", "512", "--vocab", os.path.join(m, "stories260K.gguf")],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    open(os.path.join(d, "synth", "mmproj-synth.gguf"), "w").close()  # a projector: not a model
    open(os.path.join(d, "notes.txt"), "w").write("not a model\n")
    os.symlink(os.path.join(m, "stories260K.gguf"), os.path.join(d, "mmproj-x.gguf"))
    return d


def cmpl(model, **kw):
    return {"model": model, "prompt": "Once upon a time", "n_predict": 24, "seed": 7, "temperature": 0.8, **kw}


def sse(raw):
    return [json.loads(x) if x != b"[DONE]" else "[DONE]" for x in re.findall(rb"data: ([^\n]*)\n\n", raw)]


def stream(port, path, body, n_events=None):
    """POST a stream; the raw body (n_events: stop after that many events and close)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=60)
    data = json.dumps(body).encode()
    s.sendall(b"POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
              b"Connection: close\r\n\r\n" % (path.encode(), len(data)) + data)
    raw = b""
    while True:
        d = s.recv(65536)
        if not d:
            break
        raw += d
        if n_events and raw.count(b"data: ") >= n_events:
            break
    s.close()
    return raw


def test_list_and_props(R, tmp):
    st, p = R.req("GET", "/props")
    assert st == 200 and p["role"] == "router" and p["max_instances"] == 2 and p["models_autoload"] is True, p
    for path in ("/models", "/v1/models"):
        st, body = R.req("GET", path)
        assert st == 200 and body["object"] == "list", body
        ids = {m["id"]: m["status"]["value"] for m in body["data"]}
        assert ids == {"stories": "unloaded", "tiny": "unloaded", "synth": "unloaded"}, ids
        assert all(m["source"] == "models_dir" and m["object"] == "model" for m in body["data"]), body


def test_same_as_single_server(R, tmp):
    st, via = R.req("POST", "/completion", cmpl("stories"))
    assert st == 200, via
    assert R.status("stories")["value"] == "loaded"
    single = Router(single=os.path.join(ARGS.shared, "models", "stories260K.gguf"))
    try:
        st2, direct = single.req("POST", "/completion", cmpl("stories"))
    finally:
        single.stop()
    assert st2 == 200 and via["content"] == direct["content"] and via["content"], (via["content"], direct["content"])
    assert via["model"] == "stories", via["model"]


def test_stream_through(R, tmp):
    body = {"model": "synth", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 12, "seed": 3}
    st, whole = R.req("POST", "/v1/chat/completions", body)
    assert st == 200, whole
    raw = stream(R.port, "/v1/chat/completions", dict(body, stream=True))
    head, _, payload = raw.partition(b"\r\n\r\n")
    assert b" 200 " in head.split(b"\r\n")[0] and b"text/event-stream" in head, head
    ev = sse(payload)
    assert ev[-1] == "[DONE]" and len(ev) >= 4, ev[-3:]
    text = "".join((e["choices"][0]["delta"].get("content") or "") for e in ev[:-1] if e.get("choices"))
    assert text == whole["choices"][0]["message"]["content"], (text, whole["choices"][0]["message"]["content"])


def test_disconnect_frees_slot(R, tmp):
    raw = stream(R.port, "/completion", cmpl("stories", n_predict=400, ignore_eos=True, stream=True), n_events=2)
    assert raw.count(b"data: ") >= 2, raw[:200]
    deadline = time.time() + 5
    while time.time() < deadline:
        st, slots = R.req("GET", "/slots?model=stories")
        assert st == 200, slots
        if not any(s["is_processing"] for s in slots):
            return
        time.sleep(0.05)
    raise AssertionError(f"the model server still generates for a client that went away: {slots}")


def test_bad_requests(R, tmp):
    cases = [
        ("POST", "/completion", cmpl("no-such-model"), 400, "not found"),
        ("POST", "/completion", {"prompt": "x"}, 400, "model name is missing"),
        ("POST", "/v1/chat/completions", "{not json", 400, "not valid JSON"),
        ("POST", "/completion", "[1, 2]", 400, "not a JSON object"),
        ("GET", "/metrics", None, 400, "?model="),
        ("GET", "/props?model=no-such-model", None, 400, "not found"),
        ("POST", "/models/load", {"model": "no-such-model"}, 404, "not found"),
        ("POST", "/models/unload", {"model": "tiny"}, 400, "not loaded"),
        ("POST", "/models/load", {}, 400, "model name is missing"),
        ("GET", "/nowhere", None, 404, "no endpoint"),
        ("GET", "/models/load", None, 405, "takes POST"),
    ]
    for method, path, body, want, words in cases:
        st, b = R.req(method, path, body)
        assert st == want and words in b["error"]["message"], (method, path, st, b)


def test_lru_eviction(R, tmp):
    for m in ("stories", "synth"):  # both loaded (earlier tests or now)
        st, b = R.req("POST", "/completion", cmpl(m, n_predict=2))
        assert st == 200, b
    st, b = R.req("POST", "/completion", cmpl("stories", n_predict=2))  # stories used last: synth is the LRU
    assert st == 200, b
    st, b = R.req("POST", "/models/load", {"model": "tiny"})
    assert st == 200 and b == {"success": True}, b
    R.wait_status("tiny", "loaded")
    assert R.status("synth")["value"] == "unloaded" and R.status("stories")["value"] == "loaded", \
        (R.status("synth"), R.status("stories"))
    st, b = R.req("POST", "/models/load", {"model": "tiny"})
    assert st == 400 and "already loaded" in b["error"]["message"], b
    st, b = R.req("POST", "/models/unload", {"model": "tiny"})
    assert st == 200 and b == {"success": True}, b
    R.wait_status("tiny", "unloaded")
    assert len(R.children()) == 1, R.children()


def test_reload(R, tmp):
    d = os.path.join(tmp, "models")
    os.symlink(os.path.join(ARGS.shared, "models", "stories260K.gguf"), os.path.join(d, "stories-copy.gguf"))
    os.remove(os.path.join(d, "tiny.gguf"))
    st, body = R.req("GET", "/models")
    assert "stories-copy" not in {m["id"] for m in body["data"]}, "listed before ?reload=1"
    st, body = R.req("GET", "/models?reload=1")
    ids = {m["id"] for m in body["data"]}
    assert st == 200 and ids == {"stories", "synth", "stories-copy"}, ids
    st, b = R.req("POST", "/completion", cmpl("stories-copy", n_predict=4))
    assert st == 200 and b["model"] == "stories-copy", b
    st, b = R.req("POST", "/completion", cmpl("tiny", n_predict=4))
    assert st == 400 and "not found" in b["error"]["message"], b


def test_crash_then_reload(R, tmp):
    st, b = R.req("POST", "/completion", cmpl("stories", n_predict=2))
    assert st == 200, b
    before = set(R.children())
    # the stories server: the child whose command line names stories.gguf
    pid = next(p for p in before if "stories.gguf" in open(f"/proc/{p}/cmdline").read())
    os.kill(pid, signal.SIGKILL)
    s = R.wait_status("stories", "unloaded")
    assert s.get("failed") is True and s.get("exit_code") == 128 + 9, s
    st, b = R.req("POST", "/completion", cmpl("stories", n_predict=2))
    assert st == 200 and R.status("stories")["value"] == "loaded", b


def test_no_autoload_and_api_key(R0, tmp):
    R = Router("--models-dir", os.path.join(tmp, "models"), "--no-models-autoload", "--api-key", "sk-router")
    key = {"Authorization": "Bearer sk-router"}
    try:
        st, b = R.req("POST", "/completion", cmpl("stories"))
        assert st == 401 and b["error"]["type"] == "authentication_error", b
        st, b = R.req("POST", "/models/load", {"model": "stories"})
        assert st == 401, b
        st, _ = R.req("GET", "/health")
        assert st == 200
        st, b = R.req("GET", "/models")
        assert st == 200 and b["data"], b
        st, b = R.req("GET", "/props", headers=key)
        assert st == 200 and b["models_autoload"] is False, b
        st, b = R.req("POST", "/completion", cmpl("stories"), headers=key)
        assert st == 400 and "not loaded" in b["error"]["message"], b
        st, b = R.req("POST", "/completion?autoload=true", cmpl("stories", n_predict=2), headers=key)
        assert st == 200, b
        st, b = R.req("POST", "/models/load", {"model": "synth"}, headers=key)
        assert st == 200 and b == {"success": True}, b
        R.wait_status("synth", "loaded")
        st, b = R.req("POST", "/completion", cmpl("synth", n_predict=2), headers={"X-Api-Key": "sk-router"})
        assert st == 200 and b["content"], b
        # the model servers listen on loopback ports of their own: without the router's key for them, refused
        ports = {int(m) for m in re.findall(r"\[\w+\] sift serve: loaded in \d+ ms; listening on http://127.0.0.1:(\d+)",
                                             "".join(R.log))}
        assert len(ports) == 2, ports
        for p in ports:
            c = http.client.HTTPConnection("127.0.0.1", p, timeout=10)
            c.request("POST", "/completion", body=json.dumps({"prompt": "x", "n_predict": 1}))
            assert c.getresponse().status == 401, p
    finally:
        assert R.stop() == 0


def test_preset(R0, tmp):
    ini = os.path.join(tmp, "presets.ini")
    with open(ini, "w") as f:
        f.write("version = 1\n[*]\nc = 256\n\n; a model of --models-dir, with options\n[stories]\nn-predict = 3\n\n"
                "[extra]\nmodel = %s\nalias = nope\n" % os.path.join(ARGS.shared, "models", "stories260K.gguf"))
    p = subprocess.run([ARGS.sift, "serve", "--models-preset", ini, "--port", "0"], capture_output=True, text=True, timeout=30, env=ENV)
    assert p.returncode == 2 and "'alias' is set by the router" in p.stderr, p.stderr
    with open(ini, "w") as f:
        f.write("[*]\nc = 128\nn-predict = 5\n\n[stories]\nn-predict = 3\n\n[extra]\nmodel = %s\njinja = false\n"
                % os.path.join(ARGS.shared, "models", "stories260K.gguf"))
    R = Router("--models-dir", os.path.join(tmp, "models"), "--models-preset", ini)
    try:
        st, body = R.req("GET", "/models")
        src = {m["id"]: m["source"] for m in body["data"]}
        # (test_reload changed the directory: stories-copy in, tiny out)
        assert src == {"stories": "preset", "synth": "models_dir", "stories-copy": "models_dir", "extra": "preset"}, src
        st, b = R.req("POST", "/completion", {"model": "stories", "prompt": "Once", "ignore_eos": True})
        assert st == 200 and b["tokens_predicted"] == 3, b  # the preset's n-predict
        st, b = R.req("POST", "/completion", {"model": "extra", "prompt": "Once", "ignore_eos": True})
        assert st == 200 and b["model"] == "extra" and b["tokens_predicted"] == 5, b  # [*]'s n-predict
        st, props = R.req("GET", "/props?model=extra")
        # the command line (-c 512 -np 2) wins over the preset's c = 128
        assert st == 200 and props["default_generation_settings"]["n_ctx"] == 256, props["default_generation_settings"]
    finally:
        assert R.stop() == 0
    with open(ini, "w") as f:
        f.write("[lonely]\nc = 256\n")
    p = subprocess.run([ARGS.sift, "serve", "--models-preset", ini, "--port", "0"], capture_output=True, text=True, timeout=30, env=ENV)
    assert p.returncode == 2 and "[lonely] names no model" in p.stderr, p.stderr
    p = subprocess.run([ARGS.sift, "serve", "--models-dir", os.path.join(tmp, "nowhere"), "--port", "0"],
                       capture_output=True, text=True, timeout=30, env=ENV)
    assert p.returncode == 2 and "No such file or directory" in p.stderr, p.stderr


def test_hf_cache(R0, tmp):
    """llama.cpp's download cache: listed as OWNER/REPO:TAG, a preset's hf-repo taken from it, and
    `sift serve` without -m a router on it; with an empty cache, -m is asked for."""
    commit = "a" * 40
    top = os.path.join(ENV["LLAMA_CACHE"], "models--acme--tiny-GGUF")
    snap = os.path.join(top, "snapshots", commit, "sub")
    os.makedirs(snap)
    os.makedirs(os.path.join(top, "refs"))
    open(os.path.join(top, "refs", "main"), "w").write(commit + "\n")
    stories = os.path.join(ARGS.shared, "models", "stories260K.gguf")
    for name in ("tiny-Q8_0.gguf", "sub/tiny-F32-00001-of-00002.gguf", "sub/tiny-F32-00002-of-00002.gguf",
                 "mmproj-tiny-F16.gguf", "tiny.gguf"):
        os.symlink(stories, os.path.join(top, "snapshots", commit, name))
    ini = os.path.join(tmp, "hf.ini")
    open(ini, "w").write("[mine]\nhf-repo = acme/tiny-GGUF:f32\n")
    R = Router("--models-preset", ini)
    try:
        st, body = R.req("GET", "/models")
        ids = {m["id"] for m in body["data"]}
        assert ids == {"acme/tiny-GGUF:Q8_0", "acme/tiny-GGUF:F32", "mine"}, ids
        assert {m["source"] for m in body["data"] if m["id"] != "mine"} == {"cache"}, body
        for m in ("acme/tiny-GGUF:Q8_0", "mine"):
            st, b = R.req("POST", "/completion", cmpl(m, n_predict=2))
            assert st == 200 and b["model"] == m, b
    finally:
        assert R.stop() == 0
    R = Router()  # no -m, no --models-*: the cache
    try:
        st, body = R.req("GET", "/v1/models")
        assert {m["id"] for m in body["data"]} == {"acme/tiny-GGUF:Q8_0", "acme/tiny-GGUF:F32"}, body
    finally:
        assert R.stop() == 0
    open(ini, "w").write("[gone]\nhf-repo = acme/other-GGUF\n")
    p = subprocess.run([ARGS.sift, "serve", "--models-preset", ini, "--port", "0"], capture_output=True, text=True, timeout=30,
                       env=ENV)
    assert p.returncode == 2 and "hf-repo acme/other-GGUF is not in the Hugging Face cache" in p.stderr, p.stderr
    shutil.rmtree(top)
    p = subprocess.run([ARGS.sift, "serve", "--port", "0"], capture_output=True, text=True, timeout=30, env=ENV)
    assert p.returncode == 2 and "a model is required" in p.stderr, p.stderr


def test_drain_through(R0, tmp):
    """SIGTERM with a stream running through the router: the stream ends with a complete event
    (the model server's own drain) and the chunked terminator, and all is gone within the bound."""
    R = Router("--models-dir", os.path.join(tmp, "models"), "--drain-timeout", "1", "--context-shift", "--max-n-predict",
               "1000000")
    out = {}

    def run():
        out["raw"] = stream(R.port, "/completion", cmpl("stories", n_predict=1000000, ignore_eos=True, stream=True))
    st, b = R.req("POST", "/models/load", {"model": "stories"})
    assert st == 200, b
    R.wait_status("stories", "loaded")
    th = threading.Thread(target=run)
    th.start()
    time.sleep(0.3)
    kids = R.children()
    t0 = time.time()
    R.proc.send_signal(signal.SIGTERM)
    th.join(timeout=20)
    assert R.proc.wait(timeout=20) == 0
    assert 1 <= time.time() - t0 < 1 + 5, time.time() - t0
    raw = out["raw"]
    head, _, body = raw.partition(b"\r\n\r\n")
    assert b" 200 " in head.split(b"\r\n")[0] and body.endswith(b"0\r\n\r\n"), (head[:80], body[-80:])
    last = json.loads(re.findall(rb"data: ([^\n]*)\n\n", body)[-1])
    assert "error" in last and last["error"]["code"] == 503, last  # cut at the deadline: the closing error event
    for pid in kids:
        assert not os.path.exists(f"/proc/{pid}"), f"model server {pid} outlived the router"


def test_sigterm_stops_all(R, tmp):
    for m in ("stories", "synth"):
        st, b = R.req("POST", "/completion", cmpl(m, n_predict=2))
        assert st == 200, b
    kids = R.children()
    assert len(kids) == 2, kids
    t0 = time.time()
    assert R.stop() == 0
    assert time.time() - t0 < 10, time.time() - t0
    for pid in kids:
        assert not os.path.exists(f"/proc/{pid}"), f"model server {pid} outlived the router"


TESTS = [test_list_and_props, test_same_as_single_server, test_stream_through, test_disconnect_frees_slot, test_bad_requests,
         test_lru_eviction, test_reload, test_crash_then_reload, test_no_autoload_and_api_key, test_preset, test_hf_cache,
         test_drain_through, test_sigterm_stops_all]


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("--sift", required=True)
    ap.add_argument("--shared", required=True)
    ap.add_argument("-k", default=None)
    ARGS = ap.parse_args()
    global ENV
    tmp = tempfile.mkdtemp(prefix="sift-router-")
    ENV = dict(os.environ, LLAMA_CACHE=os.path.join(tmp, "cache"))
    os.makedirs(ENV["LLAMA_CACHE"])
    passed = failed = 0
    R = None
    try:
        models_dir(tmp)
        R = Router("--models-dir", os.path.join(tmp, "models"), "--models-max", "2")
        for t in TESTS:
            if ARGS.k and ARGS.k not in t.__name__:
                continue
            t0 = time.time()
            try:
                t(R, tmp)
                passed += 1
                print(f"ok   {t.__name__} ({time.time() - t0:.1f} s)")
            except Exception as e:  # noqa: BLE001 (report and go on)
                failed += 1
                print(f"FAIL {t.__name__}: {e!r}")
                print("".join(R.log[-15:]))
    finally:
        if R:
            R.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    time.sleep(0.2)  # (the log threads' last lines)
    bad = [l for log in Router.every for l in log if "Sanitizer" in l or "runtime error:" in l]
    if bad:
        failed += 1
        print("FAIL sanitizer reports in the routers' logs:\n" + "".join(bad[:20]))
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
