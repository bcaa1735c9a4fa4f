/* device = "cuda" on machines without a usable GPU, and the rank -> GPU
 * rules (runtime/cuda_map.h), all without a GPU: a "cuda" runtime fails
 * with DT_ERR_DEVICE and a message saying why (built without CUDA, no
 * driver, no device), never crashes; the mapping is checked rule by rule
 * against hand-written expectations. Where a GPU is present the tests of
 * the failure skip themselves (the gpu-labelled tests cover that case). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "dtorch/dtorch.h"
#include "runtime/cuda_map.h"

/* the reason must be one of the three the backend gives */
static void assert_says_why(const char *msg) {
  print_message("  %s\n", msg);
  assert_non_null(strstr(msg, "dt_runtime_create"));
  assert_true(strstr(msg, "built without the CUDA backend") ||
              strstr(msg, "cudaGetDeviceCount") ||
              strstr(msg, "no CUDA device"));
}

static void cuda_runtime_unavailable(void **state) {
  (void)state;
  dt_runtime_options o = {.device = "cuda", .num_ranks = 2};
  dt_runtime *rt = dt_runtime_create(&o);
  if (rt) { /* a GPU machine */
    dt_runtime_destroy(rt);
    skip();
  }
  assert_int_equal(dt_last_status(), DT_ERR_DEVICE);
  assert_says_why(dt_last_error());
  assert_non_null(strstr(dt_last_error(), "\"cuda\""));
  o.device = "cuda:0";
  assert_null(dt_runtime_create(&o));
  assert_int_equal(dt_last_status(), DT_ERR_DEVICE);
  assert_says_why(dt_last_error());
}

static void cuda_from_environment(void **state) {
  (void)state;
  setenv("DTORCH_DEVICE", "cuda", 1);
  setenv("DTORCH_DTENSOR_IN_SAME_DEVICE", "1", 1);
  dt_runtime *rt = dt_runtime_create(NULL);
  dt_status st = dt_last_status();
  char msg[512];
  strncpy(msg, dt_last_error(), sizeof msg - 1);
  msg[sizeof msg - 1] = 0;
  unsetenv("DTORCH_DEVICE");
  unsetenv("DTORCH_DTENSOR_IN_SAME_DEVICE");
  if (rt) {
    dt_runtime_destroy(rt);
    skip();
  }
  assert_int_equal(st, DT_ERR_DEVICE);
  assert_says_why(msg);
}

static void bad_device_strings(void **state) {
  (void)state;
  const char *bad[] = {"cudax", "cuda:", "cuda:-1", "tpu", "cuda:a"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    dt_runtime_options o = {.device = bad[i], .num_ranks = 1};
    assert_null(dt_runtime_create(&o));
    assert_int_equal(dt_last_status(), DT_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(dt_last_error(), bad[i]));
  }
  setenv("DTORCH_DEVICE", "gpu", 1);
  assert_null(dt_runtime_create(NULL));
  unsetenv("DTORCH_DEVICE");
  assert_int_equal(dt_last_status(), DT_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(dt_last_error(), "DTORCH_DEVICE \"gpu\""));
  /* rank_devices belongs to "cuda" runtimes and needs num_ranks */
  const char *rd[] = {"cuda:0"};
  dt_runtime_options o = {.num_ranks = 1, .rank_devices = rd};
  assert_null(dt_runtime_create(&o));
  assert_int_equal(dt_last_status(), DT_ERR_INVALID_ARGUMENT);
  o = (dt_runtime_options){.device = "cuda", .rank_devices = rd};
  assert_null(dt_runtime_create(&o));
  assert_int_equal(dt_last_status(), DT_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(dt_last_error(), "num_ranks"));
}

/* a CUDA tensor on a CPU runtime: a clear device error */
static void cuda_tensor_on_cpu_runtime(void **state) {
  (void)state;
  dt_runtime_options ro = {.num_ranks = 2};
  dt_runtime *rt = dt_runtime_create(&ro);
  assert_non_null(rt);
  assert_int_equal(dt_runtime_set_current(rt), DT_OK);
  dt_tensor_options o = {.dtype = DT_FLOAT32, .device = "cuda"};
  assert_null(dt_zeros(DT_SHAPE(2, 2), &o));
  assert_int_equal(dt_last_status(), DT_ERR_DEVICE);
  assert_non_null(strstr(dt_last_error(), "runtime made with device \"cuda\""));
  dt_runtime_set_current(NULL);
  dt_runtime_destroy(rt);
}

static void parse_env(void **state) {
  (void)state;
  bool same;
  int n;
  const char *yes[] = {"1", "true", "TRUE", "yes", "On"};
  for (size_t i = 0; i < 5; i++) {
    assert_int_equal(runtime_cuda_parse_env(yes[i], NULL, 4096, &same, &n), DT_OK);
    assert_true(same);
    assert_int_equal(n, 0);
  }
  const char *no[] = {"0", "false", "no", "OFF", "", NULL};
  for (size_t i = 0; i < 6; i++) {
    assert_int_equal(runtime_cuda_parse_env(no[i], NULL, 4096, &same, &n), DT_OK);
    assert_false(same);
  }
  assert_int_equal(runtime_cuda_parse_env("1", "4", 4096, &same, &n), DT_OK);
  assert_int_equal(n, 4);
  assert_int_equal(runtime_cuda_parse_env("maybe", NULL, 4096, &same, &n),
                   DT_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(dt_last_error(), "DTORCH_DTENSOR_IN_SAME_DEVICE=\"maybe\""));
  const char *badn[] = {"0", "-2", "4097", "8x", "x"};
  for (size_t i = 0; i < 5; i++) {
    assert_int_equal(runtime_cuda_parse_env("1", badn[i], 4096, &same, &n),
                     DT_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(dt_last_error(),
        "DTORCH_NUM_GPU_WHEN_ENABLE_DTENSOR_IN_SAME_DEVICE"));
  }
}

static void rank_count(void **state) {
  (void)state;
  assert_int_equal(runtime_cuda_rank_count(0, true, 0, 1), 8);  /* the guide's default */
  assert_int_equal(runtime_cuda_rank_count(0, true, 3, 1), 3);
  assert_int_equal(runtime_cuda_rank_count(5, true, 3, 1), 5);  /* asked wins */
  assert_int_equal(runtime_cuda_rank_count(0, false, 3, 4), 4); /* per GPU */
  assert_int_equal(runtime_cuda_rank_count(2, false, 0, 4), 2);
}

static void device_index(void **state) {
  (void)state;
  assert_int_equal(runtime_cuda_device_index("cuda"), -1);
  assert_int_equal(runtime_cuda_device_index("cuda:0"), 0);
  assert_int_equal(runtime_cuda_device_index("cuda:13"), 13);
  const char *bad[] = {"cuda:", "cuda:x", "cuda:-1", "cpu", "cudax", "cuda:1a"};
  for (size_t i = 0; i < 6; i++)
    assert_int_equal(runtime_cuda_device_index(bad[i]), -2);
  assert_int_equal(runtime_cuda_device_index(NULL), -2);
}

static void map_per_gpu_and_same(void **state) {
  (void)state;
  int g[8];
  bool same;
  /* enough GPUs: rank i on GPU i */
  assert_int_equal(runtime_cuda_map("f", "cuda", 4, 8, false, NULL, g, &same), DT_OK);
  for (int i = 0; i < 4; i++) assert_int_equal(g[i], i);
  assert_false(same);
  /* too few: say so and name the switch */
  assert_int_equal(runtime_cuda_map("f", "cuda", 8, 1, false, NULL, g, &same),
                   DT_ERR_DEVICE);
  assert_non_null(strstr(dt_last_error(), "8 ranks need 8 GPUs"));
  assert_non_null(strstr(dt_last_error(), "DTORCH_DTENSOR_IN_SAME_DEVICE=1"));
  /* the same-device mode: all on GPU 0, or on the GPU named */
  assert_int_equal(runtime_cuda_map("f", "cuda", 8, 1, true, NULL, g, &same), DT_OK);
  for (int i = 0; i < 8; i++) assert_int_equal(g[i], 0);
  assert_true(same);
  assert_int_equal(runtime_cuda_map("f", "cuda:1", 3, 2, true, NULL, g, &same), DT_OK);
  for (int i = 0; i < 3; i++) assert_int_equal(g[i], 1);
  assert_int_equal(runtime_cuda_map("f", "cuda:2", 3, 2, true, NULL, g, &same),
                   DT_ERR_DEVICE);
  assert_non_null(strstr(dt_last_error(), "cuda:0 .. cuda:1"));
  /* one rank on a named GPU needs no mode; several do */
  assert_int_equal(runtime_cuda_map("f", "cuda:1", 1, 2, false, NULL, g, &same), DT_OK);
  assert_int_equal(g[0], 1);
  assert_false(same);
  assert_int_equal(runtime_cuda_map("f", "cuda:1", 2, 2, false, NULL, g, &same),
                   DT_ERR_DEVICE);
  assert_int_equal(runtime_cuda_map("f", "cuda", 1, 0, false, NULL, g, &same),
                   DT_ERR_DEVICE);
}

static void map_explicit(void **state) {
  (void)state;
  int g[4];
  bool same;
  const char *swap[] = {"cuda:1", "cuda:0"};
  assert_int_equal(runtime_cuda_map("f", "cuda", 2, 2, false, swap, g, &same), DT_OK);
  assert_int_equal(g[0], 1);
  assert_int_equal(g[1], 0);
  assert_false(same);
  const char *all1[] = {"cuda:1", "cuda:1", "cuda:1"};
  assert_int_equal(runtime_cuda_map("f", "cuda", 3, 2, false, all1, g, &same), DT_OK);
  assert_true(same);
  const char *mixed[] = {"cuda:0", "cuda:0", "cuda:1"};
  assert_int_equal(runtime_cuda_map("f", "cuda", 3, 2, false, mixed, g, &same),
                   DT_ERR_DEVICE);
  assert_non_null(strstr(dt_last_error(), "ranks 0 and 1 on cuda:0"));
  const char *far[] = {"cuda:3"};
  assert_int_equal(runtime_cuda_map("f", "cuda", 1, 2, false, far, g, &same),
                   DT_ERR_DEVICE);
  assert_non_null(strstr(dt_last_error(), "rank_devices[0] \"cuda:3\""));
  const char *junk[] = {"cuda:0", "gpu1"};
  assert_int_equal(runtime_cuda_map("f", "cuda", 2, 2, false, junk, g, &same),
                   DT_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(dt_last_error(), "rank_devices[1] \"gpu1\""));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(cuda_runtime_unavailable),
      cmocka_unit_test(cuda_from_environment),
      cmocka_unit_test(bad_device_strings),
      cmocka_unit_test(cuda_tensor_on_cpu_runtime),
      cmocka_unit_test(parse_env),
      cmocka_unit_test(rank_count),
      cmocka_unit_test(device_index),
      cmocka_unit_test(map_per_gpu_and_same),
      cmocka_unit_test(map_explicit),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
