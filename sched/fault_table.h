/* Fault injection by kind (dt_fault_inject; docs/spmd.md "Faults"): the
 * n-th event of a kind on a rank fails (or stalls), once. The events are
 * counted by the rank's own thread where they happen: device allocations
 * (sim/device.c), records (the pool's rank loop: stalls, and failures of
 * the record as a whole), collective calls (sim/collectives.c) and box
 * I/O (sched/io.c). Nothing armed: one relaxed load per point. */
#ifndef SCHED_FAULT_TABLE_H
#define SCHED_FAULT_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum sched_fault_kind {
  SCHED_FAULT_OOM, SCHED_FAULT_STALL, SCHED_FAULT_RANK_FAIL,
  SCHED_FAULT_COLLECTIVE, SCHED_FAULT_IO, SCHED_FAULT_KINDS
} sched_fault_kind;

typedef struct sched_faults sched_faults;
struct sched_pool;

sched_faults *sched_faults_new(int ranks);
void sched_faults_free(sched_faults *f);
/* the after-th (>= 1) event of kind on rank, counted from now, fails
 * (STALL: sleeps stall_ns first); replaces what was armed there */
void sched_fault_arm(sched_faults *f, int rank, sched_fault_kind kind,
                     int64_t after, int64_t stall_ns);
void sched_fault_clear(sched_faults *f);
/* faults fired so far */
int64_t sched_fault_fired(const sched_faults *f);

/* On a rank thread: counts one event of kind; true (and the message in
 * msg) when it is the armed one. False off the rank threads. */
bool sched_fault_take(sched_fault_kind kind, char *msg, size_t len);
/* the same for a known table and rank (the callers that hold them check
 * sched_faults_armed first: one load while nothing is armed) */
bool sched_fault_take_at(sched_faults *f, int rank, sched_fault_kind kind,
                         char *msg, size_t len);
/* The rank loop, before each record: a STALL sleeps here. (RANK_FAIL is
 * counted where a record starts its work: runtime/exec.c for ops,
 * mesh_rank_mem_init for DTensor records.) */
void sched_fault_before_record(sched_faults *f, int rank);
static inline bool sched_faults_armed(const sched_faults *f);

struct sched_faults_head { int armed; };
static inline bool sched_faults_armed(const sched_faults *f) {
  /* relaxed: a hint; the counters themselves are atomic */
  return __atomic_load_n(&((const struct sched_faults_head *)f)->armed,
                         __ATOMIC_RELAXED) != 0;
}

#endif
