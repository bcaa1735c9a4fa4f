/* Emulated collectives (sim/collectives.h): the data movement, one raw
 * pthread per member, no runtime. Every collective is checked against a
 * reference computed here: reductions by a naive recursion over the
 * pairwise tree of the members (float32 accumulation for
 * float32/float16/bfloat16, as documented: the results must match bit for
 * bit), sanity-checked against a float64 sum
 * within a tolerance, and run twice for determinism; copies against the
 * concatenations they promise. Groups of 1, 2, 3, 4 and 8 members and a
 * permuted subset [6, 2, 4]; every op, every dtype (integer wrap-around,
 * NaN propagation, bool and/or), uneven counts with zeros, small (inline,
 * one phase) and large (split, two phases, streaming stores) sizes, in
 * place; the group registry; bad arguments and disagreeing members.
 * test_coll_rounds.c covers long runs, concurrency, the watchdog and
 * send/recv. */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/collectives.h"
#include "support/testutil.h"
#include "support/threads.h"

#define MAXM 8
/* generous: a bug fails the test instead of hanging it */
#define TEST_TIMEOUT_NS ((int64_t)120 * 1000 * 1000 * 1000)

/* ---- deterministic inputs and the reference reduction */

static uint64_t mix(uint64_t x) { /* splitmix64 */
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

static bool is_float(dt_dtype d) {
  return d == DT_FLOAT32 || d == DT_FLOAT64 || d == DT_FLOAT16 ||
         d == DT_BFLOAT16;
}

/* integers over their whole range (sums and products wrap), floats in
 * [-8, 8) (products: [0.5, 2)), bools mostly true (so AND is not 0) */
static void gen_elem(void *p, dt_dtype d, dt_reduce_op op, uint64_t r) {
  double u = (double)(r >> 11) / 9007199254740992.0;
  switch (d) {
  case DT_INT32: { int32_t x = (int32_t)(uint32_t)r; memcpy(p, &x, 4); break; }
  case DT_INT64: { int64_t x = (int64_t)r; memcpy(p, &x, 8); break; }
  case DT_UINT8: *(uint8_t *)p = (uint8_t)r; break;
  case DT_BOOL: *(uint8_t *)p = (r >> 20) % 5 != 0; break;
  default:
    tu_encode(p, d, op == DT_REDUCE_PROD ? 0.5 + 1.5 * u : 16 * u - 8);
    break;
  }
}

static void *gen_buf(int64_t count, dt_dtype d, dt_reduce_op op,
                     uint64_t seed) {
  size_t es = dt_dtype_size(d);
  char *b = malloc((size_t)count * es + 1);
  for (int64_t i = 0; i < count; i++)
    gen_elem(b + (size_t)i * es, d, op, mix(seed * 1000003u + (uint64_t)i));
  return b;
}

static void *garbage(int64_t count, dt_dtype d) {
  size_t bytes = (size_t)count * dt_dtype_size(d);
  void *b = malloc(bytes + 1);
  memset(b, 0xa5, bytes + 1);
  return b;
}

static int64_t ld_int(const void *p, dt_dtype d) {
  switch (d) {
  case DT_INT32: { int32_t x; memcpy(&x, p, 4); return x; }
  case DT_INT64: { int64_t x; memcpy(&x, p, 8); return x; }
  default: return *(const uint8_t *)p; /* uint8; bool is 0/1 */
  }
}

static void st_int(void *p, dt_dtype d, int64_t v) {
  switch (d) {
  case DT_INT32: {
    int32_t x = (int32_t)(uint32_t)(uint64_t)v;
    memcpy(p, &x, 4);
    break;
  }
  case DT_INT64: memcpy(p, &v, 8); break;
  case DT_UINT8: *(uint8_t *)p = (uint8_t)(uint64_t)v; break;
  default: *(uint8_t *)p = v != 0; break;
  }
}

static double fcomb(double a, double b, dt_reduce_op op) {
  if (op == DT_REDUCE_MAX || op == DT_REDUCE_MIN) {
    if (isnan(a) || isnan(b)) return NAN;
    return op == DT_REDUCE_MAX ? (a > b ? a : b) : (a < b ? a : b);
  }
  return op == DT_REDUCE_PROD ? a * b : a + b;
}

static int64_t icomb(int64_t a, int64_t b, dt_reduce_op op) {
  switch (op) {
  case DT_REDUCE_PROD: return (int64_t)((uint64_t)a * (uint64_t)b);
  case DT_REDUCE_MAX: return a > b ? a : b;
  case DT_REDUCE_MIN: return a < b ? a : b;
  default: return (int64_t)((uint64_t)a + (uint64_t)b);
  }
}

/* element `at` of node (lo, hi) of the pairwise tree over the members
 * (docs/collectives.md): a leaf is in[lo], else the halves [lo, mid) and
 * [mid, hi) with mid = lo + (hi - lo) / 2, left op right; float32 for the
 * three 32-bit-or-less float dtypes (float64 arithmetic rounded to float
 * per step: exact for one + or *), integers in 64 bits, wrapping */
static double ref_float(void *const *ins, int lo, int hi, size_t at,
                        dt_dtype d, dt_reduce_op op) {
  if (hi - lo == 1) {
    double v = tu_decode((char *)ins[lo] + at, d);
    return d == DT_FLOAT64 ? v : (float)v;
  }
  int mid = lo + (hi - lo) / 2;
  double a = ref_float(ins, lo, mid, at, d, op);
  double b = ref_float(ins, mid, hi, at, d, op);
  double r = fcomb(a, b, op);
  return d == DT_FLOAT64 ? r : (float)r;
}

static int64_t ref_int(void *const *ins, int lo, int hi, size_t at,
                       dt_dtype d, dt_reduce_op op) {
  if (hi - lo == 1) return ld_int((char *)ins[lo] + at, d);
  int mid = lo + (hi - lo) / 2;
  int64_t a = ref_int(ins, lo, mid, at, d, op);
  int64_t b = ref_int(ins, mid, hi, at, d, op);
  if (d == DT_BOOL)
    return op == DT_REDUCE_PROD || op == DT_REDUCE_MIN ? (a & b) : (a | b);
  return icomb(a, b, op);
}

/* out[e] = the tree over in[0..n)[off+e], rounded once; AVG divides the
 * root (floats in their accumulation type, integers truncating) */
static void ref_reduce(void *const *ins, int n, int64_t off, int64_t count,
                       dt_dtype d, dt_reduce_op op, void *out) {
  size_t es = dt_dtype_size(d);
  for (int64_t e = 0; e < count; e++) {
    size_t at = (size_t)(off + e) * es;
    char *o = (char *)out + (size_t)e * es;
    if (is_float(d)) {
      double a = ref_float(ins, 0, n, at, d, op);
      if (op == DT_REDUCE_AVG)
        a = d == DT_FLOAT64 ? a / n : (float)((float)a / (float)n);
      tu_encode(o, d, a);
    } else {
      int64_t a = ref_int(ins, 0, n, at, d, op);
      if (op == DT_REDUCE_AVG) a /= n;
      st_int(o, d, a);
    }
  }
}

/* ---- cases: one collective call per member, checked after the join */

typedef enum tkind {
  T_ALL_REDUCE, T_ALL_GATHER, T_REDUCE_SCATTER, T_ALL_TO_ALL, T_BROADCAST,
  T_SCATTER, T_GATHER
} tkind;
static const char *const tkind_names[] = {
  "all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast",
  "scatter", "gather"};

typedef struct ccase {
  tkind kind;
  dt_dtype d;
  dt_reduce_op op;
  int n, root;
  bool in_place;
  int64_t count;               /* all_reduce / broadcast */
  int64_t counts[MAXM];        /* blocks kinds */
  int64_t send[MAXM][MAXM];    /* all_to_all: send[i][j], i to j */
  int64_t recv[MAXM][MAXM];    /* recv[i][j] = send[j][i] */
  void *in[MAXM], *out[MAXM], *want[MAXM];
  int64_t want_elems[MAXM];
  dt_status st[MAXM];
  char msg[MAXM][256];
} ccase;

static ccase *case_new(tkind kind, int n, dt_dtype d, dt_reduce_op op) {
  ccase *c = calloc(1, sizeof *c);
  c->kind = kind, c->n = n, c->d = d, c->op = op;
  return c;
}

static void case_free(ccase *c) {
  for (int m = 0; m < c->n; m++) {
    if (c->out[m] != c->in[m]) free(c->out[m]);
    free(c->in[m]);
    free(c->want[m]);
  }
  free(c);
}

static int64_t total_of(const int64_t *counts, int n) {
  int64_t t = 0;
  for (int j = 0; j < n; j++) t += counts[j];
  return t;
}

static void *concat(void *const *bufs, const int64_t *counts, int n,
                    dt_dtype d) {
  size_t es = dt_dtype_size(d);
  char *b = malloc((size_t)total_of(counts, n) * es + 1);
  size_t off = 0;
  for (int j = 0; j < n; j++) {
    if (counts[j]) memcpy(b + off, bufs[j], (size_t)counts[j] * es);
    off += (size_t)counts[j] * es;
  }
  return b;
}

static ccase *mk_all_reduce(int n, dt_dtype d, dt_reduce_op op,
                            int64_t count, bool in_place, uint64_t seed) {
  ccase *c = case_new(T_ALL_REDUCE, n, d, op);
  c->count = count, c->in_place = in_place;
  for (int m = 0; m < n; m++)
    c->in[m] = gen_buf(count, d, op, seed * 64 + (uint64_t)m);
  for (int m = 0; m < n; m++) {
    c->want[m] = malloc((size_t)count * dt_dtype_size(d) + 1);
    ref_reduce(c->in, n, 0, count, d, op, c->want[m]);
    c->want_elems[m] = count;
    c->out[m] = in_place ? c->in[m] : garbage(count, d);
  }
  return c;
}

static ccase *mk_reduce_scatter(int n, dt_dtype d, dt_reduce_op op,
                                const int64_t *counts, uint64_t seed) {
  ccase *c = case_new(T_REDUCE_SCATTER, n, d, op);
  memcpy(c->counts, counts, (size_t)n * sizeof *counts);
  int64_t total = total_of(counts, n);
  for (int m = 0; m < n; m++)
    c->in[m] = gen_buf(total, d, op, seed * 64 + (uint64_t)m);
  for (int m = 0, off = 0; m < n; off += (int)counts[m++]) {
    c->out[m] = garbage(counts[m], d);
    c->want[m] = malloc((size_t)counts[m] * dt_dtype_size(d) + 1);
    ref_reduce(c->in, n, off, counts[m], d, op, c->want[m]);
    c->want_elems[m] = counts[m];
  }
  return c;
}

static ccase *mk_all_gather(int n, dt_dtype d, const int64_t *counts,
                            uint64_t seed) {
  ccase *c = case_new(T_ALL_GATHER, n, d, DT_REDUCE_SUM);
  memcpy(c->counts, counts, (size_t)n * sizeof *counts);
  int64_t total = total_of(counts, n);
  for (int m = 0; m < n; m++)
    c->in[m] = gen_buf(counts[m], d, DT_REDUCE_SUM, seed * 64 + (uint64_t)m);
  for (int m = 0; m < n; m++) {
    c->out[m] = garbage(total, d);
    c->want[m] = concat(c->in, counts, n, d);
    c->want_elems[m] = total;
  }
  return c;
}

/* send[i][j] elements from member i to member j */
static ccase *mk_all_to_all(int n, dt_dtype d, int64_t send[][MAXM],
                            uint64_t seed) {
  ccase *c = case_new(T_ALL_TO_ALL, n, d, DT_REDUCE_SUM);
  size_t es = dt_dtype_size(d);
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) {
      c->send[i][j] = send[i][j];
      c->recv[j][i] = send[i][j];
    }
  for (int i = 0; i < n; i++) {
    c->in[i] = gen_buf(total_of(c->send[i], n), d, DT_REDUCE_SUM,
                       seed * 64 + (uint64_t)i);
    c->out[i] = garbage(total_of(c->recv[i], n), d);
  }
  for (int i = 0; i < n; i++) { /* block j -> i sits after j's blocks < i */
    void *blocks[MAXM];
    for (int j = 0; j < n; j++)
      blocks[j] = (char *)c->in[j] + (size_t)total_of(c->send[j], i) * es;
    c->want[i] = concat(blocks, c->recv[i], n, d);
    c->want_elems[i] = total_of(c->recv[i], n);
  }
  return c;
}

static ccase *mk_broadcast(int n, dt_dtype d, int64_t count, int root,
                           uint64_t seed) {
  ccase *c = case_new(T_BROADCAST, n, d, DT_REDUCE_SUM);
  c->count = count, c->root = root;
  void *src = gen_buf(count, d, DT_REDUCE_SUM, seed);
  for (int m = 0; m < n; m++) {
    c->in[m] = c->out[m] = m == root ? src : garbage(count, d);
    c->want[m] = malloc((size_t)count * dt_dtype_size(d) + 1);
    if (count) memcpy(c->want[m], src, (size_t)count * dt_dtype_size(d));
    c->want_elems[m] = count;
  }
  return c;
}

static ccase *mk_scatter_gather(tkind kind, int n, dt_dtype d,
                                const int64_t *counts, int root,
                                uint64_t seed) {
  ccase *c = case_new(kind, n, d, DT_REDUCE_SUM);
  memcpy(c->counts, counts, (size_t)n * sizeof *counts);
  c->root = root;
  size_t es = dt_dtype_size(d);
  int64_t total = total_of(counts, n);
  if (kind == T_SCATTER) {
    c->in[root] = gen_buf(total, d, DT_REDUCE_SUM, seed);
    for (int m = 0, off = 0; m < n; off += (int)counts[m++]) {
      c->out[m] = garbage(counts[m], d);
      c->want[m] = malloc((size_t)counts[m] * es + 1);
      if (counts[m])
        memcpy(c->want[m], (char *)c->in[root] + (size_t)off * es,
               (size_t)counts[m] * es);
      c->want_elems[m] = counts[m];
    }
  } else {
    for (int m = 0; m < n; m++)
      c->in[m] = gen_buf(counts[m], d, DT_REDUCE_SUM, seed * 64 + (uint64_t)m);
    c->out[root] = garbage(total, d);
    c->want[root] = concat(c->in, counts, n, d);
    c->want_elems[root] = total;
  }
  return c;
}

static dt_status call_case(ccase *c, sim_coll_group *g, int m) {
  switch (c->kind) {
  case T_ALL_REDUCE:
    return sim_coll_all_reduce(g, m, c->in[m], c->out[m], c->count, c->d, c->op);
  case T_ALL_GATHER:
    return sim_coll_all_gather(g, m, c->in[m], c->out[m], c->counts, c->d);
  case T_REDUCE_SCATTER:
    return sim_coll_reduce_scatter(g, m, c->in[m], c->out[m], c->counts, c->d,
                               c->op);
  case T_ALL_TO_ALL:
    return sim_coll_all_to_all(g, m, c->in[m], c->send[m], c->out[m], c->recv[m],
                           c->d);
  case T_BROADCAST:
    return sim_coll_broadcast(g, m, c->out[m], c->count, c->d, c->root);
  case T_SCATTER:
    return sim_coll_scatter(g, m, c->in[m], c->out[m], c->counts, c->d, c->root);
  default:
    return sim_coll_gather(g, m, c->in[m], c->out[m], c->counts, c->d, c->root);
  }
}

typedef struct case_run {
  sim_coll_group *g;
  ccase **cases;
  int ncases;
} case_run;

static void case_member(void *arg, int m) {
  case_run *r = arg;
  for (int i = 0; i < r->ncases; i++) {
    ccase *c = r->cases[i];
    c->st[m] = call_case(c, r->g, m);
    if (c->st[m] != DT_OK)
      snprintf(c->msg[m], sizeof c->msg[m], "%s", dt_last_error());
  }
}

static bool same_elem(const char *a, const char *b, dt_dtype d) {
  size_t es = dt_dtype_size(d);
  if (!memcmp(a, b, es)) return true;
  return is_float(d) && isnan(tu_decode(a, d)) && isnan(tu_decode(b, d));
}

/* float sums against a float64 sum: the documented order is also a sane
 * one (catches a reference and an implementation wrong the same way) */
static void check_close(const ccase *c) {
  if (c->kind != T_ALL_REDUCE || !is_float(c->d) ||
      (c->op != DT_REDUCE_SUM && c->op != DT_REDUCE_AVG) || c->in_place)
    return;
  size_t es = dt_dtype_size(c->d);
  double acc_eps = c->d == DT_FLOAT64 ? 2.3e-16 : 1.2e-7;
  double out_eps = c->d == DT_FLOAT16 ? 1e-3 : c->d == DT_BFLOAT16 ? 8e-3
                   : c->d == DT_FLOAT32 ? 1.2e-7 : 2.3e-16;
  for (int64_t e = 0; e < c->count; e++) {
    double s = 0, mag = 0;
    for (int j = 0; j < c->n; j++) {
      double x = tu_decode((char *)c->in[j] + (size_t)e * es, c->d);
      s += x, mag += fabs(x);
    }
    if (c->op == DT_REDUCE_AVG) s /= c->n, mag /= c->n;
    double got = tu_decode((char *)c->out[0] + (size_t)e * es, c->d);
    double tol = acc_eps * c->n * mag + out_eps * fabs(s) + 1e-300;
    if (fabs(got - s) > tol)
      fail_msg("%s %s n=%d [%lld]: %.9g vs float64 %.9g", tkind_names[c->kind],
               dt_dtype_name(c->d), c->n, (long long)e, got, s);
  }
}

static void verify_case(const ccase *c) {
  size_t es = dt_dtype_size(c->d);
  for (int m = 0; m < c->n; m++) {
    if (c->st[m] != DT_OK)
      fail_msg("%s %s op %d n=%d member %d: %s", tkind_names[c->kind],
               dt_dtype_name(c->d), (int)c->op, c->n, m, c->msg[m]);
    if (!c->want[m]) continue;
    for (int64_t e = 0; e < c->want_elems[m]; e++) {
      const char *got = (const char *)c->out[m] + (size_t)e * es;
      const char *want = (const char *)c->want[m] + (size_t)e * es;
      if (!same_elem(got, want, c->d))
        fail_msg("%s %s op %d n=%d count %lld member %d [%lld]: got %.9g "
                 "want %.9g", tkind_names[c->kind], dt_dtype_name(c->d),
                 (int)c->op, c->n, (long long)c->want_elems[m], m,
                 (long long)e, tu_decode(got, c->d), tu_decode(want, c->d));
    }
  }
  check_close(c);
}

/* runs the cases in order on the group of `ranks` (one thread per
 * member), verifies and frees them */
static void run_cases(sim_coll_world *w, const int *ranks, int n, ccase **cases,
                      int ncases) {
  sim_coll_group *g = sim_coll_group_get(w, ranks, n);
  assert_non_null(g);
  case_run r = {g, cases, ncases};
  tu_run_threads(n, case_member, &r);
  for (int i = 0; i < ncases; i++) {
    verify_case(cases[i]);
    case_free(cases[i]);
  }
}

static const int group_sizes[] = {1, 2, 3, 4, 8};
static const int subset[] = {6, 2, 4};

/* ranks of test group gi: [0..n) for the sizes above, then [6, 2, 4] */
static int group_ranks(int gi, int *ranks) {
  if (gi == 5) {
    memcpy(ranks, subset, sizeof subset);
    return 3;
  }
  for (int i = 0; i < group_sizes[gi]; i++) ranks[i] = i;
  return group_sizes[gi];
}

/* uneven counts with zeros: base + 13 j, 0 for every third member */
static void fill_counts(int64_t *c, int n, int64_t base, int shift) {
  for (int j = 0; j < n; j++) c[j] = (j + shift) % 3 == 1 ? 0 : base + 13 * j;
}

static const dt_reduce_op all_ops[] = {DT_REDUCE_SUM, DT_REDUCE_AVG,
                                       DT_REDUCE_MAX, DT_REDUCE_MIN,
                                       DT_REDUCE_PROD};

static sim_coll_world *world8(void) {
  sim_coll_world *w = sim_coll_world_create(8, TEST_TIMEOUT_NS);
  assert_non_null(w);
  return w;
}

/* ---- the collectives against their references */

static void test_all_reduce(void **state) {
  (void)state;
  static const int64_t counts[] = {0, 1, 33, 300, 2500};
  sim_coll_world *w = world8();
  uint64_t seed = 1;
  for (int gi = 0; gi < 6; gi++) {
    int ranks[MAXM], n = group_ranks(gi, ranks);
    ccase *cases[8 * 5 * 5 + 8];
    int nc = 0;
    for (int d = 0; d < DT_DTYPE_COUNT; d++)
      for (int o = 0; o < 5; o++)
        for (int k = 0; k < 5; k++) {
          if (d == DT_BOOL && all_ops[o] == DT_REDUCE_AVG) continue;
          cases[nc++] = mk_all_reduce(n, (dt_dtype)d, all_ops[o], counts[k],
                                      false, seed++);
        }
    /* in place (out == in), inline and split sizes */
    static const dt_dtype ipd[] = {DT_FLOAT32, DT_FLOAT32, DT_INT64,
                                   DT_FLOAT16};
    static const dt_reduce_op ipo[] = {DT_REDUCE_SUM, DT_REDUCE_SUM,
                                       DT_REDUCE_PROD, DT_REDUCE_AVG};
    static const int64_t ipc[] = {33, 2500, 2500, 3001};
    for (int i = 0; i < 4; i++)
      cases[nc++] = mk_all_reduce(n, ipd[i], ipo[i], ipc[i], true, seed++);
    run_cases(w, ranks, n, cases, nc);
  }
  sim_coll_world_destroy(w);
}

/* NaN in one member's input propagates through max/min (and sum) */
static void test_all_reduce_nan(void **state) {
  (void)state;
  static const dt_dtype fl[] = {DT_FLOAT32, DT_FLOAT64, DT_FLOAT16,
                                DT_BFLOAT16};
  static const dt_reduce_op ops[] = {DT_REDUCE_MAX, DT_REDUCE_MIN,
                                     DT_REDUCE_SUM};
  sim_coll_world *w = world8();
  int ranks[] = {0, 1, 2, 3};
  ccase *cases[4 * 3 * 2];
  int nc = 0;
  for (int d = 0; d < 4; d++)
    for (int o = 0; o < 3; o++)
      for (int big = 0; big < 2; big++) {
        int64_t count = big ? 1500 : 40;
        ccase *c = case_new(T_ALL_REDUCE, 4, fl[d], ops[o]);
        c->count = count;
        size_t es = dt_dtype_size(fl[d]);
        for (int m = 0; m < 4; m++) {
          c->in[m] = gen_buf(count, fl[d], ops[o], 500 + (uint64_t)m);
          for (int64_t e = m; e < count; e += 7) /* member e % 7 has NaN */
            tu_encode((char *)c->in[m] + (size_t)e * es, fl[d], NAN);
        }
        for (int m = 0; m < 4; m++) {
          c->out[m] = garbage(count, fl[d]);
          c->want[m] = malloc((size_t)count * es);
          ref_reduce(c->in, 4, 0, count, fl[d], ops[o], c->want[m]);
          c->want_elems[m] = count;
          for (int64_t e = 0; e < count; e++) /* the reference agrees */
            if (e % 7 < 4)
              assert_true(isnan(tu_decode((char *)c->want[m] + (size_t)e * es,
                                          fl[d])));
        }
        cases[nc++] = c;
      }
  run_cases(w, ranks, 4, cases, nc);
  sim_coll_world_destroy(w);
}

static void test_reduce_scatter(void **state) {
  (void)state;
  sim_coll_world *w = world8();
  uint64_t seed = 7000;
  for (int gi = 0; gi < 6; gi++) {
    int ranks[MAXM], n = group_ranks(gi, ranks);
    ccase *cases[8 * 5 * 3];
    int nc = 0;
    for (int d = 0; d < DT_DTYPE_COUNT; d++)
      for (int o = 0; o < 5; o++)
        for (int size = 0; size < 3; size++) {
          if (d == DT_BOOL && all_ops[o] == DT_REDUCE_AVG) continue;
          int64_t counts[MAXM];
          fill_counts(counts, n, size == 0 ? 0 : size == 1 ? 5 : 700, size);
          cases[nc++] = mk_reduce_scatter(n, (dt_dtype)d, all_ops[o], counts,
                                          seed++);
        }
    run_cases(w, ranks, n, cases, nc);
  }
  sim_coll_world_destroy(w);
}

static void test_all_gather(void **state) {
  (void)state;
  static const dt_dtype ds[] = {DT_FLOAT32, DT_FLOAT16, DT_INT64, DT_BOOL,
                                DT_UINT8, DT_FLOAT64};
  sim_coll_world *w = world8();
  uint64_t seed = 9000;
  for (int gi = 0; gi < 6; gi++) {
    int ranks[MAXM], n = group_ranks(gi, ranks);
    ccase *cases[6 * 4];
    int nc = 0;
    for (int d = 0; d < 6; d++)
      for (int size = 0; size < 4; size++) {
        int64_t counts[MAXM];
        fill_counts(counts, n, (int64_t[]){0, 3, 200, 900}[size], size);
        cases[nc++] = mk_all_gather(n, ds[d], counts, seed++);
      }
    run_cases(w, ranks, n, cases, nc);
  }
  sim_coll_world_destroy(w);
}

static void test_all_to_all(void **state) {
  (void)state;
  static const dt_dtype ds[] = {DT_FLOAT32, DT_INT64, DT_UINT8, DT_FLOAT16};
  sim_coll_world *w = world8();
  uint64_t seed = 11000;
  for (int gi = 0; gi < 6; gi++) {
    int ranks[MAXM], n = group_ranks(gi, ranks);
    ccase *cases[4 * 3];
    int nc = 0;
    for (int d = 0; d < 4; d++)
      for (int size = 0; size < 3; size++) {
        int64_t send[MAXM][MAXM];
        for (int i = 0; i < n; i++)
          for (int j = 0; j < n; j++)
            send[i][j] = (i * 3 + j + size) % 4 == 0
                             ? 0 : (int64_t[]){1, 17, 600}[size] + i + 2 * j;
        cases[nc++] = mk_all_to_all(n, ds[d], send, seed++);
      }
    run_cases(w, ranks, n, cases, nc);
  }
  sim_coll_world_destroy(w);
}

static void test_broadcast_scatter_gather(void **state) {
  (void)state;
  sim_coll_world *w = world8();
  uint64_t seed = 13000;
  for (int gi = 0; gi < 6; gi++) {
    int ranks[MAXM], n = group_ranks(gi, ranks);
    ccase *cases[MAXM * 3 * 3];
    int nc = 0;
    for (int root = 0; root < n; root++)
      for (int size = 0; size < 3; size++) {
        int64_t counts[MAXM], big = (int64_t[]){0, 9, 1100}[size];
        dt_dtype d = size == 1 ? DT_BFLOAT16 : size == 2 ? DT_FLOAT32
                                                         : DT_INT32;
        fill_counts(counts, n, big, root);
        cases[nc++] = mk_broadcast(n, d, big * 3 + size, root, seed++);
        cases[nc++] = mk_scatter_gather(T_SCATTER, n, d, counts, root, seed++);
        cases[nc++] = mk_scatter_gather(T_GATHER, n, d, counts, root, seed++);
      }
    run_cases(w, ranks, n, cases, nc);
  }
  sim_coll_world_destroy(w);
}

/* large sizes: the streaming stores and many blocks per member; the same
 * all_reduce twice gives the same bits */
static void test_large_and_deterministic(void **state) {
  (void)state;
  sim_coll_world *w = world8();
  int ranks[] = {0, 1, 2, 3, 4, 5, 6, 7};
  for (int n = 2; n <= 8; n += 6) {
    int64_t counts[MAXM];
    for (int j = 0; j < n; j++) counts[j] = (n == 2 ? 150001 : 40001) + j;
    ccase *a = mk_all_reduce(n, DT_FLOAT32, DT_REDUCE_SUM, 300007, false, 77);
    ccase *b = mk_all_reduce(n, DT_FLOAT32, DT_REDUCE_SUM, 300007, false, 77);
    ccase *cases[] = {a, mk_all_gather(n, DT_FLOAT32, counts, 78),
                      mk_reduce_scatter(n, DT_FLOAT64, DT_REDUCE_SUM, counts,
                                        79)};
    ccase *again[] = {b};
    size_t bytes = 300007 * 4;
    sim_coll_group *g = sim_coll_group_get(w, ranks, n);
    case_run r1 = {g, cases, 3}, r2 = {g, again, 1};
    tu_run_threads(n, case_member, &r1);
    tu_run_threads(n, case_member, &r2);
    for (int m = 0; m < n; m++)
      assert_memory_equal(a->out[m], b->out[m], bytes);
    for (int i = 0; i < 3; i++) {
      verify_case(cases[i]);
      case_free(cases[i]);
    }
    verify_case(b);
    case_free(b);
  }
  sim_coll_world_destroy(w);
}

static void expect_contains(const char *msg, const char *part) {
  if (!strstr(msg, part)) fail_msg("'%s' lacks '%s'", msg, part);
}

/* ---- argument errors and members that disagree */

typedef struct bad_ctx {
  sim_coll_group *g;
  int variant;
  dt_status st[MAXM];
  char msg[MAXM][512];
} bad_ctx;

static void bad_member(void *arg, int m) {
  bad_ctx *c = arg;
  float x[64] = {0}, y[64 * MAXM];
  int64_t counts[MAXM] = {4, 4, 4}, other[MAXM] = {4, 5, 4};
  int64_t send[MAXM] = {1, 1, 1}, recv[MAXM] = {1, 1, 1};
  switch (c->variant) {
  case 0: /* member 1: invalid dtype */
    c->st[m] = sim_coll_all_reduce(c->g, m, x, y, 4, m == 1 ? (dt_dtype)42
                               : DT_FLOAT32, DT_REDUCE_SUM);
    break;
  case 1: /* member 2: invalid op */
    c->st[m] = sim_coll_all_reduce(c->g, m, x, y, 4, DT_FLOAT32,
                               m == 2 ? (dt_reduce_op)9 : DT_REDUCE_SUM);
    break;
  case 2: /* everyone: avg of bool */
    c->st[m] = sim_coll_all_reduce(c->g, m, x, y, 4, DT_BOOL, DT_REDUCE_AVG);
    break;
  case 3: /* member 1: a different count */
    c->st[m] = sim_coll_all_reduce(c->g, m, x, y, m == 1 ? 5 : 4, DT_FLOAT32,
                               DT_REDUCE_SUM);
    break;
  case 4: /* member 2: a different collective */
    c->st[m] = m == 2 ? sim_coll_all_gather(c->g, m, x, y, counts, DT_FLOAT32)
                      : sim_coll_all_reduce(c->g, m, x, y, 4, DT_FLOAT32,
                                        DT_REDUCE_SUM);
    break;
  case 5: /* member 0: other counts */
    c->st[m] = sim_coll_reduce_scatter(c->g, m, x, y, m ? counts : other,
                                   DT_FLOAT32, DT_REDUCE_SUM);
    break;
  case 6: /* all_to_all: member 1 expects 2 from member 0, who sends 1 */
    if (m == 1) recv[0] = 2;
    c->st[m] = sim_coll_all_to_all(c->g, m, x, send, y, recv, DT_FLOAT32);
    break;
  default: /* member 0: negative count */
    c->st[m] = sim_coll_all_reduce(c->g, m, x, y, m == 0 ? -1 : 64, DT_FLOAT32,
                               DT_REDUCE_SUM);
    break;
  }
  snprintf(c->msg[m], sizeof c->msg[m], "%s", dt_last_error());
  /* whatever happened, the group still works */
  float a[2] = {1, 2}, b[2];
  TU_CHECK(sim_coll_all_reduce(c->g, m, a, b, 2, DT_FLOAT32, DT_REDUCE_SUM) ==
              DT_OK && b[1] == 6, "%s", dt_last_error());
}

static void test_bad_arguments(void **state) {
  (void)state;
  sim_coll_world *w = world8();
  int ranks[] = {3, 1, 5};
  static const dt_status want[] = {DT_ERR_DTYPE, DT_ERR_INVALID_ARGUMENT,
                                   DT_ERR_DTYPE, DT_ERR_DESYNC, DT_ERR_DESYNC,
                                   DT_ERR_DESYNC, DT_ERR_DESYNC,
                                   DT_ERR_INVALID_ARGUMENT};
  static const char *const part[] = {
      "invalid dtype 42", "invalid reduce op 9", "avg of bool",
      "members disagree", "called all_gather", "members disagree",
      "member 0 sends 1 elements to member 1, which expects 2", "count -1"};
  for (int v = 0; v < 8; v++) {
    bad_ctx c = {.g = sim_coll_group_get(w, ranks, 3), .variant = v};
    tu_run_threads(3, bad_member, &c);
    TU_ASSERT_NO_THREAD_FAILURES();
    for (int m = 0; m < 3; m++) {
      if (c.st[m] != want[v])
        fail_msg("variant %d member %d: %s (%s)", v, m,
                 dt_status_name(c.st[m]), c.msg[m]);
      expect_contains(c.msg[m], "on group [3, 1, 5]");
    }
    /* the culprit names its own error; the others name the culprit */
    int culprit = v == 0 ? 1 : v == 1 ? 2 : v == 7 ? 0 : -1;
    for (int m = 0; m < 3; m++) {
      if (v == 2 || v == 3 || v == 4 || v == 5 || v == 6 || m == culprit)
        expect_contains(c.msg[m], part[v]);
      else if (culprit >= 0)
        expect_contains(c.msg[m], culprit == 1 ? "member 1 (rank 1) passed "
                        "invalid arguments" : culprit == 2 ? "member 2 (rank"
                        " 5) passed invalid arguments" : "member 0 (rank 3) "
                        "passed invalid arguments");
    }
  }
  sim_coll_world_destroy(w);
}

static void test_registry(void **state) {
  (void)state;
  tu_expect_status(sim_coll_world_create(0, 0) ? DT_OK : dt_last_status(),
                   DT_ERR_INVALID_ARGUMENT, "at least 1", NULL);
  sim_coll_world *w = world8();
  int a[] = {6, 2, 4}, b[] = {2, 4, 6}, bad[] = {1, 8}, dup[] = {1, 3, 1};
  sim_coll_group *g = sim_coll_group_get(w, a, 3);
  assert_non_null(g);
  assert_ptr_equal(sim_coll_group_get(w, a, 3), g);
  assert_ptr_not_equal(sim_coll_group_get(w, b, 3), g);
  assert_string_equal(sim_coll_group_name(g), "[6, 2, 4]");
  assert_int_equal(sim_coll_group_size(g), 3);
  assert_null(sim_coll_group_get(w, bad, 2));
  tu_expect_status(dt_last_status(), DT_ERR_INVALID_ARGUMENT,
                   "rank 8 out of range [0, 8)", NULL);
  assert_null(sim_coll_group_get(w, dup, 3));
  tu_expect_status(dt_last_status(), DT_ERR_INVALID_ARGUMENT,
                   "rank 1 listed twice", NULL);
  assert_null(sim_coll_group_get(w, a, 0));
  assert_null(sim_coll_group_get(NULL, a, 3));
  sim_coll_world_destroy(w);
  sim_coll_world_destroy(NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_registry),
      cmocka_unit_test(test_all_reduce),
      cmocka_unit_test(test_all_reduce_nan),
      cmocka_unit_test(test_reduce_scatter),
      cmocka_unit_test(test_all_gather),
      cmocka_unit_test(test_all_to_all),
      cmocka_unit_test(test_broadcast_scatter_gather),
      cmocka_unit_test(test_large_and_deterministic),
      cmocka_unit_test(test_bad_arguments),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
