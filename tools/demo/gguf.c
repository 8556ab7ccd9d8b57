/* gguf.c — the GGUF reader's file (see gguf.h): open and close, mapping
 * or reading the bytes, the header, and the parse in the file's order:
 * header, key-values (gguf_kv.c), tensor infos (gguf_tensors.c), then the
 * strings copied, NUL-terminated, into one arena (gguf_read.c), the tensors
 * placed in the data section, and keys and tensor names given sorted
 * indexes (duplicates found as equal neighbours, lookups by binary search).
 * One forward pass over the bytes with a bounds-checked cursor (gguf_read.c)
 * validates and records everything. */
#include "gguf_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#if defined(__unix__) || defined(__APPLE__)
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#define DEMO_GGUF_MMAP 1
#endif

/* ----------------------------------------------------------- the parse */

static clpa_status parse_header(demo_gguf *g, rd *r) {
  clpa_status st;
  uint32_t magic;
  /* the magic first, over the bytes there are: a short file that is not
   * GGUF at all is not a truncated one */
  size_t have = r->size < 4 ? (size_t)r->size : 4;
  if (memcmp(r->p, "GGUF", have)) {
    char hex[16] = "";
    for (size_t i = 0; i < have; i++)
      snprintf(hex + 3 * i, sizeof hex - 3 * i, "%02x ", r->p[i]);
    hex[3 * have - 1] = '\0';
    return demo_fail(CLPA_ERR_INVALID_ARG,
                     "bad magic: the file starts with %s, not \"GGUF\" (47 47 55 46)", hex);
  }
  if (r->size < GGUF_HEADER_SIZE)
    return demo_fail(CLPA_ERR_INVALID_ARG,
                     "truncated: the file is %" PRIu64 " bytes, shorter than the %u-byte GGUF header",
                     r->size, GGUF_HEADER_SIZE);
  if ((st = gguf_rd_u32(r, &magic, "magic"))) return st;
  if ((st = gguf_rd_u32(r, &g->version, "version"))) return st;
  /* GGUF v3 may be big-endian (for big-endian hosts): its version reads
   * here as 0x02000000 or 0x03000000, and every later field as swapped */
  if (g->version == 0x02000000u || g->version == 0x03000000u)
    return demo_fail(CLPA_ERR_UNSUPPORTED,
                     "big-endian GGUF (version %" PRIu32 " read byte-swapped as %" PRIu32
                     "): only little-endian files are supported",
                     g->version >> 24, g->version);
  if (g->version != 2 && g->version != 3)
    return demo_fail(CLPA_ERR_UNSUPPORTED, "GGUF version %" PRIu32 " is not supported (only 2 and 3)",
                     g->version);
  if ((st = gguf_rd_uint(r, 8, &g->n_tensors, "tensor count"))) return st;
  if ((st = gguf_rd_uint(r, 8, &g->n_kv, "metadata count"))) return st;
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
  if ((st = gguf_parse_kvs(g, &r, &fix_cap))) return st;
  if ((st = gguf_parse_alignment(g))) return st;
  if ((st = gguf_parse_tensors(g, &r, &fix_cap))) return st;
  if ((st = gguf_build_arena(g))) return st;
  if ((st = gguf_place_tensors(g, &r))) return st;
  if ((st = gguf_index_kvs(g))) return st;
  return gguf_index_tensors(g);
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

#ifdef DEMO_GGUF_MMAP
/* For the message refusing what is not a regular file. */
static const char *file_kind(mode_t m) {
  if (S_ISDIR(m)) return "a directory";
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISCHR(m) || S_ISBLK(m)) return "a device";
  return S_ISSOCK(m) ? "a socket" : "a special file";
}
#endif

/* Maps (or reads) the whole file. */
static clpa_status load_file(const char *path, demo_gguf *g) {
#ifdef DEMO_GGUF_MMAP
  /* O_NONBLOCK: open() of a FIFO would wait for a writer, forever */
  int fd = open(path, O_RDONLY | O_NONBLOCK);
  if (fd < 0) return demo_fail(CLPA_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
  struct stat sb;
  if (fstat(fd, &sb)) {
    int e = errno;
    close(fd);
    return demo_fail(CLPA_ERR_IO, "cannot stat '%s': %s", path, strerror(e));
  }
  if (!S_ISREG(sb.st_mode)) {
    close(fd);
    return demo_fail(CLPA_ERR_IO, "'%s' is %s, not a regular file", path, file_kind(sb.st_mode));
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
