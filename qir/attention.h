/* attention.h: the shape of an `attention` op as its planners and its kernel
 * see it (qopt -roller's flash plan, qcodegen's lower_attention.c).
 *
 * Query rows are packed by kv head: a kv head's G = Hq / Hkv query heads and
 * their S positions form G * S rows (row r: query head kvh * G + r / S,
 * position r % S), so one block's tile of rows reads each key/value tile once
 * for the whole group (GQA, MQA; G = 1 is plain multi-head attention). */
#ifndef QIR_ATTENTION_H
#define QIR_ATTENTION_H

#include "qir.h"

typedef struct {
  int64_t B, Hq, Hkv, G;        /* batch, query heads, kv heads, G = Hq / Hkv */
  int64_t S, T;                 /* query positions, keys */
  int64_t D, DV;                /* head sizes of q/k and of v */
  bool bshd;                    /* layout = "bshd": q [B,S,Hq,D], k [B,T,Hkv,D], v [B,T,Hkv,DV], y [B,S,Hq,DV] */
  bool causal;                  /* key j visible from position i iff j <= i + (T - S) */
  bool has_bias;                /* the bias operand is not a zero splat */
  double scale, softcap;
  qir_dtype dtype;              /* q's element type */
} qir_attention_shape;

/* Reads op's shape; false when op is no well-formed 4-D attention. */
bool qir_attention_shape_of(const qir_op *op, qir_attention_shape *s);

/* Rows of one kv head (G * S) and the last key tile of BKV keys that rows
 * [r0, r0 + rows) of a kv head need: all ceil(T / BKV) tiles, or with a
 * causal mask only those up to the diagonal of the row with the largest
 * position. */
int64_t qir_attention_tiles_needed(const qir_attention_shape *s, int64_t r0, int64_t rows, int64_t bkv);
/* Key tiles the row tiles of bq rows of one kv head visit in all (the sum of
 * qir_attention_tiles_needed over them); *most: the busiest row tile's. */
int64_t qir_attention_tiles_visited(const qir_attention_shape *s, int64_t bq, int64_t bkv, int64_t *most);

/* Whether op is an attention op with a flash plan (#tile{flash = ..}, qopt
 * -roller's roller_flash.c): one kernel, not its compute chain. */
bool qir_attention_flash_planned(const qir_op *op);

/* A wgmma flash kernel (flash_mma = [64, bkv, 16]) with its key and value
 * tiles by tensor copies keeps P V of one tile in flight during the next
 * tile's softmax where a thread's share of the scores, output and P
 * fragments (bkv / 2 + dv / 2 + bkv / 4 registers) is at most 112: with 128
 * keys a step ptxas ran out (255 registers, the wgmma serialised). */
static inline bool qir_attention_wgmma_overlaps(int64_t bkv, int64_t dv) { return bkv / 2 + dv / 2 + bkv / 4 <= 112; }
/* The plan's `splits` (flash-decoding: the keys split over that many blocks,
 * a second kernel combining them); 1 without a split plan. */
int64_t qir_attention_flash_splits(const qir_op *op);

/* Operands read through a slice (a fused projection's Q, K or V part).
 * Operand q, k or v of a flash-planned attention in layout bshd that is,
 * through reshapes each used only there, a slice of X along X's last axis
 * only (used only there too) needs no copy: element (b, s, h, d) is X's
 * element offset + h * D + d of row b * len + s, rows row_stride apart.
 * qcodegen reads X so (lower_attention.c), launching nothing for the slice;
 * the passes treat such a slice as a view (qir_op_is_view). */
typedef struct {
  qir_value *src;               /* X */
  const qir_op *slice;
  int64_t offset, row_stride;   /* in elements of X */
} qir_attention_view;
bool qir_attention_operand_view(const qir_op *att, int operand, qir_attention_view *v);
/* Whether op is a slice that qir_attention_operand_view folds into an attention's loads. */
bool qir_attention_folds_slice(const qir_op *op);

/* A KV cache grown by a concat: operand k or v of a flash-planned attention
 * that is concat(past, new) along the key axis, the concat's result used
 * otherwise only by outputs (the `present` tensor), in a plan where one
 * block walks each key tile exactly once (a kv head's rows one row tile, no
 * causal tile skipped).  qcodegen's kernel then reads past and new in place
 * and writes `present` as it loads each tile: the concat launches nothing,
 * and the cache is read once, not copied first. */
typedef struct {
  qir_value *past, *now, *present;
  const qir_op *concat;
  int64_t past_len;             /* keys in past */
} qir_attention_cache;
bool qir_attention_operand_cache(const qir_op *att, int operand, qir_attention_cache *c);
/* Whether op is such a concat; whether att is an attention that folds one. */
bool qir_attention_folds_concat(const qir_op *op);
bool qir_attention_reads_cache(const qir_op *att);

#endif /* QIR_ATTENTION_H */
