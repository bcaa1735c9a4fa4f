/* Bad input to creation, options, host transfer and pointwise ops: each
 * case checks the exact status, that the message names the function and
 * the argument or value at fault, and that nothing leaks. (View errors are
 * in test_errors_views.c; reductions and linalg have their own suites.) */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "support/testutil.h"

static void test_null_tensors(void **state) {
  (void)state;
  tu_leaks_begin_clear();
  dt_tensor *a = dt_ones(DT_SHAPE(2, 3), NULL);
  tu_expect_error(dt_add(a, NULL), DT_ERR_INVALID_ARGUMENT, "dt_add",
                  "b is NULL", NULL);
  tu_expect_error(dt_add(NULL, a), DT_ERR_INVALID_ARGUMENT, "dt_add",
                  "a is NULL", NULL);
  tu_expect_error(dt_mul_scalar(NULL, 2), DT_ERR_INVALID_ARGUMENT,
                  "dt_mul_scalar", "a is NULL", NULL);
  tu_expect_error(dt_exp(NULL), DT_ERR_INVALID_ARGUMENT, "dt_exp", "a", NULL);
  tu_expect_error(dt_where(a, NULL, a), DT_ERR_INVALID_ARGUMENT, "dt_where",
                  "a is NULL", NULL);
  tu_expect_error(dt_where(NULL, a, a), DT_ERR_INVALID_ARGUMENT, "dt_where",
                  "cond is NULL", NULL);
  tu_expect_error(dt_masked_fill(a, NULL, 0), DT_ERR_INVALID_ARGUMENT,
                  "dt_masked_fill", "mask is NULL", NULL);
  tu_expect_error(dt_clamp(NULL, 0, 1), DT_ERR_INVALID_ARGUMENT, "dt_clamp",
                  NULL);
  tu_expect_error(dt_cast(NULL, DT_INT32), DT_ERR_INVALID_ARGUMENT, "dt_cast",
                  NULL);
  tu_expect_error(dt_zeros_like(NULL), DT_ERR_INVALID_ARGUMENT,
                  "dt_zeros_like", "t is NULL", NULL);
  tu_expect_error(dt_transpose(NULL, 0, 1), DT_ERR_INVALID_ARGUMENT,
                  "dt_transpose", "a is NULL", NULL);
  /* queries on NULL give their kind's failed result (more below) */
  assert_int_equal(dt_tensor_ndim(NULL), -1);
  assert_int_equal(dt_tensor_numel(NULL), -1);
  assert_false(dt_tensor_shares_storage(a, NULL));
  dt_tensor_release(NULL);
  dt_tensor_release(a);
  tu_leaks_end();
}

/* a NULL argument that came from a failed call keeps that call's error */
static void test_null_propagation(void **state) {
  (void)state;
  tu_leaks_begin_clear();
  dt_tensor *a = dt_ones(DT_SHAPE(2, 3), NULL), *b = dt_ones(DT_SHAPE(4), NULL);
  tu_expect_error(dt_relu(dt_add(a, b)), DT_ERR_SHAPE, "dt_add", "[2, 3]",
                  "[4]", NULL);
  tu_expect_error(dt_neg(dt_exp(dt_mul(b, a))), DT_ERR_SHAPE, "dt_mul", NULL);
  tu_expect_error(dt_add(a, dt_view(a, DT_SHAPE(5))), DT_ERR_SHAPE, "dt_view",
                  "[5]", NULL);
  dt_tensor_release(a);
  dt_tensor_release(b);
  tu_leaks_end();
}

/* a NULL argument that did NOT come from the call just before gets its own
 * error: an old failure, followed by successes, is never blamed */
static void test_null_not_blamed_on_old_failure(void **state) {
  (void)state;
  tu_leaks_begin_clear();
  dt_tensor *a = dt_ones(DT_SHAPE(2, 3), NULL), *b = dt_ones(DT_SHAPE(4), NULL);
  assert_null(dt_add(a, b)); /* fails; its error is left set */
  assert_int_equal(dt_last_status(), DT_ERR_SHAPE);
  dt_tensor *ok = dt_relu(a); /* succeeds */
  assert_non_null(ok);
  dt_tensor *r = dt_add(ok, NULL);
  assert_null(r);
  assert_int_equal(dt_last_status(), DT_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(dt_last_error(), "dt_add: b is NULL"));
  /* and chaining still reports the call just before */
  assert_null(dt_relu(dt_add(a, b)));
  assert_int_equal(dt_last_status(), DT_ERR_SHAPE);
  /* an old failure before a successful DTensor factory is not blamed */
  dt_runtime *rt = dt_runtime_create(&(dt_runtime_options){.num_ranks = 2});
  dt_mesh *m = dt_mesh_init(rt, NULL, DT_SHAPE(2), NULL);
  assert_null(dt_add(a, b));
  dt_tensor *d = dt_ones(DT_SHAPE(4), &(dt_tensor_options){.mesh = m});
  assert_non_null(d);
  assert_null(dt_redistribute(NULL, m, DT_PLACEMENTS(DT_REPLICATE)));
  assert_int_equal(dt_last_status(), DT_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(dt_last_error(), "dt_redistribute: t is NULL"));
  dt_tensor_release(d);
  dt_mesh_release(m);
  dt_runtime_destroy(rt);
  dt_tensor_release(ok);
  dt_tensor_release(a);
  dt_tensor_release(b);
  dt_clear_error();
  tu_leaks_end();
}

/* sizes from user input are overflow-checked on every public path: host
 * copies of huge expanded views, DTensor factories, and the value range of
 * dt_full / dt_full_like on a mesh as on one device */
static void test_boundary_overflow(void **state) {
  (void)state;
  float buf[4];
  dt_tensor *one = dt_ones(DT_SHAPE(1), NULL);
  dt_tensor *big = dt_expand(one, DT_SHAPE((1LL << 62) + 1));
  assert_non_null(big);
  tu_expect_status(dt_to_host(big, buf, sizeof buf), DT_ERR_INVALID_ARGUMENT,
                   "dt_to_host", "larger than any host buffer", NULL);
  assert_null(dt_to_host_async(big, buf, sizeof buf));
  tu_expect_status(dt_last_status(), DT_ERR_INVALID_ARGUMENT,
                   "dt_to_host_async", NULL);
  dt_tensor *big2 = dt_expand(one, DT_SHAPE(1LL << 62)); /* 2^64 bytes */
  tu_expect_status(dt_to_host(big2, buf, sizeof buf), DT_ERR_INVALID_ARGUMENT,
                   "dt_to_host", NULL);
  dt_runtime *rt = dt_runtime_create(&(dt_runtime_options){.num_ranks = 2});
  dt_mesh *m = dt_mesh_init(rt, NULL, DT_SHAPE(2), NULL);
  dt_tensor_options f64 = {.dtype = DT_FLOAT64, .mesh = m};
  tu_expect_error(dt_ones(DT_SHAPE((1LL << 61) + 1), &f64),
                  DT_ERR_OUT_OF_MEMORY, "dt_ones", "overflows", NULL);
  dt_tensor_options f32 = {.dtype = DT_FLOAT32, .mesh = m};
  tu_expect_error(dt_zeros(DT_SHAPE(1LL << 62), &f32), DT_ERR_OUT_OF_MEMORY,
                  "dt_zeros", NULL);
  tu_expect_error(dt_from_host(buf, DT_SHAPE(1LL << 62), &f32),
                  DT_ERR_OUT_OF_MEMORY, "dt_from_host", NULL);
  dt_tensor_options i32 = {.dtype = DT_INT32, .mesh = m};
  tu_expect_error(dt_full(DT_SHAPE(4), 1e10, &i32), DT_ERR_INVALID_ARGUMENT,
                  "dt_full", "without overflow", NULL);
  dt_tensor_options u8 = {.dtype = DT_UINT8, .mesh = m};
  tu_expect_error(dt_full(DT_SHAPE(4), 300, &u8), DT_ERR_INVALID_ARGUMENT,
                  "dt_full", "300", NULL);
  dt_tensor_options i64 = {.dtype = DT_INT64, .mesh = m};
  tu_expect_error(dt_full(DT_SHAPE(4), NAN, &i64), DT_ERR_INVALID_ARGUMENT,
                  "dt_full", NULL);
  dt_tensor *d = dt_zeros(DT_SHAPE(4), &i32);
  assert_non_null(d);
  tu_expect_error(dt_full_like(d, 1e10), DT_ERR_INVALID_ARGUMENT,
                  "dt_full_like", NULL);
  dt_tensor_release(d);
  dt_mesh_release(m);
  dt_runtime_destroy(rt);
  dt_tensor_release(big2);
  dt_tensor_release(big);
  dt_tensor_release(one);
}

static void test_broadcast_mismatch(void **state) {
  (void)state;
  tu_leaks_begin_clear();
  dt_tensor *a = dt_ones(DT_SHAPE(2, 3), NULL),
            *b = dt_ones(DT_SHAPE(4, 2), NULL);
  dt_tensor *c = dt_ones(DT_SHAPE(5, 1, 3), NULL),
            *m = dt_ones(DT_SHAPE(7), &(dt_tensor_options){.dtype = DT_BOOL});
  tu_expect_error(dt_add(a, b), DT_ERR_SHAPE, "dt_add", "[2, 3]", "[4, 2]", NULL);
  tu_expect_error(dt_lt(b, c), DT_ERR_SHAPE, "dt_lt", "[4, 2]", "[5, 1, 3]",
                  NULL);
  tu_expect_error(dt_where(m, a, a), DT_ERR_SHAPE, "dt_where", "[7]", NULL);
  tu_expect_error(dt_masked_fill(a, m, 1), DT_ERR_SHAPE, "dt_masked_fill",
                  "[7]", "[2, 3]", NULL);
  /* a mask may grow a, as in PyTorch: [2, 3] masked by [4, 2, 3] gives
   * [4, 2, 3] (test_semantics.c checks the values) */
  dt_tensor *big =
      dt_ones(DT_SHAPE(4, 2, 3), &(dt_tensor_options){.dtype = DT_BOOL});
  dt_tensor *grown = dt_masked_fill(a, big, 1);
  assert_non_null(grown);
  dt_shape gs = dt_tensor_shape(grown);
  assert_true(gs.ndim == 3 && gs.dims[0] == 4 && gs.dims[1] == 2 && gs.dims[2] == 3);
  TU_RELEASE(a, b, c, m, big, grown);
  tu_leaks_end();
}

static void test_bad_creation(void **state) {
  (void)state;
  tu_leaks_begin_clear();
  dt_tensor_options bad = {.dtype = (dt_dtype)99};
  tu_expect_error(dt_zeros(DT_SHAPE(2), &bad), DT_ERR_DTYPE, "dt_zeros",
                  "dtype", "99", NULL);
  tu_expect_error(
      dt_full(DT_SHAPE(2), 1, &(dt_tensor_options){.dtype = (dt_dtype)-1}),
      DT_ERR_DTYPE, "dt_full", "-1", NULL);
  tu_expect_error(dt_zeros(DT_SHAPE(2, -3), NULL), DT_ERR_SHAPE, "dt_zeros",
                  "-3", "dim 1", NULL);
  tu_expect_error(dt_empty(DT_SHAPE(-1), NULL), DT_ERR_SHAPE, "dt_empty", "-1",
                  NULL);
  tu_expect_error(dt_ones((dt_shape){.ndim = 9}, NULL), DT_ERR_SHAPE, "dt_ones",
                  "9 dims", NULL);
  tu_expect_error(dt_ones((dt_shape){.ndim = -1}, NULL), DT_ERR_SHAPE, "dt_ones",
                  "-1 dims", NULL);
  tu_expect_error(dt_rand(DT_SHAPE(2), &(dt_tensor_options){.dtype = DT_INT32}),
                  DT_ERR_DTYPE, "dt_rand", "int32", NULL);
  tu_expect_error(dt_randn(DT_SHAPE(2), &(dt_tensor_options){.dtype = DT_BOOL}),
                  DT_ERR_DTYPE, "dt_randn", "bool", NULL);
  tu_expect_error(dt_randn(DT_SHAPE(2, -2), NULL), DT_ERR_SHAPE, "dt_randn",
                  "-2", NULL);
  tu_leaks_end();
}

static void test_bad_arange(void **state) {
  (void)state;
  tu_leaks_begin_clear();
  tu_expect_error(dt_arange(0, 5, 0, NULL), DT_ERR_INVALID_ARGUMENT,
                  "dt_arange", "step 0", NULL);
  tu_expect_error(dt_arange(0, 5, -1, NULL), DT_ERR_INVALID_ARGUMENT,
                  "dt_arange", "step -1", "end 5", NULL);
  tu_expect_error(dt_arange(5, 0, 1, NULL), DT_ERR_INVALID_ARGUMENT,
                  "dt_arange", "start 5", NULL);
  tu_expect_error(dt_arange(0, NAN, 1, NULL), DT_ERR_INVALID_ARGUMENT,
                  "dt_arange", "finite", NULL);
  tu_expect_error(dt_arange(0, INFINITY, 1, NULL), DT_ERR_INVALID_ARGUMENT,
                  "dt_arange", "finite", NULL);
  tu_expect_error(dt_arange(0, 1e300, 1e-300, NULL), DT_ERR_INVALID_ARGUMENT,
                  "dt_arange", "too many", NULL);
  tu_expect_error(dt_arange(0, 5, 1, &(dt_tensor_options){.dtype = (dt_dtype)8}),
                  DT_ERR_DTYPE, "dt_arange", "8", NULL);
  tu_leaks_end();
}

static void test_bad_options(void **state) {
  (void)state;
  tu_leaks_begin_clear();
  int dummy;
  dt_mesh *mesh = (dt_mesh *)&dummy; /* only checked for NULL */
  tu_expect_error(dt_zeros(DT_SHAPE(2), &(dt_tensor_options){.device = "cpu",
                                                             .mesh = mesh}),
                  DT_ERR_INVALID_ARGUMENT, "dt_zeros", "device", "mesh",
                  "exclusive", NULL);
  tu_expect_error(dt_ones(DT_SHAPE(2), &(dt_tensor_options){
                              .placements = DT_PLACEMENTS(DT_SHARD(0))}),
                  DT_ERR_PLACEMENT, "dt_ones", "placements", "mesh", NULL);
  tu_expect_error(dt_zeros(DT_SHAPE(2), &(dt_tensor_options){.device = "cuda"}),
                  DT_ERR_DEVICE, "dt_zeros", "\"cuda\"", NULL);
  tu_expect_error(dt_zeros(DT_SHAPE(2), &(dt_tensor_options){.device = "cuda:1"}),
                  DT_ERR_DEVICE, "dt_zeros", "cuda:1", NULL);
  tu_expect_error(dt_randn(DT_SHAPE(2), &(dt_tensor_options){.device = "tpu"}),
                  DT_ERR_INVALID_ARGUMENT, "dt_randn", "\"tpu\"", "unknown",
                  NULL);
  tu_expect_error(dt_zeros(DT_SHAPE(2), &(dt_tensor_options){
                              .dtype = DT_INT64, .requires_grad = true}),
                  DT_ERR_DTYPE, "dt_zeros", "grad", "int64", NULL);
  tu_expect_error(dt_arange(0, 3, 1, &(dt_tensor_options){
                               .dtype = DT_BOOL, .requires_grad = true}),
                  DT_ERR_DTYPE, "dt_arange", "grad", "bool", NULL);
  float host[2] = {1, 2};
  tu_expect_error(
      dt_from_host(host, DT_SHAPE(2), &(dt_tensor_options){.device = "gpu"}),
      DT_ERR_INVALID_ARGUMENT, "dt_from_host", "\"gpu\"", NULL);
  /* a good explicit device is fine */
  dt_tensor *ok = dt_zeros(DT_SHAPE(2), &(dt_tensor_options){.device = "cpu"});
  assert_non_null(ok);
  dt_tensor_release(ok);
  tu_leaks_end();
}

static void test_bad_host_transfer(void **state) {
  (void)state;
  tu_leaks_begin_clear();
  dt_tensor *a = dt_ones(DT_SHAPE(2, 3), NULL);
  float buf[6];
  tu_expect_status(dt_to_host(a, buf, 8), DT_ERR_INVALID_ARGUMENT, "dt_to_host",
                   "dst_bytes 8", "24 bytes", NULL);
  tu_expect_status(dt_to_host(a, buf, 23), DT_ERR_INVALID_ARGUMENT, "23", "24",
                   NULL);
  tu_expect_status(dt_to_host(a, NULL, 24), DT_ERR_INVALID_ARGUMENT,
                   "dt_to_host", "dst is NULL", NULL);
  tu_expect_status(dt_to_host(NULL, buf, sizeof buf), DT_ERR_INVALID_ARGUMENT,
                   "dt_to_host", "t is NULL", NULL);
  tu_expect_error(dt_from_host(NULL, DT_SHAPE(2, 3), NULL),
                  DT_ERR_INVALID_ARGUMENT, "dt_from_host", "data is NULL",
                  NULL);
  tu_expect_error(dt_from_host(buf, DT_SHAPE(2, -3), NULL), DT_ERR_SHAPE,
                  "dt_from_host", "-3", NULL);
  tu_expect_error(dt_from_host(buf, DT_SHAPE(6),
                               &(dt_tensor_options){.dtype = (dt_dtype)42}),
                  DT_ERR_DTYPE, "dt_from_host", "42", NULL);
  /* empty transfers need no buffer */
  dt_tensor *e = dt_from_host(NULL, DT_SHAPE(0, 3), NULL);
  assert_non_null(e);
  assert_int_equal(dt_to_host(e, NULL, 0), DT_OK);
  dt_tensor_release(e);
  assert_int_equal(dt_to_host(a, buf, sizeof buf + 4),
                   DT_OK); /* larger is fine */
  dt_tensor_release(a);
  tu_leaks_end();
}

static void test_bad_pointwise_dtypes(void **state) {
  (void)state;
  tu_leaks_begin_clear();
  dt_tensor_options ob = {.dtype = DT_BOOL}, oi = {.dtype = DT_INT32};
  dt_tensor *p = dt_ones(DT_SHAPE(3), &ob), *q = dt_zeros(DT_SHAPE(3), &ob);
  dt_tensor *i = dt_ones(DT_SHAPE(3), &oi), *f = dt_ones(DT_SHAPE(3), NULL);
  tu_expect_error(dt_sub(p, q), DT_ERR_DTYPE, "dt_sub", "bool", NULL);
  tu_expect_error(dt_sub_scalar(p, 1), DT_ERR_DTYPE, "dt_sub_scalar", "bool",
                  NULL);
  tu_expect_error(dt_neg(p), DT_ERR_DTYPE, "dt_neg", "bool", "dt_logical_not",
                  NULL);
  tu_expect_error(dt_masked_fill(f, f, 0), DT_ERR_DTYPE, "dt_masked_fill",
                  "mask", "float32", NULL);
  tu_expect_error(dt_where(i, f, f), DT_ERR_DTYPE, "dt_where", "cond", "int32",
                  NULL);
  tu_expect_error(dt_pow_scalar(i, -2), DT_ERR_INVALID_ARGUMENT,
                  "dt_pow_scalar", "int32", "-2", NULL);
  tu_expect_error(dt_cast(f, (dt_dtype)99), DT_ERR_DTYPE, "dt_cast", "99", NULL);
  tu_expect_error(dt_cast(f, DT_DTYPE_COUNT), DT_ERR_DTYPE, "dt_cast", "8", NULL);
  /* what is allowed next to those */
  dt_tensor *ok[] = {dt_pow_scalar(i, 2), dt_pow_scalar(f, -2),
                     dt_logical_not(p), dt_add(p, q), dt_where(p, f, i)};
  for (size_t k = 0; k < sizeof ok / sizeof *ok; k++) {
    if (!ok[k]) fail_msg("case %zu: %s", k, dt_last_error());
    dt_tensor_release(ok[k]);
  }
  TU_RELEASE(p, q, i, f);
  tu_leaks_end();
}

/* numel * element size must not wrap: [2^31, 2^31] float32 is 2^64 bytes,
 * which wraps to 0 in size_t; the factory must fail, not hand back a
 * tensor over a 0-byte storage */
static void test_size_overflow(void **state) {
  (void)state;
  tu_leaks_begin_clear();
  dt_tensor *t = dt_empty(DT_SHAPE(1LL << 31, 1LL << 31), NULL);
  if (t) {
    dt_tensor_release(t);
    fail_msg("dt_empty([2^31, 2^31]) float32 succeeded (2^64 bytes)");
  }
  dt_status st = dt_last_status();
  assert_true(st == DT_ERR_SHAPE || st == DT_ERR_OUT_OF_MEMORY ||
              st == DT_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(dt_last_error(), "dt_empty"));
  dt_clear_error();
  tu_leaks_end();
}

/* A size 0 does not hide an overflow of the other sizes: [0, 2^62, 4] has
 * no elements, but its contiguous strides (4 * 2^62 for dim 0) do not fit
 * int64. Regression: the factories accepted it, and computing the strides
 * was a signed overflow (undefined behaviour; UBSan aborted). */
static void test_zero_size_overflow(void **state) {
  (void)state;
  tu_leaks_begin_clear();
  tu_expect_error(dt_zeros(DT_SHAPE(0, INT64_C(1) << 62, 4), NULL),
                  DT_ERR_SHAPE, "dt_zeros", "[0, 4611686018427387904, 4]",
                  "2^63", NULL);
  tu_expect_error(dt_empty(DT_SHAPE(INT64_C(1) << 32, 0, INT64_C(1) << 32),
                           NULL),
                  DT_ERR_SHAPE, "dt_empty", "2^63", NULL);
  /* up to the limit a size-0 shape is fine */
  dt_tensor *t = dt_zeros(DT_SHAPE(0, INT64_C(1) << 62, 1), NULL);
  if (!t) fail_msg("dt_zeros([0, 2^62, 1]): %s", dt_last_error());
  assert_int_equal(dt_tensor_numel(t), 0);
  /* nor does broadcasting make such a shape: [0, 2^62, 1] with [4] */
  dt_tensor *f = dt_zeros(DT_SHAPE(4), NULL);
  tu_expect_error(dt_add(t, f), DT_ERR_SHAPE, "dt_add",
                  "[0, 4611686018427387904, 1]", "[4]", "2^63", NULL);
  dt_tensor_release(f);
  dt_tensor_release(t);
  tu_leaks_end();
}

/* Every query's failed result on a NULL handle is its kind's, as
 * dtorch.h's conventions list them (written out here, not taken from the
 * code), and the failure is reported: DT_ERR_INVALID_ARGUMENT with a
 * message naming the function. */
#define QUERY_FAILS(expr, failed, fn)                                        \
  do {                                                                      \
    dt_clear_error();                                                       \
    __typeof__(expr) r = (expr);                                            \
    if (!(failed)) fail_msg("%s: not its kind's failed result", #expr);     \
    tu_expect_status(dt_last_status(), DT_ERR_INVALID_ARGUMENT, fn, NULL);  \
  } while (0)

static void test_query_failures(void **state) {
  (void)state;
  char buf[64];
  /* counts, sizes, indices, lengths: -1 */
  QUERY_FAILS(dt_runtime_num_ranks(NULL), r == -1, "dt_runtime_num_ranks");
  QUERY_FAILS(dt_runtime_queue_depth(NULL, 0), r == -1,
              "dt_runtime_queue_depth");
  QUERY_FAILS(dt_mesh_ndim(NULL), r == -1, "dt_mesh_ndim");
  QUERY_FAILS(dt_mesh_size(NULL), r == -1, "dt_mesh_size");
  QUERY_FAILS(dt_mesh_rank(NULL, (int64_t[]){0}), r == -1, "dt_mesh_rank");
  QUERY_FAILS(dt_mesh_dim_index(NULL, "dp"), r == -1, "dt_mesh_dim_index");
  QUERY_FAILS(dt_mesh_format(NULL, buf, sizeof buf), r == -1,
              "dt_mesh_format");
  QUERY_FAILS(dt_tensor_numel(NULL), r == -1, "dt_tensor_numel");
  QUERY_FAILS(dt_tensor_ndim(NULL), r == -1, "dt_tensor_ndim");
  QUERY_FAILS(dt_tensor_storage_offset(NULL), r == -1,
              "dt_tensor_storage_offset");
  QUERY_FAILS(dt_split(NULL, 1, 0, NULL, 0), r == -1, "dt_split");
  QUERY_FAILS(dt_chunk(NULL, 1, 0, NULL, 0), r == -1, "dt_chunk");
  QUERY_FAILS(dt_op_call_num_inputs(NULL), r == -1, "dt_op_call_num_inputs");
  QUERY_FAILS(dt_op_call_num_outputs(NULL), r == -1,
              "dt_op_call_num_outputs");
  QUERY_FAILS(dt_op_call_format(NULL, buf, sizeof buf), r == -1,
              "dt_op_call_format");
  QUERY_FAILS(dt_op_counter_get(NULL, "add"), r == -1, "dt_op_counter_get");
  QUERY_FAILS(dt_op_counter_total(NULL), r == -1, "dt_op_counter_total");
  QUERY_FAILS(dt_op_counter_format(NULL, buf, sizeof buf), r == -1,
              "dt_op_counter_format");
  QUERY_FAILS(dt_future_fd(NULL), r == -1, "dt_future_fd");
  QUERY_FAILS(dt_optimizer_steps(NULL), r == -1, "dt_optimizer_steps");
  QUERY_FAILS(dt_fault_count(NULL), r == -1, "dt_fault_count");
  /* pointers: NULL */
  QUERY_FAILS(dt_mesh_runtime(NULL), r == NULL, "dt_mesh_runtime");
  QUERY_FAILS(dt_mesh_dim_name(NULL, 0), r == NULL, "dt_mesh_dim_name");
  QUERY_FAILS(dt_tensor_mesh(NULL), r == NULL, "dt_tensor_mesh");
  QUERY_FAILS(dt_tensor_grad_fn(NULL), r == NULL, "dt_tensor_grad_fn");
  QUERY_FAILS(dt_grad(NULL), r == NULL, "dt_grad");
  QUERY_FAILS(dt_op_call_name(NULL), r == NULL, "dt_op_call_name");
  QUERY_FAILS(dt_op_call_input(NULL, 0), r == NULL, "dt_op_call_input");
  QUERY_FAILS(dt_op_call_output(NULL, 0), r == NULL, "dt_op_call_output");
  QUERY_FAILS(dt_future_error(NULL), r == NULL, "dt_future_error");
  /* bool: false */
  QUERY_FAILS(dt_tensor_is_contiguous(NULL), !r, "dt_tensor_is_contiguous");
  QUERY_FAILS(dt_tensor_requires_grad(NULL), !r, "dt_tensor_requires_grad");
  QUERY_FAILS(dt_tensor_shares_storage(NULL, NULL), !r,
              "dt_tensor_shares_storage");
  QUERY_FAILS(dt_future_ready(NULL), !r, "dt_future_ready");
  /* dt_shape: ndim -1; dt_dtype: DT_DTYPE_COUNT; dt_placement: invalid */
  QUERY_FAILS(dt_mesh_shape(NULL), r.ndim == -1, "dt_mesh_shape");
  QUERY_FAILS(dt_tensor_shape(NULL), r.ndim == -1, "dt_tensor_shape");
  QUERY_FAILS(dt_tensor_strides(NULL), r.ndim == -1, "dt_tensor_strides");
  QUERY_FAILS(dt_tensor_local_shape(NULL, 0), r.ndim == -1,
              "dt_tensor_local_shape");
  QUERY_FAILS(dt_tensor_dtype(NULL), r == DT_DTYPE_COUNT, "dt_tensor_dtype");
  QUERY_FAILS(dt_tensor_placement(NULL, 0), r.kind == DT_PLACEMENT_INVALID,
              "dt_tensor_placement");
  /* dt_status: the status */
  QUERY_FAILS(dt_future_status(NULL), r == DT_ERR_INVALID_ARGUMENT,
              "dt_future_status");
  QUERY_FAILS(dt_runtime_memory(NULL, 0, &(dt_memory_stats){0}),
              r == DT_ERR_INVALID_ARGUMENT, "dt_runtime_memory");
}

/* void functions report their misuse too; and a query keeps the error of
 * the failed call that gave it its NULL (chaining) */
static void test_void_misuse_and_chained_queries(void **state) {
  (void)state;
  tu_leaks_begin_clear();
  dt_clear_error();
  dt_zero_grad(NULL);
  tu_expect_status(dt_last_status(), DT_ERR_INVALID_ARGUMENT, "dt_zero_grad",
                   NULL);
  dt_clear_error();
  dt_optimizer_zero_grad(NULL);
  tu_expect_status(dt_last_status(), DT_ERR_INVALID_ARGUMENT,
                   "dt_optimizer_zero_grad", NULL);
  dt_clear_error();
  dt_label_push(NULL);
  tu_expect_status(dt_last_status(), DT_ERR_INVALID_ARGUMENT, "dt_label_push",
                   NULL);
  dt_tensor *a = dt_ones(DT_SHAPE(2, 3), NULL), *b = dt_ones(DT_SHAPE(4), NULL);
  dt_clear_error();
  assert_int_equal(dt_tensor_ndim(dt_add(a, b)), -1);
  tu_expect_status(dt_last_status(), DT_ERR_SHAPE, "dt_add", NULL);
  assert_int_equal(dt_tensor_shape(dt_mul(a, b)).ndim, -1);
  tu_expect_status(dt_last_status(), DT_ERR_SHAPE, "dt_mul", NULL);
  /* a single-device tensor's placement is Replicate, not a failure */
  dt_clear_error();
  assert_int_equal(dt_tensor_placement(a, 0).kind, DT_PLACEMENT_REPLICATE);
  assert_int_equal(dt_last_status(), DT_OK);
  /* a DTensor's mesh_dim outside its mesh: the invalid kind */
  dt_mesh *m = dt_mesh_init(NULL, "cpu", DT_SHAPE(2), NULL);
  dt_tensor *d = dt_zeros(DT_SHAPE(4), &(dt_tensor_options){
                                           .mesh = m,
                                           .placements = DT_PLACEMENTS(DT_SHARD(0))});
  assert_non_null(d);
  dt_clear_error();
  assert_int_equal(dt_tensor_placement(d, 5).kind, DT_PLACEMENT_INVALID);
  tu_expect_status(dt_last_status(), DT_ERR_INVALID_ARGUMENT,
                   "dt_tensor_placement", "mesh_dim 5", NULL);
  assert_int_equal(dt_tensor_placement(d, 0).kind, DT_PLACEMENT_SHARD);
  TU_RELEASE(a, b, d);
  dt_mesh_release(m);
  tu_leaks_end();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_null_tensors),
      cmocka_unit_test(test_null_propagation),
      cmocka_unit_test(test_null_not_blamed_on_old_failure),
      cmocka_unit_test(test_boundary_overflow),
      cmocka_unit_test(test_broadcast_mismatch),
      cmocka_unit_test(test_bad_creation),
      cmocka_unit_test(test_bad_arange),
      cmocka_unit_test(test_bad_options),
      cmocka_unit_test(test_bad_host_transfer),
      cmocka_unit_test(test_bad_pointwise_dtypes),
      cmocka_unit_test(test_size_overflow),
      cmocka_unit_test(test_zero_size_overflow),
      cmocka_unit_test(test_query_failures),
      cmocka_unit_test(test_void_misuse_and_chained_queries),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
