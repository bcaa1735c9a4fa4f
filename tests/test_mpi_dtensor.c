/* DTensors on a multi-process runtime (launcher "mpi"), run by
 * scripts/mpirun.sh on 2 and 4 processes (ctest label mpi); the program
 * passes on 1 process too. A job of N = 8 global ranks; process p hosts
 * ranks p*N/P .. (p+1)*N/P - 1.
 * References: MPI's own answers (size, rank); host arrays and naive loops
 * (torch.chunk slicing, sums and maxima in double); and the same program
 * on a ONE-process runtime (launcher "none", 8 ranks) made in the same
 * process, whose results must be bitwise the same (the collectives'
 * reduction trees do not depend on the processes).
 * Every check runs in every process and counts instead of jumping out, so
 * that the processes keep issuing the same collectives; at the end of
 * each test the processes add up their failures (MPI_Allreduce on
 * MPI_COMM_WORLD) and the test fails in all of them or in none.
 * Built without MPI: skipped (77). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "testutil.h"
#include "threads.h"

#if !DTORCH_HAVE_MPI

int main(void) {
  printf("skipped: dtorch was built without MPI\n");
  return 77;
}

#else

#include <mpi.h>

enum { N = 8 };
static dt_runtime *rt;  /* the job's runtime: launcher "mpi", N ranks */
static dt_runtime *ref; /* one process, N ranks: the bitwise reference */
static int P, me;       /* MPI_COMM_WORLD's size and rank */
static int fails;       /* this process's failed checks in this test */

#define CHECK(cond, ...)                                                    \
  do {                                                                      \
    if (!(cond)) {                                                          \
      fails++;                                                              \
      fprintf(stderr, "[process %d] %s:%d: check failed: %s: ", me,         \
              __FILE__, __LINE__, #cond);                                   \
      fprintf(stderr, __VA_ARGS__);                                         \
      fputc('\n', stderr);                                                  \
    }                                                                       \
  } while (0)

/* the status, the last status and every substring of the message */
#define CHECK_ERR(got, want, ...)                                           \
  check_err_at(__LINE__, (got), (want), (const char *const[]){__VA_ARGS__,  \
               NULL})
static void check_err_at(int line, dt_status got, dt_status want,
                         const char *const *subs) {
  const char *msg = dt_last_error();
  CHECK(got == want && dt_last_status() == want,
        "line %d: status %s (last %s), want %s: %s", line,
        dt_status_name(got), dt_status_name(dt_last_status()),
        dt_status_name(want), msg);
  for (int i = 0; subs[i]; i++)
    CHECK(strstr(msg, subs[i]), "line %d: message lacks \"%s\": %s", line,
          subs[i], msg);
  dt_clear_error();
}

/* every process's failures of this test: all fail or none */
static void agree(void) {
  int mine = fails, all = 0;
  fails = 0;
  MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  assert_int_equal(all, 0);
}

static dt_runtime *make_runtime(const char *launcher, int n) {
  dt_runtime_options o = {.num_ranks = n, .launcher = launcher,
                          .auto_redistribute = true, .pin_ranks = -1,
                          .collective_timeout_ms = 20000};
  return dt_runtime_create(&o);
}

/* the process hosting global rank r of an N-rank job */
static int proc_of(int r) { return r / (N / P); }
static int first_rank(void) { return me * (N / P); }

static size_t nbytes(dt_shape s, dt_dtype d) {
  return (size_t)tu_numel(s) * dt_dtype_size(d);
}

/* the full value (malloc'd; numel * size bytes, at least 1) */
static char *fetch(dt_tensor *t) {
  size_t n = t ? nbytes(dt_tensor_shape(t), dt_tensor_dtype(t)) : 0;
  char *b = calloc(1, n ? n : 1);
  dt_status st = dt_to_host(t, b, n);
  CHECK(st == DT_OK, "dt_to_host: %s", dt_last_error());
  return b;
}

/* the values v (n of them) encoded in dtype d (malloc'd) */
static char *encode(const double *v, int64_t n, dt_dtype d) {
  char *b = calloc(1, n ? (size_t)n * dt_dtype_size(d) : 1);
  for (int64_t i = 0; i < n; i++) tu_encode(b + i * dt_dtype_size(d), d, v[i]);
  return b;
}

/* ---- torch.chunk slicing: a Shard(k) on mesh dim i cuts the range that
 * the mesh dims before it left of tensor dim k into pieces of
 * ceil(len / m_i), keeping piece coords[i] (empty past the end) */
static void mesh_coords(dt_shape ms, int64_t idx, int64_t *coords) {
  for (int i = ms.ndim - 1; i >= 0; idx /= ms.dims[i--])
    coords[i] = idx % ms.dims[i];
}

static void chunk_box(dt_shape ms, const dt_placement *pl, dt_shape s, int idx,
                      int64_t *off, int64_t *len) {
  int64_t coords[DT_MAX_DIMS];
  mesh_coords(ms, idx, coords);
  for (int d = 0; d < s.ndim; d++) {
    off[d] = 0;
    len[d] = s.dims[d];
  }
  for (int i = 0; i < ms.ndim; i++) {
    if (pl[i].kind != DT_PLACEMENT_SHARD) continue;
    int k = pl[i].dim;
    int64_t piece = (len[k] + ms.dims[i] - 1) / ms.dims[i];
    int64_t lo = piece * coords[i], hi = lo + piece;
    lo = lo < len[k] ? lo : len[k];
    hi = hi < len[k] ? hi : len[k];
    off[k] += lo;
    len[k] = hi - lo;
  }
}

/* the box [off, off + len) of a row-major array of shape s (malloc'd) */
static char *slice_box(const char *full, dt_shape s, size_t es,
                       const int64_t *off, const int64_t *len, int64_t *count) {
  dt_shape bs = s;
  for (int d = 0; d < s.ndim; d++) bs.dims[d] = len[d];
  int64_t n = tu_numel(bs);
  char *b = calloc(1, n ? (size_t)n * es : 1);
  int64_t idx[DT_MAX_DIMS];
  for (int64_t i = 0; i < n; i++) {
    tu_unravel(i, bs, idx);
    for (int d = 0; d < s.ndim; d++) idx[d] += off[d];
    memcpy(b + i * (int64_t)es, full + tu_ravel(idx, s) * (int64_t)es, es);
  }
  *count = n;
  return b;
}

/* rank r's shard through dt_local_to_host (malloc'd), *n its bytes */
static char *local_bytes(dt_tensor *t, int r, size_t *n) {
  dt_shape ls = dt_tensor_local_shape(t, r);
  *n = ls.ndim >= 0 ? nbytes(ls, dt_tensor_dtype(t)) : 0;
  char *b = calloc(1, *n ? *n : 1);
  dt_status st = dt_local_to_host(t, r, b, *n);
  CHECK(st == DT_OK, "dt_local_to_host(rank %d): %s", r, dt_last_error());
  return b;
}

static dt_placement want_pl_of(const dt_placement *pl, dt_tensor *yr, int i) {
  return pl ? pl[i] : dt_tensor_placement(yr, i);
}

/* y (on rt's mesh m) against yr (the same on ref's mesh) and the host
 * value `want` (NULL: not checked; tol < 0: bitwise, else the decoded
 * values within tol relative): placements `pl` (NULL: yr's), the full value in every
 * process, and each local rank's shard (against the reference's shard,
 * and against `want` sliced unless a placement is Partial) */
static void check_result(dt_tensor *y, dt_tensor *yr, const dt_placement *pl,
                         const char *want, double tol, const char *what) {
  if (!y || !yr) {
    CHECK(false, "%s: no tensor: %s", what, dt_last_error());
    dt_clear_error();
    return;
  }
  dt_mesh *m = dt_tensor_mesh(y);
  dt_shape ms = dt_mesh_shape(m), s = dt_tensor_shape(y);
  dt_dtype d = dt_tensor_dtype(y);
  size_t es = dt_dtype_size(d), n = nbytes(s, d);
  bool partial = false;
  dt_placement want_pl[DT_MAX_DIMS];
  for (int i = 0; i < ms.ndim; i++)
    want_pl[i] = want_pl_of(pl, yr, i);
  pl = want_pl;
  for (int i = 0; i < ms.ndim; i++) {
    dt_placement got = dt_tensor_placement(y, i);
    partial = partial || got.kind == DT_PLACEMENT_PARTIAL;
    CHECK(got.kind == pl[i].kind &&
              (got.kind != DT_PLACEMENT_SHARD || got.dim == pl[i].dim) &&
              (got.kind != DT_PLACEMENT_PARTIAL || got.reduce == pl[i].reduce),
          "%s: mesh dim %d placement kind %d dim %d, want kind %d dim %d", what,
          i, got.kind, got.dim, pl[i].kind, pl[i].dim);
  }
  char *full = fetch(y), *fr = fetch(yr);
  CHECK(memcmp(full, fr, n) == 0, "%s: the value differs from one process's",
        what);
  int64_t numel = tu_numel(s);
  for (int64_t i = 0; want && i < numel; i++) {
    double g = tu_decode(full + i * (int64_t)es, d);
    double w = tu_decode(want + i * (int64_t)es, d);
    bool ok = tol < 0 ? memcmp(full + i * (int64_t)es, want + i * (int64_t)es,
                               es) == 0
                      : fabs(g - w) <= tol * (1 + fabs(w));
    CHECK(ok, "%s: element %lld is %.9g, want %.9g", what, (long long)i, g, w);
    if (!ok) break;
  }
  for (int idx = 0; idx < dt_mesh_size(m); idx++) {
    int64_t coords[DT_MAX_DIMS];
    mesh_coords(ms, idx, coords);
    int r = dt_mesh_rank(m, coords);
    if (!dt_runtime_rank_is_local(rt, r)) continue;
    size_t a = 0, b = 0;
    char *mine = local_bytes(y, r, &a), *theirs = local_bytes(yr, r, &b);
    CHECK(a == b && memcmp(mine, theirs, a) == 0,
          "%s: rank %d's shard (%zu bytes) differs from one process's (%zu)",
          what, r, a, b);
    if (!partial) {
      int64_t off[DT_MAX_DIMS], len[DT_MAX_DIMS], cnt;
      chunk_box(ms, pl, s, idx, off, len);
      char *w = slice_box(full, s, es, off, len, &cnt);
      CHECK((size_t)cnt * es == a && memcmp(mine, w, a) == 0,
            "%s: rank %d's shard is not the chunk of the value", what, r);
      free(w);
    }
    free(mine), free(theirs);
  }
  free(full), free(fr);
}

static dt_tensor *from_host(const void *data, dt_shape s, dt_dtype d,
                            dt_mesh *m, const dt_placement *pl) {
  return dt_from_host(data, s, &(dt_tensor_options){.dtype = d, .mesh = m,
                                                    .placements = pl});
}

/* ---- 1. runtime */
static void test_runtime_layout(void **state) {
  (void)state;
  CHECK(dt_runtime_num_processes(rt) == P, "num_processes %d, MPI size %d",
        dt_runtime_num_processes(rt), P);
  CHECK(dt_runtime_process_index(rt) == me, "process_index %d, MPI rank %d",
        dt_runtime_process_index(rt), me);
  CHECK(dt_runtime_num_ranks(rt) == N, "num_ranks %d", dt_runtime_num_ranks(rt));
  for (int r = 0; r < N; r++) {
    bool want = r >= me * N / P && r < (me + 1) * N / P;
    CHECK(dt_runtime_rank_is_local(rt, r) == want, "rank_is_local(%d)", r);
    CHECK(dt_runtime_rank_is_local(ref, r), "ref: rank_is_local(%d)", r);
  }
  dt_clear_error();
  CHECK(!dt_runtime_rank_is_local(rt, N), "rank_is_local(N)");
  CHECK_ERR(dt_last_status(), DT_ERR_INVALID_ARGUMENT, "dt_runtime_rank_is_local");
  CHECK(dt_runtime_num_processes(ref) == 1 && dt_runtime_process_index(ref) == 0,
        "ref: %d processes, index %d", dt_runtime_num_processes(ref),
        dt_runtime_process_index(ref));
  agree();
}

static void test_runtime_create_errors(void **state) {
  (void)state;
  if (P > 1) { /* 3 ranks at -np 2, 6 at -np 4 (collective: each refuses) */
    int n = P + P / 2;
    char ranks[32], procs[32];
    snprintf(ranks, sizeof ranks, "%d ranks", n);
    snprintf(procs, sizeof procs, "%d processes", P);
    dt_runtime *bad = make_runtime("mpi", n);
    CHECK(!bad, "%d ranks over %d processes made a runtime", n, P);
    dt_runtime_destroy(bad);
    CHECK_ERR(dt_last_status(), DT_ERR_INVALID_ARGUMENT, "dt_runtime_create",
              ranks, procs);
  }
  dt_runtime *bogus = make_runtime("bogus", N);
  CHECK(!bogus, "launcher \"bogus\" made a runtime");
  dt_runtime_destroy(bogus);
  CHECK_ERR(dt_last_status(), DT_ERR_INVALID_ARGUMENT, "dt_runtime_create",
            "options.launcher \"bogus\"");
  agree();
}

/* an S(0) -> R all-gather on a [n] mesh of r (over every process) */
static void check_gather(dt_runtime *r, int n, const char *what) {
  dt_mesh *m = dt_mesh_create_range(r, NULL, DT_SHAPE(n), NULL);
  double v[16];
  for (int i = 0; i < 2 * n; i++) v[i] = 3 * i + 1;
  char *want = encode(v, 2 * n, DT_FLOAT32);
  dt_tensor *x = from_host(want, DT_SHAPE(2 * n), DT_FLOAT32, m,
                           DT_PLACEMENTS(DT_SHARD(0)));
  dt_tensor *y = dt_redistribute(x, NULL, DT_PLACEMENTS(DT_REPLICATE));
  char *got = fetch(y);
  CHECK(memcmp(got, want, (size_t)(2 * n) * 4) == 0, "%s: gathered wrongly",
        what);
  free(got);
  free(want);
  TU_RELEASE(x, y);
  dt_mesh_release(m);
}

static void test_runtime_env_and_two(void **state) {
  (void)state;
  setenv("DTORCH_LAUNCHER", "mpi", 1);
  dt_runtime *env = make_runtime(NULL, N);
  unsetenv("DTORCH_LAUNCHER");
  CHECK(env && dt_runtime_num_processes(env) == P &&
            dt_runtime_process_index(env) == me,
        "DTORCH_LAUNCHER=mpi: %s", env ? "wrong layout" : dt_last_error());
  /* alive together with rt (and ref): collectives of each runtime, their
   * issue interleaved */
  if (env) check_gather(env, N, "DTORCH_LAUNCHER runtime");
  check_gather(rt, N, "the job's runtime beside it");
  dt_runtime_destroy(env);
  /* one after another, with another rank count; two alive together */
  for (int i = 0; i < 2; i++) {
    dt_runtime *a = make_runtime("mpi", P);
    dt_runtime *b = make_runtime("mpi", 2 * P);
    CHECK(a && b, "runtime %d: %s", i, dt_last_error());
    if (a && b) {
      check_gather(b, 2 * P, "second of two");
      check_gather(a, P, "first of two");
      CHECK(dt_runtime_rank_is_local(a, me) &&
                dt_runtime_rank_is_local(b, 2 * me + 1),
            "layout of a %d-rank runtime", P);
    }
    dt_runtime_destroy(b);
    dt_runtime_destroy(a);
  }
  agree();
}

/* ---- 2. redistributions
 * A case: on mesh dims, `from` -> `to`. src HOST: dt_from_host with
 * `from`; SUM / MAX: a genuine Partial, dt_sum / dt_amax over dim 0 of a
 * base [Q, ...] sharded S(0) on the Partial mesh dims (every rank holds
 * its own rows: a zero-size shard adds nothing) */
enum { SRC_HOST, SRC_SUM, SRC_MAX };
typedef struct rcase {
  const char *name;
  int src;
  dt_placement from[2], to[2];
} rcase;

#define R_ DT_REPLICATE
#define S0 DT_SHARD(0)
#define S1 DT_SHARD(1)
#define PS DT_PARTIAL(DT_REDUCE_SUM)
#define PA DT_PARTIAL(DT_REDUCE_AVG)
#define PM DT_PARTIAL(DT_REDUCE_MAX)

/* one mesh dim changes, the other stays Replicate */
static const rcase one_dim[] = {
  {"S(0)->R", SRC_HOST, {S0}, {R_}},     {"S(1)->R", SRC_HOST, {S1}, {R_}},
  {"R->S(0)", SRC_HOST, {R_}, {S0}},     {"R->S(1)", SRC_HOST, {R_}, {S1}},
  {"S(0)->S(1)", SRC_HOST, {S0}, {S1}},  {"S(1)->S(0)", SRC_HOST, {S1}, {S0}},
  {"P(sum)->R", SRC_SUM, {PS}, {R_}},    {"P(sum)->S(0)", SRC_SUM, {PS}, {S0}},
  {"P(sum)->S(1)", SRC_SUM, {PS}, {S1}}, {"P(max)->R", SRC_MAX, {PM}, {R_}},
  {"host P(sum)->R", SRC_HOST, {PS}, {R_}},
  {"host P(sum)->S(1)", SRC_HOST, {PS}, {S1}},
  {"host P(avg)->R", SRC_HOST, {PA}, {R_}},
  {"R->P(sum)", SRC_HOST, {R_}, {PS}},
};
/* both dims of a 2-D mesh */
static const rcase two_dim[] = {
  {"[S(0),S(1)]->[R,R]", SRC_HOST, {S0, S1}, {R_, R_}},
  {"[S(0),S(1)]->[S(1),S(0)]", SRC_HOST, {S0, S1}, {S1, S0}},
  {"[S(0),S(0)]->[R,S(1)]", SRC_HOST, {S0, S0}, {R_, S1}},
  {"[R,R]->[S(0),S(0)]", SRC_HOST, {R_, R_}, {S0, S0}},
  {"[P(sum),S(1)]->[R,R]", SRC_SUM, {PS, S1}, {R_, R_}},
  {"[S(1),P(sum)]->[S(0),R]", SRC_SUM, {S1, PS}, {S0, R_}},
  {"[P(sum),P(sum)]->[R,S(0)]", SRC_SUM, {PS, PS}, {R_, S0}},
  {"[P(max),S(0)]->[R,R]", SRC_MAX, {PM, S0}, {R_, R_}},
};

/* the host value of a genuine Partial: the sum / max over dim 0 of the
 * base values (q rows of `rest` elements), in double */
static double *reduce_rows(const double *base, int64_t q, int64_t rest,
                           bool max) {
  double *v = calloc((size_t)(rest ? rest : 1), sizeof *v);
  for (int64_t j = 0; j < rest; j++) {
    v[j] = max ? -INFINITY : 0;
    for (int64_t i = 0; i < q; i++) {
      double x = base[i * rest + j];
      v[j] = max ? fmax(v[j], x) : v[j] + x;
    }
  }
  return v;
}

/* the case's input on mesh m (of rt or ref) and its host value (bytes in
 * the input's dtype, malloc'd); *tol the tolerance of a reduced value */
static dt_tensor *make_input(const rcase *c, dt_mesh *m, dt_shape ms,
                             dt_shape s, dt_dtype d, const double *base,
                             int64_t q, char **host, double *tol) {
  dt_placement pl[2];
  for (int i = 0; i < ms.ndim; i++) pl[i] = c->from[i];
  if (c->src == SRC_HOST) {
    *host = encode(base, tu_numel(s), d);
    *tol = -1;
    return from_host(*host, s, d, m, pl);
  }
  /* the base [q, s...]: S(0) where the case is Partial, Shard dims moved */
  dt_shape bs = {.ndim = s.ndim + 1, .dims = {q}};
  for (int i = 0; i < s.ndim; i++) bs.dims[i + 1] = s.dims[i];
  dt_placement bp[2];
  for (int i = 0; i < ms.ndim; i++)
    bp[i] = pl[i].kind == DT_PLACEMENT_PARTIAL ? DT_SHARD(0)
            : pl[i].kind == DT_PLACEMENT_SHARD ? DT_SHARD(pl[i].dim + 1)
                                                : pl[i];
  char *bb = encode(base, tu_numel(bs), d);
  dt_tensor *b = from_host(bb, bs, d, m, bp);
  free(bb);
  dt_tensor *x = c->src == SRC_SUM ? dt_sum(b, (const int[]){0}, 1, false)
                                   : dt_amax(b, (const int[]){0}, 1, false);
  dt_tensor_release(b);
  double *v = reduce_rows(base, q, tu_numel(s), c->src == SRC_MAX);
  dt_dtype od = x ? dt_tensor_dtype(x) : d; /* int32 sums are int64 */
  *host = encode(v, tu_numel(s), od);
  free(v);
  *tol = c->src == SRC_MAX || !tu_is_float(od) ? -1
         : od == DT_FLOAT32                    ? 1e-5
                                               : 1.0 / 16;
  return x;
}

/* mesh dims are placed at offset `at` (one_dim) or 0 (two_dim) */
static void run_case(const rcase *c, int at, dt_mesh *m, dt_mesh *mr,
                     dt_shape s, dt_dtype d, uint64_t seed) {
  dt_shape ms = dt_mesh_shape(m);
  rcase k = *c;
  if (at >= 0) { /* one_dim: the case at mesh dim `at`, Replicate elsewhere */
    for (int i = 0; i < ms.ndim; i++) {
      k.from[i] = i == at ? c->from[0] : DT_REPLICATE;
      k.to[i] = i == at ? c->to[0] : DT_REPLICATE;
    }
  }
  int64_t q = k.src == SRC_MAX || s.dims[0] % 2 == 0 ? N : 5; /* 5: uneven */
  int64_t count = tu_numel(s) * (k.src == SRC_HOST ? 1 : q);
  /* bfloat16 in [-1, 1): its sums of 8 stay within 1/16 of exact */
  double lim = d == DT_BFLOAT16 ? 1 : 8;
  double *base = tu_random_values(count, d, seed, -lim, lim, true);
  char *host = NULL, *hr = NULL;
  double tol;
  dt_tensor *x = make_input(&k, m, ms, s, d, base, q, &host, &tol);
  dt_tensor *xr = make_input(&k, mr, ms, s, d, base, q, &hr, &tol);
  char what[200], sh[32], msh[32];
  tu_shape_str(s, sh, sizeof sh);
  tu_shape_str(ms, msh, sizeof msh);
  snprintf(what, sizeof what, "mesh %s dim %d, %s %s, %s: input", msh, at, sh,
           dt_dtype_name(d), k.name);
  check_result(x, xr, k.from, host, tol, what);
  dt_tensor *y = dt_redistribute(x, NULL, k.to);
  dt_tensor *yr = dt_redistribute(xr, NULL, k.to);
  memcpy(strstr(what, ": input"), ": output", sizeof ": output");
  /* every result holds the input's value (R -> P too) */
  check_result(y, yr, k.to, host, tol, what);
  free(base), free(host), free(hr);
  TU_RELEASE(x, xr, y, yr);
}

static const dt_shape mesh_shapes[3] = {{1, {8}}, {2, {2, 4}}, {2, {4, 2}}};

static void run_redistributions(dt_dtype d, bool uneven) {
  dt_shape s = uneven ? DT_SHAPE(5, 3) : DT_SHAPE(8, 12);
  uint64_t seed = 100 * (uint64_t)d + uneven;
  for (int mi = 0; mi < 3; mi++) {
    dt_mesh *m = dt_mesh_create_range(rt, NULL, mesh_shapes[mi], NULL);
    dt_mesh *mr = dt_mesh_create_range(ref, NULL, mesh_shapes[mi], NULL);
    for (int at = 0; at < mesh_shapes[mi].ndim; at++)
      for (size_t i = 0; i < sizeof one_dim / sizeof *one_dim; i++) {
        if (one_dim[i].from[0].reduce == DT_REDUCE_AVG && !tu_is_float(d))
          continue; /* an average of integers is not a placement dtorch keeps */
        run_case(&one_dim[i], at, m, mr, s, d, seed++);
      }
    for (size_t i = 0; mesh_shapes[mi].ndim == 2 &&
                       i < sizeof two_dim / sizeof *two_dim; i++)
      run_case(&two_dim[i], -1, m, mr, s, d, seed++);
    dt_mesh_release(m);
    dt_mesh_release(mr);
  }
}

static void test_redistribute_float32(void **state) {
  (void)state;
  run_redistributions(DT_FLOAT32, false);
  run_redistributions(DT_FLOAT32, true);
  agree();
}

static void test_redistribute_int32(void **state) {
  (void)state;
  run_redistributions(DT_INT32, false);
  run_redistributions(DT_INT32, true);
  agree();
}

/* a bfloat16 reduction on every mesh dim of [2, 4]: P(sum) -> R, S(1) */
static void test_redistribute_bfloat16_sum(void **state) {
  (void)state;
  dt_mesh *m = dt_mesh_create_range(rt, NULL, DT_SHAPE(2, 4), NULL);
  dt_mesh *mr = dt_mesh_create_range(ref, NULL, DT_SHAPE(2, 4), NULL);
  for (int at = 0; at < 2; at++) {
    run_case(&one_dim[6], at, m, mr, DT_SHAPE(8, 12), DT_BFLOAT16, 900 + at);
    run_case(&one_dim[8], at, m, mr, DT_SHAPE(5, 3), DT_BFLOAT16, 910 + at);
  }
  run_case(&two_dim[6], -1, m, mr, DT_SHAPE(8, 12), DT_BFLOAT16, 920);
  dt_mesh_release(m);
  dt_mesh_release(mr);
  agree();
}

/* a redistribute to another mesh of the job: the source replicated on its
 * mesh, then each target rank takes its box */
static void check_cross(const int *sr, int sn, const dt_placement *sp,
                        const int *dr, int dn, const dt_placement *dp) {
  dt_mesh *ms[2], *md[2];
  dt_runtime *rts[2] = {rt, ref};
  dt_tensor *y[2];
  double *v = tu_random_values(24, DT_FLOAT32, 77, -4, 4, true);
  char *host = encode(v, 24, DT_FLOAT32);
  for (int i = 0; i < 2; i++) {
    /* sn 0: a single-device tensor (each process's own, on its first
     * rank) distributed onto the target mesh */
    ms[i] = sn ? dt_mesh_create(rts[i], NULL, DT_SHAPE(sn), sr, NULL) : NULL;
    md[i] = dt_mesh_create(rts[i], NULL, dn == 4 ? DT_SHAPE(2, 2) : DT_SHAPE(dn),
                           dr, NULL);
    dt_runtime_set_current(rts[i]);
    dt_tensor *x = from_host(host, DT_SHAPE(4, 6), DT_FLOAT32, ms[i], sp);
    dt_runtime_set_current(rt);
    y[i] = dt_redistribute(x, md[i], dp);
    dt_tensor_release(x);
  }
  bool hosted = false;
  for (int i = 0; i < dn; i++) hosted = hosted || proc_of(dr[i]) == me;
  char what[64];
  snprintf(what, sizeof what, "ranks %d.. to ranks %d, ..", sn ? sr[0] : -1,
           dr[0]);
  if (hosted) {
    check_result(y[0], y[1], dp, host, -1, what);
  } else {
    char got[96];
    CHECK_ERR(dt_to_host(y[0], got, sizeof got), DT_ERR_DEVICE, "no rank in this process");
  }
  TU_RELEASE(y[0], y[1]);
  for (int i = 0; i < 2; i++) {
    dt_mesh_release(ms[i]);
    dt_mesh_release(md[i]);
  }
  free(v);
  free(host);
}

static void test_cross_mesh(void **state) {
  (void)state;
  const int all[N] = {0, 1, 2, 3, 4, 5, 6, 7};
  /* every process holds source ranks and target ranks */
  check_cross(all, N, DT_PLACEMENTS(S0), (const int[]){6, 1, 4, 3}, 4,
              DT_PLACEMENTS(S1, R_));
  check_cross((const int[]){6, 1, 4, 3}, 4, DT_PLACEMENTS(S1),
              all, N, DT_PLACEMENTS(S0));
  /* the targets' processes hold no source rank */
  check_cross((const int[]){0, 1}, 2, DT_PLACEMENTS(S0),
              (const int[]){6, 7}, 2, DT_PLACEMENTS(S1));
  check_cross(NULL, 0, NULL, (const int[]){6, 7}, 2, DT_PLACEMENTS(S0));
  check_cross(NULL, 0, NULL, (const int[]){6, 1, 4, 3}, 4,
              DT_PLACEMENTS(S0, S1));
  agree();
}

/* ---- 3. ops and autograd */
/* the MLP's tensors: W1 [32, 16] column-parallel, b1 [32], W2 [8, 32]
 * row-parallel, b2 [8], the input x [8, 16] and target [8, 8] on dp */
static const dt_placement mlp_pl[6][2] = {{R_, S0}, {R_, S0}, {R_, S1},
                                          {R_, R_}, {S0, R_}, {S0, R_}};
static const dt_shape mlp_shape[6] = {{2, {32, 16}}, {1, {32}}, {2, {8, 32}},
                                      {1, {8}},      {2, {8, 16}}, {2, {8, 8}}};
enum { MLP_LR = 1, MLP_WD = 2 }; /* lr 1e-2, weight decay 1e-2 */
#define MLP_CLIP 0.05 /* below the grads' norm: clipping scales them */

typedef struct mlp_run {
  dt_tensor *p[4], *grad[4], *x, *t, *loss;
  double norm; /* the grads' global norm before clipping */
} mlp_run;

/* forward (gelu(x W1ᵀ + b1) W2ᵀ + b2, mean squared error), backward and
 * one AdamW step on mesh m; r keeps the loss, the grads and the new
 * parameters */
static void mlp_step(dt_mesh *m, double *const *vals, mlp_run *r) {
  dt_tensor *in[6];
  for (int i = 0; i < 6; i++) {
    char *b = encode(vals[i], tu_numel(mlp_shape[i]), DT_FLOAT32);
    in[i] = dt_from_host(b, mlp_shape[i], &(dt_tensor_options){
        .mesh = m, .placements = mlp_pl[i], .requires_grad = i < 4});
    free(b);
  }
  memcpy(r->p, in, sizeof r->p);
  r->x = in[4];
  r->t = in[5];
  dt_optimizer *opt = dt_adamw_create(r->p, 4, &(dt_adamw_options){
      .lr = MLP_LR * 1e-2, .weight_decay = MLP_WD * 1e-2});
  CHECK(opt, "dt_adamw_create: %s", dt_last_error());
  dt_tensor *l1 = dt_linear(r->x, r->p[0], r->p[1]);
  dt_tensor *h = dt_gelu(l1);
  dt_tensor *y = dt_linear(h, r->p[2], r->p[3]);
  dt_tensor *d = dt_sub(y, r->t);
  dt_tensor *sq = dt_mul(d, d);
  r->loss = dt_mean(sq, NULL, 0, false);
  CHECK(dt_backward(r->loss) == DT_OK, "dt_backward: %s", dt_last_error());
  for (int i = 0; i < 4; i++) r->grad[i] = dt_grad(r->p[i]);
  /* the global norm over every shard of every process, clipped to half */
  CHECK(dt_clip_grad_norm(r->p, 4, MLP_CLIP, &r->norm) == DT_OK, "clip: %s",
        dt_last_error());
  CHECK(dt_optimizer_step(opt) == DT_OK, "step: %s", dt_last_error());
  TU_RELEASE(l1, h, y, d, sq);
  dt_optimizer_free(opt);
}

static void mlp_free(mlp_run *r) {
  TU_RELEASE(r->p[0], r->p[1], r->p[2], r->p[3], r->grad[0], r->grad[1],
             r->grad[2], r->grad[3], r->x, r->t, r->loss);
}

/* the loss in double: the host forward */
static double mlp_host_loss(double *const *v) {
  double loss = 0;
  for (int b = 0; b < 8; b++) {
    double h[32];
    for (int j = 0; j < 32; j++) {
      double a = v[1][j];
      for (int k = 0; k < 16; k++) a += v[4][b * 16 + k] * v[0][j * 16 + k];
      h[j] = 0.5 * a * (1 + erf(a / sqrt(2.0)));
    }
    for (int o = 0; o < 8; o++) {
      double y = v[3][o];
      for (int j = 0; j < 32; j++) y += h[j] * v[2][o * 32 + j];
      loss += (y - v[5][b * 8 + o]) * (y - v[5][b * 8 + o]);
    }
  }
  return loss / 64;
}

static void test_mlp_adamw(void **state) {
  (void)state;
  double *vals[6];
  for (int i = 0; i < 6; i++)
    vals[i] = tu_random_values(tu_numel(mlp_shape[i]), DT_FLOAT32, 40 + i,
                               -1, 1, true);
  dt_mesh *m = dt_mesh_create_range(rt, NULL, DT_SHAPE(2, 4), NULL);
  dt_mesh *mr = dt_mesh_create_range(ref, NULL, DT_SHAPE(2, 4), NULL);
  mlp_run a = {0}, b = {0};
  mlp_step(m, vals, &a);
  mlp_step(mr, vals, &b);
  float la = 0, lb = 0;
  CHECK(dt_to_host(a.loss, &la, 4) == DT_OK && dt_to_host(b.loss, &lb, 4) == DT_OK,
        "loss: %s", dt_last_error());
  CHECK(memcmp(&la, &lb, 4) == 0, "loss %.9g, one process %.9g", la, lb);
  double want = mlp_host_loss(vals);
  CHECK(fabs(la - want) <= 1e-5 * (1 + want), "loss %.9g, host %.9g", la, want);
  CHECK(memcmp(&a.norm, &b.norm, sizeof a.norm) == 0,
        "grad norm %.17g, one process %.17g", a.norm, b.norm);
  double sq = 0;
  for (int i = 0; i < 4; i++) {
    char *g = fetch(b.grad[i]);
    for (int64_t j = 0; j < tu_numel(mlp_shape[i]); j++)
      sq += pow(tu_decode(g + 4 * j, DT_FLOAT32), 2);
    free(g);
  }
  CHECK(fabs(a.norm - sqrt(sq)) <= 1e-5 * sqrt(sq), "grad norm %.9g, host %.9g",
        a.norm, sqrt(sq));
  double coef = MLP_CLIP / (sqrt(sq) + 1e-6);
  CHECK(coef < 1, "the norm %.9g does not clip", sqrt(sq));
  for (int i = 0; i < 4; i++) {
    char what[64];
    snprintf(what, sizeof what, "parameter %d's grad", i);
    check_result(a.grad[i], b.grad[i], NULL, NULL, -1, what);
    /* AdamW's first step from its definition on the clipped grad g:
     * m̂ = g, v̂ = g² */
    char *g = fetch(b.grad[i]);
    int64_t n = tu_numel(mlp_shape[i]);
    double *nv = malloc((size_t)n * sizeof *nv);
    for (int64_t j = 0; j < n; j++) {
      double gj = coef * tu_decode(g + 4 * j, DT_FLOAT32), lr = MLP_LR * 1e-2;
      nv[j] = vals[i][j] * (1 - lr * MLP_WD * 1e-2) - lr * gj / (fabs(gj) + 1e-8);
    }
    char *host = encode(nv, n, DT_FLOAT32);
    snprintf(what, sizeof what, "parameter %d after the step", i);
    check_result(a.p[i], b.p[i], mlp_pl[i], host, 1e-5, what);
    free(g);
    free(nv);
    free(host);
  }
  mlp_free(&a);
  mlp_free(&b);
  dt_mesh_release(m);
  dt_mesh_release(mr);
  for (int i = 0; i < 6; i++) free(vals[i]);
  agree();
}

/* op(A, B) on rt and on ref: placements `pl` (NULL: as on ref), the host
 * value `want` within tol (< 0: bitwise) */
typedef dt_tensor *(*binop)(dt_tensor *, dt_tensor *);
static void check_op(const char *what, binop op, dt_mesh *const *ms,
                     const double *a, dt_shape sa, const dt_placement *pa,
                     const double *b, dt_shape sb, const dt_placement *pb,
                     const dt_placement *pl, const double *want, double tol) {
  dt_tensor *y[2];
  for (int i = 0; i < 2; i++) {
    char *ea = encode(a, tu_numel(sa), DT_FLOAT32);
    char *eb = b ? encode(b, tu_numel(sb), DT_FLOAT32) : NULL;
    dt_tensor *x = from_host(ea, sa, DT_FLOAT32, ms[i], pa);
    dt_tensor *z = b ? from_host(eb, sb, DT_FLOAT32, ms[i], pb) : NULL;
    y[i] = op(x, z);
    TU_RELEASE(x, z);
    free(ea);
    free(eb);
  }
  int64_t n = y[1] ? dt_tensor_numel(y[1]) : 0;
  char *w = encode(want, n, DT_FLOAT32);
  check_result(y[0], y[1], pl, w, tol, what);
  free(w);
  TU_RELEASE(y[0], y[1]);
}

static dt_tensor *softmax1(dt_tensor *a, dt_tensor *b) { (void)b; return dt_softmax(a, 1); }
static dt_tensor *sum1(dt_tensor *a, dt_tensor *b) {
  (void)b;
  return dt_sum(a, (const int[]){1}, 1, false);
}

static void test_ops(void **state) {
  (void)state;
  dt_mesh *ms[2] = {dt_mesh_create_range(rt, NULL, DT_SHAPE(2, 4), NULL),
                    dt_mesh_create_range(ref, NULL, DT_SHAPE(2, 4), NULL)};
  dt_shape s = DT_SHAPE(8, 12), sc = DT_SHAPE(12, 6);
  double *a = tu_random_values(96, DT_FLOAT32, 51, -3, 3, true);
  double *b = tu_random_values(96, DT_FLOAT32, 52, -3, 3, true);
  double *c = tu_random_values(72, DT_FLOAT32, 53, -3, 3, true);
  double w[96];
  for (int i = 0; i < 96; i++) w[i] = tu_round(a[i] + b[i], DT_FLOAT32);
  check_op("add", dt_add, ms, a, s, DT_PLACEMENTS(S0, S1), b, s,
           DT_PLACEMENTS(S0, S1), DT_PLACEMENTS(S0, S1), w, -1);
  for (int i = 0; i < 96; i++) w[i] = tu_round(a[i] * b[i], DT_FLOAT32);
  check_op("mul", dt_mul, ms, a, s, DT_PLACEMENTS(S1, R_), b, s,
           DT_PLACEMENTS(R_, S0), NULL, w, -1);
  for (int i = 0; i < 8; i++) {
    double mx = -INFINITY, z = 0;
    for (int j = 0; j < 12; j++) mx = fmax(mx, a[i * 12 + j]);
    for (int j = 0; j < 12; j++) z += exp(a[i * 12 + j] - mx);
    for (int j = 0; j < 12; j++) w[i * 12 + j] = exp(a[i * 12 + j] - mx) / z;
  }
  check_op("softmax over a sharded dim", softmax1, ms, a, s,
           DT_PLACEMENTS(S0, S1), NULL, s, NULL, NULL, w, 1e-6);
  for (int i = 0; i < 8; i++) {
    w[i] = 0;
    for (int j = 0; j < 12; j++) w[i] += a[i * 12 + j];
  }
  check_op("sum over a sharded dim", sum1, ms, a, s, DT_PLACEMENTS(S0, S1),
           NULL, s, NULL, DT_PLACEMENTS(S0, PS), w, 1e-5);
  for (int i = 0; i < 8; i++)
    for (int j = 0; j < 6; j++) {
      w[i * 6 + j] = 0;
      for (int k = 0; k < 12; k++) w[i * 6 + j] += a[i * 12 + k] * c[k * 6 + j];
    }
  check_op("matmul, sharded inner dim", dt_matmul, ms, a, s,
           DT_PLACEMENTS(R_, S1), c, sc, DT_PLACEMENTS(R_, S0),
           DT_PLACEMENTS(R_, PS), w, 1e-5);
  free(a), free(b), free(c);
  dt_mesh_release(ms[0]), dt_mesh_release(ms[1]);
  agree();
}

/* ---- 4. semantics */
/* a [4] tensor on the mesh of `ranks`: every process hosting one of them
 * fetches the full value (collective among those processes); the others
 * get DT_ERR_DEVICE naming where the ranks run (`where`, with "%d" the
 * first such process) */
static void check_fetch_on(const int *ranks, int n, const char *where) {
  dt_mesh *m = dt_mesh_create(rt, NULL, DT_SHAPE(n), ranks, NULL);
  float v[8] = {1.5f, -2, 3, 4.25f, 5, 6, 7, 8}, got[8] = {0};
  dt_tensor *t = from_host(v, DT_SHAPE(8), DT_FLOAT32, m,
                           DT_PLACEMENTS(S0));
  bool hosted = false;
  for (int i = 0; i < n; i++) hosted = hosted || proc_of(ranks[i]) == me;
  dt_status st = dt_to_host(t, got, sizeof got);
  if (hosted) {
    CHECK(st == DT_OK && memcmp(got, v, sizeof v) == 0,
          "ranks %d..%d: dt_to_host in process %d: %s", ranks[0], ranks[n - 1],
          me, dt_last_error());
  } else {
    char self[64];
    snprintf(self, sizeof self, "(process %d, ranks %d..%d)", me, first_rank(),
             first_rank() + N / P - 1);
    CHECK_ERR(st, DT_ERR_DEVICE, "dt_to_host", "no rank in this process", self,
              where);
    /* a shard of another process's rank: names it */
    int r = ranks[0];
    char owner[64];
    snprintf(owner, sizeof owner, "rank %d runs in process %d", r, proc_of(r));
    CHECK_ERR(dt_local_to_host(t, r, got, sizeof got), DT_ERR_DEVICE,
              "dt_local_to_host", owner, self);
  }
  dt_tensor_release(t);
  dt_mesh_release(m);
}

static void test_fetch_where(void **state) {
  (void)state;
  /* a mesh over ranks 4..7: process 1's at -np 2, 2 and 3's at -np 4 */
  check_fetch_on((const int[]){4, 5, 6, 7}, 4,
                 P == 2 ? "ranks 4, 5, 6, 7 run in process 1"
                        : "ranks 4, 5, 6, 7 run in processes 2, 3");
  /* across the first two processes' boundary (all local at -np 1) */
  int per = N / P;
  check_fetch_on((const int[]){per - 1, per % N}, 2,
                 P == 4 ? "ranks 1, 2 run in processes 0, 1" : "-");
  /* every other process's rank of an [8] mesh */
  dt_mesh *m = dt_mesh_create_range(rt, NULL, DT_SHAPE(N), NULL);
  dt_tensor *t = dt_zeros(DT_SHAPE(N), &(dt_tensor_options){.mesh = m,
                          .placements = DT_PLACEMENTS(S0)});
  float x = 1;
  for (int r = 0; r < N; r++) {
    if (proc_of(r) == me) {
      CHECK(dt_local_to_host(t, r, &x, 4) == DT_OK && x == 0, "rank %d", r);
      continue;
    }
    char owner[64];
    snprintf(owner, sizeof owner, "rank %d runs in process %d (ranks %d..%d)",
             r, proc_of(r), proc_of(r) * per, proc_of(r) * per + per - 1);
    CHECK_ERR(dt_local_to_host(t, r, &x, 4), DT_ERR_DEVICE, owner);
  }
  dt_tensor_release(t);
  dt_mesh_release(m);
  agree();
}

/* dt_to_host_async of tensors spanning the processes: every process
 * starts it, every process's future gives the full value */
static void test_fetch_async(void **state) {
  (void)state;
  dt_mesh *m = dt_mesh_create_range(rt, NULL, DT_SHAPE(2, 4), NULL);
  float v[40], got[2][40];
  for (int i = 0; i < 40; i++) v[i] = (float)(i * i % 17) - 8.5f;
  dt_tensor *x = from_host(v, DT_SHAPE(5, 8), DT_FLOAT32, m,
                           DT_PLACEMENTS(S1, S0));
  dt_tensor *p = from_host(v, DT_SHAPE(5, 8), DT_FLOAT32, m,
                           DT_PLACEMENTS(PS, S1));
  dt_future *f[2] = {dt_to_host_async(x, got[0], sizeof got[0]),
                     dt_to_host_async(p, got[1], sizeof got[1])};
  for (int i = 0; i < 2; i++) {
    CHECK(f[i] && dt_future_wait(f[i], -1) == DT_OK, "fetch %d: %s", i,
          dt_last_error());
    CHECK(memcmp(got[i], v, sizeof v) == 0, "fetch %d: wrong value", i);
    dt_future_release(f[i]);
  }
  TU_RELEASE(x, p);
  dt_mesh_release(m);
  agree();
}

/* factories without a mesh: this process's first local rank, or cpu:N of
 * a local N; a non-local N is refused */
static void test_single_device(void **state) {
  (void)state;
  dt_tensor *t = dt_arange(0, 6, 1, NULL);
  float v[6] = {0}, want[6] = {0, 1, 2, 3, 4, 5};
  CHECK(dt_local_to_host(t, first_rank(), v, sizeof v) == DT_OK &&
            memcmp(v, want, sizeof v) == 0,
        "dt_local_to_host(first rank %d): %s", first_rank(), dt_last_error());
  char lives[32];
  snprintf(lives, sizeof lives, "it lives on cpu:%d", first_rank());
  int other = (first_rank() + N / P) % N;
  if (P > 1)
    CHECK_ERR(dt_local_to_host(t, other, v, sizeof v), DT_ERR_MESH, lives);
  dt_tensor *u = dt_add(t, t); /* runs here alone, and fetches alone */
  CHECK(dt_to_host(u, v, sizeof v) == DT_OK && v[5] == 10, "add: %s",
        dt_last_error());
  for (int r = 0; r < N; r++) {
    char dev[16];
    snprintf(dev, sizeof dev, "cpu:%d", r);
    dt_tensor *z = dt_ones(DT_SHAPE(2), &(dt_tensor_options){.device = dev});
    if (proc_of(r) == me) {
      float o[2] = {0};
      CHECK(z && dt_local_to_host(z, r, o, sizeof o) == DT_OK && o[1] == 1,
            "%s: %s", dev, dt_last_error());
    } else {
      char owner[64];
      snprintf(owner, sizeof owner, "rank %d runs in process %d", r, proc_of(r));
      CHECK(!z, "%s made a tensor in process %d", dev, me);
      CHECK_ERR(dt_last_status(), DT_ERR_DEVICE, "dt_ones", owner);
    }
    dt_tensor_release(z);
  }
  TU_RELEASE(t, u);
  agree();
}

/* dt_randn / dt_rand on a mesh: the values of one process's runtime and
 * of a single-device draw (element i is element i whatever the split) */
static void test_random(void **state) {
  (void)state;
  dt_mesh *m = dt_mesh_create_range(rt, NULL, DT_SHAPE(2, 4), NULL);
  dt_mesh *mr = dt_mesh_create_range(ref, NULL, DT_SHAPE(2, 4), NULL);
  const dt_placement *pl = DT_PLACEMENTS(S1, S0);
  for (int k = 0; k < 2; k++) {
    dt_tensor *(*f)(dt_shape, const dt_tensor_options *) = k ? dt_rand : dt_randn;
    dt_manual_seed(11);
    dt_tensor *x = f(DT_SHAPE(5, 12), &(dt_tensor_options){.mesh = m,
                     .placements = pl});
    dt_manual_seed(11);
    dt_tensor *xr = f(DT_SHAPE(5, 12), &(dt_tensor_options){.mesh = mr,
                      .placements = pl});
    dt_manual_seed(11);
    dt_runtime_set_current(ref);
    dt_tensor *one = f(DT_SHAPE(5, 12), NULL);
    dt_runtime_set_current(rt);
    char *want = fetch(one);
    check_result(x, xr, pl, want, -1, k ? "dt_rand" : "dt_randn");
    free(want);
    TU_RELEASE(x, xr, one);
  }
  dt_mesh_release(m);
  dt_mesh_release(mr);
  agree();
}

/* dt_runtime_synchronize waits for this process's ranks only: process 0
 * runs work of its own (a single-device op, a collective of a mesh within
 * its ranks) and synchronises while every other process waits for its
 * message and so has issued nothing; then each of the others does the
 * same. A synchronize that waited for another process would never
 * return (the alarm, or the waiting processes' deadline, fails it). */
static void local_work(void) {
  int per = N / P, ranks[N];
  for (int i = 0; i < per; i++) ranks[i] = first_rank() + i;
  dt_mesh *m = dt_mesh_create(rt, NULL, DT_SHAPE(per), ranks, NULL);
  dt_tensor *x = dt_ones(DT_SHAPE(per, 2), &(dt_tensor_options){.mesh = m,
                         .placements = DT_PLACEMENTS(S0)});
  dt_tensor *y = dt_redistribute(x, NULL, DT_PLACEMENTS(R_));
  dt_tensor *s = dt_arange(0, 4, 1, NULL);
  dt_tensor *u = dt_mul(s, s);
  CHECK(dt_runtime_synchronize(rt) == DT_OK, "process %d: synchronize: %s", me,
        dt_last_error());
  TU_RELEASE(x, y, s, u);
  dt_mesh_release(m);
}

static void test_synchronize_local(void **state) {
  (void)state;
  CHECK(dt_runtime_synchronize(rt) == DT_OK, "%s", dt_last_error());
  MPI_Barrier(MPI_COMM_WORLD); /* nothing of earlier tests in flight */
  int token = 0;
  if (me == 0) {
    local_work();
    for (int p = 1; p < P; p++) MPI_Send(&token, 1, MPI_INT, p, 17, MPI_COMM_WORLD);
  } else {
    MPI_Request req;
    MPI_Irecv(&token, 1, MPI_INT, 0, 17, MPI_COMM_WORLD, &req);
    int done = 0;
    int64_t deadline = tu_now_ns() + 30000000000LL;
    while (!done && tu_now_ns() < deadline) {
      MPI_Test(&req, &done, MPI_STATUS_IGNORE);
      if (!done) tu_sleep_ns(1000000);
    }
    CHECK(done, "process 0's synchronize did not return within 30 s while "
                "process %d issued nothing", me);
    if (!done) { /* release process 0, then take the message */
      dt_runtime_synchronize(rt);
      MPI_Wait(&req, MPI_STATUS_IGNORE);
    }
    local_work();
  }
  agree();
}

int main(void) {
  rt = make_runtime("mpi", N);
  if (!rt) {
    fprintf(stderr, "test_mpi_dtensor: %s\n", dt_last_error());
    return 1;
  }
  ref = make_runtime("none", N);
  if (!ref) {
    fprintf(stderr, "test_mpi_dtensor: %s\n", dt_last_error());
    return 1;
  }
  MPI_Comm_size(MPI_COMM_WORLD, &P);
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  dt_runtime_set_current(rt);
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_runtime_layout),
    cmocka_unit_test(test_runtime_create_errors),
    cmocka_unit_test(test_runtime_env_and_two),
    cmocka_unit_test(test_redistribute_float32),
    cmocka_unit_test(test_redistribute_int32),
    cmocka_unit_test(test_redistribute_bfloat16_sum),
    cmocka_unit_test(test_cross_mesh),
    cmocka_unit_test(test_mlp_adamw),
    cmocka_unit_test(test_ops),
    cmocka_unit_test(test_fetch_where),
    cmocka_unit_test(test_fetch_async),
    cmocka_unit_test(test_single_device),
    cmocka_unit_test(test_random),
    cmocka_unit_test(test_synchronize_local),
  };
  /* MPI_DTENSOR_FILTER: only the tests matching it (cmocka's pattern) */
  if (getenv("MPI_DTENSOR_FILTER"))
    cmocka_set_test_filter(getenv("MPI_DTENSOR_FILTER"));
  tu_alarm(120);
  int failed = cmocka_run_group_tests(tests, NULL, NULL);
  dt_runtime_set_current(NULL);
  dt_runtime_destroy(ref);
  dt_runtime_destroy(rt);
  return failed;
}

#endif
