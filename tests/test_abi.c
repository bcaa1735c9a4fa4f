/* The 1.x ABI of the public structs and names (docs/abi.md): every struct
 * but dt_shape / dt_placement ends in zero reserved words of a size fixed
 * for the major version (the figures below are the layouts of 1.0 on
 * LP64, written out by hand: a field added outside the reserved space, or
 * reserved space that shrinks without a field taking it, fails here); a
 * non-zero reserved word is refused, naming the function and the word;
 * structs the library fills have their reserved words zeroed; the alias
 * names behave as the names they stand for, and stay real functions. */
#include <stddef.h>
#include <string.h>
#include <unistd.h>

#include "support/testutil.h"

#define SIZE(T, n) assert_int_equal(sizeof(T), (n))
#define RESERVED_AT(T, off, words)                                          \
  do {                                                                      \
    assert_int_equal(offsetof(T, reserved), (off));                         \
    assert_int_equal(sizeof(((T *)0)->reserved), (words) * 8);              \
    assert_int_equal(offsetof(T, reserved) + (words) * 8, sizeof(T));       \
  } while (0)

static void test_layouts(void **state) {
  (void)state;
  if (sizeof(void *) != 8) skip();  /* the figures are LP64's */
  SIZE(dt_shape, 72);
  SIZE(dt_placement, 12);
  RESERVED_AT(dt_runtime_options, 112, 15);
  assert_int_equal(offsetof(dt_runtime_options, launcher), 104);
  SIZE(dt_runtime_options, 232);
  RESERVED_AT(dt_tensor_options, 40, 8);
  RESERVED_AT(dt_memory_stats, 24, 5);
  RESERVED_AT(dt_comm_counts, 56, 9);
  RESERVED_AT(dt_cache_stats, 32, 4);
  assert_int_equal(offsetof(dt_cache_stats, evictions), 24);
  RESERVED_AT(dt_load_options, 40, 8);
  RESERVED_AT(dt_safetensors_entry, 112, 4);
  RESERVED_AT(dt_safetensors_info, 40, 4);
  RESERVED_AT(dt_backward_options, 16, 4);
  RESERVED_AT(dt_sgd_options, 32, 4);
  RESERVED_AT(dt_adamw_options, 40, 4);
  RESERVED_AT(dt_shadow_report, 1056, 8);
  RESERVED_AT(dt_visualize_options, 8, 4);
  RESERVED_AT(dt_spmd_ctx, 24, 4);
  RESERVED_AT(dt_group, 32, 4);
  RESERVED_AT(dt_dry_run_stats, 72, 8);
  RESERVED_AT(dt_fault, 24, 4);
}

/* the announced next field of dt_runtime_options (a process launcher, a
 * pointer) is carved from reserved[0]: it fits in one word, and the word
 * is aligned for it, so no padding moves what follows */
static void test_runtime_options_room(void **state) {
  (void)state;
  assert_true(sizeof(const char *) <= sizeof(uint64_t));
  assert_int_equal(offsetof(dt_runtime_options, reserved) % _Alignof(void *), 0);
  assert_true(sizeof(((dt_runtime_options *)0)->reserved) >= 8 * 8);
}

static void test_reserved_refused(void **state) {
  (void)state;
  tu_leaks_begin_clear();
  dt_runtime_options ro = {.num_ranks = 2};
  ro.reserved[3] = 7;
  dt_clear_error();
  assert_null(dt_runtime_create(&ro));
  tu_expect_status(dt_last_status(), DT_ERR_INVALID_ARGUMENT,
                   "dt_runtime_create", "dt_runtime_options.reserved[3]",
                   "0x7", NULL);

  dt_tensor_options to = {.dtype = DT_FLOAT32};
  to.reserved[0] = 1;
  tu_expect_error(dt_zeros(DT_SHAPE(2), &to), DT_ERR_INVALID_ARGUMENT,
                  "dt_zeros", "options.reserved[0]", NULL);
  tu_expect_error(dt_from_host((float[]){1, 2}, DT_SHAPE(2), &to),
                  DT_ERR_INVALID_ARGUMENT, "dt_from_host", "reserved[0]",
                  NULL);
  /* zero reserved words (designated initialisers) are today's behaviour */
  to.reserved[0] = 0;
  dt_tensor *z = dt_zeros(DT_SHAPE(2), &to);
  assert_non_null(z);

  dt_load_options lo = {0};
  lo.reserved[7] = 0xff;
  dt_clear_error();
  assert_null(dt_load_safetensors("/nonexistent.safetensors", "w", &lo));
  tu_expect_status(dt_last_status(), DT_ERR_INVALID_ARGUMENT,
                   "dt_load_safetensors", "options.reserved[7]", NULL);

  dt_tensor *p[1] = {dt_ones(DT_SHAPE(2), &(dt_tensor_options){
                                              .requires_grad = true})};
  dt_sgd_options so = {.lr = 0.1};
  so.reserved[1] = 1;
  dt_clear_error();
  assert_null(dt_sgd_create(p, 1, &so));
  tu_expect_status(dt_last_status(), DT_ERR_INVALID_ARGUMENT, "dt_sgd_create",
                   "options.reserved[1]", NULL);
  dt_adamw_options ao = {0};
  ao.reserved[0] = 1;
  dt_clear_error();
  assert_null(dt_adamw_create(p, 1, &ao));
  tu_expect_status(dt_last_status(), DT_ERR_INVALID_ARGUMENT,
                   "dt_adamw_create", "options.reserved[0]", NULL);

  dt_tensor *loss = dt_sum(p[0], NULL, 0, false);
  dt_backward_options bo = {0};
  bo.reserved[2] = 1;
  tu_expect_status(dt_backward_ex(loss, &bo), DT_ERR_INVALID_ARGUMENT,
                   "dt_backward_ex", "options.reserved[2]", NULL);

  dt_visualize_options vo = {0};
  vo.reserved[0] = 1;
  tu_expect_status(dt_visualize_sharding_ex(z, stderr, &vo),
                   DT_ERR_INVALID_ARGUMENT, "dt_visualize_sharding_ex",
                   "options.reserved[0]", NULL);

  dt_fault f = {.kind = DT_FAULT_OOM, .rank = 0, .after = 1};
  f.reserved[0] = 1;
  tu_expect_status(dt_fault_inject(dt_runtime_default(), &f),
                   DT_ERR_INVALID_ARGUMENT, "dt_fault_inject",
                   "dt_fault.reserved[0]", NULL);
  assert_int_equal(dt_fault_count(dt_runtime_default()), 0);
  TU_RELEASE(z, p[0], loss);
  tu_leaks_end();
}

/* a group with a non-zero reserved word fails on every rank at once (no
 * rank enters the collective, so none waits for the others) */
static dt_status group_fn(dt_spmd_ctx *ctx) {
  (void)ctx;
  dt_group g = {.mesh = NULL, .ranks = (const int[]){0, 1}, .nranks = 2};
  g.reserved[1] = 9;
  dt_tensor *t = dt_ones(DT_SHAPE(2), NULL);
  dt_clear_error();
  dt_tensor *r = dt_all_reduce(t, DT_REDUCE_SUM, &g);
  dt_status st = r == NULL && dt_last_status() == DT_ERR_INVALID_ARGUMENT &&
                 strstr(dt_last_error(), "dt_all_reduce: dt_group.reserved[1]")
                     ? DT_OK : DT_ERR_INTERNAL;
  if (dt_barrier(&g) != DT_ERR_INVALID_ARGUMENT) st = DT_ERR_INTERNAL;
  dt_tensor_release(r);
  dt_tensor_release(t);
  return st;
}

static void test_group_reserved_refused(void **state) {
  (void)state;
  /* the collective watchdog turns a rank that did enter into a failure */
  dt_runtime *rt = dt_runtime_create(&(dt_runtime_options){
      .num_ranks = 2, .collective_timeout_ms = 10000});
  assert_non_null(rt);
  assert_int_equal(dt_spmd_run(rt, group_fn, NULL), DT_OK);
  dt_runtime_destroy(rt);
}

/* what the library fills has zero reserved words, whatever was there */
static void test_filled_structs_zero_reserved(void **state) {
  (void)state;
  dt_memory_stats ms;
  memset(&ms, 0xa5, sizeof ms);
  assert_int_equal(dt_runtime_memory(dt_runtime_default(), 0, &ms), DT_OK);
  for (size_t i = 0; i < sizeof ms.reserved / 8; i++)
    assert_int_equal(ms.reserved[i], 0);
  assert_true(ms.used >= 0 && ms.peak >= ms.used);

  dt_comm_count_begin();
  dt_comm_counts cc = dt_comm_count_end();
  for (size_t i = 0; i < sizeof cc.reserved / 8; i++)
    assert_int_equal(cc.reserved[i], 0);

  dt_sharding_cache_clear();
  dt_cache_stats cs = dt_sharding_cache_stats();
  assert_int_equal(cs.evictions, dt_sharding_cache_evictions());
  assert_int_equal(cs.evictions, 0);
  for (size_t i = 0; i < sizeof cs.reserved / 8; i++)
    assert_int_equal(cs.reserved[i], 0);
}

/* dt_mesh_init is dt_mesh_create_range under its older name: the same
 * ranks (0..n-1 row-major, checked against the hand-written list), each
 * naming itself in its errors */
static void test_mesh_aliases(void **state) {
  (void)state;
  dt_runtime *rt = dt_runtime_create(&(dt_runtime_options){.num_ranks = 4});
  assert_non_null(rt);
  const char *names[] = {"dp", "tp"};
  dt_mesh *a = dt_mesh_create_range(rt, "cpu", DT_SHAPE(2, 2), names);
  dt_mesh *b = dt_mesh_init(rt, "cpu", DT_SHAPE(2, 2), names);
  assert_non_null(a);
  assert_non_null(b);
  static const int want[2][2] = {{0, 1}, {2, 3}};
  for (int64_t i = 0; i < 2; i++)
    for (int64_t j = 0; j < 2; j++) {
      assert_int_equal(dt_mesh_rank(a, (int64_t[]){i, j}), want[i][j]);
      assert_int_equal(dt_mesh_rank(b, (int64_t[]){i, j}), want[i][j]);
    }
  dt_clear_error();
  assert_null(dt_mesh_create_range(rt, "cpu", DT_SHAPE(3, 3), NULL));
  tu_expect_status(dt_last_status(), DT_ERR_MESH, "dt_mesh_create_range",
                   NULL);
  dt_clear_error();
  assert_null(dt_mesh_init(rt, "cpu", DT_SHAPE(3, 3), NULL));
  tu_expect_status(dt_last_status(), DT_ERR_MESH, "dt_mesh_init", NULL);
  dt_mesh_release(a);
  dt_mesh_release(b);
  dt_runtime_destroy(rt);
}

/* the old destructor name is a real function (a program may have taken
 * its address) and frees as dt_optimizer_free does: no leak either way */
static void test_optimizer_free_names(void **state) {
  (void)state;
  tu_leaks_begin_clear();
  void (*old_name)(dt_optimizer *) = dt_optimizer_release;
  void (*new_name)(dt_optimizer *) = dt_optimizer_free;
  assert_true(old_name != new_name);
  dt_tensor *p[1] = {dt_ones(DT_SHAPE(3), &(dt_tensor_options){
                                              .requires_grad = true})};
  dt_optimizer *o1 = dt_sgd_create(p, 1, &(dt_sgd_options){.lr = 0.1});
  dt_optimizer *o2 = dt_adamw_create(p, 1, &(dt_adamw_options){0});
  assert_non_null(o1);
  assert_non_null(o2);
  old_name(o1);
  new_name(o2);
  old_name(NULL);
  new_name(NULL);
  dt_tensor_release(p[0]);
  tu_leaks_end();
}

int main(void) {
  alarm(120);  /* a hang fails the test */
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_layouts),
      cmocka_unit_test(test_runtime_options_room),
      cmocka_unit_test(test_reserved_refused),
      cmocka_unit_test(test_group_reserved_refused),
      cmocka_unit_test(test_filled_structs_zero_reserved),
      cmocka_unit_test(test_mesh_aliases),
      cmocka_unit_test(test_optimizer_free_names),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
