/* The engine as a server uses it: many issuing threads on one runtime over
 * small and large per-rank queues (no hang, right values), a rank blocked
 * for seconds while another rank's stream keeps running (no head-of-line
 * blocking), and create/destroy cycles under concurrent issuing. Each test
 * runs under an alarm, so a hang fails instead of stalling CI; every
 * figure is checked against values computed here, not read back from the
 * engine's state. */
#include <dirent.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "runtime/runtime.h"
#include "sched/future.h"
#include "sched/pool.h"
#include "testutil.h"
#include "threads.h"

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define SCALE 8
#else
#define SCALE 1
#endif

/* ---- N issuing threads on one runtime */
typedef struct issue_job {
  dt_runtime *rt;
  int ranks, iters;
  bool own_device;      /* thread i issues to cpu:(i % ranks), else cpu:0 */
  dt_tensor *shared;    /* cpu:0 input of the shared-device mode */
} issue_job;

static void issue_body(void *arg, int i) {
  issue_job *j = arg;
  dt_runtime_set_current(j->rt);
  if (!j->own_device) { /* many threads, one stream: ops on rank 0 */
    for (int k = 0; k < j->iters; k++) {
      dt_tensor *y = dt_add(j->shared, j->shared);
      TU_CHECK(y != NULL, "dt_add: %s", dt_last_error());
      dt_tensor_release(y);
    }
    return;
  }
  char dev[16];
  snprintf(dev, sizeof dev, "%s", tu_dev(i % j->ranks));
  dt_tensor_options o = {.dtype = DT_FLOAT32, .device = dev};
  for (int k = 0; k < j->iters; k++) {
    float v = (float)(i * 1000 + k % 1000), out[4] = {0};
    dt_tensor *t = dt_full(DT_SHAPE(4), v, &o);
    TU_CHECK(t != NULL, "dt_full: %s", dt_last_error());
    if (!t) return;
    TU_CHECK(dt_to_host(t, out, sizeof out) == DT_OK, "dt_to_host: %s",
             dt_last_error());
    TU_CHECK(out[0] == v && out[3] == v, "thread %d: got %g, want %g", i,
             (double)out[0], (double)v);
    dt_tensor_release(t);
  }
}

static void issue_round(int threads, int capacity, bool own_device,
                        int iters) {
  dt_runtime_options ro = {.num_ranks = 4, .ring_capacity = capacity};
  dt_runtime *rt = dt_runtime_create(&ro);
  assert_non_null(rt);
  dt_tensor_options o = {.dtype = DT_FLOAT32, .device = tu_dev(0)};
  dt_runtime_set_current(rt);
  issue_job j = {rt, 4, iters, own_device, dt_ones(DT_SHAPE(4), &o)};
  assert_non_null(j.shared);
  tu_run_threads(threads, issue_body, &j);
  float got[4];
  assert_int_equal(dt_to_host(j.shared, got, sizeof got), DT_OK);
  assert_true(got[0] == 1.0f);
  dt_tensor_release(j.shared);
  assert_int_equal(dt_runtime_synchronize(rt), DT_OK);
  dt_runtime_set_current(NULL);
  dt_runtime_destroy(rt);
  TU_ASSERT_NO_THREAD_FAILURES();
}

/* The lost wake-up of a shared gate: with a broadcast ring, a parked rank
 * that no record addresses could sleep on a slot claimed but not yet
 * committed and hold every producer back for ever. Threads x queue
 * capacities x issuing modes, 216 create/destroy rounds in all (27 under
 * the sanitizers). */
static void test_issuers_sweep(void **state) {
  (void)state;
  static const int threads[] = {2, 4, 16};
  static const int caps[] = {4, 16, 1024};
  for (int t = 0; t < 3; t++)
    for (int c = 0; c < 3; c++) {
      int rounds = 24 / SCALE;
      for (int r = 0; r < rounds; r++) {
        issue_round(threads[t], caps[c], false, 200 / threads[t] + 8);
        issue_round(threads[t], caps[c], true, 40 / threads[t] + 4);
      }
    }
}

/* ---- a blocked rank holds up only its own stream */
static void test_blocked_rank_no_head_of_line(void **state) {
  (void)state;
  dt_runtime_options ro = {.num_ranks = 4, .ring_capacity = 1024};
  dt_runtime *rt = dt_runtime_create(&ro);
  assert_non_null(rt);
  dt_runtime_set_current(rt);
  /* rank 0 waits on an event only this test completes */
  dt_future *gate = sched_future_new();
  assert_non_null(gate);
  assert_int_equal(dt_stream_wait_event(rt, 0, gate), DT_OK);
  dt_tensor_options o1 = {.dtype = DT_FLOAT32, .device = tu_dev(1)};
  dt_tensor_options o0 = {.dtype = DT_FLOAT32, .device = tu_dev(0)};
  dt_tensor *blocked = dt_ones(DT_SHAPE(2), &o0); /* queued behind the gate */
  dt_tensor *acc = dt_zeros(DT_SHAPE(2), &o1);
  dt_tensor *one = dt_ones(DT_SHAPE(2), &o1);
  assert_true(blocked && acc && one);
  int n = 100000 / SCALE; /* ~100x rank 1's queue capacity */
  int64_t t0 = tu_now_ns();
  for (int k = 0; k < n; k++) {
    dt_tensor *next = dt_add(acc, one);
    assert_non_null(next);
    dt_tensor_release(acc);
    acc = next;
  }
  float got[2];
  assert_int_equal(dt_to_host(acc, got, sizeof got), DT_OK);
  int64_t took = tu_now_ns() - t0;
  assert_true(got[0] == (float)n && got[1] == (float)n);
  /* rank 0 is still blocked: its record has not run */
  assert_false(dt_future_ready(gate));
  dt_future *f0 = dt_event_record(rt, 0);
  assert_non_null(f0);
  assert_int_equal(dt_future_wait(f0, 50 * 1000000LL), DT_ERR_TIMEOUT);
  sched_future_complete(gate, DT_OK, NULL);
  assert_int_equal(dt_future_wait(f0, -1), DT_OK);
  assert_int_equal(dt_to_host(blocked, got, sizeof got), DT_OK);
  assert_true(got[0] == 1.0f);
  printf("# %d records to rank 1 in %.0f ms while rank 0 was blocked\n", n,
         (double)took / 1e6);
  dt_future_release(f0);
  dt_future_release(gate);
  dt_tensor_release(blocked);
  dt_tensor_release(acc);
  dt_tensor_release(one);
  dt_runtime_set_current(NULL);
  dt_runtime_destroy(rt);
}

/* ---- idle ranks stay parked */
/* A runtime of 64 ranks with one busy stream: the other 63 are never
 * woken (a broadcast ring woke every parked rank each lap). */
static void test_idle_ranks_not_woken(void **state) {
  (void)state;
  dt_runtime_options ro = {.num_ranks = 64, .ring_capacity = 16};
  dt_runtime *rt = dt_runtime_create(&ro);
  assert_non_null(rt);
  dt_runtime_set_current(rt);
  dt_tensor_options o = {.dtype = DT_FLOAT32, .device = tu_dev(5)};
  dt_tensor *acc = dt_zeros(DT_SHAPE(4), &o), *one = dt_ones(DT_SHAPE(4), &o);
  assert_true(acc && one);
  assert_int_equal(dt_runtime_synchronize(rt), DT_OK);
  tu_sleep_ns(50 * 1000000LL); /* let every rank park */
  int n = 4000 / SCALE;
  int64_t wakes0 = sched_pool_get_stats(rt->pool).wakes;
  for (int k = 0; k < n; k++) {
    dt_tensor *next = dt_add(acc, one);
    dt_tensor_release(acc);
    acc = next;
  }
  float got[4];
  assert_int_equal(dt_to_host(acc, got, sizeof got), DT_OK);
  assert_true(got[0] == (float)n);
  /* two records per iteration (the add, and the free of the old acc): at
   * most one wake each, all of them rank 5's (a broadcast ring of 16 slots
   * woke all 63 idle ranks every 16 records: ~8n wakes) */
  int64_t wakes = sched_pool_get_stats(rt->pool).wakes - wakes0;
  printf("# %d records to one of 64 ranks: %lld wakes\n", n, (long long)wakes);
  assert_true(wakes <= 2 * n + 2);
  dt_tensor_release(acc);
  dt_tensor_release(one);
  dt_runtime_set_current(NULL);
  dt_runtime_destroy(rt);
}

/* ---- the whole API from a future callback */
typedef struct cb_ctx {
  dt_runtime *rt;
  dt_mesh *mesh;
  _Atomic int done;     /* 1 once the callback finished */
  int failures;
  char first[256];
} cb_ctx;

#define CB_CHECK(x, cond)                                                   \
  do {                                                                      \
    if (!(cond) && (x)->failures++ == 0)                                    \
      snprintf((x)->first, sizeof (x)->first, "%s:%d: %s (%s)", __FILE__,   \
               __LINE__, #cond, dt_last_error());                           \
  } while (0)

static void every_api(dt_future *f, dt_status st, void *user) {
  cb_ctx *x = user;
  (void)f;
  CB_CHECK(x, st == DT_OK);
  CB_CHECK(x, dt_runtime_set_current(x->rt) == DT_OK);
  dt_tensor_options o = {.dtype = DT_FLOAT32, .device = tu_dev(0)};
  /* more records to rank 0 than its queue holds: no wait on itself */
  dt_tensor *acc = dt_zeros(DT_SHAPE(3), &o), *one = dt_ones(DT_SHAPE(3), &o);
  for (int k = 0; k < 100 && acc; k++) {
    dt_tensor *next = dt_add(acc, one);
    dt_tensor_release(acc);
    acc = next;
  }
  float v[3] = {0};
  CB_CHECK(x, dt_to_host(acc, v, sizeof v) == DT_OK && v[2] == 100.0f);
  dt_future *af = dt_to_host_async(acc, v, sizeof v);
  CB_CHECK(x, af && dt_future_wait(af, -1) == DT_OK);
  dt_future_release(af);
  CB_CHECK(x, dt_local_to_host(acc, 0, v, sizeof v) == DT_OK);
  CB_CHECK(x, dt_runtime_synchronize(x->rt) == DT_OK);
  /* an op whose kernel checks indices waits for its rank */
  int64_t idx_v[2] = {2, 0};
  dt_tensor *idx = dt_from_host(idx_v, DT_SHAPE(2),
                                &(dt_tensor_options){.dtype = DT_INT64,
                                                     .device = tu_dev(0)});
  dt_tensor *sel = dt_index_select(acc, 0, idx);
  CB_CHECK(x, sel != NULL);
  /* the ops added for PyTorch's semantics */
  dt_tensor *fd = dt_floor_divide_scalar(acc, -3), *rm = dt_remainder(acc, one);
  dt_tensor *lg = dt_from_host((float[]){1, 2, 3}, DT_SHAPE(3), &o);
  int64_t tv = 2;
  dt_tensor *tg = dt_from_host(&tv, DT_SHAPE(), &(dt_tensor_options){
                                   .dtype = DT_INT64, .device = tu_dev(0)});
  dt_tensor *ce = dt_cross_entropy_smoothed(lg, tg, DT_REDUCTION_MEAN, -100, 0.1);
  float fv[3] = {0}, cv = 0;
  CB_CHECK(x, fd && dt_to_host(fd, fv, sizeof fv) == DT_OK && fv[0] == -34.0f);
  CB_CHECK(x, rm && dt_to_host(rm, fv, sizeof fv) == DT_OK && fv[2] == 0.0f);
  /* (1 - 0.1)(lse - 3) + 0.1 (lse - 2): lse = log(e + e^2 + e^3) */
  double lse = log(exp(1.0) + exp(2.0) + exp(3.0));
  CB_CHECK(x, ce && dt_to_host(ce, &cv, sizeof cv) == DT_OK &&
                  fabs(cv - (0.9 * (lse - 3) + 0.1 * (lse - 2))) < 1e-5);
  dt_tensor_release(fd);
  dt_tensor_release(rm);
  dt_tensor_release(lg);
  dt_tensor_release(tg);
  dt_tensor_release(ce);
  CB_CHECK(x, dt_runtime_empty_cache(x->rt) == DT_OK);
  dt_future *ev = dt_event_record(x->rt, 1);
  CB_CHECK(x, ev && dt_stream_wait_event(x->rt, 0, ev) == DT_OK);
  CB_CHECK(x, dt_future_wait(ev, -1) == DT_OK);
  dt_future_release(ev);
  /* DTensors: factory, redistribute (collectives on both ranks), fetch */
  dt_tensor *d = dt_ones(DT_SHAPE(4, 2),
                         &(dt_tensor_options){.dtype = DT_FLOAT32,
                                              .mesh = x->mesh,
                                              .placements = DT_PLACEMENTS(DT_SHARD(0))});
  dt_tensor *r = dt_redistribute(d, NULL, DT_PLACEMENTS(DT_REPLICATE));
  float g[8] = {0};
  CB_CHECK(x, r && dt_to_host(r, g, sizeof g) == DT_OK && g[7] == 1.0f);
  /* a runtime made and destroyed inside the callback */
  dt_runtime *other = dt_runtime_create(&(dt_runtime_options){.num_ranks = 2});
  CB_CHECK(x, other != NULL);
  dt_runtime_destroy(other);
  dt_tensor_release(r);
  dt_tensor_release(d);
  dt_tensor_release(sel);
  dt_tensor_release(idx);
  dt_tensor_release(acc);
  dt_tensor_release(one);
  dt_runtime_set_current(NULL);
  /* release: the test thread reads the context after seeing done */
  atomic_store_explicit(&x->done, 1, memory_order_release);
}

static void test_api_from_callback(void **state) {
  (void)state;
  dt_runtime_options ro = {.num_ranks = 2, .ring_capacity = 8};
  dt_runtime *rt = dt_runtime_create(&ro);
  assert_non_null(rt);
  cb_ctx x = {.rt = rt};
  x.mesh = dt_mesh_init(rt, NULL, DT_SHAPE(2), NULL);
  assert_non_null(x.mesh);
  dt_runtime_set_current(rt);
  dt_tensor *t = dt_ones(DT_SHAPE(1024), &(dt_tensor_options){
                                              .dtype = DT_FLOAT32,
                                              .device = tu_dev(0)});
  float *buf = malloc(1024 * sizeof(float));
  dt_future *f = dt_to_host_async(t, buf, 1024 * sizeof(float));
  assert_non_null(f);
  assert_int_equal(dt_future_then(f, every_api, &x), DT_OK);
  int64_t deadline = tu_now_ns() + 60 * 1000000000LL;
  /* acquire: pairs with the callback's release store */
  while (!atomic_load_explicit(&x.done, memory_order_acquire)) {
    if (tu_now_ns() > deadline) fail_msg("the callback did not finish in 60 s");
    tu_sleep_ns(1000000);
  }
  if (x.failures) fail_msg("%d checks failed in the callback; first: %s",
                           x.failures, x.first);
  dt_future_release(f);
  free(buf);
  dt_tensor_release(t);
  dt_mesh_release(x.mesh);
  dt_runtime_set_current(NULL);
  dt_runtime_destroy(rt);
}

/* a callback that destroys the runtime whose rank completed its future */
static void destroy_cb(dt_future *f, dt_status st, void *user) {
  (void)f;
  (void)st;
  _Atomic(dt_runtime *) *rt = user;
  dt_runtime_destroy(atomic_load_explicit(rt, memory_order_relaxed));
  /* release: the destroy happens-before the test thread sees NULL */
  atomic_store_explicit(rt, NULL, memory_order_release);
}

static void test_destroy_from_callback(void **state) {
  (void)state;
  for (int i = 0; i < 20; i++) {
    dt_runtime *rt = dt_runtime_create(&(dt_runtime_options){.num_ranks = 2});
    assert_non_null(rt);
    dt_future *ev = dt_event_record(rt, 1);
    assert_non_null(ev);
    _Atomic(dt_runtime *) holder = rt;
    assert_int_equal(dt_future_then(ev, destroy_cb, (void *)&holder), DT_OK);
    int64_t deadline = tu_now_ns() + 30 * 1000000000LL;
    /* acquire: pairs with the callback's release store */
    while (atomic_load_explicit(&holder, memory_order_acquire)) {
      if (tu_now_ns() > deadline) fail_msg("destroy from a callback hung");
      tu_sleep_ns(100000);
    }
    dt_future_release(ev);
  }
}

/* ---- lifetimes */
typedef struct current_ctx {
  dt_runtime *rt;
  _Atomic int step;     /* 1: current set; 2: destroyed by the main thread */
  dt_status st;
  char msg[256];
} current_ctx;

static void *current_user(void *arg) {
  current_ctx *x = arg;
  dt_runtime_set_current(x->rt);
  /* release/acquire: the two threads take turns */
  atomic_store_explicit(&x->step, 1, memory_order_release);
  while (atomic_load_explicit(&x->step, memory_order_acquire) != 2)
    tu_sleep_ns(100000);
  dt_tensor *t = dt_ones(DT_SHAPE(2), NULL); /* on the destroyed runtime */
  x->st = t ? DT_OK : dt_last_status();
  snprintf(x->msg, sizeof x->msg, "%s", dt_last_error());
  dt_tensor_release(t);
  return NULL; /* the thread's reference goes with it */
}

/* another thread's current runtime destroyed under it: a clear error, not
 * freed memory (ASan checks the latter in CI) */
static void test_current_runtime_destroyed_elsewhere(void **state) {
  (void)state;
  current_ctx x = {.rt = dt_runtime_create(&(dt_runtime_options){.num_ranks = 2})};
  assert_non_null(x.rt);
  pthread_t t = tu_spawn(current_user, &x);
  while (atomic_load_explicit(&x.step, memory_order_acquire) != 1)
    tu_sleep_ns(100000);
  dt_runtime_destroy(x.rt);
  atomic_store_explicit(&x.step, 2, memory_order_release);
  pthread_join(t, NULL);
  assert_int_equal(x.st, DT_ERR_DEVICE);
  assert_non_null(strstr(x.msg, "destroyed"));
}

/* the default runtime destroyed by another thread while this one holds
 * the pointer dt_runtime_default gave it: a dead runtime with a clear
 * error (not freed memory), and the next implicit use makes a new one */
typedef struct default_ctx {
  _Atomic int step;     /* 1: B holds the default; 2: main destroyed it */
  dt_runtime *seen;
  dt_status sync_st, ones_st;
  char msg[256];
  bool fresh;           /* the later default differs from the destroyed */
} default_ctx;

static void *default_user(void *arg) {
  default_ctx *x = arg;
  dt_runtime *d = dt_runtime_default();
  x->seen = d;
  /* release/acquire: the two threads take turns */
  atomic_store_explicit(&x->step, 1, memory_order_release);
  while (atomic_load_explicit(&x->step, memory_order_acquire) != 2)
    tu_sleep_ns(100000);
  x->sync_st = dt_runtime_synchronize(d);
  snprintf(x->msg, sizeof x->msg, "%s", dt_last_error());
  dt_tensor *t = dt_ones(DT_SHAPE(2), NULL); /* no current: the default */
  x->ones_st = t ? DT_OK : dt_last_status();
  float v[2] = {0};
  if (t && dt_to_host(t, v, sizeof v) != DT_OK) x->ones_st = dt_last_status();
  if (x->ones_st == DT_OK && v[1] != 1.0f) x->ones_st = DT_ERR_INTERNAL;
  x->fresh = dt_runtime_default() != d;
  dt_tensor_release(t);
  return NULL;
}

static void test_default_runtime_destroyed_elsewhere(void **state) {
  (void)state;
  default_ctx x = {0};
  pthread_t t = tu_spawn(default_user, &x);
  while (atomic_load_explicit(&x.step, memory_order_acquire) != 1)
    tu_sleep_ns(100000);
  assert_non_null(x.seen);
  dt_runtime_destroy(x.seen); /* the same default, from the main thread */
  atomic_store_explicit(&x.step, 2, memory_order_release);
  pthread_join(t, NULL);
  assert_int_not_equal(x.sync_st, DT_OK);
  assert_non_null(strstr(x.msg, "destroyed"));
  assert_int_equal(x.ones_st, DT_OK);
  assert_true(x.fresh);
}

/* every rank thread has run a record (so it ran its start-up code):
 * synchronize alone returns at once when nothing was issued */
static void all_started(dt_runtime *rt, int n) {
  for (int r = 0; r < n; r++) {
    dt_future *ev = dt_event_record(rt, r);
    assert_non_null(ev);
    assert_int_equal(dt_future_wait(ev, -1), DT_OK);
    dt_future_release(ev);
  }
}

/* rank threads carry their rank in their name (gdb, perf, top -H) */
static void test_rank_thread_names(void **state) {
  (void)state;
  dt_runtime *rt = dt_runtime_create(&(dt_runtime_options){.num_ranks = 3});
  assert_non_null(rt);
  all_started(rt, 3);
  bool seen[3] = {false, false, false};
  char path[300], name[32];
  DIR *d = opendir("/proc/self/task"); /* this process's threads */
  assert_non_null(d);
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    if (e->d_name[0] == '.') continue;
    snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
    FILE *f = fopen(path, "r");
    if (!f) continue;
    int r;
    if (fgets(name, sizeof name, f) && sscanf(name, "dt-rank-%d", &r) == 1 &&
        r >= 0 && r < 3)
      seen[r] = true;
    fclose(f);
  }
  closedir(d);
  dt_runtime_destroy(rt);
  assert_true(seen[0] && seen[1] && seen[2]);
}

/* the CPUs /proc says thread `tid` may run on, as a bit mask (CPUs < 64) */
static uint64_t allowed_cpus(const char *tid) {
  char path[300], line[512];
  snprintf(path, sizeof path, "/proc/self/task/%s/status", tid);
  FILE *f = fopen(path, "r");
  uint64_t mask = 0;
  while (f && fgets(line, sizeof line, f))
    if (!strncmp(line, "Cpus_allowed_list:", 18))
      for (char *p = line + 18; *p && *p != '\n';) { /* "0-3,6" */
        long a = strtol(p, &p, 10), b = a;
        if (*p == '-') b = strtol(p + 1, &p, 10);
        for (long c = a; c <= b && c < 64; c++) mask |= 1ull << c;
        if (*p == ',') p++;
        else if (*p != '\n' && *p) p++;
      }
  if (f) fclose(f);
  return mask;
}

/* the tids of this process's threads (up to max), sorted */
static int list_tids(long *tids, int max) {
  int n = 0;
  DIR *d = opendir("/proc/self/task");
  assert_non_null(d);
  for (struct dirent *e; (e = readdir(d)) != NULL && n < max;)
    if (e->d_name[0] != '.') tids[n++] = atol(e->d_name);
  closedir(d);
  return n;
}

static bool in_list(long tid, const long *tids, int n) {
  for (int i = 0; i < n; i++)
    if (tids[i] == tid) return true;
  return false;
}

/* each rank's CPU mask, from the threads named dt-rank-N that are not in
 * `old` (other runtimes' ranks, e.g. the default one, share the names) */
static void rank_masks(int n, uint64_t *mask, const long *old, int nold) {
  for (int r = 0; r < n; r++) mask[r] = ~0ull;
  long tids[512];
  int nt = list_tids(tids, 512);
  char path[300], name[32], id[32];
  for (int i = 0; i < nt; i++) {
    if (in_list(tids[i], old, nold)) continue;
    snprintf(path, sizeof path, "/proc/self/task/%ld/comm", tids[i]);
    FILE *f = fopen(path, "r");
    int r;
    if (f && fgets(name, sizeof name, f) && sscanf(name, "dt-rank-%d", &r) == 1 &&
        r >= 0 && r < n) {
      snprintf(id, sizeof id, "%ld", tids[i]);
      mask[r] = allowed_cpus(id);
    }
    if (f) fclose(f);
  }
}

/* pinned ranks run on one CPU each, round-robin over the CPUs the process
 * may use; unpinned ones keep the whole mask */
static void test_rank_pinning(void **state) {
  (void)state;
  char self[32];
  snprintf(self, sizeof self, "%ld", (long)syscall(SYS_gettid));
  uint64_t all = allowed_cpus(self);
  int k = __builtin_popcountll(all);
  assert_true(k >= 1);
  for (int pin = -1; pin <= 1; pin += 2) {
    int n = 2 * k + 1;
    long old[512];
    int nold = list_tids(old, 512);
    dt_runtime *rt = dt_runtime_create(&(dt_runtime_options){.num_ranks = n,
                                                             .pin_ranks = pin});
    assert_non_null(rt);
    all_started(rt, n);
    uint64_t mask[64];
    rank_masks(n, mask, old, nold);
    for (int r = 0; r < n; r++) {
      if (pin < 0) {
        if (mask[r] != all)
          fail_msg("unpinned rank %d: CPUs %#llx, want %#llx", r,
                   (unsigned long long)mask[r], (unsigned long long)all);
        continue;
      }
      uint64_t want = all; /* the (r mod k)-th allowed CPU */
      for (int skip = r % k; skip > 0; skip--) want &= want - 1;
      want &= -want;
      if (mask[r] != want)
        fail_msg("rank %d: CPUs %#llx, want %#llx", r,
                 (unsigned long long)mask[r], (unsigned long long)want);
    }
    dt_runtime_destroy(rt);
  }
}

/* synchronize returns only once everything issued before it has run: every
 * future of the work issued before is complete without waiting */
static void test_synchronize_covers_issued_work(void **state) {
  (void)state;
  dt_runtime *rt = dt_runtime_create(&(dt_runtime_options){.num_ranks = 4});
  assert_non_null(rt);
  dt_runtime_set_current(rt);
  enum { K = 64 };
  float out[K][4];
  dt_future *f[K];
  for (int round = 0; round < 50 / SCALE + 1; round++) {
    for (int i = 0; i < K; i++) {
      char dev[16];
      snprintf(dev, sizeof dev, "%s", tu_dev(i % 4));
      dt_tensor *t = dt_full(DT_SHAPE(4), i, &(dt_tensor_options){.device = dev});
      f[i] = dt_to_host_async(t, out[i], sizeof out[i]);
      assert_non_null(f[i]);
      dt_tensor_release(t);
    }
    assert_int_equal(dt_runtime_synchronize(rt), DT_OK);
    for (int i = 0; i < K; i++) {
      assert_true(dt_future_ready(f[i]));
      assert_true(out[i][3] == (float)i);
      dt_future_release(f[i]);
    }
  }
  dt_runtime_set_current(NULL);
  dt_runtime_destroy(rt);
}

/* storages whose last reference drops on another rank's thread (a
 * redistribute's job releases its tensors on the rank that ran it last)
 * are freed by their owner: synchronize waits for that too, so memory
 * counts are exact when it returns */
static void test_synchronize_counts_remote_frees(void **state) {
  (void)state;
  dt_runtime *rt = dt_runtime_create(&(dt_runtime_options){.num_ranks = 2});
  dt_mesh *m = dt_mesh_init(rt, NULL, DT_SHAPE(2), NULL);
  assert_true(rt && m);
  for (int i = 0; i < 1000 / SCALE; i++) {
    dt_tensor *x = dt_ones(DT_SHAPE(4096), &(dt_tensor_options){
        .mesh = m, .placements = DT_PLACEMENTS(DT_SHARD(0))});
    dt_tensor *y = dt_redistribute(x, NULL, DT_PLACEMENTS(DT_REPLICATE));
    assert_true(x && y);
    dt_tensor_release(x); /* the job holds the last references now */
    dt_tensor_release(y);
    assert_int_equal(dt_runtime_synchronize(rt), DT_OK);
    for (int r = 0; r < 2; r++) {
      dt_memory_stats ms;
      assert_int_equal(dt_runtime_memory(rt, r, &ms), DT_OK);
      if (ms.used != 0) fail_msg("round %d: rank %d still uses %lld bytes", i, r,
                                 (long long)ms.used);
    }
  }
  dt_mesh_release(m);
  dt_runtime_destroy(rt);
}

/* a rank that drops the last reference of a DTensor hands the other
 * ranks' shards to their owners without waking them (a wake-up per rank
 * per op was most of a small op's cost at 64 ranks); a parked owner keeps
 * them until its next record, and synchronize wakes it: the memory is
 * exact when synchronize returns. The state: at most one rank per CPU
 * spins after a record (sched/pool.c max_spinners), the others park at
 * once, so with four ranks per CPU most owners are parked long before the
 * last rank of the job drops the references; the test checks that some
 * owner did hold freed shards while parked in most rounds */
static void test_synchronize_wakes_parked_owners(void **state) {
  (void)state;
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  int ranks = cpus < 2 ? 8 : cpus > 32 ? 128 : 4 * (int)cpus;
  dt_runtime *rt = dt_runtime_create(&(dt_runtime_options){.num_ranks = ranks});
  dt_mesh *m = dt_mesh_init(rt, NULL, DT_SHAPE(ranks), NULL);
  assert_true(rt && m);
  int held = 0, rounds = 20; /* held: rounds in which a parked owner
                              * still held freed shards */
  for (int i = 0; i < rounds; i++) {
    dt_tensor *x = dt_ones(DT_SHAPE(ranks * 256), &(dt_tensor_options){
        .mesh = m, .placements = DT_PLACEMENTS(DT_SHARD(0))});
    dt_tensor *y = dt_redistribute(x, NULL, DT_PLACEMENTS(DT_REPLICATE));
    assert_true(x && y);
    dt_tensor_release(x); /* the job holds the last references now */
    dt_tensor_release(y);
    tu_sleep_ns(5 * 1000000LL);
    for (int r = 0; r < ranks; r++) {
      dt_memory_stats ms;
      assert_int_equal(dt_runtime_memory(rt, r, &ms), DT_OK);
      if (ms.used != 0) { held++; break; }
    }
    assert_int_equal(dt_runtime_synchronize(rt), DT_OK);
    for (int r = 0; r < ranks; r++) {
      dt_memory_stats ms;
      assert_int_equal(dt_runtime_memory(rt, r, &ms), DT_OK);
      if (ms.used != 0) fail_msg("round %d: rank %d still uses %lld bytes", i, r,
                                 (long long)ms.used);
    }
  }
  /* woken at each hand-over (as before), owners held them in 1 of 200 */
  printf("# rounds with a parked owner holding freed shards: %d of %d\n", held,
         rounds);
  assert_true(held >= rounds / 2);
  dt_mesh_release(m);
  dt_runtime_destroy(rt);
}

static void cache_churn(void *arg, int i) {
  dt_runtime *rt = arg;
  dt_runtime_set_current(rt);
  for (int k = 0; k < 20; k++) {
    if (i % 2) {
      TU_CHECK(dt_runtime_empty_cache(rt) == DT_OK, "%s", dt_last_error());
    } else {
      dt_tensor *t = dt_zeros(DT_SHAPE((1 << 18) + k * 1024), NULL);
      TU_CHECK(t != NULL, "%s", dt_last_error());
      dt_tensor_release(t);
    }
  }
  dt_runtime_set_current(NULL);
}

/* the device cache stays within the capacity and empties on request */
static void test_device_cache_bounded(void **state) {
  (void)state;
  int64_t cap = 64 << 20;
  dt_runtime *rt = dt_runtime_create(&(dt_runtime_options){
      .num_ranks = 2, .device_memory = cap});
  assert_non_null(rt);
  dt_runtime_set_current(rt);
  /* freed blocks of many size classes: without a bound the cache grows
   * past the capacity (every class keeps its blocks) */
  for (int round = 0; round < 3; round++)
    for (int64_t n = 1 << 18; n <= (int64_t)12 << 20; n += 1 << 20) {
      dt_tensor *t = dt_zeros(DT_SHAPE(n / 4), NULL); /* n bytes */
      assert_non_null(t);
      dt_tensor_release(t);
    }
  assert_int_equal(dt_runtime_synchronize(rt), DT_OK);
  /* the rank is idle after synchronize: its counters are settled */
  const sim_device *dev = &rt->ranks[0].dev;
  printf("# cached %lld of %lld bytes (used %lld)\n", (long long)dev->cached,
         (long long)cap, (long long)dev->used);
  assert_true(dev->cached > 0);
  assert_true(dev->cached + dev->used <= cap);
  assert_int_equal(dt_runtime_empty_cache(rt), DT_OK);
  assert_true(dev->cached == 0);
  /* from several threads at once, while others allocate and free */
  tu_run_threads(4, cache_churn, rt);
  TU_ASSERT_NO_THREAD_FAILURES();
  tu_expect_status(dt_runtime_empty_cache(NULL), DT_ERR_INVALID_ARGUMENT,
                   "dt_runtime_empty_cache", NULL);
  dt_runtime_set_current(NULL);
  dt_runtime_destroy(rt);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_issuers_sweep),
      cmocka_unit_test(test_blocked_rank_no_head_of_line),
      cmocka_unit_test(test_idle_ranks_not_woken),
      cmocka_unit_test(test_api_from_callback),
      cmocka_unit_test(test_destroy_from_callback),
      cmocka_unit_test(test_current_runtime_destroyed_elsewhere),
      cmocka_unit_test(test_default_runtime_destroyed_elsewhere),
      cmocka_unit_test(test_rank_thread_names),
      cmocka_unit_test(test_rank_pinning),
      cmocka_unit_test(test_synchronize_covers_issued_work),
      cmocka_unit_test(test_synchronize_counts_remote_frees),
      cmocka_unit_test(test_synchronize_wakes_parked_owners),
      cmocka_unit_test(test_device_cache_bounded),
  };
  return TU_RUN_TESTS_WITH_ALARM(600, tests);
}
