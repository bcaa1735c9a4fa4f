/* `dtorch stress`: random programs (tools/stress.h). Generation from a
 * seed, execution on a mesh (DTensors with random placements and
 * redistributions) or on one device, and a listing for reproducers. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/stress.h"

static uint64_t next(uint64_t *s) { /* splitmix64 */
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
static int pick(uint64_t *s, int n) { return (int)(next(s) % (uint64_t)n); }

static const char *const unary_names[] = {"relu", "tanh", "gelu", "neg", "mul_scalar(0.5)", "sigmoid"};
enum { UNARIES = 6 };

static dt_placement random_placement(uint64_t *s) {
  int k = pick(s, 3);
  return k == 0 ? DT_REPLICATE : DT_SHARD(k - 1);
}

static int add_input(stress_program *p, uint64_t *s, int64_t r, int64_t c) {
  stress_step *st = &p->s[p->n];
  *st = (stress_step){.k = STRESS_INPUT, .a = -1, .b = -1, .seed = next(s)};
  for (int d = 0; d < p->mesh_ndim; d++) st->pl[d] = random_placement(s);
  p->rows[p->n] = r;
  p->cols[p->n] = c;
  return p->n++;
}

/* a value of shape (r, c), made as an input when none exists */
static int with_shape(stress_program *p, uint64_t *s, int64_t r, int64_t c) {
  int found[STRESS_MAX_STEPS], n = 0;
  for (int i = 0; i < p->n; i++)
    if (p->rows[i] == r && p->cols[i] == c) found[n++] = i;
  return n && pick(s, 3) ? found[pick(s, n)] : add_input(p, s, r, c);
}

static void add_step(stress_program *p, uint64_t *s) {
  int a = pick(s, p->n);
  int64_t r = p->rows[a], c = p->cols[a];
  stress_step st = {.k = (stress_kind)(1 + pick(s, STRESS_KINDS - 1)), .a = a, .b = -1};
  switch (st.k) {
  case STRESS_UNARY: st.arg = pick(s, UNARIES); break;
  case STRESS_BINARY: st.arg = pick(s, 3); st.b = with_shape(p, s, r, c); break;
  case STRESS_MATMUL: st.b = with_shape(p, s, c, 1 + pick(s, 12)); c = p->cols[st.b]; break;
  case STRESS_TRANSPOSE: { int64_t t = r; r = c; c = t; } break;
  case STRESS_SUM: st.arg = pick(s, 2); if (st.arg) c = 1; else r = 1; break;
  case STRESS_SOFTMAX: st.arg = pick(s, 2); break;
  case STRESS_REDIST:
    for (int d = 0; d < p->mesh_ndim; d++) st.pl[d] = random_placement(s);
    break;
  default: break;
  }
  if (p->n >= STRESS_MAX_STEPS) return;
  p->s[p->n] = st;
  p->rows[p->n] = r;
  p->cols[p->n] = c;
  p->n++;
}

void stress_generate(stress_program *p, uint64_t seed, int ranks) {
  uint64_t s = seed;
  memset(p, 0, sizeof *p);
  p->seed = seed;
  p->dtype = pick(&s, 2) ? DT_FLOAT32 : DT_FLOAT64;
  /* a 1-D mesh, or 2-D with both sides > 1 when ranks allow */
  p->mesh_ndim = ranks >= 4 && pick(&s, 2) ? 2 : 1;
  p->mesh[0] = p->mesh_ndim == 2 ? 2 : ranks;
  p->mesh[1] = p->mesh_ndim == 2 ? ranks / 2 : 1;
  add_input(p, &s, 1 + pick(&s, 12), 1 + pick(&s, 12));
  int len = 4 + pick(&s, STRESS_MAX_STEPS / 2 - 4);
  while (p->n < len && p->n < STRESS_MAX_STEPS - 2) add_step(p, &s);
}

/* ---- execution */
static dt_tensor *make_input(const stress_program *p, int i, dt_mesh *m) {
  int64_t n = p->rows[i] * p->cols[i];
  double *v = malloc(sizeof(double) * (size_t)n);
  if (!v) return NULL;
  uint64_t s = p->s[i].seed;
  for (int64_t k = 0; k < n; k++)
    v[k] = (double)(next(&s) >> 11) * 0x1.0p-53 * 2.0 - 1.0;
  dt_tensor_options o = {.dtype = DT_FLOAT64, .mesh = m,
                         .placements = m ? p->s[i].pl : NULL};
  dt_tensor *t64 = dt_from_host(v, DT_SHAPE(p->rows[i], p->cols[i]), &o);
  free(v);
  if (!t64 || p->dtype == DT_FLOAT64) return t64;
  dt_tensor *t = dt_cast(t64, p->dtype);
  dt_tensor_release(t64);
  return t;
}

static dt_tensor *unary(dt_tensor *a, int which) {
  switch (which) {
  case 0: return dt_relu(a);
  case 1: return dt_tanh(a);
  case 2: return dt_gelu(a);
  case 3: return dt_neg(a);
  case 4: return dt_mul_scalar(a, 0.5);
  default: return dt_sigmoid(a);
  }
}

static dt_tensor *run_step(const stress_program *p, int i, dt_tensor **v, dt_mesh *m) {
  const stress_step *st = &p->s[i];
  dt_tensor *a = st->a >= 0 ? v[st->a] : NULL, *b = st->b >= 0 ? v[st->b] : NULL;
  switch (st->k) {
  case STRESS_INPUT: return make_input(p, i, m);
  case STRESS_UNARY: return unary(a, st->arg);
  case STRESS_BINARY: return st->arg == 0 ? dt_add(a, b) : st->arg == 1 ? dt_mul(a, b) : dt_sub(a, b);
  case STRESS_MATMUL: return dt_matmul(a, b);
  case STRESS_TRANSPOSE: return dt_transpose(a, 0, 1);
  case STRESS_SUM: return dt_sum(a, (const int[]){st->arg}, 1, true);
  case STRESS_SOFTMAX: return dt_softmax(a, st->arg);
  case STRESS_REDIST: return m ? dt_redistribute(a, NULL, st->pl) : dt_tensor_retain(a);
  default: return NULL;
  }
}

dt_status stress_execute(const stress_program *p, dt_mesh *m, double *out,
                         char *msg, size_t len) {
  dt_tensor *v[STRESS_MAX_STEPS] = {NULL};
  dt_status st = DT_OK;
  msg[0] = '\0';
  for (int i = 0; i < p->n && st == DT_OK; i++) {
    if (p->s[i].k == STRESS_NONE) continue;
    if (!(v[i] = run_step(p, i, v, m))) {
      st = dt_last_status();
      snprintf(msg, len, "step %d: %s", i, dt_last_error());
    }
  }
  /* every value, as doubles, one after the other */
  size_t at = 0;
  for (int i = 0; i < p->n && st == DT_OK; i++) {
    int64_t n = p->rows[i] * p->cols[i];
    if (p->s[i].k == STRESS_NONE) continue;
    dt_tensor *d = dt_cast(v[i], DT_FLOAT64);
    st = d ? dt_to_host(d, out + at, sizeof(double) * (size_t)n) : dt_last_status();
    if (st != DT_OK) snprintf(msg, len, "value %d: %s", i, dt_last_error());
    dt_tensor_release(d);
    at += (size_t)n;
  }
  for (int i = 0; i < p->n; i++) dt_tensor_release(v[i]);
  return st;
}

size_t stress_out_size(const stress_program *p) {
  size_t n = 0;
  for (int i = 0; i < p->n; i++)
    if (p->s[i].k != STRESS_NONE) n += (size_t)(p->rows[i] * p->cols[i]);
  return n;
}

static void put_placements(FILE *f, const stress_program *p, const dt_placement *pl) {
  fputc('[', f);
  for (int d = 0; d < p->mesh_ndim; d++)
    if (pl[d].kind == DT_PLACEMENT_SHARD) fprintf(f, "%sS(%d)", d ? ", " : "", pl[d].dim);
    else fprintf(f, "%sR", d ? ", " : "");
  fputc(']', f);
}

void stress_print(FILE *f, const stress_program *p) {
  fprintf(f, "program (seed %llu): %s, mesh [%lld%s", (unsigned long long)p->seed,
          dt_dtype_name(p->dtype), (long long)p->mesh[0], p->mesh_ndim == 2 ? ", " : "]\n");
  if (p->mesh_ndim == 2) fprintf(f, "%lld]\n", (long long)p->mesh[1]);
  static const char *const binary[] = {"add", "mul", "sub"};
  for (int i = 0; i < p->n; i++) {
    const stress_step *s = &p->s[i];
    if (s->k == STRESS_NONE) continue;
    fprintf(f, "  v%-2d [%lld, %lld] = ", i, (long long)p->rows[i], (long long)p->cols[i]);
    switch (s->k) {
    case STRESS_INPUT: fprintf(f, "input "); put_placements(f, p, s->pl); break;
    case STRESS_UNARY: fprintf(f, "%s(v%d)", unary_names[s->arg], s->a); break;
    case STRESS_BINARY: fprintf(f, "%s(v%d, v%d)", binary[s->arg], s->a, s->b); break;
    case STRESS_MATMUL: fprintf(f, "matmul(v%d, v%d)", s->a, s->b); break;
    case STRESS_TRANSPOSE: fprintf(f, "transpose(v%d)", s->a); break;
    case STRESS_SUM: fprintf(f, "sum(v%d, dim %d, keepdim)", s->a, s->arg); break;
    case STRESS_SOFTMAX: fprintf(f, "softmax(v%d, dim %d)", s->a, s->arg); break;
    case STRESS_REDIST: fprintf(f, "redistribute(v%d, ", s->a); put_placements(f, p, s->pl);
                        fputc(')', f); break;
    default: break;
    }
    fputc('\n', f);
  }
}

bool stress_used(const stress_program *p, int i) {
  for (int j = i + 1; j < p->n; j++)
    if (p->s[j].k != STRESS_NONE && (p->s[j].a == i || p->s[j].b == i)) return true;
  return false;
}
