/* Device meshes (PyTorch's DeviceMesh / init_device_mesh): an n-D,
 * row-major arrangement of a runtime's ranks with optional dim names;
 * sub-meshes by name, flatten, PyTorch-style repr; and the placement
 * helpers the spec and redistribute layers build on (local boxes,
 * validation, printing).
 *
 * A mesh is immutable once built, so any thread may query it; only the
 * refcount changes. Every constructor (init, create, sub, flatten) goes
 * through mesh_build, which validates and copies everything it is given. */
#include "mesh/mesh.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "runtime/backend.h"
#include "runtime/runtime.h"
#include "sim/collectives.h"

#define REPR_LEN 256   /* mesh reprs inside error messages */
#define PLACEMENTS_LEN 160

static _Atomic uint64_t next_mesh_id = 1;

static const char *const reduce_names[] = {"sum", "avg", "max", "min",
                                           "prod"};
_Static_assert(sizeof reduce_names / sizeof *reduce_names ==
                   DT_REDUCE_PROD + 1,
               "reduce op name table out of date");

/* ------------------------------------------------------------ strings */

/* appends like snprintf: n counts what the whole text needs, buf holds
 * what fits (always NUL-terminated when len > 0) */
typedef struct sbuf {
  char *buf;
  size_t len, n;
} sbuf;

static sbuf sb_make(char *buf, size_t len) {
  if (buf && len) buf[0] = '\0';
  return (sbuf){buf && len ? buf : NULL, buf ? len : 0, 0};
}

__attribute__((format(printf, 2, 3)))
static void sb_printf(sbuf *s, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  bool room = s->n < s->len;
  int k = vsnprintf(room ? s->buf + s->n : NULL, room ? s->len - s->n : 0,
                    fmt, ap);
  va_end(ap);
  if (k > 0) s->n += (size_t)k;
}

/* "('dp', 'tp')" — a Python tuple, so one name reads "('dp',)" */
static void sb_names(sbuf *s, char *const *names, int n) {
  sb_printf(s, "(");
  for (int i = 0; i < n; i++)
    sb_printf(s, i ? ", '%s'" : "'%s'", names[i]);
  sb_printf(s, n == 1 ? ",)" : ")");
}

/* the mesh's repr for error messages, cut short with "..." */
static const char *repr(const dt_mesh *m, char *buf) {
  if (mesh_format(m, buf, REPR_LEN) >= REPR_LEN)
    memcpy(buf + REPR_LEN - 4, "...", 4);
  return buf;
}

/* "mesh dim 1 ('tp')" or "mesh dim 1" */
static const char *dim_label(const dt_mesh *m, int d, char *buf,
                             size_t len) {
  if (m->names[0])
    snprintf(buf, len, "mesh dim %d ('%s')", d, m->names[d]);
  else
    snprintf(buf, len, "mesh dim %d", d);
  return buf;
}

/* --------------------------------------------------------- construction */

/* device_type names the runtime's kind of ranks ("cpu", "cuda"), as
 * PyTorch's DeviceMesh does; NULL: whatever the runtime has */
static dt_status check_device(const char *fn, const dt_runtime *rt,
                              const char *device_type) {
  if (!device_type) return DT_OK;
  bool cuda = strncmp(device_type, "cuda", 4) == 0;
  if (!cuda && strcmp(device_type, "cpu") != 0)
    return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: device_type \"%s\" is "
                          "unknown (expected \"cpu\" or \"cuda\")", fn,
                          device_type);
  if (cuda && device_type[4])
    return core_error_set(DT_ERR_DEVICE, "%s: device_type \"%s\": a mesh "
                          "takes a kind of device (\"cuda\"), its ranks are "
                          "the devices", fn, device_type);
  if (strcmp(device_type, rt->backend->name) != 0)
    return core_error_set(DT_ERR_DEVICE, "%s: device_type \"%s\", but the "
                          "runtime's ranks are \"%s\" (a runtime made with "
                          "device = \"%s\" has them; docs/cuda.md)", fn,
                          device_type, rt->backend->name, device_type);
  return DT_OK;
}

/* rt, or this thread's runtime when NULL; NULL + error if none or dead */
static dt_runtime *live_runtime(const char *fn, dt_runtime *rt) {
  if (!rt) return runtime_for_factories(fn);
  if (atomic_load_explicit(&rt->dead, memory_order_acquire)) {
    core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: the runtime was destroyed",
                 fn);
    return NULL;
  }
  return rt;
}

static dt_status check_shape(const dt_runtime *rt, const char *fn,
                             const dt_shape *shape) {
  if (shape->ndim < 1 || shape->ndim > DT_MAX_DIMS)
    return core_error_set(DT_ERR_MESH, "%s: a mesh has 1 to %d dims, the "
                        "shape has %d", fn, DT_MAX_DIMS, shape->ndim);
  char s[CORE_SHAPE_STR_LEN];
  int64_t size = 1;
  for (int d = 0; d < shape->ndim; d++)
    if (shape->dims[d] < 1)
      return core_error_set(DT_ERR_MESH, "%s: mesh shape %s: dim %d is %lld, "
                          "must be >= 1", fn,
                          core_shape_str(shape->dims, shape->ndim, s, sizeof s),
                          d, (long long)shape->dims[d]);
  bool overflow = false;
  for (int d = 0; d < shape->ndim; d++)
    overflow |= __builtin_mul_overflow(size, shape->dims[d], &size);
  if (overflow || size > rt->nranks)
    return core_error_set(DT_ERR_MESH, "%s: mesh shape %s needs %s%lld ranks, "
                        "the runtime has %d", fn,
                        core_shape_str(shape->dims, shape->ndim, s, sizeof s),
                        overflow ? "more than " : "",
                        overflow ? (long long)INT64_MAX : (long long)size,
                        rt->nranks);
  return DT_OK;
}

static dt_status check_names(const char *fn, int ndim,
                             const char *const *names) {
  if (!names) return DT_OK;
  for (int i = 0; i < ndim; i++) {
    if (!names[i])
      return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: dim_names[%d] is "
                          "NULL (pass dim_names = NULL for an unnamed mesh)",
                          fn, i);
    if (!names[i][0])
      return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: dim_names[%d] is "
                          "empty", fn, i);
    for (int j = 0; j < i; j++)
      if (strcmp(names[i], names[j]) == 0)
        return core_error_set(DT_ERR_MESH, "%s: dim name \"%s\" is used twice "
                            "(dim_names[%d] and dim_names[%d])", fn,
                            names[i], j, i);
  }
  return DT_OK;
}

/* copies ranks (NULL: 0..size-1) into m, filling pos; errors name fn */
static dt_status fill_ranks(dt_mesh *m, const char *fn, const int *ranks) {
  for (int i = 0; i < m->rt_ranks; i++) m->pos[i] = -1;
  for (int i = 0; i < m->size; i++) {
    int r = ranks ? ranks[i] : i;
    if (r < 0 || r >= m->rt_ranks)
      return core_error_set(DT_ERR_MESH, "%s: ranks[%d] = %d is outside the "
                          "runtime's ranks [0, %d)", fn, i, r, m->rt_ranks);
    if (m->pos[r] >= 0)
      return core_error_set(DT_ERR_MESH, "%s: rank %d appears twice, at "
                          "ranks[%d] and ranks[%d]", fn, r, m->pos[r], i);
    m->ranks[i] = r;
    m->pos[r] = i;
  }
  return DT_OK;
}

/* The one constructor: validates shape, names and ranks (NULL = row-major
 * 0..size-1) against rt and copies them. */
static dt_mesh *mesh_build(dt_runtime *rt, const char *fn, dt_shape shape,
                           const int *ranks, const char *const *names) {
  if (check_shape(rt, fn, &shape) != DT_OK ||
      check_names(fn, shape.ndim, names) != DT_OK)
    return NULL;
  dt_mesh *m = calloc(1, sizeof *m);
  if (!m) goto oom;
  atomic_init(&m->refcount, 1);
  runtime_ref(rt);
  m->rt = rt;
  m->ndim = shape.ndim;
  m->size = 1;
  for (int d = 0; d < shape.ndim; d++) {
    m->shape[d] = shape.dims[d];
    m->size *= (int)shape.dims[d];
  }
  m->rt_ranks = rt->nranks;
  m->ranks = malloc((size_t)m->size * sizeof *m->ranks);
  m->pos = malloc((size_t)m->rt_ranks * sizeof *m->pos);
  if (!m->ranks || !m->pos) goto oom;
  if (fill_ranks(m, fn, ranks) != DT_OK) goto fail;
  if (!(m->coords = malloc((size_t)m->size * (size_t)m->ndim * sizeof *m->coords)))
    goto oom;
  for (int i = 0; i < m->size; i++)
    for (int d = m->ndim - 1, rest = i; d >= 0; d--) {
      m->coords[(size_t)i * (size_t)m->ndim + (size_t)d] = rest % (int)m->shape[d];
      rest /= (int)m->shape[d];
    }
  for (int d = 0; names && d < m->ndim; d++)
    if (!(m->names[d] = strdup(names[d]))) goto oom;
  m->id = atomic_fetch_add_explicit(&next_mesh_id, 1, memory_order_relaxed);
  return m;
oom:
  core_error_set(DT_ERR_OUT_OF_MEMORY, "%s: out of host memory for a mesh of "
               "%d ranks", fn, m ? m->size : 0);
fail:
  mesh_release(m);
  return NULL;
}

dt_mesh *mesh_init(const char *fn, dt_runtime *rt, const char *device_type,
                   dt_shape shape, const char *const *dim_names) {
  if (!(rt = live_runtime(fn, rt))) return NULL;
  if (check_device(fn, rt, device_type) != DT_OK) return NULL;
  return mesh_build(rt, fn, shape, NULL, dim_names);
}

dt_mesh *mesh_create(dt_runtime *rt, const char *device_type,
                        dt_shape shape, const int *ranks,
                        const char *const *dim_names) {
  static const char fn[] = "dt_mesh_create";
  if (!ranks) {
    core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: ranks is NULL (use "
                 "dt_mesh_create_range for ranks 0..n-1)", fn);
    return NULL;
  }
  if (!(rt = live_runtime(fn, rt))) return NULL;
  if (check_device(fn, rt, device_type) != DT_OK) return NULL;
  return mesh_build(rt, fn, shape, ranks, dim_names);
}

dt_mesh *mesh_retain(dt_mesh *m) {
  /* relaxed: the caller holds a reference already */
  if (m) atomic_fetch_add_explicit(&m->refcount, 1, memory_order_relaxed);
  return m;
}

void mesh_release(dt_mesh *m) {
  if (!m) return;
  /* acq_rel: every use of m by any holder happens-before the free */
  if (atomic_fetch_sub_explicit(&m->refcount, 1, memory_order_acq_rel) != 1)
    return;
  for (int d = 0; d < DT_MAX_DIMS; d++) {
    free(m->names[d]);
    free(atomic_load_explicit(&m->groups[d], memory_order_relaxed));
  }
  free(m->ranks);
  free(m->pos);
  free(m->coords);
  if (m->rt) runtime_unref(m->rt);
  free(m);
}

/* --------------------------------------------------------------- queries */

static bool null_mesh(const dt_mesh *m, const char *fn) {
  if (m) return false;
  core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: the mesh is NULL", fn);
  return true;
}

int mesh_ndim(const dt_mesh *m) {
  return null_mesh(m, "dt_mesh_ndim") ? -1 : m->ndim;
}

dt_shape mesh_shape(const dt_mesh *m) {
  dt_shape s = {.ndim = -1};  /* a failed shape query (dtorch.h) */
  if (null_mesh(m, "dt_mesh_shape")) return s;
  s.ndim = m->ndim;
  memcpy(s.dims, m->shape, sizeof s.dims);
  return s;
}

int mesh_size(const dt_mesh *m) {
  return null_mesh(m, "dt_mesh_size") ? -1 : m->size;
}

dt_runtime *mesh_runtime(const dt_mesh *m) {
  return null_mesh(m, "dt_mesh_runtime") ? NULL : m->rt;
}

int mesh_rank(const dt_mesh *m, const int64_t *coords) {
  static const char fn[] = "dt_mesh_rank";
  if (null_mesh(m, fn)) return -1;
  if (!coords) {
    core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: coords is NULL", fn);
    return -1;
  }
  int64_t index = 0;
  for (int d = 0; d < m->ndim; d++) {
    if (coords[d] < 0 || coords[d] >= m->shape[d]) {
      char label[80];
      core_error_set(DT_ERR_MESH, "%s: coordinate %lld on %s is outside "
                   "[0, %lld)", fn, (long long)coords[d],
                   dim_label(m, d, label, sizeof label),
                   (long long)m->shape[d]);
      return -1;
    }
    index = index * m->shape[d] + coords[d];
  }
  return m->ranks[index];
}

dt_status mesh_coords(const dt_mesh *m, int rank, int64_t *coords) {
  static const char fn[] = "dt_mesh_coords";
  if (null_mesh(m, fn)) return DT_ERR_INVALID_ARGUMENT;
  if (!coords)
    return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: coords is NULL", fn);
  if (rank < 0 || rank >= m->rt_ranks || m->pos[rank] < 0) {
    char r[REPR_LEN];
    return core_error_set(DT_ERR_MESH, "%s: rank %d is not in mesh %s", fn,
                        rank, repr(m, r));
  }
  mesh_index_coords(m, m->pos[rank], coords);
  return DT_OK;
}

const char *mesh_dim_name(const dt_mesh *m, int dim) {
  if (null_mesh(m, "dt_mesh_dim_name")) return NULL;
  if (dim < 0 || dim >= m->ndim) {
    core_error_set(DT_ERR_MESH, "dt_mesh_dim_name: dim %d is outside [0, %d)",
                 dim, m->ndim);
    return NULL;
  }
  return m->names[dim];
}

static int find_dim(const dt_mesh *m, const char *name) {
  for (int d = 0; m->names[0] && d < m->ndim; d++)
    if (strcmp(m->names[d], name) == 0) return d;
  return -1;
}

/* the dim named `name`, or -1 + an error that lists the known names */
static int lookup_dim(const dt_mesh *m, const char *fn, const char *name) {
  char r[REPR_LEN];
  if (!name) {
    core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: the dim name is NULL", fn);
    return -1;
  }
  if (!m->names[0]) {
    core_error_set(DT_ERR_MESH, "%s: no dim \"%s\": mesh %s has no dim names",
                 fn, name, repr(m, r));
    return -1;
  }
  int d = find_dim(m, name);
  if (d < 0) {
    sbuf s = sb_make(r, sizeof r);
    sb_names(&s, m->names, m->ndim);
    core_error_set(DT_ERR_MESH, "%s: no mesh dim named \"%s\" (the mesh's "
                 "dims are %s)", fn, name, r);
  }
  return d;
}

int mesh_dim_index(const dt_mesh *m, const char *name) {
  if (null_mesh(m, "dt_mesh_dim_index")) return -1;
  return lookup_dim(m, "dt_mesh_dim_index", name);
}

/* ------------------------------------------------------ sub and flatten */

/* names[0..n) → mesh dims, which must be distinct and in m's order */
static dt_status resolve_dims(const dt_mesh *m, const char *fn,
                              const char *const *names, int n, int *dims) {
  if (null_mesh(m, fn)) return DT_ERR_INVALID_ARGUMENT;
  if (!names)
    return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: names is NULL", fn);
  if (n < 1 || n > m->ndim)
    return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: n = %d names, the "
                        "mesh has %d dims", fn, n, m->ndim);
  for (int i = 0; i < n; i++) {
    if ((dims[i] = lookup_dim(m, fn, names[i])) < 0) return core_last_status();
    if (i && dims[i] == dims[i - 1])
      return core_error_set(DT_ERR_MESH, "%s: dim \"%s\" is named twice", fn,
                          names[i]);
    if (i && dims[i] < dims[i - 1]) {
      char known[REPR_LEN];
      sbuf s = sb_make(known, sizeof known);
      sb_names(&s, m->names, m->ndim);
      return core_error_set(DT_ERR_MESH, "%s: \"%s\" comes before \"%s\" in the "
                          "mesh's dims %s; name dims in that order", fn,
                          names[i], names[i - 1], known);
    }
  }
  return DT_OK;
}

dt_mesh *mesh_sub(const dt_mesh *m, const char *const *names, int n,
                     int rank) {
  static const char fn[] = "dt_mesh_sub";
  int dims[DT_MAX_DIMS];
  if (resolve_dims(m, fn, names, n, dims) != DT_OK) return NULL;
  if (rank < 0 || rank >= m->rt_ranks || m->pos[rank] < 0) {
    char r[REPR_LEN];
    core_error_set(DT_ERR_MESH, "%s: rank %d is not in mesh %s", fn, rank,
                 repr(m, r));
    return NULL;
  }
  /* all dims: the mesh itself, as PyTorch's mesh["dp", "tp"] */
  if (n == m->ndim) return mesh_retain((dt_mesh *)m);
  int64_t coords[DT_MAX_DIMS];
  mesh_index_coords(m, m->pos[rank], coords);
  dt_shape shape = {.ndim = n};
  const char *sub_names[DT_MAX_DIMS];
  int size = 1;
  for (int i = 0; i < n; i++) {
    shape.dims[i] = m->shape[dims[i]];
    sub_names[i] = m->names[dims[i]];
    size *= (int)shape.dims[i];
  }
  int *ranks = malloc((size_t)size * sizeof *ranks);
  if (!ranks) {
    core_error_set(DT_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
    return NULL;
  }
  /* walk the named dims row-major, the others fixed at rank's coords */
  for (int j = 0; j < size; j++) {
    int rest = j;
    for (int i = n - 1; i >= 0; i--) {
      coords[dims[i]] = rest % shape.dims[i];
      rest /= (int)shape.dims[i];
    }
    int64_t index = 0;
    for (int d = 0; d < m->ndim; d++) index = index * m->shape[d] + coords[d];
    ranks[j] = m->ranks[index];
  }
  dt_mesh *sub = mesh_build(m->rt, fn, shape, ranks, sub_names);
  free(ranks);
  return sub;
}

/* names joined with "_" (malloc'd) */
static char *join_names(const char *const *names, int n) {
  sbuf s = sb_make(NULL, 0);
  for (int pass = 0; pass < 2; pass++) {
    for (int i = 0; i < n; i++) sb_printf(&s, i ? "_%s" : "%s", names[i]);
    if (pass) break;
    char *buf = malloc(s.n + 1);
    if (!buf) return NULL;
    s = sb_make(buf, s.n + 1);
  }
  return s.buf;
}

dt_mesh *mesh_flatten(const dt_mesh *m, const char *const *names, int n,
                         const char *new_name) {
  static const char fn[] = "dt_mesh_flatten";
  int dims[DT_MAX_DIMS];
  if (resolve_dims(m, fn, names, n, dims) != DT_OK) return NULL;
  if (dims[n - 1] - dims[0] != n - 1) {
    char known[REPR_LEN];
    sbuf s = sb_make(known, sizeof known);
    sb_names(&s, m->names, m->ndim);
    core_error_set(DT_ERR_MESH, "%s: dims \"%s\" .. \"%s\" are not adjacent in "
                 "the mesh's dims %s", fn, names[0], names[n - 1], known);
    return NULL;
  }
  if (new_name && !new_name[0]) {
    core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: new_name is empty", fn);
    return NULL;
  }
  char *joined = new_name ? NULL : join_names(names, n);
  if (!new_name && !joined) {
    core_error_set(DT_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
    return NULL;
  }
  dt_shape shape = {0};
  const char *flat_names[DT_MAX_DIMS];
  for (int d = 0; d < m->ndim; d++) {
    if (d > dims[0] && d <= dims[n - 1]) {
      shape.dims[shape.ndim - 1] *= m->shape[d];
      continue;
    }
    flat_names[shape.ndim] = d == dims[0] ? (new_name ? new_name : joined)
                                          : m->names[d];
    shape.dims[shape.ndim++] = m->shape[d];
  }
  /* row-major order is unchanged by merging adjacent dims */
  dt_mesh *flat = mesh_build(m->rt, fn, shape, m->ranks, flat_names);
  free(joined);
  return flat;
}

/* --------------------------------------------------------------- format */

static void format_ranks(const dt_mesh *m, sbuf *s) {
  for (int i = 0; i < m->size; i++) {
    int64_t block = 1;
    if (i) sb_printf(s, ", ");
    /* a "[" for each dim whose block starts here, innermost last */
    for (int d = m->ndim - 1; d >= 0 && i % (block *= m->shape[d]) == 0; d--)
      sb_printf(s, "[");
    sb_printf(s, "%d", m->ranks[i]);
    block = 1;
    for (int d = m->ndim - 1;
         d >= 0 && (i + 1) % (block *= m->shape[d]) == 0; d--)
      sb_printf(s, "]");
  }
}

int mesh_format(const dt_mesh *m, char *buf, size_t len) {
  sbuf s = sb_make(buf, len);
  if (null_mesh(m, "dt_mesh_format")) return -1;
  sb_printf(&s, "DeviceMesh('cpu', ");
  format_ranks(m, &s);
  if (m->names[0]) {
    sb_printf(&s, ", mesh_dim_names=");
    sb_names(&s, m->names, m->ndim);
  }
  sb_printf(&s, ")");
  return (int)s.n;
}

/* ------------------------------------------------------ spec helpers */

void mesh_index_coords(const dt_mesh *m, int index, int64_t *coords) {
  CORE_ASSERT(index >= 0 && index < m->size);
  const int32_t *c = m->coords + (size_t)index * (size_t)m->ndim;
  for (int d = 0; d < m->ndim; d++) coords[d] = c[d];
}

int mesh_dim_group(const dt_mesh *m, int dim, int index, int *ranks,
                   int *member) {
  CORE_ASSERT(dim >= 0 && dim < m->ndim);
  int64_t coords[DT_MAX_DIMS];
  mesh_index_coords(m, index, coords);
  int stride = 1;
  for (int d = dim + 1; d < m->ndim; d++) stride *= (int)m->shape[d];
  int base = index - (int)coords[dim] * stride;
  for (int c = 0; c < m->shape[dim]; c++) ranks[c] = m->ranks[base + c * stride];
  if (member) *member = (int)coords[dim];
  return (int)m->shape[dim];
}

/* the groups along dim, one lookup per group (the registry hands every
 * member the same one); false + error when out of host memory */
static bool make_groups(const dt_mesh *m, int dim, sim_coll_group **out,
                        const char *fn) {
  /* the registry is the runtime's collectives: inside its gate */
  if (!runtime_gate_enter(m->rt, fn)) return false;
  int *ranks = malloc(sizeof(int) * (size_t)m->shape[dim]);
  int stride = 1;
  for (int d = dim + 1; d < m->ndim; d++) stride *= (int)m->shape[d];
  bool ok = ranks != NULL;
  for (int i = 0; ok && i < m->size; i++) {
    int member, n = mesh_dim_group(m, dim, i, ranks, &member);
    if (member != 0) continue; /* made at its member 0 */
    sim_coll_group *g = sim_coll_group_get(m->rt->coll, ranks, n);
    ok = g != NULL;
    for (int c = 0; ok && c < n; c++) out[i + c * stride] = g;
  }
  free(ranks);
  runtime_gate_leave(m->rt);
  if (!ok)
    core_error_set(DT_ERR_OUT_OF_MEMORY, "%s: out of host memory for the "
                   "collective groups of mesh dim %d", fn, dim);
  return ok;
}

sim_coll_group *const *mesh_dim_groups(dt_mesh *m, int dim, const char *fn) {
  CORE_ASSERT(dim >= 0 && dim < m->ndim);
  /* acquire: pairs with the CAS below (the array's entries) */
  sim_coll_group **g = atomic_load_explicit(&m->groups[dim],
                                            memory_order_acquire);
  if (g) return (sim_coll_group *const *)g;
  sim_coll_group **mine = malloc(sizeof *mine * (size_t)m->size);
  if (!mine || !make_groups(m, dim, mine, fn)) {
    if (!mine)
      core_error_set(DT_ERR_OUT_OF_MEMORY, "%s: out of host memory for the "
                     "collective groups of mesh dim %d", fn, dim);
    free(mine);
    return NULL;
  }
  /* acq_rel: release publishes the filled array; acquire (failure) reads
   * the array another thread installed first */
  if (atomic_compare_exchange_strong_explicit(&m->groups[dim], &g, mine,
                                              memory_order_acq_rel,
                                              memory_order_acquire))
    return (sim_coll_group *const *)mine;
  free(mine); /* another thread made the same groups first */
  return (sim_coll_group *const *)g;
}

void mesh_local_box(const dt_mesh *m, const dt_placement *pl,
                    const dt_shape *global, int index, int64_t *offsets,
                    int64_t *sizes) {
  int64_t coords[DT_MAX_DIMS];
  mesh_index_coords(m, index, coords);
  for (int t = 0; t < global->ndim; t++) {
    offsets[t] = 0;
    sizes[t] = global->dims[t];
  }
  /* mesh dim 0 first: each later Shard splits the chunk further */
  for (int d = 0; d < m->ndim; d++) {
    if (pl[d].kind != DT_PLACEMENT_SHARD) continue;
    int t = pl[d].dim;
    CORE_ASSERT(t >= 0 && t < global->ndim);
    int64_t o, l;
    mesh_shard_range(sizes[t], m->shape[d], coords[d], &o, &l);
    offsets[t] += o;
    sizes[t] = l;
  }
}

/* the first problem of placements pl on m (-1: none); *why: its kind */
typedef enum { PL_SHARD_DIM, PL_REDUCE_OP, PL_MIXED, PL_KIND } pl_problem;
static int first_problem(const dt_mesh *m, const dt_placement *pl,
                         const dt_shape *global, pl_problem *why,
                         int *partial) {
  *partial = -1;   /* the first mesh dim with a Partial */
  for (int d = 0; d < m->ndim; d++) {
    switch (pl[d].kind) {
    case DT_PLACEMENT_REPLICATE:
      break;
    case DT_PLACEMENT_SHARD:
      if (pl[d].dim < 0 || pl[d].dim >= global->ndim) return *why = PL_SHARD_DIM, d;
      break;
    case DT_PLACEMENT_PARTIAL:
      if ((unsigned)pl[d].reduce > DT_REDUCE_PROD) return *why = PL_REDUCE_OP, d;
      if (*partial >= 0 && pl[*partial].reduce != pl[d].reduce)
        return *why = PL_MIXED, d;
      if (*partial < 0) *partial = d;
      break;
    default:
      return *why = PL_KIND, d;
    }
  }
  return -1;
}

/* the messages are formatted only on failure: the checks run on every op */
dt_status mesh_check_placements(const dt_mesh *m, const dt_placement *pl,
                                const dt_shape *global, const char *fn) {
  CORE_ASSERT(m && global);
  if (!pl) return core_error_set(DT_ERR_INVALID_ARGUMENT,
                               "%s: placements is NULL", fn);
  pl_problem why;
  int partial, d = first_problem(m, pl, global, &why, &partial);
  if (d < 0) return DT_OK;
  char ps[PLACEMENTS_LEN], label[80], s[CORE_SHAPE_STR_LEN];
  mesh_placements_str(pl, m->ndim, ps, sizeof ps);
  dim_label(m, d, label, sizeof label);
  switch (why) {
  case PL_SHARD_DIM:
    return core_error_set(DT_ERR_PLACEMENT, "%s: placements %s: %s shards "
                          "tensor dim %d, but the tensor %s has %d dims",
                          fn, ps, label, pl[d].dim,
                          core_shape_str(global->dims, global->ndim, s,
                                         sizeof s), global->ndim);
  case PL_REDUCE_OP:
    return core_error_set(DT_ERR_PLACEMENT, "%s: placements %s: %s has an "
                          "unknown reduce op %d", fn, ps, label,
                          (int)pl[d].reduce);
  case PL_MIXED:
    return core_error_set(DT_ERR_PLACEMENT, "%s: placements %s mix "
                          "Partial(%s) on mesh dim %d with Partial(%s) on "
                          "%s; one Partial kind per tensor", fn, ps,
                          reduce_names[pl[partial].reduce], partial,
                          reduce_names[pl[d].reduce], label);
  default:
    return core_error_set(DT_ERR_PLACEMENT, "%s: placements %s: %s has an "
                          "unknown placement kind %d", fn, ps, label,
                          (int)pl[d].kind);
  }
}

char *mesh_placements_str(const dt_placement *pl, int n, char *buf,
                          size_t len) {
  sbuf s = sb_make(buf, len);
  sb_printf(&s, "[");
  for (int i = 0; i < n; i++) {
    const char *sep = i ? ", " : "";
    switch (pl[i].kind) {
    case DT_PLACEMENT_REPLICATE: sb_printf(&s, "%sR", sep); break;
    case DT_PLACEMENT_SHARD: sb_printf(&s, "%sS(%d)", sep, pl[i].dim); break;
    case DT_PLACEMENT_PARTIAL:
      if ((unsigned)pl[i].reduce <= DT_REDUCE_PROD)
        sb_printf(&s, "%sP(%s)", sep, reduce_names[pl[i].reduce]);
      else
        sb_printf(&s, "%sP(?%d)", sep, (int)pl[i].reduce);
      break;
    default: sb_printf(&s, "%s?%d", sep, (int)pl[i].kind); break;
    }
  }
  sb_printf(&s, "]");
  return buf;
}

bool mesh_same(const dt_mesh *a, const dt_mesh *b) {
  if (a == b) return true;
  if (a->rt != b->rt || a->ndim != b->ndim || a->size != b->size) return false;
  for (int i = 0; i < a->ndim; i++)
    if (a->shape[i] != b->shape[i]) return false;
  return memcmp(a->ranks, b->ranks, sizeof(int) * (size_t)a->size) == 0;
}
