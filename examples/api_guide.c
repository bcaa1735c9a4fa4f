/* The DTorch API guide's snippets (meshes, placements, distribute,
 * redistribute, async fetch), translated to C, one function per section;
 * each checks what the guide says happens and the program exits non-zero
 * if anything differs. Public API only. Four ranks stand in for the
 * guide's four GPUs (its "single-GPU emulation" is how dtorch always
 * runs). */
#include <dtorch/dtorch.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

static int failures;
#define CHECK(cond, what)                                                   \
  do {                                                                      \
    if (!(cond)) {                                                          \
      fprintf(stderr, "api_guide: %s failed: %s\n", what, dt_last_error());  \
      failures++;                                                           \
    }                                                                       \
  } while (0)

static bool is(dt_placement p, dt_placement_kind k, int dim) {
  return p.kind == k && (k != DT_PLACEMENT_SHARD || p.dim == dim);
}

/* 1. without a mesh, the API is PyTorch's: a = randn(4, 8); b = a @ aᵀ */
static void single_device(void) {
  dt_tensor *a = dt_randn(DT_SHAPE(4, 8), NULL);
  dt_tensor *at = dt_transpose(a, 0, 1);
  dt_tensor *b = dt_matmul(a, at);
  float av[32], bv[16];
  CHECK(dt_to_host(a, av, sizeof av) == DT_OK && dt_to_host(b, bv, sizeof bv) == DT_OK,
        "randn / matmul");
  double want = 0; /* b[1][2] = row 1 · row 2 */
  for (int k = 0; k < 8; k++) want += (double)av[8 + k] * av[16 + k];
  CHECK(fabs(bv[1 * 4 + 2] - want) < 1e-4, "a @ a.T");
  dt_tensor_release(a);
  dt_tensor_release(at);
  dt_tensor_release(b);
}

/* 2. meshes: DeviceMesh("cuda", [[0, 1], [2, 3]], ["dp", "tp"]) and
 * init_device_mesh("cuda", (2, 2), ["dp", "tp"]) */
static void meshes(dt_runtime *rt, dt_mesh **out) {
  const char *names[] = {"dp", "tp"};
  dt_mesh *m1 = dt_mesh_create(rt, "cpu", DT_SHAPE(2, 2), (const int[]){0, 1, 2, 3}, names);
  dt_mesh *m2 = dt_mesh_init(rt, "cpu", DT_SHAPE(2, 2), names);
  CHECK(m1 && m2 && dt_mesh_ndim(m2) == 2 && dt_mesh_shape(m2).dims[1] == 2, "meshes");
  dt_mesh_release(m1);
  *out = m2;
}

/* 3. tensors on a mesh: zeros(4, 128, 256) with [S(0), R]; a host tensor
 * randn(4, 128) spread as [S(0), R]; each rank's local part */
static void tensors(dt_mesh *mesh) {
  dt_tensor_options o = {.mesh = mesh, .placements = DT_PLACEMENTS(DT_SHARD(0), DT_REPLICATE)};
  dt_tensor *z = dt_zeros(DT_SHAPE(4, 128, 256), &o);
  CHECK(z && dt_tensor_local_shape(z, 0).dims[0] == 2, "zeros on a mesh: local [2, 128, 256]");
  static float host[4 * 128], local[2 * 128];
  for (int i = 0; i < 4 * 128; i++) host[i] = (float)i;
  dt_tensor *t = dt_from_host(host, DT_SHAPE(4, 128), &o);
  /* rank 3 is (dp 1, tp 1): rows 2..3 */
  CHECK(t && dt_local_to_host(t, 3, local, sizeof local) == DT_OK && local[0] == 256,
        "from a host tensor: rank 3 holds rows 2-3");
  dt_tensor_release(z);
  dt_tensor_release(t);
}

/* 3b. placements follow the ops: add and relu keep S(0); softmax over the
 * last dim keeps [S(0), R]; an illegal combination names the op, the
 * placements and the legal ones */
static void propagation(dt_mesh *mesh) {
  dt_tensor_options o = {.mesh = mesh, .placements = DT_PLACEMENTS(DT_SHARD(0), DT_REPLICATE)};
  dt_tensor *a = dt_zeros(DT_SHAPE(4, 128), &o);
  dt_tensor *b = dt_relu(a), *c = dt_add(a, a), *s = dt_softmax(a, -1);
  CHECK(b && is(dt_tensor_placement(b, 0), DT_PLACEMENT_SHARD, 0), "relu keeps S(0)");
  CHECK(c && is(dt_tensor_placement(c, 0), DT_PLACEMENT_SHARD, 0), "add keeps S(0)");
  CHECK(s && is(dt_tensor_placement(s, 0), DT_PLACEMENT_SHARD, 0) &&
            is(dt_tensor_placement(s, 1), DT_PLACEMENT_REPLICATE, 0), "softmax keeps [S(0), R]");
  dt_tensor_options o1 = {.mesh = mesh, .placements = DT_PLACEMENTS(DT_REPLICATE, DT_SHARD(1))};
  dt_tensor *bad = dt_zeros(DT_SHAPE(4, 128), &o1);
  dt_tensor *r = dt_softmax(bad, -1);
  CHECK(!r && dt_last_status() == DT_ERR_PLACEMENT && strstr(dt_last_error(), "legal on mesh dim 1: [R], [S(0)]"),
        "softmax over a sharded dim is refused with the legal placements");
  dt_clear_error();
  dt_tensor_release(a);
  dt_tensor_release(b);
  dt_tensor_release(c);
  dt_tensor_release(s);
  dt_tensor_release(bad);
  dt_tensor_release(r);
}

/* 4. redistribute, redistribute_like, redistribute_by_dict (keep mode) */
static void redistribution(dt_mesh *mesh) {
  dt_tensor_options o = {.mesh = mesh, .placements = DT_PLACEMENTS(DT_SHARD(0), DT_REPLICATE)};
  dt_tensor *t = dt_ones(DT_SHAPE(4, 8), &o);
  dt_tensor *r = dt_redistribute(t, NULL, DT_PLACEMENTS(DT_REPLICATE, DT_SHARD(1)));
  CHECK(r && is(dt_tensor_placement(r, 1), DT_PLACEMENT_SHARD, 1), "redistribute");
  dt_tensor *l = dt_redistribute_like(t, r);
  CHECK(l && is(dt_tensor_placement(l, 0), DT_PLACEMENT_REPLICATE, 0), "redistribute_like");
  const char *dims[] = {"tp"};
  dt_tensor *d = dt_redistribute_by_dict(t, mesh, dims, DT_PLACEMENTS(DT_SHARD(1)), 1,
                                         DT_DEFAULT_KEEP);
  CHECK(d && is(dt_tensor_placement(d, 0), DT_PLACEMENT_SHARD, 0) &&
            is(dt_tensor_placement(d, 1), DT_PLACEMENT_SHARD, 1), "redistribute_by_dict keep");
  float v[32];
  CHECK(d && dt_to_host(d, v, sizeof v) == DT_OK && v[31] == 1, "values survive");
  dt_tensor_release(t);
  dt_tensor_release(r);
  dt_tensor_release(l);
  dt_tensor_release(d);
}

/* 5. to_torch_async: c = rand(1000, 1000) @ rand(1000, 1000); the future
 * returns at once, get() waits */
static void async_fetch(void) {
  dt_tensor *a = dt_rand(DT_SHAPE(1000, 1000), NULL), *b = dt_rand(DT_SHAPE(1000, 1000), NULL);
  dt_tensor *c = dt_matmul(a, b);
  static float host[1000 * 1000];
  dt_future *f = dt_to_host_async(c, host, sizeof host);
  CHECK(f != NULL, "to_host_async");
  CHECK(f && dt_future_wait(f, -1) == DT_OK && host[0] > 100 && host[0] < 400,
        "future.get(): a sum of 1000 products of U(0,1) is near 250");
  dt_future_release(f);
  dt_tensor_release(a);
  dt_tensor_release(b);
  dt_tensor_release(c);
}

int main(void) {
  dt_runtime *rt = dt_runtime_create(&(dt_runtime_options){.num_ranks = 4});
  if (!rt) {
    fprintf(stderr, "%s\n", dt_last_error());
    return 1;
  }
  dt_mesh *mesh = NULL;
  single_device();
  meshes(rt, &mesh);
  if (mesh) {
    tensors(mesh);
    propagation(mesh);
    redistribution(mesh);
  }
  async_fetch();
  dt_mesh_release(mesh);
  dt_runtime_destroy(rt);
  printf("API guide snippets: %s\n", failures ? "FAILED" : "all as documented");
  return failures ? 1 : 0;
}
