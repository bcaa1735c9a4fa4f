/* The training job shared by `dtorch demo` (tools/demo.c) and `dtorch bench
 * demo` (bench/bench_demo.c): the models, their parameters, the synthetic
 * data and one training step (tools/demo_model.c).
 *
 * One model value is one copy of the network: either DTensors on a dp × tp
 * mesh (Megatron-style tensor parallelism on tp, data parallelism on dp)
 * or single-device tensors. Both copies start from the same host arrays
 * and see the same batches, so their losses must agree to float rounding. */
#ifndef TOOLS_DEMO_H
#define TOOLS_DEMO_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "dtorch/dtorch.h"

typedef enum demo_model_kind { DEMO_MLP, DEMO_TRANSFORMER } demo_model_kind;
typedef enum demo_loss_kind { DEMO_LOSS_MSE, DEMO_LOSS_CE } demo_loss_kind;

typedef struct demo_config {
  demo_model_kind model;
  demo_loss_kind loss;
  int dp, tp;           /* the mesh: dp × tp ranks */
  int hidden, batch;
  int seq, heads;       /* transformer only */
  int layers;           /* MLP blocks (mlp) or transformer blocks */
  double lr;
  uint64_t seed;
  int max_ranks;        /* dp * tp at most this (0: DEMO_MAX_RANKS; a dry
                           run allows DEMO_MAX_DRY_RANKS) */
} demo_config;

/* the defaults of `dtorch demo` for a model kind */
demo_config demo_config_default(demo_model_kind kind);
/* NULL when cfg can run, else a message naming the flag at fault */
const char *demo_config_check(const demo_config *cfg, char *buf, size_t len);

enum { DEMO_MAX_PARAMS = 16 * 32, DEMO_MAX_RANKS = 256, DEMO_MAX_DRY_RANKS = 65536 };
/* `dtorch demo --dry-run`: one step of the model on a dry-run runtime of
 * dp × tp ranks; prints the prediction table (tools/demo_dry.c) */
int demo_dry_run(const demo_config *cfg, double link_gbps, double latency_us);

/* The host values every copy starts from (one array per parameter). */
typedef struct demo_init {
  int n;
  float *data[DEMO_MAX_PARAMS];
} demo_init;
bool demo_init_make(const demo_config *cfg, demo_init *init);
void demo_init_free(demo_init *init);

/* One copy of the network with its AdamW optimiser. params are the
 * optimiser's slots: an optimiser step replaces them. */
typedef struct demo_model {
  const demo_config *cfg;
  dt_mesh *mesh;                  /* NULL: single device */
  int n;
  dt_tensor *params[DEMO_MAX_PARAMS];
  dt_tensor *mask;                /* transformer: the causal mask */
  dt_optimizer *opt;
} demo_model;
/* mesh NULL = single-device tensors on this thread's runtime */
bool demo_model_create(demo_model *m, const demo_config *cfg, dt_mesh *mesh,
                       const demo_init *init);
void demo_model_destroy(demo_model *m);
/* name of parameter i ("block0.w1"): into buf */
const char *demo_param_name(const demo_config *cfg, int i, char *buf,
                            size_t len);

/* A batch on the host: inputs and targets from a fixed random teacher. */
typedef struct demo_batch {
  float *x;          /* [batch, hidden] or [batch, seq, hidden] */
  float *target;     /* mse: x's shape */
  int64_t *labels;   /* ce: [batch] or [batch, seq] */
} demo_batch;
bool demo_batch_make(const demo_config *cfg, int step, demo_batch *b);
void demo_batch_free(demo_batch *b);

/* One training step: forward, loss, backward, AdamW step, zero grad.
 * Returns the loss tensor (a new reference, to fetch) or NULL with the
 * error set. Issues work; does not wait for it. */
dt_tensor *demo_train_step(demo_model *m, const demo_batch *b);

/* --trace-ops (tools/demo_trace.c): prints every op issued on this thread
 * with its inputs' and outputs' placements, and the collectives issued
 * between ops (dt_redistribute: the TP all-reduces, the gradient
 * reductions) or inside one, counted with dt_comm_count. Between begin
 * and end the caller must not use dt_comm_count itself; end returns the
 * total counts. */
typedef struct demo_tracer {
  FILE *out;
  dt_comm_counts total;
  int64_t ops;
} demo_tracer;
dt_status demo_trace_begin(demo_tracer *t, FILE *out);
dt_comm_counts demo_trace_end(demo_tracer *t);

#endif
