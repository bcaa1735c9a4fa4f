/* The offload worker (runtime/offload.h): a mutex-protected FIFO and one
 * thread started with the first job. Jobs are rare (one per device fetch),
 * so a lock and a condition variable are enough. */
#include "runtime/offload.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

#include "core/error.h"

typedef struct job {
  struct job *next;
  runtime_offload_fn fn;
  void *arg;
} job;

struct runtime_offload {
  pthread_mutex_t lock;
  pthread_cond_t cv;
  job *head, *tail;
  bool started, stop;
  pthread_t thread;
};

runtime_offload *runtime_offload_create(void) {
  runtime_offload *w = calloc(1, sizeof *w);
  if (!w) return NULL;
  pthread_mutex_init(&w->lock, NULL);
  pthread_cond_init(&w->cv, NULL);
  return w;
}

static void *worker(void *p) {
  runtime_offload *w = p;
  pthread_mutex_lock(&w->lock);
  for (;;) {
    while (!w->head && !w->stop) pthread_cond_wait(&w->cv, &w->lock);
    job *j = w->head;
    if (!j) break; /* stop, and nothing left */
    w->head = j->next;
    if (!w->head) w->tail = NULL;
    pthread_mutex_unlock(&w->lock);
    j->fn(j->arg);
    free(j);
    pthread_mutex_lock(&w->lock);
  }
  pthread_mutex_unlock(&w->lock);
  return NULL;
}

dt_status runtime_offload_push(runtime_offload *w, runtime_offload_fn fn,
                               void *arg) {
  job *j = malloc(sizeof *j);
  if (!j)
    return core_error_set(DT_ERR_OUT_OF_MEMORY, "offload: out of host memory");
  j->next = NULL;
  j->fn = fn;
  j->arg = arg;
  pthread_mutex_lock(&w->lock);
  if (!w->started) {
    if (pthread_create(&w->thread, NULL, worker, w) != 0) {
      pthread_mutex_unlock(&w->lock);
      free(j);
      return core_error_set(DT_ERR_OUT_OF_MEMORY, "offload: cannot start "
                            "its thread");
    }
    w->started = true;
  }
  if (w->tail) w->tail->next = j;
  else w->head = j;
  w->tail = j;
  pthread_cond_signal(&w->cv);
  pthread_mutex_unlock(&w->lock);
  return DT_OK;
}

void runtime_offload_destroy(runtime_offload *w) {
  if (!w) return;
  pthread_mutex_lock(&w->lock);
  w->stop = true;
  bool started = w->started;
  pthread_cond_signal(&w->cv);
  pthread_mutex_unlock(&w->lock);
  if (started) pthread_join(w->thread, NULL);
  pthread_cond_destroy(&w->cv);
  pthread_mutex_destroy(&w->lock);
  free(w);
}
