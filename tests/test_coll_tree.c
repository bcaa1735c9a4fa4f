/* The reduction tree of the collectives (sim/coll_reduce.h): node (lo, hi)
 * of the tree over [0, n) is in[lo] when hi - lo == 1, else node(lo, mid)
 * op node(mid, hi) with mid = lo + (hi - lo) / 2, carried in the compute
 * type and rounded once. Checked against a naive recursion written here,
 * element by element in double / int64 (float32 per step for the narrow
 * float dtypes), for n = 1..13 members, every dtype and op, with NaN, inf,
 * -0.0 and integer overflow among the inputs:
 *   - sim_coll_tree_reduce from random tilings of random tree nodes into
 *     tree nodes, some given as the members' inputs, some as partials in
 *     the compute type computed by the reference, into a partial or a
 *     rounded value, over the whole range and over a sub-range;
 *   - sim_coll_tree_subtrees against every tree node that is all mine
 *     under a parent that is not, for every mask of up to 10 members and
 *     random ones above; a power-of-two number of processes holding
 *     consecutive blocks gets one subtree each;
 *   - two "processes" (a random mask and its complement) each reducing
 *     their maximal subtrees into partials, combined at the root: the
 *     bits of sim_coll_reduce over all inputs and of the reference;
 *   - the order is not the linear one (an input where they differ);
 *   - deep trees (blocks shrink), bad tilings and arguments. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sim/coll_reduce.h"
#include "support/testutil.h"

#define MAXN 13
#define COUNT 1100 /* more than one block, with a tail */

static const dt_dtype dtypes[] = {DT_FLOAT32, DT_FLOAT16, DT_BFLOAT16,
                                  DT_FLOAT64, DT_INT32, DT_INT64, DT_UINT8,
                                  DT_BOOL};
#define NDTYPES (int)(sizeof dtypes / sizeof dtypes[0])
static const dt_reduce_op ops[] = {DT_REDUCE_SUM, DT_REDUCE_AVG,
                                   DT_REDUCE_MAX, DT_REDUCE_MIN,
                                   DT_REDUCE_PROD};
#define NOPS 5

static uint64_t rng_state = 0x243f6a8885a308d3ull;
static uint64_t rnd(void) { /* splitmix64 */
  uint64_t x = (rng_state += 0x9e3779b97f4a7c15ull);
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
static int rnd_below(int k) { return (int)(rnd() % (uint64_t)k); }

static bool is_float(dt_dtype d) {
  return d == DT_FLOAT32 || d == DT_FLOAT64 || d == DT_FLOAT16 ||
         d == DT_BFLOAT16;
}
/* the documented compute type's size: float32, float64, int64 or bool */
static size_t ct_size(dt_dtype d) {
  return d == DT_BOOL ? 1 : d == DT_FLOAT32 || d == DT_FLOAT16 ||
                                    d == DT_BFLOAT16 ? 4 : 8;
}

/* ---- inputs: special values among ordinary ones */

static void gen_elem(void *p, dt_dtype d, dt_reduce_op op) {
  uint64_t r = rnd();
  double u = (double)(r >> 11) / 9007199254740992.0;
  static const double special[] = {NAN, INFINITY, -INFINITY, -0.0, 0.0,
                                   1e30, -1e30};
  switch (d) {
  case DT_INT32: {
    int32_t x = (r & 7) == 0 ? ((r >> 8) & 1 ? INT32_MAX : INT32_MIN)
                             : (int32_t)(uint32_t)(r >> 16);
    memcpy(p, &x, 4);
    break;
  }
  case DT_INT64: {
    int64_t x = (r & 7) == 0 ? ((r >> 8) & 1 ? INT64_MAX : INT64_MIN)
                             : (int64_t)(r * 0x9e3779b97f4a7c15ull);
    memcpy(p, &x, 8);
    break;
  }
  case DT_UINT8: *(uint8_t *)p = (uint8_t)(r >> 24); break;
  case DT_BOOL: *(uint8_t *)p = (r >> 20) % 4 != 0; break;
  default:
    if ((r & 15) < 2) { /* 1 in 8: a special value */
      tu_encode(p, d, special[(r >> 4) % 7]);
    } else { /* wide range, so that association changes the result */
      double v = op == DT_REDUCE_PROD ? 0.5 + 1.5 * u
                                      : ldexp(2 * u - 1, (int)(r >> 4) % 24 - 4);
      tu_encode(p, d, v);
    }
    break;
  }
}

static void *gen_buf(int64_t count, dt_dtype d, dt_reduce_op op) {
  size_t es = dt_dtype_size(d);
  char *b = malloc((size_t)count * es + 1);
  for (int64_t i = 0; i < count; i++) gen_elem(b + (size_t)i * es, d, op);
  return b;
}

/* ---- the reference: the tree, element by element */

typedef struct val { double f; int64_t i; } val;

static int64_t ld_int(const void *p, dt_dtype d) {
  switch (d) {
  case DT_INT32: { int32_t x; memcpy(&x, p, 4); return x; }
  case DT_INT64: { int64_t x; memcpy(&x, p, 8); return x; }
  default: return *(const uint8_t *)p; /* uint8; bool is 0/1 */
  }
}

static double fcomb(double a, double b, dt_reduce_op op) {
  if (op == DT_REDUCE_MAX || op == DT_REDUCE_MIN) {
    if (isnan(a) || isnan(b)) return NAN;
    return op == DT_REDUCE_MAX ? (a > b ? a : b) : (a < b ? a : b);
  }
  return op == DT_REDUCE_PROD ? a * b : a + b;
}

static int64_t icomb(int64_t a, int64_t b, dt_dtype d, dt_reduce_op op) {
  if (d == DT_BOOL)
    return op == DT_REDUCE_PROD || op == DT_REDUCE_MIN ? (a & b) : (a | b);
  switch (op) {
  case DT_REDUCE_PROD: return (int64_t)((uint64_t)a * (uint64_t)b);
  case DT_REDUCE_MAX: return a > b ? a : b;
  case DT_REDUCE_MIN: return a < b ? a : b;
  default: return (int64_t)((uint64_t)a + (uint64_t)b);
  }
}

/* node (lo, hi) at element e; narrow floats round to float32 per step
 * (one + or * in double rounded to float is the float32 operation) */
static val ref_node(void *const *in, int lo, int hi, int64_t e, dt_dtype d,
                    dt_reduce_op op) {
  val r = {0, 0};
  if (hi - lo == 1) {
    const char *p = (const char *)in[lo] + (size_t)e * dt_dtype_size(d);
    if (is_float(d)) r.f = d == DT_FLOAT64 ? tu_decode(p, d)
                                           : (float)tu_decode(p, d);
    else r.i = ld_int(p, d);
    return r;
  }
  int mid = lo + (hi - lo) / 2;
  val a = ref_node(in, lo, mid, e, d, op), b = ref_node(in, mid, hi, e, d, op);
  if (is_float(d)) {
    r.f = fcomb(a.f, b.f, op);
    if (d != DT_FLOAT64) r.f = (float)r.f;
  } else {
    r.i = icomb(a.i, b.i, d, op);
  }
  return r;
}

/* v as a partial: its compute type's bytes */
static void put_acc(void *p, val v, dt_dtype d) {
  if (d == DT_FLOAT64) memcpy(p, &v.f, 8);
  else if (is_float(d)) { float f = (float)v.f; memcpy(p, &f, 4); }
  else if (d == DT_BOOL) *(uint8_t *)p = v.i != 0;
  else memcpy(p, &v.i, 8);
}

/* v rounded to d; AVG divides by n when root */
static void put_out(void *p, val v, dt_dtype d, dt_reduce_op op, int n,
                    bool root) {
  bool avg = root && op == DT_REDUCE_AVG;
  if (is_float(d)) {
    double f = v.f;
    if (avg) f = d == DT_FLOAT64 ? f / n : (float)((float)f / (float)n);
    tu_encode(p, d, isnan(f) ? NAN : f); /* the default quiet NaN */
    return;
  }
  int64_t x = avg ? v.i / n : v.i;
  switch (d) {
  case DT_INT32: { int32_t y = (int32_t)(uint32_t)(uint64_t)x; memcpy(p, &y, 4); break; }
  case DT_INT64: memcpy(p, &x, 8); break;
  case DT_UINT8: *(uint8_t *)p = (uint8_t)(uint64_t)x; break;
  default: *(uint8_t *)p = x != 0; break;
  }
}

/* bitwise; for a partial (fl) any NaN equals any NaN: which NaN operand
 * a + or * propagates is not part of the contract (C compilers may
 * commute them); rounded outputs hold the default quiet NaN */
static bool same(const void *a, const void *b, size_t sz, bool fl) {
  if (!memcmp(a, b, sz)) return true;
  if (!fl) return false;
  if (sz == 8) {
    double x, y;
    memcpy(&x, a, 8), memcpy(&y, b, 8);
    return isnan(x) && isnan(y);
  }
  if (sz == 4) {
    float x, y;
    memcpy(&x, a, 4), memcpy(&y, b, 4);
    return isnan(x) && isnan(y);
  }
  return false;
}

/* got[0..count) against the reference of node (lo, hi) at elements
 * off + [0, count) */
static void check_node(const void *got, void *const *in, int n, int lo,
                       int hi, int64_t off, int64_t count, dt_dtype d,
                       dt_reduce_op op, bool acc, const char *what) {
  size_t sz = acc ? ct_size(d) : dt_dtype_size(d);
  for (int64_t e = 0; e < count; e++) {
    unsigned char want[8];
    val v = ref_node(in, lo, hi, off + e, d, op);
    if (acc) put_acc(want, v, d);
    else put_out(want, v, d, op, n, lo == 0 && hi == n);
    const char *g = (const char *)got + (size_t)e * sz;
    if (!same(g, want, sz, acc && is_float(d)))
      fail_msg("%s: %s op %d n=%d node (%d, %d) %s element %lld: got %.9g "
               "want %.9g", what, dt_dtype_name(d), (int)op, n, lo, hi,
               acc ? "partial" : "rounded", (long long)(off + e),
               acc ? (d == DT_FLOAT64 ? *(const double *)(const void *)g
                      : is_float(d) ? *(const float *)(const void *)g
                      : (double)ld_int(g, d == DT_BOOL ? DT_BOOL : DT_INT64))
                   : tu_decode(g, d),
               acc ? (is_float(d) ? v.f : (double)v.i) : tu_decode(want, d));
  }
}

/* ---- random tilings */

/* a random node of the tree over [0, n) */
static void random_node(int n, int *lo, int *hi) {
  int a = 0, b = n;
  while (b - a > 1 && rnd_below(3) != 0) {
    int mid = a + (b - a) / 2;
    if (rnd() & 1) b = mid; else a = mid;
  }
  *lo = a, *hi = b;
}

/* appends a random tiling of node (lo, hi) into tree nodes */
static void random_tiling(int lo, int hi, int *tlo, int *thi, int *nt) {
  if (hi - lo == 1 || rnd_below(3) == 0) {
    tlo[*nt] = lo, thi[*nt] = hi, ++*nt;
    return;
  }
  int mid = lo + (hi - lo) / 2;
  random_tiling(lo, mid, tlo, thi, nt);
  random_tiling(mid, hi, tlo, thi, nt);
}

/* the given nodes of a tiling: a member's own input (leaves, half the
 * time) or a partial from the reference (bufs[i], malloc'd) */
static void give(sim_coll_node *nodes, void **bufs, const int *tlo,
                 const int *thi, int nt, void *const *in, int64_t count,
                 dt_dtype d, dt_reduce_op op) {
  for (int i = 0; i < nt; i++) {
    bufs[i] = NULL;
    nodes[i] = (sim_coll_node){tlo[i], thi[i], in[tlo[i]], false};
    if (thi[i] - tlo[i] == 1 && (rnd() & 1)) continue;
    char *b = malloc((size_t)count * ct_size(d));
    for (int64_t e = 0; e < count; e++)
      put_acc(b + (size_t)e * ct_size(d),
              ref_node(in, tlo[i], thi[i], e, d, op), d);
    bufs[i] = b;
    nodes[i].p = b, nodes[i].acc = true;
  }
}

static void free_all(void **b, int k) {
  for (int i = 0; i < k; i++) free(b[i]);
}

/* one random node of one (n, dtype, op), from one random tiling, into a
 * partial or a rounded value; then a sub-range of it */
static void one_tiling(void *const *in, int n, dt_dtype d, dt_reduce_op op) {
  int lo, hi, tlo[MAXN], thi[MAXN], nt = 0;
  random_node(n, &lo, &hi);
  random_tiling(lo, hi, tlo, thi, &nt);
  sim_coll_node nodes[MAXN];
  void *bufs[MAXN];
  give(nodes, bufs, tlo, thi, nt, in, COUNT, d, op);
  bool acc = rnd() & 1;
  size_t sz = acc ? ct_size(d) : dt_dtype_size(d);
  char *out = malloc(COUNT * sz);
  assert_int_equal(sim_coll_tree_reduce(nodes, nt, n, COUNT, d, op, out, acc),
                   DT_OK);
  check_node(out, in, n, lo, hi, 0, COUNT, d, op, acc, "tiling");
  /* elements [a, a + len): every pointer offset by its own element size */
  int64_t a = 1 + rnd_below(COUNT - 2), len = rnd_below((int)(COUNT - a));
  sim_coll_node sub[MAXN];
  for (int i = 0; i < nt; i++) {
    sub[i] = nodes[i];
    size_t s = nodes[i].acc ? ct_size(d) : dt_dtype_size(d);
    sub[i].p = (const char *)nodes[i].p + (size_t)a * s;
  }
  assert_int_equal(sim_coll_tree_reduce(sub, nt, n, len, d, op, out, acc),
                   DT_OK);
  check_node(out, in, n, lo, hi, a, len, d, op, acc, "sub-range");
  free(out);
  free_all(bufs, nt);
}

static void test_tilings(void **state) {
  (void)state;
  for (int n = 1; n <= MAXN; n++)
    for (int di = 0; di < NDTYPES; di++)
      for (int oi = 0; oi < NOPS; oi++) {
        dt_dtype d = dtypes[di];
        dt_reduce_op op = ops[oi];
        if (d == DT_BOOL && op == DT_REDUCE_AVG) continue;
        void *in[MAXN];
        for (int m = 0; m < n; m++) in[m] = gen_buf(COUNT, d, op);
        for (int trial = 0; trial < 4; trial++) one_tiling(in, n, d, op);
        /* sim_coll_reduce: the root from every input */
        char *out = malloc(COUNT * dt_dtype_size(d));
        void *outs[1] = {out};
        sim_coll_reduce((const void *const *)in, n, outs, 1, COUNT, d, op);
        check_node(out, in, n, 0, n, 0, COUNT, d, op, false, "reduce");
        free(out);
        free_all(in, n);
      }
}

/* ---- maximal subtrees */

/* every tree node under (lo, hi) all of whose members are mine while its
 * parent's are not (parent_all: the parent's), in order of lo */
static void brute_subtrees(int lo, int hi, bool parent_all, const bool *mine,
                           int *olo, int *ohi, int *cnt) {
  bool all = true;
  for (int m = lo; m < hi; m++) all = all && mine[m];
  if (all && !parent_all) olo[*cnt] = lo, ohi[*cnt] = hi, ++*cnt;
  if (hi - lo == 1) return;
  int mid = lo + (hi - lo) / 2;
  brute_subtrees(lo, mid, all, mine, olo, ohi, cnt);
  brute_subtrees(mid, hi, all, mine, olo, ohi, cnt);
}

static void check_subtrees(int n, const bool *mine) {
  int lo[64], hi[64], blo[64], bhi[64], nb = 0;
  int k = sim_coll_tree_subtrees(n, mine, lo, hi);
  brute_subtrees(0, n, false, mine, blo, bhi, &nb);
  assert_int_equal(k, nb);
  for (int i = 0; i < k; i++) {
    assert_int_equal(lo[i], blo[i]);
    assert_int_equal(hi[i], bhi[i]);
  }
}

static void test_subtrees(void **state) {
  (void)state;
  bool mine[64];
  for (int n = 1; n <= 10; n++)
    for (unsigned mask = 0; mask < 1u << n; mask++) {
      for (int m = 0; m < n; m++) mine[m] = mask >> m & 1;
      check_subtrees(n, mine);
    }
  for (int t = 0; t < 2000; t++) {
    int n = 11 + rnd_below(54);
    for (int m = 0; m < n; m++) mine[m] = rnd() & 1;
    check_subtrees(n, mine);
  }
  /* P processes (a power of two) of k consecutive members: one subtree
   * each, the process's block */
  for (int p = 1; p <= 8; p *= 2)
    for (int k = 1; k * p <= 64; k++)
      for (int q = 0; q < p; q++) {
        int n = k * p, lo[64], hi[64];
        for (int m = 0; m < n; m++) mine[m] = m / k == q;
        assert_int_equal(sim_coll_tree_subtrees(n, mine, lo, hi), 1);
        assert_int_equal(lo[0], q * k);
        assert_int_equal(hi[0], q * k + k);
      }
}

/* each side's maximal subtrees reduced into partials (from the members'
 * inputs, by the code under test), then all partials combined at the
 * root: the bits of the reference and of sim_coll_reduce */
static void two_processes(void *const *in, int n, dt_dtype d,
                          dt_reduce_op op) {
  bool mine[MAXN], theirs[MAXN];
  for (int m = 0; m < n; m++) mine[m] = rnd() & 1, theirs[m] = !mine[m];
  int alo[MAXN], ahi[MAXN], blo[MAXN], bhi[MAXN];
  int na = sim_coll_tree_subtrees(n, mine, alo, ahi);
  int nb = sim_coll_tree_subtrees(n, theirs, blo, bhi);
  sim_coll_node root[MAXN];
  void *bufs[MAXN];
  int nr = 0, ia = 0, ib = 0;
  while (ia < na || ib < nb) { /* merge by lo */
    bool a = ib == nb || (ia < na && alo[ia] < blo[ib]);
    int lo = a ? alo[ia] : blo[ib], hi = a ? ahi[ia++] : bhi[ib++];
    sim_coll_node leaves[MAXN];
    for (int m = lo; m < hi; m++)
      leaves[m - lo] = (sim_coll_node){m, m + 1, in[m], false};
    bufs[nr] = malloc(COUNT * ct_size(d));
    assert_int_equal(sim_coll_tree_reduce(leaves, hi - lo, n, COUNT, d, op,
                                          bufs[nr], true), DT_OK);
    root[nr] = (sim_coll_node){lo, hi, bufs[nr], true};
    nr++;
  }
  char *out = malloc(COUNT * dt_dtype_size(d));
  char *whole = malloc(COUNT * dt_dtype_size(d));
  assert_int_equal(sim_coll_tree_reduce(root, nr, n, COUNT, d, op, out,
                                        false), DT_OK);
  check_node(out, in, n, 0, n, 0, COUNT, d, op, false, "two processes");
  void *outs[1] = {whole};
  sim_coll_reduce((const void *const *)in, n, outs, 1, COUNT, d, op);
  assert_memory_equal(out, whole, COUNT * dt_dtype_size(d));
  free(out), free(whole);
  free_all(bufs, nr);
}

static void test_processes(void **state) {
  (void)state;
  for (int n = 1; n <= MAXN; n++)
    for (int di = 0; di < NDTYPES; di++)
      for (int oi = 0; oi < NOPS; oi++) {
        dt_dtype d = dtypes[di];
        dt_reduce_op op = ops[oi];
        if (d == DT_BOOL && op == DT_REDUCE_AVG) continue;
        void *in[MAXN];
        for (int m = 0; m < n; m++) in[m] = gen_buf(COUNT, d, op);
        for (int t = 0; t < 3; t++) two_processes(in, n, d, op);
        free_all(in, n);
      }
}

/* ---- the order changed */

/* ((in[0] + in[1]) + in[2]) ..., in float32 */
static float linear_f32(const float *const *in, int n, int64_t e) {
  float a = in[0][e];
  for (int m = 1; m < n; m++) a += in[m][e];
  return a;
}

static void test_not_linear(void **state) {
  (void)state;
  /* the tree over 3 is in[0] + (in[1] + in[2]) = 1; linear gives 0 */
  float x[3] = {1.0f, 1e8f, -1e8f}, got = -1;
  const void *in3[3] = {&x[0], &x[1], &x[2]};
  void *outs[1] = {&got};
  sim_coll_reduce(in3, 3, outs, 1, 1, DT_FLOAT32, DT_REDUCE_SUM);
  assert_true(got == 1.0f);
  const float *lin[3] = {&x[0], &x[1], &x[2]};
  assert_true(linear_f32(lin, 3, 0) == 0.0f);
  /* random sums of 8: some element differs from the linear order */
  float *in[8], out[COUNT];
  for (int m = 0; m < 8; m++) in[m] = gen_buf(COUNT, DT_FLOAT32, DT_REDUCE_SUM);
  void *o[1] = {out};
  sim_coll_reduce((const void *const *)in, 8, o, 1, COUNT, DT_FLOAT32,
                  DT_REDUCE_SUM);
  int differ = 0;
  for (int64_t e = 0; e < COUNT; e++) {
    float l = linear_f32((const float *const *)in, 8, e);
    differ += !isnan(l) && memcmp(&l, &out[e], 4) != 0;
  }
  assert_true(differ > 0);
  free_all((void **)in, 8);
}

/* deep trees: the block shrinks so that depth + 2 blocks fit the scratch */
static void test_deep(void **state) {
  (void)state;
  static const int ns[] = {64, 100, 1000};
  static const dt_dtype ds[] = {DT_FLOAT64, DT_FLOAT16, DT_INT32};
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 3; j++) {
      int n = ns[i];
      dt_dtype d = ds[j];
      int64_t count = 2500;
      void **in = malloc((size_t)n * sizeof *in);
      for (int m = 0; m < n; m++) in[m] = gen_buf(count, d, DT_REDUCE_SUM);
      char *out = malloc((size_t)count * dt_dtype_size(d));
      void *outs[1] = {out};
      sim_coll_reduce((const void *const *)in, n, outs, 1, count, d,
                      DT_REDUCE_SUM);
      check_node(out, in, n, 0, n, 0, count, d, DT_REDUCE_SUM, false, "deep");
      free(out);
      free_all(in, n);
      free(in);
    }
}

/* ---- misuse: a status and a message, never a crash */

static void expect_bad(const sim_coll_node *nodes, int nn, int n,
                       dt_dtype d, dt_reduce_op op, dt_status want,
                       const char *needle) {
  float out[4];
  assert_int_equal(sim_coll_tree_reduce(nodes, nn, n, 4, d, op, out, false),
                   want);
  const char *msg = dt_last_error();
  if (!strstr(msg, "sim_coll_tree_reduce") || !strstr(msg, needle))
    fail_msg("message \"%s\" lacks \"%s\"", msg, needle);
}

static void test_bad(void **state) {
  (void)state;
  float x[4] = {1, 2, 3, 4};
  /* over 3 members the nodes are (0,3), (0,1), (1,3), (1,2), (2,3) */
  sim_coll_node not_node[2] = {{0, 2, x, true}, {2, 3, x, false}};
  expect_bad(not_node, 2, 3, DT_FLOAT32, DT_REDUCE_SUM,
             DT_ERR_INVALID_ARGUMENT, "(0, 2)");
  sim_coll_node gap[2] = {{0, 1, x, false}, {2, 3, x, false}};
  expect_bad(gap, 2, 3, DT_FLOAT32, DT_REDUCE_SUM, DT_ERR_INVALID_ARGUMENT,
             "tiling");
  sim_coll_node unsorted[2] = {{1, 3, x, true}, {0, 1, x, false}};
  expect_bad(unsorted, 2, 3, DT_FLOAT32, DT_REDUCE_SUM,
             DT_ERR_INVALID_ARGUMENT, "[1, 1)");
  sim_coll_node null_p[1] = {{0, 1, NULL, false}};
  expect_bad(null_p, 1, 1, DT_FLOAT32, DT_REDUCE_SUM,
             DT_ERR_INVALID_ARGUMENT, "NULL");
  sim_coll_node one[1] = {{0, 1, x, false}};
  expect_bad(one, 1, 0, DT_FLOAT32, DT_REDUCE_SUM, DT_ERR_INVALID_ARGUMENT,
             "n 0");
  expect_bad(one, 1, 1, DT_BOOL, DT_REDUCE_AVG, DT_ERR_DTYPE, "bool");
  bool mine[1] = {true};
  int lo[1], hi[1];
  assert_int_equal(sim_coll_tree_subtrees(0, mine, lo, hi), -1);
  assert_non_null(strstr(dt_last_error(), "sim_coll_tree_subtrees"));
  assert_true(sim_coll_tree_is_node(3, 1, 3));
  assert_false(sim_coll_tree_is_node(3, 0, 2));
  assert_int_equal((int)sim_coll_acc_size(DT_FLOAT16), 4);
  assert_int_equal((int)sim_coll_acc_size(DT_UINT8), 8);
  assert_int_equal((int)sim_coll_acc_size(DT_BOOL), 1);
}

int main(void) {
  alarm(300); /* a runaway loop fails instead of hanging */
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_tilings),   cmocka_unit_test(test_subtrees),
      cmocka_unit_test(test_processes), cmocka_unit_test(test_not_linear),
      cmocka_unit_test(test_deep),      cmocka_unit_test(test_bad),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
