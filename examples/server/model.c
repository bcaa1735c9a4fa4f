/* The served MLP on dtorch (model.h). */
#include "model.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const char *const NAMES[4] = {"w1", "b1", "w2", "b2"};

static int fail(const char *what) {
  fprintf(stderr, "model: %s: %s\n", what, dt_last_error());
  return -1;
}

int model_write(const char *path, int in, int hidden, int out, uint64_t seed) {
  dt_manual_seed(seed);
  dt_shape shapes[4] = {DT_SHAPE(hidden, in), DT_SHAPE(hidden), DT_SHAPE(out, hidden),
                        DT_SHAPE(out)};
  double scale[4] = {1 / sqrt(in), 0.1, 1 / sqrt(hidden), 0.1};
  dt_tensor *t[4] = {0};
  int rc = 0;
  for (int i = 0; i < 4 && !rc; i++) {
    dt_tensor *r = dt_randn(shapes[i], NULL);
    t[i] = dt_mul_scalar(r, scale[i]);
    dt_tensor_release(r);
    if (!t[i]) rc = fail("randn");
  }
  if (!rc && dt_save_safetensors(path, t, NAMES, 4) != DT_OK) rc = fail(path);
  for (int i = 0; i < 4; i++) dt_tensor_release(t[i]);
  return rc;
}

/* the model's sizes from the file's header: w1 [hidden, in], w2 [out, hidden] */
static int read_dims(model *m, const char *path) {
  dt_safetensors_info *info = dt_safetensors_index(path);
  if (!info) return fail(path);
  m->in = m->hidden = m->out = 0;
  for (int i = 0; i < info->n; i++) {
    const dt_safetensors_entry *e = &info->tensors[i];
    if (strcmp(e->name, "w1") == 0 && e->shape.ndim == 2) {
      m->hidden = (int)e->shape.dims[0];
      m->in = (int)e->shape.dims[1];
    } else if (strcmp(e->name, "w2") == 0 && e->shape.ndim == 2) {
      m->out = (int)e->shape.dims[0];
    }
  }
  dt_safetensors_info_free(info);
  if (!m->in || !m->hidden || !m->out) {
    fprintf(stderr, "model: %s has no 2-d w1 and w2\n", path);
    return -1;
  }
  return 0;
}

int model_load(model *m, const char *path, int tp) {
  memset(m, 0, sizeof *m);
  if (read_dims(m, path)) return -1;
  /* auto_redistribute: the row-parallel layer's Partial(sum) output meets
   * the replicated bias; dtorch inserts the all-reduce it needs */
  m->rt = dt_runtime_create(&(dt_runtime_options){.num_ranks = tp,
                                                   .auto_redistribute = true});
  if (!m->rt) return fail("runtime");
  m->mesh = dt_mesh_init(m->rt, "cpu", DT_SHAPE(tp), (const char *const[]){"tp"});
  if (!m->mesh) {
    model_free(m);
    return fail("mesh");
  }
  const dt_placement pl[4] = {DT_SHARD(0), DT_SHARD(0), DT_SHARD(1), DT_REPLICATE};
  dt_tensor **slot[4] = {&m->w1, &m->b1, &m->w2, &m->b2};
  for (int i = 0; i < 4; i++) {
    dt_load_options o = {.mesh = m->mesh, .placements = &pl[i]};
    *slot[i] = dt_load_safetensors(path, NAMES[i], &o);
    if (!*slot[i]) {
      fail(NAMES[i]);
      model_free(m);
      return -1;
    }
  }
  /* the weights are read by the ranks; wait, so a bad file fails here */
  if (dt_runtime_synchronize(m->rt) != DT_OK) {
    fail("load");
    model_free(m);
    return -1;
  }
  return 0;
}

void model_free(model *m) {
  dt_tensor_release(m->w1);
  dt_tensor_release(m->b1);
  dt_tensor_release(m->w2);
  dt_tensor_release(m->b2);
  dt_mesh_release(m->mesh);
  dt_runtime_destroy(m->rt);
  memset(m, 0, sizeof *m);
}

static dt_tensor *forward(model *m, dt_tensor *x) {
  dt_tensor *z = dt_linear(x, m->w1, m->b1); /* [rows, hidden] S(1) */
  dt_tensor *h = dt_relu(z);
  dt_tensor_release(z);
  dt_tensor *y = dt_linear(h, m->w2, m->b2); /* [rows, out] */
  dt_tensor_release(h);
  return y;
}

dt_future *model_forward_async(model *m, const float *x, int rows, int cols,
                               int repeat, float *out, dt_tensor **y) {
  *y = NULL;
  dt_tensor_options o = {.mesh = m->mesh, .placements = DT_PLACEMENTS(DT_REPLICATE)};
  dt_tensor *xt = dt_from_host(x, DT_SHAPE(rows, cols), &o);
  if (!xt) return NULL;
  dt_tensor *r = NULL;
  for (int i = 0; i < repeat; i++) {
    dt_tensor_release(r);
    if (!(r = forward(m, xt))) break;
  }
  dt_tensor_release(xt);
  if (!r) return NULL;
  dt_future *f = dt_to_host_async(r, out, (size_t)rows * m->out * sizeof(float));
  if (!f) {
    dt_tensor_release(r);
    return NULL;
  }
  *y = r;
  return f;
}
