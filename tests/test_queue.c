/* A rank's record queue (sched/queue.h): bounded, many producers, one
 * consumer, records in place in fixed-size cells. On one thread: argument
 * checks, order, full and empty, a claimed but uncommitted cell stopping
 * the consumer, whole cells usable and distinct, checked against a model
 * (the test's own list of live claims) over random claim / commit / pop
 * sequences, including across the wrap of the 64-bit positions. Under
 * threads: every record arrives exactly once, each producer's in order,
 * with its payload intact, in the cell its claim returned, and the k-th
 * record popped is the one claimed at first + k; the positions claim
 * returned are unique and dense. The reference is the test's own
 * bookkeeping (per producer counters, what each claim returned, what the
 * consumer has released), never the queue's state. Backpressure: an 8-cell
 * queue and a slow consumer; producers check after each claim that they
 * are never more than the capacity ahead of what the consumer released.
 * Zeroed memory as the initial state: creating a 4 MiB queue costs
 * (almost) no resident memory. */
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"
#include "sched/queue.h"

#if defined(__SANITIZE_THREAD__)
#define SCALE 4  /* TSan: ~10x slower, and 2 cores for up to 9 threads */
#else
#define SCALE 1
#endif

#define STALL_S 60 /* a run that has not finished by then is stuck */
#define REC_MAGIC UINT64_C(0x5155455545524543) /* "QUEUEREC" */
#define REC_TAIL 24 /* pattern bytes after the record in each cell */

/* depth() read by a producer races with the consumer's pop (two counters
 * read one after the other); the queue clamps it to [0, capacity], and
 * producers check that bound. */

/* one record, written into its cell by its producer before commit */
typedef struct rec {
  uint64_t magic;
  int32_t producer;
  int32_t pad;
  int64_t counter; /* 0, 1, 2, ... per producer */
} rec;

#define CELL_SIZE (sizeof(rec) + REC_TAIL)

typedef enum claim_mode {
  CLAIM_BLOCKING, /* sched_queue_claim */
  CLAIM_TRY,      /* sched_queue_try_claim, sched_yield while full */
  CLAIM_MIXED     /* even producers try, odd ones block */
} claim_mode;

typedef struct run_cfg {
  uint32_t capacity;
  int producers;
  int64_t per_producer;
  uint64_t first;   /* the queue's first position */
  claim_mode mode;
  int slow_every;   /* the consumer sleeps every this many records (0: never) */
  bool check_depth; /* producers and the consumer check depth() */
  bool prefault;    /* sched_queue_prefault before use */
} run_cfg;

typedef struct run {
  run_cfg cfg;
  sched_queue *q;
  int64_t total;
  uint64_t *pos;  /* what claim returned, [producer * per_producer + counter] */
  void **cells;   /* the cell claim returned, same index */
  int64_t *order; /* [k]: the record the consumer popped k-th (its index) */
  /* records the consumer is done with: bumped just before each pop */
  _Atomic uint64_t released;
  _Atomic int started; /* a start line, so that threads overlap */
  _Atomic int errors;
  _Atomic int error_ready; /* error[] is written */
  char error[200]; /* the first error (written by one thread) */
} run;

typedef struct worker { run *x; int id; } worker;

/* out-of-contract depth() readings over the whole run of this program */

static void report(run *x, const char *what, int id, int64_t k) {
  /* relaxed: the counter only elects who writes the message; join orders it */
  if (atomic_fetch_add_explicit(&x->errors, 1, memory_order_relaxed) == 0) {
    snprintf(x->error, sizeof x->error, "%s (thread %d, index %lld)", what,
             id, (long long)k);
    /* release: a stall report may read the message before the join */
    atomic_store_explicit(&x->error_ready, 1, memory_order_release);
  }
}

static void start_line(run *x) {
  int n = x->cfg.producers + 1;
  /* relaxed: the start line orders nothing (setup precedes pthread_create) */
  atomic_fetch_add_explicit(&x->started, 1, memory_order_relaxed);
  while (atomic_load_explicit(&x->started, memory_order_relaxed) < n)
    sched_yield();
}

static uint8_t tail_byte(int producer, int64_t counter, size_t j) {
  return (uint8_t)((uint64_t)counter * 131u + (uint64_t)producer * 17u +
                   j * 7u + 1u);
}

static void *producer_main(void *arg) {
  worker *w = arg;
  run *x = w->x;
  const run_cfg *cfg = &x->cfg;
  int64_t n = cfg->per_producer;
  bool use_try = cfg->mode == CLAIM_TRY ||
                 (cfg->mode == CLAIM_MIXED && w->id % 2 == 0);
  start_line(x);
  for (int64_t i = 0; i < n; i++) {
    uint64_t p = 0;
    unsigned char *c;
    if (use_try) {
      while (!(c = sched_queue_try_claim(x->q, &p))) sched_yield();
    } else {
      c = sched_queue_claim(x->q, &p);
    }
    if (!c) {
      report(x, "claim returned NULL", w->id, i);
      return NULL;
    }
    uint64_t j = p - cfg->first; /* index of the position, modulo 2^64 */
    if (j >= (uint64_t)x->total) {
      report(x, "claim returned a position outside [first, first+total)",
             w->id, i);
      return NULL;
    }
    /* claiming index j needs the pop of j - capacity, and the consumer
     * bumps `released` (relaxed) before it pops: the pop's release and
     * the claim's acquire make that bump visible here, so released >
     * j - capacity. A claim of a cell whose previous record the consumer
     * has not released fails this. */
    uint64_t rel = atomic_load_explicit(&x->released, memory_order_relaxed);
    if (j >= rel + cfg->capacity)
      report(x, "claimed more than the capacity ahead of the consumer",
             w->id, i);
    /* field by field, as the engine stores its records in place (the
     * single-thread tests check the alignment); not memcpy, whose range
     * accesses TSan checks less thoroughly */
    rec *r = (rec *)c;
    r->magic = REC_MAGIC;
    r->producer = w->id;
    r->pad = 0;
    r->counter = i;
    for (size_t b = 0; b < REC_TAIL; b++)
      c[sizeof *r + b] = tail_byte(w->id, i, b);
    x->pos[w->id * n + i] = p; /* published to the consumer by commit */
    x->cells[w->id * n + i] = c;
    sched_queue_commit(x->q, p);
    if (!cfg->check_depth) continue;
    uint64_t d = sched_queue_depth(x->q);
    if (d > cfg->capacity)
      report(x, "depth() above the capacity (producer)", w->id, i);
  }
  return NULL;
}

static void *consumer_main(void *arg) {
  worker *w = arg;
  run *x = w->x;
  const run_cfg *cfg = &x->cfg;
  int64_t n = cfg->per_producer;
  int64_t *last = malloc((size_t)cfg->producers * sizeof *last);
  if (!last) {
    report(x, "out of memory", -1, 0);
    return NULL;
  }
  for (int p = 0; p < cfg->producers; p++) last[p] = -1;
  start_line(x);
  for (int64_t k = 0; k < x->total; k++) {
    const unsigned char *c;
    for (int spin = 0; !(c = sched_queue_peek(x->q)); spin++)
      if (spin > 16) sched_yield();
    if (sched_queue_peek(x->q) != c)
      report(x, "a second peek returned another cell", -1, k);
    if (cfg->check_depth) {
      /* the consumer's own head is exact: the cell it holds is claimed
       * and not popped, and no claim passes an unpopped cell */
      uint64_t d = sched_queue_depth(x->q);
      if (d < 1 || d > cfg->capacity)
        report(x, "depth() outside [1, capacity] (consumer)", -1, k);
    }
    const rec *rp = (const rec *)c;
    rec r;
    r.magic = rp->magic;
    r.producer = rp->producer;
    r.counter = rp->counter;
    if (r.magic != REC_MAGIC || r.producer < 0 ||
        r.producer >= cfg->producers || r.counter < 0 || r.counter >= n) {
      report(x, "bad payload", -1, k);
      break; /* cannot tell whose it is: the join reports the rest */
    }
    for (size_t b = 0; b < REC_TAIL; b++)
      if (c[sizeof r + b] != tail_byte(r.producer, r.counter, b)) {
        report(x, "payload bytes after the record changed", -1, k);
        break;
      }
    int64_t idx = (int64_t)r.producer * n + r.counter;
    if (r.counter != last[r.producer] + 1)
      report(x, "a producer's records out of order, lost or repeated", -1, k);
    last[r.producer] = r.counter;
    if (x->cells[idx] != c)
      report(x, "peek returned another cell than the record's claim", -1, k);
    if (x->pos[idx] != cfg->first + (uint64_t)k)
      report(x, "the k-th record popped was not claimed at first + k", -1,
             k);
    x->order[k] = idx;
    if (cfg->slow_every && k % cfg->slow_every == 0) {
      struct timespec ts = {0, 50000}; /* hold the head cell, queue full */
      nanosleep(&ts, NULL);
    }
    /* relaxed: ordered before the pop's release (see producer_main) */
    atomic_fetch_add_explicit(&x->released, 1, memory_order_relaxed);
    sched_queue_pop(x->q);
  }
  for (int p = 0; p < cfg->producers; p++)
    if (last[p] != n - 1) report(x, "a producer's records missing", p, 0);
  free(last);
  return NULL;
}

/* A lost record, or a claim that was never committed, shows as a stall
 * (the consumer waits forever at its head): turn it into a failure with
 * the queue's state, after STALL_S, or after two quiet seconds once a
 * thread has reported an error (it may have left the others waiting). The
 * stuck threads and x are leaked then. */
static void join_or_fail(run *x, pthread_t *t, int n) {
  time_t start = time(NULL);
  uint64_t last = UINT64_MAX;
  int quiet = 0;
  for (int i = 0; i < n;) {
    struct timespec slice;
    clock_gettime(CLOCK_REALTIME, &slice);
    slice.tv_sec += 1;
    if (pthread_timedjoin_np(t[i], NULL, &slice) == 0) {
      i++;
      continue;
    }
    uint64_t rel = atomic_load(&x->released);
    quiet = rel == last ? quiet + 1 : 0;
    last = rel;
    bool err = atomic_load_explicit(&x->error_ready, memory_order_acquire);
    long waited = (long)(time(NULL) - start);
    if (waited < STALL_S && !(err && quiet >= 2)) continue;
    fail_msg("stalled (%ld s): capacity %u, %d producers, first %llu, "
             "%llu of %lld records released, depth %llu%s%s", waited,
             x->cfg.capacity, x->cfg.producers,
             (unsigned long long)x->cfg.first, (unsigned long long)rel,
             (long long)x->total,
             (unsigned long long)sched_queue_depth(x->q),
             err ? "; first error: " : "", err ? x->error : "");
  }
}

/* every record was claimed at a distinct position in [first, first +
 * total): with total records, that is all of them (unique and dense);
 * the consumer popped them in position order (checked as it went), and
 * order[] is a permutation of the records */
static void check_positions(run *x) {
  uint8_t *hit = calloc((size_t)x->total, 1);
  uint8_t *popped = calloc((size_t)x->total, 1);
  assert_true(hit && popped);
  for (int64_t i = 0; i < x->total; i++) {
    uint64_t j = x->pos[i] - x->cfg.first;
    if (j >= (uint64_t)x->total || hit[j])
      fail_msg("record %lld: position %llu repeated or outside the range",
               (long long)i, (unsigned long long)x->pos[i]);
    hit[j] = 1;
    int64_t o = x->order[i];
    if (o < 0 || o >= x->total || popped[o])
      fail_msg("pop %lld: record %lld repeated", (long long)i, (long long)o);
    popped[o] = 1;
  }
  free(hit);
  free(popped);
}

static void run_queue(run_cfg cfg) {
  run *x = calloc(1, sizeof *x);
  assert_non_null(x);
  x->cfg = cfg;
  x->total = cfg.per_producer * cfg.producers;
  x->q = sched_queue_create_at(cfg.capacity, CELL_SIZE, cfg.first);
  if (x->q && cfg.prefault) sched_queue_prefault(x->q);
  x->pos = calloc((size_t)x->total, sizeof *x->pos);
  x->cells = calloc((size_t)x->total, sizeof *x->cells);
  x->order = calloc((size_t)x->total, sizeof *x->order);
  assert_true(x->q && x->pos && x->cells && x->order);
  int n = cfg.producers + 1;
  pthread_t *t = calloc((size_t)n, sizeof *t);
  worker *w = calloc((size_t)n, sizeof *w);
  assert_true(t && w);
  for (int i = 0; i < n; i++) {
    w[i].x = x;
    w[i].id = i - 1; /* thread 0 is the consumer */
    assert_int_equal(pthread_create(&t[i], NULL,
                                    i == 0 ? consumer_main : producer_main,
                                    &w[i]),
                     0);
  }
  join_or_fail(x, t, n);
  if (atomic_load_explicit(&x->errors, memory_order_relaxed))
    fail_msg("capacity %u, %d producers, first %llu, mode %d: %s",
             cfg.capacity, cfg.producers, (unsigned long long)cfg.first,
             (int)cfg.mode, x->error);
  check_positions(x);
  /* the joins made this thread the consumer */
  assert_null(sched_queue_peek(x->q));
  assert_true(sched_queue_depth(x->q) == 0);
  sched_queue_destroy(x->q);
  free(t);
  free(w);
  free(x->pos);
  free(x->cells);
  free(x->order);
  free(x);
}

/* ---- one thread */

/* try_claim, commit, peek, pop and depth never wait, and the single-thread
 * tests never fill a queue before a blocking claim: a call that does not
 * return (a spin on a wrong stamp) fails the program after WATCHDOG_S */
#define WATCHDOG_S 30
#define STR_(x) #x
#define STR(x) STR_(x)

static void watchdog_fired(int sig) {
  (void)sig;
  static const char msg[] =
      "FAILED: a single-thread test did not finish in " STR(WATCHDOG_S)
      " s: a queue call that must not wait is spinning\n";
  ssize_t ignored = write(2, msg, sizeof msg - 1);
  (void)ignored;
  _exit(1);
}

static int watchdog_arm(void **state) {
  (void)state;
  signal(SIGALRM, watchdog_fired);
  alarm(WATCHDOG_S);
  return 0;
}

static int watchdog_disarm(void **state) {
  (void)state;
  alarm(0);
  return 0;
}

static void test_bad_arguments(void **state) {
  (void)state;
  assert_null(sched_queue_create(0, 8));
  assert_null(sched_queue_create(1, 8));
  assert_null(sched_queue_create(3, 8));
  assert_null(sched_queue_create(6, 8));
  assert_null(sched_queue_create(UINT32_MAX, 8));
  assert_null(sched_queue_create(8, 0));
  assert_null(sched_queue_create_at(0, 8, 5));
  assert_null(sched_queue_create_at(6, 8, UINT64_MAX));
  assert_null(sched_queue_create_at(4, 0, UINT64_MAX - 3));
  sched_queue_destroy(NULL);
  sched_queue *q = sched_queue_create(2, 1); /* the smallest valid */
  assert_non_null(q);
  sched_queue_destroy(q);
}

static void fill(unsigned char *c, size_t n, uint64_t seed) {
  for (size_t j = 0; j < n; j++)
    c[j] = (uint8_t)(seed * 151u + j * 13u + 5u);
}

static void expect_filled(const unsigned char *c, size_t n, uint64_t seed,
                          const char *what) {
  for (size_t j = 0; j < n; j++)
    if (c[j] != (uint8_t)(seed * 151u + j * 13u + 5u))
      fail_msg("%s: byte %zu of %zu changed", what, j, n);
}

static bool overlap(const void *a, const void *b, size_t n) {
  uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
  return x < y + n && y < x + n;
}

/* the engine stores structs in place (sched/pool.c: msg_head) */
static void expect_aligned(const void *c) {
  if ((uintptr_t)c % _Alignof(max_align_t))
    fail_msg("cell %p is not aligned for max_align_t", c);
}

/* capacity 4, one thread: order, empty, full, out-of-order commit, for
 * cell sizes from 1 to 4097 bytes (all of them written) */
static void test_single_thread(void **state) {
  (void)state;
  static const size_t sizes[] = {1, 24, 64, 100, 4097};
  for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
    size_t cs = sizes[si];
    sched_queue *q = sched_queue_create(4, cs);
    assert_non_null(q);
    assert_null(sched_queue_peek(q));
    assert_true(sched_queue_depth(q) == 0);
    unsigned char *c[5];
    uint64_t p[5];
    for (int i = 0; i < 4; i++) {
      c[i] = sched_queue_try_claim(q, &p[i]);
      assert_non_null(c[i]);
      expect_aligned(c[i]);
      assert_true(p[i] == (uint64_t)i);
      assert_true(sched_queue_depth(q) == (uint64_t)i + 1);
      fill(c[i], cs, (uint64_t)i); /* every byte of the cell */
      for (int k = 0; k < i; k++)
        if (overlap(c[i], c[k], cs))
          fail_msg("cell size %zu: cells %d and %d overlap", cs, k, i);
    }
    /* full: nothing is claimed and the consumer sees nothing committed */
    uint64_t junk = 12345;
    assert_null(sched_queue_try_claim(q, &junk));
    assert_null(sched_queue_try_claim(q, &junk));
    assert_true(sched_queue_depth(q) == 4);
    assert_null(sched_queue_peek(q));
    /* commits out of order: the uncommitted head stops the consumer */
    sched_queue_commit(q, p[1]);
    assert_null(sched_queue_peek(q));
    sched_queue_commit(q, p[3]);
    assert_null(sched_queue_peek(q));
    sched_queue_commit(q, p[0]);
    assert_ptr_equal(sched_queue_peek(q), c[0]);
    assert_ptr_equal(sched_queue_peek(q), c[0]); /* no advance */
    for (int i = 0; i < 4; i++) expect_filled(c[i], cs, (uint64_t)i, "commit");
    sched_queue_pop(q);
    assert_true(sched_queue_depth(q) == 3);
    assert_ptr_equal(sched_queue_peek(q), c[1]);
    /* one pop frees exactly one cell */
    c[4] = sched_queue_try_claim(q, &p[4]);
    assert_non_null(c[4]);
    assert_true(p[4] == 4);
    assert_null(sched_queue_try_claim(q, &junk));
    assert_true(sched_queue_depth(q) == 4);
    for (int k = 1; k < 4; k++) assert_false(overlap(c[4], c[k], cs));
    fill(c[4], cs, 4);
    sched_queue_commit(q, p[4]);
    sched_queue_pop(q); /* c[1] */
    /* c[2] is still uncommitted: c[3] and c[4] wait behind it */
    assert_null(sched_queue_peek(q));
    sched_queue_commit(q, p[2]);
    for (int i = 2; i <= 4; i++) {
      assert_ptr_equal(sched_queue_peek(q), c[i]);
      expect_filled(c[i], cs, (uint64_t)i, "pop order");
      sched_queue_pop(q);
      assert_true(sched_queue_depth(q) == (uint64_t)(4 - i));
    }
    assert_null(sched_queue_peek(q));
    /* the blocking claim returns at once when there is room */
    unsigned char *b = sched_queue_claim(q, &p[0]);
    assert_non_null(b);
    assert_true(p[0] == 5);
    sched_queue_commit(q, p[0]);
    assert_ptr_equal(sched_queue_peek(q), b);
    sched_queue_pop(q);
    assert_true(sched_queue_depth(q) == 0);
    sched_queue_destroy(q);
  }
}

/* positions around the wrap of the 64-bit counters, step by step */
static void test_wrap_single_thread(void **state) {
  (void)state;
  sched_queue *q = sched_queue_create_at(4, 16, UINT64_MAX - 1);
  assert_non_null(q);
  assert_null(sched_queue_peek(q));
  assert_true(sched_queue_depth(q) == 0);
  static const uint64_t want[] = {UINT64_MAX - 1, UINT64_MAX, 0, 1};
  unsigned char *c[4];
  for (int i = 0; i < 4; i++) {
    uint64_t p;
    c[i] = sched_queue_try_claim(q, &p);
    assert_non_null(c[i]);
    assert_true(p == want[i]);
    assert_true(sched_queue_depth(q) == (uint64_t)i + 1);
    fill(c[i], 16, (uint64_t)i);
  }
  uint64_t junk;
  assert_null(sched_queue_try_claim(q, &junk));
  for (int i = 3; i >= 0; i--) {
    assert_null(sched_queue_peek(q)); /* head (UINT64_MAX - 1) not yet */
    sched_queue_commit(q, want[i]);
  }
  for (int i = 0; i < 4; i++) {
    assert_ptr_equal(sched_queue_peek(q), c[i]);
    expect_filled(c[i], 16, (uint64_t)i, "wrap");
    sched_queue_pop(q);
    uint64_t p;
    assert_non_null(sched_queue_try_claim(q, &p));
    assert_true(p == (uint64_t)(i + 2)); /* 2, 3, 4, 5 */
    sched_queue_commit(q, p);
  }
  for (int i = 0; i < 4; i++) sched_queue_pop(q);
  assert_null(sched_queue_peek(q));
  assert_true(sched_queue_depth(q) == 0);
  sched_queue_destroy(q);
}

/* the test's model of a queue: live claims in claim order */
typedef struct live {
  uint64_t pos;
  unsigned char *cell;
  bool committed;
} live;

static uint64_t lcg(uint64_t *s) {
  *s = *s * 6364136223846793005ull + 1442695040888963407ull;
  return *s >> 33;
}

/* random claims (try and blocking), out-of-order commits and pops on one
 * thread, each result checked against the model */
static void model_run(uint32_t cap, size_t cs, uint64_t first, int steps,
                      uint64_t seed) {
  sched_queue *q = sched_queue_create_at(cap, cs, first);
  assert_non_null(q);
  live *lv = calloc(cap, sizeof *lv);
  assert_non_null(lv);
  uint32_t n = 0;         /* live claims */
  uint64_t next = first;  /* the next position to be claimed */
  uint64_t popped = 0;
  for (int s = 0; s < steps; s++) {
    uint64_t r = lcg(&seed);
    switch (r % 3) {
    case 0: { /* claim */
      uint64_t p = 777;
      unsigned char *c;
      if (n == cap) {
        assert_null(sched_queue_try_claim(q, &p));
        break;
      }
      c = (r & 8) ? sched_queue_claim(q, &p) : sched_queue_try_claim(q, &p);
      if (!c || p != next)
        fail_msg("step %d: claim got %p at %llu, want %llu", s, (void *)c,
                 (unsigned long long)p, (unsigned long long)next);
      expect_aligned(c);
      for (uint32_t k = 0; k < n; k++)
        if (overlap(c, lv[k].cell, cs))
          fail_msg("step %d: cell of %llu overlaps the live cell of %llu", s,
                   (unsigned long long)p, (unsigned long long)lv[k].pos);
      fill(c, cs, p);
      lv[n++] = (live){p, c, false};
      next++;
      break;
    }
    case 1: { /* commit a random uncommitted claim */
      uint32_t open = 0;
      for (uint32_t k = 0; k < n; k++) open += !lv[k].committed;
      if (!open) break;
      uint32_t pick = (uint32_t)(r >> 4) % open;
      for (uint32_t k = 0; k < n; k++)
        if (!lv[k].committed && pick-- == 0) {
          sched_queue_commit(q, lv[k].pos);
          lv[k].committed = true;
          break;
        }
      break;
    }
    default: { /* consume, if the model's head is committed */
      unsigned char *c = sched_queue_peek(q);
      bool ready = n > 0 && lv[0].committed;
      if (!ready) {
        if (c) fail_msg("step %d: peek returned a cell, want none", s);
        break;
      }
      if (c != lv[0].cell)
        fail_msg("step %d: peek %p, want the cell of %llu (%p)", s,
                 (void *)c, (unsigned long long)lv[0].pos,
                 (void *)lv[0].cell);
      expect_filled(c, cs, lv[0].pos, "model");
      sched_queue_pop(q);
      memmove(lv, lv + 1, (n - 1) * sizeof *lv);
      n--;
      popped++;
      break;
    }
    }
    if (sched_queue_depth(q) != n)
      fail_msg("step %d: depth %llu, want %u", s,
               (unsigned long long)sched_queue_depth(q), n);
  }
  assert_true(popped > (uint64_t)steps / 8); /* the run did go round */
  sched_queue_destroy(q);
  free(lv);
}

static void test_model(void **state) {
  (void)state;
  model_run(2, 8, 0, 20000, 1);
  model_run(4, 1, 0, 20000, 2);
  model_run(4, 100, 0, 20000, 3);
  model_run(8, 64, 0, 20000, 4);
  model_run(16, 40, 0, 20000, 5);
  /* across the wrap: the runs claim ~6600 positions */
  model_run(2, 8, UINT64_MAX - 5, 20000, 6);
  model_run(4, 24, UINT64_MAX - 1000, 20000, 7);
  model_run(8, 4097, UINT64_MAX - 3, 20000, 8);
}

/* ---- threads */

/* P producers x capacities, blocking claims; then try_claim loops, alone
 * and mixed with blocking claims */
static void test_conservation(void **state) {
  (void)state;
  static const uint32_t caps[] = {2, 4, 256};
  static const int producers[] = {1, 2, 4, 8};
  const int64_t total = 200000 / SCALE;
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 4; j++)
      run_queue((run_cfg){caps[i], producers[j], total / producers[j], 0,
                          CLAIM_BLOCKING, 0, false});
  run_queue((run_cfg){4, 4, total / 4, 0, CLAIM_MIXED, 0, false});
  run_queue((run_cfg){2, 8, total / 8, 0, CLAIM_MIXED, 0, false});
  run_queue((run_cfg){256, 3, total / 3, 0, CLAIM_TRY, 0, false});
  run_queue((run_cfg){2, 2, total / 2, 0, CLAIM_TRY, 0, false});
}

/* the 64-bit positions wrap past UINT64_MAX mid-run */
static void test_wrap_counters(void **state) {
  (void)state;
  static const uint64_t firsts[] = {UINT64_MAX - 1000, UINT64_MAX - 3};
  for (int i = 0; i < 2; i++) {
    run_queue((run_cfg){4, 2, 10000 / SCALE, firsts[i], CLAIM_BLOCKING, 0,
                        true});
    run_queue((run_cfg){4, 4, 5000 / SCALE, firsts[i], CLAIM_MIXED, 0,
                        true});
    run_queue((run_cfg){64, 3, 10000 / SCALE, firsts[i], CLAIM_BLOCKING, 0,
                        true});
    run_queue((run_cfg){64, 8, 2500 / SCALE, firsts[i], CLAIM_MIXED, 0,
                        true});
  }
}

/* a prefaulted queue (cells moved to a huge-page mapping, stamps copied)
 * behaves as the lazy one, from position 0 and across the counters' wrap */
static void test_prefaulted(void **state) {
  (void)state;
  static const uint64_t firsts[] = {0, UINT64_MAX - 1000};
  for (int i = 0; i < 2; i++) {
    run_queue((run_cfg){64, 3, 10000 / SCALE, firsts[i], CLAIM_BLOCKING, 0,
                        true, true});
    run_queue((run_cfg){1024, 4, 5000 / SCALE, firsts[i], CLAIM_MIXED, 0,
                        true, true});
  }
}

/* an 8-cell queue whose consumer sleeps 50 us every 16 records: producers
 * wait at the capacity, never past it */
static void test_backpressure(void **state) {
  (void)state;
  run_queue((run_cfg){8, 1, 20000 / SCALE, 0, CLAIM_BLOCKING, 16, true});
  run_queue((run_cfg){8, 4, 5000 / SCALE, 0, CLAIM_MIXED, 16, true});
  run_queue((run_cfg){8, 8, 2500 / SCALE, 0, CLAIM_BLOCKING, 16, true});
}

/* ---- memory */

/* resident bytes of this process, or -1 */
static long resident_bytes(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  if (!f) return -1;
  long size = 0, res = 0;
  int got = fscanf(f, "%ld %ld", &size, &res);
  fclose(f);
  long page = sysconf(_SC_PAGESIZE);
  return got == 2 && page > 0 ? res * page : -1;
}

/* zeroed memory is the initial state: 4 MiB of cells cost no resident
 * memory until used, and using a few cells touches only those */
static void test_zero_initial_state(void **state) {
  (void)state;
  const uint32_t cap = 1024;
  const size_t cs = 4096;
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  const bool measure = false; /* the sanitizer's allocator fills memory */
  print_message("note: resident-memory check skipped under a sanitizer\n");
#else
  const bool measure = resident_bytes() > 0;
  if (!measure)
    print_message("note: /proc/self/statm unreadable: resident-memory "
                  "check skipped\n");
#endif
  long before = measure ? resident_bytes() : 0;
  sched_queue *q = sched_queue_create(cap, cs);
  long after = measure ? resident_bytes() : 0;
  assert_non_null(q);
  if (measure && after - before >= (1L << 20))
    fail_msg("creating a %u x %zu queue made %ld KiB resident", cap, cs,
             (after - before) / 1024);
  /* the queue works, and 8 records touch about 8 cells */
  for (uint64_t i = 0; i < 8; i++) {
    uint64_t p;
    unsigned char *c = sched_queue_try_claim(q, &p);
    assert_non_null(c);
    assert_true(p == i);
    fill(c, cs, i);
    sched_queue_commit(q, p);
  }
  for (uint64_t i = 0; i < 8; i++) {
    unsigned char *c = sched_queue_peek(q);
    assert_non_null(c);
    expect_filled(c, cs, i, "zeroed queue");
    sched_queue_pop(q);
  }
  long used = measure ? resident_bytes() : 0;
  if (measure && used - before >= (1L << 20))
    fail_msg("8 records in a %u x %zu queue made %ld KiB resident", cap, cs,
             (used - before) / 1024);
  sched_queue_destroy(q);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_bad_arguments, watchdog_arm,
                                      watchdog_disarm),
      cmocka_unit_test_setup_teardown(test_single_thread, watchdog_arm,
                                      watchdog_disarm),
      cmocka_unit_test_setup_teardown(test_wrap_single_thread, watchdog_arm,
                                      watchdog_disarm),
      cmocka_unit_test_setup_teardown(test_model, watchdog_arm,
                                      watchdog_disarm),
      cmocka_unit_test_setup_teardown(test_zero_initial_state, watchdog_arm,
                                      watchdog_disarm),
      cmocka_unit_test(test_conservation),
      cmocka_unit_test(test_wrap_counters),
      cmocka_unit_test(test_prefaulted),
      cmocka_unit_test(test_backpressure),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
