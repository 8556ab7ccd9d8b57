/* gguf_tensors.c — the GGUF reader's tensor index (see gguf.h): ggml's
 * type numbers and block layouts, each tensor's info read and checked
 * (name, shape, type, size within 64 bits), its data placed and bounded
 * in the data section, the sorted name index, and lookups, shape checks
 * and conversion to f32 (f16 and bf16 here, quantized blocks in quant.c). */
#include "gguf_internal.h"

#include <stdlib.h>
#include <string.h>

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

/* --------------------------------------------------------- tensor infos */

static clpa_status rd_tensor_info(demo_gguf *g, rd *r, uint64_t i, uint64_t *fix_cap) {
  demo_gguf_tensor *t = &g->tensors[i];
  demo_gguf_str name;
  char what[200];
  clpa_status st;
  snprintf(what, sizeof what, "name of tensor %" PRIu64, i);
  if ((st = gguf_rd_str(r, &name, what))) return st;
  if (name.len == 0) return demo_fail(CLPA_ERR_INVALID_ARG, "tensor %" PRIu64 " has an empty name", i);
  if (memchr(name.s, 0, name.len))
    return demo_fail(CLPA_ERR_INVALID_ARG, "tensor %" PRIu64 ": name holds a NUL byte", i);
  /* the name is printed below before the arena exists: bound it by length */
  int nl = name.len > 100 ? 100 : (int)name.len;
  snprintf(what, sizeof what, "n_dims of tensor '%.*s'", nl, name.s);
  if ((st = gguf_rd_u32(r, &t->n_dims, what))) return st;
  if (t->n_dims == 0 || t->n_dims > GGUF_MAX_DIMS)
    return demo_fail(CLPA_ERR_INVALID_ARG, "tensor '%.*s': n_dims %" PRIu32 " is not in [1, %u]", nl,
                     name.s, t->n_dims, GGUF_MAX_DIMS);
  uint64_t n_elems = 1;
  for (uint32_t d = 0; d < GGUF_MAX_DIMS; d++) t->ne[d] = 1;
  for (uint32_t d = 0; d < t->n_dims; d++) {
    uint64_t ne;
    snprintf(what, sizeof what, "ne[%" PRIu32 "] of tensor '%.*s'", d, nl, name.s);
    if ((st = gguf_rd_uint(r, 8, &ne, what))) return st;
    if (ne > (uint64_t)INT64_MAX || (ne && n_elems > (uint64_t)INT64_MAX / ne))
      return demo_fail(CLPA_ERR_INVALID_ARG,
                       "tensor '%.*s': ne[%" PRIu32 "] = %" PRIu64 " makes the element count overflow",
                       nl, name.s, d, ne);
    t->ne[d] = (int64_t)ne;
    n_elems *= ne;
  }
  t->n_elems = (int64_t)n_elems;
  snprintf(what, sizeof what, "type of tensor '%.*s'", nl, name.s);
  if ((st = gguf_rd_u32(r, &t->type, what))) return st;
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
  if ((st = gguf_rd_uint(r, 8, &t->offset, what))) return st;
  g->tensor_names[i] = name;
  return gguf_add_fixup(g, &g->tensor_names[i], fix_cap);
}

clpa_status gguf_parse_tensors(demo_gguf *g, rd *r, uint64_t *fix_cap) {
  clpa_status st;
  g->tensors = calloc((size_t)(g->n_tensors ? g->n_tensors : 1), sizeof *g->tensors);
  g->tensor_names = calloc((size_t)(g->n_tensors ? g->n_tensors : 1), sizeof *g->tensor_names);
  if (!g->tensors || !g->tensor_names)
    return demo_fail(CLPA_ERR_OUT_OF_MEMORY, "out of memory (%" PRIu64 " tensors)", g->n_tensors);
  for (uint64_t i = 0; i < g->n_tensors; i++)
    if ((st = rd_tensor_info(g, r, i, fix_cap))) return st;
  return CLPA_OK;
}

static _Thread_local const demo_gguf *sort_g; /* qsort has no context argument */

static int cmp_offset_idx(const void *a, const void *b) {
  uint64_t x = sort_g->tensors[*(const uint32_t *)a].offset;
  uint64_t y = sort_g->tensors[*(const uint32_t *)b].offset;
  return (x > y) - (x < y);
}

/* Refuses tensors that share bytes (ggml's reader wants them packed in
 * order). The loader makes host floats of every tensor: were sharing
 * allowed, a small file could name the same bytes for thousands of layers
 * and make it allocate far more than the file holds. After placement:
 * every [offset, offset + size) lies in the file. */
static clpa_status check_overlaps(demo_gguf *g) {
  uint32_t *by_offset = malloc((size_t)(g->n_tensors ? g->n_tensors : 1) * sizeof(uint32_t));
  if (!by_offset) return demo_fail(CLPA_ERR_OUT_OF_MEMORY, "out of memory (index)");
  for (uint64_t i = 0; i < g->n_tensors; i++) by_offset[i] = (uint32_t)i;
  sort_g = g;
  qsort(by_offset, (size_t)g->n_tensors, sizeof(uint32_t), cmp_offset_idx);
  sort_g = NULL;
  const demo_gguf_tensor *prev = NULL; /* the last tensor holding bytes */
  clpa_status st = CLPA_OK;
  for (uint64_t i = 0; i < g->n_tensors && !st; i++) {
    const demo_gguf_tensor *t = &g->tensors[by_offset[i]];
    if (!t->size) continue;
    if (prev && t->offset < prev->offset + prev->size) {
      const uint64_t at = g->data_start + t->offset, prev_at = g->data_start + prev->offset;
      st = demo_fail(CLPA_ERR_INVALID_ARG,
                     "tensor '%.100s': data [%" PRIu64 ", %" PRIu64
                     ") overlaps tensor '%.100s' at [%" PRIu64 ", %" PRIu64 ")",
                     t->name, at, at + t->size, prev->name, prev_at, prev_at + prev->size);
    }
    prev = t;
  }
  free(by_offset);
  return st;
}

/* Places each tensor in the data section (after the arena copy: names are
 * NUL-terminated now). */
clpa_status gguf_place_tensors(demo_gguf *g, const rd *r) {
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
  return check_overlaps(g);
}

/* ---------------------------------------------------- the name index */

static int cmp_tensor_idx(const void *a, const void *b) {
  const demo_gguf_tensor *x = &sort_g->tensors[*(const uint32_t *)a];
  const demo_gguf_tensor *y = &sort_g->tensors[*(const uint32_t *)b];
  return strcmp(x->name, y->name);
}

/* Sorted index of the tensor names; equal neighbours are duplicates. Runs
 * after the arena copy (names NUL-terminated). */
clpa_status gguf_index_tensors(demo_gguf *g) {
  g->tensor_sorted = malloc((size_t)(g->n_tensors ? g->n_tensors : 1) * sizeof(uint32_t));
  if (!g->tensor_sorted) return demo_fail(CLPA_ERR_OUT_OF_MEMORY, "out of memory (index)");
  for (uint64_t i = 0; i < g->n_tensors; i++) g->tensor_sorted[i] = (uint32_t)i;
  sort_g = g;
  qsort(g->tensor_sorted, (size_t)g->n_tensors, sizeof(uint32_t), cmp_tensor_idx);
  sort_g = NULL;
  for (uint64_t i = 1; i < g->n_tensors; i++) {
    const demo_gguf_tensor *a = &g->tensors[g->tensor_sorted[i - 1]];
    const demo_gguf_tensor *b = &g->tensors[g->tensor_sorted[i]];
    if (!strcmp(a->name, b->name))
      return demo_fail(CLPA_ERR_INVALID_ARG, "duplicate tensor name '%.100s' (tensors %" PRIu32 " and %" PRIu32 ")",
                       a->name, g->tensor_sorted[i - 1], g->tensor_sorted[i]);
  }
  return CLPA_OK;
}

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
      uint32_t w = (uint32_t)gguf_le(p + 4 * i, 4);
      memcpy(&dst[i], &w, 4);
    }
  } else {
    float (*conv)(uint16_t) = t->type == DEMO_GGML_F16 ? clpa_f16_to_f32 : clpa_bf16_to_f32;
    for (uint64_t i = 0; i < n; i++) {
      uint16_t h;
      if (host_le) memcpy(&h, p + 2 * i, 2);
      else h = (uint16_t)gguf_le(p + 2 * i, 2);
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
