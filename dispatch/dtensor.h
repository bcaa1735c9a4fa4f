/* The DTensor layer (docs/sharding.md): ops on DTensors, stages A–E of
 * seed 000 on the issuing thread — custom handlers, the per-thread
 * sharding cache, the op's sharding rule on a miss, redistribution
 * (strict or auto), output handles — and one published record whose
 * every mesh rank derives its local shapes and runs the local kernel
 * (dtensor_exec.c). */
#ifndef DISPATCH_DTENSOR_H
#define DISPATCH_DTENSOR_H

#include <stdbool.h>
#include <stdint.h>

#include "core/call.h"

/* The propagation result of one call shape: the cache's value. */
typedef struct dispatch_plan {
  int nmeta;
  core_meta meta[CORE_CALL_MAX_OUTS];    /* global outputs (dtype, sizes) */
  dt_placement out[CORE_CALL_MAX_OUTS][DT_MAX_DIMS];
  dt_placement in[CORE_CALL_MAX_ARGS][DT_MAX_DIMS]; /* targets, per arg */
  bool comm;      /* an input needs a collective (strict mode: an error) */
  bool adjust;    /* an input is narrowed or zeroed locally on the ranks */
  double cost_us; /* the chosen strategy's redistribution cost */
} dispatch_plan;

/* the DTensor key's layer */
dt_status dispatch_dtensor_layer(dt_op_call *c);

/* ---- the per-thread sharding cache (shard_cache.c)
 * Key: the op, each tensor argument's spec (mesh id, placements, global
 * shape, dtype) and the values of the arguments that decide sharding
 * (core/call.h); as words. Thread-local: a lookup reads only this
 * thread's table and the words it built, no lock, no atomic. */
#define DISPATCH_KEY_WORDS 160
typedef struct dispatch_key {
  uint64_t hash;
  int n;                 /* words used; -1: too long to cache */
  int64_t w[DISPATCH_KEY_WORDS];
} dispatch_key;
/* builds the key of c (its tensor arguments are DTensors on one mesh) */
void dispatch_key_build(const dt_op_call *c, dispatch_key *k);
/* the cached plan or NULL (counts a hit or a miss) */
const dispatch_plan *dispatch_cache_find(const dispatch_key *k);
/* stores a copy of p under k (may evict); false when out of host memory
 * (nothing stored; the caller goes on uncached) */
bool dispatch_cache_insert(const dispatch_key *k, const dispatch_plan *p);
/* this thread's counts (dt_sharding_cache_stats) */
dt_cache_stats dispatch_cache_stats(void);
int64_t dispatch_cache_evictions(void);
void dispatch_cache_clear(void);

/* ---- the ranks' side (dtensor_exec.c) */
typedef struct dispatch_dtensor_job {
  dt_op_call call;        /* tensor args and outputs retained */
  dt_tensor **list;       /* the list argument's elements (retained) */
  int list_arg;           /* its position, -1: none */
  struct dt_mesh *mesh;   /* retained */
  dispatch_plan plan;
} dispatch_dtensor_job;
void dispatch_dtensor_exec(void *arg, struct dt_runtime *rt, int rank);
void dispatch_dtensor_done(void *arg);

#endif
