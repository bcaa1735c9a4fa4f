/* Public entry points: futures (sched/future.c).
 * Each forwards to the layer that implements it; the messages those
 * raise name the public function. */
#include "sched/future.h"

dt_status dt_future_wait(dt_future *f, int64_t timeout_ns) {
  return sched_future_wait(f, timeout_ns);
}

bool dt_future_ready(const dt_future *f) {
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
  return sched_future_error(f);
}

dt_status dt_future_then(dt_future *f, dt_future_callback cb, void *user) {
  return sched_future_then(f, cb, user);
}
