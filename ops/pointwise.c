/* Pointwise ops: binary (with broadcasting and type promotion), scalar
 * forms, unary, clamp, where, masked_fill, cast; and the copy kernel shared
 * by contiguous/clone/reshape. */
#include <math.h>
#include <string.h>

#include "ops/ops.h"
#include "ops/cuda_ops.h"

/* The op list and the kernel enums are in the same order, one op at a
 * time: ops_binary_cpu and binary_flat pass (op - ADD) as the kernel's op,
 * ops_unary_cpu (op - NEG), scalar_kernel (op - ADD_SCALAR) for add..pow;
 * and the comparisons and logical ops are the binary ops from EQ on, which
 * the `c->op >= CORE_OP_EQ` tests below mean. Moving an op in the list
 * fails here, not in a wrong result. */
#define SAME_ORDER(base, op, k)                                               \
  _Static_assert(CORE_OP_##op - CORE_OP_##base == (int)(k),                 \
                 #op " keeps its kernel's place after " #base);
SAME_ORDER(ADD, ADD, CPU_ADD) SAME_ORDER(ADD, SUB, CPU_SUB)
SAME_ORDER(ADD, MUL, CPU_MUL) SAME_ORDER(ADD, DIV, CPU_DIV)
SAME_ORDER(ADD, POW, CPU_POW) SAME_ORDER(ADD, MAXIMUM, CPU_MAX)
SAME_ORDER(ADD, MINIMUM, CPU_MIN) SAME_ORDER(ADD, FLOOR_DIVIDE, CPU_FLOORDIV)
SAME_ORDER(ADD, REMAINDER, CPU_REM) SAME_ORDER(ADD, EQ, CPU_EQ)
SAME_ORDER(ADD, NE, CPU_NE) SAME_ORDER(ADD, LT, CPU_LT)
SAME_ORDER(ADD, LE, CPU_LE) SAME_ORDER(ADD, GT, CPU_GT)
SAME_ORDER(ADD, GE, CPU_GE) SAME_ORDER(ADD, LOGICAL_AND, CPU_AND)
SAME_ORDER(ADD, LOGICAL_OR, CPU_OR)
SAME_ORDER(ADD_SCALAR, ADD_SCALAR, CPU_ADD)
SAME_ORDER(ADD_SCALAR, SUB_SCALAR, CPU_SUB)
SAME_ORDER(ADD_SCALAR, MUL_SCALAR, CPU_MUL)
SAME_ORDER(ADD_SCALAR, DIV_SCALAR, CPU_DIV)
SAME_ORDER(ADD_SCALAR, POW_SCALAR, CPU_POW)
SAME_ORDER(NEG, NEG, CPU_NEG) SAME_ORDER(NEG, ABS, CPU_ABS)
SAME_ORDER(NEG, EXP, CPU_EXP) SAME_ORDER(NEG, LOG, CPU_LOG)
SAME_ORDER(NEG, SQRT, CPU_SQRT) SAME_ORDER(NEG, RSQRT, CPU_RSQRT)
SAME_ORDER(NEG, SIN, CPU_SIN) SAME_ORDER(NEG, COS, CPU_COS)
SAME_ORDER(NEG, TANH, CPU_TANH) SAME_ORDER(NEG, SIGMOID, CPU_SIGMOID)
SAME_ORDER(NEG, RELU, CPU_RELU) SAME_ORDER(NEG, SILU, CPU_SILU)
SAME_ORDER(NEG, GELU, CPU_GELU) SAME_ORDER(NEG, GELU_TANH, CPU_GELU_TANH)
SAME_ORDER(NEG, LOGICAL_NOT, CPU_NOT)
/* every op of the binary family from EQ on (the `>= CORE_OP_EQ` tests) is
 * a comparison or a logical op: the list's next op is the first scalar op */
_Static_assert(CORE_OP_LOGICAL_OR + 1 == CORE_OP_ADD_SCALAR,
               "the binary family ends with the logical ops");
/* cuda_compare's codes: 0 eq .. 5 ge (ops_compare_cuda passes op - EQ) */
SAME_ORDER(EQ, NE, 1) SAME_ORDER(EQ, LT, 2) SAME_ORDER(EQ, LE, 3)
SAME_ORDER(EQ, GT, 4) SAME_ORDER(EQ, GE, 5)
#undef SAME_ORDER

static bool is_0d(const dt_tensor *t) { return t->local.ndim == 0; }

static dt_status check_dtype(const dt_op_call *c, const dt_tensor *t,
                             const char *arg) {
  if (!core_dtype_valid(t->dtype))
    return core_error_set(DT_ERR_DTYPE, "%s: %s has invalid dtype %d", c->api,
                        arg, (int)t->dtype);
  return DT_OK;
}

/* ---- binary */
dt_status ops_binary_infer(dt_op_call *c) {
  const dt_tensor *a = c->args[0].t, *b = c->args[1].t;
  core_meta *m = &c->meta[0];
  dt_status st = ops_broadcast_shapes(c, a->local.sizes, a->local.ndim,
                                      b->local.sizes, b->local.ndim, m->sizes,
                                      &m->ndim);
  if (st != DT_OK) return st;
  dt_dtype r = core_result_type(a->dtype, is_0d(a), b->dtype, is_0d(b));
  switch (c->op) {
  case CORE_OP_SUB:
    if (a->dtype == DT_BOOL || b->dtype == DT_BOOL) /* either, as PyTorch */
      return core_error_set(DT_ERR_DTYPE, "%s: subtraction with a bool tensor "
                          "is not supported (as in PyTorch); cast it to an "
                          "integer or floating dtype first", c->api);
    break;
  case CORE_OP_POW:
    /* PyTorch has no bool pow kernel ("pow" not implemented for 'Bool');
     * the bool compute type has no pow either */
    if (r == DT_BOOL)
      return core_error_set(DT_ERR_DTYPE, "%s: pow of two bool tensors is not "
                          "supported; cast one of them to an integer or "
                          "floating dtype first", c->api);
    break;
  case CORE_OP_DIV:
    if (!core_dtype_is_float(r)) r = DT_FLOAT32; /* true division */
    break;
  case CORE_OP_FLOOR_DIVIDE: case CORE_OP_REMAINDER:
    if (r == DT_BOOL) /* PyTorch has no bool kernel for either */
      return core_error_set(DT_ERR_DTYPE, "%s: PyTorch has no kernel for two "
                            "bool tensors; cast them first", c->api);
    break;
  case CORE_OP_EQ: case CORE_OP_NE: case CORE_OP_LT: case CORE_OP_LE: case CORE_OP_GT:
  case CORE_OP_GE: case CORE_OP_LOGICAL_AND: case CORE_OP_LOGICAL_OR:
    m->dtype = DT_BOOL;
    m->alias = -1;
    return DT_OK;
  default: break;
  }
  m->dtype = r;
  m->alias = -1;
  return DT_OK;
}

/* same shape, contiguous, already in the compute type: no iterator */
static bool binary_flat(const dt_op_call *c, const dt_tensor *a,
                        const dt_tensor *b, dt_tensor *o) {
  dt_dtype ct = cpu_compute_type(o->dtype);
  bool divides = c->op == CORE_OP_FLOOR_DIVIDE || c->op == CORE_OP_REMAINDER;
  if (a->dtype != ct || b->dtype != ct || o->dtype != ct || divides ||
      c->op >= CORE_OP_EQ || a->local.ndim != o->local.ndim ||
      b->local.ndim != o->local.ndim)
    return false;
  for (int i = 0; i < o->local.ndim; i++)
    if (a->local.sizes[i] != o->local.sizes[i] ||
        b->local.sizes[i] != o->local.sizes[i])
      return false;
  if (!core_tensor_is_contiguous(a) || !core_tensor_is_contiguous(b)) return false;
  cpu_binary_contig((cpu_binary_op)(c->op - CORE_OP_ADD), ct, core_numel(o),
                  core_tensor_data(o), core_tensor_data(a), core_tensor_data(b));
  return true;
}

dt_status ops_binary_cpu(dt_op_call *c) {
  const dt_tensor *a = c->args[0].t, *b = c->args[1].t;
  dt_tensor *o = c->out[0];
  if (binary_flat(c, a, b, o)) return DT_OK;
  cpu_view vo = ops_view_of(o), va0 = ops_view_of(a), vb0 = ops_view_of(b);
  cpu_view va = cpu_view_broadcast(&va0, vo.ndim, vo.sizes);
  cpu_view vb = cpu_view_broadcast(&vb0, vo.ndim, vo.sizes);
  /* the operands meet in the common dtype (comparisons) or the result's
   * (arithmetic; for true division, float) before the compute type */
  dt_dtype ct, via = o->dtype;
  if (c->op == CORE_OP_LOGICAL_AND || c->op == CORE_OP_LOGICAL_OR)
    ct = via = DT_BOOL;
  else if (o->dtype == DT_BOOL && c->op >= CORE_OP_EQ)
    ct = cpu_compute_type(via = core_result_type(a->dtype, is_0d(a), b->dtype, is_0d(b)));
  else
    ct = cpu_compute_type(o->dtype);
  /* PyTorch's mul and div take a one-element second operand of a
   * float16/bfloat16 result at its exact value (their scalar fast path):
   * bf16 [66] * int32 [-702] is -46332 rounded once; a one-element first
   * operand, or a longer second one, is rounded to the result dtype */
  bool half = o->dtype == DT_FLOAT16 || o->dtype == DT_BFLOAT16;
  bool exact_b = half && core_numel(b) == 1 &&
                 (c->op == CORE_OP_MUL || c->op == CORE_OP_DIV);
  if (cpu_binary((cpu_binary_op)(c->op - CORE_OP_ADD), ct, via, !exact_b, &vo,
                 &va, &vb))
    return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: integer division by "
                          "zero (PyTorch: ZeroDivisionError)", c->api);
  return DT_OK;
}

/* ---- tensor ⊕ scalar */
/* the scalar's kind (argument 2), AUTO resolved by its value */
static dt_scalar_kind scalar_kind(const dt_op_call *c) {
  return core_scalar_kind_of(c->args[1].d, (dt_scalar_kind)c->args[2].i);
}

/* the scalar forms' dtype rules beyond promotion: PyTorch has no bool
 * kernel for these with a bool result (bool + True is bool; sub refuses
 * any bool tensor below) */
static dt_status scalar_bool_result(const dt_op_call *c) {
  switch (c->op) {
  case CORE_OP_FLOOR_DIVIDE_SCALAR: case CORE_OP_REMAINDER_SCALAR:
    return core_error_set(DT_ERR_DTYPE, "%s: PyTorch has no kernel for a bool "
                          "tensor and a bool scalar; cast the tensor first",
                          c->api);
  default: return DT_OK;
  }
}

dt_status ops_scalar_infer(dt_op_call *c) {
  const dt_tensor *a = c->args[0].t;
  double s = c->args[1].d;
  dt_status st = check_dtype(c, a, "a");
  if (st == DT_OK) st = ops_check_kind(c, "scalar", s, c->args[2].i, false);
  if (st != DT_OK) return st;
  dt_scalar_kind kind = scalar_kind(c);
  dt_dtype r = core_result_type_kind(a->dtype, kind);
  if (r == DT_BOOL && (st = scalar_bool_result(c)) != DT_OK) return st;
  if (c->op == CORE_OP_DIV_SCALAR && !core_dtype_is_float(r)) r = DT_FLOAT32;
  if (c->op == CORE_OP_POW_SCALAR && !core_dtype_is_float(r) && s < 0)
    return core_error_set(DT_ERR_INVALID_ARGUMENT,
                        "%s: integer tensor (%s) to a negative integer power "
                        "%g is not allowed", c->api, core_dtype_name(a->dtype), s);
  if (c->op == CORE_OP_SUB_SCALAR && (a->dtype == DT_BOOL || kind == DT_SCALAR_BOOL))
    return core_error_set(DT_ERR_DTYPE, "%s: subtraction %s is not supported "
                          "(as in PyTorch); use logical_not to invert a mask",
                          c->api, a->dtype == DT_BOOL ? "from a bool tensor"
                                                      : "of a bool scalar");
  bool divides = c->op == CORE_OP_FLOOR_DIVIDE_SCALAR ||
                 c->op == CORE_OP_REMAINDER_SCALAR;
  /* an integer divisor is converted to the result dtype first: int32 //
   * 2^32 divides by 0 (PyTorch: ZeroDivisionError too) */
  if (divides && !core_dtype_is_float(r) && ops_wrap_int(s, r) == 0)
    return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: integer division by "
                          "zero (PyTorch: ZeroDivisionError)", c->api);
  /* PyTorch converts a pow exponent to the result dtype with an overflow
   * check (pow(uint8, 300), pow(float16, 70000) fail) */
  if (c->op == CORE_OP_POW_SCALAR) {
    st = ops_check_scalar_exact(c, "exponent", s, r);
    if (st != DT_OK) return st;
  }
  ops_meta_set(&c->meta[0], r, a->local.ndim, a->local.sizes);
  return DT_OK;
}

/* the kernel op of a scalar form */
static cpu_binary_op scalar_kernel(core_op_id op) {
  switch (op) {
  case CORE_OP_FLOOR_DIVIDE_SCALAR: return CPU_FLOORDIV;
  case CORE_OP_REMAINDER_SCALAR: return CPU_REM;
  default: return (cpu_binary_op)(op - CORE_OP_ADD_SCALAR); /* add..pow */
  }
}

dt_status ops_scalar_cpu(dt_op_call *c) {
  cpu_view vo = ops_view_of(c->out[0]), va = ops_view_of(c->args[0].t);
  double s = c->args[1].d;
  /* add, sub, pow and remainder meet a float16/bfloat16 tensor in its own
   * dtype (the scalar is rounded first: f16 [1] + 2049 adds 2048); mul,
   * div and floor_divide use the exact scalar, as PyTorch's CPU kernels
   * do (f16 2048 // 1.0004 is 2047) */
  bool half = vo.dtype == DT_FLOAT16 || vo.dtype == DT_BFLOAT16;
  /* an integral scalar meets a uint8/int32 result in that dtype, wrapped
   * (uint8 // 257 divides by 1, uint8 % -2 by 254), as PyTorch converts
   * it; pow keeps its exponent (checked in infer) */
  if (c->op != CORE_OP_POW_SCALAR) s = ops_wrap_int(s, vo.dtype);
  cpu_binary_op op = scalar_kernel(c->op);
  if (vo.dtype == DT_BOOL && c->op == CORE_OP_POW_SCALAR) {
    /* bool ** True is the tensor, bool ** False all true (PyTorch); the
     * bool compute type has no pow: x and 1, x or 1 */
    op = s != 0 ? CPU_MUL : CPU_ADD;
    s = 1;
  }
  if (half && c->op != CORE_OP_MUL_SCALAR && c->op != CORE_OP_DIV_SCALAR &&
      c->op != CORE_OP_FLOOR_DIVIDE_SCALAR) {
    _Alignas(8) char v[8];
    core_store_double(v, vo.dtype, s);
    s = core_load_double(v, vo.dtype);
  }
  cpu_binary_scalar(op, cpu_compute_type(vo.dtype), &vo, &va, s);
  return DT_OK;
}

/* ---- unary */
dt_status ops_unary_infer(dt_op_call *c) {
  const dt_tensor *a = c->args[0].t;
  dt_status st = check_dtype(c, a, "a");
  if (st != DT_OK) return st;
  dt_dtype r = a->dtype;
  switch (c->op) {
  case CORE_OP_NEG:
    if (a->dtype == DT_BOOL)
      return core_error_set(DT_ERR_DTYPE, "%s: negation of a bool tensor is not "
                          "supported; use dt_logical_not", c->api);
    break;
  case CORE_OP_ABS: case CORE_OP_RELU:
    if (a->dtype == DT_BOOL) /* PyTorch has no bool kernel for either */
      return core_error_set(DT_ERR_DTYPE, "%s: PyTorch has no kernel for bool "
                            "tensors; cast first", c->api);
    break;
  case CORE_OP_LOGICAL_NOT: r = DT_BOOL; break;
  case CORE_OP_SILU: case CORE_OP_GELU: case CORE_OP_GELU_TANH:
    if (!core_dtype_is_float(r)) /* no integer kernels in PyTorch */
      return core_error_set(DT_ERR_DTYPE, "%s: PyTorch has no kernel for %s "
                            "tensors; cast to a floating dtype first",
                            c->api, core_dtype_name(r));
    break;
  default:
    if (!core_dtype_is_float(r)) r = DT_FLOAT32; /* int → float like PyTorch */
    break;
  }
  ops_meta_set(&c->meta[0], r, a->local.ndim, a->local.sizes);
  return DT_OK;
}

dt_status ops_unary_cpu(dt_op_call *c) {
  cpu_view vo = ops_view_of(c->out[0]), va = ops_view_of(c->args[0].t);
  dt_dtype ct = c->op == CORE_OP_LOGICAL_NOT ? DT_BOOL : cpu_compute_type(vo.dtype);
  cpu_unary((cpu_unary_op)(c->op - CORE_OP_NEG), ct, &vo, &va);
  return DT_OK;
}

/* ---- clamp */
/* a clamp bound's kind: AUTO is INT for an integral value of any size or
 * an infinite one (dt_clamp's rule: an infinite bound is no bound, and an
 * integral one past the dtype's range is checked against it below) */
static dt_scalar_kind bound_kind(double v, int64_t k) {
  if (k != DT_SCALAR_AUTO) return (dt_scalar_kind)k;
  return v == nearbyint(v) ? DT_SCALAR_INT : DT_SCALAR_FLOAT;
}

dt_status ops_clamp_infer(dt_op_call *c) {
  const dt_tensor *a = c->args[0].t;
  double lo = c->args[1].d, hi = c->args[3].d;
  dt_status st = ops_check_kind(c, "min", lo, c->args[2].i, true);
  if (st == DT_OK) st = ops_check_kind(c, "max", hi, c->args[4].i, true);
  if (st != DT_OK) return st;
  /* PyTorch promotes with the bounds: a float bound (NaN included) makes
   * an integer or bool tensor float32, int ones make bool int64, bool
   * ones keep the dtype; a NaN bound gives NaN everywhere */
  dt_dtype r = a->dtype;
  dt_scalar_kind klo = bound_kind(lo, c->args[2].i), khi = bound_kind(hi, c->args[4].i);
  if (!core_dtype_is_float(r)) {
    if (klo == DT_SCALAR_FLOAT || khi == DT_SCALAR_FLOAT) r = DT_FLOAT32;
    else if (r == DT_BOOL && (klo == DT_SCALAR_INT || khi == DT_SCALAR_INT))
      r = DT_INT64;
  }
  if (r == DT_BOOL)
    return core_error_set(DT_ERR_DTYPE, "%s: PyTorch has no clamp of a bool "
                          "tensor with bool bounds; cast the tensor first",
                          c->api);
  /* An integer result keeps integer bounds, compared exactly. A min at or
   * below the dtype's smallest value bounds nothing (min = -inf is the
   * usual way to say "no min"), and so does a max at or above its largest.
   * A min above the largest value (+inf included) or a max below the
   * smallest would have to store a value the dtype cannot hold: an error,
   * as PyTorch's clamp(int64_tensor, min=10**19), not a wrap. */
  /* a floating result converts finite bounds with an overflow check, as
   * PyTorch (float16 with min 70000 fails; inf and NaN pass) */
  if (core_dtype_is_float(r) &&
      ((st = ops_check_scalar_exact(c, "min", lo, r)) != DT_OK ||
       (st = ops_check_scalar_exact(c, "max", hi, r)) != DT_OK))
    return st;
  double dlo, dhi;
  if (ops_int_range(r, &dlo, &dhi)) {
    if (lo > dhi) return ops_scalar_overflow(c, "min", lo, r);
    if (hi < dlo) return ops_scalar_overflow(c, "max", hi, r);
  }
  ops_meta_set(&c->meta[0], r, a->local.ndim, a->local.sizes);
  return DT_OK;
}

dt_status ops_clamp_cpu(dt_op_call *c) {
  cpu_view vo = ops_view_of(c->out[0]), va = ops_view_of(c->args[0].t);
  cpu_clamp(cpu_compute_type(vo.dtype), &vo, &va, c->args[1].d, c->args[3].d);
  return DT_OK;
}

/* ---- where / masked_fill */
static dt_status check_mask(const dt_op_call *c, const dt_tensor *m,
                            const char *arg) {
  /* PyTorch's where takes bool conditions (uint8 with a deprecation
   * warning); masked_fill takes bool masks only */
  bool ok = m->dtype == DT_BOOL ||
            (m->dtype == DT_UINT8 && c->op != CORE_OP_MASKED_FILL);
  if (!ok)
    return core_error_set(DT_ERR_DTYPE, "%s: %s must be bool%s, got %s",
                        c->api, arg, c->op == CORE_OP_MASKED_FILL ? "" : " (or uint8)",
                        core_dtype_name(m->dtype));
  return DT_OK;
}

dt_status ops_where_infer(dt_op_call *c) {
  const dt_tensor *cond = c->args[0].t, *a = c->args[1].t, *b = c->args[2].t;
  dt_status st = check_mask(c, cond, "cond");
  if (st != DT_OK) return st;
  int64_t ab[DT_MAX_DIMS];
  int nab;
  core_meta *m = &c->meta[0];
  st = ops_broadcast_shapes(c, a->local.sizes, a->local.ndim, b->local.sizes,
                            b->local.ndim, ab, &nab);
  if (st == DT_OK)
    st = ops_broadcast_shapes(c, cond->local.sizes, cond->local.ndim, ab, nab,
                              m->sizes, &m->ndim);
  if (st != DT_OK) return st;
  m->dtype = core_result_type(a->dtype, is_0d(a), b->dtype, is_0d(b));
  m->alias = -1;
  return DT_OK;
}

dt_status ops_where_cpu(dt_op_call *c) {
  cpu_view vo = ops_view_of(c->out[0]);
  cpu_view v[3];
  for (int i = 0; i < 3; i++) {
    cpu_view x = ops_view_of(c->args[i].t);
    v[i] = cpu_view_broadcast(&x, vo.ndim, vo.sizes);
  }
  cpu_where(cpu_compute_type(vo.dtype), &vo, &v[0], &v[1], &v[2]);
  return DT_OK;
}

dt_status ops_masked_fill_infer(dt_op_call *c) {
  const dt_tensor *a = c->args[0].t, *mask = c->args[1].t;
  dt_status st = check_mask(c, mask, "mask");
  if (st != DT_OK) return st;
  int64_t sh[DT_MAX_DIMS];
  int n;
  st = ops_broadcast_shapes(c, a->local.sizes, a->local.ndim,
                            mask->local.sizes, mask->local.ndim, sh, &n);
  if (st != DT_OK) return st;
  /* the result has the broadcast shape of a and mask, as PyTorch's
   * out-of-place masked_fill (0-d a with mask [2] gives [2]) */
  st = ops_check_scalar_exact(c, "value", c->args[2].d, a->dtype);
  if (st != DT_OK) return st;
  ops_meta_set(&c->meta[0], a->dtype, n, sh);
  return DT_OK;
}

dt_status ops_masked_fill_cpu(dt_op_call *c) {
  cpu_view vo = ops_view_of(c->out[0]), va0 = ops_view_of(c->args[0].t);
  cpu_view va = cpu_view_broadcast(&va0, vo.ndim, vo.sizes);
  cpu_view vm0 = ops_view_of(c->args[1].t);
  cpu_view vm = cpu_view_broadcast(&vm0, vo.ndim, vo.sizes);
  _Alignas(8) char one[8];
  core_store_double(one, vo.dtype, c->args[2].d);
  cpu_view vf = vo; /* the fill value, broadcast everywhere */
  vf.data = one;
  for (int i = 0; i < vf.ndim; i++) vf.strides[i] = 0;
  cpu_where(cpu_compute_type(vo.dtype), &vo, &vm, &vf, &va);
  return DT_OK;
}

/* ---- cast and copy */
dt_status ops_cast_infer(dt_op_call *c) {
  const dt_tensor *a = c->args[0].t;
  dt_dtype d = c->args[1].dtype;
  if (!core_dtype_valid(d))
    return core_error_set(DT_ERR_DTYPE, "%s: dtype %d is not a valid dt_dtype",
                        c->api, (int)d);
  ops_meta_set(&c->meta[0], d, a->local.ndim, a->local.sizes);
  return DT_OK;
}

dt_status ops_cast_cpu(dt_op_call *c) {
  cpu_view vo = ops_view_of(c->out[0]), va = ops_view_of(c->args[0].t);
  cpu_unary(CPU_COPY, ops_copy_type(vo.dtype, va.dtype), &vo, &va);
  return DT_OK;
}

dt_status ops_copy_cpu(dt_op_call *c) {
  cpu_view vo = ops_view_of(c->out[0]), va = ops_view_of(c->args[0].t);
  /* reshape/flatten copies: same numel, different shape; read in a's
   * row-major order by iterating over a's shape with the output viewed
   * contiguously in a's shape */
  if (vo.ndim != va.ndim || memcmp(vo.sizes, va.sizes, sizeof(int64_t) * (size_t)va.ndim)) {
    vo.ndim = va.ndim;
    for (int i = 0; i < va.ndim; i++) vo.sizes[i] = va.sizes[i];
    int64_t s = 1;
    for (int i = va.ndim - 1; i >= 0; i--) {
      vo.strides[i] = s;
      s *= va.sizes[i];
    }
  }
  cpu_unary(CPU_COPY, cpu_compute_type(vo.dtype), &vo, &va);
  return DT_OK;
}

/* ---- sharding rules (docs/sharding.md)
 * Pointwise ops shard any output dim (a broadcast operand stays
 * Replicate there). Partial passes through only where the op commutes
 * with the reduction: sums through add/sub and scaling, max/min through
 * monotone non-decreasing ops, avg through affine ones. A bool result
 * (add of bools is a logical or) never keeps a Partial. */
static bool partial_ok(const dt_op_call *c) { return c->meta[0].dtype != DT_BOOL; }

void ops_binary_rule(const dt_op_call *c, ops_rule_set *rs) {
  ops_rule_pointwise(c, rs, 3u);
  if (!partial_ok(c)) return;
  switch (c->op) {
  case CORE_OP_ADD: case CORE_OP_SUB:
    ops_rule_partial(c, rs, 3u, 0, DT_REDUCE_SUM, DT_REDUCE_SUM);
    ops_rule_partial(c, rs, 3u, 0, DT_REDUCE_AVG, DT_REDUCE_AVG);
    break;
  case CORE_OP_MUL:
    for (int r = DT_REDUCE_SUM; r <= DT_REDUCE_AVG; r++) {
      ops_rule_partial(c, rs, 1u, 2u, (dt_reduce_op)r, (dt_reduce_op)r);
      ops_rule_partial(c, rs, 2u, 1u, (dt_reduce_op)r, (dt_reduce_op)r);
    }
    break;
  case CORE_OP_DIV:
    ops_rule_partial(c, rs, 1u, 2u, DT_REDUCE_SUM, DT_REDUCE_SUM);
    ops_rule_partial(c, rs, 1u, 2u, DT_REDUCE_AVG, DT_REDUCE_AVG);
    break;
  case CORE_OP_MAXIMUM:
    ops_rule_partial(c, rs, 3u, 0, DT_REDUCE_MAX, DT_REDUCE_MAX);
    break;
  case CORE_OP_MINIMUM:
    ops_rule_partial(c, rs, 3u, 0, DT_REDUCE_MIN, DT_REDUCE_MIN);
    break;
  default: break;
  }
}

/* Partial passthrough of a one-tensor op: pairs of (input kind, output
 * kind), a bit per input kind (SUM=1 AVG=2 MAX=4 MIN=8), the output kind
 * the same except where `swap` exchanges max and min (neg) */
static void unary_partials(const dt_op_call *c, ops_rule_set *rs, unsigned kinds,
                           bool swap) {
  for (int r = DT_REDUCE_SUM; r <= DT_REDUCE_MIN; r++) {
    if (!(kinds >> r & 1)) continue;
    int out = swap && r == DT_REDUCE_MAX ? DT_REDUCE_MIN
              : swap && r == DT_REDUCE_MIN ? DT_REDUCE_MAX : r;
    ops_rule_partial(c, rs, 1u, 0, (dt_reduce_op)r, (dt_reduce_op)out);
  }
}

enum { P_SUM = 1, P_AVG = 2, P_MAX = 4, P_MIN = 8 };

/* Scaling commutes with a sum only by a finite factor: x * inf on two
 * terms 3 and -2 gives inf + -inf = NaN, where the whole 1 * inf is inf
 * (division by 0 likewise). The rule reads the scalar's class only
 * (zero, infinite, NaN, other), which the sharding cache keys on
 * (dispatch/shard_cache.c). */
static bool scales_finitely(const dt_op_call *c) {
  double s = c->args[1].d;
  return c->op == CORE_OP_MUL_SCALAR ? !isinf(s) : s != 0;
}

void ops_scalar_rule(const dt_op_call *c, ops_rule_set *rs) {
  ops_rule_pointwise(c, rs, 1u);
  if (!partial_ok(c)) return;
  switch (c->op) {
  case CORE_OP_MUL_SCALAR: case CORE_OP_DIV_SCALAR: /* linear */
    if (scales_finitely(c)) unary_partials(c, rs, P_SUM | P_AVG, false);
    break;
  case CORE_OP_ADD_SCALAR: case CORE_OP_SUB_SCALAR: /* a shift */
    unary_partials(c, rs, P_AVG | P_MAX | P_MIN, false);
    break;
  default: break;
  }
}

/* also clamp and dropout (same argument 0; the rest are not tensors) */
void ops_unary_rule(const dt_op_call *c, ops_rule_set *rs) {
  ops_rule_pointwise(c, rs, 1u);
  if (!partial_ok(c) || c->args[0].t->dtype == DT_BOOL) return;
  switch (c->op) {
  case CORE_OP_NEG: /* linear, and order-reversing */
    unary_partials(c, rs, P_SUM | P_AVG | P_MAX | P_MIN, true);
    break;
  case CORE_OP_RELU: case CORE_OP_EXP: case CORE_OP_SIGMOID:
  case CORE_OP_TANH: case CORE_OP_CLAMP: /* monotone non-decreasing */
    unary_partials(c, rs, P_MAX | P_MIN, false);
    break;
  default: break;
  }
}

void ops_where_rule(const dt_op_call *c, ops_rule_set *rs) {
  ops_rule_pointwise(c, rs, 7u);
}

void ops_masked_fill_rule(const dt_op_call *c, ops_rule_set *rs) {
  ops_rule_pointwise(c, rs, 3u);
}

/* a float-to-float cast is monotone and (up to rounding) linear */
void ops_cast_rule(const dt_op_call *c, ops_rule_set *rs) {
  ops_rule_pointwise(c, rs, 1u);
  if (!core_dtype_is_float(c->args[0].t->dtype) ||
      !core_dtype_is_float(c->meta[0].dtype))
    return;
  for (int r = DT_REDUCE_SUM; r <= DT_REDUCE_MIN; r++)
    ops_rule_partial(c, rs, 1u, 0, (dt_reduce_op)r, (dt_reduce_op)r);
}

/* ---- backward formulas (ops.h, "backward formulas"; docs/autograd.md) */
#define G2(op, a, b) ops_g_tt(e, CORE_OP_##op, a, b)
#define G1(op, a) ops_g_t(e, CORE_OP_##op, a)
#define GS(op, a, s) ops_g_ts(e, CORE_OP_##op, a, s)

static dt_tensor *to_shape_of(ops_grad_env *e, dt_tensor *g, const dt_tensor *x) {
  return ops_g_sum_to(e, g, x->local.sizes, x->local.ndim);
}

/* d/da and d/db of the binary ops, g being d/d(out) */
static void binary_grads(ops_grad_env *e, core_op_id op, dt_tensor *g,
                         dt_tensor *a, dt_tensor *b, dt_tensor **ga,
                         dt_tensor **gb) {
  switch (op) {
  case CORE_OP_ADD: *ga = g; *gb = g; break;
  case CORE_OP_SUB: *ga = g; *gb = G1(NEG, g); break;
  case CORE_OP_MUL: *ga = G2(MUL, g, b); *gb = G2(MUL, g, a); break;
  case CORE_OP_DIV:
    *ga = G2(DIV, g, b);
    *gb = G1(NEG, G2(MUL, *ga, G2(DIV, a, b)));
    break;
  case CORE_OP_POW: { /* PyTorch: 0 where b == 0 (a's), where a == 0 and b >= 0 (b's) */
    dt_tensor *zero = ops_g_const(e, a, 0);
    dt_tensor *d = G2(MUL, G2(MUL, g, b), G2(POW, a, GS(SUB_SCALAR, b, 1)));
    *ga = ops_g_masked_fill(e, d, G2(EQ, b, zero), 0);
    dt_tensor *l = G2(MUL, G2(MUL, g, G2(POW, a, b)), G1(LOG, a));
    *gb = ops_g_masked_fill(e, l, G2(LOGICAL_AND, G2(EQ, a, zero), G2(GE, b, zero)), 0);
    break;
  }
  case CORE_OP_MAXIMUM:
  case CORE_OP_MINIMUM: { /* ties share the gradient evenly */
    dt_tensor *tie = ops_g_masked_fill(e, GS(MUL_SCALAR, g, 0.5), G2(NE, a, b), 0);
    dt_tensor *a_wins = op == CORE_OP_MAXIMUM ? G2(GT, a, b) : G2(LT, a, b);
    dt_tensor *b_wins = op == CORE_OP_MAXIMUM ? G2(LT, a, b) : G2(GT, a, b);
    *ga = G2(ADD, ops_g_masked_fill(e, g, G1(LOGICAL_NOT, a_wins), 0), tie);
    *gb = G2(ADD, ops_g_masked_fill(e, g, G1(LOGICAL_NOT, b_wins), 0), tie);
    break;
  }
  case CORE_OP_REMAINDER: /* a - b * floor(a / b) */
    *ga = g;
    *gb = G1(NEG, G2(MUL, g, G2(FLOOR_DIVIDE, a, b)));
    break;
  default: break;
  }
}

/* sign(a) * g, 0 where a == 0 */
static dt_tensor *times_sign(ops_grad_env *e, dt_tensor *g, dt_tensor *a) {
  dt_tensor *zero = ops_g_const(e, a, 0);
  dt_tensor *nz = ops_g_masked_fill(e, g, G2(EQ, a, zero), 0);
  return ops_g_ttt(e, CORE_OP_WHERE, G2(LT, a, zero), G1(NEG, nz), nz);
}

/* gelu with the tanh approximation: d/dx of 0.5 x (1 + tanh(u)),
 * u = k (x + c x^3): 0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3 c x^2) */
static dt_tensor *gelu_tanh_grad(ops_grad_env *e, dt_tensor *g, dt_tensor *x) {
  const double k = 0.7978845608028654, c = 0.044715;
  dt_tensor *x2 = G2(MUL, x, x);
  dt_tensor *u = GS(MUL_SCALAR, G2(ADD, x, GS(MUL_SCALAR, G2(MUL, x2, x), c)), k);
  dt_tensor *t = G1(TANH, u);
  dt_tensor *left = GS(MUL_SCALAR, GS(ADD_SCALAR, t, 1), 0.5);
  dt_tensor *sech2 = GS(ADD_SCALAR, G1(NEG, G2(MUL, t, t)), 1);
  dt_tensor *inner = GS(MUL_SCALAR, GS(ADD_SCALAR, GS(MUL_SCALAR, x2, 3 * c), 1), 0.5 * k);
  dt_tensor *right = G2(MUL, G2(MUL, x, sech2), inner);
  return G2(MUL, g, G2(ADD, left, right));
}

static dt_tensor *unary_grad(ops_grad_env *e, const dt_op_call *f, dt_tensor *g) {
  dt_tensor *a = f->args[0].t;
  switch (f->op) {
  case CORE_OP_NEG: return G1(NEG, g);
  case CORE_OP_ABS: return times_sign(e, g, a);
  case CORE_OP_EXP: return G2(MUL, g, G1(EXP, a));
  case CORE_OP_LOG: return G2(DIV, g, a);
  case CORE_OP_SQRT: return G2(DIV, g, GS(MUL_SCALAR, G1(SQRT, a), 2));
  case CORE_OP_RSQRT: {
    dt_tensor *r = G1(RSQRT, a);
    return G2(MUL, g, GS(MUL_SCALAR, G2(MUL, G2(MUL, r, r), r), -0.5));
  }
  case CORE_OP_SIN: return G2(MUL, g, G1(COS, a));
  case CORE_OP_COS: return G1(NEG, G2(MUL, g, G1(SIN, a)));
  case CORE_OP_TANH: {
    dt_tensor *t = G1(TANH, a);
    return G2(MUL, g, GS(ADD_SCALAR, G1(NEG, G2(MUL, t, t)), 1));
  }
  case CORE_OP_SIGMOID: {
    dt_tensor *s = G1(SIGMOID, a);
    return G2(MUL, g, G2(MUL, s, GS(ADD_SCALAR, G1(NEG, s), 1)));
  }
  case CORE_OP_RELU:
    return ops_g_masked_fill(e, g, G2(LE, a, ops_g_const(e, a, 0)), 0);
  case CORE_OP_SILU: { /* s (1 + a (1 - s)) */
    dt_tensor *s = G1(SIGMOID, a);
    dt_tensor *d = G2(MUL, s, GS(ADD_SCALAR, G2(MUL, a, GS(ADD_SCALAR, G1(NEG, s), 1)), 1));
    return G2(MUL, g, d);
  }
  case CORE_OP_GELU: return G2(GELU_BACKWARD, g, a);
  case CORE_OP_GELU_TANH: return gelu_tanh_grad(e, g, a);
  default: return NULL;
  }
}

static dt_tensor *scalar_grad(ops_grad_env *e, const dt_op_call *f, dt_tensor *g) {
  dt_tensor *a = f->args[0].t;
  double s = f->args[1].d;
  switch (f->op) {
  case CORE_OP_ADD_SCALAR:
  case CORE_OP_SUB_SCALAR:
  case CORE_OP_REMAINDER_SCALAR: return g;
  case CORE_OP_MUL_SCALAR: return GS(MUL_SCALAR, g, s);
  case CORE_OP_DIV_SCALAR: return GS(DIV_SCALAR, g, s);
  case CORE_OP_POW_SCALAR:
    if (s == 0) return NULL; /* a constant: no gradient */
    return G2(MUL, g, GS(MUL_SCALAR, GS(POW_SCALAR, a, s - 1), s));
  default: return NULL;
  }
}

dt_status ops_pointwise_grad(ops_grad_env *e, const dt_op_call *f,
                             dt_tensor *const *gout, dt_tensor **gin) {
  dt_tensor *g = gout[0], *a = f->args[0].t;
  switch (f->op) {
  case CORE_OP_ADD: case CORE_OP_SUB: case CORE_OP_MUL: case CORE_OP_DIV:
  case CORE_OP_POW: case CORE_OP_MAXIMUM: case CORE_OP_MINIMUM:
  case CORE_OP_REMAINDER: {
    dt_tensor *b = f->args[1].t, *ga = NULL, *gb = NULL;
    binary_grads(e, f->op, g, a, b, &ga, &gb);
    if (e->needs[0]) gin[0] = to_shape_of(e, ga, a);
    if (e->needs[1]) gin[1] = to_shape_of(e, gb, b);
    break;
  }
  case CORE_OP_ADD_SCALAR: case CORE_OP_SUB_SCALAR: case CORE_OP_MUL_SCALAR:
  case CORE_OP_DIV_SCALAR: case CORE_OP_POW_SCALAR: case CORE_OP_REMAINDER_SCALAR:
    gin[0] = scalar_grad(e, f, g);
    break;
  case CORE_OP_CLAMP: { /* passes where lo <= a <= hi (a NaN bound passes all) */
    dt_tensor *out = G2(LOGICAL_OR, G2(LT, a, ops_g_const(e, a, f->args[1].d)),
                        G2(GT, a, ops_g_const(e, a, f->args[3].d)));
    gin[0] = ops_g_masked_fill(e, g, out, 0);
    break;
  }
  case CORE_OP_WHERE: {
    dt_tensor *cond = a, *x = f->args[1].t, *y = f->args[2].t;
    if (e->needs[1]) gin[1] = to_shape_of(e, ops_g_masked_fill(e, g, G1(LOGICAL_NOT, cond), 0), x);
    if (e->needs[2]) gin[2] = to_shape_of(e, ops_g_masked_fill(e, g, cond, 0), y);
    break;
  }
  case CORE_OP_MASKED_FILL:
    gin[0] = to_shape_of(e, ops_g_masked_fill(e, g, f->args[1].t, 0), a);
    break;
  case CORE_OP_CAST: gin[0] = ops_g_cast(e, g, a->dtype); break;
  default: gin[0] = unary_grad(e, f, g); break;
  }
  return e->st;
}
#undef G1
#undef G2
#undef GS

/* ---- the CUDA bindings (the op list's cuda column; docs/cuda.md): a
 * boxed call turned into a launch on the rank's stream */
#if DTORCH_HAVE_CUDA
dt_status ops_binary_cuda(dt_op_call *c) {
  static const int ops[CORE_OP_COUNT] = {
      [CORE_OP_ADD] = CUDA_ADD + 1, [CORE_OP_SUB] = CUDA_SUB + 1,
      [CORE_OP_MUL] = CUDA_MUL + 1, [CORE_OP_DIV] = CUDA_DIV + 1,
      [CORE_OP_MAXIMUM] = CUDA_MAX + 1, [CORE_OP_MINIMUM] = CUDA_MIN + 1,
      [CORE_OP_GELU_BACKWARD] = CUDA_GELU_BACKWARD + 1,
      [CORE_OP_POW] = CUDA_POW + 1, [CORE_OP_FLOOR_DIVIDE] = CUDA_FLOORDIV + 1,
      [CORE_OP_REMAINDER] = CUDA_REM + 1};
  dt_tensor *o = c->out[0], *a = c->args[0].t, *b = c->args[1].t;
  if (!ops[c->op]) return ops_cu_unsupported(c, "this op");
  if (a->dtype != o->dtype || b->dtype != o->dtype ||
      !ops_cu_is_float(o->dtype))
    return ops_cu_unsupported(c, "mixed or integer dtypes");
  cuda_operand oa = ops_cu_operand(a, o), ob = ops_cu_operand(b, o);
  return cuda_binary(ops_cu_stream(o), (cuda_binary_op)(ops[c->op] - 1),
                     (int)o->dtype, o->local.ndim, o->local.sizes,
                     core_tensor_data(o), &oa, &ob)
             ? ops_cu_launch_failed(c) : DT_OK;
}

/* tensor op scalar. add, sub, pow and remainder meet a float16 /
 * bfloat16 tensor in its own dtype (the scalar rounded to it first); mul,
 * div and floor_divide use the exact scalar: the CPU's rules
 * (ops/pointwise.c, ops_scalar_cpu) */
dt_status ops_scalar_cuda(dt_op_call *c) {
  dt_tensor *o = c->out[0], *a = c->args[0].t;
  double s = c->args[1].d;
  cuda_binary_op op;
  bool round = true;
  switch (c->op) {
  case CORE_OP_ADD_SCALAR: op = CUDA_ADD; break;
  case CORE_OP_SUB_SCALAR: op = CUDA_SUB; break;
  case CORE_OP_MUL_SCALAR: op = CUDA_MUL; round = false; break;
  case CORE_OP_DIV_SCALAR: op = CUDA_DIV; round = false; break;
  case CORE_OP_POW_SCALAR: op = CUDA_POW; break;
  case CORE_OP_FLOOR_DIVIDE_SCALAR: op = CUDA_FLOORDIV; round = false; break;
  case CORE_OP_REMAINDER_SCALAR: op = CUDA_REM; break;
  default: return ops_cu_unsupported(c, "this op");
  }
  if (a->dtype != o->dtype || !ops_cu_is_float(o->dtype))
    return ops_cu_unsupported(c, "integer dtypes");
  if (round && (o->dtype == DT_FLOAT16 || o->dtype == DT_BFLOAT16)) {
    _Alignas(8) char v[8];
    core_store_double(v, o->dtype, s);
    s = core_load_double(v, o->dtype);
  }
  cuda_operand oa = ops_cu_operand(a, o);
  return cuda_scalar(ops_cu_stream(o), op, (int)o->dtype, o->local.ndim,
                     o->local.sizes, core_tensor_data(o), &oa, s)
             ? ops_cu_launch_failed(c) : DT_OK;
}

dt_status ops_unary_cuda(dt_op_call *c) {
  static const int ops[CORE_OP_COUNT] = {
      [CORE_OP_NEG] = CUDA_NEG + 1, [CORE_OP_EXP] = CUDA_EXP + 1,
      [CORE_OP_LOG] = CUDA_LOG + 1, [CORE_OP_SQRT] = CUDA_SQRT + 1,
      [CORE_OP_TANH] = CUDA_TANH + 1, [CORE_OP_SIGMOID] = CUDA_SIGMOID + 1,
      [CORE_OP_RELU] = CUDA_RELU + 1, [CORE_OP_SILU] = CUDA_SILU + 1,
      [CORE_OP_GELU] = CUDA_GELU + 1, [CORE_OP_ABS] = CUDA_ABS + 1,
      [CORE_OP_RSQRT] = CUDA_RSQRT + 1, [CORE_OP_SIN] = CUDA_SIN + 1,
      [CORE_OP_COS] = CUDA_COS + 1, [CORE_OP_GELU_TANH] = CUDA_GELU_TANH + 1};
  dt_tensor *o = c->out[0], *a = c->args[0].t;
  if (!ops[c->op]) return ops_cu_unsupported(c, "this op");
  if (a->dtype != o->dtype || !ops_cu_is_float(o->dtype))
    return ops_cu_unsupported(c, "integer dtypes");
  cuda_operand oa = ops_cu_operand(a, o);
  return cuda_unary(ops_cu_stream(o), (cuda_unary_op)(ops[c->op] - 1),
                    (int)o->dtype, o->local.ndim, o->local.sizes,
                    core_tensor_data(o), &oa)
             ? ops_cu_launch_failed(c) : DT_OK;
}

/* eq .. ge of one float dtype into bool */
dt_status ops_compare_cuda(dt_op_call *c) {
  dt_tensor *o = c->out[0], *a = c->args[0].t, *b = c->args[1].t;
  if (a->dtype != b->dtype || !ops_cu_is_float(a->dtype) || o->dtype != DT_BOOL)
    return ops_cu_unsupported(c, "mixed or integer dtypes");
  cuda_operand oa = ops_cu_operand(a, o), ob = ops_cu_operand(b, o);
  return cuda_compare(ops_cu_stream(o), (int)(c->op - CORE_OP_EQ),
                      (int)a->dtype, o->local.ndim, o->local.sizes,
                      core_tensor_data(o), &oa, &ob)
             ? ops_cu_launch_failed(c)
             : DT_OK;
}

dt_status ops_where_cuda(dt_op_call *c) {
  dt_tensor *o = c->out[0], *cond = c->args[0].t, *a = c->args[1].t,
            *b = c->args[2].t;
  if (cond->dtype != DT_BOOL || a->dtype != o->dtype || b->dtype != o->dtype)
    return ops_cu_unsupported(c, "a non-bool condition or mixed dtypes");
  cuda_operand oc = ops_cu_operand(cond, o), oa = ops_cu_operand(a, o),
               ob = ops_cu_operand(b, o);
  return cuda_where(ops_cu_stream(o), (int)o->dtype, o->local.ndim,
                    o->local.sizes, core_tensor_data(o), &oc, &oa, &ob)
             ? ops_cu_launch_failed(c) : DT_OK;
}

dt_status ops_clamp_cuda(dt_op_call *c) {
  dt_tensor *o = c->out[0], *a = c->args[0].t;
  if (a->dtype != o->dtype || !ops_cu_is_float(o->dtype))
    return ops_cu_unsupported(c, "integer dtypes");
  cuda_operand oa = ops_cu_operand(a, o);
  return cuda_clamp(ops_cu_stream(o), (int)o->dtype, o->local.ndim,
                    o->local.sizes, core_tensor_data(o), &oa, c->args[1].d,
                    c->args[3].d)
             ? ops_cu_launch_failed(c) : DT_OK;
}

dt_status ops_masked_fill_cuda(dt_op_call *c) {
  dt_tensor *o = c->out[0], *a = c->args[0].t, *m = c->args[1].t;
  if (a->dtype != o->dtype || m->dtype != DT_BOOL)
    return ops_cu_unsupported(c, "mixed dtypes");
  cuda_operand oa = ops_cu_operand(a, o), om = ops_cu_operand(m, o);
  return cuda_masked_fill(ops_cu_stream(o), (int)o->dtype, o->local.ndim,
                          o->local.sizes, core_tensor_data(o), &oa, &om,
                          c->args[2].d)
             ? ops_cu_launch_failed(c) : DT_OK;
}

dt_status ops_logical_cuda(dt_op_call *c) {
  dt_tensor *o = c->out[0], *a = c->args[0].t;
  dt_tensor *b = c->op == CORE_OP_LOGICAL_NOT ? NULL : c->args[1].t;
  if (o->dtype != DT_BOOL || (b && b->dtype != a->dtype))
    return ops_cu_unsupported(c, "mixed dtypes");
  cuda_operand oa = ops_cu_operand(a, o), ob = b ? ops_cu_operand(b, o) : oa;
  int op = c->op == CORE_OP_LOGICAL_AND  ? 0
           : c->op == CORE_OP_LOGICAL_OR ? 1
                                         : 2;
  return cuda_logical(ops_cu_stream(o), op, (int)a->dtype, o->local.ndim,
                      o->local.sizes, core_tensor_data(o), &oa, b ? &ob : NULL)
             ? ops_cu_launch_failed(c) : DT_OK;
}
#endif
