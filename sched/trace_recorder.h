/* The timeline recorder behind dt_trace_begin / dt_trace_end and
 * DTORCH_TRACE (docs/trace.md): every thread that runs or publishes work
 * of the traced runtime appends events to its own buffer (thread-local,
 * grown by chunks, registered once in a list under a mutex), and the end
 * merges them into one Chrome trace-event JSON file.
 *
 * It sits in sched/, below everything that emits: the pool (parking,
 * stealing), the collectives (sim/), the runtime's record hook and the
 * DTensor layer.
 *
 * Cost when off: one relaxed load of `sched_trace_pool` and a compare per
 * record (no call). On: the emitting thread takes no lock; each event is
 * bracketed by a `busy` mark on the thread's node (a Dekker pair with the
 * end's switch-off) so the end never reads or frees a buffer being
 * written. One runtime is traced at a time. */
#ifndef SCHED_TRACE_RECORDER_H
#define SCHED_TRACE_RECORDER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "dtorch/dtorch.h"

struct sched_pool;

/* the traced runtime's pool, or NULL: the switch every hook reads */
extern _Atomic(struct sched_pool *) sched_trace_pool;
/* true on a rank thread while it runs a record of the traced runtime
 * (hooks inside a record: DTensor kernels, collectives, steps) */
extern _Thread_local bool sched_trace_tls_record;

/* Whether pool p is traced: the per-record branch. */
static inline bool sched_trace_on(const struct sched_pool *p) {
  /* relaxed: a switch; what the emitting thread writes is handed to the
   * end by the busy mark (sched_trace_emit), not by this load */
  return atomic_load_explicit(&sched_trace_pool, memory_order_relaxed) == p;
}
static inline bool sched_trace_in_record(void) { return sched_trace_tls_record; }

/* One event. Strings are static (op names, kinds); args is a JSON object's
 * members, already formatted ("\"bytes\":64"), or "". ts/dur in ns of
 * CLOCK_MONOTONIC. */
#define SCHED_TRACE_ARGS 160
typedef struct sched_trace_event {
  int64_t ts, dur;
  const char *name, *cat;
  uint64_t id;            /* flow id ('s' / 'f'); on an 'X': see flows */
  int32_t flows;          /* on an 'X' with id: > 0 starts flows id ..
                             id + flows - 1 (a publish), < 0 ends flow id
                             (a record); written out as 's' / 'f' events */
  char ph;                /* 'X' slice, 'i' instant, 's' / 'f' flow */
  /* a publish's args, formatted only when the file is written (no printf
   * on the issuing thread): used when pub_kind is set, else args */
  int32_t pub_rank;
  const char *pub_kind;
  /* the emitting thread's CPU ns in the slice, where has_cpu: sampled
   * only by an in-process session (sched_trace_cpu) */
  bool has_cpu;
  int64_t cpu;
  char args[SCHED_TRACE_ARGS];
} sched_trace_event;

/* a timestamp in ticks of the trace clock (TSC counts or CLOCK_MONOTONIC
 * ns, see trace_recorder.c); differences of two are durations in ticks; both become
 * ns when the file is written */
int64_t sched_trace_now(void);
/* Whether the session is an in-process one (sched_trace_start_visit):
 * then slices carry their CPU and allocations are slices too
 * (sim/device.c), details a file does without (each costs a system call
 * or an event). */
extern _Atomic bool sched_trace_fine_on;
static inline bool sched_trace_fine(void) {
  /* relaxed: a switch, set before the session's start publishes it */
  return atomic_load_explicit(&sched_trace_fine_on, memory_order_relaxed);
}
/* This thread's CPU ns (CLOCK_THREAD_CPUTIME_ID, ~0.3 µs a read), and the
 * same only in an in-process session, else -1: a slice's CPU is the
 * difference of two. */
int64_t sched_trace_thread_cpu(void);
static inline int64_t sched_trace_cpu(void) {
  return sched_trace_fine() ? sched_trace_thread_cpu() : -1;
}
/* e's CPU from cpu0 (sched_trace_cpu at its start; < 0: none) */
static inline void sched_trace_set_cpu(sched_trace_event *e, int64_t cpu0) {
  if (cpu0 < 0) return;
  e->has_cpu = true;
  e->cpu = sched_trace_thread_cpu() - cpu0;
}
/* Formats e->args (printf); on truncation leaves "\"truncated\":true"
 * instead, so the file stays valid JSON. */
void sched_trace_args(sched_trace_event *e, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Appends e to this thread's buffer if pool p is (still) traced. */
void sched_trace_emit(const struct sched_pool *p, const sched_trace_event *e);
/* A slice [t0, now) on this thread; cpu0 sched_trace_cpu() read just
 * before t0 (its CPU), or -1. */
void sched_trace_slice(const struct sched_pool *p, const char *name,
                       const char *cat, int64_t t0, int64_t cpu0,
                       const char *args);

/* Reserves n consecutive flow ids (never 0). */
uint64_t sched_trace_flow_ids(int n);

/* The record a rank runs: enter sets sched_trace_tls_record and clears
 * the record's pending args; hooks inside may set them (shapes,
 * placements); leave copies them out (into buf, SCHED_TRACE_ARGS bytes). */
void sched_trace_record_enter(void);
void sched_trace_record_args(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));
void sched_trace_record_leave(char *buf);

/* Starts tracing pool p (nranks ranks) into path (opened now, written at
 * the stop). Errors name fn: another runtime is traced
 * (DT_ERR_INVALID_ARGUMENT), path cannot be opened (DT_ERR_IO). */
dt_status sched_trace_start(struct sched_pool *p, int nranks, const char *path,
                            const char *fn);
/* A part of a multi-process trace: the same, but the events go to memory
 * (sched_trace_stop_part hands them over) as a comma-led list of the
 * process's events (pid `proc`, ranks numbered from rank_base). */
dt_status sched_trace_start_part(struct sched_pool *p, int nranks, int rank_base,
                                 int proc, const char *path, const char *fn);
/* An in-process session: the same recording with no file; its stop hands
 * every event to a visitor instead (sched_trace_stop_visit). The same
 * errors as sched_trace_start but for the file. */
dt_status sched_trace_start_visit(struct sched_pool *p, int nranks, const char *fn);
/* The visitor of an in-process session: tid the rank, or
 * SCHED_TRACE_ISSUER_TID + n for the n-th issuing thread; e a copy whose
 * ts and dur are CLOCK_MONOTONIC ns (the file's clock). */
#define SCHED_TRACE_ISSUER_TID 100000
typedef void (*sched_trace_visit_fn)(void *ctx, int tid, const sched_trace_event *e);
/* The stop of an in-process session: visit (NULL: drop them) gets every
 * thread's events in its own order, then they are freed; *dropped the
 * events not recorded. Errors as sched_trace_stop's. */
dt_status sched_trace_stop_visit(struct sched_pool *p, const char *fn,
                                 sched_trace_visit_fn visit, void *ctx,
                                 int64_t *dropped);
/* whether the session (if any) is an in-process one */
bool sched_trace_in_process(void);
/* the traced session's path ("" when none): valid until its stop */
const char *sched_trace_path(void);
/* Whether p is the traced pool (any thread). */
bool sched_trace_is_traced(const struct sched_pool *p);
/* Stops tracing p, waits until no thread is inside an emit, writes every
 * thread's events and frees them. The caller drained p's ranks first.
 * Errors name fn: p not traced (DT_ERR_INVALID_ARGUMENT), a write
 * failed (DT_ERR_IO with the path and strerror). */
dt_status sched_trace_stop(struct sched_pool *p, const char *fn);
/* The stop of a part: *mem (malloc'd, the caller frees; NULL for a whole
 * trace) holds *len bytes of events, *dropped the events not recorded. */
dt_status sched_trace_stop_part(struct sched_pool *p, const char *fn,
                                char **mem, size_t *len, int64_t *dropped);

#endif
