/* Public entry points: device meshes (mesh/mesh.c).
 * Each forwards to the layer that implements it; the messages those
 * raise name the public function. */
#include "mesh/mesh.h"

dt_mesh *dt_mesh_create_range(dt_runtime *rt, const char *device_type,
                              dt_shape shape, const char *const *dim_names) {
  return mesh_init("dt_mesh_create_range", rt, device_type, shape, dim_names);
}

/* alias of dt_mesh_create_range, kept exported for older programs */
dt_mesh *dt_mesh_init(dt_runtime *rt, const char *device_type, dt_shape shape,
                      const char *const *dim_names) {
  return mesh_init("dt_mesh_init", rt, device_type, shape, dim_names);
}

dt_mesh *dt_mesh_create(dt_runtime *rt, const char *device_type,
                        dt_shape shape, const int *ranks,
                        const char *const *dim_names) {
  return mesh_create(rt, device_type, shape, ranks, dim_names);
}

int dt_mesh_ndim(const dt_mesh *m) {
  return mesh_ndim(m);
}

dt_shape dt_mesh_shape(const dt_mesh *m) {
  return mesh_shape(m);
}

void dt_mesh_release(dt_mesh *m) {
  mesh_release(m);
}

dt_mesh *dt_mesh_retain(dt_mesh *m) {
  return mesh_retain(m);
}

int dt_mesh_size(const dt_mesh *m) {
  return mesh_size(m);
}

dt_runtime *dt_mesh_runtime(const dt_mesh *m) {
  return mesh_runtime(m);
}

int dt_mesh_rank(const dt_mesh *m, const int64_t *coords) {
  return mesh_rank(m, coords);
}

dt_status dt_mesh_coords(const dt_mesh *m, int rank, int64_t *coords) {
  return mesh_coords(m, rank, coords);
}

const char *dt_mesh_dim_name(const dt_mesh *m, int dim) {
  return mesh_dim_name(m, dim);
}

int dt_mesh_dim_index(const dt_mesh *m, const char *name) {
  return mesh_dim_index(m, name);
}

dt_mesh *dt_mesh_sub(const dt_mesh *m, const char *const *names, int n,
                     int rank) {
  return mesh_sub(m, names, n, rank);
}

dt_mesh *dt_mesh_flatten(const dt_mesh *m, const char *const *names, int n,
                         const char *new_name) {
  return mesh_flatten(m, names, n, new_name);
}

int dt_mesh_format(const dt_mesh *m, char *buf, size_t len) {
  return mesh_format(m, buf, len);
}
