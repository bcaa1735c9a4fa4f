/* Communication debugging: collectives attributed to
 * the function and labels that caused them; totals equal dt_comm_count's;
 * the table and the JSON word for word; errors; per thread. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "threads.h"

static dt_runtime *rt;
static dt_mesh *m;

static int setup(void **state) {
  (void)state;
  rt = dt_runtime_create(&(dt_runtime_options){.num_ranks = 4});
  m = dt_mesh_init(rt, NULL, DT_SHAPE(2, 2), (const char *const[]){"dp", "tp"});
  return rt && m ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  dt_mesh_release(m);
  dt_runtime_destroy(rt);
  return 0;
}

static dt_tensor *dones(dt_shape s, const dt_placement *pl, bool grad) {
  return dt_ones(s, &(dt_tensor_options){.mesh = m, .placements = pl, .requires_grad = grad});
}

/* a row-parallel layer's all-reduce under "layer1.mlp", the data-parallel
 * gradient reduction of dt_backward + dt_optimizer_step under no label */
static void program(char **table, char **json, dt_comm_counts *cc) {
  size_t tn, jn;
  FILE *t = open_memstream(table, &tn), *j = open_memstream(json, &jn);
  dt_tensor *x = dones(DT_SHAPE(4, 8), DT_PLACEMENTS(DT_SHARD(0), DT_SHARD(1)), false);
  dt_tensor *w[1] = {dones(DT_SHAPE(2, 8), DT_PLACEMENTS(DT_REPLICATE, DT_SHARD(1)), true)};
  dt_optimizer *opt = dt_sgd_create(w, 1, &(dt_sgd_options){.lr = 0.1});
  assert_int_equal(dt_comm_debug_begin(), DT_OK);
  dt_comm_count_begin();
  dt_comm_debug_label_push("layer1");
  dt_label_push("mlp");
  dt_tensor *y = dt_linear(x, w[0], NULL); /* [S(0), P(sum)] */
  dt_tensor *yr = dt_redistribute(y, NULL, DT_PLACEMENTS(DT_SHARD(0), DT_REPLICATE));
  dt_label_pop();
  dt_comm_debug_label_pop();
  dt_tensor *l = dt_sum(yr, NULL, 0, false);
  assert_int_equal(dt_backward(l), DT_OK);
  assert_int_equal(dt_optimizer_step(opt), DT_OK);
  *cc = dt_comm_count_end();
  assert_int_equal(dt_comm_debug_end(t, j), DT_OK);
  fclose(t);
  fclose(j);
  dt_optimizer_release(opt);
  TU_RELEASE(x, w[0], y, yr, l);
}

static void test_report(void **state) {
  (void)state;
  char *table, *json;
  dt_comm_counts cc;
  program(&table, &json, &cc);
  assert_string_equal(table,
    "label / function                 collective     mesh dim    count          bytes\n"
    "layer1.mlp                                                      1             64\n"
    "  dt_redistribute                all_reduce     tp              1             64\n"
    "(no label)                                                      1            128\n"
    "  dt_redistribute                all_reduce     dp              1            128\n"
    "total                                                           2            192\n");
  assert_string_equal(json,
    "{\"collectives\":[{\"label\":\"layer1.mlp\",\"function\":\"dt_redistribute\","
    "\"collective\":\"all_reduce\",\"mesh_dim\":\"tp\",\"count\":1,\"bytes\":64},"
    "{\"label\":\"\",\"function\":\"dt_redistribute\",\"collective\":\"all_reduce\","
    "\"mesh_dim\":\"dp\",\"count\":1,\"bytes\":128}],\"total\":{\"count\":2,\"bytes\":192}}\n");
  /* the same source as dt_comm_count */
  assert_int_equal(cc.all_reduce + cc.all_gather + cc.reduce_scatter + cc.all_to_all, 2);
  assert_int_equal(cc.bytes, 192); /* [2, 2] and [2, 4] float32 shards, 4 ranks */
  free(table);
  free(json);
}

static void test_errors(void **state) {
  (void)state;
  assert_int_equal(dt_comm_debug_end(NULL, NULL), DT_ERR_INVALID_ARGUMENT);
  assert_string_equal(dt_last_error(), "dt_comm_debug_end: communication debugging "
                      "is not on in this thread (call dt_comm_debug_begin first)");
  /* labels with quotes are escaped in the JSON */
  char *json;
  size_t n;
  FILE *j = open_memstream(&json, &n);
  assert_int_equal(dt_comm_debug_begin(), DT_OK);
  dt_label_push("a \"b\"");
  dt_tensor *x = dones(DT_SHAPE(4), DT_PLACEMENTS(DT_SHARD(0), DT_REPLICATE), false);
  dt_tensor *r = dt_redistribute(x, NULL, DT_PLACEMENTS(DT_REPLICATE, DT_REPLICATE));
  dt_label_pop();
  assert_int_equal(dt_comm_debug_end(NULL, j), DT_OK);
  fclose(j);
  assert_non_null(strstr(json, "\"label\":\"a \\\"b\\\"\",\"function\":\"dt_redistribute\","
                               "\"collective\":\"all_gather\",\"mesh_dim\":\"dp\""));
  free(json);
  TU_RELEASE(x, r);
}

/* per thread: four threads, each its own report of its own collectives */
static void body(void *arg, int i) {
  (void)arg;
  char *table;
  size_t n;
  FILE *t = open_memstream(&table, &n);
  TU_CHECK_TRUE(dt_comm_debug_begin() == DT_OK);
  dt_tensor *x = dones(DT_SHAPE(8), DT_PLACEMENTS(DT_SHARD(0), DT_SHARD(0)), false);
  dt_tensor *r = NULL;
  for (int k = 0; k <= i; k++) {
    dt_tensor_release(r);
    r = dt_redistribute(x, NULL, DT_PLACEMENTS(DT_REPLICATE, DT_SHARD(0)));
  }
  TU_CHECK_TRUE(dt_comm_debug_end(t, NULL) == DT_OK);
  fclose(t);
  /* [S(0), S(0)] -> [R, S(0)]: the planner gathers over both mesh dims */
  for (int d = 0; d < 2; d++) {
    char want[128];
    snprintf(want, sizeof want, "  %-30s %-14s %-8s %8d", "dt_redistribute", "all_gather",
             d ? "dp" : "tp", i + 1);
    TU_CHECK(strstr(table, want) != NULL, "thread %d: %s", i, table);
  }
  free(table);
  dt_tensor_release(x);
  dt_tensor_release(r);
}

static void test_threads(void **state) {
  (void)state;
  tu_run_threads(4, body, NULL);
  TU_ASSERT_NO_THREAD_FAILURES();
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_report),
    cmocka_unit_test(test_errors),
    cmocka_unit_test(test_threads),
  };
  tu_alarm(300);
  return cmocka_run_group_tests(tests, setup, teardown);
}
