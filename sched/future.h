/* Futures: the completion of asynchronous work (a fetch, a synchronize,
 * later a checkpoint read). The public half is in dtorch.h (dt_future_*).
 *
 * State is one atomic word (pending → done); completion happens exactly
 * once, then wakes waiters (futex on the state word), signals the eventfd if
 * one was asked for, and runs the registered callbacks exactly once each
 * (a lock-free list closed by the completer). Refcounted: the user's handle
 * and the runtime's record each hold a reference. */
#ifndef SCHED_FUTURE_H
#define SCHED_FUTURE_H

#include "dtorch/dtorch.h"

/* A pending future with one reference. NULL + DT_ERR_OUT_OF_MEMORY. */
dt_future *sched_future_new(void);
dt_future *sched_future_retain(dt_future *f);
/* Completes f with status st (DT_OK or an error) and message msg (copied;
 * may be NULL). Exactly once per future: a second call is an internal
 * error (CORE_ASSERT). Callable from any thread. */
void sched_future_complete(dt_future *f, dt_status st, const char *msg);

/* Device events. A future of dt_event_record on a device runtime carries
 * the event recorded on the rank's stream, set once, when the rank thread
 * reaches the record (the stream may run to it much later). owner names
 * the backend that can make a stream wait for it; drop(ev) runs with the
 * future's last reference. */
void sched_future_set_event(dt_future *f, const void *owner, void *ev,
                            void (*drop)(void *));
/* Waits on the host until f completes or carries an event of owner's:
 * that event (owned by f: hold a reference while using it), or NULL when
 * f completed first or carries another owner's event (then once complete).
 * The wait is for the recording thread, never for a device. */
void *sched_future_wait_event(dt_future *f, const void *owner);

/* ---- the implementations behind public entry points (api/) */
/* dt_future_wait (dtorch.h) */
dt_status sched_future_wait(dt_future *f, int64_t timeout_ns);
/* dt_future_ready (dtorch.h) */
bool sched_future_ready(const dt_future *f);
/* dt_future_fd (dtorch.h) */
int sched_future_fd(dt_future *f);
/* dt_future_release (dtorch.h) */
void sched_future_release(dt_future *f);
/* dt_future_retain (dtorch.h) */
dt_future *sched_future_retain(dt_future *f);
/* dt_future_status (dtorch.h) */
dt_status sched_future_status(const dt_future *f);
/* dt_future_error (dtorch.h) */
const char *sched_future_error(const dt_future *f);
/* dt_future_then (dtorch.h) */
dt_status sched_future_then(dt_future *f, dt_future_callback cb, void *user);

#endif
