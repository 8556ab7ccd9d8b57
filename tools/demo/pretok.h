/*
 * pretok.h — the text side of the demo's byte-level BPE tokenizer
 * (tokenizer.c): UTF-8 decoding and encoding, GPT-2's bytes_to_unicode
 * table, and the pre-tokenizer that splits a text into the words BPE
 * merges within (GPT-2's regex, or Llama 3's; tokenizer.h writes both out).
 * Host C11, libc only.
 *
 * The pre-tokenizer's Unicode classes (\p{L}, \p{N}, \s) come from a small
 * table: ASCII is exact, beyond it a handful of ranges (tokenizer.h says
 * what that simplifies).
 */
#ifndef CLPA_DEMO_PRETOK_H
#define CLPA_DEMO_PRETOK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Length of the UTF-8 character at s (n >= 1 bytes left), decoded into
 * *cp; an invalid byte is a one-byte character whose code point is the
 * byte. */
size_t demo_utf8_next(const uint8_t *s, size_t n, uint32_t *cp);

/* Writes code point cp as UTF-8 to out (room for 4 bytes); its length. */
size_t demo_utf8_put(uint32_t cp, char *out);

/* GPT-2's bytes_to_unicode: printable Latin-1 bytes map to themselves, the
 * other 68 to U+0100 onwards in byte order (space -> U+0120 "Ġ"). */
typedef struct demo_byte_map {
  uint32_t to_cp[256];
  int16_t to_byte[256 + 68]; /* -1 outside the table */
} demo_byte_map;

void demo_byte_map_init(demo_byte_map *m);

/* The byte whose character is cp, or -1. */
int demo_byte_map_byte(const demo_byte_map *m, uint32_t cp);

/* A text decoded once for the pre-tokenizer: its code points, their
 * classes and byte offsets (off[n] = the text's length). */
typedef struct demo_pretok {
  uint32_t *cp;
  uint8_t *cls;
  size_t *off; /* [n + 1] */
  size_t n;
} demo_pretok;

/* Decodes text[0..len) into *x. False when out of memory (then *x holds
 * nothing to free). */
bool demo_pretok_init(demo_pretok *x, const char *text, size_t len);
void demo_pretok_free(demo_pretok *x);

/* The end (a code-point index) of the word that starts at code point i
 * (< x->n): Llama 3's split when llama3, else GPT-2's. */
size_t demo_pretok_next(const demo_pretok *x, size_t i, bool llama3);

#endif
