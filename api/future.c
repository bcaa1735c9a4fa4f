/* Public entry points: futures (sched/future.c).
 * Each forwards to the layer that implements it; the messages those
 * raise name the public function. */
#include <stdio.h>
#include <stdlib.h>

#include "core/error.h"
#include "sched/future.h"
#include "sched/uring.h"

dt_status dt_future_wait(dt_future *f, int64_t timeout_ns) {
  return sched_future_wait(f, timeout_ns);
}

bool dt_future_ready(const dt_future *f) {
  if (!f) {  /* false with the error set (dtorch.h's conventions) */
    core_error_set(DT_ERR_INVALID_ARGUMENT, "dt_future_ready: f is NULL");
    return false;
  }
  return sched_future_ready(f);
}

int dt_future_fd(dt_future *f) {
  return sched_future_fd(f);
}

void dt_future_release(dt_future *f) {
  sched_future_release(f);
}

dt_future *dt_future_retain(dt_future *f) {
  return sched_future_retain(f);
}

dt_status dt_future_status(const dt_future *f) {
  return sched_future_status(f);
}

const char *dt_future_error(const dt_future *f) {
  if (!f) {  /* NULL with the error set (dtorch.h's conventions) */
    core_error_set(DT_ERR_INVALID_ARGUMENT, "dt_future_error: f is NULL");
    return NULL;
  }
  return sched_future_error(f);
}

dt_status dt_future_then(dt_future *f, dt_future_callback cb, void *user) {
  return sched_future_then(f, cb, user);
}

/* ---- completions into the caller's io_uring */
typedef struct ring_note { int fd; uint64_t data; } ring_note;

static void post_to_ring(dt_future *f, dt_status st, void *user) {
  (void)f;
  ring_note *n = user;
  /* nobody waits for this callback: a refusal is all it can say */
  if (sched_uring_msg(n->fd, n->data, st == DT_OK ? 0 : -(int32_t)st,
                      "dt_future_notify_ring") != DT_OK)
    fprintf(stderr, "dtorch: %s\n", core_last_error());
  free(n);
}

dt_status dt_future_notify_ring(dt_future *f, int ring_fd, uint64_t user_data) {
  const char *fn = "dt_future_notify_ring";
  if (!f) return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: f is NULL", fn);
  if (ring_fd < 0)
    return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: ring_fd %d is not a file "
                          "descriptor", fn, ring_fd);
  dt_status st = sched_uring_check(fn);
  if (st != DT_OK) return st;
  ring_note *n = malloc(sizeof *n);
  if (!n) return core_error_set(DT_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  *n = (ring_note){ring_fd, user_data};
  st = sched_future_then(f, post_to_ring, n);
  if (st != DT_OK) free(n);
  return st;
}
