#!/usr/bin/env python3
"""
dropin_cmdlines.py - llama.cpp's own command lines (from the READMEs of llama-completion /
llama-cli and llama-server) run against sift, as a user switching over would run them.

The table lives in docs/cli.md between the markers <!-- dropin:begin --> and
<!-- dropin:end -->: per row the llama.cpp command as its README writes it, the exit status
sift gives, and the first line sift prints (stderr's first line; stdout's when stderr is
empty). This script runs every row and fails when a status or a first line differs from the
table, or when anything says "unknown option". --write rewrites the table from the runs
(after a change that moves a first line on purpose). The same goes for the lists of flags
taken with a note (between <!-- compat:begin --> and <!-- compat:end -->): they must be what
`sift generate --help` and `sift serve --help` print from tools/common/cli_compat.c.

How a llama.cpp line becomes a sift line:
  - llama-cli / llama-completion -> `sift generate`, llama-server -> `sift serve`;
  - a model path: the file of that name in ../shared/models when there is one
    (llama-2-tiny-random.gguf: a 32000-token vocabulary for the README's token ids), else
    stories260K.gguf;
  - the server gets --port 0 (any free port; a --port N is replaced) and is stopped with
    SIGTERM once it says it is listening (status 0 = a clean drain);
  - stdin is empty, so interactive and conversation sessions end at EOF; each run has a
    timeout (30 s);
  - the working directory has prompts/chat-with-bob.txt and models_directory/ (stories260K
    for the router's --models-dir), and LLAMA_CACHE is an empty directory.
The first line is made machine-independent: the models' directory is written models/, and
the server's "threads N/M" (the CPU count) threads T/T.
"""
import argparse
import os
import re
import select
import shlex
import signal
import subprocess
import sys
import tempfile
import time

BEGIN, END = "<!-- dropin:begin -->", "<!-- dropin:end -->"
CBEGIN, CEND = "<!-- compat:begin -->", "<!-- compat:end -->"
TIMEOUT = 30

# llama.cpp's prompts/chat-with-bob.txt in our own words: the prompt ends with the reverse prompt
BOB = ("Transcript of a dialog, where the User interacts with an Assistant named Bob. Bob is helpful, "
       "kind, honest, good at writing, and never fails to answer the User's requests immediately.\n\n"
       "User: Hello, Bob.\nBob: Hello. How may I help you today?\nUser:")


def translate(cmd, models):
    argv = shlex.split(cmd)
    prog = os.path.basename(argv[0]).replace(".exe", "")
    if prog in ("llama-cli", "llama-completion", "main"):
        out, serve = ["generate"], False
    elif prog == "llama-server":
        out, serve = ["serve"], True
    else:
        raise ValueError(f"not a llama.cpp program: {argv[0]}")
    i = 1
    while i < len(argv):
        a = argv[i]
        if a.endswith(".gguf"):
            name = os.path.basename(a)
            out.append(os.path.join(models, name if os.path.exists(os.path.join(models, name)) else "stories260K.gguf"))
        elif serve and a == "--port" and i + 1 < len(argv):
            out += ["--port", "0"]
            i += 1
        else:
            out.append(a)
        i += 1
    if serve and "--port" not in out:
        out += ["--port", "0"]
    return out, serve


def normalize(line, models):
    line = line.replace(models.rstrip("/") + "/", "models/")
    return re.sub(r"threads \d+/\d+", "threads T/T", line).replace("`", "'").rstrip()


def run_generate(argv, cwd):
    p = subprocess.run(argv, cwd=cwd, stdin=subprocess.DEVNULL, capture_output=True, timeout=TIMEOUT)
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def run_serve(argv, cwd):
    p = subprocess.Popen(argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    err = b""
    end = time.time() + TIMEOUT
    while time.time() < end and b"listening on" not in err and p.poll() is None:
        r, _, _ = select.select([p.stderr], [], [], 0.2)
        if r:
            chunk = os.read(p.stderr.fileno(), 65536)
            if not chunk:
                break
            err += chunk
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
    try:
        out, rest = p.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        p.kill()
        out, rest = p.communicate()
    return p.returncode, out.decode("utf-8", "replace"), (err + rest).decode("utf-8", "replace")


def parse_table(doc):
    a, b = doc.index(BEGIN), doc.index(END)
    rows = []
    for line in doc[a + len(BEGIN):b].splitlines():
        m = re.match(r"\|\s*(\d+)\s*\|\s*(.*?)\s*\|\s*`(.*)`\s*\|\s*(-?\d+)\s*\|\s*`(.*)`\s*\|\s*$", line)
        if m:
            rows.append({"n": int(m.group(1)), "src": m.group(2), "cmd": m.group(3).replace("\\|", "|"),
                         "status": int(m.group(4)), "first": m.group(5).replace("\\|", "|")})
    return rows


def render(rows):
    out = ["| # | from | llama.cpp command line | exit | first line sift prints |", "| --- | --- | --- | --- | --- |"]
    for r in rows:
        cmd = r["cmd"].replace("|", "\\|")
        first = r["first"].replace("|", "\\|").replace("`", "'")
        out.append(f"| {r['n']} | {r['src']} | `{cmd}` | {r['status']} | `{first}` |")
    return "\n".join(out)


def compat_lists(sift):
    """The no-effect flags each command's --help lists (cli_compat_help's lines at its end)."""
    out = []
    for cmd in ("generate", "serve"):
        text = subprocess.run([sift, cmd, "--help"], capture_output=True, text=True, timeout=TIMEOUT).stdout
        tail = text[text.index("accepted with a note"):].splitlines()[1:]
        names = " ".join(l.strip() for l in tail if l.startswith("  ")).split()
        out.append(f"- `{cmd}`: " + ", ".join(f"`{n}`" for n in names))
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sift", required=True)
    ap.add_argument("--models", required=True, help="../shared/models")
    ap.add_argument("--doc", required=True, help="docs/cli.md")
    ap.add_argument("--write", action="store_true", help="rewrite the table from the runs")
    a = ap.parse_args()
    models = os.path.abspath(a.models)
    a.sift = os.path.abspath(a.sift)
    doc = open(a.doc, encoding="utf-8").read()
    rows = parse_table(doc)
    if len(rows) < 40:
        print(f"the table has {len(rows)} rows, fewer than 40")
        return 1
    fails = 0
    t0 = time.time()
    with tempfile.TemporaryDirectory() as cwd:
        os.makedirs(os.path.join(cwd, "prompts"))
        # the server README's router mode: a models directory, and an empty download cache (a
        # router lists the user's too, which would make the first line depend on the machine)
        os.makedirs(os.path.join(cwd, "models_directory"))
        os.symlink(os.path.join(models, "stories260K.gguf"), os.path.join(cwd, "models_directory", "stories260K.gguf"))
        os.makedirs(os.path.join(cwd, "cache"))
        os.environ["LLAMA_CACHE"] = os.path.join(cwd, "cache")
        with open(os.path.join(cwd, "prompts", "chat-with-bob.txt"), "w") as f:
            f.write(BOB + "\n")
        for r in rows:
            argv, serve = translate(r["cmd"], models)
            try:
                st, out, err = (run_serve if serve else run_generate)([a.sift] + argv, cwd)
            except subprocess.TimeoutExpired:
                st, out, err = 124, "", "timeout\n"
            lines = (err if err.strip() else out).splitlines()
            first = normalize(lines[0] if lines else "", models)
            bad = []
            if "unknown option" in out + err:
                bad.append("unknown option")
            if not a.write and st != r["status"]:
                bad.append(f"exit {st}, the table says {r['status']}")
            if not a.write and first != r["first"]:
                bad.append(f"first line {first!r}, the table says {r['first']!r}")
            r["status"], r["first"] = st, first
            print(("FAIL " if bad else "ok   ") + f"{r['n']:2d} exit {st}: sift {' '.join(argv[:1])} ... | {first[:100]}"
                  + ("".join(f"\n       {x}" for x in bad)), flush=True)
            fails += bool(bad)
    compat = compat_lists(a.sift)
    i, j = doc.index(CBEGIN) + len(CBEGIN), doc.index(CEND)
    if not a.write and doc[i:j].strip() != compat:
        print("FAIL the lists of flags taken with a note in docs/cli.md are not what --help prints (run with --write)")
        fails += 1
    if a.write:
        doc = doc[:i] + "\n" + compat + "\n" + doc[j:]
        i, j = doc.index(BEGIN) + len(BEGIN), doc.index(END)
        open(a.doc, "w", encoding="utf-8").write(doc[:i] + "\n" + render(rows) + "\n" + doc[j:])
        print(f"wrote {len(rows)} rows and the flag lists to {a.doc}")
    print(f"{len(rows)} llama.cpp command lines in {time.time() - t0:.1f} s: " + ("all as the table says" if not fails else f"{fails} failed"))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
