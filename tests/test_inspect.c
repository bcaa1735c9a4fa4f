/* Inspection (docs/inspect.md): dt_visualize_sharding word for word for
 * each kind of placement (1-D and 2-D shards, replicas, uneven and empty
 * shards, Partial, ASCII, a single-device tensor), dt_tensor_describe
 * word for word (offsets and bytes worked out by hand), the memory
 * report's numbers against tensors of known size, every error with its
 * message, and each function called from four threads at once while a
 * fifth issues ops, and from a future callback. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* open_memstream */
#endif
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "threads.h"

static dt_runtime *rt8;
static dt_mesh *tp4, *grid22, *grid24;

static int setup(void **state) {
  (void)state;
  rt8 = dt_runtime_create(&(dt_runtime_options){.num_ranks = 8});
  if (!rt8 || dt_runtime_set_current(rt8) != DT_OK) return -1;
  tp4 = dt_mesh_init(rt8, NULL, DT_SHAPE(4), (const char *[]){"tp"});
  grid22 = dt_mesh_init(rt8, NULL, DT_SHAPE(2, 2),
                        (const char *[]){"dp", "tp"});
  grid24 = dt_mesh_init(rt8, NULL, DT_SHAPE(2, 4),
                        (const char *[]){"dp", "tp"});
  return tp4 && grid22 && grid24 ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  dt_mesh_release(tp4);
  dt_mesh_release(grid22);
  dt_mesh_release(grid24);
  dt_runtime_set_current(NULL);
  dt_runtime_destroy(rt8);
  return 0;
}

static dt_tensor *dzeros(dt_mesh *m, dt_shape s, const dt_placement *pl) {
  dt_tensor *t = dt_zeros(s, &(dt_tensor_options){.mesh = m,
                                                  .placements = pl});
  if (!t) fail_msg("dt_zeros: %s", dt_last_error());
  return t;
}

/* ---- capturing what a function writes */
typedef enum { SHOW_PICTURE, SHOW_DESCRIBE, SHOW_MEMORY } show_kind;

/* the text written by one call (malloc'd), and its status in *st */
static char *capture(show_kind k, const dt_tensor *t,
                     const dt_visualize_options *o, dt_status *st) {
  char *buf = NULL;
  size_t len = 0;
  *st = DT_ERR_IO;
  FILE *f = open_memstream(&buf, &len);
  if (!f) return NULL;
  switch (k) {
  case SHOW_PICTURE:
    *st = o ? dt_visualize_sharding_ex(t, f, o) : dt_visualize_sharding(t, f);
    break;
  case SHOW_DESCRIBE: *st = dt_tensor_describe(t, f); break;
  case SHOW_MEMORY: *st = dt_memory_report(rt8, f); break;
  }
  fclose(f);
  return buf;
}

/* the call must succeed and write exactly `want` */
static void expect_text(show_kind k, const dt_tensor *t,
                        const dt_visualize_options *o, const char *want) {
  dt_status st;
  char *got = capture(k, t, o, &st);
  assert_non_null(got);
  if (st != DT_OK || strcmp(got, want) != 0) {
    fprintf(stderr, "status %s (%s)\n--- got:\n%s--- want:\n%s---\n",
            dt_status_name(st), dt_last_error(), got, want);
    free(got);
    fail_msg("output differs");
  }
  free(got);
}

/* ---- pictures */
static void test_picture_1d_shard(void **state) {
  (void)state;
  dt_tensor *t = dzeros(tp4, DT_SHAPE(8), DT_PLACEMENTS(DT_SHARD(0)));
  /* four blocks of 2: equal columns of 18 (80 columns at most) */
  expect_text(SHOW_PICTURE, t, NULL,
      "┌──────────────────┬──────────────────┬──────────────────┬──────────────────┐\n"
      "│        0         │        1         │        2         │        3         │\n"
      "└──────────────────┴──────────────────┴──────────────────┴──────────────────┘\n"
      "float32[8] on mesh (tp=4), placements [S(0)]\n");
  dt_tensor_release(t);
}

static void test_picture_2d_grid(void **state) {
  (void)state;
  dt_tensor *t = dzeros(grid22, DT_SHAPE(4, 4),
                        DT_PLACEMENTS(DT_SHARD(0), DT_SHARD(1)));
  /* rows split by dp, columns by tp: rank 2 * dp + tp in each block */
  expect_text(SHOW_PICTURE, t, NULL,
      "┌─────────┬─────────┐\n"
      "│         │         │\n"
      "│    0    │    1    │\n"
      "│         │         │\n"
      "├─────────┼─────────┤\n"
      "│         │         │\n"
      "│    2    │    3    │\n"
      "│         │         │\n"
      "└─────────┴─────────┘\n"
      "float32[4, 4] on mesh (dp=2, tp=2), placements [S(0), S(1)]\n");
  dt_tensor_release(t);
}

static void test_picture_replicas(void **state) {
  (void)state;
  dt_tensor *t = dzeros(grid24, DT_SHAPE(8, 4),
                        DT_PLACEMENTS(DT_REPLICATE, DT_SHARD(0)));
  /* tp splits the rows in four; dp's two rows of ranks hold copies */
  expect_text(SHOW_PICTURE, t, NULL,
      "┌─────────┐\n"
      "│   0,4   │\n"
      "│         │\n"
      "├─────────┤\n"
      "│   1,5   │\n"
      "│         │\n"
      "├─────────┤\n"
      "│   2,6   │\n"
      "│         │\n"
      "├─────────┤\n"
      "│   3,7   │\n"
      "│         │\n"
      "└─────────┘\n"
      "float32[8, 4] on mesh (dp=2, tp=4), placements [R, S(0)]\n");
  dt_tensor *r = dzeros(grid24, DT_SHAPE(6), DT_PLACEMENTS(DT_REPLICATE,
                                                          DT_REPLICATE));
  expect_text(SHOW_PICTURE, r, &(dt_visualize_options){.max_width = 12},
      "┌──────────┐\n"
      "│   0-7    │\n"
      "└──────────┘\n"
      "float32[6] on mesh (dp=2, tp=4), placements [R, R]\n");
  TU_RELEASE(t, r);
}

static void test_picture_uneven(void **state) {
  (void)state;
  /* torch.chunk: 10 = 3 + 3 + 3 + 1, columns 22, 22, 22 and 7 */
  dt_tensor *a = dzeros(tp4, DT_SHAPE(10), DT_PLACEMENTS(DT_SHARD(0)));
  expect_text(SHOW_PICTURE, a, NULL,
      "┌──────────────────────┬──────────────────────┬──────────────────────┬───────┐\n"
      "│          0           │          1           │          2           │   3   │\n"
      "└──────────────────────┴──────────────────────┴──────────────────────┴───────┘\n"
      "float32[10] on mesh (tp=4), placements [S(0)]\n");
  /* 10 rows: bands of 2, 2, 2 and 1 lines */
  dt_tensor *b = dzeros(tp4, DT_SHAPE(10, 6), DT_PLACEMENTS(DT_SHARD(0)));
  expect_text(SHOW_PICTURE, b, NULL,
      "┌───────────┐\n"
      "│     0     │\n"
      "│           │\n"
      "├───────────┤\n"
      "│     1     │\n"
      "│           │\n"
      "├───────────┤\n"
      "│     2     │\n"
      "│           │\n"
      "├───────────┤\n"
      "│     3     │\n"
      "└───────────┘\n"
      "float32[10, 6] on mesh (tp=4), placements [S(0)]\n");
  /* 5 = 2 + 2 + 1 + 0: rank 3's shard is empty */
  dt_tensor *c = dzeros(tp4, DT_SHAPE(5, 8), DT_PLACEMENTS(DT_SHARD(0)));
  expect_text(SHOW_PICTURE, c, NULL,
      "┌─────────────────────────────┐\n"
      "│              0              │\n"
      "│                             │\n"
      "├─────────────────────────────┤\n"
      "│              1              │\n"
      "│                             │\n"
      "├─────────────────────────────┤\n"
      "│              2              │\n"
      "└─────────────────────────────┘\n"
      "float32[5, 8] on mesh (tp=4), placements [S(0)]\n"
      "rank 3 holds an empty shard\n");
  TU_RELEASE(a, b, c);
}

static void test_picture_partial(void **state) {
  (void)state;
  dt_tensor *t = dzeros(grid22, DT_SHAPE(4, 6),
                        DT_PLACEMENTS(DT_SHARD(0), DT_PARTIAL(DT_REDUCE_SUM)));
  expect_text(SHOW_PICTURE, t, NULL,
      "┌───────────────────────────┐\n"
      "│                           │\n"
      "│            0,1            │\n"
      "│                           │\n"
      "├───────────────────────────┤\n"
      "│                           │\n"
      "│            2,3            │\n"
      "│                           │\n"
      "└───────────────────────────┘\n"
      "float32[4, 6] on mesh (dp=2, tp=2), placements [S(0), P(sum)]\n"
      "P(sum) over mesh dim tp: every rank holds a full-shape partial value;\n"
      "  the value of each cell is the sum over the ranks along tp (e.g. 0,1)\n");
  /* an unnamed mesh: dims go by number */
  dt_mesh *m = dt_mesh_init(rt8, NULL, DT_SHAPE(2), NULL);
  dt_tensor *a = dzeros(m, DT_SHAPE(3), DT_PLACEMENTS(DT_PARTIAL(DT_REDUCE_AVG)));
  expect_text(SHOW_PICTURE, a, &(dt_visualize_options){.max_width = 12},
      "┌──────────┐\n"
      "│   0,1    │\n"
      "└──────────┘\n"
      "float32[3] on mesh (2), placements [P(avg)]\n"
      "P(avg) over mesh dim 0: every rank holds a full-shape partial value;\n"
      "  the value of each cell is the average over the ranks along mesh dim 0 "
      "(e.g. 0,1)\n");
  TU_RELEASE(t, a);
  dt_mesh_release(m);
}

static void test_picture_ascii(void **state) {
  (void)state;
  dt_tensor *t = dzeros(tp4, DT_SHAPE(8), DT_PLACEMENTS(DT_SHARD(0)));
  /* 30 columns: 25 inside the borders, 6 per block */
  expect_text(SHOW_PICTURE, t,
              &(dt_visualize_options){.ascii = true, .max_width = 30},
      "+------+------+------+------+\n"
      "|  0   |  1   |  2   |  3   |\n"
      "+------+------+------+------+\n"
      "float32[8] on mesh (tp=4), placements [S(0)]\n");
  /* narrower than the labels: each cell keeps its label and a space */
  expect_text(SHOW_PICTURE, t,
              &(dt_visualize_options){.ascii = true, .max_width = 5},
      "+---+---+---+---+\n"
      "| 0 | 1 | 2 | 3 |\n"
      "+---+---+---+---+\n"
      "float32[8] on mesh (tp=4), placements [S(0)]\n");
  dt_tensor_release(t);
}

static void test_picture_single_device(void **state) {
  (void)state;
  dt_tensor *t = dt_zeros(DT_SHAPE(6), &(dt_tensor_options){
                                           .dtype = DT_INT64,
                                           .device = tu_dev(2)});
  assert_non_null(t);
  expect_text(SHOW_PICTURE, t, &(dt_visualize_options){.max_width = 24},
      "┌──────────────────────┐\n"
      "│        cpu:2         │\n"
      "└──────────────────────┘\n"
      "int64[6] on cpu:2 (a single-device tensor)\n");
  dt_tensor_release(t);
}

/* ---- describe */
static void test_describe_dtensor(void **state) {
  (void)state;
  /* 10 x 6 float32 = 240 bytes: 3 rows (72 bytes) on ranks 0-2, 1 on 3 */
  dt_tensor *a = dzeros(tp4, DT_SHAPE(10, 6), DT_PLACEMENTS(DT_SHARD(0)));
  expect_text(SHOW_DESCRIBE, a, NULL,
      "DTensor float32[10, 6]  requires_grad: false  grad_fn: none\n"
      "mesh: DeviceMesh('cpu', [0, 1, 2, 3], mesh_dim_names=('tp',))\n"
      "placements: [S(0)]\n"
      "rank  coords  local shape  global offset  bytes\n"
      "   0  (0)     [3, 6]       [0, 0]            72\n"
      "   1  (1)     [3, 6]       [3, 0]            72\n"
      "   2  (2)     [3, 6]       [6, 0]            72\n"
      "   3  (3)     [1, 6]       [9, 0]            24\n"
      "total: 240 bytes on 4 ranks; the global tensor: 240 bytes "
      "(replication x1.00)\n");
  /* 8 x 4 float64 = 256 bytes, each quarter on two ranks: x2 */
  dt_tensor *w = dt_zeros(DT_SHAPE(8, 4), &(dt_tensor_options){
      .dtype = DT_FLOAT64, .mesh = grid24, .requires_grad = true,
      .placements = DT_PLACEMENTS(DT_REPLICATE, DT_SHARD(0))});
  assert_non_null(w);
  dt_tensor *y = dt_relu(w);
  assert_non_null(y);
  expect_text(SHOW_DESCRIBE, y, NULL,
      "DTensor float64[8, 4]  requires_grad: true  grad_fn: relu\n"
      "mesh: DeviceMesh('cpu', [[0, 1, 2, 3], [4, 5, 6, 7]], "
      "mesh_dim_names=('dp', 'tp'))\n"
      "placements: [R, S(0)]\n"
      "rank  coords  local shape  global offset  bytes\n"
      "   0  (0, 0)  [2, 4]       [0, 0]            64\n"
      "   1  (0, 1)  [2, 4]       [2, 0]            64\n"
      "   2  (0, 2)  [2, 4]       [4, 0]            64\n"
      "   3  (0, 3)  [2, 4]       [6, 0]            64\n"
      "   4  (1, 0)  [2, 4]       [0, 0]            64\n"
      "   5  (1, 1)  [2, 4]       [2, 0]            64\n"
      "   6  (1, 2)  [2, 4]       [4, 0]            64\n"
      "   7  (1, 3)  [2, 4]       [6, 0]            64\n"
      "total: 512 bytes on 8 ranks; the global tensor: 256 bytes "
      "(replication x2.00)\n");
  TU_RELEASE(a, w, y);
}

static void test_describe_partial(void **state) {
  (void)state;
  /* every rank holds a full 2 x 3 int32 (24 bytes) of its dp half */
  dt_tensor *p = dt_zeros(DT_SHAPE(4, 3), &(dt_tensor_options){
      .dtype = DT_INT32, .mesh = grid22,
      .placements = DT_PLACEMENTS(DT_SHARD(0), DT_PARTIAL(DT_REDUCE_MAX))});
  assert_non_null(p);
  expect_text(SHOW_DESCRIBE, p, NULL,
      "DTensor int32[4, 3]  requires_grad: false  grad_fn: none\n"
      "mesh: DeviceMesh('cpu', [[0, 1], [2, 3]], "
      "mesh_dim_names=('dp', 'tp'))\n"
      "placements: [S(0), P(max)]\n"
      "rank  coords  local shape  global offset  bytes\n"
      "   0  (0, 0)  [2, 3]       [0, 0]            24\n"
      "   1  (0, 1)  [2, 3]       [0, 0]            24\n"
      "   2  (1, 0)  [2, 3]       [2, 0]            24\n"
      "   3  (1, 1)  [2, 3]       [2, 0]            24\n"
      "total: 96 bytes on 4 ranks; the global tensor: 48 bytes "
      "(replication x2.00)\n"
      "P(max) over mesh dim tp: every rank holds a full-shape partial value;\n"
      "  the global value is the maximum over the ranks along tp (e.g. 0,1)\n");
  dt_tensor_release(p);
}

static void test_describe_single_device(void **state) {
  (void)state;
  dt_tensor *t = dt_zeros(DT_SHAPE(4, 8), &(dt_tensor_options){
                                              .device = tu_dev(3)});
  assert_non_null(t);
  expect_text(SHOW_DESCRIBE, t, NULL,
      "tensor float32[4, 8]  requires_grad: false  grad_fn: none\n"
      "device: cpu:3\n"
      "strides: [8, 1]  storage offset: 0  contiguous: yes\n"
      "bytes: 128 (its storage: 128)\n");
  /* columns 2..7 of the transpose: a view at offset 2 * 8 */
  dt_tensor *tr = dt_transpose(t, 0, 1);
  dt_tensor *v = dt_slice(tr, 0, 2, 8, 1);
  assert_non_null(v);
  expect_text(SHOW_DESCRIBE, v, NULL,
      "tensor float32[6, 4]  requires_grad: false  grad_fn: none\n"
      "device: cpu:3\n"
      "strides: [1, 8]  storage offset: 2  contiguous: no\n"
      "bytes: 96 (its storage: 128)\n");
  TU_RELEASE(t, tr, v);
}

/* ---- memory report */
/* the report's line for `rank` (malloc'd) */
static char *line_of(const char *text, int rank) {
  char head[16];
  int n = snprintf(head, sizeof head, "%4d  ", rank);
  for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
    if (strncmp(p, head, (size_t)n) == 0) {
      size_t len = strcspn(p, "\n");
      return strndup(p, len);
    }
  fail_msg("no line for rank %d in:\n%s", rank, text);
  return NULL;
}

static void test_memory_report(void **state) {
  (void)state;
  dt_runtime *rt = dt_runtime_create(&(dt_runtime_options){
      .num_ranks = 4, .device_memory = 64 << 20});
  assert_non_null(rt);
  /* 1 MiB on rank 2 (a factory uses this thread's runtime), and four
   * 1 KiB shards of a DTensor */
  dt_runtime_set_current(rt);
  dt_tensor *big = dt_zeros(DT_SHAPE(256, 1024), &(dt_tensor_options){
                                                   .device = tu_dev(2)});
  dt_runtime_set_current(rt8);
  dt_mesh *m = dt_mesh_init(rt, NULL, DT_SHAPE(4), NULL);
  dt_tensor *d = dt_zeros(DT_SHAPE(1024), &(dt_tensor_options){
      .mesh = m, .placements = DT_PLACEMENTS(DT_SHARD(0))});
  assert_non_null(big);
  assert_non_null(d);
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  assert_int_equal(dt_memory_report(rt, f), DT_OK);
  fclose(f);
  assert_non_null(strstr(buf, "memory of 4 ranks (capacity per rank: 64.0 MiB)\n"
                              "rank"));
  char *r2 = line_of(buf, 2), *r1 = line_of(buf, 1);
  /* rank 2: 1 MiB + 1 KiB in use, two live blocks, the largest first */
  assert_string_equal(r2, "   2  1.0 MiB  1.0 MiB     0 B            2");
  assert_string_equal(r1, "   1  1.0 KiB  1.0 KiB     0 B            1");
  assert_non_null(strstr(buf, "all ranks: 1.0 MiB in use"));
  /* what each block holds: size, local shape, the op, the placements */
  assert_non_null(strstr(buf, "\n  rank 2: 1.0 MiB float32[256, 1024] dt_zeros, "
                              "1.0 KiB float32[256] dt_zeros [S(0)]\n"));
  assert_non_null(strstr(buf, "\n  rank 1: 1.0 KiB float32[256] dt_zeros [S(0)]\n"));
  free(r1);
  free(r2);
  free(buf);
  /* released: rank 2's megabyte goes to the cache, the peak stays */
  dt_tensor_release(big);
  dt_tensor_release(d);
  assert_int_equal(dt_runtime_synchronize(rt), DT_OK);
  buf = NULL;
  f = open_memstream(&buf, &len);
  assert_int_equal(dt_memory_report(rt, f), DT_OK);
  fclose(f);
  r2 = line_of(buf, 2);
  assert_string_equal(r2, "   2     0 B  1.0 MiB  1.0 MiB            0");
  free(r2);
  free(buf);
  dt_mesh_release(m);
  dt_runtime_destroy(rt);
}

/* an out-of-memory error names the largest live blocks of its rank */
static void test_oom_names_largest(void **state) {
  (void)state;
  dt_runtime *rt = dt_runtime_create(&(dt_runtime_options){
      .num_ranks = 2, .device_memory = 3 << 19}); /* 1.5 MiB per rank */
  dt_runtime_set_current(rt);
  dt_mesh *m = dt_mesh_init(rt, NULL, DT_SHAPE(2), NULL);
  dt_tensor *a = dt_ones(DT_SHAPE(512, 512), NULL); /* 1 MiB on rank 0 */
  dt_tensor *d = dt_ones(DT_SHAPE(8, 16), &(dt_tensor_options){
      .mesh = m, .placements = DT_PLACEMENTS(DT_SHARD(1))});
  dt_tensor *b = dt_add(a, a);                       /* another MiB */
  assert_non_null(b);
  float *x = malloc(1 << 20);
  tu_expect_status(dt_to_host(b, x, 1 << 20), DT_ERR_OUT_OF_MEMORY,
                   "dt_add: rank 0: out of device memory: cannot allocate 1048576 "
                   "bytes (1048832 of 1572864 bytes in use, 524032 free; largest "
                   "live: 1.0 MiB float32[512, 512] dt_ones, 256 B float32[8, 8] "
                   "dt_ones [S(1)])", NULL);
  free(x);
  TU_RELEASE(a, b, d);
  dt_mesh_release(m);
  dt_runtime_set_current(rt8);
  dt_runtime_destroy(rt);
}

/* ---- errors */
static void test_errors(void **state) {
  (void)state;
  dt_tensor *v = dzeros(tp4, DT_SHAPE(4), DT_PLACEMENTS(DT_SHARD(0)));
  tu_expect_status(dt_visualize_sharding(NULL, stdout),
                   DT_ERR_INVALID_ARGUMENT, "dt_visualize_sharding: t is NULL",
                   NULL);
  tu_expect_status(dt_visualize_sharding(v, NULL), DT_ERR_INVALID_ARGUMENT,
                   "dt_visualize_sharding: out is NULL", NULL);
  tu_expect_status(dt_visualize_sharding_ex(v, stdout,
                       &(dt_visualize_options){.max_width = -3}),
                   DT_ERR_INVALID_ARGUMENT, "dt_visualize_sharding_ex: "
                   "options.max_width -3 is negative", NULL);
  dt_tensor *s = dt_zeros(DT_SHAPE(), NULL);
  tu_expect_status(dt_visualize_sharding(s, stdout), DT_ERR_INVALID_ARGUMENT,
                   "dt_visualize_sharding: t has 0 dims (shape []); only 1-D "
                   "and 2-D tensors can be drawn", NULL);
  dt_tensor *c = dzeros(tp4, DT_SHAPE(2, 3, 4), DT_PLACEMENTS(DT_SHARD(2)));
  tu_expect_status(dt_visualize_sharding_ex(c, stdout, NULL),
                   DT_ERR_INVALID_ARGUMENT, "dt_visualize_sharding_ex: t has 3 "
                   "dims (shape [2, 3, 4]); only 1-D and 2-D tensors can be "
                   "drawn; dt_tensor_describe lists the shards", NULL);
  tu_expect_status(dt_tensor_describe(NULL, stdout), DT_ERR_INVALID_ARGUMENT,
                   "dt_tensor_describe: t is NULL", NULL);
  tu_expect_status(dt_tensor_describe(v, NULL), DT_ERR_INVALID_ARGUMENT,
                   "dt_tensor_describe: out is NULL", NULL);
  tu_expect_status(dt_memory_report(NULL, stdout), DT_ERR_INVALID_ARGUMENT,
                   "dt_memory_report: rt is NULL", NULL);
  tu_expect_status(dt_memory_report(rt8, NULL), DT_ERR_INVALID_ARGUMENT,
                   "dt_memory_report: out is NULL", NULL);
  /* a stream that cannot be written */
  FILE *ro = fopen("/dev/null", "r");
  assert_non_null(ro);
  tu_expect_status(dt_visualize_sharding(v, ro), DT_ERR_IO,
                   "dt_visualize_sharding: writing to out failed", NULL);
  tu_expect_status(dt_tensor_describe(c, ro), DT_ERR_IO,
                   "dt_tensor_describe: writing to out failed", NULL);
  tu_expect_status(dt_memory_report(rt8, ro), DT_ERR_IO,
                   "dt_memory_report: writing to out failed", NULL);
  fclose(ro);
  /* describe takes any number of dims */
  dt_status st;
  char *text = capture(SHOW_DESCRIBE, c, NULL, &st);
  assert_int_equal(st, DT_OK);
  assert_non_null(strstr(text, "   3  (3)     [2, 3, 1]    [0, 0, 3]  "));
  free(text);
  TU_RELEASE(v, s, c);
}

/* ---- concurrency: four inspecting threads, one issuing ops */
typedef struct conc {
  dt_tensor *x;
  char *picture, *table;   /* what one thread alone writes */
} conc;

static void inspect_body(void *arg, int i) {
  conc *c = arg;
  if (i == 4) { /* ops on the same runtime and tensor meanwhile */
    for (int k = 0; k < 200; k++) {
      dt_tensor *y = dt_add(c->x, c->x);
      TU_CHECK(y != NULL, "add: %s", dt_last_error());
      dt_tensor_release(y);
    }
    return;
  }
  for (int k = 0; k < 30; k++) {
    dt_status st;
    char *p = capture(SHOW_PICTURE, c->x, NULL, &st);
    TU_CHECK(st == DT_OK && p && strcmp(p, c->picture) == 0,
             "thread %d picture: %s", i, p ? p : "(none)");
    free(p);
    p = capture(SHOW_DESCRIBE, c->x, NULL, &st);
    TU_CHECK(st == DT_OK && p && strcmp(p, c->table) == 0,
             "thread %d describe: %s", i, p ? p : "(none)");
    free(p);
    p = capture(SHOW_MEMORY, NULL, NULL, &st);
    TU_CHECK(st == DT_OK && p && strstr(p, "memory of 8 ranks"),
             "thread %d memory: %s", i, dt_last_error());
    free(p);
  }
}

static void test_concurrent_callers(void **state) {
  (void)state;
  conc c = {.x = dzeros(grid24, DT_SHAPE(8, 16),
                        DT_PLACEMENTS(DT_SHARD(1), DT_SHARD(0)))};
  dt_status st;
  c.picture = capture(SHOW_PICTURE, c.x, NULL, &st);
  assert_int_equal(st, DT_OK);
  c.table = capture(SHOW_DESCRIBE, c.x, NULL, &st);
  assert_int_equal(st, DT_OK);
  tu_run_threads(5, inspect_body, &c);
  TU_ASSERT_NO_THREAD_FAILURES();
  free(c.picture);
  free(c.table);
  dt_tensor_release(c.x);
}

/* ---- from a future callback (dtorch's completion thread) */
typedef struct cb_state {
  dt_tensor *x;
  _Atomic int done;
  int ok;
} cb_state;

static void on_ready(dt_future *f, dt_status status, void *user) {
  (void)f;
  cb_state *s = user;
  dt_status a, b, c;
  char *p = capture(SHOW_PICTURE, s->x, NULL, &a);
  char *d = capture(SHOW_DESCRIBE, s->x, NULL, &b);
  char *m = capture(SHOW_MEMORY, NULL, NULL, &c);
  s->ok = status == DT_OK && a == DT_OK && b == DT_OK && c == DT_OK &&
          p && strstr(p, "placements [S(0)]") && d &&
          strstr(d, "   3  (3)     [2]          [6]                8\n") && m &&
          strstr(m, "memory of 8 ranks");
  free(p);
  free(d);
  free(m);
  atomic_store(&s->done, 1);
}

static void test_from_callback(void **state) {
  (void)state;
  cb_state s = {.x = dzeros(tp4, DT_SHAPE(8), DT_PLACEMENTS(DT_SHARD(0)))};
  float host[8];
  dt_future *f = dt_to_host_async(s.x, host, sizeof host);
  assert_non_null(f);
  assert_int_equal(dt_future_then(f, on_ready, &s), DT_OK);
  while (!atomic_load(&s.done)) tu_sleep_ns(100000);
  assert_true(s.ok);
  dt_future_release(f);
  dt_tensor_release(s.x);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_picture_1d_shard),
      cmocka_unit_test(test_picture_2d_grid),
      cmocka_unit_test(test_picture_replicas),
      cmocka_unit_test(test_picture_uneven),
      cmocka_unit_test(test_picture_partial),
      cmocka_unit_test(test_picture_ascii),
      cmocka_unit_test(test_picture_single_device),
      cmocka_unit_test(test_describe_dtensor),
      cmocka_unit_test(test_describe_partial),
      cmocka_unit_test(test_describe_single_device),
      cmocka_unit_test(test_memory_report),
    cmocka_unit_test(test_oom_names_largest),
      cmocka_unit_test(test_errors),
      cmocka_unit_test(test_concurrent_callers),
      cmocka_unit_test(test_from_callback),
  };
  tu_alarm(300);
  return cmocka_run_group_tests(tests, setup, teardown);
}
