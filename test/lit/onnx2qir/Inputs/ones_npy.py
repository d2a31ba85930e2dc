"""Writes a float32 .npy of ones: ones_npy.py OUT.npy D0 D1 ..."""
import sys

shape = tuple(int(d) for d in sys.argv[2:])
n = 1
for d in shape:
    n *= d
header = ("{'descr': '<f4', 'fortran_order': False, 'shape': %s, }" % (shape,)).encode()
header += b" " * (63 - (10 + len(header)) % 64) + b"\n"
with open(sys.argv[1], "wb") as f:
    f.write(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header + b"\x00\x00\x80\x3f" * n)
