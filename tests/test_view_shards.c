/* dt_view_shards (mesh/view_shards.c): a DTensor of another global shape
 * over the same shards. Checked against the host arrays the tensors were
 * made from (the reference is the row-major order itself):
 * - [16, 6] as [R, S(0)] on dp 2 x tp 4 viewed as [4, 24]: the full value
 *   is the same elements, every rank's local shard is its 24 contiguous
 *   values, and a redistribute of the view (S(1) on dp: the optimiser's
 *   contiguous pieces) holds the expected quarter-rows;
 * - a Partial(sum) tensor keeps its partial terms: its view reduces to the
 *   original's values;
 * - uneven chunks ([6, 4] on 4 ranks as [3, 8]: 2, 2, 2, 0 rows) are one
 *   range each and valid;
 * - the refusals: another element count, a strided shard (S(1)), Partial
 *   where t is not, bad placements, NULL and single-device arguments —
 *   each a status and a message naming dt_view_shards and the values;
 * - in-place writes into the view are refused; a write into t shows
 *   through the view (it shares t's storage), and the view outlives t. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "threads.h"
#include "dtorch/autograd.h"

static dt_runtime *rt;
static dt_mesh *mesh; /* dp 2 x tp 4 */

static dt_tensor *from(const double *v, dt_shape s, const dt_placement *pl) {
  dt_tensor *t = dt_from_host(v, s, &(dt_tensor_options){
      .dtype = DT_FLOAT64, .mesh = mesh, .placements = pl});
  assert_non_null(t);
  return t;
}

static void values_equal(dt_tensor *t, const double *want, int64_t n, const char *what) {
  double *v = tu_values(t);
  for (int64_t i = 0; i < n; i++)
    if (v[i] != want[i]) fail_msg("%s: element %lld is %.17g, want %.17g", what,
                                  (long long)i, v[i], want[i]);
  free(v);
}

static void test_rows_as_one_row(void **state) {
  (void)state;
  double v[16 * 6];
  for (int i = 0; i < 16 * 6; i++) v[i] = 0.5 * i - 7;
  dt_tensor *t = from(v, DT_SHAPE(16, 6), DT_PLACEMENTS(DT_REPLICATE, DT_SHARD(0)));
  dt_tensor *w = dt_view_shards(t, DT_SHAPE(4, 24), DT_PLACEMENTS(DT_REPLICATE, DT_SHARD(0)));
  assert_non_null(w);
  dt_shape s = dt_tensor_shape(w);
  assert_int_equal(s.ndim, 2);
  assert_int_equal(s.dims[0], 4);
  assert_int_equal(s.dims[1], 24);
  assert_false(dt_tensor_requires_grad(w));
  values_equal(w, v, 16 * 6, "the view");
  for (int r = 0; r < 8; r++) { /* rank r = dp * 4 + tp holds rows 4 tp .. 4 tp + 3 */
    double loc[24];
    assert_int_equal(dt_local_to_host(w, r, loc, sizeof loc), DT_OK);
    for (int i = 0; i < 24; i++)
      if (loc[i] != v[(r % 4) * 24 + i])
        fail_msg("rank %d: local %d is %g, want %g", r, i, loc[i], v[(r % 4) * 24 + i]);
  }
  /* the optimiser's layout: S(1) on dp, each dp rank half of its row */
  dt_tensor *q = dt_redistribute(w, NULL, DT_PLACEMENTS(DT_SHARD(1), DT_SHARD(0)));
  assert_non_null(q);
  for (int r = 0; r < 8; r++) {
    double loc[12];
    assert_int_equal(dt_local_to_host(q, r, loc, sizeof loc), DT_OK);
    for (int i = 0; i < 12; i++) {
      double want = v[(r % 4) * 24 + (r / 4) * 12 + i];
      if (loc[i] != want) fail_msg("S(1) rank %d: local %d is %g, want %g", r, i, loc[i], want);
    }
  }
  /* and back: the round trip is t */
  dt_tensor *back = dt_view_shards(w, DT_SHAPE(16, 6), DT_PLACEMENTS(DT_REPLICATE, DT_SHARD(0)));
  assert_non_null(back);
  values_equal(back, v, 16 * 6, "the round trip");
  TU_RELEASE(t, w, q, back);
}

static void test_partial_stays_partial(void **state) {
  (void)state;
  double v[8 * 6];
  for (int i = 0; i < 8 * 6; i++) v[i] = cos(0.3 * i);
  dt_tensor *t = from(v, DT_SHAPE(8, 6), DT_PLACEMENTS(DT_REPLICATE, DT_SHARD(0)));
  /* R -> P(sum) is local: dp rank 0 keeps the value, the other holds 0 */
  dt_tensor *p = dt_redistribute(t, NULL, DT_PLACEMENTS(DT_PARTIAL(DT_REDUCE_SUM), DT_SHARD(0)));
  assert_non_null(p);
  dt_tensor *w = dt_view_shards(p, DT_SHAPE(4, 12),
                                DT_PLACEMENTS(DT_PARTIAL(DT_REDUCE_SUM), DT_SHARD(0)));
  assert_non_null(w);
  assert_int_equal(dt_tensor_placement(w, 0).kind, DT_PLACEMENT_PARTIAL);
  dt_tensor *r = dt_redistribute(w, NULL, DT_PLACEMENTS(DT_REPLICATE, DT_SHARD(0)));
  assert_non_null(r);
  values_equal(r, v, 8 * 6, "the reduced view");
  /* Partial must stay Partial with the same op */
  dt_tensor *no = dt_view_shards(p, DT_SHAPE(4, 12), DT_PLACEMENTS(DT_REPLICATE, DT_SHARD(0)));
  assert_null(no);
  assert_int_equal(dt_last_status(), DT_ERR_PLACEMENT);
  assert_non_null(strstr(dt_last_error(), "placements[0] must be Partial"));
  no = dt_view_shards(p, DT_SHAPE(4, 12), DT_PLACEMENTS(DT_PARTIAL(DT_REDUCE_MAX), DT_SHARD(0)));
  assert_null(no);
  assert_int_equal(dt_last_status(), DT_ERR_PLACEMENT);
  TU_RELEASE(t, p, w, r);
}

static void test_uneven_chunks(void **state) {
  (void)state;
  dt_mesh *m4 = dt_mesh_create(rt, NULL, DT_SHAPE(4), (const int[]){0, 1, 2, 3}, NULL);
  assert_non_null(m4);
  double v[24];
  for (int i = 0; i < 24; i++) v[i] = i + 1;
  dt_tensor *t = dt_from_host(v, DT_SHAPE(6, 4), &(dt_tensor_options){
      .dtype = DT_FLOAT64, .mesh = m4, .placements = DT_PLACEMENTS(DT_SHARD(0))});
  assert_non_null(t);
  /* torch.chunk: rows 2, 2, 2, 0 under both */
  dt_tensor *w = dt_view_shards(t, DT_SHAPE(3, 8), DT_PLACEMENTS(DT_SHARD(0)));
  assert_non_null(w);
  values_equal(w, v, 24, "the uneven view");
  dt_shape l3 = dt_tensor_local_shape(w, 3);
  assert_int_equal(l3.dims[0], 0);
  TU_RELEASE(t, w);
  dt_mesh_release(m4);
}

static void test_refusals(void **state) {
  (void)state;
  double v[8 * 6] = {0};
  dt_tensor *t = from(v, DT_SHAPE(8, 6), DT_PLACEMENTS(DT_REPLICATE, DT_SHARD(0)));
  dt_tensor *cols = from(v, DT_SHAPE(8, 6), DT_PLACEMENTS(DT_REPLICATE, DT_SHARD(1)));
  dt_tensor *no = dt_view_shards(t, DT_SHAPE(4, 13), DT_PLACEMENTS(DT_REPLICATE, DT_SHARD(0)));
  assert_null(no);
  assert_int_equal(dt_last_status(), DT_ERR_SHAPE);
  assert_non_null(strstr(dt_last_error(), "dt_view_shards: shape [4, 13] does not hold "
                                          "t's 48 elements"));
  /* S(1) of [8, 6] on tp 4: rank 0 holds columns 0-1 of every row */
  no = dt_view_shards(cols, DT_SHAPE(4, 12), DT_PLACEMENTS(DT_REPLICATE, DT_SHARD(0)));
  assert_null(no);
  assert_int_equal(dt_last_status(), DT_ERR_PLACEMENT);
  assert_non_null(strstr(dt_last_error(), "rank 0's shard"));
  assert_non_null(strstr(dt_last_error(), "in pieces"));
  /* a contiguous shard at another offset: [8, 6] S(0) as [6, 8] S(0) */
  no = dt_view_shards(t, DT_SHAPE(6, 8), DT_PLACEMENTS(DT_REPLICATE, DT_SHARD(0)));
  assert_null(no);
  assert_int_equal(dt_last_status(), DT_ERR_PLACEMENT);
  no = dt_view_shards(t, DT_SHAPE(4, 12), DT_PLACEMENTS(DT_REPLICATE, DT_SHARD(2)));
  assert_null(no);
  assert_non_null(strstr(dt_last_error(), "dt_view_shards"));
  no = dt_view_shards(t, DT_SHAPE(4, 12), NULL);
  assert_null(no);
  assert_int_equal(dt_last_status(), DT_ERR_INVALID_ARGUMENT);
  no = dt_view_shards(NULL, DT_SHAPE(4, 12), DT_PLACEMENTS(DT_REPLICATE, DT_SHARD(0)));
  assert_null(no);
  assert_int_equal(dt_last_status(), DT_ERR_INVALID_ARGUMENT);
  dt_tensor *plain = dt_zeros(DT_SHAPE(8, 6), NULL);
  no = dt_view_shards(plain, DT_SHAPE(4, 12), DT_PLACEMENTS(DT_REPLICATE, DT_SHARD(0)));
  assert_null(no);
  assert_non_null(strstr(dt_last_error(), "single-device"));
  TU_RELEASE(t, cols, plain);
}

static void test_writes(void **state) {
  (void)state;
  double v[8 * 6], u[8 * 6];
  for (int i = 0; i < 8 * 6; i++) {
    v[i] = i;
    u[i] = -2.0 * i;
  }
  dt_tensor *t = from(v, DT_SHAPE(8, 6), DT_PLACEMENTS(DT_REPLICATE, DT_SHARD(0)));
  dt_tensor *w = dt_view_shards(t, DT_SHAPE(4, 12), DT_PLACEMENTS(DT_REPLICATE, DT_SHARD(0)));
  dt_tensor *src = from(u, DT_SHAPE(4, 12), DT_PLACEMENTS(DT_REPLICATE, DT_SHARD(0)));
  assert_non_null(w);
  assert_int_equal(dt_copy_(w, src), DT_ERR_UNSUPPORTED); /* refused: it would write t */
  dt_tensor *src2 = from(u, DT_SHAPE(8, 6), DT_PLACEMENTS(DT_REPLICATE, DT_SHARD(0)));
  assert_int_equal(dt_copy_(t, src2), DT_OK);
  dt_tensor_release(t); /* the view keeps the shards */
  values_equal(w, u, 8 * 6, "the view after a write into t");
  TU_RELEASE(w, src, src2);
}

int main(void) {
  rt = dt_runtime_create(&(dt_runtime_options){.num_ranks = 8});
  mesh = dt_mesh_init(rt, NULL, DT_SHAPE(2, 4), (const char *const[]){"dp", "tp"});
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_rows_as_one_row), cmocka_unit_test(test_partial_stays_partial),
      cmocka_unit_test(test_uneven_chunks), cmocka_unit_test(test_refusals),
      cmocka_unit_test(test_writes)};
  tu_alarm(120);
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  assert_int_equal(dt_live_tensors(), 0);
  dt_mesh_release(mesh);
  dt_runtime_destroy(rt);
  return rc;
}
