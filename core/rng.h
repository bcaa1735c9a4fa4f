/* The process random stream: (seed, next offset). */
#ifndef CORE_RNG_H
#define CORE_RNG_H

#include <stdint.h>

#include "dtorch/dtorch.h"

/* Reserves n consecutive elements of the stream; returns the first index
 * and the seed in *seed. Thread-safe. */
uint64_t core_rng_reserve(uint64_t n, uint64_t *seed);

/* This thread draws from its own copy of the process stream (seed and
 * offset as they are now) until core_rng_local_end, which returns the
 * copy's next offset; dt_manual_seed on the thread seeds the copy. */
void core_rng_local_begin(void);
uint64_t core_rng_local_end(void);
/* the process stream's offset moves up to `offset` (never down) */
void core_rng_advance_to(uint64_t offset);

/* ---- the implementations behind public entry points (api/) */
/* dt_manual_seed (dtorch.h) */
void core_manual_seed(uint64_t seed);

#endif
