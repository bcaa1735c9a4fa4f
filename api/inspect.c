/* Public entry points: inspection for people (mesh/inspect.c).
 * Each forwards to the layer that implements it; the messages those
 * raise name the public function. */
#include "core/error.h"
#include "mesh/inspect.h"

dt_status dt_visualize_sharding(const dt_tensor *t, FILE *out) {
  return mesh_visualize_sharding(t, out, NULL, "dt_visualize_sharding");
}

dt_status dt_visualize_sharding_ex(const dt_tensor *t, FILE *out,
                                   const dt_visualize_options *o) {
  if (o && CORE_RESERVED_ZERO("dt_visualize_sharding_ex", "options", o) != DT_OK)
    return DT_ERR_INVALID_ARGUMENT;
  return mesh_visualize_sharding(t, out, o, "dt_visualize_sharding_ex");
}

dt_status dt_tensor_describe(const dt_tensor *t, FILE *out) {
  /* the op that made t is known to the autograd layer, above mesh/ */
  return mesh_tensor_describe(t, out, t ? dt_tensor_grad_fn(t) : NULL);
}

dt_status dt_memory_report(dt_runtime *rt, FILE *out) {
  return mesh_memory_report(rt, out);
}
