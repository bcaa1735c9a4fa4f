/* Fused optimiser kernels: one pass where the composed update would take a
 * dozen (AdamW over a parameter: read p, m, v once, write once). Strided
 * views through cpu_iter; computed in the compute type (f32 for float32,
 * float16 and bfloat16, f64 for float64). */
#include <math.h>
#include <string.h>

#include "kernels/cpu/cpu.h"

typedef struct optim_ctx {
  dt_dtype ct, dt[4];
  double a, b, c;     /* moment: beta, squared; apply: step, eps, decay */
} optim_ctx;

#define MOMENT_LOOP(T)                                                      \
  do {                                                                      \
    T *o = (T *)bo;                                                         \
    const T *x = (const T *)bx;                                             \
    T beta = (T)c->a, rest = (T)(1 - c->a);                                 \
    if (c->b != 0)                                                          \
      for (int64_t i = 0; i < k; i++) o[i] = beta * o[i] + rest * (x[i] * x[i]); \
    else                                                                    \
      for (int64_t i = 0; i < k; i++) o[i] = beta * o[i] + rest * x[i];     \
  } while (0)

/* every operand contiguous and of the compute type: no conversion */
static bool direct(const optim_ctx *c, const int64_t *st, int nops) {
  int64_t es = (int64_t)cpu_dtype_size(c->ct);
  for (int i = 0; i < nops; i++)
    if (c->dt[i] != c->ct || st[i] != es) return false;
  return true;
}

static void moment_inner(char **p, const int64_t *st, int64_t n, void *vctx) {
  const optim_ctx *c = vctx;
  if (direct(c, st, 3) && c->ct == DT_FLOAT32) {
    float *restrict o = (float *)p[0];
    const float *restrict b = (const float *)p[1], *restrict x = (const float *)p[2];
    float beta = (float)c->a, rest = (float)(1 - c->a);
    if (c->b != 0)
      for (int64_t i = 0; i < n; i++) o[i] = beta * b[i] + rest * (x[i] * x[i]);
    else
      for (int64_t i = 0; i < n; i++) o[i] = beta * b[i] + rest * x[i];
    return;
  }
  _Alignas(64) char bo[CPU_BLOCK * 8], bx[CPU_BLOCK * 8];
  for (int64_t s = 0; s < n; s += CPU_BLOCK) {
    int64_t k = n - s < CPU_BLOCK ? n - s : CPU_BLOCK;
    cpu_load(bo, c->ct, p[1] + s * st[1], c->dt[1], st[1], k);
    cpu_load(bx, c->ct, p[2] + s * st[2], c->dt[2], st[2], k);
    if (c->ct == DT_FLOAT64) MOMENT_LOOP(double);
    else MOMENT_LOOP(float);
    cpu_store(p[0] + s * st[0], c->dt[0], st[0], bo, c->ct, k);
  }
}

void cpu_adam_moment(dt_dtype ct, const cpu_view *out, const cpu_view *buf,
                     const cpu_view *x, double beta, bool squared) {
  optim_ctx c = {ct, {out->dtype, buf->dtype, x->dtype, 0}, beta, squared, 0};
  cpu_view ops[3] = {*out, *buf, *x};
  cpu_iter it;
  cpu_iter_init(&it, ops, 3);
  cpu_iter_run_parallel(&it, moment_inner, &c);
}

#define APPLY_LOOP(T, SQRT)                                                 \
  do {                                                                      \
    T *o = (T *)bp;                                                         \
    const T *m = (const T *)bm, *v = (const T *)bv;                         \
    T step = (T)c->a, eps = (T)c->b, decay = (T)c->c;                       \
    for (int64_t i = 0; i < k; i++)                                         \
      o[i] = decay * o[i] - step * m[i] / (SQRT(v[i]) + eps);               \
  } while (0)

/* built with -fno-math-errno (CMakeLists.txt): sqrt of v >= 0 vectorises */
static void apply_inner(char **p, const int64_t *st, int64_t n, void *vctx) {
  const optim_ctx *c = vctx;
  if (direct(c, st, 4) && c->ct == DT_FLOAT32) {
    /* restrict: an output may alias none of its inputs (outputs are fresh) */
    float *restrict o = (float *)p[0];
    const float *restrict q = (const float *)p[1], *restrict m = (const float *)p[2],
                *restrict v = (const float *)p[3];
    float step = (float)c->a, eps = (float)c->b, decay = (float)c->c;
    for (int64_t i = 0; i < n; i++) o[i] = decay * q[i] - step * m[i] / (sqrtf(v[i]) + eps);
    return;
  }
  _Alignas(64) char bp[CPU_BLOCK * 8], bm[CPU_BLOCK * 8], bv[CPU_BLOCK * 8];
  for (int64_t s = 0; s < n; s += CPU_BLOCK) {
    int64_t k = n - s < CPU_BLOCK ? n - s : CPU_BLOCK;
    cpu_load(bp, c->ct, p[1] + s * st[1], c->dt[1], st[1], k);
    cpu_load(bm, c->ct, p[2] + s * st[2], c->dt[2], st[2], k);
    cpu_load(bv, c->ct, p[3] + s * st[3], c->dt[3], st[3], k);
    if (c->ct == DT_FLOAT64) APPLY_LOOP(double, sqrt);
    else APPLY_LOOP(float, sqrtf);
    cpu_store(p[0] + s * st[0], c->dt[0], st[0], bp, c->ct, k);
  }
}

void cpu_adamw_apply(dt_dtype ct, const cpu_view *out, const cpu_view *p,
                     const cpu_view *m, const cpu_view *v, double step,
                     double eps, double decay) {
  optim_ctx c = {ct, {out->dtype, p->dtype, m->dtype, v->dtype}, step, eps, decay};
  cpu_view ops[4] = {*out, *p, *m, *v};
  cpu_iter it;
  cpu_iter_init(&it, ops, 4);
  cpu_iter_run_parallel(&it, apply_inner, &c);
}
