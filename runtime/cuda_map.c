/* Ranks onto GPUs (runtime/cuda_map.h): option and environment parsing
 * and the mapping rules, without any CUDA call. */
#include "runtime/cuda_map.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/error.h"

static int parse_bool(const char *s) {
  static const char *yes[] = {"1", "true", "yes", "on"};
  static const char *no[] = {"0", "false", "no", "off"};
  for (int i = 0; i < 4; i++) {
    if (strcasecmp(s, yes[i]) == 0) return 1;
    if (strcasecmp(s, no[i]) == 0) return 0;
  }
  return -1;
}

dt_status runtime_cuda_parse_env(const char *same_device, const char *num_gpu,
                                 int max_ranks, bool *same, int *ranks) {
  *same = false;
  *ranks = 0;
  if (same_device && *same_device) {
    int b = parse_bool(same_device);
    if (b < 0)
      return core_error_set(DT_ERR_INVALID_ARGUMENT, "dt_runtime_create: "
                            "DTORCH_DTENSOR_IN_SAME_DEVICE=\"%s\" is not 1 / "
                            "true or 0 / false", same_device);
    *same = b == 1;
  }
  if (num_gpu && *num_gpu) {
    char *end;
    errno = 0;
    long v = strtol(num_gpu, &end, 10);
    if (errno || *end || v < 1 || v > max_ranks)
      return core_error_set(DT_ERR_INVALID_ARGUMENT, "dt_runtime_create: "
                            "DTORCH_NUM_GPU_WHEN_ENABLE_DTENSOR_IN_SAME_DEVICE"
                            "=\"%s\" is not an integer in [1, %d]", num_gpu,
                            max_ranks);
    *ranks = (int)v;
  }
  return DT_OK;
}

int runtime_cuda_device_index(const char *device) {
  if (!device || strncmp(device, "cuda", 4) != 0) return -2;
  if (device[4] == '\0') return -1;
  if (device[4] != ':' || device[5] < '0' || device[5] > '9') return -2;
  char *end;
  errno = 0;
  long k = strtol(device + 5, &end, 10);
  if (errno || *end || k > 1 << 20) return -2;
  return (int)k;
}

/* options.rank_devices: each "cuda:K" with K < ngpus; distinct, or all
 * one GPU */
static dt_status map_explicit(const char *fn, int nranks, int ngpus,
                              const char *const *rd, int *gpu, bool *same) {
  for (int i = 0; i < nranks; i++) {
    int k = runtime_cuda_device_index(rd[i]);
    if (k < 0)
      return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: options."
                            "rank_devices[%d] \"%s\" is not \"cuda:K\"", fn,
                            i, rd[i] ? rd[i] : "(null)");
    if (k >= ngpus)
      return core_error_set(DT_ERR_DEVICE, "%s: options.rank_devices[%d] "
                            "\"%s\": this machine has %d GPU%s (cuda:0 .. "
                            "cuda:%d)", fn, i, rd[i], ngpus,
                            ngpus == 1 ? "" : "s", ngpus - 1);
    gpu[i] = k;
  }
  bool all_one = true;
  for (int i = 1; i < nranks; i++) all_one = all_one && gpu[i] == gpu[0];
  for (int i = 0; !all_one && i < nranks; i++)
    for (int j = 0; j < i; j++)
      if (gpu[i] == gpu[j])
        return core_error_set(DT_ERR_DEVICE, "%s: options.rank_devices puts "
                              "ranks %d and %d on cuda:%d: ranks share a GPU "
                              "only when all of them do (NCCL refuses two "
                              "ranks on one GPU)", fn, j, i, gpu[i]);
  *same = all_one && nranks > 1;
  return DT_OK;
}

int runtime_cuda_rank_count(int asked, bool same_device, int same_ranks,
                            int ngpus) {
  if (asked) return asked;
  if (same_device)
    return same_ranks ? same_ranks : RUNTIME_SAME_DEVICE_DEFAULT_RANKS;
  return ngpus;
}

dt_status runtime_cuda_map(const char *fn, const char *device, int nranks,
                           int ngpus, bool same_device,
                           const char *const *rank_devices, int *gpu,
                           bool *same_out) {
  *same_out = false;
  if (ngpus < 1)
    return core_error_set(DT_ERR_DEVICE, "%s: no CUDA device", fn);
  if (rank_devices)
    return map_explicit(fn, nranks, ngpus, rank_devices, gpu, same_out);
  int k = runtime_cuda_device_index(device);
  if (k == -2)
    return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: device \"%s\" is not "
                          "\"cuda\" or \"cuda:K\"", fn, device ? device : "");
  if (k >= ngpus)
    return core_error_set(DT_ERR_DEVICE, "%s: device \"%s\": this machine "
                          "has %d GPU%s (cuda:0 .. cuda:%d)", fn, device,
                          ngpus, ngpus == 1 ? "" : "s", ngpus - 1);
  if (same_device || nranks == 1) {
    for (int i = 0; i < nranks; i++) gpu[i] = k < 0 ? 0 : k;
    *same_out = nranks > 1;
    return DT_OK;
  }
  if (k >= 0)
    return core_error_set(DT_ERR_DEVICE, "%s: device \"%s\" names one GPU "
                          "for %d ranks: set DTORCH_DTENSOR_IN_SAME_DEVICE=1 "
                          "to run them all on it, or use \"cuda\"", fn,
                          device, nranks);
  if (nranks > ngpus)
    return core_error_set(DT_ERR_DEVICE, "%s: %d ranks need %d GPUs (one "
                          "rank per GPU) and this machine has %d: set "
                          "DTORCH_DTENSOR_IN_SAME_DEVICE=1 to run all ranks "
                          "on one GPU", fn, nranks, nranks, ngpus);
  for (int i = 0; i < nranks; i++) gpu[i] = i;
  return DT_OK;
}
