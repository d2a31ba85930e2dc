#!/usr/bin/env python3
"""smem_vs_kernel.py PLANNED.qir KERNELS.cu: Roller's `smem` for each SIMT
#tile plan against the shared memory qcodegen's kernel for that plan takes
(its comment: "tiled: block [..] thread [..] rstep [..] ... smem NB").  A
kernel that takes more than the plan said (5% slack for row padding) runs at
a lower occupancy than Roller modelled: on an H100, one f32 matmul's plan
said 50752 bytes, its kernel (two cp.async stages) took 111104, two blocks
per SM instead of four, and it ran 3x slower than the plan ranked below it.
Prints one line per plan and a summary; exit 1 on any mismatch."""
import re
import sys


def ints(s):
    return tuple(int(x) for x in re.findall(r"-?\d+", s))


plans = {}
for line in open(sys.argv[1]):
    m = re.search(r"#tile\{([^}]*)\}", line)
    if not m or "mma = " in m.group(1) or "rsplit" in m.group(1):
        continue
    d = m.group(1)
    get = lambda k: re.search(r"\b%s = (\[[^\]]*\]|\d+)" % k, d).group(1)
    plans[(ints(get("block")), ints(get("thread")), ints(get("rstep")))] = int(get("smem"))
bad = n = 0
for line in open(sys.argv[2]):
    m = re.search(r"tiled: block \[([^\]]*)\] thread \[([^\]]*)\] rstep \[([^\]]*)\].* smem (\d+)B", line)
    if not m:
        continue
    key = (ints(m.group(1)), ints(m.group(2)), ints(m.group(3)))
    if key not in plans:
        continue
    n += 1
    kernel, plan = int(m.group(4)), plans[key]
    ok = kernel <= plan * 1.05
    bad += not ok
    print("block %s rstep %s: plan smem %d, kernel %d %s" % (list(key[0]), list(key[2]), plan, kernel, "ok" if ok else "MORE THAN PLANNED"))
print("%d plans, %d kernels take more shared memory than planned" % (n, bad))
sys.exit(1 if bad or not n else 0)
