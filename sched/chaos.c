/* Chaos scheduling (sched/chaos.h). */
#include "sched/chaos.h"

#include <sched.h>
#include <stdatomic.h>
#include <time.h>

/* splitmix64: a good 64-bit mix, cheap enough per decision */
static uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

sched_chaos_action sched_chaos_decide(uint64_t seed, int who, uint64_t i,
                                      sched_chaos_site site, int64_t *ns) {
  uint64_t r = mix(mix(mix(seed) ^ (uint64_t)(int64_t)who) ^ i);
  unsigned pick = (unsigned)(r & 1023);
  *ns = 0;
  if (site == SCHED_CHAOS_STEAL) return pick < 256 ? SCHED_CHAOS_FAIL : SCHED_CHAOS_NONE;
  if (pick < 96) return SCHED_CHAOS_YIELD;               /* 9.4% */
  if (pick < 160) {                                      /* 6.3%: 1-64 us */
    *ns = 1000 * (int64_t)(1 + ((r >> 10) & 63));
    return SCHED_CHAOS_SPIN;
  }
  if (pick < 176) {                                      /* 1.6%: 50-560 us */
    *ns = 50000 + 10000 * (int64_t)((r >> 16) & 51);
    return SCHED_CHAOS_SLEEP;
  }
  return SCHED_CHAOS_NONE;
}

/* this thread's stream: which seed it follows, who it is, its next index */
static _Thread_local struct { uint64_t seed, next; int who; bool named; } tls;
static _Atomic int issuers;   /* issuing threads numbered in first-use order */
static _Atomic uint64_t taken;

static void spin_for(int64_t ns) {
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  do clock_gettime(CLOCK_MONOTONIC, &b);
  while ((b.tv_sec - a.tv_sec) * 1000000000 + (b.tv_nsec - a.tv_nsec) < ns);
}

bool sched_chaos_point_slow(uint64_t seed, int rank, sched_chaos_site site) {
  if (tls.seed != seed || !tls.named) { /* a new stream for this thread */
    tls.seed = seed;
    tls.next = 0;
    /* relaxed: a number, nothing is published with it */
    tls.who = rank >= 0 ? rank
                        : -1 - atomic_fetch_add_explicit(&issuers, 1, memory_order_relaxed);
    tls.named = true;
  }
  int64_t ns;
  sched_chaos_action a = sched_chaos_decide(seed, tls.who, tls.next++, site, &ns);
  /* relaxed: a statistic */
  if (a != SCHED_CHAOS_NONE) atomic_fetch_add_explicit(&taken, 1, memory_order_relaxed);
  switch (a) {
  case SCHED_CHAOS_YIELD: sched_yield(); break;
  case SCHED_CHAOS_SPIN: spin_for(ns); break;
  case SCHED_CHAOS_SLEEP: {
    struct timespec ts = {0, (long)ns};
    nanosleep(&ts, NULL);
    break;
  }
  default: break;
  }
  return a == SCHED_CHAOS_FAIL;
}

uint64_t sched_chaos_count(void) {
  return atomic_load_explicit(&taken, memory_order_relaxed);
}
