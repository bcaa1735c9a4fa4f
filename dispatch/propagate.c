/* The DTensor layer on the issuing thread (propagate.h, docs/sharding.md):
 *   B. the key of (op, input specs, sharding-deciding args) and this
 *      thread's cache;
 *   C. on a miss: the op's infer on the global shapes, its rule per mesh
 *      dim, the cheapest strategy (alpha-beta cost of each input's
 *      redistribution), checks of the result; cached;
 *   D. inputs whose placements differ from the strategy's: narrowing a
 *      Replicate into a Shard or a Partial is done by the ranks with no
 *      communication; anything else is an error naming the op, the
 *      placements, the legal ones and the cheapest fix (strict, default)
 *      or a redistribution (auto_redistribute);
 *   E. output handles from the plan and ONE record every rank runs.
 * (A, the custom handlers and decompositions PyTorch's DTensor dispatch
 * also has, has no user: every op of the library has a rule, and an op
 * without one is refused with DT_ERR_UNSUPPORTED naming it.) */
#include "dispatch/dispatch.h"
#include "dispatch/propagate.h"
#include "dispatch/shadow.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/tensor.h"
#include "mesh/handle.h"
#include "mesh/rank_work.h"
#include "mesh/mesh.h"
#include "mesh/plan.h"
#include "mesh/shard.h"
#include "ops/ops.h"
#include "runtime/backend.h"
#include "runtime/dry.h"
#include "runtime/exec.h"
#include "runtime/runtime.h"
#include "sched/future.h"

#define FREE_COST 1e-6   /* a local narrowing: free, but not nothing */

/* ---- walking the tensor arguments */
typedef void (*arg_fn)(int pos, dt_tensor *t, void *ctx);
/* an absent optional is skipped; a list element is passed as it is */
static void each_tensor(const dt_op_call *c, arg_fn fn, void *ctx) {
  for (core_arg_it it = core_call_args(c); core_arg_next(&it);)
    if (it.t || it.elem >= 0) fn(it.pos, it.t, ctx);
}

typedef struct mesh_check { dt_mesh *mesh; int mesh_arg, plain_arg; bool other; } mesh_check;
static void note_mesh(int pos, dt_tensor *t, void *ctx) {
  mesh_check *k = ctx;
  if (!t->spec) {
    if (k->plain_arg < 0) k->plain_arg = pos;
  } else if (!k->mesh) {
    k->mesh = t->spec->mesh;
    k->mesh_arg = pos;
  } else if (!mesh_same(k->mesh, t->spec->mesh)) {
    k->other = true;
  }
}

static dt_status check_inputs(dt_op_call *c, dt_mesh **mesh) {
  mesh_check k = {NULL, -1, -1, false};
  each_tensor(c, note_mesh, &k);
  if (!k.mesh)
    return core_error_set(DT_ERR_INTERNAL, "%s: the DTensor layer ran for op %s "
                          "with no DTensor argument", c->api, core_op_name(c->op));
  if (k.plain_arg >= 0)
    return core_error_set(DT_ERR_MESH, "%s: argument %d is a single-device "
                          "tensor and argument %d a DTensor; an op does not mix "
                          "the two kinds (neither does PyTorch): make argument %d "
                          "a DTensor on the same mesh (dt_from_host or a "
                          "factory with options.mesh)", c->api, k.plain_arg,
                          k.mesh_arg, k.plain_arg);
  if (k.other)
    return core_error_set(DT_ERR_MESH, "%s: the DTensor arguments live on "
                          "different meshes; redistribute them onto one mesh "
                          "first (dt_redistribute with a mesh)", c->api);
  if (atomic_load_explicit(&k.mesh->rt->dead, memory_order_acquire))
    return core_error_set(DT_ERR_DEVICE, "%s: the tensors' runtime was "
                          "destroyed", c->api);
  *mesh = k.mesh;
  return DT_OK;
}

/* ---- costs of one input on one mesh dim */
/* R -> S(d) on mesh dim md is a local narrowing when no later mesh dim
 * already shards d (nesting goes left to right) */
static bool narrowing(const dt_tensor *t, int md, dt_placement to) {
  const core_spec *s = t->spec;
  if (s->placements[md].kind != DT_PLACEMENT_REPLICATE) return false;
  if (to.kind == DT_PLACEMENT_PARTIAL) return true;
  if (to.kind != DT_PLACEMENT_SHARD) return false;
  for (int k = md + 1; k < s->mesh->ndim; k++)
    if (s->placements[k].kind == DT_PLACEMENT_SHARD && s->placements[k].dim == to.dim)
      return false;
  return true;
}

/* the redistribution of t from its placements to `to` (its steps in
 * *steps, their count returned; -1 when impossible) */
static int plan_to(const dt_tensor *t, const dt_placement *to,
                   mesh_plan_step *steps) {
  const core_spec *s = t->spec;
  return mesh_plan(s->mesh, &s->shape, core_dtype_size(t->dtype),
                   s->placements, to, steps, "dt_redistribute");
}

/* tensor dim d is sharded by a mesh dim other than md */
static bool shard_elsewhere(const core_spec *s, int md, int d) {
  for (int k = 0; k < s->mesh->ndim; k++)
    if (k != md && s->placements[k].kind == DT_PLACEMENT_SHARD &&
        s->placements[k].dim == d)
      return true;
  return false;
}

/* The cost of changing mesh dim md alone when it is one collective with
 * no nesting to undo (what mesh_plan would find, without planning): S->R
 * all_gather, P->R all_reduce, P->S reduce_scatter, S(i)->S(j)
 * all_to_all. -1: ask the planner. */
static double direct_cost(const dt_tensor *t, int md, dt_placement to) {
  const core_spec *s = t->spec;
  dt_placement from = s->placements[md];
  mesh_plan_kind kind;
  if (from.kind == DT_PLACEMENT_SHARD && to.kind == DT_PLACEMENT_REPLICATE &&
      !shard_elsewhere(s, md, from.dim))
    kind = MESH_PLAN_ALL_GATHER;
  else if (from.kind == DT_PLACEMENT_PARTIAL && to.kind == DT_PLACEMENT_REPLICATE)
    kind = MESH_PLAN_ALL_REDUCE;
  else if (from.kind == DT_PLACEMENT_PARTIAL && to.kind == DT_PLACEMENT_SHARD &&
           !shard_elsewhere(s, md, to.dim))
    kind = MESH_PLAN_REDUCE_SCATTER;
  else if (from.kind == DT_PLACEMENT_SHARD && to.kind == DT_PLACEMENT_SHARD &&
           !shard_elsewhere(s, md, from.dim) && !shard_elsewhere(s, md, to.dim))
    kind = MESH_PLAN_ALL_TO_ALL;
  else
    return -1;
  return 1e-3 + mesh_plan_cost_us(s->mesh, &s->shape, core_dtype_size(t->dtype),
                                  s->placements, kind, md);
}

static double step_cost(const dt_tensor *t, int md, dt_placement to) {
  const core_spec *s = t->spec;
  if (mesh_placement_equal(s->placements[md], to)) return 0;
  if (narrowing(t, md, to)) return FREE_COST;
    double direct = direct_cost(t, md, to);
  if (direct >= 0) return direct;
  /* what the planner refuses, found without it (its messages cost more
   * than the plan): Shard -> Partial, and two Partial kinds at once */
  if (to.kind == DT_PLACEMENT_PARTIAL &&
      s->placements[md].kind == DT_PLACEMENT_SHARD)
    return INFINITY;
  dt_placement dst[DT_MAX_DIMS];
  memcpy(dst, s->placements, sizeof dst);
  dst[md] = to;
  for (int k = 0; k < s->mesh->ndim; k++)
    if (k != md && to.kind == DT_PLACEMENT_PARTIAL &&
        dst[k].kind == DT_PLACEMENT_PARTIAL && dst[k].reduce != to.reduce)
      return INFINITY;
  mesh_plan_step steps[MESH_PLAN_MAX_STEPS];
  int n = plan_to(t, dst, steps);
  if (n < 0) return INFINITY;
  double us = 1e-3; /* communication, however small, loses to narrowing */
  for (int i = 0; i < n; i++) us += steps[i].cost_us;
  return us;
}

/* the costs of one mesh dim's strategies, each (input, target) planned
 * once: strategies share most of their targets */
#define MEMO 48
typedef struct cost_memo { int n; const dt_tensor *t[MEMO]; dt_placement to[MEMO]; double cost[MEMO]; } cost_memo;
typedef struct cost_ctx { const ops_strategy *s; int md; double cost; cost_memo *memo; } cost_ctx;
static void add_cost(int pos, dt_tensor *t, void *ctx) {
  cost_ctx *k = ctx;
  cost_memo *m = k->memo;
  dt_placement to = k->s->in[pos];
  for (int i = 0; i < m->n; i++)
    if (m->t[i] == t && mesh_placement_equal(m->to[i], to)) {
      k->cost += m->cost[i];
      return;
    }
  double c = step_cost(t, k->md, to);
  if (m->n < MEMO) {
    m->t[m->n] = t;
    m->to[m->n] = to;
    m->cost[m->n++] = c;
  }
  k->cost += c;
}

/* ---- propagation (a miss) */
static bool is_reshape(core_op_id op) {
  return op == CORE_OP_VIEW || op == CORE_OP_RESHAPE || op == CORE_OP_FLATTEN;
}

/* the flat range [lo, hi) a box covers in row-major order, false when it
 * is not one range */
/* the flat range [lo, hi) that box b covers within dims [a, e) of shape g
 * (row-major over those dims); false if it is not one contiguous range */
static bool flat_range(const mesh_box *b, const dt_shape *g, int a, int e,
                       int64_t *lo, int64_t *hi) {
  int64_t n = 1, stride = 1, at = 0;
  int last = -1;
  for (int d = a; d < e; d++) {
    n *= b->len[d];
    if (b->len[d] != g->dims[d]) last = d;
  }
  for (int d = a; d < last; d++)
    if (b->len[d] > 1 && n > 0) return false;
  for (int d = e - 1; d >= a; d--) {
    at += b->off[d] * stride;
    stride *= g->dims[d];
  }
  *lo = n ? at : 0;
  *hi = *lo + n;
  return true;
}

/* the next group of a reshape: input dims [*i, ni) and output dims
 * [*j, no) taken until their products agree (non-empty shapes) */
static void next_group(const dt_shape *gi, const dt_shape *go, int *i, int *j) {
  int64_t pi = *i < gi->ndim ? gi->dims[(*i)++] : 1;
  int64_t pj = *j < go->ndim ? go->dims[(*j)++] : 1;
  while (pi != pj) {
    if (pi < pj && *i < gi->ndim) pi *= gi->dims[(*i)++];
    else if (pj < pi && *j < go->ndim) pj *= go->dims[(*j)++];
    else break; /* cannot happen: the numels agree */
  }
}

/* view/reshape/flatten: per group of dims the reshape merges or splits,
 * every rank's input box must hold exactly the flat range its output box
 * covers there (n-D meshes nest shards; the rule checked one mesh dim at
 * a time). A shard of a dim the reshape leaves alone always passes. */
static bool reshape_boxes_match(const dt_op_call *c, const dt_mesh *m,
                                const dispatch_plan *p) {
  const dt_tensor *a = c->args[0].t;
  dt_shape gi = a->spec->shape, go = {.ndim = p->meta[0].ndim};
  memcpy(go.dims, p->meta[0].sizes, sizeof(int64_t) * (size_t)go.ndim);
  int64_t numel = 1;
  for (int d = 0; d < gi.ndim; d++) numel *= gi.dims[d];
  if (!numel) return true;
  for (int r = 0; r < m->size; r++) {
    mesh_box bi = mesh_box_of(m, p->in[0], &gi, r), bo = mesh_box_of(m, p->out[0], &go, r);
    for (int i = 0, j = 0; i < gi.ndim || j < go.ndim;) {
      int i0 = i, j0 = j;
      next_group(&gi, &go, &i, &j);
      int64_t l0, h0, l1, h1;
      if (!flat_range(&bi, &gi, i0, i, &l0, &h0) || !flat_range(&bo, &go, j0, j, &l1, &h1) ||
          l0 != l1 || h0 != h1)
        return false;
    }
  }
  return true;
}

static void drop_shards(dt_placement *pl, int n) {
  for (int i = 0; i < n; i++)
    if (pl[i].kind == DT_PLACEMENT_SHARD) pl[i] = DT_REPLICATE;
}

/* every Partial of strategy s (inputs and outputs) is of kind `kind` */
static bool partials_of(const ops_strategy *s, int kind) {
  for (int a = 0; a < CORE_CALL_MAX_ARGS; a++)
    if (s->in[a].kind == DT_PLACEMENT_PARTIAL && (int)s->in[a].reduce != kind)
      return false;
  for (int o = 0; o < CORE_CALL_MAX_OUTS; o++)
    if (s->out[o].kind == DT_PLACEMENT_PARTIAL && (int)s->out[o].reduce != kind)
      return false;
  return true;
}

/* the cheapest strategy on mesh dim md into p (only_kind >= 0: among
 * those whose Partials are all of that kind); false: none is possible */
static bool choose(const dt_op_call *c, const dt_mesh *m, int md,
                   ops_rule_set *rs, dispatch_plan *p, int only_kind) {
  rs->mesh_size = m->shape[md];
  rs->n = 0;
  ops_defs[c->op].rule(c, rs);
  int best = -1;
  double best_cost = INFINITY;
  cost_memo memo = {.n = 0};
  for (int i = 0; i < rs->n; i++) {
    if (only_kind >= 0 && !partials_of(&rs->s[i], only_kind)) continue;
    cost_ctx k = {&rs->s[i], md, 0, &memo};
    each_tensor(c, add_cost, &k);
    if (k.cost < best_cost) {
      best_cost = k.cost;
      best = i;
    }
  }
  if (best < 0) return false;
  for (int a = 0; a < CORE_CALL_MAX_ARGS; a++) p->in[a][md] = rs->s[best].in[a];
  for (int o = 0; o < p->nmeta; o++) p->out[o][md] = rs->s[best].out[o];
  p->cost_us += best_cost;
  return true;
}

/* the redistribution of t to `to` moves data between ranks: one of its
 * planned steps is a collective over more than one rank (a mesh dim of
 * size 1 makes every step local), or no plan reaches `to`. The same test
 * decides strict mode's refusal (note_flags) and what its message offers
 * (put_fix), so a refusal always names a fix. */
static bool communicates(const dt_tensor *t, const dt_placement *to,
                         mesh_plan_step *steps, int *n) {
  *n = plan_to(t, to, steps);
  bool comm = *n < 0;
  for (int i = 0; i < *n; i++)
    comm |= mesh_plan_step_communicates(t->spec->mesh, &steps[i]);
  return comm;
}

typedef struct flags_ctx { const dispatch_plan *p; bool comm, adjust; } flags_ctx;
/* comm: an input's redistribution communicates; adjust: the ranks change
 * an input locally (a narrowing, a zeroed Partial term, or steps over
 * mesh dims of size 1) */
static void note_flags(int pos, dt_tensor *t, void *ctx) {
  flags_ctx *k = ctx;
  const core_spec *s = t->spec;
  bool moved = false;
  for (int md = 0; md < s->mesh->ndim; md++) {
    dt_placement to = k->p->in[pos][md];
    if (mesh_placement_equal(s->placements[md], to)) continue;
    if (narrowing(t, md, to)) k->adjust = true;
    else moved = true;
  }
  if (!moved) return;
  mesh_plan_step steps[MESH_PLAN_MAX_STEPS];
  int n;
  if (communicates(t, k->p->in[pos], steps, &n)) k->comm = true;
  else k->adjust = true;
}

static dt_status no_strategy(const dt_op_call *c, const dt_mesh *m, int md);

/* some input target or output of p holds two Partial kinds */
static bool mixes_partials(const dispatch_plan *p, int nd) {
  const dt_placement *lists[CORE_CALL_MAX_ARGS + CORE_CALL_MAX_OUTS];
  int n = 0;
  for (int a = 0; a < CORE_CALL_MAX_ARGS; a++) lists[n++] = p->in[a];
  for (int o = 0; o < p->nmeta; o++) lists[n++] = p->out[o];
  for (int l = 0; l < n; l++) {
    int kind = -1;
    for (int md = 0; md < nd; md++) {
      if (lists[l][md].kind != DT_PLACEMENT_PARTIAL) continue;
      if (kind >= 0 && kind != (int)lists[l][md].reduce) return true;
      kind = (int)lists[l][md].reduce;
    }
  }
  return false;
}

/* the op's infer on the global shapes: its checks, messages and output
 * metadata, exactly as on one device */
static dt_status infer_call(dt_op_call *c) {
  if (!ops_defs[c->op].rule) /* an op added without one: say so, never guess */
    return core_error_set(DT_ERR_UNSUPPORTED,
                          "%s: op '%s' has no sharding rule, so it cannot run on "
                          "DTensors; redistribute its inputs to [R] and call it on "
                          "dt_to_host() copies",
                          c->api, core_op_name(c->op));
  c->nmeta = 1;
  c->meta[0].alias = -1;
  c->meta[0].offset = 0;
  return ops_defs[c->op].infer(c);
}

/* a miss; `inferred`: infer_call already ran for this call (an op with
 * an argument outside the key), so it is not run twice */
static dt_status propagate(dt_op_call *c, const dt_mesh *m, dispatch_plan *p,
                           bool inferred) {
  dt_status st = inferred ? DT_OK : infer_call(c);
  if (st != DT_OK) return st;
  memset(p, 0, sizeof *p);
  p->nmeta = c->nmeta;
  for (int o = 0; o < c->nmeta; o++) {
    p->meta[o] = c->meta[o];
    p->meta[o].alias = -1; /* a DTensor view is a fresh, contiguous shard */
    p->meta[o].offset = 0;
  }
  ops_rule_set *rs = malloc(sizeof *rs);
  if (!rs) return core_error_set(DT_ERR_OUT_OF_MEMORY, "%s: out of host memory",
                                 c->api);
  for (int md = 0; md < m->ndim; md++)
    if (!choose(c, m, md, rs, p, -1)) {
      free(rs);
      return no_strategy(c, m, md);
    }
  if (mixes_partials(p, m->ndim)) { /* one Partial kind per tensor */
    dispatch_plan best, trial = *p;
    best.cost_us = INFINITY;
    for (int kind = DT_REDUCE_SUM; kind <= DT_REDUCE_PROD; kind++) {
      trial.cost_us = 0;
      bool ok = true;
      for (int md = 0; md < m->ndim && ok; md++) ok = choose(c, m, md, rs, &trial, kind);
      if (ok && trial.cost_us < best.cost_us) best = trial;
    }
    if (isinf(best.cost_us)) {
      free(rs);
      return no_strategy(c, m, 0);
    }
    *p = best;
  }
  free(rs);
  if (is_reshape(c->op) && !reshape_boxes_match(c, m, p)) {
    drop_shards(p->in[0], m->ndim);
    drop_shards(p->out[0], m->ndim);
  }
  for (int o = 0; o < p->nmeta; o++) {
    dt_shape g = {.ndim = p->meta[o].ndim};
    memcpy(g.dims, p->meta[o].sizes, sizeof(int64_t) * (size_t)g.ndim);
    st = mesh_check_placements(m, p->out[o], &g, c->api);
    if (st != DT_OK) return st;
  }
  flags_ctx k = {p, false, false};
  each_tensor(c, note_flags, &k);
  p->comm = k.comm;
  p->adjust = k.adjust;
  return DT_OK;
}

/* ---- messages: what strict mode refuses, what would fix it */
static void mesh_str(const dt_mesh *m, char *buf, size_t len) {
  size_t at = (size_t)snprintf(buf, len, "(");
  for (int d = 0; d < m->ndim && at < len; d++)
    at += (size_t)snprintf(buf + at, len - at, m->names[d] ? "%s%s=%lld" : "%s%.0s%lld",
                           d ? ", " : "", m->names[d] ? m->names[d] : "",
                           (long long)m->shape[d]);
  if (at < len) snprintf(buf + at, len - at, ")");
}

static void bytes_str(int64_t b, char *buf, size_t len) {
  if (b < 1024) snprintf(buf, len, "%lld B", (long long)b);
  else if (b < 1024 * 1024) snprintf(buf, len, "%.3g KiB", (double)b / 1024);
  else if (b < 1024LL * 1024 * 1024) snprintf(buf, len, "%.3g MiB", (double)b / 1048576);
  else snprintf(buf, len, "%.3g GiB", (double)b / 1073741824.0);
}

typedef struct msg { char *buf; size_t len, at; } msg;
static void put(msg *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(msg *s, const char *fmt, ...) {
  if (s->at >= s->len) return;
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(s->buf + s->at, s->len - s->at, fmt, ap);
  va_end(ap);
  if (n > 0) s->at += (size_t)n;
}

typedef struct input_ctx { msg *s; int n; const dispatch_plan *p; const dt_mesh *m; } input_ctx;
static void put_input(int pos, dt_tensor *t, void *ctx) {
  input_ctx *k = ctx;
  char pl[96];
  put(k->s, "%s%s", k->n++ ? " and " : "",
      mesh_placements_str(t->spec->placements, k->m->ndim, pl, sizeof pl));
  (void)pos;
}

/* the fix of one input: its collectives and the bytes they move */
static void put_fix(int pos, dt_tensor *t, void *ctx) {
  input_ctx *k = ctx;
  const dt_placement *to = k->p->in[pos];
  mesh_plan_step steps[MESH_PLAN_MAX_STEPS];
  int n;
  if (!communicates(t, to, steps, &n)) return;
  char pl[96], bs[32];
  put(k->s, "%sredistribute input %d to %s (", k->n++ ? ", " : "", pos,
      mesh_placements_str(to, k->m->ndim, pl, sizeof pl));
  if (n < 0) { /* cannot happen for a chosen strategy (its cost was finite) */
    put(k->s, "no plan reaches it)");
    return;
  }
  int64_t bytes = 0, off[DT_MAX_DIMS], len[DT_MAX_DIMS];
  for (int i = 0, first = 1; i < n; i++) {
    if (!mesh_plan_step_communicates(k->m, &steps[i])) continue;
    put(k->s, "%s%s", first ? "" : " + ", mesh_plan_kind_name(steps[i].kind));
    first = 0;
    for (int r = 0; r < k->m->size; r++) {
      mesh_local_box(k->m, steps[i].before, &t->spec->shape, r, off, len);
      bytes += core_numel_of(len, t->spec->shape.ndim) * (int64_t)core_dtype_size(t->dtype);
    }
  }
  bytes_str(bytes, bs, sizeof bs);
  put(k->s, ", %s)", bs);
}

/* the input placements of every strategy on mesh dim md, once each */
__attribute__((noinline)) static void put_legal(msg *s, const dt_op_call *c, const dt_mesh *m, int md) {
  ops_rule_set *rs = malloc(sizeof *rs);
  if (!rs) return;
  rs->mesh_size = m->shape[md];
  rs->n = 0;
  ops_defs[c->op].rule(c, rs);
  const char *sch = core_op_schema(c->op);
  int shown = 0;
  for (int i = 0; i < rs->n; i++) {
    char one[256];
    msg o = {one, sizeof one, 0};
    int nin = 0;
    for (int a = 0; sch[a]; a++) {
      if (!((sch[a] == 'T' || sch[a] == 't') && c->args[a].t) && sch[a] != 'L') continue;
      char pl[32];
      put(&o, "%s%s", nin++ ? ", " : "",
          mesh_placements_str(&rs->s[i].in[a], 1, pl, sizeof pl));
    }
    bool dup = false;
    for (int j = 0; j < i && !dup; j++)
      dup = !memcmp(rs->s[j].in, rs->s[i].in, sizeof rs->s[i].in);
    if (dup) continue;
    put(s, "%s%s%s%s", shown++ ? ", " : "", nin > 1 ? "(" : "", one, nin > 1 ? ")" : "");
  }
  free(rs);
}

typedef struct dim_ctx { const dispatch_plan *p; int md; bool comm; } dim_ctx;
static void dim_comm(int pos, dt_tensor *t, void *ctx) {
  dim_ctx *k = ctx;
  dt_placement to = k->p->in[pos][k->md];
  /* a mesh dim of one rank changes placements locally */
  if (!mesh_placement_equal(t->spec->placements[k->md], to) &&
      !narrowing(t, k->md, to) && t->spec->mesh->shape[k->md] > 1)
    k->comm = true;
}

static dt_status strict_error(const dt_op_call *c, const dt_mesh *m,
                              const dispatch_plan *p) {
  char buf[1024], ms[96];
  msg s = {buf, sizeof buf, 0};
  input_ctx k = {&s, 0, p, m};
  mesh_str(m, ms, sizeof ms);
  put(&s, "%s: input placements ", c->api);
  each_tensor(c, put_input, &k);
  put(&s, " on mesh %s are not supported by %s without communication; legal",
      ms, core_op_name(c->op));
  for (int md = 0; md < m->ndim; md++) {
    dim_ctx d = {p, md, false};
    each_tensor(c, dim_comm, &d);
    if (!d.comm) continue;
    if (m->ndim > 1) put(&s, " on mesh dim %d", md);
    put(&s, ": ");
    put_legal(&s, c, m, md);
    break;
  }
  put(&s, "; cheapest fix: ");
  k.n = 0;
  each_tensor(c, put_fix, &k);
  put(&s, "; or enable auto_redistribute");
  return core_error_set(DT_ERR_PLACEMENT, "%s", buf);
}

static dt_status no_strategy(const dt_op_call *c, const dt_mesh *m, int md) {
  char buf[512], ms[96];
  msg s = {buf, sizeof buf, 0};
  input_ctx k = {&s, 0, NULL, m};
  mesh_str(m, ms, sizeof ms);
  put(&s, "%s: op %s has no sharding strategy for input placements ", c->api,
      core_op_name(c->op));
  each_tensor(c, put_input, &k);
  put(&s, " on mesh %s (mesh dim %d): no redistribution of them reaches a "
      "legal one", ms, md);
  return core_error_set(DT_ERR_PLACEMENT, "%s", buf);
}

/* ---- stage E: outputs and the record */
/* the job's reference to an input: the input itself, or (auto mode) its
 * redistribution to the strategy's placements; NULL + error */
static dt_tensor *job_input(dt_tensor *t, const dt_placement *to,
                            dt_mesh *m, const char *api) {
  const core_spec *s = t->spec;
  bool comm = false;
  for (int md = 0; md < m->ndim && !comm; md++)
    comm = !mesh_placement_equal(s->placements[md], to[md]) &&
           !narrowing(t, md, to[md]);
  if (!comm) return core_tensor_retain(t);
  return mesh_redistribute_to(t, m, to, true, api);
}

/* the job takes references on its inputs (references taken so far are
 * dropped by dispatch_dtensor_done when one fails) */
static dt_status job_inputs(dispatch_dtensor_job *j, dt_op_call *c,
                            dt_mesh *m) {
  for (core_arg_it it = core_call_args(c); core_arg_next(&it);) {
    int i = it.pos, e = it.elem;
    if (e < 0 && !it.t) continue; /* an absent optional */
    if (e == 0) { /* a list: the job's copy, made at its first element */
      j->list = calloc((size_t)c->args[i].list.n, sizeof *j->list);
      j->list_arg = i;
      j->args[i].list.v = j->list;
      if (!j->list) return core_error_set(DT_ERR_OUT_OF_MEMORY, "%s: out of "
                                          "host memory", c->api);
    }
    dt_tensor *t = job_input(it.t, dispatch_job_in(j, i), m, c->api);
    if (!t) return core_last_status();
    if (e < 0) {
      j->args[i].t = t;
    } else {
      j->list[e] = t;
      j->args[i].list.n = e + 1;
    }
  }
  return DT_OK;
}

static dt_status job_outputs(dispatch_dtensor_job *j, dt_op_call *c,
                             const dispatch_plan *p, dt_mesh *m) {
  for (int o = 0; o < p->nmeta; o++) {
    dt_shape g = {.ndim = p->meta[o].ndim};
    memcpy(g.dims, p->meta[o].sizes, sizeof(int64_t) * (size_t)g.ndim);
    dt_tensor *t = mesh_dtensor_make(m, p->out[o], g, p->meta[o].dtype, c->api);
    if (!t) return core_last_status();
    c->out[c->nout++] = t;
    j->out[j->nout++] = core_tensor_retain(t);
  }
  return DT_OK;
}

/* a job sized for c: its arguments (tensor entries cleared: filled as
 * references are taken) and the plan's targets, mesh ndim each */
static dispatch_dtensor_job *job_new(const dt_op_call *c, const dispatch_plan *p,
                                     dt_mesh *m) {
  int nd = m->ndim, rows = c->nargs + p->nmeta;
  size_t args = sizeof(core_value) * (size_t)c->nargs;
  dispatch_dtensor_job *j = malloc(sizeof *j + args +
                                   sizeof(dt_placement) * (size_t)(rows * nd));
  if (!j) return NULL;
  j->op = c->op;
  j->kernel = c->kernel;
  j->nargs = c->nargs;
  j->nout = 0;
  j->nd = nd;
  j->list_arg = -1;
  j->api = c->api;
  j->mesh = mesh_retain(m);
  j->list = NULL;
  memcpy(j->args, c->args, args);
  j->pl = (dt_placement *)((char *)j->args + args);
  for (int i = 0; i < c->nargs; i++)
    memcpy(j->pl + i * nd, p->in[i], sizeof(dt_placement) * (size_t)nd);
  for (int o = 0; o < p->nmeta; o++)
    memcpy(j->pl + (c->nargs + o) * nd, p->out[o], sizeof(dt_placement) * (size_t)nd);
  const char *sch = core_op_schema(c->op);
  for (int i = 0; sch[i]; i++)
    if (sch[i] == 'T' || sch[i] == 't') j->args[i].t = NULL;
    else if (sch[i] == 'L') j->args[i].list.n = 0;
  return j;
}


/* a dry run's cost of a DTensor op (runtime_dry_call): the fullest
 * rank's output boxes, and the contraction length of the first input's
 * box on mesh index 0 */
static void dry_cost(const dt_op_call *c, dt_runtime *rt) {
  int64_t elems[CORE_CALL_MAX_OUTS], k = -1;
  for (int o = 0; o < c->nout; o++) elems[o] = mesh_dry_max_box(c->out[o]);
  const dt_tensor *a = c->args[0].t;
  if ((core_op_flags(c->op) & CORE_OP_CONTRACTS) && a && a->spec &&
      a->local.ndim > 0) {
    mesh_box b = mesh_box_of(a->spec->mesh, a->spec->placements, &a->spec->shape, 0);
    k = b.len[b.n - 1];
  }
  runtime_dry_call(rt, c, elems, k);
}

static dt_status publish(dt_op_call *c, dt_mesh *m, const dispatch_plan *p) {
  dispatch_dtensor_job *j = job_new(c, p, m);
  if (!j) return core_error_set(DT_ERR_OUT_OF_MEMORY, "%s: out of host memory",
                                c->api);
  dt_status st = job_inputs(j, c, m);
  if (st == DT_OK) st = job_outputs(j, c, p, m);
  if (st == DT_OK && m->rt->dry_run) dry_cost(c, m->rt);
  if (st == DT_OK &&
      runtime_publish_named_call(m->rt, -1, core_op_name(c->op),
                                 dispatch_dtensor_exec,
                                 dispatch_dtensor_done, j) != DT_OK)
    st = runtime_publish_failed(c->api);
  if (st != DT_OK) {
    dt_status keep = st;
    dispatch_dtensor_done(j);
    dispatch_release_outs(c);
    return keep;
  }
  /* a multi-process job: the processes' verdicts on the data must agree,
   * or they would issue different ops next (mesh/agree.c) */
  if (ops_checks_data(c->op) &&
      (st = mesh_is_split(m) ? mesh_agree_outputs(m, c->out, c->nout, c->api)
                             : dispatch_wait_outputs(c, m->rt, -1)) != DT_OK)
    dispatch_release_outs(c);
  return st;
}

static _Thread_local bool tls_force_auto;
bool dispatch_dtensor_force_auto(bool on) {
  bool was = tls_force_auto;
  tls_force_auto = on;
  return was;
}

static _Thread_local dt_redistribute_mode tls_mode; /* DEFAULT: the runtime's */
dt_status dispatch_redistribute_mode_set(dt_redistribute_mode mode) {
  if ((unsigned)mode > DT_REDISTRIBUTE_EXPLICIT)
    return core_error_set(DT_ERR_INVALID_ARGUMENT, "dt_redistribute_mode_set: "
                          "mode %d is not a dt_redistribute_mode (DEFAULT, "
                          "AUTO or EXPLICIT)", (int)mode);
  tls_mode = mode;
  return DT_OK;
}
dt_redistribute_mode dispatch_redistribute_mode(void) { return tls_mode; }

/* whether this call may insert collectives: backward's ops always may,
 * then this thread's mode, then the runtime's option */
static bool may_redistribute(const dt_mesh *m) {
  if (tls_force_auto || tls_mode == DT_REDISTRIBUTE_AUTO) return true;
  return tls_mode == DT_REDISTRIBUTE_DEFAULT && m->rt->auto_redistribute;
}

dt_status dispatch_dtensor_layer(dt_op_call *c) {
  if (c->nout)
    return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: op %s was already run "
                          "for this call", c->api, core_op_name(c->op));
  dt_mesh *m = NULL;
  dt_status st = check_inputs(c, &m);
  if (st != DT_OK) return st;
  /* the kernel every rank runs, looked up once here (views run none) */
  core_kernel_fn cpu = ops_defs[c->op].cpu;
  c->kernel = cpu == ops_alias_cpu || cpu == ops_copy_cpu
                  ? NULL : runtime_kernel_of(m->rt, c->op);
  if (cpu != ops_alias_cpu && cpu != ops_copy_cpu && !c->kernel)
    return runtime_no_kernel(m->rt, c->api, c->op);
  /* A hit gives exactly what a miss would. An op whose arguments are all
   * in the key gets the same infer result for the same key, so a hit may
   * skip its infer. One with a scalar, eps, p or seed (k.statics) runs its
   * infer here, hit or miss — every per-call check and the dtype decision
   * (int32 + 1.5 is float32, int // 0 fails) happen as on a miss — and its
   * output metadata joins the key: the rules read nothing else of those
   * arguments, so a changing step or scalar of the same class still hits.
   * Cost on a hit: the infer and a few key words (docs/sharding.md). */
  dispatch_key k;
  dispatch_key_build(c, &k);
  if (k.statics) {
    if ((st = infer_call(c)) != DT_OK) return st;
    dispatch_key_put_meta(c, &k);
  }
  const dispatch_plan *p = dispatch_cache_find(&k);
  dispatch_plan fresh;
  if (!p) {
    if ((st = propagate(c, m, &fresh, k.statics)) != DT_OK) return st;
    dispatch_cache_insert(&k, &fresh);
    p = &fresh;
  }
  if (p->comm && !may_redistribute(m))
    return strict_error(c, m, p);
  st = publish(c, m, p);
  /* a DTensor view is a copy: dt_copy_ must not write it as if it reached
   * its base (fresh handles: no other thread sees them yet) */
  for (int o = 0; st == DT_OK && cpu == ops_alias_cpu && o < c->nout; o++)
    if (c->out[o]->spec) c->out[o]->spec->view_of = core_op_name(c->op);
  if (st == DT_OK && dispatch_shadow_active()) dispatch_shadow_check(c);
  return st;
}
