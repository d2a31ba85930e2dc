#!/usr/bin/env python3
"""Static audit of the CUDA qcodegen generates (-cuda, with or without -main).

    scripts/audit-cuda.py FILE.cu...
    scripts/audit-cuda.py --suite [-j N] [--bin DIR] [--tests DIR] [--keep DIR] [--filter S] [-v]

A text audit: no nvcc and no GPU.  Each finding is one located line

    FILE:LINE: audit: KIND: message

and any finding makes the exit status 1.  The kinds:

  unchecked-launch    a `kernel<<<...>>>(...)` not followed by QCHECK_LAUNCH()
                      (or another check of cudaGetLastError)
  unchecked-call      a cudaLaunchCooperativeKernel, cudaFuncSetAttribute,
                      cudaMemcpy*, cudaMemset* or cudaMalloc* call (directly or
                      through a #define such as q_h2d) whose status nothing tests
  dynamic-smem        a launch with more than 48 KiB (49152 bytes) of dynamic
                      shared memory and no earlier cudaFuncSetAttribute(kernel,
                      cudaFuncAttributeMaxDynamicSharedMemorySize, >= that) on
                      its path (in the same host function, in the launch's
                      block or one enclosing it)
  launch-bounds       a launch whose block size is not the T of the kernel's
                      __launch_bounds__(T[, B])
  readonly-alias      one launch passes the same memory to a const parameter
                      and to a written one (nvcc may read the const one through
                      the non-coherent path; with __restrict__ it is undefined)
  restrict-alias      one launch passes the same memory to two written
                      parameters, one of them __restrict__
  divergent-barrier   a barrier under a branch or loop whose condition depends
                      on the thread: __syncthreads or a grid sync under a
                      condition that differs between threads of the block; a
                      warp collective (__syncwarp, __shfl*_sync, wmma) under one
                      that differs between lanes of a warp
  not-cooperative     a persistent kernel (an rprogram, or a kernel with a grid
                      sync or a spin on other blocks' flags) launched with <<<>>>
                      instead of cudaLaunchCooperativeKernel
  no-fallback         a cooperative launch with no other path for a device it
                      does not fit (an else branch, or a test of its status, or of
                      the flag a QCOOP-like macro sets, that guards other launches)
  not-stream-ordered  in qir_run_stream: a launch or copy not on the caller's
                      stream, or a call that blocks (cudaMemcpy, cudaMemset,
                      cudaMalloc, cudaFree, a synchronisation)

Arguments are compared as a base expression and a constant byte offset
(`(const float *)(m->arena + 1024)` is m->arena at 1024): two equal ones are
one buffer.  The generated text carries no tensor extents, so arguments at
different offsets are taken as different buffers.

--suite generates the corpus itself (onnx2qir/qopt/qcodegen from --bin): every
model of $ONNX_TESTS/models and light/, a sample of node tests, each through
three pipelines, and every .qir under test/lit that qcodegen -cuda accepts;
each generated file that audits clean passes.  It ends in
"N passed, N failed, N skipped".  Standard library only.
"""
import argparse
import concurrent.futures
import os
import re
import shutil
import subprocess
import sys
import tempfile

SMEM_STATIC_LIMIT = 48 * 1024

# ---------------------------------------------------------------- tokens
TOKEN_RE = re.compile(r"""
    (?P<nl>\n)
  | (?P<ws>[ \t\r\f\v]+)
  | (?P<pp>(?<![^\n])[ \t]*\#(?:\\\n|[^\n])*)
  | (?P<comment>/\*.*?\*/|//[^\n]*)
  | (?P<str>"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*')
  | (?P<num>0[xX][0-9a-fA-F]+[uUlL]*|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?[fFuUlL]*)
  | (?P<id>[A-Za-z_]\w*)
  | (?P<op><<<|>>>|>>=|<<=|->|\+\+|--|&&|\|\||[-+*/%&|^<>=!]=|<<|>>|::|[-+*/%&|^~!<>=?:;,.(){}\[\]])
  | (?P<bad>.)
""", re.S | re.X)


DATA_LINE = re.compile(r"(?:^[ \t]*[0-9][0-9, ]*,[ \t]*\n)+", re.M)


class Tok:
    __slots__ = ("kind", "text", "line")

    def __init__(self, kind, text, line):
        self.kind, self.text, self.line = kind, text, line

    def __repr__(self):
        return "%s@%d" % (self.text, self.line)


def tokenize(text):
    """Tokens of the C text (comments and preprocessor lines dropped) and the
    #define lines as (name, params or None, body)."""
    toks, macros = [], []
    line = 1
    # the constants' byte arrays: lines of numbers only, nothing to audit
    text = DATA_LINE.sub(lambda m: "\n" * m.group().count("\n"), text)
    for m in TOKEN_RE.finditer(text):
        kind = m.lastgroup
        s = m.group()
        if kind == "nl":
            line += 1
            continue
        if kind in ("ws", "comment", "pp"):
            if kind == "pp":
                d = re.match(r"\s*#\s*define\s+(\w+)(\(([^)]*)\))?\s*(.*)", s.replace("\\\n", " "), re.S)
                if d:
                    params = [p.strip() for p in d.group(3).split(",")] if d.group(2) else None
                    macros.append((d.group(1), params, d.group(4)))
            line += s.count("\n")
            continue
        toks.append(Tok(kind, s, line))
    return toks, macros


def text_of(toks):
    return " ".join(t.text for t in toks)


def pretty(toks):
    """Tokens as C text, for messages."""
    s = text_of(toks)
    s = re.sub(r" ?(->|::|\.) ?", r"\1", s)
    s = re.sub(r"([(\[]) ", r"\1", s)
    s = re.sub(r" ([)\],;])", r"\1", s)
    return s


def int_value(toks):
    """The integer a constant expression of literals and + - * / ( ) spells, else None."""
    s = "".join(t.text for t in toks)
    s = re.sub(r"(?<=\d)[uUlL]+\b", "", s)
    m = re.fullmatch(r"dim3\((.*)\)", s)
    if m:  # dim3(x[, y[, z]]): the product
        parts = m.group(1).split(",")
        vals = [int_value([Tok("num", p, 0)]) if re.fullmatch(r"\d+", p) else None for p in parts]
        if None in vals:
            return None
        r = 1
        for v in vals:
            r *= v
        return r
    if not re.fullmatch(r"[0-9+\-*/() ]+", s) or not s:
        return None
    try:
        return int(eval(s.replace("/", "//"), {"__builtins__": {}}))  # digits and operators only
    except Exception:
        return None


def split_top(toks, sep=","):
    """Splits a token list at `sep` outside brackets."""
    parts, cur, depth = [], [], 0
    for t in toks:
        if t.text in "([{":
            depth += 1
        elif t.text in ")]}":
            depth -= 1
        if t.text == sep and depth == 0:
            parts.append(cur)
            cur = []
        else:
            cur.append(t)
    parts.append(cur)
    return parts


def match_close(toks, i):
    """Index of the bracket closing the one at toks[i]."""
    pair = {"(": ")", "[": "]", "{": "}"}[toks[i].text]
    depth = 0
    for j in range(i, len(toks)):
        if toks[j].text == toks[i].text:
            depth += 1
        elif toks[j].text == pair:
            depth -= 1
            if depth == 0:
                return j
    return len(toks) - 1


# ---------------------------------------------------------------- statements
class Node:
    """A statement: kind is block, if, for, while, do or simple."""
    __slots__ = ("kind", "line", "toks", "cond", "init", "step", "body", "els", "items", "parent", "id")

    def __init__(self, kind, line):
        self.kind, self.line = kind, line
        self.toks = self.cond = self.init = self.step = self.body = self.els = None
        self.items = []
        self.parent = None
        self.id = 0


def parse_block(toks, i, end):
    """Statements of toks[i:end] as a list of nodes."""
    out = []
    while i < end:
        node, i = parse_stmt(toks, i, end)
        if node is not None:
            out.append(node)
    return out


def parse_stmt(toks, i, end):
    t = toks[i]
    if t.text == ";":
        return None, i + 1
    if t.text == "{":
        j = match_close(toks, i)
        n = Node("block", t.line)
        n.items = parse_block(toks, i + 1, j)
        return n, j + 1
    if t.text in ("if", "while", "switch") and i + 1 < end and toks[i + 1].text == "(":
        j = match_close(toks, i + 1)
        n = Node("if" if t.text == "if" else "while", t.line)
        n.cond = toks[i + 2:j]
        n.body, k = parse_stmt(toks, j + 1, end)
        if t.text == "if" and k < end and toks[k].text == "else":
            n.els, k = parse_stmt(toks, k + 1, end)
        return n, k
    if t.text == "for" and i + 1 < end and toks[i + 1].text == "(":
        j = match_close(toks, i + 1)
        parts = split_top(toks[i + 2:j], ";")
        n = Node("for", t.line)
        n.init, n.cond, n.step = (parts + [[], [], []])[:3]
        n.body, k = parse_stmt(toks, j + 1, end)
        return n, k
    if t.text == "do":
        n = Node("do", t.line)
        n.body, k = parse_stmt(toks, i + 1, end)
        if k < end and toks[k].text == "while" and toks[k + 1].text == "(":
            j = match_close(toks, k + 1)
            n.cond = toks[k + 2:j]
            k = j + 1
            if k < end and toks[k].text == ";":
                k += 1
        return n, k
    # a simple statement: up to `;` outside brackets (initialisers' braces included)
    j, depth = i, 0
    while j < end:
        x = toks[j].text
        if x in "([{":
            depth += 1
        elif x in ")]}":
            depth -= 1
            if depth < 0:
                break
        elif x == ";" and depth == 0:
            break
        j += 1
    n = Node("simple", t.line)
    n.toks = toks[i:j]
    return n, j + 1


def link(nodes, parent, counter):
    """Sets parent links and pre-order ids (the text order)."""
    for n in nodes:
        if n is None:
            continue
        n.parent = parent
        counter[0] += 1
        n.id = counter[0]
        kids = n.items if n.kind == "block" else [n.body, n.els]
        link([k for k in kids if k is not None], n, counter)


def walk(nodes):
    for n in nodes:
        if n is None:
            continue
        yield n
        if n.kind == "block":
            yield from walk(n.items)
        else:
            yield from walk([n.body, n.els])


# ---------------------------------------------------------------- top level
class Func:
    def __init__(self):
        self.name, self.line, self.kernel = "", 0, False
        self.bounds = None          # (T, B or None)
        self.params = []            # dicts: name, const, restrict, pointer
        self.body = []              # statement nodes
        self.body_toks = []


def top_level(toks):
    """Function definitions at file scope."""
    funcs = []
    i, n = 0, len(toks)
    start = 0
    while i < n:
        t = toks[i]
        if t.text == ";":
            start = i + 1
        elif t.text == "{":
            j = match_close(toks, i)
            head = toks[start:i]
            if head and head[-1].text == ")" and not any(x.text == "=" for x in head):
                f = function(head, toks, i, j)
                if f:
                    funcs.append(f)
                start = j + 1
            i = j + 1
            continue
        elif t.text in "([":
            i = match_close(toks, i) + 1
            continue
        i += 1
    return funcs


def function(head, toks, lb, rb):
    # the parameter list: the last parenthesised group of the head
    depth, open_i = 0, None
    for k in range(len(head) - 1, -1, -1):
        if head[k].text == ")":
            depth += 1
        elif head[k].text == "(":
            depth -= 1
            if depth == 0:
                open_i = k
                break
    if open_i is None or open_i == 0 or head[open_i - 1].kind != "id":
        return None
    f = Func()
    f.name = head[open_i - 1].text
    f.line = head[open_i - 1].line
    f.kernel = any(x.text == "__global__" for x in head)
    for k, x in enumerate(head):
        if x.text == "__launch_bounds__" and k + 1 < len(head) and head[k + 1].text == "(":
            e = match_close(head, k + 1)
            vals = [int_value(p) for p in split_top(head[k + 2:e])]
            f.bounds = (vals[0], vals[1] if len(vals) > 1 else None)
    for p in split_top(head[open_i + 1:len(head) - 1]):
        ids = [x for x in p if x.kind == "id"]
        if not ids or (len(p) == 1 and p[0].text == "void"):
            continue
        texts = [x.text for x in p]
        star = texts.index("*") if "*" in texts else len(texts)
        f.params.append({"name": ids[-1].text, "pointer": "*" in texts,
                         "const": "const" in texts[:star], "restrict": "__restrict__" in texts})
    f.body_toks = toks[lb + 1:rb]
    root = Node("block", toks[lb].line)   # the body, so that every statement has a parent block
    root.items = parse_block(toks, lb + 1, rb)
    link([root], None, [0])
    f.body = [root]
    return f


# ---------------------------------------------------------------- findings
class Audit:
    def __init__(self, path):
        self.path = path
        self.findings = []   # (line, kind, message)

    def add(self, line, kind, msg):
        self.findings.append((line, kind, msg))


# ---------------------------------------------------------------- kernels: barriers under thread-dependent branches
BLOCK, WARP, LANE = 1, 2, 4   # what a value may differ between: blocks, warps of a block, lanes of a warp
TYPE_WORDS = {"const", "volatile", "static", "unsigned", "signed", "int", "long", "short", "char", "float", "double",
              "bool", "auto", "size_t", "int8_t", "int16_t", "int32_t", "int64_t", "uint8_t", "uint16_t", "uint32_t",
              "uint64_t", "__half", "__nv_bfloat16", "half", "uint4", "float4", "float2", "__shared__", "register"}
ASSIGN_OPS = {"=", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "<<=", ">>="}
# collectives every thread of the block (or grid) must reach, and those of a warp
BLOCK_COLLECTIVES = re.compile(r"^(__syncthreads(_count|_and|_or)?|__barrier_sync)$")
WARP_COLLECTIVES = re.compile(r"^(__syncwarp|__shfl\w*_sync|__ballot_sync|__any_sync|__all_sync|__activemask|__match_\w+_sync|"
                              r"__reduce_\w+_sync|fill_fragment|load_matrix_sync|store_matrix_sync|mma_sync)$")


def _warp_uniform(m, threads):
    """Replacement for a comparison or division of threadIdx.x that is the
    same for every lane of a warp (blocks are whole warps, or one warp)."""
    op, num = m.group("op"), int(m.group("num"))
    if op == "/":
        return " __WARPID " if num % 32 == 0 else m.group()
    if op == ">>":
        return " __WARPID " if num >= 5 else m.group()
    # threadIdx.x OP num: always true when it covers the whole block
    if threads and ((op == "<" and num >= threads) or (op == "<=" and num >= threads - 1)):
        return " 1 "
    if (op in ("<", ">=") and num % 32 == 0) or (op in ("<=", ">") and (num + 1) % 32 == 0):
        return " __WARPID "
    return m.group()


TID_CAST = re.compile(r"\( (?:int|int32_t|int64_t|long|unsigned|uint32_t|unsigned int|long long) \) (threadIdx \. x)")
TID_PAREN = re.compile(r"\( (threadIdx \. x) \)")
TID_OP = re.compile(r"threadIdx \. x (?P<op>/|>>|<=|<|>=|>) (?P<num>\d+)[uUlL]*\b(?! \.)")


def expr_taint(toks, lookup, threads):
    """What the value of an expression may differ between; `lookup` gives a
    variable's bits."""
    if not toks:
        return 0
    s = " " + text_of(toks) + " "
    if "threadIdx" in s:
        s = TID_CAST.sub(r"\1", s)
        prev = None
        while prev != s:
            prev = s
            s = TID_PAREN.sub(r"\1", s)
        s = TID_OP.sub(lambda m: _warp_uniform(m, threads), s)
    bits = 0
    for w in re.findall(r"[A-Za-z_]\w*", s):
        if w == "threadIdx":
            bits |= WARP | LANE
        elif w == "__WARPID":
            bits |= WARP
        elif w == "blockIdx":
            bits |= BLOCK
        else:
            bits |= lookup(w)
    return bits


def is_decl(toks):
    return bool(toks) and (toks[0].text in TYPE_WORDS or (toks[0].kind == "id" and len(toks) > 1 and toks[1].kind == "id")
                           or (toks[0].text == "nvcuda"))


def assigned(toks):
    """(variable, value tokens, compound?, indexed?) for each assignment a
    simple statement makes (indexed: an element of an array is written)."""
    out = []
    if not toks:
        return out
    parts = split_top(toks) if is_decl(toks) else [toks]
    for part in parts:
        depth = 0
        for k, t in enumerate(part):
            if t.text in "([{":
                depth += 1
            elif t.text in ")]}":
                depth -= 1
            elif depth == 0 and t.text in ASSIGN_OPS:
                lhs = part[:k]
                name, indexed = None, False
                for x in lhs:
                    if x.text == "[":
                        indexed = True
                        break
                    if x.kind == "id" and x.text not in TYPE_WORDS:
                        name = x.text
                if name:
                    out.append((name, part[k + 1:], t.text != "=", indexed))
                break
    return out


def declared(toks):
    """(name, is memory) for each variable a declaration statement declares:
    memory is a pointer, a __shared__ array or a reference (their elements
    are not per-thread values)."""
    if not is_decl(toks):
        return []
    out = []
    shared = any(t.text == "__shared__" for t in toks)
    for part in split_top(toks):
        lhs = []
        for t in part:
            if t.text in ("=", "["):
                break
            lhs.append(t)
        ids = [x.text for x in lhs if x.kind == "id" and x.text not in TYPE_WORDS]
        if ids:
            out.append((ids[-1], shared or any(x.text in ("*", "&") for x in lhs)))
    return out


def collectives(toks):
    """(kind, spelling) of each collective the statement calls: block, warp or grid."""
    out = []
    txt = [t.text for t in toks]
    for k, w in enumerate(txt):
        if k + 1 < len(txt) and txt[k + 1] == "(":
            if BLOCK_COLLECTIVES.match(w):
                out.append(("block", w))
            elif WARP_COLLECTIVES.match(w):
                out.append(("warp", w))
            elif w == "sync" and k >= 2 and txt[k - 1] == ".":
                # cooperative_groups::this_grid().sync(), grid.sync()
                j = k - 2
                while j > 0 and txt[j] in (")", "(", "::") or (j > 0 and toks[j].kind == "id" and txt[j - 1] == "::"):
                    j -= 1
                out.append(("grid", "".join(txt[j:k + 3])))
    return out


def head(n):
    """A branch or loop's head, for messages."""
    if isinstance(n, tuple):
        return "else of " + head(n[1])
    if n.kind == "for":
        return "for (%s; %s; %s)" % (pretty(n.init or []), pretty(n.cond or []), pretty(n.step or []))
    return "%s (%s)" % (n.kind, pretty(n.cond or []))


class KernelFlow:
    """What each variable of a kernel, and each branch and loop, may differ
    between (a fixed point over the body), and the collectives under branches
    that differ between the threads that must reach them together."""
    NEED = {"block": WARP | LANE, "grid": BLOCK | WARP | LANE, "warp": LANE}
    WHAT = {"block": "the threads of a block", "grid": "the threads of the grid", "warp": "the lanes of a warp"}

    def __init__(self, f):
        self.f = f
        self.threads = f.bounds[0] if f.bounds else None
        self.env = {}       # (name, declaring node id) -> bits
        self.exits = {}     # loop node id -> bits of the branches a break/return leaves it under
        self.memory = set(p["name"] for p in f.params if p["pointer"])
        self.changed = False
        self.audit = None

    def key(self, scopes, name):
        for sc in reversed(scopes):
            if name in sc:
                return sc[name]
        return (name, 0)

    def bits(self, toks, scopes):
        return expr_taint(toks, lambda w: self.env.get(self.key(scopes, w), 0), self.threads)

    def join(self, key, b):
        if b & ~self.env.get(key, 0):
            self.env[key] = self.env.get(key, 0) | b
            self.changed = True

    def simple(self, n, toks, scopes, ctx, guards, loops):
        for name, is_mem in declared(toks):
            scopes[-1][name] = (name, n.id)
            if is_mem:
                self.memory.add((name, n.id))
        for name, val, compound, indexed in assigned(toks):
            key = self.key(scopes, name)
            mem = key in self.memory or name in self.memory and key[1] == 0
            if indexed and mem:
                continue     # an element of shared or global memory: not a per-thread value
            self.join(key, self.bits(val, scopes) | ctx)
        if toks and toks[0].text in ("break", "continue", "return") and loops:
            for lp in (loops if toks[0].text == "return" else loops[-1:]):
                b = ctx & ~lp[1]
                if b & ~self.exits.get(lp[0], 0):
                    self.exits[lp[0]] = self.exits.get(lp[0], 0) | b
                    self.changed = True
        if self.audit is not None:
            for kind, name in collectives(toks):
                bad = [g for g in guards if g[2] & self.NEED[kind]]
                if bad:
                    g = bad[0]   # the outermost: the branches inside it inherit what it differs between
                    self.audit.add(n.line, "divergent-barrier", "%s in kernel %s under `%s` (line %d), which differs between %s"
                                   % (name, self.f.name, head(g[0]), g[1], self.WHAT[kind]))

    def visit(self, nodes, scopes, ctx, guards, loops):
        for n in nodes:
            if n is None:
                continue
            if n.kind == "simple":
                self.simple(n, n.toks, scopes, ctx, guards, loops)
            elif n.kind == "block":
                self.visit(n.items, scopes + [{}], ctx, guards, loops)
            elif n.kind == "if":
                c = self.bits(n.cond, scopes)
                self.visit([n.body], scopes + [{}], ctx | c, guards + [(n, n.line, c)], loops)
                self.visit([n.els], scopes + [{}], ctx | c, guards + [(("else", n), n.line, c)], loops)
            else:   # a loop: its trip count may differ, and so may its exits
                inner = scopes + [{}]
                if n.init:
                    self.simple(n, n.init, inner, ctx, guards, loops)
                c = self.bits(n.cond or [], inner) | self.bits(n.step or [], inner) | self.exits.get(n.id, 0)
                for name, _, _, _ in assigned(n.init or []) + assigned(n.step or []):
                    self.join(self.key(inner, name), c)
                    c |= self.env.get(self.key(inner, name), 0)
                self.visit([n.body], inner, ctx | c, guards + [(n, n.line, c)], loops + [(n.id, ctx)])

    def run(self, audit):
        for _ in range(30):
            self.changed = False
            self.visit(self.f.body, [{}], 0, [], [])
            if not self.changed:
                break
        self.audit = audit
        self.visit(self.f.body, [{}], 0, [], [])


def check_barriers(f, audit):
    KernelFlow(f).run(audit)


def is_persistent(f):
    """An rprogram, or a kernel whose blocks wait on each other: a grid sync or
    a spin on volatile memory other blocks write."""
    if f.name.startswith("rprogram"):
        return True
    for n in walk(f.body):
        if n.kind == "simple" and any(k == "grid" for k, _ in collectives(n.toks)):
            return True
        if n.kind in ("while", "do") and any(t.text == "volatile" for t in (n.cond or [])):
            return True
    return False


# ---------------------------------------------------------------- host code
# calls that block the host (or run on the legacy default stream) in a stream-ordered run
BLOCKING_APIS = {"cudaMemcpy", "cudaMemset", "cudaMalloc", "cudaFree", "cudaDeviceSynchronize", "cudaStreamSynchronize"}
CHECKED_APIS = re.compile(r"^(cudaLaunchCooperativeKernel|cudaLaunchKernel|cudaFuncSetAttribute|cudaMemcpy\w*|cudaMemset\w*|cudaMalloc\w*|cudaDeviceSynchronize|cudaStreamSynchronize)$")


class Host:
    """The macros of the file: which wrap which runtime call, which check."""

    def __init__(self, macros):
        self.alias = {}       # macro -> runtime function it calls
        self.checkers = set()  # QCHECK-like: test a status against cudaSuccess
        self.launch_checkers = set()
        for name, params, body in macros:
            if params and "cudaSuccess" in body:
                self.checkers.add(name)
        for name, params, body in macros:
            m = re.match(r"\s*\(?\s*(cuda\w+)\s*\(", body)
            if params is not None and m and CHECKED_APIS.match(m.group(1)):
                self.alias[name] = m.group(1)
            if params == [""] or params == []:
                if re.search(r"cuda(GetLast|PeekAtLast)Error", body) and any(c in body for c in self.checkers):
                    self.launch_checkers.add(name)

    def api(self, word):
        return self.alias.get(word, word if CHECKED_APIS.match(word) else None)


def strip_casts(toks):
    """`((const float *)(m->arena + 1024))` -> tokens of `m->arena + 1024`."""
    toks = list(toks)
    while True:
        if len(toks) >= 2 and toks[0].text == "(" and match_close(toks, 0) == len(toks) - 1:
            toks = toks[1:-1]
            continue
        if toks and toks[0].text == "(":
            e = match_close(toks, 0)
            inner = [t.text for t in toks[1:e]]
            if inner and inner[-1] == "*" and all(x in TYPE_WORDS or x == "*" or re.match(r"^[A-Za-z_]\w*$", x) for x in inner) \
                    and e + 1 < len(toks):
                toks = toks[e + 1:]
                continue
        return toks


def buffer_of(toks):
    """(base text, byte offset) of a pointer argument."""
    t = strip_casts(toks)
    if len(t) >= 3 and t[-2].text == "+" and t[-1].kind == "num":
        base = t[:-2]
        if not any(x.text == "(" for x in base):   # no cast before the +: bytes of an unsigned char arena
            off = int_value([t[-1]])
            if off is not None:
                return pretty(base), off
    return pretty(t), 0


class Launch:
    def __init__(self):
        self.kernel, self.line, self.node = "", 0, None
        self.coop = False
        self.block = self.smem = None
        self.args = None   # token lists, one per parameter, or None when unknown


def first_operand(cond, k):
    """Whether the call at cond[k] runs whenever the condition is evaluated
    (it is not behind && or || or ?:)."""
    return not any(t.text in ("&&", "||", "?") for t in cond[:k])


def enclosing_call_open(toks, k):
    """Index of the `(` of the call whose argument list holds toks[k], or None."""
    depth = 0
    for j in range(k - 1, -1, -1):
        x = toks[j].text
        if x in ")]}":
            depth += 1
        elif x in "([{":
            if depth == 0:
                return j if x == "(" and j > 0 and toks[j - 1].kind == "id" else None
            depth -= 1
    return None


def enclosing_call(toks, k):
    """The identifier naming the call whose parentheses hold toks[k], or None."""
    j = enclosing_call_open(toks, k)
    return toks[j - 1].text if j is not None else None


def enclosing_call_args(toks, k):
    """The arguments (token lists) of the call whose argument list holds toks[k], or None."""
    j = enclosing_call_open(toks, k)
    return split_top(toks[j + 1:match_close(toks, j)]) if j is not None else None


def call_end(toks, k):
    """Index of the `)` closing the call at toks[k]."""
    return match_close(toks, k + 1) if k + 1 < len(toks) and toks[k + 1].text == "(" else k


def audit_host(f, kernels, host, audit):
    """Launches and runtime calls of one host function."""
    statements = [n for n in walk(f.body)]
    # every place tokens live: simple statements and conditions, in text order
    places = []
    for n in statements:
        if n.kind == "simple":
            places.append((n, n.toks, "stmt"))
        elif n.cond is not None:
            places.append((n, n.cond, "cond"))
        if n.kind == "for":
            places.append((n, n.init or [], "stmt"))
    launches, setters = [], []
    # the stream-ordered run: everything on its stream parameter, nothing blocking
    stream = "q_stream" if f.name == "qir_run_stream" else None

    def mentioned_later(var, node):
        for n2, toks2, _ in places:
            if n2.id > node.id and any(t.text == var for t in toks2):
                return True
        return False

    for n, toks, where in places:
        for k, t in enumerate(toks):
            if t.kind != "id":
                continue
            # kernel<<<grid, block[, smem]>>>(args)
            if k + 1 < len(toks) and toks[k + 1].text == "<<<":
                e = next((j for j in range(k + 2, len(toks)) if toks[j].text == ">>>"), None)
                if e is None:
                    continue
                cfg = split_top(toks[k + 2:e])
                L = Launch()
                L.kernel, L.line, L.node = t.text, t.line, n
                L.block = int_value(cfg[1]) if len(cfg) > 1 else None
                L.smem = int_value(cfg[2]) if len(cfg) > 2 else 0
                L.stream = text_of(cfg[3]) if len(cfg) > 3 else "0"
                if e + 1 < len(toks) and toks[e + 1].text == "(":
                    L.args = split_top(toks[e + 2:match_close(toks, e + 1)])
                    if L.args == [[]]:
                        L.args = []
                launches.append(L)
                check_launch_checked(L, n, host, audit)
                continue
            api = host.api(t.text)
            if not api or k + 1 >= len(toks) or toks[k + 1].text != "(":
                continue
            end = call_end(toks, k)
            args = split_top(toks[k + 2:end])
            # is the status tested?
            outer = enclosing_call(toks, k)
            nxt = toks[end + 1].text if end + 1 < len(toks) else ""
            prv = toks[k - 1].text if k > 0 else ""
            checked = outer in host.checkers or nxt in ("==", "!=") or prv in ("==", "!=") or \
                (k > 0 and toks[0].text == "return")
            var = None
            if not checked and prv == "=" and k >= 2 and toks[k - 2].kind == "id":
                var = toks[k - 2].text
                checked = mentioned_later(var, n)
            if not checked:
                audit.add(t.line, "unchecked-call", "the status of %s%s is not checked" %
                          (t.text, "" if api == t.text else " (%s)" % api))
            if stream and api in BLOCKING_APIS:
                audit.add(t.line, "not-stream-ordered", "%s calls %s%s, which blocks the host or ignores the caller's stream"
                          % (f.name, t.text, "" if api == t.text else " (%s)" % api))
            if api == "cudaFuncSetAttribute" and len(args) == 3 and text_of(args[1]) == "cudaFuncAttributeMaxDynamicSharedMemorySize":
                runs = where == "stmt" or first_operand(toks, k)
                if runs:
                    setters.append((n, pretty(strip_casts(args[0])), int_value(args[2])))
            if api == "cudaLaunchCooperativeKernel" and len(args) >= 5:
                L = Launch()
                kt = strip_casts(args[0])
                L.kernel = text_of(kt)
                L.line, L.node, L.coop = t.line, n, True
                L.block = int_value(args[2])
                L.smem = int_value(args[4])
                L.stream = text_of(args[5]) if len(args) > 5 else "0"
                L.args = cooperative_args(args[3], n, f)
                L.status_var = var
                L.in_cond = where == "cond"
                # QCOOP(launch, too_large, flag): a checker macro that sets a flag the
                # host tests afterwards (the fallback path) instead of failing
                wrapped = enclosing_call_args(toks, k) if outer in host.checkers else None
                if wrapped and len(wrapped) >= 3 and len(wrapped[-1]) == 1 and wrapped[-1][0].kind == "id":
                    L.status_var = wrapped[-1][0].text
                launches.append(L)

    for L in launches:
        k = kernels.get(L.kernel)
        if k is None:
            continue
        check_smem(L, setters, audit)
        if k.bounds and k.bounds[0] is not None and L.block is not None and L.block != k.bounds[0]:
            audit.add(L.line, "launch-bounds", "%s is launched with %d threads per block but declared __launch_bounds__(%d%s)"
                      % (L.kernel, L.block, k.bounds[0], ", %d" % k.bounds[1] if k.bounds[1] else ""))
        if L.args is not None:
            check_alias(L, k, audit)
        if is_persistent(k) and not L.coop:
            audit.add(L.line, "not-cooperative", "%s is a persistent kernel (%s) launched with <<<>>>: its blocks may not be co-resident; "
                      "launch it with cudaLaunchCooperativeKernel" % (L.kernel, "an rprogram" if k.name.startswith("rprogram")
                                                                        else "its blocks wait on each other"))
        if stream and getattr(L, "stream", stream) != stream:
            audit.add(L.line, "not-stream-ordered", "%s launches %s on stream %s, not the caller's %s" % (f.name, L.kernel, L.stream, stream))
        if L.coop and not has_fallback(L, places):
            audit.add(L.line, "no-fallback", "the cooperative launch of %s has no other path for a device where its grid does not fit"
                      % L.kernel)


def check_launch_checked(L, n, host, audit):
    """The statement after a <<<>>> launch checks cudaGetLastError."""
    p = n.parent
    sibs = p.items if p is not None and p.kind == "block" else None
    nxt = None
    if sibs is not None:
        i = sibs.index(n)
        nxt = sibs[i + 1] if i + 1 < len(sibs) else None
    ok = False
    if nxt is not None and nxt.kind == "simple" and nxt.toks:
        words = [t.text for t in nxt.toks]
        ok = words[0] in host.launch_checkers or (words[0] in host.checkers and
                                                   any(w in ("cudaGetLastError", "cudaPeekAtLastError") for w in words))
    if not ok:
        audit.add(L.line, "unchecked-launch", "the launch of %s is not followed by QCHECK_LAUNCH()" % L.kernel)


def cooperative_args(argtoks, node, f):
    """The argument expressions of a cooperative launch: q_args[] = {&q_a0, ...}
    and each q_aN's initialiser, looked up in the host function before it."""
    name = text_of(strip_casts(argtoks))
    inits = {}
    for n in walk(f.body):
        if n.id >= node.id and n is not node:
            break
        if n.kind == "simple":
            for var, val, _, _ in assigned(n.toks):
                inits[var] = val
    arr = inits.get(name)
    if not arr or arr[0].text != "{":
        return None
    out = []
    for item in split_top(arr[1:match_close(arr, 0)]):
        words = [t for t in item if t.text != "&"]
        if len(words) == 1 and words[0].text in inits:
            out.append(inits[words[0].text])
        else:
            return None
    return out


def dominates(setter_node, launch_node):
    """The setter statement runs before the launch on every path: it comes
    first, in the launch's block or one enclosing it."""
    if setter_node.id >= launch_node.id:
        return False
    anc = set()
    p = launch_node.parent
    while p is not None:
        anc.add(p.id)
        p = p.parent
    sp = setter_node.parent
    return sp is None or (sp.id in anc and sp.kind == "block")


def check_smem(L, setters, audit):
    if L.smem is None or L.smem <= SMEM_STATIC_LIMIT:
        return
    for node, kern, val in setters:
        if kern == L.kernel and val is not None and val >= L.smem and dominates(node, L.node):
            return
    audit.add(L.line, "dynamic-smem", "%s is launched with %d bytes of dynamic shared memory (over 48 KiB) and no "
              "cudaFuncSetAttribute(%s, cudaFuncAttributeMaxDynamicSharedMemorySize, >= %d) before it"
              % (L.kernel, L.smem, L.kernel, L.smem))


def check_alias(L, k, audit):
    ptr = [(i, p) for i, p in enumerate(k.params) if p["pointer"]]
    if len(L.args) != len(k.params):
        return
    bufs = {i: buffer_of(L.args[i]) for i, _ in ptr}
    for a in range(len(ptr)):
        for b in range(a + 1, len(ptr)):
            ia, pa = ptr[a]
            ib, pb = ptr[b]
            if bufs[ia] != bufs[ib]:
                continue
            written = [p for p in (pa, pb) if not p["const"]]
            where = "%s + %d" % bufs[ia]
            if len(written) == 1:
                ro, w = (pa, pb) if pa["const"] else (pb, pa)
                audit.add(L.line, "readonly-alias", "%s gets %s both as const %s%s and as written %s: a read-only parameter "
                          "on memory the launch writes" % (L.kernel, where, ro["name"], " __restrict__" if ro["restrict"] else "", w["name"]))
            elif len(written) == 2 and (pa["restrict"] or pb["restrict"]):
                audit.add(L.line, "restrict-alias", "%s gets %s as two written __restrict__ parameters, %s and %s"
                          % (L.kernel, where, pa["name"], pb["name"]))


def has_fallback(L, places):
    """A cooperative launch has another path: it sits in the then-branch (or
    the condition) of an if with an else, or its status, kept in a variable,
    guards a later if."""
    n = L.node
    if getattr(L, "in_cond", False) and n.kind == "if" and n.els is not None:
        return True
    child, p = n, n.parent
    while p is not None:
        if p.kind == "if" and p.body is child and p.els is not None:
            return True
        child, p = p, p.parent
    var = getattr(L, "status_var", None)
    if var:
        for n2, toks2, where in places:
            if n2.id > n.id and where == "cond" and n2.kind == "if" and any(t.text == var for t in toks2):
                return True
    return False


# ---------------------------------------------------------------- one file
def audit_text(path, text):
    audit = Audit(path)
    toks, macros = tokenize(text)
    funcs = top_level(toks)
    host = Host(macros)
    kernels = {f.name: f for f in funcs if f.kernel}
    for f in funcs:
        if f.kernel:
            check_barriers(f, audit)
        else:
            audit_host(f, kernels, host, audit)
    audit.findings.sort()
    return audit


def audit_file(path):
    with open(path, encoding="utf-8", errors="replace") as fh:
        return audit_text(path, fh.read())


def report(audit, out=sys.stdout, limit=None):
    lines = ["%s:%d: audit: %s: %s" % (audit.path, line, kind, msg) for line, kind, msg in audit.findings]
    for l in lines[:limit]:
        print(l, file=out)
    if limit is not None and len(lines) > limit:
        print("%s: audit: ... and %d more" % (audit.path, len(lines) - limit), file=out)


# ---------------------------------------------------------------- the corpus (--suite)
PIPELINES = [("roller", "-canonicalize -roller"), ("welder", "-canonicalize -roller -welder"),
             ("rammer", "-canonicalize -roller -rammer"),
             ("full", "-canonicalize -roller -welder -rammer -grinder")]
NODE_SAMPLE = ["test_add", "test_matmul_2d", "test_conv_with_strides_padding", "test_softmax_axis_1", "test_relu",
               "test_gemm_default_no_bias", "test_reduce_mean_default_axes_keepdims_example", "test_maxpool_2d_pads",
               "test_cast_FLOAT_to_FLOAT16", "test_gather_0", "test_transpose_default", "test_concat_3d_axis_0",
               "test_lstm_defaults", "test_gru_defaults", "test_layer_normalization_4d_axis0", "test_einsum_batch_matmul",
               "test_top_k", "test_cumsum_1d", "test_averagepool_2d_pads", "test_batchnorm_epsilon", "test_loop11",
               "test_range_float_type_positive_delta_expanded", "test_resize_upsample_scales_linear",
               "test_instancenorm_example"]


def run(cmd, timeout=300):
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout)
        return p.returncode, p.stdout.decode("utf-8", "replace")
    except subprocess.TimeoutExpired:
        return 124, "timed out after %ds" % timeout
    except OSError as e:
        return 127, str(e)


def suite_job(job):
    """Generates one CUDA file and audits it: (label, status, lines)."""
    label, kind, src, passes, wd, binpath, scripts = job
    os.makedirs(wd, exist_ok=True)
    if kind == "gen":   # test/transformers' generator (Debian's python3 with onnx and numpy)
        gen, model = src
        src = os.path.join(wd, "model")
        rc, msg = run(["/usr/bin/python3", gen, "--kind", model, "--size", "small", "--out", src])
        if rc != 0:
            return label, "skip", ["gen_transformers.py: " + (msg.strip().splitlines() or [""])[-1]]
        kind = "onnx"
    if kind == "onnx":
        sys.path.insert(0, scripts)
        sys.dont_write_bytecode = True   # no __pycache__ next to the scripts
        import conformance as conf
        try:
            inputs, _ = conf.model_io(os.path.join(src, "model.onnx"))
        except Exception as e:
            return label, "skip", ["cannot read model: %s" % e]
        ds = os.path.join(src, "test_data_set_0")
        qir = os.path.join(wd, "m.qir")
        feeds = {}
        files = sorted((f for f in os.listdir(ds) if re.match(r"input_\d+\.pb$", f)), key=lambda f: int(f[6:-3])) \
            if os.path.isdir(ds) else []
        for k, fn in enumerate(files):
            if k < len(inputs):
                feeds[inputs[k]] = os.path.join(ds, fn)
        binds, rc, msg = [], 1, ""
        for _ in range(10):   # as backend-check.sh imports: --shape from the data, --bind where asked
            cmd = [os.path.join(binpath, "onnx2qir"), "-o", qir]
            for name, path in feeds.items():
                if name in binds:
                    cmd += ["--bind", "%s=%s" % (name, path)]
                    continue
                dims = conf.tensor_dims(path)
                if dims is not None:
                    cmd += ["--shape", "%s=%s" % (name, ",".join(str(d) for d in dims))]
            rc, msg = run(cmd + [os.path.join(src, "model.onnx")])
            if rc == 0:
                break
            wanted = [x for x in re.findall(r"--bind (\S+)=FILE\.pb", msg) if x in feeds and x not in binds]
            if not wanted:
                break
            binds += wanted
        if rc != 0:
            return label, "skip", ["onnx2qir: " + (msg.strip().splitlines() or [""])[0]]
    else:
        qir = src
    if passes:
        opt = os.path.join(wd, "p.qir")
        rc, msg = run([os.path.join(binpath, "qopt")] + passes.split() + [qir, "-o", opt])
        if rc != 0:
            return label, "fail" if kind == "onnx" else "skip", ["qopt: " + (msg.strip().splitlines() or [""])[0]]
        qir = opt
    cu = os.path.join(wd, "m.cu")
    rc, msg = run([os.path.join(binpath, "qcodegen"), "-cuda", "-main", qir, "-o", cu])
    if rc != 0:
        # a lit input may be an error test: what qcodegen refuses is not audited
        return label, "fail" if kind == "onnx" else "skip", ["qcodegen: " + (msg.strip().splitlines() or [""])[0]]
    a = audit_file(cu)
    if not os.environ.get("AUDIT_KEEP"):
        shutil.rmtree(wd, ignore_errors=True)
    if not a.findings:
        return label, "pass", []
    lines = ["%s:%d: audit: %s: %s" % (label, line, kind, msg) for line, kind, msg in a.findings]
    return label, "fail", lines


def suite(args):
    top = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    binpath = os.path.abspath(args.bin or os.environ.get("QIR_BIN", os.path.join(top, "build", "bin")))
    tests = args.tests or os.environ.get("ONNX_TESTS", "")
    counts = {"pass": 0, "fail": 0, "skip": 0}
    if not tests or not os.path.isdir(tests):
        print("SKIPPED: ONNX tests not found (set ONNX_TESTS)")
        print("0 passed, 0 failed, 1 skipped")
        return 0
    for tool in ("onnx2qir", "qopt", "qcodegen"):
        if not os.access(os.path.join(binpath, tool), os.X_OK):
            print("audit-cuda: %s not found in %s (build first, or set QIR_BIN)" % (tool, binpath))
            return 1
    tmp = args.keep or tempfile.mkdtemp(prefix="qir-audit-")
    if args.keep:
        os.environ["AUDIT_KEEP"] = "1"
    scripts = os.path.join(top, "scripts")
    jobs = []
    onnx = []
    for folder in ("models", "light"):
        base = os.path.join(tests, folder)
        if os.path.isdir(base):
            onnx += [(folder, n) for n in sorted(os.listdir(base)) if os.path.isfile(os.path.join(base, n, "model.onnx"))]
    for n in NODE_SAMPLE:   # node/ is the quick set, node-all/ the whole ONNX node suite
        folder = next((f for f in ("node", "node-all") if os.path.isfile(os.path.join(tests, f, n, "model.onnx"))), None)
        if folder:
            onnx.append((folder, n))
    for folder, name in onnx:
        for pname, passes in PIPELINES:
            label = "%s/%s/%s" % (folder, name, pname)
            if args.filter in label:
                jobs.append((label, "onnx", os.path.join(tests, folder, name), passes, os.path.join(tmp, label),
                             binpath, scripts))
    gen = os.path.join(top, "test", "transformers", "gen_transformers.py")
    have_onnx = os.path.isfile(gen) and run(["/usr/bin/python3", "-c", "import onnx, numpy"], timeout=60)[0] == 0
    for model in ("bert", "vit"):
        for pname, passes in PIPELINES:
            label = "transformers/%s_small/%s" % (model, pname)
            if args.filter not in label:
                continue
            if have_onnx:
                jobs.append((label, "gen", (gen, model), passes, os.path.join(tmp, label), binpath, scripts))
            else:
                counts["skip"] += 1
    lit = os.path.join(top, "test", "lit")
    for d, _, files in sorted(os.walk(lit)):
        for fn in sorted(files):
            if fn.endswith(".qir"):
                rel = os.path.relpath(os.path.join(d, fn), lit)
                label = "lit/" + rel
                if args.filter in label:
                    jobs.append((label, "qir", os.path.join(d, fn), "", os.path.join(tmp, label), binpath, scripts))
    kinds = {}
    try:
        with concurrent.futures.ProcessPoolExecutor(max_workers=max(1, args.j)) as ex:
            for label, status, lines in ex.map(suite_job, jobs, chunksize=4):
                counts[status] += 1
                if status == "fail":
                    print("FAIL: %s: %d finding(s)" % (label, len(lines)))
                    for l in lines[:args.show]:
                        print("  " + l)
                    if len(lines) > args.show:
                        print("  ... and %d more" % (len(lines) - args.show))
                    for l in lines:
                        m = re.search(r": audit: ([\w-]+):", l)
                        if m:
                            kinds[m.group(1)] = kinds.get(m.group(1), 0) + 1
                elif args.verbose:
                    print("%s: %s%s" % ("PASS" if status == "pass" else "SKIPPED", label, (": " + lines[0]) if lines else ""))
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    if kinds:
        print("findings by kind: " + ", ".join("%s %d" % kv for kv in sorted(kinds.items())))
    print("%d passed, %d failed, %d skipped" % (counts["pass"], counts["fail"], counts["skip"]))
    return 1 if counts["fail"] else 0


def main():
    ap = argparse.ArgumentParser(prog="audit-cuda.py", description="static audit of qcodegen's CUDA")
    ap.add_argument("files", nargs="*")
    ap.add_argument("--suite", action="store_true", help="generate the corpus and audit it")
    ap.add_argument("-j", type=int, default=2)
    ap.add_argument("--bin", help="the tools (default $QIR_BIN or build/bin)")
    ap.add_argument("--tests", help="the ONNX tests (default $ONNX_TESTS)")
    ap.add_argument("--keep", help="keep the generated files under this directory")
    ap.add_argument("--filter", default="", help="only corpus entries whose label holds this")
    ap.add_argument("--show", type=int, default=5, help="findings shown per failing corpus entry")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()
    if args.suite:
        return suite(args)
    if not args.files:
        ap.error("no files (or --suite)")
    status = 0
    for path in args.files:
        try:
            a = audit_file(path)
        except OSError as e:
            print("%s: audit: error: %s" % (path, e.strerror), file=sys.stderr)
            status = 1
            continue
        report(a)
        if a.findings:
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
