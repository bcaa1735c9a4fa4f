/* What the multi-process DTensor tests share (test_mpi_dtensor.c,
 * test_mpi_semantics.c): the job's runtime and its one-process reference,
 * the counting checks every process runs, the end-of-test agreement, and
 * the host references (torch.chunk boxes, encodings). For test files
 * built with MPI only. */
#ifndef MPI_DTENSOR_COMMON_H
#define MPI_DTENSOR_COMMON_H

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

/* each test file uses some of these helpers */
#pragma GCC diagnostic ignored "-Wunused-function"

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

/* placements, as the tests write them */
#define R_ DT_REPLICATE
#define S0 DT_SHARD(0)
#define S1 DT_SHARD(1)
#define PS DT_PARTIAL(DT_REDUCE_SUM)
#define PA DT_PARTIAL(DT_REDUCE_AVG)
#define PM DT_PARTIAL(DT_REDUCE_MAX)

#endif
