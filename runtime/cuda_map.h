/* Which GPU each rank of a "cuda" runtime uses (docs/cuda.md, "Ranks and
 * GPUs"): pure functions of the options, the environment's strings and
 * the GPU count, so that tests check every rule without a GPU.
 *
 *  - one rank per GPU: rank i on GPU i, when there are enough GPUs;
 *  - N ranks on one GPU (single-GPU emulation): DTORCH_DTENSOR_IN_SAME_DEVICE=1 (or
 *    true); DTORCH_NUM_GPU_WHEN_ENABLE_DTENSOR_IN_SAME_DEVICE sets N when
 *    neither options.num_ranks nor DTORCH_NUM_RANKS does (default 8);
 *    collectives are then emulated in device memory (NCCL refuses two
 *    ranks on one GPU). The device string "cuda:K" picks the GPU (0 for
 *    "cuda");
 *  - explicit: options.rank_devices, one "cuda:K" per rank; distinct GPUs,
 *    or all the same GPU (the same-device mode). */
#ifndef RUNTIME_CUDA_MAP_H
#define RUNTIME_CUDA_MAP_H

#include <stdbool.h>

#include "dtorch/dtorch.h"

#define RUNTIME_SAME_DEVICE_DEFAULT_RANKS 8

/* The environment's two variables, as strings (NULL or "" = unset):
 * *same (1/true/yes/on, 0/false/no/off, any case) and *ranks (0 = unset,
 * else 1..max_ranks). Errors name the variable and its value. */
dt_status runtime_cuda_parse_env(const char *same_device,
                                 const char *num_gpu, int max_ranks,
                                 bool *same, int *ranks);

/* "cuda" → -1 (no GPU named), "cuda:K" → K; -2 if not a cuda device
 * string. */
int runtime_cuda_device_index(const char *device);

/* The rank count of a "cuda" runtime: `asked` (options.num_ranks or
 * DTORCH_NUM_RANKS; 0 = unset), else in the same-device mode same_ranks
 * (DTORCH_NUM_GPU_WHEN_ENABLE_DTENSOR_IN_SAME_DEVICE; 0 = unset) or 8,
 * else one rank per GPU. */
int runtime_cuda_rank_count(int asked, bool same_device, int same_ranks,
                            int ngpus);

/* Fills gpu[0..nranks) for a runtime of nranks ranks on a machine with
 * ngpus GPUs; *same_out says whether all ranks share one GPU. device is
 * the runtime's device string ("cuda" / "cuda:K"); rank_devices NULL or
 * nranks strings. Errors (DT_ERR_DEVICE / DT_ERR_INVALID_ARGUMENT) name
 * fn, the setting and the GPU count. */
dt_status runtime_cuda_map(const char *fn, const char *device, int nranks,
                           int ngpus, bool same_device,
                           const char *const *rank_devices, int *gpu,
                           bool *same_out);

#endif
