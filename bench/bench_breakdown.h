/* Where a training step's time goes on each rank (`dtorch bench demo
 * --breakdown`, bench/bench_breakdown.c): a few steps of one runtime under
 * an in-process trace (runtime/trace_session.h: the timeline of
 * docs/trace.md, handed over in memory instead of written to a file),
 * every rank's track cut into categories by exclusive (self) time inside
 * each step's window:
 *   compute.<family>   an op's record (its kernel and the rank's setup of
 *                      it, allocation excluded), and chunks of it other
 *                      ranks stole; the family comes from the op's row of
 *                      the op table (core/op_list.h)
 *   collective.<kind>  a collective's call less its rendezvous: moving the
 *                      bytes and waiting for the members' shares
 *   rendezvous.<kind>  waiting for the group's members to arrive
 *   redistribute, memory.alloc, memory.free, host, sync (the step's
 *   closing barrier), idle.parked (the rank slept), record.<name> (other
 *   records), steal.other (stolen chunks of no op)
 *   other              no slice at all: the rank's loop between records,
 *                      spinning before it parks, the trace's own appends
 * Per rank the categories and other add up to the step's wall time; the
 * union of the slices is computed apart from the self times, so the
 * printed `unaccounted_ms` (wall - categories - other) checks the
 * nesting. The ranks' CPU and run-queue times come from the kernel
 * (/proc/self/task/TID/schedstat): on a machine with fewer cores than
 * ranks, a rank's slice also holds time it was runnable but not running. */
#ifndef BENCH_BENCH_BREAKDOWN_H
#define BENCH_BENCH_BREAKDOWN_H

#include <stdbool.h>
#include <stdint.h>

#include "dtorch/dtorch.h"

#include <sys/types.h>

typedef struct bd_phase bd_phase;

/* The kernel thread ids of rt's rank threads, into tids (one per rank);
 * false after printing why on stderr. */
bool bd_rank_tids(dt_runtime *rt, pid_t *tids);
/* The CPU ns threads tids[0..n) and the calling thread have run
 * (/proc/self/task/TID/schedstat), summed; -1 where the kernel does not
 * say. The calling thread is read last at a start (self_last), first at
 * an end, so its reads of the others' files fall outside the interval. */
int64_t bd_threads_cpu(const pid_t *tids, int n, bool self_last);

/* Starts tracing rt in process for up to `steps` steps; NULL after
 * printing why on stderr (another trace is on, no memory). */
bd_phase *bd_phase_begin(dt_runtime *rt, int steps);
/* Around each step: begin stamps its start (after sampling the ranks'
 * CPU times), issued the return of the call that issued it, end its end
 * (after dt_runtime_synchronize; then samples again). */
void bd_phase_step_begin(bd_phase *p);
void bd_phase_step_issued(bd_phase *p);
void bd_phase_step_end(bd_phase *p);
/* Stops the trace and cuts the steps into categories; false after
 * printing why on stderr. */
bool bd_phase_end(bd_phase *p);
void bd_phase_free(bd_phase *p);

/* The collectives of a step by kind and group size, from the ranks'
 * collective slices, per step (the phase's mean). member_bytes sums
 * what every member fed in (dt_comm_count's accounting: an all_gather
 * member its block, the others their input); nccl_bytes the nccl-tests
 * size S summed over the calls (bench collectives' accounting), calls
 * the calls of one group counted once. */
typedef struct bd_coll {
  const char *kind;
  int group;
  double calls;
  int64_t member_bytes, nccl_bytes;
} bd_coll;
enum { BD_MAX_COLLS = 32 };
int bd_phase_colls(const bd_phase *p, bd_coll *out, int max);

/* Prints one JSON line per rank (per_rank) and a summary line:
 *   {"bench":"train_step_rank","model":M,"copy":C,"rank":R,"wall_ms":W,
 *    "cpu_ms":..,"runq_ms":..,"ms":{category:ms,...,"other":ms},
 *    "unaccounted_ms":..}
 *   {"bench":"train_step_breakdown","model":M,"copy":C,"ranks":N,
 *    "steps":K,"wall_ms":W,"untraced_ms":U,"issuer":{...},
 *    "compute_total_ms":..,"ms":{category:{"min","mean","max"},...},
 *    "top":[{"name":..,"mean_ms":..},...]}
 * ms are means per step; untraced_ms the same copy's step without the
 * trace (measured by the caller), for the trace's own cost. In the
 * summary each category has its min / mean / max over the ranks, its
 * CPU summed over them (cpu_sum) and its slices per step over them
 * (slices: records for compute.*, calls for collective.*); top_ops the
 * ten ops with the most CPU over the ranks, their wall ms summed over
 * the ranks and their slices (stolen chunks count under the op). */
void bd_phase_print(const bd_phase *p, const char *model, const char *copy,
                    double untraced_ms, bool per_rank);

#endif
