/* Inputs of the op-case tables (op_cases.h). */
#include "op_cases.h"

#include <stdlib.h>

#include "testutil.h"

int64_t tu_shape_numel(dt_shape s) {
  int64_t n = 1;
  for (int i = 0; i < s.ndim; i++) n *= s.dims[i];
  return n;
}

double *tu_case_values(const tu_in_spec *in, uint64_t seed) {
  int64_t n = tu_shape_numel(in->shape);
  double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
  switch (in->values) {
  case TU_V_POS: tu_fill_random(v, n, in->dtype, seed, 0.5, 2.5); break;
  case TU_V_NONZERO:
    tu_fill_random(v, n, in->dtype, seed, 0.5, 3.0);
    for (int64_t i = 0; i < n; i += 2) v[i] = -v[i];
    break;
  case TU_V_INDEX: tu_fill_random(v, n, in->dtype, seed, 0, (double)in->range - 1); break;
  case TU_V_BOOL: tu_fill_random(v, n, in->dtype, seed, 0, 1); break;
  case TU_V_SMALLINT: tu_fill_random(v, n, in->dtype, seed, -6, 6); break;
  case TU_V_SPREAD:
    for (int64_t i = 0; i < n; i++)
      v[i] = -2.0 + 0.173 * (double)(((uint64_t)i * 7 + seed) % 23) + 0.01;
    break;
  default: tu_fill_random(v, n, in->dtype, seed, -2.0, 2.0); break;
  }
  return v;
}

dt_tensor *tu_case_tensor(const double *v, const tu_in_spec *in, dt_mesh *m,
                          const dt_placement *pl, bool requires_grad) {
  int64_t n = tu_shape_numel(in->shape);
  size_t es = dt_dtype_size(in->dtype);
  char *raw = malloc(es * (size_t)(n ? n : 1));
  for (int64_t i = 0; i < n; i++) tu_encode(raw + (size_t)i * es, in->dtype, v[i]);
  bool fl = in->dtype == DT_FLOAT16 || in->dtype == DT_BFLOAT16 ||
            in->dtype == DT_FLOAT32 || in->dtype == DT_FLOAT64;
  dt_tensor_options o = {.dtype = in->dtype, .mesh = m, .placements = pl,
                         .requires_grad = requires_grad && fl};
  dt_tensor *t = dt_from_host(raw, in->shape, &o);
  free(raw);
  if (!t) fail_msg("dt_from_host: %s", dt_last_error());
  return t;
}
