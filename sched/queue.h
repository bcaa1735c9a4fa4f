/* A rank's record queue: bounded, many producers, one consumer, records
 * stored in place in fixed-size cells (no malloc per record).
 *
 * Producers claim the next cell (waiting only while this queue is full:
 * backpressure from this consumer alone), fill it and commit it; the
 * consumer reads cells in claim order. A consumer parks only on the cell
 * at its head, and that cell's producer commits it, so a producer that
 * wakes the queue's consumer after committing can never miss it (see
 * sched/pool.c). */
#ifndef SCHED_QUEUE_H
#define SCHED_QUEUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct sched_queue sched_queue;

/* capacity: a power of two >= 2; cell_size > 0 bytes. NULL on bad
 * arguments or allocation failure. The cells are zeroed memory that the
 * queue does not write until used, so an idle queue costs no resident
 * memory (create_at with first != 0 writes every stamp). */
sched_queue *sched_queue_create(uint32_t capacity, size_t cell_size);
/* The same, starting at position `first` (positions compare modulo 2^64),
 * so tests can cross the wrap of the counters. */
sched_queue *sched_queue_create_at(uint32_t capacity, size_t cell_size,
                                   uint64_t first);
void sched_queue_destroy(sched_queue *q);  /* no thread may use q after */
/* The cells' bytes, and faulting them all in now (before any thread uses
 * q): the first lap then takes no page faults on the issuing threads, at
 * the price of the memory being resident from the start. */
size_t sched_queue_bytes(const sched_queue *q);
void sched_queue_prefault(sched_queue *q);

/* Any thread but the consumer: claims the next cell, or returns NULL when
 * the queue is full (nothing claimed). *pos receives the cell's position
 * for commit. */
void *sched_queue_try_claim(sched_queue *q, uint64_t *pos);
/* The same, waiting (spin, yield, then short sleeps) while the queue is
 * full. Never call it from the queue's consumer: it could wait on itself. */
void *sched_queue_claim(sched_queue *q, uint64_t *pos);
/* Makes the claimed cell at pos visible to the consumer. Every claim must
 * be committed; the consumer stops at an uncommitted cell. */
void sched_queue_commit(sched_queue *q, uint64_t pos);

/* Consumer only: the cell at the head if committed, else NULL. */
void *sched_queue_peek(sched_queue *q);
/* Consumer only: done with the head cell; it may be claimed again. */
void sched_queue_pop(sched_queue *q);
/* Any thread: cells claimed but not yet popped, in [0, capacity]. Exact
 * on the consumer's thread; elsewhere an estimate (the two counters are
 * read one after the other). */
uint64_t sched_queue_depth(const sched_queue *q);
/* Any thread: the position the next claim will get (every position below
 * it is claimed; the caller's own claims are among them). */
uint64_t sched_queue_claimed(const sched_queue *q);
/* Any thread: true once the consumer popped every position below pos;
 * what it did for them then happens-before the caller's next reads. */
bool sched_queue_done_through(const sched_queue *q, uint64_t pos);

#endif
