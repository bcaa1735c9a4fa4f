/* Host-memory allocation on the rank threads, with fault injection.
 *
 * Everything a rank thread allocates from the host heap while it runs a
 * record (collective bookkeeping, kernel scratch, error messages, device
 * blocks of the simulated devices) goes through these wrappers, so a test
 * can make them fail and check that every such failure becomes an error
 * on the op that hit it: no crash, no rendezvous left waiting, no value
 * returned as good that is not.
 *
 * Injection: core_fault_host_alloc(every, rank) makes every `every`-th
 * wrapped allocation on a marked thread (of one rank, or of all) fail,
 * counted over those threads; every = 0 turns it off. Rank threads mark themselves when they start; the
 * issuing threads are never marked (their allocations already report
 * DT_ERR_OUT_OF_MEMORY to the caller). Off, a wrapper costs one relaxed
 * load and a predictable branch over malloc. */
#ifndef CORE_HOST_ALLOC_H
#define CORE_HOST_ALLOC_H

#include <stddef.h>
#include <stdint.h>

void *core_host_malloc(size_t bytes);
void *core_host_calloc(size_t count, size_t size);
void *core_host_aligned_alloc(size_t align, size_t bytes);

/* this thread's allocations may be failed on purpose: rank threads mark
 * themselves with their rank (< 0: unmarked, the default) */
void core_fault_mark_thread(int rank);
/* marks this thread as `rank` and returns its previous mark (-1: none):
 * a thread running a rank's record on its behalf (sched/help.c) */
int core_fault_swap_mark(int rank);
/* every n-th marked allocation (on rank `rank`'s thread only, or on every
 * marked thread when rank < 0) fails from now on; every = 0: none */
void core_fault_host_alloc(uint64_t every, int rank);
/* how many allocations were failed on purpose so far */
uint64_t core_fault_injected(void);

#endif
