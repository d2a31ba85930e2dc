#!/usr/bin/env python3
"""Kernel report: what each CUDA kernel of a .cu file does, read from nvcc's PTX
and ptxas's resource report (no GPU needed).

  scripts/kernel-report.py FILE.cu [--arch sm_80] [--arch sm_90] [--json]
  scripts/kernel-report.py --suite [--update] [-j N]

Per kernel (a __global__ function; PTX .entry names are mapped back to the
source names) one row:
  matrix    matrix instruction and shape with its count: mma.m16n8k16 (mma.sync),
            wmma.m16n16k16 (wmma.mma), wgmma.m64nNk16 (wgmma.mma_async), or -
  ldmatrix  ldmatrix instructions, with the variants seen (x1/x2/x4, .trans)
  cp.async  cp.async.ca/cg copies, and `wait` the deepest cp.async.wait_group N
            (N = stages in flight minus one; cp.async.wait_all counts as 0)
  tma       cp.async.bulk copies (the tensor memory accelerator)
  stages    the pipeline's stages: the summary comment's where it says the copies
            complete on one mbarrier a stage (the flash-attention kernel on wgmma);
            wait + 1 with cp.async; with tensor copies or wgmma, the
            mbarrier.init count over two (qcodegen's wgmma loop: a full and an empty
            barrier per stage); else 1
  roles     warpgroup roles of a kernel whose wgmma consumers meet a producer at
            mbarriers: p1cN (one producer warpgroup, N consumers: the block's
            warpgroups less one), cN where all N warpgroups compute and one thread
            issues the copies (the flash kernel), `+reg` where setmaxnreg moves registers between them,
            `+persistent` where its blocks each compute every P-th tile (the summary
            comment qcodegen writes above it says `persistent`)
  g128      128-bit global accesses: loads (ld.global[.nc].v4.b32, .v2.b64, ...,
            and 16-byte cp.async) / stores (st.global.v4 ...)
  s128      128-bit shared accesses (ld/st.shared.v4 ...; ldmatrix is counted apart)
  regs, spill (store/load bytes), smem (static from ptxas plus the dynamic size
            of a launch in the .cu that names it with a constant), block (.maxntid,
            i.e. __launch_bounds__)
Counts are static: instructions in the PTX text, not executed ones.  On a .cu
that qcodegen wrote, the `op` column names the module output each kernel writes
(a kernel writing a temporary gets the name of the next kernel's output).

--suite compiles the fixed operator set of issue 25 (bench/ops/ops-{f16,bf16,f32}.qir,
`qopt -canonicalize -roller -target=T | qcodegen -cuda`, T = a100 with sm_80, h100
and h200 with sm_90a: one nvcc run per module and target), prints the table, and
compares every kernel with the record bench/ops/kernel-report.expected: a kernel
fails when it lost a feature the record gives it (its matrix instruction, or a
weaker one; ldmatrix; cp.async; tensor copies; a shallower wait_group; 128-bit global loads),
when it spills, or when it is missing.  --update rewrites the record.  The goals
of bench/ops/kernel-report.goals are printed as met/unmet; they do not fail the
suite.  Without nvcc the suite is skipped, visibly.

nvcc is $NVCC, else `nvcc` on PATH, else /usr/local/cuda/bin/nvcc.  Exit status:
0 done (suite: nothing failed), 1 error or failure, 77 nvcc not found (a single
file; the suite prints a skip and exits 0).
"""

import argparse
import concurrent.futures
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

EXIT_SKIP = 77
REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
OPS_DIR = os.path.join(REPO, "bench", "ops")
RECORD = os.path.join(OPS_DIR, "kernel-report.expected")
GOALS = os.path.join(OPS_DIR, "kernel-report.goals")
# The operator set: module files (bench/ops/ops-GROUP.qir) and the targets, each
# with the architecture nvcc compiles for.
SUITE_GROUPS = ["f16", "bf16", "f32"]
SUITE_TARGETS = [("a100", "sm_80"), ("h100", "sm_90a"), ("h200", "sm_90a")]
# Matrix instructions from weakest to strongest: a kernel whose kind drops in
# this order lost its matrix instruction.
MATRIX_RANK = {"": 0, "wmma": 1, "mma": 2, "wgmma": 3}


class ReportError(Exception):
    pass


class NvccMissing(Exception):
    pass


# ---- nvcc

def find_nvcc():
    env = os.environ.get("NVCC")
    if env:
        path = shutil.which(env)
        if not path:
            raise NvccMissing("nvcc not found: $NVCC is '%s'" % env)
        return path
    path = shutil.which("nvcc")
    if path:
        return path
    if os.access("/usr/local/cuda/bin/nvcc", os.X_OK):
        return "/usr/local/cuda/bin/nvcc"
    raise NvccMissing("nvcc not found (set $NVCC, or put it on PATH)")


def compile_cu(nvcc, cu, arch, extra_flags):
    """One nvcc run: the cubin with ptxas -v, keeping the PTX it compiled.
    Returns (ptx text, ptxas report)."""
    with tempfile.TemporaryDirectory(prefix="kernel-report.") as tmp:
        # sm_90a (wgmma, setmaxnreg) is a -gencode target; -arch=sm_90a also runs a plain sm_90 pass
        target = ("-gencode=arch=compute_%s,code=%s" % (arch[3:], arch)) if arch.endswith("a") else "-arch=" + arch
        cmd = [nvcc, "-cubin", target, "-Xptxas", "-v", "--keep", "--keep-dir", tmp,
               "-o", os.path.join(tmp, "out.cubin")] + list(extra_flags) + [cu]
        try:
            proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  universal_newlines=True)
        except OSError as e:
            raise ReportError("cannot run %s: %s" % (nvcc, e))
        if proc.returncode != 0:
            tail = "\n".join(proc.stdout.rstrip().splitlines()[-30:])
            raise ReportError("nvcc failed on %s for %s (exit %d):\n%s"
                              % (cu, arch, proc.returncode, tail))
        ptx_files = glob.glob(os.path.join(tmp, "*.ptx"))
        if len(ptx_files) != 1:
            raise ReportError("nvcc kept %d PTX files for %s (expected one)" % (len(ptx_files), cu))
        with open(ptx_files[0]) as f:
            return f.read(), proc.stdout


# ---- PTX

ENTRY_RE = re.compile(r"^\s*(?:\.visible\s+|\.weak\s+)?\.entry\s+([\w$.]+)\s*\(", re.M)
SHAPE_RE = re.compile(r"^m\d+n\d+k\d+$")
TYPE_RE = re.compile(r"^([bfsu])(\d+)(x2)?$")


def strip_ptx_comments(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def ptx_entries(ptx):
    """{mangled entry name: (directives between its parameters and body, body text)}"""
    ptx = strip_ptx_comments(ptx)
    entries = {}
    for m in ENTRY_RE.finditer(ptx):
        open_brace = ptx.find("{", m.end())
        close_params = ptx.find(")", m.end())
        if open_brace < 0 or close_params < 0:
            raise ReportError("PTX entry %s has no body" % m.group(1))
        depth, i = 0, open_brace
        while i < len(ptx):
            c = ptx[i]
            if c == "{":
                depth += 1
            elif c == "}":
                depth -= 1
                if depth == 0:
                    break
            i += 1
        entries[m.group(1)] = (ptx[close_params + 1:open_brace], ptx[open_brace + 1:i])
    return entries


def access_bits(tokens):
    """Bits one ld/st moves: the vector width times the element type's size."""
    vec, bits = 1, 0
    for t in tokens[1:]:
        if t in ("v2", "v4", "v8"):
            vec = int(t[1:])
        tm = TYPE_RE.match(t)
        if tm:
            bits = int(tm.group(2)) * (2 if tm.group(3) else 1)
    return vec * bits


def new_features():
    return {"matrix": {}, "ldmatrix": 0, "ldmatrix_variants": [], "cp_async": 0,
            "cp_async_bytes": {}, "wait_group": None, "commit_group": 0, "tma": 0, "mbar_init": 0,
            "setmaxnreg": 0,
            "g128_ld": 0, "g128_st": 0, "g128_cp": 0, "gld": 0, "gst": 0,
            "s128_ld": 0, "s128_st": 0, "block": None}


def scan_body(body, f):
    variants = set()
    for stmt in body.split(";"):
        # scope braces, labels ($L__BB0_1:) and guards (@%p1, @!%p1) before the opcode
        stmt = re.sub(r"^(?:\s*[{}]|\s*[\w$]+:)*\s*", "", stmt)
        stmt = re.sub(r"^@!?%?[\w$]+\s+", "", stmt)
        if not stmt or stmt[0] == ".":  # declarations (.reg, .shared, ...)
            continue
        parts = stmt.split(None, 1)
        op, operands = parts[0], (parts[1] if len(parts) > 1 else "")
        tokens = op.split(".")
        head = tokens[0]
        if op.startswith("wgmma.mma_async"):
            kind = "wgmma"
        elif op.startswith("wmma.mma"):
            kind = "wmma"
        elif head == "mma":
            kind = "mma"
        else:
            kind = None
        if kind:
            shape = next((t for t in tokens if SHAPE_RE.match(t)), "?")
            name = kind + "." + shape
            f["matrix"][name] = f["matrix"].get(name, 0) + 1
        elif head == "ldmatrix":
            f["ldmatrix"] += 1
            v = [t for t in tokens if t in ("x1", "x2", "x4")]
            variants.add((v[0] if v else "x1") + (".trans" if "trans" in tokens else ""))
        elif op.startswith("cp.async.wait_group"):
            n = int(operands.strip().split()[0].rstrip(";"), 0)
            f["wait_group"] = n if f["wait_group"] is None else max(f["wait_group"], n)
        elif op.startswith("cp.async.wait_all"):
            f["wait_group"] = 0 if f["wait_group"] is None else f["wait_group"]
        elif op.startswith("cp.async.commit_group"):
            f["commit_group"] += 1
        elif op.startswith("cp.async.bulk"):
            f["tma"] += 1
        elif op.startswith("mbarrier.init"):
            f["mbar_init"] += 1
        elif op.startswith("setmaxnreg"):
            f["setmaxnreg"] += 1
        elif op.startswith("cp.async.ca") or op.startswith("cp.async.cg"):
            f["cp_async"] += 1
            args = [a.strip() for a in re.sub(r"\[[^\]]*\]", "ADDR", operands).split(",")]
            size = args[2] if len(args) > 2 else "?"
            f["cp_async_bytes"][size] = f["cp_async_bytes"].get(size, 0) + 1
            if size == "16":
                f["g128_cp"] += 1
        elif head in ("ld", "ldu", "st"):
            # the state space may follow qualifiers (ld.relaxed.gpu.global, ld.volatile.shared)
            space = next((t for t in tokens[1:] if t in ("global", "local", "param", "const")
                          or t.startswith("shared")), "")
            wide = access_bits(tokens) == 128
            if space == "global":
                if head == "st":
                    f["gst"] += 1
                    f["g128_st"] += wide
                else:
                    f["gld"] += 1
                    f["g128_ld"] += wide
            elif space.startswith("shared"):
                if head == "st":
                    f["s128_st"] += wide
                else:
                    f["s128_ld"] += wide
    f["ldmatrix_variants"] = sorted(set(f["ldmatrix_variants"]) | variants)


def block_size(directives):
    m = re.search(r"\.(?:maxntid|reqntid)\s+(\d+)(?:\s*,\s*(\d+))?(?:\s*,\s*(\d+))?", directives)
    if not m:
        return None
    n = 1
    for g in m.groups():
        if g:
            n *= int(g)
    return n


# ---- ptxas -v

def ptxas_resources(report):
    """{mangled entry name: {regs, spill_st, spill_ld, stack, smem}} from ptxas -v"""
    res, cur = {}, None
    for line in report.splitlines():
        m = re.search(r"Compiling entry function '([^']+)'", line)
        if m:
            cur = res.setdefault(m.group(1), {"regs": None, "spill_st": 0, "spill_ld": 0,
                                              "stack": 0, "smem": 0})
            continue
        m = re.search(r"Function properties for (\S+)", line)
        if m:
            # a device function's properties (not inlined) are not the entry's
            cur = res.get(m.group(1), cur if m.group(1) in res else None)
            continue
        if cur is None:
            continue
        m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if m:
            cur["stack"], cur["spill_st"], cur["spill_ld"] = (int(g) for g in m.groups())
            continue
        m = re.search(r"Used (\d+) registers", line)
        if m:
            cur["regs"] = int(m.group(1))
            s = re.search(r"(\d+) bytes smem", line)
            cur["smem"] = int(s.group(1)) if s else 0
    return res


# ---- source names

def demangle(name):
    """The function name of an Itanium-mangled entry (_Z2k0Pf -> k0,
    _ZN2ns4gemmEv -> ns::gemm); templates keep their base name."""
    if not name.startswith("_Z"):
        return name
    s, i, parts = name, 2, []
    nested = s[i:i + 1] == "N"
    if nested:
        i += 1
    while i < len(s) and s[i].isdigit():
        j = i
        while j < len(s) and s[j].isdigit():
            j += 1
        n = int(s[i:j])
        parts.append(s[j:j + n])
        i = j + n
        if not nested:
            break
        if s[i:i + 1] == "I":  # template arguments: not part of the name we want
            break
    return "::".join(parts) if parts else name


def source_kernels(src):
    """Names of the __global__ functions of a CUDA source, in order: the word
    before the first '(' after __global__, past a __launch_bounds__(...)."""
    names = []
    for m in re.finditer(r"\b__global__\b", src):
        rest = src[m.end():m.end() + 400]
        rest = re.sub(r"__launch_bounds__\s*\([^()]*\)", " ", rest, count=1)
        name = re.match(r"[^;{(]*?\b([A-Za-z_]\w*)\s*\(", rest)
        if name and name.group(1) not in names:
            names.append(name.group(1))
    return names


def kernel_comments(src):
    """{kernel: the summary comment qcodegen writes on the line above its __global__}"""
    out = {}
    for m in re.finditer(r"/\* ([^\n]*)\*/\n__global__\b", src):
        rest = re.sub(r"__launch_bounds__\s*\([^()]*\)", " ", src[m.end():m.end() + 400], count=1)
        name = re.match(r"[^;{(]*?\b([A-Za-z_]\w*)\s*\(", rest)
        if name:
            out[name.group(1)] = m.group(1)
    return out


def kernel_ops(comments):
    """{kernel: what its comment says it computes} (the word before the colon of
    the `/* transpose: ...` line)."""
    out = {}
    for kernel, text in comments.items():
        m = re.match(r"([A-Za-z_@][^:*\n]*): ", text)
        if m:
            out[kernel] = m.group(1)
    return out


def single_barrier_ring_kernels(comments):
    """{kernel: its stages} for the kernels whose summary says their copies complete on one
    mbarrier a stage and that no producer warpgroup waits on a second (the flash-attention
    kernel on wgmma: every warpgroup computes, the block's first thread issues the tensor
    copies; Q may have a barrier of its own, so the stages are the summary's)."""
    out = {}
    for kernel, text in comments.items():
        m = re.search(r"(\d+) stages", text)
        if "by TMA on a stage's mbarrier" in text and m:
            out[kernel] = int(m.group(1))
    return out


def persistent_kernels(comments):
    """Kernels whose summary comment says their blocks are persistent (#tile persistent)."""
    return {kernel for kernel, text in comments.items() if re.search(r"\(persistent: \d+ tiles\)", text)}


def dynamic_smem(src):
    """{kernel: largest constant dynamic shared-memory size of its launches}"""
    out = {}
    for m in re.finditer(r"\b([A-Za-z_]\w*)\s*<<<\s*[^,>]+,\s*[^,>]+,\s*(\d+)\s*[,>]", src):
        out[m.group(1)] = max(out.get(m.group(1), 0), int(m.group(2)))
    return out


def qcodegen_ops(src):
    """{kernel: module output it writes} for a .cu qcodegen generated, read from
    its header (` * output N: NAME ...`) and the launches of qir_run_stream."""
    outputs = dict((int(m.group(1)), m.group(2))
                   for m in re.finditer(r"^ \* output (\d+): (\S+)", src, re.M))
    m = re.search(r"^\S.*\bqir_run_stream\([^;{]*\{", src, re.M)
    if not outputs or not m:
        return {}
    end = src.find("\n}\n", m.end())
    body = src[m.end():end if end >= 0 else len(src)]
    launches = []
    for lm in re.finditer(r"\b([A-Za-z_]\w*)\s*<<<[^;]*?>>>\s*\(([^;]*)\)\s*;", body):
        written = [outputs.get(int(o)) for o in re.findall(r"\boutputs\[(\d+)\]", lm.group(2))]
        launches.append((lm.group(1), next((w for w in written if w), None)))
    ops, pending = {}, []
    for kernel, op in launches:
        if op is None:
            pending.append(kernel)
            continue
        for k in pending + [kernel]:
            ops.setdefault(k, op)
        pending = []
    return ops


# ---- report

def report_file(nvcc, cu, arch, extra_flags=()):
    """Rows (dicts), one per kernel of `cu` compiled for `arch`, in source order."""
    try:
        with open(cu) as f:
            src = f.read()
    except OSError as e:
        raise ReportError("cannot read %s: %s" % (cu, e.strerror))
    ptx, ptxas = compile_cu(nvcc, cu, arch, extra_flags)
    entries = ptx_entries(ptx)
    resources = ptxas_resources(ptxas)
    names = source_kernels(src)
    dyn = dynamic_smem(src)
    ops = qcodegen_ops(src)
    comments = kernel_comments(src)
    what = kernel_ops(comments)
    persistent = persistent_kernels(comments)
    single_ring = single_barrier_ring_kernels(comments)
    order = {n: i for i, n in enumerate(names)}
    rows = []
    for mangled, (directives, body) in entries.items():
        plain = demangle(mangled)
        base = plain.split("::")[-1]
        kernel = plain  # qualified (ns::name) where the source puts it in a namespace
        f = new_features()
        scan_body(body, f)
        f["block"] = block_size(directives)
        r = resources.get(mangled, {})
        row = {"file": cu, "arch": arch, "kernel": kernel, "entry": mangled,
               "op": ops.get(base), "what": what.get(base), "persistent": base in persistent,
               "single_ring": single_ring.get(base), **f,
               "regs": r.get("regs"), "spill_st": r.get("spill_st", 0),
               "spill_ld": r.get("spill_ld", 0), "stack": r.get("stack", 0),
               "static_smem": r.get("smem", 0), "dynamic_smem": dyn.get(base)}
        row["smem"] = row["static_smem"] + (row["dynamic_smem"] or 0)
        row["stages"] = stages(row)
        row["roles"] = roles(row)
        rows.append(row)
    rows.sort(key=lambda r: (order.get(r["kernel"].split("::")[-1], len(order)), r["kernel"]))
    return rows


def stages(row):
    """Stages in flight that the PTX shows: a ring of one mbarrier a stage (the
    summary says so), deepest wait_group + 1 where the kernel copies with
    cp.async, two mbarriers a stage with tensor copies or wgmma, else 1 (a
    register-prefetch pipeline is not recognised)."""
    if row.get("single_ring"):
        return row["single_ring"]
    if row["cp_async"] and row["wait_group"] is not None:
        return row["wait_group"] + 1
    if (row["tma"] or matrix_kind(row) == "wgmma") and row["mbar_init"] >= 2:
        return row["mbar_init"] // 2
    return 1


def roles(row):
    """p1cN for a kernel whose wgmma consumers meet a producer at mbarriers (warpgroup roles),
    cN for N warpgroups that all compute (one thread issuing the copies), else '-'."""
    if matrix_kind(row) != "wgmma" or not row["mbar_init"] or not row["block"]:
        return "-"
    if row.get("single_ring"):
        return "c%d" % (row["block"] // 128)
    return "p1c%d%s%s" % (row["block"] // 128 - 1, "+reg" if row["setmaxnreg"] else "",
                          "+persistent" if row.get("persistent") else "")


def matrix_text(row):
    if not row["matrix"]:
        return "-"
    return ",".join("%s x%d" % (k, v) for k, v in sorted(row["matrix"].items()))


def matrix_kind(row):
    """The strongest matrix instruction of a row (wgmma > mma > wmma), '' if none."""
    best = ""
    for name in row["matrix"]:
        kind = name.split(".")[0]
        if MATRIX_RANK.get(kind, 0) > MATRIX_RANK[best]:
            best = kind
    return best


def columns(row):
    ldm = str(row["ldmatrix"])
    if row["ldmatrix"]:
        ldm += " (" + ",".join(row["ldmatrix_variants"]) + ")"
    wait = "-" if row["wait_group"] is None else str(row["wait_group"])
    spill = "%d/%d" % (row["spill_st"], row["spill_ld"])
    where = [row["target"], row["group"]] if "group" in row else [row["arch"]]
    return where + [row.get("op") or "-", row["kernel"], matrix_text(row), ldm,
            str(row["cp_async"]), wait, str(row["tma"]), str(row["stages"]), row["roles"],
            "%d/%d" % (row["g128_ld"] + row["g128_cp"], row["g128_st"]),
            "%d/%d" % (row["s128_ld"], row["s128_st"]), "-" if row["regs"] is None else str(row["regs"]),
            spill, str(row["smem"]), "-" if row["block"] is None else str(row["block"])]


HEADER = ["arch", "op", "kernel", "matrix", "ldmatrix", "cp.async", "wait", "tma", "stages", "roles", "g128 ld/st",
          "s128 ld/st", "regs", "spill st/ld", "smem", "block"]


def table(rows, header=HEADER):
    cells = [header] + [columns(r) for r in rows]
    widths = [max(len(c[i]) for c in cells) for i in range(len(header))]
    lines = []
    for c in cells:
        lines.append("  ".join(v.ljust(w) for v, w in zip(c, widths)).rstrip())
    return "\n".join(lines)


def json_rows(rows):
    out = []
    for r in rows:
        r = dict(r)
        r["matrix_text"] = matrix_text(r)
        out.append(r)
    return json.dumps(out, indent=1, sort_keys=True)


# ---- the suite: record and goals

def record_key(row):
    return (row["target"], row["group"], row["op"] or "-", row["index"])


def record_line(row, known_spill=None):
    wait = "-" if row["wait_group"] is None else str(row["wait_group"])
    matrix = ",".join("%s:%d" % kv for kv in sorted(row["matrix"].items())) or "-"
    return ("%s %s %s %d  kernel=%s matrix=%s ldmatrix=%d cp_async=%d wait=%s tma=%d stages=%d roles=%s g128=%d "
            "spill=%d regs=%s smem=%d block=%s"
            % (row["target"], row["group"], row["op"] or "-", row["index"], row["kernel"], matrix,
               row["ldmatrix"], row["cp_async"], wait, row["tma"], row["stages"], row["roles"],
               row["g128_ld"] + row["g128_cp"], row["spill_st"] + row["spill_ld"], row["regs"], row["smem"], row["block"])
            + ("" if known_spill is None else " known_spill=" + known_spill))


def read_record(path):
    """{(target, group, op, index): {field: text}}"""
    rec = {}
    try:
        with open(path) as f:
            lines = f.readlines()
    except OSError as e:
        raise ReportError("cannot read the record %s: %s (write it with --suite --update)"
                          % (path, e.strerror))
    for n, line in enumerate(lines, 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        words = line.split()
        if len(words) < 4 or not words[3].isdigit() or any("=" not in w for w in words[4:]):
            raise ReportError("%s:%d: expected 'TARGET GROUP OP INDEX field=value ...'" % (path, n))
        rec[(words[0], words[1], words[2], int(words[3]))] = dict(w.split("=", 1) for w in words[4:])
    return rec


def record_matrix(text):
    if text == "-":
        return {}
    return dict((k, int(v)) for k, v in (p.rsplit(":", 1) for p in text.split(",")))


def regressions(row, rec):
    """What `row` lost against its record (and its spills), as messages."""
    lost = []
    had = {"matrix": record_matrix(rec.get("matrix", "-"))}
    had_kind = matrix_kind(had)
    if MATRIX_RANK[matrix_kind(row)] < MATRIX_RANK[had_kind]:
        lost.append("matrix instruction %s (now %s)"
                    % (",".join(sorted(had["matrix"])), matrix_text(row)))
    # a stronger matrix instruction (wgmma where the record has mma.sync) brings its own
    # loop: TMA copies and shared-memory descriptors instead of cp.async and ldmatrix
    if MATRIX_RANK[matrix_kind(row)] > MATRIX_RANK[had_kind]:
        return lost
    for field, now, name in [("ldmatrix", row["ldmatrix"], "ldmatrix"),
                             ("cp_async", row["cp_async"], "cp.async"),
                             ("tma", row["tma"], "tensor copies (cp.async.bulk)"),
                             ("g128", row["g128_ld"] + row["g128_cp"], "128-bit global loads")]:
        if int(rec.get(field, "0")) > 0 and now == 0:
            lost.append("%s (record %s, now 0)" % (name, rec[field]))
    rec_wait = rec.get("wait", "-")
    if rec_wait != "-" and (row["wait_group"] is None or row["wait_group"] < int(rec_wait)):
        lost.append("cp.async.wait_group depth (record %s, now %s)"
                    % (rec_wait, "-" if row["wait_group"] is None else row["wait_group"]))
    return lost


def spill_text(row):
    return "spills %d bytes stored, %d loaded" % (row["spill_st"], row["spill_ld"])


def read_goals(path):
    """[(op, groups, [goal words])] from the goals file"""
    goals = []
    try:
        with open(path) as f:
            lines = f.readlines()
    except OSError as e:
        raise ReportError("cannot read the goals %s: %s" % (path, e.strerror))
    for n, line in enumerate(lines, 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        words = line.split()
        targets = None
        if len(words) > 2 and words[2].startswith("targets="):
            targets = words[2][8:].split(",")
            del words[2]
        if len(words) < 3:
            raise ReportError("%s:%d: expected 'OP GROUP[,GROUP] [targets=T[,T]] GOAL ...'" % (path, n))
        for g in words[2:]:
            if not re.match(r"^(matrix=[\w.]+|ldmatrix|cp_async|tma|roles|g128|s128|(wait|stages)>=\d+|nospill)$", g):
                raise ReportError("%s:%d: unknown goal '%s' (matrix=KIND[.SHAPE], ldmatrix, cp_async, tma, roles, "
                                  "g128, s128, wait>=N, stages>=N, nospill)" % (path, n, g))
        goals.append((words[0], words[1].split(","), targets, words[2:]))
    return goals


def goal_met(row, goal):
    if goal.startswith("matrix="):   # KIND.SHAPE, or KIND alone: any shape of it
        want = goal[7:]
        return want in row["matrix"] or any(name.split(".")[0] == want for name in row["matrix"])
    if goal == "tma":
        return row["tma"] > 0
    if goal == "roles":
        return row["roles"] != "-"
    if goal == "ldmatrix":
        return row["ldmatrix"] > 0
    if goal == "cp_async":
        return row["cp_async"] > 0
    if goal == "g128":
        return row["g128_ld"] + row["g128_cp"] > 0
    if goal == "s128":
        return row["s128_ld"] > 0
    if goal == "nospill":
        return row["spill_st"] == 0 and row["spill_ld"] == 0
    m = re.match(r"^(wait|stages)>=(\d+)$", goal)
    if m.group(1) == "wait":
        return row["wait_group"] is not None and row["wait_group"] >= int(m.group(2))
    return row["stages"] >= int(m.group(2))


def suite_compile(qir_bin, nvcc, tmp, ops_dir, group, target, arch, extra_flags):
    """The rows of one module for one target: qopt, qcodegen, one nvcc run."""
    qir = os.path.join(ops_dir, "ops-%s.qir" % group)
    planned = os.path.join(tmp, "ops-%s-%s.qir" % (group, target))
    cu = os.path.join(tmp, "ops-%s-%s.cu" % (group, target))
    for cmd in ([os.path.join(qir_bin, "qopt"), "-canonicalize", "-roller", "-target=" + target, qir,
                 "-o", planned],
                [os.path.join(qir_bin, "qcodegen"), "-cuda", planned, "-o", cu]):
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
        if proc.returncode != 0:
            raise ReportError("%s failed (exit %d):\n%s" % (" ".join(cmd), proc.returncode, proc.stdout))
    rows = report_file(nvcc, cu, arch, extra_flags)
    seen = {}
    for r in rows:
        r["target"], r["group"] = target, group
        r["index"] = seen.get(r["op"], 0)
        seen[r["op"]] = r["index"] + 1
    return rows


def shown_path(path):
    path = os.path.abspath(path)
    return os.path.relpath(path, REPO) if path.startswith(REPO + os.sep) else path


def run_suite(args):
    try:
        nvcc = find_nvcc()
    except NvccMissing as e:
        print("SKIPPED: %s; the kernel report of the operator set needs it" % e)
        print("0 passed, 0 failed, 1 skipped")
        return 0
    qir_bin = os.path.abspath(args.qir_bin or os.environ.get("QIR_BIN") or os.path.join(REPO, "build", "bin"))
    ops_dir = os.path.abspath(args.ops_dir)
    groups = [g for g in SUITE_GROUPS if os.path.exists(os.path.join(ops_dir, "ops-%s.qir" % g))]
    if not groups:
        raise ReportError("no operator set in %s (ops-{%s}.qir)" % (ops_dir, ",".join(SUITE_GROUPS)))
    targets = [(t, a) for t, a in SUITE_TARGETS if not args.targets or t in args.targets.split(",")]
    if not targets:
        raise ReportError("--targets: none of %s" % ",".join(t for t, _ in SUITE_TARGETS))
    rows = []
    with tempfile.TemporaryDirectory(prefix="kernel-report-suite.") as tmp:
        jobs = [(g, t, a) for t, a in targets for g in groups]
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            futures = [pool.submit(suite_compile, qir_bin, nvcc, tmp, ops_dir, g, t, a, args.nvcc_flag)
                       for g, t, a in jobs]
            for fut in futures:
                rows.extend(fut.result())
    print("kernel report of the operator set (%s; qopt -canonicalize -roller, qcodegen -cuda, %s)"
          % (shown_path(ops_dir), nvcc))
    print(table(rows, ["target", "dtype"] + HEADER[1:]))
    print()
    if args.update:
        # known_spill is written by hand, never by --update: keep the old ones
        old = read_record(args.record) if os.path.exists(args.record) else {}
        with open(args.record, "w") as f:
            f.write("# The kernel report of bench/ops (scripts/kernel-report.py --suite --update):\n"
                    "# TARGET GROUP OP INDEX, then what the kernel had. --suite fails when a kernel\n"
                    "# loses its matrix instruction (or has a weaker one: wgmma > mma > wmma), its\n"
                    "# ldmatrix, cp.async, tensor copies, wait_group depth or 128-bit global loads, or spills;\n"
                    "# the other fields are for reading. known_spill=BYTES (added by hand, kept by\n"
                    "# --update) lets the kernel spill up to BYTES as a known failure (XFAIL,\n"
                    "# counted as skipped); remove it when the spill is gone.\n")
            for r in rows:
                f.write(record_line(r, old.get(record_key(r), {}).get("known_spill")) + "\n")
        print("wrote %s (%d kernels)" % (args.record, len(rows)))
    if os.path.exists(args.goals):
        goals = read_goals(args.goals)
        lines, met_all = [], 0
        for r in rows:
            for op, groups, only, words in goals:
                if op != r["op"] or r["group"] not in groups or (only and r["target"] not in only):
                    continue
                if r.get("what") == "transpose":   # a layout kernel -roller's relayout adds: not the contraction
                    lines.append("  %-5s %-4s %-12s %-4s %s" % (r["target"], r["group"], r["op"], r["kernel"],
                                                                "a transpose (relayout): not judged"))
                    continue
                unmet = [g for g in words if not goal_met(r, g)]
                met_all += not unmet
                lines.append("  %-5s %-4s %-12s %-4s %s" % (r["target"], r["group"], r["op"], r["kernel"],
                                                            "met" if not unmet else "unmet: " + " ".join(unmet)))
        if lines:
            print("goals (%s; reported, not failing):" % shown_path(args.goals))
            print("\n".join(lines))
            judged = sum(1 for ln in lines if not ln.endswith("not judged"))
            print("  %d of %d kernels meet their goals" % (met_all, judged))
            print()
    record = read_record(args.record)
    passed = failed = xfailed = 0
    keys = set()
    for r in rows:
        key = record_key(r)
        keys.add(key)
        rec = record.get(key)
        name = "%s %s %s#%d (%s)" % (r["target"], r["group"], r["op"] or "-", r["index"], r["kernel"])
        lost = []
        if rec is None:
            print("NEW   %s: not in the record (--update records it)" % name)
        else:
            lost = regressions(r, rec)
        spilled = r["spill_st"] + r["spill_ld"]
        known = int(rec.get("known_spill", "0")) if rec else 0
        if spilled and spilled > known:
            lost.append(spill_text(r) + (" (known_spill=%d)" % known if known else ""))
        if lost:
            failed += 1
            print("FAIL  %s: %s" % (name, "; ".join(lost)))
        elif spilled:
            xfailed += 1
            print("XFAIL %s: %s, a known failure (known_spill=%d in the record)" % (name, spill_text(r), known))
        else:
            passed += 1
            if known:
                print("CLEAN %s: no spills now; remove known_spill=%d from the record" % (name, known))
    # every recorded kernel of the targets compiled must be there (a module gone too)
    compiled = set(t for t, _ in targets)
    for key in sorted(k for k in set(record) - keys if k[0] in compiled):
        failed += 1
        print("FAIL  %s %s %s#%d (%s): in the record, not compiled now"
              % (key + (record[key].get("kernel", "?"),)))
    print("%d passed, %d failed, %d skipped" % (passed, failed, xfailed))
    return 1 if failed else 0


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="*", metavar="FILE.cu")
    ap.add_argument("--arch", action="append", help="sm_80, sm_90, ... (repeatable; default sm_80)")
    ap.add_argument("--json", action="store_true", help="print the rows as JSON")
    ap.add_argument("--nvcc-flag", action="append", default=[], help="an extra nvcc argument (repeatable)")
    ap.add_argument("--suite", action="store_true", help="report on and check the operator set of bench/ops")
    ap.add_argument("--update", action="store_true", help="with --suite: rewrite the record")
    ap.add_argument("--record", default=RECORD, help="with --suite: the record (default %(default)s)")
    ap.add_argument("--goals", default=GOALS, help="with --suite: the goals (default %(default)s)")
    ap.add_argument("--ops-dir", default=OPS_DIR,
                    help="with --suite: the folder of ops-{f16,bf16,f32}.qir (default %(default)s)")
    ap.add_argument("--targets", help="with --suite: a comma list of a100,h100 (default both)")
    ap.add_argument("--qir-bin", help="with --suite: the qopt and qcodegen to use (default $QIR_BIN, build/bin)")
    ap.add_argument("-j", "--jobs", type=int, default=2, help="with --suite: nvcc runs at once")
    args = ap.parse_args(argv)
    try:
        if args.suite:
            if args.files:
                ap.error("--suite takes no files")
            return run_suite(args)
        if not args.files:
            ap.error("no FILE.cu (or --suite)")
        try:
            nvcc = find_nvcc()
        except NvccMissing as e:
            print("kernel-report: skipped: %s" % e, file=sys.stderr)
            return EXIT_SKIP
        rows = []
        for cu in args.files:
            for arch in args.arch or ["sm_80"]:
                rows.extend(report_file(nvcc, cu, arch, args.nvcc_flag))
        print(json_rows(rows) if args.json else table(rows))
        return 0
    except ReportError as e:
        print("kernel-report: error: %s" % e, file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
