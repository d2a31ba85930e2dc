"""Writes ONNX TensorProtos of 4- and 2-bit elements, in counts that leave the
last byte partly padding, in each of the three encodings ONNX allows:

    packed_pb.py DIR   ->  DIR/{raw,packed,unpacked}/{a,b,c,d,e}.pb, DIR/short/a.pb

raw: the packed bytes in raw_data; packed: int32_data, one packed byte per
entry, as one length-delimited field (what onnx.proto's [packed = true] and
ONNX's own test data use); unpacked: one int32_data field per entry.
short/a.pb says 5 int4 elements but holds 2 bytes (4 elements).
Element i lives in bits [w*(i%per), w*(i%per+1)) of byte i/per, as ONNX packs."""
import os
import sys

# name, ONNX data_type, bits, the codes (two's complement for signed types)
TENSORS = [
    ("a", 22, 4, [1, -8, 7, -1, 3]),           # int4[5]: 3 bytes
    ("b", 25, 2, [0, 1, 2, 3, 3, 2, 1]),       # uint2[7]: 2 bytes
    ("c", 23, 4, [0x2, 0xF, 0x7]),             # float4e2m1[3]: 1.0, -6.0, 6.0
    ("d", 26, 2, [-2, 1, -1, 0, 1]),           # int2[5]: 2 bytes
    ("e", 21, 4, [9]),                         # uint4[1]: 1 byte
]


def varint(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


def key(field, wire):
    return varint(field << 3 | wire)


def packed_bytes(bits, codes):
    per = 8 // bits
    out = bytearray((len(codes) + per - 1) // per)
    for i, c in enumerate(codes):
        out[i // per] |= (c & ((1 << bits) - 1)) << (bits * (i % per))
    return bytes(out)


def tensor(data_type, bits, codes, encoding):
    head = key(1, 0) + varint(len(codes)) + key(2, 0) + varint(data_type)
    data = packed_bytes(bits, codes)
    if encoding == "raw":
        return head + key(9, 2) + varint(len(data)) + data
    if encoding == "packed":
        body = b"".join(varint(b) for b in data)
        return head + key(5, 2) + varint(len(body)) + body
    return head + b"".join(key(5, 0) + varint(b) for b in data)


for encoding in ("raw", "packed", "unpacked"):
    d = os.path.join(sys.argv[1], encoding)
    os.makedirs(d, exist_ok=True)
    for name, data_type, bits, codes in TENSORS:
        with open(os.path.join(d, name + ".pb"), "wb") as f:
            f.write(tensor(data_type, bits, codes, encoding))

os.makedirs(os.path.join(sys.argv[1], "short"), exist_ok=True)
with open(os.path.join(sys.argv[1], "short", "a.pb"), "wb") as f:
    short = tensor(22, 4, [1, -8, 7, -1], "packed")
    f.write(key(1, 0) + varint(5) + short[2:])  # the dims say 5
