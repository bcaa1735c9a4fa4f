/* Matrix multiply on the CPU: C = A·B (+ a bias row) over strided matrices,
 * and the batched form matmul/linear use. Kernels only: pointers, sizes,
 * strides and dt_dtype; the ops layer (ops/linalg.c) builds the views and
 * turns the returned status into a message.
 *
 * float32/float64 go to CBLAS (OpenBLAS). An operand whose layout BLAS can
 * read (unit stride along one dim, a leading dimension along the other) is
 * passed as is with a transpose flag; any other layout is packed first.
 * float16/bfloat16 are widened to float32, run through sgemm and rounded
 * once on the way out. Integer dtypes use a plain loop accumulating in
 * 64-bit two's complement (wrapping like PyTorch's int matmul); bool is not
 * supported. */
#ifndef CPU_GEMM_H
#define CPU_GEMM_H

#include "kernels/cpu/cpu.h"

/* element (i, j) at data + (i * rs + j * cs) * dtype size; rs/cs >= 0 */
typedef struct cpu_matrix {
  char *data;
  int64_t rows, cols;
  int64_t rs, cs;          /* strides in elements */
} cpu_matrix;

/* c = a · b, plus bias[j * bias_stride] on every row when bias != NULL.
 * a is M×K, b K×N, c M×N; every operand (and bias) has dtype d. c must be
 * writable row-major: cs == 1 (or N == 1) and rs >= N (or M == 1).
 * Returns DT_OK; DT_ERR_DTYPE for bool or a bad dtype; DT_ERR_OUT_OF_MEMORY
 * when a packing buffer cannot be had; DT_ERR_UNSUPPORTED when a dim does
 * not fit BLAS's 32-bit int. c is unspecified after an error. */
dt_status cpu_gemm(dt_dtype d, const cpu_matrix *a, const cpu_matrix *b,
                   const cpu_matrix *c, const char *bias, int64_t bias_stride);

/* Batched: out [batch..., M, N] (row-major contiguous), a [batch..., M, K]
 * and b [batch..., K, N] with out's batch sizes (stride 0 on broadcast
 * dims); all of ndim >= 2 and dtype out->dtype. When b does not vary over
 * the batch and a's batch dims fold into its rows, this is one GEMM (the
 * linear-layer case); otherwise one GEMM per batch element. bias as in
 * cpu_gemm. Returns as cpu_gemm. */
dt_status cpu_bmm(const cpu_view *out, const cpu_view *a, const cpu_view *b,
                  const char *bias, int64_t bias_stride);

/* How a float32/float64 GEMM is split (kernels/cpu/gemm.c): a grid of
 * blocks of C, mb × nb, each block's K in `panels` panels of kc (the last
 * the remainder); one unit = one panel of one block, one cblas call of at
 * most CPU_GEMM_STEP_FLOP flops (2·mb·nb·kc) once kc > 8. Depends only on
 * m, n, k and the CPU count. */
#define CPU_GEMM_STEP_FLOP 2.5e9
typedef struct cpu_gemm_grid {
  int64_t mb, nb, kc;
  int64_t blocks, panels;
} cpu_gemm_grid;
void cpu_gemm_plan(int64_t m, int64_t n, int64_t k, cpu_gemm_grid *g);
/* Tests: the step bound in flops instead of CPU_GEMM_STEP_FLOP (0: back
 * to it), so small products take the panel path. Set it before issuing
 * the ops it is for. */
void cpu_gemm_set_step(int64_t flop);

/* OpenBLAS's own thread count (process-wide); n >= 1. */
void cpu_blas_set_threads(int n);
int cpu_blas_get_threads(void);

#endif
