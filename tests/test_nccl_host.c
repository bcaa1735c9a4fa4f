/* The host side of the NCCL path (runtime/coll_nccl.c over
 * kernels/cuda/nccl.c) without a GPU, against a stand-in NCCL
 * (tests/fake_nccl/nccl.c, found first through LD_LIBRARY_PATH): members
 * calling from their own threads on non-blocking communicators, and what
 * happens when a member fails. Checked: a group that works (inits complete
 * once every member came, a grouped call settles, close finalizes and
 * destroys each communicator once); a member whose init fails (the others
 * give up at once instead of waiting for the timeout, the group is broken
 * and later calls say why); a member that never comes (the others fail at
 * the collective timeout); a member whose call fails (every member's
 * communicator is aborted, so none waits on its GPU for the missing share);
 * a call issued everywhere that never finishes on the GPU (the watchdog
 * breaks the group at the timeout).
 * Every communicator made is destroyed or aborted exactly once (the fake
 * counts). Skips (77) without CUDA or without the stand-in. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#if DTORCH_HAVE_CUDA
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "kernels/cuda/rank.h"
#include "runtime/backend.h"
#include "runtime/runtime.h"
#include "sim/collectives.h"

enum { N = 4 };
enum { INITS, CALLS, ABORTS, FINALIZES, DESTROYS, LIVE };

static void (*fake_set)(int init_rank, int call_rank);
static void (*fake_counts)(int *out);

static dt_runtime rt;
static cuda_rank ranks_ctx[N];

/* the backend's events, as the watchdog sees them. Each call records
 * two on its rank (before and after the call: even and odd in the rank's
 * order); which are done is the test's: ev_mode 0 all (the GPU keeps up),
 * 1 the ones before the calls only (a call that never finishes), 2 none
 * (the stream is still busy with earlier work). Checks on the watchdog
 * thread are counted in ev_bad and asserted on the test's thread. */
enum { EV_ALL, EV_HANG, EV_BACKLOG };
static atomic_int ev_mode, ev_records, ev_destroys, ev_bad;
static atomic_int ev_per_rank[N];
typedef struct fake_event { int magic; bool before; } fake_event;
static void *fake_record(dt_runtime *r, int rank) {
  (void)r;
  fake_event *e = malloc(sizeof *e);
  if (e) {
    e->magic = 0x5eed;
    e->before = atomic_fetch_add(&ev_per_rank[rank], 1) % 2 == 0;
    atomic_fetch_add(&ev_records, 1);
  }
  return e;
}
static bool fake_done(void *ev) {
  fake_event *e = ev;
  if (e->magic != 0x5eed) atomic_fetch_add(&ev_bad, 1);
  int mode = atomic_load(&ev_mode);
  return mode == EV_ALL || (mode == EV_HANG && e->before);
}
static void fake_destroy(void *ev) {
  fake_event *e = ev;
  if (e->magic != 0x5eed) atomic_fetch_add(&ev_bad, 1);
  e->magic = 0;
  free(e);
  atomic_fetch_add(&ev_destroys, 1);
}
static runtime_backend fake_backend = {
    .event_record = fake_record, .event_done = fake_done,
    .event_destroy = fake_destroy};

static void make_runtime(int64_t timeout_ns) {
  memset(&rt, 0, sizeof rt);
  rt.nranks = N;
  rt.ranks = aligned_alloc(64, sizeof *rt.ranks * N);
  assert_non_null(rt.ranks);
  memset(rt.ranks, 0, sizeof *rt.ranks * N);
  for (int r = 0; r < N; r++) {
    rt.ranks[r].gpu = r;
    rt.ranks[r].dev_ctx = &ranks_ctx[r];
  }
  rt.backend = &fake_backend;
  rt.coll = sim_coll_world_create(N, timeout_ns);
  assert_non_null(rt.coll);
  assert_int_equal(runtime_nccl_open(&rt), DT_OK);
}

static void drop_runtime(void) {
  runtime_nccl_close(&rt);
  sim_coll_world_destroy(rt.coll);
  for (int r = 0; r < N; r++) free(atomic_load(&rt.ranks[r].fault));
  free(rt.ranks);
  /* every event the calls recorded was dropped once, none seen freed */
  assert_int_equal(atomic_load(&ev_records), atomic_load(&ev_destroys));
  assert_int_equal(atomic_load(&ev_bad), 0);
  for (int r = 0; r < N; r++) atomic_store(&ev_per_rank[r], 0);
}

static int counts_now(int i) {
  int c[6];
  fake_counts(c);
  return c[i];
}

typedef struct member_call {
  const void *group; /* the group's identity */
  int member, n, kind;
  dt_status st;
  char msg[512];
} member_call;

static int64_t counts4[N] = {3, 1, 4, 1}; /* unequal: a grouped call */
static float buf_in[16], buf_out[16];

static void *run_member(void *p) {
  member_call *m = p;
  static const int ranks[N] = {0, 1, 2, 3}; /* stable, as sim's */
  sim_coll_call k = {.kind = m->kind, .g = m->group, .n = m->n,
                     .member = m->member, .ranks = ranks, .dtype = DT_FLOAT32,
                     .op = DT_REDUCE_SUM, .count = 4, .in = buf_in,
                     .out = buf_out, .counts = counts4};
  m->st = runtime_nccl_call(&rt, m->member, &k);
  snprintf(m->msg, sizeof m->msg, "%s", m->st == DT_OK ? "" : dt_last_error());
  return NULL;
}

/* members [0, present) of a group of n call kind at once */
static void round_of(const void *group, int n, int present, int kind,
                     member_call *m) {
  pthread_t t[N];
  for (int i = 0; i < present; i++) {
    m[i] = (member_call){.group = group, .member = i, .n = n, .kind = kind};
    assert_int_equal(pthread_create(&t[i], NULL, run_member, &m[i]), 0);
  }
  for (int i = 0; i < present; i++) pthread_join(t[i], NULL);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void expect_msg(const member_call *m, const char *want) {
  if (m->st == DT_OK || !strstr(m->msg, want))
    fail_msg("member %d: status %d, \"%s\" lacks \"%s\"", m->member,
             (int)m->st, m->msg, want);
}

static void works(void **state) {
  (void)state;
  static char group;
  make_runtime(60LL * 1000000000);
  member_call m[N];
  round_of(&group, N, N, SIM_COLL_KIND_ALL_REDUCE, m);
  for (int i = 0; i < N; i++)
    if (m[i].st != DT_OK) fail_msg("member %d: %s", i, m[i].msg);
  assert_int_equal(counts_now(INITS), N);
  assert_int_equal(counts_now(CALLS), N);
  /* unequal all_gather: one broadcast per member in a group call */
  round_of(&group, N, N, SIM_COLL_KIND_ALL_GATHER, m);
  for (int i = 0; i < N; i++)
    if (m[i].st != DT_OK) fail_msg("member %d: %s", i, m[i].msg);
  assert_int_equal(counts_now(INITS), N); /* made once */
  assert_int_equal(counts_now(CALLS), N + N * N);
  drop_runtime();
  assert_int_equal(counts_now(FINALIZES), N);
  assert_int_equal(counts_now(DESTROYS), N);
  assert_int_equal(counts_now(ABORTS), 0);
  assert_int_equal(counts_now(LIVE), 0);
}

static void init_fails(void **state) {
  (void)state;
  static char group;
  int aborts0 = counts_now(ABORTS), inits0 = counts_now(INITS);
  make_runtime(60LL * 1000000000); /* a wait for the timeout would show */
  fake_set(2, -1);
  member_call m[N];
  double t0 = now_s();
  round_of(&group, N, N, SIM_COLL_KIND_ALL_REDUCE, m);
  assert_true(now_s() - t0 < 20);
  fake_set(-1, -1);
  expect_msg(&m[2], "ncclCommInitRankConfig: fake internal error");
  /* the others name the first failure, whether they gave up polling or
   * came after it */
  for (int i = 0; i < N; i++)
    if (i != 2)
      expect_msg(&m[i], "aborted after an earlier failure: rank 2 (member 2)");
  /* nothing was issued on any stream: no rank is marked */
  for (int r = 0; r < N; r++) assert_null(runtime_rank_fault_of(&rt, r));
  /* the communicators made (up to three: a member that came after the
   * failure made none) are gone, none twice */
  assert_int_equal(counts_now(ABORTS) - aborts0, counts_now(INITS) - inits0);
  assert_int_equal(counts_now(LIVE), 0);
  int inits = counts_now(INITS);
  round_of(&group, N, N, SIM_COLL_KIND_ALL_REDUCE, m);
  for (int i = 0; i < N; i++)
    expect_msg(&m[i], "aborted after an earlier failure: rank 2 (member 2)");
  assert_int_equal(counts_now(INITS), inits); /* nothing made again */
  drop_runtime();
  assert_int_equal(counts_now(LIVE), 0);
}

static void member_absent(void **state) {
  (void)state;
  static char group;
  int aborts0 = counts_now(ABORTS), inits0 = counts_now(INITS);
  make_runtime(200LL * 1000000); /* 0.2 s */
  member_call m[N];
  round_of(&group, 3, 2, SIM_COLL_KIND_ALL_REDUCE, m); /* member 2 never */
  /* the first to time out breaks the group; the other may give up then */
  assert_int_not_equal(m[0].st, DT_OK);
  assert_int_not_equal(m[1].st, DT_OK);
  if (!strstr(m[0].msg, "not done after 0.2 s"))
    expect_msg(&m[1], "not done after 0.2 s");
  assert_int_equal(counts_now(ABORTS) - aborts0, counts_now(INITS) - inits0);
  assert_int_equal(counts_now(LIVE), 0);
  drop_runtime();
}

static void call_fails(void **state) {
  (void)state;
  static char group;
  int aborts0 = counts_now(ABORTS), destroys0 = counts_now(DESTROYS);
  make_runtime(60LL * 1000000000);
  member_call m[N];
  fake_set(-1, 1);
  round_of(&group, N, N, SIM_COLL_KIND_ALL_REDUCE, m);
  fake_set(-1, -1);
  expect_msg(&m[1], "ncclAllReduce: fake internal error");
  /* every member's communicator aborted: none waits for the share; and
   * every member's rank marked, since members that returned DT_OK may
   * have had their work cut short by the abort */
  assert_int_equal(counts_now(ABORTS) - aborts0, N);
  assert_int_equal(counts_now(LIVE), 0);
  for (int r = 0; r < N; r++) {
    const char *f = runtime_rank_fault_of(&rt, r);
    if (!f || !strstr(f, "aborted after a failure in its group "
                         "(rank 1 (member 1): ncclAllReduce"))
      fail_msg("rank %d: fault \"%s\"", r, f ? f : "(none)");
  }
  round_of(&group, N, N, SIM_COLL_KIND_BROADCAST, m);
  for (int i = 0; i < N; i++)
    expect_msg(&m[i], "aborted after an earlier failure: rank 1 (member 1): "
                      "ncclAllReduce");
  drop_runtime();
  assert_int_equal(counts_now(DESTROYS), destroys0); /* none left to destroy */
}

/* every member's call issued, the GPU never finishing it: the watchdog
 * breaks the group a timeout after the calls started (communicators
 * aborted, ranks marked); the group refuses the next round, and a faulty
 * rank takes part in no other group's collective either */
static void hang_detected(void **state) {
  (void)state;
  static char group, other;
  int aborts0 = counts_now(ABORTS);
  make_runtime(300LL * 1000000); /* 0.3 s */
  atomic_store(&ev_mode, EV_HANG);
  member_call m[N];
  double t0 = now_s();
  round_of(&group, N, N, SIM_COLL_KIND_ALL_REDUCE, m);
  for (int i = 0; i < N; i++)
    if (m[i].st != DT_OK) fail_msg("member %d: %s", i, m[i].msg);
  while (counts_now(ABORTS) - aborts0 < N && now_s() - t0 < 20) {
    struct timespec ts = {0, 5000000};
    nanosleep(&ts, NULL);
  }
  assert_int_equal(counts_now(ABORTS) - aborts0, N);
  assert_true(now_s() - t0 >= 0.3); /* not before the timeout */
  for (int r = 0; r < N; r++) {
    const char *f = runtime_rank_fault_of(&rt, r);
    if (!f || !strstr(f, "did not finish on the GPU within 0.3 s"))
      fail_msg("rank %d: fault \"%s\"", r, f ? f : "(none)");
  }
  round_of(&group, N, N, SIM_COLL_KIND_ALL_REDUCE, m);
  for (int i = 0; i < N; i++)
    expect_msg(&m[i], "did not finish on the GPU within 0.3 s");
  int inits = counts_now(INITS);
  round_of(&other, N, N, SIM_COLL_KIND_BROADCAST, m);
  for (int i = 0; i < N; i++) expect_msg(&m[i], "faulty");
  assert_int_equal(counts_now(INITS), inits); /* nothing made for it */
  atomic_store(&ev_mode, EV_ALL);
  drop_runtime();
  assert_int_equal(counts_now(LIVE), 0);
}

/* calls queued behind other work: their clocks start when the streams
 * reach them, so a backlog longer than the timeout is not a hang */
static void backlog_not_hang(void **state) {
  (void)state;
  static char group;
  int aborts0 = counts_now(ABORTS);
  make_runtime(200LL * 1000000); /* 0.2 s */
  atomic_store(&ev_mode, EV_BACKLOG);
  member_call m[N];
  round_of(&group, N, N, SIM_COLL_KIND_ALL_REDUCE, m);
  for (int i = 0; i < N; i++)
    if (m[i].st != DT_OK) fail_msg("member %d: %s", i, m[i].msg);
  struct timespec ts = {0, 600000000}; /* three timeouts of backlog */
  nanosleep(&ts, NULL);
  atomic_store(&ev_mode, EV_ALL);
  ts.tv_nsec = 100000000;
  nanosleep(&ts, NULL);
  assert_int_equal(counts_now(ABORTS) - aborts0, 0);
  for (int r = 0; r < N; r++) assert_null(runtime_rank_fault_of(&rt, r));
  round_of(&group, N, N, SIM_COLL_KIND_ALL_REDUCE, m);
  for (int i = 0; i < N; i++)
    if (m[i].st != DT_OK) fail_msg("member %d: %s", i, m[i].msg);
  drop_runtime();
  assert_int_equal(counts_now(LIVE), 0);
}

int main(void) {
  /* the stand-in, not the real NCCL (which needs GPUs) */
  void *h = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
  fake_set = h ? (void (*)(int, int))dlsym(h, "fake_nccl_set") : NULL;
  fake_counts = h ? (void (*)(int *))dlsym(h, "fake_nccl_counts") : NULL;
  if (!fake_set || !fake_counts) {
    fprintf(stderr, "test_nccl_host: the stand-in NCCL is not first in "
            "LD_LIBRARY_PATH (ctest sets it); skipped\n");
    return 77;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(works),
      cmocka_unit_test(init_fails),
      cmocka_unit_test(member_absent),
      cmocka_unit_test(call_fails),
      cmocka_unit_test(hang_detected),
      cmocka_unit_test(backlog_not_hang),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

#else
int main(void) {
  fprintf(stderr, "test_nccl_host: built without CUDA; skipped\n");
  return 77;
}
#endif
