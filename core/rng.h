/* The process random stream: (seed, next offset). */
#ifndef CORE_RNG_H
#define CORE_RNG_H

#include <stdint.h>

#include "dtorch/dtorch.h"

/* Reserves n consecutive elements of the stream; returns the first index
 * and the seed in *seed. Thread-safe. */
uint64_t core_rng_reserve(uint64_t n, uint64_t *seed);

/* ---- the implementations behind public entry points (api/) */
/* dt_manual_seed (dtorch.h) */
void core_manual_seed(uint64_t seed);

#endif
