/* gguf_kv.c — the GGUF reader's metadata key-values (see gguf.h): each
 * pair's value read and checked (scalars decoded, strings and arrays of
 * strings registered for the arena, other arrays left in the file),
 * general.alignment, the sorted key index, and the typed getters that
 * check a value's type and range. */
#include "gguf_internal.h"

#include <stdlib.h>
#include <string.h>

/* ----------------------------------------------------- metadata values */

static const char *const type_names[DEMO_GGUF_TYPE_COUNT_] = {
    "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64"};

const char *demo_gguf_type_name(demo_gguf_type t) {
  return (unsigned)t < DEMO_GGUF_TYPE_COUNT_ ? type_names[t] : "invalid";
}

/* Size of a fixed-size value type, 0 for string/array/invalid. */
static int type_size(uint32_t t) {
  static const int sz[DEMO_GGUF_TYPE_COUNT_] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
  return t < DEMO_GGUF_TYPE_COUNT_ ? sz[t] : 0;
}

static bool type_is_int(demo_gguf_type t) {
  return t == DEMO_GGUF_U8 || t == DEMO_GGUF_I8 || t == DEMO_GGUF_U16 || t == DEMO_GGUF_I16 ||
         t == DEMO_GGUF_U32 || t == DEMO_GGUF_I32 || t == DEMO_GGUF_U64 || t == DEMO_GGUF_I64;
}
static bool type_is_signed(demo_gguf_type t) {
  return t == DEMO_GGUF_I8 || t == DEMO_GGUF_I16 || t == DEMO_GGUF_I32 || t == DEMO_GGUF_I64;
}

/* Decodes one fixed-size element at p into the kv's union fields. */
static void decode_scalar(demo_gguf_type t, const uint8_t *p, kv *out) {
  uint64_t u = gguf_le(p, type_size(t));
  switch (t) {
    case DEMO_GGUF_I8: out->v.i = (int8_t)(uint8_t)u; break;
    case DEMO_GGUF_I16: out->v.i = (int16_t)(uint16_t)u; break;
    case DEMO_GGUF_I32: out->v.i = (int32_t)(uint32_t)u; break;
    case DEMO_GGUF_I64: out->v.i = (int64_t)u; break;
    case DEMO_GGUF_F32: {
      uint32_t w = (uint32_t)u;
      float f;
      memcpy(&f, &w, 4);
      out->v.f = f;
      break;
    }
    case DEMO_GGUF_F64: memcpy(&out->v.f, &u, 8); break;
    case DEMO_GGUF_BOOL: out->v.b = u != 0; break;
    default: out->v.u = u; break;
  }
}

/* Reads the value of kv `k` (its key already read). */
static clpa_status rd_value(demo_gguf *g, rd *r, kv *k, uint64_t *fix_cap) {
  char what[200];
  uint32_t t;
  clpa_status st;
  snprintf(what, sizeof what, "type of metadata '%.100s'", k->key.s);
  if ((st = gguf_rd_u32(r, &t, what))) return st;
  if (t >= DEMO_GGUF_TYPE_COUNT_)
    return demo_fail(CLPA_ERR_INVALID_ARG, "metadata '%.100s': unknown value type %" PRIu32, k->key.s, t);
  k->type = (demo_gguf_type)t;
  snprintf(what, sizeof what, "value of metadata '%.100s'", k->key.s);
  if (t == DEMO_GGUF_STRING) {
    if ((st = gguf_rd_str(r, &k->v.s, what))) return st;
    return gguf_add_fixup(g, &k->v.s, fix_cap);
  }
  if (t != DEMO_GGUF_ARRAY) {
    if ((st = gguf_need(r, (uint64_t)type_size(t), what))) return st;
    decode_scalar(k->type, r->p + r->pos, k);
    r->pos += (uint64_t)type_size(t);
    return CLPA_OK;
  }
  uint32_t et;
  uint64_t n;
  snprintf(what, sizeof what, "element type of array '%.100s'", k->key.s);
  if ((st = gguf_rd_u32(r, &et, what))) return st;
  if (et == DEMO_GGUF_ARRAY)
    return demo_fail(CLPA_ERR_UNSUPPORTED, "metadata '%.100s': arrays of arrays are not supported",
                     k->key.s);
  if (et >= DEMO_GGUF_TYPE_COUNT_)
    return demo_fail(CLPA_ERR_INVALID_ARG, "metadata '%.100s': unknown array element type %" PRIu32,
                     k->key.s, et);
  snprintf(what, sizeof what, "length of array '%.100s'", k->key.s);
  if ((st = gguf_rd_uint(r, 8, &n, what))) return st;
  uint64_t left = r->size - r->pos;
  /* each element needs at least its size (a string at least its u64 length) */
  uint64_t min_elem = et == DEMO_GGUF_STRING ? 8 : (uint64_t)type_size(et);
  if (n > left / min_elem)
    return demo_fail(CLPA_ERR_INVALID_ARG,
                     "metadata '%.100s': array of %" PRIu64 " %s needs at least %" PRIu64
                     " bytes per element, more than the %" PRIu64 " left in the file",
                     k->key.s, n, type_names[et], min_elem, left);
  k->v.a.type = (demo_gguf_type)et;
  k->v.a.n = n;
  if (et != DEMO_GGUF_STRING) {
    k->v.a.raw = r->p + r->pos;
    r->pos += n * min_elem;
    return CLPA_OK;
  }
  demo_gguf_str *strs = calloc(n ? (size_t)n : 1, sizeof *strs);
  if (!strs) return demo_fail(CLPA_ERR_OUT_OF_MEMORY, "out of memory (array '%.100s')", k->key.s);
  k->v.a.strs = strs;
  for (uint64_t i = 0; i < n; i++) {
    snprintf(what, sizeof what, "string %" PRIu64 " of array '%.100s'", i, k->key.s);
    if ((st = gguf_rd_str(r, &strs[i], what))) return st;
    if ((st = gguf_add_fixup(g, &strs[i], fix_cap))) return st;
  }
  return CLPA_OK;
}

/* ------------------------------------------------------------ the pairs */

clpa_status gguf_parse_kvs(demo_gguf *g, rd *r, uint64_t *fix_cap) {
  clpa_status st;
  g->kvs = calloc((size_t)(g->n_kv ? g->n_kv : 1), sizeof *g->kvs);
  if (!g->kvs) return demo_fail(CLPA_ERR_OUT_OF_MEMORY, "out of memory (%" PRIu64 " pairs)", g->n_kv);
  for (uint64_t i = 0; i < g->n_kv; i++) {
    kv *k = &g->kvs[i];
    char what[64];
    snprintf(what, sizeof what, "key of metadata pair %" PRIu64, i);
    if ((st = gguf_rd_str(r, &k->key, what))) return st;
    if (k->key.len == 0) return demo_fail(CLPA_ERR_INVALID_ARG, "metadata pair %" PRIu64 " has an empty key", i);
    if (memchr(k->key.s, 0, k->key.len))
      return demo_fail(CLPA_ERR_INVALID_ARG, "metadata pair %" PRIu64 ": key holds a NUL byte", i);
    if ((st = gguf_add_fixup(g, &k->key, fix_cap))) return st;
    /* messages print the key with %s before the arena exists: make a
     * bounded copy for them */
    char key[101];
    size_t kl = k->key.len < 100 ? k->key.len : 100;
    memcpy(key, k->key.s, kl);
    key[kl] = '\0';
    demo_gguf_str saved = k->key;
    k->key.s = key;
    st = rd_value(g, r, k, fix_cap);
    k->key = saved;
    if (st) return st;
  }
  return CLPA_OK;
}

clpa_status gguf_parse_alignment(demo_gguf *g) {
  g->alignment = GGUF_DEFAULT_ALIGNMENT;
  for (uint64_t i = 0; i < g->n_kv; i++) {
    const kv *k = &g->kvs[i];
    if (k->key.len != 17 || memcmp(k->key.s, "general.alignment", 17)) continue;
    if (!type_is_int(k->type) || type_is_signed(k->type))
      return demo_fail(CLPA_ERR_INVALID_ARG, "general.alignment is a %s, not an unsigned integer",
                       type_names[k->type]);
    uint64_t a = k->v.u;
    if (a == 0 || (a & (a - 1)) || a > (1u << 30))
      return demo_fail(CLPA_ERR_INVALID_ARG, "general.alignment %" PRIu64 " is not a power of two in [1, 2^30]", a);
    g->alignment = a;
  }
  return CLPA_OK;
}

/* ------------------------------------------------------- the key index */

static _Thread_local const demo_gguf *sort_g; /* qsort has no context argument */

static int cmp_name(const char *a, size_t al, const char *b, size_t bl) {
  int c = memcmp(a, b, al < bl ? al : bl);
  return c ? c : (al > bl) - (al < bl);
}
static int cmp_kv_idx(const void *a, const void *b) {
  const kv *x = &sort_g->kvs[*(const uint32_t *)a], *y = &sort_g->kvs[*(const uint32_t *)b];
  return cmp_name(x->key.s, x->key.len, y->key.s, y->key.len);
}

/* Sorted index of the keys; equal neighbours are duplicates. Runs after
 * the arena copy. */
clpa_status gguf_index_kvs(demo_gguf *g) {
  g->kv_sorted = malloc((size_t)(g->n_kv ? g->n_kv : 1) * sizeof(uint32_t));
  if (!g->kv_sorted) return demo_fail(CLPA_ERR_OUT_OF_MEMORY, "out of memory (index)");
  for (uint64_t i = 0; i < g->n_kv; i++) g->kv_sorted[i] = (uint32_t)i;
  sort_g = g;
  qsort(g->kv_sorted, (size_t)g->n_kv, sizeof(uint32_t), cmp_kv_idx);
  sort_g = NULL;
  for (uint64_t i = 1; i < g->n_kv; i++) {
    const kv *a = &g->kvs[g->kv_sorted[i - 1]], *b = &g->kvs[g->kv_sorted[i]];
    if (!cmp_name(a->key.s, a->key.len, b->key.s, b->key.len))
      return demo_fail(CLPA_ERR_INVALID_ARG, "duplicate metadata key '%.100s' (pairs %" PRIu32 " and %" PRIu32 ")",
                       a->key.s, g->kv_sorted[i - 1], g->kv_sorted[i]);
  }
  return CLPA_OK;
}

uint64_t demo_gguf_kv_count(const demo_gguf *g) { return g->n_kv; }
const char *demo_gguf_kv_key(const demo_gguf *g, uint64_t i) {
  return i < g->n_kv ? g->kvs[i].key.s : NULL;
}
demo_gguf_type demo_gguf_kv_type(const demo_gguf *g, uint64_t i) {
  return i < g->n_kv ? g->kvs[i].type : DEMO_GGUF_TYPE_COUNT_;
}

static const kv *find_kv(const demo_gguf *g, const char *key) {
  size_t kl = strlen(key);
  uint64_t lo = 0, hi = g->n_kv;
  while (lo < hi) {
    uint64_t mid = lo + (hi - lo) / 2;
    const kv *k = &g->kvs[g->kv_sorted[mid]];
    int c = cmp_name(k->key.s, k->key.len, key, kl);
    if (!c) return k;
    if (c < 0) lo = mid + 1;
    else hi = mid;
  }
  return NULL;
}

/* The common head of every getter: finds key, handles `found`. Returns
 * CLPA_OK with *k NULL for an optional missing key. */
static clpa_status lookup(const demo_gguf *g, const char *key, bool *found, const kv **k) {
  if (!g || !key) return demo_fail(CLPA_ERR_INVALID_ARG, "demo_gguf_get: NULL argument");
  *k = find_kv(g, key);
  if (found) *found = *k != NULL;
  if (!*k && !found) return demo_fail(CLPA_ERR_INVALID_ARG, "missing metadata key '%s'", key);
  return CLPA_OK;
}

static clpa_status wrong_type(const kv *k, const char *want) {
  return demo_fail(CLPA_ERR_INVALID_ARG, "metadata '%s' is a%s %s, expected %s", k->key.s,
                   k->type == DEMO_GGUF_U8 || k->type == DEMO_GGUF_I8 || k->type == DEMO_GGUF_I16 ||
                      k->type == DEMO_GGUF_I32 || k->type == DEMO_GGUF_I64 || k->type == DEMO_GGUF_ARRAY
                  ? "n"
                  : "",
                   type_names[k->type], want);
}

/* Any integer value into [lo, hi] (as int64 or uint64 depending on sign). */
static clpa_status get_int(const demo_gguf *g, const char *key, bool *found, int64_t lo,
                           uint64_t hi, const char *want, uint64_t *u_out, int64_t *i_out) {
  const kv *k;
  clpa_status st = lookup(g, key, found, &k);
  if (st || !k) return st;
  if (!type_is_int(k->type)) return wrong_type(k, want);
  if (type_is_signed(k->type)) {
    if (k->v.i < lo || (k->v.i >= 0 && (uint64_t)k->v.i > hi))
      return demo_fail(CLPA_ERR_INVALID_ARG, "metadata '%s' = %" PRId64 " does not fit in %s", key, k->v.i, want);
    if (u_out) *u_out = (uint64_t)k->v.i;
    if (i_out) *i_out = k->v.i;
  } else {
    if (k->v.u > hi)
      return demo_fail(CLPA_ERR_INVALID_ARG, "metadata '%s' = %" PRIu64 " does not fit in %s", key, k->v.u, want);
    if (u_out) *u_out = k->v.u;
    if (i_out) *i_out = (int64_t)k->v.u;
  }
  return CLPA_OK;
}

clpa_status demo_gguf_get_u32(const demo_gguf *g, const char *key, uint32_t *out, bool *found) {
  uint64_t v = 0;
  bool f = true;
  clpa_status st = get_int(g, key, found ? &f : NULL, 0, UINT32_MAX, "u32", &v, NULL);
  if (found) *found = f;
  if (!st && f) *out = (uint32_t)v;
  return st;
}
clpa_status demo_gguf_get_i32(const demo_gguf *g, const char *key, int32_t *out, bool *found) {
  int64_t v = 0;
  bool f = true;
  clpa_status st = get_int(g, key, found ? &f : NULL, INT32_MIN, INT32_MAX, "i32", NULL, &v);
  if (found) *found = f;
  if (!st && f) *out = (int32_t)v;
  return st;
}
clpa_status demo_gguf_get_u64(const demo_gguf *g, const char *key, uint64_t *out, bool *found) {
  uint64_t v = 0;
  bool f = true;
  clpa_status st = get_int(g, key, found ? &f : NULL, 0, UINT64_MAX, "u64", &v, NULL);
  if (found) *found = f;
  if (!st && f) *out = v;
  return st;
}
clpa_status demo_gguf_get_i64(const demo_gguf *g, const char *key, int64_t *out, bool *found) {
  int64_t v = 0;
  bool f = true;
  clpa_status st = get_int(g, key, found ? &f : NULL, INT64_MIN, INT64_MAX, "i64", NULL, &v);
  if (found) *found = f;
  if (!st && f) *out = v;
  return st;
}

clpa_status demo_gguf_get_f64(const demo_gguf *g, const char *key, double *out, bool *found) {
  const kv *k;
  clpa_status st = lookup(g, key, found, &k);
  if (st || !k) return st;
  if (k->type == DEMO_GGUF_F32 || k->type == DEMO_GGUF_F64) *out = k->v.f;
  else if (type_is_int(k->type)) *out = type_is_signed(k->type) ? (double)k->v.i : (double)k->v.u;
  else return wrong_type(k, "a number");
  return CLPA_OK;
}
clpa_status demo_gguf_get_f32(const demo_gguf *g, const char *key, float *out, bool *found) {
  double d = 0;
  bool f = true;
  clpa_status st = demo_gguf_get_f64(g, key, &d, found ? &f : NULL);
  if (found) *found = f;
  if (!st && f) *out = (float)d;
  return st;
}
clpa_status demo_gguf_get_bool(const demo_gguf *g, const char *key, bool *out, bool *found) {
  const kv *k;
  clpa_status st = lookup(g, key, found, &k);
  if (st || !k) return st;
  if (k->type != DEMO_GGUF_BOOL) return wrong_type(k, "bool");
  *out = k->v.b;
  return CLPA_OK;
}
clpa_status demo_gguf_get_str(const demo_gguf *g, const char *key, demo_gguf_str *out, bool *found) {
  const kv *k;
  clpa_status st = lookup(g, key, found, &k);
  if (st || !k) return st;
  if (k->type != DEMO_GGUF_STRING) return wrong_type(k, "string");
  /* GGUF strings are length-prefixed, so one may hold a NUL; callers read
   * s as a C string, which would end there ("llama\0x" read as "llama"). */
  const char *nul = memchr(k->v.s.s, 0, k->v.s.len);
  if (nul)
    return demo_fail(CLPA_ERR_INVALID_ARG, "metadata '%s' holds a NUL byte (byte %zu of %zu)", key,
                     (size_t)(nul - k->v.s.s), k->v.s.len);
  *out = k->v.s;
  return CLPA_OK;
}
clpa_status demo_gguf_get_arr(const demo_gguf *g, const char *key, demo_gguf_type elem_type,
                              demo_gguf_arr *out, bool *found) {
  const kv *k;
  clpa_status st = lookup(g, key, found, &k);
  if (st || !k) return st;
  if (k->type != DEMO_GGUF_ARRAY) return wrong_type(k, "array");
  if (elem_type != DEMO_GGUF_TYPE_COUNT_ && k->v.a.type != elem_type)
    return demo_fail(CLPA_ERR_INVALID_ARG, "metadata '%s' is an array of %s, expected an array of %s", key,
                     type_names[k->v.a.type], demo_gguf_type_name(elem_type));
  *out = k->v.a;
  return CLPA_OK;
}

int64_t demo_gguf_arr_i64(const demo_gguf_arr *a, uint64_t i) {
  if (!a || i >= a->n || !a->raw) return 0;
  kv tmp;
  decode_scalar(a->type, (const uint8_t *)a->raw + i * (uint64_t)type_size(a->type), &tmp);
  if (a->type == DEMO_GGUF_F32 || a->type == DEMO_GGUF_F64) {
    /* nearest, saturated */
    double d = tmp.v.f;
    if (!(d == d)) return 0;
    if (d >= 9.2233720368547758e18) return INT64_MAX;
    if (d <= -9.2233720368547758e18) return INT64_MIN;
    /* ties away from zero; not (int64_t)(d + 0.5), whose sum rounds first:
     * 0.49999999999999994 gave 1, and an odd integer past 2^52 the even one
     * above it */
    int64_t t = (int64_t)d;      /* toward zero: |d| < 2^63 here */
    double frac = d - (double)t; /* exact */
    return t + (frac >= 0.5) - (frac <= -0.5);
  }
  if (a->type == DEMO_GGUF_BOOL) return tmp.v.b;
  return type_is_signed(a->type) ? tmp.v.i : (int64_t)tmp.v.u;
}
double demo_gguf_arr_f64(const demo_gguf_arr *a, uint64_t i) {
  if (!a || i >= a->n || !a->raw) return 0;
  kv tmp;
  decode_scalar(a->type, (const uint8_t *)a->raw + i * (uint64_t)type_size(a->type), &tmp);
  if (a->type == DEMO_GGUF_F32 || a->type == DEMO_GGUF_F64) return tmp.v.f;
  if (a->type == DEMO_GGUF_BOOL) return tmp.v.b;
  return type_is_signed(a->type) ? (double)tmp.v.i : (double)tmp.v.u;
}
float demo_gguf_arr_f32(const demo_gguf_arr *a, uint64_t i) { return (float)demo_gguf_arr_f64(a, i); }
