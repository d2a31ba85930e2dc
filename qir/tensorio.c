/* tensorio.c: .npy and ONNX TensorProto (.pb) files <-> qir_tensor.  See
 * tensorio.h for the formats.  Every length read from a file is checked
 * against the bytes actually there before memory is allocated for it. */
#include "tensorio.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "onnx.pb-c.h"

static bool fail(qir_diag *d, const char *what, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static bool fail(qir_diag *d, const char *what, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  qir_loc loc = {.file = what};
  qir_diag_vreport(d, QIR_SEV_ERROR, loc, fmt, ap);
  va_end(ap);
  return false;
}

/* Element count of a shape; false when negative or absurdly large. */
static bool shape_numel(int rank, const int64_t *dims, int64_t *n) {
  int64_t k = 1;
  for (int i = 0; i < rank; i++) {
    if (dims[i] < 0) return false;
    if (dims[i] && k > ((int64_t)1 << 40) / dims[i]) return false;
    k *= dims[i];
  }
  *n = k;
  return true;
}

/* ------------------------------------------------------------ dtypes */

static const struct {
  qir_dtype t;
  int onnx;
  const char *descr;            /* .npy descr without the byte-order char */
} dtype_map[] = {
    {QIR_F64, ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE, "f8"},  {QIR_F32, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, "f4"},
    {QIR_F16, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16, "f2"}, {QIR_BF16, ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16, "V2"},
    {QIR_I64, ONNX__TENSOR_PROTO__DATA_TYPE__INT64, "i8"},   {QIR_I32, ONNX__TENSOR_PROTO__DATA_TYPE__INT32, "i4"},
    {QIR_I16, ONNX__TENSOR_PROTO__DATA_TYPE__INT16, "i2"},   {QIR_I8, ONNX__TENSOR_PROTO__DATA_TYPE__INT8, "i1"},
    {QIR_U64, ONNX__TENSOR_PROTO__DATA_TYPE__UINT64, "u8"},  {QIR_U32, ONNX__TENSOR_PROTO__DATA_TYPE__UINT32, "u4"},
    {QIR_U16, ONNX__TENSOR_PROTO__DATA_TYPE__UINT16, "u2"},  {QIR_U8, ONNX__TENSOR_PROTO__DATA_TYPE__UINT8, "u1"},
    {QIR_BOOL, ONNX__TENSOR_PROTO__DATA_TYPE__BOOL, "b1"},
    /* the narrow types (ONNX codes 17..26, newer than Debian's onnx.proto): one element per byte in .npy, named by a one-field
     * structured descr (see tensorio.h) */
    {QIR_F8E4M3FN, 17, NULL},
    {QIR_F8E4M3FNUZ, 18, NULL},
    {QIR_F8E5M2, 19, NULL},
    {QIR_F8E5M2FNUZ, 20, NULL},
    {QIR_F8E8M0, 24, NULL}, {QIR_F4E2M1, 23, NULL},
    {QIR_U4, 21, NULL}, {QIR_I4, 22, NULL},
    {QIR_U2, 25, NULL}, {QIR_I2, 26, NULL},
};
#define N_DTYPES (sizeof dtype_map / sizeof dtype_map[0])

bool qir_dtype_from_onnx(int onnx_type, qir_dtype *out) {
  for (size_t i = 0; i < N_DTYPES; i++)
    if (dtype_map[i].onnx == onnx_type) {
      *out = dtype_map[i].t;
      return true;
    }
  return false;
}

int qir_dtype_to_onnx(qir_dtype t) {
  for (size_t i = 0; i < N_DTYPES; i++)
    if (dtype_map[i].t == t) return dtype_map[i].onnx;
  return -1;
}

/* ------------------------------------------------------------ narrow types */

/* Bytes of n elements packed as ONNX stores them. */
static size_t packed_bytes(qir_dtype t, int64_t n) { return ((size_t)n * (size_t)qir_dtype_bits(t) + 7) / 8; }

/* ONNX's packing (element i in bits [b*(i%per), b*(i%per+1)) of byte i/per)
 * <-> qir's one element per byte (i4/i2 sign-extended). */
static void unpack_narrow(qir_dtype t, const unsigned char *src, unsigned char *dst, int64_t n) {
  int bits = qir_dtype_bits(t), per = 8 / bits;
  for (int64_t i = 0; i < n; i++) {
    unsigned c = (src[i / per] >> (bits * (int)(i % per))) & ((1u << bits) - 1);
    dst[i] = bits == 8 ? (unsigned char)c : qir_narrow_from_double(t, qir_narrow_to_double(t, (uint8_t)c), true);
  }
}

static void pack_narrow(qir_dtype t, const unsigned char *src, unsigned char *dst, int64_t n) {
  int bits = qir_dtype_bits(t), per = 8 / bits;
  memset(dst, 0, packed_bytes(t, n));
  for (int64_t i = 0; i < n; i++) dst[i / per] |= (unsigned char)((src[i] & ((1u << bits) - 1)) << (bits * (int)(i % per)));
}

/* Whether a byte is the memory form of an element of t (see qir.h). */
static bool narrow_byte_ok(qir_dtype t, unsigned char c) {
  switch (t) {
  case QIR_I4: return (int8_t)c >= -8 && (int8_t)c <= 7;
  case QIR_U4: case QIR_F4E2M1: return c <= 15;
  case QIR_I2: return (int8_t)c >= -2 && (int8_t)c <= 1;
  case QIR_U2: return c <= 3;
  default: return true;
  }
}

/* ------------------------------------------------------------ .npy */

/* Finds `'key':` in the header dict and returns the text after the colon. */
static const char *dict_value(const char *h, size_t n, const char *key) {
  size_t kl = strlen(key);
  for (size_t i = 0; i + kl + 2 < n; i++)
    if ((h[i] == '\'' || h[i] == '"') && memcmp(h + i + 1, key, kl) == 0 && h[i + 1 + kl] == h[i]) {
      const char *p = h + i + kl + 2;
      while (p < h + n && (*p == ' ' || *p == ':')) p++;
      return p < h + n ? p : NULL;
    }
  return NULL;
}

/* The narrow types' descr: [('NAME', '|u1')] (or '|i1'), NAME a qir dtype
 * name (f8e4m3fn, ..., i2): numpy reads such a file as a one-field record
 * array of the element bytes. */
static bool npy_descr_narrow(const char *p, const char *end, const char *what, qir_dtype *out, qir_diag *d) {
  char name[24], inner[8];
  size_t k = 0, j = 0;
  p++;
  while (p < end && *p == ' ') p++;
  if (p >= end || *p != '(') return fail(d, what, "unsupported .npy descr (a list that is not [('TYPE', '|u1')])");
  p++;
  char q = p < end ? *p : 0;
  if (q != '\'' && q != '"') return fail(d, what, "unsupported .npy descr (a list that is not [('TYPE', '|u1')])");
  for (p++; p < end && *p != q && k + 1 < sizeof name; p++) name[k++] = isprint((unsigned char)*p) ? *p : '?';
  name[k] = 0;
  if (p >= end || *p != q) return fail(d, what, "unsupported .npy descr (field name too long)");
  p++;
  while (p < end && (*p == ' ' || *p == ',')) p++;
  q = p < end ? *p : 0;
  if (q != '\'' && q != '"') return fail(d, what, "unsupported .npy descr (a list that is not [('TYPE', '|u1')])");
  for (p++; p < end && *p != q && j + 1 < sizeof inner; p++) inner[j++] = isprint((unsigned char)*p) ? *p : '?';
  inner[j] = 0;
  if (p >= end || *p != q) return fail(d, what, "unsupported .npy descr (field type too long)");
  p++;
  while (p < end && *p == ' ') p++;
  if (end - p < 2 || p[0] != ')' || p[1] != ']') return fail(d, what, "unsupported .npy descr (more than one field)");
  qir_dtype dt = QIR_F32;
  if (!qir_dtype_from_name(name, k, &dt) || !qir_dtype_is_narrow(dt))
    return fail(d, what, "unsupported .npy record type '%s' (a narrow type is f8e4m3fn, f8e4m3fnuz, f8e5m2, f8e5m2fnuz, f8e8m0, f4e2m1, i4, u4, i2 or u2)", name);
  if (strcmp(inner, "|u1") && strcmp(inner, "|i1") && strcmp(inner, "u1") && strcmp(inner, "i1"))
    return fail(d, what, "bad .npy descr for %s: its field must be '|u1' or '|i1', not '%s'", name, inner);
  *out = dt;
  return true;
}

/* The element type of a .npy header. */
static bool npy_descr(const char *h, size_t hlen, const char *what, qir_dtype *out, qir_diag *d) {
  const char *p = dict_value(h, hlen, "descr");
  if (p && *p == '[') return npy_descr_narrow(p, h + hlen, what, out, d);
  if (!p || (*p != '\'' && *p != '"')) return fail(d, what, ".npy header has no 'descr' string");
  char descr[16];
  size_t k = 0;
  char quote = *p++;
  while (p < h + hlen && *p != quote && k + 1 < sizeof descr) descr[k++] = *p++;
  descr[k] = 0;
  for (size_t i = 0; i < k; i++) /* it is quoted in messages: keep them one line */
    if ((unsigned char)descr[i] < 32 || (unsigned char)descr[i] >= 127) descr[i] = '?';
  if (p >= h + hlen || *p != quote) return fail(d, what, "unsupported .npy descr (structured or too long)");
  if (k < 2) return fail(d, what, "bad .npy descr '%s'", descr);
  char order = descr[0];
  const char *code = descr + 1;
  if (order != '<' && order != '|' && order != '=') {
    if (order == '>' && strcmp(code, "i1") && strcmp(code, "u1") && strcmp(code, "b1"))
      return fail(d, what, "big-endian .npy data ('%s') is not supported", descr);
    if (order != '>') code = descr, order = '|';
  }
  bool found = false;
  qir_dtype dt = QIR_F32;
  for (size_t i = 0; i < N_DTYPES; i++)
    if (dtype_map[i].descr && !strcmp(code, dtype_map[i].descr)) dt = dtype_map[i].t, found = true;
  if (!found && !strcmp(code, "?")) dt = QIR_BOOL, found = true;
  if (!found) return fail(d, what, "unsupported .npy element type '%s'", descr);
  *out = dt;
  return true;
}

bool qir_npy_decode(const void *buf, size_t len, const char *what, qir_tensor *out, qir_diag *d) {
  const unsigned char *b = buf;
  out->data = NULL;
  if (len < 10 || memcmp(b, "\x93NUMPY", 6) != 0) return fail(d, what, "not a .npy file (bad magic)");
  int major = b[6];
  size_t hlen, hstart;
  if (major == 1) {
    hlen = (size_t)b[8] | (size_t)b[9] << 8;
    hstart = 10;
  } else if (major == 2 || major == 3) {
    if (len < 12) return fail(d, what, "truncated .npy header");
    hlen = (size_t)b[8] | (size_t)b[9] << 8 | (size_t)b[10] << 16 | (size_t)b[11] << 24;
    hstart = 12;
  } else {
    return fail(d, what, "unsupported .npy format version %d", major);
  }
  if (hlen > len - hstart) return fail(d, what, "truncated .npy header (%zu bytes announced)", hlen);
  const char *h = (const char *)b + hstart;
  qir_dtype dt = QIR_F32;
  if (!npy_descr(h, hlen, what, &dt, d)) return false;
  const char *p;
  /* fortran_order */
  p = dict_value(h, hlen, "fortran_order");
  if (!p) return fail(d, what, ".npy header has no 'fortran_order'");
  bool fortran = strncmp(p, "True", 4) == 0;
  if (!fortran && strncmp(p, "False", 5) != 0) return fail(d, what, "bad 'fortran_order' in .npy header");
  /* shape */
  p = dict_value(h, hlen, "shape");
  if (!p || *p != '(') return fail(d, what, ".npy header has no 'shape' tuple");
  p++;
  qir_type t = qir_type_make(dt, 0, NULL);
  for (;;) {
    while (p < h + hlen && (*p == ' ' || *p == ',')) p++;
    if (p >= h + hlen) return fail(d, what, "unterminated 'shape' in .npy header");
    if (*p == ')') break;
    if (!isdigit((unsigned char)*p)) return fail(d, what, "bad 'shape' in .npy header");
    if (t.rank >= QIR_MAX_RANK) return fail(d, what, ".npy tensor has rank > %d", QIR_MAX_RANK);
    int64_t v = 0;
    while (p < h + hlen && isdigit((unsigned char)*p)) {
      if (v > ((int64_t)1 << 40)) return fail(d, what, "dimension too large in .npy header");
      v = v * 10 + (*p++ - '0');
    }
    t.dims[t.rank++] = v;
  }
  int64_t n;
  if (!shape_numel(t.rank, t.dims, &n)) return fail(d, what, ".npy shape is too large");
  size_t es = (size_t)qir_dtype_size(dt), want = (size_t)n * es, have = len - hstart - hlen;
  if (have < want) return fail(d, what, "truncated .npy data: %zu bytes, the shape needs %zu", have, want);
  if (have > want) return fail(d, what, ".npy file has %zu bytes after the data", have - want);
  out->type = t;
  out->data = malloc(want ? want : 1);
  if (!out->data) return fail(d, what, "out of memory (%zu bytes)", want);
  const unsigned char *src = b + hstart + hlen;
  if (!fortran || t.rank < 2) {
    memcpy(out->data, src, want);
  } else { /* column-major: element (i0..ik) sits at sum i_j * prod(d_<j) */
    int64_t idx[QIR_MAX_RANK] = {0};
    for (int64_t i = 0; i < n; i++) {
      int64_t off = 0, st = 1;
      for (int a = 0; a < t.rank; a++) {
        off += idx[a] * st;
        st *= t.dims[a];
      }
      memcpy((char *)out->data + (size_t)i * es, src + (size_t)off * es, es);
      for (int a = t.rank - 1; a >= 0; a--) {
        if (++idx[a] < t.dims[a]) break;
        idx[a] = 0;
      }
    }
  }
  if (dt == QIR_BOOL) /* any non-zero byte is true; keep 0/1 */
    for (int64_t i = 0; i < n; i++) ((unsigned char *)out->data)[i] = ((unsigned char *)out->data)[i] != 0;
  for (int64_t i = 0; qir_dtype_is_narrow(dt) && i < n; i++)
    if (!narrow_byte_ok(dt, ((unsigned char *)out->data)[i])) {
      int v = dt == QIR_I4 || dt == QIR_I2 ? (int)((int8_t *)out->data)[i] : (int)((unsigned char *)out->data)[i];
      free(out->data);
      out->data = NULL;
      return fail(d, what, "element %lld (%d) is out of the range of %s", (long long)i, v, qir_dtype_name(dt));
    }
  return true;
}

bool qir_npy_encode(const qir_tensor *t, void **buf, size_t *len) {
  const char *code = NULL;
  for (size_t i = 0; i < N_DTYPES; i++)
    if (dtype_map[i].t == t->type.dtype) code = dtype_map[i].descr;
  bool narrow = qir_dtype_is_narrow(t->type.dtype);
  if (!code && !narrow) return false;
  char order = qir_dtype_size(t->type.dtype) == 1 ? '|' : '<';
  char shape[QIR_MAX_RANK * 24 + 8];
  size_t sl = 0;
  shape[sl++] = '(';
  for (int i = 0; i < t->type.rank; i++)
    sl += (size_t)snprintf(shape + sl, sizeof shape - sl, "%lld,%s", (long long)t->type.dims[i], i + 1 < t->type.rank ? " " : "");
  if (t->type.rank > 1) sl--; /* numpy writes (2, 3) but (3,) */
  shape[sl++] = ')';
  shape[sl] = 0;
  char header[512];
  int hl = narrow ? snprintf(header, sizeof header, "{'descr': [('%s', '%s')], 'fortran_order': False, 'shape': %s, }",
                             qir_dtype_name(t->type.dtype), qir_dtype_is_signed_int(t->type.dtype) ? "|i1" : "|u1", shape)
                  : snprintf(header, sizeof header, "{'descr': '%c%s', 'fortran_order': False, 'shape': %s, }", order, code, shape);
  size_t total = 10 + (size_t)hl + 1;
  size_t padded = (total + 63) / 64 * 64;
  size_t hlen = padded - 10;
  size_t n = (size_t)qir_type_numel(&t->type) * (size_t)qir_dtype_size(t->type.dtype);
  unsigned char *b = malloc(padded + n);
  if (!b) return false;
  memcpy(b, "\x93NUMPY\x01\x00", 8);
  b[8] = (unsigned char)(hlen & 0xff);
  b[9] = (unsigned char)(hlen >> 8);
  memcpy(b + 10, header, (size_t)hl);
  memset(b + 10 + hl, ' ', hlen - (size_t)hl - 1);
  b[padded - 1] = '\n';
  if (n) memcpy(b + padded, t->data, n);
  *buf = b;
  *len = padded + n;
  return true;
}

/* ------------------------------------------------------------ TensorProto */

/* Narrow types: raw_data holds the packed bytes; int32_data one packed byte
 * per entry (for 8-bit types, one element). */
static bool narrow_from_proto(const Onnx__TensorProto *p, const char *what, qir_type t, int64_t n, qir_tensor *out, qir_diag *d) {
  size_t packed = packed_bytes(t.dtype, n);
  if (p->has_raw_data && p->raw_data.len != packed)
    return fail(d, what, "raw_data has %zu bytes, %lld %s elements need %zu", p->raw_data.len, (long long)n, qir_dtype_name(t.dtype), packed);
  if (!p->has_raw_data && p->n_int32_data != packed)
    return fail(d, what, "int32_data has %zu entries, %lld %s elements need %zu (packed bytes)", p->n_int32_data, (long long)n,
                qir_dtype_name(t.dtype), packed);
  unsigned char *bytes = malloc(packed ? packed : 1);
  out->data = malloc(n ? (size_t)n : 1);
  if (!bytes || !out->data) {
    free(bytes);
    free(out->data);
    out->data = NULL;
    return fail(d, what, "out of memory");
  }
  for (size_t i = 0; i < packed; i++) bytes[i] = p->has_raw_data ? p->raw_data.data[i] : (unsigned char)p->int32_data[i];
  unpack_narrow(t.dtype, bytes, out->data, n);
  free(bytes);
  out->type = t;
  return true;
}

bool qir_tensor_from_proto(const Onnx__TensorProto *p, const char *what, qir_tensor *out, qir_diag *d) {
  out->data = NULL;
  if (p->has_data_location && p->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL)
    return fail(d, what, "tensor with external data is not supported");
  if (p->segment) return fail(d, what, "segmented tensors are not supported");
  qir_dtype dt;
  if (!qir_dtype_from_onnx(p->data_type, &dt))
    return fail(d, what, "unsupported tensor element type %d (%s)", (int)p->data_type,
                p->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__STRING ? "string" : "no qir equivalent");
  if (p->n_dims > QIR_MAX_RANK) return fail(d, what, "tensor has rank %zu > %d", p->n_dims, QIR_MAX_RANK);
  qir_type t = qir_type_make(dt, (int)p->n_dims, p->dims);
  int64_t n;
  if (!shape_numel(t.rank, t.dims, &n)) return fail(d, what, "tensor has a negative or too large shape");
  size_t es = (size_t)qir_dtype_size(dt), want = (size_t)n * es;
  if (qir_dtype_is_narrow(dt)) return narrow_from_proto(p, what, t, n, out, d);
  size_t typed = 0;
  const char *field = "";
  switch (p->data_type) {
  case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT: typed = p->n_float_data; field = "float_data"; break;
  case ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE: typed = p->n_double_data; field = "double_data"; break;
  case ONNX__TENSOR_PROTO__DATA_TYPE__INT64: typed = p->n_int64_data; field = "int64_data"; break;
  case ONNX__TENSOR_PROTO__DATA_TYPE__UINT32: case ONNX__TENSOR_PROTO__DATA_TYPE__UINT64:
    typed = p->n_uint64_data; field = "uint64_data"; break;
  default: typed = p->n_int32_data; field = "int32_data"; break;
  }
  if (p->has_raw_data) {
    if (p->raw_data.len != want)
      return fail(d, what, "raw_data has %zu bytes, the shape needs %zu", p->raw_data.len, want);
  } else if (typed != (size_t)n) {
    return fail(d, what, "%s has %zu elements, the shape needs %lld", field, typed, (long long)n);
  }
  out->type = t;
  out->data = malloc(want ? want : 1);
  if (!out->data) return fail(d, what, "out of memory (%zu bytes)", want);
  if (p->has_raw_data) {
    if (want) memcpy(out->data, p->raw_data.data, want);
    if (dt == QIR_BOOL)
      for (int64_t i = 0; i < n; i++) ((unsigned char *)out->data)[i] = ((unsigned char *)out->data)[i] != 0;
    return true;
  }
  unsigned char *o = out->data;
  for (int64_t i = 0; i < n; i++) {
    switch (dt) {
    case QIR_F32: memcpy(o + i * 4, &p->float_data[i], 4); break;
    case QIR_F64: memcpy(o + i * 8, &p->double_data[i], 8); break;
    case QIR_I64: memcpy(o + i * 8, &p->int64_data[i], 8); break;
    case QIR_U64: memcpy(o + i * 8, &p->uint64_data[i], 8); break;
    case QIR_U32: { uint32_t v = (uint32_t)p->uint64_data[i]; memcpy(o + i * 4, &v, 4); break; }
    case QIR_I32: memcpy(o + i * 4, &p->int32_data[i], 4); break;
    case QIR_I16: case QIR_U16: case QIR_F16: case QIR_BF16: { /* 16-bit values / bit patterns in int32_data */
      uint16_t v = (uint16_t)p->int32_data[i];
      memcpy(o + i * 2, &v, 2);
      break;
    }
    case QIR_BOOL: o[i] = p->int32_data[i] != 0; break;
    default: o[i] = (unsigned char)p->int32_data[i]; break; /* i8, u8 */
    }
  }
  return true;
}

bool qir_pb_decode(const void *buf, size_t len, const char *what, qir_tensor *out, char **name, qir_diag *d) {
  out->data = NULL;
  if (name) *name = NULL;
  Onnx__TensorProto *p = onnx__tensor_proto__unpack(NULL, len, buf);
  if (!p) return fail(d, what, "not a valid ONNX TensorProto (malformed or truncated protobuf)");
  bool ok = qir_tensor_from_proto(p, what, out, d);
  if (ok && name && p->name && p->name[0]) {
    *name = strdup(p->name);
    if (!*name) ok = fail(d, what, "out of memory");
  }
  onnx__tensor_proto__free_unpacked(p, NULL);
  if (!ok) {
    free(out->data);
    out->data = NULL;
  }
  return ok;
}

bool qir_pb_encode(const qir_tensor *t, const char *name, void **buf, size_t *len) {
  Onnx__TensorProto p = ONNX__TENSOR_PROTO__INIT;
  int onnx_type = qir_dtype_to_onnx(t->type.dtype);
  if (onnx_type < 0) return false;
  int64_t dims[QIR_MAX_RANK];
  for (int i = 0; i < t->type.rank; i++) dims[i] = t->type.dims[i];
  p.n_dims = (size_t)t->type.rank;
  p.dims = dims;
  p.has_data_type = 1;
  p.data_type = onnx_type;
  p.has_raw_data = 1;
  int64_t numel = qir_type_numel(&t->type);
  p.raw_data.len = (size_t)numel * (size_t)qir_dtype_size(t->type.dtype);
  p.raw_data.data = t->data;
  unsigned char *packed = NULL;
  if (qir_dtype_is_narrow(t->type.dtype)) {
    p.raw_data.len = packed_bytes(t->type.dtype, numel);
    packed = malloc(p.raw_data.len ? p.raw_data.len : 1);
    if (!packed) return false;
    pack_narrow(t->type.dtype, t->data, packed, numel);
    p.raw_data.data = packed;
  }
  p.name = (char *)(name ? name : "");
  size_t n = onnx__tensor_proto__get_packed_size(&p);
  unsigned char *b = malloc(n ? n : 1);
  if (!b) {
    free(packed);
    return false;
  }
  onnx__tensor_proto__pack(&p, b);
  free(packed);
  *buf = b;
  *len = n;
  return true;
}

/* ------------------------------------------------------------ files */

static bool has_ext(const char *path, const char *ext) {
  size_t n = strlen(path), e = strlen(ext);
  return n >= e && strcmp(path + n - e, ext) == 0;
}

/* Reads a whole file, refusing anything over 16 GiB. */
static bool read_file(const char *path, unsigned char **buf, size_t *len, qir_diag *d) {
  FILE *f = fopen(path, "rb");
  if (!f) return fail(d, path, "cannot open: %s", strerror(errno));
  size_t cap = 1 << 16, n = 0;
  unsigned char *b = malloc(cap);
  bool ok = b != NULL;
  while (ok) {
    if (n == cap) {
      if (cap >= ((size_t)1 << 34)) { ok = fail(d, path, "file too large"); break; }
      unsigned char *nb = realloc(b, cap * 2);
      if (!nb) { ok = fail(d, path, "out of memory"); break; }
      b = nb;
      cap *= 2;
    }
    size_t got = fread(b + n, 1, cap - n, f);
    n += got;
    if (got == 0) {
      if (ferror(f)) ok = fail(d, path, "read error: %s", strerror(errno));
      break;
    }
  }
  fclose(f);
  if (!ok) { free(b); return false; }
  *buf = b;
  *len = n;
  return true;
}

bool qir_tensor_read(const char *path, qir_tensor *out, char **name, qir_diag *d) {
  out->data = NULL;
  if (name) *name = NULL;
  bool npy = has_ext(path, ".npy"), pb = has_ext(path, ".pb");
  if (!npy && !pb) return fail(d, path, "unknown tensor file type (use .npy or .pb)");
  unsigned char *b = NULL;
  size_t n = 0;
  if (!read_file(path, &b, &n, d)) return false;
  bool ok = npy ? qir_npy_decode(b, n, path, out, d) : qir_pb_decode(b, n, path, out, name, d);
  free(b);
  return ok;
}

bool qir_tensor_write(const char *path, const qir_tensor *t, const char *name, qir_diag *d) {
  bool npy = has_ext(path, ".npy"), pb = has_ext(path, ".pb");
  if (!npy && !pb) return fail(d, path, "unknown tensor file type (use .npy or .pb)");
  void *b = NULL;
  size_t n = 0;
  if (!(npy ? qir_npy_encode(t, &b, &n) : qir_pb_encode(t, name, &b, &n))) return fail(d, path, "cannot encode the tensor");
  FILE *f = fopen(path, "wb");
  if (!f) {
    free(b);
    return fail(d, path, "cannot create: %s", strerror(errno));
  }
  bool ok = fwrite(b, 1, n, f) == n;
  ok = (fclose(f) == 0) && ok;
  free(b);
  if (!ok) return fail(d, path, "write error: %s", strerror(errno));
  return true;
}
