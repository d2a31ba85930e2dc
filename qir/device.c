/* device.c: #device plans of `loop` and `if` (see target.h), read and checked.
 *
 * The verifier's rules, each reported at the attribute or op it is about:
 *   - #device only on `loop` and `if`; a dict with keys level, target, grid,
 *     threads, stages and nothing else;
 *   - level host takes no other key; grid and block need all of them: a known
 *     target, threads within the target's block size and a multiple of its
 *     warp, stages >= 1, grid >= 1 (block: exactly 1);
 *   - a grid-level loop's grid is at most the blocks the target keeps
 *     co-resident (a grid barrier with a block that never starts would hang);
 *   - inside a device-resident region every nested loop/if is on the device
 *     too (the host cannot drive it from inside a kernel): a grid-level one
 *     with the same target, grid and threads, a block-level one with at most
 *     the enclosing threads, and never a grid-level one inside a block;
 *   - the body's kernels fit its blocks: no op of a device-resident region has
 *     a #tile plan of more threads than the plan's. */
#include "target.h"

#include <string.h>

const char *qir_level_name(qir_level l) {
  return l == QIR_LEVEL_GRID ? "grid" : l == QIR_LEVEL_BLOCK ? "block" : "host";
}

int64_t qir_target_coresident_blocks(const qir_target *t, int64_t threads) {
  if (!t || threads <= 0) return 0;
  int64_t per_unit = t->max_threads_per_unit / threads;
  if (per_unit > t->max_blocks_per_unit) per_unit = t->max_blocks_per_unit;
  return per_unit * t->compute_units;
}

static const char *op_name(const qir_op *op) {
  const qir_opinfo *info = qir_opinfo_get(op->code);
  return info ? info->name : "?";
}

static qir_loc at(const qir_op *op, const qir_attr *a) { return a && a->loc.line > 0 ? a->loc : op->loc; }

bool qir_device_plan_get(const qir_op *op, qir_device_plan *out, qir_diag *d) {
  memset(out, 0, sizeof *out);
  out->level = QIR_LEVEL_HOST;
  const qir_attr *a = qir_op_attr(op, "device");
  if (!a) return true;
  out->present = true;
  qir_loc loc = at(op, a);
  if (a->val.kind != QIR_ATTR_DICT) {
    if (d) qir_error(d, loc, "#device must be a dict {level = host|grid|block, ...}");
    return false;
  }
  bool ok = true;
  for (int i = 0; i < a->val.n; i++) {
    const qir_attr *e = &a->val.entries[i];
    const char *k = e->key;
    bool is_int = strcmp(k, "grid") == 0 || strcmp(k, "threads") == 0 || strcmp(k, "stages") == 0;
    if (strcmp(k, "level") == 0) {
      const char *s = e->val.kind == QIR_ATTR_WORD || e->val.kind == QIR_ATTR_STRING ? e->val.s : "";
      if (!strcmp(s, "host")) out->level = QIR_LEVEL_HOST;
      else if (!strcmp(s, "grid")) out->level = QIR_LEVEL_GRID;
      else if (!strcmp(s, "block")) out->level = QIR_LEVEL_BLOCK;
      else {
        if (d) qir_error(d, loc, "#device level must be host, grid or block");
        ok = false;
      }
    } else if (strcmp(k, "target") == 0) {
      const char *s = e->val.kind == QIR_ATTR_WORD || e->val.kind == QIR_ATTR_STRING ? e->val.s : "";
      out->target = qir_target_get(s);
      if (!out->target) {
        if (d) qir_error(d, loc, "#device target '%s' is not a known device model", s);
        ok = false;
      }
    } else if (is_int) {
      if (e->val.kind != QIR_ATTR_INT || e->val.i < 1) {
        if (d) qir_error(d, loc, "#device %s must be a positive integer", k);
        ok = false;
      } else if (k[0] == 'g') out->grid = e->val.i;
      else if (k[0] == 't') out->threads = e->val.i;
      else out->stages = e->val.i;
    } else {
      if (d) qir_error(d, loc, "#device has no key '%s' (level, target, grid, threads, stages)", k);
      ok = false;
    }
  }
  if (!ok) return false;
  if (!qir_attr_dict_get(&a->val, "level")) {
    if (d) qir_error(d, loc, "#device needs a level (host, grid or block)");
    return false;
  }
  if (out->level == QIR_LEVEL_HOST) {
    if (out->target || out->grid || out->threads || out->stages) {
      if (d) qir_error(d, loc, "#device level host takes no target, grid, threads or stages");
      return false;
    }
    return true;
  }
  const char *missing = !out->target ? "target" : !out->grid ? "grid" : !out->threads ? "threads" : !out->stages ? "stages" : NULL;
  if (missing) {
    if (d) qir_error(d, loc, "#device level %s needs %s", qir_level_name(out->level), missing);
    return false;
  }
  const qir_target *t = out->target;
  if (out->threads > t->max_threads_per_block || out->threads % t->warp_size) {
    if (d)
      qir_error(d, loc, "#device threads = %lld: %s runs blocks of a multiple of %d threads, at most %d", (long long)out->threads,
                t->name, t->warp_size, t->max_threads_per_block);
    return false;
  }
  if (out->level == QIR_LEVEL_BLOCK && out->grid != 1) {
    if (d) qir_error(d, loc, "#device level block runs in one block: grid must be 1, not %lld", (long long)out->grid);
    return false;
  }
  int64_t cap = qir_target_coresident_blocks(t, out->threads);
  if (out->level == QIR_LEVEL_GRID && out->grid > cap) {
    if (d)
      qir_error(d, loc,
                "#device grid = %lld exceeds the %lld blocks of %lld threads %s keeps co-resident: its grid barriers "
                "would wait for blocks that never start",
                (long long)out->grid, (long long)cap, (long long)out->threads, t->name);
    return false;
  }
  return true;
}

static void check_body_tiles(const qir_op *op, const qir_device_plan *p, qir_diag *d) {
  for (int r = 0; r < op->n_regions; r++)
    for (const qir_op *b = op->regions[r]->first; b; b = b->next) {
      const qir_attr *tile = qir_op_attr(b, "tile");
      const qir_attr_val *th = tile && tile->val.kind == QIR_ATTR_DICT ? qir_attr_dict_get(&tile->val, "threads") : NULL;
      if (th && th->kind == QIR_ATTR_INT && th->i > p->threads)
        qir_error(d, at(b, tile), "'%s' has a #tile plan of %lld threads, more than the %lld threads of the device-resident '%s' holding it",
                  op_name(b), (long long)th->i, (long long)p->threads, op_name(op));
    }
}

void qir_device_plan_check(const qir_op *op, const qir_device_plan *outer, qir_diag *d) {
  bool control = op->code == QIR_OP_LOOP || op->code == QIR_OP_IF;
  const qir_attr *a = qir_op_attr(op, "device");
  if (!control) {
    if (a) qir_error(d, at(op, a), "#device belongs on 'loop' and 'if' only, not on '%s'", op_name(op));
    return;
  }
  qir_device_plan p;
  if (!qir_device_plan_get(op, &p, d)) return;
  if (outer && outer->level != QIR_LEVEL_HOST) {
    qir_loc loc = at(op, a);
    if (p.level == QIR_LEVEL_HOST) {
      qir_error(d, loc, "'%s' inside a device-resident region must run on the device too (#device level grid or block): "
                "the host cannot drive it from inside a kernel", op_name(op));
      return;
    }
    if (p.level == QIR_LEVEL_GRID && outer->level == QIR_LEVEL_BLOCK) {
      qir_error(d, loc, "a grid-level '%s' cannot run inside a block-level one", op_name(op));
      return;
    }
    if (p.level == QIR_LEVEL_GRID && (p.grid != outer->grid || p.threads != outer->threads || p.target != outer->target)) {
      qir_error(d, loc, "a grid-level '%s' inside a grid-level one runs in the same kernel: same target, grid and threads", op_name(op));
      return;
    }
    if (p.level == QIR_LEVEL_BLOCK && p.threads > outer->threads) {
      qir_error(d, loc, "a block-level '%s' of %lld threads inside a device-resident one of %lld threads", op_name(op),
                (long long)p.threads, (long long)outer->threads);
      return;
    }
  }
  if (p.level != QIR_LEVEL_HOST) check_body_tiles(op, &p, d);
}
