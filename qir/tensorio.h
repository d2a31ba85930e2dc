/* tensorio.h: tensors in and out of files, for qrun, onnx2qir (--bind) and the
 * tests of generated code.
 *
 * Two formats, chosen by the file name's extension:
 *   .npy  NumPy format 1.0/2.0/3.0: little-endian (or byte-order-free) data in
 *         C or Fortran order (read), C order (written).  descr per dtype:
 *         <f8 <f4 <f2 <i8 <i4 <i2 |i1 <u8 <u4 <u2 |u1 |b1.  bf16 has no NumPy
 *         type: it is written as '<V2' (raw 2-byte records, the bfloat16 bit
 *         pattern) and '<V2' / '|V2' read back as bf16.  The narrow types
 *         (f8e4m3fn f8e4m3fnuz f8e5m2 f8e5m2fnuz f8e8m0 f4e2m1 i4 u4 i2 u2)
 *         have no NumPy type either: one byte per element (their memory form,
 *         see qir.h) under the one-field record descr [('NAME', '|u1')]
 *         ('|i1' for i4/i2), NAME the qir type name; numpy loads it as a
 *         record array (a['f8e4m3fn'] are the bytes; ml_dtypes can view
 *         them).  Bytes outside the type's range (u4 > 15, ...) are rejected.
 *   .pb   a serialized ONNX TensorProto (raw_data or the typed fields); the
 *         tensor's name is kept.  External data and strings are rejected.
 *         4-bit and 2-bit types are packed there (two or four per byte,
 *         the first element in the low bits), as ONNX defines.
 * Malformed or truncated files are rejected with a message naming the file;
 * sizes are checked before anything is allocated.  Data are little-endian in
 * memory, as everywhere in qir. */
#ifndef QIR_TENSORIO_H
#define QIR_TENSORIO_H

#include "qir.h"

struct Onnx__TensorProto;

/* Reads a tensor (by extension).  *name (if name != NULL) gets the stored name
 * (malloc'd; NULL for .npy or when the .pb has none). */
bool qir_tensor_read(const char *path, qir_tensor *out, char **name, qir_diag *d);
/* Writes a tensor (by extension); `name` is stored in .pb files (may be NULL). */
bool qir_tensor_write(const char *path, const qir_tensor *t, const char *name, qir_diag *d);

/* The same on memory buffers; `what` names the data in messages. */
bool qir_npy_decode(const void *buf, size_t len, const char *what, qir_tensor *out, qir_diag *d);
/* Encodes a .npy image (malloc'd in *buf). */
bool qir_npy_encode(const qir_tensor *t, void **buf, size_t *len);
bool qir_pb_decode(const void *buf, size_t len, const char *what, qir_tensor *out, char **name, qir_diag *d);
bool qir_pb_encode(const qir_tensor *t, const char *name, void **buf, size_t *len);

/* Converts an unpacked TensorProto (the importer's initializers and Constant
 * attributes).  External data are rejected.  `what` names it in messages. */
bool qir_tensor_from_proto(const struct Onnx__TensorProto *p, const char *what, qir_tensor *out, qir_diag *d);

/* ONNX TensorProto.DataType <-> qir dtype; false / -1 for types qir lacks. */
bool qir_dtype_from_onnx(int onnx_type, qir_dtype *out);
int qir_dtype_to_onnx(qir_dtype t);

#endif /* QIR_TENSORIO_H */
