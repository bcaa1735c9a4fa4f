/* The redistribute planner (mesh/plan.h): from a source placement list to
 * a target one on the same mesh, as steps that each change one mesh dim.
 *
 * Algorithm. A mesh dim whose Shard(d) is the same in both lists is "kept"
 * when every outer mesh dim (smaller index) that shards d in either list
 * is kept too: its piece of d is then the same before and after, so it
 * needs no step. Every other mesh dim whose placement differs, or that is
 * a shard not kept, is "pending" until it holds its target. Three passes:
 *   A. all_reduce each pending Partial whose target is not a Shard (first,
 *      while the other dims still shard the data, so fewer bytes move);
 *   B. innermost mesh dim first: each pending Shard(a) leaves — straight
 *      to its target Shard(b) by all_to_all when no outer pending mesh dim
 *      still shards or will shard b, else to Replicate by all_gather;
 *   C. outermost mesh dim first: each pending dim reaches its target by
 *      local chunk, reduce_scatter or local partial.
 * Invariant (what the executor relies on): a step on mesh dim m that
 * removes or adds Shard(d) finds no mesh dim after m sharding d, so it
 * reads and writes the standard left-to-right nested layout. Why it holds:
 * a mesh dim after m that shards d at that time is either kept (but kept
 * needs every outer mesh dim touching d kept, and m is not) or got Shard(d)
 * by an all_to_all of pass B (refused while m, outer and pending, touches
 * d). tests/test_plan.c checks it with a data simulator.
 *
 * Each mesh dim takes at most two steps (gather + chunk, or all_reduce +
 * local partial); a mesh dim that changes while no other mesh dim touches
 * the same tensor dim takes exactly one. */
#include "mesh/plan.h"

#include <stdio.h>
#include <string.h>

#include "core/error.h"

/* alpha-beta constants (docs/mesh.md; PyTorch _collective_utils.py) */
#define LATENCY_BASE_US 6.6
#define LATENCY_HOP_US 0.6
#define BYTES_PER_US 87.7e3 /* 87.7 GB/s */

#define ONE_LEN 32                   /* one placement, long form */
#define LIST_LEN (DT_MAX_DIMS * 24)  /* "[S(0), R, P(sum)]" */

static const char *const kind_names[] = {
    "all_gather",  "all_reduce",  "reduce_scatter",
    "all_to_all",  "local_chunk", "local_partial"};
_Static_assert(sizeof kind_names / sizeof *kind_names == MESH_PLAN_KIND_COUNT,
               "one name per mesh_plan_kind");

static const char *const op_names[] = {"sum", "avg", "max", "min", "prod"};
_Static_assert(sizeof op_names / sizeof *op_names == DT_REDUCE_PROD + 1,
               "one name per dt_reduce_op");

/* ------------------------------------------------------------ placements */

static bool is_shard(dt_placement p) { return p.kind == DT_PLACEMENT_SHARD; }
static bool is_partial(dt_placement p) {
  return p.kind == DT_PLACEMENT_PARTIAL;
}
static bool shards(dt_placement p, int d) { return is_shard(p) && p.dim == d; }

static bool same(dt_placement a, dt_placement b) {
  if (a.kind != b.kind) return false;
  if (a.kind == DT_PLACEMENT_SHARD) return a.dim == b.dim;
  if (a.kind == DT_PLACEMENT_PARTIAL) return a.reduce == b.reduce;
  return true;
}

static bool op_valid(dt_reduce_op op) {
  return (int)op >= 0 && (int)op <= (int)DT_REDUCE_PROD;
}
static const char *op_name(dt_reduce_op op) {
  return op_valid(op) ? op_names[op] : "?";
}

/* "S(0)" / "R" / "P(sum)", or the long "Shard(0)" / "Replicate()" /
 * "Partial(sum)"; invalid values print as "?(kind)" */
static char *one_str(dt_placement p, bool full, char *buf, size_t len) {
  switch (p.kind) {
  case DT_PLACEMENT_REPLICATE:
    snprintf(buf, len, "%s", full ? "Replicate()" : "R");
    break;
  case DT_PLACEMENT_SHARD:
    snprintf(buf, len, "%s(%d)", full ? "Shard" : "S", p.dim);
    break;
  case DT_PLACEMENT_PARTIAL:
    snprintf(buf, len, "%s(%s)", full ? "Partial" : "P", op_name(p.reduce));
    break;
  default:
    snprintf(buf, len, "?(%d)", (int)p.kind);
  }
  return buf;
}

/* "[S(0), R, P(sum)]" (the format of mesh_placements_str) */
static char *list_str(const dt_placement *pl, int n, char *buf, size_t len) {
  size_t o = 0;
  buf[0] = '\0';
  for (int i = 0; i <= n && o < len; i++) {
    char one[ONE_LEN];
    int k = i == n ? snprintf(buf + o, len - o, "%s", n ? "]" : "[]")
                   : snprintf(buf + o, len - o, "%s%s", i ? ", " : "[",
                              one_str(pl[i], false, one, sizeof one));
    if (k < 0) break;
    o += (size_t)k;
  }
  return buf;
}

/* ------------------------------------------------------------ validation */

static dt_status check_mesh_shape(const dt_mesh *m, const dt_shape *g,
                                  const char *fn) {
  if (m->ndim < 1 || m->ndim > DT_MAX_DIMS)
    return core_error_set(DT_ERR_MESH, "%s: mesh has %d dims (expected 1..%d)",
                        fn, m->ndim, DT_MAX_DIMS);
  for (int i = 0; i < m->ndim; i++)
    if (m->shape[i] < 1)
      return core_error_set(DT_ERR_MESH, "%s: mesh dim %d has size %lld", fn,
                          i, (long long)m->shape[i]);
  if (g->ndim < 0 || g->ndim > DT_MAX_DIMS)
    return core_error_set(DT_ERR_SHAPE, "%s: tensor has %d dims (expected "
                        "0..%d)", fn, g->ndim, DT_MAX_DIMS);
  for (int d = 0; d < g->ndim; d++)
    if (g->dims[d] < 0)
      return core_error_set(DT_ERR_SHAPE, "%s: tensor dim %d has size %lld",
                          fn, d, (long long)g->dims[d]);
  return DT_OK;
}

/* kinds and dims in range, one Partial kind per list (PyTorch bans
 * mixing them) */
static dt_status check_list(const dt_mesh *m, const dt_shape *g,
                            const dt_placement *pl, const char *which,
                            const char *fn) {
  char s[LIST_LEN];
  int op = -1, op_dim = -1;
  for (int i = 0; i < m->ndim; i++) {
    dt_placement p = pl[i];
    if (p.kind == DT_PLACEMENT_REPLICATE) continue;
    if (is_shard(p) && (p.dim < 0 || p.dim >= g->ndim))
      return core_error_set(DT_ERR_PLACEMENT, "%s: %s placements %s: "
                          "Shard(%d) on mesh dim %d is out of range for a "
                          "%d-d tensor", fn, which,
                          list_str(pl, m->ndim, s, sizeof s), p.dim, i,
                          g->ndim);
    if (is_shard(p)) continue;
    if (!is_partial(p) || !op_valid(p.reduce))
      return core_error_set(DT_ERR_PLACEMENT, "%s: %s placements %s: invalid "
                          "placement on mesh dim %d (kind %d, reduce op %d)",
                          fn, which, list_str(pl, m->ndim, s, sizeof s), i,
                          (int)p.kind, (int)p.reduce);
    if (op >= 0 && op != (int)p.reduce)
      return core_error_set(DT_ERR_PLACEMENT, "%s: %s placements %s mix "
                          "Partial(%s) (mesh dim %d) and Partial(%s) (mesh "
                          "dim %d); one Partial kind per tensor", fn, which,
                          list_str(pl, m->ndim, s, sizeof s),
                          op_names[op], op_dim, op_names[p.reduce], i);
    op = (int)p.reduce;
    op_dim = i;
  }
  return DT_OK;
}

static dt_status check_args(const dt_mesh *m, const dt_shape *g,
                            const dt_placement *src, const dt_placement *dst,
                            const char *fn) {
  dt_status st = check_mesh_shape(m, g, fn);
  if (st == DT_OK) st = check_list(m, g, src, "source", fn);
  if (st == DT_OK) st = check_list(m, g, dst, "target", fn);
  if (st != DT_OK) return st;
  for (int i = 0; i < m->ndim; i++) {
    if (!is_shard(src[i]) || !is_partial(dst[i])) continue;
    char a[ONE_LEN], b[ONE_LEN], ls[LIST_LEN], ld[LIST_LEN];
    return core_error_set(DT_ERR_PLACEMENT, "%s: cannot redistribute %s to %s "
                        "on mesh dim %d: %s -> %s (a shard holds only part "
                        "of the tensor; Shard to Partial is not supported)",
                        fn, one_str(src[i], true, a, sizeof a),
                        one_str(dst[i], true, b, sizeof b), i,
                        list_str(src, m->ndim, ls, sizeof ls),
                        list_str(dst, m->ndim, ld, sizeof ld));
  }
  return DT_OK;
}

/* ------------------------------------------------------------ the planner */

typedef struct planner {
  const dt_mesh *m;
  const dt_shape *global;
  size_t esize;
  dt_placement cur[DT_MAX_DIMS];
  const dt_placement *dst;
  bool pending[DT_MAX_DIMS];
  mesh_plan_step *steps;
  int n;
} planner;

/* kept[m]: Shard(d) in both lists, and so is every outer mesh dim that
 * shards d in either list (see the file comment) */
static void find_kept(int nd, const dt_placement *src,
                      const dt_placement *dst, bool *kept) {
  for (int m = 0; m < nd; m++) {
    kept[m] = is_shard(src[m]) && same(src[m], dst[m]);
    for (int o = 0; kept[m] && o < m; o++)
      if ((shards(src[o], src[m].dim) || shards(dst[o], src[m].dim)) &&
          !kept[o])
        kept[m] = false;
  }
}

/* a mesh dim after md that shards d now */
static bool inner_shards(const planner *p, int md, int d) {
  for (int i = md + 1; i < p->m->ndim; i++)
    if (shards(p->cur[i], d)) return true;
  return false;
}

/* a mesh dim before md, still pending, that shards d now or will */
static bool outer_pending_touches(const planner *p, int md, int d) {
  for (int i = 0; i < md; i++)
    if (p->pending[i] && (shards(p->cur[i], d) || shards(p->dst[i], d)))
      return true;
  return false;
}

/* bytes of the largest local piece under pl (torch.chunk: coordinate 0's
 * piece is the largest; collectives pad to it) */
static double step_cost(const planner *p, mesh_plan_kind kind, int md);

static double local_bytes(const planner *p, const dt_placement *pl) {
  int64_t len[DT_MAX_DIMS];
  for (int d = 0; d < p->global->ndim; d++) len[d] = p->global->dims[d];
  for (int i = 0; i < p->m->ndim; i++)
    if (is_shard(pl[i]))
      len[pl[i].dim] = (len[pl[i].dim] + p->m->shape[i] - 1) / p->m->shape[i];
  double b = (double)p->esize;
  for (int d = 0; d < p->global->ndim; d++) b *= (double)len[d];
  return b;
}

double mesh_plan_cost_us(const dt_mesh *m, const dt_shape *global,
                         size_t esize, const dt_placement *cur,
                         mesh_plan_kind kind, int mesh_dim) {
  planner p = {.m = m, .global = global, .esize = esize};
  memcpy(p.cur, cur, sizeof(dt_placement) * (size_t)m->ndim);
  return step_cost(&p, kind, mesh_dim);
}

/* alpha-beta: latency 6.6 + hops x 0.6 us, plus the bytes each rank moves
 * at 87.7 GB/s; a group of one moves nothing */
static double step_cost(const planner *p, mesh_plan_kind kind, int md) {
  double n = (double)p->m->shape[md];
  if (!mesh_plan_is_collective(kind) || n <= 1) return 0;
  double bytes = local_bytes(p, p->cur), hops = n - 1, moved;
  switch (kind) {
  case MESH_PLAN_ALL_GATHER: moved = bytes * (n - 1); break;
  case MESH_PLAN_ALL_REDUCE:
    moved = 2 * bytes * (n - 1) / n;
    hops = 2 * (n - 1);
    break;
  default: moved = bytes * (n - 1) / n; /* reduce_scatter, all_to_all */
  }
  return LATENCY_BASE_US + hops * LATENCY_HOP_US + moved / BYTES_PER_US;
}

static void emit(planner *p, mesh_plan_kind kind, int md, dt_placement to) {
  CORE_ASSERT(p->n < MESH_PLAN_MAX_STEPS);
  mesh_plan_step *s = &p->steps[p->n++];
  dt_placement from = p->cur[md];
  memset(s, 0, sizeof *s);
  s->kind = kind;
  s->mesh_dim = md;
  s->from_dim = is_shard(from) ? from.dim : -1;
  s->to_dim = is_shard(to) ? to.dim : -1;
  s->op = is_partial(from) ? from.reduce
          : is_partial(to) ? to.reduce
                           : DT_REDUCE_SUM;
  s->cost_us = step_cost(p, kind, md);
  memcpy(s->before, p->cur, sizeof p->cur);
  p->cur[md] = to;
  memcpy(s->after, p->cur, sizeof p->cur);
  p->pending[md] = !same(to, p->dst[md]);
}

/* A: Partial -> Replicate, or the first half of Partial(a) -> Partial(b) */
static void pass_reduce(planner *p) {
  for (int md = 0; md < p->m->ndim; md++)
    if (p->pending[md] && is_partial(p->cur[md]) && !is_shard(p->dst[md]))
      emit(p, MESH_PLAN_ALL_REDUCE, md, DT_REPLICATE);
}

/* B: innermost first, every pending Shard leaves */
static void pass_unshard(planner *p) {
  for (int md = p->m->ndim - 1; md >= 0; md--) {
    dt_placement c = p->cur[md], t = p->dst[md];
    if (!p->pending[md] || !is_shard(c)) continue;
    CORE_ASSERT(!inner_shards(p, md, c.dim));
    if (is_shard(t) && t.dim != c.dim && !inner_shards(p, md, t.dim) &&
        !outer_pending_touches(p, md, t.dim))
      emit(p, MESH_PLAN_ALL_TO_ALL, md, t);
    else
      emit(p, MESH_PLAN_ALL_GATHER, md, DT_REPLICATE);
  }
}

/* C: outermost first, every pending dim (now Replicate or Partial) takes
 * its target in one step */
static void pass_finish(planner *p) {
  for (int md = 0; md < p->m->ndim; md++) {
    dt_placement c = p->cur[md], t = p->dst[md];
    if (!p->pending[md]) continue;
    CORE_ASSERT(!is_shard(c));
    if (is_shard(t)) {
      CORE_ASSERT(!inner_shards(p, md, t.dim));
      emit(p, is_partial(c) ? MESH_PLAN_REDUCE_SCATTER : MESH_PLAN_LOCAL_CHUNK, md, t);
    } else {
      CORE_ASSERT(is_partial(t) && c.kind == DT_PLACEMENT_REPLICATE);
      emit(p, MESH_PLAN_LOCAL_PARTIAL, md, t);
    }
  }
}

int mesh_plan(const dt_mesh *m, const dt_shape *global, size_t esize,
              const dt_placement *src, const dt_placement *dst,
              mesh_plan_step *steps, const char *fn) {
  if (!fn) fn = "mesh_plan";
  if (!m || !global || !src || !dst || !steps) {
    core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: NULL %s", fn,
                 !m        ? "mesh"
                 : !global ? "shape"
                 : !src    ? "source placements"
                 : !dst    ? "target placements"
                           : "steps");
    return -1;
  }
  if (check_args(m, global, src, dst, fn) != DT_OK) return -1;
  planner p = {.m = m, .global = global, .esize = esize, .dst = dst,
               .steps = steps};
  bool kept[DT_MAX_DIMS];
  find_kept(m->ndim, src, dst, kept);
  for (int i = 0; i < DT_MAX_DIMS; i++) p.cur[i] = DT_REPLICATE;
  for (int i = 0; i < m->ndim; i++) {
    p.cur[i] = src[i];
    p.pending[i] = !same(src[i], dst[i]) || (is_shard(src[i]) && !kept[i]);
  }
  pass_reduce(&p);
  pass_unshard(&p);
  pass_finish(&p);
  for (int i = 0; i < m->ndim; i++) CORE_ASSERT(same(p.cur[i], dst[i]));
  return p.n;
}

bool mesh_plan_is_collective(mesh_plan_kind k) {
  return k == MESH_PLAN_ALL_GATHER || k == MESH_PLAN_ALL_REDUCE ||
         k == MESH_PLAN_REDUCE_SCATTER || k == MESH_PLAN_ALL_TO_ALL;
}

bool mesh_plan_step_communicates(const dt_mesh *m, const mesh_plan_step *s) {
  return mesh_plan_is_collective(s->kind) && m->shape[s->mesh_dim] > 1;
}

const char *mesh_plan_kind_name(mesh_plan_kind k) {
  return (int)k >= 0 && k < MESH_PLAN_KIND_COUNT ? kind_names[k] : "?";
}

int mesh_plan_step_format(const mesh_plan_step *s, int mesh_ndim, char *buf,
                          size_t len) {
  char b[LIST_LEN], a[LIST_LEN];
  return snprintf(buf, len, "%s on mesh dim %d: %s -> %s (%.1f us)",
                  mesh_plan_kind_name(s->kind), s->mesh_dim,
                  list_str(s->before, mesh_ndim, b, sizeof b),
                  list_str(s->after, mesh_ndim, a, sizeof a), s->cost_us);
}
