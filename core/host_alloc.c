/* Host allocation with fault injection (core/host_alloc.h). The three counters
 * are independent statistics: relaxed atomics are enough (no other memory
 * is published through them). */
#include "core/host_alloc.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>

static _Atomic uint64_t fault_every;   /* 0: off */
static _Atomic uint64_t fault_seen;    /* marked allocations while on */
static _Atomic uint64_t fault_failed;  /* failed on purpose */
static _Atomic int fault_rank;        /* < 0: every marked thread */
static _Thread_local int fault_mark = -1;

static bool inject(void) {
  uint64_t every = atomic_load_explicit(&fault_every, memory_order_relaxed);
  if (__builtin_expect(every == 0, 1) || fault_mark < 0) return false;
  int rank = atomic_load_explicit(&fault_rank, memory_order_relaxed);
  if (rank >= 0 && rank != fault_mark) return false;
  uint64_t k = atomic_fetch_add_explicit(&fault_seen, 1, memory_order_relaxed);
  if ((k + 1) % every) return false;
  atomic_fetch_add_explicit(&fault_failed, 1, memory_order_relaxed);
  return true;
}

void *core_host_malloc(size_t bytes) {
  return inject() ? NULL : malloc(bytes);
}

void *core_host_calloc(size_t count, size_t size) {
  return inject() ? NULL : calloc(count, size);
}

void *core_host_aligned_alloc(size_t align, size_t bytes) {
  return inject() ? NULL : aligned_alloc(align, bytes);
}

void core_fault_mark_thread(int rank) { fault_mark = rank; }

int core_fault_swap_mark(int rank) {
  int old = fault_mark;
  fault_mark = rank;
  return old;
}

void core_fault_host_alloc(uint64_t every, int rank) {
  atomic_store_explicit(&fault_seen, 0, memory_order_relaxed);
  atomic_store_explicit(&fault_rank, rank, memory_order_relaxed);
  atomic_store_explicit(&fault_every, every, memory_order_relaxed);
}

uint64_t core_fault_injected(void) {
  return atomic_load_explicit(&fault_failed, memory_order_relaxed);
}
