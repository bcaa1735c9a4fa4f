/* Shadow comparison (shadow.h; docs/debugging.md): every DTensor op this
 * thread runs while shadowing is also run single-device on the gathered
 * inputs, and the outputs are compared. The first op whose result differs
 * beyond the tolerance is reported with its number, name, the caller's
 * labels, the placements in and out and the largest difference.
 *
 * It is a debugging mode and pays for it: each op waits for its result,
 * every input and output crosses to the host, and the reference runs on
 * rank 0 of the same runtime. Its gathers are not counted by
 * dt_comm_count (they are not the program's). The reference calls run
 * with shadowing, grad mode and interception hooks off. */
#include "dispatch/shadow.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/tensor.h"
#include "dispatch/autograd.h"
#include "dispatch/dispatch.h"
#include "kernels/cpu/cpu.h"
#include "mesh/dtensor.h"
#include "mesh/mesh.h"
#include "runtime/exec.h"

#define LABELS 16
#define DEFAULT_TOLERANCE 1e-4

typedef struct shadow_state {
  bool on, busy, env_checked, from_env;
  double tol;
  int64_t ops;
  dt_shadow_report report;
  int nlabels;
  const char *labels[LABELS];
} shadow_state;

static _Thread_local shadow_state tls;

/* DTORCH_SHADOW=1 (or a tolerance) turns shadowing on for every thread */
static void check_env(void) {
  tls.env_checked = true;
  const char *e = getenv("DTORCH_SHADOW");
  if (!e || !*e || !strcmp(e, "0")) return;
  double t = atof(e);
  tls.on = tls.from_env = true;
  tls.tol = t > 0 && t != 1 ? t : DEFAULT_TOLERANCE;
}

bool dispatch_shadow_active(void) {
  if (!tls.env_checked) check_env();
  return tls.on && !tls.busy;
}

dt_status dispatch_shadow_begin(double tolerance, const char *api) {
  if (!(tolerance >= 0) || !isfinite(tolerance))
    return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: tolerance must be finite "
                          "and >= 0, got %g", api, tolerance);
  tls.env_checked = true;
  tls.on = true;
  tls.from_env = false;
  tls.tol = tolerance > 0 ? tolerance : DEFAULT_TOLERANCE;
  tls.ops = 0;
  memset(&tls.report, 0, sizeof tls.report);
  return DT_OK;
}

dt_status dispatch_shadow_end(dt_shadow_report *out, const char *api) {
  if (!tls.on)
    return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: shadowing is not on in "
                          "this thread (call dt_shadow_begin first)", api);
  tls.on = false;
  tls.report.ops_checked = tls.ops;
  if (out) *out = tls.report;
  return DT_OK;
}

void dispatch_label_push(const char *label) {
  if (tls.nlabels < LABELS) tls.labels[tls.nlabels] = label;
  tls.nlabels++;
}

void dispatch_label_pop(void) {
  if (tls.nlabels > 0) tls.nlabels--;
}

size_t dispatch_label_path(char *buf, size_t n) {
  size_t at = 0;
  if (n) buf[0] = 0;
  for (int i = 0; i < tls.nlabels && i < LABELS && at < n; i++)
    at += (size_t)snprintf(buf + at, n - at, "%s%s", i ? "." : "",
                           tls.labels[i] ? tls.labels[i] : "?");
  return at;
}

/* ---- host copies */
typedef struct host_vals {
  double *v;
  int64_t n;
} host_vals;

static int64_t numel(const dt_tensor *t) {
  return core_numel_of(t->local.sizes, t->local.ndim);
}

/* t's full value as doubles (a DTensor gathered, Partials reduced) */
static dt_status to_doubles(dt_tensor *t, host_vals *h) {
  h->n = numel(t);
  size_t es = core_dtype_size(t->dtype), bytes = (size_t)h->n * es;
  char *raw = malloc(bytes ? bytes : 1);
  h->v = malloc(sizeof(double) * (size_t)(h->n ? h->n : 1));
  if (!raw || !h->v) {
    free(raw);
    return core_error_set(DT_ERR_OUT_OF_MEMORY, "dt_shadow: out of host memory");
  }
  dt_status st = t->spec ? mesh_dtensor_to_host(t, raw, bytes, true, NULL, "dt_shadow")
                         : runtime_to_host(t, raw, bytes, true, NULL, "dt_shadow");
  if (st == DT_OK) cpu_load(h->v, DT_FLOAT64, raw, t->dtype, (int64_t)es, h->n);
  free(raw);
  return st;
}

/* a single-device copy of DTensor t on rank 0 of its runtime */
static dt_tensor *local_copy(dt_tensor *t) {
  size_t bytes = (size_t)numel(t) * core_dtype_size(t->dtype);
  void *raw = malloc(bytes ? bytes : 1);
  if (!raw) return NULL;
  dt_tensor *r = NULL;
  if (mesh_dtensor_to_host(t, raw, bytes, true, NULL, "dt_shadow") == DT_OK) {
    dt_op_call c;
    core_call_init(&c, CORE_OP_FROM_HOST, "dt_shadow");
    core_call_ptr(&c, raw);
    core_call_ints(&c, t->spec->shape);
    core_call_dtype(&c, t->dtype);
    c.rt = t->spec->mesh->rt;
    c.rank = 0;
    r = dispatch_run1(&c); /* the data is staged before it returns */
  }
  free(raw);
  return r;
}

/* ---- the check */
static bool agrees(double a, double b, double tol) {
  if (isnan(a) || isnan(b)) return isnan(a) && isnan(b);
  if (isinf(a) || isinf(b)) return a == b;
  return fabs(a - b) <= tol * (1 + fabs(b));
}

typedef struct diff {
  double max;       /* largest |a - b| */
  int64_t at;       /* the first element out of tolerance, or -1 */
  double got, want;
} diff;

static diff compare(const host_vals *a, const host_vals *b, double tol) {
  diff d = {0, -1, 0, 0};
  for (int64_t i = 0; i < a->n; i++) {
    double e = fabs(a->v[i] - b->v[i]);
    if (e > d.max || isnan(e)) d.max = isnan(e) ? INFINITY : e;
    if (d.at < 0 && !agrees(a->v[i], b->v[i], tol)) {
      d.at = i;
      d.got = a->v[i];
      d.want = b->v[i];
    }
  }
  return d;
}

/* "[S(1)], [S(0)]": the placements of c's DTensor arguments */
static void inputs_str(const dt_op_call *c, char *buf, size_t n) {
  const char *s = core_op_schema(c->op);
  size_t at = 0;
  buf[0] = 0;
  for (int i = 0; s[i] && at < n; i++) {
    dt_tensor *const *v = (s[i] == 'L') ? c->args[i].list.v : &c->args[i].t;
    int m = s[i] == 'L' ? c->args[i].list.n : (s[i] == 'T' || s[i] == 't') ? 1 : 0;
    for (int k = 0; k < m && at < n; k++) {
      if (!v[k] || !v[k]->spec) continue;
      char pl[128];
      mesh_placements_str(v[k]->spec->placements, v[k]->spec->mesh->ndim, pl, sizeof pl);
      at += (size_t)snprintf(buf + at, n - at, "%s%s", at ? ", " : "", pl);
    }
  }
}

static void report_divergence(const dt_op_call *c, int64_t n, const diff *d, int out) {
  char in[256], o[128], label[256];
  inputs_str(c, in, sizeof in);
  mesh_placements_str(c->out[out]->spec->placements, c->out[out]->spec->mesh->ndim, o, sizeof o);
  dispatch_label_path(label, sizeof label);
  tls.report.first_divergence = n;
  tls.report.max_diff = d->max;
  snprintf(tls.report.message, sizeof tls.report.message,
           "first divergence at op #%lld (%s%s%s, inputs %s \u2192 %s): max |diff| "
           "%.3g (element %lld: distributed %.9g, single device %.9g)",
           (long long)n, c->api, label[0] ? ", " : "", label, in, o, d->max,
           (long long)d->at, d->got, d->want);
  if (tls.from_env) fprintf(stderr, "dtorch shadow: %s\n", tls.report.message);
}

/* the reference call: c with every DTensor argument copied to one device */
typedef struct ref_call {
  dt_op_call r;
  dt_tensor *own[CORE_CALL_MAX_ARGS];
  dt_tensor **list;
  int nlist;
} ref_call;

static dt_status ref_make(ref_call *rc, const dt_op_call *c) {
  memset(rc, 0, sizeof *rc);
  rc->r = *c;
  rc->r.nout = 0;
  memset(rc->r.out, 0, sizeof rc->r.out);
  rc->r.shard = NULL;
  rc->r.kernel = NULL;
  const char *s = core_op_schema(c->op);
  for (int i = 0; s[i]; i++) {
    if ((s[i] == 'T' || s[i] == 't') && c->args[i].t && c->args[i].t->spec) {
      if (!(rc->own[i] = local_copy(c->args[i].t))) return core_last_status();
      rc->r.args[i].t = rc->own[i];
    } else if (s[i] == 'L') {
      int m = c->args[i].list.n;
      rc->list = calloc((size_t)(m ? m : 1), sizeof *rc->list);
      if (!rc->list) return core_error_set(DT_ERR_OUT_OF_MEMORY, "dt_shadow: out of host memory");
      for (int k = 0; k < m; k++, rc->nlist++)
        if (!(rc->list[k] = local_copy(c->args[i].list.v[k]))) return core_last_status();
      rc->r.args[i].list.v = rc->list;
    }
  }
  return dispatch_run(&rc->r);
}

static void ref_free(ref_call *rc) {
  for (int i = 0; i < CORE_CALL_MAX_ARGS; i++) core_tensor_release(rc->own[i]);
  for (int k = 0; k < rc->nlist; k++) core_tensor_release(rc->list[k]);
  free(rc->list);
  for (int o = 0; o < rc->r.nout; o++) core_tensor_release(rc->r.out[o]);
}

static dt_status check_outputs(const dt_op_call *c, ref_call *rc, int64_t n) {
  dt_status st = DT_OK;
  for (int o = 0; o < c->nout && o < rc->r.nout && st == DT_OK; o++) {
    host_vals a = {0}, b = {0};
    st = to_doubles(c->out[o], &a);
    if (st == DT_OK) st = to_doubles(rc->r.out[o], &b);
    if (st == DT_OK && a.n == b.n) {
      diff d = compare(&a, &b, tls.tol);
      if (d.at >= 0) {
        report_divergence(c, n, &d, o);
        o = c->nout;
      }
    }
    free(a.v);
    free(b.v);
  }
  return st;
}

void dispatch_shadow_check(const dt_op_call *c) {
  int64_t n = ++tls.ops;
  if (tls.report.first_divergence || tls.report.failed) return;
  tls.busy = true;
  bool grad = dispatch_set_grad_enabled(false);
  bool paused = mesh_comm_count_pause(true);
  core_keyset ex = dispatch_tls_exclude();
  dispatch_tls_set_exclude(ex | CORE_KEYSET(CORE_KEY_INTERCEPT));
  ref_call rc;
  dt_status st = ref_make(&rc, c);
  if (st == DT_OK) st = check_outputs(c, &rc, n);
  if (st != DT_OK) { /* say so once and stop checking; the op itself ran */
    tls.report.failed = true;
    snprintf(tls.report.message, sizeof tls.report.message,
             "the shadow check of op #%lld (%s) could not run: %s", (long long)n,
             c->api, core_last_error());
    if (tls.from_env) fprintf(stderr, "dtorch shadow: %s\n", tls.report.message);
  }
  ref_free(&rc);
  dispatch_tls_set_exclude(ex);
  mesh_comm_count_pause(paused);
  dispatch_set_grad_enabled(grad);
  tls.busy = false;
  core_error_succeeded();
}
