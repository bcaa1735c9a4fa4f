/* A sequentially consistent fence that ThreadSanitizer understands.
 *
 * TSan does not model atomic_thread_fence (gcc rejects it under
 * -fsanitize=thread). Under TSan the fence becomes a seq_cst read-modify-
 * write of one shared word: any two such RMWs are ordered, and the later
 * one reads from (synchronises with) the earlier, which gives the
 * store→fence→load (Dekker) guarantee our parking and the Chase–Lev deque
 * rely on — slower, but it is what TSan can check. */
#ifndef SCHED_FENCE_H
#define SCHED_FENCE_H

#include <stdatomic.h>

#if defined(__SANITIZE_THREAD__)
extern _Atomic unsigned sched_fence_word;
#define SCHED_FENCE_SEQ_CST()                                                  \
  ((void)atomic_fetch_add_explicit(&sched_fence_word, 0, memory_order_seq_cst))
#else
#define SCHED_FENCE_SEQ_CST() atomic_thread_fence(memory_order_seq_cst)
#endif

#endif
