/* pretok.c — UTF-8, GPT-2's byte table and the pre-tokenizer (see pretok.h). */
#include "pretok.h"

#include <stdlib.h>

/* --------------------------------------------------------------- UTF-8 */

size_t demo_utf8_next(const uint8_t *s, size_t n, uint32_t *cp) {
  uint8_t c = s[0];
  size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
  if (len == 0 || len > n) {
    *cp = c;
    return 1;
  }
  uint32_t v = len == 1 ? c : len == 2 ? (c & 0x1fu) : len == 3 ? (c & 0x0fu) : (c & 0x07u);
  for (size_t i = 1; i < len; i++) {
    if ((s[i] & 0xc0) != 0x80) {
      *cp = c;
      return 1;
    }
    v = (v << 6) | (s[i] & 0x3fu);
  }
  *cp = v;
  return len;
}

size_t demo_utf8_put(uint32_t cp, char *out) {
  if (cp < 0x80) {
    out[0] = (char)cp;
    return 1;
  }
  if (cp < 0x800) {
    out[0] = (char)(0xc0 | (cp >> 6));
    out[1] = (char)(0x80 | (cp & 0x3f));
    return 2;
  }
  if (cp < 0x10000) {
    out[0] = (char)(0xe0 | (cp >> 12));
    out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
    out[2] = (char)(0x80 | (cp & 0x3f));
    return 3;
  }
  out[0] = (char)(0xf0 | (cp >> 18));
  out[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
  out[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
  out[3] = (char)(0x80 | (cp & 0x3f));
  return 4;
}

size_t demo_utf8_next_cpt(const uint8_t *s, size_t n, uint32_t *cp) {
  const size_t l = demo_utf8_next(s, n, cp);
  if (l == 1 && s[0] >= 0x80) *cp = 0xfffd;
  return l;
}

char *demo_utf8_clean(const char *text, size_t len, size_t *out_len) {
  char *out = malloc(3 * len + 1);
  size_t w = 0;
  for (size_t i = 0; out && i < len;) {
    uint32_t cp;
    i += demo_utf8_next_cpt((const uint8_t *)text + i, len - i, &cp);
    w += demo_utf8_put(cp, out + w);
  }
  *out_len = w;
  return out;
}

void demo_byte_map_init(demo_byte_map *m) {
  uint32_t extra = 0;
  for (int i = 0; i < 256 + 68; i++) m->to_byte[i] = -1;
  for (int b = 0; b < 256; b++) {
    bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
    m->to_cp[b] = printable ? (uint32_t)b : 256 + extra++;
    m->to_byte[m->to_cp[b]] = (int16_t)b;
  }
}

int demo_byte_map_byte(const demo_byte_map *m, uint32_t cp) {
  return cp < 256 + 68 ? m->to_byte[cp] : -1;
}

/* --------------------------------------------- pre-tokenizer classes */

enum { C_LETTER, C_NUMBER, C_SPACE, C_PUNCT }; /* the order of pretok_classes.h */

#include "pretok_classes.h"

/* \p{L}, \p{N}, \s or the rest (marks, punctuation, symbols, controls):
 * the range of the table that holds c. */
static int cp_class(uint32_t c) {
  size_t lo = 0, hi = sizeof pretok_ranges / sizeof *pretok_ranges;
  while (hi - lo > 1) { /* pretok_ranges[lo] starts at or below c */
    const size_t mid = lo + (hi - lo) / 2;
    if (pretok_ranges[mid] >> 2 <= c) lo = mid;
    else hi = mid;
  }
  return (int)(pretok_ranges[lo] & 3);
}

bool demo_pretok_init(demo_pretok *x, const char *text, size_t len) {
  *x = (demo_pretok){malloc((len + 1) * sizeof(uint32_t)), malloc(len + 1),
                     malloc((len + 1) * sizeof(size_t)), 0};
  if (!x->cp || !x->cls || !x->off) {
    demo_pretok_free(x);
    return false;
  }
  for (size_t i = 0; i < len;) {
    size_t l = demo_utf8_next_cpt((const uint8_t *)text + i, len - i, &x->cp[x->n]);
    x->cls[x->n] = (uint8_t)cp_class(x->cp[x->n]);
    x->off[x->n++] = i;
    i += l;
  }
  x->off[x->n] = len;
  return true;
}

void demo_pretok_free(demo_pretok *x) {
  free(x->cp), free(x->cls), free(x->off);
  *x = (demo_pretok){NULL, NULL, NULL, 0};
}

static bool is_crlf(uint32_t c) { return c == '\r' || c == '\n'; }

/* A contraction at i ('s 't 're 've 'm 'll 'd; any case when ci): its end or 0. */
static size_t contraction(const demo_pretok *x, size_t i, bool ci) {
  if (x->cp[i] != '\'' || i + 1 >= x->n) return 0;
  uint32_t a = x->cp[i + 1], b = i + 2 < x->n ? x->cp[i + 2] : 0;
  if (ci) {
    a = a < 0x80 ? (a | 32) : a;
    b = b < 0x80 ? (b | 32) : b;
  }
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return i + 2;
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return i + 3;
  return 0;
}

static size_t run(const demo_pretok *x, size_t i, int cls) {
  while (i < x->n && x->cls[i] == cls) i++;
  return i;
}

/* Whitespace at i: the regex tail \s*[\r\n]+ (llama3) | \s+(?!\S) | \s+. */
static size_t spaces(const demo_pretok *x, size_t i, bool llama3) {
  size_t e = run(x, i, C_SPACE);
  if (llama3)
    for (size_t k = e; k > i; k--)
      if (is_crlf(x->cp[k - 1])) return k;
  if (e == x->n || e - i < 2) return e;
  return e - 1;
}

size_t demo_pretok_next(const demo_pretok *x, size_t i, bool llama3) {
  size_t e, j = i;
  const uint8_t *c = x->cls;
  if ((e = contraction(x, i, llama3))) return e;
  if (llama3) {
    /* [^\r\n\p{L}\p{N}]?\p{L}+ */
    if ((c[j] == C_SPACE || c[j] == C_PUNCT) && !is_crlf(x->cp[j]) && j + 1 < x->n &&
        c[j + 1] == C_LETTER)
      j++;
    if (c[j] == C_LETTER) return run(x, j, C_LETTER);
    /* \p{N}{1,3} */
    if (c[i] == C_NUMBER) {
      e = i;
      while (e < x->n && e < i + 3 && c[e] == C_NUMBER) e++;
      return e;
    }
    /*  ?[^\s\p{L}\p{N}]+[\r\n]* */
    j = i;
    if (x->cp[j] == ' ' && j + 1 < x->n && c[j + 1] == C_PUNCT) j++;
    if (c[j] == C_PUNCT) {
      e = run(x, j, C_PUNCT);
      while (e < x->n && is_crlf(x->cp[e])) e++;
      return e;
    }
  } else {
    /*  ?\p{L}+ | ?\p{N}+ | ?[^\s\p{L}\p{N}]+ */
    if (x->cp[j] == ' ' && j + 1 < x->n && c[j + 1] != C_SPACE) j++;
    if (c[j] != C_SPACE) return run(x, j, c[j]);
  }
  if (c[i] == C_SPACE) return spaces(x, i, llama3);
  return i + 1;
}
