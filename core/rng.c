/* The process random stream (Philox counter space, kernels/cpu/random.c):
 * one seed and the next unused offset. Every random op reserves the
 * elements it draws, so results do not depend on which rank draws them. */
#include "core/rng.h"

#include <pthread.h>
#include <stdbool.h>

/* The process random stream: (seed, next offset). A mutex keeps the pair
 * consistent when one thread seeds while another draws (two atomics could
 * pair a new seed with an old offset). */
static pthread_mutex_t rng_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t rng_seed;
static uint64_t rng_offset;

/* A thread's own stream (SPMD: each rank draws from a copy of the process
 * stream, so ranks that make the same calls get the same numbers, as
 * ranks seeded alike do under torchrun). */
static _Thread_local struct { bool on; uint64_t seed, offset; } tls_rng;

void core_rng_local_begin(void) {
  pthread_mutex_lock(&rng_lock);
  tls_rng.seed = rng_seed;
  tls_rng.offset = rng_offset;
  pthread_mutex_unlock(&rng_lock);
  tls_rng.on = true;
}

uint64_t core_rng_local_end(void) {
  tls_rng.on = false;
  return tls_rng.offset;
}

void core_rng_advance_to(uint64_t offset) {
  pthread_mutex_lock(&rng_lock);
  if (offset > rng_offset) rng_offset = offset;
  pthread_mutex_unlock(&rng_lock);
}

void core_manual_seed(uint64_t seed) {
  if (tls_rng.on) {
    tls_rng.seed = seed;
    tls_rng.offset = 0;
    return;
  }
  pthread_mutex_lock(&rng_lock);
  rng_seed = seed;
  rng_offset = 0;
  pthread_mutex_unlock(&rng_lock);
}

uint64_t core_rng_reserve(uint64_t n, uint64_t *seed) {
  if (tls_rng.on) {
    *seed = tls_rng.seed;
    uint64_t first = tls_rng.offset;
    tls_rng.offset += n;
    return first;
  }
  pthread_mutex_lock(&rng_lock);
  *seed = rng_seed;
  uint64_t first = rng_offset;
  rng_offset += n;
  pthread_mutex_unlock(&rng_lock);
  return first;
}
