/* Communication debugging (comm_debug.h; docs/debugging.md): while on in
 * a thread, every collective the thread's calls run is attributed to the
 * public function that caused it (dt_add in auto mode, dt_redistribute,
 * dt_backward, dt_to_host of a Partial) under the thread's label path,
 * and summed per (labels, function, collective, mesh dim): PyTorch's
 * CommDebugMode, with labels as a tree. The entries come from the plan
 * steps that communicate (mesh_comm_observe), the same source as
 * dt_comm_count, so the two always agree. */
#include "dispatch/comm_debug.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "dispatch/shadow.h"
#include "mesh/handle.h"
#include "mesh/mesh.h"
#include "mesh/plan.h"

typedef struct cd_entry {
  char label[160];
  const char *api;     /* a string literal of the library */
  int kind;            /* mesh_plan_kind */
  char dim[32];
  int64_t count, bytes;
} cd_entry;

typedef struct cd_state {
  bool on;
  cd_entry *v;
  int n, cap;
  bool oom;
} cd_state;

static _Thread_local cd_state tls;

static const char *kind_name(int k) {
  switch (k) {
  case MESH_PLAN_ALL_GATHER: return "all_gather";
  case MESH_PLAN_ALL_REDUCE: return "all_reduce";
  case MESH_PLAN_REDUCE_SCATTER: return "reduce_scatter";
  case MESH_PLAN_ALL_TO_ALL: return "all_to_all";
  default: return "other";
  }
}

static cd_entry *find_or_add(const char *label, const char *api, int kind,
                             const char *dim) {
  for (int i = 0; i < tls.n; i++) {
    cd_entry *e = &tls.v[i];
    if (e->kind == kind && !strcmp(e->api, api) && !strcmp(e->label, label) &&
        !strcmp(e->dim, dim))
      return e;
  }
  if (tls.n == tls.cap) {
    int cap = tls.cap ? 2 * tls.cap : 16;
    cd_entry *v = realloc(tls.v, sizeof *v * (size_t)cap);
    if (!v) return NULL;
    tls.v = v;
    tls.cap = cap;
  }
  cd_entry *e = &tls.v[tls.n++];
  memset(e, 0, sizeof *e);
  snprintf(e->label, sizeof e->label, "%s", label);
  snprintf(e->dim, sizeof e->dim, "%s", dim);
  e->api = api;
  e->kind = kind;
  return e;
}

static void observe(void *ctx, const dt_mesh *m, int mesh_dim, int kind,
                    int64_t bytes, const char *api) {
  (void)ctx;
  char label[160], dim[32];
  dispatch_label_path(label, sizeof label);
  if (m->names[mesh_dim]) snprintf(dim, sizeof dim, "%s", m->names[mesh_dim]);
  else snprintf(dim, sizeof dim, "%d", mesh_dim);
  cd_entry *e = find_or_add(label, api ? api : "?", kind, dim);
  if (!e) {
    tls.oom = true;
    return;
  }
  e->count++;
  e->bytes += bytes;
}

dt_status dispatch_comm_debug_begin(void) {
  tls.n = 0;
  tls.oom = false;
  tls.on = true;
  mesh_comm_observe(observe, NULL);
  return DT_OK;
}

/* ---- the report */
static void json_str(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    unsigned char ch = (unsigned char)*s;
    if (ch == '"' || ch == '\\') fprintf(f, "\\%c", ch);
    else if (ch < 0x20) fprintf(f, "\\u%04x", ch);
    else fputc(ch, f);
  }
  fputc('"', f);
}

static void write_json(FILE *f) {
  int64_t count = 0, bytes = 0;
  fprintf(f, "{\"collectives\":[");
  for (int i = 0; i < tls.n; i++) {
    const cd_entry *e = &tls.v[i];
    fprintf(f, "%s{\"label\":", i ? "," : "");
    json_str(f, e->label);
    fprintf(f, ",\"function\":");
    json_str(f, e->api);
    fprintf(f, ",\"collective\":\"%s\",\"mesh_dim\":", kind_name(e->kind));
    json_str(f, e->dim);
    fprintf(f, ",\"count\":%lld,\"bytes\":%lld}", (long long)e->count, (long long)e->bytes);
    count += e->count;
    bytes += e->bytes;
  }
  fprintf(f, "],\"total\":{\"count\":%lld,\"bytes\":%lld}}\n", (long long)count,
          (long long)bytes);
}

/* entries grouped by label (first-seen order), a subtotal per label */
static void write_table(FILE *f) {
  int64_t count = 0, bytes = 0;
  fprintf(f, "%-32s %-14s %-8s %8s %14s\n", "label / function", "collective",
          "mesh dim", "count", "bytes");
  bool *done = calloc((size_t)(tls.n ? tls.n : 1), sizeof *done);
  for (int i = 0; done && i < tls.n; i++) {
    if (done[i]) continue;
    const char *label = tls.v[i].label;
    int64_t lc = 0, lb = 0;
    for (int j = i; j < tls.n; j++)
      if (!strcmp(tls.v[j].label, label)) lc += tls.v[j].count, lb += tls.v[j].bytes;
    fprintf(f, "%-32s %-14s %-8s %8lld %14lld\n", label[0] ? label : "(no label)",
            "", "", (long long)lc, (long long)lb);
    for (int j = i; j < tls.n; j++) {
      const cd_entry *e = &tls.v[j];
      if (done[j] || strcmp(e->label, label)) continue;
      done[j] = true;
      fprintf(f, "  %-30s %-14s %-8s %8lld %14lld\n", e->api, kind_name(e->kind),
              e->dim, (long long)e->count, (long long)e->bytes);
    }
    count += lc;
    bytes += lb;
  }
  free(done);
  fprintf(f, "%-32s %-14s %-8s %8lld %14lld\n", "total", "", "", (long long)count,
          (long long)bytes);
}

dt_status dispatch_comm_debug_end(FILE *table, FILE *json, const char *api) {
  if (!tls.on)
    return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: communication debugging "
                          "is not on in this thread (call dt_comm_debug_begin "
                          "first)", api);
  mesh_comm_observe(NULL, NULL);
  tls.on = false;
  dt_status st = DT_OK;
  if (tls.oom)
    st = core_error_set(DT_ERR_OUT_OF_MEMORY, "%s: out of host memory: some "
                        "collectives were not recorded", api);
  if (table) write_table(table);
  if (json) write_json(json);
  if ((table && ferror(table)) || (json && ferror(json)))
    st = core_error_set(DT_ERR_IO, "%s: writing the report failed", api);
  free(tls.v);
  tls.v = NULL;
  tls.n = tls.cap = 0;
  return st;
}
