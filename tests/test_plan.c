/* The redistribute planner (mesh/plan.h): a hand-written table of every
 * 1-D transition among R, S(0), S(1), P(sum), P(max) on meshes of 1, 2, 4
 * and 8; hand-written 2-D and 3-D plans (nested shards included); the
 * errors; costs computed by hand from the alpha-beta formula; and every
 * source/target pair on 2-D and 3-D meshes run through a data simulator.
 *
 * The simulator is this file's own executor: every mesh coordinate holds
 * a box of a small integer-valued tensor; each step is applied with its
 * own meaning (all_gather concatenates the group's pieces, which must tile
 * the gathered dim in coordinate order; reduce ops combine equal boxes;
 * chunks follow torch.chunk). After every step each coordinate's box must
 * be the one the step's `after` list gives by the left-to-right shard rule,
 * and at the end the data must be the global tensor. A plan that gathers
 * nested shards in the wrong order fails the tiling check. Meshes are fake
 * structs on the stack: the planner reads only ndim and shape. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "support/testutil.h"

#include "mesh/mesh.h"
#include "mesh/plan.h"

#define REP DT_REPLICATE
#define SH(d) DT_SHARD(d)
#define PSUM DT_PARTIAL(DT_REDUCE_SUM)
#define PMAX DT_PARTIAL(DT_REDUCE_MAX)
#define PL(...) ((const dt_placement[]){__VA_ARGS__})

static char ctx[2048]; /* the plan under test, for failure messages */

static void fake_mesh(dt_mesh *m, int ndim, const int64_t *shape) {
  memset(m, 0, sizeof *m);
  m->ndim = ndim;
  m->size = 1;
  for (int i = 0; i < ndim; i++) {
    m->shape[i] = shape[i];
    m->size *= (int)shape[i];
  }
}

/* the test's own placement printer: "[S(0), R, P(sum)]" */
static void pl_str(const dt_placement *pl, int n, char *buf, size_t len) {
  static const char *const ops[] = {"sum", "avg", "max", "min", "prod"};
  size_t o = (size_t)snprintf(buf, len, "[");
  for (int i = 0; i < n && o < len; i++) {
    const char *sep = i ? ", " : "";
    if (pl[i].kind == DT_PLACEMENT_SHARD)
      o += (size_t)snprintf(buf + o, len - o, "%sS(%d)", sep, pl[i].dim);
    else if (pl[i].kind == DT_PLACEMENT_PARTIAL)
      o += (size_t)snprintf(buf + o, len - o, "%sP(%s)", sep,
                            ops[pl[i].reduce]);
    else
      o += (size_t)snprintf(buf + o, len - o, "%sR", sep);
  }
  if (o < len) snprintf(buf + o, len - o, "]");
}

static bool pl_same(dt_placement a, dt_placement b) {
  if (a.kind != b.kind) return false;
  if (a.kind == DT_PLACEMENT_SHARD) return a.dim == b.dim;
  if (a.kind == DT_PLACEMENT_PARTIAL) return a.reduce == b.reduce;
  return true;
}

static void describe(const dt_mesh *m, dt_shape g, const dt_placement *src,
                     const dt_placement *dst) {
  char a[128], b[128], ms[64], gs[64];
  tu_shape_str((dt_shape){.ndim = m->ndim, .dims = {m->shape[0],
               m->shape[1], m->shape[2], m->shape[3]}}, ms, sizeof ms);
  tu_shape_str(g, gs, sizeof gs);
  pl_str(src, m->ndim, a, sizeof a);
  pl_str(dst, m->ndim, b, sizeof b);
  snprintf(ctx, sizeof ctx, "mesh %s, shape %s: %s -> %s", ms, gs, a, b);
}

static void describe_steps(const mesh_plan_step *st, int n, int ndim) {
  for (int i = 0; i < n; i++) {
    size_t o = strlen(ctx);
    if (o + 8 >= sizeof ctx) return;
    ctx[o++] = '\n';
    ctx[o++] = ' ';
    mesh_plan_step_format(&st[i], ndim, ctx + o, sizeof ctx - o);
  }
}

/* ---------------------------------------------------------------- boxes */

typedef struct box { int64_t off[DT_MAX_DIMS], len[DT_MAX_DIMS]; } box;
typedef struct piece { box b; double *v; } piece;

static void coords_of(const dt_mesh *m, int idx, int64_t *c) {
  for (int i = m->ndim - 1; i >= 0; i--) {
    c[i] = idx % m->shape[i];
    idx /= (int)m->shape[i];
  }
}

static int index_of(const dt_mesh *m, const int64_t *c) {
  int idx = 0;
  for (int i = 0; i < m->ndim; i++) idx = idx * (int)m->shape[i] + (int)c[i];
  return idx;
}

/* torch.chunk: part c of k of [off, off + len) */
static void chunk_of(int64_t *off, int64_t *len, int64_t k, int64_t c) {
  int64_t ch = (*len + k - 1) / k, s = c * ch < *len ? c * ch : *len;
  *off += s;
  *len = *len - s < ch ? *len - s : ch;
}

/* the left-to-right rule: mesh dims in order split what is left */
static box ref_box(const dt_mesh *m, dt_shape g, const dt_placement *pl,
                   const int64_t *c) {
  box b;
  for (int d = 0; d < g.ndim; d++) {
    b.off[d] = 0;
    b.len[d] = g.dims[d];
  }
  for (int i = 0; i < m->ndim; i++)
    if (pl[i].kind == DT_PLACEMENT_SHARD)
      chunk_of(&b.off[pl[i].dim], &b.len[pl[i].dim], m->shape[i], c[i]);
  return b;
}

static bool box_eq(dt_shape g, const box *a, const box *b) {
  for (int d = 0; d < g.ndim; d++)
    if (a->off[d] != b->off[d] || a->len[d] != b->len[d]) return false;
  return true;
}

static int64_t box_numel(dt_shape g, const box *b) {
  int64_t n = 1;
  for (int d = 0; d < g.ndim; d++) n *= b->len[d];
  return n;
}

/* element j of b (row-major) as a global index; b not empty */
static void box_elem(dt_shape g, const box *b, int64_t j, int64_t *gi) {
  for (int d = g.ndim - 1; d >= 0; d--) {
    gi[d] = b->off[d] + j % b->len[d];
    j /= b->len[d];
  }
}

static bool box_has(dt_shape g, const box *b, const int64_t *gi) {
  for (int d = 0; d < g.ndim; d++)
    if (gi[d] < b->off[d] || gi[d] >= b->off[d] + b->len[d]) return false;
  return true;
}

static double *piece_at(dt_shape g, const piece *p, const int64_t *gi) {
  int64_t j = 0;
  for (int d = 0; d < g.ndim; d++) j = j * p->b.len[d] + gi[d] - p->b.off[d];
  return &p->v[j];
}

static double global_value(dt_shape g, const int64_t *gi) {
  return 1 + (double)tu_ravel(gi, g);
}

/* ------------------------------------------------------------ simulator */

typedef struct sim {
  const dt_mesh *m;
  dt_shape g;
  int nr;
  piece *p;
} sim;

static double reduce2(dt_reduce_op op, double a, double b) {
  switch (op) {
  case DT_REDUCE_MAX: return a > b ? a : b;
  case DT_REDUCE_MIN: return a < b ? a : b;
  case DT_REDUCE_PROD: return a * b;
  default: return a + b; /* sum, avg (divided afterwards) */
  }
}

/* the partial mesh dims of pl: their op, count K, and coordinate c's
 * row-major index L over them */
static int partial_index(const dt_mesh *m, const dt_placement *pl,
                         const int64_t *c, int *K, dt_reduce_op *op) {
  int L = 0;
  *K = 1;
  for (int i = 0; i < m->ndim; i++)
    if (pl[i].kind == DT_PLACEMENT_PARTIAL) {
      L = L * (int)m->shape[i] + (int)c[i];
      *K *= (int)m->shape[i];
      *op = pl[i].reduce;
    }
  return L;
}

/* pieces whose reduction over the partial mesh dims is the global value,
 * with every coordinate holding something different */
static double partial_part(dt_reduce_op op, double v, double t, int L,
                           int K) {
  switch (op) {
  case DT_REDUCE_SUM: return L == 0 ? v - (K - 1) * t : t;
  case DT_REDUCE_AVG: return L == 0 ? v - (K - 1) * t : v + t;
  case DT_REDUCE_MAX: return L == 0 ? v : v - t;
  case DT_REDUCE_MIN: return L == 0 ? v : v + t;
  default: return L == 0 ? v : 1;
  }
}

static void sim_init(sim *s, const dt_mesh *m, dt_shape g,
                     const dt_placement *src) {
  s->m = m;
  s->g = g;
  s->nr = m->size;
  s->p = calloc((size_t)s->nr, sizeof *s->p);
  for (int idx = 0; idx < s->nr; idx++) {
    int64_t c[DT_MAX_DIMS], gi[DT_MAX_DIMS];
    coords_of(m, idx, c);
    int K;
    dt_reduce_op op = DT_REDUCE_SUM;
    int L = partial_index(m, src, c, &K, &op);
    piece *p = &s->p[idx];
    p->b = ref_box(m, g, src, c);
    int64_t n = box_numel(g, &p->b);
    p->v = malloc(sizeof(double) * (size_t)(n ? n : 1));
    for (int64_t j = 0; j < n; j++) {
      box_elem(g, &p->b, j, gi);
      double v = global_value(g, gi), t = (double)(1 + tu_ravel(gi, g) % 3);
      p->v[j] = partial_part(op, v, t, L, K);
    }
  }
}

static void sim_free(sim *s) {
  for (int i = 0; i < s->nr; i++) free(s->p[i].v);
  free(s->p);
}

/* the group's boxes must agree off `dim` and tile it in coordinate order;
 * returns their union */
static box tile(const sim *s, const int *grp, int64_t k, int dim) {
  box u = s->p[grp[0]].b;
  for (int64_t j = 1; j < k; j++) {
    const box *b = &s->p[grp[j]].b;
    for (int d = 0; d < s->g.ndim; d++)
      if (d != dim && (b->off[d] != u.off[d] || b->len[d] != u.len[d]))
        fail_msg("%s\n  group pieces differ on dim %d", ctx, d);
    if (b->off[dim] != u.off[dim] + u.len[dim])
      fail_msg("%s\n  group pieces do not tile dim %d (member %lld at "
               "%lld, expected %lld)", ctx, dim, (long long)j,
               (long long)b->off[dim], (long long)(u.off[dim] + u.len[dim]));
    u.len[dim] += b->len[dim];
  }
  return u;
}

static void same_boxes(const sim *s, const int *grp, int64_t k) {
  for (int64_t j = 1; j < k; j++)
    if (!box_eq(s->g, &s->p[grp[j]].b, &s->p[grp[0]].b))
      fail_msg("%s\n  a reduction over pieces of different boxes", ctx);
}

static box step_box(const sim *s, const mesh_plan_step *st, const int *grp,
                    int64_t k, int64_t me, int idx) {
  box b = s->p[idx].b;
  switch (st->kind) {
  case MESH_PLAN_ALL_GATHER: return tile(s, grp, k, st->from_dim);
  case MESH_PLAN_ALL_TO_ALL:
    b = tile(s, grp, k, st->from_dim);
    chunk_of(&b.off[st->to_dim], &b.len[st->to_dim], k, me);
    return b;
  case MESH_PLAN_ALL_REDUCE: same_boxes(s, grp, k); return b;
  case MESH_PLAN_REDUCE_SCATTER:
    same_boxes(s, grp, k);
    chunk_of(&b.off[st->to_dim], &b.len[st->to_dim], k, me);
    return b;
  case MESH_PLAN_LOCAL_CHUNK:
    chunk_of(&b.off[st->to_dim], &b.len[st->to_dim], k, me);
    return b;
  default: return b;
  }
}

static double step_value(const sim *s, const mesh_plan_step *st, const int *grp,
                         int64_t k, int64_t me, int idx, const int64_t *gi) {
  double v = 0;
  switch (st->kind) {
  case MESH_PLAN_ALL_GATHER:
  case MESH_PLAN_ALL_TO_ALL:
    for (int64_t j = 0; j < k; j++)
      if (box_has(s->g, &s->p[grp[j]].b, gi))
        return *piece_at(s->g, &s->p[grp[j]], gi);
    fail_msg("%s\n  no group member holds an element", ctx);
    return 0;
  case MESH_PLAN_ALL_REDUCE:
  case MESH_PLAN_REDUCE_SCATTER:
    v = *piece_at(s->g, &s->p[grp[0]], gi);
    for (int64_t j = 1; j < k; j++)
      v = reduce2(st->op, v, *piece_at(s->g, &s->p[grp[j]], gi));
    return st->op == DT_REDUCE_AVG ? v / (double)k : v;
  case MESH_PLAN_LOCAL_PARTIAL:
    v = *piece_at(s->g, &s->p[idx], gi);
    if (me != 0 && st->op == DT_REDUCE_SUM) return 0;
    if (me != 0 && st->op == DT_REDUCE_PROD) return 1;
    return v;
  default: return *piece_at(s->g, &s->p[idx], gi);
  }
}

/* applies one step; every coordinate's box must match before and after */
static void sim_step(sim *s, const mesh_plan_step *st) {
  int md = st->mesh_dim;
  int64_t k = s->m->shape[md];
  piece *np = calloc((size_t)s->nr, sizeof *np);
  for (int idx = 0; idx < s->nr; idx++) {
    int64_t c[DT_MAX_DIMS], cc[DT_MAX_DIMS], gi[DT_MAX_DIMS];
    int grp[16];
    coords_of(s->m, idx, c);
    box want = ref_box(s->m, s->g, st->before, c);
    if (!box_eq(s->g, &s->p[idx].b, &want))
      fail_msg("%s\n  a box differs from the step's before list", ctx);
    memcpy(cc, c, sizeof cc);
    for (int64_t j = 0; j < k; j++) {
      cc[md] = j;
      grp[j] = index_of(s->m, cc);
    }
    np[idx].b = step_box(s, st, grp, k, c[md], idx);
    want = ref_box(s->m, s->g, st->after, c);
    if (!box_eq(s->g, &np[idx].b, &want))
      fail_msg("%s\n  a box differs from the step's after list", ctx);
    int64_t n = box_numel(s->g, &np[idx].b);
    np[idx].v = malloc(sizeof(double) * (size_t)(n ? n : 1));
    for (int64_t j = 0; j < n; j++) {
      box_elem(s->g, &np[idx].b, j, gi);
      np[idx].v[j] = step_value(s, st, grp, k, c[md], idx, gi);
    }
  }
  sim_free(s);
  s->p = np;
}

/* the reduction over dst's partial mesh dims must be the global tensor */
static void sim_verify(const sim *s, const dt_placement *dst) {
  for (int idx = 0; idx < s->nr; idx++) {
    int64_t c[DT_MAX_DIMS], cy[DT_MAX_DIMS], gi[DT_MAX_DIMS];
    int K;
    dt_reduce_op op = DT_REDUCE_SUM;
    coords_of(s->m, idx, c);
    box want = ref_box(s->m, s->g, dst, c);
    if (!box_eq(s->g, &s->p[idx].b, &want))
      fail_msg("%s\n  a final box differs from the target's", ctx);
    if (partial_index(s->m, dst, c, &K, &op) != 0) continue;
    for (int64_t j = 0; j < box_numel(s->g, &want); j++) {
      box_elem(s->g, &want, j, gi);
      double v = 0;
      bool first = true;
      for (int y = 0; y < s->nr; y++) {
        coords_of(s->m, y, cy);
        bool peer = true;
        for (int i = 0; i < s->m->ndim; i++)
          if (dst[i].kind != DT_PLACEMENT_PARTIAL && cy[i] != c[i])
            peer = false;
        if (!peer) continue;
        double x = *piece_at(s->g, &s->p[y], gi);
        v = first ? x : reduce2(op, v, x);
        first = false;
      }
      if (op == DT_REDUCE_AVG) v /= K;
      double g = global_value(s->g, gi);
      if (fabs(v - g) > 1e-9 * fabs(g))
        fail_msg("%s\n  final value %g, want %g", ctx, v, g);
    }
  }
}

/* ------------------------------------------------------ plan structure */

/* each step changes only its mesh dim, as its kind says; the lists chain
 * from src to dst; costs are positive exactly for real collectives */
static void check_structure(const dt_mesh *m, const dt_placement *src,
                            const dt_placement *dst, const mesh_plan_step *st,
                            int n) {
  const dt_placement *prev = src;
  for (int s = 0; s < n; s++, prev = st[s - 1].after) {
    const mesh_plan_step *p = &st[s];
    int md = p->mesh_dim;
    if (md < 0 || md >= m->ndim) fail_msg("%s\n  bad mesh dim", ctx);
    for (int i = 0; i < m->ndim; i++) {
      if (!pl_same(p->before[i], prev[i]))
        fail_msg("%s\n  step %d's before list does not chain", ctx, s);
      if (i != md && !pl_same(p->before[i], p->after[i]))
        fail_msg("%s\n  step %d changes another mesh dim", ctx, s);
    }
    dt_placement b = p->before[md], a = p->after[md];
    dt_placement_kind want_b[] = {DT_PLACEMENT_SHARD, DT_PLACEMENT_PARTIAL,
        DT_PLACEMENT_PARTIAL, DT_PLACEMENT_SHARD, DT_PLACEMENT_REPLICATE,
        DT_PLACEMENT_REPLICATE};
    dt_placement_kind want_a[] = {DT_PLACEMENT_REPLICATE,
        DT_PLACEMENT_REPLICATE, DT_PLACEMENT_SHARD, DT_PLACEMENT_SHARD,
        DT_PLACEMENT_SHARD, DT_PLACEMENT_PARTIAL};
    if (b.kind != want_b[p->kind] || a.kind != want_a[p->kind])
      fail_msg("%s\n  step %d: kind and placements disagree", ctx, s);
    if ((b.kind == DT_PLACEMENT_SHARD && p->from_dim != b.dim) ||
        (a.kind == DT_PLACEMENT_SHARD && p->to_dim != a.dim) ||
        (b.kind == DT_PLACEMENT_PARTIAL && p->op != b.reduce) ||
        (a.kind == DT_PLACEMENT_PARTIAL && p->op != a.reduce))
      fail_msg("%s\n  step %d: dims / op disagree with the lists", ctx, s);
    if (p->kind == MESH_PLAN_ALL_TO_ALL && p->from_dim == p->to_dim)
      fail_msg("%s\n  all_to_all to the same dim", ctx);
    bool real = mesh_plan_is_collective(p->kind) && m->shape[md] > 1;
    if (real != mesh_plan_step_communicates(m, p) ||
        (real ? !(p->cost_us > 0) : p->cost_us != 0))
      fail_msg("%s\n  step %d: cost %g", ctx, s, p->cost_us);
  }
  for (int i = 0; i < m->ndim; i++)
    if (!pl_same(prev[i], dst[i]))
      fail_msg("%s\n  the last list is not the target", ctx);
}

/* plans, checks the structure and runs the simulator; returns n */
static int run_plan(const dt_mesh *m, dt_shape g, const dt_placement *src,
                    const dt_placement *dst, mesh_plan_step *st) {
  describe(m, g, src, dst);
  int n = mesh_plan(m, &g, 4, src, dst, st, "test_plan");
  if (n < 0) fail_msg("%s: %s", ctx, dt_last_error());
  if (n > 2 * m->ndim) fail_msg("%s: %d steps", ctx, n);
  describe_steps(st, n, m->ndim);
  check_structure(m, src, dst, st, n);
  sim s;
  sim_init(&s, m, g, src);
  for (int i = 0; i < n; i++) sim_step(&s, &st[i]);
  sim_verify(&s, dst);
  sim_free(&s);
  return n;
}

/* "all_gather@1 all_gather@0" */
static void plan_str(const mesh_plan_step *st, int n, char *buf, size_t len) {
  size_t o = 0;
  buf[0] = '\0';
  for (int i = 0; i < n && o < len; i++)
    o += (size_t)snprintf(buf + o, len - o, "%s%s@%d", i ? " " : "",
                          mesh_plan_kind_name(st[i].kind), st[i].mesh_dim);
}

static void expect_plan(const dt_mesh *m, dt_shape g, const dt_placement *src,
                        const dt_placement *dst, const char *want) {
  mesh_plan_step st[MESH_PLAN_MAX_STEPS];
  char got[512];
  int n = run_plan(m, g, src, dst, st);
  plan_str(st, n, got, sizeof got);
  if (strcmp(got, want) != 0)
    fail_msg("%s\n  plan \"%s\", want \"%s\"", ctx, got, want);
}

/* --------------------------------------------------------------- 1-D */

static void test_table_1d(void **state) {
  (void)state;
  const dt_placement pls[5] = {REP, SH(0), SH(1), PSUM, PMAX};
  /* rows: source; columns: target (docs/mesh.md's table); "!" = error */
  const char *const want[5][5] = {
      {"", "local_chunk@0", "local_chunk@0", "local_partial@0",
       "local_partial@0"},
      {"all_gather@0", "", "all_to_all@0", "!", "!"},
      {"all_gather@0", "all_to_all@0", "", "!", "!"},
      {"all_reduce@0", "reduce_scatter@0", "reduce_scatter@0", "",
       "all_reduce@0 local_partial@0"},
      {"all_reduce@0", "reduce_scatter@0", "reduce_scatter@0",
       "all_reduce@0 local_partial@0", ""},
  };
  const int64_t sizes[] = {1, 2, 4, 8};
  for (int z = 0; z < 4; z++) {
    dt_mesh m;
    fake_mesh(&m, 1, &sizes[z]);
    for (int a = 0; a < 5; a++)
      for (int b = 0; b < 5; b++) {
        if (strcmp(want[a][b], "!") == 0) {
          mesh_plan_step st[MESH_PLAN_MAX_STEPS];
          assert_int_equal(mesh_plan(&m, &DT_SHAPE(13, 6), 4, &pls[a],
                                     &pls[b], st, "test_plan"), -1);
          tu_expect_status(dt_last_status(), DT_ERR_PLACEMENT,
                           "cannot redistribute", NULL);
          continue;
        }
        expect_plan(&m, DT_SHAPE(13, 6), &pls[a], &pls[b], want[a][b]);
        expect_plan(&m, DT_SHAPE(5, 3), &pls[a], &pls[b], want[a][b]);
      }
  }
}

/* ------------------------------------------------------------- errors */

static void expect_fail(const dt_mesh *m, dt_shape g, const dt_placement *src,
                        const dt_placement *dst) {
  mesh_plan_step st[MESH_PLAN_MAX_STEPS];
  dt_clear_error();
  assert_int_equal(mesh_plan(m, &g, 4, src, dst, st, "dt_redistribute"), -1);
}

static void test_shard_to_partial(void **state) {
  (void)state;
  dt_mesh m1, m2;
  fake_mesh(&m1, 1, (int64_t[]){4});
  fake_mesh(&m2, 2, (int64_t[]){2, 2});
  expect_fail(&m1, DT_SHAPE(8), PL(SH(0)), PL(PSUM));
  tu_expect_status(dt_last_status(), DT_ERR_PLACEMENT,
                   "dt_redistribute: cannot redistribute Shard(0) to "
                   "Partial(sum) on mesh dim 0", "[S(0)]", "[P(sum)]", NULL);
  expect_fail(&m2, DT_SHAPE(8, 8), PL(SH(0), SH(1)), PL(SH(0), PMAX));
  tu_expect_status(dt_last_status(), DT_ERR_PLACEMENT,
                   "cannot redistribute Shard(1) to Partial(max) on mesh "
                   "dim 1", "[S(0), S(1)]", "[S(0), P(max)]", NULL);
  expect_fail(&m2, DT_SHAPE(8, 8), PL(SH(0), SH(0)), PL(SH(0), PSUM));
  tu_expect_status(dt_last_status(), DT_ERR_PLACEMENT,
                   "Shard(0) to Partial(sum) on mesh dim 1", NULL);
}

static void test_invalid(void **state) {
  (void)state;
  dt_mesh m, bad;
  mesh_plan_step st[MESH_PLAN_MAX_STEPS];
  dt_shape g = DT_SHAPE(8, 8);
  fake_mesh(&m, 2, (int64_t[]){2, 2});
  /* one Partial kind per list (PyTorch bans mixing) */
  expect_fail(&m, g, PL(PSUM, PMAX), PL(REP, REP));
  tu_expect_status(dt_last_status(), DT_ERR_PLACEMENT, "source",
                   "Partial(sum)", "Partial(max)", NULL);
  expect_fail(&m, g, PL(REP, REP), PL(PMAX, PSUM));
  tu_expect_status(dt_last_status(), DT_ERR_PLACEMENT, "target", NULL);
  /* shard dims out of range, bad kinds, bad ops */
  expect_fail(&m, g, PL(SH(2), REP), PL(REP, REP));
  tu_expect_status(dt_last_status(), DT_ERR_PLACEMENT, "Shard(2)",
                   "mesh dim 0", "2-d", NULL);
  expect_fail(&m, g, PL(REP, REP), PL(REP, SH(-1)));
  tu_expect_status(dt_last_status(), DT_ERR_PLACEMENT, "Shard(-1)", NULL);
  expect_fail(&m, DT_SHAPE(), PL(REP, SH(0)), PL(REP, REP));
  tu_expect_status(dt_last_status(), DT_ERR_PLACEMENT, "0-d", NULL);
  expect_fail(&m, g, PL(REP, ((dt_placement){7, 0, DT_REDUCE_SUM})),
              PL(REP, REP));
  tu_expect_status(dt_last_status(), DT_ERR_PLACEMENT, "kind 7", NULL);
  expect_fail(&m, g, PL(REP, REP),
              PL(((dt_placement){DT_PLACEMENT_PARTIAL, 0, 99}), REP));
  tu_expect_status(dt_last_status(), DT_ERR_PLACEMENT, "reduce op 99", NULL);
  /* shapes and meshes */
  expect_fail(&m, (dt_shape){.ndim = 2, .dims = {8, -1}}, PL(REP, REP),
              PL(REP, REP));
  tu_expect_status(dt_last_status(), DT_ERR_SHAPE, "-1", NULL);
  fake_mesh(&bad, 2, (int64_t[]){2, 0});
  expect_fail(&bad, g, PL(REP, REP), PL(REP, REP));
  tu_expect_status(dt_last_status(), DT_ERR_MESH, "mesh dim 1", NULL);
  fake_mesh(&bad, 0, NULL);
  expect_fail(&bad, g, PL(REP), PL(REP));
  tu_expect_status(dt_last_status(), DT_ERR_MESH, NULL);
  /* NULLs */
  const dt_placement *r2 = PL(REP, REP);
  assert_int_equal(mesh_plan(NULL, &g, 4, r2, r2, st, NULL), -1);
  tu_expect_status(dt_last_status(), DT_ERR_INVALID_ARGUMENT, "mesh_plan",
                   "mesh", NULL);
  assert_int_equal(mesh_plan(&m, NULL, 4, r2, r2, st, "f"), -1);
  tu_expect_status(dt_last_status(), DT_ERR_INVALID_ARGUMENT, "f: ", NULL);
  assert_int_equal(mesh_plan(&m, &g, 4, NULL, r2, st, "f"), -1);
  tu_expect_status(dt_last_status(), DT_ERR_INVALID_ARGUMENT, "source", NULL);
  assert_int_equal(mesh_plan(&m, &g, 4, r2, NULL, st, "f"), -1);
  tu_expect_status(dt_last_status(), DT_ERR_INVALID_ARGUMENT, "target", NULL);
  assert_int_equal(mesh_plan(&m, &g, 4, r2, r2, NULL, "f"), -1);
  tu_expect_status(dt_last_status(), DT_ERR_INVALID_ARGUMENT, "steps", NULL);
}

/* ---------------------------------------------------------- 2-D, 3-D */

static void test_2d(void **state) {
  (void)state;
  dt_mesh m;
  fake_mesh(&m, 2, (int64_t[]){2, 3});
  dt_shape g = DT_SHAPE(13, 7);
  expect_plan(&m, g, PL(SH(0), REP), PL(REP, REP), "all_gather@0");
  expect_plan(&m, g, PL(REP, REP), PL(REP, REP), "");
  expect_plan(&m, g, PL(PSUM, PSUM), PL(PSUM, PSUM), "");
  /* reduce first, while the data is still sharded */
  expect_plan(&m, g, PL(PSUM, SH(1)), PL(REP, REP),
              "all_reduce@0 all_gather@1");
  /* different tensor dims: one step per mesh dim that changes */
  expect_plan(&m, g, PL(SH(0), SH(1)), PL(SH(0), REP), "all_gather@1");
  expect_plan(&m, g, PL(SH(0), REP), PL(SH(0), SH(1)), "local_chunk@1");
  expect_plan(&m, g, PL(SH(0), PMAX), PL(SH(1), REP),
              "all_reduce@1 all_to_all@0");
  expect_plan(&m, g, PL(REP, PSUM), PL(SH(1), SH(0)),
              "local_chunk@0 reduce_scatter@1");
  expect_plan(&m, g, PL(SH(0), REP), PL(REP, SH(0)),
              "all_gather@0 local_chunk@1");
  /* swapped shards: the inner all_to_all would land inside the outer */
  expect_plan(&m, g, PL(SH(0), SH(1)), PL(SH(1), SH(0)),
              "all_gather@1 all_to_all@0 local_chunk@1");
  /* nested shards of one tensor dim */
  expect_plan(&m, g, PL(SH(0), SH(0)), PL(REP, REP),
              "all_gather@1 all_gather@0");
  expect_plan(&m, g, PL(SH(0), SH(0)), PL(SH(0), REP), "all_gather@1");
  expect_plan(&m, g, PL(SH(0), SH(0)), PL(SH(0), SH(1)), "all_to_all@1");
  expect_plan(&m, g, PL(SH(0), SH(1)), PL(SH(0), SH(0)), "all_to_all@1");
  expect_plan(&m, g, PL(SH(0), SH(0)), PL(REP, SH(0)),
              "all_gather@1 all_gather@0 local_chunk@1");
  expect_plan(&m, g, PL(REP, SH(0)), PL(SH(0), SH(0)),
              "all_gather@1 local_chunk@0 local_chunk@1");
  expect_plan(&m, g, PL(PSUM, PSUM), PL(SH(0), SH(0)),
              "reduce_scatter@0 reduce_scatter@1");
  expect_plan(&m, g, PL(PSUM, SH(0)), PL(SH(0), SH(0)),
              "all_gather@1 reduce_scatter@0 local_chunk@1");
  expect_plan(&m, g, PL(PSUM, REP), PL(PMAX, PMAX),
              "all_reduce@0 local_partial@0 local_partial@1");
}

static void test_3d(void **state) {
  (void)state;
  dt_mesh m;
  fake_mesh(&m, 3, (int64_t[]){2, 3, 2});
  dt_shape g = DT_SHAPE(13, 7, 3);
  expect_plan(&m, g, PL(SH(0), SH(0), SH(0)), PL(REP, REP, REP),
              "all_gather@2 all_gather@1 all_gather@0");
  expect_plan(&m, g, PL(REP, REP, REP), PL(SH(0), SH(0), SH(0)),
              "local_chunk@0 local_chunk@1 local_chunk@2");
  expect_plan(&m, g, PL(SH(0), SH(1), SH(0)), PL(SH(0), SH(1), REP),
              "all_gather@2");
  expect_plan(&m, g, PL(SH(0), REP, SH(0)), PL(SH(0), SH(0), SH(0)),
              "all_gather@2 local_chunk@1 local_chunk@2");
  expect_plan(&m, g, PL(PSUM, SH(1), SH(0)), PL(REP, SH(0), SH(1)),
              "all_reduce@0 all_gather@2 all_to_all@1 local_chunk@2");
  expect_plan(&m, g, PL(PSUM, PSUM, PSUM), PL(SH(0), SH(1), SH(0)),
              "reduce_scatter@0 reduce_scatter@1 reduce_scatter@2");
  expect_plan(&m, g, PL(SH(2), SH(1), SH(0)), PL(SH(2), SH(1), SH(0)), "");
  expect_plan(&m, g, PL(SH(0), SH(1), SH(2)), PL(SH(1), SH(2), SH(0)),
              "all_gather@2 all_to_all@1 all_to_all@0 local_chunk@2");
}

/* ------------------------------------------------ exhaustive + simulator */

static bool mixed(const dt_placement *pl, int n) {
  int op = -1;
  for (int i = 0; i < n; i++)
    if (pl[i].kind == DT_PLACEMENT_PARTIAL) {
      if (op >= 0 && op != (int)pl[i].reduce) return true;
      op = (int)pl[i].reduce;
    }
  return false;
}

/* each tensor dim touched by at most one mesh dim in src and dst
 * together, and no Partial kind change: one step per changed mesh dim */
static bool simple_pair(const dt_placement *src, const dt_placement *dst,
                        int n) {
  for (int d = 0; d < 2; d++) {
    int users = 0;
    for (int i = 0; i < n; i++)
      users += (src[i].kind == DT_PLACEMENT_SHARD && src[i].dim == d) ||
               (dst[i].kind == DT_PLACEMENT_SHARD && dst[i].dim == d);
    if (users > 1) return false;
  }
  for (int i = 0; i < n; i++)
    if (src[i].kind == DT_PLACEMENT_PARTIAL &&
        dst[i].kind == DT_PLACEMENT_PARTIAL && !pl_same(src[i], dst[i]))
      return false;
  return true;
}

static void one_pair(const dt_mesh *m, dt_shape g, const dt_placement *src,
                     const dt_placement *dst) {
  int nd = m->ndim;
  bool fails = mixed(src, nd) || mixed(dst, nd);
  for (int i = 0; i < nd; i++)
    fails |= src[i].kind == DT_PLACEMENT_SHARD &&
             dst[i].kind == DT_PLACEMENT_PARTIAL;
  if (fails) {
    expect_fail(m, g, src, dst);
    tu_expect_status(dt_last_status(), DT_ERR_PLACEMENT, NULL);
    return;
  }
  mesh_plan_step st[MESH_PLAN_MAX_STEPS];
  int n = run_plan(m, g, src, dst, st), changed = 0;
  for (int i = 0; i < nd; i++) changed += !pl_same(src[i], dst[i]);
  if (simple_pair(src, dst, nd) && n != changed)
    fail_msg("%s\n  %d steps for %d changed mesh dims", ctx, n, changed);
}

/* every pair of placement lists over {R, S(0), S(1), P(sum), P(max)} */
static void exhaustive(int nd, const int64_t *shape, dt_shape g) {
  const dt_placement pls[5] = {REP, SH(0), SH(1), PSUM, PMAX};
  dt_mesh m;
  fake_mesh(&m, nd, shape);
  int total = 1;
  for (int i = 0; i < nd; i++) total *= 5;
  for (int a = 0; a < total; a++)
    for (int b = 0; b < total; b++) {
      dt_placement src[DT_MAX_DIMS], dst[DT_MAX_DIMS];
      for (int i = nd - 1, x = a, y = b; i >= 0; i--, x /= 5, y /= 5) {
        src[i] = pls[x % 5];
        dst[i] = pls[y % 5];
      }
      one_pair(&m, g, src, dst);
    }
}

static void test_exhaustive_2d(void **state) {
  (void)state;
  exhaustive(2, (int64_t[]){2, 3}, DT_SHAPE(7, 5));
  exhaustive(2, (int64_t[]){3, 2}, DT_SHAPE(13, 4));
  exhaustive(2, (int64_t[]){4, 2}, DT_SHAPE(5, 9));
  exhaustive(2, (int64_t[]){1, 4}, DT_SHAPE(6, 6));
}

static void test_exhaustive_3d(void **state) {
  (void)state;
  exhaustive(3, (int64_t[]){2, 3, 2}, DT_SHAPE(7, 5));
  exhaustive(3, (int64_t[]){2, 2, 2}, DT_SHAPE(13, 3));
}

/* ---------------------------------------------------------------- costs */

static void test_costs(void **state) {
  (void)state;
  dt_mesh m;
  mesh_plan_step st[MESH_PLAN_MAX_STEPS];
  dt_shape g = DT_SHAPE(1024, 256);
  fake_mesh(&m, 2, (int64_t[]){4, 2});
  /* S(0) -> R on 4 ranks: each rank holds 256 x 256 floats and receives
   * 3 such pieces: 6.6 + 3 x 0.6 us + 786432 B / 87.7 GB/s */
  assert_int_equal(mesh_plan(&m, &g, 4, PL(SH(0), REP), PL(REP, REP), st,
                             "f"), 1);
  assert_true(fabs(st[0].cost_us - (6.6 + 1.8 + 786432 / 87.7e3)) < 1e-9);
  /* P -> R on 4 ranks over the whole tensor: 2 x 3 hops, 2 x 3/4 of it */
  assert_int_equal(mesh_plan(&m, &g, 4, PL(PSUM, REP), PL(REP, REP), st,
                             "f"), 1);
  assert_true(fabs(st[0].cost_us - (6.6 + 3.6 + 1572864 / 87.7e3)) < 1e-9);
  /* P -> S(1) on the 2-rank mesh dim, with mesh dim 0 sharding dim 0:
   * 256 x 256 floats in, half of them out */
  assert_int_equal(mesh_plan(&m, &g, 2, PL(SH(0), PSUM), PL(SH(0), SH(1)),
                             st, "f"), 1);
  assert_true(fabs(st[0].cost_us - (6.6 + 0.6 + 65536 / 87.7e3)) < 1e-9);
  /* S(0) -> S(1) on 4 ranks: 3/4 of the 256 x 256 local piece, 8 bytes */
  assert_int_equal(mesh_plan(&m, &g, 8, PL(SH(0), REP), PL(SH(1), REP), st,
                             "f"), 1);
  assert_true(fabs(st[0].cost_us - (6.6 + 1.8 + 393216 / 87.7e3)) < 1e-9);
  /* local steps are free */
  assert_int_equal(mesh_plan(&m, &g, 4, PL(REP, REP), PL(SH(0), PSUM), st,
                             "f"), 2);
  assert_true(st[0].cost_us == 0 && st[1].cost_us == 0);
  /* uneven: 13 rows on 4 ranks pad to 4 rows of 256 floats */
  g = DT_SHAPE(13, 256);
  assert_int_equal(mesh_plan(&m, &g, 4, PL(SH(0), REP), PL(REP, REP), st,
                             "f"), 1);
  assert_true(fabs(st[0].cost_us - (6.6 + 1.8 + 3 * 4096 / 87.7e3)) < 1e-9);
}

static void test_names(void **state) {
  (void)state;
  const char *const want[] = {"all_gather",  "all_reduce",
                              "reduce_scatter", "all_to_all",
                              "local_chunk", "local_partial"};
  const bool coll[] = {true, true, true, true, false, false};
  for (int k = 0; k < MESH_PLAN_KIND_COUNT; k++) {
    assert_string_equal(mesh_plan_kind_name((mesh_plan_kind)k), want[k]);
    assert_int_equal(mesh_plan_is_collective((mesh_plan_kind)k), coll[k]);
  }
  assert_string_equal(mesh_plan_kind_name(MESH_PLAN_KIND_COUNT), "?");
  dt_mesh m;
  mesh_plan_step st[MESH_PLAN_MAX_STEPS];
  char buf[256];
  fake_mesh(&m, 2, (int64_t[]){2, 2});
  assert_int_equal(mesh_plan(&m, &DT_SHAPE(4, 4), 4, PL(SH(0), SH(0)),
                             PL(SH(0), REP), st, "f"), 1);
  mesh_plan_step_format(&st[0], 2, buf, sizeof buf);
  assert_non_null(strstr(buf, "all_gather on mesh dim 1: [S(0), S(0)] -> "
                              "[S(0), R] ("));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_table_1d),
      cmocka_unit_test(test_shard_to_partial),
      cmocka_unit_test(test_invalid),
      cmocka_unit_test(test_2d),
      cmocka_unit_test(test_3d),
      cmocka_unit_test(test_exhaustive_2d),
      cmocka_unit_test(test_exhaustive_3d),
      cmocka_unit_test(test_costs),
      cmocka_unit_test(test_names),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
