/* SPMD collectives between 8 ranks on one GPU (label gpu; docs/cuda.md):
 * the emulated collectives of a device world (sim/coll_device.c) moving
 * device memory on the ranks' streams. Each collective's result is
 * checked against a reference computed here on the host and against the
 * same SPMD function on a CPU runtime of 8 ranks (bitwise: both reduce
 * over the members' pairwise tree in float32). Also: a reduction of a dtype the device path
 * lacks fails on every rank with a message and the runtime stays usable;
 * send/recv between ranks of the GPU. Exits 77 (skip) where no
 * "cuda" runtime of 8 ranks on one GPU can be made. With
 * DTORCH_CUDA_EMULATE=1 (runtime/backend_emu.c) it runs on host memory
 * behind the CUDA key: the plumbing, in every build. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "dtorch/dtorch.h"
#include "dtorch/spmd.h"

#define NR 8
#define N 4096 /* elements per rank: past the one-phase size */
#define M 8    /* a small case too */

typedef struct results {
  float ar[NR][N], avg[NR][N], mx[NR][M], ag[NR][NR * N], rs[NR][N / NR],
      a2a[NR][N], bc[NR][N], ag2[NR][2 * NR * 4];
} results;

static dt_runtime *gpu_rt, *cpu_rt;

/* rank k's input element i: multiples of 1/4, so every sum is exact */
static float input(int k, int i) {
  return (float)((k * 31 + i * 7) % 23) - 11.0f + 0.25f * (float)(i % 4);
}

static dt_status fetch(dt_tensor *t, float *dst, size_t bytes) {
  if (!t) return dt_last_status();
  dt_status st = dt_to_host(t, dst, bytes);
  dt_tensor_release(t);
  return st;
}

static dt_status body(dt_spmd_ctx *ctx) {
  results *r = ctx->arg;
  int k = ctx->rank;
  float *x = malloc(sizeof(float) * N);
  if (!x) return DT_ERR_OUT_OF_MEMORY;
  for (int i = 0; i < N; i++) x[i] = input(k, i);
  dt_tensor *t = dt_from_host(x, DT_SHAPE(N), NULL);
  dt_tensor *s = dt_from_host(x, DT_SHAPE(M), NULL);
  /* [2, 4] viewed as [4, 2] transposed: a non-contiguous input */
  dt_tensor *b = dt_from_host(x, DT_SHAPE(4, 2), NULL);
  dt_tensor *bt = b ? dt_transpose(b, 0, 1) : NULL;
  free(x);
  dt_status st = t && s && bt ? DT_OK : dt_last_status();
  if (st == DT_OK)
    st = fetch(dt_all_reduce(t, DT_REDUCE_SUM, NULL), r->ar[k], sizeof r->ar[k]);
  if (st == DT_OK)
    st = fetch(dt_all_reduce(t, DT_REDUCE_AVG, NULL), r->avg[k], sizeof r->avg[k]);
  if (st == DT_OK)
    st = fetch(dt_all_reduce(s, DT_REDUCE_MAX, NULL), r->mx[k], sizeof r->mx[k]);
  if (st == DT_OK)
    st = fetch(dt_all_gather(t, 0, NULL), r->ag[k], sizeof r->ag[k]);
  if (st == DT_OK)
    st = fetch(dt_reduce_scatter(t, DT_REDUCE_SUM, 0, NULL), r->rs[k],
               sizeof r->rs[k]);
  if (st == DT_OK)
    st = fetch(dt_all_to_all(t, 0, 0, NULL), r->a2a[k], sizeof r->a2a[k]);
  if (st == DT_OK)
    st = fetch(dt_broadcast(t, 3, NULL), r->bc[k], sizeof r->bc[k]);
  if (st == DT_OK) /* [2, 4] per rank gathered along dim 1: [2, 32] */
    st = fetch(dt_all_gather(bt, 1, NULL), r->ag2[k], sizeof r->ag2[k]);
  dt_tensor_release(t);
  dt_tensor_release(s);
  dt_tensor_release(b);
  dt_tensor_release(bt);
  return st;
}

static void check_reference(const results *r) {
  for (int k = 0; k < NR; k++) {
    for (int i = 0; i < N; i++) {
      float sum = 0, mx = input(0, i);
      for (int j = 0; j < NR; j++) sum += input(j, i);
      for (int j = 1; j < NR; j++) mx = input(j, i) > mx ? input(j, i) : mx;
      if (r->ar[k][i] != sum || r->avg[k][i] != sum / NR ||
          (i < M && r->mx[k][i] != mx))
        fail_msg("rank %d element %d: all_reduce %g avg %g (want %g, %g)", k,
                 i, (double)r->ar[k][i], (double)r->avg[k][i], (double)sum,
                 (double)(sum / NR));
      if (r->bc[k][i] != input(3, i))
        fail_msg("broadcast: rank %d element %d: %g", k, i, (double)r->bc[k][i]);
      /* all_to_all: block k of member i / (N / NR)'s input */
      int from = i / (N / NR), at = k * (N / NR) + i % (N / NR);
      if (r->a2a[k][i] != input(from, at))
        fail_msg("all_to_all: rank %d element %d", k, i);
    }
    for (int i = 0; i < NR * N; i++)
      if (r->ag[k][i] != input(i / N, i % N))
        fail_msg("all_gather: rank %d element %d", k, i);
    for (int i = 0; i < N / NR; i++) {
      float sum = 0;
      for (int j = 0; j < NR; j++) sum += input(j, k * (N / NR) + i);
      if (r->rs[k][i] != sum) fail_msg("reduce_scatter: rank %d element %d", k, i);
    }
    /* bt of rank j is [[x0, x2, x4, x6], [x1, x3, x5, x7]] */
    for (int row = 0; row < 2; row++)
      for (int c = 0; c < NR * 4; c++)
        if (r->ag2[k][row * NR * 4 + c] != input(c / 4, 2 * (c % 4) + row))
          fail_msg("all_gather of a transposed view: rank %d [%d, %d]", k, row, c);
  }
}

static void collectives_match(void **state) {
  (void)state;
  results *g = calloc(1, sizeof *g), *c = calloc(1, sizeof *c);
  assert_true(g && c);
  if (dt_spmd_run(gpu_rt, body, g) != DT_OK) fail_msg("cuda: %s", dt_last_error());
  if (dt_spmd_run(cpu_rt, body, c) != DT_OK) fail_msg("cpu: %s", dt_last_error());
  check_reference(g);
  check_reference(c);
  assert_memory_equal(g, c, sizeof *g);
  free(g);
  free(c);
}

static dt_status int_sum(dt_spmd_ctx *ctx) {
  (void)ctx;
  dt_tensor_options o = {.dtype = DT_INT32};
  dt_tensor *t = dt_full(DT_SHAPE(4096), 1, &o);
  dt_tensor *s = t ? dt_all_reduce(t, DT_REDUCE_SUM, NULL) : NULL;
  dt_status st = s ? DT_OK : dt_last_status();
  dt_tensor_release(s);
  dt_tensor_release(t);
  return st;
}

/* send/recv between ranks of one GPU: each even rank sends a [4, 8]
 * slice of its input to the next rank, which checks it */
static dt_status send_pairs(dt_spmd_ctx *ctx) {
  int k = ctx->rank;
  float v[32], got[32];
  for (int i = 0; i < 32; i++) v[i] = input(k, i);
  if (k % 2 == 0) {
    dt_tensor *t = dt_from_host(v, DT_SHAPE(4, 8), NULL);
    dt_status st = t ? dt_send(t, k + 1) : dt_last_status();
    dt_tensor_release(t);
    return st;
  }
  dt_tensor *r = dt_recv(k - 1, DT_SHAPE(4, 8), DT_FLOAT32);
  dt_status st = r ? dt_to_host(r, got, sizeof got) : dt_last_status();
  dt_tensor_release(r);
  for (int i = 0; st == DT_OK && i < 32; i++)
    if (got[i] != input(k - 1, i)) st = DT_ERR_INTERNAL;
  return st;
}

static void unsupported_and_p2p(void **state) {
  (void)state;
  const char *emu = getenv("DTORCH_CUDA_EMULATE"); /* reduces integers */
  if (emu && !strcmp(emu, "1")) {
    assert_int_equal(dt_spmd_run(gpu_rt, int_sum, NULL), DT_OK);
  } else {
    assert_int_equal(dt_spmd_run(gpu_rt, int_sum, NULL), DT_ERR_UNSUPPORTED);
    assert_non_null(strstr(dt_last_error(), "float dtypes only"));
  }
  if (dt_spmd_run(gpu_rt, send_pairs, NULL) != DT_OK)
    fail_msg("send/recv: %s", dt_last_error());
  results *g = calloc(1, sizeof *g); /* still usable */
  if (dt_spmd_run(gpu_rt, body, g) != DT_OK) fail_msg("after: %s", dt_last_error());
  check_reference(g);
  free(g);
}

int main(void) {
  setenv("DTORCH_DTENSOR_IN_SAME_DEVICE", "1", 1);
  dt_runtime_options g = {.device = "cuda", .num_ranks = NR};
  gpu_rt = dt_runtime_create(&g);
  if (!gpu_rt) {
    printf("test_cuda_coll: skipped, no \"cuda\" runtime of %d ranks on one "
           "GPU: %s\n", NR, dt_last_error());
    return 77;
  }
  dt_runtime_options c = {.num_ranks = NR};
  cpu_rt = dt_runtime_create(&c);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(collectives_match),
      cmocka_unit_test(unsupported_and_p2p),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  dt_runtime_destroy(gpu_rt);
  dt_runtime_destroy(cpu_rt);
  return rc;
}
