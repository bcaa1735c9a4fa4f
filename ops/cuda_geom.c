/* Broadcast strides and rows for the CUDA kernels (ops/cuda_geom.h). */
#include "ops/cuda_geom.h"

#include <string.h>

void ops_cuda_broadcast(int n, int k, const int64_t *sizes,
                        const int64_t *strides, int64_t *out) {
  for (int d = 0; d < n; d++) {
    int td = d - (n - k);
    out[d] = td < 0 || sizes[td] == 1 ? 0 : strides[td];
  }
}

cuda_rows ops_cuda_rows(int n, const int64_t *sizes, const int64_t *strides,
                        uint32_t mask, bool y_full) {
  cuda_rows g;
  memset(&g, 0, sizeof g);
  int64_t ys[CUDA_MAX_DIMS], s = 1;
  for (int d = n - 1; d >= 0; d--) { /* y's dense strides */
    ys[d] = s;
    if (y_full || !(mask >> d & 1)) s *= sizes[d];
  }
  for (int d = 0; d < n; d++) {
    bool inner = mask >> d & 1;
    int k = inner ? g.ninner++ : g.nouter++;
    int64_t *sz = inner ? g.inner : g.outer;
    int64_t *sx = inner ? g.x_inner : g.x_outer;
    int64_t *sy = inner ? g.y_inner : g.y_outer;
    sz[k] = sizes[d];
    sx[k] = strides[d];
    sy[k] = inner && !y_full ? 0 : ys[d];
  }
  return g;
}
