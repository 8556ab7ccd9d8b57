/* ptx.c — a register cap written into NVIDIA's PTX (see ptx.h). */
#include "ptx.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The first occurrence of `needle` (NUL-terminated) in p[0, len), or NULL. */
static const unsigned char *find_bytes(const unsigned char *p, size_t len, const char *needle) {
  const size_t n = strlen(needle);
  for (size_t i = 0; n <= len && i <= len - n; i++)
    if (memcmp(p + i, needle, n) == 0) return p + i;
  return NULL;
}

unsigned char *clpa_ptx_with_maxnreg(const unsigned char *ptx, size_t len, int n,
                                     size_t *out_len) {
  if (!ptx || n <= 0) return NULL;
  char dir[32];
  const int dl = snprintf(dir, sizeof dir, ".maxnreg %d\n", n);
  /* Each entry's body opens at the first line that is "{" after it. */
  size_t entries = 0;
  for (const unsigned char *e = find_bytes(ptx, len, ".entry "); e;) {
    const size_t at = (size_t)(e - ptx);
    const unsigned char *body = find_bytes(e, len - at, "\n{");
    if (!body) return NULL;
    const unsigned char *again = find_bytes(e, (size_t)(body - e), ".maxnreg");
    if (again) return NULL;
    entries++;
    e = find_bytes(body, len - (size_t)(body - ptx), ".entry ");
  }
  if (entries == 0) return NULL;
  unsigned char *out = malloc(len + entries * (size_t)dl);
  if (!out) return NULL;
  size_t o = 0, i = 0;
  for (const unsigned char *e = find_bytes(ptx, len, ".entry "); e;) {
    const unsigned char *body = find_bytes(e, len - (size_t)(e - ptx), "\n{");
    const size_t cut = (size_t)(body - ptx) + 1; /* after the newline */
    memcpy(out + o, ptx + i, cut - i), o += cut - i, i = cut;
    memcpy(out + o, dir, (size_t)dl), o += (size_t)dl;
    e = find_bytes(body, len - (size_t)(body - ptx), ".entry ");
  }
  memcpy(out + o, ptx + i, len - i), o += len - i;
  *out_len = o;
  return out;
}
