/* Emulated collectives (sim/collectives.h) over time, one raw pthread
 * per member, no runtime: long runs of mixed one-phase and two-phase
 * collectives on one group (the arrival counters start just before their
 * wrap-around, so every run crosses it), groups of 1..8 members with
 * permuted ranks, two disjoint groups in parallel, the overlapping row and
 * column groups of a 2x2 mesh, barriers (what happens before one is seen
 * after it), the watchdog (a late member, the report, the broken group,
 * waiting forever), and send/recv (ordering, sizes, timeouts and
 * retraction). Results are checked in the members against closed forms;
 * test_collectives.c checks the data movement against references. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sim/collectives.h"
#include "support/testutil.h"
#include "support/threads.h"

#define MS 1000000LL
#define MAXM 8
/* generous: a bug fails the test instead of hanging it */
#define TEST_TIMEOUT_NS (120 * 1000 * MS)


static const int subset[] = {6, 2, 4};

static sim_coll_world *world8(void) {
  sim_coll_world *w = sim_coll_world_create(8, TEST_TIMEOUT_NS);
  assert_non_null(w);
  return w;
}

/* ---- rounds: many collectives back to back, checked in the members */

typedef struct rounds_ctx {
  sim_coll_world *w;
  int ranks[2][MAXM]; /* up to two groups; thread i < n[0] is member i of
                       * group 0, the next n[1] threads of group 1 */
  int n[2];
  int rounds;
} rounds_ctx;

/* one round of a mix that alternates one-phase (inline) and two-phase
 * (split) collectives, so the slots are reused in every combination */
static void one_round(sim_coll_group *g, int n, int m, int r) {
  int64_t i64[900] = {0}, o64[900 * MAXM];
  float f[700];
  int64_t counts[MAXM] = {0};
  dt_status st = DT_OK;
  switch (r % 5) {
  case 0: /* int64 sum, inline */
    for (int e = 0; e < 3; e++) i64[e] = (int64_t)r * 1000 + m * 10 + e;
    st = sim_coll_all_reduce(g, m, i64, o64, 3, DT_INT64, DT_REDUCE_SUM);
    for (int e = 0; e < 3 && st == DT_OK; e++)
      TU_CHECK(o64[e] == n * ((int64_t)r * 1000 + e) + 10 * n * (n - 1) / 2,
              "round %d sum[%d] = %lld", r, e, (long long)o64[e]);
    break;
  case 1: /* float32 sum of small integers (exact), split, in place */
    for (int e = 0; e < 700; e++) f[e] = (float)(m + e);
    st = sim_coll_all_reduce(g, m, f, f, 700, DT_FLOAT32, DT_REDUCE_SUM);
    for (int e = 0; e < 700 && st == DT_OK; e++)
      TU_CHECK(f[e] == (float)(n * e + n * (n - 1) / 2), "round %d f[%d] = %g",
              r, e, f[e]);
    break;
  case 2: /* all_gather, counts j + 1, inline */
    for (int j = 0; j < n; j++) counts[j] = j + 1;
    for (int e = 0; e <= m; e++) i64[e] = r + m;
    st = sim_coll_all_gather(g, m, i64, o64, counts, DT_INT64);
    for (int j = 0, off = 0; j < n && st == DT_OK; off += j + 1, j++)
      for (int e = 0; e <= j; e++)
        TU_CHECK(o64[off + e] == r + j, "round %d gather[%d]", r, off + e);
    break;
  case 3:
    st = sim_coll_barrier(g, m);
    break;
  default: /* reduce_scatter, 300 each, split */
    for (int j = 0; j < n; j++) counts[j] = 300;
    for (int e = 0; e < 300 * n; e++) o64[e] = m + e + r;
    st = sim_coll_reduce_scatter(g, m, o64, i64, counts, DT_INT64, DT_REDUCE_MAX);
    for (int e = 0; e < 300 && st == DT_OK; e++)
      TU_CHECK(i64[e] == n - 1 + 300 * m + e + r, "round %d rs[%d]", r, e);
    break;
  }
  TU_CHECK(st == DT_OK, "round %d: %s", r, dt_last_error());
}

static void rounds_member(void *arg, int i) {
  rounds_ctx *c = arg;
  int gi = i < c->n[0] ? 0 : 1, m = gi ? i - c->n[0] : i;
  sim_coll_group *g = sim_coll_group_get(c->w, c->ranks[gi], c->n[gi]);
  TU_CHECK(g != NULL, "%s", dt_last_error());
  for (int r = 0; g && r < c->rounds; r++) one_round(g, c->n[gi], m, r);
}

static void test_many_rounds(void **state) {
  (void)state;
  sim_coll_world *w = world8();
  for (int n = 1; n <= 8; n++) {
    rounds_ctx c = {.w = w, .n = {n, 0}, .rounds = n <= 4 ? 1500 : 500};
    for (int i = 0; i < n; i++) c.ranks[0][i] = (i * 3 + 1) % 8; /* permuted */
    tu_run_threads(n, rounds_member, &c);
    TU_ASSERT_NO_THREAD_FAILURES();
  }
  sim_coll_world_destroy(w);
}

static void test_parallel_groups(void **state) {
  (void)state;
  sim_coll_world *w = world8();
  /* two disjoint groups at once */
  rounds_ctx c = {.w = w, .n = {4, 4}, .rounds = 600,
                  .ranks = {{0, 1, 2, 3}, {7, 5, 6, 4}}};
  tu_run_threads(8, rounds_member, &c);
  TU_ASSERT_NO_THREAD_FAILURES();
  sim_coll_world_destroy(w);
}

/* a 2x2 mesh: every rank reduces over its row, then over its column; the
 * groups overlap and every rank uses them in the same order */
static void mesh_member(void *arg, int rank) {
  sim_coll_world *w = arg;
  int row[2] = {rank & ~1, rank | 1}, col[2] = {rank & 1, (rank & 1) + 2};
  sim_coll_group *gr = sim_coll_group_get(w, row, 2), *gc = sim_coll_group_get(w, col, 2);
  for (int it = 0; it < 800; it++) {
    int64_t x[2] = {rank + it, -(int64_t)rank * it}, y[2];
    dt_status st = sim_coll_all_reduce(gr, rank & 1, x, y, 2, DT_INT64,
                                   DT_REDUCE_SUM);
    if (st == DT_OK)
      st = sim_coll_all_reduce(gc, rank >> 1, y, y, 2, DT_INT64, DT_REDUCE_SUM);
    TU_CHECK(st == DT_OK, "%s", dt_last_error());
    TU_CHECK(y[0] == 6 + 4 * (int64_t)it && y[1] == -6 * (int64_t)it,
            "it %d: %lld %lld", it, (long long)y[0], (long long)y[1]);
    if (it % 100 == 99) { /* and a large one, split across the members */
      static _Thread_local float big[5000];
      for (int e = 0; e < 5000; e++) big[e] = (float)(rank * e % 7);
      st = sim_coll_all_reduce(gc, rank >> 1, big, big, 5000, DT_FLOAT32,
                           DT_REDUCE_MAX);
      TU_CHECK(st == DT_OK, "%s", dt_last_error());
    }
  }
}

static void test_overlapping_groups(void **state) {
  (void)state;
  sim_coll_world *w = sim_coll_world_create(4, TEST_TIMEOUT_NS);
  tu_run_threads(4, mesh_member, w);
  TU_ASSERT_NO_THREAD_FAILURES();
  sim_coll_world_destroy(w);
}

/* every member's increments before the barrier are visible after it */
typedef struct barrier_ctx {
  sim_coll_group *g;
  _Atomic int64_t hits;
} barrier_ctx;

static void barrier_member(void *arg, int m) {
  barrier_ctx *c = arg;
  int n = sim_coll_group_size(c->g);
  for (int r = 0; r < 400; r++) {
    atomic_fetch_add_explicit(&c->hits, 1, memory_order_relaxed);
    TU_CHECK(sim_coll_barrier(c->g, m) == DT_OK, "%s", dt_last_error());
    int64_t h = atomic_load_explicit(&c->hits, memory_order_relaxed);
    /* the second barrier keeps the next round's increments out */
    TU_CHECK(h == (int64_t)n * (r + 1), "round %d: %lld hits", r,
            (long long)h);
    TU_CHECK(sim_coll_barrier(c->g, m) == DT_OK, "%s", dt_last_error());
  }
}

static void test_barrier(void **state) {
  (void)state;
  static const int groups[][8] = {{0}, {0, 1}, {0, 1, 2}, {0, 1, 2, 3},
                                  {0, 1, 2, 3, 4, 5, 6, 7}, {6, 2, 4}};
  static const int sizes[] = {1, 2, 3, 4, 8, 3};
  sim_coll_world *w = world8();
  for (int gi = 0; gi < 6; gi++) {
    barrier_ctx c = {.g = sim_coll_group_get(w, groups[gi], sizes[gi])};
    atomic_init(&c.hits, 0);
    tu_run_threads(sizes[gi], barrier_member, &c);
    TU_ASSERT_NO_THREAD_FAILURES();
  }
  sim_coll_world_destroy(w);
}

/* ---- the watchdog */

typedef struct late_ctx {
  sim_coll_group *g;
  int late;             /* this member arrives late_ns after the others */
  int64_t late_ns;
  dt_status st[MAXM];
  char msg[MAXM][512];
  int64_t took[MAXM];
} late_ctx;

static void late_member(void *arg, int m) {
  late_ctx *c = arg;
  float x[4] = {1, 2, 3, 4}, y[4];
  /* one good round first: the timeout is per round */
  TU_CHECK(sim_coll_all_reduce(c->g, m, x, y, 4, DT_FLOAT32, DT_REDUCE_SUM) ==
              DT_OK, "%s", dt_last_error());
  if (m == c->late) tu_sleep_ns(c->late_ns);
  int64_t t0 = tu_now_ns();
  c->st[m] = sim_coll_all_reduce(c->g, m, x, y, 4, DT_FLOAT32, DT_REDUCE_SUM);
  c->took[m] = tu_now_ns() - t0;
  snprintf(c->msg[m], sizeof c->msg[m], "%s", dt_last_error());
}

/* every member adds (member + 1) over 3 members: 6 in every element */
static void sum_member(void *arg, int m) {
  sim_coll_group *g = arg;
  float x[5], y[5];
  for (int i = 0; i < 5; i++) x[i] = (float)(m + 1);
  TU_CHECK(sim_coll_all_reduce(g, m, x, y, 5, DT_FLOAT32, DT_REDUCE_SUM) ==
               DT_OK, "%s", dt_last_error());
  for (int i = 0; i < 5; i++) TU_CHECK(y[i] == 6.0f, "y[%d] = %g", i, (double)y[i]);
}

static void expect_contains(const char *msg, const char *part) {
  if (!strstr(msg, part)) fail_msg("'%s' lacks '%s'", msg, part);
}

static void test_watchdog(void **state) {
  (void)state;
  sim_coll_world *w = sim_coll_world_create(8, 200 * MS);
  int ranks[] = {0, 1, 2};
  late_ctx c = {.g = sim_coll_group_get(w, ranks, 3), .late = 2,
                .late_ns = 600 * MS};
  tu_run_threads(3, late_member, &c);
  TU_ASSERT_NO_THREAD_FAILURES();
  for (int m = 0; m < 3; m++) {
    assert_int_equal(c.st[m], DT_ERR_TIMEOUT);
    expect_contains(c.msg[m], "all_reduce on group [0, 1, 2] (seq 1)");
    expect_contains(c.msg[m], "timed out after 0.200 s");
    expect_contains(c.msg[m], "arrived: ranks 0, 1; missing: rank 2");
    assert_string_equal(c.msg[m], c.msg[0]); /* the same report for all */
  }
  /* waited about the timeout, not forever: each member's deadline runs
   * from its own arrival and the first to pass breaks the group for all,
   * so one of them waited the whole timeout (the other may have arrived
   * late on a loaded machine and been released early) */
  for (int m = 0; m < 2; m++) assert_true(c.took[m] < 5000 * MS);
  assert_true((c.took[0] > c.took[1] ? c.took[0] : c.took[1]) >= 190 * MS);
  assert_true(c.took[2] < 100 * MS); /* the late member fails at once */
  /* the group recovers: the timeout failed that round's calls only, and
   * the same group runs later rounds of both slots (400 barriers check
   * every member's count each round; all_reduce checks values) */
  barrier_ctx again = {.g = c.g};
  atomic_init(&again.hits, 0);
  tu_run_threads(3, barrier_member, &again);
  TU_ASSERT_NO_THREAD_FAILURES();
  tu_run_threads(3, sum_member, c.g);
  TU_ASSERT_NO_THREAD_FAILURES();
  /* other groups of the same ranks are not affected */
  int pair[] = {0, 1};
  barrier_ctx b = {.g = sim_coll_group_get(w, pair, 2)};
  atomic_init(&b.hits, 0);
  tu_run_threads(2, barrier_member, &b);
  TU_ASSERT_NO_THREAD_FAILURES();
  sim_coll_world_destroy(w);
}

/* a permuted subset: the report names world ranks, not member indices */
static void test_watchdog_subset(void **state) {
  (void)state;
  sim_coll_world *w = sim_coll_world_create(8, 100 * MS);
  late_ctx c = {.g = sim_coll_group_get(w, subset, 3), .late = 0,
                .late_ns = 400 * MS};
  tu_run_threads(3, late_member, &c);
  TU_ASSERT_NO_THREAD_FAILURES();
  for (int m = 0; m < 3; m++) {
    assert_int_equal(c.st[m], DT_ERR_TIMEOUT);
    expect_contains(c.msg[m], "group [6, 2, 4]");
    expect_contains(c.msg[m], "arrived: ranks 2, 4; missing: rank 6");
  }
  sim_coll_world_destroy(w);
}

/* timeout <= 0 waits as long as it takes (through many sleep slices) */
static void test_no_timeout(void **state) {
  (void)state;
  sim_coll_world *w = sim_coll_world_create(8, 0);
  late_ctx c = {.g = sim_coll_group_get(w, subset, 3), .late = 1,
                .late_ns = 300 * MS};
  tu_run_threads(3, late_member, &c);
  TU_ASSERT_NO_THREAD_FAILURES();
  for (int m = 0; m < 3; m++) assert_int_equal(c.st[m], DT_OK);
  /* and a timeout set later applies to later rounds */
  sim_coll_world_set_timeout(w, 100 * MS);
  tu_run_threads(3, late_member, &c);
  for (int m = 0; m < 3; m++) assert_int_equal(c.st[m], DT_ERR_TIMEOUT);
  sim_coll_world_destroy(w);
}

/* ---- send / recv */

/* even ranks send then receive, odd ranks the reverse: a ring of blocking
 * exchanges that cannot deadlock; then 200 messages of growing size from
 * rank 0 to rank 1, received in order */
static void p2p_member(void *arg, int rank) {
  sim_coll_world *w = arg;
  int n = 4, next = (rank + 1) % n, prev = (rank + n - 1) % n;
  for (int it = 0; it < 50; it++) {
    int64_t out[8], in[8];
    for (int e = 0; e < 8; e++) out[e] = rank * 1000 + it * 10 + e;
    dt_status a, b;
    if (rank % 2 == 0) {
      a = sim_coll_send(w, rank, next, out, sizeof out);
      b = sim_coll_recv(w, rank, prev, in, sizeof in);
    } else {
      b = sim_coll_recv(w, rank, prev, in, sizeof in);
      a = sim_coll_send(w, rank, next, out, sizeof out);
    }
    TU_CHECK(a == DT_OK && b == DT_OK, "%s", dt_last_error());
    for (int e = 0; e < 8; e++)
      TU_CHECK(in[e] == prev * 1000 + it * 10 + e, "it %d [%d]", it, e);
  }
  static char buf[2][4096];
  for (int k = 0; k < 200 && rank < 2; k++) {
    int64_t bytes = (k * 37) % 4096;
    if (rank == 0) {
      memset(buf[0], k & 0xff, (size_t)bytes);
      TU_CHECK(sim_coll_send(w, 0, 1, buf[0], bytes) == DT_OK, "%s",
              dt_last_error());
    } else {
      TU_CHECK(sim_coll_recv(w, 1, 0, buf[1], bytes) == DT_OK, "%s",
              dt_last_error());
      for (int64_t e = 0; e < bytes; e++)
        TU_CHECK(buf[1][e] == (char)(k & 0xff), "message %d byte %lld", k,
                (long long)e);
    }
  }
}

static void test_send_recv(void **state) {
  (void)state;
  sim_coll_world *w = sim_coll_world_create(4, TEST_TIMEOUT_NS);
  tu_run_threads(4, p2p_member, w);
  TU_ASSERT_NO_THREAD_FAILURES();
  sim_coll_world_destroy(w);
}

typedef struct mismatch_ctx {
  sim_coll_world *w;
  dt_status st[2];
  char msg[2][256];
} mismatch_ctx;

static void mismatch_member(void *arg, int i) {
  mismatch_ctx *c = arg;
  char b[16] = {0};
  c->st[i] = i == 0 ? sim_coll_send(c->w, 2, 3, b, 8)
                    : sim_coll_recv(c->w, 3, 2, b, 16);
  snprintf(c->msg[i], sizeof c->msg[i], "%s", dt_last_error());
  /* the channel still works */
  TU_CHECK((i == 0 ? sim_coll_send(c->w, 2, 3, b, 4) : sim_coll_recv(c->w, 3, 2, b, 4))
              == DT_OK, "%s", dt_last_error());
}

static void test_send_recv_errors(void **state) {
  (void)state;
  sim_coll_world *w = sim_coll_world_create(4, 100 * MS);
  char b[8] = {0};
  /* nobody on the other side: both directions time out */
  tu_expect_status(sim_coll_recv(w, 1, 0, b, 8), DT_ERR_TIMEOUT,
                   "recv on rank 1 from rank 0 (8 bytes): timed out after "
                   "0.100 s; rank 0 did not send", NULL);
  tu_expect_status(sim_coll_send(w, 0, 1, b, 8), DT_ERR_TIMEOUT,
                   "send from rank 0 to rank 1 (8 bytes): timed out after "
                   "0.100 s; rank 1 did not receive", NULL);
  /* the retracted message is not delivered later */
  tu_expect_status(sim_coll_recv(w, 1, 0, b, 8), DT_ERR_TIMEOUT, NULL);
  tu_expect_status(sim_coll_send(w, 1, 1, b, 8), DT_ERR_INVALID_ARGUMENT,
                   "to itself", NULL);
  tu_expect_status(sim_coll_send(w, 0, 4, b, 8), DT_ERR_INVALID_ARGUMENT,
                   "out of range", NULL);
  tu_expect_status(sim_coll_recv(w, 1, 0, NULL, 8), DT_ERR_INVALID_ARGUMENT,
                   NULL);
  mismatch_ctx c = {.w = w};
  tu_run_threads(2, mismatch_member, &c);
  TU_ASSERT_NO_THREAD_FAILURES();
  for (int i = 0; i < 2; i++)
    if (c.st[i] != DT_ERR_INVALID_ARGUMENT) fail_msg("%s", c.msg[i]);
  expect_contains(c.msg[0], "sent 8 bytes, the receiver expected 16");
  expect_contains(c.msg[1], "expected 16 bytes, the sender sent 8");
  sim_coll_world_destroy(w);
}

/* After a timeout, send k still pairs with recv k: a late send whose recv
 * timed out is dropped (its sender fails), and a recv whose send timed out
 * fails without taking the next message. */
typedef struct repair_ctx {
  sim_coll_world *w;
  _Atomic int phase;
  dt_status st[4];
  int got[2];
} repair_ctx;

static void wait_phase(repair_ctx *c, int p) {
  /* acquire: pairs with the other thread's release store */
  while (atomic_load_explicit(&c->phase, memory_order_acquire) < p)
    tu_sleep_ns(1000000);
}

static void repair_member(void *arg, int m) {
  repair_ctx *c = arg;
  int v;
  if (m == 1) { /* rank 1 receives from rank 0 */
    c->st[0] = sim_coll_recv(c->w, 1, 0, &v, sizeof v); /* times out */
    atomic_store_explicit(&c->phase, 1, memory_order_release);
    c->st[1] = sim_coll_recv(c->w, 1, 0, &c->got[0], sizeof v);
    wait_phase(c, 3);
    /* the late recv: its send (222) timed out, then 333 was posted */
    c->st[3] = sim_coll_recv(c->w, 1, 0, &v, sizeof v);
    TU_CHECK(sim_coll_recv(c->w, 1, 0, &c->got[1], sizeof v) == DT_OK, "%s",
             dt_last_error());
    return;
  }
  wait_phase(c, 1);
  int late = 111, fresh = 222;
  c->st[2] = sim_coll_send(c->w, 0, 1, &late, sizeof late); /* dropped */
  TU_CHECK(sim_coll_send(c->w, 0, 1, &fresh, sizeof fresh) == DT_OK, "%s",
           dt_last_error());
  int gone = 444, next = 333;
  /* nobody receives this one in time */
  TU_CHECK(sim_coll_send(c->w, 0, 1, &gone, sizeof gone) == DT_ERR_TIMEOUT,
           "%s", dt_last_error());
  atomic_store_explicit(&c->phase, 3, memory_order_release);
  TU_CHECK(sim_coll_send(c->w, 0, 1, &next, sizeof next) == DT_OK, "%s",
           dt_last_error());
}

static void test_send_recv_repairs_after_timeout(void **state) {
  (void)state;
  repair_ctx c = {.w = sim_coll_world_create(2, 100 * MS)};
  tu_run_threads(2, repair_member, &c);
  TU_ASSERT_NO_THREAD_FAILURES();
  assert_int_equal(c.st[0], DT_ERR_TIMEOUT);
  assert_int_equal(c.st[1], DT_OK);
  assert_int_equal(c.got[0], 222); /* not the late 111 */
  assert_int_equal(c.st[2], DT_ERR_TIMEOUT);
  assert_int_equal(c.st[3], DT_ERR_TIMEOUT); /* 444's recv, not 333 */
  assert_int_equal(c.got[1], 333);
  sim_coll_world_destroy(c.w);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_barrier),
      cmocka_unit_test(test_many_rounds),
      cmocka_unit_test(test_parallel_groups),
      cmocka_unit_test(test_overlapping_groups),
      cmocka_unit_test(test_watchdog),
      cmocka_unit_test(test_watchdog_subset),
      cmocka_unit_test(test_no_timeout),
      cmocka_unit_test(test_send_recv),
      cmocka_unit_test(test_send_recv_errors),
      cmocka_unit_test(test_send_recv_repairs_after_timeout),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
