/* Device meshes: init and explicit ranks (1-D to 3-D, permutations), dim
 * names, queries (rank <-> coords for every rank), sub-meshes, flatten,
 * PyTorch-style reprs, every validation error, refcounts (a mesh outliving
 * its runtime's destroy), and the internal placement helpers: shard ranges,
 * local boxes (hand-computed), dim groups, placement checks and strings. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "mesh/mesh.h"
#include "runtime/runtime.h"

static dt_runtime *rt8;   /* 8 ranks, made by the group setup */

/* expr must return NULL with status and message substrings */
#define EXPECT_NO_MESH(expr, status, ...)                                   \
  do {                                                                      \
    dt_mesh *m_ = (expr);                                                   \
    if (m_) {                                                               \
      dt_mesh_release(m_);                                                  \
      fail_msg("%s made a mesh, want %s", #expr, #status);                  \
    }                                                                       \
    tu_expect_status(dt_last_status(), status, __VA_ARGS__);                \
  } while (0)

static const char *const DP_TP[] = {"dp", "tp"};
static const char *const ABC[] = {"a", "b", "c"};

/* the mesh's ranks in row-major order, read back through dt_mesh_rank */
static void expect_ranks(const dt_mesh *m, const int *want, int n) {
  dt_shape s = dt_mesh_shape(m);
  assert_int_equal(dt_mesh_size(m), n);
  for (int i = 0; i < n; i++) {
    int64_t c[DT_MAX_DIMS];
    int rest = i;
    for (int d = s.ndim - 1; d >= 0; d--) {
      c[d] = rest % s.dims[d];
      rest /= (int)s.dims[d];
    }
    if (dt_mesh_rank(m, c) != want[i])
      fail_msg("mesh index %d: rank %d, want %d", i, dt_mesh_rank(m, c),
               want[i]);
    int64_t back[DT_MAX_DIMS];
    assert_int_equal(dt_mesh_coords(m, want[i], back), DT_OK);
    for (int d = 0; d < s.ndim; d++) assert_int_equal(back[d], c[d]);
  }
}

static void expect_format(const dt_mesh *m, const char *want) {
  char buf[256];
  int n = dt_mesh_format(m, buf, sizeof buf);
  assert_string_equal(buf, want);
  assert_int_equal(n, (int)strlen(want));
}

static void test_init_shapes(void **state) {
  (void)state;
  dt_mesh *m1 = dt_mesh_init(rt8, NULL, DT_SHAPE(8), NULL);
  assert_non_null(m1);
  assert_int_equal(dt_mesh_ndim(m1), 1);
  tu_assert_dims(dt_mesh_shape(m1), DT_SHAPE(8), "1-D shape");
  assert_ptr_equal(dt_mesh_runtime(m1), rt8);
  assert_null(dt_mesh_dim_name(m1, 0));
  assert_int_equal(dt_last_status(), DT_OK);
  expect_ranks(m1, (int[]){0, 1, 2, 3, 4, 5, 6, 7}, 8);

  dt_mesh *m2 = dt_mesh_init(rt8, "cpu", DT_SHAPE(2, 4), DP_TP);
  assert_non_null(m2);
  assert_int_equal(dt_mesh_ndim(m2), 2);
  tu_assert_dims(dt_mesh_shape(m2), DT_SHAPE(2, 4), "2-D shape");
  for (int r = 0; r < 8; r++) {
    int64_t c[2];
    assert_int_equal(dt_mesh_coords(m2, r, c), DT_OK);
    assert_int_equal(c[0], r / 4);
    assert_int_equal(c[1], r % 4);
    assert_int_equal(dt_mesh_rank(m2, c), r);
  }

  dt_mesh *m3 = dt_mesh_init(rt8, NULL, DT_SHAPE(2, 2, 2), ABC);
  assert_non_null(m3);
  for (int r = 0; r < 8; r++) {
    int64_t c[3];
    assert_int_equal(dt_mesh_coords(m3, r, c), DT_OK);
    assert_int_equal(c[0] * 4 + c[1] * 2 + c[2], r);
    assert_int_equal(dt_mesh_rank(m3, c), r);
  }

  /* fewer ranks than the runtime: ranks 0..3; 4..7 are not in it */
  dt_mesh *small = dt_mesh_init(rt8, NULL, DT_SHAPE(2, 2), DP_TP);
  assert_non_null(small);
  expect_ranks(small, (int[]){0, 1, 2, 3}, 4);
  int64_t c[2];
  tu_expect_status(dt_mesh_coords(small, 5, c), DT_ERR_MESH, "dt_mesh_coords",
                   "rank 5 is not in mesh DeviceMesh('cpu', [[0, 1], [2, 3]]",
                   NULL);
  dt_mesh_release(m1);
  dt_mesh_release(m2);
  dt_mesh_release(m3);
  dt_mesh_release(small);
}

static void test_explicit_ranks(void **state) {
  (void)state;
  dt_mesh *m = dt_mesh_create(rt8, "cpu", DT_SHAPE(2, 2),
                              (int[]){0, 2, 4, 6}, DP_TP);
  assert_non_null(m);
  expect_ranks(m, (int[]){0, 2, 4, 6}, 4);
  assert_int_equal(dt_mesh_rank(m, (int64_t[]){1, 0}), 4);
  int64_t c[2];
  tu_expect_status(dt_mesh_coords(m, 1, c), DT_ERR_MESH,
                   "rank 1 is not in mesh DeviceMesh('cpu', [[0, 2], [4, 6]]",
                   NULL);
  tu_expect_status(dt_mesh_coords(m, 8, c), DT_ERR_MESH, "rank 8", NULL);
  tu_expect_status(dt_mesh_coords(m, -1, c), DT_ERR_MESH, "rank -1", NULL);
  dt_mesh_release(m);

  /* permutations: every rank maps back to its position */
  const int rev[] = {7, 6, 5, 4, 3, 2, 1, 0};
  m = dt_mesh_create(rt8, NULL, DT_SHAPE(8), rev, NULL);
  expect_ranks(m, rev, 8);
  dt_mesh_release(m);
  const int perm[] = {3, 1, 4, 0, 5, 7, 2, 6};
  m = dt_mesh_create(rt8, NULL, DT_SHAPE(2, 4), perm, DP_TP);
  expect_ranks(m, perm, 8);
  dt_mesh_release(m);
  m = dt_mesh_create(rt8, NULL, DT_SHAPE(2, 2, 2), perm, ABC);
  expect_ranks(m, perm, 8);
  dt_mesh_release(m);
}

static void test_names(void **state) {
  (void)state;
  char n0[] = "dp", n1[] = "tp";
  const char *names[] = {n0, n1};
  dt_mesh *m = dt_mesh_init(rt8, NULL, DT_SHAPE(2, 4), names);
  /* the mesh copied the names */
  n0[0] = 'X';
  n1[0] = 'Y';
  assert_string_equal(dt_mesh_dim_name(m, 0), "dp");
  assert_string_equal(dt_mesh_dim_name(m, 1), "tp");
  assert_int_equal(dt_mesh_dim_index(m, "dp"), 0);
  assert_int_equal(dt_mesh_dim_index(m, "tp"), 1);
  assert_int_equal(dt_mesh_dim_index(m, "pp"), -1);
  tu_expect_status(dt_last_status(), DT_ERR_MESH, "dt_mesh_dim_index",
                   "\"pp\"", "('dp', 'tp')", NULL);
  assert_int_equal(dt_mesh_dim_index(m, NULL), -1);
  tu_expect_status(dt_last_status(), DT_ERR_INVALID_ARGUMENT,
                   "dt_mesh_dim_index", NULL);
  assert_null(dt_mesh_dim_name(m, 2));
  tu_expect_status(dt_last_status(), DT_ERR_MESH, "dt_mesh_dim_name",
                   "dim 2", NULL);
  assert_null(dt_mesh_dim_name(m, -1));
  tu_expect_status(dt_last_status(), DT_ERR_MESH, "dim -1", NULL);
  dt_mesh_release(m);

  m = dt_mesh_init(rt8, NULL, DT_SHAPE(4), NULL);
  assert_int_equal(dt_mesh_dim_index(m, "dp"), -1);
  tu_expect_status(dt_last_status(), DT_ERR_MESH, "dt_mesh_dim_index",
                   "\"dp\"", "no dim names", NULL);
  dt_mesh_release(m);
}

/* the rank at index i of a 1-D mesh */
static int rank_at(const dt_mesh *m, int64_t i) {
  return dt_mesh_rank(m, (int64_t[]){i});
}

static void test_sub(void **state) {
  (void)state;
  dt_mesh *m = dt_mesh_init(rt8, NULL, DT_SHAPE(2, 4), DP_TP);
  for (int r = 0; r < 8; r++) {
    dt_mesh *tp = dt_mesh_sub(m, (const char *[]){"tp"}, 1, r);
    assert_non_null(tp);
    tu_assert_dims(dt_mesh_shape(tp), DT_SHAPE(4), "tp sub-mesh");
    assert_string_equal(dt_mesh_dim_name(tp, 0), "tp");
    for (int j = 0; j < 4; j++) assert_int_equal(rank_at(tp, j), r / 4 * 4 + j);
    dt_mesh *dp = dt_mesh_sub(m, (const char *[]){"dp"}, 1, r);
    assert_non_null(dp);
    tu_assert_dims(dt_mesh_shape(dp), DT_SHAPE(2), "dp sub-mesh");
    assert_string_equal(dt_mesh_dim_name(dp, 0), "dp");
    for (int i = 0; i < 2; i++) assert_int_equal(rank_at(dp, i), r % 4 + 4 * i);
    assert_ptr_equal(dt_mesh_runtime(dp), rt8);
    /* both names: the whole mesh */
    dt_mesh *all = dt_mesh_sub(m, DP_TP, 2, r);
    assert_ptr_equal(all, m);
    dt_mesh_release(all);
    dt_mesh_release(tp);
    dt_mesh_release(dp);
  }
  expect_format(m, "DeviceMesh('cpu', [[0, 1, 2, 3], [4, 5, 6, 7]], "
                   "mesh_dim_names=('dp', 'tp'))");
  dt_mesh_release(m);

  /* explicit ranks; two of three dims (b fixed at rank 3's coordinate 1) */
  m = dt_mesh_create(rt8, NULL, DT_SHAPE(2, 2), (int[]){0, 2, 4, 6}, DP_TP);
  dt_mesh *tp = dt_mesh_sub(m, (const char *[]){"tp"}, 1, 4);
  expect_format(tp, "DeviceMesh('cpu', [4, 6], mesh_dim_names=('tp',))");
  dt_mesh_release(tp);
  dt_mesh_release(m);
  m = dt_mesh_init(rt8, NULL, DT_SHAPE(2, 2, 2), ABC);
  dt_mesh *ac = dt_mesh_sub(m, (const char *[]){"a", "c"}, 2, 3);
  expect_format(ac, "DeviceMesh('cpu', [[2, 3], [6, 7]], "
                    "mesh_dim_names=('a', 'c'))");
  dt_mesh_release(ac);

  EXPECT_NO_MESH(dt_mesh_sub(m, (const char *[]){"c", "a"}, 2, 0),
                 DT_ERR_MESH, "dt_mesh_sub", "\"a\" comes before \"c\"", NULL);
  EXPECT_NO_MESH(dt_mesh_sub(m, (const char *[]){"a", "a"}, 2, 0),
                 DT_ERR_MESH, "dt_mesh_sub", "\"a\" is named twice", NULL);
  EXPECT_NO_MESH(dt_mesh_sub(m, (const char *[]){"x"}, 1, 0), DT_ERR_MESH,
                 "dt_mesh_sub", "\"x\"", "('a', 'b', 'c')", NULL);
  EXPECT_NO_MESH(dt_mesh_sub(m, (const char *[]){"a"}, 0, 0),
                 DT_ERR_INVALID_ARGUMENT, "dt_mesh_sub", "n = 0", NULL);
  EXPECT_NO_MESH(dt_mesh_sub(m, ABC, 4, 0), DT_ERR_INVALID_ARGUMENT,
                 "n = 4", NULL);
  EXPECT_NO_MESH(dt_mesh_sub(m, NULL, 1, 0), DT_ERR_INVALID_ARGUMENT,
                 "names is NULL", NULL);
  EXPECT_NO_MESH(dt_mesh_sub(m, (const char *[]){"a"}, 1, 9), DT_ERR_MESH,
                 "dt_mesh_sub", "rank 9 is not in mesh", NULL);
  EXPECT_NO_MESH(dt_mesh_sub(NULL, (const char *[]){"a"}, 1, 0),
                 DT_ERR_INVALID_ARGUMENT, "dt_mesh_sub", NULL);
  dt_mesh_release(m);
  m = dt_mesh_init(rt8, NULL, DT_SHAPE(2, 4), NULL);
  EXPECT_NO_MESH(dt_mesh_sub(m, (const char *[]){"tp"}, 1, 0), DT_ERR_MESH,
                 "dt_mesh_sub", "\"tp\"", "no dim names", NULL);
  dt_mesh_release(m);
}

static void test_flatten(void **state) {
  (void)state;
  dt_mesh *m = dt_mesh_init(rt8, NULL, DT_SHAPE(2, 2, 2), ABC);
  dt_mesh *bc = dt_mesh_flatten(m, (const char *[]){"b", "c"}, 2, NULL);
  assert_non_null(bc);
  tu_assert_dims(dt_mesh_shape(bc), DT_SHAPE(2, 4), "flatten b, c");
  assert_string_equal(dt_mesh_dim_name(bc, 0), "a");
  assert_string_equal(dt_mesh_dim_name(bc, 1), "b_c");
  expect_ranks(bc, (int[]){0, 1, 2, 3, 4, 5, 6, 7}, 8);
  dt_mesh_release(bc);
  dt_mesh *ab = dt_mesh_flatten(m, (const char *[]){"a", "b"}, 2, "ab");
  expect_format(ab, "DeviceMesh('cpu', [[0, 1], [2, 3], [4, 5], [6, 7]], "
                    "mesh_dim_names=('ab', 'c'))");
  dt_mesh_release(ab);
  dt_mesh *abc = dt_mesh_flatten(m, ABC, 3, NULL);
  expect_format(abc, "DeviceMesh('cpu', [0, 1, 2, 3, 4, 5, 6, 7], "
                     "mesh_dim_names=('a_b_c',))");
  dt_mesh_release(abc);

  EXPECT_NO_MESH(dt_mesh_flatten(m, (const char *[]){"a", "c"}, 2, NULL),
                 DT_ERR_MESH, "dt_mesh_flatten", "\"a\" .. \"c\"",
                 "not adjacent", NULL);
  EXPECT_NO_MESH(dt_mesh_flatten(m, (const char *[]){"c", "b"}, 2, NULL),
                 DT_ERR_MESH, "dt_mesh_flatten", "\"b\" comes before \"c\"",
                 NULL);
  EXPECT_NO_MESH(dt_mesh_flatten(m, (const char *[]){"b", "z"}, 2, NULL),
                 DT_ERR_MESH, "dt_mesh_flatten", "\"z\"", NULL);
  EXPECT_NO_MESH(dt_mesh_flatten(m, (const char *[]){"b", "c"}, 2, ""),
                 DT_ERR_INVALID_ARGUMENT, "dt_mesh_flatten", "new_name", NULL);
  EXPECT_NO_MESH(dt_mesh_flatten(m, (const char *[]){"b", "c"}, 2, "a"),
                 DT_ERR_MESH, "dt_mesh_flatten", "\"a\" is used twice", NULL);
  dt_mesh_release(m);

  /* explicit ranks keep their order; a joined name may collide */
  const int perm[] = {3, 1, 4, 0, 5, 7, 2, 6};
  m = dt_mesh_create(rt8, NULL, DT_SHAPE(2, 2, 2), perm,
                     (const char *[]){"x", "y", "x_y"});
  dt_mesh *f = dt_mesh_flatten(m, (const char *[]){"y", "x_y"}, 2, NULL);
  tu_assert_dims(dt_mesh_shape(f), DT_SHAPE(2, 4), "flatten permuted");
  expect_ranks(f, perm, 8);
  assert_string_equal(dt_mesh_dim_name(f, 1), "y_x_y");
  dt_mesh_release(f);
  EXPECT_NO_MESH(dt_mesh_flatten(m, (const char *[]){"x", "y"}, 2, NULL),
                 DT_ERR_MESH, "dt_mesh_flatten", "\"x_y\" is used twice",
                 NULL);
  dt_mesh_release(m);
  m = dt_mesh_init(rt8, NULL, DT_SHAPE(2, 4), NULL);
  EXPECT_NO_MESH(dt_mesh_flatten(m, DP_TP, 2, NULL), DT_ERR_MESH,
                 "dt_mesh_flatten", "no dim names", NULL);
  dt_mesh_release(m);
}

static void test_format(void **state) {
  (void)state;
  dt_mesh *m = dt_mesh_init(rt8, NULL, DT_SHAPE(4), NULL);
  expect_format(m, "DeviceMesh('cpu', [0, 1, 2, 3])");
  dt_mesh_release(m);
  m = dt_mesh_init(rt8, NULL, DT_SHAPE(2), (const char *[]){"dp"});
  expect_format(m, "DeviceMesh('cpu', [0, 1], mesh_dim_names=('dp',))");
  dt_mesh_release(m);
  m = dt_mesh_init(rt8, NULL, DT_SHAPE(1), NULL);
  expect_format(m, "DeviceMesh('cpu', [0])");
  dt_mesh_release(m);
  m = dt_mesh_init(rt8, NULL, DT_SHAPE(1, 1), NULL);
  expect_format(m, "DeviceMesh('cpu', [[0]])");
  dt_mesh_release(m);
  m = dt_mesh_init(rt8, NULL, DT_SHAPE(4, 1), NULL);
  expect_format(m, "DeviceMesh('cpu', [[0], [1], [2], [3]])");
  dt_mesh_release(m);
  m = dt_mesh_init(rt8, NULL, DT_SHAPE(2, 2, 2), ABC);
  expect_format(m, "DeviceMesh('cpu', [[[0, 1], [2, 3]], [[4, 5], [6, 7]]], "
                   "mesh_dim_names=('a', 'b', 'c'))");
  dt_mesh_release(m);
  m = dt_mesh_create(rt8, NULL, DT_SHAPE(2, 2), (int[]){0, 1, 2, 3}, DP_TP);
  const char *want = "DeviceMesh('cpu', [[0, 1], [2, 3]], "
                     "mesh_dim_names=('dp', 'tp'))";
  expect_format(m, want);
  /* like snprintf: the full length back, a truncated NUL-terminated text */
  char small[12];
  assert_int_equal(dt_mesh_format(m, small, sizeof small), (int)strlen(want));
  assert_string_equal(small, "DeviceMesh(");
  assert_int_equal(dt_mesh_format(m, NULL, 0), (int)strlen(want));
  dt_mesh_release(m);
  assert_int_equal(dt_mesh_format(NULL, small, sizeof small), -1);
  assert_string_equal(small, "");
  tu_expect_status(dt_last_status(), DT_ERR_INVALID_ARGUMENT,
                   "dt_mesh_format", NULL);
}

static void test_validation_create(void **state) {
  (void)state;
  EXPECT_NO_MESH(dt_mesh_init(rt8, "cuda", DT_SHAPE(2), NULL), DT_ERR_DEVICE,
                 "dt_mesh_init", "\"cuda\"", "runtime's ranks are \"cpu\"",
                 NULL);
  EXPECT_NO_MESH(dt_mesh_create(rt8, "cuda:0", DT_SHAPE(1), (int[]){0}, NULL),
                 DT_ERR_DEVICE, "dt_mesh_create", "\"cuda:0\"", NULL);
  EXPECT_NO_MESH(dt_mesh_init(rt8, "tpu", DT_SHAPE(2), NULL),
                 DT_ERR_INVALID_ARGUMENT, "dt_mesh_init", "\"tpu\"", NULL);
  EXPECT_NO_MESH(dt_mesh_init(rt8, NULL, (dt_shape){.ndim = 0}, NULL),
                 DT_ERR_MESH, "dt_mesh_init", "1 to 8 dims", "has 0", NULL);
  EXPECT_NO_MESH(dt_mesh_init(rt8, NULL, (dt_shape){.ndim = 9}, NULL),
                 DT_ERR_MESH, "dt_mesh_init", "has 9", NULL);
  EXPECT_NO_MESH(dt_mesh_init(rt8, NULL, (dt_shape){.ndim = -1}, NULL),
                 DT_ERR_MESH, "has -1", NULL);
  EXPECT_NO_MESH(dt_mesh_init(rt8, NULL, DT_SHAPE(2, 0), NULL), DT_ERR_MESH,
                 "dt_mesh_init", "[2, 0]", "dim 1 is 0", NULL);
  EXPECT_NO_MESH(dt_mesh_create(rt8, NULL, DT_SHAPE(-2), (int[]){0}, NULL),
                 DT_ERR_MESH, "dt_mesh_create", "dim 0 is -2", NULL);
  EXPECT_NO_MESH(dt_mesh_init(rt8, NULL, DT_SHAPE(3, 3), NULL), DT_ERR_MESH,
                 "dt_mesh_init", "[3, 3]", "needs 9 ranks",
                 "the runtime has 8", NULL);
  /* a product that would overflow int64 is still just "too many" */
  EXPECT_NO_MESH(dt_mesh_init(rt8, NULL, DT_SHAPE(INT64_MAX, INT64_MAX, 4),
                              NULL), DT_ERR_MESH, "needs more than", NULL);
  EXPECT_NO_MESH(dt_mesh_create(rt8, NULL, DT_SHAPE(4), (int[]){0, 1, 1, 2},
                                NULL), DT_ERR_MESH, "dt_mesh_create",
                 "rank 1 appears twice", "ranks[1]", "ranks[2]", NULL);
  EXPECT_NO_MESH(dt_mesh_create(rt8, NULL, DT_SHAPE(2), (int[]){0, 8}, NULL),
                 DT_ERR_MESH, "dt_mesh_create", "ranks[1] = 8", "[0, 8)",
                 NULL);
  EXPECT_NO_MESH(dt_mesh_create(rt8, NULL, DT_SHAPE(2), (int[]){-1, 0}, NULL),
                 DT_ERR_MESH, "ranks[0] = -1", NULL);
  EXPECT_NO_MESH(dt_mesh_create(rt8, NULL, DT_SHAPE(2), NULL, NULL),
                 DT_ERR_INVALID_ARGUMENT, "dt_mesh_create", "ranks is NULL",
                 NULL);
  EXPECT_NO_MESH(dt_mesh_init(rt8, NULL, DT_SHAPE(2, 2),
                              (const char *[]){"dp", NULL}),
                 DT_ERR_INVALID_ARGUMENT, "dt_mesh_init", "dim_names[1]",
                 "NULL", NULL);
  EXPECT_NO_MESH(dt_mesh_init(rt8, NULL, DT_SHAPE(2, 2),
                              (const char *[]){"", "tp"}),
                 DT_ERR_INVALID_ARGUMENT, "dim_names[0] is empty", NULL);
  EXPECT_NO_MESH(dt_mesh_create(rt8, NULL, DT_SHAPE(2, 2, 2),
                                (int[]){0, 1, 2, 3, 4, 5, 6, 7},
                                (const char *[]){"dp", "tp", "dp"}),
                 DT_ERR_MESH, "dt_mesh_create", "\"dp\" is used twice",
                 "dim_names[0]", "dim_names[2]", NULL);
}

static void test_validation_queries(void **state) {
  (void)state;
  dt_mesh *m = dt_mesh_init(rt8, NULL, DT_SHAPE(2, 4), DP_TP);
  assert_int_equal(dt_mesh_rank(m, (int64_t[]){0, 4}), -1);
  tu_expect_status(dt_last_status(), DT_ERR_MESH, "dt_mesh_rank",
                   "coordinate 4", "mesh dim 1 ('tp')", "[0, 4)", NULL);
  assert_int_equal(dt_mesh_rank(m, (int64_t[]){-1, 0}), -1);
  tu_expect_status(dt_last_status(), DT_ERR_MESH, "coordinate -1",
                   "mesh dim 0 ('dp')", "[0, 2)", NULL);
  assert_int_equal(dt_mesh_rank(m, NULL), -1);
  tu_expect_status(dt_last_status(), DT_ERR_INVALID_ARGUMENT, "coords", NULL);
  tu_expect_status(dt_mesh_coords(m, 0, NULL), DT_ERR_INVALID_ARGUMENT,
                   "dt_mesh_coords", NULL);
  dt_mesh_release(m);

  /* NULL meshes: errors, never crashes */
  assert_int_equal(dt_mesh_ndim(NULL), -1);
  tu_expect_status(dt_last_status(), DT_ERR_INVALID_ARGUMENT, "dt_mesh_ndim",
                   NULL);
  assert_int_equal(dt_mesh_size(NULL), -1);
  tu_expect_status(dt_last_status(), DT_ERR_INVALID_ARGUMENT, "dt_mesh_size",
                   NULL);
  assert_int_equal(dt_mesh_shape(NULL).ndim, -1);  /* a failed shape query */
  tu_expect_status(dt_last_status(), DT_ERR_INVALID_ARGUMENT, "dt_mesh_shape",
                   NULL);
  assert_null(dt_mesh_runtime(NULL));
  tu_expect_status(dt_last_status(), DT_ERR_INVALID_ARGUMENT, NULL);
  assert_int_equal(dt_mesh_rank(NULL, (int64_t[]){0}), -1);
  tu_expect_status(dt_last_status(), DT_ERR_INVALID_ARGUMENT, NULL);
  int64_t c[1];
  tu_expect_status(dt_mesh_coords(NULL, 0, c), DT_ERR_INVALID_ARGUMENT, NULL);
  assert_int_equal(dt_mesh_dim_index(NULL, "dp"), -1);
  tu_expect_status(dt_last_status(), DT_ERR_INVALID_ARGUMENT, NULL);
  assert_null(dt_mesh_dim_name(NULL, 0));
  tu_expect_status(dt_last_status(), DT_ERR_INVALID_ARGUMENT, NULL);
  EXPECT_NO_MESH(dt_mesh_flatten(NULL, DP_TP, 2, NULL),
                 DT_ERR_INVALID_ARGUMENT, "dt_mesh_flatten", NULL);
  assert_null(dt_mesh_retain(NULL));
  dt_mesh_release(NULL);
}

static int64_t rt_refs(dt_runtime *rt) {
  return atomic_load_explicit(&rt->refcount, memory_order_relaxed);
}

static void test_refcounts(void **state) {
  (void)state;
  dt_runtime *rt = dt_runtime_create(&(dt_runtime_options){.num_ranks = 2});
  assert_non_null(rt);
  int64_t base = rt_refs(rt);
  dt_mesh *m = dt_mesh_init(rt, NULL, DT_SHAPE(2), (const char *[]){"dp"});
  assert_non_null(m);
  assert_int_equal(rt_refs(rt), base + 1);
  assert_ptr_equal(dt_mesh_retain(m), m);
  assert_int_equal(atomic_load(&m->refcount), 2);
  dt_mesh_release(m);
  assert_int_equal(atomic_load(&m->refcount), 1);
  assert_int_equal(rt_refs(rt), base + 1);
  dt_mesh *sub = dt_mesh_sub(m, (const char *[]){"dp"}, 1, 1);
  assert_ptr_equal(sub, m);   /* all dims: the same mesh, one more ref */
  assert_int_equal(atomic_load(&m->refcount), 2);
  dt_mesh_release(sub);
  EXPECT_NO_MESH(dt_mesh_init(rt, NULL, DT_SHAPE(4), NULL), DT_ERR_MESH,
                 "dt_mesh_init", "[4]", "needs 4 ranks",
                 "the runtime has 2", NULL);
  assert_int_equal(rt_refs(rt), base + 1);   /* failures hold nothing */

  /* the runtime dies first; the mesh keeps its struct alive */
  dt_runtime_destroy(rt);
  assert_ptr_equal(dt_mesh_runtime(m), rt);
  assert_int_equal(dt_runtime_num_ranks(dt_mesh_runtime(m)), 2);
  expect_format(m, "DeviceMesh('cpu', [0, 1], mesh_dim_names=('dp',))");
  EXPECT_NO_MESH(dt_mesh_init(rt, NULL, DT_SHAPE(2), NULL),
                 DT_ERR_INVALID_ARGUMENT, "dt_mesh_init", "destroyed", NULL);
  EXPECT_NO_MESH(dt_mesh_create(rt, NULL, DT_SHAPE(1), (int[]){0}, NULL),
                 DT_ERR_INVALID_ARGUMENT, "dt_mesh_create", "destroyed",
                 NULL);
  dt_mesh *f = dt_mesh_flatten(m, (const char *[]){"dp"}, 1, "all");
  assert_non_null(f);
  dt_mesh_release(m);
  assert_string_equal(dt_mesh_dim_name(f, 0), "all");
  dt_mesh_release(f);   /* the last holder: frees the runtime (ASan) */
}

static void test_current_runtime_and_ids(void **state) {
  (void)state;
  assert_int_equal(dt_runtime_set_current(rt8), DT_OK);
  dt_mesh *a = dt_mesh_init(NULL, NULL, DT_SHAPE(8), NULL);
  dt_mesh *b = dt_mesh_create(NULL, NULL, DT_SHAPE(2), (int[]){5, 2}, NULL);
  assert_ptr_equal(dt_mesh_runtime(a), rt8);
  assert_ptr_equal(dt_mesh_runtime(b), rt8);
  assert_true(a->id != 0 && b->id != 0 && a->id != b->id);
  expect_format(b, "DeviceMesh('cpu', [5, 2])");
  dt_mesh_release(a);
  dt_mesh_release(b);
  assert_int_equal(dt_runtime_set_current(NULL), DT_OK);
}

/* ------------------------------------------------ internal helpers */

static void expect_ranges(int64_t n, int64_t k, const int64_t *off,
                          const int64_t *len) {
  for (int64_t c = 0; c < k; c++) {
    int64_t o, l;
    mesh_shard_range(n, k, c, &o, &l);
    if (o != off[c] || l != len[c])
      fail_msg("dt_shard_range(%lld, %lld, %lld) = (%lld, %lld), want "
               "(%lld, %lld)", (long long)n, (long long)k, (long long)c,
               (long long)o, (long long)l, (long long)off[c],
               (long long)len[c]);
  }
}

static void test_shard_range(void **state) {
  (void)state;
  expect_ranges(5, 4, (int64_t[]){0, 2, 4, 5}, (int64_t[]){2, 2, 1, 0});
  expect_ranges(13, 4, (int64_t[]){0, 4, 8, 12}, (int64_t[]){4, 4, 4, 1});
  expect_ranges(3, 8, (int64_t[]){0, 1, 2, 3, 3, 3, 3, 3},
                (int64_t[]){1, 1, 1, 0, 0, 0, 0, 0});
  expect_ranges(8, 4, (int64_t[]){0, 2, 4, 6}, (int64_t[]){2, 2, 2, 2});
  expect_ranges(0, 2, (int64_t[]){0, 0}, (int64_t[]){0, 0});
  expect_ranges(7, 1, (int64_t[]){0}, (int64_t[]){7});
}

/* boxes[index][2 * t] = offset, [2 * t + 1] = size of tensor dim t */
static void expect_boxes(const dt_mesh *m, const dt_placement *pl,
                         dt_shape global, const int64_t (*boxes)[4]) {
  char ps[64];
  mesh_placements_str(pl, m->ndim, ps, sizeof ps);
  assert_int_equal(mesh_check_placements(m, pl, &global, "test"), DT_OK);
  for (int i = 0; i < m->size; i++) {
    int64_t off[DT_MAX_DIMS], len[DT_MAX_DIMS];
    mesh_local_box(m, pl, &global, i, off, len);
    for (int t = 0; t < global.ndim; t++)
      if (off[t] != boxes[i][2 * t] || len[t] != boxes[i][2 * t + 1])
        fail_msg("%s index %d dim %d: (%lld, %lld), want (%lld, %lld)", ps, i,
                 t, (long long)off[t], (long long)len[t],
                 (long long)boxes[i][2 * t], (long long)boxes[i][2 * t + 1]);
  }
}

static void test_local_box(void **state) {
  (void)state;
  dt_mesh *m4 = dt_mesh_init(rt8, NULL, DT_SHAPE(4), NULL);
  expect_boxes(m4, DT_PLACEMENTS(DT_SHARD(0)), DT_SHAPE(5),
               (const int64_t[][4]){{0, 2}, {2, 2}, {4, 1}, {5, 0}});
  expect_boxes(m4, DT_PLACEMENTS(DT_SHARD(1)), DT_SHAPE(2, 13),
               (const int64_t[][4]){{0, 2, 0, 4}, {0, 2, 4, 4},
                                    {0, 2, 8, 4}, {0, 2, 12, 1}});
  expect_boxes(m4, DT_PLACEMENTS(DT_PARTIAL(DT_REDUCE_MAX)), DT_SHAPE(5),
               (const int64_t[][4]){{0, 5}, {0, 5}, {0, 5}, {0, 5}});
  dt_mesh_release(m4);
  dt_mesh *m8 = dt_mesh_init(rt8, NULL, DT_SHAPE(8), NULL);
  expect_boxes(m8, DT_PLACEMENTS(DT_SHARD(0)), DT_SHAPE(3),
               (const int64_t[][4]){{0, 1}, {1, 1}, {2, 1}, {3, 0},
                                    {3, 0}, {3, 0}, {3, 0}, {3, 0}});
  dt_mesh_release(m8);

  /* nested: mesh dim 0 splits 10 into 5 + 5, mesh dim 1 each into 3 + 2 */
  dt_mesh *m22 = dt_mesh_init(rt8, NULL, DT_SHAPE(2, 2), DP_TP);
  expect_boxes(m22, DT_PLACEMENTS(DT_SHARD(0), DT_SHARD(0)), DT_SHAPE(10),
               (const int64_t[][4]){{0, 3}, {3, 2}, {5, 3}, {8, 2}});
  /* [S(1), S(0)] on [4, 3]: dim 1 by mesh dim 0, dim 0 by mesh dim 1 */
  expect_boxes(m22, DT_PLACEMENTS(DT_SHARD(1), DT_SHARD(0)), DT_SHAPE(4, 3),
               (const int64_t[][4]){{0, 2, 0, 2}, {2, 2, 0, 2},
                                    {0, 2, 2, 1}, {2, 2, 2, 1}});
  /* Partial ignores: only mesh dim 1 splits 9 into 5 + 4 */
  expect_boxes(m22, DT_PLACEMENTS(DT_PARTIAL(DT_REDUCE_SUM), DT_SHARD(0)),
               DT_SHAPE(9), (const int64_t[][4]){{0, 5}, {5, 4}, {0, 5},
                                                 {5, 4}});
  dt_mesh_release(m22);

  /* 2 x 4 mesh: [S(0), S(1)] on [6, 10]; [R, S(1)] on [5, 7] */
  dt_mesh *m24 = dt_mesh_init(rt8, NULL, DT_SHAPE(2, 4), DP_TP);
  expect_boxes(m24, DT_PLACEMENTS(DT_SHARD(0), DT_SHARD(1)), DT_SHAPE(6, 10),
               (const int64_t[][4]){{0, 3, 0, 3}, {0, 3, 3, 3}, {0, 3, 6, 3},
                                    {0, 3, 9, 1}, {3, 3, 0, 3}, {3, 3, 3, 3},
                                    {3, 3, 6, 3}, {3, 3, 9, 1}});
  expect_boxes(m24, DT_PLACEMENTS(DT_REPLICATE, DT_SHARD(1)), DT_SHAPE(5, 7),
               (const int64_t[][4]){{0, 5, 0, 2}, {0, 5, 2, 2}, {0, 5, 4, 2},
                                    {0, 5, 6, 1}, {0, 5, 0, 2}, {0, 5, 2, 2},
                                    {0, 5, 4, 2}, {0, 5, 6, 1}});
  dt_mesh_release(m24);
}

static void test_dim_group(void **state) {
  (void)state;
  const int perm[] = {3, 1, 4, 0, 5, 7, 2, 6};
  dt_mesh *m = dt_mesh_create(rt8, NULL, DT_SHAPE(2, 4), perm, DP_TP);
  int ranks[8], member = -1;
  /* index 5 = coordinates (1, 1) */
  assert_int_equal(mesh_dim_group(m, 1, 5, ranks, &member), 4);
  assert_int_equal(member, 1);
  assert_memory_equal(ranks, ((int[]){5, 7, 2, 6}), 4 * sizeof(int));
  assert_int_equal(mesh_dim_group(m, 0, 5, ranks, &member), 2);
  assert_int_equal(member, 1);
  assert_memory_equal(ranks, ((int[]){1, 7}), 2 * sizeof(int));
  assert_int_equal(mesh_dim_group(m, 0, 2, ranks, &member), 2);
  assert_int_equal(member, 0);
  assert_memory_equal(ranks, ((int[]){4, 2}), 2 * sizeof(int));
  int64_t c[2];
  mesh_index_coords(m, 6, c);
  assert_int_equal(c[0], 1);
  assert_int_equal(c[1], 2);
  dt_mesh_release(m);
}

static void test_check_placements(void **state) {
  (void)state;
  dt_mesh *m = dt_mesh_init(rt8, NULL, DT_SHAPE(2, 4), DP_TP);
  dt_shape s = DT_SHAPE(4, 8);
  assert_int_equal(mesh_check_placements(
      m, DT_PLACEMENTS(DT_SHARD(1), DT_SHARD(1)), &s, "f"), DT_OK);
  assert_int_equal(mesh_check_placements(
      m, DT_PLACEMENTS(DT_PARTIAL(DT_REDUCE_AVG), DT_PARTIAL(DT_REDUCE_AVG)),
      &s, "f"), DT_OK);
  tu_expect_status(mesh_check_placements(
      m, DT_PLACEMENTS(DT_SHARD(2), DT_REPLICATE), &s, "dt_zeros"),
      DT_ERR_PLACEMENT, "dt_zeros", "[S(2), R]", "mesh dim 0 ('dp')",
      "tensor dim 2", "[4, 8]", NULL);
  /* negative dims are the public layer's job */
  tu_expect_status(mesh_check_placements(
      m, DT_PLACEMENTS(DT_REPLICATE, DT_SHARD(-1)), &s, "f"),
      DT_ERR_PLACEMENT, "[R, S(-1)]", "mesh dim 1 ('tp')", "tensor dim -1",
      NULL);
  tu_expect_status(mesh_check_placements(
      m, DT_PLACEMENTS(DT_PARTIAL(DT_REDUCE_SUM), DT_PARTIAL(DT_REDUCE_MAX)),
      &s, "f"), DT_ERR_PLACEMENT, "f:", "[P(sum), P(max)]", "Partial(sum)",
      "Partial(max)", "mesh dim 1", NULL);
  tu_expect_status(mesh_check_placements(
      m, DT_PLACEMENTS(DT_REPLICATE, ((dt_placement){7, 0, 0})), &s, "f"),
      DT_ERR_PLACEMENT, "mesh dim 1", "unknown placement kind 7", NULL);
  tu_expect_status(mesh_check_placements(
      m, DT_PLACEMENTS(((dt_placement){DT_PLACEMENT_PARTIAL, 0, 9}),
                       DT_REPLICATE), &s, "f"),
      DT_ERR_PLACEMENT, "mesh dim 0", "reduce op 9", NULL);
  tu_expect_status(mesh_check_placements(m, NULL, &s, "f"),
                   DT_ERR_INVALID_ARGUMENT, "f:", "placements", NULL);
  dt_shape scalar = {.ndim = 0};
  tu_expect_status(mesh_check_placements(
      m, DT_PLACEMENTS(DT_SHARD(0), DT_REPLICATE), &scalar, "f"),
      DT_ERR_PLACEMENT, "0 dims", NULL);
  dt_mesh_release(m);
}

static void test_placement_strings(void **state) {
  (void)state;
  char buf[64];
  assert_string_equal(
      mesh_placements_str(DT_PLACEMENTS(DT_SHARD(0), DT_REPLICATE,
                                        DT_PARTIAL(DT_REDUCE_SUM)), 3, buf,
                          sizeof buf), "[S(0), R, P(sum)]");
  mesh_placements_str(DT_PLACEMENTS(DT_PARTIAL(DT_REDUCE_AVG),
                                    DT_PARTIAL(DT_REDUCE_MAX),
                                    DT_PARTIAL(DT_REDUCE_MIN),
                                    DT_PARTIAL(DT_REDUCE_PROD),
                                    DT_SHARD(12)), 5, buf, sizeof buf);
  assert_string_equal(buf, "[P(avg), P(max), P(min), P(prod), S(12)]");
  assert_string_equal(mesh_placements_str(NULL, 0, buf, sizeof buf), "[]");
  char tiny[5];
  mesh_placements_str(DT_PLACEMENTS(DT_SHARD(0), DT_SHARD(1)), 2, tiny,
                      sizeof tiny);
  assert_string_equal(tiny, "[S(0");

  assert_true(mesh_placement_equal(DT_SHARD(1), DT_SHARD(1)));
  assert_false(mesh_placement_equal(DT_SHARD(0), DT_SHARD(1)));
  assert_true(mesh_placement_equal(DT_REPLICATE,
      (dt_placement){DT_PLACEMENT_REPLICATE, 3, DT_REDUCE_MAX}));
  assert_true(mesh_placement_equal(DT_PARTIAL(DT_REDUCE_MIN),
      (dt_placement){DT_PLACEMENT_PARTIAL, 5, DT_REDUCE_MIN}));
  assert_false(mesh_placement_equal(DT_PARTIAL(DT_REDUCE_SUM),
                                    DT_PARTIAL(DT_REDUCE_MAX)));
  assert_false(mesh_placement_equal(DT_SHARD(0), DT_REPLICATE));
  assert_false(mesh_placement_equal(DT_PARTIAL(DT_REDUCE_SUM), DT_REPLICATE));
}

static int setup(void **state) {
  (void)state;
  rt8 = dt_runtime_create(&(dt_runtime_options){.num_ranks = 8});
  return rt8 ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  dt_runtime_destroy(rt8);
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_init_shapes),
      cmocka_unit_test(test_explicit_ranks),
      cmocka_unit_test(test_names),
      cmocka_unit_test(test_sub),
      cmocka_unit_test(test_flatten),
      cmocka_unit_test(test_format),
      cmocka_unit_test(test_validation_create),
      cmocka_unit_test(test_validation_queries),
      cmocka_unit_test(test_refcounts),
      cmocka_unit_test(test_current_runtime_and_ids),
      cmocka_unit_test(test_shard_range),
      cmocka_unit_test(test_local_box),
      cmocka_unit_test(test_dim_group),
      cmocka_unit_test(test_check_placements),
      cmocka_unit_test(test_placement_strings),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
