#!/usr/bin/env python3
"""Fuzzes kernel groups: random edits of groups, levels and tiles.

    QIR_BIN=build/asan/bin python3 test/robustness/fuzz-welder.py [--cases N] [--seed S] [--keep DIR]

Seeds are the lit modules of test/lit/welder after `qopt -canonicalize -roller
-welder`.  Each case edits one welded module at random (a #fuse level changed
or removed, an inner op deleted, moved out of its group or swapped with its
neighbour, a number of a #tile changed, an operand or region argument dropped,
a type changed, a group renamed) and then:
  - qopt must exit 0, or 1 with a located `FILE:LINE:COL: error:` message;
    never a crash, a sanitizer report or a hang;
  - when the edit verifies, the C back end (qcodegen -c -main, cc -O0) must
    exit cleanly or reject the module with a located error, and when it runs,
    its outputs must equal qrun's on the same edited module (the oracle).
Ends with `N passed, N failed, N skipped`; exit 1 on any failure."""
import argparse
import glob
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.abspath(os.environ.get("QIR_BIN", os.path.join(TOP, "build", "bin")))
LOC_ERR = re.compile(r":\d+:\d+: error: ")


def run(cmd, timeout=60, **kw):
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout, **kw)
        return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")
    except subprocess.TimeoutExpired:
        return 124, "", "timed out"


def kernel_spans(lines):
    """(start, end) line indices of each kernel op: the header line and its closing brace."""
    spans, start = [], None
    for i, ln in enumerate(lines):
        if re.match(r"^  %\S+(, %\S+)* = kernel @", ln):
            start = i
        elif start is not None and ln == "  }":
            spans.append((start, i))
            start = None
    return spans


def mutate(text, rng):
    lines = text.split("\n")
    spans = kernel_spans(lines)
    if not spans:
        return None, "no group"
    s, e = rng.choice(spans)
    inner = list(range(s + 1, e - 1))          # ops before the yield
    kind = rng.choice(["level", "level", "delete", "move-out", "swap", "tile", "tile", "operand", "type", "name"])
    if kind == "level" and inner:
        i = rng.choice(inner)
        new = rng.choice(["#fuse=smem", "#fuse=global", "#fuse=reg", "", "#fuse=[reg]", "#fuse{a = reg}", "#fuse=7"])
        if "#fuse=reg" in lines[i]:
            lines[i] = lines[i].replace("#fuse=reg", new, 1)
        else:
            lines[i] = re.sub(r"( : [a-z0-9]+\[)", " " + (new or "#fuse=reg") + r"\1", lines[i], count=1)
    elif kind == "delete" and inner:
        del lines[rng.choice(inner)]
    elif kind == "move-out" and inner:
        i = rng.choice(inner)
        ln = lines.pop(i)
        lines.insert(s, ln[2:])
    elif kind == "swap" and len(inner) >= 2:
        i = rng.choice(inner[:-1])
        lines[i], lines[i + 1] = lines[i + 1], lines[i]
    elif kind == "tile":
        idx = [i for i in range(s, e) if "#tile{" in lines[i]]
        if not idx:
            return None, "no tile"
        i = rng.choice(idx)
        nums = list(re.finditer(r"(?<=[\[ ,=])(\d+)(?=[\],}])", lines[i]))
        if not nums:
            return None, "no number"
        m = rng.choice(nums)
        val = str(rng.choice([0, 1, 2, 3, 7, 64, 1000, 1 << 20, 1 << 40]))
        lines[i] = lines[i][:m.start()] + val + lines[i][m.end():]
    elif kind == "operand":
        head = lines[s]
        m = re.search(r"kernel @\S+ ((%[^ ,]+, )*%[^ ,#:]+)", head)
        if not m:
            return None, "no operands"
        ops = m.group(1).split(", ")
        ops.pop(rng.randrange(len(ops)))
        lines[s] = head[:m.start(1)] + ", ".join(ops) + head[m.end(1):]
    elif kind == "type":
        i = rng.choice([s] + inner)
        ts = list(re.finditer(r"f32\[([0-9,]*)\]", lines[i]))
        if not ts:
            return None, "no type"
        m = rng.choice(ts)
        dims = m.group(1).split(",") if m.group(1) else []
        if dims:
            k = rng.randrange(len(dims))
            dims[k] = str(int(dims[k]) + rng.choice([-1, 1, 3]))
        lines[i] = lines[i][:m.start()] + "f32[" + ",".join(dims) + "]" + lines[i][m.end():]
    elif kind == "name":
        lines[s] = re.sub(r"kernel @\S+", rng.choice(["kernel @x", "kernel", "kernel @0", "kernel @a.b$c"]), lines[s], count=1)
    else:
        return None, "not applicable"
    return "\n".join(lines), kind


def outputs_of(text):
    return re.findall(r'^  output %\S+ \{name = "([A-Za-z0-9_]+)"\}', text, re.M)


def check_case(text, wd, cc):
    src = os.path.join(wd, "m.qir")
    with open(src, "w") as f:
        f.write(text)
    rc, out, err = run([os.path.join(BIN, "qopt"), src, "-o", os.path.join(wd, "v.qir")])
    if rc not in (0, 1) or "Sanitizer" in err or "runtime error" in err:
        return "fail", "qopt rc=%d: %s" % (rc, err.strip()[-300:])
    if rc == 1:
        return ("pass", "rejected") if LOC_ERR.search(err) else ("fail", "unlocated error: " + err.strip()[:200])
    names = outputs_of(text)
    if not names:
        return "skip", "no named outputs"
    rc, out, err = run([os.path.join(BIN, "qcodegen"), "-c", "-main", src, "-o", os.path.join(wd, "p.c")])
    if rc not in (0, 1) or "Sanitizer" in err or "runtime error" in err:
        return "fail", "qcodegen rc=%d: %s" % (rc, err.strip()[-300:])
    if rc == 1:
        return ("pass", "qcodegen rejected") if LOC_ERR.search(err) else ("fail", "qcodegen unlocated: " + err.strip()[:200])
    rc, out, err = run([cc, "-O0", "-o", os.path.join(wd, "p"), os.path.join(wd, "p.c"), "-lm"], timeout=120)
    if rc != 0:
        return "fail", "cc: " + err.strip()[:300]
    ind = os.path.join(wd, "in")
    shutil.rmtree(ind, ignore_errors=True)
    os.makedirs(ind)
    rc, out, err = run([os.path.join(BIN, "qrun"), src, "--save-inputs", ind, "--print-limit", "1"])
    if rc != 0:
        return "skip", "qrun cannot run it: " + (err.strip().splitlines() or [""])[0]
    ins = []
    for f in sorted(os.listdir(ind)):
        ins += ["--in", "%s=%s" % (f[:-4], os.path.join(ind, f))]
    outs, expects = [], []
    for n in names:
        outs += ["--out", "%s=%s" % (n, os.path.join(wd, n + ".npy"))]
        expects += ["--expect", "%s=%s" % (n, os.path.join(wd, n + ".npy"))]
    rc, out, err = run([os.path.join(wd, "p")] + ins + outs)
    if rc != 0:
        return "fail", "program rc=%d: %s" % (rc, (out + err).strip()[-300:])
    rc, out, err = run([os.path.join(BIN, "qrun"), src, "--atol", "1e-4"] + ins + expects)
    if rc != 0:
        return "fail", "C back end differs from qrun: " + (out + err).strip()[-300:]
    return "pass", "runs"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", type=int, default=150)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--keep", default=os.path.join(TOP, "build", "fuzz-welder-failures"))
    args = ap.parse_args()
    rng = random.Random(args.seed)
    cc = os.environ.get("CC", "cc")
    seeds = []
    for f in sorted(glob.glob(os.path.join(TOP, "test", "lit", "welder", "*.qir"))):
        if os.path.basename(f).startswith("err-"):
            continue
        rc, out, err = run([os.path.join(BIN, "qopt"), "-canonicalize", "-roller", "-welder", f])
        if rc == 0 and "kernel @" in out:
            seeds.append(out)
    counts = {"pass": 0, "fail": 0, "skip": 0}
    kinds = {}
    with tempfile.TemporaryDirectory() as tmp:
        for case in range(args.cases):
            text, kind = mutate(rng.choice(seeds), rng)
            if text is None:
                counts["skip"] += 1
                continue
            wd = os.path.join(tmp, str(case))
            os.makedirs(wd)
            res, msg = check_case(text, wd, cc)
            counts[res] += 1
            kinds[(kind, msg if res == "pass" else res)] = kinds.get((kind, msg if res == "pass" else res), 0) + 1
            if res == "fail":
                os.makedirs(args.keep, exist_ok=True)
                keep = os.path.join(args.keep, "case%d.qir" % case)
                shutil.copy(os.path.join(wd, "m.qir"), keep)
                print("FAIL: case %d (%s): %s [kept %s]" % (case, kind, msg, keep))
            shutil.rmtree(wd, ignore_errors=True)
    for (kind, what), n in sorted(kinds.items()):
        print("  %-9s %-18s %d" % (kind, what, n))
    print("%d passed, %d failed, %d skipped" % (counts["pass"], counts["fail"], counts["skip"]))
    return 1 if counts["fail"] else 0


if __name__ == "__main__":
    sys.exit(main())
