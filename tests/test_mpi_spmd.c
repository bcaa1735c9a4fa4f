/* SPMD mode over the processes of an MPI job (launcher "mpi"), run by
 * scripts/mpirun.sh on 1, 2 and 4 processes (ctest label mpi), N = 8 job
 * ranks. References: host loops for every value, and for every result the
 * same SPMD function on a one-process runtime of 8 ranks made in this
 * process (bitwise: the reduction trees do not depend on the processes).
 *  - dt_spmd_run calls the function once per local rank, with its global
 *    rank;
 *  - all_reduce, all_gather, reduce_scatter, all_to_all, broadcast and
 *    barrier on the world, on mesh dims that span processes and on an
 *    unordered rank list;
 *  - DTensors from per-rank shards (dt_dtensor_from_local), read back;
 *  - send/recv within and across processes: 0 bytes, small, 1 MiB; a size
 *    disagreement fails both sides and the pair stays usable;
 *  - desyncs between processes (kind, shape, dtype): every rank fails with
 *    DT_ERR_DESYNC naming both sides' ranks, calls and call sites;
 *  - a rank that leaves early while ranks of another process wait for it.
 * Built without MPI the launcher is refused: the test skips (77). */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "threads.h"

#define N 8
#define ROWS 4
#define COLS 8
#define ELEMS (ROWS * COLS)

static int nprocs = 1, proc = 0;

static dt_runtime *make_rt(const char *launcher, int timeout_ms) {
  dt_runtime *r = dt_runtime_create(&(dt_runtime_options){
      .num_ranks = N, .launcher = launcher, .collective_timeout_ms = timeout_ms});
  if (!r) fail_msg("dt_runtime_create(%s): %s", launcher, dt_last_error());
  return r;
}

/* rank r's input element i: values whose float sums depend on the order */
static float in_val(int r, int i) {
  return (float)(sin(0.37 * i + 1.3 * r) * pow(10.0, (r + i) % 5 - 2));
}

static dt_tensor *rank_input(int r) {
  float v[ELEMS];
  for (int i = 0; i < ELEMS; i++) v[i] = in_val(r, i);
  return dt_from_host(v, DT_SHAPE(ROWS, COLS), NULL);
}

/* t's floats into out, t released; a failure counted if it cannot */
static void fetch(dt_tensor *t, float *out, int64_t n, const char *what) {
  TU_CHECK(t != NULL, "rank %d: %s: %s", dt_spmd_rank(), what, dt_last_error());
  if (!t) return;
  TU_CHECK(dt_tensor_numel(t) == n, "%s: numel %lld, want %lld", what,
           (long long)dt_tensor_numel(t), (long long)n);
  if (dt_tensor_numel(t) == n)
    TU_CHECK(dt_to_host(t, out, (size_t)n * sizeof *out) == DT_OK, "%s: %s",
             what, dt_last_error());
  dt_tensor_release(t);
}

/* ---- dt_spmd_run on the local ranks */
static _Atomic int calls;
static _Atomic int seen[N];

static dt_status count_fn(dt_spmd_ctx *ctx) {
  atomic_fetch_add(&calls, 1);
  TU_CHECK(ctx->rank >= 0 && ctx->rank < N, "rank %d", ctx->rank);
  if (ctx->rank < 0 || ctx->rank >= N) return DT_OK;
  atomic_fetch_add(&seen[ctx->rank], 1);
  TU_CHECK(ctx->world_size == N, "world_size %d", ctx->world_size);
  TU_CHECK(dt_spmd_rank() == ctx->rank, "dt_spmd_rank %d, ctx %d",
           dt_spmd_rank(), ctx->rank);
  TU_CHECK(dt_runtime_rank_is_local(ctx->rt, ctx->rank), "rank %d not local",
           ctx->rank);
  return DT_OK;
}

static void test_run_counts(void **state) {
  (void)state;
  dt_runtime *rt = make_rt("mpi", 20000);
  for (int round = 0; round < 3; round++) {
    atomic_store(&calls, 0);
    for (int r = 0; r < N; r++) atomic_store(&seen[r], 0);
    assert_int_equal(dt_spmd_run(rt, count_fn, NULL), DT_OK);
    TU_ASSERT_NO_THREAD_FAILURES();
    assert_int_equal(atomic_load(&calls), N / nprocs);
    for (int r = 0; r < N; r++)
      assert_int_equal(atomic_load(&seen[r]),
                       r / (N / nprocs) == proc ? 1 : 0);
  }
  dt_runtime_destroy(rt);
}

/* ---- collectives on local tensors */
enum { R_SUM, R_MAX, R_DIM0, R_DIM1, R_LIST, R_GATHER, R_RS, R_A2A, R_BCAST,
       NRES };
#define RES_MAX (ELEMS * N)
typedef struct results {
  float v[N][NRES][RES_MAX];
  int ran[N];
} results;

static const int list_ranks[] = {6, 1, 3}; /* not ascending, two processes */

static dt_status coll_fn(dt_spmd_ctx *ctx) {
  results *res = ctx->arg;
  int r = ctx->rank;
  dt_mesh *m = dt_mesh_init(ctx->rt, NULL, DT_SHAPE(2, 4),
                            (const char *const[]){"dp", "tp"});
  TU_CHECK(m != NULL, "%s", dt_last_error());
  dt_tensor *x = rank_input(r);
  float (*o)[RES_MAX] = res->v[r];
  fetch(dt_all_reduce(x, DT_REDUCE_SUM, NULL), o[R_SUM], ELEMS, "sum");
  fetch(dt_all_reduce(x, DT_REDUCE_MAX, NULL), o[R_MAX], ELEMS, "max");
  fetch(dt_all_reduce(x, DT_REDUCE_SUM, &(dt_group){.mesh = m, .mesh_dim = 0}),
        o[R_DIM0], ELEMS, "dim 0");
  fetch(dt_all_reduce(x, DT_REDUCE_SUM, &(dt_group){.mesh = m, .mesh_dim = 1}),
        o[R_DIM1], ELEMS, "dim 1");
  bool in_list = r == 6 || r == 1 || r == 3;
  if (in_list)
    fetch(dt_all_reduce(x, DT_REDUCE_SUM, &(dt_group){.ranks = list_ranks,
                                                      .nranks = 3}),
          o[R_LIST], ELEMS, "list");
  fetch(dt_all_gather(x, 0, NULL), o[R_GATHER], ELEMS * N, "gather");
  fetch(dt_reduce_scatter(x, DT_REDUCE_SUM, 1, NULL), o[R_RS], ELEMS / N, "rs");
  fetch(dt_all_to_all(x, 1, 0, NULL), o[R_A2A], ELEMS, "a2a");
  fetch(dt_broadcast(x, 5, NULL), o[R_BCAST], ELEMS, "bcast");
  TU_CHECK(dt_barrier(NULL) == DT_OK, "%s", dt_last_error());
  TU_CHECK(dt_barrier(&(dt_group){.mesh = m, .mesh_dim = 0}) == DT_OK, "%s",
           dt_last_error());
  dt_tensor_release(x);
  dt_mesh_release(m);
  res->ran[r] = 1;
  return DT_OK;
}

/* the host reference of result `which` on rank r, element i (sums in a
 * double loop: compared with a tolerance; the rest exactly) */
static double host_ref(int which, int r, int i) {
  int dp = r / 4, tp = r % 4;
  double s = 0, mx = -INFINITY;
  switch (which) {
  case R_SUM:
    for (int q = 0; q < N; q++) s += in_val(q, i);
    return s;
  case R_MAX:
    for (int q = 0; q < N; q++) mx = fmax(mx, in_val(q, i));
    return mx;
  case R_DIM0: return (double)in_val(tp, i) + in_val(4 + tp, i);
  case R_DIM1:
    for (int q = 0; q < 4; q++) s += in_val(4 * dp + q, i);
    return s;
  case R_LIST: return (double)in_val(6, i) + in_val(1, i) + in_val(3, i);
  case R_GATHER: return in_val(i / ELEMS, i % ELEMS);
  case R_RS: /* [4, 1]: column r of the sum */
    for (int q = 0; q < N; q++) s += in_val(q, i * COLS + r);
    return s;
  case R_A2A: /* [4*8, 1]: rows of column r of each member, member order */
    return in_val(i / ROWS, (i % ROWS) * COLS + r);
  case R_BCAST: return in_val(5, i);
  }
  return NAN;
}

static int res_len(int which) {
  return which == R_GATHER ? ELEMS * N : which == R_RS ? ELEMS / N : ELEMS;
}

static void test_collectives(void **state) {
  (void)state;
  results *mp = calloc(1, sizeof *mp), *one = calloc(1, sizeof *one);
  assert_non_null(mp);
  assert_non_null(one);
  dt_runtime *rt = make_rt("mpi", 20000);
  assert_int_equal(dt_spmd_run(rt, coll_fn, mp), DT_OK);
  TU_ASSERT_NO_THREAD_FAILURES();
  dt_runtime_destroy(rt);
  dt_runtime *ref = make_rt("none", 20000);
  assert_int_equal(dt_spmd_run(ref, coll_fn, one), DT_OK);
  TU_ASSERT_NO_THREAD_FAILURES();
  dt_runtime_destroy(ref);
  for (int r = 0; r < N; r++) {
    bool local = r / (N / nprocs) == proc;
    assert_int_equal(mp->ran[r], local ? 1 : 0);
    assert_int_equal(one->ran[r], 1);
    if (!local) continue;
    for (int w = 0; w < NRES; w++) {
      if (w == R_LIST && !(r == 6 || r == 1 || r == 3)) continue;
      for (int i = 0; i < res_len(w); i++) {
        float got = mp->v[r][w][i], base = one->v[r][w][i];
        double want = host_ref(w, r, i);
        if (memcmp(&got, &base, sizeof got) != 0 ||
            fabs(got - want) > 1e-5 * (1 + fabs(want)))
          fail_msg("result %d rank %d element %d: %.9g, one process %.9g, "
                   "host %.9g", w, r, i, got, base, want);
      }
    }
  }
  free(mp);
  free(one);
}

/* ---- DTensors from local shards */
static double dt_global[2 * 2][4 * 3]; /* [4, 12]: Shard(0) on dp, Shard(1) on tp */
static double dt_rep[N][4 * 12];
static double dt_part[N][2 * 3];

static dt_status from_local_fn(dt_spmd_ctx *ctx) {
  int r = ctx->rank, dp = r / 4, tp = r % 4;
  dt_mesh *m = dt_mesh_init(ctx->rt, NULL, DT_SHAPE(2, 4),
                            (const char *const[]){"dp", "tp"});
  double v[6];
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 3; j++) v[i * 3 + j] = dt_global[dp * 2 + i][tp * 3 + j];
  dt_tensor *x = dt_from_host(v, DT_SHAPE(2, 3),
                              &(dt_tensor_options){.dtype = DT_FLOAT64});
  dt_tensor *X = dt_dtensor_from_local(x, m, DT_PLACEMENTS(DT_SHARD(0), DT_SHARD(1)));
  TU_CHECK(X != NULL, "%s", dt_last_error());
  dt_shape gs = dt_tensor_shape(X);
  TU_CHECK(gs.ndim == 2 && gs.dims[0] == 4 && gs.dims[1] == 12, "global shape");
  TU_CHECK(dt_to_host(X, dt_rep[r], sizeof dt_rep[r]) == DT_OK, "rank %d: "
           "dt_to_host: %s", r, dt_last_error());
  /* a Partial claim over tp: the sum of the tp ranks' locals */
  dt_tensor *P = dt_dtensor_from_local(x, m, DT_PLACEMENTS(DT_REPLICATE,
                                                           DT_PARTIAL(DT_REDUCE_SUM)));
  TU_CHECK(P != NULL, "%s", dt_last_error());
  dt_tensor *PR = dt_redistribute(P, NULL, DT_PLACEMENTS(DT_REPLICATE, DT_REPLICATE));
  TU_CHECK(PR != NULL, "%s", dt_last_error());
  dt_tensor *pl = PR ? dt_dtensor_to_local(PR) : NULL;
  TU_CHECK(pl && dt_to_host(pl, dt_part[r], sizeof dt_part[r]) == DT_OK,
           "rank %d: %s", r, dt_last_error());
  dt_tensor *hs[] = {x, X, P, PR, pl};
  for (size_t i = 0; i < sizeof hs / sizeof hs[0]; i++) dt_tensor_release(hs[i]);
  dt_mesh_release(m);
  return DT_OK;
}

static void test_from_local(void **state) {
  (void)state;
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 12; j++) dt_global[i][j] = 100 * i + j + 0.25;
  memset(dt_rep, 0, sizeof dt_rep);
  memset(dt_part, 0, sizeof dt_part);
  dt_runtime *rt = make_rt("mpi", 20000);
  assert_int_equal(dt_spmd_run(rt, from_local_fn, NULL), DT_OK);
  TU_ASSERT_NO_THREAD_FAILURES();
  dt_runtime_destroy(rt);
  for (int r = 0; r < N; r++) {
    if (r / (N / nprocs) != proc) continue;
    for (int i = 0; i < 4 * 12; i++)
      if (dt_rep[r][i] != dt_global[i / 12][i % 12])
        fail_msg("rank %d: element %d of dt_to_host: %g, want %g", r, i,
                 dt_rep[r][i], dt_global[i / 12][i % 12]);
    int dp = r / 4;
    for (int i = 0; i < 2; i++)
      for (int j = 0; j < 3; j++) {
        double s = 0;
        for (int t = 0; t < 4; t++) s += dt_global[dp * 2 + i][t * 3 + j];
        assert_true(dt_part[r][i * 3 + j] == s);
      }
  }
}

/* ---- send / recv */
#define BIG (1 << 18) /* floats: 1 MiB */
typedef struct pair_case { int a, b; } pair_case;
/* (0, 7) cross processes for any P > 1; (2, 3) in one process for P <= 4 */
static const pair_case pairs[] = {{0, 7}, {2, 3}};

static float pat(int from, int k, int i) { return (float)(from * 1000 + k * 7 + i % 977); }

static dt_tensor *pattern(int from, int k, int64_t n) {
  float *v = malloc((size_t)(n ? n : 1) * sizeof *v);
  for (int64_t i = 0; i < n; i++) v[i] = pat(from, k, (int)i);
  dt_tensor *t = dt_from_host(v, DT_SHAPE(n), NULL);
  free(v);
  return t;
}

static void check_recv(dt_tensor *t, int from, int k, int64_t n) {
  TU_CHECK(t != NULL, "recv %d from %d: %s", k, from, dt_last_error());
  if (!t) return;
  float *v = malloc((size_t)(n ? n : 1) * sizeof *v);
  TU_CHECK(dt_tensor_numel(t) == n, "numel");
  if (n) TU_CHECK(dt_to_host(t, v, (size_t)n * sizeof *v) == DT_OK, "%s", dt_last_error());
  for (int64_t i = 0; i < n; i++)
    if (v[i] != pat(from, k, (int)i)) {
      TU_CHECK(false, "message %d from %d element %lld: %g", k, from,
               (long long)i, v[i]);
      break;
    }
  free(v);
  dt_tensor_release(t);
}

static const int64_t sizes[] = {0, 5, BIG};

/* a sends each size to b, b answers with the same; then a sends 8 floats
 * where b expects 4 (both fail), then 4 and 4 (both succeed) */
static void pair_side(int r, int peer, bool first) {
  for (int k = 0; k < 3; k++) {
    int64_t n = sizes[k];
    if (first) {
      dt_tensor *t = pattern(r, k, n);
      TU_CHECK(dt_send(t, peer) == DT_OK, "send %d: %s", k, dt_last_error());
      dt_tensor_release(t);
      check_recv(dt_recv(peer, DT_SHAPE(n), DT_FLOAT32), peer, k, n);
    } else {
      check_recv(dt_recv(peer, DT_SHAPE(n), DT_FLOAT32), peer, k, n);
      dt_tensor *t = pattern(r, k, n);
      TU_CHECK(dt_send(t, peer) == DT_OK, "send %d: %s", k, dt_last_error());
      dt_tensor_release(t);
    }
  }
  char want[160];
  if (first) {
    dt_tensor *t = pattern(r, 3, 8);
    TU_CHECK(dt_send(t, peer) != DT_OK && dt_last_status() == DT_ERR_INVALID_ARGUMENT,
             "rank %d: mismatched send: %s", r, dt_last_error());
    snprintf(want, sizeof want, "send from rank %d to rank %d: sent 32 bytes, "
             "the receiver expected 16", r, peer);
    TU_CHECK(strstr(dt_last_error(), want), "rank %d: %s", r, dt_last_error());
    dt_tensor_release(t);
    t = pattern(r, 4, 4);
    TU_CHECK(dt_send(t, peer) == DT_OK, "rank %d: send after: %s", r, dt_last_error());
    dt_tensor_release(t);
  } else {
    dt_tensor *t = dt_recv(peer, DT_SHAPE(4), DT_FLOAT32);
    TU_CHECK(!t && dt_last_status() == DT_ERR_INVALID_ARGUMENT,
             "rank %d: mismatched recv: %s", r, dt_last_error());
    snprintf(want, sizeof want, "recv on rank %d from rank %d: expected 16 "
             "bytes, the sender sent 32", r, peer);
    TU_CHECK(strstr(dt_last_error(), want), "rank %d: %s", r, dt_last_error());
    check_recv(dt_recv(peer, DT_SHAPE(4), DT_FLOAT32), peer, 4, 4);
  }
}

static _Atomic int p2p_sides;

static dt_status p2p_fn(dt_spmd_ctx *ctx) {
  for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
    if (ctx->rank == pairs[i].a) pair_side(ctx->rank, pairs[i].b, true);
    else if (ctx->rank == pairs[i].b) pair_side(ctx->rank, pairs[i].a, false);
    else continue;
    atomic_fetch_add(&p2p_sides, 1);
  }
  return DT_OK;
}

static void test_send_recv(void **state) {
  (void)state;
  dt_runtime *rt = make_rt("mpi", 20000);
  atomic_store(&p2p_sides, 0);
  assert_int_equal(dt_spmd_run(rt, p2p_fn, NULL), DT_OK);
  TU_ASSERT_NO_THREAD_FAILURES();
  int want = 0;
  for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++)
    want += (pairs[i].a / (N / nprocs) == proc) + (pairs[i].b / (N / nprocs) == proc);
  assert_int_equal(atomic_load(&p2p_sides), want);
  dt_runtime_destroy(rt);
}

/* ---- desyncs between processes: process 0's ranks make one call, the
 * other processes' ranks another (one process: ranks 0-3 and 4-7) */
/* the call sites (each line constant sits just above its call: a process
 * runs one side only, so the lines cannot be recorded as they run) */
static int variant;
static dt_status st_of[N];
static char msg_of[N][2048];

static bool side_a(int r) { return nprocs > 1 ? r / (N / nprocs) == 0 : r < 4; }

/* the calls, each on the line after its line constant (a process runs
 * one side only, so the lines are known at compile time, not recorded) */
enum { LINE_R = __LINE__ + 3 }; /* the all_reduce below */
static dt_tensor *reduce_of(dt_shape s, dt_dtype d) {
  dt_tensor *f = dt_zeros(s, &(dt_tensor_options){.dtype = d});
  dt_tensor *y = dt_all_reduce(f, DT_REDUCE_SUM, NULL);
  dt_tensor_release(f);
  return y;
}
enum { LINE_A = __LINE__ + 1 };
static dt_tensor *call_a(dt_tensor *x) { return dt_all_reduce(x, DT_REDUCE_SUM, NULL); }
enum { LINE_B0 = __LINE__ + 1 };
static dt_tensor *call_b0(dt_tensor *x) { return dt_all_gather(x, 0, NULL); }
static const int line_b_of[3] = {LINE_B0, LINE_R, LINE_R};

static dt_tensor *call_b(dt_tensor *x) {
  if (variant == 0) return call_b0(x);                              /* kind */
  if (variant == 1) return reduce_of(DT_SHAPE(4, 4), DT_FLOAT32);   /* shape */
  return reduce_of(DT_SHAPE(4, 8), DT_FLOAT64);                     /* dtype */
}

static dt_status desync_fn(dt_spmd_ctx *c) {
  dt_tensor *x = rank_input(c->rank), *y;
  if (side_a(c->rank)) {
    y = call_a(x);
  } else {
    y = call_b(x);
  }
  st_of[c->rank] = y ? DT_OK : dt_last_status();
  snprintf(msg_of[c->rank], sizeof msg_of[c->rank], "%s", y ? "" : dt_last_error());
  dt_tensor_release(y);
  dt_tensor_release(x);
  return st_of[c->rank];
}

static void expect_in(const char *msg, const char *part) {
  if (!strstr(msg, part)) fail_msg("\"%s\" not in: %s", part, msg);
}

/* "ranks 4, 5 (process 2) called all_gather(...) at test_mpi_spmd.c:L" */
static void side_text(char *buf, size_t len, int p, const char *call, int line) {
  int per = nprocs > 1 ? N / nprocs : 4, lo = p * per;
  size_t n = (size_t)snprintf(buf, len, "ranks ");
  for (int r = lo; r < lo + per; r++)
    n += (size_t)snprintf(buf + n, len - n, "%s%d", r > lo ? ", " : "", r);
  if (nprocs > 1) n += (size_t)snprintf(buf + n, len - n, " (process %d)", p);
  snprintf(buf + n, len - n, " called %s at test_mpi_spmd.c:%d", call, line);
}

static void desync_case(int v, const char *what_b) {
  variant = v;
  dt_runtime *rt = make_rt("mpi", 20000);
  for (int r = 0; r < N; r++) st_of[r] = DT_OK, msg_of[r][0] = '\0';
  assert_int_equal(dt_spmd_run(rt, desync_fn, NULL), DT_ERR_DESYNC);
  char want[400];
  int sides = nprocs > 1 ? nprocs : 2;
  for (int r = 0; r < N; r++) {
    if (r / (N / nprocs) != proc) continue;
    assert_int_equal(st_of[r], DT_ERR_DESYNC);
    expect_in(msg_of[r], nprocs > 1 ? "processes disagree" : "members disagree");
    for (int p = 0; p < sides; p++) {
      if (p == 0) side_text(want, sizeof want, p, "all_reduce(float32[32], sum)", LINE_A);
      else side_text(want, sizeof want, p, what_b, line_b_of[v]);
      expect_in(msg_of[r], want);
    }
  }
  /* the world group still works: the same run without the odd call */
  results *res = calloc(1, sizeof *res);
  assert_int_equal(dt_spmd_run(rt, coll_fn, res), DT_OK);
  TU_ASSERT_NO_THREAD_FAILURES();
  for (int r = 0; r < N; r++)
    if (r / (N / nprocs) == proc)
      for (int i = 0; i < ELEMS; i++)
        assert_true(fabs(res->v[r][R_SUM][i] - host_ref(R_SUM, r, i)) <
                    1e-5 * (1 + fabs(host_ref(R_SUM, r, i))));
  free(res);
  dt_runtime_destroy(rt);
}

static void test_desync_kind(void **state) {
  (void)state;
  desync_case(0, "all_gather(float32[256] in blocks)");
}
static void test_desync_shape(void **state) {
  (void)state;
  desync_case(1, "all_reduce(float32[16], sum)");
}
static void test_desync_dtype(void **state) {
  (void)state;
  desync_case(2, "all_reduce(float64[32], sum)");
}

/* ---- a rank that leaves early: rank 4 (process 1 of 2, 2 of 4) returns
 * at once; the others call all_reduce on the world, then rank 0 on [0, 4]
 * (rank 4 the only member in its process). The world call fails at once
 * everywhere with DT_ERR_DESYNC naming rank 4: in its process from the
 * departure, in the others from the failure header its process sends
 * (naming the process). The call on [0, 4] has no member in rank 4's
 * process to say so: it fails at the collective timeout naming that
 * process and its ranks. */
#define GONE_TIMEOUT_MS 1500
static const int pair04[] = {0, 4};
static dt_status st2;
static char msg2[2048];
static int64_t world_ns[N]; /* how long each rank's world call took */

static dt_status gone_fn(dt_spmd_ctx *c) {
  int r = c->rank;
  if (r == 4) return DT_OK; /* leaves without calling */
  dt_tensor *x = rank_input(r);
  int64_t t0 = tu_now_ns();
  dt_tensor *y = dt_all_reduce(x, DT_REDUCE_SUM, NULL);
  world_ns[r] = tu_now_ns() - t0;
  st_of[r] = y ? DT_OK : dt_last_status();
  snprintf(msg_of[r], sizeof msg_of[r], "%s", y ? "" : dt_last_error());
  dt_tensor_release(y);
  if (r == 0) {
    y = dt_all_reduce(x, DT_REDUCE_SUM, &(dt_group){.ranks = pair04, .nranks = 2});
    st2 = y ? DT_OK : dt_last_status();
    snprintf(msg2, sizeof msg2, "%s", y ? "" : dt_last_error());
    dt_tensor_release(y);
  }
  dt_tensor_release(x);
  return st_of[r];
}

/* the world call's failure on rank r: at once, naming rank 4 (and its
 * process, when told by it) */
static void expect_gone(int r, bool same, const char *who) {
  if (st_of[r] != DT_ERR_DESYNC) fail_msg("rank %d: %s", r, msg_of[r]);
  assert_int_equal(st_of[r], DT_ERR_DESYNC);
  expect_in(msg_of[r], "rank 4 left its SPMD function (it returned DT_OK)");
  if (!same) {
    char in[80];
    snprintf(in, sizeof in, "(in %s)", who);
    expect_in(msg_of[r], in);
  }
  if (world_ns[r] > (int64_t)GONE_TIMEOUT_MS * 1000000 / 2)
    fail_msg("rank %d: the world call failed after %.3f s (the timeout is "
             "%.3f s)", r, world_ns[r] * 1e-9, GONE_TIMEOUT_MS * 1e-3);
}

static void test_gone(void **state) {
  (void)state;
  dt_runtime *rt = make_rt("mpi", GONE_TIMEOUT_MS);
  for (int r = 0; r < N; r++) st_of[r] = DT_OK, msg_of[r][0] = '\0', world_ns[r] = 0;
  st2 = DT_OK;
  int64_t t0 = tu_now_ns();
  assert_int_not_equal(dt_spmd_run(rt, gone_fn, NULL), DT_OK);
  int64_t took = tu_now_ns() - t0;
  int per = N / nprocs, home = 4 / per; /* rank 4's process */
  char who[64];
  snprintf(who, sizeof who, "process %d (ranks %d..%d)", home, home * per,
           home * per + per - 1);
  bool same = proc == home || nprocs == 1;
  for (int r = 0; r < N; r++)
    if (r != 4 && r / per == proc) expect_gone(r, same, who);
  if (proc == 0 && same) { /* fails before the call: rank 4 left */
    assert_int_equal(st2, DT_ERR_DESYNC);
    expect_in(msg2, "rank 4 left its SPMD function");
  } else if (proc == 0) {
    assert_int_equal(st2, DT_ERR_TIMEOUT);
    expect_in(msg2, who);
  }
  /* one timeout at most, with slack; never the watchdog's */
  assert_true(took < (int64_t)(GONE_TIMEOUT_MS + 5000) * 1000000);
  dt_runtime_destroy(rt);
}

int main(void) {
  dt_runtime *probe = dt_runtime_create(&(dt_runtime_options){
      .num_ranks = N, .launcher = "mpi"});
  if (!probe) {
    if (dt_last_status() == DT_ERR_UNSUPPORTED) {
      printf("skipped: %s\n", dt_last_error());
      return 77;
    }
    fprintf(stderr, "dt_runtime_create: %s\n", dt_last_error());
    return 1;
  }
  nprocs = dt_runtime_num_processes(probe);
  proc = dt_runtime_process_index(probe);
  dt_runtime_destroy(probe);
  if (N % nprocs) {
    fprintf(stderr, "test_mpi_spmd: %d processes do not divide %d ranks\n",
            nprocs, N);
    return 1;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_run_counts),
      cmocka_unit_test(test_collectives),
      cmocka_unit_test(test_from_local),
      cmocka_unit_test(test_send_recv),
      cmocka_unit_test(test_desync_kind),
      cmocka_unit_test(test_desync_shape),
      cmocka_unit_test(test_desync_dtype),
      cmocka_unit_test(test_gone),
  };
  return TU_RUN_TESTS_WITH_ALARM(240, tests);
}
