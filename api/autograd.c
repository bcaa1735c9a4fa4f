/* Public entry points of autograd (dispatch/autograd.c does the work):
 * argument checks naming the function, then the layer. */
#include "api/api.h"
#include "dispatch/autograd.h"
#include "mesh/handle.h"

static int64_t numel(const dt_tensor *t) {
  int64_t n = 1;
  for (int d = 0; d < t->local.ndim; d++) n *= t->local.sizes[d];
  return n;
}

/* the seed must look like the root: shape, dtype, device or mesh */
static dt_status check_seed(const dt_tensor *root, const dt_tensor *g,
                            const char *fn) {
  char sr[CORE_SHAPE_STR_LEN], sg[CORE_SHAPE_STR_LEN];
  bool same = root->local.ndim == g->local.ndim;
  for (int d = 0; same && d < root->local.ndim; d++)
    same = root->local.sizes[d] == g->local.sizes[d];
  if (!same)
    return core_error_set(DT_ERR_SHAPE, "%s: options.grad has shape %s, the root "
                          "%s", fn, core_shape_str(g->local.sizes, g->local.ndim, sg, sizeof sg),
                          core_shape_str(root->local.sizes, root->local.ndim, sr, sizeof sr));
  if (g->dtype != root->dtype)
    return core_error_set(DT_ERR_DTYPE, "%s: options.grad is %s, the root %s", fn,
                          dt_dtype_name(g->dtype), dt_dtype_name(root->dtype));
  if (!root->spec != !g->spec || (root->spec && root->spec->mesh != g->spec->mesh))
    return core_error_set(DT_ERR_MESH, "%s: options.grad must live where the "
                          "root does (the same mesh, or both single-device)", fn);
  return DT_OK;
}

static dt_status backward(dt_tensor *root, const dt_backward_options *o,
                          const char *fn) {
  if (!root) {
    if (core_error_chained()) return core_last_status();
    return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: root is NULL", fn);
  }
  dt_tensor *seed = o ? o->grad : NULL;
  if (seed) {
    dt_status st = check_seed(root, seed, fn);
    if (st != DT_OK) return st;
    core_tensor_retain(seed);
  } else {
    if (numel(root) != 1) {
      char s[CORE_SHAPE_STR_LEN];
      return core_error_set(DT_ERR_SHAPE, "%s: the root has shape %s; an implicit "
                            "gradient needs one element (pass options.grad to "
                            "dt_backward_ex)", fn,
                            core_shape_str(root->local.sizes, root->local.ndim, s, sizeof s));
    }
    if (!root->requires_grad)
      return dispatch_backward(root, NULL, false, fn); /* its error */
    seed = dispatch_ones_like_grad(root);
    if (!seed) return core_last_status();
  }
  API_SCOPE_SITE; /* an SPMD backward's collectives: the caller's site */
  dt_status st = dispatch_backward(root, seed, o && o->retain_graph, fn);
  API_SCOPE_SITE_END();
  core_tensor_release(seed);
  return st;
}

dt_status dt_backward(dt_tensor *loss) { return backward(loss, NULL, "dt_backward"); }

dt_status dt_backward_ex(dt_tensor *root, const dt_backward_options *o) {
  if (o && CORE_RESERVED_ZERO("dt_backward_ex", "options", o) != DT_OK)
    return DT_ERR_INVALID_ARGUMENT;
  return backward(root, o, "dt_backward_ex");
}

dt_tensor *dt_grad(const dt_tensor *t) {
  if (!t) {
    core_error_set(DT_ERR_INVALID_ARGUMENT, "dt_grad: t is NULL");
    return NULL;
  }
  return dispatch_grad(t);
}

void dt_zero_grad(dt_tensor *t) {
  if (!t) {  /* void: nothing to do, but the misuse is reported */
    core_error_set(DT_ERR_INVALID_ARGUMENT, "dt_zero_grad: t is NULL");
    return;
  }
  dispatch_clear_grad(t);
}

dt_status dt_tensor_set_requires_grad(dt_tensor *t, bool on) {
  if (!t)
    return core_error_set(DT_ERR_INVALID_ARGUMENT,
                          "dt_tensor_set_requires_grad: t is NULL");
  return dispatch_set_requires_grad(t, on, "dt_tensor_set_requires_grad");
}

bool dt_grad_enabled(void) { return dispatch_grad_enabled(); }
bool dt_set_grad_enabled(bool on) { return dispatch_set_grad_enabled(on); }

const char *dt_tensor_grad_fn(const dt_tensor *t) {
  if (!t) {  /* NULL also means a leaf: the error tells them apart */
    core_error_set(DT_ERR_INVALID_ARGUMENT, "dt_tensor_grad_fn: t is NULL");
    return NULL;
  }
  return dispatch_grad_fn_name(t);
}

int64_t dt_autograd_live_nodes(void) { return dispatch_autograd_live_nodes(); }
