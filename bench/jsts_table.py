#!/usr/bin/env python3
"""jsts_table.py - the JSON-Schema-Test-Suite table (../shared/jsonschema-suite/README.md).

Runs `sift bench --maskbench` over each suite folder of the converted suite (one MaskBench
file per test group) with --out, and prints per suite: groups, passing, compile errors,
groups with a valid instance rejected, groups with an invalid instance accepted (every token
allowed and the grammar not forcing a continuation: MaskBench's reference runner counts an invalid text after which the end of text is
masked as rejected, "we forced EOS") and the same judged as whole texts (the grammar must be able
to end after the last token); then the mean pass fraction over the keyword files of
draft2020-12 (JSONSchemaBench's figure), and per optional format the invalid instances
accepted. Exit status 1 when any invalid instance is accepted either way (any suite), or the
mean pass fraction is below --min-mean. Invalid instances accepted only as a forced prefix
(`1.1` under exclusiveMinimum 1.1, a prefix of the valid `1.11`; only top-level numbers are not
self-delimiting) are listed in their own column: generation can never stop there. The ctest `jsts_suite` runs it.

  python3 bench/jsts_table.py [--sift build/sift] [--jsts build/jsts/jsts] [--tar JSTS.tar.xz]
                              [--jobs 2] [--keep DIR] [--min-mean F] [--verbose]
"""
import argparse, collections, json, os, subprocess, sys, tempfile

SUITES = ["draft2020-12", "draft7", "draft2020-12-extra", "draft7-extra"]


def run(sift, folder, out, jobs):
    # the suite's schemas carry no $schema: the validator is told the draft, so is sift
    draft = ["--draft7"] if "draft7" in os.path.basename(folder) else []
    subprocess.run([sift, "bench", "--maskbench", folder, "--jobs", str(jobs), "--timeout", "60", "--out", out, "--json"] + draft,
                   stdout=subprocess.DEVNULL, check=False)
    res = {}
    for name in os.listdir(out):
        with open(os.path.join(out, name)) as f:
            res[name] = json.load(f)
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sift", default="build/sift")
    ap.add_argument("--jsts", default="build/jsts/jsts")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--keep", help="keep the per-group results here")
    ap.add_argument("--verbose", action="store_true", help="list the groups with an invalid instance accepted")
    ap.add_argument("--tar", help="extract this jsts.tar.xz into the parent of --jsts first (when --jsts is missing)")
    ap.add_argument("--min-mean", type=float, default=0.0, help="fail below this mean pass fraction (draft2020-12)")
    a = ap.parse_args()
    if a.tar and not os.path.isdir(a.jsts):
        parent = os.path.dirname(os.path.normpath(a.jsts))
        os.makedirs(parent, exist_ok=True)
        subprocess.run(["tar", "-xJf", a.tar, "-C", parent], check=True)
    tmp = a.keep or tempfile.mkdtemp(prefix="jsts-")
    bad = 0
    print("| suite | groups | passing | compile errors | valid rejected | invalid accepted (tokens) | invalid accepted (whole) | valid only as prefix | invalid only as forced prefix |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    per_kw = {}
    formats = collections.Counter()
    for suite in SUITES:
        folder = os.path.join(a.jsts, suite)
        if not os.path.isdir(folder):
            continue
        out = os.path.join(tmp, suite)
        os.makedirs(out, exist_ok=True)
        res = run(a.sift, folder, out, a.jobs)
        c = collections.Counter(r["result"] for r in res.values())
        inv_whole = sum(r.get("result_whole") == "invalidation_error" for r in res.values())
        pv = sum(r.get("prefix_only_valid", 0) for r in res.values())
        pi = sum(r.get("prefix_only_invalid", 0) for r in res.values())
        print(f"| {suite} | {len(res)} | {c['passing']} | {c['compile_error']} | {c['validation_error']} | "
              f"{c['invalidation_error']} | {inv_whole} | {pv} | {pi} |")
        bad += inv_whole + c['invalidation_error']
        if a.verbose:
            for n, r in sorted(res.items()):
                if "invalidation_error" in (r["result"], r.get("result_whole")):
                    print(f"    {suite}/{n}: {r['result']} / {r.get('result_whole')}: {r['message'][:150]}")
        for n, r in res.items():
            kw = n.split("__")[0]
            if suite == "draft2020-12":
                per_kw.setdefault(kw, []).append(r["result"] == "passing")
            if kw.startswith("optional.format.") and r["result"] == "invalidation_error":
                formats[f"{suite}: {kw[16:]}"] += 1
    if per_kw:
        fr = {k: sum(v) / len(v) for k, v in per_kw.items()}
        mean = sum(fr.values()) / len(fr)
        print(f"\ndraft2020-12: mean pass fraction over its {len(fr)} keyword files: {mean:.3f}")
        if mean < a.min_mean:
            print(f"below --min-mean {a.min_mean}")
            bad += 1
    if formats:
        print("optional format groups with an invalid instance accepted: " + ", ".join(f"{k} {v}" for k, v in sorted(formats.items())))
    else:
        print("optional format groups with an invalid instance accepted: none")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
