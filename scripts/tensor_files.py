"""tensor_files.py: the tensor files the test drivers compare, read with
their own code (not qir's): the .npy a qcodegen program writes and the ONNX
TensorProto .pb a test ships.  Each reader returns (dims, values, code):
values as Python numbers, code the struct letter of their kind ("f" for every
float once decoded, "q" for an exact narrow integer type).  Standard library
only; the protobuf wire format is scripts/conformance.py's."""
import re
import struct

import conformance as conf

NPY = {"f8": ("d", 8), "f4": ("f", 4), "f2": ("e", 2), "i8": ("q", 8), "i4": ("i", 4), "i2": ("h", 2), "i1": ("b", 1),
       "u8": ("Q", 8), "u4": ("I", 4), "u2": ("H", 2), "u1": ("B", 1), "b1": ("?", 1), "V2": ("H", 2)}
ONNX = {1: "f", 2: "B", 3: "b", 4: "H", 5: "h", 6: "i", 7: "q", 9: "?", 10: "e", 11: "d", 12: "I", 13: "Q", 16: "H"}


# The narrow types, decoded from ONNX's bit layouts by this script's own code
# (not qir's): the programs write one byte per element under the .npy record
# descr [('NAME', '|u1')]; ONNX packs 4-/2-bit elements in raw_data.
def _f8(b, exp_bits, bias, fnuz, has_inf):
    man_bits = 7 - exp_bits
    if fnuz and b == 0x80:
        return float("nan")
    s = -1.0 if b & 0x80 else 1.0
    e = (b >> man_bits) & ((1 << exp_bits) - 1)
    m = b & ((1 << man_bits) - 1)
    top = (1 << exp_bits) - 1
    if not fnuz:
        if has_inf and e == top:
            return s * float("inf") if m == 0 else float("nan")
        if not has_inf and e == top and m == (1 << man_bits) - 1:
            return float("nan")
    if e == 0:
        return s * m / (1 << man_bits) * 2.0 ** (1 - bias)
    return s * (1 + m / (1 << man_bits)) * 2.0 ** (e - bias)


def _f4e2m1(x):
    s = -1.0 if x & 8 else 1.0
    e, m = (x >> 1) & 3, x & 1
    return s * (m * 0.5 if e == 0 else (1 + m / 2) * 2.0 ** (e - 1))


# qir name -> (ONNX data type, bits, decoder of the element's bits, exact?)
NARROW = {
    "f8e4m3fn": (17, 8, lambda b: _f8(b, 4, 7, False, False), False),
    "f8e4m3fnuz": (18, 8, lambda b: _f8(b, 4, 8, True, False), False),
    "f8e5m2": (19, 8, lambda b: _f8(b, 5, 15, False, True), False),
    "f8e5m2fnuz": (20, 8, lambda b: _f8(b, 5, 16, True, False), False),
    "u4": (21, 4, lambda x: x, True),
    "i4": (22, 4, lambda x: x - 16 if x & 8 else x, True),
    "f4e2m1": (23, 4, _f4e2m1, False),
    "f8e8m0": (24, 8, lambda b: float("nan") if b == 0xFF else 2.0 ** (b - 127), False),
    "u2": (25, 2, lambda x: x, True),
    "i2": (26, 2, lambda x: x - 4 if x & 2 else x, True),
}
NARROW_BY_ONNX = {v[0]: k for k, v in NARROW.items()}


def read_npy(path):
    b = open(path, "rb").read()
    if b[:6] != b"\x93NUMPY":
        raise ValueError("not a .npy file")
    hl = struct.unpack("<H", b[8:10])[0] if b[6] == 1 else struct.unpack("<I", b[8:12])[0]
    start = (10 if b[6] == 1 else 12) + hl
    hdr = b[start - hl:start].decode("latin1")
    rec = re.search(r"'descr':\s*\[\('(\w+)',\s*'[|<]([iu])1'\)\]", hdr)
    if rec:  # a narrow type, one byte per element
        bits, dec, exact = NARROW[rec.group(1)][1:]
        shape = [int(x) for x in re.search(r"'shape':\s*\(([^)]*)\)", hdr).group(1).replace(",", " ").split()]
        n = 1
        for d in shape:
            n *= d
        return shape, [dec(x & ((1 << bits) - 1)) for x in b[start:start + n]], "q" if exact else "f"
    descr = re.search(r"'descr':\s*'([<|=>])(\w+)'", hdr).group(2)
    shape = [int(x) for x in re.search(r"'shape':\s*\(([^)]*)\)", hdr).group(1).replace(",", " ").split()]
    code, size = NPY[descr]
    n = 1
    for d in shape:
        n *= d
    vals = struct.unpack("<%d%s" % (n, code), b[start:start + n * size])
    if descr == "V2":  # bfloat16 bits
        vals = [struct.unpack("<f", struct.pack("<I", v << 16))[0] for v in vals]
    return shape, list(vals), code


def read_pb(path):
    b = open(path, "rb").read()
    dims, dtype, raw, typed = [], 0, None, []
    for f, w, v in conf._fields(b):
        if f == 1:
            if w == 0:
                dims.append(v)
            else:
                i = 0
                while i < len(v):
                    d, i = conf._varint(v, i)
                    dims.append(d)
        elif f == 2:
            dtype = v
        elif f == 9:
            raw = v
        elif f in (4, 10):
            c = "f" if f == 4 else "d"
            if w == 2:
                typed += struct.unpack("<%d%s" % (len(v) // struct.calcsize(c), c), v)
            else:
                typed.append(struct.unpack("<" + c, v)[0])
        elif f in (5, 7, 11):
            if w == 2:
                i = 0
                while i < len(v):
                    x, i = conf._varint(v, i)
                    typed.append(x)
            else:
                typed.append(v)
    if dtype in NARROW_BY_ONNX:
        bits, dec, exact = NARROW[NARROW_BY_ONNX[dtype]][1:]
        packed = raw if raw is not None else bytes(x & 0xFF for x in typed)
        per = 8 // bits
        n = 1
        for d in dims:
            n *= d
        vals = [dec((packed[i // per] >> (bits * (i % per))) & ((1 << bits) - 1)) for i in range(n)]
        return dims, vals, "q" if exact else "f"
    code = ONNX.get(dtype)
    if code is None:
        raise ValueError("unsupported ONNX type %d" % dtype)
    n = 1
    for d in dims:
        n *= d
    if raw is not None:
        vals = list(struct.unpack("<%d%s" % (n, code), raw))
    else:
        vals = typed
        if code in "bhiq":  # varints are two's complement 64-bit
            vals = [x - (1 << 64) if x >= 1 << 63 else x for x in vals]
        if code == "e" or dtype == 16:  # f16/bf16 bits in int32_data
            vals = [struct.unpack("<e", struct.pack("<H", x & 0xFFFF))[0] if code == "e" else x for x in vals]
    if dtype == 16:
        vals = [struct.unpack("<f", struct.pack("<I", v << 16))[0] for v in vals]
        code = "f"
    return dims, vals, code
