#!/usr/bin/env python3
"""Run llama.cpp's server test suite (../shared/llama-server-tests) against `sift serve`.

usage: run.py --sift build/sift [--suite DIR] [--min-pass PCT] [--slow] [-k EXPR] [FILES...]

Copies the suite to a scratch directory (it is never copied into this repository), runs
/usr/bin/python3 -m pytest there with the sift_adapter plugin (see sift_adapter.py: local
models, skips for models we lack), and prints one line per test file and the total: passed,
failed, skipped. The share is passed / (passed + failed): a skipped test needs a model or a
Python package we do not have. Exit status 1 when that share is under --min-pass (default 0:
report only), or when pytest could not run at all.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sift", required=True)
    ap.add_argument("--suite", default=os.path.join(HERE, "..", "..", "..", "shared", "llama-server-tests"))
    ap.add_argument("--min-pass", type=float, default=0.0)
    ap.add_argument("--slow", action="store_true", help="also the tests upstream marks slow (SLOW_TESTS=1)")
    ap.add_argument("-k", default=None)
    ap.add_argument("--failures", action="store_true", help="print each failure's message")
    ap.add_argument("files", nargs="*", help="unit/test_x.py files (default: all)")
    a = ap.parse_args()
    if not os.path.isdir(a.suite):
        print(f"llama-server suite: {a.suite} not found", file=sys.stderr)
        return 1
    scratch = tempfile.mkdtemp(prefix="sift-llama-server-suite-")
    try:
        shutil.copytree(a.suite, os.path.join(scratch, "suite"))
        tests = os.path.join(scratch, "suite", "tools", "server", "tests")
        os.makedirs(os.path.join(tests, "tmp"), exist_ok=True)
        env = dict(os.environ, SIFT_BIN=os.path.abspath(a.sift), PYTHONPATH=HERE + os.pathsep + tests,
                   SIFT_SHARED_MODELS=os.path.abspath(os.path.join(a.suite, "..", "models")))
        env.pop("PYTHONHOME", None)
        if a.slow:
            env["SLOW_TESTS"] = "1"
        xml = os.path.join(scratch, "results.xml")
        cmd = ["/usr/bin/python3", "-m", "pytest", "-p", "sift_adapter", "-q", "-rN", "--no-header", "-p", "no:cacheprovider",
               f"--junitxml={xml}", "-o", "junit_family=xunit1"]
        if a.k:
            cmd += ["-k", a.k]
        cmd += a.files or ["unit"]
        r = subprocess.run(cmd, cwd=tests, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if not os.path.exists(xml):
            print(r.stdout[-4000:])
            print("llama-server suite: pytest did not run", file=sys.stderr)
            return 1
        per_file, failures = {}, []
        for tc in ET.parse(xml).getroot().iter("testcase"):
            f = tc.get("file") or tc.get("classname", "?").replace(".", "/") + ".py"
            st = per_file.setdefault(f, [0, 0, 0])
            if tc.find("skipped") is not None:
                st[2] += 1
            elif tc.find("failure") is not None or tc.find("error") is not None:
                st[1] += 1
                el = tc.find("failure") if tc.find("failure") is not None else tc.find("error")
                failures.append((f, tc.get("name"), (el.get("message") or "").splitlines()[0][:200] if el.get("message") else ""))
            else:
                st[0] += 1
        tp = tf = ts = 0
        for f in sorted(per_file):
            p, fl, s = per_file[f]
            tp, tf, ts = tp + p, tf + fl, ts + s
            print(f"{f:45s} passed {p:3d}  failed {fl:3d}  skipped {s:3d}")
        share = 100.0 * tp / (tp + tf) if tp + tf else 0.0
        print(f"llama-server suite: {tp} passed, {tf} failed, {ts} skipped (a model or package we lack): "
              f"{share:.1f}% of the tests that ran pass (minimum {a.min_pass:.0f}%)")
        if a.failures:
            for f, n, m in failures:
                print(f"FAIL {f}::{n}: {m}")
        return 0 if share >= a.min_pass else 1
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
