/* `dtorch demo --trace-ops`: an interception hook (dt_intercept_push) that
 * prints each op of a training step with the placements of its tensors,
 * and where the step communicates. dt_comm_count does not nest, so the
 * hook ends the count before and after each op, prints what was issued in
 * between and starts it again, keeping the running total itself. */
#include <string.h>

#include "tools/demo.h"

static void comm_add(dt_comm_counts *a, dt_comm_counts b) {
  a->all_reduce += b.all_reduce;
  a->all_gather += b.all_gather;
  a->reduce_scatter += b.reduce_scatter;
  a->all_to_all += b.all_to_all;
  a->broadcast += b.broadcast;
  a->other += b.other;
  a->bytes += b.bytes;
}

static int64_t comm_total(dt_comm_counts c) {
  return c.all_reduce + c.all_gather + c.reduce_scatter + c.all_to_all +
         c.broadcast + c.other;
}

/* the counts since the last call, added to the total; counting restarts */
static dt_comm_counts take(demo_tracer *t) {
  dt_comm_counts c = dt_comm_count_end();
  comm_add(&t->total, c);
  dt_comm_count_begin();
  return c;
}

static void print_comm(FILE *out, const char *what, dt_comm_counts c) {
  static const char *const names[] = {"all_reduce", "all_gather",
    "reduce_scatter", "all_to_all", "broadcast", "other"};
  const int64_t n[] = {c.all_reduce, c.all_gather, c.reduce_scatter,
                       c.all_to_all, c.broadcast, c.other};
  fprintf(out, "    %s:", what);
  for (int i = 0; i < 6; i++)
    if (n[i]) fprintf(out, " %s %lld,", names[i], (long long)n[i]);
  fprintf(out, " %lld bytes\n", (long long)c.bytes);
}

static const char *reduce_name(dt_reduce_op op) {
  static const char *const names[] = {"sum", "avg", "max", "min", "prod"};
  return (unsigned)op < 5 ? names[op] : "?";
}

/* "[S(0), R]" of a DTensor, "" for a single-device tensor or none */
static void format_placements(const dt_tensor *t, char *buf, size_t len) {
  dt_mesh *m = t ? dt_tensor_mesh(t) : NULL;
  size_t at = 0;
  buf[0] = '\0';
  for (int d = 0; m && d < dt_mesh_ndim(m) && at < len; d++) {
    dt_placement p = dt_tensor_placement(t, d);
    const char *sep = d ? ", " : "[";
    if (p.kind == DT_PLACEMENT_SHARD)
      at += (size_t)snprintf(buf + at, len - at, "%sS(%d)", sep, p.dim);
    else if (p.kind == DT_PLACEMENT_PARTIAL)
      at += (size_t)snprintf(buf + at, len - at, "%sP(%s)", sep,
                             reduce_name(p.reduce));
    else
      at += (size_t)snprintf(buf + at, len - at, "%sR", sep);
  }
  if (m && at < len) snprintf(buf + at, len - at, "]");
}

static void print_placements(FILE *out, const dt_op_call *call) {
  char buf[128];
  fprintf(out, "    placements:");
  for (int i = 0; i < dt_op_call_num_inputs(call); i++) {
    dt_tensor *t = dt_op_call_input(call, i);
    format_placements(t, buf, sizeof buf);
    if (t) fprintf(out, " %s", buf);
  }
  fprintf(out, " ->");
  for (int i = 0; i < dt_op_call_num_outputs(call); i++) {
    format_placements(dt_op_call_output(call, i), buf, sizeof buf);
    fprintf(out, " %s", buf);
  }
  fprintf(out, "\n");
}

static dt_status hook(dt_op_call *call, void *user) {
  demo_tracer *t = user;
  dt_comm_counts before = take(t);
  if (comm_total(before))
    print_comm(t->out, "dt_redistribute before the next op", before);
  dt_status st = dt_op_call_run(call);
  dt_comm_counts inside = take(t);
  char buf[512];
  dt_op_call_format(call, buf, sizeof buf);
  fprintf(t->out, "%4lld %s\n", (long long)++t->ops, buf);
  if (st == DT_OK) print_placements(t->out, call);
  if (comm_total(inside)) print_comm(t->out, "inside the op", inside);
  return st;
}

dt_status demo_trace_begin(demo_tracer *t, FILE *out) {
  memset(t, 0, sizeof *t);
  t->out = out;
  dt_comm_count_begin();
  return dt_intercept_push(hook, t);
}

dt_comm_counts demo_trace_end(demo_tracer *t) {
  dt_intercept_pop();
  dt_comm_counts rest = dt_comm_count_end();
  if (comm_total(rest)) print_comm(t->out, "dt_redistribute after the last op", rest);
  comm_add(&t->total, rest);
  return t->total;
}
