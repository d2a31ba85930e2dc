#!/usr/bin/env python3
"""Adversarial inputs for every qir tool (run through test/robustness/mutate.sh).

Takes well-formed inputs (the lit .qir files, ONNX node models from
$ONNX_TESTS, tensors qrun writes), damages them (truncation, random and
non-UTF-8 bytes, duplicated / dropped / swapped lines, unbalanced brackets,
huge numbers, wrong element types, undefined or renamed values, swapped op
names, bad .npy headers, corrupt protobuf, absurd ONNX dims, ...) and runs each
tool on the result under a time limit.  A case fails when a tool
  - exits with anything but 0 or 1 (crash, abort, signal),
  - prints a sanitizer report (ASan, UBSan, LeakSanitizer),
  - runs past the time limit (a hang),
  - fails on a .qir without a located `FILE:LINE:COL: error:` line followed by
    the source line and a caret,
  - fails on an .onnx / .npy / .pb without a one-line `...: error: ...` message
    that names the file,
  - or succeeds with output the next tool rejects (qopt output must parse and
    verify again; onnx2qir output must pass qopt).
The seed and case count are fixed, so a run is reproducible; failing inputs are
kept under --keep for a lit test.  Last line: `N passed, N failed, N skipped`.
"""
import argparse
import concurrent.futures
import glob
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))

SAN_RE = re.compile(rb"(AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer|runtime error:|"
                    rb"Segmentation fault|stack-overflow|SUMMARY: )")
DTYPES = ["f64", "f32", "f16", "bf16", "i64", "i32", "i16", "i8", "u64", "u32", "u16", "u8", "bool",
          "f8e4m3fn", "f8e4m3fnuz", "f8e5m2", "f8e5m2fnuz", "f8e8m0", "f4e2m1", "i4", "u4", "i2", "u2"]
HUGE = ["99999999999999999999999", "9223372036854775807", "9223372036854775808", "2147483648",
        "4294967296", "-1", "0", "-9223372036854775808", "1e308", "1e999", "-0", "65536",
        "100000000", "3000000000", "18446744073709551615"]
JUNK_BYTES = [b"\xff", b"\xc3", b"\xc3\x28", b"\xed\xa0\x80", b"\x00", b"\x80\x80", b"\xf0\x9f\x98",
              b"\x1b[31m", b"\t", b"\r", b"\r\n", b"\xef\xbb\xbf", b"\xfe\xff"]
PUNCT = [b"{", b"}", b"[", b"]", b"(", b")", b"<", b">", b",", b":", b"=", b"%", b"@", b"#", b"\"",
         b"//", b"-", b".", b"e", b"%x", b"@0", b"#tile", b"dense<", b"yield", b"else", b"reduce",
         b"\\", b"'", b";", b"$"]


# ------------------------------------------------------------------ mutators
def m_truncate(rng, b, ctx):
    return b[:rng.randrange(0, max(1, len(b)))]


def m_delete_span(rng, b, ctx):
    if len(b) < 2:
        return b
    i = rng.randrange(len(b))
    return b[:i] + b[i + rng.randint(1, 16):]


def m_insert_junk(rng, b, ctx):
    i = rng.randrange(len(b) + 1)
    return b[:i] + rng.choice(JUNK_BYTES) + b[i:]


def m_insert_random(rng, b, ctx):
    i = rng.randrange(len(b) + 1)
    return b[:i] + bytes(rng.randrange(256) for _ in range(rng.randint(1, 8))) + b[i:]


def m_insert_punct(rng, b, ctx):
    i = rng.randrange(len(b) + 1)
    return b[:i] + rng.choice(PUNCT) + b[i:]


def m_flip(rng, b, ctx):
    if not b:
        return b
    i = rng.randrange(len(b))
    return b[:i] + bytes([b[i] ^ (1 << rng.randrange(8))]) + b[i + 1:]


def _lines(b):
    return b.split(b"\n")


def m_dup_line(rng, b, ctx):
    ls = _lines(b)
    i = rng.randrange(len(ls))
    ls.insert(rng.randrange(len(ls) + 1), ls[i])
    return b"\n".join(ls)


def m_drop_line(rng, b, ctx):
    ls = _lines(b)
    del ls[rng.randrange(len(ls))]
    return b"\n".join(ls)


def m_swap_lines(rng, b, ctx):
    ls = _lines(b)
    i, j = rng.randrange(len(ls)), rng.randrange(len(ls))
    ls[i], ls[j] = ls[j], ls[i]
    return b"\n".join(ls)


def m_splice_line(rng, b, ctx):
    other = _lines(rng.choice(ctx["corpus"]))
    ls = _lines(b)
    ls.insert(rng.randrange(len(ls) + 1), rng.choice(other))
    return b"\n".join(ls)


def _sub_match(rng, b, pattern, repl_fn):
    ms = list(re.finditer(pattern, b))
    if not ms:
        return None
    m = rng.choice(ms)
    return b[:m.start()] + repl_fn(m) + b[m.end():]


def m_huge_number(rng, b, ctx):
    return _sub_match(rng, b, rb"(?<![%@\w.])\d+(\.\d+)?", lambda m: rng.choice(HUGE).encode())


def m_dim(rng, b, ctx):  # a dimension inside a type's brackets
    return _sub_match(rng, b, rb"(?<=[\[,])\d+(?=[\],])", lambda m: rng.choice(HUGE + ["1", "2", "7"]).encode())


def m_dtype(rng, b, ctx):
    return _sub_match(rng, b, rb"\b(" + b"|".join(d.encode() for d in DTYPES) + rb")\[",
                      lambda m: rng.choice(DTYPES).encode() + b"[")


def m_rank(rng, b, ctx):  # add or drop a dimension
    def repl(m):
        dims = m.group(1).split(b",") if m.group(1) else []
        if dims and rng.random() < 0.5:
            del dims[rng.randrange(len(dims))]
        else:
            dims.insert(rng.randrange(len(dims) + 1), rng.choice([b"1", b"3", b"0"]))
        return b"[" + b",".join(dims) + b"]"
    return _sub_match(rng, b, rb"(?<=[a-z0-9])\[([0-9,]*)\]", repl)


def m_value(rng, b, ctx):  # use another value, an undefined one, or one defined later
    names = re.findall(rb"%[A-Za-z0-9_.$]+", b)
    if not names:
        return None
    pool = names + [b"%undefined", b"%0", b"%" + b"9" * 30]
    return _sub_match(rng, b, rb"%[A-Za-z0-9_.$]+", lambda m: rng.choice(pool))


def m_opname(rng, b, ctx):
    ops = ctx["opnames"]
    return _sub_match(rng, b, rb"(?<== )[a-z_][a-z0-9_]*", lambda m: rng.choice(ops).encode())


def m_bracket(rng, b, ctx):  # drop one bracket so the file is unbalanced
    return _sub_match(rng, b, rb"[{}\[\]()<>]", lambda m: b"")


def m_attr_value(rng, b, ctx):
    vals = [b"[]", b"[1, 2, 3, 4, 5, 6, 7, 8, 9]", b"\"s\"", b"word", b"1.5", b"-1", b"{}", b"[[1]]",
            b"99999999999999999999", b"nan", b"-inf", b"[1.5, x]", b"{a = 1}"]
    return _sub_match(rng, b, rb"(?<== )(-?\d+|\[[^\]\n]*\]|\"[^\"\n]*\"|[a-z_]+)(?=[,}])",
                      lambda m: rng.choice(vals))


def m_repeat(rng, b, ctx):  # very long line / deep nesting
    tok = rng.choice([b"(", b"[", b"{", b"-", b"!", b"%a, ", b"1, "])
    i = rng.randrange(len(b) + 1)
    return b[:i] + tok * rng.choice([100, 1000, 20000]) + b[i:]


TEXT_MUTATORS = [m_truncate, m_delete_span, m_insert_junk, m_insert_random, m_insert_punct, m_flip,
                 m_dup_line, m_drop_line, m_swap_lines, m_splice_line, m_huge_number, m_dim, m_dtype,
                 m_rank, m_value, m_opname, m_bracket, m_attr_value, m_repeat]
BIN_MUTATORS = [m_truncate, m_truncate, m_delete_span, m_insert_random, m_flip, m_flip, m_flip]


def mutate(rng, data, mutators, ctx, rounds):
    names = []
    for _ in range(rounds):
        for _ in range(10):
            fn = rng.choice(mutators)
            out = fn(rng, data, ctx)
            if out is not None and out != data:
                data = out
                names.append(fn.__name__[2:])
                break
    return data, "+".join(names)


# Mutations meant to keep a module valid once the declared result types are
# repaired from the verifier's messages: these reach the passes, the
# interpreter and the code generators instead of stopping in the parser.
def m_input_dim(rng, b, ctx):
    ls = _lines(b)
    idx = [i for i, l in enumerate(ls) if re.search(rb"= input : ", l)]
    if not idx:
        return None
    i = rng.choice(idx)
    l2 = _sub_match(rng, ls[i], rb"(?<=[\[,])\d+(?=[\],])", lambda m: rng.choice(
        [b"0", b"1", b"2", b"3", b"5", b"17", b"64", b"1000", b"65536", b"2147483648", b"4611686018427387904"]))
    if l2 is None:
        return None
    ls[i] = l2
    return b"\n".join(ls)


def m_input_dtype(rng, b, ctx):
    ls = _lines(b)
    idx = [i for i, l in enumerate(ls) if re.search(rb"= input : ", l)]
    if not idx:
        return None
    i = rng.choice(idx)
    l2 = m_dtype(rng, ls[i], ctx)
    if l2 is None:
        return None
    ls[i] = l2
    return b"\n".join(ls)


def m_attr_int(rng, b, ctx):  # an integer inside an attribute dict or list
    return _sub_match(rng, b, rb"(?<=[=\[,] )-?\d+(?=[,\]}])|(?<=\[)-?\d+(?=[,\]])", lambda m: rng.choice(
        [b"0", b"-1", b"-2", b"1", b"2", b"3", b"7", b"100", b"-100", b"65536", b"2147483647",
         b"9223372036854775807", b"-9223372036854775808"]))


EXTREMES = [b"-9223372036854775808", b"9223372036854775807", b"4611686018427387904", b"2147483648",
            b"-2147483649", b"-1", b"0", b"-3"]


def attr_int_sites(b):
    """Offsets (start, end) of every integer inside an op's attribute dict."""
    sites = []
    for lm in re.finditer(rb"[^\n]*\n?", b):
        line = lm.group(0)
        brace = line.find(b"{")
        if brace < 0:
            continue
        for m in re.finditer(rb"(?<=[=\[,:] )-?\d+(?=[,\]}])|(?<=\[)-?\d+(?=[,\]])", line):
            if m.start() > brace:
                sites.append((lm.start() + m.start(), lm.start() + m.end()))
    return sites


SEMANTIC_MUTATORS = [m_input_dim, m_input_dim, m_input_dtype, m_attr_int, m_attr_int, m_attr_value]
DECLARED_RE = re.compile(rb"^(.*?):(\d+):\d+: error: .*?is declared (\S+) but the op computes (\S+)$", re.M)


def repair(runner, work, tag, data, rounds=12):
    """Rewrites declared result types to what the verifier computes.  Returns
    (module or None if it still does not verify, failure of a qopt run or None)."""
    path = os.path.join(work, "r%s.qir" % tag)
    for _ in range(rounds):
        with open(path, "wb") as f:
            f.write(data)
        rc, out, err, _ = runner.run(["qopt", path], cwd=work)
        why = check_common(rc, err) or (located_error_ok(err, path) if rc == 1 else None)
        if why:
            return None, "qopt (repairing): " + why
        if rc == 0:
            return data, None
        m = DECLARED_RE.search(err)
        if not m:
            return None, None
        line, old, new = int(m.group(2)), m.group(3), m.group(4)
        ls = _lines(data)
        head, sep, tail = ls[line - 1].rpartition(b" : ")
        if old not in tail:
            return None, None
        ls[line - 1] = head + sep + tail.replace(old, new, 1)
        data = b"\n".join(ls)
    return None, None


# ------------------------------------------------------------------ checks
def located_error_ok(stderr, path):
    """First error line is PATH:LINE:COL: error: ..., then the source line and a caret."""
    lines = stderr.decode("utf-8", "replace").split("\n")
    for i, line in enumerate(lines):
        if " error: " in line or line.startswith("error:"):
            if not re.match(re.escape(path) + r":\d+:\d+: error: \S", line):
                return "error without FILE:LINE:COL: " + line[:200]
            if i + 2 >= len(lines) or not re.match(r"^[ \t]*\^$", lines[i + 2]):
                return "error without source line and caret: " + line[:200]
            return None
    return "exit 1 without an error message"


def named_error_ok(stderr, path):
    """A one-line `...NAME...: error: ...` message naming the file."""
    text = stderr.decode("utf-8", "replace")
    for line in text.split("\n"):
        if " error: " in line:
            if os.path.basename(path) not in line:
                return "error does not name the file: " + line[:200]
            return None
    return "exit 1 without an error message"


class Runner:
    def __init__(self, bindir, timeout, keep):
        self.bindir, self.timeout, self.keep = bindir, timeout, keep
        self.env = dict(os.environ)
        self.env["ASAN_OPTIONS"] = "detect_leaks=1:abort_on_error=0:exitcode=66"
        self.env["UBSAN_OPTIONS"] = "halt_on_error=1:print_stacktrace=1:exitcode=67"

    def run(self, argv, stdin=None, cwd=None):
        argv = [os.path.join(self.bindir, argv[0])] + argv[1:]
        t0 = time.time()
        try:
            p = subprocess.run(argv, input=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               env=self.env, timeout=self.timeout, cwd=cwd)
            return p.returncode, p.stdout, p.stderr, time.time() - t0
        except subprocess.TimeoutExpired as e:
            return None, e.stdout or b"", e.stderr or b"", time.time() - t0


def check_common(rc, err):
    if rc is None:
        return "timeout (hang?)"
    if SAN_RE.search(err):
        m = SAN_RE.search(err)
        text = err.decode("utf-8", "replace")
        line = next((l for l in text.split("\n") if m.group(0).decode() in l), "")
        return "sanitizer: " + line.strip()[:240]
    if rc not in (0, 1):
        return "exit status %d" % rc
    return None


QIR_TOOLS = [
    ["qopt"], ["qopt", "-canonicalize"], ["qopt", "-lower"], ["qopt", "-roller"],
    ["qopt", "-canonicalize", "-lower", "-roller", "-verify-each"],
    ["qrun", "--print-limit", "4"], ["qcodegen", "-c"], ["qcodegen", "-cuda"], ["qcodegen", "-hip", "-main"],
    ["qviz", "-graph"], ["qviz", "-tiles"], ["qviz", "-veu"],
]


def work_estimate(data):
    """(largest tensor, largest compute iteration space) the text declares, in elements."""
    tensor = space = 1
    for m in re.finditer(rb"[a-z0-9]\[([0-9, ]+)\]", data):
        n = 1
        for d in m.group(1).split(b","):
            n *= int(d) if d.strip() else 1
        tensor = max(tensor, n)
    for line in data.split(b"\n"):
        if b"compute" in line:
            n = 1
            for m in re.finditer(rb"\w+:\s*(\d+)", line):
                n *= int(m.group(1))
            space = max(space, n)
    return tensor, space


HEAVY = 1 << 24     # more work than this takes qrun too long to wait for...
ABSURD = 1 << 36    # ...unless a tensor is so large qrun must refuse it at once


def too_slow_for_qrun(data):
    tensor, space = work_estimate(data)
    return tensor < ABSURD and max(tensor, space) > HEAVY


def qir_case(runner, work, case_id, data, tool):
    path = os.path.join(work, "c%05d.qir" % case_id)
    with open(path, "wb") as f:
        f.write(data)
    if tool[0] == "qrun" and too_slow_for_qrun(data):
        return "SKIP", 0.0, None  # a legitimately huge computation: slow, not hung
    rc, out, err, dt = runner.run(tool + [path], cwd=work)
    why = check_common(rc, err)
    if why is None and rc == 1:
        why = located_error_ok(err, path)
    if why is None and rc == 0 and tool[0] == "qopt":
        # whatever qopt accepts and prints must parse and verify again
        rc2, out2, err2, _ = runner.run(["qopt", "-"], stdin=out, cwd=work)
        why = check_common(rc2, err2)
        if why is None and rc2 != 0:
            why = "qopt output rejected by qopt: " + err2.decode("utf-8", "replace").split("\n")[0][:200]
        elif why is None and out2 != out:
            why = "qopt output is not a fixed point of parse+print"
    return why, dt, rc


def semantic_case(runner, work, case_id, data, tool):
    fixed, why = repair(runner, work, "%05d" % case_id, data)
    if why or fixed is None:
        return why, 0.0, 1 if fixed is None else 0
    return qir_case(runner, work, case_id, fixed, tool)


def extreme_case(runner, work, case_id, data, tool):
    why, dt, rc = qir_case(runner, work, case_id, data, ["qopt"])
    if why or rc != 0 or tool == ["qopt"]:
        return why, dt, rc
    return qir_case(runner, work, case_id, data, tool)


def onnx_error_ok(stderr, path):
    """One line per problem, each naming the model; a node's also names its op
    type and opset: `M.onnx: error: node 'n' (Conv, opset 13): ...`."""
    why = named_error_ok(stderr, path)
    if why:
        return why
    for line in stderr.decode("utf-8", "replace").split("\n"):
        if not line:
            continue
        if not line.startswith(path + ": "):
            return "message line does not start with the model's name: " + line[:200]
        if " node " in line and not re.search(r": error: node '[^']*' \([^,()]+, opset \d+\): ", line):
            return "node error without node name, op type and opset: " + line[:200]
    return None


def onnx_case(runner, work, case_id, data, tool):
    path = os.path.join(work, "c%05d.onnx" % case_id)
    with open(path, "wb") as f:
        f.write(data)
    outq = os.path.join(work, "c%05d.qir" % case_id)
    rc, out, err, dt = runner.run(["onnx2qir", "--inline-weights", "-o", outq, path], cwd=work)
    why = check_common(rc, err)
    if why is None and rc == 1:
        why = onnx_error_ok(err, path)
    if why is None and rc == 0:
        rc2, out2, err2, _ = runner.run(["qopt", outq], cwd=work)
        why = check_common(rc2, err2)
        if why is None and rc2 != 0:
            why = "onnx2qir output rejected by qopt: " + err2.decode("utf-8", "replace").split("\n")[0][:200]
    return why, dt, rc


def tensor_case(runner, work, case_id, data, tool):
    model, ext, how = tool
    path = os.path.join(work, "c%05d%s" % (case_id, ext))
    with open(path, "wb") as f:
        f.write(data)
    argv = ["qrun", model] + (["--in", how + "=" + path] if how else [path])
    rc, out, err, dt = runner.run(argv, cwd=work)
    why = check_common(rc, err)
    if why is None and rc == 1:
        why = named_error_ok(err, path)
    return why, dt, rc


# ------------------------------------------------------------------ .npy / .pb mutators
def npy_header_mutators():
    def descr(rng, b, ctx):
        if rng.random() < 0.3:  # the narrow types' record descr, right and wrong
            return _sub_match(rng, b, rb"'descr': '[^']*'", lambda m: b"'descr': " + rng.choice(
                [b"[('f8e4m3fn', '|u1')]", b"[('i4', '|i1')]", b"[('u2', '|u1')]", b"[('f4e2m1', '|u1')]",
                 b"[('f9', '|u1')]", b"[('u4', '<f4')]", b"[('u4', '|u1'), ('x', '|u1')]", b"[(", b"[]",
                 b"[('" + b"x" * 40 + b"', '|u1')]", b"[('i2', '|u1'"]))
        return _sub_match(rng, b, rb"'descr': '[^']*'", lambda m: b"'descr': '" + rng.choice(
            [b"<f4", b"<f8", b">f4", b"|b1", b"<i8", b"<u2", b"<c8", b"|O", b"<U3", b"", b"f4", b"<f2", b"|S3"]) + b"'")

    def shape(rng, b, ctx):
        return _sub_match(rng, b, rb"'shape': \([^)]*\)", lambda m: b"'shape': " + rng.choice(
            [b"()", b"(0,)", b"(1,)", b"(2, 3, 4)", b"(99999999999, 99999999999)", b"(-1,)",
             b"(3,", b"(x,)", b"(18446744073709551615,)", b"(1, 1, 1, 1, 1, 1, 1, 1, 1, 1)"]))

    def order(rng, b, ctx):
        return _sub_match(rng, b, rb"'fortran_order': \w+", lambda m: rng.choice(
            [b"'fortran_order': True", b"'fortran_order': 1", b"'fortran_order': maybe"]))

    def hlen(rng, b, ctx):
        if len(b) < 10:
            return None
        return b[:8] + bytes([rng.randrange(256), rng.randrange(256)]) + b[10:]

    def version(rng, b, ctx):
        if len(b) < 8:
            return None
        return b[:6] + bytes([rng.choice([0, 2, 3, 9]), 0]) + b[8:]

    return [descr, shape, order, hlen, version]


def pb_text_mutators():
    def dims(rng, b, ctx):
        return _sub_match(rng, b, rb"dims: -?\d+", lambda m: b"dims: " + rng.choice(HUGE).lstrip("e").encode()
                          if False else b"dims: " + rng.choice([b"0", b"-1", b"4611686018427387904",
                                                                b"9223372036854775807", b"1000000", b"7"]))

    def dtype(rng, b, ctx):
        return _sub_match(rng, b, rb"data_type: \d+", lambda m: b"data_type: " + str(rng.choice(
            [0, 1, 2, 3, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 16, 17, 19, 21, 22, 23, 24, 25, 26, 27, 99])).encode())

    def drop(rng, b, ctx):
        return m_drop_line(rng, b, ctx)

    return [dims, dtype, drop]


def onnx_text_mutators():
    """Structured damage to a decoded ModelProto (protoc --decode)."""
    def dims(rng, b, ctx):
        return _sub_match(rng, b, rb"(dim_value|dims): -?\d+", lambda m: m.group(1) + b": " + rng.choice(
            [b"0", b"-1", b"-5", b"4611686018427387904", b"9223372036854775807", b"100000000", b"3"]))

    def elem(rng, b, ctx):
        return _sub_match(rng, b, rb"(elem_type|data_type): \d+", lambda m: m.group(1) + b": " + str(rng.choice(
            [0, 1, 2, 3, 6, 7, 8, 9, 10, 11, 12, 14, 16, 17, 18, 20, 21, 22, 23, 25, 26, 27, 99])).encode())

    def names(rng, b, ctx):
        return _sub_match(rng, b, rb"(input|output): \"[^\"]*\"", lambda m: m.group(1) + b": " + rng.choice(
            [b"\"undefined_x\"", b"\"\"", b"\"y\"", b"\"x\"", b"\"\\377\\376\""]))

    def optype(rng, b, ctx):
        return _sub_match(rng, b, rb"op_type: \"[^\"]*\"", lambda m: b"op_type: " + rng.choice(
            [b"\"Add\"", b"\"Conv\"", b"\"Loop\"", b"\"If\"", b"\"Bogus\"", b"\"\"", b"\"MatMul\"",
             b"\"Reshape\"", b"\"Gather\"", b"\"Concat\"", b"\"Transpose\"", b"\"Slice\""]))

    def opset(rng, b, ctx):
        return _sub_match(rng, b, rb"version: \d+", lambda m: b"version: " + str(rng.choice(
            [0, 1, 5, 7, 99, 100000])).encode())

    def attr(rng, b, ctx):
        return _sub_match(rng, b, rb"\b(i|ints|f|floats): -?[\d.e+-]+", lambda m: m.group(1) + b": " + rng.choice(
            [b"0", b"-1", b"9223372036854775807", b"-9223372036854775808", b"100000", b"2", b"-100"]))

    def drop(rng, b, ctx):
        return m_drop_line(rng, b, ctx)

    def dup(rng, b, ctx):
        return m_dup_line(rng, b, ctx)

    return [dims, dims, elem, names, names, optype, opset, attr, attr, drop, dup]


# ------------------------------------------------------------------ driver
def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--cases", type=int, default=600, help="mutated .qir cases")
    ap.add_argument("--semantic-cases", type=int, default=150,
                    help="valid modules with damaged shapes / attributes (repaired to verify)")
    ap.add_argument("--extreme-cases", type=int, default=150,
                    help="one attribute integer set to an extreme value")
    ap.add_argument("--onnx-cases", type=int, default=150)
    ap.add_argument("--onnx-all-cases", type=int, default=0,
                    help="further ONNX cases from node-all/ models not in node/ (the operators only the whole suite has)")
    ap.add_argument("--tensor-cases", type=int, default=80)
    ap.add_argument("--timeout", type=float, default=20.0)
    ap.add_argument("-j", "--jobs", type=int, default=2)
    ap.add_argument("--keep", default=os.path.join(REPO, "build", "mutate-failures"))
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()

    bindir = os.path.abspath(os.environ.get("QIR_BIN", os.path.join(REPO, "build", "bin")))
    for t in ["onnx2qir", "qopt", "qcodegen", "qviz", "qrun"]:
        if not os.access(os.path.join(bindir, t), os.X_OK):
            print("mutate: error: %s/%s missing (set QIR_BIN)" % (bindir, t), file=sys.stderr)
            print("0 passed, 1 failed, 0 skipped")
            return 1
    onnx_tests = os.environ.get("ONNX_TESTS", os.path.join(REPO, "..", "shared", "onnx-tests"))
    shutil.rmtree(args.keep, ignore_errors=True)
    runner = Runner(bindir, args.timeout, args.keep)
    rng = random.Random(args.seed)
    work = tempfile.mkdtemp(prefix="qir-mutate-")
    t_start = time.time()

    # Seeds: the lit .qir files that are not error tests (damaging a valid file
    # reaches deeper than damaging an invalid one), in a fixed order.
    seeds = sorted(p for p in glob.glob(os.path.join(REPO, "test", "lit", "**", "*.qir"), recursive=True)
                   if "/errors/" not in p and "/Inputs/" not in p and "/robustness/" not in p)
    corpus = [open(p, "rb").read() for p in seeds]
    # strip lit directives: RUN lines would be noise in every mutant
    corpus = [b"\n".join(l for l in c.split(b"\n") if not re.match(rb"\s*//\s*(RUN|CHECK)", l)) for c in corpus]
    opnames = sorted(set(m.decode() for c in corpus for m in re.findall(rb"= ([a-z_][a-z0-9_]*)", c)))
    ctx = {"corpus": corpus, "opnames": opnames}

    cases = []  # (kind, label, data, tool)
    for i in range(args.cases):
        k = rng.randrange(len(corpus))
        data, how = mutate(rng, corpus[k], TEXT_MUTATORS, ctx, rng.choice([1, 1, 1, 2, 3]))
        tool = rng.choice(QIR_TOOLS)
        if tool == ["qviz", "-veu"] and b"rprogram" not in data:
            tool = ["qviz", "-graph"]  # -veu rightly refuses a module that has no rProgram
        cases.append(("qir", "%s [%s] %s" % (os.path.relpath(seeds[k], REPO), how, " ".join(tool)), data, tool))

    # Semantic cases: valid modules with damaged shapes and attributes.
    DEEP_TOOLS = [t for t in QIR_TOOLS if t[0] != "qviz"] + [["qrun", "--print-limit", "2"]] * 3
    for i in range(args.semantic_cases):
        k = rng.randrange(len(corpus))
        data, how = mutate(rng, corpus[k], SEMANTIC_MUTATORS, ctx, rng.choice([1, 1, 2]))
        tool = rng.choice(DEEP_TOOLS)
        cases.append(("sem", "%s [semantic %s] %s" % (os.path.relpath(seeds[k], REPO), how, " ".join(tool)),
                      data, tool))

    # Extreme values in one attribute integer at a time (INT64_MIN/MAX, 2^31,
    # -1, 0, ...): the shape rules, passes, interpreter and emitters must not
    # overflow.  Whatever qopt accepts also goes through one deeper tool.
    sites = [(k, a, e) for k, c in enumerate(corpus) for a, e in attr_int_sites(c)]
    for i in range(args.extreme_cases if sites else 0):
        k, a, e = rng.choice(sites)
        val = rng.choice(EXTREMES)
        data = corpus[k][:a] + val + corpus[k][e:]
        tool = rng.choice(DEEP_TOOLS + [["qviz", "-tiles"]])
        cases.append(("extreme", "%s [attribute int @%d -> %s] %s" % (
            os.path.relpath(seeds[k], REPO), a, val.decode(), " ".join(tool)), data, tool))

    skipped = 0
    models = sorted(glob.glob(os.path.join(onnx_tests, "node", "*", "model.onnx")))
    light = sorted(glob.glob(os.path.join(onnx_tests, "light", "*", "model.onnx")))
    if not models:
        print("SKIPPED: onnx mutations (no $ONNX_TESTS/node; set ONNX_TESTS)")
        skipped += args.onnx_cases
    else:
        proto = "/usr/include/onnx/onnx.proto"
        have_protoc = shutil.which("protoc") and os.path.exists(proto)
        omuts = onnx_text_mutators()
        in_node = set(os.path.basename(os.path.dirname(m)) for m in models)
        extra = [m for m in sorted(glob.glob(os.path.join(onnx_tests, "node-all", "*", "model.onnx")))
                 if os.path.basename(os.path.dirname(m)) not in in_node]
        if args.onnx_all_cases and not extra:
            print("SKIPPED: node-all mutations (no $ONNX_TESTS/node-all)")
            skipped += args.onnx_all_cases
        for i in range(args.onnx_cases + (args.onnx_all_cases if extra else 0)):
            if i >= args.onnx_cases:
                mpath = rng.choice(extra)
            else:
                mpath = rng.choice(light) if light and rng.random() < 0.15 else rng.choice(models)
            raw = open(mpath, "rb").read()
            label = os.path.relpath(mpath, onnx_tests)
            if have_protoc and rng.random() < 0.5:
                txt = subprocess.run(["protoc", "--decode=onnx.ModelProto", "-I", os.path.dirname(proto),
                                      os.path.basename(proto)], input=raw, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL).stdout
                t2, how = mutate(rng, txt, omuts, ctx, rng.choice([1, 1, 2]))
                enc = subprocess.run(["protoc", "--encode=onnx.ModelProto", "-I", os.path.dirname(proto),
                                      os.path.basename(proto)], input=t2, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL)
                if enc.returncode != 0:
                    data, how = mutate(rng, raw, BIN_MUTATORS, ctx, 1)
                else:
                    data = enc.stdout
            else:
                data, how = mutate(rng, raw, BIN_MUTATORS, ctx, rng.choice([1, 1, 2, 4]))
            cases.append(("onnx", "%s [%s]" % (label, how), data, None))

    # Tensor files for qrun: valid inputs written by qrun itself, then damaged.
    tseeds = [p for p in seeds if "/qrun/" in p and "err-" not in p] or seeds[:5]
    tdir = os.path.join(work, "tensors")
    os.makedirs(tdir)
    npy_muts = npy_header_mutators() + BIN_MUTATORS
    made = []
    for p in sorted(tseeds)[:12]:
        d = os.path.join(tdir, os.path.basename(p)[:-4])
        os.makedirs(d)
        rc, _, _, _ = runner.run(["qrun", "--print-limit", "1", "--save-inputs", d, p], cwd=d)
        for f in sorted(os.listdir(d)):
            if f.endswith(".npy"):
                made.append((p, f[:-4], os.path.join(d, f)))
    if made:
        for i in range(args.tensor_cases):
            model, name, npy = rng.choice(made)
            raw = open(npy, "rb").read()
            if rng.random() < 0.3:
                # the same tensor as a TensorProto, written by qrun --out from an identity-free module:
                # damage the bytes of a .pb built by protoc
                txt = b"dims: 2\ndims: 3\ndata_type: 1\nname: \"x\"\nfloat_data: 1\nfloat_data: 2\n"
                txt, how = mutate(rng, txt, pb_text_mutators(), ctx, 1)
                enc = subprocess.run(["protoc", "--encode=onnx.TensorProto", "-I", "/usr/include/onnx",
                                      "onnx.proto"], input=txt, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
                data = enc.stdout if enc.returncode == 0 else b"\x08"
                if rng.random() < 0.3:
                    data, how2 = mutate(rng, data, BIN_MUTATORS, ctx, 1)
                    how += "+" + how2
                ext = ".pb"
            else:
                data, how = mutate(rng, raw, npy_muts, ctx, rng.choice([1, 1, 2]))
                ext = ".npy"
            bind = rng.choice([None, name, name, "nosuch"])
            cases.append(("tensor", "%s %s [%s] %s" % (os.path.relpath(model, REPO), ext, how, bind or "positional"),
                          data, (model, ext, bind)))
    else:
        skipped += args.tensor_cases

    passed = failed = 0
    fails = []
    accepted, total = {}, {}

    def one(idx):
        kind, label, data, tool = cases[idx]
        fn = {"qir": qir_case, "sem": semantic_case, "extreme": extreme_case, "onnx": onnx_case, "tensor": tensor_case}[kind]
        why, dt, rc = fn(runner, work, idx, data, tool)
        return idx, why, dt, rc

    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as ex:
        for idx, why, dt, rc in ex.map(one, range(len(cases))):
            kind, label, data, tool = cases[idx]
            accepted[kind] = accepted.get(kind, 0) + (rc == 0)
            total[kind] = total.get(kind, 0) + 1
            if why == "SKIP":
                skipped += 1
            elif why is None:
                passed += 1
                if args.verbose:
                    print("PASS %d %s (%.2fs)" % (idx, label, dt))
            else:
                failed += 1
                os.makedirs(args.keep, exist_ok=True)
                ext = (tool[1] if tool and len(tool) > 1 else ".bin") if kind == "tensor" else \
                    {"qir": ".qir", "sem": ".qir", "extreme": ".qir", "onnx": ".onnx"}[kind]
                kept = os.path.join(args.keep, "case%05d%s" % (idx, ext))
                with open(kept, "wb") as f:
                    f.write(data)
                fails.append("FAIL %d %s: %s\n  input: %s" % (idx, label, why, kept))
                print(fails[-1])
    shutil.rmtree(work, ignore_errors=True)
    print("mutate: %d cases (seed %d) in %.1fs; accepted (exit 0): %s" % (
        len(cases), args.seed, time.time() - t_start,
        ", ".join("%s %d/%d" % (k, accepted[k], total[k]) for k in sorted(total))))
    print("%d passed, %d failed, %d skipped" % (passed, failed, skipped))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
