/* README "Use it from C": a DTensor on a 4-rank mesh, an op whose output
 * placement the sharding rules pick (sum of a Shard(0) tensor: Partial),
 * the value fetched with the error checked. */
#include <dtorch/dtorch.h>
#include <stdio.h>

int main(void) {
  printf("dtorch %s\n", dt_version());
  dt_runtime *rt = dt_runtime_create(&(dt_runtime_options){.num_ranks = 4});
  dt_mesh *mesh = dt_mesh_init(rt, "cpu", DT_SHAPE(4), (const char *[]){"tp"});
  dt_tensor_options o = {.mesh = mesh, .placements = DT_PLACEMENTS(DT_SHARD(0))};
  dt_tensor *x = dt_arange(0, 8, 1, &o);            /* [0..7], Shard(0) */
  dt_tensor *sq = dt_mul(x, x);                     /* Shard(0) */
  dt_tensor *y = dt_sum(sq, NULL, 0, false);        /* Partial(sum) */
  float v = 0;
  int rc = dt_to_host(y, &v, sizeof v) != DT_OK;   /* reduces the Partial */
  if (rc) fprintf(stderr, "%s\n", dt_last_error());
  else printf("sum of squares 0..7 = %g\n", v);    /* 140 */
  dt_tensor_release(y);
  dt_tensor_release(sq);
  dt_tensor_release(x);
  dt_mesh_release(mesh);
  dt_runtime_destroy(rt);
  return rc || v != 140;
}
