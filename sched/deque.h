/* Chase–Lev work-stealing deque, in the weak-memory form of Lê, Pop, Cohen
 * and Zappa Nardelli (PPoPP 2013, "Correct and efficient work-stealing for
 * weak memory models"). One owner thread pushes and pops at the bottom;
 * any thread steals from the top. Items are non-NULL pointers.
 *
 * The array grows when full (the owner copies into a twice larger array);
 * old arrays stay allocated until destroy, because a thief may still be
 * reading one (they are at most log2(max/initial) arrays, geometrically
 * sized, so at most as much memory again as the largest). */
#ifndef SCHED_DEQUE_H
#define SCHED_DEQUE_H

#include <stdbool.h>
#include <stdint.h>

typedef struct sched_deque sched_deque;

/* capacity: initial slots, rounded up to a power of two (>= 2).
 * NULL on allocation failure. */
sched_deque *sched_deque_create(int64_t capacity);
/* The same, with the top and bottom indices starting at `first` instead of
 * 0, so a test can run the indices through their 2^64 wrap. */
sched_deque *sched_deque_create_at(int64_t capacity, uint64_t first);
/* Not thread-safe: no other thread may use q during or after. NULL is a
 * no-op. */
void sched_deque_destroy(sched_deque *q);

/* Owner only. false only if growing the array failed (out of memory). */
bool sched_deque_push_owner(sched_deque *q, void *item);
/* Owner only. The most recently pushed item, or NULL if empty. */
void *sched_deque_pop_owner(sched_deque *q);
/* Any thread. The oldest item, or NULL if the deque looked empty or this
 * thief lost a race for the item (retry if sched_deque_size > 0). */
void *sched_deque_steal(sched_deque *q);
/* Any thread; a snapshot that may be stale by the time it returns. */
int64_t sched_deque_size(const sched_deque *q);
/* Any thread: the current array's slots (grows by doubling when full). */
int64_t sched_deque_capacity(const sched_deque *q);

#endif
