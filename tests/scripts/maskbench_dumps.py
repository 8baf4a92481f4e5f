#!/usr/bin/env python3
"""Check `sift bench --maskbench DIR --dump-instances` against Python's own
json.dumps(data, indent=None, ensure_ascii=False), the instance text MaskBench tokenizes.
usage: maskbench_dumps.py SIFT DIR [every]"""
import json, os, subprocess, sys

sift, d = sys.argv[1], sys.argv[2]
every = int(sys.argv[3]) if len(sys.argv) > 3 else 1
names = sorted(n for n in os.listdir(d) if n.endswith(".json"))[::every]
out = subprocess.run([sift, "bench", "--maskbench", d, "--every", str(every), "--dump-instances"],
                     capture_output=True, check=True).stdout.decode("utf-8", "surrogateescape").split("\n")
k = bad = n = 0
for name in names:
    with open(os.path.join(d, name), encoding="utf-8") as f:
        tests = json.load(f)["tests"]
    for t in tests:
        want = json.dumps(t["data"], indent=None, ensure_ascii=False)
        got = out[k]
        k += 1
        n += 1
        if "\n" in want:  # a raw newline cannot appear (escaped), but be safe
            continue
        try:
            want.encode("utf-8")
        except UnicodeEncodeError:
            want = "<not encodable>"
        if got != want:
            bad += 1
            if bad <= 5:
                print(f"{name}: want {want[:200]!r}\n{' ' * len(name)}   got {got[:200]!r}")
print(f"{n} instances, {bad} differ")
sys.exit(1 if bad else 0)
