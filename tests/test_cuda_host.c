/* The CUDA backend's parts that run on the host, checked without a GPU:
 * the Philox generator nvcc compiles from kernels/cuda/philox.h (the
 * device kernels' source) against the published known-answer vectors and
 * against the CPU backend's generator, element by element; and the device
 * probe, which on a machine without a driver or GPU must fail with a
 * message, not crash. Skips (77) in a build without CUDA. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#if DTORCH_HAVE_CUDA
#include "kernels/cpu/cpu.h"
#include "kernels/cuda/cuda.h"
#include "philox_kat.h"

static void philox_known_answers(void **state) {
  (void)state;
  const philox_kat *kat = philox_kats;
  for (int i = 0; i < PHILOX_NKATS; i++) {
    uint32_t g[4], c[4];
    cuda_philox4x32_host(kat[i].ctr, kat[i].key, g);
    cpu_philox4x32(kat[i].ctr, kat[i].key, c);
    for (int k = 0; k < 4; k++) {
      assert_int_equal(g[k], kat[i].out[k]);
      assert_int_equal(c[k], kat[i].out[k]);
    }
  }
}

/* xorshift64*: counters and keys independent of both generators */
static uint64_t next(uint64_t *s) {
  *s ^= *s >> 12;
  *s ^= *s << 25;
  *s ^= *s >> 27;
  return *s * 0x2545F4914F6CDD1DULL;
}

static void philox_matches_cpu(void **state) {
  (void)state;
  uint64_t s = 0x9E3779B97F4A7C15ULL;
  for (int i = 0; i < 200000; i++) {
    uint64_t a = next(&s), b = next(&s), k = next(&s);
    uint32_t ctr[4] = {(uint32_t)a, (uint32_t)(a >> 32), (uint32_t)b,
                       (uint32_t)(b >> 32)};
    uint32_t key[2] = {(uint32_t)k, (uint32_t)(k >> 32)};
    uint32_t g[4], c[4];
    cuda_philox4x32_host(ctr, key, g);
    cpu_philox4x32(ctr, key, c);
    if (memcmp(g, c, sizeof g) != 0)
      fail_msg("element %d: cuda %08x.. vs cpu %08x..", i, g[0], c[0]);
  }
}

/* the stream's transforms: uniform bitwise (integer arithmetic and one
 * exact product), normal within rounding of log / cos */
static void philox_transforms_match_cpu(void **state) {
  (void)state;
  const uint64_t seeds[] = {0, 1, 42, 0xDEADBEEFCAFEULL};
  for (size_t j = 0; j < sizeof seeds / sizeof *seeds; j++)
    for (uint64_t i = 0; i < 20000; i++) {
      uint64_t idx = i * 7919 + (i << 33);
      double gu = cuda_philox_uniform_host(seeds[j], idx);
      double cu = cpu_philox_uniform(seeds[j], idx);
      assert_memory_equal(&gu, &cu, sizeof gu);
      assert_true(gu >= 0 && gu < 1);
      double gn = cuda_philox_normal_host(seeds[j], idx);
      double cn = cpu_philox_normal(seeds[j], idx);
      assert_true(gn - cn < 1e-12 && cn - gn < 1e-12);
    }
}

/* with no driver (this machine) or no GPU: -1 and a reason */
static void probe_without_gpu_says_why(void **state) {
  (void)state;
  char why[256] = "";
  int n = cuda_device_count(why, sizeof why);
  if (n > 0) skip(); /* a GPU machine: nothing to check here */
  assert_int_equal(n, -1);
  assert_non_null(strstr(why, "cudaGetDeviceCount"));
  print_message("probe: %s\n", why);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(philox_known_answers),
      cmocka_unit_test(philox_matches_cpu),
      cmocka_unit_test(philox_transforms_match_cpu),
      cmocka_unit_test(probe_without_gpu_says_why),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
#else
int main(void) {
  puts("test_cuda_host: built without CUDA (DTORCH_CUDA=off or no nvcc)");
  return 77;
}
#endif
