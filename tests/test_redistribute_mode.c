/* This thread's redistribution mode (dtorch.h, dt_redistribute_mode_set):
 * AUTO lets an op on a strict runtime insert its collective, EXPLICIT
 * refuses it on an auto runtime, DEFAULT follows the runtime; the mode is
 * per thread, a bad value is refused, and the result of an op that runs
 * under AUTO is the one device's. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

/* a + b with a Shard(0) and b Shard(1): one of them needs an all_to_all */
static dt_tensor *mixed_add(dt_mesh *m, dt_tensor **one) {
  double v[16];
  for (int i = 0; i < 16; i++) v[i] = i;
  float f[16];
  for (int i = 0; i < 16; i++) f[i] = (float)v[i];
  dt_tensor_options oa = {.mesh = m, .placements = DT_PLACEMENTS(DT_SHARD(0))};
  dt_tensor_options ob = {.mesh = m, .placements = DT_PLACEMENTS(DT_SHARD(1))};
  dt_tensor *a = dt_from_host(f, DT_SHAPE(4, 4), &oa), *b = dt_from_host(f, DT_SHAPE(4, 4), &ob);
  assert_non_null(a);
  assert_non_null(b);
  dt_clear_error();
  dt_tensor *o = dt_add(a, b);
  if (one) {
    dt_tensor *x = tu_tensor(v, DT_SHAPE(4, 4), DT_FLOAT32);
    *one = dt_add(x, x);
    dt_tensor_release(x);
  }
  dt_tensor_release(a);
  dt_tensor_release(b);
  return o;
}

static void test_modes_over_the_runtime(void **state) {
  (void)state;
  for (int rt_auto = 0; rt_auto < 2; rt_auto++) {
    dt_runtime *rt = dt_runtime_create(&(dt_runtime_options){.num_ranks = 2,
                                                            .auto_redistribute = rt_auto});
    dt_mesh *m = dt_mesh_init(rt, "cpu", DT_SHAPE(2), NULL);
    assert_non_null(m);
    assert_int_equal(dt_redistribute_mode_get(), DT_REDISTRIBUTE_DEFAULT);
    const dt_redistribute_mode modes[3] = {DT_REDISTRIBUTE_DEFAULT, DT_REDISTRIBUTE_AUTO,
                                           DT_REDISTRIBUTE_EXPLICIT};
    for (int k = 0; k < 3; k++) {
      assert_int_equal(dt_redistribute_mode_set(modes[k]), DT_OK);
      assert_int_equal(dt_redistribute_mode_get(), modes[k]);
      bool runs = modes[k] == DT_REDISTRIBUTE_AUTO ||
                  (modes[k] == DT_REDISTRIBUTE_DEFAULT && rt_auto);
      dt_tensor *ref = NULL;
      dt_comm_count_begin();
      dt_tensor *o = mixed_add(m, &ref);
      dt_comm_counts n = dt_comm_count_end();
      if (runs) {
        if (!o) fail_msg("runtime auto=%d mode %d: %s", rt_auto, k, dt_last_error());
        assert_true(n.all_to_all + n.all_gather >= 1);
        double *got = tu_values(o), *want = tu_values(ref);
        tu_assert_close(got, want, 16, 0, 0, "a + b redistributed");
        free(got);
        free(want);
      } else {
        tu_expect_error(o, DT_ERR_PLACEMENT, "dt_add", "cheapest fix", NULL);
      }
      dt_tensor_release(o);
      dt_tensor_release(ref);
    }
    /* a redistribution the caller asks for runs in every mode */
    assert_int_equal(dt_redistribute_mode_set(DT_REDISTRIBUTE_EXPLICIT), DT_OK);
    dt_tensor *s = dt_ones(DT_SHAPE(4, 4), &(dt_tensor_options){.mesh = m,
        .placements = DT_PLACEMENTS(DT_SHARD(0))});
    dt_tensor *r = dt_redistribute(s, NULL, DT_PLACEMENTS(DT_REPLICATE));
    assert_non_null(r);
    dt_tensor_release(r);
    dt_tensor_release(s);
    assert_int_equal(dt_redistribute_mode_set(DT_REDISTRIBUTE_DEFAULT), DT_OK);
    dt_mesh_release(m);
    dt_runtime_destroy(rt);
  }
}

static void *other_thread(void *arg) {
  *(dt_redistribute_mode *)arg = dt_redistribute_mode_get();
  return NULL;
}

static void test_mode_is_per_thread_and_checked(void **state) {
  (void)state;
  assert_int_equal(dt_redistribute_mode_set(DT_REDISTRIBUTE_AUTO), DT_OK);
  dt_redistribute_mode seen = DT_REDISTRIBUTE_EXPLICIT;
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, other_thread, &seen), 0);
  pthread_join(t, NULL);
  assert_int_equal(seen, DT_REDISTRIBUTE_DEFAULT);
  tu_expect_status(dt_redistribute_mode_set((dt_redistribute_mode)3),
                   DT_ERR_INVALID_ARGUMENT, "dt_redistribute_mode_set", "mode 3", NULL);
  tu_expect_status(dt_redistribute_mode_set((dt_redistribute_mode)-1),
                   DT_ERR_INVALID_ARGUMENT, "mode -1", NULL);
  assert_int_equal(dt_redistribute_mode_get(), DT_REDISTRIBUTE_AUTO); /* kept */
  assert_int_equal(dt_redistribute_mode_set(DT_REDISTRIBUTE_DEFAULT), DT_OK);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_modes_over_the_runtime),
      cmocka_unit_test(test_mode_is_per_thread_and_checked),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
