/* The process random stream (Philox counter space, kernels/cpu/random.c):
 * one seed and the next unused offset. Every random op reserves the
 * elements it draws, so results do not depend on which rank draws them. */
#include "core/rng.h"

#include <pthread.h>

/* The process random stream: (seed, next offset). A mutex keeps the pair
 * consistent when one thread seeds while another draws (two atomics could
 * pair a new seed with an old offset). */
static pthread_mutex_t rng_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t rng_seed;
static uint64_t rng_offset;

void core_manual_seed(uint64_t seed) {
  pthread_mutex_lock(&rng_lock);
  rng_seed = seed;
  rng_offset = 0;
  pthread_mutex_unlock(&rng_lock);
}

uint64_t core_rng_reserve(uint64_t n, uint64_t *seed) {
  pthread_mutex_lock(&rng_lock);
  *seed = rng_seed;
  uint64_t first = rng_offset;
  rng_offset += n;
  pthread_mutex_unlock(&rng_lock);
  return first;
}
