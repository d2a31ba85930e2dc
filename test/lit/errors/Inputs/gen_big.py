"""Writes large or deeply nested .qir text to stdout for the limit tests."""
import sys

kind = sys.argv[1]
n = int(sys.argv[2])
if kind == "regions":          # n nested `if` regions
    print("module @m {\n  %c = input : bool[]")
    for _ in range(n):
        print("  if %c : () {")
    for _ in range(n):
        print("yield\n} else {\nyield\n}")
    print("output %c\n}")
elif kind == "attrs":          # an attribute list nested n deep
    print("module @m {\n  %x = input {a = " + "[" * n + "]" * n + "} : f32[1]\n  output %x\n}")
elif kind in ("sum", "not", "neg"):  # an expression n operators deep
    body = {"sum": " + ".join(["i"] * n), "not": "!" * n + "i", "neg": "-" * n + "i"}[kind]
    print("module @m {\n  %y = compute [i:2] (" + body + ") : i64[2]\n  output %y\n}")
elif kind == "long":           # n ops, an n-operand op and an n-element constant
    print("module @m {\n  %x0 = input : f32[2]")
    for i in range(n):
        print(f"  %x{i + 1} = relu %x{i} : f32[2]")
    print("  %s = sum " + ", ".join(f"%x{i}" for i in range(n)) + " : f32[2]")
    print("  %c = const dense<[" + ", ".join(str(i) for i in range(n)) + f"]> : i32[{n}]")
    print("  output %s\n  output %c\n}")
