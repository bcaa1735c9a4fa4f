/* Prototypes of every op's infer and CPU kernel, generated from the op list,
 * plus helpers shared by the op files. */
#ifndef DT_OPS_OPS_H
#define DT_OPS_OPS_H

#include "kernels/cpu/cpu.h"
#include "runtime/dispatch.h"
#include "runtime/error.h"
#include "runtime/tensor.h"

#define DT_OP(id, name, schema, infer, cpu)                                 \
  dt_status infer(dt_op_call *c);                                           \
  dt_status cpu(dt_op_call *c);
#include "runtime/op_table.h"
#undef DT_OP

/* A kernel-side view of a tensor: pointer to its first element, sizes and
 * strides in elements, dtype. */
static inline cpu_view ops_view_of(const dt_tensor *t) {
  cpu_view v = {0}; /* dims past ndim zeroed: the struct is copied around */
  v.data = dt_tensor_data(t);
  v.dtype = t->dtype;
  v.ndim = t->local.ndim;
  for (int i = 0; i < v.ndim; i++) {
    v.sizes[i] = t->local.sizes[i];
    v.strides[i] = t->local.strides[i];
  }
  return v;
}

/* Sets meta[0] to a fresh output of dtype and shape. */
static inline void ops_meta_set(dt_meta *m, dt_dtype dtype, int ndim,
                                const int64_t *sizes) {
  m->dtype = dtype;
  m->ndim = ndim;
  for (int i = 0; i < ndim; i++) m->sizes[i] = sizes[i];
  m->alias = -1;
  m->offset = 0;
}

/* Broadcasts two shapes (PyTorch rules) into out; error names c->api. */
dt_status ops_broadcast_shapes(const dt_op_call *c, const int64_t *a, int na,
                               const int64_t *b, int nb, int64_t *out,
                               int *nout);
/* Normalises dim for a tensor of ndim dims; error names c->api and arg. */
dt_status ops_wrap_dim(const dt_op_call *c, const char *arg, int64_t dim,
                       int ndim, int *out);

#endif
