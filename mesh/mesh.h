/* Device meshes, placements and DTensor specs (internal half; the public
 * dt_mesh_* API is in dtorch.h).
 *
 * A mesh is an n-D array of runtime ranks (row-major), with optional dim
 * names. A spec is (mesh, one placement per mesh dim, global shape, dtype):
 * everything needed to know which part of the global tensor each rank
 * holds. Shard(d) follows torch.chunk: chunk = ceil(n / k), coordinate c
 * holds [c*chunk, min(n, (c+1)*chunk)) — the last shards may be smaller or
 * empty. Several mesh dims sharding one tensor dim split it left to right
 * (mesh dim 0 first, the next splits that chunk further). */
#ifndef MESH_MESH_H
#define MESH_MESH_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "dtorch/dtorch.h"

struct dt_mesh {
  _Atomic int64_t refcount;
  dt_runtime *rt;                /* holds a reference on it */
  int ndim;
  int64_t shape[DT_MAX_DIMS];
  int size;                      /* number of ranks */
  int *ranks;                    /* size entries, row-major */
  char *names[DT_MAX_DIMS];      /* NULL when unnamed */
  int *pos;                      /* runtime rank -> index in ranks, or -1 */
  int rt_ranks;                  /* entries of pos */
  /* size x ndim: the coordinates of every mesh index, row-major, made
   * once at creation (ranks read them on every op: no division there) */
  int32_t *coords;
  uint64_t id;                   /* process-unique */
  /* per mesh dim: the collective group of every mesh index (size
   * entries), made by mesh_dim_groups on an issuing thread */
  _Atomic(struct sim_coll_group **) groups[DT_MAX_DIMS];
};

/* [off, off+len) of a dim of n elements split in k parts, part c */
static inline void mesh_shard_range(int64_t n, int64_t k, int64_t c,
                                  int64_t *off, int64_t *len) {
  int64_t chunk = (n + k - 1) / k;
  int64_t o = c * chunk < n ? c * chunk : n;
  int64_t l = n - o < chunk ? n - o : chunk;
  *off = o;
  *len = l;
}

/* coordinates of a mesh index (row-major) */
void mesh_index_coords(const dt_mesh *m, int index, int64_t *coords);
/* the ranks of the group along mesh dim `dim` through `index`, in order;
 * returns the group size and writes the caller's position in *member */
int mesh_dim_group(const dt_mesh *m, int dim, int index, int *ranks,
                   int *member);
/* The collective group through every mesh index along mesh dim `dim`
 * (entry i: mesh index i's group), made on first use. Call it on the
 * issuing thread, before publishing the record whose ranks use it: a rank
 * then never allocates or fails to find a group. NULL + error (naming fn)
 * when out of host memory. Thread-safe; lives as long as the mesh. */
struct sim_coll_group *const *mesh_dim_groups(dt_mesh *m, int dim,
                                              const char *fn);
/* what mesh_dim_groups made (ranks: after it returned non-NULL) */
static inline struct sim_coll_group *mesh_group_at(const dt_mesh *m, int dim,
                                                   int index) {
  /* acquire: pairs with the installing CAS in mesh_dim_groups (the
   * record's publish orders it too) */
  return atomic_load_explicit(&((dt_mesh *)m)->groups[dim],
                              memory_order_acquire)[index];
}

/* The local box of a spec at mesh index `index`: per tensor dim, the
 * global offset and the local size. */
void mesh_local_box(const dt_mesh *m, const dt_placement *pl,
                    const dt_shape *global, int index, int64_t *offsets,
                    int64_t *sizes);
/* Validates placements for a mesh and shape (Shard dims in range, one
 * Partial kind, ...); errors name fn and the values. */
dt_status mesh_check_placements(const dt_mesh *m, const dt_placement *pl,
                                const dt_shape *global, const char *fn);
/* "[S(0), R, P(sum)]" */
char *mesh_placements_str(const dt_placement *pl, int n, char *buf,
                          size_t len);
static inline bool mesh_placement_equal(dt_placement a, dt_placement b) {
  if (a.kind != b.kind) return false;
  if (a.kind == DT_PLACEMENT_SHARD) return a.dim == b.dim;
  if (a.kind == DT_PLACEMENT_PARTIAL) return a.reduce == b.reduce;
  return true;
}
/* the same runtime, shape and ranks (two handles of one mesh, or equal
 * meshes made twice) */
bool mesh_same(const dt_mesh *a, const dt_mesh *b);

/* ---- the implementations behind public entry points (api/) */
/* dt_mesh_create_range and its alias dt_mesh_init (dtorch.h); fn is the
 * public name the caller was called by (messages name it) */
dt_mesh *mesh_init(const char *fn, dt_runtime *rt, const char *device_type,
                   dt_shape shape,
                   const char *const *dim_names);
/* dt_mesh_create (dtorch.h) */
dt_mesh *mesh_create(dt_runtime *rt, const char *device_type, dt_shape shape,
                     const int *ranks, const char *const *dim_names);
/* dt_mesh_ndim (dtorch.h) */
int mesh_ndim(const dt_mesh *m);
/* dt_mesh_shape (dtorch.h) */
dt_shape mesh_shape(const dt_mesh *m);
/* dt_mesh_release (dtorch.h) */
void mesh_release(dt_mesh *m);
/* dt_mesh_retain (dtorch.h) */
dt_mesh *mesh_retain(dt_mesh *m);
/* dt_mesh_size (dtorch.h) */
int mesh_size(const dt_mesh *m);
/* dt_mesh_runtime (dtorch.h) */
dt_runtime *mesh_runtime(const dt_mesh *m);
/* dt_mesh_rank (dtorch.h) */
int mesh_rank(const dt_mesh *m, const int64_t *coords);
/* dt_mesh_coords (dtorch.h) */
dt_status mesh_coords(const dt_mesh *m, int rank, int64_t *coords);
/* dt_mesh_dim_name (dtorch.h) */
const char *mesh_dim_name(const dt_mesh *m, int dim);
/* dt_mesh_dim_index (dtorch.h) */
int mesh_dim_index(const dt_mesh *m, const char *name);
/* dt_mesh_sub (dtorch.h) */
dt_mesh *mesh_sub(const dt_mesh *m, const char *const *names, int n, int rank);
/* dt_mesh_flatten (dtorch.h) */
dt_mesh *mesh_flatten(const dt_mesh *m, const char *const *names, int n,
                      const char *new_name);
/* dt_mesh_format (dtorch.h) */
int mesh_format(const dt_mesh *m, char *buf, size_t len);

#endif
