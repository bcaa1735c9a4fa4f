/* DTensors on 4 CUDA ranks of one GPU (label gpu; docs/cuda.md): a 2 x 2
 * mesh ("dp", "tp") on a "cuda" runtime runs the same program as on a
 * 4-rank CPU runtime — distribute from host, a tensor-parallel matmul
 * (Shard(1) x Shard(0) -> Partial, all_reduce to Replicate), elementwise
 * ops and softmax on shards, redistributes (S(0) -> S(1) all_to_all,
 * S -> R all_gather, P -> S reduce_scatter), random factories, a
 * redistribute to another mesh, one rank's shard, a strided fetch — and
 * the results must
 * agree (within rounding where cuBLAS and OpenBLAS add in other orders,
 * bitwise for data movement and the Philox stream), with the matmul also
 * checked against a double-precision loop. Exits 77 (skip) where no
 * "cuda" runtime of 4 ranks on one GPU can be made. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "dtorch/dtorch.h"

#define M 8
#define K 16
#define N 12

typedef struct outputs {
  float mm[M * N], act[M * K], sm[M * K], s01[M * K], rs[M * N],
      rnd[M * K], xmesh[M * K], shard[M * K / 4], tr[K * M];
} outputs;

static dt_runtime *gpu_rt, *cpu_rt;
static float a[M * K], b[K * N];

static void must(dt_status st, const char *what) {
  if (st != DT_OK) fail_msg("%s: %s", what, dt_last_error());
}
static dt_tensor *ok(dt_tensor *t, const char *what) {
  if (!t) fail_msg("%s: %s", what, dt_last_error());
  return t;
}
static dt_mesh *ok_mesh(dt_mesh *m, const char *what) {
  if (!m) fail_msg("%s: %s", what, dt_last_error());
  return m;
}
static void fetch(dt_tensor *t, float *dst, size_t bytes, const char *what) {
  must(dt_to_host(ok(t, what), dst, bytes), what);
  dt_tensor_release(t);
}

static void program(dt_runtime *rt, outputs *o) {
  must(dt_runtime_set_current(rt), "set_current");
  const char *names[2] = {"dp", "tp"};
  dt_mesh *mesh = ok_mesh(dt_mesh_init(rt, NULL, DT_SHAPE(2, 2), names),
                          "dt_mesh_init");
  dt_placement col[2] = {DT_REPLICATE, DT_SHARD(1)},
               row[2] = {DT_REPLICATE, DT_SHARD(0)},
               rep[2] = {DT_REPLICATE, DT_REPLICATE},
               s0[2] = {DT_SHARD(0), DT_REPLICATE},
               s1[2] = {DT_SHARD(1), DT_REPLICATE},
               both[2] = {DT_SHARD(0), DT_SHARD(1)};
  dt_tensor_options oc = {.mesh = mesh, .placements = col},
                    orow = {.mesh = mesh, .placements = row},
                    os0 = {.mesh = mesh, .placements = s0},
                    oboth = {.mesh = mesh, .placements = both};
  dt_tensor *A = ok(dt_from_host(a, DT_SHAPE(M, K), &oc), "A");
  dt_tensor *B = ok(dt_from_host(b, DT_SHAPE(K, N), &orow), "B");
  dt_tensor *C = ok(dt_matmul(A, B), "matmul"); /* Partial(sum) on tp */
  fetch(dt_redistribute(C, mesh, rep), o->mm, sizeof o->mm, "C -> R");
  dt_tensor *X = ok(dt_from_host(a, DT_SHAPE(M, K), &os0), "X");
  dt_tensor *Y = ok(dt_add(X, X), "add");
  fetch(dt_gelu(Y), o->act, sizeof o->act, "gelu");
  fetch(dt_softmax(X, 1), o->sm, sizeof o->sm, "softmax");
  fetch(dt_redistribute(X, mesh, s1), o->s01, sizeof o->s01, "S(0) -> S(1)");
  /* a Partial(sum) made by the matmul of a's shards, reduce-scattered */
  dt_tensor *B2 = ok(dt_from_host(b, DT_SHAPE(K, N), &orow), "B2");
  dt_tensor *P = ok(dt_matmul(A, B2), "matmul 2");
  dt_tensor_release(B2);
  dt_placement ps[2] = {DT_REPLICATE, DT_SHARD(0)};
  dt_tensor *PS = ok(dt_redistribute(P, mesh, ps), "P -> S(0)");
  fetch(dt_redistribute(PS, mesh, rep), o->rs, sizeof o->rs, "S(0) -> R");
  dt_manual_seed(1234);
  fetch(dt_rand(DT_SHAPE(M, K), &oboth), o->rnd, sizeof o->rnd, "rand");
  /* another mesh: the ranks in the other order, one dim */
  dt_mesh *other = ok_mesh(dt_mesh_create(rt, NULL, DT_SHAPE(4),
                                          (int[]){3, 2, 1, 0}, NULL),
                           "dt_mesh_create");
  dt_placement o0[1] = {DT_SHARD(0)};
  fetch(dt_redistribute(X, other, o0), o->xmesh, sizeof o->xmesh, "cross mesh");
  /* a strided single-device tensor fetched as it is */
  dt_tensor *S = ok(dt_from_host(a, DT_SHAPE(M, K), NULL), "single");
  fetch(dt_transpose(S, 0, 1), o->tr, sizeof o->tr, "transposed fetch");
  dt_tensor_release(S);
  dt_tensor *Z = ok(dt_from_host(a, DT_SHAPE(M, K), &oboth), "Z");
  must(dt_local_to_host(Z, 3, o->shard, sizeof o->shard), "local_to_host");
  dt_tensor_release(Z);
  dt_tensor_release(P);
  dt_tensor_release(PS);
  dt_tensor_release(Y);
  dt_tensor_release(X);
  dt_tensor_release(C);
  dt_tensor_release(B);
  dt_tensor_release(A);
  dt_mesh_release(other);
  dt_mesh_release(mesh);
  dt_runtime_set_current(NULL);
}

static void close_to(const float *g, const float *c, int n, double tol,
                     const char *what) {
  for (int i = 0; i < n; i++)
    if (!(fabs((double)g[i] - c[i]) <= tol * (1 + fabs(c[i]))))
      fail_msg("%s: element %d: cuda %.9g, cpu %.9g", what, i, g[i], c[i]);
}

static void fill_inputs(void) {
  for (int i = 0; i < M * K; i++) a[i] = (float)((i * 37) % 41) / 20.0f - 1.0f;
  for (int i = 0; i < K * N; i++) b[i] = (float)((i * 23) % 31) / 15.0f - 1.0f;
}

/* what holds on any backend: the matmul against double, data movement
 * against the input, rank 3's shard of a [S(0), S(1)] tensor */
static void check_reference(const outputs *o) {
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) {
      double s = 0;
      for (int k = 0; k < K; k++) s += (double)a[i * K + k] * b[k * N + j];
      if (fabs(o->mm[i * N + j] - s) > 1e-5 * (1 + fabs(s)) ||
          fabs(o->rs[i * N + j] - s) > 1e-5 * (1 + fabs(s)))
        fail_msg("matmul [%d, %d]: %.9g and %.9g, double %.9g", i, j,
                 o->mm[i * N + j], o->rs[i * N + j], s);
    }
  assert_memory_equal(o->s01, a, sizeof o->s01);
  assert_memory_equal(o->xmesh, a, sizeof o->xmesh);
  for (int i = 0; i < K; i++)
    for (int j = 0; j < M; j++)
      if (o->tr[i * M + j] != a[j * K + i]) fail_msg("transpose [%d, %d]", i, j);
  for (int i = 0; i < M / 2; i++) /* rank 3: rows 4..7, cols 8..15 */
    for (int j = 0; j < K / 2; j++)
      if (o->shard[i * (K / 2) + j] != a[(M / 2 + i) * K + K / 2 + j])
        fail_msg("rank 3's shard [%d, %d]", i, j);
}

static void same_program(void **state) {
  (void)state;
  fill_inputs();
  outputs *g = calloc(1, sizeof *g), *c = calloc(1, sizeof *c);
  assert_true(g && c);
  program(gpu_rt, g);
  program(cpu_rt, c);
  check_reference(g);
  check_reference(c);
  close_to(g->mm, c->mm, M * N, 1e-6, "matmul");
  close_to(g->rs, c->rs, M * N, 1e-6, "reduce_scatter of a Partial");
  close_to(g->act, c->act, M * K, 1e-6, "gelu");
  close_to(g->sm, c->sm, M * K, 1e-6, "softmax");
  assert_memory_equal(g->s01, c->s01, sizeof g->s01);
  assert_memory_equal(g->rnd, c->rnd, sizeof g->rnd); /* Philox, bitwise */
  assert_memory_equal(g->shard, c->shard, sizeof g->shard);
  free(g);
  free(c);
}

/* without a GPU: the program and its references on the CPU runtime (the
 * backend paths every DTensor record now takes), then a skip */
static void cpu_program(void **state) {
  (void)state;
  fill_inputs();
  outputs *c = calloc(1, sizeof *c), *d = calloc(1, sizeof *d);
  assert_true(c && d);
  program(cpu_rt, c);
  program(cpu_rt, d);
  check_reference(c);
  assert_memory_equal(c, d, sizeof *c); /* deterministic */
  free(c);
  free(d);
}

int main(void) {
  setenv("DTORCH_DTENSOR_IN_SAME_DEVICE", "1", 1);
  dt_runtime_options g = {.device = "cuda", .num_ranks = 4};
  gpu_rt = dt_runtime_create(&g);
  dt_runtime_options c = {.num_ranks = 4};
  cpu_rt = dt_runtime_create(&c);
  if (!gpu_rt) {
    printf("test_cuda_dtensor: no \"cuda\" runtime of 4 ranks on one GPU "
           "(%s): the CPU half only, then skip\n", dt_last_error());
    const struct CMUnitTest cpu_only[] = {cmocka_unit_test(cpu_program)};
    int rc = cmocka_run_group_tests(cpu_only, NULL, NULL);
    dt_runtime_destroy(cpu_rt);
    return rc ? rc : 77;
  }
  const struct CMUnitTest tests[] = {cmocka_unit_test(same_program)};
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  dt_runtime_destroy(gpu_rt);
  dt_runtime_destroy(cpu_rt);
  return rc;
}
