/* Kernels split into chunks that idle ranks steal give the same bits
 * whatever the rank count: each op below runs on runtimes of 1, 2 and 8
 * ranks (so its chunks are taken by 1, 2 or 8 threads in varying order)
 * and the outputs are compared byte for byte (matmul too: its BLAS calls
 * are split into blocks). The reductions use
 * segments and per-chunk partials combined in a fixed order; their values
 * are also checked against double-precision loops written here. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

enum { NOPS = 15, SUMN = 300001 };

typedef struct inputs {
  float *big;        /* SUMN values */
  float *rows;       /* [512, 1000] */
  int64_t *cls;      /* 512 class indices */
} inputs;

static void make_inputs(inputs *in) {
  in->big = malloc(sizeof(float) * SUMN);
  in->rows = malloc(sizeof(float) * 512 * 1000);
  in->cls = malloc(sizeof(int64_t) * 512);
  assert_non_null(in->big);
  assert_non_null(in->rows);
  assert_non_null(in->cls);
  uint64_t s = 0x9E3779B97F4A7C15ull;
  for (int64_t i = 0; i < SUMN; i++) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    in->big[i] = (float)((double)(s >> 40) / (double)(1 << 24) * 8.0 - 4.0);
  }
  for (int64_t i = 0; i < 512 * 1000; i++) in->rows[i] = in->big[i % SUMN] * 2;
  for (int i = 0; i < 512; i++) in->cls[i] = (i * 7919) % 1000;
}

static dt_tensor *op_run(int k, dt_tensor *big, dt_tensor *rows,
                         dt_tensor *cls) {
  switch (k) {
  case 0: return dt_sum(big, NULL, 0, false);
  case 1: return dt_mean(big, NULL, 0, false);
  case 2: return dt_amax(big, NULL, 0, false);
  case 3: return dt_argmin(big, NULL, 0, false);
  case 4: return dt_sum(rows, (int[]){0}, 1, false);   /* column tiles */
  case 5: return dt_sum(rows, (int[]){1}, 1, false);   /* rows */
  case 6: return dt_softmax(rows, -1);
  case 7: return dt_log_softmax(rows, 0);
  case 8: return dt_layer_norm(rows, NULL, NULL, 1e-5);
  case 9: return dt_cross_entropy(rows, cls, DT_REDUCTION_MEAN, -100);
  case 10: return dt_cross_entropy(rows, cls, DT_REDUCTION_NONE, -100);
  case 11: return dt_gelu(rows);
  case 12: {
    dt_tensor *t = dt_transpose(rows, 0, 1), *c = dt_contiguous(t);
    dt_tensor_release(t);
    return c;
  }
  case 13: {  /* [512, 1000] x [1000, 512]: row blocks of BLAS calls */
    dt_tensor *t = dt_transpose(rows, 0, 1), *c = dt_matmul(rows, t);
    dt_tensor_release(t);
    return c;
  }
  default: return dt_var(rows, (int[]){1}, 1, true, false);
  }
}

/* every op's output bytes on a runtime of n ranks (malloc'd; sizes in sz) */
static void run_all(int n, const inputs *in, unsigned char **out, size_t *sz) {
  dt_runtime *rt = dt_runtime_create(&(dt_runtime_options){.num_ranks = n});
  assert_non_null(rt);
  assert_int_equal(dt_runtime_set_current(rt), DT_OK);
  dt_tensor *big = dt_from_host(in->big, DT_SHAPE(SUMN), NULL);
  dt_tensor *rows = dt_from_host(in->rows, DT_SHAPE(512, 1000), NULL);
  dt_tensor *cls = dt_from_host(in->cls, DT_SHAPE(512),
                                &(dt_tensor_options){.dtype = DT_INT64});
  for (int k = 0; k < NOPS; k++) {
    dt_tensor *o = op_run(k, big, rows, cls);
    if (!o) fail_msg("op %d on %d ranks: %s", k, n, dt_last_error());
    sz[k] = (size_t)dt_tensor_numel(o) * dt_dtype_size(dt_tensor_dtype(o));
    out[k] = malloc(sz[k]);
    assert_int_equal(dt_to_host(o, out[k], sz[k]), DT_OK);
    dt_tensor_release(o);
  }
  dt_tensor_release(big);
  dt_tensor_release(rows);
  dt_tensor_release(cls);
  dt_runtime_set_current(NULL);
  dt_runtime_destroy(rt);
}

static void test_same_bits_any_ranks(void **state) {
  (void)state;
  inputs in;
  make_inputs(&in);
  unsigned char *ref[NOPS], *got[NOPS];
  size_t rsz[NOPS], gsz[NOPS];
  run_all(1, &in, ref, rsz);
  for (int n = 2; n <= 8; n *= 4) { /* 2 and 8 ranks */
    run_all(n, &in, got, gsz);
    for (int k = 0; k < NOPS; k++) {
      assert_int_equal(gsz[k], rsz[k]);
      if (memcmp(got[k], ref[k], rsz[k]))
        fail_msg("op %d: %d ranks give other bits than 1 rank", k, n);
      free(got[k]);
    }
  }
  /* the values, against double loops */
  double sum = 0, mx = -INFINITY;
  int64_t amin = 0;
  for (int64_t i = 0; i < SUMN; i++) {
    sum += in.big[i];
    if (in.big[i] > mx) mx = in.big[i];
    if (in.big[i] < in.big[amin]) amin = i;
  }
  float f;
  memcpy(&f, ref[0], sizeof f);
  if (fabs(f - sum) > 1e-6 * (fabs(sum) + SUMN)) fail_msg("sum %g, want %g", f, sum);
  memcpy(&f, ref[1], sizeof f);
  if (fabs(f - sum / SUMN) > 1e-6) fail_msg("mean %g, want %g", f, sum / SUMN);
  memcpy(&f, ref[2], sizeof f);
  assert_true(f == (float)mx);
  int64_t at;
  memcpy(&at, ref[3], sizeof at);
  assert_int_equal(at, amin);
  for (int k = 0; k < NOPS; k++) free(ref[k]);
  free(in.big);
  free(in.rows);
  free(in.cls);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_same_bits_any_ranks),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
