/* dtorch's debugging API: shadow comparison with the single device,
 * communication debugging, inspection (text for people) and timelines.
 * Part of the public API: <dtorch/dtorch.h> includes it; it may also be
 * included on its own. The conventions are dtorch.h's (its top). */
#ifndef DTORCH_DEBUG_H
#define DTORCH_DEBUG_H

#include "dtorch/dtorch.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- shadow comparison with the single device (docs/debugging.md)
 * While shadowing is on in a thread, every DTensor op it runs is also run
 * single-device on the gathered inputs and the outputs are compared; the
 * first op that differs beyond the tolerance (|a - b| <= tol * (1 + |b|))
 * is reported:
 *   "first divergence at op #12 (dt_matmul, layer1.mlp, inputs [S(1)],
 *    [S(0)] → [P(sum)]): max |diff| 3.1e-2 (element 5: ...)"
 * A debugging mode: each op waits for its result and crosses to the host.
 * DTORCH_SHADOW=1 (or =tolerance) turns it on in every thread and prints
 * the first divergence to stderr. Backward ops are DTensor ops: they are
 * checked too. The checks' own gathers are not counted by dt_comm_count. */
typedef struct dt_shadow_report {
  int64_t ops_checked;      /* DTensor ops compared */
  int64_t first_divergence; /* that op's number (1-based), 0: none */
  double max_diff;          /* its largest |difference| */
  bool failed;              /* a check could not run (message says why) */
  char message[1024];       /* "" when all agreed */
  uint64_t reserved[8];     /* zeroed by the library; later fields */
} dt_shadow_report;
/* tolerance 0: 1e-4 */
DT_API dt_status  dt_shadow_begin(double tolerance);
/* stops shadowing; *out (may be NULL) gets the report */
DT_API dt_status  dt_shadow_end(dt_shadow_report *out);
/* labels name the part of the program that runs (a stack per thread,
 * joined with "."): shadow reports show them */
DT_API void       dt_label_push(const char *label);  /* borrowed: keep it alive */
DT_API void       dt_label_pop(void);

/* ---- communication debugging (docs/debugging.md): PyTorch's
 * CommDebugMode with labels as a tree. While on in a thread, every
 * collective its calls run is attributed to the public function that
 * caused it (dt_redistribute, an op in auto mode, dt_backward, dt_to_host
 * of a Partial...) under the thread's label path (dt_label_push), summed
 * per (labels, function, collective, mesh dim). The counts are
 * dt_comm_count's, so the two agree. */
DT_API dt_status  dt_comm_debug_begin(void);
/* stops; writes a table to `table` and one JSON object to `json` (either
 * may be NULL):
 *   label / function                 collective     mesh dim    count          bytes
 *   layer1.mlp                                                      1           4096
 *     dt_redistribute                all_reduce     tp              1           4096
 *   total                                                           1           4096 */
DT_API dt_status  dt_comm_debug_end(FILE *table, FILE *json);
/* the same stack as dt_label_push / dt_label_pop */
DT_API void       dt_comm_debug_label_push(const char *label);
DT_API void       dt_comm_debug_label_pop(void);

/* ---- inspection (docs/inspect.md)
 * Text for people, written to a FILE (open_memstream captures it). They
 * read metadata only (shapes, placements, meshes, allocator counts), never
 * values. Errors: t, rt or out NULL; a write to out that fails
 * (DT_ERR_IO). Ownership: borrow everything; nothing to release. Thread
 * safety: any thread, while other threads run ops on the same runtime. */
typedef struct dt_visualize_options {
  bool ascii;       /* +, -, | instead of Unicode box drawing */
  int max_width;    /* columns the picture may take; 0 = 80 (it grows past
                       that only where rank labels need the room) */
  uint64_t reserved[4]; /* zero; later fields are carved from here */
} dt_visualize_options;
/* Draws which runtime ranks hold which block of a 1-D or 2-D tensor
 * (jax.debug.visualize_array_sharding): the index space cut at every
 * shard boundary, each cell labelled with the ranks holding it ("0,4",
 * "0-3"), sizes roughly proportional to the extents; then a line naming
 * shape, mesh and placements, and what Partial and empty shards mean.
 * A single-device tensor is one cell labelled with its device. Errors:
 * 0-d or > 2-d tensors (DT_ERR_INVALID_ARGUMENT; see
 * dt_tensor_describe), max_width < 0. */
DT_API dt_status dt_visualize_sharding(const dt_tensor *t, FILE *out);
DT_API dt_status dt_visualize_sharding_ex(const dt_tensor *t, FILE *out,
                                          const dt_visualize_options *o);
/* dtype, global shape, requires_grad and grad_fn, mesh and placements,
 * one row per mesh index (rank, coordinates, local shape, global offset,
 * bytes) and the bytes across ranks against the global tensor's (the
 * replication factor); a single-device tensor: device, shape, strides,
 * storage offset, contiguity, bytes. */
DT_API dt_status dt_tensor_describe(const dt_tensor *t, FILE *out);
/* Per rank: bytes in use, peak, cached, and the sizes of the largest live
 * allocator blocks (the allocator does not know which tensor owns a block;
 * the report says so). Each rank takes its snapshot when it reaches this
 * call's record, after the work issued before: the call waits for that.
 * Errors: rt NULL or destroyed. Thread safety: any thread but a rank's. */
DT_API dt_status dt_memory_report(dt_runtime *rt, FILE *out);

/* ---- timelines (docs/trace.md) */
/* Starts recording rt's timeline into a Chrome trace-event JSON file at
 * path (opened now, written by dt_trace_end or dt_runtime_destroy; open
 * it in https://ui.perfetto.dev): one track per rank with every record it
 * runs (op kernels, DTensor ops with placements, redistributes and their
 * collectives with group and bytes, barriers, fetches, frees), its
 * parking and stolen chunks; one track per issuing thread with its
 * publishes, and flow arrows from each publish to the work it caused.
 * DTORCH_TRACE=path does this for a runtime from its creation.
 * Returns: DT_OK. Errors: rt or path NULL/empty (DT_ERR_INVALID_ARGUMENT),
 * a runtime is already traced (DT_ERR_INVALID_ARGUMENT: one at a time),
 * path cannot be opened (DT_ERR_IO, naming the path and the reason),
 * rt destroyed (DT_ERR_DEVICE). Ownership: path is copied.
 * Thread safety: any thread but a rank's. */
DT_API dt_status dt_trace_begin(dt_runtime *rt, const char *path);
/* Waits for the work issued to rt (dt_runtime_synchronize), stops
 * recording, writes the file and frees the buffers. Errors: rt NULL or
 * not traced (DT_ERR_INVALID_ARGUMENT), the write failed (DT_ERR_IO).
 * Thread safety: any thread but a rank's; of two concurrent calls one
 * writes and the other fails (not traced). */
DT_API dt_status dt_trace_end(dt_runtime *rt);

#ifdef __cplusplus
}
#endif
#endif /* DTORCH_DEBUG_H */
