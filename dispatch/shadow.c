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
 * with shadowing, grad mode and interception hooks off.
 *
 * Inside an SPMD function every rank checks its own calls: the gathers
 * are redistributions to Replicate that the ranks' checks join together,
 * and each rank runs the reference on its own device. Every rank sees the
 * same gathered values and so reaches the same verdict; the mesh's first
 * rank prints it (DTORCH_SHADOW). There a program can also claim
 * placements (dt_dtensor_from_local): a Replicate claim is checked by
 * gathering the copies along that mesh dim, so a missing all-reduce is
 * reported where it was made. */
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
#include "mesh/handle.h"
#include "mesh/mesh.h"
#include "mesh/spmd_coll.h"
#include "runtime/exec.h"
#include "runtime/spmd_run.h"

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

/* this SPMD rank's calling thread: its rank, or -1 outside SPMD */
static int spmd_me(const dt_tensor *t) {
  return runtime_spmd_rank(t->spec ? t->spec->mesh->rt : t->local.storage->rt);
}

/* SPMD: DTensor t's full value as a tensor on this rank's own device (a
 * redistribution to Replicate that every rank's check joins) */
static dt_tensor *gathered_local(dt_tensor *t) {
  dt_placement r[DT_MAX_DIMS];
  for (int d = 0; d < t->spec->mesh->ndim; d++) r[d] = DT_REPLICATE;
  dt_tensor *g = mesh_redistribute(t, t->spec->mesh, r);
  if (!g) return NULL;
  dt_tensor *l = mesh_spmd_to_local(g);
  core_tensor_release(g);
  return l;
}

static dt_status to_doubles(dt_tensor *t, host_vals *h);

/* SPMD: as to_doubles, t gathered on this rank */
static dt_status spmd_doubles(dt_tensor *t, host_vals *h) {
  dt_tensor *l = gathered_local(t);
  if (!l) return core_last_status();
  dt_status st = to_doubles(l, h);
  core_tensor_release(l);
  return st;
}

/* t's full value as doubles (a DTensor gathered, Partials reduced) */
static dt_status to_doubles(dt_tensor *t, host_vals *h) {
  if (t->spec && spmd_me(t) >= 0) return spmd_doubles(t, h);
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

/* a single-device copy of DTensor t on rank 0 of its runtime (in SPMD:
 * on the calling rank's device) */
static dt_tensor *local_copy(dt_tensor *t) {
  if (spmd_me(t) >= 0) return gathered_local(t);
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
  size_t at = 0;
  buf[0] = 0;
  for (core_arg_it it = core_call_args(c); at < n && core_arg_next(&it);) {
    const dt_tensor *t = it.t;
    if (!t || !t->spec) continue;
    char pl[128];
    mesh_placements_str(t->spec->placements, t->spec->mesh->ndim, pl, sizeof pl);
    at += (size_t)snprintf(buf + at, n - at, "%s%s", at ? ", " : "", pl);
  }
}

/* outside SPMD the caller prints; inside, the mesh's first rank alone
 * (every rank's check reaches the same verdict) */
static bool prints(const dt_mesh *m) {
  int me = runtime_spmd_rank(m->rt);
  return me < 0 || me == m->ranks[0];
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
  if (tls.from_env && prints(c->out[out]->spec->mesh))
    fprintf(stderr, "dtorch shadow: %s\n", tls.report.message);
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
  int li = core_op_list_pos(c->op);
  if (li >= 0) {
    int m = c->args[li].list.n;
    rc->list = calloc((size_t)(m ? m : 1), sizeof *rc->list);
    if (!rc->list) return core_error_set(DT_ERR_OUT_OF_MEMORY, "dt_shadow: out of host memory");
    rc->r.args[li].list.v = rc->list;
  }
  /* a DTensor argument by its local copy; every list element copied */
  for (core_arg_it it = core_call_args(c); core_arg_next(&it);) {
    if (it.elem >= 0) {
      if (!(rc->list[it.elem] = local_copy(it.t))) return core_last_status();
      rc->nlist++;
    } else if (it.t && it.t->spec) {
      if (!(rc->own[it.pos] = local_copy(it.t))) return core_last_status();
      rc->r.args[it.pos].t = rc->own[it.pos];
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

/* ---- SPMD placement claims (dt_dtensor_from_local) */
/* a float64 [n] tensor of v on rank me's device */
static dt_tensor *doubles_tensor(dt_runtime *rt, int me, const host_vals *v) {
  dt_op_call c;
  core_call_init(&c, CORE_OP_FROM_HOST, "dt_shadow");
  core_call_ptr(&c, v->v);
  core_call_ints(&c, (dt_shape){.ndim = 1, .dims = {v->n}});
  core_call_dtype(&c, DT_FLOAT64);
  c.rt = rt;
  c.rank = me;
  return dispatch_run1(&c); /* inline on this rank: staged before it returns */
}

/* the runtime rank of member k of this rank's group along mesh dim d */
static int member_rank(const dt_mesh *m, int me, int d, int k) {
  int64_t stride = 1;
  for (int i = d + 1; i < m->ndim; i++) stride *= m->shape[i];
  int64_t idx = m->pos[me], coord = idx / stride % m->shape[d];
  return m->ranks[idx + ((int64_t)k - coord) * stride];
}

typedef struct claim_diff {
  diff d;
  int member; /* the member whose copy differs from member 0's */
} claim_diff;

/* the members' copies (all, n elements each) compared with member 0's */
static claim_diff compare_copies(const host_vals *all, int64_t n, int members) {
  claim_diff w = {{0, -1, 0, 0}, -1};
  for (int k = 1; k < members; k++) {
    host_vals a = {all->v + k * n, n}, b = {all->v, n};
    diff d = compare(&a, &b, tls.tol);
    if (d.max > w.d.max) w.d.max = d.max;
    if (d.at >= 0 && w.member < 0) {
      w.member = k;
      w.d.at = d.at, w.d.got = d.got, w.d.want = d.want;
    }
  }
  return w;
}

static void report_claim(const dt_tensor *t, int64_t n, int d, const claim_diff *w,
                         int me) {
  const dt_mesh *m = t->spec->mesh;
  char pl[128], label[256], dim[80] = "";
  mesh_placements_str(t->spec->placements, m->ndim, pl, sizeof pl);
  dispatch_label_path(label, sizeof label);
  if (m->names[d]) snprintf(dim, sizeof dim, " (%s)", m->names[d]);
  int r0 = member_rank(m, me, d, 0), rk = member_rank(m, me, d, w->member);
  tls.report.first_divergence = n;
  tls.report.max_diff = w->d.max;
  snprintf(tls.report.message, sizeof tls.report.message,
           "first divergence at op #%lld (dt_dtensor_from_local%s%s, claims %s): "
           "mesh dim %d%s is Replicate but the ranks' copies differ: max |diff| "
           "%.3g (element %lld: rank %d has %.9g, rank %d has %.9g); a Partial "
           "value needs its reduction (a redistribute to Replicate) first",
           (long long)n, label[0] ? ", " : "", label, pl, d, dim, w->d.max,
           (long long)w->d.at, rk, w->d.got, r0, w->d.want);
  if (tls.from_env && prints(m)) fprintf(stderr, "dtorch shadow: %s\n", tls.report.message);
}

/* mesh dim d's copies of this rank's local values, gathered and compared */
static dt_status check_dim(dt_tensor *t, const host_vals *mine, int64_t n, int d,
                           int me) {
  dt_mesh *m = t->spec->mesh;
  dt_tensor *src = doubles_tensor(m->rt, me, mine);
  if (!src) return core_last_status();
  dt_group g = {.mesh = m, .mesh_dim = d};
  dt_tensor *all = mesh_spmd_all_gather(src, 0, &g, "dt_shadow");
  core_tensor_release(src);
  if (!all) return core_last_status();
  host_vals av = {0};
  dt_status st = to_doubles(all, &av);
  core_tensor_release(all);
  if (st == DT_OK) {
    claim_diff w = compare_copies(&av, mine->n, (int)m->shape[d]);
    if (w.member >= 0) report_claim(t, n, d, &w, me);
  }
  free(av.v);
  return st;
}

static dt_status check_claims(dt_tensor *t, int64_t n, int me) {
  dt_tensor *l = mesh_spmd_to_local(t);
  if (!l) return core_last_status();
  host_vals mine = {0};
  dt_status st = to_doubles(l, &mine);
  core_tensor_release(l);
  const dt_mesh *m = t->spec->mesh;
  for (int d = 0; d < m->ndim && st == DT_OK && !tls.report.first_divergence; d++)
    if (t->spec->placements[d].kind == DT_PLACEMENT_REPLICATE && m->shape[d] > 1 &&
        mine.n > 0)
      st = check_dim(t, &mine, n, d, me);
  free(mine.v);
  return st;
}

void dispatch_shadow_check_claims(dt_tensor *t) {
  int64_t n = ++tls.ops;
  int me = spmd_me(t);
  if (tls.report.first_divergence || tls.report.failed || me < 0) return;
  tls.busy = true;
  bool paused = mesh_comm_count_pause(true);
  dt_status st = check_claims(t, n, me);
  if (st != DT_OK) {
    tls.report.failed = true;
    snprintf(tls.report.message, sizeof tls.report.message,
             "the shadow check of op #%lld (dt_dtensor_from_local) could not run: %s",
             (long long)n, core_last_error());
    if (tls.from_env) fprintf(stderr, "dtorch shadow: %s\n", tls.report.message);
  }
  mesh_comm_count_pause(paused);
  tls.busy = false;
  core_error_succeeded();
}
