/*
 * prompts.c — see prompts.h. One pass over the lines; a JSON line is read
 * by a recursive-descent parser that knows one shape (an object of a
 * string and an integer), so every error can say what it expected there.
 */
#include "prompts.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pretok.h"

/* Where the parser is: inside one line [line_start, end) of the file. */
typedef struct cursor {
  const char *name;
  const char *line_start, *p, *end;
  int32_t line;
} cursor;

#if defined(__GNUC__) || defined(__clang__)
__attribute__((format(printf, 3, 4)))
#endif
static clpa_status bad(cursor *c, const char *at, const char *fmt, ...) {
  char what[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  return demo_fail(CLPA_ERR_INVALID_ARG, "%s:%d:%d: %s", c->name, (int)c->line,
                   (int)(at - c->line_start) + 1, what);
}

static clpa_status oom(cursor *c) {
  return demo_fail(CLPA_ERR_OUT_OF_MEMORY, "%s:%d: out of memory", c->name, (int)c->line);
}

static int is_blank(char ch) { return ch == ' ' || ch == '\t' || ch == '\r'; }

static void skip_ws(cursor *c) { /* JSON's whitespace; "\n" ends the line before */
  while (c->p < c->end && is_blank(*c->p)) c->p++;
}

static int hex4(const char *p, const char *end, uint32_t *v) {
  if (end - p < 4) return 0;
  *v = 0;
  for (int i = 0; i < 4; i++) {
    const char h = p[i];
    const int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10
                : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
    if (d < 0) return 0;
    *v = *v << 4 | (uint32_t)d;
  }
  return 1;
}

/* \uXXXX at c->p (past the "\u"), a surrogate pair taken whole: the code
 * point in *cp. */
static clpa_status unicode_escape(cursor *c, const char *esc, uint32_t *cp) {
  if (!hex4(c->p, c->end, cp)) return bad(c, esc, "\\u takes 4 hex digits");
  c->p += 4;
  if (*cp >= 0xdc00 && *cp <= 0xdfff)
    return bad(c, esc, "lone surrogate \\u%04X (a low surrogate must follow a high one)", (unsigned)*cp);
  if (*cp < 0xd800 || *cp > 0xdbff) return CLPA_OK;
  uint32_t low;
  if (c->end - c->p < 2 || c->p[0] != '\\' || c->p[1] != 'u' || !hex4(c->p + 2, c->end, &low) ||
      low < 0xdc00 || low > 0xdfff)
    return bad(c, esc, "lone surrogate \\u%04X (a high surrogate must be followed by a low one,"
               " \\uDC00-\\uDFFF)", (unsigned)*cp);
  c->p += 6;
  *cp = 0x10000 + ((*cp - 0xd800) << 10) + (low - 0xdc00);
  return CLPA_OK;
}

/* A JSON string at c->p (its opening quote), decoded into a malloc'd,
 * NUL-terminated *out of *len bytes. Decoding never lengthens the text
 * (\uXXXX is 6 bytes for at most 3, a pair 12 for 4), so the line's
 * length bounds it. */
static clpa_status parse_string(cursor *c, char **out, size_t *len) {
  const char *open = c->p++;
  char *s = malloc((size_t)(c->end - c->p) + 1);
  if (!s) return oom(c);
  size_t n = 0;
  clpa_status st = CLPA_OK;
  for (;;) {
    if (c->p == c->end) {
      st = bad(c, open, "the string does not end on its line");
      break;
    }
    const unsigned char ch = (unsigned char)*c->p;
    if (ch == '"') {
      c->p++;
      break;
    }
    if (ch < 0x20) {
      st = bad(c, c->p, "control byte 0x%02X in a string (write it as an escape, \\u%04X)", ch, ch);
      break;
    }
    if (ch != '\\') {
      s[n++] = (char)ch;
      c->p++;
      continue;
    }
    const char *esc = c->p++;
    if (c->p == c->end) {
      st = bad(c, open, "the string does not end on its line");
      break;
    }
    const char e = *c->p++;
    const char *simple = strchr("\"\\/bfnrt", e), *value = "\"\\/\b\f\n\r\t";
    if (e && simple) {
      s[n++] = value[simple - "\"\\/bfnrt"];
    } else if (e == 'u') {
      uint32_t cp = 0; /* set by unicode_escape when it succeeds (-O3 cannot tell) */
      if ((st = unicode_escape(c, esc, &cp)) != CLPA_OK) break;
      n += demo_utf8_put(cp, s + n);
    } else {
      st = e >= 0x20 && e < 0x7f ? bad(c, esc, "unknown escape \\%c", e)
                                 : bad(c, esc, "unknown escape (a backslash before byte 0x%02X)",
                                       (unsigned char)e);
      break;
    }
  }
  if (st != CLPA_OK) {
    free(s);
    return st;
  }
  s[n] = '\0';
  *out = s, *len = n;
  return CLPA_OK;
}

/* A JSON integer (no fraction, no exponent) at c->p into *v. */
static clpa_status parse_integer(cursor *c, const char *key, int64_t *v) {
  const char *at = c->p;
  const int neg = c->p < c->end && *c->p == '-';
  c->p += neg;
  const char *digits = c->p;
  int64_t x = 0;
  while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
    if (x < (int64_t)1 << 40) x = 10 * x + (*c->p - '0'); /* past any limit: stays past it */
    c->p++;
  }
  if (c->p == digits) return bad(c, at, "\"%s\" takes an integer", key);
  if (c->p - digits > 1 && *digits == '0') return bad(c, at, "a number with a leading zero");
  if (c->p < c->end && (*c->p == '.' || *c->p == 'e' || *c->p == 'E'))
    return bad(c, at, "\"%s\" takes an integer, not a fraction or an exponent", key);
  *v = neg ? -x : x;
  return CLPA_OK;
}

/* One JSON line: {"prompt": ..., "max_tokens": ...} into *out. */
static clpa_status parse_object(cursor *c, demo_prompt *out) {
  skip_ws(c);
  if (c->p == c->end || *c->p != '{')
    return bad(c, c->p, "expected a JSON object {\"prompt\": ...} (the file starts with one, so every"
               " line must be)");
  c->p++;
  clpa_status st = CLPA_OK;
  int has_max = 0;
  for (;;) {
    skip_ws(c);
    if (c->p < c->end && *c->p == '}' && !out->text && !has_max) break; /* {} */
    if (c->p == c->end || *c->p != '"') {
      st = bad(c, c->p, "expected a key in double quotes");
      break;
    }
    const char *key_at = c->p;
    char *key;
    size_t kl;
    if ((st = parse_string(c, &key, &kl)) != CLPA_OK) break;
    const int is_prompt = kl == 6 && !memcmp(key, "prompt", 6);
    const int is_max = kl == 10 && !memcmp(key, "max_tokens", 10);
    skip_ws(c);
    if (!is_prompt && !is_max)
      st = bad(c, key_at, "unknown key \"%.40s\" (a line takes \"prompt\" and \"max_tokens\")", key);
    else if ((is_prompt && out->text) || (is_max && has_max))
      st = bad(c, key_at, "\"%s\" given twice", key);
    else if (c->p == c->end || *c->p != ':')
      st = bad(c, c->p, "expected ':' after the key");
    free(key);
    if (st != CLPA_OK) break;
    c->p++;
    skip_ws(c);
    if (is_prompt) {
      if (c->p == c->end || *c->p != '"') {
        st = bad(c, c->p, "\"prompt\" takes a string");
        break;
      }
      if ((st = parse_string(c, &out->text, &out->len)) != CLPA_OK) break;
    } else {
      const char *at = c->p;
      int64_t v = 0;
      if ((st = parse_integer(c, "max_tokens", &v)) != CLPA_OK) break;
      if (v < 1 || v > DEMO_MAX_TOKENS_LIMIT) {
        st = bad(c, at, "\"max_tokens\" %.*s is outside [1, %d]", (int)(c->p - at), at,
                 DEMO_MAX_TOKENS_LIMIT);
        break;
      }
      out->max_tokens = (int32_t)v, has_max = 1;
    }
    skip_ws(c);
    if (c->p < c->end && *c->p == ',') {
      c->p++;
      continue;
    }
    if (c->p < c->end && *c->p == '}') break;
    st = bad(c, c->p, "expected ',' or '}'");
    break;
  }
  if (st == CLPA_OK && !out->text) st = bad(c, c->p, "the object has no \"prompt\"");
  if (st == CLPA_OK) {
    c->p++; /* the '}' */
    skip_ws(c);
    if (c->p < c->end) st = bad(c, c->p, "text after the object (one object a line)");
  }
  if (st != CLPA_OK) {
    free(out->text);
    out->text = NULL;
  }
  return st;
}

static clpa_status plain_line(cursor *c, demo_prompt *out) {
  const size_t n = (size_t)(c->end - c->line_start);
  if (!(out->text = malloc(n + 1))) return oom(c);
  memcpy(out->text, c->line_start, n);
  out->text[n] = '\0';
  out->len = n;
  return CLPA_OK;
}

clpa_status demo_prompts_parse(const char *data, size_t size, const char *name, demo_prompts *out) {
  memset(out, 0, sizeof *out);
  cursor c = {name, NULL, NULL, NULL, 0};
  const char *p = data, *end = data + size;
  if (size >= 3 && !memcmp(p, "\xEF\xBB\xBF", 3)) p += 3; /* a byte order mark */
  int32_t room = 0;
  int json = -1; /* decided by the first non-blank line */
  clpa_status st = CLPA_OK;
  while (st == CLPA_OK && p < end) {
    const char *nl = memchr(p, '\n', (size_t)(end - p)), *eol = nl ? nl : end;
    if (c.line == INT32_MAX) { /* blank lines count too: 2 GiB of "\n" */
      st = demo_fail(CLPA_ERR_INVALID_ARG, "%s: more than %d lines", name, (int)INT32_MAX);
      break;
    }
    c.line++;
    c.line_start = c.p = p;
    c.end = eol > p && eol[-1] == '\r' ? eol - 1 : eol;
    p = nl ? nl + 1 : end;
    const char *q = c.line_start;
    while (q < c.end && is_blank(*q)) q++;
    if (q == c.end) continue;
    if (json < 0) json = *q == '{';
    if (out->count == room) {
      if (room > INT32_MAX / 2) {
        st = bad(&c, c.line_start, "more than %d prompts", (int)room);
        break;
      }
      room = room ? 2 * room : 64;
      demo_prompt *grown = realloc(out->items, sizeof *grown * (size_t)room);
      if (!grown) {
        st = oom(&c);
        break;
      }
      out->items = grown;
    }
    demo_prompt *d = &out->items[out->count];
    *d = (demo_prompt){NULL, 0, -1, c.line};
    if ((st = json ? parse_object(&c, d) : plain_line(&c, d)) == CLPA_OK) out->count++;
  }
  if (st != CLPA_OK) {
    demo_prompts_free(out);
    return st;
  }
  out->json = json > 0;
  return CLPA_OK;
}

clpa_status demo_prompts_read(const char *path, demo_prompts *out) {
  memset(out, 0, sizeof *out);
  FILE *f = fopen(path, "rb");
  if (!f) return demo_fail(CLPA_ERR_IO, "%s: %s", path, strerror(errno));
  /* In chunks, not by its size: a pipe (/dev/stdin) has none. */
  char *data = NULL;
  size_t n = 0, room = 0;
  clpa_status st = CLPA_OK;
  for (;;) {
    if (n == room) {
      room = room ? 2 * room : 1 << 16;
      char *grown = realloc(data, room);
      if (!grown) {
        st = demo_fail(CLPA_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
        break;
      }
      data = grown;
    }
    const size_t got = fread(data + n, 1, room - n, f);
    n += got;
    if (got == 0) {
      if (ferror(f)) {
        st = demo_fail(CLPA_ERR_IO, "%s: %s", path, strerror(errno));
      }
      break;
    }
  }
  fclose(f);
  if (st == CLPA_OK) st = demo_prompts_parse(data, n, path, out);
  free(data);
  return st;
}

void demo_prompts_free(demo_prompts *p) {
  for (int32_t i = 0; p->items && i < p->count; i++) free(p->items[i].text);
  free(p->items);
  memset(p, 0, sizeof *p);
}
