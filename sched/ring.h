/* The broadcast op ring: many producers publish records in one global
 * order; every consumer (rank) reads every record with its own cursor
 * (LMAX Disruptor style). One publish writes one slot whatever the number
 * of consumers; consumers skip records not addressed to them.
 *
 * Producers claim a sequence number with one atomic fetch-add, wait while
 * the slot is still unread by the slowest consumer (backpressure: the ring
 * holds at most `capacity` unconsumed records), store the item and mark the
 * slot published with the sequence number (release). A consumer at cursor
 * c reads slot c & mask when its published sequence equals c (acquire),
 * and frees it for producers by advancing its cursor (release). The
 * minimum over consumer cursors is cached by producers and recomputed only
 * when a claim would pass it, so publishing costs O(1) amortised. */
#ifndef SCHED_RING_H
#define SCHED_RING_H

#include <stdbool.h>
#include <stdint.h>

typedef struct sched_ring sched_ring;

/* capacity: a power of two >= 2; consumers: >= 1. NULL on bad arguments
 * or allocation failure. */
sched_ring *sched_ring_create(uint32_t capacity, int consumers);
/* The same, with the first sequence number `first` instead of 0 (head and
 * every cursor start there; sequences compare modulo 2^64), so tests can
 * cross the wrap of the counters. */
sched_ring *sched_ring_create_at(uint32_t capacity, int consumers,
                                 uint64_t first);
void sched_ring_destroy(sched_ring *r);   /* no thread may use r after */

/* Any thread. Publishes item (non-NULL) as the next record; blocks (spin,
 * then yield, then short sleeps) while the ring is full. Returns the
 * record's sequence number. Never call it from a consumer of the same ring
 * while that consumer has unadvanced records (it could wait on itself). */
uint64_t sched_ring_publish(sched_ring *r, void *item);

/* Publish in two steps: claim the next sequence (blocking while its slot is
 * unread; on_wait(arg), if given, runs once before waiting), then commit
 * the item. Every claim must be committed; consumers stop at an
 * uncommitted sequence. publish == commit(claim). */
uint64_t sched_ring_claim(sched_ring *r, void (*on_wait)(void *), void *arg);
void sched_ring_commit(sched_ring *r, uint64_t seq, void *item);

/* Consumer `c` only. The record at its cursor if published, else NULL;
 * *seq receives the cursor. Does not advance. */
void *sched_ring_peek(sched_ring *r, int c, uint64_t *seq);
/* Consumer `c` only: done with the record at its cursor. */
void sched_ring_advance(sched_ring *r, int c);
/* Any thread: records claimed so far (the next sequence to be claimed). */
uint64_t sched_ring_claimed(const sched_ring *r);
/* Any thread: consumer c's cursor (records it has finished). */
uint64_t sched_ring_cursor(const sched_ring *r, int c);

#endif
