/* How the CUDA bindings (ops/<family>.c, the op list's cuda column)
 * describe tensors to the kernels: broadcast strides and rows
 * (kernels/cuda/cuda.h). Pure functions of sizes and strides, built in
 * every configuration, so that their tests (tests/test_cuda_geom.c) run
 * without CUDA. */
#ifndef OPS_CUDA_GEOM_H
#define OPS_CUDA_GEOM_H

#include <stdbool.h>
#include <stdint.h>

#include "kernels/cuda/cuda.h"

/* strides of a k-dim view (sizes, strides) broadcast to n >= k dims,
 * right-aligned: 0 where the view lacks the dim or has size 1 */
void ops_cuda_broadcast(int n, int k, const int64_t *sizes,
                        const int64_t *strides, int64_t *out);

/* x (n dims of sizes / strides) as rows: the dims in mask are a row's
 * elements, the others index rows, in x's dim order; y is dense, over
 * the kept dims (y_full false: a reduction's output, reduced dims get y
 * stride 0) or over x's whole shape (softmax, norms) */
cuda_rows ops_cuda_rows(int n, const int64_t *sizes, const int64_t *strides,
                        uint32_t mask, bool y_full);

#endif
