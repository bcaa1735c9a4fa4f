/* The models of `dtorch demo` and `dtorch bench demo` (tools/demo.h):
 * Megatron-style tensor parallelism written with the public API only.
 *
 * Every parameter is a DTensor on the dp × tp mesh, Replicate on dp (each
 * data-parallel group holds the whole model) and, on tp:
 *   column-parallel  W [out, in] as S(0), its bias S(0): output features
 *                    split, the activation comes out S(last) — no
 *                    communication;
 *   row-parallel     W [out, in] as S(1): the input features split, so
 *                    the product is Partial(sum) on tp; the explicit
 *                    dt_redistribute to Replicate is the TP all-reduce (its
 *                    backward is local);
 *   the rest         Replicate (biases of row-parallel layers, LayerNorm).
 * Activations are S(0) on dp (the batch split). The backward's gradients
 * of Replicate weights come out Partial(sum) on dp, and the optimiser's
 * redistribution of them is the DP all-reduce. The runtime is strict: the
 * only communication is what this file asks for and what autograd and
 * the optimiser insert for gradients.
 *
 * The single-device copy runs the very same functions on plain tensors:
 * the redistributions are skipped (tp_allreduce) and placements unused. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/demo.h"

/* ---- parameters: one table row per parameter of a block */
enum { PL_REP, PL_COL, PL_ROW };           /* placement on tp */
enum { INIT_W, INIT_B, INIT_ONE, INIT_ZERO };
typedef struct pspec {
  const char *name;
  int d0, d1;      /* dims as multiples of hidden; d1 0 = 1-D */
  int pl, init;
} pspec;

static const pspec mlp_specs[] = {
  {"w1", 4, 1, PL_COL, INIT_W}, {"b1", 4, 0, PL_COL, INIT_B},
  {"w2", 1, 4, PL_ROW, INIT_W}, {"b2", 1, 0, PL_REP, INIT_B}};
/* indices into a transformer block's parameters */
enum { T_LN1W, T_LN1B, T_WQ, T_BQ, T_WK, T_BK, T_WV, T_BV, T_WO, T_BO,
       T_LN2W, T_LN2B, T_MLP, T_COUNT = T_MLP + 4 };
static const pspec block_specs[T_COUNT] = {
  {"ln1.w", 1, 0, PL_REP, INIT_ONE}, {"ln1.b", 1, 0, PL_REP, INIT_ZERO},
  {"wq", 1, 1, PL_COL, INIT_W}, {"bq", 1, 0, PL_COL, INIT_B},
  {"wk", 1, 1, PL_COL, INIT_W}, {"bk", 1, 0, PL_COL, INIT_B},
  {"wv", 1, 1, PL_COL, INIT_W}, {"bv", 1, 0, PL_COL, INIT_B},
  {"wo", 1, 1, PL_ROW, INIT_W}, {"bo", 1, 0, PL_REP, INIT_B},
  {"ln2.w", 1, 0, PL_REP, INIT_ONE}, {"ln2.b", 1, 0, PL_REP, INIT_ZERO},
  {"w1", 4, 1, PL_COL, INIT_W}, {"b1", 4, 0, PL_COL, INIT_B},
  {"w2", 1, 4, PL_ROW, INIT_W}, {"b2", 1, 0, PL_REP, INIT_B}};
_Static_assert(sizeof block_specs / sizeof *block_specs == T_COUNT,
               "one spec per transformer parameter");

static int per_block(const demo_config *cfg) {
  return cfg->model == DEMO_MLP ? 4 : T_COUNT;
}
static const pspec *spec_of(const demo_config *cfg, int i) {
  int k = i % per_block(cfg);
  return cfg->model == DEMO_MLP ? &mlp_specs[k] : &block_specs[k];
}
static int num_params(const demo_config *cfg) {
  return per_block(cfg) * cfg->layers;
}
static dt_shape shape_of(const demo_config *cfg, const pspec *s) {
  int64_t h = cfg->hidden;
  return s->d1 ? DT_SHAPE(s->d0 * h, s->d1 * h) : DT_SHAPE(s->d0 * h);
}
static int64_t numel_of(dt_shape s) {
  int64_t n = 1;
  for (int i = 0; i < s.ndim; i++) n *= s.dims[i];
  return n;
}
static const dt_placement *placements_of(int pl) {
  static const dt_placement rep[2] = {DT_REPLICATE, DT_REPLICATE};
  static const dt_placement col[2] = {DT_REPLICATE, DT_SHARD(0)};
  static const dt_placement row[2] = {DT_REPLICATE, DT_SHARD(1)};
  return pl == PL_COL ? col : pl == PL_ROW ? row : rep;
}

const char *demo_param_name(const demo_config *cfg, int i, char *buf,
                            size_t len) {
  snprintf(buf, len, "block%d.%s", i / per_block(cfg), spec_of(cfg, i)->name);
  return buf;
}

/* ---- config */
demo_config demo_config_default(demo_model_kind kind) {
  demo_config c = {.model = kind, .loss = DEMO_LOSS_MSE, .dp = 2, .tp = 4,
                   .hidden = 128, .batch = 32, .seq = 16, .heads = 8,
                   .layers = 1, .lr = 3e-3, .seed = 0};
  if (kind == DEMO_TRANSFORMER) {
    c.hidden = 64;
    c.batch = 8;
  }
  return c;
}

const char *demo_config_check(const demo_config *c, char *buf, size_t len) {
  int max_layers = DEMO_MAX_PARAMS / per_block(c);
  int max_ranks = c->max_ranks ? c->max_ranks : DEMO_MAX_RANKS;
  if (c->dp < 1 || c->tp < 1 || (int64_t)c->dp * c->tp > max_ranks)
    snprintf(buf, len, "--dp %d --tp %d: need dp, tp >= 1 and dp * tp <= %d%s",
             c->dp, c->tp, max_ranks, c->max_ranks ? "" : " (--dry-run: more)");
  else if (c->hidden < 1 || c->batch < 1)
    snprintf(buf, len, "--hidden %d --batch %d: both must be >= 1", c->hidden,
             c->batch);
  else if (c->layers < 1 || c->layers > max_layers)
    snprintf(buf, len, "--layers %d: must be in 1..%d", c->layers, max_layers);
  else if (!(c->lr > 0) || !isfinite(c->lr))
    snprintf(buf, len, "--lr %g: must be > 0", c->lr);
  else if (c->model == DEMO_TRANSFORMER && (c->heads < 1 || c->seq < 1))
    snprintf(buf, len, "--heads %d --seq %d: both must be >= 1", c->heads,
             c->seq);
  else if (c->model == DEMO_TRANSFORMER && c->heads % c->tp)
    snprintf(buf, len, "--heads %d is not divisible by --tp %d: attention "
             "splits whole heads over the tp ranks", c->heads, c->tp);
  else if (c->model == DEMO_TRANSFORMER && c->hidden % c->heads)
    snprintf(buf, len, "--hidden %d is not divisible by --heads %d",
             c->hidden, c->heads);
  else
    return NULL;
  return buf;
}

/* ---- host random numbers: splitmix64 streams, Box-Muller normals */
typedef struct rng { uint64_t s; } rng;
static uint64_t rng_next(rng *r) {
  uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
static double rng_normal(rng *r) {
  double u1 = ((double)(rng_next(r) >> 11) + 1.0) / 9007199254740993.0;
  double u2 = (double)(rng_next(r) >> 11) / 9007199254740992.0;
  return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}
static rng rng_stream(uint64_t seed, uint64_t stream) {
  rng r = {seed * 0x2545F4914F6CDD1Dull + stream * 0x9E3779B97F4A7C15ull};
  rng_next(&r);
  return r;
}
static float *normals(uint64_t seed, uint64_t stream, int64_t n, double std) {
  float *v = malloc((size_t)(n ? n : 1) * sizeof *v);
  rng r = rng_stream(seed, stream);
  for (int64_t i = 0; v && i < n; i++) v[i] = (float)(std * rng_normal(&r));
  return v;
}

bool demo_init_make(const demo_config *cfg, demo_init *init) {
  memset(init, 0, sizeof *init);
  init->n = num_params(cfg);
  for (int i = 0; i < init->n; i++) {
    const pspec *s = spec_of(cfg, i);
    dt_shape sh = shape_of(cfg, s);
    int64_t n = numel_of(sh);
    double std = s->init == INIT_W ? 1.0 / sqrt((double)sh.dims[1]) : 0.02;
    init->data[i] = normals(cfg->seed, (uint64_t)i + 1, n, std);
    if (!init->data[i]) return false;
    if (s->init == INIT_ONE || s->init == INIT_ZERO)
      for (int64_t k = 0; k < n; k++) init->data[i][k] = s->init == INIT_ONE;
  }
  return true;
}

void demo_init_free(demo_init *init) {
  for (int i = 0; i < init->n; i++) free(init->data[i]);
  memset(init, 0, sizeof *init);
}

/* ---- data: x ~ N(0, 1); the teacher T [hidden, hidden] is fixed by the
 * seed; mse targets x·Tᵀ, ce labels argmax(x·Tᵀ) per position */
static int64_t rows_of(const demo_config *cfg) {
  return (int64_t)cfg->batch * (cfg->model == DEMO_TRANSFORMER ? cfg->seq : 1);
}

bool demo_batch_make(const demo_config *cfg, int step, demo_batch *b) {
  int64_t rows = rows_of(cfg), h = cfg->hidden;
  memset(b, 0, sizeof *b);
  b->x = normals(cfg->seed, 1000003 + (uint64_t)step, rows * h, 1.0);
  float *t = normals(cfg->seed, 999983, h * h, 1.0 / sqrt((double)h));
  if (cfg->loss == DEMO_LOSS_MSE) b->target = malloc((size_t)(rows * h) * sizeof(float));
  else b->labels = malloc((size_t)rows * sizeof(int64_t));
  bool ok = b->x && t && (b->target || b->labels);
  for (int64_t r = 0; ok && r < rows; r++) {
    int64_t best = 0;
    double best_v = -INFINITY;
    for (int64_t o = 0; o < h; o++) {
      double s = 0;
      for (int64_t k = 0; k < h; k++) s += (double)b->x[r * h + k] * t[o * h + k];
      if (b->target) b->target[r * h + o] = (float)s;
      if (s > best_v) best_v = s, best = o;
    }
    if (b->labels) b->labels[r] = best;
  }
  free(t);
  if (!ok) demo_batch_free(b);
  return ok;
}

void demo_batch_free(demo_batch *b) {
  free(b->x);
  free(b->target);
  free(b->labels);
  memset(b, 0, sizeof *b);
}

/* ---- the model's tensors */
static dt_tensor *make_tensor(const demo_model *m, const void *data,
                              dt_shape shape, dt_dtype dtype,
                              const dt_placement *pl, bool grad) {
  dt_tensor_options o = {.dtype = dtype, .mesh = m->mesh,
                         .placements = m->mesh ? pl : NULL,
                         .requires_grad = grad};
  return dt_from_host(data, shape, &o);
}

/* bool [seq, seq], true above the diagonal (a position sees no later one) */
static dt_tensor *causal_mask(const demo_model *m) {
  int s = m->cfg->seq;
  bool *v = malloc((size_t)s * (size_t)s * sizeof *v);
  if (!v) return NULL;
  for (int i = 0; i < s; i++)
    for (int j = 0; j < s; j++) v[i * s + j] = j > i;
  dt_tensor *t = make_tensor(m, v, DT_SHAPE(s, s), DT_BOOL,
                             placements_of(PL_REP), false);
  free(v);
  return t;
}

bool demo_model_create(demo_model *m, const demo_config *cfg, dt_mesh *mesh,
                       const demo_init *init) {
  memset(m, 0, sizeof *m);
  m->cfg = cfg;
  m->mesh = mesh ? dt_mesh_retain(mesh) : NULL;
  for (int i = 0; i < init->n; i++) {
    const pspec *s = spec_of(cfg, i);
    m->params[i] = make_tensor(m, init->data[i], shape_of(cfg, s), DT_FLOAT32,
                               placements_of(s->pl), true);
    m->n = i + 1;
    if (!m->params[i]) return false;
  }
  if (cfg->model == DEMO_TRANSFORMER && !(m->mask = causal_mask(m)))
    return false;
  /* AdamW as PyTorch's defaults, with its usual decoupled weight decay */
  m->opt = dt_adamw_create(m->params, m->n,
                           &(dt_adamw_options){.lr = cfg->lr, .weight_decay = 0.01});
  return m->opt != NULL;
}

void demo_model_destroy(demo_model *m) {
  dt_optimizer_release(m->opt);
  for (int i = 0; i < m->n; i++) dt_tensor_release(m->params[i]);
  dt_tensor_release(m->mask);
  dt_mesh_release(m->mesh);
  memset(m, 0, sizeof *m);
}

/* ---- one step: every intermediate is kept in the context and released
 * at the end; a NULL (a failed op) is noted and propagates through the
 * ops that take it, which keep the first error */
typedef struct step_ctx {
  const demo_model *m;
  bool failed;
  int n, cap;
  dt_tensor **tmp;
} step_ctx;

static dt_tensor *K(step_ctx *c, dt_tensor *t) {
  if (!t) {
    c->failed = true;
    return NULL;
  }
  if (c->n == c->cap) {
    int cap = c->cap ? 2 * c->cap : 64;
    dt_tensor **p = realloc(c->tmp, (size_t)cap * sizeof *p);
    if (!p) {
      dt_tensor_release(t);
      c->failed = true;
      return NULL;
    }
    c->tmp = p;
    c->cap = cap;
  }
  return c->tmp[c->n++] = t;
}

/* Partial(sum) on tp -> Replicate: the TP all-reduce (strict mode refuses
 * to do it implicitly, so the communication is visible here) */
static dt_tensor *tp_allreduce(step_ctx *c, dt_tensor *y) {
  if (!c->m->mesh) return y;
  return K(c, dt_redistribute(y, NULL, DT_PLACEMENTS(DT_SHARD(0), DT_REPLICATE)));
}

/* column-parallel linear, gelu, row-parallel linear, TP all-reduce */
static dt_tensor *mlp(step_ctx *c, dt_tensor *x, dt_tensor *const *p) {
  dt_tensor *h = K(c, dt_gelu(K(c, dt_linear(x, p[0], p[1]))));
  return tp_allreduce(c, K(c, dt_linear(h, p[2], p[3])));
}

/* Attention with whole heads per tp rank, split on the weights: Wq
 * [hidden, hidden] S(0) viewed as [heads, hd, hidden] S(0), and x [b, 1,
 * s, hidden] · Wqᵀ per head gives [b, heads, s, hd] with the heads S(1) on
 * tp — no communication, and no transpose of q afterwards. (The usual
 * form — q [b, s, hidden] S(2), view [b, s, heads, hd], transpose — works
 * as well: a view keeps the shards of dims it splits at shard
 * boundaries.) */
static dt_tensor *project_heads(step_ctx *c, dt_tensor *x1, dt_tensor *w,
                                dt_tensor *b) {
  const demo_config *g = c->m->cfg;
  int64_t nh = g->heads, hd = g->hidden / g->heads;
  dt_tensor *w3 = K(c, dt_view(w, DT_SHAPE(nh, hd, g->hidden)));
  dt_tensor *y = K(c, dt_matmul(x1, K(c, dt_transpose(w3, 1, 2))));
  return K(c, dt_add(y, K(c, dt_view(b, DT_SHAPE(nh, 1, hd)))));
}

/* the row-parallel output projection of o [b, heads, s, hd] (heads S(1)):
 * Wo [hidden, hidden] S(1) as Woᵀ [heads, hd, hidden] S(0); the product
 * per head summed over the local heads is Partial(sum) on tp; the TP
 * all-reduce, then the (Replicate) bias */
static dt_tensor *project_out(step_ctx *c, dt_tensor *o, dt_tensor *w,
                              dt_tensor *b) {
  const demo_config *g = c->m->cfg;
  int64_t nh = g->heads, hd = g->hidden / g->heads;
  dt_tensor *wt = K(c, dt_reshape(K(c, dt_transpose(w, 0, 1)),
                                  DT_SHAPE(nh, hd, g->hidden)));
  dt_tensor *y = K(c, dt_sum(K(c, dt_matmul(o, wt)), (const int[]){1}, 1, false));
  return K(c, dt_add(tp_allreduce(c, y), b));
}

/* causal self-attention: softmax(q·kᵀ/sqrt(hd), masked above the
 * diagonal)·v, every head on its tp rank */
static dt_tensor *attention(step_ctx *c, dt_tensor *x, dt_tensor *const *p) {
  const demo_config *g = c->m->cfg;
  dt_tensor *x1 = K(c, dt_unsqueeze(x, 1));
  dt_tensor *q = project_heads(c, x1, p[T_WQ], p[T_BQ]);
  dt_tensor *k = project_heads(c, x1, p[T_WK], p[T_BK]);
  dt_tensor *v = project_heads(c, x1, p[T_WV], p[T_BV]);
  dt_tensor *s = K(c, dt_matmul(q, K(c, dt_transpose(k, 2, 3))));
  s = K(c, dt_mul_scalar(s, 1.0 / sqrt((double)(g->hidden / g->heads))));
  s = K(c, dt_masked_fill(s, c->m->mask, -INFINITY));
  dt_tensor *o = K(c, dt_matmul(K(c, dt_softmax(s, -1)), v));
  return project_out(c, o, p[T_WO], p[T_BO]);
}

/* pre-LayerNorm block: x + attn(ln1(x)), then + mlp(ln2(·)); labelled
 * for the shadow and communication reports */
static dt_tensor *block(step_ctx *c, dt_tensor *x, dt_tensor *const *p) {
  dt_label_push("attn");
  dt_tensor *a = attention(c, K(c, dt_layer_norm(x, p[T_LN1W], p[T_LN1B], 1e-5)), p);
  dt_label_pop();
  x = K(c, dt_add(x, a));
  dt_label_push("mlp");
  dt_tensor *f = mlp(c, K(c, dt_layer_norm(x, p[T_LN2W], p[T_LN2B], 1e-5)),
                     p + T_MLP);
  dt_label_pop();
  return K(c, dt_add(x, f));
}

static const char *const layer_label[] = {
  "layer0", "layer1", "layer2", "layer3", "layer4", "layer5", "layer6", "layer7",
};
#define LAYER_LABELS (int)(sizeof layer_label / sizeof *layer_label)

/* MLP blocks after the first are residual */
static dt_tensor *forward(step_ctx *c, dt_tensor *x) {
  const demo_model *m = c->m;
  int pb = per_block(m->cfg);
  for (int l = 0; l < m->cfg->layers; l++) {
    dt_tensor *const *p = m->params + l * pb;
    dt_label_push(l < LAYER_LABELS ? layer_label[l] : "layer");
    if (m->cfg->model == DEMO_TRANSFORMER) x = block(c, x, p);
    else if (l == 0) x = mlp(c, x, p);
    else x = K(c, dt_add(x, mlp(c, x, p)));
    dt_label_pop();
  }
  return x;
}

/* the batch on the model's device(s): [S(0), R] on the mesh */
static dt_tensor *input(step_ctx *c, const void *data, dt_dtype dtype,
                        bool features) {
  const demo_config *g = c->m->cfg;
  dt_shape s = g->model == DEMO_TRANSFORMER ? DT_SHAPE(g->batch, g->seq)
                                            : DT_SHAPE(g->batch);
  if (features) s.dims[s.ndim++] = g->hidden;
  return K(c, make_tensor(c->m, data, s, dtype,
                          DT_PLACEMENTS(DT_SHARD(0), DT_REPLICATE), false));
}

/* mse: mean((y - t)^2); ce: sum of the per-position losses / positions
 * (the SUM reduction keeps the batch sharded: Partial(sum) on dp) */
static dt_tensor *loss_of(step_ctx *c, dt_tensor *y, const demo_batch *b) {
  const demo_config *g = c->m->cfg;
  if (g->loss == DEMO_LOSS_MSE) {
    dt_tensor *d = K(c, dt_sub(y, input(c, b->target, DT_FLOAT32, true)));
    return K(c, dt_mean(K(c, dt_mul(d, d)), NULL, 0, false));
  }
  dt_tensor *labels = input(c, b->labels, DT_INT64, false);
  if (g->model == DEMO_TRANSFORMER) y = K(c, dt_transpose(y, 1, 2));
  dt_tensor *l = K(c, dt_cross_entropy(y, labels, DT_REDUCTION_SUM, -100));
  return K(c, dt_div_scalar(l, (double)rows_of(g)));
}

dt_tensor *demo_train_step(demo_model *m, const demo_batch *b) {
  step_ctx c = {.m = m};
  dt_tensor *y = forward(&c, input(&c, b->x, DT_FLOAT32, true));
  dt_label_push("loss");
  dt_tensor *loss = loss_of(&c, y, b);
  dt_label_pop();
  /* a failed op left its message as this thread's last error */
  dt_label_push("backward");
  dt_status st = c.failed ? DT_ERR_INTERNAL : dt_backward(loss);
  dt_label_pop();
  dt_label_push("optimizer");
  if (st == DT_OK) st = dt_optimizer_step(m->opt);
  dt_label_pop();
  dt_optimizer_zero_grad(m->opt);
  if (st == DT_OK) dt_tensor_retain(loss);
  for (int i = 0; i < c.n; i++) dt_tensor_release(c.tmp[i]);
  free(c.tmp);
  return st == DT_OK ? loss : NULL;
}
