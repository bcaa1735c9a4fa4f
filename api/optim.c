/* Optimisers (dtorch.h, "optimisers"; docs/autograd.md): SGD with
 * momentum and AdamW over parameter slots, and gradient clipping by the
 * global norm. Each update is a few public ops run with grad mode off, so
 * DTensor parameters update shard by shard on their ranks with the same
 * placements; a gradient whose placements differ from its parameter's
 * (a Partial(sum) from data parallelism) is redistributed first. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "dispatch/autograd.h"
#include "mesh/handle.h"
#include "mesh/spmd_coll.h"

enum { OPT_SGD, OPT_ADAMW };

struct dt_optimizer {
  int kind;
  int n;
  dt_tensor **params;   /* the caller's slots */
  dt_tensor **buf1;     /* SGD momentum / AdamW first moment */
  dt_tensor **buf2;     /* AdamW second moment */
  dt_sgd_options sgd;
  dt_adamw_options adam;
  int64_t steps;
};

/* ---- helpers: a new reference, NULL after an error (kept) */
static dt_tensor *take(dt_tensor *old, dt_tensor *t) {
  dt_tensor_release(old);
  return t;
}

static bool same_placements(const dt_tensor *a, const dt_tensor *b) {
  if (!a->spec || !b->spec) return !a->spec && !b->spec;
  for (int d = 0; d < dt_mesh_ndim(a->spec->mesh); d++) {
    dt_placement x = a->spec->placements[d], y = b->spec->placements[d];
    if (x.kind != y.kind || (x.kind == DT_PLACEMENT_SHARD && x.dim != y.dim) ||
        (x.kind == DT_PLACEMENT_PARTIAL && x.reduce != y.reduce))
      return false;
  }
  return true;
}

/* p's gradient with p's placements (kept as p's gradient), or NULL: none
 * (*st DT_OK) or an error */
static dt_tensor *reduced_grad(dt_tensor *p, const char *fn, dt_status *st) {
  *st = DT_OK;
  dt_tensor *g = dispatch_grad(p);
  if (!g || same_placements(g, p)) return g;
  dt_tensor *r = dt_redistribute(g, NULL, p->spec->placements);
  dt_tensor_release(g);
  if (!r || (*st = dispatch_set_grad(p, r, fn)) != DT_OK) {
    if (!r) *st = dt_last_status();
    dt_tensor_release(r);
    return NULL;
  }
  return r;
}

/* ---- the data-parallel step sharded over the replicas (ZeRO stage 1)
 *
 * A parameter Replicate on a mesh dim whose gradient is Partial there
 * (data parallelism: every replica holds its batch's term) is stepped one
 * shard per replica: the gradient is reduce-scattered over that dim
 * instead of all-reduced, each replica updates its 1/n of the parameter
 * with its 1/n of the optimizer state, and the updated shards are
 * all-gathered back into the parameter's placements. The bytes moved are
 * an all-reduce's (reduce-scatter + all-gather), the optimizer's work and
 * state per rank are 1/n of the replicated step's, and the values are the
 * same bit for bit: element e of a reduce-scatter is the root of the same
 * pairwise tree as element e of the all-reduce (docs/collectives.md), and
 * the update is elementwise. The shard dim is the largest tensor dim no
 * mesh dim shards, so the replica's shard is a narrowing of the rank's
 * local shard (no data moves to make it); a parameter without one (a
 * bias split by tp) takes the replicated step. The state buffers keep the
 * sharded placements from step to step. Only for shards of 32 KiB or
 * more per replica (zero_min_bytes). */
/* the smallest replica's shard worth the sharded step, bytes: below it the
 * extra collective (two where one was) costs more than the passes saved
 * (`dtorch bench demo --ranks-sweep`, 2-core AMD EPYC: at 64 ranks 16 KiB
 * shards ran the step in 0.84x the CPU time of the replicated step, at
 * 256 ranks 4 KiB shards in 0.97-1.1x; at 8 ranks, 2 MiB shards 1.5x
 * faster). DTORCH_SHARDED_OPTIMIZER: 0 off, 1 always, N bytes */
enum { ZERO_MIN_BYTES = 8192 };
static double zero_min_bytes(void) {
  const char *e = getenv("DTORCH_SHARDED_OPTIMIZER");
  if (!e || !*e) return ZERO_MIN_BYTES;
  char *end;
  double v = strtod(e, &end);
  if (*end || v < 0) return ZERO_MIN_BYTES; /* not a number: the default */
  return v == 0 ? INFINITY : v == 1 ? 0 : v;
}

/* t's shards as shape (mesh/view_shards.c); inside an SPMD function its
 * failure is the call's, as a public op's */
static dt_tensor *view(dt_tensor *t, dt_shape shape, const dt_placement *pl,
                       bool writable) {
  return mesh_spmd_checked(mesh_view_shards(t, shape, pl, writable));
}

/* The layout of the sharded step: q, the placements it runs in, on the
 * parameter's shape or (flat) on the view of its shards as [n, numel / n]
 * (dt_view_shards). The replica's shard is a narrowing of the local shard
 * along k, the largest dim no mesh dim shards; when a local dim in front of
 * k holds more than one element that narrowing is strided, and so are the
 * reduce-scatter's packing, the narrowing copy and the all-gather's
 * unpacking (a column-parallel weight [4 h, h] as S(0) on tp: k = 1, three
 * strided copies of the shard per step). When only one mesh dim shards the
 * parameter, along dim 0 and evenly, the view [n, numel / n] holds each
 * rank's shard as one row, and its k = 1 is a contiguous range of it: the
 * reduce-scatter and all-gather move the shard in place and the narrowing
 * is one memcpy. The values are the same either way (the update is
 * elementwise; each element's reduction is the same tree). */
typedef struct zero_plan {
  dt_placement q[DT_MAX_DIMS];
  bool flat;
  dt_shape shape; /* the view's shape (flat) */
} zero_plan;

/* q for a parameter of shape with placements pl whose gradient has gl;
 * false when the step stays replicated */
static bool zero_q(const dt_mesh *m, const dt_shape *shape, const dt_placement *pl,
                   const dt_placement *gl, size_t es, dt_placement *q, int *kout) {
  int nd = dt_mesh_ndim((dt_mesh *)m), ndim = shape->ndim;
  dt_shape ms = dt_mesh_shape((dt_mesh *)m);
  bool sharded[DT_MAX_DIMS] = {false}, any = false;
  double shard_bytes = (double)es; /* a replica's shard */
  for (int t = 0; t < ndim; t++) shard_bytes *= (double)shape->dims[t];
  for (int d = 0; d < nd; d++)
    if (pl[d].kind == DT_PLACEMENT_SHARD) {
      sharded[pl[d].dim] = true;
      shard_bytes /= (double)ms.dims[d];
    }
  int k = -1;
  for (int t = 0; t < ndim; t++)
    if (!sharded[t] && (k < 0 || shape->dims[t] > shape->dims[k])) k = t;
  /* the dims where p is Replicate and g Partial(sum|avg) shard over k;
   * the others keep p's placement (g moves to it, as the replicated step's) */
  for (int d = 0; d < nd; d++) {
    dt_placement x = pl[d], y = gl[d];
    q[d] = x;
    if (x.kind == DT_PLACEMENT_REPLICATE && y.kind == DT_PLACEMENT_PARTIAL &&
        (y.reduce == DT_REDUCE_SUM || y.reduce == DT_REDUCE_AVG)) {
      if (k < 0 || shape->dims[k] < ms.dims[d]) return false;
      q[d] = DT_SHARD(k);
      shard_bytes /= (double)ms.dims[d];
      any = true;
    }
  }
  *kout = k;
  return any && shard_bytes >= zero_min_bytes();
}

/* the one mesh dim that shards, if it shards dim 0 evenly; else -1 */
static int flat_mesh_dim(const dt_tensor *p) {
  const dt_mesh *m = p->spec->mesh;
  int nd = dt_mesh_ndim((dt_mesh *)m), md = -1;
  dt_shape ms = dt_mesh_shape((dt_mesh *)m);
  for (int d = 0; d < nd; d++)
    if (p->spec->placements[d].kind == DT_PLACEMENT_SHARD) {
      if (md >= 0 || p->spec->placements[d].dim != 0) return -1;
      md = d;
    }
  return md >= 0 && p->spec->shape.ndim >= 2 &&
                 p->spec->shape.dims[0] % ms.dims[md] == 0 ? md : -1;
}

static bool zero_layout(const dt_tensor *p, const dt_tensor *g, zero_plan *z) {
  if (!p->spec || !g->spec || p->spec->mesh != g->spec->mesh) return false;
  const dt_mesh *m = p->spec->mesh;
  size_t es = core_dtype_size(p->dtype);
  int k;
  z->flat = false;
  if (!zero_q(m, &p->spec->shape, p->spec->placements, g->spec->placements, es, z->q, &k))
    return false;
  int md = flat_mesh_dim(p);
  if (k <= 0 || md < 0) return true; /* k = 0: a contiguous narrowing already */
  int64_t n = dt_mesh_shape((dt_mesh *)m).dims[md];
  z->shape = DT_SHAPE(n, core_numel_of(p->spec->shape.dims, p->spec->shape.ndim) / n);
  z->flat = zero_q(m, &z->shape, p->spec->placements, g->spec->placements, es, z->q, &k);
  if (!z->flat) /* cannot happen (same bytes, a longer k); the plain layout */
    zero_q(m, &p->spec->shape, p->spec->placements, g->spec->placements, es, z->q, &k);
  return true;
}

/* ---- creation */
static dt_status check_params(dt_tensor **params, int n, const char *fn) {
  if (!params || n < 1)
    return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: params must be an array "
                          "of n >= 1 tensors (params %s, n %d)", fn,
                          params ? "given" : "NULL", n);
  for (int i = 0; i < n; i++) {
    if (!params[i])
      return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: params[%d] is NULL", fn, i);
    if (!params[i]->requires_grad || dt_tensor_grad_fn(params[i]))
      return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: params[%d] must be a "
                            "leaf that requires grad%s%s", fn, i,
                            dt_tensor_grad_fn(params[i]) ? "; it was made by " : "",
                            dt_tensor_grad_fn(params[i]) ? dt_tensor_grad_fn(params[i]) : "");
  }
  return DT_OK;
}

static bool bad(double v, double lo, bool lo_open, double hi) {
  return !isfinite(v) || v < lo || (lo_open && v == lo) || v >= hi;
}

static dt_optimizer *make(int kind, dt_tensor **params, int n) {
  dt_optimizer *o = calloc(1, sizeof *o);
  if (o) {
    o->buf1 = calloc((size_t)n, sizeof *o->buf1);
    o->buf2 = calloc((size_t)n, sizeof *o->buf2);
  }
  if (!o || !o->buf1 || !o->buf2) {
    if (o) {
      free(o->buf1);
      free(o->buf2);
      free(o);
    }
    core_error_set(DT_ERR_OUT_OF_MEMORY, "dt_optimizer: out of host memory");
    return NULL;
  }
  o->kind = kind;
  o->n = n;
  o->params = params;
  return o;
}

dt_optimizer *dt_sgd_create(dt_tensor **params, int n, const dt_sgd_options *opt) {
  const char *fn = "dt_sgd_create";
  if (check_params(params, n, fn) != DT_OK) return NULL;
  if (opt && CORE_RESERVED_ZERO(fn, "options", opt) != DT_OK) return NULL;
  if (!opt || bad(opt->lr, 0, true, INFINITY)) {
    core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: options.lr must be finite and > 0, "
                   "got %g", fn, opt ? opt->lr : 0.0);
    return NULL;
  }
  if (bad(opt->momentum, 0, false, INFINITY) || bad(opt->weight_decay, 0, false, INFINITY) ||
      (opt->nesterov && opt->momentum == 0)) {
    core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: options.momentum %g and "
                   "weight_decay %g must be finite and >= 0 (nesterov needs "
                   "momentum > 0)", fn, opt->momentum, opt->weight_decay);
    return NULL;
  }
  dt_optimizer *o = make(OPT_SGD, params, n);
  if (o) o->sgd = *opt;
  return o;
}

dt_optimizer *dt_adamw_create(dt_tensor **params, int n, const dt_adamw_options *opt) {
  const char *fn = "dt_adamw_create";
  if (check_params(params, n, fn) != DT_OK) return NULL;
  if (opt && CORE_RESERVED_ZERO(fn, "options", opt) != DT_OK) return NULL;
  dt_adamw_options a = opt ? *opt : (dt_adamw_options){0};
  if (a.lr == 0) a.lr = 1e-3;
  if (a.beta1 == 0) a.beta1 = 0.9;
  if (a.beta2 == 0) a.beta2 = 0.999;
  if (a.eps == 0) a.eps = 1e-8;
  if (bad(a.lr, 0, true, INFINITY) || bad(a.beta1, 0, false, 1) ||
      bad(a.beta2, 0, false, 1) || bad(a.eps, 0, true, INFINITY) ||
      bad(a.weight_decay, 0, false, INFINITY)) {
    core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: options lr %g, beta1 %g, beta2 %g, "
                   "eps %g, weight_decay %g: need lr > 0, betas in [0, 1), eps > 0, "
                   "weight_decay >= 0, all finite", fn, a.lr, a.beta1, a.beta2,
                   a.eps, a.weight_decay);
    return NULL;
  }
  dt_optimizer *o = make(OPT_ADAMW, params, n);
  if (o) o->adam = a;
  return o;
}

/* ---- steps: each returns p's new value (a new reference) or NULL */
static dt_tensor *sgd_update(dt_optimizer *o, int i, dt_tensor *p, dt_tensor *g) {
  const dt_sgd_options *s = &o->sgd;
  dt_tensor *d = dt_tensor_retain(g);
  if (s->weight_decay) {
    dt_tensor *wp = dt_mul_scalar(p, s->weight_decay);
    d = take(d, wp ? dt_add(d, wp) : NULL);
    dt_tensor_release(wp);
  }
  if (d && s->momentum) {
    dt_tensor *b = o->buf1[i];
    if (!b) {
      b = dt_tensor_retain(d);
    } else {
      dt_tensor *mb = dt_mul_scalar(b, s->momentum);
      b = take(b, mb ? dt_add(mb, d) : NULL);
      dt_tensor_release(mb);
    }
    o->buf1[i] = b;
    if (!b) d = take(d, NULL);
    else if (s->nesterov) {
      dt_tensor *mb = dt_mul_scalar(b, s->momentum);
      d = take(d, mb ? dt_add(d, mb) : NULL);
      dt_tensor_release(mb);
    } else {
      d = take(d, dt_tensor_retain(b));
    }
  }
  dt_tensor *step = d ? dt_mul_scalar(d, s->lr) : NULL;
  dt_tensor *np = step ? dt_sub(p, step) : NULL;
  dt_tensor_release(step);
  dt_tensor_release(d);
  return np;
}

/* ---- the fused kernels */
dt_tensor *dt_adam_moment(dt_tensor *buf, dt_tensor *x, double beta, bool squared) {
  API_CHECK_TENSOR(buf, "dt_adam_moment", "buf");
  API_CHECK_TENSOR(x, "dt_adam_moment", "x");
  dt_op_call c;
  core_call_init(&c, CORE_OP_ADAM_MOMENT, "dt_adam_moment");
  core_call_tensor(&c, buf);
  core_call_tensor(&c, x);
  core_call_double(&c, beta);
  core_call_bool(&c, squared);
  return dispatch_run1(&c);
}

dt_tensor *dt_adamw_apply(dt_tensor *p, dt_tensor *m, dt_tensor *v, double step,
                          double eps, double decay) {
  API_CHECK_TENSOR(p, "dt_adamw_apply", "p");
  API_CHECK_TENSOR(m, "dt_adamw_apply", "m");
  API_CHECK_TENSOR(v, "dt_adamw_apply", "v");
  dt_op_call c;
  core_call_init(&c, CORE_OP_ADAMW_APPLY, "dt_adamw_apply");
  core_call_tensor(&c, p);
  core_call_tensor(&c, m);
  core_call_tensor(&c, v);
  core_call_double(&c, step);
  core_call_double(&c, eps);
  core_call_double(&c, decay);
  return dispatch_run1(&c);
}

/* buf = beta buf + (1 - beta) (x or x²); the first step starts from 0 */
static dt_tensor *moment(dt_tensor *buf, dt_tensor *x, double beta, bool squared) {
  dt_tensor *r;
  if (buf) {
    r = dt_adam_moment(buf, x, beta, squared);
  } else { /* 0 * beta + (1 - beta) x: the fused op on x itself as buf */
    r = dt_adam_moment(x, x, 0, squared);
    dt_tensor *s = r ? dt_mul_scalar(r, 1 - beta) : NULL;
    dt_tensor_release(r);
    r = s;
  }
  dt_tensor_release(buf);
  return r;
}

/* one pass for each moment and one for the parameter:
 * p (1 - lr wd) - lr / bc1 * m / (sqrt(v) / sqrt(bc2) + eps)
 *   = decay p - (lr sqrt(bc2) / bc1) m / (sqrt(v) + eps sqrt(bc2)) */
static dt_tensor *adamw_update(dt_optimizer *o, int i, dt_tensor *p, dt_tensor *g) {
  const dt_adamw_options *a = &o->adam;
  double t = (double)(o->steps + 1);
  o->buf1[i] = moment(o->buf1[i], g, a->beta1, false);
  o->buf2[i] = moment(o->buf2[i], g, a->beta2, true);
  if (!o->buf1[i] || !o->buf2[i]) return NULL; /* a later step starts over */
  double bc1 = 1 - pow(a->beta1, t), sbc2 = sqrt(1 - pow(a->beta2, t));
  return dt_adamw_apply(p, o->buf1[i], o->buf2[i], a->lr * sbc2 / bc1, a->eps * sbc2,
                        1 - a->lr * a->weight_decay);
}

/* a state buffer laid out as g (a step that took the other path before,
 * or state placed by the caller); base: the parameter's placements, valid
 * on the parameter's shape and on its flat view (zero_plan), through which
 * a buffer moves between the two; NULL + error if it cannot move */
static bool align(dt_tensor **buf, const dt_tensor *g, const dt_placement *base) {
  if (!*buf || !g->spec) return true;
  dt_shape bs = core_tensor_shape(*buf), gs = core_tensor_shape(g);
  bool same_shape = bs.ndim == gs.ndim &&
                    !memcmp(bs.dims, gs.dims, sizeof(int64_t) * (size_t)bs.ndim);
  if (same_shape && same_placements(*buf, g)) return true;
  dt_tensor *r = dt_tensor_retain(*buf);
  if (!same_shape) {
    r = take(r, dt_redistribute(r, NULL, base));
    r = r ? take(r, view(r, gs, base, true)) : NULL;
  }
  if (r && !same_placements(r, g)) r = take(r, dt_redistribute(r, NULL, g->spec->placements));
  if (!r) return false;
  dt_tensor_release(*buf);
  *buf = r;
  return true;
}

static dt_tensor *update(dt_optimizer *o, int i, dt_tensor *p, dt_tensor *g,
                         const dt_placement *base) {
  if (g->spec && (!align(&o->buf1[i], g, base) ||
                  (o->buf2 && !align(&o->buf2[i], g, base))))
    return NULL;
  return o->kind == OPT_SGD ? sgd_update(o, i, p, g) : adamw_update(o, i, p, g);
}

/* p's new value by the sharded step (zero_layout gave z), or NULL with
 * *st set (p's gradient is left as it was: the slot gets a fresh leaf) */
static dt_tensor *sharded_step(dt_optimizer *o, int i, dt_tensor *p, dt_tensor *g,
                               const zero_plan *z, dt_status *st) {
  const dt_placement *base = p->spec->placements;
  dt_tensor *gv = z->flat ? view(g, z->shape, g->spec->placements, false)
                          : dt_tensor_retain(g);
  dt_tensor *pv = gv && z->flat ? view(p, z->shape, base, false)
                                : dt_tensor_retain(p);
  dt_tensor *gq = gv && pv ? dt_redistribute(gv, NULL, z->q) : NULL;
  dt_tensor *pq = gq ? dt_redistribute(pv, NULL, z->q) : NULL;
  dt_tensor *nq = pq ? update(o, i, pq, gq, base) : NULL;
  dt_tensor *np = nq ? dt_redistribute(nq, NULL, base) : NULL;
  /* the new value's only handle once nq and the views go: writable */
  if (np && z->flat) np = take(np, view(np, p->spec->shape, base, true));
  if (!np) *st = dt_last_status();
  dt_tensor_release(gv);
  dt_tensor_release(pv);
  dt_tensor_release(gq);
  dt_tensor_release(pq);
  dt_tensor_release(nq);
  return np;
}

dt_status dt_optimizer_step(dt_optimizer *o) {
  if (!o) return core_error_set(DT_ERR_INVALID_ARGUMENT, "dt_optimizer_step: opt is NULL");
  bool was = dt_set_grad_enabled(false);
  dt_status st = DT_OK;
  for (int i = 0; i < o->n && st == DT_OK; i++) {
    dt_tensor *p = o->params[i], *np;
    zero_plan z;
    dt_tensor *g = dispatch_grad(p);
    if (g && zero_layout(p, g, &z)) {
      np = sharded_step(o, i, p, g, &z, &st);
      dt_tensor_release(g);
      if (!np) break;
    } else {
      dt_tensor_release(g);
      if (!(g = reduced_grad(p, "dt_optimizer_step", &st))) continue;
      np = update(o, i, p, g, p->spec ? p->spec->placements : NULL);
      dt_tensor_release(g);
    }
    if (!np || (st = dispatch_set_requires_grad(np, true, "dt_optimizer_step")) != DT_OK) {
      if (!np) st = dt_last_status();
      dt_tensor_release(np);
      break;
    }
    o->params[i] = np;
    dt_tensor_release(p);
  }
  if (st == DT_OK) o->steps++;
  dt_set_grad_enabled(was);
  return st;
}

void dt_optimizer_zero_grad(dt_optimizer *o) {
  if (!o) {  /* void: nothing to do, but the misuse is reported */
    core_error_set(DT_ERR_INVALID_ARGUMENT, "dt_optimizer_zero_grad: opt is NULL");
    return;
  }
  for (int i = 0; i < o->n; i++) dispatch_clear_grad(o->params[i]);
}

int64_t dt_optimizer_steps(const dt_optimizer *o) {
  if (!o) {  /* a count: -1 with the error set (dtorch.h's conventions) */
    core_error_set(DT_ERR_INVALID_ARGUMENT, "dt_optimizer_steps: opt is NULL");
    return -1;
  }
  return o->steps;
}

/* the old name, kept exported: programs built against it call it */
void dt_optimizer_release(dt_optimizer *o) { dt_optimizer_free(o); }

void dt_optimizer_free(dt_optimizer *o) {
  if (!o) return;
  for (int i = 0; i < o->n; i++) {
    dt_tensor_release(o->buf1[i]);
    dt_tensor_release(o->buf2[i]);
  }
  free(o->buf1);
  free(o->buf2);
  free(o);
}

/* ---- clipping */
/* sum(g * g) of one gradient, on the host (a Partial reduced) */
static dt_status square_sum(dt_tensor *g, double *out) {
  dt_tensor *sq = dt_mul(g, g);
  dt_tensor *s = sq ? dt_sum(sq, NULL, 0, false) : NULL;
  dt_tensor *d = s ? dt_cast(s, DT_FLOAT64) : NULL;
  dt_status st = d ? dt_to_host(d, out, sizeof *out) : dt_last_status();
  dt_tensor_release(sq);
  dt_tensor_release(s);
  dt_tensor_release(d);
  return st;
}

dt_status dt_clip_grad_norm(dt_tensor *const *params, int n, double max_norm,
                            double *total_norm) {
  const char *fn = "dt_clip_grad_norm";
  if (!params || n < 0)
    return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: params must be an array "
                          "of n >= 0 tensors (n %d)", fn, n);
  if (!(max_norm > 0) || !isfinite(max_norm))
    return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: max_norm must be finite "
                          "and > 0, got %g", fn, max_norm);
  bool was = dt_set_grad_enabled(false);
  dt_status st = DT_OK;
  double total = 0;
  for (int i = 0; i < n && st == DT_OK; i++) {
    if (!params[i]) {
      st = core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: params[%d] is NULL", fn, i);
      break;
    }
    dt_tensor *g = reduced_grad(params[i], fn, &st);
    double s = 0;
    if (g && (st = square_sum(g, &s)) == DT_OK) total += s;
    dt_tensor_release(g);
  }
  total = sqrt(total);
  double coef = max_norm / (total + 1e-6);
  for (int i = 0; i < n && st == DT_OK && coef < 1; i++) {
    dt_tensor *g = dispatch_grad(params[i]);
    dt_tensor *c = g ? dt_mul_scalar(g, coef) : NULL;
    if (g && !c) st = dt_last_status();
    else if (c) st = dispatch_set_grad(params[i], c, fn);
    dt_tensor_release(g);
    dt_tensor_release(c);
  }
  dt_set_grad_enabled(was);
  if (st == DT_OK && total_norm) *total_norm = total;
  return st;
}
