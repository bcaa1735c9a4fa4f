/* Inputs of the op-case tables shared by the sweeps over every op
 * (test_sharding_props.c, test_autograd.c): what kind of values an input
 * takes, its host values, and a (D)tensor of them. */
#ifndef TESTS_SUPPORT_OP_CASES_H
#define TESTS_SUPPORT_OP_CASES_H

#include <stdbool.h>
#include <stdint.h>

#include "dtorch/dtorch.h"

enum {
  TU_V_ANY,      /* uniform in [-2, 2] */
  TU_V_POS,      /* [0.5, 2.5] */
  TU_V_NONZERO,  /* |v| in [0.5, 3], alternating signs */
  TU_V_INDEX,    /* integers in [0, range) */
  TU_V_BOOL,
  TU_V_SMALLINT, /* integers in [-6, 6] */
  TU_V_SPREAD,   /* a grid 0.173 apart: no two equal, none near 0 (kinks
                    of relu, abs, max stay farther than a finite-difference
                    step) */
};
typedef struct tu_in_spec { dt_dtype dtype; dt_shape shape; int values; int64_t range; } tu_in_spec;

int64_t tu_shape_numel(dt_shape s);
/* malloc'd values for in (deterministic in seed) */
double *tu_case_values(const tu_in_spec *in, uint64_t seed);
/* a tensor of in's dtype and shape holding v: on mesh m with placements pl
 * (m NULL: single device), requiring grad if asked and floating; fails the
 * test if it cannot be made */
dt_tensor *tu_case_tensor(const double *v, const tu_in_spec *in, dt_mesh *m,
                          const dt_placement *pl, bool requires_grad);

#endif
