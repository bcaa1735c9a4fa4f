/* Execution of ops on the ranks: the caller's thread validates an op
 * (infer), makes the output handles and publishes ONE record; the rank
 * thread materialises the outputs on its device and runs the kernel.
 * Errors found while executing poison the outputs' storage; a later op,
 * fetch or future on a poisoned tensor fails with the original message. */
#ifndef RUNTIME_EXEC_H
#define RUNTIME_EXEC_H

#include "core/call.h"
#include "runtime/runtime.h"
#include "sched/help.h"

/* size of one ring record (sched_pool_config.record_size) */
size_t runtime_exec_record_size(void);
/* the pool's exec callback (ctx = the runtime) */
void runtime_exec_record(void *ctx, void *record, int rank);
/* the pool's per-thread init callback */
void runtime_exec_rank_init(void *ctx, int rank);

/* Publishes a release of storage s to its rank (s's refcount is 0);
 * false (error set, nothing done) when the runtime is being destroyed:
 * its teardown then frees the data with the rest of the device. */
bool runtime_publish_free(struct core_storage *s);
/* Publishes op call c (outputs made, infer done) to `rank` of rt. */
dt_status runtime_publish_op(dt_op_call *c, dt_runtime *rt, int rank);
/* Publishes a copy of t's full value to dst; the future completes after
 * (with t's poison, if any). NULL + error if no future can be made. */
dt_future *runtime_publish_to_host(dt_tensor *t, void *dst, size_t bytes);
/* Checks a host buffer for t's full value (global shape for a DTensor):
 * its byte size fits (*need), dst is given when bytes are needed, and
 * dst_bytes holds them; errors name fn. */
dt_status runtime_host_buffer(const dt_tensor *t, const void *dst,
                              size_t dst_bytes, const char *fn, size_t *need);
/* Copies single-device tensor t (bytes = its full size, dst contiguous)
 * after the runtime's dead flag and t's poison are checked (errors name
 * fn); wait: returns when copied, else the future in *out. */
dt_status runtime_to_host(dt_tensor *t, void *dst, size_t bytes, bool wait,
                          dt_future **out, const char *fn);
/* A record to `rank` (-1: every rank); the future completes when it ran
 * (on every rank), i.e. after all work published before it there. */
dt_future *runtime_publish_barrier(dt_runtime *rt, int rank);
/* dt_event_record: a barrier to one rank whose future also carries, on a
 * device backend, the event recorded on the rank's stream when its thread
 * reaches the record (sched_future_set_event), so that another rank's
 * stream can wait for it on the device (runtime_stream_wait_event). */
dt_future *runtime_publish_event(dt_runtime *rt, int rank);
/* Generic rank work for upper layers (the mesh layer's DTensor records):
 * fn(arg, rt, rank) runs on every rank of rt (ranks with nothing to do
 * return at once); after the last rank ran it, done(arg) runs on the
 * thread that ran that rank's part: its rank thread, or an issuing thread
 * that helped the sleeping rank (sched/help.h), as that rank (free arg
 * there). rank == -1: every rank, else that one.
 * An all-rank record can fail to be allocated: DT_ERR_OUT_OF_MEMORY, and
 * nothing runs (the caller still owns arg). */
typedef void (*runtime_call_fn)(void *arg, dt_runtime *rt, int rank);
typedef void (*runtime_done_fn)(void *arg);
/* The error of a publish that failed, as fn's: DT_ERR_DEVICE "fn: the
 * runtime was destroyed" when the runtime's gate refused it, else
 * DT_ERR_OUT_OF_MEMORY (no record to every rank could be allocated). */
dt_status runtime_publish_failed(const char *fn);
dt_status runtime_publish_call(dt_runtime *rt, int rank, runtime_call_fn fn,
                               runtime_done_fn done, void *arg);
/* the same, named in the trace (a static string: the op, "redistribute") */
dt_status runtime_publish_named_call(dt_runtime *rt, int rank, const char *name,
                                     runtime_call_fn fn, runtime_done_fn done,
                                     void *arg);
/* The same for a record every rank runs that the publishing thread may run
 * itself on ranks whose threads sleep (sched/help.h): `help` says what the
 * record waits for (SCHED_HELP_NONE: a plain publish). */
dt_status runtime_publish_helped_call(dt_runtime *rt, const char *name,
                                      runtime_call_fn fn, runtime_done_fn done,
                                      void *arg, sched_help_kind help);
/* the pool's helpable callback (sched_helpable_fn) */
int runtime_exec_helpable(void *ctx, const void *record, int rank);
/* flow arrows of an all-rank record reach ranks below this (docs/trace.md) */
#define RUNTIME_TRACE_FLOWS 64

/* what rank runs now, for the collective watchdog's report (ctx: the
 * runtime; sim_coll_world_set_where) */
const char *runtime_rank_where(void *ctx, int rank);

/* the pool's pending / idle callbacks: frees other rank threads handed to
 * `rank` are work the pool does not see */
bool runtime_exec_pending(void *ctx, int rank);
void runtime_exec_idle(void *ctx, int rank);
/* Frees storages other rank threads handed to `rank` (rank thread only). */
void runtime_drain_remote_frees(dt_runtime *rt, int rank);
/* Waits (yield, then short sleeps) until every storage a rank handed to
 * its owner has been freed there and counted (dt_runtime_synchronize: a
 * rank's last record may hand frees to a rank that already ran its own). */
void runtime_wait_remote_frees(dt_runtime *rt);

#endif
