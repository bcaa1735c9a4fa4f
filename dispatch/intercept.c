/* Interception hooks (TorchDispatchMode in C), the op printer and the op
 * counter (PyTorch's TorchDispatchMode; docs/dispatch.md).
 *
 * Hooks form a per-thread stack. A call enters the innermost active hook;
 * dispatch_op_call_run passes it to the next hook down, and below the last hook
 * to the layers under Intercept. While hook L runs, only hooks below L are
 * active for ops the hook itself calls (PyTorch pops the mode likewise). */
#include "dispatch/intercept.h"

#include <math.h>

#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/tensor.h"

#define MAX_HOOKS 16

typedef struct hook { dt_intercept_fn fn; void *user; } hook;
static _Thread_local hook hooks[MAX_HOOKS];
static _Thread_local int nhooks;
static _Thread_local int limit = MAX_HOOKS; /* hooks >= limit are inactive */

static int active_hooks(void) { return nhooks < limit ? nhooks : limit; }

core_keyset dispatch_intercept_keys(void) {
  return active_hooks() > 0 ? CORE_KEYSET(CORE_KEY_INTERCEPT) : 0;
}

static dt_status run_level(dt_op_call *c, int level) {
  if (level < 0) return dispatch_next(c);
  int saved = limit;
  limit = level;
  c->hook_depth = level;
  dt_status st = hooks[level].fn(c, hooks[level].user);
  limit = saved;
  if (st == DT_OK && c->nout == 0)
    st = core_error_set(DT_ERR_INVALID_ARGUMENT,
                      "%s: intercept hook %d returned DT_OK without running "
                      "op %s (call dt_op_call_run)",
                      c->api, level, core_op_name(c->op));
  if (st != DT_OK && core_last_status() != st) /* a hook's bare status */
    core_error_set(st, "%s: intercept hook %d failed op %s with %s", c->api,
                 level, core_op_name(c->op), core_status_name(st));
  if (st != DT_OK) {
    for (int i = 0; i < c->nout; i++) core_tensor_release(c->out[i]);
    c->nout = 0;
  }
  return st;
}

dt_status dispatch_intercept_layer(dt_op_call *c) {
  return run_level(c, active_hooks() - 1);
}

dt_status dispatch_op_call_run(dt_op_call *c) {
  if (!c)
    return core_error_set(DT_ERR_INVALID_ARGUMENT, "dt_op_call_run: call is NULL");
  if (c->nout)
    return core_error_set(DT_ERR_INVALID_ARGUMENT,
                        "dt_op_call_run: op %s has already run",
                        core_op_name(c->op));
  return run_level(c, c->hook_depth - 1);
}

dt_status dispatch_intercept_push(dt_intercept_fn fn, void *user) {
  if (!fn)
    return core_error_set(DT_ERR_INVALID_ARGUMENT, "dt_intercept_push: fn is NULL");
  if (limit < nhooks)
    return core_error_set(DT_ERR_INVALID_ARGUMENT,
                        "dt_intercept_push: cannot push from inside a hook");
  if (nhooks == MAX_HOOKS)
    return core_error_set(DT_ERR_INVALID_ARGUMENT,
                        "dt_intercept_push: %d hooks already pushed (max %d)",
                        nhooks, MAX_HOOKS);
  hooks[nhooks++] = (hook){fn, user};
  return DT_OK;
}

dt_status dispatch_intercept_pop(void) {
  if (nhooks == 0)
    return core_error_set(DT_ERR_INVALID_ARGUMENT,
                        "dt_intercept_pop: no hook is pushed on this thread");
  if (limit < nhooks)
    return core_error_set(DT_ERR_INVALID_ARGUMENT,
                        "dt_intercept_pop: cannot pop from inside a hook");
  nhooks--;
  return DT_OK;
}

/* ---- call accessors */
const char *dispatch_op_call_name(const dt_op_call *c) {
  return c ? core_op_name(c->op) : "?";
}
int dispatch_op_call_num_inputs(const dt_op_call *c) {
  return c ? core_call_num_tensor_inputs(c) : 0;
}
dt_tensor *dispatch_op_call_input(const dt_op_call *c, int i) {
  if (!c || i < 0) return NULL;
  return core_call_tensor_input(c, i);
}
int dispatch_op_call_num_outputs(const dt_op_call *c) { return c ? c->nout : 0; }
dt_tensor *dispatch_op_call_output(const dt_op_call *c, int i) {
  if (!c || i < 0 || i >= c->nout) return NULL;
  return c->out[i];
}

static size_t fmt_tensor(char *b, size_t len, const dt_tensor *t) {
  if (!t) return (size_t)snprintf(b, len, "None");
  char s[CORE_SHAPE_STR_LEN];
  return (size_t)snprintf(b, len, "%s%s", core_dtype_name(t->dtype),
                          core_shape_str(t->local.sizes, t->local.ndim, s,
                                       sizeof s));
}

#define ADV(expr)                                                           \
  do {                                                                      \
    size_t k_ = (expr);                                                     \
    n = n + k_ < len ? n + k_ : (len ? len - 1 : 0);                        \
  } while (0)

/* a scalar as Python writes it for its kind (a `k` after an `s`): True /
 * False for a bool, a float's integral value with ".0"; AUTO and INT as
 * %g (what the untyped forms always printed) */
static size_t fmt_scalar(char *buf, size_t len, double v, int64_t kind) {
  if (kind == DT_SCALAR_BOOL) return (size_t)snprintf(buf, len, "%s", v != 0 ? "True" : "False");
  char g[32];
  snprintf(g, sizeof g, "%g", v);
  bool bare = kind == DT_SCALAR_FLOAT && isfinite(v) && !strpbrk(g, ".e");
  return (size_t)snprintf(buf, len, "%s%s", g, bare ? ".0" : "");
}

int dispatch_op_call_format(const dt_op_call *c, char *buf, size_t len) {
  if (!c || !buf || !len) return -1;
  const char *s = core_op_schema(c->op);
  size_t n = 0;
  buf[0] = '\0';
  ADV((size_t)snprintf(buf, len, "%s(", core_op_name(c->op)));
  for (int i = 0; s[i]; i++) {
    if (s[i] == 'k') continue; /* written with its scalar */
    if (i) ADV((size_t)snprintf(buf + n, len - n, ", "));
    const core_value *v = &c->args[i];
    char sh[CORE_SHAPE_STR_LEN];
    switch (s[i]) {
    case 'T': case 't': ADV(fmt_tensor(buf + n, len - n, v->t)); break;
    case 'L':
      ADV((size_t)snprintf(buf + n, len - n, "["));
      for (int j = 0; j < v->list.n; j++) {
        if (j) ADV((size_t)snprintf(buf + n, len - n, ", "));
        ADV(fmt_tensor(buf + n, len - n, v->list.v[j]));
      }
      ADV((size_t)snprintf(buf + n, len - n, "]"));
      break;
    case 's':
      ADV(fmt_scalar(buf + n, len - n, v->d, s[i + 1] == 'k' ? v[1].i : DT_SCALAR_AUTO));
      break;
    case 'd': ADV((size_t)snprintf(buf + n, len - n, "%g", v->d)); break;
    case 'i': case 'n': ADV((size_t)snprintf(buf + n, len - n, "%lld", (long long)v->i)); break;
    case 'b': ADV((size_t)snprintf(buf + n, len - n, "%s", v->b ? "true" : "false")); break;
    case 'I': ADV((size_t)snprintf(buf + n, len - n, "%s", core_shape_str(v->ints.dims, v->ints.ndim, sh, sizeof sh))); break;
    case 'D': ADV((size_t)snprintf(buf + n, len - n, "%s", core_dtype_name(v->dtype))); break;
    default: ADV((size_t)snprintf(buf + n, len - n, "<ptr>")); break;
    }
  }
  ADV((size_t)snprintf(buf + n, len - n, ")"));
  for (int i = 0; i < c->nout; i++) {
    ADV((size_t)snprintf(buf + n, len - n, i ? ", " : " -> "));
    ADV(fmt_tensor(buf + n, len - n, c->out[i]));
  }
  return (int)n;
}

/* ---- op printer */
static dt_status printer_hook(dt_op_call *c, void *user) {
  dt_status st = dispatch_op_call_run(c);
  if (st != DT_OK) return st;
  char line[1024];
  dispatch_op_call_format(c, line, sizeof line);
  fprintf((FILE *)user, "%s\n", line);
  return DT_OK;
}

dt_status dispatch_op_printer_push(FILE *out) {
  if (!out)
    return core_error_set(DT_ERR_INVALID_ARGUMENT, "dt_op_printer_push: out is NULL");
  return dispatch_intercept_push(printer_hook, out);
}

/* ---- op counter */
struct dt_op_counter { int64_t counts[CORE_OP_COUNT]; };

static dt_status counter_hook(dt_op_call *c, void *user) {
  ((dt_op_counter *)user)->counts[c->op]++;
  return dispatch_op_call_run(c);
}

dt_op_counter *dispatch_op_counter_push(void) {
  dt_op_counter *c = calloc(1, sizeof *c);
  if (!c) {
    core_error_set(DT_ERR_OUT_OF_MEMORY, "dt_op_counter_push: out of memory");
    return NULL;
  }
  if (dispatch_intercept_push(counter_hook, c) != DT_OK) {
    free(c);
    return NULL;
  }
  return c;
}

dt_status dispatch_op_counter_pop(dt_op_counter *c) {
  if (!c)
    return core_error_set(DT_ERR_INVALID_ARGUMENT, "dt_op_counter_pop: counter is NULL");
  if (nhooks == 0 || hooks[nhooks - 1].user != c ||
      hooks[nhooks - 1].fn != counter_hook)
    return core_error_set(DT_ERR_INVALID_ARGUMENT,
                        "dt_op_counter_pop: this counter is not the innermost "
                        "hook on this thread");
  return dispatch_intercept_pop();
}

int64_t dispatch_op_counter_get(const dt_op_counter *c, const char *op) {
  if (!c || !op) return 0;
  for (int i = 0; i < CORE_OP_COUNT; i++)
    if (strcmp(core_op_name(i), op) == 0) return c->counts[i];
  return 0;
}

int64_t dispatch_op_counter_total(const dt_op_counter *c) {
  int64_t t = 0;
  for (int i = 0; c && i < CORE_OP_COUNT; i++) t += c->counts[i];
  return t;
}

int dispatch_op_counter_format(const dt_op_counter *c, char *buf, size_t len) {
  if (!c || !buf || !len) return -1;
  bool done[CORE_OP_COUNT] = {0};
  size_t n = 0;
  buf[0] = '\0';
  for (;;) { /* most frequent first, ties by op id */
    int best = -1;
    for (int i = 0; i < CORE_OP_COUNT; i++)
      if (!done[i] && c->counts[i] > 0 &&
          (best < 0 || c->counts[i] > c->counts[best]))
        best = i;
    if (best < 0) break;
    done[best] = true;
    ADV((size_t)snprintf(buf + n, len - n, "%4lld %s\n",
                         (long long)c->counts[best], core_op_name(best)));
  }
  return (int)n;
}

void dispatch_op_counter_free(dt_op_counter *c) {
  if (!c) return;
  /* freeing a counter that is still pushed would leave a dangling hook */
  for (int i = 0; i < nhooks; i++)
    if (hooks[i].user == c && hooks[i].fn == counter_hook) {
      core_error_set(DT_ERR_INVALID_ARGUMENT,
                   "dt_op_counter_free: counter is still pushed; pop it first");
      return;
    }
  free(c);
}
