#!/usr/bin/env python3
"""
cli_chat_test.py - `sift generate` in conversation mode, driven through a pseudo-terminal as a
person would drive it (Python's pty module: nothing to install).

A terminal matters here: Ctrl-C is the byte 0x03 typed at the terminal, which the line
discipline turns into SIGINT for the foreground process, exactly as at a keyboard; the
prompts and the echoed input are what a user sees. stories260K has no chat template of its
own, so --chat-template-file gives it a real one from ../shared/chat-templates (its replies
are meaningless stories, but the turns, the reverse prompt and the signals are what is
checked), with a fixed seed.

Checked:
  1. the prompt "> " appears; a user message gets a reply; a reverse prompt ("." here)
     ends the reply and the prompt comes back; /exit ends the session with the perf summary;
  2. Ctrl-C during an endless reply stops it and the prompt comes back (the session goes on:
     a second message gets a reply), Ctrl-C while waiting for input exits with the perf
     summary (status 130);
  3. Ctrl-D (EOF) at the prompt ends the session cleanly (status 0);
  4. -no-cnv with a template: plain generation, " [end of text]" when the model ends it;
  5. -f - reads the prompt from stdin;
  6. llama-cli's chat-with-bob flow (issue 29): -i -r "User:" -f FILE whose prompt ends with
     "User:" waits for input at once (it used to write the user's turn itself), then
     --in-prefix / --in-suffix frame the typed line;
  7. -st (--single-turn): one reply to -p, then exit without a prompt;
  8. llama-cli spellings: --temperature, --repeat_penalty give the same text as --temp and
     --repeat-penalty; -ngl, -fa on, --no-warmup are taken with a note each;
  9. -cnv on a model without a template says chatml is used, not "the model's";
 10. -sysf FILE gives the conversation -sys with the file's text gives;
 11. a thinking template (its generation prompt opens <think>; stories260K never closes it):
     the thinking between "[Start thinking]" and the prompt, faint on the terminal and the
     colour reset before "> "; the history keeps the answer alone (the template writes earlier
     replies into its generation prompt, which --verbose-prompt shows); plain text (no ANSI)
     when stdout is no terminal; --reasoning-format none: the reply as written, kept whole.
"""
import tempfile
import argparse
import os
import pty
import re
import select
import signal
import subprocess
import sys
import time

FAILS = 0

# A template that thinks (its generation prompt opens <think>) and writes the earlier replies
# into its generation prompt, so that --verbose-prompt shows what the history holds
THINK_TEMPLATE = (
    "{%- for m in messages %}<|{{ m.role }}|>{{ m.content }}\n{% endfor %}"
    "{%- if add_generation_prompt %}<|assistant|>[earlier:{% for m in messages %}{% if m.role == 'assistant' %}"
    " ({{ m.content }}){% endif %}{% endfor %}]<think>\n{% endif %}"
)


def check(ok, what):
    global FAILS
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        FAILS += 1


class Term:
    """sift on a pty: what it printed so far, input typed, waits for text."""

    def __init__(self, argv):
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            os.execv(argv[0], argv)
        self.out = b""
        self.status = None

    def read(self, timeout):
        end = time.time() + timeout
        while time.time() < end:
            r, _, _ = select.select([self.fd], [], [], max(0.0, end - time.time()))
            if not r:
                break
            try:
                data = os.read(self.fd, 65536)
            except OSError:  # EIO: the child closed the terminal
                return False
            if not data:
                return False
            self.out += data
            return True
        return True

    def wait_for(self, pattern, start=0, timeout=30):
        """Wait until the regex matches the output after byte start; the match's end, or -1."""
        rx = re.compile(pattern, re.S)
        end = time.time() + timeout
        while True:
            m = rx.search(self.out, start)
            if m:
                return m.end()
            if time.time() > end or not self.read(min(0.5, max(0.0, end - time.time()))):
                m = rx.search(self.out, start)
                return m.end() if m else -1

    def send(self, data):
        os.write(self.fd, data)

    def finish(self, timeout=30):
        end = time.time() + timeout
        while time.time() < end:
            pid, st = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                while self.read(0.2):
                    pass
                self.status = os.waitstatus_to_exitcode(st)
                return self.status
            self.read(0.2)
        os.kill(self.pid, signal.SIGKILL)
        os.waitpid(self.pid, 0)
        return None


def transcript(t, label):
    text = t.out.decode("utf-8", "replace").replace("\r\n", "\n")
    print(f"--- {label} (exit {t.status}) ---\n{text}\n--- end of {label} ---", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sift", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--template", required=True)
    a = ap.parse_args()
    base = [a.sift, "generate", "-m", a.model, "--chat-template-file", a.template, "--seed", "42", "-t", "1", "-c", "512"]

    # 1. turns, reverse prompt, /exit
    t = Term(base + ["-sys", "You are a storyteller.", "-r", ".", "-n", "200"])
    p = t.wait_for(rb"\n> ")
    check(p >= 0, "conversation mode waits for the user with '> '")
    t.send(b"Tell me a story about a cat\r")
    q = t.wait_for(rb"\.\r?\n> ", p)
    check(q >= 0, "a reply is generated and the reverse prompt '.' hands control back ('> ' again)")
    reply = t.out[p:q].decode("utf-8", "replace")
    check("Tell me a story" in reply and len(reply) > len("Tell me a story about a cat") + 3, "the reply follows the input")
    t.send(b"And then?\r")
    r = t.wait_for(rb"\.\r?\n> ", q)
    check(r >= 0, "a second turn, stopped by the reverse prompt too")
    t.send(b"/exit\r")
    st = t.finish()
    transcript(t, "turns")
    check(st == 0 and b"sift perf: stopped by /exit" in t.out and b"sift perf: total" in t.out,
          "/exit ends the session (exit 0) with the perf summary")

    # 2. Ctrl-C stops a reply, not the session; Ctrl-C at the prompt exits with the summary
    t = Term(base + ["--ignore-eos", "--context-shift", "-n", "-1"])
    p = t.wait_for(rb"\n> ")
    t.send(b"Once upon a time\r")
    p2 = t.wait_for(rb"Once upon a time\r?\n.{40}", p)
    check(p2 >= 0, "an endless reply is streaming")
    t.send(b"\x03")
    q = t.wait_for(rb"\n> ", p2, timeout=10)
    check(q >= 0, "Ctrl-C stops the reply and gives the prompt back")
    check(os.waitpid(t.pid, os.WNOHANG)[0] == 0, "the session is still running after one Ctrl-C")
    t.send(b"The dog\r")
    q2 = t.wait_for(rb"The dog\r?\n.{20}", q, timeout=20)
    check(q2 >= 0, "the next message gets a reply")
    t.send(b"\x03")
    q3 = t.wait_for(rb"\n> ", q2, timeout=10)
    t.send(b"\x03")
    st = t.finish()
    transcript(t, "ctrl-c")
    check(q3 >= 0 and st == 130, f"a second Ctrl-C (at the prompt) ends the session: exit {st}")
    check(re.search(rb"sift perf: stopped by interrupt \(Ctrl-C twice\).*sift perf: total", t.out, re.S) is not None,
          "  with the perf summary")

    # 3. EOF
    t = Term(base + ["-n", "16", "-p", "Hello"])
    p = t.wait_for(rb"\n> ")
    check(p >= 0, "-p is the first user message, answered before the first '> '")
    t.send(b"\x04")
    st = t.finish()
    transcript(t, "eof")
    check(st == 0 and b"stopped by end of input (EOF)" in t.out, f"Ctrl-D at the prompt ends the session: exit {st}")

    # 4. -no-cnv: plain text, [end of text] when the model ends it (stories260K rarely does by
    #    itself: a logit bias on its EOS, token 2, makes it end at once)
    out = subprocess.run(base + ["-no-cnv", "-p", "Once upon a time", "-n", "20", "-l", "2+1000"], capture_output=True, timeout=60,
                         stdin=subprocess.DEVNULL)
    check(out.returncode == 0 and out.stdout.startswith(b" Once upon a time") and out.stdout.endswith(b" [end of text]\n"),
          "-no-cnv: plain generation ending in ' [end of text]': %r" % out.stdout[-40:])

    # 5. -f -: the prompt from stdin
    out = subprocess.run(base + ["-no-cnv", "-f", "-", "-n", "0"], input=b"Once upon a time\n", capture_output=True, timeout=60)
    check(out.returncode == 0 and out.stdout == b" Once upon a time\n" and b"prompt 5 tokens" in out.stderr,
          "-f -: the prompt from stdin: %r" % out.stdout)

    # 6. chat-with-bob: the prompt ends with the reverse prompt, so the user speaks first
    plain = [a.sift, "generate", "-m", a.model, "--seed", "42", "-t", "1", "-c", "512"]
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write("Bob is a helpful assistant.\n\nUser: Hello, Bob.\nBob: Hello. How may I help you today?\nUser:\n")
        bob = f.name
    t = Term(plain + ["-i", "-r", "User:", "-f", bob, "--in-prefix", " ", "--in-suffix", "Bob:", "-n", "24"])
    p = t.wait_for(rb"help you today\?\r?\nUser: ")
    check(p >= 0, "-i -r 'User:' -f: the prompt is shown, ending with 'User:' and the --in-prefix")
    t.read(1.5)
    check(t.out[p:].strip() == b"", "  and nothing is generated before the user types (got %r)" % t.out[p:p + 60])
    t.send(b"What is a cat?\r")
    q = t.wait_for(rb"What is a cat\?\r?\nBob:", p, timeout=20)
    check(q >= 0, "  the typed line is followed by the --in-suffix 'Bob:'")
    r = t.wait_for(rb"User:", q, timeout=20)
    t.send(b"\x04")
    st = t.finish()
    transcript(t, "chat-with-bob")
    check(q >= 0 and (r >= 0 or b"stopped by" in t.out) and st == 0, f"  then the model answers and the session ends on EOF: exit {st}")
    os.unlink(bob)

    # 7. -st: one reply to -p, then exit (no '> ')
    out = subprocess.run(base + ["-st", "-p", "Hello", "-n", "8"], capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
    check(out.returncode == 0 and b"> " not in out.stdout and b"stopped by single turn (-st)" in out.stderr,
          "-st: one reply, then exit 0: %r" % out.stderr[-120:])

    # 8. llama-cli spellings and flags that change nothing here
    ref = subprocess.run(plain + ["-no-cnv", "-p", "Once upon a time", "-n", "16", "--temp", "0.7", "--repeat-penalty", "1.3"],
                         capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
    out = subprocess.run(plain + ["-no-cnv", "-p", "Once upon a time", "-n", "16", "--temperature", "0.7", "--repeat_penalty", "1.3",
                                  "-ngl", "99", "-fa", "on", "--no-warmup"], capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
    notes = [l for l in out.stderr.decode().splitlines() if "note:" in l]
    check(out.returncode == 0 and out.stdout == ref.stdout and len(ref.stdout) > 20,
          "--temperature / --repeat_penalty = --temp / --repeat-penalty: %r" % out.stdout[:60])
    check(len(notes) == 3 and all("ignored (" in l for l in notes), "-ngl 99, -fa on, --no-warmup: a note each: %r" % notes)

    # 9. the banner names the template really used
    out = subprocess.run(plain + ["-cnv", "-st", "-p", "Hi", "-n", "4"], capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
    check(out.returncode == 0 and b"chat template: chatml (the model has none)" in out.stderr,
          "-cnv on a model without a template: the banner says chatml: %r" % out.stderr[:400])

    # 10. -sysf: the system message from a file, the same conversation as -sys with its text
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write("You are a storyteller.\n")
        sysf = f.name
    one = subprocess.run(base + ["-st", "-sys", "You are a storyteller.", "-p", "Hi", "-n", "12", "--verbose-prompt"],
                         capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
    two = subprocess.run(base + ["-st", "-sysf", sysf, "-p", "Hi", "-n", "12"], capture_output=True, timeout=60,
                         stdin=subprocess.DEVNULL)
    os.unlink(sysf)
    check(one.returncode == 0 and one.stdout == two.stdout and b"You are a storyteller." in one.stdout,
          "-sysf FILE = -sys TEXT: %r" % two.stdout[:80])

    # 11. thinking shown apart, faint on a terminal, and left out of the history
    with tempfile.NamedTemporaryFile("w", suffix=".jinja", delete=False) as f:
        f.write(THINK_TEMPLATE)
        tpl = f.name
    think = [a.sift, "generate", "-m", a.model, "--chat-template-file", tpl, "--seed", "1", "-t", "1", "-c", "512", "-n", "12",
             "--verbose-prompt"]
    t = Term(think + ["-p", "Hi"])
    p = t.wait_for(rb"\n> ")
    t.send(b"Hello\r")
    q = t.wait_for(rb"\n> ", p)
    t.send(b"/exit\r")
    t.finish()
    transcript(t, "thinking")
    first = t.out[:p]
    check(p > 0 and b"\x1b[2m[Start thinking]\r\n" in first and first.rstrip(b"\r\n> ").endswith(b"\x1b[0m"),
          "the thinking after a faint [Start thinking], the colour reset before the prompt")
    check(q > 0 and b"[earlier: ()]<think>" in t.out[p:q], "the next turn's prompt has the earlier reply without its thinking")
    plain = subprocess.run(think + ["-p", "Hi"], input=b"Hello\n", capture_output=True, timeout=60)
    none = subprocess.run(think + ["-p", "Hi", "--reasoning-format", "none"], input=b"Hello\n", capture_output=True, timeout=60)
    os.unlink(tpl)
    m = re.search(rb"\[Start thinking\]\n(.*?)\n> ", plain.stdout, re.S)
    check(plain.returncode == 0 and m is not None and b"\x1b[" not in plain.stdout, "stdout no terminal: the frame, no ANSI: %r" % plain.stdout[:200])
    said = re.search(rb"<think>\n(.*?)\n> ", none.stdout, re.S)
    check(none.returncode == 0 and b"[Start thinking]" not in none.stdout and said is not None and
          b"[earlier: (" + said.group(1) + b")]" in none.stderr,
          "--reasoning-format none: the reply as written, and whole in the next turn's prompt: %r" % none.stderr[-300:])

    print("cli_chat: %s" % ("all passed" if FAILS == 0 else f"{FAILS} failed"))
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
