/* The CUDA backend's kernel table (runtime/backend.h; docs/cuda.md): the
 * ops bound so far, each turning a boxed call into a launch on the rank's
 * stream (kernels/cuda). An op without an entry fails with
 * DT_ERR_UNSUPPORTED naming it; views need no kernel and keep the CPU
 * table's marker. Registered when the library loads, as the CPU table is
 * (ops/registry.c calls ops_cuda_register, so that a static link keeps
 * this file). Empty without DTORCH_CUDA. */
#include "ops/ops.h"
#include "runtime/backend.h"
#include "runtime/runtime.h"

#if DTORCH_HAVE_CUDA
#include <string.h>

#include "kernels/cuda/cuda.h"
#include "ops/cuda_geom.h"

static dt_runtime *rt_of(const dt_tensor *t) { return t->local.storage->rt; }
static int rank_of(const dt_tensor *t) { return t->local.storage->rank; }
static cuda_rank *cr_of(const dt_tensor *t) {
  return rt_of(t)->ranks[rank_of(t)].dev_ctx;
}
static void *stream_of(const dt_tensor *t) {
  return cuda_rank_stream(cr_of(t));
}

/* t's view as an operand broadcast to out's dims */
static cuda_operand operand_of(const dt_tensor *t, const dt_tensor *out) {
  cuda_operand o;
  o.data = core_tensor_data(t);
  ops_cuda_broadcast(out->local.ndim, t->local.ndim, t->local.sizes,
                     t->local.strides, o.strides);
  return o;
}

static cuda_rows rows_of(const dt_tensor *x, uint32_t mask, bool y_full) {
  return ops_cuda_rows(x->local.ndim, x->local.sizes, x->local.strides, mask,
                       y_full);
}

static dt_status launch_failed(const dt_op_call *c) {
  return core_error_set(DT_ERR_DEVICE, "%s: launching the CUDA kernel of %s "
                        "failed", c->api, core_op_name(c->op));
}
/* a case the kernel does not take: the host fallback when the runtime
 * allows it (DTORCH_CUDA_FALLBACK=1), else DT_ERR_UNSUPPORTED naming it */
static dt_status unsupported(dt_op_call *c, const char *what) {
  if (rt_of(c->out[0])->host_fallback) return ops_host_fallback(c);
  return core_error_set(DT_ERR_UNSUPPORTED, "%s: the CUDA kernel of %s does "
                        "not take %s yet (DTORCH_CUDA_FALLBACK=1 runs it on "
                        "the host)", c->api, core_op_name(c->op), what);
}

static bool is_float(dt_dtype d) {
  return d == DT_FLOAT32 || d == DT_FLOAT64 || d == DT_FLOAT16 ||
         d == DT_BFLOAT16;
}

static dt_status cu_empty(dt_op_call *c) {
  (void)c;
  return DT_OK;
}

static dt_status cu_full(dt_op_call *c) {
  dt_tensor *o = c->out[0];
  return cuda_fill(stream_of(o), (int)o->dtype, core_numel(o),
                   core_tensor_data(o), c->args[2].d)
             ? launch_failed(c) : DT_OK;
}

static dt_status cu_random(dt_op_call *c) {
  dt_tensor *o = c->out[0];
  if (!is_float(o->dtype)) return unsupported(c, "integer dtypes");
  return cuda_rand_fill(stream_of(o), core_tensor_data(o), (int)o->dtype,
                        core_numel(o), (uint64_t)c->args[2].i,
                        (uint64_t)c->args[3].i, c->op == CORE_OP_RANDN)
             ? launch_failed(c) : DT_OK;
}

/* the host data is a staging copy the record frees after the kernel: a
 * copy from pageable memory returns once the source has been read */
static dt_status cu_from_host(dt_op_call *c) {
  dt_tensor *o = c->out[0];
  size_t n = (size_t)core_numel(o) * core_dtype_size(o->dtype);
  return rt_of(o)->backend->copy(rt_of(o), rank_of(o), core_tensor_data(o),
                                 c->args[0].p, n, RUNTIME_COPY_H2D);
}

static dt_status cu_binary(dt_op_call *c) {
  static const int ops[CORE_OP_COUNT] = {
      [CORE_OP_ADD] = CUDA_ADD + 1, [CORE_OP_SUB] = CUDA_SUB + 1,
      [CORE_OP_MUL] = CUDA_MUL + 1, [CORE_OP_DIV] = CUDA_DIV + 1,
      [CORE_OP_MAXIMUM] = CUDA_MAX + 1, [CORE_OP_MINIMUM] = CUDA_MIN + 1,
      [CORE_OP_GELU_BACKWARD] = CUDA_GELU_BACKWARD + 1,
      [CORE_OP_POW] = CUDA_POW + 1, [CORE_OP_FLOOR_DIVIDE] = CUDA_FLOORDIV + 1,
      [CORE_OP_REMAINDER] = CUDA_REM + 1};
  dt_tensor *o = c->out[0], *a = c->args[0].t, *b = c->args[1].t;
  if (!ops[c->op]) return unsupported(c, "this op");
  if (a->dtype != o->dtype || b->dtype != o->dtype || !is_float(o->dtype))
    return unsupported(c, "mixed or integer dtypes");
  cuda_operand oa = operand_of(a, o), ob = operand_of(b, o);
  return cuda_binary(stream_of(o), (cuda_binary_op)(ops[c->op] - 1),
                     (int)o->dtype, o->local.ndim, o->local.sizes,
                     core_tensor_data(o), &oa, &ob)
             ? launch_failed(c) : DT_OK;
}

/* tensor op scalar. add, sub, pow and remainder meet a float16 /
 * bfloat16 tensor in its own dtype (the scalar rounded to it first); mul,
 * div and floor_divide use the exact scalar: the CPU's rules
 * (ops/pointwise.c, ops_scalar_cpu) */
static dt_status cu_scalar(dt_op_call *c) {
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
  default: return unsupported(c, "this op");
  }
  if (a->dtype != o->dtype || !is_float(o->dtype))
    return unsupported(c, "integer dtypes");
  if (round && (o->dtype == DT_FLOAT16 || o->dtype == DT_BFLOAT16)) {
    _Alignas(8) char v[8];
    core_store_double(v, o->dtype, s);
    s = core_load_double(v, o->dtype);
  }
  cuda_operand oa = operand_of(a, o);
  return cuda_scalar(stream_of(o), op, (int)o->dtype, o->local.ndim,
                     o->local.sizes, core_tensor_data(o), &oa, s)
             ? launch_failed(c) : DT_OK;
}

static dt_status cu_unary(dt_op_call *c) {
  static const int ops[CORE_OP_COUNT] = {
      [CORE_OP_NEG] = CUDA_NEG + 1, [CORE_OP_EXP] = CUDA_EXP + 1,
      [CORE_OP_LOG] = CUDA_LOG + 1, [CORE_OP_SQRT] = CUDA_SQRT + 1,
      [CORE_OP_TANH] = CUDA_TANH + 1, [CORE_OP_SIGMOID] = CUDA_SIGMOID + 1,
      [CORE_OP_RELU] = CUDA_RELU + 1, [CORE_OP_SILU] = CUDA_SILU + 1,
      [CORE_OP_GELU] = CUDA_GELU + 1, [CORE_OP_ABS] = CUDA_ABS + 1,
      [CORE_OP_RSQRT] = CUDA_RSQRT + 1, [CORE_OP_SIN] = CUDA_SIN + 1,
      [CORE_OP_COS] = CUDA_COS + 1, [CORE_OP_GELU_TANH] = CUDA_GELU_TANH + 1};
  dt_tensor *o = c->out[0], *a = c->args[0].t;
  if (!ops[c->op]) return unsupported(c, "this op");
  if (a->dtype != o->dtype || !is_float(o->dtype))
    return unsupported(c, "integer dtypes");
  cuda_operand oa = operand_of(a, o);
  return cuda_unary(stream_of(o), (cuda_unary_op)(ops[c->op] - 1),
                    (int)o->dtype, o->local.ndim, o->local.sizes,
                    core_tensor_data(o), &oa)
             ? launch_failed(c) : DT_OK;
}

/* cast, and the copies of reshape / contiguous / clone: a's elements in
 * its row-major order into the dense output */
static dt_status cu_copy(dt_op_call *c) {
  dt_tensor *o = c->out[0], *a = c->args[0].t;
  cuda_operand oa = {.data = core_tensor_data(a)};
  memcpy(oa.strides, a->local.strides, sizeof(int64_t) * (size_t)a->local.ndim);
  return cuda_copy_cast(stream_of(o), (int)o->dtype, (int)a->dtype,
                        a->local.ndim, a->local.sizes, core_tensor_data(o), &oa)
             ? launch_failed(c) : DT_OK;
}

static bool dense(const dt_tensor *t) {
  return core_layout_is_contiguous(t->local.sizes, t->local.strides,
                                   t->local.ndim);
}

/* [.., m, k] @ [.., k, n] with equal batch dims, both dense */
static dt_status cu_matmul(dt_op_call *c) {
  dt_tensor *o = c->out[0], *a = c->args[0].t, *b = c->args[1].t;
  int na = a->local.ndim, nb = b->local.ndim;
  if (na < 2 || na != nb || !dense(a) || !dense(b) || a->dtype != o->dtype ||
      b->dtype != o->dtype)
    return unsupported(c, "broadcast, 1-d, strided or mixed-dtype operands");
  int64_t batch = 1;
  for (int d = 0; d < na - 2; d++) {
    if (a->local.sizes[d] != b->local.sizes[d])
      return unsupported(c, "broadcast batch dims");
    batch *= a->local.sizes[d];
  }
  int64_t m = a->local.sizes[na - 2], k = a->local.sizes[na - 1],
          n = b->local.sizes[nb - 1];
  char why[256];
  if (cuda_gemm(cr_of(o), (int)o->dtype, batch, m, n, k, core_tensor_data(a),
                core_tensor_data(b), core_tensor_data(o), why, sizeof why))
    return core_error_set(DT_ERR_DEVICE, "%s: %s", c->api, why);
  return DT_OK;
}

/* x [.., in] @ weight [out, in]^T (+ bias [out]): cuBLAS reads the weight
 * transposed, then the bias is added in place */
static dt_status cu_linear(dt_op_call *c) {
  dt_tensor *o = c->out[0], *x = c->args[0].t, *w = c->args[1].t,
            *bias = c->args[2].t;
  if (x->local.ndim < 1 || w->local.ndim != 2 || !dense(x) || !dense(w) ||
      x->dtype != o->dtype || w->dtype != o->dtype ||
      (bias && bias->dtype != o->dtype))
    return unsupported(c, "a 1-d weight, strided or mixed-dtype operands");
  int64_t k = w->local.sizes[1], n = w->local.sizes[0];
  int64_t m = n ? core_numel(o) / n : 0;
  char why[256];
  if (m && n && !k && /* no inputs: the sums are 0 */
      cuda_fill(stream_of(o), (int)o->dtype, core_numel(o),
                core_tensor_data(o), 0))
    return launch_failed(c);
  if (m && n && k && cuda_gemm_nt(cr_of(o), (int)o->dtype, m, n, k,
                                  core_tensor_data(x), core_tensor_data(w),
                                  core_tensor_data(o), why, sizeof why))
    return core_error_set(DT_ERR_DEVICE, "%s: %s", c->api, why);
  if (!bias || !core_numel(o)) return DT_OK;
  cuda_operand oo = operand_of(o, o), ob = operand_of(bias, o);
  return cuda_binary(stream_of(o), CUDA_ADD, (int)o->dtype, o->local.ndim,
                     o->local.sizes, core_tensor_data(o), &oo, &ob)
             ? launch_failed(c) : DT_OK;
}

/* eq .. ge of one float dtype into bool */
static dt_status cu_compare(dt_op_call *c) {
  dt_tensor *o = c->out[0], *a = c->args[0].t, *b = c->args[1].t;
  if (a->dtype != b->dtype || !is_float(a->dtype) || o->dtype != DT_BOOL)
    return unsupported(c, "mixed or integer dtypes");
  cuda_operand oa = operand_of(a, o), ob = operand_of(b, o);
  return cuda_compare(stream_of(o), (int)(c->op - CORE_OP_EQ), (int)a->dtype,
                      o->local.ndim, o->local.sizes, core_tensor_data(o), &oa,
                      &ob)
             ? launch_failed(c) : DT_OK;
}

static dt_status cu_where(dt_op_call *c) {
  dt_tensor *o = c->out[0], *cond = c->args[0].t, *a = c->args[1].t,
            *b = c->args[2].t;
  if (cond->dtype != DT_BOOL || a->dtype != o->dtype || b->dtype != o->dtype)
    return unsupported(c, "a non-bool condition or mixed dtypes");
  cuda_operand oc = operand_of(cond, o), oa = operand_of(a, o),
               ob = operand_of(b, o);
  return cuda_where(stream_of(o), (int)o->dtype, o->local.ndim,
                    o->local.sizes, core_tensor_data(o), &oc, &oa, &ob)
             ? launch_failed(c) : DT_OK;
}

static dt_status cu_clamp(dt_op_call *c) {
  dt_tensor *o = c->out[0], *a = c->args[0].t;
  if (a->dtype != o->dtype || !is_float(o->dtype))
    return unsupported(c, "integer dtypes");
  cuda_operand oa = operand_of(a, o);
  return cuda_clamp(stream_of(o), (int)o->dtype, o->local.ndim,
                    o->local.sizes, core_tensor_data(o), &oa, c->args[1].d,
                    c->args[2].d)
             ? launch_failed(c) : DT_OK;
}

static dt_status cu_masked_fill(dt_op_call *c) {
  dt_tensor *o = c->out[0], *a = c->args[0].t, *m = c->args[1].t;
  if (a->dtype != o->dtype || m->dtype != DT_BOOL)
    return unsupported(c, "mixed dtypes");
  cuda_operand oa = operand_of(a, o), om = operand_of(m, o);
  return cuda_masked_fill(stream_of(o), (int)o->dtype, o->local.ndim,
                          o->local.sizes, core_tensor_data(o), &oa, &om,
                          c->args[2].d)
             ? launch_failed(c) : DT_OK;
}

/* stack(list, dim): input i copied into index i of the new dim */
static dt_status cu_stack(dt_op_call *c) {
  dt_tensor *o = c->out[0];
  int n = o->local.ndim, d;
  dt_status st = ops_wrap_dim(c, "dim", c->args[1].i, n, &d);
  if (st != DT_OK) return st;
  size_t es = core_dtype_size(o->dtype);
  for (int i = 0; i < c->args[0].list.n; i++) {
    const dt_tensor *a = c->args[0].list.v[i];
    if (a->local.ndim != n - 1) return unsupported(c, "this input");
    cuda_operand so = {.data = (char *)core_tensor_data(o) +
                               (size_t)i * (size_t)o->local.strides[d] * es},
                 sa = {.data = core_tensor_data(a)};
    for (int k = 0, j = 0; k < n; k++)
      if (k != d) so.strides[j++] = o->local.strides[k];
    memcpy(sa.strides, a->local.strides, sizeof(int64_t) * (size_t)(n - 1));
    if (core_numel(a) &&
        cuda_copy_strided(stream_of(o), (int)o->dtype, (int)a->dtype, n - 1,
                          a->local.sizes, &so, &sa))
      return launch_failed(c);
  }
  return DT_OK;
}

static dt_status cu_arange(dt_op_call *c) {
  dt_tensor *o = c->out[0];
  return cuda_arange(stream_of(o), (int)o->dtype, core_numel(o),
                     core_tensor_data(o), c->args[0].d, c->args[2].d)
             ? launch_failed(c) : DT_OK;
}

static dt_status cu_logical(dt_op_call *c) {
  dt_tensor *o = c->out[0], *a = c->args[0].t;
  dt_tensor *b = c->op == CORE_OP_LOGICAL_NOT ? NULL : c->args[1].t;
  if (o->dtype != DT_BOOL || (b && b->dtype != a->dtype))
    return unsupported(c, "mixed dtypes");
  cuda_operand oa = operand_of(a, o), ob = b ? operand_of(b, o) : oa;
  int op = c->op == CORE_OP_LOGICAL_AND ? 0 : c->op == CORE_OP_LOGICAL_OR ? 1 : 2;
  return cuda_logical(stream_of(o), op, (int)a->dtype, o->local.ndim,
                      o->local.sizes, core_tensor_data(o), &oa, b ? &ob : NULL)
             ? launch_failed(c) : DT_OK;
}

/* slice_scatter (autograd's slice backward): zeros, then src into the
 * slice [start, end) by step of dim */
static dt_status cu_slice_scatter(dt_op_call *c) {
  dt_tensor *o = c->out[0], *src = c->args[0].t;
  int n = o->local.ndim, d;
  dt_status st = ops_wrap_dim(c, "dim", c->args[2].i, n, &d);
  if (st != DT_OK) return st;
  if (cuda_fill(stream_of(o), (int)o->dtype, core_numel(o),
                core_tensor_data(o), 0))
    return launch_failed(c);
  if (!core_numel(src)) return DT_OK;
  int64_t start = c->args[3].i, step = c->args[5].i;
  ops_slice_len(o->local.sizes[d], &start, c->args[4].i, step);
  cuda_operand so = {.data = (char *)core_tensor_data(o) +
                             (size_t)(start * o->local.strides[d]) *
                                 core_dtype_size(o->dtype)},
               ss = {.data = core_tensor_data(src)};
  memcpy(so.strides, o->local.strides, sizeof(int64_t) * (size_t)n);
  so.strides[d] *= step;
  memcpy(ss.strides, src->local.strides, sizeof(int64_t) * (size_t)n);
  return cuda_copy_strided(stream_of(o), (int)o->dtype, (int)src->dtype, n,
                           src->local.sizes, &so, &ss)
             ? launch_failed(c) : DT_OK;
}

/* After a kernel that marked the first bad index in the device word `bad`
 * (all ones: none): *pos = its position (-1 if none) and *val the index
 * there (idx's element pos * istride), read back while the rank waits for
 * its stream (these ops' callers wait for their outputs anyway, to report
 * a bad index as the CPU does). */
static dt_status read_bad_index(dt_op_call *c, const void *bad,
                                const dt_tensor *idx, int64_t istride,
                                int64_t *pos, int64_t *val) {
  dt_tensor *o = c->out[0];
  dt_runtime *rt = rt_of(o);
  int rank = rank_of(o);
  const runtime_backend *be = rt->backend;
  uint64_t flag = UINT64_MAX;
  *pos = -1;
  dt_status st = be->copy(rt, rank, &flag, bad, sizeof flag, RUNTIME_COPY_D2H);
  if (st == DT_OK) st = be->stream_sync(rt, rank);
  if (st != DT_OK || flag == UINT64_MAX) return st;
  bool i64 = idx->dtype == DT_INT64;
  int64_t v64 = 0;
  int32_t v32 = 0;
  *pos = (int64_t)flag;
  const char *at = (const char *)core_tensor_data(idx) +
                   (size_t)(*pos * istride) * core_dtype_size(idx->dtype);
  st = be->copy(rt, rank, i64 ? (void *)&v64 : (void *)&v32, at, i64 ? 8 : 4,
                RUNTIME_COPY_D2H);
  if (st == DT_OK) st = be->stream_sync(rt, rank);
  *val = i64 ? v64 : v32;
  return st;
}

/* Gathers along dim (embedding, index_select): the kernel marks the first
 * bad index in a device word, read back here (the rank waits for its
 * stream: these ops' callers wait for their outputs anyway, to report a
 * bad index as the CPU does). *pos = -1 when every index was in range. */
static dt_status gather(dt_op_call *c, int ndim, const int64_t *sizes,
                        const cuda_operand *a, int dim, int64_t a_dim,
                        const dt_tensor *idx, int64_t istride, int64_t *pos,
                        int64_t *val) {
  dt_tensor *o = c->out[0];
  dt_runtime *rt = rt_of(o);
  int rank = rank_of(o);
  const runtime_backend *be = rt->backend;
  const char *err;
  void *bad = be->alloc(rt, rank, sizeof(uint64_t), &err);
  if (!bad) return core_error_set(DT_ERR_OUT_OF_MEMORY, "%s: %s", c->api, err);
  dt_status st = DT_OK;
  *pos = -1;
  if (cuda_fill(stream_of(o), (int)DT_INT64, 1, bad, -1) ||
      cuda_index_select(stream_of(o), (int)o->dtype, ndim, sizes,
                        core_tensor_data(o), a, dim, a_dim,
                        core_tensor_data(idx), idx->dtype == DT_INT64,
                        istride, bad))
    st = launch_failed(c);
  if (st == DT_OK) st = read_bad_index(c, bad, idx, istride, pos, val);
  be->free(rt, rank, bad);
  return st;
}

/* embedding(indices, weight [V, D]): rows of the table; a row-sharded
 * table (vocabulary parallel) is the host fallback's */
static dt_status cu_embedding(dt_op_call *c) {
  dt_tensor *o = c->out[0], *idx = c->args[0].t, *w = c->args[1].t;
  if (w->local.ndim != 2 || w->dtype != o->dtype || !dense(idx) ||
      (c->shard && w->local.sizes[0] != c->shard->global[1].dims[0]))
    return unsupported(c, "a sharded table or strided indices");
  int64_t n = core_numel(idx), sizes[2] = {n, w->local.sizes[1]};
  cuda_operand a = {.data = core_tensor_data(w),
                    .strides = {w->local.strides[0], w->local.strides[1]}};
  int64_t pos, val;
  dt_status st = gather(c, 2, sizes, &a, 0, w->local.sizes[0], idx, 1, &pos,
                        &val);
  if (st == DT_OK && pos >= 0)
    st = core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: index %lld (position "
                        "%lld of indices) is out of range for a table of "
                        "%lld rows (expected [0, %lld))", c->api,
                        (long long)val, (long long)pos,
                        (long long)w->local.sizes[0],
                        (long long)w->local.sizes[0]);
  return st;
}

/* index_select's and its backward's bad index, in the CPU's words */
static dt_status index_error(const dt_op_call *c, int64_t val, int64_t pos,
                             int d, int64_t size) {
  return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: index %lld (position "
                        "%lld of index) is out of range for dim %d of size "
                        "%lld (expected [0, %lld))", c->api, (long long)val,
                        (long long)pos, d, (long long)size, (long long)size);
}

static dt_status cu_index_select(dt_op_call *c) {
  dt_tensor *o = c->out[0], *a = c->args[0].t, *idx = c->args[2].t;
  int n = a->local.ndim, d;
  dt_status st = ops_wrap_dim(c, "dim", c->args[1].i, n ? n : 1, &d);
  if (st != DT_OK) return st;
  if (a->dtype != o->dtype || idx->local.ndim > 1)
    return unsupported(c, "this index");
  int nd = n ? n : 1;
  int64_t sizes[CUDA_MAX_DIMS];
  cuda_operand oa = {.data = core_tensor_data(a)};
  for (int k = 0; k < nd; k++) {
    sizes[k] = n ? a->local.sizes[k] : 1;
    oa.strides[k] = n ? a->local.strides[k] : 1;
  }
  int64_t a_dim = sizes[d];
  sizes[d] = core_numel(idx);
  int64_t istride = idx->local.ndim ? idx->local.strides[0] : 1, pos, val;
  st = gather(c, nd, sizes, &oa, d, a_dim, idx, istride, &pos, &val);
  return st == DT_OK && pos >= 0 ? index_error(c, val, pos, d, a_dim) : st;
}

/* cross_entropy's and its backward's bad target, in the CPU's words */
static dt_status target_error(const dt_op_call *c, int64_t val, int64_t pos,
                              int64_t nc, int64_t ignore) {
  return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: target %lld (position "
                        "%lld) is out of range for %lld classes (expected "
                        "[0, %lld) or ignore_index %lld)", c->api,
                        (long long)val, (long long)pos, (long long)nc,
                        (long long)nc, (long long)ignore);
}

/* cross_entropy of [N, C] or [C] logits with class-index targets on one
 * rank's whole positions; probability targets, more dims and a DTensor
 * rank's share (its global mean) are the host fallback's. A bad target is
 * read back (the rank waits) for the CPU's error. */
static dt_status cu_cross_entropy(dt_op_call *c) {
  dt_tensor *o = c->out[0], *x = c->args[0].t, *t = c->args[1].t;
  int nx = x->local.ndim;
  if (c->shard || core_dtype_is_float(t->dtype) || nx > 2 ||
      x->dtype != o->dtype || !is_float(x->dtype))
    return unsupported(c, "probability targets, more than 2 dims or a "
                       "DTensor shard");
  int64_t m = nx == 2 ? x->local.sizes[0] : 1;
  int64_t nc = x->local.sizes[nx - 1];
  int64_t rs = nx == 2 ? x->local.strides[0] : 0, cs = x->local.strides[nx - 1];
  int64_t ts = t->local.ndim ? t->local.strides[0] : 0;
  int64_t os = o->local.ndim ? o->local.strides[0] : 0;
  dt_runtime *rt = rt_of(o);
  int rank = rank_of(o);
  const runtime_backend *be = rt->backend;
  const char *err;
  size_t bytes = (size_t)m * 16 + 8;
  char *scratch = be->alloc(rt, rank, bytes, &err);
  if (!scratch)
    return core_error_set(DT_ERR_OUT_OF_MEMORY, "%s: %s", c->api, err);
  dt_status st = DT_OK;
  char *bad = scratch + (size_t)m * 16;
  int64_t pos = -1, val = 0;
  if (cuda_fill(stream_of(o), (int)DT_INT64, 1, bad, -1) ||
      cuda_cross_entropy(stream_of(o), (int)x->dtype, t->dtype == DT_INT64, m,
                         nc, rs, cs, core_tensor_data(x), core_tensor_data(t),
                         ts, c->args[3].i, c->args[4].d, (int)c->args[2].i,
                         core_tensor_data(o), os, scratch))
    st = launch_failed(c);
  if (st == DT_OK) st = read_bad_index(c, bad, t, ts, &pos, &val);
  if (st == DT_OK && pos >= 0) st = target_error(c, val, pos, nc, c->args[3].i);
  be->free(rt, rank, scratch);
  return st;
}

/* device scratch of the rank whose first 8 bytes hold all ones (a bad
 * index word); NULL + the error when it does not fit */
static void *bad_scratch(dt_op_call *c, size_t bytes, size_t bad_at) {
  dt_tensor *o = c->out[0];
  dt_runtime *rt = rt_of(o);
  const char *err;
  char *p = rt->backend->alloc(rt, rank_of(o), bytes, &err);
  if (!p) {
    core_error_set(DT_ERR_OUT_OF_MEMORY, "%s: %s", c->api, err);
    return NULL;
  }
  if (cuda_fill(stream_of(o), (int)DT_INT64, 1, p + bad_at, -1)) {
    rt->backend->free(rt, rank_of(o), p);
    launch_failed(c);
    return NULL;
  }
  return p;
}

/* index_select_backward(grad, dim, index, size): zeros, then index_add
 * in index order (the CPU's bits, kernels/cuda/grad.cu); every index is
 * checked, also when the output is empty */
static dt_status cu_index_select_backward(dt_op_call *c) {
  dt_tensor *o = c->out[0], *g = c->args[0].t, *idx = c->args[2].t;
  int n = o->local.ndim, d;
  dt_status st = ops_wrap_dim(c, "dim", c->args[1].i, n ? n : 1, &d);
  if (st != DT_OK) return st;
  if (g->dtype != o->dtype || !dense(g) || !dense(o) || !is_float(o->dtype))
    return unsupported(c, "a strided grad");
  int64_t outer = 1, inner = 1, size = n ? o->local.sizes[d] : 1;
  for (int k = 0; k < n; k++) {
    if (k < d) outer *= o->local.sizes[k];
    if (k > d) inner *= o->local.sizes[k];
  }
  int64_t ni = core_numel(idx), pos = -1, val = 0;
  int64_t istride = idx->local.ndim ? idx->local.strides[0] : 1;
  if (ni > INT32_MAX) /* CUB's sort counts items in an int */
    return unsupported(c, "more than 2^31 - 1 indices");
  if (core_numel(o) && cuda_fill(stream_of(o), (int)o->dtype, core_numel(o),
                                 core_tensor_data(o), 0))
    return launch_failed(c);
  char *scratch = bad_scratch(c, cuda_index_add_scratch(ni), 0);
  if (!scratch) return core_last_status();
  if (cuda_index_add(stream_of(o), (int)o->dtype, outer, size, inner,
                     core_tensor_data(o), core_tensor_data(g), ni,
                     core_tensor_data(idx), idx->dtype == DT_INT64, istride,
                     scratch))
    st = launch_failed(c);
  if (st == DT_OK) st = read_bad_index(c, scratch, idx, istride, &pos, &val);
  rt_of(o)->backend->free(rt_of(o), rank_of(o), scratch);
  return st == DT_OK && pos >= 0 ? index_error(c, val, pos, d, size) : st;
}

/* cross_entropy_backward(grad, input, target, reduction, ignore_index,
 * label_smoothing) for [N, C] / [C] logits with class-index targets on one
 * rank's whole positions, as cu_cross_entropy; the rest is the host
 * fallback's */
static dt_status cu_cross_entropy_backward(dt_op_call *c) {
  dt_tensor *o = c->out[0], *g = c->args[0].t, *x = c->args[1].t,
            *t = c->args[2].t;
  int nx = x->local.ndim;
  if (c->shard || core_dtype_is_float(t->dtype) || nx > 2 ||
      x->dtype != o->dtype || g->dtype != o->dtype || !is_float(x->dtype))
    return unsupported(c, "probability targets, more than 2 dims, mixed "
                       "dtypes or a DTensor shard");
  int64_t m = nx == 2 ? x->local.sizes[0] : 1, nc = x->local.sizes[nx - 1];
  int64_t ts = t->local.ndim ? t->local.strides[0] : 0;
  int64_t gs = g->local.ndim ? g->local.strides[0] : 0;
  int64_t red = c->args[3].i, pos = -1, val = 0;
  char *scratch = bad_scratch(c, 16, 8);
  if (!scratch) return core_last_status();
  dt_status st = DT_OK;
  if (cuda_cross_entropy_backward(
          stream_of(o), (int)x->dtype, t->dtype == DT_INT64, m, nc,
          nx == 2 ? x->local.strides[0] : 0, x->local.strides[nx - 1],
          core_tensor_data(x), core_tensor_data(t), ts, c->args[4].i,
          c->args[5].d, red == DT_REDUCTION_MEAN ? 0
                        : red == DT_REDUCTION_SUM ? 1 : 2,
          core_tensor_data(g), gs, core_tensor_data(o),
          nx == 2 ? o->local.strides[0] : 0, o->local.strides[nx - 1],
          scratch))
    st = launch_failed(c);
  if (st == DT_OK) st = read_bad_index(c, scratch + 8, t, ts, &pos, &val);
  rt_of(o)->backend->free(rt_of(o), rank_of(o), scratch);
  if (st == DT_OK && pos >= 0) st = target_error(c, val, pos, nc, c->args[4].i);
  return st;
}

/* the optimiser's fused updates: dense operands of the output's dtype */
static bool dense_like(const dt_tensor *t, const dt_tensor *o) {
  return t->dtype == o->dtype && dense(t);
}

static dt_status cu_adam_moment(dt_op_call *c) {
  dt_tensor *o = c->out[0], *buf = c->args[0].t, *x = c->args[1].t;
  if (!is_float(o->dtype) || !dense_like(buf, o) || !dense_like(x, o))
    return unsupported(c, "strided or mixed-dtype operands");
  return cuda_adam_moment(stream_of(o), (int)o->dtype, core_numel(o),
                          core_tensor_data(o), core_tensor_data(buf),
                          core_tensor_data(x), c->args[2].d, c->args[3].b)
             ? launch_failed(c) : DT_OK;
}

static dt_status cu_adamw_apply(dt_op_call *c) {
  dt_tensor *o = c->out[0], *p = c->args[0].t, *m = c->args[1].t,
            *v = c->args[2].t;
  if (!is_float(o->dtype) || !dense_like(p, o) || !dense_like(m, o) ||
      !dense_like(v, o))
    return unsupported(c, "strided or mixed-dtype operands");
  return cuda_adamw_apply(stream_of(o), (int)o->dtype, core_numel(o),
                          core_tensor_data(o), core_tensor_data(p),
                          core_tensor_data(m), core_tensor_data(v),
                          c->args[3].d, c->args[4].d, c->args[5].d)
             ? launch_failed(c) : DT_OK;
}

/* cuda_reduce's op codes follow the op list's order */
_Static_assert(CORE_OP_MEAN == CORE_OP_SUM + 1 && CORE_OP_AMAX == CORE_OP_SUM + 2 &&
               CORE_OP_AMIN == CORE_OP_SUM + 3 && CORE_OP_PROD == CORE_OP_SUM + 4,
               "sum, mean, amax, amin, prod in order");

/* the reduced dims of args[1] as a mask (none: all of them) */
static uint32_t reduced_mask(dt_op_call *c, const dt_tensor *a) {
  dt_shape dims = c->args[1].ints;
  int n = a->local.ndim;
  uint32_t mask = dims.ndim ? 0 : (uint32_t)((1ull << n) - 1);
  for (int i = 0; i < dims.ndim; i++) { /* infer checked them */
    int d = 0;
    (void)ops_wrap_dim(c, "dim", dims.dims[i], n, &d);
    mask |= 1u << d;
  }
  return mask;
}

static dt_status cu_var(dt_op_call *c) {
  dt_tensor *o = c->out[0], *a = c->args[0].t;
  if (a->dtype != o->dtype || !is_float(a->dtype))
    return unsupported(c, "integer dtypes");
  cuda_rows g = rows_of(a, reduced_mask(c, a), false);
  return cuda_var(stream_of(o), (int)o->dtype, &g, c->args[2].b ? 1 : 0,
                  core_tensor_data(o), core_tensor_data(a))
             ? launch_failed(c) : DT_OK;
}

static dt_status cu_argext(dt_op_call *c) {
  dt_tensor *o = c->out[0], *a = c->args[0].t;
  if (!is_float(a->dtype) || o->dtype != DT_INT64)
    return unsupported(c, "integer dtypes");
  cuda_rows g = rows_of(a, reduced_mask(c, a), false);
  return cuda_argext(stream_of(o), c->op == CORE_OP_ARGMAX, (int)a->dtype, &g,
                     core_tensor_data(o), core_tensor_data(a))
             ? launch_failed(c) : DT_OK;
}

static dt_status cu_reduce(dt_op_call *c) {
  dt_tensor *o = c->out[0], *a = c->args[0].t;
  if (a->dtype != o->dtype || !is_float(a->dtype))
    return unsupported(c, "integer dtypes");
  uint32_t mask = reduced_mask(c, a);
  cuda_rows g = rows_of(a, mask, false);
  if (cuda_reduce(stream_of(o), (int)(c->op - CORE_OP_SUM), (int)o->dtype,
                  &g, core_tensor_data(o), core_tensor_data(a)))
    return launch_failed(c);
  if (c->op != CORE_OP_MEAN || !c->shard) return DT_OK;
  /* a rank's part of a DTensor mean over a sharded dim: its local mean
   * times local / global count (the shares sum to the global mean, the
   * output being P(sum)), as the CPU's ops_reduce_cpu */
  double local = 1, global = 1;
  for (int d = 0; d < a->local.ndim; d++)
    if (mask >> d & 1) {
      local *= (double)a->local.sizes[d];
      global *= (double)c->shard->global[0].dims[d];
    }
  if (local == global || global <= 0) return DT_OK;
  cuda_operand oo = operand_of(o, o);
  return cuda_scalar(stream_of(o), CUDA_MUL, (int)o->dtype, o->local.ndim,
                     o->local.sizes, core_tensor_data(o), &oo, local / global)
             ? launch_failed(c) : DT_OK;
}

static dt_status cu_softmax(dt_op_call *c) {
  dt_tensor *o = c->out[0], *a = c->args[0].t;
  int d;
  dt_status st = ops_wrap_dim(c, "dim", c->args[1].i, a->local.ndim, &d);
  if (st != DT_OK) return st;
  if (a->dtype != o->dtype || !is_float(a->dtype))
    return unsupported(c, "mixed dtypes");
  cuda_rows g = rows_of(a, a->local.ndim ? 1u << d : 0, true);
  return cuda_softmax(stream_of(o), c->op == CORE_OP_LOG_SOFTMAX,
                      (int)o->dtype, &g, core_tensor_data(o),
                      core_tensor_data(a))
             ? launch_failed(c) : DT_OK;
}

/* layer_norm (x, w, b, eps) and rms_norm (x, w, eps) over the last dim */
static dt_status cu_norm(dt_op_call *c) {
  bool rms = c->op == CORE_OP_RMS_NORM;
  dt_tensor *o = c->out[0], *x = c->args[0].t, *w = c->args[1].t,
            *b = rms ? NULL : c->args[2].t;
  double eps = c->args[rms ? 2 : 3].d;
  if (x->dtype != o->dtype || !is_float(x->dtype) || x->local.ndim < 1 ||
      (w && (w->dtype != x->dtype || !dense(w))) ||
      (b && (b->dtype != x->dtype || !dense(b))))
    return unsupported(c, "mixed dtypes, strided weights or 0-d inputs");
  cuda_rows g = rows_of(x, 1u << (x->local.ndim - 1), true);
  return cuda_norm(stream_of(o), rms, (int)o->dtype, &g, core_tensor_data(o),
                   core_tensor_data(x), w ? core_tensor_data(w) : NULL,
                   b ? core_tensor_data(b) : NULL, eps)
             ? launch_failed(c) : DT_OK;
}

/* dropout(x, p, train, seed, offset): the CPU backend's mask */
static dt_status cu_dropout(dt_op_call *c) {
  dt_tensor *o = c->out[0], *a = c->args[0].t;
  double p = c->args[1].d;
  if (a->dtype != o->dtype || !is_float(a->dtype))
    return unsupported(c, "integer dtypes");
  if (c->shard) return unsupported(c, "DTensor shards");
  if (!c->args[2].b || p == 0.0) return cu_copy(c);
  if (p == 1.0)
    return cuda_fill(stream_of(o), (int)o->dtype, core_numel(o),
                     core_tensor_data(o), 0.0) ? launch_failed(c) : DT_OK;
  cuda_operand oa = operand_of(a, o);
  return cuda_dropout(stream_of(o), (int)o->dtype, o->local.ndim,
                      o->local.sizes, core_tensor_data(o), &oa, p,
                      (uint64_t)c->args[3].i, (uint64_t)c->args[4].i)
             ? launch_failed(c) : DT_OK;
}

/* cat(list, dim): each input copied into its slice of the output */
static dt_status cu_cat(dt_op_call *c) {
  dt_tensor *o = c->out[0];
  int n = o->local.ndim, d;
  dt_status st = ops_wrap_dim(c, "dim", c->args[1].i, n, &d);
  if (st != DT_OK) return st;
  int64_t at = 0;
  for (int i = 0; i < c->args[0].list.n; i++) {
    const dt_tensor *a = c->args[0].list.v[i];
    if (a->local.ndim != n) continue; /* PyTorch's legacy empty 1-d input */
    cuda_operand so = {.data = (char *)core_tensor_data(o) +
                               at * o->local.strides[d] *
                                   (int64_t)core_dtype_size(o->dtype)},
                 sa = {.data = core_tensor_data(a)};
    memcpy(so.strides, o->local.strides, sizeof(int64_t) * (size_t)n);
    memcpy(sa.strides, a->local.strides, sizeof(int64_t) * (size_t)n);
    if (cuda_copy_strided(stream_of(o), (int)o->dtype, (int)a->dtype, n,
                          a->local.sizes, &so, &sa))
      return launch_failed(c);
    at += a->local.sizes[d];
  }
  return DT_OK;
}

static core_kernel_fn cuda_kernels[CORE_OP_COUNT];

void ops_cuda_register(void) {
  for (int op = 0; op < CORE_OP_COUNT; op++) /* views run no kernel */
    if (ops_defs[op].cpu == ops_alias_cpu) cuda_kernels[op] = ops_alias_cpu;
  static const struct { core_op_id op; core_kernel_fn fn; } bound[] = {
      {CORE_OP_EMPTY, cu_empty}, {CORE_OP_FULL, cu_full},
      {CORE_OP_RAND, cu_random}, {CORE_OP_RANDN, cu_random},
      {CORE_OP_FROM_HOST, cu_from_host},
      {CORE_OP_ADD, cu_binary}, {CORE_OP_SUB, cu_binary},
      {CORE_OP_MUL, cu_binary}, {CORE_OP_DIV, cu_binary},
      {CORE_OP_MAXIMUM, cu_binary}, {CORE_OP_MINIMUM, cu_binary},
      {CORE_OP_ADD_SCALAR, cu_scalar}, {CORE_OP_SUB_SCALAR, cu_scalar},
      {CORE_OP_MUL_SCALAR, cu_scalar},
      {CORE_OP_NEG, cu_unary}, {CORE_OP_EXP, cu_unary},
      {CORE_OP_LOG, cu_unary}, {CORE_OP_SQRT, cu_unary},
      {CORE_OP_TANH, cu_unary}, {CORE_OP_SIGMOID, cu_unary},
      {CORE_OP_RELU, cu_unary}, {CORE_OP_SILU, cu_unary},
      {CORE_OP_GELU, cu_unary}, {CORE_OP_CAST, cu_copy},
      {CORE_OP_RESHAPE, cu_copy}, {CORE_OP_FLATTEN, cu_copy},
      {CORE_OP_CONTIGUOUS, cu_copy}, {CORE_OP_CLONE, cu_copy},
      {CORE_OP_MATMUL, cu_matmul},
      {CORE_OP_SUM, cu_reduce}, {CORE_OP_MEAN, cu_reduce},
      {CORE_OP_AMAX, cu_reduce}, {CORE_OP_AMIN, cu_reduce},
      {CORE_OP_PROD, cu_reduce},
      {CORE_OP_SOFTMAX, cu_softmax}, {CORE_OP_LOG_SOFTMAX, cu_softmax},
      {CORE_OP_LAYER_NORM, cu_norm}, {CORE_OP_RMS_NORM, cu_norm},
      {CORE_OP_DROPOUT, cu_dropout}, {CORE_OP_CAT, cu_cat},
      {CORE_OP_DIV_SCALAR, cu_scalar}, {CORE_OP_GELU_BACKWARD, cu_binary},
      {CORE_OP_POW_SCALAR, cu_scalar}, {CORE_OP_FLOOR_DIVIDE_SCALAR, cu_scalar},
      {CORE_OP_REMAINDER_SCALAR, cu_scalar}, {CORE_OP_POW, cu_binary},
      {CORE_OP_FLOOR_DIVIDE, cu_binary}, {CORE_OP_REMAINDER, cu_binary},
      {CORE_OP_ABS, cu_unary}, {CORE_OP_RSQRT, cu_unary},
      {CORE_OP_SIN, cu_unary}, {CORE_OP_COS, cu_unary},
      {CORE_OP_GELU_TANH, cu_unary}, {CORE_OP_LINEAR, cu_linear},
      {CORE_OP_EQ, cu_compare}, {CORE_OP_NE, cu_compare},
      {CORE_OP_LT, cu_compare}, {CORE_OP_LE, cu_compare},
      {CORE_OP_GT, cu_compare}, {CORE_OP_GE, cu_compare},
      {CORE_OP_WHERE, cu_where}, {CORE_OP_ADAM_MOMENT, cu_adam_moment},
      {CORE_OP_ADAMW_APPLY, cu_adamw_apply}, {CORE_OP_CLAMP, cu_clamp},
      {CORE_OP_MASKED_FILL, cu_masked_fill}, {CORE_OP_STACK, cu_stack},
      {CORE_OP_VAR, cu_var}, {CORE_OP_ARGMAX, cu_argext},
      {CORE_OP_ARGMIN, cu_argext}, {CORE_OP_ARANGE, cu_arange},
      {CORE_OP_LOGICAL_AND, cu_logical}, {CORE_OP_LOGICAL_OR, cu_logical},
      {CORE_OP_LOGICAL_NOT, cu_logical},
      {CORE_OP_SLICE_SCATTER, cu_slice_scatter},
      {CORE_OP_EMBEDDING, cu_embedding}, {CORE_OP_INDEX_SELECT, cu_index_select},
      {CORE_OP_CROSS_ENTROPY, cu_cross_entropy},
      {CORE_OP_INDEX_SELECT_BACKWARD, cu_index_select_backward},
      {CORE_OP_CROSS_ENTROPY_BACKWARD, cu_cross_entropy_backward},
  };
  for (size_t i = 0; i < sizeof bound / sizeof *bound; i++)
    cuda_kernels[bound[i].op] = bound[i].fn;
  runtime_backend_set_kernels(CORE_KEY_CUDA, cuda_kernels);
}

#else
void ops_cuda_register(void) {}
#endif
