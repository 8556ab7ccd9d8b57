/* gguf.c — the GGUF reader (see gguf.h). One forward pass over the bytes
 * with a bounds-checked cursor validates and records everything; strings
 * are then copied, NUL-terminated, into one arena; keys and tensor names
 * get sorted indexes (duplicates found as equal neighbours, lookups by
 * binary search). */
#include "gguf.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__unix__) || defined(__APPLE__)
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#define DEMO_GGUF_MMAP 1
#endif

#define GGUF_HEADER_SIZE 24u /* magic, version, two u64 counts */
#define GGUF_DEFAULT_ALIGNMENT 32u
#define GGUF_MAX_DIMS 4u

/* ------------------------------------------------------------ the object */

typedef struct kv {
  demo_gguf_str key;
  demo_gguf_type type;
  union {
    uint64_t u;
    int64_t i;
    double f;
    bool b;
    demo_gguf_str s;
    demo_gguf_arr a;
  } v;
} kv;

struct demo_gguf {
  const uint8_t *bytes; /* the file */
  uint64_t size;
  void *owned;  /* malloc'd copy (fread), or NULL */
  void *mapped; /* mmap'd region, or NULL */
  uint32_t version;
  uint64_t alignment;
  uint64_t data_start;
  uint64_t n_kv, n_tensors;
  kv *kvs;
  demo_gguf_tensor *tensors;
  uint32_t *kv_sorted, *tensor_sorted; /* indexes sorted by name */
  demo_gguf_str *tensor_names; /* [n_tensors], until the arena copy */
  demo_gguf_str **str_fixups; /* every string to copy into the arena */
  uint64_t n_fixups;
  char *arena;
};

/* --------------------------------------------------------- the cursor */

typedef struct rd {
  const uint8_t *p;
  uint64_t size, pos;
} rd;

static uint64_t le(const uint8_t *p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; i--) v = (v << 8) | p[i];
  return v;
}

/* Every read goes through need(): what names the field for the message. */
static clpa_status need(const rd *r, uint64_t n, const char *what) {
  if (n > r->size - r->pos)
    return demo_fail(CLPA_ERR_INVALID_ARG,
                     "truncated: %s at offset %" PRIu64 " needs %" PRIu64 " bytes, the file has %" PRIu64
                     " left (size %" PRIu64 ")",
                     what, r->pos, n, r->size - r->pos, r->size);
  return CLPA_OK;
}

static clpa_status rd_uint(rd *r, int n, uint64_t *out, const char *what) {
  clpa_status st = need(r, (uint64_t)n, what);
  if (st) return st;
  *out = le(r->p + r->pos, n);
  r->pos += (uint64_t)n;
  return CLPA_OK;
}

static clpa_status rd_u32(rd *r, uint32_t *out, const char *what) {
  uint64_t v;
  clpa_status st = rd_uint(r, 4, &v, what);
  if (!st) *out = (uint32_t)v;
  return st;
}

/* A string: the pointer into the file for now (fixed up to the arena). */
static clpa_status rd_str(rd *r, demo_gguf_str *out, const char *what) {
  char w[160];
  uint64_t len;
  snprintf(w, sizeof w, "length of %s", what);
  clpa_status st = rd_uint(r, 8, &len, w);
  if (st) return st;
  if (len > r->size - r->pos)
    return demo_fail(CLPA_ERR_INVALID_ARG,
                     "%s at offset %" PRIu64 ": length %" PRIu64 " runs past the end of the file (%" PRIu64
                     " bytes left)",
                     what, r->pos - 8, len, r->size - r->pos);
  out->s = (const char *)(r->p + r->pos);
  out->len = (size_t)len;
  r->pos += len;
  return CLPA_OK;
}

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
  uint64_t u = le(p, type_size(t));
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

/* Registers a string for the arena copy. */
static clpa_status add_fixup(demo_gguf *g, demo_gguf_str *s, uint64_t *cap) {
  if (g->n_fixups == *cap) {
    uint64_t nc = *cap ? *cap * 2 : 256;
    void *p = realloc(g->str_fixups, (size_t)nc * sizeof *g->str_fixups);
    if (!p) return demo_fail(CLPA_ERR_OUT_OF_MEMORY, "out of memory (string index)");
    g->str_fixups = p;
    *cap = nc;
  }
  g->str_fixups[g->n_fixups++] = s;
  return CLPA_OK;
}

/* Reads the value of kv `k` (its key already read). */
static clpa_status rd_value(demo_gguf *g, rd *r, kv *k, uint64_t *fix_cap) {
  char what[200];
  uint32_t t;
  clpa_status st;
  snprintf(what, sizeof what, "type of metadata '%.100s'", k->key.s);
  if ((st = rd_u32(r, &t, what))) return st;
  if (t >= DEMO_GGUF_TYPE_COUNT_)
    return demo_fail(CLPA_ERR_INVALID_ARG, "metadata '%.100s': unknown value type %" PRIu32, k->key.s, t);
  k->type = (demo_gguf_type)t;
  snprintf(what, sizeof what, "value of metadata '%.100s'", k->key.s);
  if (t == DEMO_GGUF_STRING) {
    if ((st = rd_str(r, &k->v.s, what))) return st;
    return add_fixup(g, &k->v.s, fix_cap);
  }
  if (t != DEMO_GGUF_ARRAY) {
    if ((st = need(r, (uint64_t)type_size(t), what))) return st;
    decode_scalar(k->type, r->p + r->pos, k);
    r->pos += (uint64_t)type_size(t);
    return CLPA_OK;
  }
  uint32_t et;
  uint64_t n;
  snprintf(what, sizeof what, "element type of array '%.100s'", k->key.s);
  if ((st = rd_u32(r, &et, what))) return st;
  if (et == DEMO_GGUF_ARRAY)
    return demo_fail(CLPA_ERR_UNSUPPORTED, "metadata '%.100s': arrays of arrays are not supported",
                     k->key.s);
  if (et >= DEMO_GGUF_TYPE_COUNT_)
    return demo_fail(CLPA_ERR_INVALID_ARG, "metadata '%.100s': unknown array element type %" PRIu32,
                     k->key.s, et);
  snprintf(what, sizeof what, "length of array '%.100s'", k->key.s);
  if ((st = rd_uint(r, 8, &n, what))) return st;
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
    if ((st = rd_str(r, &strs[i], what))) return st;
    if ((st = add_fixup(g, &strs[i], fix_cap))) return st;
  }
  return CLPA_OK;
}

/* ------------------------------------------------------------- ggml types */

typedef struct ggml_type_info {
  const char *name;
  uint32_t block; /* elements per block */
  uint32_t bytes; /* bytes per block */
} ggml_type_info;

/* ggml's type numbers (ggml.h) with their block layout (ggml-common.h);
 * gaps are types ggml removed. */
static const ggml_type_info ggml_types[] = {
    [0] = {"f32", 1, 4},        [1] = {"f16", 1, 2},         [2] = {"q4_0", 32, 18},
    [3] = {"q4_1", 32, 20},     [6] = {"q5_0", 32, 22},      [7] = {"q5_1", 32, 24},
    [8] = {"q8_0", 32, 34},     [9] = {"q8_1", 32, 36},      [10] = {"q2_K", 256, 84},
    [11] = {"q3_K", 256, 110},  [12] = {"q4_K", 256, 144},   [13] = {"q5_K", 256, 176},
    [14] = {"q6_K", 256, 210},  [15] = {"q8_K", 256, 292},   [16] = {"iq2_xxs", 256, 66},
    [17] = {"iq2_xs", 256, 74}, [18] = {"iq3_xxs", 256, 98}, [19] = {"iq1_s", 256, 50},
    [20] = {"iq4_nl", 32, 18},  [21] = {"iq3_s", 256, 110},  [22] = {"iq2_s", 256, 82},
    [23] = {"iq4_xs", 256, 136}, [24] = {"i8", 1, 1},        [25] = {"i16", 1, 2},
    [26] = {"i32", 1, 4},       [27] = {"i64", 1, 8},        [28] = {"f64", 1, 8},
    [29] = {"iq1_m", 256, 56},  [30] = {"bf16", 1, 2},       [34] = {"tq1_0", 256, 54},
    [35] = {"tq2_0", 256, 66},  [39] = {"mxfp4", 32, 17},
};
#define N_GGML_TYPES (sizeof ggml_types / sizeof ggml_types[0])

const char *demo_gguf_ggml_type_name(uint32_t type) {
  return type < N_GGML_TYPES ? ggml_types[type].name : NULL;
}

static bool convertible(uint32_t type) {
  return type == DEMO_GGML_F32 || type == DEMO_GGML_F16 || type == DEMO_GGML_BF16 ||
         demo_quant_supported(type);
}

static clpa_status not_convertible(const demo_gguf_tensor *t) {
  return demo_fail(CLPA_ERR_UNSUPPORTED, "tensor '%s' has type %s; the demo reads " DEMO_GGUF_TYPE_NAMES, t->name,
                   demo_gguf_ggml_type_name(t->type));
}

/* --------------------------------------------------------- tensor infos */

static clpa_status rd_tensor_info(demo_gguf *g, rd *r, uint64_t i, uint64_t *fix_cap) {
  demo_gguf_tensor *t = &g->tensors[i];
  demo_gguf_str name;
  char what[200];
  clpa_status st;
  snprintf(what, sizeof what, "name of tensor %" PRIu64, i);
  if ((st = rd_str(r, &name, what))) return st;
  if (name.len == 0) return demo_fail(CLPA_ERR_INVALID_ARG, "tensor %" PRIu64 " has an empty name", i);
  if (memchr(name.s, 0, name.len))
    return demo_fail(CLPA_ERR_INVALID_ARG, "tensor %" PRIu64 ": name holds a NUL byte", i);
  /* the name is printed below before the arena exists: bound it by length */
  int nl = name.len > 100 ? 100 : (int)name.len;
  snprintf(what, sizeof what, "n_dims of tensor '%.*s'", nl, name.s);
  if ((st = rd_u32(r, &t->n_dims, what))) return st;
  if (t->n_dims == 0 || t->n_dims > GGUF_MAX_DIMS)
    return demo_fail(CLPA_ERR_INVALID_ARG, "tensor '%.*s': n_dims %" PRIu32 " is not in [1, %u]", nl,
                     name.s, t->n_dims, GGUF_MAX_DIMS);
  uint64_t n_elems = 1;
  for (uint32_t d = 0; d < GGUF_MAX_DIMS; d++) t->ne[d] = 1;
  for (uint32_t d = 0; d < t->n_dims; d++) {
    uint64_t ne;
    snprintf(what, sizeof what, "ne[%" PRIu32 "] of tensor '%.*s'", d, nl, name.s);
    if ((st = rd_uint(r, 8, &ne, what))) return st;
    if (ne > (uint64_t)INT64_MAX || (ne && n_elems > (uint64_t)INT64_MAX / ne))
      return demo_fail(CLPA_ERR_INVALID_ARG,
                       "tensor '%.*s': ne[%" PRIu32 "] = %" PRIu64 " makes the element count overflow",
                       nl, name.s, d, ne);
    t->ne[d] = (int64_t)ne;
    n_elems *= ne;
  }
  t->n_elems = (int64_t)n_elems;
  snprintf(what, sizeof what, "type of tensor '%.*s'", nl, name.s);
  if ((st = rd_u32(r, &t->type, what))) return st;
  if (!demo_gguf_ggml_type_name(t->type))
    return demo_fail(CLPA_ERR_INVALID_ARG, "tensor '%.*s': unknown ggml type %" PRIu32, nl, name.s,
                     t->type);
  const ggml_type_info *ti = &ggml_types[t->type];
  if (t->ne[0] % ti->block)
    return demo_fail(CLPA_ERR_INVALID_ARG,
                     "tensor '%.*s': ne[0] = %" PRId64 " is not a multiple of %s's block of %" PRIu32,
                     nl, name.s, t->ne[0], ti->name, ti->block);
  /* rows x (ne[0] / block) x bytes = (n_elems / block) x bytes, ne[0] being
   * whole blocks; it can pass 2^64 (2^62 f32s), and a wrapped size would
   * pass the placement check */
  if (n_elems / ti->block > UINT64_MAX / ti->bytes)
    return demo_fail(CLPA_ERR_INVALID_ARG,
                     "tensor '%.*s': %" PRIu64 " elements of %s take more than 2^64 bytes", nl, name.s,
                     n_elems, ti->name);
  t->size = n_elems / ti->block * ti->bytes;
  snprintf(what, sizeof what, "offset of tensor '%.*s'", nl, name.s);
  if ((st = rd_uint(r, 8, &t->offset, what))) return st;
  g->tensor_names[i] = name;
  return add_fixup(g, &g->tensor_names[i], fix_cap);
}

/* ----------------------------------------------------------- sorting */

static _Thread_local const demo_gguf *sort_g; /* qsort has no context argument */

static int cmp_name(const char *a, size_t al, const char *b, size_t bl) {
  int c = memcmp(a, b, al < bl ? al : bl);
  return c ? c : (al > bl) - (al < bl);
}
static int cmp_kv_idx(const void *a, const void *b) {
  const kv *x = &sort_g->kvs[*(const uint32_t *)a], *y = &sort_g->kvs[*(const uint32_t *)b];
  return cmp_name(x->key.s, x->key.len, y->key.s, y->key.len);
}
static int cmp_tensor_idx(const void *a, const void *b) {
  const demo_gguf_tensor *x = &sort_g->tensors[*(const uint32_t *)a];
  const demo_gguf_tensor *y = &sort_g->tensors[*(const uint32_t *)b];
  return strcmp(x->name, y->name);
}

/* Sorted indexes of keys and names; equal neighbours are duplicates. Runs
 * after the arena copy (names NUL-terminated). */
static clpa_status build_indexes(demo_gguf *g) {
  g->kv_sorted = malloc((size_t)(g->n_kv ? g->n_kv : 1) * sizeof(uint32_t));
  g->tensor_sorted = malloc((size_t)(g->n_tensors ? g->n_tensors : 1) * sizeof(uint32_t));
  if (!g->kv_sorted || !g->tensor_sorted) return demo_fail(CLPA_ERR_OUT_OF_MEMORY, "out of memory (index)");
  for (uint64_t i = 0; i < g->n_kv; i++) g->kv_sorted[i] = (uint32_t)i;
  for (uint64_t i = 0; i < g->n_tensors; i++) g->tensor_sorted[i] = (uint32_t)i;
  sort_g = g;
  qsort(g->kv_sorted, (size_t)g->n_kv, sizeof(uint32_t), cmp_kv_idx);
  qsort(g->tensor_sorted, (size_t)g->n_tensors, sizeof(uint32_t), cmp_tensor_idx);
  sort_g = NULL;
  for (uint64_t i = 1; i < g->n_kv; i++) {
    const kv *a = &g->kvs[g->kv_sorted[i - 1]], *b = &g->kvs[g->kv_sorted[i]];
    if (!cmp_name(a->key.s, a->key.len, b->key.s, b->key.len))
      return demo_fail(CLPA_ERR_INVALID_ARG, "duplicate metadata key '%.100s' (pairs %" PRIu32 " and %" PRIu32 ")",
                       a->key.s, g->kv_sorted[i - 1], g->kv_sorted[i]);
  }
  for (uint64_t i = 1; i < g->n_tensors; i++) {
    const demo_gguf_tensor *a = &g->tensors[g->tensor_sorted[i - 1]];
    const demo_gguf_tensor *b = &g->tensors[g->tensor_sorted[i]];
    if (!strcmp(a->name, b->name))
      return demo_fail(CLPA_ERR_INVALID_ARG, "duplicate tensor name '%.100s' (tensors %" PRIu32 " and %" PRIu32 ")",
                       a->name, g->tensor_sorted[i - 1], g->tensor_sorted[i]);
  }
  return CLPA_OK;
}

/* Copies every registered string into one arena, NUL-terminated. */
static clpa_status build_arena(demo_gguf *g) {
  uint64_t total = 0;
  for (uint64_t i = 0; i < g->n_fixups; i++) total += g->str_fixups[i]->len + 1;
  g->arena = malloc((size_t)(total ? total : 1));
  if (!g->arena) return demo_fail(CLPA_ERR_OUT_OF_MEMORY, "out of memory (%" PRIu64 " bytes of strings)", total);
  char *p = g->arena;
  for (uint64_t i = 0; i < g->n_fixups; i++) {
    demo_gguf_str *s = g->str_fixups[i];
    memcpy(p, s->s, s->len);
    p[s->len] = '\0';
    s->s = p;
    p += s->len + 1;
  }
  free(g->str_fixups);
  g->str_fixups = NULL;
  return CLPA_OK;
}

/* ----------------------------------------------------------- the parse */

static clpa_status parse_header(demo_gguf *g, rd *r) {
  clpa_status st;
  uint32_t magic;
  if (r->size < GGUF_HEADER_SIZE)
    return demo_fail(CLPA_ERR_INVALID_ARG,
                     "truncated: the file is %" PRIu64 " bytes, shorter than the %u-byte GGUF header",
                     r->size, GGUF_HEADER_SIZE);
  if ((st = rd_u32(r, &magic, "magic"))) return st;
  if (memcmp(r->p, "GGUF", 4))
    return demo_fail(CLPA_ERR_INVALID_ARG,
                     "bad magic: the file starts with %02x %02x %02x %02x, not \"GGUF\" (47 47 55 46)",
                     r->p[0], r->p[1], r->p[2], r->p[3]);
  if ((st = rd_u32(r, &g->version, "version"))) return st;
  if (g->version != 2 && g->version != 3)
    return demo_fail(CLPA_ERR_UNSUPPORTED, "GGUF version %" PRIu32 " is not supported (only 2 and 3)",
                     g->version);
  if ((st = rd_uint(r, 8, &g->n_tensors, "tensor count"))) return st;
  if ((st = rd_uint(r, 8, &g->n_kv, "metadata count"))) return st;
  /* a pair needs >= 8 (key length) + 1 (key) + 4 (type) + 1 bytes, a tensor
   * info >= 8 + 1 + 4 + 8 + 4 + 8: checked now, so nothing huge is allocated */
  uint64_t left = r->size - r->pos;
  if (g->n_kv > left / 14 || g->n_kv >= UINT32_MAX)
    return demo_fail(CLPA_ERR_INVALID_ARG,
                     "metadata count %" PRIu64 " is more than the %" PRIu64 " bytes after the header can hold",
                     g->n_kv, left);
  if (g->n_tensors > left / 33 || g->n_tensors >= UINT32_MAX)
    return demo_fail(CLPA_ERR_INVALID_ARG,
                     "tensor count %" PRIu64 " is more than the %" PRIu64 " bytes after the header can hold",
                     g->n_tensors, left);
  return CLPA_OK;
}

static clpa_status parse_kvs(demo_gguf *g, rd *r, uint64_t *fix_cap) {
  clpa_status st;
  g->kvs = calloc((size_t)(g->n_kv ? g->n_kv : 1), sizeof *g->kvs);
  if (!g->kvs) return demo_fail(CLPA_ERR_OUT_OF_MEMORY, "out of memory (%" PRIu64 " pairs)", g->n_kv);
  for (uint64_t i = 0; i < g->n_kv; i++) {
    kv *k = &g->kvs[i];
    char what[64];
    snprintf(what, sizeof what, "key of metadata pair %" PRIu64, i);
    if ((st = rd_str(r, &k->key, what))) return st;
    if (k->key.len == 0) return demo_fail(CLPA_ERR_INVALID_ARG, "metadata pair %" PRIu64 " has an empty key", i);
    if (memchr(k->key.s, 0, k->key.len))
      return demo_fail(CLPA_ERR_INVALID_ARG, "metadata pair %" PRIu64 ": key holds a NUL byte", i);
    if ((st = add_fixup(g, &k->key, fix_cap))) return st;
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

static clpa_status parse_alignment(demo_gguf *g) {
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

static clpa_status parse_tensors(demo_gguf *g, rd *r, uint64_t *fix_cap) {
  clpa_status st;
  g->tensors = calloc((size_t)(g->n_tensors ? g->n_tensors : 1), sizeof *g->tensors);
  g->tensor_names = calloc((size_t)(g->n_tensors ? g->n_tensors : 1), sizeof *g->tensor_names);
  if (!g->tensors || !g->tensor_names)
    return demo_fail(CLPA_ERR_OUT_OF_MEMORY, "out of memory (%" PRIu64 " tensors)", g->n_tensors);
  for (uint64_t i = 0; i < g->n_tensors; i++)
    if ((st = rd_tensor_info(g, r, i, fix_cap))) return st;
  return CLPA_OK;
}

/* Places each tensor in the data section (after the arena copy: names are
 * NUL-terminated now). */
static clpa_status place_tensors(demo_gguf *g, const rd *r) {
  for (uint64_t i = 0; i < g->n_tensors; i++) g->tensors[i].name = g->tensor_names[i].s;
  /* the data section starts at the next multiple of the alignment */
  uint64_t pad = (g->alignment - r->pos % g->alignment) % g->alignment;
  g->data_start = r->pos + pad;
  if (g->n_tensors && g->data_start > r->size)
    return demo_fail(CLPA_ERR_INVALID_ARG,
                     "truncated: the data section would start at %" PRIu64 ", past the end of the file (size %" PRIu64 ")",
                     g->data_start, r->size);
  for (uint64_t i = 0; i < g->n_tensors; i++) {
    demo_gguf_tensor *t = &g->tensors[i];
    int nl = 100;
    if (t->offset % g->alignment)
      return demo_fail(CLPA_ERR_INVALID_ARG,
                       "tensor '%.*s': offset %" PRIu64 " is not a multiple of the alignment %" PRIu64,
                       nl, t->name, t->offset, g->alignment);
    uint64_t room = r->size - g->data_start;
    if (t->offset > room || t->size > room - t->offset) {
      /* the file offsets, when they fit in 64 bits */
      if (t->offset <= UINT64_MAX - g->data_start && t->size <= UINT64_MAX - g->data_start - t->offset)
        return demo_fail(CLPA_ERR_INVALID_ARG,
                         "tensor '%.*s': data [%" PRIu64 ", %" PRIu64 ") runs past the end of the file (size %" PRIu64 ")",
                    nl, t->name, g->data_start + t->offset, g->data_start + t->offset + t->size, r->size);
      return demo_fail(CLPA_ERR_INVALID_ARG,
                       "tensor '%.*s': data at offset %" PRIu64 " (%" PRIu64 " bytes) past the data section's start %"
                       PRIu64 " runs past the end of the file (size %" PRIu64 ")",
                       nl, t->name, t->offset, t->size, g->data_start, r->size);
    }
    t->data = r->p + g->data_start + t->offset;
  }
  return CLPA_OK;
}

static void free_parts(demo_gguf *g) {
  if (g->kvs)
    for (uint64_t i = 0; i < g->n_kv; i++)
      if (g->kvs[i].type == DEMO_GGUF_ARRAY) free((void *)g->kvs[i].v.a.strs);
  free(g->kvs);
  free(g->tensors);
  free(g->tensor_names);
  free(g->kv_sorted);
  free(g->tensor_sorted);
  free(g->str_fixups);
  free(g->arena);
}

/* ------------------------------------------------------------ open/close */

static clpa_status parse(demo_gguf *g) {
  rd r = {g->bytes, g->size, 0};
  uint64_t fix_cap = 0;
  clpa_status st;
  if ((st = parse_header(g, &r))) return st;
  if ((st = parse_kvs(g, &r, &fix_cap))) return st;
  if ((st = parse_alignment(g))) return st;
  if ((st = parse_tensors(g, &r, &fix_cap))) return st;
  if ((st = build_arena(g))) return st;
  if ((st = place_tensors(g, &r))) return st;
  return build_indexes(g);
}

clpa_status demo_gguf_open_memory(const void *data, size_t size, demo_gguf **out) {
  if (!out || (!data && size)) return demo_fail(CLPA_ERR_INVALID_ARG, "demo_gguf_open_memory: NULL argument");
  demo_gguf *g = calloc(1, sizeof *g);
  if (!g) return demo_fail(CLPA_ERR_OUT_OF_MEMORY, "out of memory");
  static const uint8_t empty[1];
  g->bytes = data ? data : empty;
  g->size = size;
  clpa_status st = parse(g);
  if (st) {
    demo_gguf_close(g);
    return st;
  }
  *out = g;
  return CLPA_OK;
}

/* Maps (or reads) the whole file. */
static clpa_status load_file(const char *path, demo_gguf *g) {
#ifdef DEMO_GGUF_MMAP
  int fd = open(path, O_RDONLY);
  if (fd < 0) return demo_fail(CLPA_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
  struct stat sb;
  if (fstat(fd, &sb) || !S_ISREG(sb.st_mode)) {
    int e = errno;
    close(fd);
    return demo_fail(CLPA_ERR_IO, "'%s' is not a readable regular file%s%s", path, e ? ": " : "",
                     e ? strerror(e) : "");
  }
  g->size = (uint64_t)sb.st_size;
  if ((uint64_t)sb.st_size > SIZE_MAX) {
    close(fd);
    return demo_fail(CLPA_ERR_IO, "'%s' is larger than this platform can map", path);
  }
  if (g->size == 0) {
    close(fd);
    static const uint8_t empty[1];
    g->bytes = empty;
    return CLPA_OK;
  }
  void *p = mmap(NULL, (size_t)g->size, PROT_READ, MAP_PRIVATE, fd, 0);
  int e = errno;
  close(fd);
  if (p == MAP_FAILED) return demo_fail(CLPA_ERR_IO, "cannot map '%s': %s", path, strerror(e));
  g->mapped = p;
  g->bytes = p;
  return CLPA_OK;
#else
  FILE *f = fopen(path, "rb");
  if (!f) return demo_fail(CLPA_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
  size_t cap = 1 << 20, n = 0;
  uint8_t *buf = malloc(cap);
  while (buf) {
    n += fread(buf + n, 1, cap - n, f);
    if (n < cap) break;
    uint8_t *nb = cap <= SIZE_MAX / 2 ? realloc(buf, cap * 2) : NULL;
    if (!nb) free(buf);
    buf = nb;
    cap *= 2;
  }
  int err = ferror(f);
  fclose(f);
  if (!buf) return demo_fail(CLPA_ERR_OUT_OF_MEMORY, "out of memory reading '%s'", path);
  if (err) {
    free(buf);
    return demo_fail(CLPA_ERR_IO, "error reading '%s'", path);
  }
  g->owned = buf;
  g->bytes = buf;
  g->size = n;
  return CLPA_OK;
#endif
}

clpa_status demo_gguf_open(const char *path, demo_gguf **out) {
  if (!path || !out) return demo_fail(CLPA_ERR_INVALID_ARG, "demo_gguf_open: NULL argument");
  demo_gguf *g = calloc(1, sizeof *g);
  if (!g) return demo_fail(CLPA_ERR_OUT_OF_MEMORY, "out of memory");
  clpa_status st = load_file(path, g);
  if (!st) st = parse(g);
  if (st) {
    if (st != CLPA_ERR_IO && st != CLPA_ERR_OUT_OF_MEMORY) {
      /* name the file in front of the parser's message */
      demo_fail(st, "'%s': %s", path, demo_last_error());
    }
    demo_gguf_close(g);
    return st;
  }
  *out = g;
  return CLPA_OK;
}

void demo_gguf_close(demo_gguf *g) {
  if (!g) return;
  free_parts(g);
#ifdef DEMO_GGUF_MMAP
  if (g->mapped) munmap(g->mapped, (size_t)g->size);
#endif
  free(g->owned);
  free(g);
}

uint32_t demo_gguf_version(const demo_gguf *g) { return g->version; }

/* ------------------------------------------------------------- getters */

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
    return (int64_t)(d < 0 ? d - 0.5 : d + 0.5);
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

/* ------------------------------------------------------------- tensors */

uint64_t demo_gguf_tensor_count(const demo_gguf *g) { return g->n_tensors; }
const demo_gguf_tensor *demo_gguf_tensor_at(const demo_gguf *g, uint64_t i) {
  return i < g->n_tensors ? &g->tensors[i] : NULL;
}

const demo_gguf_tensor *demo_gguf_get_tensor(const demo_gguf *g, const char *name) {
  if (!g || !name) return NULL;
  uint64_t lo = 0, hi = g->n_tensors;
  while (lo < hi) {
    uint64_t mid = lo + (hi - lo) / 2;
    const demo_gguf_tensor *t = &g->tensors[g->tensor_sorted[mid]];
    int c = strcmp(t->name, name);
    if (!c) return t;
    if (c < 0) lo = mid + 1;
    else hi = mid;
  }
  return NULL;
}

static void shape_str(char *buf, size_t n, const demo_gguf_tensor *t) {
  int w = snprintf(buf, n, "[");
  for (uint32_t d = 0; d < t->n_dims && w > 0 && (size_t)w < n; d++)
    w += snprintf(buf + w, n - (size_t)w, "%s%" PRId64, d ? ", " : "", t->ne[d]);
  if (w > 0 && (size_t)w < n) snprintf(buf + w, n - (size_t)w, "]");
}

clpa_status demo_gguf_expect(const demo_gguf *g, const char *name, int64_t ne0, int64_t ne1,
                             const demo_gguf_tensor **out) {
  if (!g || !name || !out) return demo_fail(CLPA_ERR_INVALID_ARG, "demo_gguf_expect: NULL argument");
  const demo_gguf_tensor *t = demo_gguf_get_tensor(g, name);
  if (!t) return demo_fail(CLPA_ERR_INVALID_ARG, "missing tensor '%s'", name);
  uint32_t want_dims = ne1 ? 2 : 1;
  if (t->n_dims != want_dims || t->ne[0] != ne0 || (ne1 && t->ne[1] != ne1)) {
    char have[128], want[64];
    shape_str(have, sizeof have, t);
    if (ne1) snprintf(want, sizeof want, "[%" PRId64 ", %" PRId64 "]", ne0, ne1);
    else snprintf(want, sizeof want, "[%" PRId64 "]", ne0);
    return demo_fail(CLPA_ERR_INVALID_ARG, "tensor '%s' has shape %s, expected %s (GGUF order, ne[0] first)",
                     name, have, want);
  }
  if (!convertible(t->type)) return not_convertible(t);
  *out = t;
  return CLPA_OK;
}

clpa_status demo_gguf_tensor_to_f32(const demo_gguf_tensor *t, float *dst, uint64_t n) {
  if (!t || (!dst && n)) return demo_fail(CLPA_ERR_INVALID_ARG, "demo_gguf_tensor_to_f32: NULL argument");
  if (!convertible(t->type)) return not_convertible(t);
  if (n != (uint64_t)t->n_elems)
    return demo_fail(CLPA_ERR_INVALID_ARG, "tensor '%s' has %" PRId64 " elements, not %" PRIu64, t->name,
                     t->n_elems, n);
  if (demo_quant_supported(t->type)) {
    /* whole blocks: ne[0] is (rd_tensor_info), so n_elems is too */
    clpa_status st = demo_quant_dequantize(t->type, t->data, dst, n);
    if (st) return demo_fail(st, "tensor '%s': %s", t->name, demo_last_error());
    return CLPA_OK;
  }
  const uint8_t *p = t->data;
  const uint16_t one = 1;
  bool host_le = *(const uint8_t *)&one == 1;
  if (t->type == DEMO_GGML_F32 && host_le) {
    memcpy(dst, p, (size_t)n * 4);
  } else if (t->type == DEMO_GGML_F32) {
    for (uint64_t i = 0; i < n; i++) {
      uint32_t w = (uint32_t)le(p + 4 * i, 4);
      memcpy(&dst[i], &w, 4);
    }
  } else {
    float (*conv)(uint16_t) = t->type == DEMO_GGML_F16 ? clpa_f16_to_f32 : clpa_bf16_to_f32;
    for (uint64_t i = 0; i < n; i++) {
      uint16_t h;
      if (host_le) memcpy(&h, p + 2 * i, 2);
      else h = (uint16_t)le(p + 2 * i, 2);
      dst[i] = conv(h);
    }
  }
  return CLPA_OK;
}

clpa_status demo_gguf_tensor_raw(const demo_gguf_tensor *t, demo_gguf_raw *out) {
  if (!t || !out) return demo_fail(CLPA_ERR_INVALID_ARG, "demo_gguf_tensor_raw: NULL argument");
  if (!convertible(t->type)) return not_convertible(t);
  const ggml_type_info *ti = &ggml_types[t->type];
  demo_gguf_raw r = {t->data, t->type, t->size, 0, 0, ti->block, ti->bytes};
  r.row_bytes = (uint64_t)t->ne[0] / ti->block * ti->bytes;
  r.rows = t->ne[0] ? (uint64_t)t->n_elems / (uint64_t)t->ne[0] : 0;
  *out = r;
  return CLPA_OK;
}
