#!/usr/bin/env python3
"""count-launches.py PROGRAM.c [ARGS...]: counts what the qir_run of a C
program from `qcodegen -c -main` does per inference, as the generated code
does it: kernel launches, device-to-device copies, device-to-host reads (each
a host round trip: it waits for the device) and host-to-device writes.  A
device-resident loop/if (the C driver of a #device plan) counts as the one
launch CUDA/HIP make for it (its phases are counted apart: on a GPU they run
inside that launch).  Writes an instrumented copy next to PROGRAM.c, builds it
with cc -O1, runs it with ARGS (its --in/--out options) and prints

  launches N  phases-in-device-loops N  d2d-copies N  d2h-reads N  h2d-writes N  (device-side ctl reads N)

(the last: the C driver reading a device loop's counter and conditions, which
on a GPU every block reads inside the kernel).
"""
import os
import re
import subprocess
import sys

src = sys.argv[1]
text = open(src).read().split("\n")
kernels = set(re.findall(r"^static void (\w+)\(", "\n".join(text), re.M))
out = []
in_run = False
depth_dev = []   # brace depth at which each open device-resident block started
depth = 0
for line in text:
    if line.startswith("QAPI int qir_run("):
        in_run = True
    if in_run:
        stripped = line.strip()
        m = re.match(r"(\w+)\(.*\);$", stripped)
        pre = ""
        if "device-resident (#device" in stripped:
            pre = "q_n[0]++; "
            depth_dev.append(depth)
        elif m and m.group(1) in kernels:
            pre = "q_n[1]++; " if depth_dev else "q_n[0]++; "
        for call, slot in (("q_d2d(", 2), ("q_d2h(", 3), ("q_h2d(", 4)):
            if call in stripped and "as every block reads it" in stripped:
                pre += "q_n[5]++; "   # the C driver of a device loop reading ctl: device-side on a GPU
            elif call in stripped:
                pre += "q_n[%d]++; " % slot
        if pre:
            line = line[: len(line) - len(line.lstrip())] + pre + line.lstrip()
        depth += line.count("{") - line.count("}")
        while depth_dev and depth < depth_dev[-1]:
            depth_dev.pop()
        if line == "}":
            in_run = False
    out.append(line)
prelude = ("#include <stdio.h>\n#include <stdlib.h>\nstatic long q_n[6];\n"
           "static void q_n_print(void) { fprintf(stderr, \"launches %ld  phases-in-device-loops %ld  d2d-copies %ld  d2h-reads %ld  h2d-writes %ld  (device-side ctl reads %ld)\\n\", q_n[0], q_n[1], q_n[2], q_n[3], q_n[4], q_n[5]); }\n"
           "__attribute__((constructor)) static void q_n_init(void) { atexit(q_n_print); }\n")
inst = os.path.splitext(src)[0] + ".count.c"
with open(inst, "w") as f:
    f.write(prelude + "\n".join(out))
exe = os.path.abspath(os.path.splitext(src)[0] + ".count")
subprocess.run([os.environ.get("CC", "cc"), "-O1", "-o", exe, inst, "-lm"], check=True)
r = subprocess.run([exe] + sys.argv[2:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
lines = [l for l in r.stderr.splitlines() if l.startswith("launches ")]
print(lines[-1] if lines else r.stderr.strip())
sys.exit(r.returncode)
