/*
 * test_demo_prompts.c — clpa-demo --prompts' file parser
 * (tools/demo/prompts.c), host suite.
 *
 *   - plain text: every non-blank line a prompt as it stands (a line
 *     starting with "{" included), CRLF and a byte order mark dropped,
 *     line numbers kept
 *   - JSON lines: every escape, surrogate pairs, \u0000, keys in any
 *     order, escaped keys, whitespace, max_tokens
 *   - every malformed line refused with "NAME:LINE:COLUMN: why", the
 *     column pointing at the fault
 *   - seeded random strings, written with random escapes by a small JSON
 *     writer here, decode to their UTF-8 bytes; random byte soup never
 *     crashes and either parses or says where it broke
 *   - a missing file is CLPA_ERR_IO naming it; a file on disk reads
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../tools/demo/prompts.h"
#include "tap.h"

static clpa_status parse(const char *text, demo_prompts *p) {
  return demo_prompts_parse(text, strlen(text), "f.jsonl", p);
}

static int text_is(const demo_prompt *p, const char *bytes, size_t len) {
  return p->len == len && !memcmp(p->text, bytes, len) && p->text[len] == '\0';
}

static void test_plain(void) {
  demo_prompts p;
  const char *file = "\xEF\xBB\xBFhello\n\n  world  \r\n \t\n{not json}\nlast";
  clpa_status st = parse(file, &p);
  ok(st == CLPA_OK && !p.json && p.count == 4, "plain text: 4 prompts from 6 lines (two blank), status %s",
     clpa_status_name(st));
  if (st == CLPA_OK && p.count == 4) {
    ok(text_is(&p.items[0], "hello", 5) && p.items[0].line == 1, "the byte order mark is dropped");
    ok(text_is(&p.items[1], "  world  ", 9) && p.items[1].line == 3, "spaces kept, \\r\\n ends a line");
    ok(text_is(&p.items[2], "{not json}", 10) && p.items[2].line == 5,
       "a line starting with { is text in a plain file");
    ok(text_is(&p.items[3], "last", 4) && p.items[3].line == 6 && p.items[3].max_tokens == -1,
       "the last line needs no line end; no max_tokens");
  }
  demo_prompts_free(&p);
  st = parse("\n  \n\t\r\n", &p);
  ok(st == CLPA_OK && p.count == 0, "a file of blank lines holds no prompts");
  demo_prompts_free(&p);
  st = parse("", &p);
  ok(st == CLPA_OK && p.count == 0, "nor does an empty one");
  demo_prompts_free(&p);
}

static void test_json(void) {
  demo_prompts p;
  const char *file =
      "\n"
      "  {\"prompt\": \"a\\nb\\t\\\"q\\\" \\\\ \\/ \\b\\f\\r\", \"max_tokens\": 7}  \n"
      "{\"max_tokens\":3,\"prompt\":\"\\u00e9\\u20AC\\uD83D\\uDE00 caf\xC3\xA9\"}\r\n"
      "\n"
      "{ \"pr\\u006fmpt\" : \"x\\u0000y\" }\n"
      "{\"prompt\": \"{\\\"nested\\\": 1}\", \"max_tokens\": 1048576}";
  clpa_status st = parse(file, &p);
  ok(st == CLPA_OK && p.json && p.count == 4, "JSON lines: 4 objects (status %s: %s)", clpa_status_name(st),
     demo_last_error());
  if (st != CLPA_OK || p.count != 4) return;
  ok(text_is(&p.items[0], "a\nb\t\"q\" \\ / \b\f\r", 15) && p.items[0].max_tokens == 7 &&
         p.items[0].line == 2,
     "the simple escapes, max_tokens 7, line 2");
  ok(text_is(&p.items[1], "\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80 caf\xC3\xA9", 15) &&
         p.items[1].max_tokens == 3,
     "\\u00e9 \\u20AC and the pair \\uD83D\\uDE00 to UTF-8; raw UTF-8 kept; keys in any order");
  ok(text_is(&p.items[2], "x\0y", 3) && p.items[2].max_tokens == -1 && p.items[2].line == 5,
     "an escaped key; \\u0000 is a NUL byte inside the prompt");
  ok(text_is(&p.items[3], "{\"nested\": 1}", 13) && p.items[3].max_tokens == 1 << 20,
     "braces inside a string; max_tokens 2^20 is the largest");
  demo_prompts_free(&p);
}

static void test_errors(void) {
  static const struct {
    const char *line, *where, *why;
  } cases[] = {
      {"{\"prompt\": \"x\"", ":1:15:", "expected ',' or '}'"},
      {"{\"prompt\": 5}", ":1:12:", "\"prompt\" takes a string"},
      {"{\"prompt\": null}", ":1:12:", "\"prompt\" takes a string"},
      {"{\"max_tokens\": 5}", ":1:17:", "no \"prompt\""},
      {"{}", ":1:2:", "no \"prompt\""},
      {"{\"prompt\": \"x\", \"max_tokens\": 1.5}", ":1:31:", "takes an integer, not a fraction"},
      {"{\"prompt\": \"x\", \"max_tokens\": 1e3}", ":1:31:", "takes an integer, not a fraction"},
      {"{\"prompt\": \"x\", \"max_tokens\": \"5\"}", ":1:31:", "\"max_tokens\" takes an integer"},
      {"{\"prompt\": \"x\", \"max_tokens\": 0}", ":1:31:", "\"max_tokens\" 0 is outside [1, 1048576]"},
      {"{\"prompt\": \"x\", \"max_tokens\": -4}", ":1:31:", "-4 is outside"},
      {"{\"prompt\": \"x\", \"max_tokens\": 1048577}", ":1:31:", "1048577 is outside"},
      {"{\"prompt\": \"x\", \"max_tokens\": 99999999999999999999999}", ":1:31:", "99999999999999999999999 is outside"},
      {"{\"prompt\": \"x\", \"max_tokens\": 012}", ":1:31:", "leading zero"},
      {"{\"prompt\": \"x\", \"temperature\": 1}", ":1:17:", "unknown key \"temperature\""},
      {"{\"prompt\": \"x\", \"prompt\": \"y\"}", ":1:17:", "\"prompt\" given twice"},
      {"{\"prompt\": \"x\", \"max_tokens\": 1, \"max_tokens\": 2}", ":1:34:", "\"max_tokens\" given twice"},
      {"{\"prompt\" \"x\"}", ":1:11:", "expected ':'"},
      {"{prompt: \"x\"}", ":1:2:", "expected a key in double quotes"},
      {"{\"prompt\": \"x\",}", ":1:16:", "expected a key in double quotes"},
      {"{\"prompt\": \"x\"} {\"prompt\": \"y\"}", ":1:17:", "text after the object"},
      {"{\"prompt\": \"a\\qb\"}", ":1:14:", "unknown escape \\q"},
      {"{\"prompt\": \"a\\", ":1:12:", "the string does not end on its line"},
      {"{\"prompt\": \"\\uD83D\"}", ":1:13:", "lone surrogate \\uD83D"},
      {"{\"prompt\": \"\\uD83Dx\\uDE00\"}", ":1:13:", "lone surrogate \\uD83D"},
      {"{\"prompt\": \"\\uD83D\\u0041\"}", ":1:13:", "lone surrogate \\uD83D"},
      {"{\"prompt\": \"\\uDE00\"}", ":1:13:", "lone surrogate \\uDE00 (a low surrogate"},
      {"{\"prompt\": \"\\u12G4\"}", ":1:13:", "\\u takes 4 hex digits"},
      {"{\"prompt\": \"\\u12\"}", ":1:13:", "\\u takes 4 hex digits"},
      {"{\"prompt\": \"abc", ":1:12:", "the string does not end on its line"},
      {"{\"prompt\": \"a\tb\"}", ":1:14:", "control byte 0x09 in a string"},
      {"{\"prompt\": \"a\rb\"}", ":1:14:", "control byte 0x0D"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    demo_prompts p;
    const clpa_status st = parse(cases[i].line, &p);
    char want[64];
    snprintf(want, sizeof want, "f.jsonl%s ", cases[i].where);
    const char *msg = demo_last_error();
    ok(st == CLPA_ERR_INVALID_ARG && !strncmp(msg, want, strlen(want)) && strstr(msg, cases[i].why) &&
           p.count == 0 && !p.items,
       "refused: %s -> %s", cases[i].line, msg);
  }
  /* The line number counts every line, blank ones included. */
  demo_prompts p;
  clpa_status st = parse("{\"prompt\": \"a\"}\n\n\r\n\"just a string\"\n", &p);
  ok(st == CLPA_ERR_INVALID_ARG &&
         !strncmp(demo_last_error(), "f.jsonl:4:1: expected a JSON object", 35),
     "a non-object line in a JSON file: %s", demo_last_error());
  st = parse("{\"prompt\": \"a\"}\nplain text\n", &p);
  ok(st == CLPA_ERR_INVALID_ARG &&
         !strncmp(demo_last_error(), "f.jsonl:2:1: expected a JSON object", 35),
     "the first line decides for the file: %s", demo_last_error());
}

/* ---- random round trips ------------------------------------------------- */

/* Appends code point cp as JSON, escaped or not at random. */
static size_t put_json_char(char *o, uint32_t cp) {
  static const char simple[] = "\"\\\b\f\n\r\t";
  static const char names[] = "\"\\bfnrt";
  const char *s = cp < 0x80 ? strchr(simple, (int)cp) : NULL;
  if (cp && s) return (size_t)sprintf(o, "\\%c", names[s - simple]);
  if (cp < 0x20 || rng_below(3) == 0) {
    if (cp < 0x10000) return (size_t)sprintf(o, rng_below(2) ? "\\u%04x" : "\\u%04X", (unsigned)cp);
    const uint32_t v = cp - 0x10000;
    return (size_t)sprintf(o, "\\u%04X\\u%04x", (unsigned)(0xd800 + (v >> 10)), (unsigned)(0xdc00 + (v & 0x3ff)));
  }
  if (cp == '/' && rng_below(2)) return (size_t)sprintf(o, "\\/");
  return 0; /* raw: the caller writes the UTF-8 */
}

static size_t put_utf8(char *o, uint32_t cp) {
  if (cp < 0x80) return o[0] = (char)cp, 1;
  if (cp < 0x800) return o[0] = (char)(0xc0 | cp >> 6), o[1] = (char)(0x80 | (cp & 0x3f)), 2;
  if (cp < 0x10000)
    return o[0] = (char)(0xe0 | cp >> 12), o[1] = (char)(0x80 | (cp >> 6 & 0x3f)),
           o[2] = (char)(0x80 | (cp & 0x3f)), 3;
  return o[0] = (char)(0xf0 | cp >> 18), o[1] = (char)(0x80 | (cp >> 12 & 0x3f)),
         o[2] = (char)(0x80 | (cp >> 6 & 0x3f)), o[3] = (char)(0x80 | (cp & 0x3f)), 4;
}

static uint32_t random_cp(void) {
  switch (rng_below(4)) {
  case 0: return rng_below(0x80);
  case 1: return 0x80 + rng_below(0x800 - 0x80);
  case 2: {
    uint32_t cp;
    do cp = 0x800 + rng_below(0x10000 - 0x800);
    while (cp >= 0xd800 && cp <= 0xdfff);
    return cp;
  }
  default: return 0x10000 + rng_below(0x110000 - 0x10000);
  }
}

static void test_round_trips(void) {
  enum { LINES = 300, CHARS = 40 };
  char *file = malloc((size_t)LINES * (CHARS * 12 + 64)), **want = malloc(sizeof(char *) * LINES);
  size_t *want_len = malloc(sizeof(size_t) * LINES);
  int32_t *want_max = malloc(sizeof(int32_t) * LINES);
  if (!file || !want || !want_len || !want_max) BAIL_OUT("out of memory");
  size_t at = 0;
  for (int i = 0; i < LINES; i++) {
    want[i] = malloc(CHARS * 4 + 1);
    if (!want[i]) BAIL_OUT("out of memory");
    const int chars = (int)rng_below(CHARS + 1);
    want_len[i] = 0;
    want_max[i] = rng_below(2) ? (int32_t)(1 + rng_below(1000)) : -1;
    at += (size_t)sprintf(file + at, "%s{\"prompt\":%s\"", rng_below(2) ? " " : "", rng_below(2) ? " " : "");
    for (int c = 0; c < chars; c++) {
      const uint32_t cp = random_cp();
      want_len[i] += put_utf8(want[i] + want_len[i], cp);
      const size_t e = put_json_char(file + at, cp);
      at += e ? e : put_utf8(file + at, cp);
    }
    at += (size_t)sprintf(file + at, "\"");
    if (want_max[i] > 0) at += (size_t)sprintf(file + at, ", \"max_tokens\" :%d", (int)want_max[i]);
    at += (size_t)sprintf(file + at, "}%s", rng_below(2) ? "\r\n" : "\n");
  }
  demo_prompts p;
  const clpa_status st = demo_prompts_parse(file, at, "r.jsonl", &p);
  int good = st == CLPA_OK && p.count == LINES;
  for (int i = 0; good && i < LINES; i++) {
    good = text_is(&p.items[i], want[i], want_len[i]) && p.items[i].max_tokens == want_max[i] &&
           p.items[i].line == i + 1;
    if (!good) diag("line %d: %zu bytes, want %zu", i + 1, p.items[i].len, want_len[i]);
  }
  ok(good, "%d random lines of up to %d characters (every plane, random escapes and pairs) decode"
     " to their UTF-8 (%s)", LINES, CHARS, st == CLPA_OK ? "parsed" : demo_last_error());
  demo_prompts_free(&p);
  for (int i = 0; i < LINES; i++) free(want[i]);
  free(want), free(want_len), free(want_max);

  /* Byte soup from JSON's own alphabet: parses or names its place. */
  static const char *const bits[] = {"{", "}", "\"", "\\", "\\u", "D83D", "DE00", "prompt", "max_tokens",
                                     ":", ",", " ", "\n", "\r", "1", "0", "-", ".", "e", "\xC3", "\xA9",
                                     "\t", "null", "\\n", "x"};
  int sane = 1;
  for (int trial = 0; trial < 3000; trial++) {
    at = 0;
    at += (size_t)sprintf(file, "{\"prompt\":\"");
    const int n = (int)rng_below(30);
    for (int k = 0; k < n; k++) at += (size_t)sprintf(file + at, "%s", bits[rng_below(sizeof bits / sizeof *bits)]);
    const clpa_status s = demo_prompts_parse(file, at, "soup", &p);
    const char *msg = demo_last_error();
    const int fine = s == CLPA_OK || (s == CLPA_ERR_INVALID_ARG && !strncmp(msg, "soup:", 5) && p.count == 0);
    if (!fine && sane) diag("trial %d: status %s, message %s", trial, clpa_status_name(s), msg);
    sane = sane && fine;
    demo_prompts_free(&p);
  }
  ok(sane, "3000 random byte soups either parse or say where they broke (run under ASan too)");
  free(file);
}

static void test_files(void) {
  demo_prompts p;
  clpa_status st = demo_prompts_read("/nonexistent/prompts.txt", &p);
  ok(st == CLPA_ERR_IO && strstr(demo_last_error(), "/nonexistent/prompts.txt: ") && p.count == 0,
     "a missing file: CLPA_ERR_IO, %s", demo_last_error());
  char path[] = "/tmp/clpa_prompts_XXXXXX";
  FILE *f = NULL;
  const int fd = mkstemp(path);
  if (fd >= 0) f = fdopen(fd, "w");
  if (!f) BAIL_OUT("cannot make a temporary file");
  for (int i = 0; i < 5000; i++) fprintf(f, "prompt number %d\n", i); /* past the first read's 64 KiB */
  fclose(f);
  st = demo_prompts_read(path, &p);
  ok(st == CLPA_OK && p.count == 5000 && text_is(&p.items[4999], "prompt number 4999", 18) &&
         p.items[4999].line == 5000,
     "a 5000-line file reads whole (%s)", st == CLPA_OK ? "ok" : demo_last_error());
  demo_prompts_free(&p);
  remove(path);
}

/* regress: the line number is an int32_t, counted for blank lines too; a
 * file of 2^31 "\n" then a prompt overflowed it (UBSan: signed integer
 * overflow in demo_prompts_parse) and the prompt's line was -2147483647.
 * 2 GiB and about a minute under ASan: the slow suite's (--lines). */
static void regress_line_count_overflow(void) {
  const size_t n = (size_t)INT32_MAX;
  char *d = malloc(n + 2);
  if (!d) {
    ok(1, "# SKIP no 2 GiB here");
    return;
  }
  memset(d, '\n', n);
  memcpy(d + n, "x\n", 2);
  demo_prompts p; /* 2^31 - 2 blank lines, then the prompt on line 2^31 - 1 */
  clpa_status st = demo_prompts_parse(d + 1, n + 1, "f", &p);
  ok(st == CLPA_OK && p.count == 1 && p.items[0].line == INT32_MAX,
     "2^31 - 1 lines, the last a prompt: line %d", p.count ? (int)p.items[0].line : 0);
  demo_prompts_free(&p);
  st = demo_prompts_parse(d, n + 2, "f", &p); /* the prompt on line 2^31 */
  ok(st == CLPA_ERR_INVALID_ARG && strstr(demo_last_error(), "f: more than 2147483647 lines"),
     "regress: 2^31 lines, then a prompt -> %s", demo_last_error());
  demo_prompts_free(&p);
  free(d);
}

int main(int argc, char **argv) {
  rng_seed_from_env();
  if (argc > 1 && !strcmp(argv[1], "--lines")) {
    regress_line_count_overflow();
    return done_testing();
  }
  test_plain();
  test_json();
  test_errors();
  test_round_trips();
  test_files();
  return done_testing();
}
