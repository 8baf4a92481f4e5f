#!/usr/bin/env python3
"""Integration tests of `sift serve` (CTest: server_api).

Starts real servers on 127.0.0.1 (port 0: the server picks a free port and prints it) with
../shared/models/stories260K.gguf and talks HTTP to them with the standard library only:
every endpoint, streaming and not, the OpenAI shapes, n_probs, the chain trace, grammar and
JSON schema, stop strings, logit biases, the same seed giving the same tokens (and the same
probabilities, bit for bit) alone and under concurrent load, a list of named malformed
requests that must each get a 400 naming the field, body limits, a full queue (503 with
Retry-After), a client disconnecting mid-stream (its slot is free again at once), a small
mixed load, and a clean shutdown on SIGTERM.

usage: server_test.py --sift build/sift --model ../shared/models/stories260K.gguf [-k NAME]
Prints one line per test and "N passed, M failed"; exit status 1 on any failure.
"""
import argparse
import concurrent.futures as cf
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

ARGS = None


class Server:
    """A `sift serve` process on 127.0.0.1 with a free port."""

    def __init__(self, *extra, env=None, model=None):
        cmd = [ARGS.sift, "serve", "-m", model or ARGS.model, "--host", "127.0.0.1", "--port", "0", *extra]
        self.proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, env=dict(os.environ, **(env or {})))
        self.log = []
        deadline = time.time() + 60
        self.port = None
        while time.time() < deadline:
            line = self.proc.stderr.readline()
            if not line:
                break
            self.log.append(line)
            m = re.search(r"listening on http://[^:]+:(\d+)", line)
            if m:
                self.port = int(m.group(1))
                break
        if not self.port:
            self.proc.kill()
            raise RuntimeError("server did not start: " + "".join(self.log))
        # keep draining stderr so the server never blocks on a full pipe
        self.drain = threading.Thread(target=self._drain, daemon=True)
        self.drain.start()

    def _drain(self):
        for line in self.proc.stderr:
            self.log.append(line)

    def stop(self):
        """SIGTERM; the server must exit 0 within 20 s (no leak reports under ASan either)."""
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise AssertionError("server did not exit within 20 s of SIGTERM")
        self.drain.join(timeout=5)
        assert rc == 0, f"server exited {rc}: {''.join(self.log[-30:])}"

    # ---- HTTP helpers ----
    def conn(self, timeout=60):
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)

    def request(self, method, path, body=None, headers=None):
        c = self.conn()
        if isinstance(body, (dict, list)):
            body = json.dumps(body)
        if isinstance(body, str):
            body = body.encode()
        c.request(method, path, body=body, headers=headers or {"Content-Type": "application/json"})
        r = c.getresponse()
        data = r.read()
        c.close()
        return r.status, dict(r.getheaders()), data

    def post(self, path, obj):
        st, hd, data = self.request("POST", path, obj)
        return st, json.loads(data)

    def get_json(self, path):
        st, hd, data = self.request("GET", path)
        assert st == 200, (path, st, data)
        return json.loads(data)

    def stream(self, path, obj):
        """POST with stream: true; returns the list of `data:` payloads (parsed JSON, or the
        string "[DONE]")."""
        c = self.conn()
        c.request("POST", path, body=json.dumps(obj), headers={"Content-Type": "application/json"})
        r = c.getresponse()
        assert r.status == 200, (r.status, r.read())
        assert r.getheader("Content-Type").startswith("text/event-stream")
        events = []
        buf = b""
        while True:
            chunk = r.read1(65536)
            if not chunk:
                break
            buf += chunk
            while b"\n\n" in buf:
                ev, buf = buf.split(b"\n\n", 1)
                for line in ev.decode().split("\n"):
                    if line.startswith("data: "):
                        payload = line[6:]
                        events.append(payload if payload == "[DONE]" else json.loads(payload))
        c.close()
        return events


def completion(srv, **kw):
    st, j = srv.post("/completion", kw)
    assert st == 200, (st, j)
    return j


# ---- tests on the main server ---------------------------------------------------------------

def test_health(S):
    st, hd, data = S.request("GET", "/health")
    assert st == 200 and json.loads(data) == {"status": "ok"}
    st, hd, data = S.request("GET", "/v1/health")
    assert st == 200


def test_props(S):
    p = S.get_json("/props")
    assert p["total_slots"] == 4
    d = p["default_generation_settings"]
    assert d["n_ctx"] == 512
    for k in ("temperature", "top_k", "top_p", "min_p", "samplers", "dry_sequence_breakers", "mirostat"):
        assert k in d["params"], k
    assert d["params"]["top_k"] == 40
    assert p["chat_template_name"] == "chatml" and p["chat_template_detected"] is False
    assert p["limits"]["max_prompt_tokens"] == 511


def test_models(S):
    m = S.get_json("/v1/models")
    assert m["object"] == "list" and m["data"][0]["object"] == "model"
    assert m["data"][0]["id"] == os.path.basename(ARGS.model)  # the file name, never the path
    p = S.get_json("/props")
    assert p["model_path"] == os.path.basename(ARGS.model) and p["model_alias"] == os.path.basename(ARGS.model)
    assert os.path.dirname(ARGS.model) not in json.dumps(p)
    assert m["data"][0]["meta"]["n_vocab"] == 512


def test_slots(S):
    s = S.get_json("/slots")
    assert len(s) == 4 and all(not x["is_processing"] for x in s)
    # each slot its own id, also before a request has run (every one said "id": 0)
    assert [x["id"] for x in s] == [0, 1, 2, 3] and all(x["id_task"] == -1 for x in s), s


def test_metrics(S):
    completion(S, prompt="Once", n_predict=4, seed=3, ignore_eos=True)  # exactly 4 tokens, whatever the sampler picks
    # the engine counts a request into the metrics just after its answer is out: wait for it
    t0 = time.time()
    while not re.search(r"^sift_requests_completed_total [1-9]", S.request("GET", "/metrics")[2].decode(), re.M):
        assert time.time() - t0 < 5, "the completion never reached the metrics"
        time.sleep(0.005)
    st, hd, data = S.request("GET", "/metrics")
    assert st == 200 and hd["Content-Type"].startswith("text/plain")
    text = data.decode()
    vals = {}
    for line in text.splitlines():
        if line.startswith("#"):
            assert re.match(r"# (HELP|TYPE) (sift_|llamacpp:)\w+ ", line), line
            continue
        m = re.match(r"((?:sift_|llamacpp:)\w+(?:\{[^}]*\})?) (\S+)$", line)
        assert m, f"not a Prometheus sample line: {line!r}"
        vals[m.group(1)] = float(m.group(2))
    assert vals["sift_tokens_predicted_total"] >= 4
    # llama-server's names next to ours, same values
    for name in ("prompt_tokens_total", "tokens_predicted_total", "n_decode_total", "requests_processing", "requests_deferred",
                 "n_busy_slots_per_decode", "prompt_tokens_seconds", "predicted_tokens_seconds", "kv_cache_usage_ratio"):
        assert vals["llamacpp:" + name] == vals["sift_" + name], name
    assert vals["llamacpp:kv_cache_tokens"] == vals["sift_kv_cells_used"]
    # histograms: cumulative buckets ending at +Inf == count
    for h in ("queue_time_seconds", "time_to_first_token_seconds", "time_per_output_token_seconds"):
        buckets = [(k, v) for k, v in vals.items() if k.startswith(f"sift_{h}_bucket")]
        assert len(buckets) == 15, (h, buckets)
        counts = [v for _, v in buckets]
        assert counts == sorted(counts) and buckets[-1][0].endswith('{le="+Inf"}'), (h, buckets)
        assert counts[-1] == vals[f"sift_{h}_count"] >= 1 and vals[f"sift_{h}_sum"] > 0, (h, buckets, vals[f"sift_{h}_sum"])
    assert vals["sift_n_decode_total"] >= 1
    assert vals["sift_slots_total"] == 4
    assert 'sift_http_requests_total{code="2xx"}' in vals


def test_index_page(S):
    st, hd, data = S.request("GET", "/")
    assert st == 200 and hd["Content-Type"].startswith("text/html")
    html = data.decode()
    assert "sift playground" in html and 'id="generate"' in html and "trace: true" in html


def test_tokenize_detokenize(S):
    st, j = S.post("/tokenize", {"content": "Once upon a time"})
    assert st == 200
    toks = j["tokens"]
    assert toks and all(isinstance(t, int) for t in toks)
    st, j2 = S.post("/tokenize", {"content": "Once upon a time", "add_special": True})
    assert j2["tokens"][0] == 1 and j2["tokens"][1:] == toks  # BOS
    st, j3 = S.post("/tokenize", {"content": "Once", "with_pieces": True})
    assert all("id" in x and "piece" in x for x in j3["tokens"])
    st, d = S.post("/detokenize", {"tokens": toks})
    assert st == 200 and d["content"].strip() == "Once upon a time"


def test_apply_template(S):
    st, j = S.post("/apply-template", {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]})
    assert st == 200
    assert j["prompt"] == "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"


def test_completion_fields(S):
    j = completion(S, prompt="Once upon a time", n_predict=24, seed=42, ignore_eos=True, return_tokens=True)
    for k in ("content", "tokens", "stop", "stop_type", "stopping_word", "generation_settings", "timings", "tokens_predicted",
              "tokens_evaluated", "tokens_cached", "truncated", "model", "prompt", "id_slot"):
        assert k in j, k
    assert j["stop"] is True and j["stop_type"] == "limit" and j["tokens_predicted"] == 24 and len(j["tokens"]) == 24
    assert j["tokens_evaluated"] == 5 and j["prompt"] == "<s> Once upon a time"
    g = j["generation_settings"]
    assert g["seed"] == 42 and g["n_predict"] == 24 and g["ignore_eos"] is True
    assert g["chain"].startswith("logit-bias")  # ignore_eos bans the EOG tokens with a logit bias
    assert j["timings"]["predicted_n"] == 24


def test_same_as_cli(S):
    """The server samples exactly as `sift generate` (llama.cpp common's chain)."""
    j = completion(S, prompt="Once upon a time", n_predict=32, seed=42)
    cli = subprocess.run([ARGS.sift, "generate", "-m", ARGS.model, "-p", "Once upon a time", "-n", "32", "-s", "42",
                          "--log-disable", "--no-display-prompt"], capture_output=True, text=True, check=True).stdout
    assert cli.rstrip("\n") == j["content"], (cli, j["content"])


def test_stream_equals_nonstream(S):
    body = dict(prompt="Once upon a time", n_predict=40, seed=7, ignore_eos=True)
    j = completion(S, **body)
    ev = S.stream("/completion", dict(body, stream=True))
    toks, fin = ev[:-1], ev[-1]
    assert len(toks) == 40 and all(e["stop"] is False and len(e["tokens"]) == 1 for e in toks)
    assert fin["stop"] is True and fin["stop_type"] == "limit" and fin["tokens_predicted"] == 40
    assert "".join(e["content"] for e in toks) == j["content"]
    assert "[DONE]" not in ev  # the native stream has no [DONE]


def test_token_prompt(S):
    st, t = S.post("/tokenize", {"content": "Once upon a time", "add_special": True})
    a = completion(S, prompt="Once upon a time", n_predict=16, seed=3)
    b = completion(S, prompt=t["tokens"], n_predict=16, seed=3)
    c = completion(S, prompt=[t["tokens"][0], "Once upon a time"], n_predict=16, seed=3)  # mixed ids and text
    assert a["content"] == b["content"]
    assert a["tokens_evaluated"] == b["tokens_evaluated"] == 5 and c["tokens_evaluated"] == 5


def test_stop_string(S):
    base = completion(S, prompt="Once upon a time", n_predict=40, seed=42)["content"]
    word = "girl"
    assert word in base
    j = completion(S, prompt="Once upon a time", n_predict=40, seed=42, stop=["zzz", word])
    assert j["stop_type"] == "word" and j["stopping_word"] == word
    assert j["content"] == base[: base.index(word)]
    # streamed: the stop string never reaches the client, not even partly
    ev = S.stream("/completion", dict(prompt="Once upon a time", n_predict=40, seed=42, stop=[word], stream=True))
    assert "".join(e["content"] for e in ev[:-1]) == j["content"] and ev[-1]["stop_type"] == "word"


def test_n_probs(S):
    # the default, as current llama-server writes it: logprob / top_logprobs of the model's
    # distribution (was prob / top_probs here until llama-server's format was followed)
    j = completion(S, prompt="Once upon a time", n_predict=8, seed=5, n_probs=3, ignore_eos=True)
    assert j["completion_probabilities"] == completion(
        S, prompt="Once upon a time", n_predict=8, seed=5, n_probs=3, ignore_eos=True, post_sampling_probs=False)["completion_probabilities"]
    cp = j["completion_probabilities"]
    assert len(cp) == 8
    for e in cp:
        tops = e["top_logprobs"]
        assert len(tops) == 3 and all(set(x) == {"id", "token", "bytes", "logprob"} for x in tops)
        lps = [x["logprob"] for x in tops]
        assert lps == sorted(lps, reverse=True) and all(lp <= 0 for lp in lps)
        assert e["logprob"] <= 0 and bytes(e["bytes"]).decode(errors="replace") == e["token"]
    for e in cp:
        assert set(e) == {"id", "token", "bytes", "logprob", "top_logprobs"}, e
    # post_sampling_probs: probabilities after the chain, of what the samplers left (top_k 2: two summing to 1)
    j = completion(S, prompt="Once upon a time", n_predict=6, seed=5, n_probs=5, top_k=2, post_sampling_probs=True)
    for e in j["completion_probabilities"]:
        assert set(e) == {"id", "token", "bytes", "prob", "top_probs"}, e
        ps = [x["prob"] for x in e["top_probs"]]
        assert 1 <= len(ps) <= 2 and abs(sum(ps) - 1) < 1e-5 and 0 < e["prob"] <= 1


def test_trace(S):
    j = completion(S, prompt="Once upon a time", n_predict=5, seed=11, trace=True, trace_top=4, top_k=10)
    tr = j["trace"]
    assert len(tr) == 5
    for t, tok in zip(tr, j["generation_settings"] and [None] * 5):
        st = t["stages"]
        assert st[0]["name"] == "(logits)" and st[0]["n"] == 512 and len(st[0]["top"]) == 4
        names = [s["name"] for s in st]
        assert "top-k" in names and names[-1] == "dist", names
        topk = st[names.index("top-k")]
        assert topk["n"] == 10
        assert st[-1]["selected"] == t["id"]
        assert all(0 <= c["p"] <= 1 for s in st for c in s["top"])
        assert all(s["n"] <= st[0]["n"] for s in st)
    ev = S.stream("/completion", dict(prompt="Once", n_predict=3, trace=True, stream=True))
    assert all("trace" in e and e["trace"]["stages"] for e in ev[:-1])


def test_grammar(S):
    for seed in range(4):
        j = completion(S, prompt="Once upon a time", n_predict=16, seed=seed, grammar='root ::= ("yes" | "no") "."')
        assert j["content"] in ("yes.", "no."), j["content"]
        assert j["stop_type"] == "eos"


def test_grammar_no_allowed_token(S):
    # issue 12: a forbidden token is never sampled. A complete grammar under ignore_eos stops
    # (the text the grammar allowed, status 200); a grammar no token can continue fails with
    # a clear 400, not "\u001b" with status 200.
    for seed in range(3):
        j = completion(S, prompt="Once", n_predict=5, seed=seed, ignore_eos=True, grammar='root ::= "x" | "y"')
        assert j["content"] in ("x", "y"), j["content"]
    st, j = S.post("/completion", dict(prompt="Once", n_predict=5, seed=1, grammar='root ::= "\\x00"'))
    assert st == 400 and "grammar allows no token" in json.dumps(j), (st, j)


def exponential_grammar(levels=20):
    """a_i ::= a_{i+1} a_{i+1} | [a-z]: 2^levels ways to parse a text (issue 26: 478 bytes at 20)."""
    rules = ["root ::= a0"] + [f"a{i} ::= a{i + 1} a{i + 1} | [a-z]" for i in range(levels)] + [f"a{levels} ::= [a-z]"]
    return "\n".join(rules) + "\n"


def test_exponential_grammar_400(S):
    """issue 26: the parse stacks of an exponentially ambiguous grammar stop at SIFT_GRAMMAR_MAX_STACKS
    with a 400 naming the limit (it was 12 minutes of CPU and 2 GB on the engine thread); a
    request beside it keeps its latency."""
    g = exponential_grammar()
    assert len(g) == 478
    t0 = time.time()
    st, j = S.post("/completion", dict(prompt="Once", n_predict=64, seed=1, ignore_eos=True, grammar=g))
    took = time.time() - t0
    assert st == 400 and "SIFT_GRAMMAR_MAX_STACKS" in json.dumps(j), (st, j)
    assert took < 5, took
    res = {}

    def attack():
        res["attack"] = S.post("/completion", dict(prompt="Once", n_predict=64, seed=2, ignore_eos=True, grammar=g))[0]

    th = threading.Thread(target=attack)
    th.start()
    t0 = time.time()
    j = completion(S, prompt="Once upon a time", n_predict=8, seed=1)
    took = time.time() - t0
    th.join()
    assert j["tokens_predicted"] == 8 and took < 3, (j, took)
    assert res["attack"] == 400, res


def test_json_schema(S):
    schema = {"type": "object", "properties": {"n": {"type": "integer"}, "ok": {"type": "boolean"}}, "required": ["n", "ok"],
              "additionalProperties": False}
    j = completion(S, prompt="Once upon a time", n_predict=64, seed=1, json_schema=schema, temperature=0.5)
    obj = json.loads(j["content"])
    assert set(obj) == {"n", "ok"} and isinstance(obj["n"], int) and isinstance(obj["ok"], bool)
    st, c = S.post("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 64, "seed": 2,
                                            "response_format": {"type": "json_schema", "json_schema": {"schema": schema}}})
    assert st == 200 and set(json.loads(c["choices"][0]["message"]["content"])) == {"n", "ok"}


def test_json_object_is_an_object(S):
    """issue 32: response_format json_object means a JSON object, as OpenAI defines it (the
    model's output must start with "{" and parse to a dict), for several seeds."""
    for seed in range(4):
        st, c = S.post("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 48,
                                                "seed": seed, "temperature": 1.0, "response_format": {"type": "json_object"}})
        assert st == 200, c
        text = c["choices"][0]["message"]["content"]
        assert text.lstrip().startswith("{"), text
        if c["choices"][0]["finish_reason"] == "stop":
            assert isinstance(json.loads(text), dict), text


def test_grammar_compiled_once(S):
    """issue 32: a request with n = 4 and a json_schema compiles the schema once (the four
    choices share it), and the same schema in a later request is a cache hit; /metrics and
    /props count both."""
    metric = lambda name: float(re.search(r"^sift_%s (\S+)$" % name, S.request("GET", "/metrics")[2].decode(), re.M).group(1))
    schema = {"title": "compiled once %.6f" % time.time(), "type": "object", "properties": {"a": {"type": "boolean"}},
              "required": ["a"], "additionalProperties": False}
    body = {"prompt": "Once", "max_tokens": 16, "n": 4, "seed": 1,
            "response_format": {"type": "json_schema", "json_schema": {"schema": schema}}}
    c0, h0 = metric("grammar_compiles_total"), metric("grammar_cache_hits_total")
    st, j = S.post("/v1/completions", body)
    assert st == 200 and len(j["choices"]) == 4, j
    assert all(c["text"].startswith("{") for c in j["choices"]), j["choices"]
    c1, h1 = metric("grammar_compiles_total"), metric("grammar_cache_hits_total")
    assert (c1 - c0, h1 - h0) == (1, 3), (c0, c1, h0, h1)
    st, j = S.post("/v1/completions", dict(body, n=1))
    assert st == 200, j
    c2, h2 = metric("grammar_compiles_total"), metric("grammar_cache_hits_total")
    assert (c2 - c1, h2 - h1) == (0, 1), (c1, c2, h1, h2)
    g = S.get_json("/props")["grammar_compiler"]
    assert g["compiles"] >= c2 and g["cache_hits"] >= h2 and g["cached"] >= 1, g


def test_logit_bias(S):
    g = completion(S, prompt="Once upon a time", n_predict=1, temperature=0, n_probs=2, post_sampling_probs=False)
    first = g["completion_probabilities"][0]["id"]
    second = g["completion_probabilities"][0]["top_logprobs"][1]["id"]
    for lb in ([[first, False]], {str(first): -100}, [[g["completion_probabilities"][0]["token"], False]]):
        j = completion(S, prompt="Once upon a time", n_predict=1, temperature=0, n_probs=1, logit_bias=lb)
        assert j["completion_probabilities"][0]["id"] == second, (lb, j["completion_probabilities"][0])
    j = completion(S, prompt="Once upon a time", n_predict=1, temperature=0, n_probs=1, logit_bias=[[second, 100]])
    assert j["completion_probabilities"][0]["id"] == second


def test_samplers_order(S):
    j = completion(S, prompt="Once", n_predict=2, samplers=["top_k", "temperature"])
    assert j["generation_settings"]["chain"] == "top-k -> temp-ext -> dist"
    j = completion(S, prompt="Once", n_predict=2, samplers="kt")
    assert j["generation_settings"]["samplers"] == ["top_k", "temperature"]
    j = completion(S, prompt="Once", n_predict=2, mirostat=2)
    assert "mirostat-v2" in j["generation_settings"]["chain"]


def test_every_sampling_field(S):
    j = completion(S, prompt="Once upon a time", n_predict=12, seed=9, temperature=0.9, dynatemp_range=0.2, dynatemp_exponent=1.1,
                   top_k=30, top_p=0.9, min_p=0.02, typical_p=0.95, top_n_sigma=2.0, repeat_penalty=1.1, repeat_last_n=32,
                   presence_penalty=0.1, frequency_penalty=0.1, dry_multiplier=0.8, dry_base=1.75, dry_allowed_length=2,
                   dry_penalty_last_n=-1, dry_sequence_breakers=["\n", "."], xtc_probability=0.3, xtc_threshold=0.2,
                   mirostat=0, mirostat_tau=5, mirostat_eta=0.1, min_keep=1, ignore_eos=True, logit_bias=[[13, -1.5]])
    chain = j["generation_settings"]["chain"]
    for name in ("logit-bias", "penalties", "dry", "top-n-sigma", "top-k", "typical", "top-p", "min-p", "xtc", "temp-ext", "dist"):
        assert re.search(r"(^| )" + name + r"( |$)", chain), (name, chain)
    assert j["tokens_predicted"] == 12
    assert j["generation_settings"]["dry_penalty_last_n"] == 512  # -1 = the slot's context


def test_oai_completions(S):
    st, j = S.post("/v1/completions", {"model": "gpt-3.5-turbo-instruct", "prompt": "Once upon a time", "max_tokens": 10,
                                       "seed": 4, "logprobs": 2})
    assert st == 200 and j["object"] == "text_completion" and j["id"].startswith("cmpl-")
    c = j["choices"][0]
    assert c["index"] == 0 and isinstance(c["text"], str) and c["finish_reason"] in ("length", "stop")
    assert j["model"] == "gpt-3.5-turbo-instruct"
    u = j["usage"]
    assert u["prompt_tokens"] == 5 and u["completion_tokens"] <= 10 and u["total_tokens"] == u["prompt_tokens"] + u["completion_tokens"]
    assert len(c["logprobs"]["content"]) == u["completion_tokens"]
    ev = S.stream("/v1/completions", {"prompt": "Once upon a time", "max_tokens": 10, "seed": 4, "stream": True})
    assert ev[-1] == "[DONE]"
    chunks = ev[:-1]
    assert all(e["object"] == "text_completion" for e in chunks)
    assert chunks[-1]["choices"][0]["finish_reason"] in ("length", "stop") and "usage" in chunks[-1]
    assert "".join(e["choices"][0]["text"] for e in chunks) == c["text"]


def test_oai_chat(S):
    msgs = [{"role": "system", "content": "You tell stories."}, {"role": "user", "content": [{"type": "text", "text": "Tell one."}]}]
    st, j = S.post("/v1/chat/completions", {"model": "x", "messages": msgs, "max_tokens": 12, "seed": 8, "logprobs": True,
                                            "top_logprobs": 2})
    assert st == 200 and j["object"] == "chat.completion" and j["id"].startswith("chatcmpl-")
    c = j["choices"][0]
    assert c["message"]["role"] == "assistant" and isinstance(c["message"]["content"], str)
    assert c["finish_reason"] in ("length", "stop")
    assert len(c["logprobs"]["content"]) == j["usage"]["completion_tokens"]
    assert all(len(x["top_logprobs"]) == 2 for x in c["logprobs"]["content"])
    ev = S.stream("/v1/chat/completions", {"messages": msgs, "max_tokens": 12, "seed": 8, "stream": True,
                                           "stream_options": {"include_usage": True}})
    assert ev[-1] == "[DONE]"
    ch = ev[:-1]
    assert all(e["object"] == "chat.completion.chunk" and e["id"] == ch[0]["id"] for e in ch)
    assert ch[0]["choices"][0]["delta"] == {"role": "assistant", "content": None}
    assert ch[-2]["choices"][0]["finish_reason"] == c["finish_reason"] and ch[-2]["choices"][0]["delta"] == {}
    assert ch[-1]["choices"] == [] and ch[-1]["usage"]["completion_tokens"] == j["usage"]["completion_tokens"]
    text = "".join(e["choices"][0]["delta"].get("content") or "" for e in ch[1:-2])
    assert text == c["message"]["content"]


def test_llama_server_shapes(S):
    """llama-server's request and answer shapes: response_fields (paths as keys), an object
    prompt {"prompt_string"}, a last assistant message as the reply's prefill, ignore_eos's
    EOG biases (null = -inf) in generation_settings, cached_tokens in usage."""
    st, j = S.post("/completion", {"prompt": "Once upon", "n_predict": 4, "response_fields": ["content", "generation_settings/n_predict", "nope/x"]})
    assert st == 200 and set(j) == {"content", "generation_settings/n_predict"} and j["generation_settings/n_predict"] == 4, j
    st, a = S.post("/completion", {"prompt": {"prompt_string": "Once upon"}, "n_predict": 4, "temperature": 0})
    st2, b = S.post("/completion", {"prompt": "Once upon", "n_predict": 4, "temperature": 0})
    assert st == st2 == 200 and a["content"] == b["content"], (a, b)
    msgs = [{"role": "user", "content": "Tell"}]
    st, full = S.post("/apply-template", {"messages": msgs})
    st2, pre = S.post("/apply-template", {"messages": msgs + [{"role": "assistant", "content": [{"type": "text", "text": "Wh"}, {"type": "text", "text": "ill"}]}]})
    assert st == st2 == 200 and pre["prompt"] == full["prompt"] + "Whill", (full, pre)
    st, nogen = S.post("/apply-template", {"messages": msgs, "add_generation_prompt": False})
    assert st == 200 and full["prompt"].startswith(nogen["prompt"]) and len(nogen["prompt"]) < len(full["prompt"]), (nogen, full)
    st, j = S.post("/completion", {"prompt": "Once", "n_predict": 2, "ignore_eos": True})
    lb = j["generation_settings"]["logit_bias"]
    assert st == 200 and lb and all(e["bias"] is None for e in lb), lb
    st, j = S.post("/v1/chat/completions", {"messages": msgs, "max_tokens": 2})
    assert st == 200 and "cached_tokens" in j["usage"]["prompt_tokens_details"], j
    assert j["system_fingerprint"].startswith("b"), j


def test_errors_misc(S):
    st, hd, data = S.request("GET", "/nope")
    assert st == 404 and json.loads(data)["error"]["type"] == "not_found_error"
    st, hd, data = S.request("GET", "/completion")
    assert st == 405
    st, hd, data = S.request("OPTIONS", "/completion")
    assert st == 200 and "Access-Control-Allow-Origin" not in hd  # no CORS unless --cors-origin


def test_body_limit(S):
    def raw(head, chunks=()):
        s = socket.create_connection(("127.0.0.1", S.port), timeout=30)
        s.sendall(head)
        try:
            for c in chunks:
                s.sendall(c)
        except OSError:  # the server may close as soon as it has answered
            pass
        resp = b""
        try:
            while b"\r\n\r\n" not in resp:
                d = s.recv(4096)
                if not d:
                    break
                resp += d
        except OSError:
            pass
        s.close()
        return resp
    # Content-Length over the limit: refused before the body is read
    resp = raw(b"POST /completion HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 5000000\r\n\r\n")
    assert resp.startswith(b"HTTP/1.1 413"), resp[:80]
    # chunked upload without Content-Length, past the limit: read and dropped, then 413
    piece = b"a" * 65536
    resp = raw(b"POST /completion HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\nContent-Type: application/json\r\n\r\n",
               [b"%x\r\n" % len(piece) + piece + b"\r\n"] * 20 + [b"0\r\n\r\n"])
    assert resp.startswith(b"HTTP/1.1 413"), resp[:80]
    # just under the limit is fine (a 400 for the content, not a 413)
    st, hd, data = S.request("POST", "/completion", json.dumps({"prompt": "x", "pad": "y" * ((1 << 20) - 100)}))
    assert st == 200, (st, data[:200])


# name, path, body (a str is sent as is), what the message must mention
MALFORMED = [
    ("syntax_error", "/completion", '{"prompt": "x", ', "invalid JSON"),
    ("empty_body", "/completion", "", "empty request body"),
    ("trailing_garbage", "/completion", '{"prompt": "x"} xyz', "unexpected data"),
    ("top_level_array", "/completion", '["x"]', "JSON object"),
    ("top_level_string", "/completion", '"x"', "JSON object"),
    ("deep_nesting", "/completion", "[" * 5000 + "]" * 5000, "invalid JSON"),
    ("prompt_missing", "/completion", {"n_predict": 4}, "'prompt' is required"),
    ("prompt_number", "/completion", {"prompt": 5}, "'prompt'"),
    ("prompt_object", "/completion", {"prompt": {"a": 1}}, "'prompt'"),
    ("prompt_multimodal", "/completion", {"prompt": {"prompt_string": "x", "multimodal_data": ["iVBO"]}}, "'prompt'"),
    ("response_fields", "/completion", {"prompt": "x", "response_fields": "content"}, "'response_fields'"),
    ("continue_and_generation_prompt", "/v1/chat/completions", {"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}],
                                                                "add_generation_prompt": True, "continue_final_message": True}, "'continue_final_message'"),
    ("continue_part_unknown", "/v1/chat/completions", {"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}],
                                                       "continue_final_message": "both"}, "'continue_final_message'"),
    ("prefill_reasoning_number", "/v1/chat/completions", {"messages": [{"role": "user", "content": "a"},
                                                                       {"role": "assistant", "content": "b", "reasoning_content": 5}]},
     "'messages[1].reasoning_content'"),
    ("two_assistant_prefills", "/v1/chat/completions", {"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"},
                                                                     {"role": "assistant", "content": "c"}]}, "'messages'"),
    ("prompt_token_out_of_range", "/completion", {"prompt": [1, 99999]}, "'prompt[1]'"),
    ("prompt_token_negative", "/completion", {"prompt": [-3]}, "'prompt[0]'"),
    ("prompt_token_fraction", "/completion", {"prompt": [1, 2.5]}, "'prompt[1]'"),
    ("prompt_array_object_item", "/completion", {"prompt": ["a", {"x": 1}]}, "'prompt[1]'"),
    ("prompt_array_nested_array", "/completion", {"prompt": ["a", [1, [2]]]}, "'prompt[1][1]'"),
    ("prompt_array_bad_token", "/v1/completions", {"prompt": ["a", [1, 99999]]}, "'prompt[1][1]'"),
    ("prompt_array_empty_item", "/completion", {"prompt": ["a", []]}, "'prompt[1]' is an empty array"),
    ("prompt_too_many", "/completion", {"prompt": ["a"] * 65}, "at most 64 prompts"),
    ("prompts_times_n", "/completion", {"prompt": ["a"] * 20, "n": 4}, "more than 64"),
    ("prompt_bool_item", "/completion", {"prompt": [1, True]}, "'prompt[1]'"),
    ("prompt_too_long", "/completion", {"prompt": [5] * 600}, "context size"),
    ("prompt_bad_utf8", "/completion", b'{"prompt": "\xff\xfe"}', "UTF-8"),
    ("n_predict_string", "/completion", {"prompt": "x", "n_predict": "10"}, "'n_predict'"),
    ("n_predict_too_large", "/completion", {"prompt": "x", "n_predict": 10 ** 9}, "'n_predict'"),
    ("n_predict_below_minus_one", "/completion", {"prompt": "x", "n_predict": -5}, "'n_predict'"),
    ("temperature_string", "/completion", {"prompt": "x", "temperature": "hot"}, "'temperature'"),
    ("top_k_fraction", "/completion", {"prompt": "x", "top_k": 4.5}, "'top_k'"),
    ("top_p_above_one", "/completion", {"prompt": "x", "top_p": 1.5}, "'top_p'"),
    ("min_p_negative", "/completion", {"prompt": "x", "min_p": -0.1}, "'min_p'"),
    ("typical_p_array", "/completion", {"prompt": "x", "typical_p": [1]}, "'typical_p'"),
    ("repeat_last_n_below", "/completion", {"prompt": "x", "repeat_last_n": -2}, "'repeat_last_n'"),
    ("mirostat_three", "/completion", {"prompt": "x", "mirostat": 3}, "'mirostat'"),
    ("xtc_probability_two", "/completion", {"prompt": "x", "xtc_probability": 2}, "'xtc_probability'"),
    # the CLI's rules (libsift's sift_sampling_params_validate): same field, same message
    ("repeat_penalty_zero", "/completion", {"prompt": "x", "repeat_penalty": 0}, "'repeat_penalty' (--repeat-penalty) must be a number in (0, 10], got 0"),
    ("top_p_rule_message", "/completion", {"prompt": "x", "top_p": 2}, "'top_p' (--top-p) must be a number in [0, 1], got 2"),
    ("min_keep_vocab", "/completion", {"prompt": "x", "min_keep": 600}, "'min_keep' (--min-keep) must be an integer in [0, 512]"),
    ("seed_negative", "/completion", {"prompt": "x", "seed": -2}, "'seed'"),
    ("seed_too_large", "/completion", {"prompt": "x", "seed": 2 ** 32}, "'seed'"),
    ("n_probs_too_many", "/completion", {"prompt": "x", "n_probs": 1000}, "'n_probs'"),
    ("stream_not_bool", "/completion", {"prompt": "x", "stream": "yes"}, "'stream'"),
    ("ignore_eos_number", "/completion", {"prompt": "x", "ignore_eos": 1}, "'ignore_eos'"),
    ("samplers_unknown_name", "/completion", {"prompt": "x", "samplers": ["top_k", "topq"]}, "'samplers[1]'"),
    ("samplers_not_string", "/completion", {"prompt": "x", "samplers": [3]}, "'samplers[0]'"),
    ("samplers_number", "/completion", {"prompt": "x", "samplers": 7}, "'samplers'"),
    ("samplers_bad_letter", "/completion", {"prompt": "x", "samplers": "kq"}, "'samplers'"),
    ("logit_bias_token_range", "/completion", {"prompt": "x", "logit_bias": [[70000, 1]]}, "'logit_bias[0][0]'"),
    ("logit_bias_value_string", "/completion", {"prompt": "x", "logit_bias": [[5, "big"]]}, "'logit_bias[0][1]'"),
    ("logit_bias_triple", "/completion", {"prompt": "x", "logit_bias": [[5, 1, 2]]}, "'logit_bias[0]'"),
    ("logit_bias_object_value", "/completion", {"prompt": "x", "logit_bias": {"5": "x"}}, "'logit_bias.5'"),
    ("logit_bias_number", "/completion", {"prompt": "x", "logit_bias": 5}, "'logit_bias'"),
    ("stop_number", "/completion", {"prompt": "x", "stop": 5}, "'stop'"),
    ("stop_item_number", "/completion", {"prompt": "x", "stop": ["a", 5]}, "'stop[1]'"),
    ("dry_breakers_empty", "/completion", {"prompt": "x", "dry_sequence_breakers": []}, "'dry_sequence_breakers'"),
    ("dry_breakers_number", "/completion", {"prompt": "x", "dry_sequence_breakers": [1]}, "'dry_sequence_breakers[0]'"),
    ("grammar_syntax", "/completion", {"prompt": "x", "grammar": "root ::= (\"a\""}, "'grammar'"),
    ("grammar_undefined_rule", "/completion", {"prompt": "x", "grammar": "root ::= foo"}, "'grammar'"),
    ("grammar_number", "/completion", {"prompt": "x", "grammar": 5}, "'grammar'"),
    ("json_schema_string", "/completion", {"prompt": "x", "json_schema": "object"}, "'json_schema'"),
    ("json_schema_unsupported", "/completion", {"prompt": "x", "json_schema": {"type": "string", "not": {}}}, "'json_schema'"),
    ("trace_top_zero", "/completion", {"prompt": "x", "trace": True, "trace_top": 0}, "'trace_top'"),
    ("id_slot_out_of_range", "/completion", {"prompt": "x", "id_slot": 99}, "'id_slot'"),
    ("oai_n_zero", "/v1/completions", {"prompt": "x", "n": 0}, "'n' must be an integer in [1, 4]"),
    ("oai_n_beyond_slots", "/v1/completions", {"prompt": "x", "n": 1000}, "'n' must be an integer in [1, 4] (one completion per slot, -np), got 1000"),
    ("oai_n_fraction", "/v1/completions", {"prompt": "x", "n": 1.5}, "'n'"),
    ("chat_n_string", "/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "n": "2"}, "'n'"),
    ("n_cmpl_beyond_slots", "/completion", {"prompt": "x", "n_cmpl": 5}, "'n_cmpl'"),
    ("oai_echo_string", "/v1/completions", {"prompt": "x", "echo": "yes"}, "'echo'"),
    ("chat_echo", "/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "echo": True}, "'echo'"),
    ("oai_max_tokens_string", "/v1/completions", {"prompt": "x", "max_tokens": "5"}, "'max_tokens'"),
    ("chat_messages_missing", "/v1/chat/completions", {"model": "x"}, "'messages'"),
    ("chat_messages_object", "/v1/chat/completions", {"messages": {"role": "user"}}, "'messages'"),
    ("chat_messages_empty", "/v1/chat/completions", {"messages": []}, "'messages'"),
    ("chat_role_missing", "/v1/chat/completions", {"messages": [{"content": "hi"}]}, "'messages[0].role'"),
    ("chat_content_number", "/v1/chat/completions", {"messages": [{"role": "user", "content": 5}]}, "'messages[0].content'"),
    ("chat_image_part", "/v1/chat/completions",
     {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]}, "'messages[0].content[0]'"),
    ("chat_logprobs_number", "/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "logprobs": 3}, "'logprobs'"),
    ("chat_top_logprobs_alone", "/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "top_logprobs": 3},
     "'top_logprobs'"),
    ("chat_response_format_type", "/v1/chat/completions",
     {"messages": [{"role": "user", "content": "hi"}], "response_format": {"type": "xml"}}, "'response_format.type'"),
    ("chat_tools", "/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "function"}]},
     "'tools[0]'"),
    ("tokenize_content_missing", "/tokenize", {"text": "x"}, "'content'"),
    ("tokenize_content_number", "/tokenize", {"content": 5}, "'content'"),
    ("detokenize_bad_token", "/detokenize", {"tokens": [1, "x"]}, "'tokens[1]'"),
    ("detokenize_not_array", "/detokenize", {"tokens": 5}, "'tokens'"),
]


def test_malformed(S):
    failures = []
    for name, path, body, must in MALFORMED:
        if not isinstance(body, bytes):
            body = body if isinstance(body, str) else json.dumps(body)
        st, hd, data = S.request("POST", path, body)
        try:
            err = json.loads(data)["error"]
            ok = st == 400 and err["code"] == 400 and must in err["message"] and err["type"] in (
                "invalid_request_error", "exceed_context_size_error")
        except Exception:
            ok, err = False, data[:200]
        if not ok:
            failures.append(f"{name}: {st} {err}")
    assert len(MALFORMED) >= 30
    assert not failures, "\n  ".join(failures)
    # the server is fine afterwards: every slot idle, a normal request works
    assert completion(S, prompt="Once", n_predict=3)["tokens_predicted"] == 3
    print(f"    {len(MALFORMED)} malformed requests, each answered 400 naming the field")


def test_seed_reproducible_under_load(S):
    """Same seed -> same tokens and the same probabilities (bit for bit: the batched decode
    gives each sequence the logits it would get alone), whatever else is running."""
    probe = dict(prompt="Once upon a time there was a dragon", n_predict=48, seed=1234, ignore_eos=True, n_probs=3,
                 cache_prompt=False)
    alone = completion(S, **probe)
    stop = threading.Event()

    def noise(i):
        n = 0
        while not stop.is_set():
            body = dict(prompt=["Lily", "Tom went", "The sun", "A cat"][i % 4] + " " * (n % 3), n_predict=60 + 13 * i,
                        seed=i * 100 + n, ignore_eos=True, stream=bool(i % 2), cache_prompt=False)
            if body["stream"]:
                S.stream("/completion", body)
            else:
                completion(S, **body)
            n += 1

    with cf.ThreadPoolExecutor(6) as ex:
        futs = [ex.submit(noise, i) for i in range(3)]
        time.sleep(0.05)
        loaded = [completion(S, **probe) for _ in range(3)]
        loaded.append(completion(S, **dict(probe, cache_prompt=True)))  # prefix reuse gives the same bits too
        st = S.stream("/completion", dict(probe, stream=True))
        stop.set()
        for f in futs:
            f.result()
    for j in loaded:
        assert j["content"] == alone["content"]
        assert j["completion_probabilities"] == alone["completion_probabilities"], "probabilities differ under load"
    assert "".join(e["content"] for e in st[:-1]) == alone["content"]
    assert [e["completion_probabilities"][0] for e in st[:-1]] == alone["completion_probabilities"]
    m = S.request("GET", "/metrics")[2].decode()
    busy = float(re.search(r"^sift_n_busy_slots_per_decode (\S+)$", m, re.M).group(1))
    print(f"    4 loaded runs + 1 streamed == alone (text and n_probs); average busy slots per decode {busy:.2f}")
    assert busy > 1.0, "requests were not batched together"


def test_mixed_load(S):
    """A small mixed load: 16 clients, 120 requests, every 10th malformed."""
    def one(i):
        if i % 10 == 0:
            st, j = S.post("/completion", {"prompt": "x", "top_p": "high"})
            return ("bad", st, j)
        kind = i % 3
        n = 8 + i % 17
        if kind == 0:
            st, j = S.post("/completion", {"prompt": "Once", "n_predict": n, "ignore_eos": True, "seed": i})
            return ("ok", st, j.get("tokens_predicted"), n)
        if kind == 1:
            st, j = S.post("/v1/completions", {"prompt": "Once", "max_tokens": n, "ignore_eos": True, "seed": i})
            return ("ok", st, j.get("usage", {}).get("completion_tokens"), n)
        ev = S.stream("/completion", {"prompt": "Once", "n_predict": n, "ignore_eos": True, "seed": i, "stream": True})
        return ("ok", 200, len(ev) - 1, n)

    with cf.ThreadPoolExecutor(16) as ex:
        res = list(ex.map(one, range(120)))
    for r in res:
        if r[0] == "bad":
            assert r[1] == 400, r
        else:
            assert r[1] == 200 and r[2] == r[3], r
    wait_idle(S)


def wait_idle(S, limit=2.0):
    """Every slot idle within `limit` seconds (/slots is the engine's view as of its last step)."""
    t0 = time.time()
    while any(s["is_processing"] for s in S.get_json("/slots")):
        assert time.time() - t0 < limit, "a slot is still busy"
        time.sleep(0.005)


def test_sse_format(S):
    """Raw bytes: chunked transfer, `data: ` lines separated by blank lines."""
    s = socket.create_connection(("127.0.0.1", S.port), timeout=30)
    body = json.dumps({"prompt": "Once", "n_predict": 3, "stream": True}).encode()
    s.sendall(b"POST /completion HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
              b"Connection: close\r\n\r\n" % len(body) + body)
    raw = b""
    while True:
        d = s.recv(65536)
        if not d:
            break
        raw += d
    s.close()
    head, _, rest = raw.partition(b"\r\n\r\n")
    assert b"200 OK" in head.split(b"\r\n")[0] and b"text/event-stream" in head and b"chunked" in head.lower()
    # de-chunk
    out = b""
    while rest:
        size_line, _, rest = rest.partition(b"\r\n")
        size = int(size_line, 16)
        if size == 0:
            break
        out += rest[:size]
        rest = rest[size + 2:]
    events = out.split(b"\n\n")
    assert events[-1] == b"" and all(e.startswith(b"data: {") for e in events[:-1]) and len(events) - 1 == 4


# ---- a second server: one slot, a long context, a queue of one ----------------------------------

def open_long_stream(srv, n_events):
    """A streamed /completion of 16000 tokens on its own socket, returned once n_events have arrived
    (the request is then surely in a slot); the caller closes it to make the client go away."""
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
    body = json.dumps({"prompt": "Once upon a time", "n_predict": 16000, "ignore_eos": True, "stream": True}).encode()
    s.sendall(b"POST /completion HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body)
              + body)
    got = b""
    while got.count(b"data: ") < n_events:
        got += s.recv(4096)
    return s


def test_disconnect_frees_slot(L):
    """A client that goes away mid-stream frees its slot at once."""
    s = open_long_stream(L, 5)
    slots = L.get_json("/slots")
    assert slots[0]["is_processing"], slots
    t0 = time.time()
    s.close()
    while L.get_json("/slots")[0]["is_processing"]:
        assert time.time() - t0 < 2.0, "the slot is still busy 2 s after the client left"
        time.sleep(0.005)
    freed = time.time() - t0
    m = L.request("GET", "/metrics")[2].decode()
    cancelled = float(re.search(r"^sift_requests_cancelled_total (\S+)$", m, re.M).group(1))
    predicted = float(re.search(r"^sift_tokens_predicted_total (\S+)$", m, re.M).group(1))
    assert cancelled >= 1
    assert predicted < 16000, predicted
    # and the slot works for the next request
    assert completion(L, prompt="Once", n_predict=5)["tokens_predicted"] == 5
    print(f"    slot free {1e3 * freed:.0f} ms after the client closed mid-stream ({predicted:.0f} tokens generated of 16000)")


def test_amplification_budget(L):
    """Issue 26: a 222-byte request (trace, trace_top 64, n_probs 100, 4,000 tokens) made an
    82 MB response and an 885 MB peak. Now --max-probs-bytes (256 MiB) refuses it at once
    with a 400 naming the limit, four at once too, and a modest one still runs."""
    big = {"prompt": "Once upon a time", "n_predict": 4000, "ignore_eos": True, "n_probs": 100, "trace": True,
           "trace_top": 64}
    t0 = time.time()
    with cf.ThreadPoolExecutor(4) as ex:
        res = list(ex.map(lambda _: L.post("/completion", big), range(4)))
    dt = time.time() - t0
    for st, j in res:
        assert st == 400 and "--max-probs-bytes" in j["error"]["message"], (st, j)
    j = completion(L, prompt="Once", n_predict=20, n_probs=5, trace=True, trace_top=4, seed=1)
    assert len(j["completion_probabilities"]) == 20 and len(j["trace"]) == 20
    rss_kb = int(re.search(r"VmHWM:\s+(\d+)", open("/proc/%d/status" % L.proc.pid).read()).group(1))
    print(f"    4 amplification requests at once: 4 x 400 in {1e3 * dt:.0f} ms; server peak RSS {rss_kb / 1024:.0f} MB")


def test_queue_full_503(L):
    """-np 1 --max-queue 1: a running request, a waiting one, and the third gets 503 + Retry-After."""
    s = open_long_stream(L, 3)
    with cf.ThreadPoolExecutor(1) as ex:
        waiting = ex.submit(L.post, "/completion", {"prompt": "Once", "n_predict": 4})
        deadline = time.time() + 5
        while float(re.search(r"^sift_requests_deferred (\S+)$", L.request("GET", "/metrics")[2].decode(), re.M).group(1)) < 1:
            assert time.time() < deadline
            time.sleep(0.005)
        st, hd, data = L.request("POST", "/completion", {"prompt": "Once", "n_predict": 4})
        assert st == 503, (st, data)
        assert hd.get("Retry-After") == "1"
        assert json.loads(data)["error"]["type"] == "unavailable_error"
        s.close()  # the running request goes away; the waiting one gets the slot
        st2, j2 = waiting.result(timeout=30)
        assert st2 == 200 and j2["tokens_predicted"] == 4


def test_readiness(L):
    """/health?fail_on_no_slot: 503 while the one slot is busy, 200 when it is free; /health stays 200."""
    s = open_long_stream(L, 3)
    st, hd, data = L.request("GET", "/health?fail_on_no_slot")
    assert st == 503 and json.loads(data)["error"]["message"] == "no slot available", (st, data)
    assert L.request("GET", "/health")[0] == 200
    s.close()
    t0 = time.time()
    while L.request("GET", "/health?fail_on_no_slot=1")[0] != 200:
        assert time.time() - t0 < 2.0, "still not ready 2 s after the client left"
        time.sleep(0.005)


# ---- exposure: servers of their own (keys, CORS, connections, drain, command lines) ----------

def raw_request(port, head, body=b"", timeout=10):
    """Send bytes, return (status, headers dict lower-cased, body) of the first response."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.sendall(head + body)
    f = s.makefile("rb")
    line = f.readline()
    st = int(line.split()[1])
    hd = {}
    while True:
        l = f.readline().rstrip(b"\r\n")
        if not l:
            break
        k, _, v = l.decode().partition(":")
        hd[k.strip().lower()] = v.strip()
    data = f.read(int(hd.get("content-length", "0")))
    s.close()
    return st, hd, data


def closed_by_peer(sock, wait):
    """Whether the server closed sock within `wait` seconds (EOF or reset)."""
    sock.settimeout(wait)
    try:
        while True:
            d = sock.recv(4096)
            if not d:
                return True
    except socket.timeout:
        return False
    except OSError:
        return True


def test_api_keys():
    """--api-key (twice, one comma list) and --api-key-file; Bearer or X-Api-Key; 401 in the
    OpenAI shape; /health and the page open; --no-slots / --no-metrics."""
    import tempfile
    with tempfile.NamedTemporaryFile("w", suffix=".keys", delete=False) as f:
        long_key = "L" * 4095 + "abc"  # issue 26: read in 4,095-byte pieces, "abc" became a key of its own
        f.write("# keys\n\n  file-key-1  \nfile-key-2\n" + long_key + "\n")
        path = f.name
    S = Server("--api-key", "k-one", "--api-key", "k-two,k-three", "--api-key-file", path, "--no-slots", "--no-metrics")
    try:
        body = {"prompt": "Once", "n_predict": 3, "seed": 1}
        st, hd, data = S.request("POST", "/completion", body)
        err = json.loads(data)["error"]
        assert st == 401 and err == {"code": 401, "message": "Invalid API Key", "type": "authentication_error"}, (st, data)
        assert hd.get("WWW-Authenticate") == "Bearer"
        st, hd, data = S.request("POST", "/v1/messages", {"max_tokens": 1, "messages": []})  # (Anthropic's shape there)
        assert st == 401 and json.loads(data) == {"type": "error", "error": {"type": "authentication_error", "message": "Invalid API Key"}}, data
        st, hd, data = S.request("POST", "/v1/messages", {"max_tokens": 1, "messages": []}, {"X-Api-Key": "k-two", "Content-Type": "application/json"})
        assert st == 200 and json.loads(data)["type"] == "message", data  # (the Anthropic SDK sends x-api-key)
        for h in ({"Authorization": "Bearer k-one"}, {"Authorization": "bearer k-three"}, {"X-Api-Key": "k-two"},
                  {"X-Api-Key": "file-key-1"}, {"Authorization": "Bearer file-key-2"}):
            st, hd, data = S.request("POST", "/completion", body, dict(h, **{"Content-Type": "application/json"}))
            assert st == 200 and json.loads(data)["tokens_predicted"] == 3, (h, st, data)
        assert S.request("GET", "/props", headers={"X-Api-Key": long_key})[0] == 200
        for h in ({"Authorization": "Bearer k-on"}, {"Authorization": "Bearer k-one2"}, {"Authorization": "Basic k-one"},
                  {"X-Api-Key": ""}, {"Authorization": "Bearer # keys"}, {"X-Api-Key": "abc"}, {"X-Api-Key": "L" * 4095}):
            assert S.request("POST", "/completion", body, h)[0] == 401, h
        for path_ in ("/props", "/slots", "/metrics"):
            assert S.request("GET", path_)[0] == 401, path_
        assert S.request("GET", "/health")[0] == 200 and S.request("GET", "/")[0] == 200
        assert S.request("GET", "/v1/models")[0] == 200  # open, as in llama-server
        key = {"Authorization": "Bearer k-one"}
        assert S.request("GET", "/props", headers=key)[0] == 200
        assert S.request("GET", "/slots", headers=key)[0] == 501 and S.request("GET", "/metrics", headers=key)[0] == 501
        # a refused upload is not read: 401 on the headers, even with a body that never comes
        st, hd, data = raw_request(S.port, b"POST /completion HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 900000\r\n\r\n")
        assert st == 401
    finally:
        S.stop()
        os.unlink(path)
    print("    401 without a key (OpenAI shape), 200 with each of 5 keys (Bearer / X-Api-Key / file); /health open")


def test_cors(S):
    """No CORS headers by default; a foreign Origin's POST is refused (it would run even
    though the page cannot read the answer); same-origin (the playground) works."""
    evil = {"Origin": "http://evil.example", "Content-Type": "text/plain"}
    st, hd, data = S.request("POST", "/completion", json.dumps({"prompt": "Once", "n_predict": 2}), evil)
    assert st == 403 and "Access-Control-Allow-Origin" not in hd and json.loads(data)["error"]["type"] == "permission_error"
    for path_ in ("/props", "/slots", "/metrics", "/v1/models"):  # GETs too (issue 26: /props and /slots were open)
        st, hd, data = S.request("GET", path_, headers={"Origin": "http://evil.example"})
        assert st == 403 and "Access-Control-Allow-Origin" not in hd, (path_, st)
    same = {"Origin": f"http://127.0.0.1:{S.port}", "Content-Type": "application/json"}
    st, hd, data = S.request("POST", "/completion", {"prompt": "Once", "n_predict": 2}, same)
    assert st == 200 and "Access-Control-Allow-Origin" not in hd


def test_dns_rebinding(S):
    """A rebinding page (its name resolved to 127.0.0.1) sends its own Host and a matching
    Origin: the Origin check alone passes it, the Host allowlist does not, on every method."""
    evil = {"Host": "rebind.example:%d" % S.port, "Origin": "http://rebind.example:%d" % S.port,
            "Content-Type": "application/json"}
    for method, path_, body in (("POST", "/completion", {"prompt": "Once", "n_predict": 2}), ("GET", "/props", None),
                                ("GET", "/slots", None), ("POST", "/apply-template", {"messages": []})):
        st, hd, data = S.request(method, path_, body, evil)
        assert st == 403 and "is not a name of this server" in json.loads(data)["error"]["message"], (path_, st, data)
    for host in ("localhost", "LOCALHOST.", "app.localhost", "127.0.0.1", "[::1]", "10.1.2.3"):
        st, _, _ = S.request("GET", "/props", headers={"Host": "%s:%d" % (host, S.port)})
        assert st == 200, (host, st)
    st, _, _ = S.request("GET", "/props", headers={"Host": "127.0.0.1.evil.example"})
    assert st == 403


def test_allowed_hosts():
    """--allowed-hosts: a name and a domain (with its subdomains) pass; others still get 403."""
    S = Server("--allowed-hosts", "llm.lan,.corp.example")
    try:
        for host, want in (("llm.lan", 200), ("LLM.LAN:8080", 200), ("corp.example", 200), ("a.b.corp.example", 200),
                           ("evilcorp.example", 403), ("llm.lan.evil", 403)):
            st = S.request("GET", "/props", headers={"Host": host})[0]
            assert st == want, (host, st)
    finally:
        S.stop()


def raw_exchange(port, data, src="127.0.0.1", wait=5.0):
    """Send data, read until the server closes: (bytes received, whether the read ended in
    a reset instead of an orderly close)."""
    c = socket.socket()
    c.bind((src, 0))
    c.settimeout(wait)
    c.connect(("127.0.0.1", port))
    try:
        c.sendall(data)
    except OSError:
        pass
    out, reset = b"", False
    try:
        while True:
            d = c.recv(65536)
            if not d:
                break
            out += d
    except ConnectionResetError:
        reset = True
    except socket.timeout:
        pass
    c.close()
    return out, reset


def test_framing_and_query(S):
    """Two different Content-Length headers, Content-Length beside Transfer-Encoding: 400.
    A query string of 600 arguments or 40 KB: 414 (libmicrohttpd closed without an answer
    at 500 arguments)."""
    body = b'{"content":"hello"}'
    for heads in ((b"Content-Length: 19", b"Content-Length: 20"), (b"Content-Length: 19", b"Transfer-Encoding: chunked"),
                  (b"Content-Length: 1x",)):
        out, _ = raw_exchange(S.port, b"POST /tokenize HTTP/1.1\r\nHost: 127.0.0.1\r\n" + b"\r\n".join(heads) +
                              b"\r\n\r\n" + body)
        assert out.startswith(b"HTTP/1.1 400") and b"Content-Length" in out, (heads, out[:200])
    # the same Content-Length twice is no conflict
    out, _ = raw_exchange(S.port, b"POST /tokenize HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 19\r\n"
                                  b"Content-Length: 19\r\nConnection: close\r\n\r\n" + body)
    assert out.startswith(b"HTTP/1.1 200"), out[:200]
    many = "&".join("a%d=1" % i for i in range(600))
    for q in (many, "x" * 40000, "fail_on_no_slot&" + "b=2&" * 70):
        out, _ = raw_exchange(S.port, ("GET /health?%s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n" % q).encode())
        assert out.startswith(b"HTTP/1.1 414"), (len(q), out[:200])
    st, _, _ = S.request("GET", "/health?fail_on_no_slot=1&x=2")
    assert st == 200


def test_chunk_extension(S):
    """A chunked body whose chunk line carries a 100 KB extension: libmicrohttpd (Debian's
    0.9.75) answers it itself, with its own 500 and the connection closed, before the server
    sees the body - no hook reaches that line. What the server must hold is the rest: an
    answer within a second, no growth of its memory, and the next request served. A small
    extension is ignored, as RFC 9112 allows."""
    body = b'{"content":"hello"}'

    def chunked(ext):
        return (b"POST /tokenize HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n" +
                b"%x;" % len(body) + ext + b"\r\n" + body + b"\r\n0\r\n\r\n")
    out, _ = raw_exchange(S.port, chunked(b"a=b"))
    assert out.startswith(b"HTTP/1.1 200") and b'"tokens"' in out, out[:200]
    rss0 = int(open("/proc/%d/status" % S.proc.pid).read().split("VmRSS:")[1].split()[0])
    for _ in range(8):
        t0 = time.time()
        out, _ = raw_exchange(S.port, chunked(b"e=" + b"x" * 100000))
        assert time.time() - t0 < 1.0
        assert out.startswith(b"HTTP/1.1 ") and not out.startswith(b"HTTP/1.1 2"), out[:200]
    rss1 = int(open("/proc/%d/status" % S.proc.pid).read().split("VmRSS:")[1].split()[0])
    assert rss1 - rss0 < 64 * 1024, (rss0, rss1)
    st, _, _ = S.request("GET", "/health")
    assert st == 200


def test_readable_refusal():
    """A refused connection (the per-client cap) that sent a request with a body gets its
    503 and an orderly close, not a reset (close() with unread input sends RST)."""
    S = Server("--max-connections-per-client", "1", "--body-timeout", "30", "--min-body-rate", "0")
    try:
        busy = socket.create_connection(("127.0.0.1", S.port), timeout=10)
        busy.sendall(b"POST /completion HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n{")
        time.sleep(0.3)
        pad = json.dumps({"prompt": "x" * 30000}).encode()
        n_ok = 0
        for _ in range(10):
            out, reset = raw_exchange(S.port, b"POST /completion HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: %d\r\n\r\n"
                                      % len(pad) + pad)
            assert out.startswith(b"HTTP/1.1 503") and b"too many connections" in out and not reset, (out[:100], reset)
            n_ok += 1
        busy.close()
        print(f"    {n_ok}/10 refusals read whole (503 + orderly close) after a 30 KB request body")
    finally:
        S.stop()


def test_slow_uploads_evicted():
    """Issue 26's reproducer: 65 connections from 5 addresses (127.0.0.2-6, each under the
    per-client cap) trickling one body byte a second, --max-connections 64; a legitimate
    client from 127.0.0.1 meanwhile. The slow bodies are closed at --min-body-rate's grace
    (2 s) and, while they last, given up for new connections: the client gets in."""
    S = Server("--max-connections", "64", "--body-timeout", "30")
    stop = threading.Event()
    n_attack = [0]

    def attacker(src):
        conns = []
        while not stop.is_set():  # bounded by the test's few seconds
            while len(conns) < 13 and not stop.is_set():
                try:
                    c = socket.socket()
                    c.bind((src, 0))
                    c.settimeout(2)
                    c.connect(("127.0.0.1", S.port))
                    c.sendall(b"POST /completion HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1000\r\n\r\n{")
                    conns.append(c)
                    n_attack[0] += 1
                except OSError:
                    break
            time.sleep(1.0)
            alive = []
            for c in conns:
                try:
                    c.sendall(b" ")
                    alive.append(c)
                except OSError:
                    c.close()
            conns = alive
        for c in conns:
            c.close()

    ths = [threading.Thread(target=attacker, args=("127.0.0.%d" % (2 + i),)) for i in range(5)]
    try:
        for t in ths:
            t.start()
        time.sleep(2.5)
        ok = 0
        lat, fails = [], []
        for i in range(30):
            t0 = time.time()
            try:
                st, j = S.post("/completion", {"prompt": "Once", "n_predict": 4, "seed": i})
                ok += st == 200
                if st != 200:
                    fails.append(st)
            except OSError as e:
                fails.append(repr(e))
            lat.append(time.time() - t0)
            time.sleep(0.1)
        stop.set()
        for t in ths:
            t.join()
        m = S.request("GET", "/metrics")[2].decode()
        slow = float(re.search(r"^sift_connections_timed_out_total\{phase=\"slow_body\"\} (\S+)$", m, re.M).group(1))
        lat.sort()
        print(f"    {ok}/30 legitimate requests answered during {n_attack[0]} slow uploads from 5 addresses "
              f"({slow:.0f} closed under --min-body-rate); p50 {1e3 * lat[15]:.0f} ms, max {1e3 * lat[-1]:.0f} ms")
        assert ok >= 27, (ok, fails[:5])  # was 3 in 163; a refusal comes only in the ~100 ms after a wave of reconnects
        assert slow > 0
    finally:
        stop.set()
        S.stop()


def test_body_in_flight_budget():
    """--max-body-in-flight: uploads reserve their Content-Length; past the budget, 503 on
    the headers (no body read); once the first upload ends, room again."""
    S = Server("--max-body", "60000", "--max-body-in-flight", "100000", "--min-body-rate", "0")
    try:
        a = socket.create_connection(("127.0.0.1", S.port), timeout=10)
        a.sendall(b"POST /tokenize HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 60000\r\n\r\n{")
        time.sleep(0.3)
        out, reset = raw_exchange(S.port, b"POST /tokenize HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 50000\r\n\r\n")
        assert out.startswith(b"HTTP/1.1 503") and b"--max-body-in-flight" in out, out[:300]
        a.close()
        time.sleep(0.3)
        st, _, _ = S.request("POST", "/tokenize", json.dumps({"content": "x" * 49000}))
        assert st == 200
    finally:
        S.stop()


def test_cors_origin():
    S = Server("--cors-origin", "http://app.example", "--cors-origin", "https://b.example")
    try:
        ok = {"Origin": "http://app.example", "Content-Type": "application/json"}
        st, hd, data = S.request("POST", "/completion", {"prompt": "Once", "n_predict": 2}, ok)
        assert st == 200 and hd.get("Access-Control-Allow-Origin") == "http://app.example" and hd.get("Vary") == "Origin"
        st, hd, _ = S.request("OPTIONS", "/completion", None, {"Origin": "https://b.example",
                                                               "Access-Control-Request-Method": "POST"})
        assert st == 200 and hd.get("Access-Control-Allow-Origin") == "https://b.example"
        assert "X-Api-Key" in hd.get("Access-Control-Allow-Headers", "")
        st, hd, _ = S.request("POST", "/completion", {"prompt": "Once"}, {"Origin": "http://evil.example"})
        assert st == 403 and "Access-Control-Allow-Origin" not in hd
    finally:
        S.stop()
    S = Server("--cors-origin", "*")
    try:
        st, hd, _ = S.request("POST", "/completion", {"prompt": "Once", "n_predict": 2}, {"Origin": "http://any.example"})
        assert st == 200 and hd.get("Access-Control-Allow-Origin") == "*"
    finally:
        S.stop()


def test_idle_connections_held():
    """300 idle connections (150 silent, 150 with half a request line) are held open while 50
    valid requests, 10 at a time, all succeed: at --max-connections 256 the oldest idle ones
    make room (no per-client cap), and with the defaults the per-client cap (32) does. The
    header deadline is 30 s here, so eviction (not the deadline) does it."""
    for extra in (("--max-connections-per-client", "0"), ()):
        idle_connections_held(Server(*extra, "--header-timeout", "30"), " ".join(extra) or "defaults")


def idle_connections_held(S, what):
    idle = []
    try:
        for i in range(300):
            c = socket.create_connection(("127.0.0.1", S.port), timeout=10)
            if i % 2:
                c.sendall(b"GET /health HT")
            idle.append(c)
        time.sleep(1.2)  # past the 1 s grace a fresh connection gets before it may be given up

        def one(i):
            st, j = S.post("/completion", {"prompt": "Once", "n_predict": 8, "seed": i, "ignore_eos": True})
            return st, j.get("tokens_predicted")

        t0 = time.time()
        with cf.ThreadPoolExecutor(10) as ex:
            res = list(ex.map(one, range(50)))
        dt = time.time() - t0
        assert res == [(200, 8)] * 50, res
        still_open = sum(not closed_by_peer(c, 0.001) for c in idle)
        m = S.request("GET", "/metrics")[2].decode()
        evicted = float(re.search(r"^sift_connections_evicted_total (\S+)$", m, re.M).group(1))
        refused = float(re.search(r"^sift_connections_refused_total (\S+)$", m, re.M).group(1))
        print(f"    [{what}] 300 idle connections held by the client: 50/50 valid requests served in {dt:.2f} s; "
              f"server: {refused:.0f} refused at a cap, {evicted:.0f} given up for new ones; {still_open} of the 300 still open")
        assert 300 - still_open >= 300 - 256  # more than --max-connections: some were refused or given up
    finally:
        for c in idle:
            c.close()
        S.stop()


def test_per_client_cap():
    """--max-connections-per-client 2: two requests mid-upload fill it and a third connection is
    refused (503); with two idle connections instead (older than the 1 s grace), a third gets in
    and the older idle one goes."""
    S = Server("--max-connections-per-client", "2", "--body-timeout", "30", "--min-body-rate", "0")  # (slow uploads: test_slow_uploads_evicted)
    try:
        busy = []
        for _ in range(2):
            c = socket.create_connection(("127.0.0.1", S.port), timeout=10)
            c.sendall(b"POST /completion HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n{")
            busy.append(c)
        time.sleep(0.3)
        st, hd, data = raw_request(S.port, b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert st == 503 and b"too many connections" in data, (st, data)
        for c in busy:
            c.close()
        time.sleep(0.3)
        a = socket.create_connection(("127.0.0.1", S.port), timeout=10)
        time.sleep(0.1)
        b = socket.create_connection(("127.0.0.1", S.port), timeout=10)
        time.sleep(1.2)
        assert S.request("GET", "/health")[0] == 200
        assert closed_by_peer(a, 2.0), "the oldest idle connection was not given up"
        assert not closed_by_peer(b, 0.2)
        b.close()
    finally:
        S.stop()


def test_slow_client_deadlines():
    """A client sending its request one byte per second is closed at the header deadline
    (--header-timeout 2), though it is never silent for the idle timeout (600 s); a body
    trickled the same way is closed at the body deadline (--body-timeout 2)."""
    S = Server("--header-timeout", "2", "--body-timeout", "2", "--min-body-rate", "0")
    try:
        def trickle(prefix, data):
            c = socket.create_connection(("127.0.0.1", S.port), timeout=10)
            if prefix:
                c.sendall(prefix)
            t0 = time.time()
            for ch in data:
                try:
                    c.sendall(bytes([ch]))
                except OSError:
                    break
                if closed_by_peer(c, 1.0):
                    break
            dt = time.time() - t0
            c.close()
            return dt
        dt_head = trickle(b"", b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: slow\r\n\r\n")
        dt_body = trickle(b"POST /completion HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 40\r\n\r\n", b'{"prompt": "Once upon a time", "n": 1}')
        assert 1.5 <= dt_head <= 4.0, dt_head
        assert 1.5 <= dt_body <= 4.0, dt_body
        m = S.request("GET", "/metrics")[2].decode()
        assert re.search(r'^sift_connections_timed_out_total\{phase="header"\} 1$', m, re.M), m
        assert re.search(r'^sift_connections_timed_out_total\{phase="body"\} 1$', m, re.M)
        print(f"    1 byte/s: closed after {dt_head:.1f} s of headers, {dt_body:.1f} s of body (deadlines 2 s)")
    finally:
        S.stop()


def test_drain_on_sigterm():
    """SIGTERM during 8 streaming requests (4 running, 4 queued): /health and new work get 503,
    all 8 streams finish with every token, then the server exits 0."""
    S = Server("-np", "4", "-c", "16384", "--max-n-predict", "3000", "--drain-timeout", "60")
    n = 1200
    results = [None] * 8
    started = threading.Barrier(9)

    def one(i):
        c = socket.create_connection(("127.0.0.1", S.port), timeout=60)
        body = json.dumps({"prompt": "Once upon a time", "n_predict": n, "ignore_eos": True, "stream": True,
                           "seed": i}).encode()
        c.sendall(b"POST /completion HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
                  b"Connection: close\r\n\r\n" % len(body) + body)
        started.wait()
        raw = b""
        while True:
            d = c.recv(65536)
            if not d:
                break
            raw += d
        c.close()
        events = [json.loads(x[6:]) for x in re.findall(rb"data: [^\n]*", raw)]
        results[i] = events

    threads = [threading.Thread(target=one, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    started.wait()
    t0 = time.time()
    def held():  # requests in a slot + requests queued: all 8 must be inside before the signal
        m = S.request("GET", "/metrics")[2].decode()
        return sum(float(re.search(r"^sift_requests_%s (\S+)$" % k, m, re.M).group(1)) for k in ("processing", "deferred"))
    while held() < 8:
        assert time.time() - t0 < 10, "the 8 requests did not arrive"
        time.sleep(0.002)
    S.proc.send_signal(signal.SIGTERM)
    t_sig = time.time()
    while not any("draining" in l for l in S.log):
        assert time.time() - t_sig < 5
        time.sleep(0.002)
    st_health = S.request("GET", "/health")[0]
    st_new, hd_new, _ = S.request("POST", "/completion", {"prompt": "Once", "n_predict": 2})
    for t in threads:
        t.join(timeout=60)
    rc = S.proc.wait(timeout=60)
    dt = time.time() - t_sig
    assert st_health == 503 and st_new == 503, (st_health, st_new)
    assert rc == 0, "".join(S.log[-20:])
    for i, ev in enumerate(results):
        assert ev and ev[-1]["stop"] is True and ev[-1]["tokens_predicted"] == n, (i, ev[-1] if ev else None)
        assert len(ev) == n + 1
    print(f"    SIGTERM with 4 running + 4 queued streams: /health 503, new work 503, all 8 finished "
          f"({8 * n} tokens), exit 0 after {dt:.1f} s")


def test_llama_server_command_line():
    """-cb --metrics -ngl 0 (and -fa, --mlock, --no-mmap) start with a note
    each; LLAMA_ARG_CTX_SIZE, LLAMA_ARG_N_PARALLEL and SIFT_ARG_MAX_QUEUE are honoured (the
    command line wins over the environment); --alias names the model."""
    S = Server("-cb", "--metrics", "-ngl", "0", "-fa", "on", "--jinja", "--mlock", "--no-mmap", "--slots", "-a", "my-model",
               env={"LLAMA_ARG_CTX_SIZE": "1024", "LLAMA_ARG_N_PARALLEL": "2", "SIFT_ARG_MAX_QUEUE": "7",
                    "LLAMA_ARG_PORT": "1"})
    try:
        p = S.get_json("/props")
        assert p["n_ctx"] == 1024 and p["total_slots"] == 2 and p["default_generation_settings"]["n_ctx"] == 512, p["n_ctx"]
        assert p["limits"]["max_queue"] == 7
        assert p["model_alias"] == "my-model" and S.get_json("/v1/models")["data"][0]["id"] == "my-model"
        notes = [l for l in S.log if "note:" in l]
        assert len(notes) == 6, notes  # --slots and --jinja are no notes: they mean what they say
        assert S.request("GET", "/metrics")[0] == 200 and S.request("GET", "/slots")[0] == 200
    finally:
        S.stop()
    bad = subprocess.run([ARGS.sift, "serve", "-m", ARGS.model], capture_output=True, text=True, timeout=30,
                         env=dict(os.environ, LLAMA_ARG_CTX_SIZE="big"))
    assert bad.returncode == 2 and "LLAMA_ARG_CTX_SIZE" in bad.stderr, bad.stderr


def test_llama_server_sampling_defaults():
    """Issue 29: llama-server's sampling flags (--temp, --top-k, --top_p, --min-p, --seed,
    --repeat-penalty, --samplers) are the defaults of requests that do not set the field; a
    request's own field still wins. The flags that change nothing here start with a note each."""
    flags = ["--temp", "0.5", "--top-k", "7", "--top_p", "0.9", "--min-p", "0.2", "--seed", "77", "--repeat-penalty", "1.25",
             "--samplers", "top_k;min_p;temperature"]
    noop = ["--threads-http", "4", "--log-disable", "--cache-reuse", "256", "-ctk", "f16",
            "-ctv", "f16", "--sleep-idle-seconds", "30", "--no-warmup", "-fa"]
    S = Server(*flags, *noop)
    try:
        g = completion(S, prompt="Once", n_predict=4)["generation_settings"]
        assert (g["temperature"], g["top_k"], g["seed"], g["samplers"]) == (0.5, 7, 77, ["top_k", "min_p", "temperature"]), g
        assert abs(g["top_p"] - 0.9) < 1e-6 and abs(g["min_p"] - 0.2) < 1e-6 and g["repeat_penalty"] == 1.25, g
        d = S.get_json("/props")["default_generation_settings"]["params"]
        assert (d["temperature"], d["top_k"], d["seed"]) == (0.5, 7, 77), d
        # the server's seed gives the same text each time; a request's own fields win
        assert completion(S, prompt="Once", n_predict=8)["content"] == completion(S, prompt="Once", n_predict=8)["content"]
        o = completion(S, prompt="Once", n_predict=4, temperature=1.5, top_k=3, seed=5)["generation_settings"]
        assert (o["temperature"], o["top_k"], o["seed"]) == (1.5, 3, 5), o
        notes = [l for l in S.log if "note:" in l]
        assert len(notes) == 8 and all("ignored (" in l for l in notes), notes
    finally:
        S.stop()
    bad = subprocess.run([ARGS.sift, "serve", "-m", ARGS.model, "--temp", "hot"], capture_output=True, text=True, timeout=30)
    assert bad.returncode == 2 and "--temp" in bad.stderr, bad.stderr


# ---- runner -------------------------------------------------------------------------------------


# ---- the model's own Jinja template (--chat-template-file; group J) ----
CHAT_TEMPLATES = os.path.join(os.environ.get("SIFT_SHARED", os.path.join(os.path.dirname(__file__), "../../shared")), "chat-templates")
JINJA_TEMPLATE = "qwen2.5-instruct"



# ---- the request surface: n, several prompts, echo, logprobs, embeddings --------------------------

HOT = {"temperature": 1.5, "top_k": 0, "top_p": 1.0, "min_p": 0.0}  # choices that differ on stories260K


def test_n_choices(S):
    body = {"prompt": "Once upon a time", "max_tokens": 24, "n": 3, "seed": 42, **HOT}
    st, j = S.post("/v1/completions", body)
    assert st == 200, j
    ch = j["choices"]
    assert [c["index"] for c in ch] == [0, 1, 2], ch
    texts = [c["text"] for c in ch]
    assert len(set(texts)) == 3, texts  # seeds 42, 43, 44: three stories
    assert j["usage"]["completion_tokens"] == 3 * 24 and j["usage"]["prompt_tokens"] == 5, j["usage"]
    # choice i is the single completion with seed + i
    for i in range(3):
        st, one = S.post("/v1/completions", dict(body, n=1, seed=42 + i))
        assert st == 200 and one["choices"][0]["text"] == texts[i], (i, one)
    # the three read the prompt once (queued together, twin slots share the batch entries):
    # the same texts, and two slots' worth of prompt tokens counted as shared
    wait_idle(S)
    shared = lambda: float(re.search(r"^sift_prompt_tokens_shared_total (\S+)$", S.request("GET", "/metrics")[2].decode(), re.M).group(1))
    before = shared()
    st, again = S.post("/v1/completions", dict(body, cache_prompt=False))
    assert [c["text"] for c in again["choices"]] == texts  # reproducible
    assert shared() - before == 2 * 5, (before, shared())
    # chat: n choices with messages
    st, j = S.post("/v1/chat/completions", {"messages": [{"role": "user", "content": "Tell a story."}], "max_tokens": 12,
                                            "n": 2, "seed": 7, **HOT})
    assert st == 200 and [c["index"] for c in j["choices"]] == [0, 1], j
    assert all(c["message"]["role"] == "assistant" for c in j["choices"])
    assert j["choices"][0]["message"]["content"] != j["choices"][1]["message"]["content"]
    # /completion: n_cmpl (llama-server's name) gives an array, seeds seed + i
    st, a = S.post("/completion", {"prompt": "Once upon a time", "n_predict": 8, "n_cmpl": 2, "seed": 5, **HOT})
    assert st == 200 and isinstance(a, list) and [x["index"] for x in a] == [0, 1], a
    assert [x["generation_settings"]["seed_used"] for x in a] == [5, 6]


def test_n_choices_stream(S):
    body = {"messages": [{"role": "user", "content": "Tell a story."}], "max_tokens": 10, "n": 2, "seed": 11, **HOT}
    st, whole = S.post("/v1/chat/completions", body)
    assert st == 200
    ev = S.stream("/v1/chat/completions", dict(body, stream=True, stream_options={"include_usage": True}))
    assert ev[-1] == "[DONE]" and ev.count("[DONE]") == 1
    ch = ev[:-1]
    assert ch[-1]["choices"] == [] and ch[-1]["usage"]["completion_tokens"] == whole["usage"]["completion_tokens"]
    assert len({e["id"] for e in ch}) == 1
    for i in range(2):
        mine = [e["choices"][0] for e in ch[:-1] if e["choices"][0]["index"] == i]
        assert mine[0]["delta"] == {"role": "assistant", "content": None}
        assert mine[-1]["finish_reason"] in ("length", "stop")
        text = "".join(c["delta"].get("content") or "" for c in mine)
        assert text == whole["choices"][i]["message"]["content"], (i, text)
    # /v1/completions: the last chunk carries the summed usage
    ev = S.stream("/v1/completions", {"prompt": "Once", "max_tokens": 5, "n": 2, "seed": 3, "stream": True})
    assert ev[-1] == "[DONE]"
    assert {e["choices"][0]["index"] for e in ev[:-1]} == {0, 1}
    assert ev[-2]["usage"]["completion_tokens"] == 10
    # /completion: each event has its index, each choice closes with stop: true
    ev = S.stream("/completion", {"prompt": "Once", "n_predict": 4, "n_cmpl": 2, "seed": 3, "stream": True})
    assert sorted(e["index"] for e in ev if e["stop"]) == [0, 1]


def test_prompt_arrays(S):
    ids = S.post("/tokenize", {"content": "Lily went", "add_special": True})[1]["tokens"]
    prompts = ["Once upon a time", ids, [ids[0], "The cat"]]  # a string, ids, ids and text mixed
    singles = [completion(S, prompt=p, n_predict=6, seed=9)["content"] for p in prompts]
    st, a = S.post("/completion", {"prompt": prompts, "n_predict": 6, "seed": 9})
    assert st == 200 and isinstance(a, list) and [x["index"] for x in a] == [0, 1, 2], a
    assert [x["content"] for x in a] == singles
    assert a[1]["tokens_evaluated"] == len(ids)
    # /v1/completions: prompts x n choices, index = prompt * n + choice
    st, j = S.post("/v1/completions", {"prompt": prompts[:2], "max_tokens": 6, "seed": 9, "n": 2})
    assert st == 200 and [c["index"] for c in j["choices"]] == [0, 1, 2, 3], j
    assert j["choices"][0]["text"] == singles[0] and j["choices"][2]["text"] == singles[1]
    assert j["usage"]["prompt_tokens"] == 5 + len(ids) and j["usage"]["completion_tokens"] == 24
    # an array of ids alone is one prompt
    st, o = S.post("/completion", {"prompt": ids, "n_predict": 6, "seed": 9})
    assert st == 200 and isinstance(o, dict) and o["content"] == singles[1]


def test_echo(S):
    st, j = S.post("/v1/completions", {"prompt": "Once upon a time", "max_tokens": 6, "seed": 2, "echo": True, "logprobs": 2})
    assert st == 200, j
    plain = S.post("/v1/completions", {"prompt": "Once upon a time", "max_tokens": 6, "seed": 2})[1]["choices"][0]["text"]
    c = j["choices"][0]
    assert c["text"] == "Once upon a time" + plain, c["text"]
    lp = c["logprobs"]
    n = j["usage"]["completion_tokens"]
    assert len(lp["tokens"]) == len(lp["token_logprobs"]) == len(lp["top_logprobs"]) == len(lp["text_offset"]) == n
    assert lp["text_offset"][0] == len("Once upon a time") and lp["text_offset"] == sorted(lp["text_offset"])
    assert all(x <= 0 for x in lp["token_logprobs"]) and all(1 <= len(d) <= 2 for d in lp["top_logprobs"])
    assert "".join(lp["tokens"]) == plain
    # streamed: the prompt leads the first chunk
    ev = S.stream("/v1/completions", {"prompt": "Once upon a time", "max_tokens": 6, "seed": 2, "echo": True, "stream": True})
    assert "".join(e["choices"][0]["text"] for e in ev[:-1]) == c["text"]


def test_chat_logprobs_without_top(S):
    st, j = S.post("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 5, "seed": 1,
                                            "logprobs": True})
    assert st == 200, j
    content = j["choices"][0]["logprobs"]["content"]
    assert len(content) == j["usage"]["completion_tokens"]
    assert all(x["top_logprobs"] == [] and x["logprob"] <= 0 and "token" in x for x in content), content


def test_prompt_array_one_slot(L):
    """One slot, --max-queue 1: two prompts still go (one runs, one waits); three could
    never be queued at once: a 400 that says so, not a 503 forever."""
    wait_idle(L)
    st, a = L.post("/completion", {"prompt": ["Once", "Lily"], "n_predict": 3, "seed": 1})
    assert st == 200 and [x["index"] for x in a] == [0, 1] and all(x["tokens_predicted"] == 3 for x in a), a
    st, j = L.post("/completion", {"prompt": ["a", "b", "c"], "n_predict": 3})
    assert st == 400 and "--max-queue 1 + -np 1" in j["error"]["message"], j


def test_embeddings_not_enabled(S):
    for path in ("/embedding", "/embeddings", "/v1/embeddings"):
        st, j = S.post(path, {"input": "hello"})
        assert st == 501 and j["error"]["type"] == "not_supported_error" and "--embeddings" in j["error"]["message"], (path, j)
    p = S.get_json("/props")
    assert p["embeddings"] is False and p["limits"]["max_n_cmpl"] == 4


def test_embeddings_pooling():
    """--embeddings with each --pooling: the shapes of /embedding and /v1/embeddings, L2
    normalization, base64, and the pooled vectors against the per-token ones (raw, with
    embd_normalize -1): mean = their average, cls = the first, last = the last."""
    import base64
    import math
    import struct
    text = "Once upon a time"
    rows = None
    for pooling in ("none", "mean", "cls", "last"):
        E = Server("--embeddings", "--pooling", pooling, "-np", "1", "-c", "512")
        try:
            p = E.get_json("/props")
            assert p["embeddings"] is True and p["pooling"] == pooling
            st, j = E.post("/embedding", {"content": text})
            assert st == 200 and isinstance(j, list) and j[0]["index"] == 0, j
            if pooling == "none":
                rows = j[0]["embedding"]
                assert len(rows) == 5 and all(len(r) == 64 for r in rows)  # BOS + 4 tokens, n_embd 64
                st, e = E.post("/v1/embeddings", {"input": text})
                assert st == 400 and "not OAI compatible" in e["error"]["message"], e
                continue
            assert len(j[0]["embedding"]) == 1 and len(j[0]["embedding"][0]) == 64
            assert abs(math.sqrt(sum(x * x for x in j[0]["embedding"][0])) - 1) < 1e-5
            st, raw = E.post("/embedding", {"content": text, "embd_normalize": -1})
            v = raw[0]["embedding"][0]
            want = {"mean": [sum(r[d] for r in rows) / len(rows) for d in range(64)], "cls": rows[0], "last": rows[-1]}[pooling]
            assert max(abs(a - b) for a, b in zip(v, want)) < 1e-5, pooling
            ids = E.post("/tokenize", {"content": "Lily", "add_special": True})[1]["tokens"]
            st, o = E.post("/v1/embeddings", {"input": [text, ids], "model": "x"})
            assert st == 200 and o["object"] == "list" and [d["index"] for d in o["data"]] == [0, 1], o
            assert all(d["object"] == "embedding" and len(d["embedding"]) == 64 for d in o["data"])
            assert o["usage"] == {"prompt_tokens": 5 + len(ids), "total_tokens": 5 + len(ids)}
            assert max(abs(a - b) for a, b in zip(o["data"][0]["embedding"], j[0]["embedding"][0])) < 1e-7
            st, b = E.post("/v1/embeddings", {"input": text, "encoding_format": "base64"})
            dec = struct.unpack("<64f", base64.b64decode(b["data"][0]["embedding"]))
            assert max(abs(a - b) for a, b in zip(dec, o["data"][0]["embedding"])) < 1e-6
            for bad, must in (({}, "\"input\" or \"content\""), ({"input": []}, "'input' is an empty array"),
                              ({"input": [{"a": 1}]}, "'input[0]'"), ({"input": 5}, "'input'"),
                              ({"input": "x", "encoding_format": "hex"}, "encoding_format"),
                              ({"input": "x", "embd_normalize": "l2"}, "embd_normalize"),
                              ({"input": [1, 99999]}, "'input[1]'"), ({"input": "x " * 600}, "too large")):
                st, e = E.post("/v1/embeddings", bad)
                assert st == 400 and must in e["error"]["message"], (bad, st, e)
            # completions still work beside the embeddings
            assert completion(E, prompt="Once", n_predict=3)["tokens_predicted"] == 3
        finally:
            E.stop()

def jinja_server_args():
    return ("-np", "2", "-c", "2048", "--chat-template-file", os.path.join(CHAT_TEMPLATES, "templates", JINJA_TEMPLATE + ".jinja"))


def test_jinja_apply_template_matches_golden(J):
    """/apply-template renders the file's template exactly as jinja2 did (the conformance golden).
    The context's tool calls carry their arguments as objects: string arguments are parsed into
    objects for the template, as llama-server does (tool_calls.c), which jinja2's golden of
    tool_use.json (string arguments, double-encoded by Qwen's tojson) does not do."""
    ctx = json.load(open(os.path.join(CHAT_TEMPLATES, "contexts", "tool_call_response.json")))
    st, j = J.post("/apply-template", {"messages": ctx["messages"], "tools": ctx["tools"]})
    assert st == 200, j
    want = open(os.path.join(CHAT_TEMPLATES, "goldens", JINJA_TEMPLATE + "__tool_call_response.txt"), encoding="utf-8").read()
    assert j["prompt"] == want, (j["prompt"][:300], want[:300])


def test_jinja_props_and_chat(J):
    p = J.get_json("/props")
    assert p["chat_template_name"] == "jinja" and "im_start" in p["chat_template"]
    st, j = J.post("/v1/chat/completions", {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4, "seed": 1})
    assert st == 200 and j["choices"][0]["message"]["role"] == "assistant", j


def test_jinja_template_error_is_400(J):
    """A message shape the template cannot render (content an object: Qwen's template
    concatenates it to a string, which jinja2 refuses) is the client's error, with the message."""
    st, j = J.post("/apply-template", {"messages": [{"role": "user", "content": {"not": "text"}}]})
    assert st == 400, (st, j)
    assert "chat template" in json.dumps(j), j

def test_slot_save_restore_across_restart():
    """issue 29: a slot saved, the server restarted, the slot restored (into another slot)
    continues with the same tokens as the first server, reading only the new part of the
    prompt; file names cannot leave --slot-save-path; a corrupt or missing file is refused."""
    import tempfile
    d = tempfile.mkdtemp(prefix="sift-slots-")
    first = {"prompt": "Once upon a time, a little girl named Lily", "n_predict": 16, "temperature": 0, "id_slot": 0, "cache_prompt": True}
    more = dict(first, prompt=first["prompt"] + " went to the park")
    S = Server("-np", "2", "-c", "1024", "--slot-save-path", d)
    try:
        st, a = S.post("/completion", first)
        assert st == 200 and a["timings"]["prompt_n"] > 8, a
        st, sv = S.post("/slots/0?action=save", {"filename": "lily.bin"})
        assert st == 200 and sv["n_saved"] == a["tokens_evaluated"] + 15 and sv["n_written"] > 0, sv
        st, want = S.post("/completion", more)
        assert st == 200, want
        for bad in ("../x", "/etc/passwd", ".hidden", "a/b", "", 7):
            st, j = S.post("/slots/0?action=save", {"filename": bad})
            assert st == 400 and "filename" in j["error"]["message"], (bad, st, j)
        assert S.post("/slots/0?action=fly", {"filename": "x"})[0] == 400
        assert S.post("/slots/9?action=erase", {})[0] == 400
        st, j = S.post("/slots/1?action=restore", {"filename": "missing.bin"})
        assert st == 404, (st, j)
        with open(os.path.join(d, "junk.bin"), "wb") as f:
            f.write(b"SIFTSEQ1" + b"\0" * 40)
        st, j = S.post("/slots/1?action=restore", {"filename": "junk.bin"})
        assert st == 400, (st, j)
    finally:
        S.stop()
    S = Server("-np", "2", "-c", "1024", "--slot-save-path", d)
    try:
        st, rs = S.post("/slots/1?action=restore", {"filename": "lily.bin"})
        assert st == 200 and rs["n_restored"] == sv["n_saved"] and rs["n_read"] == sv["n_written"], rs
        st, got = S.post("/completion", dict(more, id_slot=1))
        assert st == 200 and got["content"] == want["content"], (got, want)
        assert got["timings"]["prompt_n"] < 8 and got["timings"]["cache_n"] > 8, got["timings"]  # only the new words were read
        st, er = S.post("/slots/1?action=erase", {})
        assert st == 200 and er["n_erased"] > 0, er
    finally:
        S.stop()
    S = Server("-np", "1")  # no --slot-save-path: save and restore are off
    try:
        st, j = S.post("/slots/0?action=save", {"filename": "x.bin"})
        assert st == 501 and j["error"]["type"] == "not_supported_error", (st, j)
    finally:
        S.stop()
    shutil.rmtree(d, ignore_errors=True)


def test_chat_template_text():
    """--chat-template with a template's own text (no built-in name): rendered as Jinja, as
    llama-server does; one that does not parse stops the start (exit 2) with its error."""
    S = Server("-np", "1", "--chat-template", "[{{ messages[0].content }}]")
    try:
        st, j = S.post("/apply-template", {"messages": [{"role": "user", "content": "hi"}]})
        assert st == 200 and j["prompt"] == "[hi]", j
    finally:
        S.stop()
    bad = subprocess.run([ARGS.sift, "serve", "-m", ARGS.model, "--chat-template", "{% if %}"], capture_output=True, text=True,
                         timeout=30)
    assert bad.returncode == 2 and "--chat-template" in bad.stderr, bad.stderr


def test_return_progress():
    """return_progress: a stream reports the prompt's progress once when a slot takes it and
    once per chunk read (-b 16), as llama-server; a repeated prompt starts from its cache."""
    S = Server("-np", "1", "-b", "16")
    try:
        body = {"prompt": "Once upon a time there was a little girl named Lily who liked to play in the park with her dog",
                "n_predict": 2, "stream": True, "return_progress": True, "cache_prompt": True}
        for rep in range(2):
            ev = [e for e in S.stream("/completion", body) if e != "[DONE]"]
            pr = [e["prompt_progress"] for e in ev if "prompt_progress" in e]
            total = pr[0]["total"]
            assert pr[0]["cache"] == pr[0]["processed"] and pr[-1]["processed"] == total, pr
            assert all(b["processed"] > a["processed"] for a, b in zip(pr, pr[1:])), pr
            assert len(pr) == 1 + -(-(total - pr[0]["cache"]) // 16), (rep, pr)
            assert (pr[0]["cache"] > 0) == (rep == 1), pr
            assert "".join(e.get("content", "") for e in ev if "prompt_progress" not in e), ev
    finally:
        S.stop()


def test_context_shift():
    """--context-shift: a reply longer than the slot's context goes on past it (old tokens
    dropped, the rest moved back), truncated; without, it stops when prompt + reply fill the
    slot, as llama-server (8 + 120 = 128 cells)."""
    body = {"prompt": "Once upon a time", "n_predict": 200, "temperature": 0, "ignore_eos": True}
    S = Server("-np", "1", "-c", "128", "--context-shift")
    try:
        st, j = S.post("/completion", body)
        assert st == 200 and j["tokens_predicted"] == 200 and j["truncated"] is True, j
        st, j = S.post("/completion", dict(body, n_keep=-1, n_discard=16))
        assert st == 200 and j["tokens_predicted"] == 200 and j["generation_settings"]["n_discard"] == 16, j
        st, j = S.post("/completion", dict(body, n_predict=16))
        assert st == 200 and j["tokens_predicted"] == 16 and j["truncated"] is False, j
    finally:
        S.stop()
    S = Server("-np", "1", "-c", "128")
    try:
        st, j = S.post("/completion", body)
        assert st == 200 and j["truncated"] is True and j["tokens_evaluated"] + j["tokens_predicted"] == 128, j
    finally:
        S.stop()


FIM_TEXTS = {"qwen": ("<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>", "<|repo_name|>", "<|file_sep|>"),
             "codellama": ("\u2581<PRE>", "\u2581<SUF>", "\u2581<MID>", None, None)}


def fim_model(d, style="qwen"):
    """stories260K with FIM tokens (`sift mkmodel --fim-style STYLE --from`) in folder d."""
    path = os.path.join(d, f"stories260K-fim-{style}.gguf")
    r = subprocess.run([ARGS.sift, "mkmodel", "--fim-style", style, "--from", ARGS.model, "-o", path], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return path


def llama_server_fim_prompt(S, body, n_batch, n_predict, n_ctx, spm=False, style="qwen"):
    """llama-server's format_prompt_infill, written again from its description, on /tokenize's
    tokens: what /infill must decode, token for token."""
    def tok(text, special=False):
        st, j = S.post("/tokenize", {"content": text, "add_special": False, "parse_special": special})
        assert st == 200, j
        return j["tokens"]

    def mixed(v):
        return tok(v) if isinstance(v, str) else [t for x in v for t in (tok(x) if isinstance(x, str) else [x])]
    pre_id, suf_id, mid_id, rep_id, sep_id = (tok(t, True)[0] if t else None for t in FIM_TEXTS[style])
    extra = [rep_id] + tok("myproject\n") if rep_id is not None else []
    for c in body.get("input_extra", []):
        head = [sep_id] + tok(c.get("filename", "tmp") + "\n") if sep_id is not None else tok("\n\n--- snippet ---\n\n")
        extra += head + tok(c["text"])
    extra += [sep_id] + tok("filename\n") if sep_id is not None else []
    prompt = tok(body.get("prompt", ""), True)
    prefix, suffix = mixed(body["input_prefix"]), mixed(body["input_suffix"])
    n_pre = min(len(prefix), 3 * (n_batch // 4))
    n_suf = min(len(suffix), max(0, n_batch // 4 - (2 + len(prompt))))
    n_extra = min(max(0, n_ctx - n_batch - 2 * n_predict), len(extra))
    part_pre = [pre_id] + prefix[len(prefix) - n_pre:] + prompt
    part_suf = [suf_id] + suffix[:n_suf]
    first, second = (part_suf, part_pre) if spm else (part_pre, part_suf)
    bos = tok("<s>", True)
    return extra[len(extra) - n_extra:] + bos + first + second + [mid_id], (n_pre, len(prefix), n_suf, len(suffix), n_extra, len(extra))


def test_infill():
    """issue 29: /infill on a model whose vocabulary has FIM tokens (mkmodel --fim) decodes
    llama-server's fill-in-the-middle prompt token for token (repository context from
    <|repo_name|>/<|file_sep|>, the prefix, suffix and extra context cut to -b and the slot as
    llama-server cuts them), and answers as /completion does for that prompt (same text);
    streamed, the same text; --spm-infill puts the suffix first; CodeLlama's tokens (the older
    prefix/suffix/middle keys, no repository tokens) give the snippet-separated form; bad
    input_extra is a 400."""
    import tempfile
    d = tempfile.mkdtemp(prefix="sift-infill-")
    code = "".join(f"int f{i}(int x) {{ return x * {i}; }}\n" for i in range(12))  # a long prefix: cut to its last 48 tokens
    body = {"input_prefix": "#include <stdio.h>\n" + code + "int main() {\n", "prompt": "  int n = ",
            "input_suffix": "  return 0;\n}\n" + code,
            "input_extra": [{"filename": f"f{k}.h", "text": code} for k in range(3)] + [{"text": "int g(void);\n"}],
            "temperature": 0, "n_predict": 8}
    try:
        model = fim_model(d)
        n_batch, n_predict, n_ctx = 64, 16, 512
        S = Server("-np", "1", "-c", str(n_ctx), "-b", str(n_batch), "-n", str(n_predict), model=model)
        try:
            for b in (body, dict(body, input_suffix=["  return 0;", 13, "}"], prompt=""), {k: v for k, v in body.items() if k != "input_extra"}):
                want, cut = llama_server_fim_prompt(S, b, n_batch, n_predict, n_ctx)
                st, j = S.post("/infill", b)
                assert st == 200, (st, j)
                st, c = S.post("/completion", {"prompt": want, "temperature": 0, "n_predict": 8})
                assert st == 200, c
                assert j["tokens_evaluated"] == len(want) and j["prompt"] == c["prompt"], (cut, j["tokens_evaluated"], len(want), j["prompt"], c["prompt"])
                assert j["content"] == c["content"] and j["tokens_predicted"] == 8, (j["content"], c["content"])
            assert cut[0] < cut[1] and cut[2] < cut[3], cut  # the prefix and the suffix were cut
            want, cut = llama_server_fim_prompt(S, body, n_batch, n_predict, n_ctx)
            assert cut[4] < cut[5], cut  # and the extra context
            st, j = S.post("/infill", body)
            ev = S.stream("/infill", dict(body, stream=True))
            assert "".join(e.get("content", "") for e in ev if e != "[DONE]") == j["content"] and ev[-1]["stop"] is True, ev
            for bad in ({}, {"filename": "ok"}, {"filename": 123}, {"filename": 123, "text": "abc"}, {"filename": 123, "text": 456}, 7):
                st, e = S.post("/infill", dict(body, input_extra=[bad]))
                assert st == 400 and "input_extra[0]" in e["error"]["message"], (bad, st, e)
            for b, word in ((dict(body, input_extra={}), "input_extra"), ({"input_suffix": "x"}, "input_prefix"),
                            ({"input_prefix": "x"}, "input_suffix"), (dict(body, prompt=[1, 2]), "prompt"),
                            (dict(body, input_prefix=[99999]), "input_prefix[0]")):
                st, e = S.post("/infill", b)
                assert st == 400 and word in e["error"]["message"], (b, st, e)
        finally:
            S.stop()
        # suffix first (--spm-infill); CodeLlama's tokens with the older keys: no repository
        # tokens, the files after llama-server's snippet line
        for style, flags in (("qwen", ["--spm-infill"]), ("codellama", [])):
            S = Server("-np", "1", "-c", str(n_ctx), "-b", str(n_batch), "-n", str(n_predict), *flags,
                       model=model if style == "qwen" else fim_model(d, style))
            try:
                want, cut = llama_server_fim_prompt(S, body, n_batch, n_predict, n_ctx, spm=bool(flags), style=style)
                st, j = S.post("/infill", body)
                st2, c = S.post("/completion", {"prompt": want, "temperature": 0, "n_predict": 8})
                assert st == 200 and st2 == 200 and j["tokens_evaluated"] == len(want) and j["prompt"] == c["prompt"], (style, cut, j, c)
                assert j["content"] == c["content"] and ("snippet" in j["prompt"]) == (style == "codellama"), (style, j)
            finally:
                S.stop()
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_infill_needs_fim_tokens(S):
    """A model without FIM tokens (stories260K): /infill is 501 not_supported_error, as llama-server."""
    st, j = S.post("/infill", {"input_prefix": "a", "input_suffix": "b"})
    assert st == 501 and j["error"]["type"] == "not_supported_error" and "infill" in j["error"]["message"], (st, j)


def test_hostile_chat_template():
    """issue 26: a chat template that compares a list sharing itself 64 levels deep (2^64 steps,
    spinning forever under a global lock before) gets a 400 within a second, holds no lock (a
    second request is answered beside it), and a render over --template-memory gets 413."""
    import tempfile
    deep = ("{% set ns = namespace(a=[1], b=[1]) %}{% for i in range(64) %}{% set ns.a = [ns.a, ns.a] %}"
            "{% set ns.b = [ns.b, ns.b] %}{% endfor %}{% if messages[0].content == 'spin' %}{{ ns.a == ns.b }}{% endif %}"
            "{% if messages[0].content == 'grow' %}{% set g = namespace(s='x') %}{% for i in range(40) %}"
            "{% set g.s = g.s ~ g.s %}{% endfor %}{% endif %}"
            "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}<|im_start|>assistant\n")
    with tempfile.NamedTemporaryFile("w", suffix=".jinja", delete=False) as f:
        f.write(deep)
        path = f.name
    # (the step budget ends the spin in well under a second in a normal build; under the
    # sanitizers the wall-clock limit may come first: either is the budget doing its job)
    S = Server("-np", "2", "-c", "1024", "--chat-template-file", path, "--template-memory", "33554432",
               "--template-timeout", "3000", "--max-renders", "2")
    try:
        res = {}

        def spin():
            t0 = time.time()
            res["spin"] = S.post("/apply-template", {"messages": [{"role": "user", "content": "spin"}]}) + (time.time() - t0,)

        def nice_of(path):
            with open(path) as f:
                return int(f.read().rsplit(")", 1)[1].split()[16])

        def niced_threads():  # (Linux) the server's threads at nice 19 above its own: renders in the background (prio.c)
            n, base = 0, nice_of(f"/proc/{S.proc.pid}/stat")
            for tid in os.listdir(f"/proc/{S.proc.pid}/task"):
                try:
                    n += nice_of(f"/proc/{S.proc.pid}/task/{tid}/stat") == 19 != base
                except OSError:
                    pass
            return n

        seen = []

        def watch():
            while th.is_alive():
                seen.append(niced_threads())
                time.sleep(0.005)

        th = threading.Thread(target=spin)
        th.start()
        wt = threading.Thread(target=watch)
        wt.start()
        t0 = time.time()
        st, j = S.post("/apply-template", {"messages": [{"role": "user", "content": "hi"}]})
        took = time.time() - t0
        th.join()
        wt.join()
        niced = max(seen, default=0)
        if sys.platform.startswith("linux") and nice_of(f"/proc/{S.proc.pid}/stat") < 19:  # (room below)
            assert niced >= 1, niced  # (the "hi" render is niced too while it runs)
            assert niced_threads() == 0  # back to normal priority once answered
        assert st == 200 and j["prompt"].startswith("<|im_start|>user\nhi"), (st, j)
        assert took < 2, took
        st, j, spin_took = res["spin"]
        assert st == 400 and ("steps" in json.dumps(j) or "longer than 3000 ms" in json.dumps(j)), (st, j)
        assert spin_took < 5, spin_took
        st, j = S.post("/apply-template", {"messages": [{"role": "user", "content": "grow"}]})
        assert st == 413 and "memory" in json.dumps(j), (st, j)
        # a message with more keys than SIFT_TEMPLATE_MAX_KEYS is refused, not rendered quadratically
        msg = {"role": "user", "content": "hi"}
        msg.update({f"k{i}": 1 for i in range(20000)})
        t0 = time.time()
        st, j = S.post("/apply-template", {"messages": [msg]})
        assert st == 400 and "16384 keys" in json.dumps(j) and time.time() - t0 < 5, (st, j)
    finally:
        S.stop()


# ---- tool calling (tools/server/tool_calls.c; on the Jinja server, Qwen 2.5's <tool_call> format) ----
WEATHER_TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "additionalProperties": False, "required": ["city", "days"],
    "properties": {"city": {"type": "string", "enum": ["Paris", "Tokyo"]}, "days": {"type": "integer", "minimum": 1, "maximum": 7}}}}}]


def check_weather_call(c):
    assert c["type"] == "function" and c["id"].startswith("call_") and c["function"]["name"] == "get_weather", c
    args = json.loads(c["function"]["arguments"])
    assert set(args) == {"city", "days"} and args["city"] in ("Paris", "Tokyo") and 1 <= args["days"] <= 7, args


def test_jinja_tool_call_required(J):
    """tool_choice required: the grammar binds from the first token; the call comes back parsed."""
    body = {"messages": [{"role": "user", "content": "Weather?"}], "tools": WEATHER_TOOLS, "tool_choice": "required",
            "max_tokens": 300, "seed": 3}
    st, j = J.post("/v1/chat/completions", body)
    assert st == 200, j
    ch = j["choices"][0]
    assert ch["finish_reason"] == "tool_calls" and ch["message"]["content"] is None and len(ch["message"]["tool_calls"]) == 1, j
    check_weather_call(ch["message"]["tool_calls"][0])
    ev = J.stream("/v1/chat/completions", dict(body, stream=True))
    deltas = [e["choices"][0] for e in ev if e != "[DONE]" and e["choices"]]
    calls = [d["delta"]["tool_calls"][0] for d in deltas if d["delta"].get("tool_calls")]
    assert calls[0]["index"] == 0 and calls[0]["function"]["arguments"] == "" and calls[0]["id"], calls
    args = "".join(c["function"].get("arguments", "") for c in calls)
    assert args == ch["message"]["tool_calls"][0]["function"]["arguments"], (args, j)
    assert deltas[-1]["finish_reason"] == "tool_calls" and not any(d["delta"].get("content") for d in deltas), deltas


def test_jinja_tool_call_messages_and_errors(J):
    """The tool result goes back through the template; bad tools / tool_choice are 400s."""
    call = {"id": "call_abcdefghi", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\", \"days\": 2}"}}
    msgs = [{"role": "user", "content": "Weather?"}, {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "call_abcdefghi", "content": "{\"temp\": 18}"}]
    st, j = J.post("/apply-template", {"messages": msgs, "tools": WEATHER_TOOLS})
    assert st == 200 and '{"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}' in j["prompt"], j
    assert "<tool_response>\n{\"temp\": 18}\n</tool_response>" in j["prompt"], j
    st, j = J.post("/v1/chat/completions", {"messages": msgs, "tools": WEATHER_TOOLS, "max_tokens": 8, "seed": 1})
    assert st == 200 and j["choices"][0]["message"]["role"] == "assistant", j
    for bad, word in ((dict(tool_choice={"type": "function", "function": {"name": "nope"}}), "nope"),
                      (dict(tool_choice="sometimes"), "tool_choice"),
                      (dict(tools=[{"type": "function", "function": {"name": "f", "parameters": 3}}]), "parameters"),
                      (dict(tools=WEATHER_TOOLS, grammar="root ::= \"x\""), "grammar")):
        st, j = J.post("/v1/chat/completions", dict({"messages": msgs, "tools": WEATHER_TOOLS}, **bad))
        assert st == 400 and word in j["error"]["message"], (bad, st, j)
    caps = J.get_json("/props")["chat_template_caps"]
    assert caps["supports_tool_calls"] and caps["tool_call_format"] == "hermes", caps


def _template_server(text):
    import tempfile
    with tempfile.NamedTemporaryFile("w", suffix=".jinja", delete=False) as f:
        f.write(text)
        path = f.name
    return Server("-np", "1", "-c", "1024", "--chat-template-file", path), path


# Phi-3 mini's first template: it renders user and assistant turns only (a system message is dropped)
NO_SYSTEM_TEMPLATE = ("{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') %}{{'<|user|>' + '\\n' + "
                      "message['content'] + '<|end|>' + '\\n' + '<|assistant|>' + '\\n'}}{% elif (message['role'] == 'assistant') %}"
                      "{{message['content'] + '<|end|>' + '\\n'}}{% endif %}{% endfor %}")
# a template that iterates over content parts (as multimodal templates do)
TYPED_TEMPLATE = ("{% for m in messages %}<{{ m.role }}>{% for p in m.content %}{% if p.type == 'text' %}[{{ p.text }}]{% endif %}"
                  "{% endfor %}</{{ m.role }}>{% endfor %}")


def test_content_parts():
    """issue 27: OpenAI's content parts. Text parts become one string (newline-joined, as
    llama-server does) for templates that print content as a string; a template that iterates
    over parts gets the list (and a string content as a list of one part); an image or audio
    part is a 400 naming it."""
    parts = [{"type": "text", "text": "Hi"}, {"type": "text", "text": "there"}]
    for name in ("qwen2.5-instruct", "llama-3-instruct", "vllm-tool_chat_template_hermes", "phi-3"):
        S = Server("-np", "1", "-c", "2048", "--chat-template-file", os.path.join(CHAT_TEMPLATES, "templates", name + ".jinja"))
        try:
            assert S.get_json("/props")["chat_template_caps"]["requires_typed_content"] is False
            st, a = S.post("/apply-template", {"messages": [{"role": "user", "content": parts}]})
            st2, b = S.post("/apply-template", {"messages": [{"role": "user", "content": "Hi\nthere"}]})
            assert st == 200 and st2 == 200 and a["prompt"] == b["prompt"], (name, a, b)
            assert "'type'" not in a["prompt"], a
            for bad, kind in (({"type": "image_url", "image_url": {"url": "data:,"}}, "image part (\"image_url\")"),
                              ({"type": "input_audio", "input_audio": {"data": "", "format": "wav"}}, "audio part (\"input_audio\")"),
                              ({"type": "video"}, "type \"video\"")):
                st, e = S.post("/v1/chat/completions", {"messages": [{"role": "user", "content": [parts[0], bad]}], "max_tokens": 2})
                assert st == 400 and "'messages[0].content[1]'" in e["error"]["message"] and kind in e["error"]["message"], (name, e)
            st, j = S.post("/v1/chat/completions", {"messages": [{"role": "user", "content": parts}], "max_tokens": 3, "seed": 1})
            assert st == 200 and j["choices"][0]["message"]["role"] == "assistant", j
        finally:
            S.stop()
    S, path = _template_server(TYPED_TEMPLATE)
    try:
        assert S.get_json("/props")["chat_template_caps"]["requires_typed_content"] is True
        st, j = S.post("/apply-template", {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": parts}]})
        assert st == 200 and j["prompt"] == "<system>[Be brief.]</system><user>[Hi][there]</user>", j
    finally:
        S.stop()
        os.unlink(path)


def test_system_role_fallback():
    """issue 27: a template that drops system messages (Phi-3 mini's first one) is found by a
    probe at load (/props supports_system_role false); the system text then goes at the start
    of the first user message, newline-joined (minja's polyfill, as llama.cpp does). Templates
    that show the system message are left alone."""
    S, path = _template_server(NO_SYSTEM_TEMPLATE)
    try:
        assert S.get_json("/props")["chat_template_caps"]["supports_system_role"] is False
        st, j = S.post("/apply-template", {"messages": [{"role": "system", "content": "Be brief."}, {"role": "system", "content": "Be kind."},
                                                        {"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Yo"},
                                                        {"role": "user", "content": "Bye"}]})
        assert st == 200 and j["prompt"] == "<|user|>\nBe brief.\nBe kind.\nHi<|end|>\n<|assistant|>\nYo<|end|>\n<|user|>\nBye<|end|>\n<|assistant|>\n", j
        # text parts of a system message, and a system message before an assistant turn: a user turn of its own
        st, j = S.post("/apply-template", {"messages": [{"role": "system", "content": [{"type": "text", "text": "Sys"}]},
                                                        {"role": "assistant", "content": "Yo"}, {"role": "user", "content": "Hi"}]})
        assert st == 200 and j["prompt"] == "<|user|>\nSys<|end|>\n<|assistant|>\nYo<|end|>\n<|user|>\nHi<|end|>\n<|assistant|>\n", j
        st, j = S.post("/v1/chat/completions", {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
                                                "max_tokens": 3, "seed": 1})
        assert st == 200 and j["usage"]["prompt_tokens"] > S.post("/v1/chat/completions", {"messages": [{"role": "user", "content": "Hi"}],
                                                                                           "max_tokens": 1})[1]["usage"]["prompt_tokens"], j
    finally:
        S.stop()
        os.unlink(path)
    for name in ("phi-3", "qwen2.5-instruct"):
        S = Server("-np", "1", "-c", "2048", "--chat-template-file", os.path.join(CHAT_TEMPLATES, "templates", name + ".jinja"))
        try:
            assert S.get_json("/props")["chat_template_caps"]["supports_system_role"] is True
            st, j = S.post("/apply-template", {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]})
            assert st == 200 and "Be brief.<|" in j["prompt"] and "Be brief.\nHi" not in j["prompt"], j
        finally:
            S.stop()


# Qwen 3's way: thinking unless enable_thinking is false (then an empty thought is in the prompt)
THINKING_TEMPLATE = ("{%- for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
                     "{%- if add_generation_prompt %}<|im_start|>assistant\n{% if enable_thinking is defined and "
                     "enable_thinking is false %}<think>\n\n</think>\n\n{% endif %}{% endif %}")


def _stream_fields(S, body):
    ev = S.stream("/v1/chat/completions", dict(body, stream=True))
    r = "".join(e["choices"][0]["delta"].get("reasoning_content") or "" for e in ev if e != "[DONE]" and e["choices"])
    c = "".join(e["choices"][0]["delta"].get("content") or "" for e in ev if e != "[DONE]" and e["choices"])
    fin = [e["choices"][0]["finish_reason"] for e in ev if e != "[DONE]" and e["choices"] and e["choices"][0]["finish_reason"]]
    return r, c, fin


def test_harmony():
    """issue 27: gpt-oss's harmony channels with its template (llama.cpp's server tests' copy). A
    json_schema answer comes in the final channel after an optional analysis (the grammar writes
    the headers; stories260K follows it): reasoning_content is the analysis, the content the JSON,
    streamed the same; a reply that ignores the format entirely (no grammar) is all content; an
    earlier call's reasoning_content reaches the template as its analysis ("thinking")."""
    tpl = os.path.join(CHAT_TEMPLATES, "..", "llama-server-tests", "models", "templates", "openai-gpt-oss-120b.jinja")
    S = Server("-np", "1", "-c", "2048", "--chat-template-file", tpl)
    try:
        msgs = [{"role": "user", "content": "Hi"}]
        schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"], "additionalProperties": False}
        # (seed 5: stories260K goes to the final channel at once; seed 1: it stays in the analysis)
        body = {"messages": msgs, "max_tokens": 120, "seed": 5, "json_schema": schema}
        st, j = S.post("/v1/chat/completions", body)
        m = j["choices"][0]["message"]
        assert st == 200 and j["choices"][0]["finish_reason"] == "stop" and isinstance(json.loads(m["content"])["a"], int), j
        r, c, fin = _stream_fields(S, body)
        assert r == m.get("reasoning_content", "") and c == m["content"] and fin == ["stop"], (r, c, fin, m)
        body = dict(body, seed=1, max_tokens=40)
        st, j = S.post("/v1/chat/completions", body)
        m = j["choices"][0]["message"]
        assert st == 200 and m["content"] == "" and len(m["reasoning_content"]) > 10 and "<|" not in m["reasoning_content"], j
        r, c, fin = _stream_fields(S, body)
        assert r == m["reasoning_content"] and c == "" and fin == ["length"], (r, c, fin, m)
        st, j = S.post("/v1/chat/completions", {"messages": msgs, "max_tokens": 8, "seed": 1})
        m = j["choices"][0]["message"]
        assert st == 200 and "<|message|>" not in m["content"] and len(m["content"]) > 3 and "reasoning_content" not in m, j
        call = {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}
        tools = [{"type": "function", "function": {"name": "get_weather", "description": "w",
                                                   "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "c"}}}}}]
        st, j = S.post("/apply-template", {"tools": tools, "messages": msgs + [
            {"role": "assistant", "content": "", "reasoning_content": "I should call get_weather.", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": "sunny"}]})
        assert st == 200 and "<|channel|>analysis<|message|>I should call get_weather.<|end|><|start|>assistant to=functions.get_weather" in j["prompt"], j
        # a continued assistant message (llama.cpp's test-chat.cpp generation prompts for gpt-oss): the
        # content goes on in a final message after its analysis, or the reasoning in an open analysis
        # (true: the reasoning when there is only reasoning; or as "content" / "reasoning_content" say)
        head = "<|start|>assistant<|channel|>analysis<|message|>I'm thinking<|end|><|start|>assistant<|channel|>final<|message|>Hello, "
        pre_c = {"role": "assistant", "content": "Hello, ", "reasoning_content": "I'm thinking"}
        pre_r = {"role": "assistant", "content": "", "reasoning_content": "I'm"}
        for last, extra, want in ((pre_c, {}, head), (pre_c, {"continue_final_message": True, "add_generation_prompt": False}, head),
                                  (pre_r, {}, "<|start|>assistant<|channel|>analysis<|message|>I'm"),
                                  (pre_c, {"continue_final_message": "reasoning_content"}, "<|start|>assistant<|channel|>analysis<|message|>I'm thinking"),
                                  (pre_r, {"continue_final_message": "content"},
                                   "<|start|>assistant<|channel|>analysis<|message|>I'm<|end|><|start|>assistant<|channel|>final<|message|>")):
            st, j = S.post("/apply-template", dict(extra, messages=msgs + [last]))
            assert st == 200 and j["prompt"].endswith(want) and j["prompt"].count("<|start|>assistant") == want.count("<|start|>assistant"), (last, extra, j)
        # the reply is read after the prefill: the prefilled reasoning and content are the reply's (as llama.cpp parses its
        # generation prompt with the output); a json_schema answer comes after the continued analysis
        body = {"messages": msgs + [pre_c], "max_tokens": 6, "seed": 1}
        st, j = S.post("/v1/chat/completions", body)
        m = j["choices"][0]["message"]
        assert st == 200 and m["reasoning_content"] == "I'm thinking" and m["content"].startswith("Hello, ") and len(m["content"]) > 7, j
        r, c, fin = _stream_fields(S, body)
        assert r == m["reasoning_content"] and c == m["content"], (r, c, m)
        body = {"messages": msgs + [pre_r], "max_tokens": 6, "seed": 1}
        st, j = S.post("/v1/chat/completions", body)
        m = j["choices"][0]["message"]
        assert st == 200 and m["reasoning_content"].startswith("I'm") and len(m["reasoning_content"]) > 4 and m["content"] == "", j
        r, c, fin = _stream_fields(S, body)
        assert r == m["reasoning_content"] and c == "", (r, c, m)
    finally:
        S.stop()
    # --reasoning-budget on the channels (llama.cpp's budget with gpt-oss's tags): after N tokens of an analysis
    # message its <|end|> is forced; 0 ends it at once. Seed 1 stays in the analysis unbounded (above).
    for budget in ("4", "0"):
        S = Server("-np", "1", "-c", "2048", "--chat-template-file", tpl, "--reasoning-budget", budget)
        try:
            body = {"messages": msgs, "max_tokens": 120, "seed": 1, "json_schema": schema}
            st, j = S.post("/v1/chat/completions", body)
            m = j["choices"][0]["message"]
            assert st == 200 and j["choices"][0]["finish_reason"] == "stop" and isinstance(json.loads(m["content"])["a"], int), (budget, j)
            ids = S.post("/tokenize", {"content": m.get("reasoning_content", "")})[1]["tokens"]
            assert len(ids) <= int(budget) and (budget != "0" or "reasoning_content" not in m), (budget, ids, m)
            r, c, fin = _stream_fields(S, body)
            assert r == m.get("reasoning_content", "") and c == m["content"] and fin == ["stop"], (r, c, fin, m)
            # a continued analysis counts from the reply's first token
            st, j = S.post("/v1/chat/completions", dict(body, messages=msgs + [{"role": "assistant", "content": "", "reasoning_content": "I'm"}]))
            m = j["choices"][0]["message"]
            assert st == 200 and j["choices"][0]["finish_reason"] == "stop" and isinstance(json.loads(m["content"])["a"], int), (budget, j)
            assert m["reasoning_content"].startswith("I'm"), (budget, m)
            extra = S.post("/tokenize", {"content": m["reasoning_content"][3:]})[1]["tokens"]
            assert len(extra) <= int(budget), (budget, extra, m)
        finally:
            S.stop()


def test_reasoning():
    """issue 27: a thinking model's reasoning apart (llama-server's --reasoning-format). DeepSeek
    R1's template opens the thinking in the prompt: stories260K's reply never closes it, so all of
    it is reasoning_content (llama.cpp's rule for unclosed thinking) and the content is empty;
    reasoning_format none leaves it in the content. Streamed, the reasoning_content and content
    deltas add up to the same. --reasoning-budget forces </think> after N thinking tokens, and
    a json_schema's grammar starts after it: the content is the JSON."""
    r1 = os.path.join(CHAT_TEMPLATES, "templates", "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja")
    msgs = [{"role": "user", "content": "Hi"}]
    S = Server("-np", "1", "-c", "1024", "--chat-template-file", r1)
    try:
        body = {"messages": msgs, "max_tokens": 16, "seed": 1}
        st, j = S.post("/v1/chat/completions", body)
        m = j["choices"][0]["message"]
        assert st == 200 and m["content"] == "" and len(m["reasoning_content"]) > 10, j
        st, raw = S.post("/v1/chat/completions", dict(body, reasoning_format="none"))
        assert "reasoning_content" not in raw["choices"][0]["message"] and raw["choices"][0]["message"]["content"].strip() == m["reasoning_content"], raw
        r, c, fin = _stream_fields(S, body)
        assert r == m["reasoning_content"] and c == "" and fin == ["length"], (r, c, fin)
        st, e = S.post("/v1/chat/completions", dict(body, reasoning_format="r1"))
        assert st == 400 and "reasoning_format" in e["error"]["message"], e
    finally:
        S.stop()
    S = Server("-np", "1", "-c", "1024", "--chat-template-file", r1, "--reasoning-budget", "6")
    try:
        schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"], "additionalProperties": False}
        body = {"messages": msgs, "max_tokens": 60, "seed": 1, "json_schema": schema}
        st, j = S.post("/v1/chat/completions", body)
        m = j["choices"][0]["message"]
        assert st == 200 and j["choices"][0]["finish_reason"] == "stop" and m["reasoning_content"], j
        assert isinstance(json.loads(m["content"])["a"], int), j
        ids = S.post("/tokenize", {"content": m["reasoning_content"]})[1]["tokens"]
        assert len(ids) <= 6, (ids, m)  # (the stripped thought: at most the budget's tokens)
        r, c, fin = _stream_fields(S, body)
        assert r == m["reasoning_content"] and c == m["content"] and fin == ["stop"], (r, c, fin, m)
    finally:
        S.stop()
    # enable_thinking through chat_template_kwargs (request), --chat-template-kwargs and --reasoning (server)
    S, path = _template_server(THINKING_TEMPLATE)
    try:
        st, j = S.post("/apply-template", {"messages": msgs})
        assert st == 200 and j["prompt"].endswith("<|im_start|>assistant\n"), j
        st, j = S.post("/apply-template", {"messages": msgs, "chat_template_kwargs": {"enable_thinking": False}})
        assert st == 200 and j["prompt"].endswith("<think>\n\n</think>\n\n"), j
        st, e = S.post("/v1/chat/completions", {"messages": msgs, "chat_template_kwargs": "x"})
        assert st == 400 and "chat_template_kwargs" in e["error"]["message"], e
    finally:
        S.stop()
    for flags in (("--reasoning", "off"), ("--chat-template-kwargs", '{"enable_thinking": false}')):
        S = Server("-np", "1", "-c", "1024", "--chat-template-file", path, *flags)
        try:
            st, j = S.post("/apply-template", {"messages": msgs})
            assert st == 200 and j["prompt"].endswith("<think>\n\n</think>\n\n"), (flags, j)
            st, j = S.post("/apply-template", {"messages": msgs, "chat_template_kwargs": {"enable_thinking": True}})
            assert st == 200 and j["prompt"].endswith("assistant\n"), (flags, j)
        finally:
            S.stop()
    os.unlink(path)


def test_reasoning_prefill(S):
    """issue 27: a continued assistant message on a <think> template, as llama.cpp's handlers write
    it (test-chat.cpp's "Continuation tests"): the prompt holds its reasoning in the thinking, and
    when the content goes on the closing tag and the content; the reply is read after it, so its
    reasoning_content and content start with the prefilled parts (streamed the same). DeepSeek R1's
    generation prompt opens the thinking (continued as written); a template whose prompt ends with
    an empty thinking block (thinking off) has it replaced; a template that does not think gets the
    content alone, and the reply's content starts with it too."""
    msgs = [{"role": "user", "content": "Hi"}]
    pre_c = {"role": "assistant", "content": "Hello, ", "reasoning_content": "I'm thinking"}
    pre_r = {"role": "assistant", "content": "", "reasoning_content": "I'm"}
    r1 = os.path.join(CHAT_TEMPLATES, "templates", "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja")
    R = Server("-np", "1", "-c", "1024", "--chat-template-file", r1)
    try:
        st, full = R.post("/apply-template", {"messages": msgs})
        assert st == 200 and full["prompt"].endswith("<think>\n"), full
        for last, extra, tail in ((pre_c, {}, "<think>\nI'm thinking\n</think>\n\nHello, "), (pre_r, {}, "<think>\nI'm"),
                                  (pre_c, {"continue_final_message": "reasoning_content"}, "<think>\nI'm thinking"),
                                  (pre_r, {"continue_final_message": "content"}, "<think>\nI'm\n</think>\n\n")):
            st, j = R.post("/apply-template", dict(extra, messages=msgs + [last]))
            assert st == 200 and j["prompt"] == full["prompt"][:-len("<think>\n")] + tail, (last, extra, j)
        body = {"messages": msgs + [pre_c], "max_tokens": 6, "seed": 1}
        st, j = R.post("/v1/chat/completions", body)
        m = j["choices"][0]["message"]
        assert st == 200 and m["reasoning_content"] == "I'm thinking" and m["content"].startswith("Hello, ") and len(m["content"]) > 7, j
        r, c, fin = _stream_fields(R, body)
        assert r == m["reasoning_content"] and c == m["content"], (r, c, m)
        body = {"messages": msgs + [pre_r], "max_tokens": 6, "seed": 1}
        st, j = R.post("/v1/chat/completions", body)
        m = j["choices"][0]["message"]
        assert st == 200 and m["reasoning_content"].startswith("I'm") and len(m["reasoning_content"]) > 4 and m["content"] == "", j
        r, c, fin = _stream_fields(R, body)
        assert r == m["reasoning_content"] and c == "", (r, c, m)
    finally:
        R.stop()
    T, path = _template_server(THINKING_TEMPLATE)
    try:
        off = {"chat_template_kwargs": {"enable_thinking": False}}
        st, j = T.post("/apply-template", dict(off, messages=msgs + [pre_c]))
        assert st == 200 and j["prompt"].endswith("<|im_start|>assistant\n<think>I'm thinking</think>Hello, ") and "</think>\n\n" not in j["prompt"], j
        st, j = T.post("/apply-template", {"messages": msgs + [{"role": "assistant", "content": "Hello, "}]})
        assert st == 200 and j["prompt"].endswith("<|im_start|>assistant\n<think></think>Hello, "), j
    finally:
        T.stop()
        os.unlink(path)
    # a template that does not think: the content alone in the prompt, and the reply's content starts with it
    st, full = S.post("/apply-template", {"messages": msgs})
    st, j = S.post("/apply-template", {"messages": msgs + [pre_c]})
    assert st == 200 and j["prompt"] == full["prompt"] + "Hello, ", (full, j)
    body = {"messages": msgs + [pre_c], "max_tokens": 6, "seed": 1}
    st, j = S.post("/v1/chat/completions", body)
    m = j["choices"][0]["message"]
    assert st == 200 and m["content"].startswith("Hello, ") and len(m["content"]) > 7 and "reasoning_content" not in m, j
    r, c, fin = _stream_fields(S, body)
    assert r == "" and c == m["content"], (r, c, m)


# ---- Anthropic's Messages API (tools/server/anthropic.c) ----------------------------------------

def anth_events(srv, body, path="/v1/messages"):
    """POST path (/v1/messages, /v1/responses) with stream: true; the events' data as sent, each
    checked against its `event:` line."""
    c = srv.conn()
    c.request("POST", path, body=json.dumps(dict(body, stream=True)), headers={"Content-Type": "application/json"})
    r = c.getresponse()
    assert r.status == 200 and r.getheader("Content-Type").startswith("text/event-stream"), (r.status, r.read())
    raw = r.read().decode()
    c.close()
    out = []
    for ev in raw.split("\n\n"):
        if not ev.strip():
            continue
        lines = ev.split("\n")
        assert len(lines) == 2 and lines[0].startswith("event: ") and lines[1].startswith("data: "), ev
        data = json.loads(lines[1][6:])
        assert data["type"] == lines[0][7:], ev
        out.append(data)
    return out


def test_anthropic_messages(S):
    """/v1/messages is the chat completion it converts to: the same text for the same seed, the
    same token counts, in Anthropic's shape (content blocks, stop_reason, usage, no timings);
    a stop sequence that ends the reply comes back as stop_reason stop_sequence."""
    body = {"model": "claude-x", "max_tokens": 16, "seed": 5, "system": [{"type": "text", "text": "You tell "}, {"type": "text", "text": "stories."}],
            "messages": [{"role": "user", "content": [{"type": "text", "text": "Tell one."}]}]}
    st, j = S.post("/v1/messages", body)
    assert st == 200, j
    assert set(j) == {"id", "type", "role", "content", "model", "stop_reason", "stop_sequence", "usage"}, j
    assert j["type"] == "message" and j["role"] == "assistant" and j["id"].startswith("msg_") and j["model"] == "claude-x", j
    assert [b["type"] for b in j["content"]] == ["text"] and j["stop_reason"] in ("end_turn", "max_tokens"), j
    chat = {"model": "claude-x", "max_tokens": 16, "seed": 5, "messages": [{"role": "system", "content": "You tell stories."},
                                                                         {"role": "user", "content": [{"type": "text", "text": "Tell one."}]}]}
    st, o = S.post("/v1/chat/completions", chat)
    assert st == 200 and j["content"][0]["text"] == o["choices"][0]["message"]["content"], (j, o)
    u = j["usage"]
    assert u["input_tokens"] + u["cache_read_input_tokens"] == o["usage"]["prompt_tokens"] and u["input_tokens"] >= 1, (u, o["usage"])
    assert u["output_tokens"] == o["usage"]["completion_tokens"] > 0, (u, o["usage"])
    assert j["stop_reason"] == {"length": "max_tokens", "stop": "end_turn"}[o["choices"][0]["finish_reason"]], (j, o)
    words = j["content"][0]["text"].split()
    assert len(words) >= 2, j
    st, k = S.post("/v1/messages", dict(body, stop_sequences=["zzqx", words[1]]))
    assert st == 200 and k["stop_reason"] == "stop_sequence" and k["stop_sequence"] == words[1], k
    assert words[1] not in k["content"][0]["text"], k
    # an empty conversation is one empty user turn; the reply still has a content block
    st, k = S.post("/v1/messages", {"max_tokens": 4, "messages": []})
    assert st == 200 and k["content"] and k["content"][0]["type"] == "text", k


def test_anthropic_stream(S):
    """The event stream: message_start, one text block (start, text_delta..., stop) at index 0,
    message_delta with the stop_reason and output_tokens, message_stop; each `event:` names its
    data's type, and the deltas add up to the non-streamed reply."""
    body = {"max_tokens": 12, "seed": 9, "messages": [{"role": "user", "content": "Hello"}]}
    st, j = S.post("/v1/messages", body)
    assert st == 200, j
    ev = anth_events(S, body)
    types = [e["type"] for e in ev]
    assert types[0] == "message_start" and types[1] == "content_block_start" and types[-3:] == ["content_block_stop", "message_delta", "message_stop"], types
    assert set(types[2:-3]) == {"content_block_delta"}, types
    m = ev[0]["message"]
    assert m["content"] == [] and m["role"] == "assistant" and m["id"].startswith("msg_") and m["stop_reason"] is None, m
    assert m["usage"]["input_tokens"] + m["usage"]["cache_read_input_tokens"] == j["usage"]["input_tokens"] + j["usage"]["cache_read_input_tokens"], (m, j)
    assert ev[1]["index"] == 0 and ev[1]["content_block"] == {"type": "text", "text": ""} and ev[-3]["index"] == 0, ev
    assert all(e["index"] == 0 and e["delta"]["type"] == "text_delta" for e in ev[2:-3]), ev
    assert "".join(e["delta"]["text"] for e in ev[2:-3]) == j["content"][0]["text"], (ev, j)
    assert ev[-2]["delta"]["stop_reason"] == j["stop_reason"] and ev[-2]["usage"]["output_tokens"] == j["usage"]["output_tokens"], (ev[-2], j)
    assert not any("timings" in e for e in ev), ev


def test_anthropic_count_tokens(S):
    """count_tokens: {"input_tokens": N}, N the prompt a /v1/messages request reads (the system
    prompt counted), without max_tokens."""
    msgs = [{"role": "user", "content": "Hello world"}, {"role": "assistant", "content": "Hi."}, {"role": "user", "content": "More"}]
    st, c = S.post("/v1/messages/count_tokens", {"model": "x", "messages": msgs})
    assert st == 200 and set(c) == {"input_tokens"} and c["input_tokens"] > 0, c
    st, j = S.post("/v1/messages", {"max_tokens": 1, "messages": msgs})
    assert st == 200 and j["usage"]["input_tokens"] + j["usage"]["cache_read_input_tokens"] == c["input_tokens"], (c, j)
    st, c2 = S.post("/v1/messages/count_tokens", {"model": "x", "system": "You are a helpful assistant.", "messages": msgs})
    assert st == 200 and c2["input_tokens"] > c["input_tokens"], (c, c2)


def test_anthropic_billing_header_cached(S):
    """Claude Code's system prompt starts with a billing header whose cch= hash is new on every
    request: made constant, so the second request reuses the first one's prompt from the cache."""
    def body(cch):
        return {"max_tokens": 2, "messages": [{"role": "user", "content": "Hi"}],
                "system": [{"type": "text", "text": f"x-anthropic-billing-header: cc_version=2.1.101.e51; cc_entrypoint=cli; cch={cch};"},
                           {"type": "text", "text": "You are a coding agent with a long system prompt, " * 8}]}
    st, a = S.post("/v1/messages", body("a5145"))
    st2, b = S.post("/v1/messages", body("0b9e2"))
    n = a["usage"]["input_tokens"] + a["usage"]["cache_read_input_tokens"]
    assert st == st2 == 200 and b["usage"]["input_tokens"] + b["usage"]["cache_read_input_tokens"] == n, (a, b)
    assert b["usage"]["cache_read_input_tokens"] >= n - 2, (a, b)


def test_anthropic_errors(S):
    """Malformed Messages requests: 400 naming the field, in Anthropic's error shape; the other
    statuses on these paths too (405), and the OpenAI endpoints keep theirs."""
    user = [{"role": "user", "content": "Hi"}]
    bad = [({"max_tokens": 5}, "'messages' is required"),
           ({"messages": "Hi"}, "'messages' must be an array"),
           ({"messages": [3]}, "'messages[0]' must be an object"),
           ({"messages": [{"role": "system", "content": "x"}]}, "'messages[0].role'"),
           ({"messages": [{"role": "user"}]}, "'messages[0].content'"),
           ({"messages": [{"role": "user", "content": [{"text": "x"}]}]}, "'messages[0].content[0]'"),
           ({"messages": [{"role": "user", "content": [{"type": "text", "text": 3}]}]}, "'messages[0].content[0].text'"),
           ({"messages": [{"role": "user", "content": [{"type": "video"}]}]}, "unknown block type"),
           ({"messages": [{"role": "user", "content": [{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AA=="}}]}]},
            "image input is not supported"),
           ({"messages": [{"role": "user", "content": [{"type": "tool_use", "name": "f", "input": {}}]}]}, "tool_use block in a user message"),
           ({"messages": [{"role": "assistant", "content": [{"type": "tool_use", "name": "f", "input": 3}]}]}, "'messages[0].content[0].input'"),
           ({"messages": [{"role": "user", "content": [{"type": "tool_result", "content": "x"}]}]}, "tool_use_id"),
           ({"messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a", "content": 3}]}]}, "'messages[0].content[0].content'"),
           ({"messages": user, "system": 3}, "'system'"),
           ({"messages": user, "system": [{"type": "image"}]}, "'system[0]'"),
           ({"messages": user, "tools": {}}, "'tools' must be an array"),
           ({"messages": user, "tools": [{"name": "f", "input_schema": 3}]}, "'tools[0].input_schema'"),
           ({"messages": user, "tools": [{"type": "web_search_20250305", "name": "web_search"}]}, "server tool"),
           ({"messages": user, "tool_choice": "auto"}, "'tool_choice'"),
           ({"messages": user, "stop_sequences": "END"}, "'stop_sequences'"),
           ({"messages": user, "stop_sequences": ["a", 1]}, "'stop_sequences[1]'"),
           ({"messages": user, "thinking": {"type": "sometimes"}}, "'thinking'"),
           ({"messages": user, "metadata": "u1"}, "'metadata'"),
           ({"messages": user, "max_tokens": "5"}, "'max_tokens'"),
           ({"messages": user, "temperature": "hot"}, "'temperature'"),
           ({"messages": user, "top_k": -5}, "'top_k'")]
    for body, word in bad:
        for path in ("/v1/messages", "/v1/messages/count_tokens")[:1 if "max_tokens" in body else 2]:  # (counting reads no max_tokens)
            st, j = S.post(path, body)
            assert st == 400 and j["type"] == "error" and j["error"]["type"] == "invalid_request_error", (path, body, st, j)
            assert word in j["error"]["message"], (path, body, word, j)
    st, hd, data = S.request("POST", "/v1/messages", "{nope")
    assert st == 400 and json.loads(data)["error"]["type"] == "invalid_request_error", data
    st, hd, data = S.request("GET", "/v1/messages")
    assert st == 405 and json.loads(data)["type"] == "error", data
    st, j = S.post("/v1/chat/completions", {"messages": "Hi"})
    assert st == 400 and "type" not in j and j["error"]["code"] == 400, j


def test_responses(S):
    """/v1/responses is the chat completion it converts to: instructions + input give the same
    prompt, text and token counts as the chat's system + user; the response object's shape
    (resp_ id, a message item with output_text, status incomplete with its reason when the
    limit ended it, usage); function_call and function_call_output items render as the
    chat's tool_calls and tool message (the same prompt tokens)."""
    body = {"model": "gpt-x", "max_output_tokens": 16, "seed": 5, "instructions": "You tell stories.",
            "input": [{"role": "user", "content": [{"type": "input_text", "text": "Tell one."}]}]}
    st, j = S.post("/v1/responses", body)
    assert st == 200, j
    assert {"id", "object", "created_at", "status", "error", "incomplete_details", "model", "output", "usage"} <= set(j), j
    assert j["object"] == "response" and j["id"].startswith("resp_") and j["model"] == "gpt-x" and j["error"] is None, j
    assert [o["type"] for o in j["output"]] == ["message"] and j["output"][0]["content"][0]["type"] == "output_text", j
    chat = {"model": "gpt-x", "max_tokens": 16, "seed": 5, "messages": [{"role": "system", "content": "You tell stories."},
                                                                     {"role": "user", "content": "Tell one."}]}
    st, o = S.post("/v1/chat/completions", chat)
    assert st == 200 and j["output"][0]["content"][0]["text"] == o["choices"][0]["message"]["content"], (j, o)
    u = j["usage"]
    assert u["input_tokens"] == o["usage"]["prompt_tokens"] and u["output_tokens"] == o["usage"]["completion_tokens"] > 0, (u, o["usage"])
    assert u["total_tokens"] == u["input_tokens"] + u["output_tokens"], u
    length = o["choices"][0]["finish_reason"] == "length"
    assert j["status"] == ("incomplete" if length else "completed"), j
    assert j["incomplete_details"] == ({"reason": "max_output_tokens"} if length else None), j
    # the items of a tool round trip: the same prompt as the chat messages they stand for
    items = [{"role": "user", "content": "Weather?"},
             {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": "{\"city\":\"Paris\"}"},
             {"type": "function_call_output", "call_id": "c1", "output": "18 C"}]
    st, r = S.post("/v1/responses", {"input": items, "max_output_tokens": 1})
    msgs = [{"role": "user", "content": "Weather?"},
            {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function",
                                                                 "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]},
            {"role": "tool", "tool_call_id": "c1", "name": "get_weather", "content": "18 C"}]
    st2, c = S.post("/v1/chat/completions", {"messages": msgs, "max_tokens": 1})
    assert st == 200 and st2 == 200 and r["usage"]["input_tokens"] == c["usage"]["prompt_tokens"], (r, c)


def test_responses_stream(S):
    """The Responses event stream: response.created, response.in_progress, one message item
    (added, content part added, output_text deltas, text done, part done, item done), then
    response.completed or response.incomplete with the whole response; sequence_number 0, 1,
    ...; the deltas add up to the non-streamed text."""
    body = {"max_output_tokens": 12, "seed": 9, "input": "Hello"}
    st, j = S.post("/v1/responses", body)
    assert st == 200, j
    ev = anth_events(S, body, "/v1/responses")
    types = [e["type"] for e in ev]
    assert types[:4] == ["response.created", "response.in_progress", "response.output_item.added", "response.content_part.added"], types
    assert types[-4:-1] == ["response.output_text.done", "response.content_part.done", "response.output_item.done"], types
    assert types[-1] == {"completed": "response.completed", "incomplete": "response.incomplete"}[j["status"]], (types, j)
    assert set(types[4:-4]) == {"response.output_text.delta"}, types
    assert [e["sequence_number"] for e in ev] == list(range(len(ev))), ev
    text = "".join(e["delta"] for e in ev if e["type"] == "response.output_text.delta")
    assert text == j["output"][0]["content"][0]["text"] == ev[-4]["text"], (text, j)
    final = ev[-1]["response"]
    assert final["id"] == ev[0]["response"]["id"] and final["output"][0]["content"][0]["text"] == text, final
    assert final["usage"]["output_tokens"] == j["usage"]["output_tokens"], (final, j)
    item_id = ev[2]["item"]["id"]
    assert all(e.get("item_id", item_id) == item_id for e in ev[3:-1]) and ev[-2]["item"]["id"] == item_id, ev


def test_responses_errors(S):
    """Malformed Responses requests: 400 in OpenAI's shape naming the field; the state a
    stateless server cannot have (previous_response_id, item_reference) says so; GET is 405."""
    bad = [({}, "'input' is required"),
           ({"input": 3}, "'input' must be a string or an array"),
           ({"input": "x", "previous_response_id": "resp_1"}, "stateless"),
           ({"input": [{"type": "item_reference", "id": "msg_1"}]}, "stateless"),
           ({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "data:,"}]}]}, "text only"),
           ({"input": [{"type": "function_call_output", "output": "x"}]}, "'input[0].call_id'"),
           ({"input": "x", "tools": [{"type": "web_search"}]}, "built-in tools"),
           ({"input": "x", "tool_choice": {"type": "function"}}, "'tool_choice'"),
           ({"input": "x", "max_output_tokens": "5"}, "'max_output_tokens'"),
           ({"input": "x", "temperature": "hot"}, "'temperature'")]
    for body, word in bad:
        st, j = S.post("/v1/responses", body)
        assert st == 400 and j["error"]["code"] == 400 and j["error"]["type"] == "invalid_request_error", (body, st, j)
        assert word in j["error"]["message"], (body, word, j)
    st, hd, data = S.request("GET", "/v1/responses")
    assert st == 405 and "error" in json.loads(data), data


def test_jinja_responses_tools(J):
    """Tools through /v1/responses (Qwen 2.5's template): flat function tools, tool_choice
    required -> one function_call item (fc_ id, call_id, name) whose arguments fit the schema;
    streamed: the item added with its name, argument deltas that add up to the same call, the
    arguments done event, the completed response holding it."""
    fn = WEATHER_TOOLS[0]["function"]
    tools = [{"type": "function", "name": fn["name"], "description": "Weather", "parameters": fn["parameters"]}]
    body = {"max_output_tokens": 300, "seed": 3, "tools": tools, "tool_choice": "required", "input": "Weather?"}
    st, j = J.post("/v1/responses", body)
    assert st == 200 and j["status"] == "completed", j
    calls = [o for o in j["output"] if o["type"] == "function_call"]
    assert len(calls) == 1 and calls[0]["name"] == "get_weather" and calls[0]["call_id"] and calls[0]["id"].startswith("fc_"), j
    args = json.loads(calls[0]["arguments"])
    assert set(args) == {"city", "days"} and args["city"] in ("Paris", "Tokyo") and 1 <= args["days"] <= 7, args
    ev = anth_events(J, body, "/v1/responses")
    added = [e for e in ev if e["type"] == "response.output_item.added" and e["item"]["type"] == "function_call"]
    assert len(added) == 1 and added[0]["item"]["name"] == "get_weather", ev
    pieces = [e["delta"] for e in ev if e["type"] == "response.function_call_arguments.delta"]
    done = [e for e in ev if e["type"] == "response.function_call_arguments.done"]
    assert len(pieces) > 1 and json.loads("".join(pieces)) == args and done[0]["arguments"] == "".join(pieces), (pieces, done)
    assert all(e["item_id"] == added[0]["item"]["id"] for e in ev if e["type"].startswith("response.function_call_arguments")), ev
    assert ev[-1]["type"] == "response.completed" and ev[-1]["response"]["output"][-1]["arguments"] == "".join(pieces), ev[-1]


def test_jinja_anthropic_tools(J):
    """Tools through /v1/messages (Qwen 2.5's template, its <tool_call> format): tool_choice any
    -> a tool_use block whose input fits the schema, stop_reason tool_use; streamed: a tool_use
    block (id, name) and input_json_delta pieces that add up to the same input; a tool_result
    goes back into the prompt as the tool's message."""
    tools = [{"name": "get_weather", "description": "Weather", "input_schema": WEATHER_TOOLS[0]["function"]["parameters"]}]
    body = {"max_tokens": 300, "seed": 3, "tools": tools, "tool_choice": {"type": "any"}, "messages": [{"role": "user", "content": "Weather?"}]}
    st, j = J.post("/v1/messages", body)
    assert st == 200 and j["stop_reason"] == "tool_use", j
    uses = [b for b in j["content"] if b["type"] == "tool_use"]
    assert len(uses) == 1 and uses[0]["name"] == "get_weather" and uses[0]["id"], j
    args = uses[0]["input"]
    assert set(args) == {"city", "days"} and args["city"] in ("Paris", "Tokyo") and 1 <= args["days"] <= 7, args
    ev = anth_events(J, body)
    starts = [e for e in ev if e["type"] == "content_block_start"]
    assert [e["index"] for e in starts] == list(range(len(starts))), starts
    assert sorted(e["index"] for e in ev if e["type"] == "content_block_stop") == list(range(len(starts))), ev
    tool = [e for e in starts if e["content_block"]["type"] == "tool_use"]
    assert len(tool) == 1 and tool[0]["content_block"]["name"] == "get_weather" and tool[0]["content_block"]["id"], starts
    pieces = [e["delta"]["partial_json"] for e in ev if e["type"] == "content_block_delta" and e["delta"]["type"] == "input_json_delta"]
    assert json.loads("".join(pieces)) == args and all(e["index"] == tool[0]["index"] for e in ev
                                                      if e["type"] == "content_block_delta" and e["delta"]["type"] == "input_json_delta"), (pieces, args)
    assert [e for e in ev if e["type"] == "message_delta"][0]["delta"]["stop_reason"] == "tool_use", ev
    # the round trip: the call and its result (with text beside it) render as the template's tool messages
    hist = [{"role": "user", "content": "Weather?"},
            {"role": "assistant", "content": [{"type": "text", "text": "Let me look."},
                                              {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris", "days": 2}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "18 C"}]},
                                         {"type": "text", "text": "Thanks"}]}]
    st, j = J.post("/v1/messages", {"max_tokens": 8, "seed": 1, "tools": tools, "messages": hist})
    assert st == 200 and j["content"], j
    oai = [{"role": "user", "content": "Weather?"},
           {"role": "assistant", "content": [{"type": "text", "text": "Let me look."}], "tool_calls": [
               {"id": "toolu_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\",\"days\":2}"}}]},
           {"role": "tool", "tool_call_id": "toolu_1", "content": "18 C"}, {"role": "user", "content": [{"type": "text", "text": "Thanks"}]}]
    oai_tools = [{"type": "function", "function": {"name": "get_weather", "description": "Weather", "parameters": tools[0]["input_schema"]}}]
    st, p = J.post("/apply-template", {"messages": oai, "tools": oai_tools})
    assert st == 200 and "<tool_response>\n18 C\n</tool_response>" in p["prompt"], p
    st, c = J.post("/v1/messages/count_tokens", {"tools": tools, "messages": hist})
    n = len(J.post("/tokenize", {"content": p["prompt"], "add_special": True})[1]["tokens"])
    assert st == 200 and c["input_tokens"] == n, (c, n, p)


def spec_requests():
    """48 requests for the speculative-decoding test: greedy and seeded sampling (with
    penalties), a grammar, a stop string, n_probs, and prompts that repeat themselves (where
    prompt lookup drafts)."""
    prompts = ["Once upon a time", "The little dog", "Lily wanted to", "Tom and Sam went to the park. Tom and Sam went",
               "One day, a bird said hello. One day, a bird"]
    out = []
    for i in range(48):
        b = {"prompt": prompts[i % 5] + " " * (i // 5), "n_predict": 96, "seed": 1000 + i, "cache_prompt": False}
        if i % 3 == 1:
            b.update(temperature=0.8, top_k=40, top_p=0.95, repeat_penalty=1.1)
        elif i % 3 == 2:
            b.update(temperature=1.0, min_p=0.05, n_probs=3)
        else:
            b.update(temperature=0)
        if i % 8 == 3:
            b["grammar"] = 'root ::= ("Yes" | "No") " " [a-z ]+ "."'
        if i % 8 == 5:
            b["stop"] = ["."]
        out.append(b)
    return out


def test_speculative_same_texts():
    """issue 30: with -np 4, a draft model (the model itself quantized to f16) and prompt
    lookup each serve 48 concurrent requests with the same texts, tokens and probabilities
    as without speculation (each slot drafts, one decode verifies every slot's draft, the
    chain samples every verified row as plain generation would); /props, /slots, /metrics
    and the timings report it; per-request speculative.* fields are taken and checked."""
    import tempfile
    d = tempfile.mkdtemp(prefix="sift-spec-")
    draft = os.path.join(d, "draft-f16.gguf")
    q = subprocess.run([ARGS.sift, "quantize", ARGS.model, draft, "f16"], capture_output=True, text=True)
    assert q.returncode == 0, q.stderr
    reqs = spec_requests()

    def run(*extra):
        S = Server("-np", "4", "-c", "2048", "--max-connections-per-client", "0", *extra)
        try:
            with cf.ThreadPoolExecutor(len(reqs)) as ex:
                res = list(ex.map(lambda b: S.post("/completion", b), reqs))
            for st, j in res:
                assert st == 200, (st, j)
            info = (S.get_json("/props"), S.get_json("/slots"), S.request("GET", "/metrics")[2].decode())
            extra_checks(S) if extra else None
            return [j for _, j in res], info
        finally:
            S.stop()

    def extra_checks(S):
        st, j = S.post("/completion", {"prompt": "Once upon a time", "n_predict": 24, "temperature": 0, "speculative.n_max": 0})
        assert st == 200 and "draft_n" not in j["timings"], j["timings"]
        assert j["generation_settings"]["speculative.n_max"] == 0, j["generation_settings"]
        st, j = S.post("/completion", {"prompt": "Once upon a time", "n_predict": 24, "temperature": 0,
                                       "speculative": {"n_max": 3, "n_min": 5, "p_min": 0.5}})
        assert st == 200 and j["generation_settings"]["speculative.n_max"] == 3, j["generation_settings"]
        assert j["generation_settings"]["speculative.n_min"] == 3, j["generation_settings"]  # lowered to n_max
        for bad in ({"speculative.n_max": -1}, {"speculative.n_max": 5000}, {"speculative.p_min": 2},
                    {"speculative.n_min": "x"}, {"speculative": 3}, {"speculative": {"p_min": -0.1}}):
            st, j = S.post("/completion", dict({"prompt": "a", "n_predict": 2}, **bad))
            assert st == 400 and "speculative" in j["error"]["message"], (bad, st, j)

    plain, (props, _, _) = run()
    assert props["default_generation_settings"]["speculative"] is False
    for extra in (("-md", draft), ("--lookup", "4")):
        got, (props, slots, metrics) = run(*extra)
        for a, b, r in zip(plain, got, reqs):
            assert a["content"] == b["content"] and a["tokens_predicted"] == b["tokens_predicted"], (extra, r, a["content"], b["content"])
            assert a.get("completion_probabilities") == b.get("completion_probabilities"), (extra, r)
        drafted = sum(j["timings"].get("draft_n", 0) for j in got)
        accepted = sum(j["timings"].get("draft_n_accepted", 0) for j in got)
        assert drafted > 0 and 0 < accepted <= drafted, (extra, drafted, accepted)
        assert props["default_generation_settings"]["speculative"] is True
        assert props["default_generation_settings"]["params"]["speculative.n_max"] == 16
        assert all(sl["speculative"] and "draft_acceptance" in sl and sl["params"]["speculative.p_min"] == 0.75 for sl in slots), slots
        m = {l.split()[0]: float(l.split()[1]) for l in metrics.splitlines() if l and not l.startswith("#") and len(l.split()) == 2}
        assert m["llamacpp:n_drafted_total"] >= drafted and m["llamacpp:n_drafted_accepted_total"] >= accepted, m
        assert 0 < m["llamacpp:draft_acceptance_ratio"] <= 1, m

    # usage errors: a vocabulary that differs, both sources at once, a bad value
    other = os.path.join(os.path.dirname(ARGS.model), "llama-2-tiny-random.gguf")
    for args, msg in ((("-md", other), "vocabulary"), (("-md", draft, "--lookup", "3"), "not both"),
                      (("--lookup", "9"), "n-gram"), (("--draft-p-min", "1.5"), "probability"),
                      (("--draft-min", "8", "--draft-max", "4"), "larger")):
        if not os.path.exists(args[1]):
            continue
        p = subprocess.run([ARGS.sift, "serve", "-m", ARGS.model, "--port", "0", *args], capture_output=True, text=True, timeout=60)
        assert p.returncode != 0 and msg in p.stderr, (args, p.returncode, p.stderr)
    shutil.rmtree(d, ignore_errors=True)


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("--sift", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("-k", default="", help="run only tests whose name contains this")
    ARGS = ap.parse_args()
    if not os.path.exists(ARGS.model):
        print(f"model not found: {ARGS.model}")
        return 1
    tests_main = [(n, f) for n, f in globals().items() if n.startswith("test_") and f.__code__.co_argcount == 1 and f.__code__.co_varnames[:1] == ("S",)]
    tests_long = [(n, f) for n, f in globals().items() if n.startswith("test_") and f.__code__.co_argcount == 1 and f.__code__.co_varnames[:1] == ("L",)]
    tests_own = [(n, f) for n, f in globals().items() if n.startswith("test_") and f.__code__.co_argcount == 0]
    tests_jinja = [(n, f) for n, f in globals().items() if n.startswith("test_") and f.__code__.co_argcount == 1 and f.__code__.co_varnames[:1] == ("J",)]
    passed = failed = 0
    t_all = time.time()
    for args, tests in ((("-np", "4", "-c", "2048"), tests_main),
                        (("-np", "1", "-c", "16384", "--max-n-predict", "16000", "--max-queue", "1"), tests_long),
                        (jinja_server_args(), tests_jinja)):
        tests = [(n, f) for n, f in tests if ARGS.k in n]
        if not tests:
            continue
        srv = Server(*args)
        for name, fn in tests:
            t0 = time.time()
            try:
                fn(srv)
                passed += 1
                print(f"ok    {name} ({1e3 * (time.time() - t0):.0f} ms)", flush=True)
            except Exception as e:  # noqa: BLE001 - report and go on
                failed += 1
                print(f"FAIL  {name}: {type(e).__name__}: {e}", flush=True)
        try:
            srv.stop()
            passed += 1
            print(f"ok    clean_shutdown ({' '.join(args)})")
        except Exception as e:  # noqa: BLE001
            failed += 1
            print(f"FAIL  clean_shutdown: {e}")
    for name, fn in [(n, f) for n, f in tests_own if ARGS.k in n]:
        t0 = time.time()
        try:
            fn()
            passed += 1
            print(f"ok    {name} ({1e3 * (time.time() - t0):.0f} ms)", flush=True)
        except Exception as e:  # noqa: BLE001
            failed += 1
            print(f"FAIL  {name}: {type(e).__name__}: {e}", flush=True)
    print(f"server tests: {time.time() - t_all:.1f} s")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
