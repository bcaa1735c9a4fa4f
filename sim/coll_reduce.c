/* Reductions and bulk stores for the emulated collectives (see
 * coll_reduce.h for the tree order and the semantics of each op and
 * dtype).
 *
 * A reduction runs block by block (up to CHUNK elements): the tree over
 * the members is evaluated depth first, a node's left child into the
 * node's own block and its right child into the scratch block of the next
 * level, then combined; so a tree of depth D needs D + 1 compute-type
 * blocks, sized to stay in L1 together (the block shrinks for very deep
 * trees). A child that is a member's input already in the compute type,
 * or a partial, is combined straight from its buffer without a copy; a
 * narrower input is converted once (cpu_load). AVG divides at the root,
 * the block is converted once to the storage dtype and then copied to
 * every output. Each input byte is read from memory once and each output
 * byte written once, as in a linear reduction. Outputs of large
 * reductions and large copies are written with non-temporal stores: they
 * will be read by another rank's next op, not by this one, and streaming
 * saves the read-for-ownership that would otherwise make a write cost two
 * memory transfers (the memcpy baseline the benchmark compares with
 * streams too). */
#include "sim/coll_reduce.h"

#include <math.h>
#include <string.h>

#include "core/dtype.h"
#include "core/error.h"
#include "kernels/cpu/cpu.h"

#if defined(__SSE2__) && !defined(__SANITIZE_THREAD__) && \
    !defined(__SANITIZE_ADDRESS__)
#include <emmintrin.h>
#define SIM_COLL_STREAMING 1
#else
#define SIM_COLL_STREAMING 0
#endif

/* elements per block at most; the blocks of one reduction (the tree's
 * depth + 2, of the compute type) share SCRATCH bytes, in L1 */
#define CHUNK 1024
#define SCRATCH ((int64_t)32 * 1024)
/* levels of the tree over at most INT_MAX members */
#define MAX_DEPTH 32
/* below this many bytes per output, stores stay cached (the reader is
 * likely to find them in the shared cache) */
#define STREAM_MIN ((int64_t)256 * 1024)


dt_status sim_coll_reduce_check(const char *what, dt_dtype d, dt_reduce_op op) {
  if ((unsigned)d >= (unsigned)DT_DTYPE_COUNT)
    return core_error_set(DT_ERR_DTYPE, "%s: invalid dtype %d", what, (int)d);
  if ((unsigned)op > (unsigned)DT_REDUCE_PROD)
    return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: invalid reduce op %d",
                        what, (int)op);
  if (d == DT_BOOL && op == DT_REDUCE_AVG)
    return core_error_set(DT_ERR_DTYPE,
                        "%s: avg of bool is not defined (sum is a logical "
                        "or)", what);
  return DT_OK;
}

/* copies bytes to dst, streaming when asked and dst allows */
static void store_bytes(char *dst, const char *src, int64_t bytes,
                        bool stream) {
#if SIM_COLL_STREAMING
  if (stream) {
    /* cached stores up to the first 16-byte boundary of dst */
    int64_t head = (int64_t)((16 - ((uintptr_t)dst & 15)) & 15);
    if (head > bytes) head = bytes;
    memcpy(dst, src, (size_t)head);
    dst += head, src += head, bytes -= head;
    for (; bytes >= 64; bytes -= 64, dst += 64, src += 64) {
      __m128i x0 = _mm_loadu_si128((const __m128i *)src);
      __m128i x1 = _mm_loadu_si128((const __m128i *)(src + 16));
      __m128i x2 = _mm_loadu_si128((const __m128i *)(src + 32));
      __m128i x3 = _mm_loadu_si128((const __m128i *)(src + 48));
      _mm_stream_si128((__m128i *)dst, x0);
      _mm_stream_si128((__m128i *)(dst + 16), x1);
      _mm_stream_si128((__m128i *)(dst + 32), x2);
      _mm_stream_si128((__m128i *)(dst + 48), x3);
    }
  }
#else
  (void)stream;
#endif
  if (bytes > 0) memcpy(dst, src, (size_t)bytes);
}

bool sim_coll_streams(int64_t bytes) { return bytes >= STREAM_MIN; }

void sim_coll_copy(void *dst, const void *src, int64_t bytes, bool stream) {
  if (bytes <= 0 || dst == src) return;
  store_bytes(dst, src, bytes, stream);
}

void sim_coll_store_fence(void) {
#if SIM_COLL_STREAMING
  _mm_sfence();
#endif
}

/* NaN in either operand gives NaN (the a != a test catches a; b NaN fails
 * the comparison and is chosen) */
#define FMAX(a, b) ((a) != (a) || (a) > (b) ? (a) : (b))
#define FMIN(a, b) ((a) != (a) || (a) < (b) ? (a) : (b))

/* c[j] = EXPR over a[j], b[j]: blocks of 8 with a constant inner bound,
 * which gcc's -O2 (very cheap cost model) vectorises; then the tail */
#define COMBINE_LOOP(EXPR)                                                  \
  do {                                                                      \
    for (int64_t j0 = 0; j0 + 8 <= n; j0 += 8)                              \
      for (int u = 0; u < 8; u++) {                                         \
        int64_t j = j0 + u;                                                 \
        c[j] = (EXPR);                                                      \
      }                                                                     \
    for (int64_t j = n & ~(int64_t)7; j < n; j++) c[j] = (EXPR);            \
  } while (0)

/* a tree node's value from its children: c = a op b, the left child a and
 * the right child b (the order matters for NaN payloads only). Two
 * variants so that restrict stays true: NAME_in when the left child is
 * already in c (a is based on c), NAME_out when it is elsewhere. */
#define DEFINE_COMBINE(NAME, T, BODY)                                       \
  static void NAME##_in(T *restrict c, const T *restrict b, int64_t n,      \
                        dt_reduce_op op) {                                  \
    const T *a = c;                                                         \
    BODY                                                                    \
  }                                                                         \
  static void NAME##_out(T *restrict c, const T *restrict a,                \
                         const T *restrict b, int64_t n, dt_reduce_op op) { \
    BODY                                                                    \
  }

#define FLOAT_BODY                                                          \
  switch (op) {                                                             \
  case DT_REDUCE_SUM: case DT_REDUCE_AVG: COMBINE_LOOP(a[j] + b[j]); break; \
  case DT_REDUCE_PROD: COMBINE_LOOP(a[j] * b[j]); break;                    \
  case DT_REDUCE_MAX: COMBINE_LOOP(FMAX(a[j], b[j])); break;                \
  case DT_REDUCE_MIN: COMBINE_LOOP(FMIN(a[j], b[j])); break;                \
  }
DEFINE_COMBINE(combine_f32, float, FLOAT_BODY)
DEFINE_COMBINE(combine_f64, double, FLOAT_BODY)

/* integers wrap: the arithmetic is done on uint64 (defined overflow) and
 * converted back (GCC defines that conversion as modulo 2^64) */
#define INT_BODY                                                            \
  switch (op) {                                                             \
  case DT_REDUCE_SUM: case DT_REDUCE_AVG:                                   \
    COMBINE_LOOP((int64_t)((uint64_t)a[j] + (uint64_t)b[j])); break;        \
  case DT_REDUCE_PROD:                                                      \
    COMBINE_LOOP((int64_t)((uint64_t)a[j] * (uint64_t)b[j])); break;        \
  case DT_REDUCE_MAX: COMBINE_LOOP(a[j] > b[j] ? a[j] : b[j]); break;       \
  case DT_REDUCE_MIN: COMBINE_LOOP(a[j] < b[j] ? a[j] : b[j]); break;       \
  }
DEFINE_COMBINE(combine_i64, int64_t, INT_BODY)

/* bool values are 0/1 after cpu_load: sum/max = or, prod/min = and */
#define BOOL_BODY                                                           \
  if (op == DT_REDUCE_PROD || op == DT_REDUCE_MIN)                          \
    COMBINE_LOOP((uint8_t)(a[j] & b[j]));                                   \
  else                                                                      \
    COMBINE_LOOP((uint8_t)(a[j] | b[j]));
DEFINE_COMBINE(combine_bool, uint8_t, BOOL_BODY)

/* c = a op b in the compute type ct; a may be c, b is never c */
static void combine(void *c, const void *a, const void *b, int64_t n,
                    dt_dtype ct, dt_reduce_op op) {
  bool in = a == c;
  switch (ct) {
  case DT_FLOAT32:
    in ? combine_f32_in(c, b, n, op) : combine_f32_out(c, a, b, n, op);
    break;
  case DT_FLOAT64:
    in ? combine_f64_in(c, b, n, op) : combine_f64_out(c, a, b, n, op);
    break;
  case DT_INT64:
    in ? combine_i64_in(c, b, n, op) : combine_i64_out(c, a, b, n, op);
    break;
  default:
    in ? combine_bool_in(c, b, n, op) : combine_bool_out(c, a, b, n, op);
    break;
  }
}

static void finish_avg(void *acc, int64_t n, dt_dtype ct, int nin) {
  switch (ct) {
  case DT_FLOAT32: {
    float *restrict c = acc, k = (float)nin;
    COMBINE_LOOP(c[j] / k);
    break;
  }
  case DT_FLOAT64: {
    double *restrict c = acc, k = (double)nin;
    COMBINE_LOOP(c[j] / k);
    break;
  }
  case DT_INT64: { /* C division: truncation toward zero */
    int64_t *v = acc;
    for (int64_t j = 0; j < n; j++) v[j] /= nin;
    break;
  }
  default: break; /* bool avg is rejected by sim_coll_reduce_check */
  }
}

/* every NaN becomes the default quiet NaN (positive, no payload): which
 * of two NaN operands a + or * propagates depends on the instruction's
 * operand order, which the compiler may commute (it does, between the
 * in-place and out-of-place combines), so without this the sign of a NaN
 * result could depend on which subtrees were given as partials */
static void canon_nan(void *acc, int64_t n, dt_dtype ct) {
  if (ct == DT_FLOAT32) {
    float *restrict c = acc;
    COMBINE_LOOP(c[j] != c[j] ? NAN : c[j]);
  } else if (ct == DT_FLOAT64) {
    double *restrict c = acc;
    COMBINE_LOOP(c[j] != c[j] ? (double)NAN : c[j]);
  }
}

/* ---- the tree */

/* one reduction: its inputs (the tree's nodes, or the members' inputs when
 * nodes is NULL) and the block being evaluated */
typedef struct tree_ctx {
  const sim_coll_node *nodes; /* sorted by lo, tiling the evaluated node */
  int nn;
  const void *const *in;      /* leaf inputs in[lo] when nodes is NULL */
  dt_dtype d, ct;
  dt_reduce_op op;
  size_t esz, csz;            /* bytes of an element in d / in ct */
  int64_t off, len;           /* the block: elements [off, off + len) */
  char *blk[MAX_DEPTH + 2];   /* blk[level]: the value of a node at that
                                 depth below the evaluated one; the last,
                                 staging for the conversion to d */
} tree_ctx;

static int mid_of(int lo, int hi) { return lo + (hi - lo) / 2; }

/* levels below a node of `size` members (the right half is the larger) */
static int tree_depth(int size) {
  int d = 0;
  for (; size > 1; size -= size / 2) d++;
  return d;
}

/* the block of a given node's buffer, in the compute type: the buffer
 * itself when it already is (bool through cpu_load, which makes any
 * nonzero byte 1), else converted into dst */
static const void *given(const tree_ctx *t, const void *p, bool acc,
                         char *dst) {
  dt_dtype sd = acc ? t->ct : t->d;
  size_t sz = acc ? t->csz : t->esz;
  const char *src = (const char *)p + (size_t)t->off * sz;
  if (sd == t->ct && sd != DT_BOOL) return src;
  cpu_load(dst, t->ct, src, sd, (int64_t)sz, t->len);
  return dst;
}

/* the block of node (lo, hi), `level` below the evaluated node: a given
 * node's buffer, or its children combined into blk[level] (the left child
 * evaluated there too, the right one a level below). *k is the next
 * given node (depth first visits them in order of lo). */
static const void *eval(tree_ctx *t, int lo, int hi, int *k, int level) {
  char *dst = t->blk[level];
  if (t->nodes) {
    const sim_coll_node *g = &t->nodes[*k];
    if (*k < t->nn && g->lo == lo && g->hi == hi) {
      ++*k;
      return given(t, g->p, g->acc, dst);
    }
  } else if (hi - lo == 1) {
    return given(t, t->in[lo], false, dst);
  }
  int mid = mid_of(lo, hi);
  const void *a = eval(t, lo, mid, k, level);
  const void *b = eval(t, mid, hi, k, level + 1);
  combine(dst, a, b, t->len, t->ct, t->op);
  return dst;
}

/* out[o][0..count) = node (lo, hi), block by block: in the compute type
 * when out_acc, else rounded to d (divided by n first for avg when `root`,
 * i.e. n = hi - lo members, the whole tree) */
static void tree_run(tree_ctx *t, int lo, int hi, bool root,
                     void *const *out, int nout, int64_t count,
                     bool out_acc) {
  int depth = tree_depth(hi - lo);
  int64_t chunk = SCRATCH / ((int64_t)(depth + 2) * (int64_t)t->csz);
  chunk = chunk >= CHUNK ? CHUNK : chunk < 64 ? 64 : chunk & ~(int64_t)63;
  _Alignas(64) char scratch[SCRATCH];
  for (int l = 0; l < depth + 2; l++)
    t->blk[l] = scratch + (size_t)l * (size_t)chunk * t->csz;
  size_t osz = out_acc ? t->csz : t->esz;
  bool stream = sim_coll_streams(count * (int64_t)osz);
  char *staging = t->blk[depth + 1];
  for (t->off = 0; t->off < count; t->off += chunk) {
    t->len = count - t->off < chunk ? count - t->off : chunk;
    int k = 0;
    const char *src = eval(t, lo, hi, &k, 0);
    bool fl = t->ct == DT_FLOAT32 || t->ct == DT_FLOAT64;
    if (!out_acc && (fl || (root && t->op == DT_REDUCE_AVG))) {
      if (src != t->blk[0]) memcpy(t->blk[0], src, (size_t)t->len * t->csz);
      if (root && t->op == DT_REDUCE_AVG)
        finish_avg(t->blk[0], t->len, t->ct, hi - lo);
      canon_nan(t->blk[0], t->len, t->ct);
      src = t->blk[0];
    }
    if (!out_acc && t->d != t->ct) { /* round once, copy the same bits */
      cpu_store(staging, t->d, (int64_t)t->esz, src, t->ct, t->len);
      src = staging;
    }
    for (int o = 0; o < nout; o++) {
      char *dst = (char *)out[o] + (size_t)t->off * osz;
      if (dst != src) store_bytes(dst, src, t->len * (int64_t)osz, stream);
    }
  }
}

void sim_coll_reduce(const void *const *in, int nin, void *const *out,
                     int nout, int64_t count, dt_dtype d, dt_reduce_op op) {
  CORE_ASSERT(nin >= 1);
  dt_dtype ct = cpu_compute_type(d);
  tree_ctx t = {.in = in, .d = d, .ct = ct, .op = op,
                .esz = core_dtype_size(d), .csz = core_dtype_size(ct)};
  tree_run(&t, 0, nin, true, out, nout, count, false);
}

size_t sim_coll_acc_size(dt_dtype d) {
  return core_dtype_size(cpu_compute_type(d));
}

bool sim_coll_tree_is_node(int n, int lo, int hi) {
  if (n < 1 || lo < 0 || hi > n || lo >= hi) return false;
  int a = 0, b = n;
  while (a != lo || b != hi) {
    if (b - a == 1) return false;
    int mid = mid_of(a, b);
    if (hi <= mid) b = mid;
    else if (lo >= mid) a = mid;
    else return false; /* straddles the split */
  }
  return true;
}

/* whether the given nodes from *k on tile node (lo, hi) exactly, each a
 * node of the tree */
static bool tiles(const sim_coll_node *nodes, int nn, int lo, int hi,
                  int *k) {
  if (*k < nn && nodes[*k].lo == lo && nodes[*k].hi == hi) {
    ++*k;
    return true;
  }
  if (hi - lo == 1) return false;
  int mid = mid_of(lo, hi);
  return tiles(nodes, nn, lo, mid, k) && tiles(nodes, nn, mid, hi, k);
}

/* the first problem with a tree_reduce's nodes, or DT_OK */
static dt_status check_nodes(const sim_coll_node *nodes, int nn, int n,
                             int64_t count) {
  static const char *fn = "sim_coll_tree_reduce";
  if (n < 1 || nn < 1 || nn > n || !nodes)
    return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: nodes %s, nn %d, "
                          "n %d: want 1 <= nn <= n", fn,
                          nodes ? "given" : "NULL", nn, n);
  for (int i = 0; i < nn; i++)
    if (!nodes[i].p && count > 0)
      return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: nodes[%d] (%d, %d)"
                            " has a NULL buffer", fn, i, nodes[i].lo,
                            nodes[i].hi);
  int lo = nodes[0].lo, hi = nodes[nn - 1].hi, k = 0;
  if (!sim_coll_tree_is_node(n, lo, hi))
    return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: nodes span [%d, %d),"
                          " not a node of the tree over [0, %d)", fn, lo, hi,
                          n);
  if (!tiles(nodes, nn, lo, hi, &k) || k != nn)
    return core_error_set(DT_ERR_INVALID_ARGUMENT, "%s: nodes[%d] (%d, %d) "
                          "is not the next node of a tiling of [%d, %d) into "
                          "tree nodes sorted by lo", fn, k,
                          k < nn ? nodes[k].lo : -1, k < nn ? nodes[k].hi : -1,
                          lo, hi);
  return DT_OK;
}

dt_status sim_coll_tree_reduce(const sim_coll_node *nodes, int nn, int n,
                               int64_t count, dt_dtype d, dt_reduce_op op,
                               void *out, bool out_acc) {
  dt_status st = sim_coll_reduce_check("sim_coll_tree_reduce", d, op);
  if (st != DT_OK) return st;
  if (count < 0 || (count > 0 && !out))
    return core_error_set(DT_ERR_INVALID_ARGUMENT, "sim_coll_tree_reduce: "
                          "count %lld, out %s", (long long)count,
                          out ? "given" : "NULL");
  if ((st = check_nodes(nodes, nn, n, count)) != DT_OK) return st;
  dt_dtype ct = cpu_compute_type(d);
  tree_ctx t = {.nodes = nodes, .nn = nn, .d = d, .ct = ct, .op = op,
                .esz = core_dtype_size(d), .csz = core_dtype_size(ct)};
  int lo = nodes[0].lo, hi = nodes[nn - 1].hi;
  tree_run(&t, lo, hi, lo == 0 && hi == n, &out, 1, count, out_acc);
  return DT_OK;
}

/* emits the maximal all-mine nodes of (lo, hi) after out[0..*cnt); returns
 * whether the whole node is mine (then it is the last one emitted: two
 * whole children are replaced by their parent) */
static bool subtrees(int lo, int hi, const bool *mine, int *olo, int *ohi,
                     int *cnt) {
  if (hi - lo == 1) {
    if (!mine[lo]) return false;
    olo[*cnt] = lo, ohi[*cnt] = hi, ++*cnt;
    return true;
  }
  int mid = mid_of(lo, hi);
  bool l = subtrees(lo, mid, mine, olo, ohi, cnt);
  bool r = subtrees(mid, hi, mine, olo, ohi, cnt);
  if (!l || !r) return false;
  *cnt -= 2;
  olo[*cnt] = lo, ohi[*cnt] = hi, ++*cnt;
  return true;
}

int sim_coll_tree_subtrees(int n, const bool *mine, int *lo, int *hi) {
  if (n < 1 || !mine || !lo || !hi) {
    core_error_set(DT_ERR_INVALID_ARGUMENT, "sim_coll_tree_subtrees: n %d, "
                   "mine/lo/hi %s: want n >= 1 and three buffers", n,
                   mine && lo && hi ? "given" : "with a NULL");
    return -1;
  }
  int cnt = 0;
  subtrees(0, n, mine, lo, hi, &cnt);
  return cnt;
}
