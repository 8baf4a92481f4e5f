#!/usr/bin/env python3
"""llama_grammar_tests.py - extract the test data of llama.cpp's grammar tests into
tests/data/llama_grammar_tests.json, the data file of our own harness (tests/llama_grammar_cases.c).

  python3 tests/scripts/llama_grammar_tests.py GRAMMAR_INTEGRATION_CPP JSON_SCHEMA_TO_GRAMMAR_CPP OUT.json SOURCE_NOTE

Sources: ggml-org/llama.cpp tests/test-grammar-integration.cpp (MIT) and
tests/test-json-schema-to-grammar.cpp (MIT). Only their data is taken, no code: the grammar or
schema of each case, its passing and failing strings, and the compile verdicts (grammars that
must fail to build; schemas whose conversion must succeed or fail). A string that contains
token ids (their token(N)) is a list of parts: text pieces and token ids.

The C++ is read with a small tokenizer (string literals, raw strings, token(N), `+`, braces,
`const std::string NAME = ...;` variables); a call whose arguments it cannot read stops the
extraction with an error, so the data never silently loses a case.
"""
import json
import re
import sys


def lex(src):
    """C++ tokens: ('str', text) | ('id', name) | ('num', n) | ('p', punct); comments dropped."""
    out, i, n = [], 0, len(src)
    while i < n:
        ch = src[i]
        if ch.isspace():
            i += 1
        elif src.startswith("//", i):
            i = src.find("\n", i)
            i = n if i < 0 else i
        elif src.startswith("/*", i):
            i = src.find("*/", i) + 2
        elif ch == "R" and i + 1 < n and src[i + 1] == '"':
            d_end = src.index("(", i + 2)
            delim = src[i + 2:d_end]
            close = ")" + delim + '"'
            e = src.index(close, d_end + 1)
            out.append(("str", src[d_end + 1:e]))
            i = e + len(close)
        elif ch == '"':
            j, buf = i + 1, []
            while src[j] != '"':
                if src[j] == "\\":
                    c = src[j + 1]
                    simple = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\", "'": "'", "0": "\0", "f": "\f", "v": "\v"}
                    if c in simple:
                        buf.append(simple[c])
                        j += 2
                    elif c == "x":
                        m = re.match(r"[0-9a-fA-F]+", src[j + 2:])
                        buf.append(chr(int(m.group(0), 16)))
                        j += 2 + len(m.group(0))
                    elif c == "u":
                        buf.append(chr(int(src[j + 2:j + 6], 16)))
                        j += 6
                    else:
                        raise SystemExit(f"unknown escape \\{c} at {j}")
                else:
                    buf.append(src[j])
                    j += 1
            out.append(("str", "".join(buf)))
            i = j + 1
        elif ch.isalpha() or ch == "_":
            m = re.match(r"[A-Za-z_][A-Za-z_0-9:]*", src[i:])
            out.append(("id", m.group(0)))
            i += len(m.group(0))
        elif ch.isdigit():
            m = re.match(r"[0-9]+", src[i:])
            out.append(("num", int(m.group(0))))
            i += len(m.group(0))
        else:
            out.append(("p", ch))
            i += 1
    return out


class Reader:
    def __init__(self, toks, env):
        self.t, self.i, self.env = toks, 0, env

    def peek(self, k=0):
        return self.t[self.i + k] if self.i + k < len(self.t) else ("p", "")

    def take(self, kind=None, val=None):
        tk = self.t[self.i]
        if (kind and tk[0] != kind) or (val is not None and tk[1] != val):
            raise SystemExit(f"expected {kind} {val!r}, got {tk!r} near token {self.i}")
        self.i += 1
        return tk

    def term(self):
        """a string expression: literals (adjacent ones join), token(N), variables, joined by +"""
        parts = []
        while True:
            k, v = self.peek()
            if k == "str":
                parts.append(v)
                self.i += 1
            elif k == "id" and v == "token":
                self.take("id")
                self.take("p", "(")
                parts.append(self.take("num")[1])
                self.take("p", ")")
            elif k == "id" and v in self.env:
                self.i += 1
                parts.extend(self.env[v])
            else:
                raise SystemExit(f"cannot read a string term at {self.peek()!r} (token {self.i})")
            if self.peek() == ("p", "+"):
                self.i += 1
                continue
            if self.peek()[0] == "str":
                continue
            break
        # join adjacent texts
        out = []
        for p in parts:
            if isinstance(p, str) and out and isinstance(out[-1], str):
                out[-1] += p
            else:
                out.append(p)
        return out

    def str_list(self):
        self.take("p", "{")
        items = []
        while self.peek() != ("p", "}"):
            items.append(self.term())
            if self.peek() == ("p", ","):
                self.i += 1
        self.take("p", "}")
        return items


def plain(parts):
    """a string of text only as a JSON string, else its list of parts"""
    if all(isinstance(p, str) for p in parts):
        return "".join(parts)
    return parts


def grammar_integration(src):
    toks = lex(src)
    env, cases, func = {}, [], None
    r = Reader(toks, env)
    while r.i < len(toks):
        k, v = r.peek()
        # the function being read (for the cases that are not test_* calls)
        if k == "id" and v == "static" and r.peek(1) == ("id", "void"):
            func = r.peek(2)[1]
        if k == "id" and v in ("std::string",) and r.peek(1)[0] == "id" and r.peek(2) == ("p", "="):
            name = r.peek(1)[1]
            r.i += 3
            env[name] = r.term()
            if func == "test_failure_missing_root" and name == "grammar_str":
                cases.append({"kind": "grammar_fails", "desc": "missing root rule", "grammar": plain(env[name])})
            elif func == "test_failure_missing_reference" and name == "grammar_str":
                cases.append({"kind": "grammar_fails", "desc": "missing referenced rule", "grammar": plain(env[name])})
            elif func == "test_failure_missing_root_symbol" and name == "grammar_str":
                cases.append({"kind": "grammar_fails", "desc": "missing root symbol", "grammar": plain(env[name]), "root": "nonexistent"})
            elif func == "test_custom_root_symbol_check" and name == "custom_root_grammar_str":
                cases.append({"kind": "grammar_fails", "desc": "custom root, default root name", "grammar": plain(env[name]), "root": "root"})
                cases.append({"kind": "grammar", "desc": "custom root", "grammar": plain(env[name]), "root": "foobar",
                              "pass": [], "fail": []})
            continue
        if k == "id" and v in ("test_grammar", "test_schema") and r.peek(1) == ("p", "(") and func not in ("test_grammar", "test_schema", "test"):
            r.i += 2
            desc = plain(r.term())
            r.take("p", ",")
            text = plain(r.term())
            r.take("p", ",")
            ok = [plain(s) for s in r.str_list()]
            r.take("p", ",")
            bad = [plain(s) for s in r.str_list()]
            r.take("p", ")")
            cases.append({"kind": "grammar" if v == "test_grammar" else "schema", "desc": desc, "grammar" if v == "test_grammar" else "schema": text,
                          "pass": ok, "fail": bad})
            continue
        if k == "id" and v == "test_build_grammar_fails" and r.peek(1) == ("p", "(") and r.peek(2) != ("id", "const"):
            r.i += 2
            cases.append({"kind": "grammar_fails", "desc": f"{func}", "grammar": plain(r.term())})
            r.take("p", ")")
            continue
        r.i += 1
    return cases


def json_schema_to_grammar(src):
    toks = lex(src)
    r = Reader(toks, {})
    cases = []
    while r.i < len(toks):
        if r.peek() == ("id", "test") and r.peek(1) == ("p", "(") and r.peek(2) == ("p", "{"):
            r.i += 3
            status = r.take("id")[1]
            r.take("p", ",")
            name = plain(r.term())
            r.take("p", ",")
            schema = plain(r.term())
            r.take("p", ",")
            r.term()  # the expected grammar text: llama.cpp's layout, not compared
            r.take("p", "}")
            r.take("p", ")")
            if status not in ("SUCCESS", "FAILURE"):
                raise SystemExit(f"unknown status {status}")
            cases.append({"kind": "schema_verdict", "desc": name, "schema": schema, "converts": status == "SUCCESS"})
            continue
        r.i += 1
    return cases


def main():
    gi, js, out, note = sys.argv[1:5]
    cases = grammar_integration(open(gi, encoding="utf-8").read()) + json_schema_to_grammar(open(js, encoding="utf-8").read())
    doc = {
        "source": "ggml-org/llama.cpp tests/test-grammar-integration.cpp and tests/test-json-schema-to-grammar.cpp (MIT): "
                  "their test data only (grammars, schemas, passing / failing strings, compile verdicts), "
                  "extracted by tests/scripts/llama_grammar_tests.py; " + note,
        "cases": cases,
    }
    with open(out, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1, ensure_ascii=False)
        f.write("\n")
    kinds = {}
    for c in cases:
        kinds[c["kind"]] = kinds.get(c["kind"], 0) + 1
    print(f"{out}: {len(cases)} cases {kinds}")


if __name__ == "__main__":
    main()
