/* The DTensor layer (docs/sharding.md): ops on DTensors on the issuing
 * thread, in the stages of PyTorch's DTensor dispatch — the per-thread
 * sharding cache, the op's sharding rule on a miss, redistribution
 * (strict or auto), output handles — and one published record whose
 * every mesh rank derives its local shapes and runs the local kernel
 * (rank_op.c). */
#ifndef DISPATCH_PROPAGATE_H
#define DISPATCH_PROPAGATE_H

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
/* This thread inserts redistributions as auto_redistribute does, whatever
 * the runtime's mode, while `on` (autograd's backward: a gradient's
 * placements are the rules' choice, not the user's); returns the previous
 * value. */
bool dispatch_dtensor_force_auto(bool on);
/* this thread's dt_redistribute_mode (dtorch.h) */
dt_status dispatch_redistribute_mode_set(dt_redistribute_mode mode);
dt_redistribute_mode dispatch_redistribute_mode(void);

/* ---- the per-thread sharding cache (shard_cache.c)
 * The rule: a hit gives exactly what a miss would (dtype, shape,
 * placements, values, errors). Key: the op, each tensor argument's spec
 * (mesh id, placements, global shape, dtype), the values of the `i`, `b`,
 * `I`, `D` arguments and, for an op with an argument outside the key
 * (`s`, `d`, `n`, `P`: scalars, eps, p, seeds), the output metadata its
 * infer made for this very call (dispatch_key_put_meta): that infer runs
 * on every call of such an op, hit or miss, so its checks and its dtype
 * decision are never skipped, and the key then holds everything a rule
 * reads. As words. Thread-local: a lookup reads only this thread's table
 * and the words it built, no lock, no atomic. */
#define DISPATCH_KEY_WORDS 160
typedef struct dispatch_key {
  uint64_t hash;
  int n;                 /* words used; -1: too long to cache */
  bool statics;          /* the op has an argument outside the key */
  uint32_t classes;      /* 2 bits per `s` argument (by position): zero,
                            infinite, NaN or other */
  int64_t w[DISPATCH_KEY_WORDS];
} dispatch_key;
/* builds the key of c (its tensor arguments are DTensors on one mesh);
 * k->statics says whether dispatch_key_put_meta must follow */
void dispatch_key_build(const dt_op_call *c, dispatch_key *k);
/* appends c's output metadata (c->nmeta outputs: dtype, ndim, sizes),
 * made by the op's infer on this call */
void dispatch_key_put_meta(const dt_op_call *c, dispatch_key *k);
/* the cached plan or NULL (counts a hit or a miss) */
const dispatch_plan *dispatch_cache_find(const dispatch_key *k);
/* stores a copy of p under k (may evict); false when out of host memory
 * (nothing stored; the caller goes on uncached) */
bool dispatch_cache_insert(const dispatch_key *k, const dispatch_plan *p);
/* this thread's counts (dt_sharding_cache_stats) */
dt_cache_stats dispatch_cache_stats(void);
int64_t dispatch_cache_evictions(void);
void dispatch_cache_clear(void);

/* ---- the ranks' side (rank_op.c) */
/* One op for every rank, as small as the call (a few hundred bytes for a
 * binary op, so the allocator's fast path serves it): the arguments, the
 * outputs, and each argument's / output's target placements (mesh ndim
 * each) in the bytes after args. Tensor args, list elements and outputs
 * are retained by the job. */
typedef struct dispatch_dtensor_job {
  core_op_id op;
  core_kernel_fn kernel;        /* the ranks' backend's kernel (NULL: a view) */
  int nargs, nout, nd;          /* nd: the mesh's ndim */
  int list_arg;                 /* position of the list argument, -1: none */
  const char *api;
  struct dt_mesh *mesh;         /* retained */
  dt_tensor **list;             /* the list argument's elements */
  dt_tensor *out[CORE_CALL_MAX_OUTS];
  dt_placement *pl;             /* nargs rows, then nout rows, of nd */
  core_value args[];            /* nargs entries, then the placements */
} dispatch_dtensor_job;
/* the target placements of argument a / output o */
static inline const dt_placement *dispatch_job_in(const dispatch_dtensor_job *j, int a) {
  return j->pl + a * j->nd;
}
static inline const dt_placement *dispatch_job_out(const dispatch_dtensor_job *j, int o) {
  return j->pl + (j->nargs + o) * j->nd;
}
void dispatch_dtensor_exec(void *arg, struct dt_runtime *rt, int rank);
void dispatch_dtensor_done(void *arg);

#endif
