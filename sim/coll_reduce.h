/* Element reductions and bulk stores for the emulated collectives
 * (sim/collectives.c moves the data, this file does the arithmetic).
 *
 * Order: element e of the result is ((in[0][e] op in[1][e]) op in[2][e])
 * ... in input order, accumulated in a compute type (float32 for
 * float32/float16/bfloat16, float64, int64 for int32/int64/uint8, bool)
 * and rounded/stored once. The order depends only on the inputs, never on
 * how the caller splits the range, so every split gives the same bits.
 *
 * Semantics: SUM and PROD on integers wrap (two's complement, as the
 * storage type); AVG is the sum divided by the number of inputs: floats
 * divide in the compute type, integers sum in 64 bits (wrapping for int64)
 * and divide truncating toward zero (C division; PyTorch backends differ,
 * this is the documented choice); AVG of bool is rejected. MAX/MIN
 * propagate NaN; on bool SUM/MAX are OR, PROD/MIN are AND. */
#ifndef SIM_COLL_REDUCE_H
#define SIM_COLL_REDUCE_H

#include <stdbool.h>
#include <stdint.h>

#include "dtorch/dtorch.h"

/* DT_OK, or the error (DT_ERR_DTYPE / DT_ERR_INVALID_ARGUMENT) set with
 * `what` ("all_reduce") as the message's prefix */
dt_status sim_coll_reduce_check(const char *what, dt_dtype d, dt_reduce_op op);

/* out[o][0..count) = reduction of in[0..nin)[0..count) for o < nout.
 * An output may be one of the inputs (each block is read from every input
 * before it is written); outputs must not otherwise overlap inputs. Large
 * outputs are written with non-temporal stores; the caller publishes them
 * with a release after sim_coll_store_fence. */
void sim_coll_reduce(const void *const *in, int nin, void *const *out, int nout,
                 int64_t count, dt_dtype d, dt_reduce_op op);

/* whether writes of this many bytes per destination should stream */
bool sim_coll_streams(int64_t bytes);

/* memcpy (nothing when dst == src); `stream` as sim_coll_streams advises for
 * the whole of what is being written to dst */
void sim_coll_copy(void *dst, const void *src, int64_t bytes, bool stream);

/* orders this thread's streaming stores before its next release (sfence
 * on x86; nothing elsewhere) */
void sim_coll_store_fence(void);

#endif
