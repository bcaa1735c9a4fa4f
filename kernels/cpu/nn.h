/* Kernels of the nn ops (ops/nn.c): row gathers (embedding, index_select),
 * cross-entropy and dropout. Pointers, sizes and strides only; bad data
 * (an index out of range) is reported back as a status plus where and what,
 * and the ops layer words the message. */
#ifndef CPU_NN_H
#define CPU_NN_H

#include "kernels/cpu/cpu.h"

/* element j (row-major) of an int32/int64 view of at least j + 1 elements */
int64_t cpu_index_at(const cpu_view *v, int64_t j);
/* the number of elements of a view */
int64_t cpu_view_numel(const cpu_view *v);
/* the offset (elements) of position p's class row in logits [N, C, d...]:
 * p runs row-major over [N, d...] */
int64_t cpu_ce_row(const cpu_view *x, int64_t p);

/* out = a gathered along dim at the indices of idx (int32/int64, any shape,
 * read in row-major order); out has a's ndim with sizes[dim] = numel(idx)
 * and a's dtype. Returns DT_OK, or DT_ERR_INVALID_ARGUMENT for the first
 * index outside [0, a->sizes[dim]): its row-major position in *bad_pos and
 * its value in *bad_val (nothing is written then). */
dt_status cpu_index_select(const cpu_view *out, const cpu_view *a, int dim,
                           const cpu_view *idx, int64_t *bad_pos,
                           int64_t *bad_val);

/* Cross entropy of logits [N, C, d1, ...] (a [C] row is [1, C]) against
 * class indices (int32/int64, shape [N, d1, ...]; ignore_index contributes
 * nothing) or class probabilities (float, logits' shape), with PyTorch's
 * label smoothing, computed in double. NONE writes one loss per position
 * to out (contiguous [N, d1, ...], dtype od), 0 for ignored targets; SUM
 * and MEAN write one value, MEAN dividing by the number of targets not
 * ignored (all positions for probabilities; NaN when there are none).
 * Returns DT_OK, or DT_ERR_INVALID_ARGUMENT for the first index outside
 * [0, C) that is not ignore_index (its position and value in *bad_pos /
 * *bad_val). */
typedef struct cpu_ce_args {
  const cpu_view *logits, *target;
  bool probabilities;
  dt_reduction reduction;
  int64_t ignore_index;
  double label_smoothing;
} cpu_ce_args;
dt_status cpu_cross_entropy(char *out, dt_dtype od, const cpu_ce_args *a,
                            int64_t *bad_pos, int64_t *bad_val);

/* cross_entropy's log-sum-exp sums (lse.c): for rows q in [0, rows),
 * rows <= 4, `gap` floats apart, lanes[8 q .. 8 q + 8) += the terms
 * vm_lse_term(x[q gap + i] - m[q]), i in [0, n), in lse.c's fixed order
 * (n <= CPU_BLOCK when the sums of several calls must match one call:
 * blocks of CPU_BLOCK keep the order). m[q] >= every x of row q. The
 * AVX-512 form where the CPU has it; _generic is the other form, for the
 * tests: the two give the same bits (a NaN row: NaN in both). Both fetch
 * the same columns of the rows 8 rows on into L2 (a prefetch does not
 * fault: past the tensor's end is harmless) */
void cpu_lse_sum_f32(const float *x, int64_t gap, int rows, int64_t n,
                     const float *m, double *lanes);
void cpu_lse_sum_f32_generic(const float *x, int64_t gap, int rows,
                             int64_t n, const float *m, double *lanes);

/* out (contiguous, a's shape, a float dtype) = a[i] / (1 - p) where
 * cpu_philox_uniform(seed, offset + i) >= p, else 0; i is the row-major
 * index. 0 <= p < 1. The mask of element i depends only on (seed,
 * offset + i), so a shard computes its slice alone. */
void cpu_dropout(const cpu_view *out, const cpu_view *a, double p,
                 uint64_t seed, uint64_t offset);

#endif
