/* Element reductions and bulk stores for the emulated collectives
 * (sim/collectives.c moves the data, this file does the arithmetic).
 *
 * Order: a fixed pairwise tree over the n members' indices. Node (lo, hi)
 * of the tree over [0, n) is the leaf in[lo] when hi - lo == 1, else
 * node(lo, mid) op node(mid, hi) with mid = lo + (hi - lo) / 2 (integer
 * division), the root being (0, n). Values are carried in a compute type
 * (float32 for float32/float16/bfloat16, float64, int64 for
 * int32/int64/uint8, bool) through the whole tree and rounded/stored once
 * at the root. The order depends only on n, never on how the caller
 * splits the element range, so every split gives the same bits. Halving
 * makes a process's block of members a subtree when P processes (P a
 * power of two dividing n) each hold n / P consecutive members: they
 * reduce their subtree into a partial (in the compute type) and combine
 * the partials, with the bits of the one-process reduction. Members held
 * otherwise form several maximal subtrees (sim_coll_tree_subtrees).
 *
 * Semantics: SUM and PROD on integers wrap (two's complement, as the
 * storage type); AVG is the root's sum divided by n: floats divide in the
 * compute type, integers sum in 64 bits (wrapping for int64) and divide
 * truncating toward zero (C division; PyTorch backends differ, this is
 * the documented choice); AVG of bool is rejected. MAX/MIN propagate NaN;
 * on bool SUM/MAX are OR, PROD/MIN are AND. */
#ifndef SIM_COLL_REDUCE_H
#define SIM_COLL_REDUCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dtorch/dtorch.h"

/* DT_OK, or the error (DT_ERR_DTYPE / DT_ERR_INVALID_ARGUMENT) set with
 * `what` ("all_reduce") as the message's prefix */
dt_status sim_coll_reduce_check(const char *what, dt_dtype d, dt_reduce_op op);

/* out[o][0..count) = reduction of in[0..nin)[0..count) for o < nout, by
 * the tree over [0, nin), rounded to d (AVG divided by nin). An output may be one of the inputs (each block is read from every input
 * before it is written); outputs must not otherwise overlap inputs. Large
 * outputs are written with non-temporal stores; the caller publishes them
 * with a release after sim_coll_store_fence. */
void sim_coll_reduce(const void *const *in, int nin, void *const *out, int nout,
                 int64_t count, dt_dtype d, dt_reduce_op op);

/* A node of the tree over [0, n) given to sim_coll_tree_reduce: its
 * members [lo, hi) and the buffer holding its value for elements
 * [0, count): in the dtype when acc is false (a member's input, hi == lo +
 * 1), in the compute type when acc is true (a partial: a subtree already
 * reduced, e.g. by another process, with out_acc). */
typedef struct sim_coll_node {
  int lo, hi;
  const void *p;
  bool acc;
} sim_coll_node;

/* Elements [0, count) of tree node (nodes[0].lo, nodes[nn - 1].hi) of the
 * tree over [0, n), evaluated from `nodes` (sorted by lo, tiling that
 * node, each a node of the tree) into out: in the compute type when
 * out_acc (a partial for a later combine; no AVG division), else rounded
 * to dtype (and divided by n for AVG only when the node is the root
 * (0, n)). Bitwise the same as sim_coll_reduce over all n inputs for any
 * tiling, any partials computed by this function, and any split of the
 * element range. Pointers are at element 0 of the range to reduce
 * (callers offset them for a sub-range: by elements of the dtype for
 * inputs and rounded outputs, of the compute type for partials). out must
 * not overlap any input. Blocks of up to 1024 elements, depth + 2
 * compute-type blocks of scratch (32 KiB on the stack); large outputs
 * stream (publish them after sim_coll_store_fence). DT_ERR_INVALID_ARGUMENT
 * (nodes not a tiling into tree nodes, NULL buffers, count < 0) or the
 * errors of sim_coll_reduce_check, with the message set. */
dt_status sim_coll_tree_reduce(const sim_coll_node *nodes, int nn, int n,
                               int64_t count, dt_dtype dtype, dt_reduce_op op,
                               void *out, bool out_acc);

/* The maximal nodes of the tree over [0, n) all of whose members have
 * mine[m] true, sorted by lo: writes them to lo[] / hi[] (room for n
 * each), returns how many (0 when none is mine); -1 with the error set
 * for n < 1 or a NULL buffer. A process reduces each into a partial. */
int sim_coll_tree_subtrees(int n, const bool *mine, int *lo, int *hi);

/* whether [lo, hi) is a node of the tree over [0, n) */
bool sim_coll_tree_is_node(int n, int lo, int hi);

/* bytes of one element of dtype's compute type (the size of a partial's
 * element) */
size_t sim_coll_acc_size(dt_dtype dtype);

/* whether writes of this many bytes per destination should stream */
bool sim_coll_streams(int64_t bytes);

/* memcpy (nothing when dst == src); `stream` as sim_coll_streams advises for
 * the whole of what is being written to dst */
void sim_coll_copy(void *dst, const void *src, int64_t bytes, bool stream);

/* orders this thread's streaming stores before its next release (sfence
 * on x86; nothing elsewhere) */
void sim_coll_store_fence(void);

#endif
