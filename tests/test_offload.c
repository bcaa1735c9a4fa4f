/* The offload worker (runtime/offload.h): jobs run in FIFO order, on one
 * thread that is not the caller's, each exactly once, including jobs
 * queued from several threads and jobs still queued at destroy. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "runtime/offload.h"

enum { THREADS = 4, PER = 5000 };

typedef struct rec {
  pthread_t caller;
  int seen[THREADS]; /* the last sequence number run, per pusher */
  int order_errors, same_thread;
  _Atomic int64_t runs;
  pthread_t worker;
  int workers; /* distinct worker threads seen */
} rec;

typedef struct item {
  rec *r;
  int from, seq;
} item;

static item items[THREADS][PER];

static void run(void *p) {
  item *it = p;
  rec *r = it->r;
  pthread_t me = pthread_self();
  if (pthread_equal(me, r->caller)) r->same_thread++;
  if (!r->workers || !pthread_equal(me, r->worker)) {
    r->worker = me;
    r->workers++;
  }
  if (it->seq != r->seen[it->from] + 1) r->order_errors++;
  r->seen[it->from] = it->seq;
  atomic_fetch_add(&r->runs, 1);
}

typedef struct pusher {
  runtime_offload *w;
  rec *r;
  int from;
} pusher;

static void *push_all(void *p) {
  pusher *u = p;
  for (int i = 0; i < PER; i++) {
    items[u->from][i] = (item){u->r, u->from, i};
    if (runtime_offload_push(u->w, run, &items[u->from][i]) != DT_OK) break;
  }
  return NULL;
}

static void fifo_once_each_off_thread(void **state) {
  (void)state;
  rec r = {.caller = pthread_self()};
  for (int i = 0; i < THREADS; i++) r.seen[i] = -1;
  runtime_offload *w = runtime_offload_create();
  assert_non_null(w);
  pthread_t t[THREADS];
  pusher u[THREADS];
  for (int i = 0; i < THREADS; i++) {
    u[i] = (pusher){w, &r, i};
    assert_int_equal(pthread_create(&t[i], NULL, push_all, &u[i]), 0);
  }
  for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
  runtime_offload_destroy(w); /* runs what is still queued */
  assert_int_equal(atomic_load(&r.runs), THREADS * PER);
  assert_int_equal(r.order_errors, 0);
  assert_int_equal(r.same_thread, 0);
  assert_int_equal(r.workers, 1);
  for (int i = 0; i < THREADS; i++) assert_int_equal(r.seen[i], PER - 1);
}

static void destroy_unused(void **state) {
  (void)state;
  runtime_offload_destroy(runtime_offload_create()); /* never started */
  runtime_offload_destroy(NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(fifo_once_each_off_thread),
      cmocka_unit_test(destroy_unused),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
