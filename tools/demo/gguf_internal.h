/*
 * gguf_internal.h — inside the GGUF reader only (gguf.c, gguf_read.c,
 * gguf_kv.c, gguf_tensors.c): the reader's object, the bounds-checked
 * cursor every field is read through, and what the files call of each
 * other (gguf.c calls down into the others; gguf_kv.c and gguf_tensors.c
 * only into gguf_read.c).
 *
 *   gguf.c          the file: open/close, mapping, the header, the parse's
 *                   order
 *   gguf_read.c     the cursor and the string arena
 *   gguf_kv.c       the metadata key-values: their values, the alignment,
 *                   the sorted key index, the typed getters
 *   gguf_tensors.c  the tensor index: ggml's types, the tensor infos, their
 *                   place in the data section, lookups and conversion
 */
#ifndef CLPA_DEMO_GGUF_INTERNAL_H
#define CLPA_DEMO_GGUF_INTERNAL_H

#include <inttypes.h>
#include <stdio.h>

#include "gguf.h"

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

/* ------------------------------------------- the cursor (gguf_read.c) */

typedef struct rd {
  const uint8_t *p;
  uint64_t size, pos;
} rd;

/* The bytes at p as an n-byte little-endian number. */
uint64_t gguf_le(const uint8_t *p, int n);
/* Every read goes through gguf_need(): `what` names the field for the message. */
clpa_status gguf_need(const rd *r, uint64_t n, const char *what);
clpa_status gguf_rd_uint(rd *r, int n, uint64_t *out, const char *what);
clpa_status gguf_rd_u32(rd *r, uint32_t *out, const char *what);
/* A string: the pointer into the file for now (fixed up to the arena). */
clpa_status gguf_rd_str(rd *r, demo_gguf_str *out, const char *what);

/* ------------------------------------------- what the files call of each other */

/* gguf_read.c: registers a string for the arena copy; copies every
 * registered string into one arena, NUL-terminated (after the parse). */
clpa_status gguf_add_fixup(demo_gguf *g, demo_gguf_str *s, uint64_t *cap);
clpa_status gguf_build_arena(demo_gguf *g);

/* gguf_kv.c: the pairs after the header; general.alignment; the sorted key
 * index (after the arena copy), duplicates refused. */
clpa_status gguf_parse_kvs(demo_gguf *g, rd *r, uint64_t *fix_cap);
clpa_status gguf_parse_alignment(demo_gguf *g);
clpa_status gguf_index_kvs(demo_gguf *g);

/* gguf_tensors.c: the tensor infos after the pairs; their data placed
 * (after the arena copy: names NUL-terminated); the sorted name index,
 * duplicates refused. */
clpa_status gguf_parse_tensors(demo_gguf *g, rd *r, uint64_t *fix_cap);
clpa_status gguf_place_tensors(demo_gguf *g, const rd *r);
clpa_status gguf_index_tensors(demo_gguf *g);

#endif
