/* The served model: a two-layer MLP, y = relu(x W1ᵀ + b1) W2ᵀ + b2,
 * tensor-parallel over a 1-d "tp" mesh (Megatron's split: W1 and b1 by
 * rows, Shard(0); W2 by columns, Shard(1); b2 replicated), loaded from a
 * safetensors file whose tensors are named w1, b1, w2, b2. Public API only. */
#ifndef SERVER_MODEL_H
#define SERVER_MODEL_H

#include <dtorch/dtorch.h>

typedef struct model {
  dt_runtime *rt;
  dt_mesh *mesh;
  dt_tensor *w1, *b1, *w2, *b2;
  int in, hidden, out;
} model;

/* Writes a model of seeded random weights (scaled 1/sqrt(fan in)) to path.
 * 0 on success; -1 with the error printed. */
int model_write(const char *path, int in, int hidden, int out, uint64_t seed);
/* Loads path onto a new runtime of tp ranks. 0 on success; -1 with the
 * error printed (nothing left to free). */
int model_load(model *m, const char *path, int tp);
void model_free(model *m);
/* Issues the forward of rows x cols floats (row-major; cols must be
 * m->in: dtorch's shape checks say so otherwise), `repeat` times (the
 * last result is fetched; a stand-in for decode steps), and the fetch of
 * the result into out (rows x m->out floats, valid until the future
 * completes). Returns the future, with *y the tensor to release after it
 * completes; NULL with dtorch's error set when an op refuses the input. */
dt_future *model_forward_async(model *m, const float *x, int rows, int cols,
                               int repeat, float *out, dt_tensor **y);

#endif
