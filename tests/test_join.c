/* dt_cat, dt_stack, dt_split, dt_chunk against reference loops written here:
 * every dtype, mixed-dtype promotion (expected dtypes hand-written from
 * PyTorch's promote_types), non-contiguous inputs, size-0 pieces, the
 * legacy skip of [0] inputs in cat, negative dims, the errors; split/chunk
 * pieces are views (shared storage, offsets computed by hand). */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "support/testutil.h"

typedef struct input { dt_tensor *t; double *v; dt_shape s; } input;

/* values that every dtype holds exactly and every wider dtype keeps */
static input make_input(dt_shape s, dt_dtype d, uint64_t seed) {
  input in = {.s = s};
  double lo = d == DT_UINT8 ? 0 : -50, hi = d == DT_UINT8 ? 100 : 50;
  in.t = tu_random(s, d, seed, lo, hi, &in.v);
  return in;
}

static void free_inputs(input *in, int n) {
  for (int i = 0; i < n; i++) {
    dt_tensor_release(in[i].t);
    free(in[i].v);
  }
}

static bool legacy_skipped(dt_shape s) { return s.ndim == 1 && s.dims[0] == 0; }

/* element o of cat(in, dim) found by walking the inputs along dim */
static double *ref_cat(const input *in, int n, int dim, dt_shape out,
                       dt_dtype od) {
  int64_t m = tu_numel(out);
  double *w = malloc(sizeof(double) * (size_t)(m ? m : 1));
  for (int64_t o = 0; o < m; o++) {
    int64_t idx[DT_MAX_DIMS];
    tu_unravel(o, out, idx);
    int i = 0;
    for (;; i++) {
      if (legacy_skipped(in[i].s)) continue;
      if (idx[dim] < in[i].s.dims[dim]) break;
      idx[dim] -= in[i].s.dims[dim];
    }
    w[o] = tu_round(in[i].v[tu_ravel(idx, in[i].s)], od);
  }
  return w;
}

/* element o of stack(in, dim): input idx[dim], the other indices in order */
static double *ref_stack(const input *in, int dim, dt_shape out, dt_dtype od) {
  int64_t m = tu_numel(out);
  double *w = malloc(sizeof(double) * (size_t)(m ? m : 1));
  for (int64_t o = 0; o < m; o++) {
    int64_t idx[DT_MAX_DIMS], sub[DT_MAX_DIMS];
    tu_unravel(o, out, idx);
    for (int k = 0, j = 0; k < out.ndim; k++)
      if (k != dim) sub[j++] = idx[k];
    const input *x = &in[idx[dim]];
    w[o] = tu_round(x->v[tu_ravel(sub, x->s)], od);
  }
  return w;
}

/* cat (stack: !cat) of `in` along dim: shape, dtype, a contiguous result
 * (cat: in fresh storage), values */
static void check_join(bool cat, input *in, int n, int dim, int wrapped,
                       dt_shape out, dt_dtype od) {
  const char *op = cat ? "dt_cat" : "dt_stack";
  dt_tensor *ts[8] = {0};
  for (int i = 0; i < n; i++) ts[i] = in[i].t;
  dt_tensor *r = cat ? dt_cat(ts, n, dim) : dt_stack(ts, n, dim);
  if (!r) fail_msg("%s: %s", op, dt_last_error());
  tu_assert_shape(r, out, op);
  assert_int_equal(dt_tensor_dtype(r), od);
  assert_true(dt_tensor_is_contiguous(r));
  for (int i = 0; cat && i < n; i++)
    assert_false(dt_tensor_shares_storage(r, ts[i]));
  double *got = tu_values(r);
  double *want = cat ? ref_cat(in, n, wrapped, out, od)
                     : ref_stack(in, wrapped, out, od);
  tu_assert_close(got, want, tu_numel(out), 0, 0, cat ? "cat" : "stack");
  free(got);
  free(want);
  dt_tensor_release(r);
}

static void check_cat(input *in, int n, int dim, int wrapped, dt_shape out,
                      dt_dtype od) {
  check_join(true, in, n, dim, wrapped, out, od);
}

static void check_stack(input *in, int n, int dim, int wrapped, dt_shape out,
                        dt_dtype od) {
  check_join(false, in, n, dim, wrapped, out, od);
}

/* replaces in->t by a non-contiguous (0-d: offset) view with the same
 * values */
static void make_noncontig(input *in) {
  tu_make_noncontig(&in->t);
  if (in->s.ndim > 0) assert_false(dt_tensor_is_contiguous(in->t));
  else assert_int_equal(dt_tensor_storage_offset(in->t), 1); /* 0-d: offset */
}

static void test_cat_every_dtype(void **state) {
  (void)state;
  tu_leaks_begin_clear();
  for (int k = 0; k < 8; k++) {
    dt_dtype d = tu_all_dtypes[k];
    input in[3] = {make_input(DT_SHAPE(2, 3, 4), d, 1),
                   make_input(DT_SHAPE(2, 1, 4), d, 2),
                   make_input(DT_SHAPE(2, 2, 4), d, 3)};
    check_cat(in, 3, 1, 1, DT_SHAPE(2, 6, 4), d);
    check_cat(in, 3, -2, 1, DT_SHAPE(2, 6, 4), d);
    make_noncontig(&in[0]);
    make_noncontig(&in[2]);
    check_cat(in, 3, 1, 1, DT_SHAPE(2, 6, 4), d);
    free_inputs(in, 3);

    input a[2] = {make_input(DT_SHAPE(2, 3), d, 4),
                  make_input(DT_SHAPE(1, 3), d, 5)};
    check_cat(a, 2, 0, 0, DT_SHAPE(3, 3), d);
    check_cat(a, 2, -2, 0, DT_SHAPE(3, 3), d);
    check_cat(a, 1, 0, 0, DT_SHAPE(2, 3), d); /* one input: still a copy */
    free_inputs(a, 2);

    input b[2] = {make_input(DT_SHAPE(3, 2), d, 6),
                  make_input(DT_SHAPE(3, 5), d, 7)};
    make_noncontig(&b[1]);
    check_cat(b, 2, -1, 1, DT_SHAPE(3, 7), d);
    free_inputs(b, 2);
  }
  tu_leaks_end();
}

/* transposed and broadcast inputs (strides permuted or 0, not a slice) */
static void test_cat_strided_inputs(void **state) {
  (void)state;
  tu_leaks_begin_clear();
  input a = make_input(DT_SHAPE(4, 3), DT_FLOAT32, 11);
  input t = {.s = DT_SHAPE(3, 4)};
  t.t = dt_transpose(a.t, 0, 1);
  t.v = malloc(sizeof(double) * 12);
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 4; j++) t.v[i * 4 + j] = a.v[j * 3 + i];
  input b = make_input(DT_SHAPE(3, 2), DT_FLOAT64, 12);
  input in[2] = {t, b};
  check_cat(in, 2, 1, 1, DT_SHAPE(3, 6), DT_FLOAT64);
  input s[2] = {b, t};
  check_cat(s, 2, 1, 1, DT_SHAPE(3, 6), DT_FLOAT64);
  /* a broadcast input (stride 0) */
  input x = make_input(DT_SHAPE(3, 1), DT_INT64, 13);
  input e = {.s = DT_SHAPE(3, 4)};
  e.t = dt_expand(x.t, DT_SHAPE(3, 4));
  e.v = malloc(sizeof(double) * 12);
  for (int k = 0; k < 12; k++) e.v[k] = x.v[k / 4];
  input xe[2] = {e, b};
  check_cat(xe, 2, -1, 1, DT_SHAPE(3, 6), DT_FLOAT64);
  check_stack(xe, 1, 2, 2, DT_SHAPE(3, 4, 1), DT_INT64);
  free_inputs(&e, 1);
  free_inputs(&x, 1);
  free_inputs(in, 2);
  free_inputs(&a, 1);
  tu_leaks_end();
}

typedef struct promo { int n; dt_dtype in[3]; dt_dtype want; } promo;
/* PyTorch's torch.promote_types, by hand */
static const promo promos[] = {
    {2, {DT_FLOAT16, DT_BFLOAT16}, DT_FLOAT32},
    {2, {DT_UINT8, DT_INT32}, DT_INT32},
    {2, {DT_BOOL, DT_UINT8}, DT_UINT8},
    {2, {DT_INT64, DT_FLOAT16}, DT_FLOAT16},
    {2, {DT_FLOAT32, DT_FLOAT64}, DT_FLOAT64},
    {2, {DT_INT32, DT_INT64}, DT_INT64},
    {2, {DT_BOOL, DT_BOOL}, DT_BOOL},
    {3, {DT_BOOL, DT_INT32, DT_UINT8}, DT_INT32},
    {3, {DT_UINT8, DT_BOOL, DT_BFLOAT16}, DT_BFLOAT16},
    {3, {DT_INT64, DT_FLOAT32, DT_BFLOAT16}, DT_FLOAT32},
};

static void test_mixed_dtypes(void **state) {
  (void)state;
  tu_leaks_begin_clear();
  for (size_t p = 0; p < sizeof promos / sizeof *promos; p++) {
    const promo *q = &promos[p];
    input c[3], s[3];
    for (int i = 0; i < q->n; i++) {
      c[i] = make_input(DT_SHAPE(2, i + 1), q->in[i], 20 + (uint64_t)i);
      s[i] = make_input(DT_SHAPE(2, 3), q->in[i], 30 + (uint64_t)i);
    }
    make_noncontig(&c[0]);
    int64_t w = q->n == 2 ? 3 : 6;
    check_cat(c, q->n, 1, 1, DT_SHAPE(2, w), q->want);
    check_stack(s, q->n, 1, 1, DT_SHAPE(2, q->n, 3), q->want);
    free_inputs(c, q->n);
    free_inputs(s, q->n);
  }
  tu_leaks_end();
}

/* cat/stack copy an int64 into a float32 output with one rounding, as
 * dt_cast and the C cast (float)x. Regression: the copy went through
 * double and gave 2^60 for 2^60 + 2^36 + 1 (want 2^60 + 2^37). */
static void test_int64_into_float32_rounds_once(void **state) {
  (void)state;
  tu_leaks_begin_clear();
  int64_t x[2] = {(INT64_C(1) << 60) + (INT64_C(1) << 36) + 1,
                  -((INT64_C(1) << 60) + (INT64_C(1) << 36) + 1)};
  float want[2] = {(float)x[0], (float)x[1]};
  assert_true(want[0] == 1152921642045800448.0f); /* 2^60 + 2^37 */
  dt_tensor *i = dt_from_host(x, DT_SHAPE(2), &(dt_tensor_options){.dtype = DT_INT64});
  dt_tensor *f = dt_zeros(DT_SHAPE(2), NULL);
  dt_tensor *c = dt_cat((dt_tensor *[]){f, i}, 2, 0);
  dt_tensor *s = dt_stack((dt_tensor *[]){f, i}, 2, 0);
  assert_non_null(c);
  assert_non_null(s);
  assert_int_equal(dt_tensor_dtype(c), DT_FLOAT32);
  assert_int_equal(dt_tensor_dtype(s), DT_FLOAT32);
  float gc[4], gs[4];
  assert_int_equal(dt_to_host(c, gc, sizeof gc), DT_OK);
  assert_int_equal(dt_to_host(s, gs, sizeof gs), DT_OK);
  for (int k = 0; k < 2; k++) {
    if (gc[2 + k] != want[k] || gs[2 + k] != want[k])
      fail_msg("int64 %lld into float32: cat %.1f, stack %.1f, want %.1f",
               (long long)x[k], (double)gc[2 + k], (double)gs[2 + k],
               (double)want[k]);
  }
  TU_RELEASE(s, c, f, i);
  tu_leaks_end();
}

static void test_stack_every_dtype(void **state) {
  (void)state;
  tu_leaks_begin_clear();
  for (int k = 0; k < 8; k++) {
    dt_dtype d = tu_all_dtypes[k];
    input in[3] = {make_input(DT_SHAPE(2, 3), d, 40),
                   make_input(DT_SHAPE(2, 3), d, 41),
                   make_input(DT_SHAPE(2, 3), d, 42)};
    check_stack(in, 3, 0, 0, DT_SHAPE(3, 2, 3), d);
    check_stack(in, 3, 1, 1, DT_SHAPE(2, 3, 3), d);
    check_stack(in, 3, 2, 2, DT_SHAPE(2, 3, 3), d);   /* dim == ndim */
    check_stack(in, 3, -1, 2, DT_SHAPE(2, 3, 3), d);
    check_stack(in, 3, -3, 0, DT_SHAPE(3, 2, 3), d);
    make_noncontig(&in[1]);
    check_stack(in, 3, 1, 1, DT_SHAPE(2, 3, 3), d);
    check_stack(in, 1, 0, 0, DT_SHAPE(1, 2, 3), d);
    free_inputs(in, 3);
    /* 0-d inputs stack into a vector */
    input z[2] = {make_input(DT_SHAPE(), d, 43), make_input(DT_SHAPE(), d, 44)};
    make_noncontig(&z[1]);
    check_stack(z, 2, 0, 0, DT_SHAPE(2), d);
    check_stack(z, 2, -1, 0, DT_SHAPE(2), d);
    free_inputs(z, 2);
  }
  tu_leaks_end();
}

static void test_size_zero(void **state) {
  (void)state;
  tu_leaks_begin_clear();
  input a[2] = {make_input(DT_SHAPE(2, 0, 3), DT_INT32, 50),
                make_input(DT_SHAPE(2, 4, 3), DT_INT32, 51)};
  check_cat(a, 2, 1, 1, DT_SHAPE(2, 4, 3), DT_INT32);
  free_inputs(a, 2);
  input b[2] = {make_input(DT_SHAPE(0, 3), DT_FLOAT32, 52),
                make_input(DT_SHAPE(0, 3), DT_FLOAT32, 53)};
  check_cat(b, 2, 0, 0, DT_SHAPE(0, 3), DT_FLOAT32);
  check_cat(b, 2, 1, 1, DT_SHAPE(0, 6), DT_FLOAT32);
  check_stack(b, 2, 1, 1, DT_SHAPE(0, 2, 3), DT_FLOAT32);
  free_inputs(b, 2);
  input e[2] = {make_input(DT_SHAPE(0), DT_BOOL, 54),
                make_input(DT_SHAPE(0), DT_UINT8, 55)};
  check_cat(e, 2, 0, 0, DT_SHAPE(0), DT_UINT8);   /* all skipped */
  check_cat(e, 2, -1, 0, DT_SHAPE(0), DT_UINT8);
  check_stack(e, 2, 0, 0, DT_SHAPE(2, 0), DT_UINT8);
  free_inputs(e, 2);
  tu_leaks_end();
}

/* cat's legacy rule: a 1-d [0] input is skipped for shapes, not dtypes */
static void test_cat_legacy_skip(void **state) {
  (void)state;
  tu_leaks_begin_clear();
  input in[4] = {make_input(DT_SHAPE(0), DT_FLOAT64, 60),
                 make_input(DT_SHAPE(2, 3), DT_INT32, 61),
                 make_input(DT_SHAPE(0), DT_INT32, 62),
                 make_input(DT_SHAPE(1, 3), DT_INT32, 63)};
  check_cat(in, 4, 0, 0, DT_SHAPE(3, 3), DT_FLOAT64);
  check_cat(&in[1], 3, -2, 0, DT_SHAPE(3, 3), DT_INT32);
  check_cat(in, 2, 1, 1, DT_SHAPE(2, 3), DT_FLOAT64); /* dim wraps on [2, 3] */
  free_inputs(in, 4);
  /* a 2-d empty tensor is not skipped: its sizes must match */
  input m[2] = {make_input(DT_SHAPE(0, 3), DT_FLOAT32, 64),
                make_input(DT_SHAPE(2, 4), DT_FLOAT32, 65)};
  dt_tensor *ts[2] = {m[0].t, m[1].t};
  tu_expect_error(dt_cat(ts, 2, 0), DT_ERR_SHAPE, "dt_cat", "tensors[1]",
                  "[2, 4]", "[0, 3]", NULL);
  free_inputs(m, 2);
  tu_leaks_end();
}

static void test_join_errors(void **state) {
  (void)state;
  tu_leaks_begin_clear();
  dt_tensor *a = dt_zeros(DT_SHAPE(2, 3), NULL),
            *b = dt_zeros(DT_SHAPE(2, 4), NULL);
  dt_tensor *s = dt_zeros(DT_SHAPE(), NULL),
            *c3 = dt_zeros(DT_SHAPE(2, 3, 1), NULL);
  dt_tensor *e8 = dt_zeros(DT_SHAPE(1, 1, 1, 1, 1, 1, 1, 1), NULL);
  dt_tensor *ab[2] = {a, b}, *an[3] = {a, a, NULL}, *as[2] = {a, s};
  dt_tensor *a3[2] = {a, c3};
  tu_expect_error(dt_cat(NULL, 2, 0), DT_ERR_INVALID_ARGUMENT, "dt_cat",
                  "tensors is NULL", NULL);
  tu_expect_error(dt_cat(ab, 0, 0), DT_ERR_INVALID_ARGUMENT, "dt_cat", "n = 0",
                  NULL);
  tu_expect_error(dt_stack(ab, -3, 0), DT_ERR_INVALID_ARGUMENT, "dt_stack",
                  "n = -3", NULL);
  tu_expect_error(dt_cat(an, 3, 0), DT_ERR_INVALID_ARGUMENT, "dt_cat",
                  "tensors[2] is NULL", NULL);
  tu_expect_error(dt_stack(an, 3, 0), DT_ERR_INVALID_ARGUMENT, "dt_stack",
                  "tensors[2]", NULL);
  /* a NULL entry keeps the error of the call that made it */
  an[2] = dt_add(a, b);
  assert_null(an[2]);
  tu_expect_error(dt_cat(an, 3, 0), DT_ERR_SHAPE, "dt_add", "[2, 3]", "[2, 4]",
                  NULL);
  tu_expect_error(dt_cat(as, 2, 0), DT_ERR_SHAPE, "dt_cat", "tensors[1]", "0-d",
                  NULL);
  tu_expect_error(dt_cat(ab, 2, 0), DT_ERR_SHAPE, "dt_cat", "tensors[1]",
                  "[2, 4]", "[2, 3]", "dim 0", NULL);
  tu_expect_error(dt_cat(a3, 2, 0), DT_ERR_SHAPE, "dt_cat", "[2, 3, 1]", NULL);
  tu_expect_error(dt_cat(ab, 2, 2), DT_ERR_INVALID_ARGUMENT, "dt_cat", "dim 2",
                  "2-d", NULL);
  tu_expect_error(dt_cat(ab, 2, -3), DT_ERR_INVALID_ARGUMENT, "dt_cat",
                  "dim -3", NULL);
  tu_expect_error(dt_stack(ab, 2, 0), DT_ERR_SHAPE, "dt_stack", "tensors[1]",
                  "[2, 4]", "[2, 3]", NULL);
  tu_expect_error(dt_stack(as, 2, 0), DT_ERR_SHAPE, "dt_stack", "[]", NULL);
  dt_tensor *aa[2] = {a, a};
  tu_expect_error(dt_stack(aa, 2, 3), DT_ERR_INVALID_ARGUMENT, "dt_stack",
                  "dim 3", "[-3, 2]", NULL);
  tu_expect_error(dt_stack(aa, 2, -4), DT_ERR_INVALID_ARGUMENT, "dt_stack",
                  "dim -4", NULL);
  dt_tensor *ee[2] = {e8, e8};
  tu_expect_error(dt_stack(ee, 2, 0), DT_ERR_SHAPE, "dt_stack", "8", NULL);
  dt_tensor *ss[1] = {s};
  tu_expect_error(dt_cat(ss, 1, 0), DT_ERR_SHAPE, "dt_cat", "tensors[0]", NULL);
  dt_tensor_release(a); dt_tensor_release(b); dt_tensor_release(s);
  dt_tensor_release(c3); dt_tensor_release(e8);
  tu_leaks_end();
}

/* ---- split / chunk */

/* piece p of `a` (values av, shape as) along dim starts at `start`: its
 * shape, strides (a's), storage offset and values */
static void check_piece(dt_tensor *p, dt_tensor *a, const double *av,
                        dt_shape as, int dim, int64_t start, int64_t len) {
  dt_shape want = as;
  want.dims[dim] = len;
  tu_assert_shape(p, want, "piece");
  dt_shape st = dt_tensor_strides(p), ast = dt_tensor_strides(a);
  for (int k = 0; k < as.ndim; k++) assert_int_equal(st.dims[k], ast.dims[k]);
  assert_int_equal(dt_tensor_storage_offset(p),
                   dt_tensor_storage_offset(a) + start * ast.dims[dim]);
  assert_true(dt_tensor_shares_storage(p, a));
  assert_int_equal(dt_tensor_dtype(p), dt_tensor_dtype(a));
  double *got = tu_values(p);
  for (int64_t o = 0; o < tu_numel(want); o++) {
    int64_t idx[DT_MAX_DIMS];
    tu_unravel(o, want, idx);
    idx[dim] += start;
    if (got[o] != av[tu_ravel(idx, as)])
      fail_msg("piece element %lld: got %g want %g", (long long)o, got[o],
               av[tu_ravel(idx, as)]);
  }
  free(got);
}

/* the n pieces in out that `op` (dt_split or dt_chunk) made of a (values
 * av) along dim: npieces of them, of lengths lens, in order */
static void check_pieces(const char *op, int n, dt_tensor **out, dt_tensor *a,
                         const double *av, int wrapped, const int64_t *lens,
                         int npieces) {
  if (n < 0) fail_msg("%s: %s", op, dt_last_error());
  assert_int_equal(n, npieces);
  int64_t start = 0;
  for (int i = 0; i < n; i++) {
    check_piece(out[i], a, av, dt_tensor_shape(a), wrapped, start, lens[i]);
    start += lens[i];
    dt_tensor_release(out[i]);
  }
}

/* split(a, size, dim) must give pieces of the given lengths */
static void check_split(dt_tensor *a, const double *av, int64_t size, int dim,
                        int wrapped, const int64_t *lens, int npieces) {
  dt_tensor *out[16];
  int n = dt_split(a, size, dim, out, 16);
  check_pieces("dt_split", n, out, a, av, wrapped, lens, npieces);
}

static void check_chunk(dt_tensor *a, const double *av, int chunks, int dim,
                        int wrapped, const int64_t *lens, int npieces) {
  dt_tensor *out[16];
  int n = dt_chunk(a, chunks, dim, out, 16);
  check_pieces("dt_chunk", n, out, a, av, wrapped, lens, npieces);
}

static void test_split(void **state) {
  (void)state;
  tu_leaks_begin_clear();
  for (int k = 0; k < 8; k++) {
    double *v;
    dt_tensor *a = tu_random(DT_SHAPE(7, 5), tu_all_dtypes[k], 70, 0, 100, &v);
    check_split(a, v, 3, 0, 0, (int64_t[]){3, 3, 1}, 3);
    check_split(a, v, 2, -1, 1, (int64_t[]){2, 2, 1}, 3);
    check_split(a, v, 7, 0, 0, (int64_t[]){7}, 1);
    check_split(a, v, 100, -2, 0, (int64_t[]){7}, 1);
    check_split(a, v, 1, 1, 1, (int64_t[]){1, 1, 1, 1, 1}, 5);
    dt_tensor_release(a);
    free(v);
  }
  tu_leaks_end();
}

/* pieces of a transposed view and of a narrowed (offset) view */
static void test_split_views(void **state) {
  (void)state;
  tu_leaks_begin_clear();
  double *v;
  dt_tensor *a = tu_random(DT_SHAPE(7, 5), DT_FLOAT32, 71, -1, 1, &v);
  dt_tensor *t = dt_transpose(a, 0, 1);
  double tv[35];
  for (int i = 0; i < 5; i++)
    for (int j = 0; j < 7; j++) tv[i * 7 + j] = v[j * 5 + i];
  check_split(t, tv, 3, 1, 1, (int64_t[]){3, 3, 1}, 3);
  check_chunk(t, tv, 2, 0, 0, (int64_t[]){3, 2}, 2);
  dt_tensor *n = dt_narrow(a, 0, 1, 6);
  assert_int_equal(dt_tensor_storage_offset(n), 5);
  check_split(n, v + 5, 4, 0, 0, (int64_t[]){4, 2}, 2);
  check_chunk(n, v + 5, 4, 0, 0, (int64_t[]){2, 2, 2}, 3);
  /* a piece keeps the storage alive after its base goes */
  dt_tensor *out[3];
  assert_int_equal(dt_split(n, 4, 0, out, 3), 2);
  dt_tensor_release(a);
  dt_tensor_release(t);
  dt_tensor_release(n);
  double *got = tu_values(out[1]);
  tu_assert_close(got, v + 25, 10, 0, 0, "piece after base release");
  free(got);
  dt_tensor_release(out[0]);
  dt_tensor_release(out[1]);
  free(v);
  tu_leaks_end();
}

static void test_split_out_buffer(void **state) {
  (void)state;
  tu_leaks_begin_clear();
  dt_tensor *a = dt_arange(0, 10, 1, NULL);
  int64_t live = dt_live_tensors();
  assert_int_equal(dt_split(a, 3, 0, NULL, 0), 4);  /* a count query */
  assert_int_equal(dt_chunk(a, 3, 0, NULL, 0), 3);
  assert_int_equal(dt_live_tensors(), live);
  dt_tensor *out[4] = {NULL, NULL, NULL, (dt_tensor *)&live};
  assert_int_equal(dt_split(a, 3, 0, out, 2), 4);   /* only 2 written */
  assert_int_equal(dt_live_tensors(), live + 2);
  assert_ptr_equal(out[2], NULL);
  assert_ptr_equal(out[3], (dt_tensor *)&live);
  assert_int_equal(dt_tensor_storage_offset(out[1]), 3);
  dt_tensor_release(out[0]);
  dt_tensor_release(out[1]);
  /* split shows up as narrow ops (it is a composite) */
  dt_op_counter *cnt = dt_op_counter_push();
  assert_non_null(cnt);
  assert_int_equal(dt_split(a, 4, 0, out, 4), 3);
  assert_int_equal(dt_op_counter_pop(cnt), DT_OK);
  assert_int_equal(dt_op_counter_get(cnt, "narrow"), 3);
  assert_int_equal(dt_op_counter_total(cnt), 3);
  dt_op_counter_free(cnt);
  for (int i = 0; i < 3; i++) dt_tensor_release(out[i]);
  dt_tensor_release(a);
  tu_leaks_end();
}

static void test_chunk(void **state) {
  (void)state;
  tu_leaks_begin_clear();
  double *v;
  dt_tensor *a = tu_random(DT_SHAPE(5, 6), DT_INT64, 80, -9, 9, &v);
  check_chunk(a, v, 3, 0, 0, (int64_t[]){2, 2, 1}, 3);
  check_chunk(a, v, 4, 1, 1, (int64_t[]){2, 2, 2}, 3);   /* fewer than 4 */
  check_chunk(a, v, 5, -1, 1, (int64_t[]){2, 2, 2}, 3);
  check_chunk(a, v, 6, -1, 1, (int64_t[]){1, 1, 1, 1, 1, 1}, 6);
  check_chunk(a, v, 9, 0, 0, (int64_t[]){1, 1, 1, 1, 1}, 5);
  check_chunk(a, v, 1, 0, 0, (int64_t[]){5}, 1);
  dt_tensor_release(a);
  free(v);
  tu_leaks_end();
}

static void expect_split_error(int got, dt_status want, const char *s1,
                               const char *s2) {
  assert_int_equal(got, -1);
  tu_expect_status(dt_last_status(), want, s1, s2, NULL);
}

static void test_split_size_zero(void **state) {
  (void)state;
  tu_leaks_begin_clear();
  double v[1] = {0};
  dt_tensor *e = dt_zeros(DT_SHAPE(3, 0), NULL);
  check_split(e, v, 2, 1, 1, (int64_t[]){0}, 1);   /* one empty piece */
  check_split(e, v, 0, 1, 1, (int64_t[]){0}, 1);   /* 0 allowed here */
  check_chunk(e, v, 3, 1, 1, (int64_t[]){0, 0, 0}, 3);
  dt_tensor *out[2];
  expect_split_error(dt_split(e, 0, 0, out, 2), DT_ERR_INVALID_ARGUMENT,
                     "dt_split", "split_size 0 is invalid for dim 0 of size 3");
  dt_tensor_release(e);
  tu_leaks_end();
}

static void test_split_errors(void **state) {
  (void)state;
  tu_leaks_begin_clear();
  dt_tensor *a = dt_zeros(DT_SHAPE(4, 6), NULL), *s = dt_zeros(DT_SHAPE(), NULL);
  dt_tensor *out[4];
  expect_split_error(dt_split(NULL, 2, 0, out, 4), DT_ERR_INVALID_ARGUMENT,
                     "dt_split", "a is NULL");
  expect_split_error(dt_chunk(NULL, 2, 0, out, 4), DT_ERR_INVALID_ARGUMENT,
                     "dt_chunk", "a is NULL");
  expect_split_error(dt_split(a, -1, 0, out, 4), DT_ERR_INVALID_ARGUMENT,
                     "dt_split", "split_size -1");
  expect_split_error(dt_split(a, 0, 1, out, 4), DT_ERR_INVALID_ARGUMENT,
                     "dt_split", "split_size 0");
  expect_split_error(dt_split(a, 2, 2, out, 4), DT_ERR_INVALID_ARGUMENT,
                     "dt_split", "dim 2");
  expect_split_error(dt_chunk(a, 2, -3, out, 4), DT_ERR_INVALID_ARGUMENT,
                     "dt_chunk", "dim -3");
  expect_split_error(dt_split(s, 1, 0, out, 4), DT_ERR_SHAPE, "dt_split", "0-d");
  expect_split_error(dt_chunk(s, 1, 0, out, 4), DT_ERR_SHAPE, "dt_chunk", "0-d");
  expect_split_error(dt_chunk(a, 0, 0, out, 4), DT_ERR_INVALID_ARGUMENT,
                     "dt_chunk", "chunks");
  expect_split_error(dt_chunk(a, -2, 0, out, 4), DT_ERR_INVALID_ARGUMENT,
                     "dt_chunk", "-2");
  expect_split_error(dt_split(a, 2, 0, out, -1), DT_ERR_INVALID_ARGUMENT,
                     "dt_split", "max_out -1");
  expect_split_error(dt_split(a, 2, 0, NULL, 3), DT_ERR_INVALID_ARGUMENT,
                     "dt_split", "out is NULL");
  /* more pieces than an int counts: a broadcast view costs no memory */
  dt_tensor *one = dt_zeros(DT_SHAPE(1), NULL);
  dt_tensor *huge = dt_expand(one, DT_SHAPE(3000000000LL));
  assert_non_null(huge);
  expect_split_error(dt_split(huge, 1, 0, NULL, 0), DT_ERR_INVALID_ARGUMENT,
                     "dt_split", "3000000000");
  assert_int_equal(dt_split(huge, 1000000000LL, 0, NULL, 0), 3);
  /* a NULL input keeps the error of the call that made it */
  dt_tensor *bad = dt_view(a, DT_SHAPE(5));
  expect_split_error(dt_split(bad, 1, 0, out, 4), DT_ERR_SHAPE, "dt_view", "[5]");
  dt_tensor_release(huge); dt_tensor_release(one);
  dt_tensor_release(a); dt_tensor_release(s);
  tu_leaks_end();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_cat_every_dtype),
      cmocka_unit_test(test_cat_strided_inputs),
      cmocka_unit_test(test_mixed_dtypes),
      cmocka_unit_test(test_int64_into_float32_rounds_once),
      cmocka_unit_test(test_stack_every_dtype),
      cmocka_unit_test(test_size_zero),
      cmocka_unit_test(test_cat_legacy_skip),
      cmocka_unit_test(test_join_errors),
      cmocka_unit_test(test_split),
      cmocka_unit_test(test_split_views),
      cmocka_unit_test(test_split_out_buffer),
      cmocka_unit_test(test_chunk),
      cmocka_unit_test(test_split_size_zero),
      cmocka_unit_test(test_split_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
