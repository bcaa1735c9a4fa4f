/* The dispatcher (seed 004): op ids, boxed calls, dispatch keys, redispatch.
 *
 * An op call is boxed into a dt_op_call (args by value, outputs filled in).
 * The key set of a call is the union of its tensor inputs' keys plus this
 * thread's include set, minus its exclude set; the highest key's handler
 * runs and may redispatch to the keys below it. Priority (high → low):
 *   INTERCEPT > AUTOGRAD > DTENSOR > CUDA > CPU
 * Key bit i has priority i, so the highest key is 31 - clz(keys).
 *
 * Every op is declared once in runtime/op_table.h; the enum, names, schemas
 * and per-op function tables are generated from that list. */
#ifndef DT_RUNTIME_DISPATCH_H
#define DT_RUNTIME_DISPATCH_H

#include <stdbool.h>
#include <stdint.h>

#include "dtorch/dtorch.h"

typedef enum dt_key {
  DT_KEY_CPU = 0,
  DT_KEY_CUDA,        /* reserved for the CUDA issue */
  DT_KEY_DTENSOR,     /* reserved for the sharding issue */
  DT_KEY_AUTOGRAD,    /* reserved for the autograd issue: falls through */
  DT_KEY_INTERCEPT,   /* user hooks (dt_intercept_push) */
  DT_KEY_COUNT
} dt_key;
typedef uint32_t dt_keyset;
#define DT_KEYSET(k) ((dt_keyset)1u << (k))
#define DT_BACKEND_KEYS (DT_KEYSET(DT_KEY_CPU) | DT_KEYSET(DT_KEY_CUDA))

/* ---- the op list */
typedef enum dt_op_id {
#define DT_OP(id, name, schema, infer, cpu) DT_OP_##id,
#include "runtime/op_table.h"
#undef DT_OP
  DT_OP_COUNT
} dt_op_id;

/* Schema characters, one per argument:
 *   T tensor      t optional tensor (may be NULL)     L tensor list
 *   s scalar double, not static (does not enter the sharding cache key)
 *   d static double    i static int    n non-static int (seeds, offsets)
 *   b static bool      I static int list (dt_shape)   D static dtype
 *   P host pointer (from_host) */
#define DT_CALL_MAX_ARGS 8
#define DT_CALL_MAX_OUTS 4

typedef union dt_value {
  dt_tensor *t;
  struct { dt_tensor *const *v; int n; } list;
  double d;
  int64_t i;
  bool b;
  dt_shape ints;
  dt_dtype dtype;
  const void *p;
} dt_value;

/* Output metadata made by an op's infer function. For a fresh output only
 * dtype, ndim and sizes are set (the layout is contiguous); a view sets
 * alias to the index of the argument it aliases and gives strides and
 * offset relative to that argument's storage. */
typedef struct dt_meta {
  dt_dtype dtype;
  int ndim;
  int64_t sizes[DT_MAX_DIMS];
  int64_t strides[DT_MAX_DIMS];
  int64_t offset;
  int alias;                     /* -1: fresh storage */
} dt_meta;

struct dt_op_call {
  dt_op_id op;
  int nargs;
  dt_value args[DT_CALL_MAX_ARGS];
  int nout;                       /* outputs made so far */
  dt_tensor *out[DT_CALL_MAX_OUTS];
  int nmeta;                      /* outputs infer describes (default 1) */
  dt_meta meta[DT_CALL_MAX_OUTS];
  dt_keyset keys;         /* keys still to visit (redispatch) */
  int hook_depth;         /* next intercept hook to run */
  const char *api;        /* public function name, for messages */
  bool requires_grad;     /* factories: the option (autograd issue) */
  struct dt_runtime *rt;  /* factories: where the output lives */
  int rank;
};

/* infer: validate arguments (errors name c->api) and fill c->meta / c->nout.
 * cpu: compute into c->out[] (already allocated) from c->args. */
typedef dt_status (*dt_infer_fn)(dt_op_call *c);
typedef dt_status (*dt_kernel_fn)(dt_op_call *c);

typedef struct dt_op_def {
  const char *name;
  const char *schema;
  dt_infer_fn infer;
  dt_kernel_fn cpu;
} dt_op_def;

extern const dt_op_def dt_op_defs[DT_OP_COUNT];

/* ---- calling */
/* Starts a call: op, the public api name for messages. */
static inline void dt_call_init(dt_op_call *c, dt_op_id op, const char *api) {
  c->op = op;
  c->nargs = 0;
  c->nout = 0;
  c->api = api;
  c->hook_depth = -1;
  c->requires_grad = false;
  c->rt = NULL;
  c->rank = 0;
}
static inline void dt_call_tensor(dt_op_call *c, dt_tensor *t) {
  c->args[c->nargs++].t = t;
}
static inline void dt_call_double(dt_op_call *c, double d) {
  c->args[c->nargs++].d = d;
}
static inline void dt_call_int(dt_op_call *c, int64_t i) {
  c->args[c->nargs++].i = i;
}
static inline void dt_call_bool(dt_op_call *c, bool b) {
  c->args[c->nargs++].b = b;
}
static inline void dt_call_ints(dt_op_call *c, dt_shape s) {
  c->args[c->nargs++].ints = s;
}
static inline void dt_call_dtype(dt_op_call *c, dt_dtype d) {
  c->args[c->nargs++].dtype = d;
}
static inline void dt_call_list(dt_op_call *c, dt_tensor *const *v, int n) {
  c->args[c->nargs].list.v = v;
  c->args[c->nargs++].list.n = n;
}
static inline void dt_call_ptr(dt_op_call *c, const void *p) {
  c->args[c->nargs++].p = p;
}

/* Dispatches a boxed call from the top; on success c->out[0..nout) hold new
 * references. On failure nothing is left allocated. */
dt_status dt_dispatch(dt_op_call *c);
/* Runs the call, returns out[0] (a new reference) or NULL. */
dt_tensor *dt_dispatch1(dt_op_call *c);
/* Continues a call below the key currently running (layers call this). */
dt_status dt_redispatch(dt_op_call *c);

/* The backend layer run by the CPU key: infer and make the outputs on the
 * caller's thread, then publish one record to the inputs' rank, which
 * allocates and runs the kernel. Exposed for later layers (DTensor). */
dt_status dt_backend_run(dt_op_call *c);

/* Thread-local include/exclude key sets (seed 004's TLS key sets). */
dt_keyset dt_tls_include(void);
dt_keyset dt_tls_exclude(void);
void dt_tls_set_include(dt_keyset ks);
void dt_tls_set_exclude(dt_keyset ks);

/* number of tensor inputs per schema / the i-th tensor input */
int dt_call_num_tensor_inputs(const dt_op_call *c);
dt_tensor *dt_call_tensor_input(const dt_op_call *c, int i);

#endif
