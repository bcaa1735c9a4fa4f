/* Boxed op calls, the ground vocabulary of every layer above: op ids (from
 * core/op_list.h), dispatch keys, argument values, output metadata and the
 * call record itself. The dispatcher (dispatch/) routes a call through the
 * layers; the engine (runtime/) runs its kernel on a rank; ops/ validates it
 * and computes it. Nothing here calls up: the kernel a rank runs is the
 * pointer the backend layer stored in the call.
 *
 * Dispatch keys, high priority to low:
 *   INTERCEPT > AUTOGRAD > DTENSOR > CUDA > CPU
 * Key bit i has priority i, so the highest key is 31 - clz(keys). */
#ifndef CORE_CALL_H
#define CORE_CALL_H

#include <stdbool.h>
#include <stdint.h>

#include "dtorch/dtorch.h"

typedef enum core_key {
  CORE_KEY_CPU = 0,
  CORE_KEY_CUDA,        /* reserved: the CUDA backend */
  CORE_KEY_DTENSOR,     /* DTensors: sharding propagation */
  CORE_KEY_AUTOGRAD,    /* reserved: autograd (falls through) */
  CORE_KEY_INTERCEPT,   /* user hooks (dispatch_intercept_push) */
  CORE_KEY_COUNT
} core_key;
typedef uint32_t core_keyset;
#define CORE_KEYSET(k) ((core_keyset)1u << (k))
#define CORE_BACKEND_KEYS (CORE_KEYSET(CORE_KEY_CPU) | CORE_KEYSET(CORE_KEY_CUDA))

/* ---- the op list */
typedef enum core_op_id {
#define CORE_OP(id, name, schema, infer, cpu, rule, grad, cuda, api, flags) CORE_OP_##id,
#include "core/op_list.h"
#undef CORE_OP
  CORE_OP_COUNT
} core_op_id;

/* Schema characters, one per argument:
 *   T tensor      t optional tensor (may be NULL)     L tensor list
 *   s scalar double     d double (eps, p)      n int (seeds, offsets)
 *   k the kind of the scalar before it (a dt_scalar_kind, in .i)
 *   i int (dims)        b bool (keepdim, train)
 *   I int list (dt_shape: dims or a shape)     D dtype
 *   P host pointer (from_host)
 * The sharding cache (docs/sharding.md): a hit returns exactly what a
 * miss would. The values of `i`, `b`, `I` and `D` enter the cache key;
 * tensors enter as their specs. An op with an `s`, `d`, `n` or `P`
 * argument runs its infer on every call, hit or miss, and the infer's
 * output metadata (dtype, ndim, sizes) enters the key instead of the
 * values (plus a scalar's class where a rule reads it): add_scalar(x, 1)
 * and add_scalar(x, 2) share one entry, add_scalar(int32 x, 1.5) does
 * not, and floor_divide_scalar(int32 x, 0) fails on a hit as on a miss.
 * A `k` reaches the key the same way: through the dtype the infer
 * decides from it (int32 + INT 1 → int32, + FLOAT 1 → float32). */
#define CORE_CALL_MAX_ARGS 8
#define CORE_CALL_MAX_OUTS 4

typedef union core_value {
  dt_tensor *t;
  struct { dt_tensor *const *v; int n; } list;
  double d;
  int64_t i;
  bool b;
  dt_shape ints;
  dt_dtype dtype;
  const void *p;
} core_value;

/* Output metadata made by an op's infer function. For a fresh output only
 * dtype, ndim and sizes are set (the layout is contiguous); a view sets
 * alias to the index of the argument it aliases and gives strides and
 * offset relative to that argument's storage. */
typedef struct core_meta {
  dt_dtype dtype;
  int ndim;
  int64_t sizes[DT_MAX_DIMS];
  int64_t strides[DT_MAX_DIMS];
  int64_t offset;
  int alias;                     /* -1: fresh storage */
} core_meta;

/* What a rank's kernel knows of the global tensors while it runs its part
 * of a DTensor op (dispatch/rank_op.c); NULL for a single-device op.
 * Per argument position (tensor arguments only): the global shape, the
 * global offset of the local view the kernel gets, and the rank's whole
 * local tensor of that argument before it was narrowed to the view (a
 * Replicate input holds the whole tensor). Kernels that need global
 * positions read it: dropout (the random stream follows the global
 * index), mean and cross_entropy (global counts), embedding (a row shard
 * looks up only its rows). */
typedef struct core_shard_ctx {
  dt_shape global[CORE_CALL_MAX_ARGS];
  int64_t off[CORE_CALL_MAX_ARGS][DT_MAX_DIMS];
  const struct dt_tensor *whole[CORE_CALL_MAX_ARGS];
} core_shard_ctx;

struct dt_op_call {
  core_op_id op;
  int nargs;
  core_value args[CORE_CALL_MAX_ARGS];
  int nout;                       /* outputs made so far */
  dt_tensor *out[CORE_CALL_MAX_OUTS];
  int nmeta;                      /* outputs infer describes (default 1) */
  core_meta meta[CORE_CALL_MAX_OUTS];
  core_keyset keys;         /* keys still to visit (redispatch) */
  int hook_depth;         /* next intercept hook to run */
  const char *api;        /* public function name, for messages */
  bool requires_grad;     /* factories: the option */
  struct dt_runtime *rt;  /* factories: where the output lives */
  int rank;
  dt_status (*kernel)(dt_op_call *c); /* what the rank runs: set by the
                                         backend layer before publishing */
  const core_shard_ctx *shard;  /* a rank's part of a DTensor op, else NULL */
};

/* infer: validate arguments (errors name c->api) and fill c->meta / c->nout.
 * cpu: compute into c->out[] (already allocated) from c->args. */
typedef dt_status (*core_infer_fn)(dt_op_call *c);
typedef dt_status (*core_kernel_fn)(dt_op_call *c);


/* The op list as data: name, schema and public function per op id
 * (core/call.c). */
const char *core_op_name(core_op_id op);
const char *core_op_schema(core_op_id op);
const char *core_op_api(core_op_id op);
/* The op list's flags column:
 *   CORE_OP_CHECKS_DATA  the kernels validate data (indices, targets)
 *       while they run; the call waits for the result, so a bad index
 *       fails the call itself, as on PyTorch's CPU
 *   CORE_OP_CONTRACTS    a dry run counts 2 * (output elements) * k FLOPs,
 *       k the first input's last dim (matmul, linear: runtime/dry.c) */
#define CORE_OP_CHECKS_DATA 1u
#define CORE_OP_CONTRACTS 2u
/* the tables behind the walks and flags, indexed by a valid op id (a
 * call's): inline reads on the dispatch path (core/call.c) */
extern const char *const core_op_schemas[CORE_OP_COUNT];
extern const unsigned char core_op_flag_table[CORE_OP_COUNT];
static inline unsigned core_op_flags(core_op_id op) {
  return core_op_flag_table[op];
}

/* ---- calling */
/* Starts a call: op, the public api name for messages. */
static inline void core_call_init(dt_op_call *c, core_op_id op, const char *api) {
  c->op = op;
  c->nargs = 0;
  c->nout = 0;
  c->api = api;
  c->hook_depth = -1;
  c->requires_grad = false;
  c->rt = NULL;
  c->rank = 0;
  c->kernel = NULL;
  c->shard = NULL;
}
static inline void core_call_tensor(dt_op_call *c, dt_tensor *t) {
  c->args[c->nargs++].t = t;
}
static inline void core_call_double(dt_op_call *c, double d) {
  c->args[c->nargs++].d = d;
}
static inline void core_call_int(dt_op_call *c, int64_t i) {
  c->args[c->nargs++].i = i;
}
static inline void core_call_bool(dt_op_call *c, bool b) {
  c->args[c->nargs++].b = b;
}
static inline void core_call_ints(dt_op_call *c, dt_shape s) {
  c->args[c->nargs++].ints = s;
}
static inline void core_call_dtype(dt_op_call *c, dt_dtype d) {
  c->args[c->nargs++].dtype = d;
}
static inline void core_call_list(dt_op_call *c, dt_tensor *const *v, int n) {
  c->args[c->nargs].list.v = v;
  c->args[c->nargs++].list.n = n;
}
static inline void core_call_ptr(dt_op_call *c, const void *p) {
  c->args[c->nargs++].p = p;
}


/* ---- walking the tensor arguments
 * The one walk over a call's tensor arguments in schema order, list
 * elements flattened (what autograd numbers its inputs by):
 *
 *   for (core_arg_it it = core_call_args(c); core_arg_next(&it);)
 *     use(it.pos, it.elem, it.t);
 *
 * pos: the argument's position; elem: the index in a list argument (`L`),
 * -1 for a `T` / `t` one; t: the tensor (NULL for an absent optional `t`,
 * and whatever the list holds). An empty list yields nothing; once next
 * has returned false the walk is over (do not call it again). The walk
 * reads the schema table once and the arguments in place, all inline: a
 * walk costs what the hand-written loop did (callgrind, docs/sharding.md).
 * core_args walks an argument array of another record (a DTensor job) by
 * its op. */
typedef struct core_arg_it {
  const core_value *args;
  const char *schema;
  int pos;
  int elem;
  dt_tensor *t;
} core_arg_it;

static inline core_arg_it core_args(core_op_id op, const core_value *args) {
  core_arg_it it = {args, core_op_schemas[op], -1, -1, NULL};
  return it;
}
static inline core_arg_it core_call_args(const dt_op_call *c) {
  return core_args(c->op, c->args);
}
static inline bool core_arg_next(core_arg_it *it) {
  if (__builtin_expect(it->elem >= 0, 0)) {
    if (++it->elem < it->args[it->pos].list.n) {
      it->t = it->args[it->pos].list.v[it->elem];
      return true;
    }
    it->elem = -1;
  }
  for (;;) {
    char k = it->schema[++it->pos];
    if ((k | 0x20) == 't') { /* 'T' or 't': one compare (ASCII case bit) */
      it->t = it->args[it->pos].t;
      return true;
    }
    if (!k) return false;
    if (k == 'L' && it->args[it->pos].list.n > 0) {
      it->elem = 0;
      it->t = it->args[it->pos].list.v[0];
      return true;
    }
  }
}

/* the position of the list argument (`L`) of op, -1 if none: a walk that
 * keeps its own copy of the list makes it here, before walking */
static inline int core_op_list_pos(core_op_id op) {
  for (int i = 0; core_op_schemas[op][i]; i++)
    if (core_op_schemas[op][i] == 'L') return i;
  return -1;
}

/* number of tensor inputs per schema / the i-th tensor input */
int core_call_num_tensor_inputs(const dt_op_call *c);
dt_tensor *core_call_tensor_input(const dt_op_call *c, int i);

#endif
