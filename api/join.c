/* Public entry points for joining and splitting: dt_cat and dt_stack box a
 * tensor list and dispatch the ops in ops/join.c; dt_split and dt_chunk are
 * composites (PyTorch's CompositeImplicitAutograd): each piece is a
 * dt_narrow of the input, so hooks and the op printer see narrow ops and
 * every piece is a view sharing the input's storage.
 *
 * Decisions where PyTorch's Python API has no C analogue:
 * - tensor lists hold 1..API_JOIN_MAX_INPUTS entries; a larger n is taken as
 *   a garbage count rather than a request.
 * - split/chunk return the piece count (int); a count above INT_MAX is an
 *   error. out == NULL with max_out == 0 asks for the count only.
 * - split_size 0 is allowed only when the dim has size 0 (one empty piece),
 *   as torch.split; chunk of a size-0 dim gives `chunks` empty pieces, as
 *   torch.chunk (which calls split_with_sizes there). */
#include <limits.h>

#include "api/api.h"

#define API_JOIN_MAX_INPUTS (1 << 20)

/* the list itself: non-NULL, sane n, non-NULL entries; a NULL entry keeps an
 * earlier error (dt_cat(dt_add(..)...) reports the add's failure) */
static dt_status check_list(dt_tensor *const *tensors, int n, const char *api) {
  if (!tensors)
    return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: tensors is NULL", api);
  if (n < 1 || n > API_JOIN_MAX_INPUTS)
    return core_error_set(DT_ERR_INVALID_ARGUMENT,
                        "%s: n = %d tensors (expected 1..%d)", api, n,
                        API_JOIN_MAX_INPUTS);
  for (int i = 0; i < n; i++)
    if (!tensors[i]) {
      if (core_error_chained()) return core_last_status();
      return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: tensors[%d] is NULL",
                          api, i);
    }
  return DT_OK;
}

static dt_tensor *call_list(core_op_id op, const char *api,
                            dt_tensor *const *tensors, int n, int dim) {
  if (check_list(tensors, n, api) != DT_OK) return NULL;
  dt_op_call c;
  core_call_init(&c, op, api);
  core_call_list(&c, tensors, n);
  core_call_int(&c, dim);
  return dispatch_run1(&c);
}

dt_tensor *dt_cat(dt_tensor *const *tensors, int n, int dim) {
  return call_list(CORE_OP_CAT, "dt_cat", tensors, n, dim);
}

dt_tensor *dt_stack(dt_tensor *const *tensors, int n, int dim) {
  return call_list(CORE_OP_STACK, "dt_stack", tensors, n, dim);
}

/* ---- split / chunk */

/* Checks a, dim and the out buffer; *d gets the wrapped dim. */
static dt_status check_split(const dt_tensor *a, int dim, dt_tensor **out,
                             int max_out, const char *api, int *d) {
  if (!a) {
    if (core_error_chained()) return core_last_status();
    return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: a is NULL", api);
  }
  if (max_out < 0)
    return core_error_set(DT_ERR_INVALID_ARGUMENT,
                        "%s: max_out %d is negative", api, max_out);
  if (!out && max_out > 0)
    return core_error_set(DT_ERR_INVALID_ARGUMENT,
                        "%s: out is NULL but max_out is %d (pass max_out 0 "
                        "to ask for the piece count)", api, max_out);
  int n = a->local.ndim;
  if (n == 0)
    return core_error_set(DT_ERR_SHAPE,
                        "%s: expects at least a 1-d tensor, got a 0-d one",
                        api);
  *d = core_wrap_dim(dim, n);
  if (*d < 0)
    return core_error_set(DT_ERR_INVALID_ARGUMENT,
                        "%s: dim %d is out of range for a %d-d tensor "
                        "(expected [%d, %d])", api, dim, n, -n, n - 1);
  return DT_OK;
}

/* Writes the first min(count, max_out) pieces of `size` along d: piece i
 * starts at i * size (< len, or 0 when len is 0, so no overflow) and is at
 * most size long. Returns count, or -1 with out cleared if a narrow fails. */
static int write_pieces(dt_tensor *a, int d, int64_t size, int64_t count,
                        dt_tensor **out, int max_out) {
  int64_t len = a->local.sizes[d];
  int k = count < max_out ? (int)count : max_out;
  for (int i = 0; i < k; i++) {
    int64_t start = i * size;
    int64_t n = len - start < size ? len - start : size;
    out[i] = dt_narrow(a, d, start, n);
    if (!out[i]) {
      for (int j = 0; j < i; j++) {
        dt_tensor_release(out[j]);
        out[j] = NULL;
      }
      return -1;
    }
  }
  return (int)count;
}

static dt_status check_count(int64_t count, const char *api) {
  if (count > INT_MAX)
    return core_error_set(DT_ERR_INVALID_ARGUMENT,
                        "%s: %lld pieces is more than the %d an int can count",
                        api, (long long)count, INT_MAX);
  return DT_OK;
}

int dt_split(dt_tensor *a, int64_t split_size, int dim, dt_tensor **out,
             int max_out) {
  const char *api = "dt_split";
  int d;
  if (check_split(a, dim, out, max_out, api, &d) != DT_OK) return -1;
  int64_t len = a->local.sizes[d];
  if (split_size < 0 || (split_size == 0 && len != 0)) {
    core_error_set(DT_ERR_INVALID_ARGUMENT,
                 "%s: split_size %lld is invalid for dim %d of size %lld "
                 "(expected >= 1; 0 only for a size-0 dim)", api,
                 (long long)split_size, d, (long long)len);
    return -1;
  }
  int64_t count = split_size ? len / split_size + (len % split_size != 0) : 1;
  if (count < 1) count = 1; /* a size-0 dim still gives one empty piece */
  if (check_count(count, api) != DT_OK) return -1;
  return write_pieces(a, d, split_size, count, out, max_out);
}

int dt_chunk(dt_tensor *a, int chunks, int dim, dt_tensor **out,
             int max_out) {
  const char *api = "dt_chunk";
  int d;
  if (check_split(a, dim, out, max_out, api, &d) != DT_OK) return -1;
  if (chunks < 1) {
    core_error_set(DT_ERR_INVALID_ARGUMENT,
                 "%s: chunks must be at least 1, got %d", api, chunks);
    return -1;
  }
  int64_t len = a->local.sizes[d];
  int64_t size = len / chunks + (len % chunks != 0);
  /* a size-0 dim: `chunks` empty pieces (torch.chunk keeps the count) */
  int64_t count = len == 0 ? chunks : len / size + (len % size != 0);
  return write_pieces(a, d, size, count, out, max_out);
}
