/* CPU reduction and normalisation kernels (kernels/cpu/reduce.c, norm.c).
 *
 * Like the pointwise kernels these see only (pointer, sizes, strides,
 * dtype). The input may be any strided view; the output is contiguous.
 *
 * A reduction splits the input's dims into kept ("outer") and reduced
 * ("row") dims. Each output element reduces one row, whose elements are
 * walked in row-major order over the reduced dims: element j of the row is
 * the j-th in that order, whatever the strides. Floating sums keep eight
 * double accumulators, element j going to lane j % 8, combined in a fixed
 * tree at the end (a row of at least 2 x CPU_GRAIN elements: per segment
 * of CPU_GRAIN, the segments' lanes added in segment order). The rounding
 * therefore depends only on the sizes: a contiguous and a strided input
 * with the same values give the same bits, run after run, on any number
 * of ranks. Integer sums and products wrap modulo 2^64 (exact, any
 * order). */
#ifndef CPU_REDUCE_H
#define CPU_REDUCE_H

#include <stdbool.h>
#include <stdint.h>

#include "kernels/cpu/cpu.h"

/* in the order of the reduction ops in core/op_list.h (sum .. argmin) */
typedef enum cpu_reduce_op {
  CPU_REDUCE_SUM, CPU_REDUCE_MEAN, CPU_REDUCE_MAX, CPU_REDUCE_MIN,
  CPU_REDUCE_PROD, CPU_REDUCE_ARGMAX, CPU_REDUCE_ARGMIN, CPU_REDUCE_COUNT
} cpu_reduce_op;

/* out (contiguous; numel = product of the kept sizes, keepdim does not
 * matter) = op over the dims of `in` whose bit is set in `mask`.
 * Compute types: float inputs in double, integers/bool in int64. An empty
 * row gives 0 (sum), 1 (prod), NaN (mean); max/min/argmax/argmin of an
 * empty row is the caller's error to raise. NaN wins max/min/argmax/argmin
 * (the first NaN for arg*). argmax/argmin write int64 indices into the
 * row. */
void cpu_reduce(cpu_reduce_op op, const cpu_view *out, const cpu_view *in,
                uint32_t mask);
/* variance over the masked dims: sum((x - mean)^2) / (N - correction),
 * two passes in double; N - correction <= 0 gives NaN. */
void cpu_var(const cpu_view *out, const cpu_view *in, uint32_t mask,
             int64_t correction);

/* softmax (log_softmax when log) of `in` along dim into out (contiguous,
 * same shape, same float dtype). float32/float16/bfloat16 compute in
 * float32 with the sum of exponentials in double; float64 in double.
 * A 0-d input is a row of one element. */
void cpu_softmax(const cpu_view *out, const cpu_view *in, int dim, bool log);
/* y = (x - mean) / sqrt(var + eps) * weight + bias over the last dim
 * (biased var); weight/bias NULL or 1-D views of the last dim's size, of
 * x's dtype. Row statistics in double, the elementwise part in x's compute
 * type. */
void cpu_layer_norm(const cpu_view *out, const cpu_view *x,
                    const cpu_view *weight, const cpu_view *bias, double eps);
/* y = x / sqrt(mean(x^2) + eps) * weight over the last dim. */
void cpu_rms_norm(const cpu_view *out, const cpu_view *x,
                  const cpu_view *weight, double eps);

/* ---- row walking, shared by reduce.c and norm.c (kernel-internal) */
#define CPU_ROW_BLOCK 256   /* a multiple of CPU_ROW_LANES */
#define CPU_ROW_LANES 8
#define CPU_ROW_TILE 64     /* outputs per column tile (reduce.c, norm.c) */

/* One view split into outer (kept) and row (reduced) dims, size-1 dims
 * dropped, byte strides; the row dims are coalesced where memory allows
 * (that changes how the row is walked, never its element order). */
typedef struct cpu_rows {
  dt_dtype dtype;
  int nouter, nrow;
  int64_t osizes[DT_MAX_DIMS], ostrides[DT_MAX_DIMS];
  int64_t rsizes[DT_MAX_DIMS], rstrides[DT_MAX_DIMS];
  int64_t nrows;    /* outputs: product of the kept sizes */
  int64_t rowlen;   /* elements per row: product of the reduced sizes */
} cpu_rows;

void cpu_rows_init(cpu_rows *r, const cpu_view *v, uint32_t mask);
/* true when a row is one dense run of elements (stride = element size) */
bool cpu_rows_dense(const cpu_rows *r);
/* A position among the rows: the outer multi-index and the address of the
 * row's first element. */
typedef struct cpu_row_walk {
  int64_t idx[DT_MAX_DIMS];
  const char *base;
} cpu_row_walk;
/* Starts at row i (row-major over the outer dims) of the view at data. */
void cpu_row_walk_start(const cpu_rows *r, const char *data, int64_t i,
                        cpu_row_walk *w);
/* Moves to the next row; call it only while one is left. */
void cpu_row_walk_next(const cpu_rows *r, cpu_row_walk *w);
/* Loads elements [j0, j0 + n) of the row at base into a contiguous buffer
 * of compute type ct (DT_FLOAT32, DT_FLOAT64 or DT_INT64). */
void cpu_rows_load(const cpu_rows *r, const char *base, int64_t j0, int64_t n,
                   void *buf, dt_dtype ct);

/* lane accumulators: lanes[j % 8] += x[j] (or (x[j] - c)^2) for a block
 * that starts at a multiple of CPU_ROW_LANES within its row */
void cpu_lanes_sum_f32(const float *x, int64_t n, double *lanes);
void cpu_lanes_sum_f64(const double *x, int64_t n, double *lanes);
/* four blocks of n elements (n a multiple of CPU_ROW_LANES), `gap`
 * elements apart, into lanes[0..8), [8..16), [16..24), [24..32): the
 * bits of four cpu_lanes_sum calls, read as four streams at once */
void cpu_lanes_sum4_f32(const float *x, int64_t gap, int64_t n, double *lanes);
void cpu_lanes_sum4_f64(const double *x, int64_t gap, int64_t n, double *lanes);
void cpu_lanes_sqdev_f32(const float *x, int64_t n, double c, double *lanes);
void cpu_lanes_sqdev_f64(const double *x, int64_t n, double c,
                         double *lanes);
/* four segments as cpu_lanes_sum4, segment k about c[k] */
void cpu_lanes_sqdev4_f32(const float *x, int64_t gap, int64_t n,
                          const double *c, double *lanes);
void cpu_lanes_sqdev4_f64(const double *x, int64_t gap, int64_t n,
                          const double *c, double *lanes);
/* the fixed-order total of the eight lanes */
double cpu_lanes_total(const double *lanes);

#endif
