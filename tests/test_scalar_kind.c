/* Scalar kinds (dtorch.h, dt_add_scalar_typed): the result dtype and the
 * values of tensor ⊕ scalar for every scalar form, four tensor dtypes and
 * Python int / float / bool scalars, against a table recorded from real
 * PyTorch (the rows are `t = torch.tensor([3, 0, 1]).to(dtype); t op s`,
 * s a Python int, float or bool; DT_DTYPE_COUNT: PyTorch raised). Then
 * the sharding cache: after a hit of one kind, the other kind on the same
 * specs gets its own dtype (both orders), on Replicate, Shard and Partial
 * inputs; and the kinds' own errors. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#define I_ DT_SCALAR_INT
#define F_ DT_SCALAR_FLOAT
#define B_ DT_SCALAR_BOOL

typedef struct row {
  const char *op;
  dt_dtype in;
  double s;
  dt_scalar_kind kind;
  dt_dtype want; /* DT_DTYPE_COUNT: an error */
  double v[3];
} row;

static const row rows[] = {
/* generated with PyTorch 2.15.0+cu132 */
  {"add", DT_FLOAT32, 2, I_, DT_FLOAT32, {5.0, 2.0, 3.0}},
  {"add", DT_FLOAT32, 2.0, F_, DT_FLOAT32, {5.0, 2.0, 3.0}},
  {"add", DT_FLOAT32, 1, B_, DT_FLOAT32, {4.0, 1.0, 2.0}},
  {"add", DT_FLOAT32, 0, B_, DT_FLOAT32, {3.0, 0.0, 1.0}},
  {"add", DT_FLOAT32, -3, I_, DT_FLOAT32, {0.0, -3.0, -2.0}},
  {"add", DT_FLOAT32, 4294967298.0, I_, DT_FLOAT32, {4294967296.0, 4294967296.0, 4294967296.0}},
  {"add", DT_FLOAT32, 0.5, F_, DT_FLOAT32, {3.5, 0.5, 1.5}},
  {"add", DT_INT32, 2, I_, DT_INT32, {5.0, 2.0, 3.0}},
  {"add", DT_INT32, 2.0, F_, DT_FLOAT32, {5.0, 2.0, 3.0}},
  {"add", DT_INT32, 1, B_, DT_INT32, {4.0, 1.0, 2.0}},
  {"add", DT_INT32, 0, B_, DT_INT32, {3.0, 0.0, 1.0}},
  {"add", DT_INT32, -3, I_, DT_INT32, {0.0, -3.0, -2.0}},
  {"add", DT_INT32, 4294967298.0, I_, DT_INT32, {5.0, 2.0, 3.0}},
  {"add", DT_INT32, 0.5, F_, DT_FLOAT32, {3.5, 0.5, 1.5}},
  {"add", DT_UINT8, 2, I_, DT_UINT8, {5.0, 2.0, 3.0}},
  {"add", DT_UINT8, 2.0, F_, DT_FLOAT32, {5.0, 2.0, 3.0}},
  {"add", DT_UINT8, 1, B_, DT_UINT8, {4.0, 1.0, 2.0}},
  {"add", DT_UINT8, 0, B_, DT_UINT8, {3.0, 0.0, 1.0}},
  {"add", DT_UINT8, -3, I_, DT_UINT8, {0.0, 253.0, 254.0}},
  {"add", DT_UINT8, 4294967298.0, I_, DT_UINT8, {5.0, 2.0, 3.0}},
  {"add", DT_UINT8, 0.5, F_, DT_FLOAT32, {3.5, 0.5, 1.5}},
  {"add", DT_BOOL, 2, I_, DT_INT64, {3.0, 2.0, 3.0}},
  {"add", DT_BOOL, 2.0, F_, DT_FLOAT32, {3.0, 2.0, 3.0}},
  {"add", DT_BOOL, 1, B_, DT_BOOL, {1.0, 1.0, 1.0}},
  {"add", DT_BOOL, 0, B_, DT_BOOL, {1.0, 0.0, 1.0}},
  {"add", DT_BOOL, -3, I_, DT_INT64, {-2.0, -3.0, -2.0}},
  {"add", DT_BOOL, 4294967298.0, I_, DT_INT64, {4294967299.0, 4294967298.0, 4294967299.0}},
  {"add", DT_BOOL, 0.5, F_, DT_FLOAT32, {1.5, 0.5, 1.5}},
  {"sub", DT_FLOAT32, 2, I_, DT_FLOAT32, {1.0, -2.0, -1.0}},
  {"sub", DT_FLOAT32, 2.0, F_, DT_FLOAT32, {1.0, -2.0, -1.0}},
  {"sub", DT_FLOAT32, 1, B_, DT_DTYPE_COUNT, {0}}, /* NotImplementedError */
  {"sub", DT_FLOAT32, 0, B_, DT_DTYPE_COUNT, {0}}, /* NotImplementedError */
  {"sub", DT_FLOAT32, -3, I_, DT_FLOAT32, {6.0, 3.0, 4.0}},
  {"sub", DT_FLOAT32, 4294967298.0, I_, DT_FLOAT32, {-4294967296.0, -4294967296.0, -4294967296.0}},
  {"sub", DT_FLOAT32, 0.5, F_, DT_FLOAT32, {2.5, -0.5, 0.5}},
  {"sub", DT_INT32, 2, I_, DT_INT32, {1.0, -2.0, -1.0}},
  {"sub", DT_INT32, 2.0, F_, DT_FLOAT32, {1.0, -2.0, -1.0}},
  {"sub", DT_INT32, 1, B_, DT_DTYPE_COUNT, {0}}, /* NotImplementedError */
  {"sub", DT_INT32, 0, B_, DT_DTYPE_COUNT, {0}}, /* NotImplementedError */
  {"sub", DT_INT32, -3, I_, DT_INT32, {6.0, 3.0, 4.0}},
  {"sub", DT_INT32, 4294967298.0, I_, DT_INT32, {1.0, -2.0, -1.0}},
  {"sub", DT_INT32, 0.5, F_, DT_FLOAT32, {2.5, -0.5, 0.5}},
  {"sub", DT_UINT8, 2, I_, DT_UINT8, {1.0, 254.0, 255.0}},
  {"sub", DT_UINT8, 2.0, F_, DT_FLOAT32, {1.0, -2.0, -1.0}},
  {"sub", DT_UINT8, 1, B_, DT_DTYPE_COUNT, {0}}, /* NotImplementedError */
  {"sub", DT_UINT8, 0, B_, DT_DTYPE_COUNT, {0}}, /* NotImplementedError */
  {"sub", DT_UINT8, -3, I_, DT_UINT8, {6.0, 3.0, 4.0}},
  {"sub", DT_UINT8, 4294967298.0, I_, DT_UINT8, {1.0, 254.0, 255.0}},
  {"sub", DT_UINT8, 0.5, F_, DT_FLOAT32, {2.5, -0.5, 0.5}},
  {"sub", DT_BOOL, 2, I_, DT_DTYPE_COUNT, {0}}, /* NotImplementedError */
  {"sub", DT_BOOL, 2.0, F_, DT_DTYPE_COUNT, {0}}, /* NotImplementedError */
  {"sub", DT_BOOL, 1, B_, DT_DTYPE_COUNT, {0}}, /* NotImplementedError */
  {"sub", DT_BOOL, 0, B_, DT_DTYPE_COUNT, {0}}, /* NotImplementedError */
  {"sub", DT_BOOL, -3, I_, DT_DTYPE_COUNT, {0}}, /* NotImplementedError */
  {"sub", DT_BOOL, 4294967298.0, I_, DT_DTYPE_COUNT, {0}}, /* NotImplementedError */
  {"sub", DT_BOOL, 0.5, F_, DT_DTYPE_COUNT, {0}}, /* NotImplementedError */
  {"mul", DT_FLOAT32, 2, I_, DT_FLOAT32, {6.0, 0.0, 2.0}},
  {"mul", DT_FLOAT32, 2.0, F_, DT_FLOAT32, {6.0, 0.0, 2.0}},
  {"mul", DT_FLOAT32, 1, B_, DT_FLOAT32, {3.0, 0.0, 1.0}},
  {"mul", DT_FLOAT32, 0, B_, DT_FLOAT32, {0.0, 0.0, 0.0}},
  {"mul", DT_FLOAT32, -3, I_, DT_FLOAT32, {-9.0, -0.0, -3.0}},
  {"mul", DT_FLOAT32, 4294967298.0, I_, DT_FLOAT32, {12884901888.0, 0.0, 4294967296.0}},
  {"mul", DT_FLOAT32, 0.5, F_, DT_FLOAT32, {1.5, 0.0, 0.5}},
  {"mul", DT_INT32, 2, I_, DT_INT32, {6.0, 0.0, 2.0}},
  {"mul", DT_INT32, 2.0, F_, DT_FLOAT32, {6.0, 0.0, 2.0}},
  {"mul", DT_INT32, 1, B_, DT_INT32, {3.0, 0.0, 1.0}},
  {"mul", DT_INT32, 0, B_, DT_INT32, {0.0, 0.0, 0.0}},
  {"mul", DT_INT32, -3, I_, DT_INT32, {-9.0, 0.0, -3.0}},
  {"mul", DT_INT32, 4294967298.0, I_, DT_INT32, {6.0, 0.0, 2.0}},
  {"mul", DT_INT32, 0.5, F_, DT_FLOAT32, {1.5, 0.0, 0.5}},
  {"mul", DT_UINT8, 2, I_, DT_UINT8, {6.0, 0.0, 2.0}},
  {"mul", DT_UINT8, 2.0, F_, DT_FLOAT32, {6.0, 0.0, 2.0}},
  {"mul", DT_UINT8, 1, B_, DT_UINT8, {3.0, 0.0, 1.0}},
  {"mul", DT_UINT8, 0, B_, DT_UINT8, {0.0, 0.0, 0.0}},
  {"mul", DT_UINT8, -3, I_, DT_UINT8, {247.0, 0.0, 253.0}},
  {"mul", DT_UINT8, 4294967298.0, I_, DT_UINT8, {6.0, 0.0, 2.0}},
  {"mul", DT_UINT8, 0.5, F_, DT_FLOAT32, {1.5, 0.0, 0.5}},
  {"mul", DT_BOOL, 2, I_, DT_INT64, {2.0, 0.0, 2.0}},
  {"mul", DT_BOOL, 2.0, F_, DT_FLOAT32, {2.0, 0.0, 2.0}},
  {"mul", DT_BOOL, 1, B_, DT_BOOL, {1.0, 0.0, 1.0}},
  {"mul", DT_BOOL, 0, B_, DT_BOOL, {0.0, 0.0, 0.0}},
  {"mul", DT_BOOL, -3, I_, DT_INT64, {-3.0, 0.0, -3.0}},
  {"mul", DT_BOOL, 4294967298.0, I_, DT_INT64, {4294967298.0, 0.0, 4294967298.0}},
  {"mul", DT_BOOL, 0.5, F_, DT_FLOAT32, {0.5, 0.0, 0.5}},
  {"div", DT_FLOAT32, 2, I_, DT_FLOAT32, {1.5, 0.0, 0.5}},
  {"div", DT_FLOAT32, 2.0, F_, DT_FLOAT32, {1.5, 0.0, 0.5}},
  {"div", DT_FLOAT32, 1, B_, DT_FLOAT32, {3.0, 0.0, 1.0}},
  {"div", DT_FLOAT32, 0, B_, DT_FLOAT32, {INFINITY, NAN, INFINITY}},
  {"div", DT_FLOAT32, -3, I_, DT_FLOAT32, {-1.0, -0.0, -0.3333333432674408}},
  {"div", DT_FLOAT32, 4294967298.0, I_, DT_FLOAT32, {6.984919309616089e-10, 0.0, 2.3283064365386963e-10}},
  {"div", DT_FLOAT32, 0.5, F_, DT_FLOAT32, {6.0, 0.0, 2.0}},
  {"div", DT_INT32, 2, I_, DT_FLOAT32, {1.5, 0.0, 0.5}},
  {"div", DT_INT32, 2.0, F_, DT_FLOAT32, {1.5, 0.0, 0.5}},
  {"div", DT_INT32, 1, B_, DT_FLOAT32, {3.0, 0.0, 1.0}},
  {"div", DT_INT32, 0, B_, DT_FLOAT32, {INFINITY, NAN, INFINITY}},
  {"div", DT_INT32, -3, I_, DT_FLOAT32, {-1.0, -0.0, -0.3333333432674408}},
  {"div", DT_INT32, 4294967298.0, I_, DT_FLOAT32, {6.984919309616089e-10, 0.0, 2.3283064365386963e-10}},
  {"div", DT_INT32, 0.5, F_, DT_FLOAT32, {6.0, 0.0, 2.0}},
  {"div", DT_UINT8, 2, I_, DT_FLOAT32, {1.5, 0.0, 0.5}},
  {"div", DT_UINT8, 2.0, F_, DT_FLOAT32, {1.5, 0.0, 0.5}},
  {"div", DT_UINT8, 1, B_, DT_FLOAT32, {3.0, 0.0, 1.0}},
  {"div", DT_UINT8, 0, B_, DT_FLOAT32, {INFINITY, NAN, INFINITY}},
  {"div", DT_UINT8, -3, I_, DT_FLOAT32, {-1.0, -0.0, -0.3333333432674408}},
  {"div", DT_UINT8, 4294967298.0, I_, DT_FLOAT32, {6.984919309616089e-10, 0.0, 2.3283064365386963e-10}},
  {"div", DT_UINT8, 0.5, F_, DT_FLOAT32, {6.0, 0.0, 2.0}},
  {"div", DT_BOOL, 2, I_, DT_FLOAT32, {0.5, 0.0, 0.5}},
  {"div", DT_BOOL, 2.0, F_, DT_FLOAT32, {0.5, 0.0, 0.5}},
  {"div", DT_BOOL, 1, B_, DT_FLOAT32, {1.0, 0.0, 1.0}},
  {"div", DT_BOOL, 0, B_, DT_FLOAT32, {INFINITY, NAN, INFINITY}},
  {"div", DT_BOOL, -3, I_, DT_FLOAT32, {-0.3333333432674408, -0.0, -0.3333333432674408}},
  {"div", DT_BOOL, 4294967298.0, I_, DT_FLOAT32, {2.3283064365386963e-10, 0.0, 2.3283064365386963e-10}},
  {"div", DT_BOOL, 0.5, F_, DT_FLOAT32, {2.0, 0.0, 2.0}},
  {"pow", DT_FLOAT32, 2, I_, DT_FLOAT32, {9.0, 0.0, 1.0}},
  {"pow", DT_FLOAT32, 2.0, F_, DT_FLOAT32, {9.0, 0.0, 1.0}},
  {"pow", DT_FLOAT32, 1, B_, DT_FLOAT32, {3.0, 0.0, 1.0}},
  {"pow", DT_FLOAT32, 0, B_, DT_FLOAT32, {1.0, 1.0, 1.0}},
  {"pow", DT_FLOAT32, -3, I_, DT_FLOAT32, {0.03703703731298447, INFINITY, 1.0}},
  {"pow", DT_FLOAT32, 4294967298.0, I_, DT_FLOAT32, {INFINITY, 0.0, 1.0}},
  {"pow", DT_FLOAT32, 0.5, F_, DT_FLOAT32, {1.7320507764816284, 0.0, 1.0}},
  {"pow", DT_INT32, 2, I_, DT_INT32, {9.0, 0.0, 1.0}},
  {"pow", DT_INT32, 2.0, F_, DT_FLOAT32, {9.0, 0.0, 1.0}},
  {"pow", DT_INT32, 1, B_, DT_INT32, {3.0, 0.0, 1.0}},
  {"pow", DT_INT32, 0, B_, DT_INT32, {1.0, 1.0, 1.0}},
  {"pow", DT_INT32, -3, I_, DT_DTYPE_COUNT, {0}}, /* RuntimeError */
  {"pow", DT_INT32, 4294967298.0, I_, DT_DTYPE_COUNT, {0}}, /* RuntimeError */
  {"pow", DT_INT32, 0.5, F_, DT_FLOAT32, {1.7320507764816284, 0.0, 1.0}},
  {"pow", DT_UINT8, 2, I_, DT_UINT8, {9.0, 0.0, 1.0}},
  {"pow", DT_UINT8, 2.0, F_, DT_FLOAT32, {9.0, 0.0, 1.0}},
  {"pow", DT_UINT8, 1, B_, DT_UINT8, {3.0, 0.0, 1.0}},
  {"pow", DT_UINT8, 0, B_, DT_UINT8, {1.0, 1.0, 1.0}},
  {"pow", DT_UINT8, -3, I_, DT_DTYPE_COUNT, {0}}, /* RuntimeError */
  {"pow", DT_UINT8, 4294967298.0, I_, DT_DTYPE_COUNT, {0}}, /* RuntimeError */
  {"pow", DT_UINT8, 0.5, F_, DT_FLOAT32, {1.7320507764816284, 0.0, 1.0}},
  {"pow", DT_BOOL, 2, I_, DT_INT64, {1.0, 0.0, 1.0}},
  {"pow", DT_BOOL, 2.0, F_, DT_FLOAT32, {1.0, 0.0, 1.0}},
  {"pow", DT_BOOL, 1, B_, DT_BOOL, {1.0, 0.0, 1.0}},
  {"pow", DT_BOOL, 0, B_, DT_BOOL, {1.0, 1.0, 1.0}},
  {"pow", DT_BOOL, -3, I_, DT_DTYPE_COUNT, {0}}, /* RuntimeError */
  {"pow", DT_BOOL, 4294967298.0, I_, DT_INT64, {1.0, 0.0, 1.0}},
  {"pow", DT_BOOL, 0.5, F_, DT_FLOAT32, {1.0, 0.0, 1.0}},
  {"floor_divide", DT_FLOAT32, 2, I_, DT_FLOAT32, {1.0, 0.0, 0.0}},
  {"floor_divide", DT_FLOAT32, 2.0, F_, DT_FLOAT32, {1.0, 0.0, 0.0}},
  {"floor_divide", DT_FLOAT32, 1, B_, DT_FLOAT32, {3.0, 0.0, 1.0}},
  {"floor_divide", DT_FLOAT32, 0, B_, DT_FLOAT32, {INFINITY, NAN, INFINITY}},
  {"floor_divide", DT_FLOAT32, -3, I_, DT_FLOAT32, {-1.0, -0.0, -1.0}},
  {"floor_divide", DT_FLOAT32, 4294967298.0, I_, DT_FLOAT32, {0.0, 0.0, 0.0}},
  {"floor_divide", DT_FLOAT32, 0.5, F_, DT_FLOAT32, {6.0, 0.0, 2.0}},
  {"floor_divide", DT_INT32, 2, I_, DT_INT32, {1.0, 0.0, 0.0}},
  {"floor_divide", DT_INT32, 2.0, F_, DT_FLOAT32, {1.0, 0.0, 0.0}},
  {"floor_divide", DT_INT32, 1, B_, DT_INT32, {3.0, 0.0, 1.0}},
  {"floor_divide", DT_INT32, 0, B_, DT_DTYPE_COUNT, {0}}, /* RuntimeError */
  {"floor_divide", DT_INT32, -3, I_, DT_INT32, {-1.0, 0.0, -1.0}},
  {"floor_divide", DT_INT32, 4294967298.0, I_, DT_INT32, {1.0, 0.0, 0.0}},
  {"floor_divide", DT_INT32, 0.5, F_, DT_FLOAT32, {6.0, 0.0, 2.0}},
  {"floor_divide", DT_UINT8, 2, I_, DT_UINT8, {1.0, 0.0, 0.0}},
  {"floor_divide", DT_UINT8, 2.0, F_, DT_FLOAT32, {1.0, 0.0, 0.0}},
  {"floor_divide", DT_UINT8, 1, B_, DT_UINT8, {3.0, 0.0, 1.0}},
  {"floor_divide", DT_UINT8, 0, B_, DT_DTYPE_COUNT, {0}}, /* RuntimeError */
  {"floor_divide", DT_UINT8, -3, I_, DT_UINT8, {0.0, 0.0, 0.0}},
  {"floor_divide", DT_UINT8, 4294967298.0, I_, DT_UINT8, {1.0, 0.0, 0.0}},
  {"floor_divide", DT_UINT8, 0.5, F_, DT_FLOAT32, {6.0, 0.0, 2.0}},
  {"floor_divide", DT_BOOL, 2, I_, DT_INT64, {0.0, 0.0, 0.0}},
  {"floor_divide", DT_BOOL, 2.0, F_, DT_FLOAT32, {0.0, 0.0, 0.0}},
  {"floor_divide", DT_BOOL, 1, B_, DT_DTYPE_COUNT, {0}}, /* NotImplementedError */
  {"floor_divide", DT_BOOL, 0, B_, DT_DTYPE_COUNT, {0}}, /* NotImplementedError */
  {"floor_divide", DT_BOOL, -3, I_, DT_INT64, {-1.0, 0.0, -1.0}},
  {"floor_divide", DT_BOOL, 4294967298.0, I_, DT_INT64, {0.0, 0.0, 0.0}},
  {"floor_divide", DT_BOOL, 0.5, F_, DT_FLOAT32, {2.0, 0.0, 2.0}},
  {"remainder", DT_FLOAT32, 2, I_, DT_FLOAT32, {1.0, 0.0, 1.0}},
  {"remainder", DT_FLOAT32, 2.0, F_, DT_FLOAT32, {1.0, 0.0, 1.0}},
  {"remainder", DT_FLOAT32, 1, B_, DT_FLOAT32, {0.0, 0.0, 0.0}},
  {"remainder", DT_FLOAT32, 0, B_, DT_FLOAT32, {NAN, NAN, NAN}},
  {"remainder", DT_FLOAT32, -3, I_, DT_FLOAT32, {0.0, 0.0, -2.0}},
  {"remainder", DT_FLOAT32, 4294967298.0, I_, DT_FLOAT32, {3.0, 0.0, 1.0}},
  {"remainder", DT_FLOAT32, 0.5, F_, DT_FLOAT32, {0.0, 0.0, 0.0}},
  {"remainder", DT_INT32, 2, I_, DT_INT32, {1.0, 0.0, 1.0}},
  {"remainder", DT_INT32, 2.0, F_, DT_FLOAT32, {1.0, 0.0, 1.0}},
  {"remainder", DT_INT32, 1, B_, DT_INT32, {0.0, 0.0, 0.0}},
  {"remainder", DT_INT32, 0, B_, DT_DTYPE_COUNT, {0}}, /* RuntimeError */
  {"remainder", DT_INT32, -3, I_, DT_INT32, {0.0, 0.0, -2.0}},
  {"remainder", DT_INT32, 4294967298.0, I_, DT_INT32, {1.0, 0.0, 1.0}},
  {"remainder", DT_INT32, 0.5, F_, DT_FLOAT32, {0.0, 0.0, 0.0}},
  {"remainder", DT_UINT8, 2, I_, DT_UINT8, {1.0, 0.0, 1.0}},
  {"remainder", DT_UINT8, 2.0, F_, DT_FLOAT32, {1.0, 0.0, 1.0}},
  {"remainder", DT_UINT8, 1, B_, DT_UINT8, {0.0, 0.0, 0.0}},
  {"remainder", DT_UINT8, 0, B_, DT_DTYPE_COUNT, {0}}, /* RuntimeError */
  {"remainder", DT_UINT8, -3, I_, DT_UINT8, {3.0, 0.0, 1.0}},
  {"remainder", DT_UINT8, 4294967298.0, I_, DT_UINT8, {1.0, 0.0, 1.0}},
  {"remainder", DT_UINT8, 0.5, F_, DT_FLOAT32, {0.0, 0.0, 0.0}},
  {"remainder", DT_BOOL, 2, I_, DT_INT64, {1.0, 0.0, 1.0}},
  {"remainder", DT_BOOL, 2.0, F_, DT_FLOAT32, {1.0, 0.0, 1.0}},
  {"remainder", DT_BOOL, 1, B_, DT_DTYPE_COUNT, {0}}, /* NotImplementedError */
  {"remainder", DT_BOOL, 0, B_, DT_DTYPE_COUNT, {0}}, /* NotImplementedError */
  {"remainder", DT_BOOL, -3, I_, DT_INT64, {-2.0, 0.0, -2.0}},
  {"remainder", DT_BOOL, 4294967298.0, I_, DT_INT64, {1.0, 0.0, 1.0}},
  {"remainder", DT_BOOL, 0.5, F_, DT_FLOAT32, {0.0, 0.0, 0.0}},
};

typedef dt_tensor *(*typed_fn)(dt_tensor *, double, dt_scalar_kind);
static typed_fn fn_of(const char *op) {
  static const struct { const char *name; typed_fn fn; } fns[] = {
      {"add", dt_add_scalar_typed}, {"sub", dt_sub_scalar_typed},
      {"mul", dt_mul_scalar_typed}, {"div", dt_div_scalar_typed},
      {"pow", dt_pow_scalar_typed}, {"floor_divide", dt_floor_divide_scalar_typed},
      {"remainder", dt_remainder_scalar_typed}};
  for (size_t i = 0; i < sizeof fns / sizeof *fns; i++)
    if (!strcmp(fns[i].name, op)) return fns[i].fn;
  return NULL;
}

static void test_kinds_match_pytorch(void **state) {
  (void)state;
  tu_leaks_begin_clear();
  static const double x[3] = {3, 0, 1};
  int wrong = 0;
  for (size_t r = 0; r < sizeof rows / sizeof *rows; r++) {
    const row *w = &rows[r];
    dt_tensor *t = tu_tensor(x, DT_SHAPE(3), w->in);
    dt_clear_error();
    dt_tensor *o = fn_of(w->op)(t, w->s, w->kind);
    const char *why = NULL;
    if (w->want == DT_DTYPE_COUNT) {
      if (o) why = "PyTorch raised; dtorch gave a tensor";
      else if (dt_last_status() == DT_OK || !strstr(dt_last_error(), "_typed"))
        why = "the error does not name the call";
    } else if (!o) {
      why = dt_last_error();
    } else if (dt_tensor_dtype(o) != w->want) {
      why = "dtype";
    } else {
      double *v = tu_values(o);
      for (int i = 0; i < 3 && !why; i++)
        if (!(v[i] == w->v[i] || (isnan(v[i]) && isnan(w->v[i])) ||
              fabs(v[i] - w->v[i]) <= 1e-6 * fabs(w->v[i])))
          why = "values";
      free(v);
    }
    if (why) {
      printf("WRONG %s(%s, %.17g kind %d): %s (got %s, want %s)\n", w->op,
             dt_dtype_name(w->in), w->s, (int)w->kind, why,
             o ? dt_dtype_name(dt_tensor_dtype(o)) : "error",
             w->want == DT_DTYPE_COUNT ? "error" : dt_dtype_name(w->want));
      wrong++;
    }
    dt_tensor_release(o);
    dt_tensor_release(t);
  }
  assert_int_equal(wrong, 0);
  tu_leaks_end();
}

/* clamp's bounds promote with their kinds (PyTorch: int32.clamp(min=1.0)
 * is float32, bool.clamp(max=1) int64, bool.clamp(min=True) fails) */
static void test_clamp_kinds(void **state) {
  (void)state;
  tu_leaks_begin_clear();
  static const double x[3] = {3, 0, 1};
  dt_tensor *i = tu_tensor(x, DT_SHAPE(3), DT_INT32), *b = tu_tensor(x, DT_SHAPE(3), DT_BOOL);
  struct { dt_tensor *t; double lo; dt_scalar_kind klo; double hi; dt_scalar_kind khi;
           dt_dtype want; double v[3]; } cases[] = {
      {i, 1, I_, 2, I_, DT_INT32, {2, 1, 1}},
      {i, 1, F_, 2, I_, DT_FLOAT32, {2, 1, 1}},
      {i, -INFINITY, I_, 2.5, F_, DT_FLOAT32, {2.5, 0, 1}},
      {i, -INFINITY, F_, INFINITY, F_, DT_FLOAT32, {3, 0, 1}},
      {i, 1, B_, INFINITY, B_, DT_INT32, {3, 1, 1}},
      {b, -INFINITY, I_, 1, I_, DT_INT64, {1, 0, 1}},
      {b, 1, B_, 1, I_, DT_INT64, {1, 1, 1}},
      {b, 0.5, F_, INFINITY, F_, DT_FLOAT32, {1, 0.5, 1}}};
  for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
    dt_tensor *o = dt_clamp_typed(cases[k].t, cases[k].lo, cases[k].klo, cases[k].hi,
                                  cases[k].khi);
    if (!o) fail_msg("clamp case %zu: %s", k, dt_last_error());
    tu_assert_meta(o, cases[k].want, DT_SHAPE(3), "clamp_typed");
    double *v = tu_values(o);
    tu_assert_close(v, cases[k].v, 3, 0, 0, "clamp_typed");
    free(v);
    dt_tensor_release(o);
  }
  tu_expect_error(dt_clamp_typed(b, 0, B_, 1, B_), DT_ERR_DTYPE, "dt_clamp_typed",
                  "bool", NULL);
  tu_expect_error(dt_clamp_typed(i, 0.5, I_, 1, I_), DT_ERR_INVALID_ARGUMENT,
                  "dt_clamp_typed", "min 0.5", "DT_SCALAR_INT", NULL);
  tu_expect_error(dt_clamp_typed(i, 0, I_, 1, (dt_scalar_kind)7), DT_ERR_INVALID_ARGUMENT,
                  "dt_clamp_typed", "kind of max, 7", NULL);
  dt_tensor_release(i);
  dt_tensor_release(b);
  tu_leaks_end();
}

/* the kinds' own errors name the call, the argument and the value */
static void test_kind_errors(void **state) {
  (void)state;
  tu_leaks_begin_clear();
  static const double x[3] = {3, 0, 1};
  dt_tensor *i = tu_tensor(x, DT_SHAPE(3), DT_INT32), *f = tu_tensor(x, DT_SHAPE(3), DT_FLOAT32);
  tu_expect_error(dt_add_scalar_typed(f, 1.5, I_), DT_ERR_INVALID_ARGUMENT,
                  "dt_add_scalar_typed", "scalar 1.5", "DT_SCALAR_INT", NULL);
  tu_expect_error(dt_add_scalar_typed(i, 9223372036854775808.0, I_),
                  DT_ERR_INVALID_ARGUMENT, "dt_add_scalar_typed", "2^63", NULL);
  tu_expect_error(dt_mul_scalar_typed(i, NAN, I_), DT_ERR_INVALID_ARGUMENT,
                  "dt_mul_scalar_typed", "scalar nan", NULL);
  tu_expect_error(dt_sub_scalar_typed(i, 2, B_), DT_ERR_INVALID_ARGUMENT,
                  "dt_sub_scalar_typed", "scalar 2", "DT_SCALAR_BOOL", NULL);
  tu_expect_error(dt_div_scalar_typed(i, 2, (dt_scalar_kind)-1),
                  DT_ERR_INVALID_ARGUMENT, "dt_div_scalar_typed", "kind of scalar, -1",
                  NULL);
  /* the untyped forms are AUTO: 1.0 is an int, 1e19 a float */
  dt_tensor *a = dt_add_scalar(i, 1.0), *b = dt_add_scalar(i, 1e19);
  assert_non_null(a);
  assert_non_null(b);
  assert_int_equal(dt_tensor_dtype(a), DT_INT32);
  assert_int_equal(dt_tensor_dtype(b), DT_FLOAT32);
  tu_release_n((dt_tensor *[]){a, b, i, f}, 4);
  tu_leaks_end();
}

/* the op printer writes a scalar as Python would for its kind */
static void test_call_string_shows_the_kind(void **state) {
  (void)state;
  static const double x[2] = {3, 0};
  dt_tensor *i = tu_tensor(x, DT_SHAPE(2), DT_INT32);
  char *buf = NULL;
  size_t len = 0;
  FILE *mem = open_memstream(&buf, &len);
  assert_int_equal(dt_op_printer_push(mem), DT_OK);
  dt_tensor *o[4] = {dt_add_scalar_typed(i, 2, I_), dt_add_scalar_typed(i, 2, F_),
                     dt_add_scalar_typed(i, 1, B_), dt_add_scalar(i, 2.5)};
  assert_int_equal(dt_intercept_pop(), DT_OK);
  fclose(mem);
  assert_non_null(strstr(buf, "add_scalar(int32[2], 2) -> int32[2]"));
  assert_non_null(strstr(buf, "add_scalar(int32[2], 2.0) -> float32[2]"));
  assert_non_null(strstr(buf, "add_scalar(int32[2], True) -> int32[2]"));
  assert_non_null(strstr(buf, "add_scalar(int32[2], 2.5) -> float32[2]"));
  free(buf);
  tu_release_n(o, 4);
  dt_tensor_release(i);
}

/* One call of kind k1 warms the cache, then kind k2 on other DTensors of
 * the same specs: dtype, placements and values must be the uncached
 * call's and one device's. */
static void check_after(dt_mesh *m, const dt_placement *pl, dt_dtype d, dt_scalar_kind k1,
                        dt_scalar_kind k2, double s) {
  static const double x[4] = {3, 0, 1, 1};
  dt_tensor_options o = {.dtype = d, .mesh = m, .placements = pl};
  char raw[4 * 8];
  for (int i = 0; i < 4; i++) tu_encode(raw + i * (int)dt_dtype_size(d), d, x[i]);
  dt_tensor *t1 = dt_from_host(raw, DT_SHAPE(4), &o), *t2 = dt_from_host(raw, DT_SHAPE(4), &o);
  dt_tensor *one = tu_tensor(x, DT_SHAPE(4), d);
  assert_non_null(t1);
  assert_non_null(t2);
  dt_sharding_cache_clear();
  dt_tensor *warm = dt_add_scalar_typed(t1, s, k1);
  assert_non_null(warm);
  dt_cache_stats before = dt_sharding_cache_stats();
  dt_tensor *hit = dt_add_scalar_typed(t2, s, k2);
  dt_cache_stats after = dt_sharding_cache_stats();
  dt_sharding_cache_clear();
  dt_tensor *cold = dt_add_scalar_typed(t2, s, k2), *ref = dt_add_scalar_typed(one, s, k2);
  assert_non_null(hit);
  assert_non_null(cold);
  assert_non_null(ref);
  if (dt_tensor_dtype(hit) != dt_tensor_dtype(cold) || dt_tensor_dtype(hit) != dt_tensor_dtype(ref))
    fail_msg("%s + %g: kind %d after kind %d gave %s, uncached %s, one device %s",
             dt_dtype_name(d), s, (int)k2, (int)k1, dt_dtype_name(dt_tensor_dtype(hit)),
             dt_dtype_name(dt_tensor_dtype(cold)), dt_dtype_name(dt_tensor_dtype(ref)));
  /* a kind that changes the dtype takes its own entry; one that does not
   * shares the first */
  bool same = dt_tensor_dtype(warm) == dt_tensor_dtype(hit);
  assert_int_equal(after.hits - before.hits, same ? 1 : 0);
  for (int md = 0; md < dt_mesh_ndim(m); md++) {
    dt_placement a = dt_tensor_placement(hit, md), b = dt_tensor_placement(cold, md);
    assert_true(!memcmp(&a, &b, sizeof a));
  }
  double *vh = tu_values(hit), *vr = tu_values(ref);
  tu_assert_close(vh, vr, 4, 0, 0, "kind after a hit");
  free(vh);
  free(vr);
  tu_release_n((dt_tensor *[]){warm, hit, cold, ref, t1, t2, one}, 7);
}

static void test_kind_after_a_hit(void **state) {
  (void)state;
  dt_runtime *rt = dt_runtime_create(&(dt_runtime_options){.num_ranks = 2, .auto_redistribute = true});
  dt_mesh *m = dt_mesh_init(rt, "cpu", DT_SHAPE(2), NULL);
  assert_non_null(m);
  const dt_placement pls[3][1] = {{DT_REPLICATE}, {DT_SHARD(0)}, {DT_PARTIAL(DT_REDUCE_SUM)}};
  const dt_dtype dts[4] = {DT_FLOAT32, DT_INT32, DT_UINT8, DT_BOOL};
  const dt_scalar_kind ks[3] = {I_, F_, B_};
  for (int p = 0; p < 3; p++)
    for (int d = 0; d < 4; d++) {
      if (p == 2 && dts[d] != DT_FLOAT32) continue; /* Partial: floats */
      for (int a = 0; a < 3; a++)
        for (int b = 0; b < 3; b++)
          if (a != b) check_after(m, pls[p], dts[d], ks[a], ks[b], 1);
    }
  dt_mesh_release(m);
  dt_runtime_destroy(rt);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_kinds_match_pytorch),
      cmocka_unit_test(test_clamp_kinds),
      cmocka_unit_test(test_kind_errors),
      cmocka_unit_test(test_call_string_shows_the_kind),
      cmocka_unit_test(test_kind_after_a_hit),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
