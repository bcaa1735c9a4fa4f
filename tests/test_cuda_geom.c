/* The geometry the CUDA bindings hand their kernels (ops/cuda_geom.h),
 * checked on the host: rows are walked the way rows.cu walks them (a row
 * index and an element index, each turned into offsets through its own
 * sizes and strides) over strided views of random shapes, and the result
 * must equal a naive walk over x's full index space. Runs in every build,
 * GPU or not. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ops/cuda_geom.h"

static void broadcast(void **state) {
  (void)state;
  int64_t out[4];
  ops_cuda_broadcast(3, 2, (int64_t[]){5, 1}, (int64_t[]){1, 1}, out);
  assert_int_equal(out[0], 0);
  assert_int_equal(out[1], 1);
  assert_int_equal(out[2], 0);
  ops_cuda_broadcast(2, 1, (int64_t[]){3}, (int64_t[]){2}, out);
  assert_int_equal(out[0], 0);
  assert_int_equal(out[1], 2);
  ops_cuda_broadcast(2, 2, (int64_t[]){4, 6}, (int64_t[]){1, 4}, out);
  assert_int_equal(out[0], 1);
  assert_int_equal(out[1], 4);
}

/* offsets of linear index i over (n, sz) with strides a and b */
static void walk(int64_t i, int n, const int64_t *sz, const int64_t *a,
                 const int64_t *b, int64_t *oa, int64_t *ob) {
  *oa = *ob = 0;
  for (int d = n - 1; d >= 0; d--) {
    *oa += (i % sz[d]) * a[d];
    *ob += (i % sz[d]) * b[d];
    i /= sz[d];
  }
}

static uint64_t rnd(uint64_t *s) {
  *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
  return *s >> 33;
}

/* a random view: sizes 1..4, the strides of a dense buffer whose dims are
 * permuted (a transpose), so the view is usually not contiguous */
static int64_t make_view(uint64_t *s, int n, int64_t *sizes, int64_t *strides) {
  int perm[4] = {0, 1, 2, 3};
  for (int i = n - 1; i > 0; i--) {
    int j = (int)(rnd(s) % (uint64_t)(i + 1)), t = perm[i];
    perm[i] = perm[j];
    perm[j] = t;
  }
  for (int d = 0; d < n; d++) sizes[d] = 1 + (int64_t)(rnd(s) % 4);
  int64_t st = 1;
  for (int k = n - 1; k >= 0; k--) { /* dense in the permuted order */
    strides[perm[k]] = st;
    st *= sizes[perm[k]];
  }
  return st; /* elements */
}

static void rows_match_naive(void **state) {
  (void)state;
  uint64_t s = 12345;
  for (int iter = 0; iter < 2000; iter++) {
    int n = 1 + (int)(rnd(&s) % 4);
    int64_t sizes[4], strides[4];
    int64_t numel = make_view(&s, n, sizes, strides);
    uint32_t mask = (uint32_t)(rnd(&s) % (1u << n));
    double *x = malloc(sizeof(double) * (size_t)numel);
    for (int64_t i = 0; i < numel; i++) x[i] = (double)(rnd(&s) % 1000);
    /* reduction: naive sums over the reduced dims, y dense over the kept */
    double ref[256] = {0}, got[256];
    for (int i = 0; i < 256; i++) got[i] = -1;
    int64_t idx[4] = {0};
    for (int64_t lin = 0; lin < numel; lin++) {
      int64_t r = lin, xo = 0, yo = 0;
      for (int d = n - 1; d >= 0; d--) {
        idx[d] = r % sizes[d];
        r /= sizes[d];
      }
      for (int d = 0; d < n; d++) {
        xo += idx[d] * strides[d];
        if (!(mask >> d & 1)) yo = yo * sizes[d] + idx[d];
      }
      ref[yo] += x[xo];
    }
    cuda_rows g = ops_cuda_rows(n, sizes, strides, mask, false);
    int64_t rows = 1, count = 1;
    for (int d = 0; d < g.nouter; d++) rows *= g.outer[d];
    for (int d = 0; d < g.ninner; d++) count *= g.inner[d];
    for (int64_t r = 0; r < rows; r++) {
      int64_t xo, yo, xi, unused;
      walk(r, g.nouter, g.outer, g.x_outer, g.y_outer, &xo, &yo);
      double acc = 0;
      for (int64_t i = 0; i < count; i++) {
        walk(i, g.ninner, g.inner, g.x_inner, g.x_inner, &xi, &unused);
        acc += x[xo + xi];
      }
      got[yo] = acc;
    }
    for (int64_t r = 0; r < rows; r++)
      if (got[r] != ref[r])
        fail_msg("iter %d (n %d, mask %u): y[%lld] %g, naive %g", iter, n,
                 mask, (long long)r, got[r], ref[r]);
    /* row ops: every element lands at its dense position in y */
    g = ops_cuda_rows(n, sizes, strides, mask, true);
    double *y = calloc((size_t)numel, sizeof *y);
    rows = 1;
    count = 1;
    for (int d = 0; d < g.nouter; d++) rows *= g.outer[d];
    for (int d = 0; d < g.ninner; d++) count *= g.inner[d];
    for (int64_t r = 0; r < rows; r++) {
      int64_t xo, yo, xi, yi;
      walk(r, g.nouter, g.outer, g.x_outer, g.y_outer, &xo, &yo);
      for (int64_t i = 0; i < count; i++) {
        walk(i, g.ninner, g.inner, g.x_inner, g.y_inner, &xi, &yi);
        y[yo + yi] = x[xo + xi];
      }
    }
    for (int64_t lin = 0; lin < numel; lin++) {
      int64_t r = lin, xo = 0;
      for (int d = n - 1; d >= 0; d--) {
        xo += (r % sizes[d]) * strides[d];
        r /= sizes[d];
      }
      if (y[lin] != x[xo])
        fail_msg("iter %d: row op element %lld misplaced", iter, (long long)lin);
    }
    free(y);
    free(x);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(broadcast),
      cmocka_unit_test(rows_match_naive),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
