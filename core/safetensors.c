/* The safetensors header (safetensors.h): cJSON parses the JSON; this file
 * checks everything the format promises before any byte of data is read —
 * lengths against the file's size, the fields' types and ranges, dtype x
 * shape against data_offsets, names (UTF-8, unique), and that the offsets
 * tile the data buffer exactly. No pointer into the file's bytes is ever
 * followed without its bound checked first. */
#include "core/safetensors.h"

#include <cJSON.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "core/error.h"

/* cJSON_Parse* resets a static error struct on every call: parses are
 * serialised so concurrent loads do not race on it */
static pthread_mutex_t parse_lock = PTHREAD_MUTEX_INITIALIZER;

/* the file's dtype strings: dtorch's eight, then those it lists but cannot
 * hold (dtype DT_DTYPE_COUNT) with their element sizes */
static const struct { const char *s; int dtype; unsigned size; } dtypes[] = {
    {"F32", DT_FLOAT32, 4},  {"F64", DT_FLOAT64, 8},  {"F16", DT_FLOAT16, 2},
    {"BF16", DT_BFLOAT16, 2}, {"I32", DT_INT32, 4},   {"I64", DT_INT64, 8},
    {"U8", DT_UINT8, 1},     {"BOOL", DT_BOOL, 1},
    {"I8", DT_DTYPE_COUNT, 1},  {"I16", DT_DTYPE_COUNT, 2},
    {"U16", DT_DTYPE_COUNT, 2}, {"U32", DT_DTYPE_COUNT, 4},
    {"U64", DT_DTYPE_COUNT, 8}, {"F8_E4M3", DT_DTYPE_COUNT, 1},
    {"F8_E5M2", DT_DTYPE_COUNT, 1}, {"F8_E8M0", DT_DTYPE_COUNT, 1},
    {"C64", DT_DTYPE_COUNT, 8},
};
#define NDTYPES (int)(sizeof dtypes / sizeof dtypes[0])

const char *core_st_dtype_str(dt_dtype d) {
  for (int i = 0; i < NDTYPES; i++)
    if (dtypes[i].dtype == (int)d) return dtypes[i].s;
  return "?";
}

bool core_st_utf8_valid(const char *str, size_t n) {
  static const uint32_t min[] = {0, 0x80, 0x800, 0x10000};
  const unsigned char *s = (const unsigned char *)str;
  for (size_t i = 0; i < n;) {
    unsigned c = s[i];
    size_t k = c < 0x80 ? 0 : (c & 0xe0) == 0xc0 ? 1 : (c & 0xf0) == 0xe0 ? 2
             : (c & 0xf8) == 0xf0 ? 3 : 4;
    if (k == 4 || k >= n - i) return false; /* a bad lead, or cut short */
    uint32_t cp = k == 0 ? c : c & (0x3fu >> k);
    for (size_t j = 1; j <= k; j++) {
      if ((s[i + j] & 0xc0) != 0x80) return false;
      cp = cp << 6 | (s[i + j] & 0x3f);
    }
    if (cp < min[k] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
      return false;
    i += k + 1;
  }
  return true;
}

/* a name for a message: at most 48 bytes, non-printable bytes as \xNN */
static const char *show(const char *s, char *buf, size_t len) {
  size_t o = 0;
  for (size_t i = 0; s[i] && o + 5 < len; i++) {
    unsigned char c = (unsigned char)s[i];
    if (i == 48) {
      o += (size_t)snprintf(buf + o, len - o, "...");
      break;
    }
    if (c < 0x20 || c >= 0x7f || c == '\'' || c == '\\')
      o += (size_t)snprintf(buf + o, len - o, "\\x%02x", c);
    else
      buf[o++] = (char)c;
  }
  buf[o] = '\0';
  return buf;
}
#define SHOW_LEN 200

/* a string as the header's JSON text writes it (escapes kept): at most
 * 48 bytes, bytes outside printable ASCII and quotes as \xNN */
static const char *show_json(const char *s, size_t n, char *buf, size_t len) {
  size_t o = 0;
  for (size_t i = 0; i < n && o + 5 < len; i++) {
    unsigned char c = (unsigned char)s[i];
    if (i == 48) {
      o += (size_t)snprintf(buf + o, len - o, "...");
      break;
    }
    if (c < 0x20 || c >= 0x7f || c == '\'')
      o += (size_t)snprintf(buf + o, len - o, "\\x%02x", c);
    else
      buf[o++] = (char)c;
  }
  buf[o] = '\0';
  return buf;
}

/* a field's number: integral, in [0, 2^53] (cJSON holds numbers as
 * doubles; 2^53 bytes is far past any file) */
static bool whole(const cJSON *v, uint64_t *out) {
  if (!cJSON_IsNumber(v)) return false;
  double d = v->valuedouble;
  if (!(d >= 0 && d <= 9007199254740992.0) || d != floor(d)) return false;
  *out = (uint64_t)d;
  return true;
}

dt_status core_st_check_prefix(const unsigned char *prefix, size_t avail,
                               uint64_t file_size, uint64_t *n,
                               const char *fn, const char *path) {
  if (file_size < 8 || avail < 8)
    return core_error_set(DT_ERR_IO, "%s: %s: truncated: the file has %llu "
                          "bytes, fewer than the 8 of the header length", fn,
                          path, (unsigned long long)file_size);
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = v << 8 | prefix[i];
  *n = v;
  if (v > CORE_ST_MAX_HEADER)
    return core_error_set(DT_ERR_IO, "%s: %s: header length %llu is over the "
                          "100 MB limit (refused)", fn, path,
                          (unsigned long long)v);
  if (v > file_size - 8)
    return core_error_set(DT_ERR_IO, "%s: %s: header length %llu runs past "
                          "the end of the file (%llu bytes)", fn, path,
                          (unsigned long long)v, (unsigned long long)file_size);
  if (v < 2)
    return core_error_set(DT_ERR_IO, "%s: %s: header length %llu is too "
                          "short for a JSON object", fn, path,
                          (unsigned long long)v);
  return DT_OK;
}

void core_st_info_clear(dt_safetensors_info *info) {
  for (int i = 0; i < info->n; i++) free((char *)info->tensors[i].name);
  for (int i = 0; i < info->n_metadata; i++) {
    free((char *)info->metadata_keys[i]);
    free((char *)info->metadata_values[i]);
  }
  free(info->tensors);
  free(info->metadata_keys);
  free(info->metadata_values);
  memset(info, 0, sizeof *info);
}

typedef struct pctx {
  const char *fn, *path;
  uint64_t data_len, data_start;
  dt_safetensors_info *out;
  uint64_t *begin;   /* per entry: offset in the data buffer */
} pctx;

static dt_status bad(const pctx *p, const char *name, const char *what) {
  char b[SHOW_LEN];
  if (name)
    return core_error_set(DT_ERR_IO, "%s: %s: tensor '%s': %s", p->fn, p->path,
                          show(name, b, sizeof b), what);
  return core_error_set(DT_ERR_IO, "%s: %s: %s", p->fn, p->path, what);
}

static dt_status parse_metadata(pctx *p, const cJSON *m) {
  if (!cJSON_IsObject(m)) return bad(p, NULL, "__metadata__ is not an object");
  int k = cJSON_GetArraySize(m);
  dt_safetensors_info *o = p->out;
  o->metadata_keys = calloc((size_t)k + 1, sizeof(char *));
  o->metadata_values = calloc((size_t)k + 1, sizeof(char *));
  if (!o->metadata_keys || !o->metadata_values)
    return core_error_set(DT_ERR_OUT_OF_MEMORY, "%s: out of host memory", p->fn);
  for (const cJSON *e = m->child; e; e = e->next) {
    char b[SHOW_LEN], w[SHOW_LEN + 80];
    if (!cJSON_IsString(e) || !core_st_utf8_valid(e->string, strlen(e->string)) ||
        !core_st_utf8_valid(e->valuestring, strlen(e->valuestring))) {
      snprintf(w, sizeof w, "__metadata__ entry '%s' is not a UTF-8 string "
               "pair", show(e->string, b, sizeof b));
      return bad(p, NULL, w);
    }
    char *ks = strdup(e->string), *vs = strdup(e->valuestring);
    o->metadata_keys[o->n_metadata] = ks;
    o->metadata_values[o->n_metadata++] = vs;
    if (!ks || !vs)
      return core_error_set(DT_ERR_OUT_OF_MEMORY, "%s: out of host memory", p->fn);
  }
  return DT_OK;
}

static dt_status parse_shape(pctx *p, const char *name, const cJSON *s,
                             dt_shape *shape) {
  if (!cJSON_IsArray(s)) return bad(p, name, "shape is missing or not an array");
  int nd = cJSON_GetArraySize(s);
  char w[120];
  if (nd > DT_MAX_DIMS) {
    snprintf(w, sizeof w, "shape has %d dims (dtorch holds at most %d)", nd,
             DT_MAX_DIMS);
    return bad(p, name, w);
  }
  shape->ndim = nd;
  int i = 0;
  for (const cJSON *d = s->child; d; d = d->next, i++) {
    uint64_t v;
    if (!whole(d, &v)) {
      snprintf(w, sizeof w, "shape[%d] is not a whole number in [0, 2^53]", i);
      return bad(p, name, w);
    }
    shape->dims[i] = (int64_t)v;
  }
  return DT_OK;
}

static int dtype_index(const cJSON *d) {
  if (!cJSON_IsString(d)) return -1;
  for (int i = 0; i < NDTYPES; i++)
    if (!strcmp(dtypes[i].s, d->valuestring)) return i;
  return -2;
}

/* the byte size shape x dtype asks for; false on overflow */
static bool shape_bytes(const dt_shape *s, unsigned es, uint64_t *out) {
  uint64_t n = es;
  for (int i = 0; i < s->ndim; i++)
    if (__builtin_mul_overflow(n, (uint64_t)s->dims[i], &n)) return false;
  *out = n;
  return true;
}

static dt_status parse_entry(pctx *p, const cJSON *e, int at) {
  const char *name = e->string;
  char w[300], b[SHOW_LEN];
  if (!core_st_utf8_valid(name, strlen(name)))
    return bad(p, NULL, (snprintf(w, sizeof w, "a tensor name is not valid "
                                  "UTF-8 ('%s')", show(name, b, sizeof b)), w));
  if (!cJSON_IsObject(e)) return bad(p, name, "the entry is not an object");
  int di = dtype_index(cJSON_GetObjectItemCaseSensitive(e, "dtype"));
  if (di == -1) return bad(p, name, "dtype is missing or not a string");
  if (di == -2) {
    const char *s = cJSON_GetObjectItemCaseSensitive(e, "dtype")->valuestring;
    snprintf(w, sizeof w, "dtype '%s' is unknown", show(s, b, sizeof b));
    return bad(p, name, w);
  }
  dt_safetensors_entry *t = &p->out->tensors[at];
  t->dtype_name = dtypes[di].s;
  t->dtype = (dt_dtype)dtypes[di].dtype;
  dt_status st = parse_shape(p, name, cJSON_GetObjectItemCaseSensitive(e, "shape"),
                             &t->shape);
  if (st != DT_OK) return st;
  const cJSON *o = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
  uint64_t lo, hi, need;
  if (!cJSON_IsArray(o) || cJSON_GetArraySize(o) != 2 || !whole(o->child, &lo) ||
      !whole(o->child->next, &hi))
    return bad(p, name, "data_offsets is not [begin, end] of whole numbers in "
                        "[0, 2^53]");
  if (lo > hi) {
    snprintf(w, sizeof w, "data_offsets [%llu, %llu] end before they begin",
             (unsigned long long)lo, (unsigned long long)hi);
    return bad(p, name, w);
  }
  if (hi > p->data_len) {
    snprintf(w, sizeof w, "data_offsets [%llu, %llu] run past the data buffer "
             "(%llu bytes)", (unsigned long long)lo, (unsigned long long)hi,
             (unsigned long long)p->data_len);
    return bad(p, name, w);
  }
  char sh[CORE_SHAPE_STR_LEN], nb[48];
  bool fits = shape_bytes(&t->shape, dtypes[di].size, &need);
  if (!fits || need != hi - lo) {
    if (fits) snprintf(nb, sizeof nb, "%llu bytes", (unsigned long long)need);
    snprintf(w, sizeof w, "data_offsets [%llu, %llu] hold %llu bytes, but shape "
             "%s of %s needs %s", (unsigned long long)lo, (unsigned long long)hi,
             (unsigned long long)(hi - lo),
             core_shape_str(t->shape.dims, t->shape.ndim, sh, sizeof sh),
             dtypes[di].s, fits ? nb : "more than 2^64 bytes");
    return bad(p, name, w);
  }
  t->name = strdup(name);
  if (!t->name) return core_error_set(DT_ERR_OUT_OF_MEMORY, "%s: out of host memory", p->fn);
  t->offset = lo; /* relative until the tiling is checked */
  t->nbytes = hi - lo;
  return DT_OK;
}

static int by_offset(const void *a, const void *b) {
  const dt_safetensors_entry *x = a, *y = b;
  if (x->offset != y->offset) return x->offset < y->offset ? -1 : 1;
  return x->nbytes < y->nbytes ? -1 : x->nbytes > y->nbytes;
}

static int by_name(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* names unique (tensors and __metadata__ alike) */
static dt_status check_unique(pctx *p, const cJSON *root, int count) {
  const char **names = malloc(sizeof(char *) * (size_t)(count ? count : 1));
  if (!names) return core_error_set(DT_ERR_OUT_OF_MEMORY, "%s: out of host memory", p->fn);
  int k = 0;
  for (const cJSON *e = root->child; e; e = e->next) names[k++] = e->string;
  qsort(names, (size_t)k, sizeof *names, by_name);
  dt_status st = DT_OK;
  for (int i = 1; i < k && st == DT_OK; i++)
    if (!strcmp(names[i - 1], names[i]))
      st = bad(p, names[i], "the name appears twice in the header");
  free(names);
  return st;
}

/* sorted by offset, the entries must tile [0, data_len) */
static dt_status check_tiling(pctx *p) {
  dt_safetensors_info *o = p->out;
  qsort(o->tensors, (size_t)o->n, sizeof *o->tensors, by_offset);
  uint64_t at = 0;
  char w[400], b[SHOW_LEN];
  for (int i = 0; i < o->n; i++) {
    const dt_safetensors_entry *t = &o->tensors[i];
    if (t->offset < at) {
      snprintf(w, sizeof w, "data_offsets [%llu, %llu] overlap those of '%s' "
               "(ending at %llu)", (unsigned long long)t->offset,
               (unsigned long long)(t->offset + t->nbytes),
               show(o->tensors[i - 1].name, b, sizeof b), (unsigned long long)at);
      return bad(p, t->name, w);
    }
    if (t->offset > at) {
      snprintf(w, sizeof w, "data_offsets begin at %llu, leaving a hole after "
               "byte %llu of the data buffer", (unsigned long long)t->offset,
               (unsigned long long)at);
      return bad(p, t->name, w);
    }
    at = t->offset + t->nbytes;
  }
  if (at != p->data_len) {
    snprintf(w, sizeof w, "the tensors cover %llu bytes of the %llu-byte data "
             "buffer (the rest is not any tensor's)", (unsigned long long)at,
             (unsigned long long)p->data_len);
    return bad(p, NULL, w);
  }
  for (int i = 0; i < o->n; i++) o->tensors[i].offset += p->data_start;
  return DT_OK;
}

/* cJSON decodes the escape \u0000 into a NUL inside its C string, so a
 * name holding U+0000 would read as its prefix (and two names could meet
 * in one): the header's text, valid JSON by now, is scanned for the
 * escape in every string, and such a header refused. A string that is a
 * key of the root object is a tensor name. */
static dt_status check_nul_escapes(const pctx *p, const char *hdr, size_t n) {
  int depth = 0;
  for (size_t i = 0; i < n; i++) {
    if (hdr[i] == '{' || hdr[i] == '[') depth++;
    if (hdr[i] == '}' || hdr[i] == ']') depth--;
    if (hdr[i] != '"') continue;
    size_t start = ++i;
    bool nul = false;
    for (; i < n && hdr[i] != '"'; i++) {
      if (hdr[i] != '\\') continue;
      i++; /* the escaped character: a quote here does not end the string */
      if (i + 4 < n && hdr[i] == 'u' && !memcmp(hdr + i + 1, "0000", 4)) nul = true;
    }
    if (!nul) continue;
    size_t k = i + 1;
    while (k < n && (hdr[k] == ' ' || hdr[k] == '\t' || hdr[k] == '\n' || hdr[k] == '\r'))
      k++;
    char w[SHOW_LEN + 160], b[SHOW_LEN];
    show_json(hdr + start, i - start, b, sizeof b);
    if (depth == 1 && k < n && hdr[k] == ':')
      snprintf(w, sizeof w, "tensor name '%s' holds U+0000, which a name "
               "cannot hold (it would read as the part before it)", b);
    else
      snprintf(w, sizeof w, "the string '%s' at byte %zu of the header holds "
               "U+0000, which dtorch cannot hold", b, start);
    return bad(p, NULL, w);
  }
  return DT_OK;
}

static dt_status parse_root(pctx *p, const cJSON *root) {
  if (!cJSON_IsObject(root)) return bad(p, NULL, "the header is not a JSON object");
  int count = cJSON_GetArraySize(root);
  dt_status st = check_unique(p, root, count);
  if (st != DT_OK) return st;
  p->out->tensors = calloc((size_t)count + 1, sizeof *p->out->tensors);
  if (!p->out->tensors)
    return core_error_set(DT_ERR_OUT_OF_MEMORY, "%s: out of host memory", p->fn);
  for (const cJSON *e = root->child; e && st == DT_OK; e = e->next) {
    if (!strcmp(e->string, "__metadata__")) {
      st = parse_metadata(p, e);
      continue;
    }
    st = parse_entry(p, e, p->out->n);
    if (p->out->tensors[p->out->n].name) p->out->n++;
  }
  return st == DT_OK ? check_tiling(p) : st;
}

dt_status core_st_parse_header(const char *hdr, size_t n, uint64_t file_size,
                               dt_safetensors_info *out, const char *fn,
                               const char *path) {
  memset(out, 0, sizeof *out);
  pctx p = {.fn = fn, .path = path, .out = out, .data_start = 8 + n,
            .data_len = file_size - 8 - n};
  const char *end = NULL;
  pthread_mutex_lock(&parse_lock);
  cJSON *root = cJSON_ParseWithLengthOpts(hdr, n, &end, 0);
  pthread_mutex_unlock(&parse_lock);
  if (!root) {
    char w[120];
    size_t at = end && end >= hdr && end <= hdr + n ? (size_t)(end - hdr) : 0;
    snprintf(w, sizeof w, "the header is not valid JSON (at byte %zu of %zu)",
             at, n);
    return bad(&p, NULL, w);
  }
  dt_status st = DT_OK;
  for (const char *c = end; c < hdr + n && st == DT_OK; c++)
    if (*c != ' ' && *c != '\t' && *c != '\n' && *c != '\r')
      st = bad(&p, NULL, "the header has bytes after its JSON object that are "
                         "not spaces");
  if (st == DT_OK) st = check_nul_escapes(&p, hdr, n);
  if (st == DT_OK) st = parse_root(&p, root);
  cJSON_Delete(root);
  if (st != DT_OK) core_st_info_clear(out);
  return st;
}

dt_status core_st_parse_bytes(const unsigned char *data, size_t size,
                              dt_safetensors_info *out, const char *fn,
                              const char *path) {
  memset(out, 0, sizeof *out);
  uint64_t n = 0; /* set when the check passes; -O3 cannot see that */
  dt_status st = core_st_check_prefix(data, size, size, &n, fn, path);
  if (st != DT_OK) return st;
  return core_st_parse_header((const char *)data + 8, (size_t)n, size, out, fn,
                              path);
}

int core_st_find(const dt_safetensors_info *info, const char *name) {
  for (int i = 0; i < info->n; i++)
    if (!strcmp(info->tensors[i].name, name)) return i;
  return -1;
}

/* ---- writing */
static char *int_list(const int64_t *v, int n, char *buf, size_t len) {
  size_t o = (size_t)snprintf(buf, len, "[");
  for (int i = 0; i < n && o < len; i++)
    o += (size_t)snprintf(buf + o, len - o, "%s%lld", i ? "," : "", (long long)v[i]);
  if (o < len) snprintf(buf + o, len - o, "]");
  return buf;
}

static bool add_entry(cJSON *root, const char *name, dt_dtype d,
                      const dt_shape *s, uint64_t at, uint64_t bytes) {
  cJSON *e = cJSON_CreateObject();
  if (!e) return false;
  char sh[DT_MAX_DIMS * 24 + 4], off[48];
  int64_t o[2] = {(int64_t)at, (int64_t)(at + bytes)};
  bool ok = cJSON_AddStringToObject(e, "dtype", core_st_dtype_str(d)) &&
            cJSON_AddRawToObject(e, "shape", int_list(s->dims, s->ndim, sh, sizeof sh)) &&
            cJSON_AddRawToObject(e, "data_offsets", int_list(o, 2, off, sizeof off));
  if (!ok) {
    cJSON_Delete(e);
    return false;
  }
  cJSON_AddItemToObject(root, name, e);
  return true;
}

dt_status core_st_write_header(int n, const char *const *names,
                               const dt_dtype *dtypes_, const dt_shape *shapes,
                               char **out, size_t *out_len,
                               uint64_t *data_bytes, const char *fn) {
  cJSON *root = cJSON_CreateObject();
  uint64_t at = 0;
  bool ok = root != NULL;
  for (int i = 0; i < n && ok; i++) {
    uint64_t bytes = 0;
    shape_bytes(&shapes[i], (unsigned)core_dtype_size(dtypes_[i]), &bytes);
    ok = add_entry(root, names[i], dtypes_[i], &shapes[i], at, bytes);
    at += bytes;
  }
  char *json = ok ? cJSON_PrintUnformatted(root) : NULL;
  cJSON_Delete(root);
  if (!json) return core_error_set(DT_ERR_OUT_OF_MEMORY, "%s: out of host memory "
                                   "for the header", fn);
  size_t len = strlen(json), total = (8 + len + 7) / 8 * 8;
  char *buf = malloc(total);
  if (!buf) {
    free(json);
    return core_error_set(DT_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  }
  uint64_t hn = total - 8;
  for (int i = 0; i < 8; i++) buf[i] = (char)(hn >> (8 * i) & 0xff);
  memcpy(buf + 8, json, len);
  memset(buf + 8 + len, ' ', total - 8 - len);
  free(json);
  *out = buf;
  *out_len = total;
  *data_bytes = at;
  return DT_OK;
}
