/* The host fallback (ops/host_fallback.c) on the CPU backend: with every
 * kernel of the CPU table replaced by ops_host_fallback, each op copies
 * its storages "to the host" (the CPU backend's copy: real, separate
 * buffers), runs the CPU kernel on handles over the copies and copies the
 * outputs back. The same program — single-device ops with a tensor list
 * (cat, stack), index ops, reductions, and DTensor ops on a 2 x 2 mesh
 * whose kernels read the shard context's whole tensors (cross_entropy,
 * index_select_backward), and a backward pass — must give the same bits
 * as with the plain table. A missing copy-back or a handle left on the
 * device storage shows as different values. On a CUDA runtime the same
 * code runs ops that have no CUDA kernel (DTORCH_CUDA_FALLBACK=1). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/call.h"
#include "ops/ops.h"
#include "runtime/backend.h"

typedef struct results {
  float mm[4 * 5], cat[3 * 4 * 2], stack[3 * 4 * 2], ce, emb[3 * 4],
      ln[4 * 6], dce, dis[6 * 4], grad_w[6 * 5];
  int64_t am[4];
} results;

static float x[4 * 6], w[6 * 5];

static void must(dt_status st, const char *what) {
  if (st != DT_OK) fail_msg("%s: %s", what, dt_last_error());
}
static dt_tensor *ok(dt_tensor *t, const char *what) {
  if (!t) fail_msg("%s: %s", what, dt_last_error());
  return t;
}
static void fetch(dt_tensor *t, void *dst, size_t bytes, const char *what) {
  must(dt_to_host(ok(t, what), dst, bytes), what);
  dt_tensor_release(t);
}

static void single_device(results *r) {
  dt_tensor *X = ok(dt_from_host(x, DT_SHAPE(4, 6), NULL), "X");
  dt_tensor *W = ok(dt_from_host(w, DT_SHAPE(6, 5), NULL), "W");
  fetch(dt_matmul(X, W), r->mm, sizeof r->mm, "matmul");
  dt_tensor *parts[3];
  for (int i = 0; i < 3; i++)
    parts[i] = ok(dt_slice(X, 1, 2 * i, 2 * i + 2, 1), "slice");
  fetch(dt_cat(parts, 3, 0), r->cat, sizeof r->cat, "cat");
  fetch(dt_stack(parts, 3, 0), r->stack, sizeof r->stack, "stack");
  for (int i = 0; i < 3; i++) dt_tensor_release(parts[i]);
  int64_t tgt[4] = {1, 0, 4, 2}, idx[3] = {2, 0, 3};
  dt_tensor_options io = {.dtype = DT_INT64};
  dt_tensor *T = ok(dt_from_host(tgt, DT_SHAPE(4), &io), "target");
  dt_tensor *I = ok(dt_from_host(idx, DT_SHAPE(3), &io), "index");
  dt_tensor *L = ok(dt_matmul(X, W), "logits");
  fetch(dt_cross_entropy(L, T, DT_REDUCTION_MEAN, -100), &r->ce, sizeof r->ce,
        "cross_entropy");
  dt_tensor *E = ok(dt_slice(X, 1, 0, 4, 1), "table");
  dt_tensor *Ec = ok(dt_contiguous(E), "contiguous");
  fetch(dt_embedding(I, Ec), r->emb, sizeof r->emb, "embedding");
  dt_tensor_release(Ec);
  dt_tensor_release(E);
  int d1[1] = {1};
  fetch(dt_argmax(L, d1, 1, false), r->am, sizeof r->am, "argmax");
  fetch(dt_layer_norm(X, NULL, NULL, 1e-5), r->ln, sizeof r->ln, "layer_norm");
  dt_tensor_release(L);
  dt_tensor_release(T);
  dt_tensor_release(I);
  dt_tensor_release(X);
  dt_tensor_release(W);
}

/* batch-sharded cross_entropy with a mean reads the whole target of the
 * rank's shard context (its divisor), forward and backward */
static void dtensors(dt_runtime *rt, results *r) {
  dt_mesh *m = dt_mesh_init(rt, NULL, DT_SHAPE(2, 2), NULL);
  if (!m) fail_msg("mesh: %s", dt_last_error());
  dt_placement bat[2] = {DT_REPLICATE, DT_SHARD(0)},
               cols[2] = {DT_REPLICATE, DT_SHARD(1)},
               rep[2] = {DT_REPLICATE, DT_REPLICATE};
  dt_tensor_options xo = {.mesh = m, .placements = bat},
                    io = {.dtype = DT_INT64, .mesh = m, .placements = rep},
                    go = {.mesh = m, .placements = cols},
                    wo = {.mesh = m, .placements = rep, .requires_grad = true};
  int64_t tgt[4] = {3, 1, -100, 4};
  dt_tensor *X = ok(dt_from_host(x, DT_SHAPE(4, 6), &xo), "X");
  dt_tensor *T = ok(dt_from_host(tgt, DT_SHAPE(4), &io), "target");
  dt_tensor *W = ok(dt_from_host(w, DT_SHAPE(6, 5), &wo), "W");
  dt_tensor *L = ok(dt_matmul(X, W), "X @ W");
  dt_tensor *loss = ok(dt_cross_entropy(L, T, DT_REDUCTION_MEAN, -100), "ce");
  fetch(dt_redistribute(loss, m, rep), &r->dce, sizeof r->dce, "loss");
  must(dt_backward(loss), "backward");
  dt_tensor *gw = ok(dt_grad(W), "grad of W");
  fetch(dt_redistribute(gw, m, rep), r->grad_w, sizeof r->grad_w, "grad_w");
  int64_t idx[3] = {4, 1, 4};
  dt_tensor *I = ok(dt_from_host(idx, DT_SHAPE(3), &io), "index");
  dt_tensor *G = ok(dt_from_host(w, DT_SHAPE(3, 4), &go), "grad");
  fetch(dt_index_select_backward(G, 0, I, 6), r->dis, sizeof r->dis,
        "DTensor index_select_backward");
  dt_tensor_release(G);
  dt_tensor_release(I);
  dt_tensor_release(gw);
  dt_tensor_release(loss);
  dt_tensor_release(L);
  dt_tensor_release(W);
  dt_tensor_release(T);
  dt_tensor_release(X);
  dt_mesh_release(m);
}

static void program(results *r) {
  dt_runtime_options o = {.num_ranks = 4};
  dt_runtime *rt = dt_runtime_create(&o);
  assert_non_null(rt);
  must(dt_runtime_set_current(rt), "set_current");
  single_device(r);
  dtensors(rt, r);
  dt_runtime_set_current(NULL);
  dt_runtime_destroy(rt);
}

static void same_bits(void **state) {
  (void)state;
  for (int i = 0; i < 4 * 6; i++) x[i] = (float)((i * 29) % 31) / 8.0f - 2.0f;
  for (int i = 0; i < 6 * 5; i++) w[i] = (float)((i * 17) % 23) / 11.0f - 1.0f;
  results *plain = calloc(1, sizeof *plain), *fb = calloc(1, sizeof *fb);
  assert_true(plain && fb);
  program(plain);
  /* every kernel through the fallback */
  static core_kernel_fn table[CORE_OP_COUNT];
  const core_kernel_fn *cpu = runtime_backend_cpu.kernels;
  int replaced = 0;
  for (int op = 0; op < CORE_OP_COUNT; op++) {
    bool view = ops_defs[op].cpu == ops_alias_cpu;
    table[op] = view ? cpu[op] : ops_host_fallback;
    replaced += !view;
  }
  runtime_backend_set_kernels(CORE_KEY_CPU, table);
  program(fb);
  runtime_backend_set_kernels(CORE_KEY_CPU, cpu);
  assert_true(replaced > 60);
  assert_memory_equal(plain, fb, sizeof *plain);
  assert_true(plain->ce > 0 && plain->dce > 0); /* not all zeros */
  free(plain);
  free(fb);
}

int main(void) {
  setenv("DTORCH_CUDA_FALLBACK_QUIET", "1", 1); /* every op falls back */
  const struct CMUnitTest tests[] = {cmocka_unit_test(same_bits)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
