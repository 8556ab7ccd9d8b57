/* gguf_read.c — what the GGUF reader's files read through (gguf_internal.h):
 * the bounds-checked cursor every field is read with, and the string arena
 * (strings point into the file while it is parsed, then are copied,
 * NUL-terminated, into one allocation). */
#include "gguf_internal.h"

#include <stdlib.h>
#include <string.h>

/* ----------------------------------------------------------- the cursor */

uint64_t gguf_le(const uint8_t *p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; i--) v = (v << 8) | p[i];
  return v;
}

clpa_status gguf_need(const rd *r, uint64_t n, const char *what) {
  if (n > r->size - r->pos)
    return demo_fail(CLPA_ERR_INVALID_ARG,
                     "truncated: %s at offset %" PRIu64 " needs %" PRIu64 " bytes, the file has %" PRIu64
                     " left (size %" PRIu64 ")",
                     what, r->pos, n, r->size - r->pos, r->size);
  return CLPA_OK;
}

clpa_status gguf_rd_uint(rd *r, int n, uint64_t *out, const char *what) {
  clpa_status st = gguf_need(r, (uint64_t)n, what);
  if (st) return st;
  *out = gguf_le(r->p + r->pos, n);
  r->pos += (uint64_t)n;
  return CLPA_OK;
}

clpa_status gguf_rd_u32(rd *r, uint32_t *out, const char *what) {
  uint64_t v;
  clpa_status st = gguf_rd_uint(r, 4, &v, what);
  if (!st) *out = (uint32_t)v;
  return st;
}

clpa_status gguf_rd_str(rd *r, demo_gguf_str *out, const char *what) {
  char w[160];
  uint64_t len;
  snprintf(w, sizeof w, "length of %s", what);
  clpa_status st = gguf_rd_uint(r, 8, &len, w);
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

/* ------------------------------------------------------------ the arena */

/* Registers a string for the arena copy. */
clpa_status gguf_add_fixup(demo_gguf *g, demo_gguf_str *s, uint64_t *cap) {
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

/* Copies every registered string into one arena, NUL-terminated. */
clpa_status gguf_build_arena(demo_gguf *g) {
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
