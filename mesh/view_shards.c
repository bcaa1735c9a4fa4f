/* dt_view_shards: a DTensor of another global shape and placements over
 * the very storages of t's shards, when each rank's shard holds the same
 * elements in the same order under both layouts. No data moves: every
 * rank's part of the record retains its own storage of t and publishes
 * it as its storage of the result (stream order: t's record ran first on
 * that rank).
 *
 * The condition, checked on the issuing thread for every mesh index: the
 * rank's box is one contiguous range of the global row-major order under
 * each layout (its leading dims of extent 1, then one partial dim, then
 * only whole dims, or no element at all), and the two ranges are equal;
 * and each mesh dim is Partial with the same op in both or in neither (a
 * partial term stays a partial term). Then the result is t.reshape(shape)
 * held exactly where t is held: [4096, 1024] as [R, S(0)] on a dp x tp
 * mesh is [4, 1048576] as [R, S(0)], each tp rank's rows one row. The
 * data-parallel optimiser step shards that row over dp in contiguous
 * pieces instead of strided columns (api/optim.c). */
#include "mesh/handle.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "mesh/shard.h"
#include "runtime/exec.h"

/* the box's flat range [*start, *start + numel) in the row-major order of
 * shape; false when the box is not one contiguous range */
static bool flat_range(const mesh_box *b, const dt_shape *shape, int64_t *start) {
  int64_t n = mesh_box_numel(b);
  *start = 0;
  if (n == 0) return true; /* nothing held: any layout agrees */
  int p = b->n - 1;        /* the trailing dims the box holds whole */
  while (p >= 0 && b->len[p] == shape->dims[p]) p--;
  for (int d = 0; d < p; d++)
    if (b->len[d] != 1) return false;
  int64_t stride = 1;
  for (int d = b->n - 1; d >= 0; d--) {
    *start += b->off[d] * stride;
    stride *= shape->dims[d];
  }
  return true;
}

/* the first mesh index whose shard differs, or -1 (same) */
static int first_differing(const dt_mesh *m, const core_spec *s, const dt_shape *shape,
                           const dt_placement *pl, int64_t *a0, int64_t *b0,
                           int64_t *n) {
  for (int i = 0; i < m->size; i++) {
    mesh_box x = mesh_box_of(m, s->placements, &s->shape, i);
    mesh_box y = mesh_box_of(m, pl, shape, i);
    bool cx = flat_range(&x, &s->shape, a0), cy = flat_range(&y, shape, b0);
    *n = mesh_box_numel(&x);
    if (!cx || !cy || *n != mesh_box_numel(&y) || (*n && *a0 != *b0)) {
      if (!cx) *a0 = -1;
      if (!cy) *b0 = -1;
      return i;
    }
  }
  return -1;
}

static dt_status check(const dt_tensor *t, const dt_shape *shape,
                       const dt_placement *pl, const char *fn) {
  const core_spec *s = t->spec;
  const dt_mesh *m = s->mesh;
  char a[CORE_SHAPE_STR_LEN], b[CORE_SHAPE_STR_LEN];
  int64_t n0 = core_numel_of(s->shape.dims, s->shape.ndim), n1;
  if (!core_numel_checked(shape->dims, shape->ndim, &n1) || n0 != n1)
    return core_error_set(DT_ERR_SHAPE, "%s: shape %s does not hold t's %lld "
                          "elements (t has shape %s)", fn,
                          core_shape_str(shape->dims, shape->ndim, b, sizeof b),
                          (long long)n0,
                          core_shape_str(s->shape.dims, s->shape.ndim, a, sizeof a));
  for (int d = 0; d < m->ndim; d++) {
    bool px = s->placements[d].kind == DT_PLACEMENT_PARTIAL;
    bool py = pl[d].kind == DT_PLACEMENT_PARTIAL;
    if (px != py || (px && s->placements[d].reduce != pl[d].reduce))
      return core_error_set(DT_ERR_PLACEMENT, "%s: placements[%d] must be Partial "
                            "with t's op exactly where t is Partial (t: %s, "
                            "given: %s)", fn, d, px ? "Partial" : "not Partial",
                            py ? "Partial" : "not Partial");
  }
  int64_t x0, y0, n;
  int i = first_differing(m, s, shape, pl, &x0, &y0, &n);
  if (i < 0) return DT_OK;
  return core_error_set(DT_ERR_PLACEMENT, "%s: rank %d's shard is not the same "
                        "elements in the same order under both layouts (t, "
                        "shape %s: %lld elements %s %lld; given shape %s: %s %lld): "
                        "its data would have to move (use dt_reshape)", fn,
                        m->ranks[i],
                        core_shape_str(s->shape.dims, s->shape.ndim, a, sizeof a),
                        (long long)n, x0 < 0 ? "in pieces, not from" : "from",
                        (long long)(x0 < 0 ? 0 : x0),
                        core_shape_str(shape->dims, shape->ndim, b, sizeof b),
                        y0 < 0 ? "in pieces, not from" : "from",
                        (long long)(y0 < 0 ? 0 : y0));
}

typedef struct alias_job { dt_tensor *src, *dst; } alias_job;

/* this rank's storage of src becomes its storage of dst (the count taken
 * for dst; the release store publishes it, as mesh_rank_storage does) */
static void alias_on_rank(void *arg, dt_runtime *rt, int rank) {
  alias_job *j = arg;
  const dt_mesh *m = j->src->spec->mesh;
  int idx = rank < m->rt_ranks ? m->pos[rank] : -1;
  if (idx < 0) return;
  mesh_rank_mem rm;
  mesh_rank_mem_init(&rm, rt, rank, "dt_view_shards"); /* faults armed */
  core_storage *st = j->src->spec->storages[idx]; /* made on this thread */
  if (!st) mesh_rank_note(&rm, DT_ERR_INTERNAL, "t's shard was never made");
  if (rm.st != DT_OK) { /* a poisoned shard: the error reaches its readers */
    mesh_rank_finish(&rm, mesh_rank_storage(&rm, j->dst, idx), (mesh_buf){NULL});
    return;
  }
  core_storage_retain(st);
  __atomic_store_n(&j->dst->spec->storages[idx], st, __ATOMIC_RELEASE);
}

static void alias_done(void *arg) {
  alias_job *j = arg;
  core_tensor_release(j->src);
  core_tensor_release(j->dst);
  free(j);
}

dt_tensor *mesh_view_shards(dt_tensor *t, dt_shape shape, const dt_placement *pl,
                            bool writable) {
  static const char *fn = "dt_view_shards";
  if (!t || !t->spec) {
    if (t || !core_error_chained())
      core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: t is %s", fn,
                     t ? "a single-device tensor (it has no shards)" : "NULL");
    return NULL;
  }
  if (shape.ndim < 0 || shape.ndim > DT_MAX_DIMS) {
    core_error_set(DT_ERR_SHAPE, "%s: shape has %d dims (expected 0..%d)", fn,
                   shape.ndim, DT_MAX_DIMS);
    return NULL;
  }
  dt_mesh *m = t->spec->mesh;
  dt_placement norm[DT_MAX_DIMS];
  if (!pl) {
    core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: placements is NULL", fn);
    return NULL;
  }
  if (mesh_dtensor_check_placements(m, pl, &shape, norm, fn) != DT_OK ||
      check(t, &shape, norm, fn) != DT_OK)
    return NULL;
  dt_tensor *out = mesh_dtensor_make(m, norm, shape, t->dtype, fn);
  if (!out) return NULL;
  mesh_dry_forget(out); /* a dry run counts t's shards once */
  if (!writable) out->spec->view_of = "view_shards"; /* writes would reach t */
  alias_job *j = malloc(sizeof *j);
  if (!j) {
    core_tensor_release(out);
    core_error_set(DT_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
    return NULL;
  }
  j->src = core_tensor_retain(t);
  j->dst = core_tensor_retain(out);
  if (runtime_publish_helped_call(m->rt, "view_shards", alias_on_rank, alias_done, j,
                                  SCHED_HELP_ALONE) != DT_OK) {
    alias_done(j);
    core_tensor_release(out);
    runtime_publish_failed(fn);
    return NULL;
  }
  return out;
}
