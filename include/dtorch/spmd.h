/* dtorch's per-rank (SPMD) API: dt_spmd_run, collectives on local
 * tensors, desync call sites, DTensors from and to a rank's local tensor;
 * nothing else (dry runs and fault injection: <dtorch/sim.h>). Part of the
 * public API: <dtorch/dtorch.h> includes it; it may also be included on
 * its own. The conventions are dtorch.h's (its top). */
#ifndef DTORCH_SPMD_H
#define DTORCH_SPMD_H

#include "dtorch/dtorch.h"

#ifdef __cplusplus
extern "C" {
#endif

/* -------------------------------------------------------------------- SPMD
 * The per-rank model (docs/spmd.md), as a torchrun script: dt_spmd_run
 * runs fn on every rank's own thread, after everything issued to the
 * ranks before; each call of fn sees its rank and makes and computes its
 * own local tensors (factories default to its own device, "cpu:<rank>";
 * its ops run at once, on its thread, and report their errors at once),
 * calls collectives itself and may build DTensors from its shard. A rank
 * that calls a different collective than its peers, or with another
 * dtype, size, reduce op or group, fails every member with DT_ERR_DESYNC
 * and a message naming each rank's call and call site:
 *   "all_reduce on group [0, 1, 2, 3] (seq 4): members disagree: rank 3
 *    called all_reduce(float32[1024], sum) at train.c:88; ranks 0, 1, 2
 *    called all_gather(float32[1024] in blocks) at train.c:91"
 * A rank that returns (or fails) while others wait for it in a
 * collective makes their calls fail at once with DT_ERR_DESYNC naming it
 * (across processes, through a member of the group in its process; a
 * group with none left there fails at the collective timeout,
 * DT_ERR_TIMEOUT naming the process: docs/spmd.md).
 * Random factories draw from a copy of the process stream on every rank
 * (equal calls give equal values on every rank, as equally seeded ranks
 * do under torchrun); dt_manual_seed inside fn seeds the rank's copy. */
typedef struct dt_spmd_ctx {
  int rank;          /* this rank's runtime rank id */
  int world_size;    /* the runtime's ranks */
  dt_runtime *rt;
  void *arg;         /* dt_spmd_run's arg, shared by every rank */
  uint64_t reserved[4]; /* zeroed by the library; later fields */
} dt_spmd_ctx;
typedef dt_status (*dt_spmd_fn)(dt_spmd_ctx *ctx);
/* Returns: DT_OK when fn returned DT_OK on every rank; else the lowest
 * failing rank's status, with "dt_spmd_run: rank 3 failed (1 of 8 ranks
 * failed): <its message>". Blocks until every rank returned. Work issued
 * to rt by other threads meanwhile runs after the SPMD run, in order.
 * Errors: rt or fn NULL, rt destroyed (also while waiting for a turn),
 * called on a rank thread (no nesting), no turn within the collective
 * timeout (DT_ERR_TIMEOUT naming the run holding rt, its function and
 * where it was started: a run started by a thread the running function
 * joins never gets one). Thread safety: any thread but a rank's; runs of
 * two threads on one runtime take turns. dt_runtime_destroy inside fn is
 * refused (DT_ERR_INVALID_ARGUMENT). */
DT_API dt_status dt_spmd_run(dt_runtime *rt, dt_spmd_fn fn, void *arg);
/* the calling thread's SPMD rank, -1 outside an SPMD function */
DT_API int       dt_spmd_rank(void);

/* A process group: mesh != NULL: along mesh_dim of mesh (mesh_dim < 0:
 * all of the mesh's ranks, row-major), as PyTorch's mesh.get_group(dim);
 * else ranks[0..nranks) in that order; a NULL group: every rank of the
 * runtime. */
typedef struct dt_group { dt_mesh *mesh; int mesh_dim;
  const int *ranks; int nranks;
  uint64_t reserved[4]; /* zero; later fields are carved from here */
} dt_group;
/* Collectives on this rank's local tensor, inside an SPMD function only
 * (DT_ERR_INVALID_ARGUMENT elsewhere). Functional, as
 * torch.distributed._functional_collectives: each returns a new local
 * tensor and leaves t alone. Every member must make the same call (shapes
 * equal on every rank; dims counted on the local tensor). */
DT_API dt_tensor *dt_all_reduce(dt_tensor *t, dt_reduce_op op, const dt_group *g);
/* the members' tensors concatenated along dim, in member order */
DT_API dt_tensor *dt_all_gather(dt_tensor *t, int dim, const dt_group *g);
/* t reduced over the members, then cut into equal pieces along dim (its
 * size a multiple of the group's): member i keeps piece i */
DT_API dt_tensor *dt_reduce_scatter(dt_tensor *t, dt_reduce_op op, int dim,
                                    const dt_group *g);
/* t cut into equal pieces along split_dim, piece j sent to member j; the
 * pieces received are concatenated along concat_dim in member order */
DT_API dt_tensor *dt_all_to_all(dt_tensor *t, int split_dim, int concat_dim,
                                const dt_group *g);
/* root's t on every member (root: a runtime rank in the group; the
 * others' t gives the shape and dtype) */
DT_API dt_tensor *dt_broadcast(dt_tensor *t, int root, const dt_group *g);
DT_API dt_status  dt_barrier(const dt_group *g);
/* blocking point to point: dt_send returns when dst took the bytes;
 * dt_recv makes a tensor of shape and dtype from src's next send (sizes
 * must agree: DT_ERR_INVALID_ARGUMENT on both sides otherwise) */
DT_API dt_status  dt_send(dt_tensor *t, int dst);
DT_API dt_tensor *dt_recv(int src, dt_shape shape, dt_dtype dtype);
/* The call site the next collective (desync messages) or dt_spmd_run
 * (the report of a run waiting behind it) of this thread reports; the
 * macros below pass __FILE__ and __LINE__ for you. */
DT_API void       dt_call_site(const char *file, int line);
#if !defined(DTORCH_BUILDING) && !defined(DT_NO_CALL_SITES)
#define dt_spmd_run(...) (dt_call_site(__FILE__, __LINE__), dt_spmd_run(__VA_ARGS__))
#define dt_all_reduce(...) (dt_call_site(__FILE__, __LINE__), dt_all_reduce(__VA_ARGS__))
#define dt_all_gather(...) (dt_call_site(__FILE__, __LINE__), dt_all_gather(__VA_ARGS__))
#define dt_reduce_scatter(...) (dt_call_site(__FILE__, __LINE__), dt_reduce_scatter(__VA_ARGS__))
#define dt_all_to_all(...) (dt_call_site(__FILE__, __LINE__), dt_all_to_all(__VA_ARGS__))
#define dt_broadcast(...) (dt_call_site(__FILE__, __LINE__), dt_broadcast(__VA_ARGS__))
#define dt_barrier(...) (dt_call_site(__FILE__, __LINE__), dt_barrier(__VA_ARGS__))
#endif

/* PyTorch's DTensor.from_local, inside an SPMD function: a DTensor on mesh
 * (which holds the calling rank) with placements, whose shard on this rank
 * is `local` (shared when contiguous, else copied). The global shape is
 * inferred as if every shard were as large as this one; for uneven
 * shards pass it to dt_dtensor_from_local_shape. Placements are claims:
 * a wrong one gives wrong values, as in PyTorch (dt_shadow_begin checks
 * Replicate claims). Errors: outside SPMD, local on another rank, local's
 * shape not this rank's shard of the global shape (DT_ERR_SHAPE). Ops on
 * the result run this rank's part; their collectives meet the other
 * ranks' calls of the same op. Differentiable, as PyTorch's: from a local
 * that requires grad (grad mode on) the backward takes the DTensor
 * gradient to these placements (Partial made Replicate) and then this
 * rank's shard; dt_dtensor_to_local's backward makes this rank's gradient
 * its shard of a DTensor laid out as t. */
DT_API dt_tensor *dt_dtensor_from_local(dt_tensor *local, dt_mesh *mesh,
                                        const dt_placement *placements);
DT_API dt_tensor *dt_dtensor_from_local_shape(dt_tensor *local, dt_mesh *mesh,
                                              const dt_placement *placements,
                                              dt_shape global_shape);
/* this rank's shard of t (DTensor.to_local), sharing its storage */
DT_API dt_tensor *dt_dtensor_to_local(dt_tensor *t);

#ifdef __cplusplus
}
#endif
#endif /* DTORCH_SPMD_H */
