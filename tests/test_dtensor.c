/* DTensors through the public API: factories on meshes (same global values
 * as one device), distribute / gather, local shards (torch.chunk sizes),
 * redistribute between every pair of placements on 1-D, 2-D and 3-D
 * meshes with shapes that divide and that don't, the collectives each
 * transition costs (dt_comm_count), determinism, another mesh, by_dict /
 * like, errors, and the collective watchdog. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "testutil.h"
#include "mesh/handle.h"
#include "runtime/exec.h"

static dt_runtime *rt;

static int setup(void **state) {
  (void)state;
  rt = dt_runtime_create(&(dt_runtime_options){.num_ranks = 8});
  dt_runtime_set_current(rt);
  return rt ? 0 : -1;
}
static int teardown(void **state) {
  (void)state;
  dt_runtime_set_current(NULL);
  dt_runtime_destroy(rt);
  return 0;
}

static dt_mesh *mesh1(int n) {
  dt_mesh *m = dt_mesh_init(rt, NULL, (dt_shape){1, {n}}, NULL);
  if (!m) fail_msg("dt_mesh_init: %s", dt_last_error());
  return m;
}

/* the global value of a tensor, as doubles */
static double *global_values(dt_tensor *t) { return tu_values(t); }

static const dt_placement pl1[] = {
    {DT_PLACEMENT_REPLICATE, 0, DT_REDUCE_SUM},
    {DT_PLACEMENT_SHARD, 0, DT_REDUCE_SUM},
    {DT_PLACEMENT_SHARD, 1, DT_REDUCE_SUM},
    {DT_PLACEMENT_PARTIAL, 0, DT_REDUCE_SUM},
    {DT_PLACEMENT_PARTIAL, 0, DT_REDUCE_MAX},
};
#define NPL1 (sizeof pl1 / sizeof *pl1)

static void expect_same(dt_tensor *t, const double *want, int64_t n,
                        const char *what) {
  double *got = global_values(t);
  for (int64_t i = 0; i < n; i++)
    if (got[i] != want[i])
      fail_msg("%s: element %lld is %.17g, want %.17g", what, (long long)i,
               got[i], want[i]);
  free(got);
}

/* distribute, then gather: the same value for every placement */
static void test_distribute_gather(void **state) {
  (void)state;
  tu_leaks_begin();
  dt_dtype dts[] = {DT_FLOAT32, DT_INT64, DT_FLOAT64, DT_BFLOAT16};
  for (int n = 1; n <= 8; n++) {
    dt_mesh *m = mesh1(n);
    dt_shape shapes[] = {DT_SHAPE(n * 3 + 1, 5), DT_SHAPE(3, 2), DT_SHAPE(0, 4)};
    for (size_t si = 0; si < 3; si++)
      for (size_t di = 0; di < 4; di++)
        for (size_t p = 0; p < NPL1; p++) {
          double *v;
          dt_tensor *ref = tu_random(shapes[si], dts[di], 7 + p, -9, 9, &v);
          size_t bytes = (size_t)tu_numel(shapes[si]) * dt_dtype_size(dts[di]);
          void *raw = malloc(bytes + 1);
          assert_int_equal(dt_to_host(ref, raw, bytes), DT_OK);
          dt_tensor *t = dt_from_host(raw, shapes[si], &(dt_tensor_options){
              .dtype = dts[di], .mesh = m, .placements = &pl1[p]});
          if (!t) fail_msg("from_host: %s", dt_last_error());
          assert_true(dt_tensor_mesh(t) == m);
          char what[64];
          snprintf(what, sizeof what, "mesh %d placement %zu dtype %s", n, p,
                   dt_dtype_name(dts[di]));
          expect_same(t, v, tu_numel(shapes[si]), what);
          free(v);
          free(raw);
          TU_RELEASE(ref, t);
        }
    dt_mesh_release(m);
  }
  tu_leaks_end();
}

/* rank r's shard: torch.chunk sizes and the right values */
static void test_local_shards(void **state) {
  (void)state;
  tu_leaks_begin();
  dt_mesh *m = mesh1(4);
  double v[13];
  for (int i = 0; i < 13; i++) v[i] = i;
  dt_tensor *h = tu_tensor(v, DT_SHAPE(13), DT_FLOAT64);
  double raw[13];
  dt_to_host(h, raw, sizeof raw);
  dt_tensor *t = dt_from_host(raw, DT_SHAPE(13), &(dt_tensor_options){
      .dtype = DT_FLOAT64, .mesh = m, .placements = DT_PLACEMENTS(DT_SHARD(0))});
  int64_t want_len[4] = {4, 4, 4, 1}, want_off[4] = {0, 4, 8, 12};
  for (int r = 0; r < 4; r++) {
    dt_shape ls = dt_tensor_local_shape(t, r);
    assert_int_equal(ls.ndim, 1);
    assert_int_equal(ls.dims[0], want_len[r]);
    double got[4];
    assert_int_equal(dt_local_to_host(t, r, got, sizeof got), DT_OK);
    for (int i = 0; i < want_len[r]; i++) assert_true(got[i] == want_off[r] + i);
  }
  dt_shape bad = dt_tensor_local_shape(t, 5);
  assert_int_equal(bad.ndim, -1);
  tu_expect_status(dt_last_status(), DT_ERR_MESH, "rank 5", NULL);
  tu_expect_status(dt_local_to_host(t, 6, raw, sizeof raw), DT_ERR_MESH, "6", NULL);
  dt_placement p = dt_tensor_placement(t, 0);
  assert_int_equal(p.kind, DT_PLACEMENT_SHARD);
  TU_RELEASE(h, t);
  dt_mesh_release(m);
  tu_leaks_end();
}

/* factories give the single-device values whatever the placements */
static void test_factories(void **state) {
  (void)state;
  tu_leaks_begin();
  dt_mesh *m = dt_mesh_init(rt, NULL, DT_SHAPE(2, 4), (const char *[]){"dp", "tp"});
  const dt_placement *pls[] = {
      DT_PLACEMENTS(DT_SHARD(0), DT_SHARD(1)), DT_PLACEMENTS(DT_REPLICATE, DT_SHARD(0)),
      DT_PLACEMENTS(DT_SHARD(1), DT_REPLICATE), DT_PLACEMENTS(DT_SHARD(0), DT_SHARD(0)),
      DT_PLACEMENTS(DT_PARTIAL(DT_REDUCE_SUM), DT_SHARD(1)), NULL};
  for (int k = 0; k < 6; k++) {
    dt_tensor_options o = {.mesh = m, .placements = pls[k]};
    for (int f = 0; f < 4; f++) {
      dt_manual_seed(99);
      dt_tensor *single = f == 0 ? dt_rand(DT_SHAPE(9, 7), NULL)
                          : f == 1 ? dt_randn(DT_SHAPE(9, 7), NULL)
                          : f == 2 ? dt_full(DT_SHAPE(9, 7), 2.5, NULL)
                                   : dt_ones(DT_SHAPE(9, 7), NULL);
      dt_manual_seed(99);
      dt_tensor *dist = f == 0 ? dt_rand(DT_SHAPE(9, 7), &o)
                        : f == 1 ? dt_randn(DT_SHAPE(9, 7), &o)
                        : f == 2 ? dt_full(DT_SHAPE(9, 7), 2.5, &o)
                                 : dt_ones(DT_SHAPE(9, 7), &o);
      if (!dist) fail_msg("factory %d placements %d: %s", f, k, dt_last_error());
      double *want = tu_values(single);
      char what[64];
      snprintf(what, sizeof what, "factory %d placements %d", f, k);
      expect_same(dist, want, 63, what);
      free(want);
      TU_RELEASE(single, dist);
    }
  }
  dt_mesh_release(m);
  tu_leaks_end();
}

/* every pair on 1-D meshes: the value survives, the collectives counted */
static void check_pair(dt_mesh *m, const dt_placement *src, const dt_placement *dst,
                       dt_shape s, dt_dtype d, const char *what) {
  double *v;
  dt_tensor *ref = tu_random(s, d, 5, -20, 20, &v);
  size_t bytes = (size_t)tu_numel(s) * dt_dtype_size(d);
  void *raw = malloc(bytes + 1);
  dt_to_host(ref, raw, bytes);
  dt_tensor *a = dt_from_host(raw, s, &(dt_tensor_options){.dtype = d, .mesh = m,
                                                             .placements = src});
  dt_tensor *b = dt_redistribute(a, NULL, dst);
  if (!b) fail_msg("%s: %s", what, dt_last_error());
  expect_same(b, v, tu_numel(s), what);
  free(v);
  free(raw);
  TU_RELEASE(ref, a, b);
}

static int64_t expected_collectives(dt_placement a, dt_placement b, int n,
                                    dt_comm_counts *want) {
  memset(want, 0, sizeof *want);
  if (n == 1 || (a.kind == b.kind && a.dim == b.dim && a.reduce == b.reduce))
    return 0;
  if (a.kind == DT_PLACEMENT_SHARD && b.kind == DT_PLACEMENT_REPLICATE) want->all_gather = 1;
  if (a.kind == DT_PLACEMENT_SHARD && b.kind == DT_PLACEMENT_SHARD) want->all_to_all = 1;
  if (a.kind == DT_PLACEMENT_PARTIAL && b.kind == DT_PLACEMENT_REPLICATE) want->all_reduce = 1;
  if (a.kind == DT_PLACEMENT_PARTIAL && b.kind == DT_PLACEMENT_SHARD) want->reduce_scatter = 1;
  if (a.kind == DT_PLACEMENT_PARTIAL && b.kind == DT_PLACEMENT_PARTIAL) want->all_reduce = 1;
  return 1;
}

static void test_pairs_1d(void **state) {
  (void)state;
  tu_leaks_begin();
  for (int n = 1; n <= 8; n++) {
    dt_mesh *m = mesh1(n);
    dt_shape shapes[] = {DT_SHAPE(n * 3 + 1, 6), DT_SHAPE(2, 3)};
    for (size_t si = 0; si < 2; si++)
      for (size_t a = 0; a < NPL1; a++)
        for (size_t b = 0; b < NPL1; b++) {
          bool s_to_p = pl1[a].kind == DT_PLACEMENT_SHARD &&
                        pl1[b].kind == DT_PLACEMENT_PARTIAL;
          char what[96];
          snprintf(what, sizeof what, "mesh %d shape %zu: %zu -> %zu", n, si, a, b);
          if (s_to_p) {
            dt_tensor *x = dt_zeros(shapes[si], &(dt_tensor_options){
                .mesh = m, .placements = &pl1[a]});
            tu_expect_error(dt_redistribute(x, NULL, &pl1[b]), DT_ERR_PLACEMENT,
                            "dt_redistribute", NULL);
            dt_tensor_release(x);
            continue;
          }
          dt_comm_count_begin();
          check_pair(m, &pl1[a], &pl1[b], shapes[si], DT_INT64, what);
          dt_comm_counts got = dt_comm_count_end(), want;
          /* fetching a Partial result reduces it internally: not counted */
          expected_collectives(pl1[a], pl1[b], n, &want);
          if (got.all_gather != want.all_gather || got.all_to_all != want.all_to_all ||
              got.reduce_scatter != want.reduce_scatter ||
              got.all_reduce != want.all_reduce)
            fail_msg("%s: counts ag %lld a2a %lld rs %lld ar %lld", what,
                     (long long)got.all_gather, (long long)got.all_to_all,
                     (long long)got.reduce_scatter, (long long)got.all_reduce);
          check_pair(m, &pl1[a], &pl1[b], shapes[si], DT_FLOAT32, what);
        }
    dt_mesh_release(m);
  }
  tu_leaks_end();
}

/* n-D meshes: every pair of a set of placements */
static void pairs_nd(dt_shape mshape, const dt_placement *const *pls, int npl,
                     dt_shape s) {
  dt_mesh *m = dt_mesh_init(rt, NULL, mshape, NULL);
  for (int a = 0; a < npl; a++)
    for (int b = 0; b < npl; b++) {
      bool bad = false;
      for (int d = 0; d < mshape.ndim; d++)
        bad |= pls[a][d].kind == DT_PLACEMENT_SHARD &&
               pls[b][d].kind == DT_PLACEMENT_PARTIAL;
      if (bad) continue;
      char what[64];
      snprintf(what, sizeof what, "%d-D mesh: %d -> %d", mshape.ndim, a, b);
      check_pair(m, pls[a], pls[b], s, DT_INT64, what);
    }
  dt_mesh_release(m);
}

static void test_pairs_2d_3d(void **state) {
  (void)state;
  tu_leaks_begin();
  const dt_placement *p2[] = {
      DT_PLACEMENTS(DT_REPLICATE, DT_REPLICATE), DT_PLACEMENTS(DT_SHARD(0), DT_REPLICATE),
      DT_PLACEMENTS(DT_REPLICATE, DT_SHARD(1)), DT_PLACEMENTS(DT_SHARD(0), DT_SHARD(1)),
      DT_PLACEMENTS(DT_SHARD(1), DT_SHARD(0)), DT_PLACEMENTS(DT_SHARD(0), DT_SHARD(0)),
      DT_PLACEMENTS(DT_PARTIAL(DT_REDUCE_SUM), DT_SHARD(1)),
      DT_PLACEMENTS(DT_REPLICATE, DT_PARTIAL(DT_REDUCE_SUM))};
  pairs_nd(DT_SHAPE(2, 2), p2, 8, DT_SHAPE(9, 5));
  pairs_nd(DT_SHAPE(2, 4), p2, 8, DT_SHAPE(13, 6));
  pairs_nd(DT_SHAPE(2, 4), p2, 8, DT_SHAPE(3, 2)); /* dims smaller than the mesh */
  const dt_placement *p3[] = {
      DT_PLACEMENTS(DT_REPLICATE, DT_REPLICATE, DT_REPLICATE),
      DT_PLACEMENTS(DT_SHARD(0), DT_SHARD(1), DT_SHARD(2)),
      DT_PLACEMENTS(DT_SHARD(0), DT_SHARD(0), DT_REPLICATE),
      DT_PLACEMENTS(DT_PARTIAL(DT_REDUCE_SUM), DT_SHARD(2), DT_REPLICATE),
      DT_PLACEMENTS(DT_REPLICATE, DT_SHARD(1), DT_SHARD(0))};
  pairs_nd(DT_SHAPE(2, 2, 2), p3, 5, DT_SHAPE(5, 6, 7));
  tu_leaks_end();
}

/* one collective per mesh dim that changes */
static void test_counts_2d(void **state) {
  (void)state;
  tu_leaks_begin();
  dt_mesh *m = dt_mesh_init(rt, NULL, DT_SHAPE(2, 4), NULL);
  dt_tensor *x = dt_ones(DT_SHAPE(8, 8), &(dt_tensor_options){
      .mesh = m, .placements = DT_PLACEMENTS(DT_SHARD(0), DT_SHARD(1))});
  dt_comm_count_begin();
  dt_tensor *y = dt_redistribute(x, NULL, DT_PLACEMENTS(DT_REPLICATE, DT_REPLICATE));
  dt_tensor *z = dt_redistribute(y, NULL, DT_PLACEMENTS(DT_SHARD(0), DT_REPLICATE));
  dt_comm_counts c = dt_comm_count_end();
  assert_int_equal(c.all_gather, 2);
  assert_int_equal(c.all_reduce + c.reduce_scatter + c.all_to_all, 0);
  assert_true(c.bytes >= 8 * 8 * 4);
  TU_RELEASE(x, y, z);
  dt_mesh_release(m);
  tu_leaks_end();
}

static void test_determinism(void **state) {
  (void)state;
  tu_leaks_begin();
  dt_mesh *m = mesh1(8);
  dt_manual_seed(3);
  dt_tensor *x = dt_randn(DT_SHAPE(37, 11), &(dt_tensor_options){
      .mesh = m, .placements = DT_PLACEMENTS(DT_SHARD(0))});
  float a[37 * 11], b[37 * 11];
  for (int k = 0; k < 2; k++) {
    dt_tensor *y = dt_redistribute(x, NULL, DT_PLACEMENTS(DT_SHARD(1)));
    dt_tensor *z = dt_redistribute(y, NULL, DT_PLACEMENTS(DT_REPLICATE));
    assert_int_equal(dt_to_host(z, k ? b : a, sizeof a), DT_OK);
    TU_RELEASE(y, z);
  }
  assert_memory_equal(a, b, sizeof a);
  dt_tensor_release(x);
  dt_mesh_release(m);
  tu_leaks_end();
}

static void test_other_mesh(void **state) {
  (void)state;
  tu_leaks_begin();
  dt_mesh *a = dt_mesh_create(rt, NULL, DT_SHAPE(2), (int[]){0, 1}, NULL);
  dt_mesh *b = dt_mesh_create(rt, NULL, DT_SHAPE(3), (int[]){2, 5, 7}, NULL);
  dt_mesh *c = dt_mesh_create(rt, NULL, DT_SHAPE(2, 2), (int[]){1, 2, 3, 4}, NULL);
  double *v;
  dt_tensor *single = tu_random(DT_SHAPE(11, 3), DT_FLOAT32, 4, -1, 1, &v);
  dt_tensor *x = dt_redistribute(single, a, DT_PLACEMENTS(DT_SHARD(0)));
  if (!x) fail_msg("distribute: %s", dt_last_error());
  expect_same(x, v, 33, "single -> mesh a");
  dt_tensor *y = dt_redistribute(x, b, DT_PLACEMENTS(DT_SHARD(1)));
  if (!y) fail_msg("a -> b: %s", dt_last_error());
  expect_same(y, v, 33, "mesh a -> mesh b");
  dt_tensor *z = dt_redistribute(y, c, DT_PLACEMENTS(DT_PARTIAL(DT_REDUCE_SUM), DT_SHARD(0)));
  expect_same(z, v, 33, "mesh b -> mesh c (overlapping ranks)");
  free(v);
  TU_RELEASE(single, x, y, z);
  dt_mesh_release(a);
  dt_mesh_release(b);
  dt_mesh_release(c);
  tu_leaks_end();
}

static void test_like_and_dict(void **state) {
  (void)state;
  tu_leaks_begin();
  dt_mesh *m = dt_mesh_init(rt, NULL, DT_SHAPE(2, 2), (const char *[]){"dp", "tp"});
  double *v;
  dt_tensor *h = tu_random(DT_SHAPE(6, 4), DT_FLOAT64, 8, -3, 3, &v);
  double raw[24];
  dt_to_host(h, raw, sizeof raw);
  dt_tensor *x = dt_from_host(raw, DT_SHAPE(6, 4), &(dt_tensor_options){
      .dtype = DT_FLOAT64, .mesh = m, .placements = DT_PLACEMENTS(DT_SHARD(0), DT_REPLICATE)});
  dt_tensor *like = dt_zeros(DT_SHAPE(6, 4), &(dt_tensor_options){
      .mesh = m, .placements = DT_PLACEMENTS(DT_REPLICATE, DT_SHARD(1))});
  dt_tensor *y = dt_redistribute_like(x, like);
  assert_int_equal(dt_tensor_placement(y, 1).kind, DT_PLACEMENT_SHARD);
  expect_same(y, v, 24, "like");
  dt_tensor *z = dt_redistribute_by_dict(x, NULL, (const char *[]){"tp"},
                                         DT_PLACEMENTS(DT_SHARD(1)), 1, DT_DEFAULT_KEEP);
  assert_int_equal(dt_tensor_placement(z, 0).kind, DT_PLACEMENT_SHARD);
  assert_int_equal(dt_tensor_placement(z, 1).dim, 1);
  expect_same(z, v, 24, "by_dict keep");
  dt_tensor *w = dt_redistribute_by_dict(x, NULL, (const char *[]){"tp"},
                                         DT_PLACEMENTS(DT_SHARD(0)), 1, DT_DEFAULT_REPLICATE);
  assert_int_equal(dt_tensor_placement(w, 0).kind, DT_PLACEMENT_REPLICATE);
  expect_same(w, v, 24, "by_dict replicate");
  tu_expect_error(dt_redistribute_by_dict(x, NULL, (const char *[]){"tp"},
                                          DT_PLACEMENTS(DT_SHARD(0)), 1,
                                          DT_DEFAULT_RAISE_ERROR),
                  DT_ERR_PLACEMENT, "dt_redistribute_by_dict", "dp", NULL);
  tu_expect_error(dt_redistribute_by_dict(x, NULL, (const char *[]){"pp"},
                                          DT_PLACEMENTS(DT_SHARD(0)), 1,
                                          DT_DEFAULT_KEEP),
                  DT_ERR_MESH, "pp", NULL);
  free(v);
  TU_RELEASE(h, x, like, y, z, w);
  dt_mesh_release(m);
  tu_leaks_end();
}

static void test_errors(void **state) {
  (void)state;
  tu_leaks_begin();
  dt_mesh *m = mesh1(4);
  tu_expect_error(dt_zeros(DT_SHAPE(4), &(dt_tensor_options){.mesh = m, .device = "cpu"}),
                  DT_ERR_INVALID_ARGUMENT, "dt_zeros", "exclusive", NULL);
  tu_expect_error(dt_zeros(DT_SHAPE(4), &(dt_tensor_options){
                      .mesh = m, .placements = DT_PLACEMENTS(DT_SHARD(2))}),
                  DT_ERR_PLACEMENT, "dt_zeros", NULL);
  dt_tensor *x = dt_ones(DT_SHAPE(4, 4), &(dt_tensor_options){
      .mesh = m, .placements = DT_PLACEMENTS(DT_SHARD(-1))});
  assert_int_equal(dt_tensor_placement(x, 0).dim, 1); /* -1 normalised */
  tu_expect_error(dt_redistribute(x, NULL, DT_PLACEMENTS(DT_PARTIAL(DT_REDUCE_SUM))),
                  DT_ERR_PLACEMENT, "dt_redistribute", NULL);
  dt_tensor *plain = dt_ones(DT_SHAPE(4, 4), NULL);
  tu_expect_error(dt_add(x, plain), DT_ERR_MESH, "dt_add: argument 1 is a "
                  "single-device tensor and argument 0 a DTensor", NULL);
  dt_tensor_release(plain);
  tu_expect_error(dt_redistribute(NULL, m, DT_PLACEMENTS(DT_REPLICATE)),
                  DT_ERR_INVALID_ARGUMENT, "dt_redistribute", NULL);
  dt_tensor *single = dt_ones(DT_SHAPE(3), NULL);
  tu_expect_error(dt_redistribute(single, NULL, DT_PLACEMENTS(DT_REPLICATE)),
                  DT_ERR_MESH, "single-device", NULL);
  TU_RELEASE(x, single);
  dt_mesh_release(m);
  tu_leaks_end();
}

/* specs: equal content hashes equal, any difference changes it */
static void test_spec_hash(void **state) {
  (void)state;
  tu_leaks_begin();
  dt_mesh *m1 = mesh1(4), *m2 = mesh1(4);
  dt_mesh *m3 = dt_mesh_create(rt, NULL, DT_SHAPE(4), (int[]){1, 0, 2, 3}, NULL);
  dt_tensor_options o = {.mesh = m1, .placements = DT_PLACEMENTS(DT_SHARD(0))};
  dt_tensor *a = dt_zeros(DT_SHAPE(8, 3), &o);
  o.mesh = m2;
  dt_tensor *b = dt_ones(DT_SHAPE(8, 3), &o); /* same spec, other mesh object */
  o.mesh = m3;
  dt_tensor *c = dt_zeros(DT_SHAPE(8, 3), &o);
  o.mesh = m1;
  o.placements = DT_PLACEMENTS(DT_SHARD(1));
  dt_tensor *d = dt_zeros(DT_SHAPE(8, 3), &o);
  o.dtype = DT_FLOAT64;
  dt_tensor *e = dt_zeros(DT_SHAPE(8, 3), &(dt_tensor_options){
      .dtype = DT_FLOAT64, .mesh = m1, .placements = DT_PLACEMENTS(DT_SHARD(0))});
  uint64_t ha = mesh_spec_hash(a->spec, a->dtype);
  assert_true(ha == mesh_spec_hash(b->spec, b->dtype));
  assert_true(mesh_spec_equal(a->spec, a->dtype, b->spec, b->dtype));
  dt_tensor *others[] = {c, d, e};
  for (int i = 0; i < 3; i++) {
    assert_false(mesh_spec_equal(a->spec, a->dtype, others[i]->spec,
                                    others[i]->dtype));
    assert_true(ha != mesh_spec_hash(others[i]->spec, others[i]->dtype));
  }
  TU_RELEASE(a, b, c, d, e);
  dt_mesh_release(m1);
  dt_mesh_release(m2);
  dt_mesh_release(m3);
  tu_leaks_end();
}

static void sleep_on_rank(void *arg, dt_runtime *r, int rank) {
  (void)r;
  if (rank != *(int *)arg) return;
  struct timespec ts = {0, 800000000};
  nanosleep(&ts, NULL);
}

/* a rank that never arrives: the others fail with DT_ERR_TIMEOUT naming
 * the collective, the group and the missing rank */
static void test_watchdog(void **state) {
  (void)state;
  dt_runtime *w = dt_runtime_create(&(dt_runtime_options){
      .num_ranks = 4, .collective_timeout_ms = 200});
  dt_runtime_set_current(w);
  dt_mesh *m = dt_mesh_init(w, NULL, DT_SHAPE(4), NULL);
  dt_tensor *x = dt_ones(DT_SHAPE(8), &(dt_tensor_options){
      .mesh = m, .placements = DT_PLACEMENTS(DT_SHARD(0))});
  dt_runtime_synchronize(w);
  static int stalled = 2;
  runtime_publish_call(w, 2, sleep_on_rank, NULL, &stalled);
  dt_tensor *y = dt_redistribute(x, NULL, DT_PLACEMENTS(DT_REPLICATE));
  float h[8];
  tu_expect_status(dt_to_host(y, h, sizeof h), DT_ERR_TIMEOUT, "all_gather",
                   "rank 2", NULL);
  TU_RELEASE(x, y);
  dt_mesh_release(m);
  dt_runtime_set_current(rt);
  dt_runtime_destroy(w);
}

/* a cross-mesh redistribute of a source whose ranks ran out of memory
 * reports that error, not an internal "no source copy" */
static void test_cross_mesh_failed_source(void **state) {
  (void)state;
  dt_runtime *lrt = dt_runtime_create(&(dt_runtime_options){
      .num_ranks = 4, .device_memory = 96 * 1024});
  assert_non_null(lrt);
  dt_mesh *a = dt_mesh_create(lrt, NULL, DT_SHAPE(2), (int[]){0, 1}, NULL);
  dt_mesh *b = dt_mesh_create(lrt, NULL, DT_SHAPE(2), (int[]){2, 3}, NULL);
  assert_true(a && b);
  /* 128 KiB replicas on 96 KiB devices: the factory's ranks run out; the
   * target's 64 KiB shards fit */
  dt_tensor *t = dt_ones(DT_SHAPE(2, 16384),
                         &(dt_tensor_options){.mesh = a,
                                              .placements = DT_PLACEMENTS(DT_REPLICATE)});
  assert_non_null(t);
  dt_tensor *r = dt_redistribute(t, b, DT_PLACEMENTS(DT_SHARD(1)));
  if (r) {
    float *got = malloc(2 * 16384 * sizeof *got);
    tu_expect_status(dt_to_host(r, got, 2 * 16384 * sizeof *got),
                     DT_ERR_OUT_OF_MEMORY, "out of device memory", NULL);
    free(got);
  } else {
    tu_expect_status(dt_last_status(), DT_ERR_OUT_OF_MEMORY, NULL);
  }
  dt_tensor_release(r);
  dt_tensor_release(t);
  dt_mesh_release(a);
  dt_mesh_release(b);
  dt_runtime_destroy(lrt);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_distribute_gather),
      cmocka_unit_test(test_local_shards),
      cmocka_unit_test(test_factories),
      cmocka_unit_test(test_pairs_1d),
      cmocka_unit_test(test_pairs_2d_3d),
      cmocka_unit_test(test_counts_2d),
      cmocka_unit_test(test_determinism),
      cmocka_unit_test(test_other_mesh),
      cmocka_unit_test(test_like_and_dict),
      cmocka_unit_test(test_errors),
      cmocka_unit_test(test_spec_hash),
      cmocka_unit_test(test_watchdog),
      cmocka_unit_test(test_cross_mesh_failed_source),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
