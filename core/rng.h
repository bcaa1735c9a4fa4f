/* The process random stream: (seed, next offset). */
#ifndef DT_CORE_RNG_H
#define DT_CORE_RNG_H

#include <stdint.h>

#include "dtorch/dtorch.h"

/* Reserves n consecutive elements of the stream; returns the first index
 * and the seed in *seed. Thread-safe. */
uint64_t dt_rng_reserve(uint64_t n, uint64_t *seed);

#endif
