/* Inspection for people (docs/inspect.md): a picture of which ranks hold
 * which block of a 1-D or 2-D tensor, a table of a tensor's shards, and a
 * per-rank memory report.
 *
 * The picture and the table are built from metadata on the calling
 * thread: a spec is immutable once made and mesh_box_of is a pure
 * function of it, so any thread may draw while the ranks run ops on the
 * tensor. The memory report needs each rank's allocator, whose live list
 * only the rank's own thread may walk: it publishes one record to every
 * rank and waits for their snapshots, so nothing is added to the paths
 * ops take.
 *
 * The picture (after jax.debug.visualize_array_sharding): the index space
 * (a 1-D tensor is one row) is cut at every non-empty shard's start and
 * end. Shards are products of per-dim ranges, so the cuts make a full
 * grid, each cell lies inside or outside every shard, and neighbouring
 * cells have different holders. */
#include "mesh/inspect.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "mesh/shard.h"
#include "runtime/exec.h"
#include "runtime/runtime.h"
#include "sched/future.h"
#include "sim/device.h"

#define INSPECT_WIDTH 80        /* max_width 0 */
#define INSPECT_HEIGHT 6        /* lines of a 2-D picture's cells, in all */
#define INSPECT_ASPECT 3        /* columns per line that look square */
#define INSPECT_MAX_CELLS 1024  /* grids past this are refused */
#define INSPECT_TOP 4           /* largest live blocks shown per rank */
#define INSPECT_CELL 192        /* bytes of one table cell */

static const char *const reduce_words[] = {"sum", "average", "maximum",
                                           "minimum", "product"};
static const char *const reduce_names[] = {"sum", "avg", "max", "min",
                                           "prod"};
_Static_assert(sizeof reduce_words / sizeof *reduce_words ==
                   DT_REDUCE_PROD + 1 &&
               sizeof reduce_names / sizeof *reduce_names ==
                   DT_REDUCE_PROD + 1,
               "reduce op tables out of date");

/* ------------------------------------------------------------ strings */

/* appends to buf[len] at *at like snprintf; stops at the end */
__attribute__((format(printf, 4, 5)))
static void cat(char *buf, size_t len, size_t *at, const char *fmt, ...) {
  if (*at >= len) return;
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(buf + *at, len - *at, fmt, ap);
  va_end(ap);
  if (k > 0) *at = *at + (size_t)k < len ? *at + (size_t)k : len - 1;
}

static int cmp_int(const void *a, const void *b) {
  int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

/* the n ranks r (sorted here) as "0,4", runs of three or more as "0-3" */
static void ranks_str(int *r, int n, char *buf, size_t len) {
  size_t at = 0;
  buf[0] = '\0';
  qsort(r, (size_t)n, sizeof *r, cmp_int);
  for (int i = 0; i < n;) {
    int j = i;
    while (j + 1 < n && r[j + 1] == r[j] + 1) j++;
    const char *sep = i ? "," : "";
    if (j - i >= 2) {
      cat(buf, len, &at, "%s%d-%d", sep, r[i], r[j]);
      i = j + 1;
    } else {
      cat(buf, len, &at, "%s%d", sep, r[i]);
      i++;
    }
  }
}

/* "(dp=2, tp=4)", or "(2, 4)" for an unnamed mesh */
static void mesh_dims_str(const dt_mesh *m, char *buf, size_t len) {
  size_t at = 0;
  cat(buf, len, &at, "(");
  for (int d = 0; d < m->ndim; d++)
    cat(buf, len, &at, "%s%s%s%lld", d ? ", " : "",
        m->names[d] ? m->names[d] : "", m->names[d] ? "=" : "",
        (long long)m->shape[d]);
  cat(buf, len, &at, ")");
}

/* "mesh dim tp" or "mesh dim 1" */
static void dim_name(const dt_mesh *m, int d, char *buf, size_t len) {
  if (m->names[d]) snprintf(buf, len, "mesh dim %s", m->names[d]);
  else snprintf(buf, len, "mesh dim %d", d);
}

/* "float32[8, 4]" (a DTensor's local view is its global shape) */
static void meta_str(const dt_tensor *t, char *buf, size_t len) {
  char s[CORE_SHAPE_STR_LEN];
  snprintf(buf, len, "%s%s", core_dtype_name(t->dtype),
           core_shape_str(t->local.sizes, t->local.ndim, s, sizeof s));
}


static dt_status written(FILE *out, const char *fn) {
  if (ferror(out))
    return core_error_set(DT_ERR_IO, "%s: writing to out failed", fn);
  return DT_OK;
}

static dt_status no_memory(const char *fn) {
  return core_error_set(DT_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
}

/* -------------------------------------------------------------- tables
 * Rows of text cells printed in aligned columns two spaces apart; row 0
 * is the header. align: 'l' or 'r' per column. */
typedef struct table {
  int ncol, nrow;
  const char *align;
  char *cells;     /* nrow * ncol cells of INSPECT_CELL bytes */
} table;

static bool table_init(table *tb, int ncol, int nrow, const char *align) {
  tb->ncol = ncol;
  tb->nrow = nrow;
  tb->align = align;
  tb->cells = calloc((size_t)ncol * (size_t)nrow, INSPECT_CELL);
  return tb->cells != NULL;
}

static char *table_cell(const table *tb, int row, int col) {
  return tb->cells + ((size_t)row * (size_t)tb->ncol + (size_t)col) *
                         INSPECT_CELL;
}

__attribute__((format(printf, 4, 5)))
static void table_set(table *tb, int row, int col, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(table_cell(tb, row, col), INSPECT_CELL, fmt, ap);
  va_end(ap);
}

/* each row on one line, without trailing spaces */
static void table_print(const table *tb, FILE *out) {
  int w[8] = {0};
  size_t linelen = 1;
  for (int c = 0; c < tb->ncol; c++) {
    for (int r = 0; r < tb->nrow; r++) {
      int n = (int)strlen(table_cell(tb, r, c));
      if (n > w[c]) w[c] = n;
    }
    linelen += (size_t)w[c] + 2;
  }
  char *line = malloc(linelen);
  for (int r = 0; line && r < tb->nrow; r++) {
    size_t at = 0;
    for (int c = 0; c < tb->ncol; c++)
      cat(line, linelen, &at, tb->align[c] == 'r' ? "%s%*s" : "%s%-*s",
          c ? "  " : "", w[c], table_cell(tb, r, c));
    while (at > 0 && line[at - 1] == ' ') at--;
    line[at] = '\0';
    fprintf(out, "%s\n", line);
  }
  free(line);
}

/* ------------------------------------------------------ who holds what */
typedef struct holders {
  int n;              /* mesh indices; 1 for a single-device tensor */
  mesh_box *box;      /* the block each holds */
  const int *rank;    /* the runtime rank of each */
  int device_rank;    /* a single-device tensor's rank (-1: no storage) */
  bool single;
} holders;

static bool holders_make(const dt_tensor *t, holders *h) {
  memset(h, 0, sizeof *h);
  if (!t->spec) {
    dt_shape s = core_tensor_shape(t);
    h->n = 1;
    h->single = true;
    h->device_rank = t->local.storage ? t->local.storage->rank : -1;
    h->rank = &h->device_rank;
    h->box = malloc(sizeof *h->box);
    if (h->box) h->box[0] = mesh_box_all(&s);
    return h->box != NULL;
  }
  const core_spec *sp = t->spec;
  h->n = sp->mesh->size;
  h->rank = sp->mesh->ranks;
  h->box = malloc(sizeof *h->box * (size_t)h->n);
  if (!h->box) return false;
  for (int i = 0; i < h->n; i++)
    h->box[i] = mesh_box_of(sp->mesh, sp->placements, &sp->shape, i);
  return true;
}

static void holders_free(holders *h) {
  free(h->box);
}

/* "ranks 3,7 hold empty shards" (or nothing when none is empty) */
static void empty_shards_line(const holders *h, FILE *out) {
  int *r = malloc(sizeof *r * (size_t)h->n);
  char *buf = malloc((size_t)h->n * 12 + 1);
  int n = 0;
  for (int i = 0; r && buf && !h->single && i < h->n; i++)
    if (mesh_box_numel(&h->box[i]) == 0) r[n++] = h->rank[i];
  if (n) {
    ranks_str(r, n, buf, (size_t)h->n * 12 + 1);
    fprintf(out, n == 1 ? "rank %s holds an empty shard\n"
                        : "ranks %s hold empty shards\n", buf);
  }
  free(r);
  free(buf);
}

/* One line per Partial mesh dim: what the ranks' values add up to;
 * `what` names the value ("the global value"). */
static void partial_lines(const dt_tensor *t, const char *what, FILE *out) {
  const dt_mesh *m = t->spec->mesh;
  int *r = malloc(sizeof *r * (size_t)m->size);
  char *group = malloc((size_t)m->size * 12 + 1);
  for (int d = 0; r && group && d < m->ndim; d++) {
    dt_placement p = t->spec->placements[d];
    if (p.kind != DT_PLACEMENT_PARTIAL) continue;
    int member, n = mesh_dim_group(m, d, 0, r, &member);
    ranks_str(r, n, group, (size_t)m->size * 12 + 1);
    char name[80];
    dim_name(m, d, name, sizeof name);
    /* "along tp", or "along mesh dim 1" for an unnamed dim */
    const char *along = m->names[d] ? m->names[d] : name;
    fprintf(out, "P(%s) over %s: every rank holds a full-shape partial "
            "value;\n  %s is the %s over the ranks along %s (e.g. %s)\n",
            reduce_names[p.reduce], name, what, reduce_words[p.reduce],
            along, group);
  }
  free(r);
  free(group);
}

/* --------------------------------------------------------------- grid */
typedef struct grid {
  int nb[2];          /* bands: rows, columns */
  int tdim[2];        /* the tensor dim of each axis; -1: none */
  int64_t *cut[2];    /* nb + 1 boundaries per axis */
  char **label;       /* nb[0] * nb[1], row-major */
  int *size[2];       /* row heights in lines, column widths in chars */
} grid;

/* the sorted distinct boundaries of every non-empty block along tdim
 * (and 0, ext); *nb gets the number of bands */
static int64_t *axis_cuts(const holders *h, int tdim, int64_t ext, int *nb) {
  int64_t *c = malloc(sizeof *c * (2 * (size_t)h->n + 2));
  if (!c) return NULL;
  int n = 0;
  c[n++] = 0;
  c[n++] = ext;
  for (int i = 0; tdim >= 0 && i < h->n; i++) {
    if (mesh_box_numel(&h->box[i]) == 0) continue;
    c[n++] = h->box[i].off[tdim];
    c[n++] = h->box[i].off[tdim] + h->box[i].len[tdim];
  }
  qsort(c, (size_t)n, sizeof *c, cmp_i64);
  int u = 1;
  for (int i = 1; i < n; i++)
    if (c[i] != c[u - 1]) c[u++] = c[i];
  *nb = u - 1;
  return c;
}

static bool cell_holds(const grid *g, const mesh_box *b, int row, int col) {
  int band[2] = {row, col};
  for (int a = 0; a < 2; a++) {
    int d = g->tdim[a];
    if (d < 0) continue;
    int64_t lo = g->cut[a][band[a]], hi = g->cut[a][band[a] + 1];
    if (lo < b->off[d] || hi > b->off[d] + b->len[d]) return false;
  }
  return true;
}

/* the label of cell (row, col): its device or the ranks holding it */
static char *cell_label(const grid *g, const holders *h, int row, int col,
                        int *scratch) {
  size_t len = (size_t)h->n * 12 + 16;
  char *s = malloc(len);
  if (!s) return NULL;
  if (h->single) {
    if (h->device_rank >= 0) snprintf(s, len, "cpu:%d", h->device_rank);
    else snprintf(s, len, "no storage");
    return s;
  }
  int n = 0;
  for (int i = 0; i < h->n; i++)
    if (cell_holds(g, &h->box[i], row, col)) scratch[n++] = h->rank[i];
  ranks_str(scratch, n, s, len);
  return s;
}

static void grid_free(grid *g) {
  for (int i = 0; g->label && i < g->nb[0] * g->nb[1]; i++)
    free(g->label[i]);
  free(g->label);
  for (int a = 0; a < 2; a++) {
    free(g->cut[a]);
    free(g->size[a]);
  }
}

static bool grid_labels(grid *g, const holders *h) {
  int cells = g->nb[0] * g->nb[1];
  int *scratch = malloc(sizeof *scratch * (size_t)h->n);
  g->label = calloc((size_t)cells, sizeof *g->label);
  bool ok = scratch && g->label;
  for (int i = 0; ok && i < cells; i++)
    ok = (g->label[i] = cell_label(g, h, i / g->nb[1], i % g->nb[1],
                                   scratch)) != NULL;
  free(scratch);
  return ok;
}

/* The grid of t's blocks: rows along dim 0 and columns along dim 1 of a
 * 2-D tensor; one row and columns along dim 0 of a 1-D one; a tensor
 * without elements is one cell held by every rank. */
static dt_status grid_make(grid *g, const dt_tensor *t, const holders *h,
                           const char *fn) {
  memset(g, 0, sizeof *g);
  int nd = t->local.ndim;
  bool empty = core_numel(t) == 0;
  g->tdim[0] = nd == 2 && !empty ? 0 : -1;
  g->tdim[1] = empty ? -1 : nd - 1;
  for (int a = 0; a < 2; a++) {
    int64_t ext = g->tdim[a] < 0 ? 1 : t->local.sizes[g->tdim[a]];
    g->cut[a] = axis_cuts(h, g->tdim[a], ext, &g->nb[a]);
    if (!g->cut[a]) return no_memory(fn);
  }
  if ((int64_t)g->nb[0] * g->nb[1] > INSPECT_MAX_CELLS)
    return core_error_set(DT_ERR_UNSUPPORTED, "%s: %d x %d blocks are too "
                          "many to draw (at most %d cells); "
                          "dt_tensor_describe lists the shards", fn,
                          g->nb[0], g->nb[1], INSPECT_MAX_CELLS);
  g->size[0] = calloc((size_t)g->nb[0], sizeof(int));
  g->size[1] = calloc((size_t)g->nb[1], sizeof(int));
  if (!g->size[0] || !g->size[1] || !grid_labels(g, h)) return no_memory(fn);
  return DT_OK;
}

/* ------------------------------------------------------------ geometry */

/* Band sizes proportional to their extents within `budget` (rounded each
 * on its own, so equal extents get equal sizes), at least min[i]; returns
 * their sum. */
static int propose(const int64_t *cut, int nb, const int *min, int budget,
                   int *out) {
  double total = (double)(cut[nb] - cut[0]);
  int sum = 0;
  for (int i = 0; i < nb; i++) {
    double share = (double)(cut[i + 1] - cut[i]) * budget / total;
    int s = (int)(share + 0.5);
    out[i] = s > min[i] ? s : min[i];
    sum += out[i];
  }
  return sum;
}

/* the largest budget up to target whose sizes fit in limit; the minimum
 * sizes when none does (the picture then grows past the limit) */
static void fit(const int64_t *cut, int nb, const int *min, int target,
                int limit, int *out) {
  for (int b = target; b > 0; b--)
    if (propose(cut, nb, min, b, out) <= limit) return;
  propose(cut, nb, min, 0, out);
}

/* Column widths within max_width (at least each label and a space either
 * side) and row heights: a 2-D picture keeps roughly the tensor's aspect
 * ratio (INSPECT_HEIGHT lines for a square), a 1-D one is one line. */
static dt_status layout(grid *g, const dt_tensor *t, int max_width,
                        const char *fn) {
  int *minw = calloc((size_t)g->nb[1], sizeof *minw);
  int *minh = malloc(sizeof *minh * (size_t)g->nb[0]);
  if (!minw || !minh) {
    free(minw);
    free(minh);
    return no_memory(fn);
  }
  for (int i = 0; i < g->nb[0] * g->nb[1]; i++) {
    int w = (int)strlen(g->label[i]) + 2, c = i % g->nb[1];
    if (w > minw[c]) minw[c] = w;
  }
  for (int r = 0; r < g->nb[0]; r++) minh[r] = 1;
  int limit = max_width - (g->nb[1] + 1), target = limit, height = 1;
  if (g->tdim[0] >= 0) {
    double rows = (double)t->local.sizes[0], cols = (double)t->local.sizes[1];
    double want = INSPECT_HEIGHT * INSPECT_ASPECT * cols / rows;
    height = INSPECT_HEIGHT;
    if (want < limit) target = (int)(want + 0.5);
    else height = (int)(limit * rows / (INSPECT_ASPECT * cols) + 0.5);
  }
  fit(g->cut[1], g->nb[1], minw, target, limit, g->size[1]);
  propose(g->cut[0], g->nb[0], minh, height, g->size[0]);
  free(minw);
  free(minh);
  return DT_OK;
}

/* --------------------------------------------------------------- draw */
typedef struct glyphs {
  const char *h, *v;
  const char *corner[3][3];   /* [top, middle, bottom][left, inner, right] */
} glyphs;

static const glyphs box_glyphs = {
    "\u2500", "\u2502",
    {{"\u250c", "\u252c", "\u2510"},
     {"\u251c", "\u253c", "\u2524"},
     {"\u2514", "\u2534", "\u2518"}}};
static const glyphs ascii_glyphs = {
    "-", "|", {{"+", "+", "+"}, {"+", "+", "+"}, {"+", "+", "+"}}};

/* a horizontal rule: which = 0 top, 1 between rows, 2 bottom */
static void rule(const grid *g, const glyphs *gl, int which, FILE *out) {
  fputs(gl->corner[which][0], out);
  for (int c = 0; c < g->nb[1]; c++) {
    for (int k = 0; k < g->size[1][c]; k++) fputs(gl->h, out);
    fputs(gl->corner[which][c + 1 < g->nb[1] ? 1 : 2], out);
  }
  fputc('\n', out);
}

/* the lines of row band r, each label centred on the band's middle line */
static void band(const grid *g, const glyphs *gl, int r, FILE *out) {
  int h = g->size[0][r];
  for (int line = 0; line < h; line++) {
    fputs(gl->v, out);
    for (int c = 0; c < g->nb[1]; c++) {
      const char *s = line == (h - 1) / 2 ? g->label[r * g->nb[1] + c] : "";
      int w = g->size[1][c], n = (int)strlen(s), left = (w - n) / 2;
      fprintf(out, "%*s%s%*s", left, "", s, w - n - left, "");
      fputs(gl->v, out);
    }
    fputc('\n', out);
  }
}

static void draw(const grid *g, const glyphs *gl, FILE *out) {
  rule(g, gl, 0, out);
  for (int r = 0; r < g->nb[0]; r++) {
    if (r) rule(g, gl, 1, out);
    band(g, gl, r, out);
  }
  rule(g, gl, 2, out);
}

/* the lines under the picture: shape, mesh and placements; Partial dims;
 * empty shards */
static void legend(const dt_tensor *t, const holders *h, FILE *out) {
  char meta[CORE_SHAPE_STR_LEN + 16];
  meta_str(t, meta, sizeof meta);
  if (h->single) {
    if (h->device_rank >= 0)
      fprintf(out, "%s on cpu:%d (a single-device tensor)\n", meta,
              h->device_rank);
    else
      fprintf(out, "%s (a single-device tensor without storage)\n", meta);
    return;
  }
  char dims[256], pl[160];
  mesh_dims_str(t->spec->mesh, dims, sizeof dims);
  mesh_placements_str(t->spec->placements, t->spec->mesh->ndim, pl,
                      sizeof pl);
  fprintf(out, "%s on mesh %s, placements %s\n", meta, dims, pl);
  partial_lines(t, "the value of each cell", out);
  empty_shards_line(h, out);
}

static dt_status check_picture(const dt_tensor *t, FILE *out,
                               const dt_visualize_options *o,
                               const char *fn) {
  if (!t) return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: t is NULL", fn);
  if (!out)
    return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: out is NULL", fn);
  if (o && o->max_width < 0)
    return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: options.max_width "
                          "%d is negative (0 means %d)", fn, o->max_width,
                          INSPECT_WIDTH);
  int nd = t->local.ndim;
  if (nd == 1 || nd == 2) return DT_OK;
  char s[CORE_SHAPE_STR_LEN];
  core_shape_str(t->local.sizes, nd, s, sizeof s);
  return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: t has %d dims (shape "
                        "%s); only 1-D and 2-D tensors can be drawn%s", fn,
                        nd, s, nd ? "; dt_tensor_describe lists the shards "
                        "of any tensor" : "");
}

dt_status mesh_visualize_sharding(const dt_tensor *t, FILE *out,
                                  const dt_visualize_options *o,
                                  const char *fn) {
  dt_status st = check_picture(t, out, o, fn);
  if (st != DT_OK) return st;
  int max_width = o && o->max_width ? o->max_width : INSPECT_WIDTH;
  holders h;
  if (!holders_make(t, &h)) {
    holders_free(&h);
    return no_memory(fn);
  }
  grid g;
  st = grid_make(&g, t, &h, fn);
  if (st == DT_OK) st = layout(&g, t, max_width, fn);
  if (st == DT_OK) {
    draw(&g, o && o->ascii ? &ascii_glyphs : &box_glyphs, out);
    legend(t, &h, out);
    st = written(out, fn);
  }
  grid_free(&g);
  holders_free(&h);
  return st;
}

/* ------------------------------------------------------------ describe */

/* one row per mesh index: rank, coordinates, local shape, offset, bytes */
static void shard_rows(const dt_tensor *t, const holders *h, table *tb) {
  const dt_mesh *m = t->spec->mesh;
  size_t es = core_dtype_size(t->dtype);
  table_set(tb, 0, 0, "rank");
  table_set(tb, 0, 1, "coords");
  table_set(tb, 0, 2, "local shape");
  table_set(tb, 0, 3, "global offset");
  table_set(tb, 0, 4, "bytes");
  for (int i = 0; i < h->n; i++) {
    const mesh_box *b = &h->box[i];
    int64_t coords[DT_MAX_DIMS];
    char c[CORE_SHAPE_STR_LEN], s[CORE_SHAPE_STR_LEN], o[CORE_SHAPE_STR_LEN];
    mesh_index_coords(m, i, coords);
    core_shape_str(coords, m->ndim, c, sizeof c);
    c[0] = '(';
    c[strlen(c) - 1] = ')';
    table_set(tb, i + 1, 0, "%d", h->rank[i]);
    table_set(tb, i + 1, 1, "%s", c);
    table_set(tb, i + 1, 2, "%s", core_shape_str(b->len, b->n, s, sizeof s));
    table_set(tb, i + 1, 3, "%s", core_shape_str(b->off, b->n, o, sizeof o));
    table_set(tb, i + 1, 4, "%lld",
              (long long)(mesh_box_numel(b) * (int64_t)es));
  }
}

static dt_status describe_shards(const dt_tensor *t, FILE *out,
                                 const char *fn) {
  const dt_mesh *m = t->spec->mesh;
  holders h = {0};
  table tb = {0};
  int len = mesh_format(m, NULL, 0);
  char *repr = malloc((size_t)len + 1);
  if (!repr || !holders_make(t, &h) ||
      !table_init(&tb, 5, m->size + 1, "rlllr")) {
    holders_free(&h);
    free(repr);
    return no_memory(fn);
  }
  mesh_format(m, repr, (size_t)len + 1);
  char pl[160];
  fprintf(out, "mesh: %s\nplacements: %s\n", repr,
          mesh_placements_str(t->spec->placements, m->ndim, pl, sizeof pl));
  shard_rows(t, &h, &tb);
  table_print(&tb, out);
  int64_t total = 0, global = core_numel(t) * (int64_t)core_dtype_size(t->dtype);
  for (int i = 0; i < h.n; i++)
    total += mesh_box_numel(&h.box[i]) * (int64_t)core_dtype_size(t->dtype);
  fprintf(out, "total: %lld bytes on %d ranks; the global tensor: %lld "
          "bytes", (long long)total, h.n, (long long)global);
  if (global) fprintf(out, " (replication x%.2f)", (double)total / (double)global);
  fputc('\n', out);
  partial_lines(t, "the global value", out);
  free(tb.cells);
  free(repr);
  holders_free(&h);
  return DT_OK;
}

static void describe_local(const dt_tensor *t, FILE *out) {
  const core_storage *s = t->local.storage;
  char st[CORE_SHAPE_STR_LEN];
  if (s) fprintf(out, "device: cpu:%d\n", s->rank);
  else fprintf(out, "device: none (no storage)\n");
  fprintf(out, "strides: %s  storage offset: %lld  contiguous: %s\n",
          core_shape_str(t->local.strides, t->local.ndim, st, sizeof st),
          (long long)t->local.offset,
          core_tensor_is_contiguous(t) ? "yes" : "no");
  fprintf(out, "bytes: %lld (its storage: %lld)\n",
          (long long)(core_numel(t) * (int64_t)core_dtype_size(t->dtype)),
          (long long)(s ? (int64_t)s->nbytes : 0));
}

dt_status mesh_tensor_describe(const dt_tensor *t, FILE *out,
                               const char *grad_fn) {
  static const char *fn = "dt_tensor_describe";
  if (!t) return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: t is NULL", fn);
  if (!out)
    return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: out is NULL", fn);
  char meta[CORE_SHAPE_STR_LEN + 16];
  meta_str(t, meta, sizeof meta);
  fprintf(out, "%s %s  requires_grad: %s  grad_fn: %s\n",
          t->spec ? "DTensor" : "tensor", meta,
          t->requires_grad ? "true" : "false", grad_fn ? grad_fn : "none");
  dt_status st = DT_OK;
  if (t->spec) st = describe_shards(t, out, fn);
  else describe_local(t, out);
  return st != DT_OK ? st : written(out, fn);
}

/* ------------------------------------------------------- memory report */
typedef struct mem_snap {
  int64_t used, peak, cached, live;
  int ntop;
  size_t top[INSPECT_TOP];
  sim_tag tag[INSPECT_TOP];
} mem_snap;

typedef struct mem_job {
  dt_future *done;
  mem_snap snap[];    /* one per rank, each written by its rank */
} mem_job;

/* on each rank: its allocator's counts and largest live blocks (the
 * record path has just done the frees other ranks handed to it) */
static void mem_on_rank(void *arg, dt_runtime *rt, int rank) {
  mem_job *j = arg;
  const sim_device *d = &rt->ranks[rank].dev;
  mem_snap *s = &j->snap[rank];
  s->used = d->used;
  s->peak = d->peak;
  s->cached = d->cached;
  s->live = d->allocs - d->frees;
  s->ntop = sim_device_largest_live(d, s->top, s->tag, INSPECT_TOP);
}

/* on the last rank: the snapshots are complete. The caller frees j once
 * the future completes, so j is not touched after that. */
static void mem_done(void *arg) {
  mem_job *j = arg;
  dt_future *f = j->done;
  /* the future's completion (release) pairs with the caller's wait
   * (acquire): every rank's snapshot is visible to it */
  sched_future_complete(f, DT_OK, NULL);
  sched_future_release(f);
}

static void mem_row(table *tb, int row, int rank, const mem_snap *s) {
  char b[3][32];
  sim_bytes_str(s->used, b[0], sizeof b[0]);
  sim_bytes_str(s->peak, b[1], sizeof b[1]);
  sim_bytes_str(s->cached, b[2], sizeof b[2]);
  table_set(tb, row, 0, "%d", rank);
  table_set(tb, row, 1, "%s", b[0]);
  table_set(tb, row, 2, "%s", b[1]);
  table_set(tb, row, 3, "%s", b[2]);
  table_set(tb, row, 4, "%lld", (long long)s->live);
}

/* "  rank 2: 1.0 MiB float32[512, 512] dt_matmul [S(0), R], ..." */
static void mem_largest(FILE *out, int rank, const mem_snap *s) {
  if (!s->ntop) return;
  fprintf(out, "  rank %d: ", rank);
  for (int k = 0; k < s->ntop; k++) {
    char one[160];
    sim_tag_str(&s->tag[k], s->top[k], one, sizeof one);
    fprintf(out, "%s%s", k ? ", " : "", one);
  }
  fprintf(out, "%s\n", s->live > s->ntop ? ", ..." : "");
}

static void mem_print(const dt_runtime *rt, const mem_job *j, table *tb,
                      FILE *out) {
  char cap[32], b[3][32];
  if (rt->device_memory > 0) sim_bytes_str(rt->device_memory, cap, sizeof cap);
  else snprintf(cap, sizeof cap, "unlimited");
  fprintf(out, "memory of %d ranks (capacity per rank: %s)\n", rt->nranks,
          cap);
  const char *head[] = {"rank", "in use", "peak", "cached", "live blocks"};
  for (int c = 0; c < 5; c++) table_set(tb, 0, c, "%s", head[c]);
  int64_t used = 0, peak = 0, cached = 0;
  for (int r = 0; r < rt->nranks; r++) {
    mem_row(tb, r + 1, r, &j->snap[r]);
    used += j->snap[r].used;
    peak += j->snap[r].peak;
    cached += j->snap[r].cached;
  }
  table_print(tb, out);
  sim_bytes_str(used, b[0], sizeof b[0]);
  sim_bytes_str(peak, b[1], sizeof b[1]);
  sim_bytes_str(cached, b[2], sizeof b[2]);
  fprintf(out, "all ranks: %s in use, %s summed peaks, %s cached\n"
          "largest live blocks (when each rank reached this report, after the "
          "work issued before it):\n  size, local shape, the op that made it, "
          "its DTensor's placements\n", b[0], b[1], b[2]);
  for (int r = 0; r < rt->nranks; r++) mem_largest(out, r, &j->snap[r]);
}

/* publishes the snapshot record and waits for it; the caller frees j */
static dt_status mem_collect(dt_runtime *rt, mem_job *j, const char *fn) {
  dt_future *f = sched_future_new();
  if (!f) return no_memory(fn);
  j->done = sched_future_retain(f);
  if (runtime_publish_call(rt, -1, mem_on_rank, mem_done, j) != DT_OK) {
    sched_future_release(j->done);
    sched_future_release(f);
    return runtime_publish_failed(fn);
  }
  dt_status st = sched_future_wait(f, -1);
  sched_future_release(f);
  return st;
}

dt_status mesh_memory_report(dt_runtime *rt, FILE *out) {
  static const char *fn = "dt_memory_report";
  if (!rt) return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: rt is NULL", fn);
  if (!out)
    return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: out is NULL", fn);
  if (atomic_load_explicit(&rt->dead, memory_order_acquire))
    return core_error_set(DT_ERR_DEVICE, "%s: the runtime was destroyed", fn);
  mem_job *j = calloc(1, sizeof *j + sizeof(mem_snap) * (size_t)rt->nranks);
  table tb = {0};
  if (!j || !table_init(&tb, 5, rt->nranks + 1, "rrrrr")) {
    free(j);
    return no_memory(fn);
  }
  dt_status st = mem_collect(rt, j, fn);
  if (st == DT_OK) {
    mem_print(rt, j, &tb, out);
    st = written(out, fn);
  }
  free(tb.cells);
  free(j);
  return st;
}
