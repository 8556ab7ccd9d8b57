/* tokenizer.c — SentencePiece-BPE and byte-level BPE encoding, and the
 * pieces that decode (see tokenizer.h); the tables they read are
 * tokenizer_vocab.c's. Each merge loop keeps the symbols as a linked list
 * over the word and its pairs in a heap, best first: O(n log n) in the
 * length of a word (BPE) or a text segment (SentencePiece), whose segment
 * is the whole text between special tokens. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer_internal.h"

/* ----------------------------------------------------- output buffer */

typedef struct ids_buf {
  int32_t *v;
  size_t n, cap;
} ids_buf;

static clpa_status push(ids_buf *b, int32_t id) {
  if (b->n == b->cap) {
    size_t nc = b->cap ? b->cap * 2 : 64;
    int32_t *p = realloc(b->v, nc * sizeof *p);
    if (!p) return demo_fail(CLPA_ERR_OUT_OF_MEMORY, "out of memory (token ids)");
    b->v = p;
    b->cap = nc;
  }
  b->v[b->n++] = id;
  return CLPA_OK;
}

/* A byte with no token: its byte token, else unknown, else an error. */
static clpa_status push_byte(const demo_tokenizer *t, ids_buf *b, uint8_t byte) {
  if (t->byte_tok[byte] >= 0) return push(b, t->byte_tok[byte]);
  if (t->unk >= 0) return push(b, t->unk);
  return demo_fail(CLPA_ERR_INVALID_ARG, "cannot encode byte 0x%02x: no token, no byte token and no unknown token",
                   byte);
}

/* ----------------------------------------------------- the merge loop */

/* Symbols over a word: a doubly linked list in position order. */
typedef struct sym {
  size_t start, len;  /* bytes of the word (SPM) */
  int32_t id;         /* token (BPE: -1 = none) */
  int32_t prev, next; /* -1 at the ends */
  float best;         /* the pair (this, next)'s priority; -INFINITY-like if none */
  int32_t merged;     /* the pair's token */
  bool has_pair;
  uint32_t ver; /* bumped whenever the pair (this, next) changes or goes */
} sym;

/* A pair in the merge heap: (a, a.next) as it was at version ver of a. */
typedef struct cand {
  float best;
  size_t start; /* a's, for ties: leftmost first */
  int32_t a;
  uint32_t ver;
} cand;

/* The pair (a, a.next): SPM scores its concatenation, BPE ranks it. */
static void score_pair(const demo_tokenizer *t, const char *word, sym *s, int32_t a) {
  s[a].has_pair = false;
  int32_t b = s[a].next;
  if (b < 0) return;
  if (t->kind == DEMO_TOKENIZER_SPM) {
    int32_t id = demo_tok_lookup(t, word + s[a].start, s[a].len + s[b].len);
    if (id < 0) return;
    s[a].has_pair = true;
    s[a].best = t->scores[id];
    s[a].merged = id;
  } else {
    if (s[a].id < 0 || s[b].id < 0) return;
    const pair_slot *p = demo_tok_pair_find(t, s[a].id, s[b].id);
    if (!p) return;
    s[a].has_pair = true;
    s[a].best = -(float)p->rank; /* lower rank first; exact below 2^24 merges */
    s[a].merged = p->merged;
  }
}

/* Whether heap entry x goes before y: the higher priority, ties leftmost. */
static bool cand_before(const cand *x, const cand *y) {
  return x->best > y->best || (x->best == y->best && x->start < y->start);
}

/* Scores the pair (a, a.next) anew, and puts it on the heap h (of *hn) if it
 * is one; the entries made before for a go stale (their version). */
static void push_pair(const demo_tokenizer *t, const char *word, sym *s, int32_t a, cand *h,
                      int32_t *hn) {
  s[a].ver++;
  score_pair(t, word, s, a);
  if (!s[a].has_pair) return;
  int32_t i = (*hn)++;
  const cand c = {s[a].best, s[a].start, a, s[a].ver};
  for (; i > 0 && cand_before(&c, &h[(i - 1) / 2]); i = (i - 1) / 2) h[i] = h[(i - 1) / 2];
  h[i] = c;
}

/* The heap's first entry, taken off it. */
static cand pop_pair(cand *h, int32_t *hn) {
  const cand top = h[0], last = h[--*hn];
  int32_t i = 0;
  for (;;) {
    int32_t c = 2 * i + 1;
    if (c >= *hn) break;
    if (c + 1 < *hn && cand_before(&h[c + 1], &h[c])) c++;
    if (!cand_before(&h[c], &last)) break;
    h[i] = h[c];
    i = c;
  }
  if (*hn > 0) h[i] = last;
  return top;
}

/* Merges until no pair qualifies; the best priority wins, ties leftmost. h
 * holds 3 n entries: n - 1 pairs at first, then at most two for each of the
 * n - 1 merges. */
static void merge_all(const demo_tokenizer *t, const char *word, sym *s, int32_t n, cand *h) {
  int32_t hn = 0;
  for (int32_t i = 0; i < n; i++) push_pair(t, word, s, i, h, &hn);
  while (hn > 0) {
    const cand c = pop_pair(h, &hn);
    const int32_t best = c.a;
    if (c.ver != s[best].ver) continue; /* (best, its next) changed since */
    int32_t b = s[best].next;
    s[best].len += s[b].len;
    s[best].id = s[best].merged;
    s[best].next = s[b].next;
    if (s[b].next >= 0) s[s[b].next].prev = best;
    s[b].ver++; /* b is gone: its pair too */
    push_pair(t, word, s, best, h, &hn);
    if (s[best].prev >= 0) push_pair(t, word, s, s[best].prev, h, &hn);
  }
}

/* ------------------------------------------------------ SentencePiece */

/* One text segment (no special tokens in it). */
static clpa_status spm_segment(const demo_tokenizer *t, const char *text, size_t len, bool prefix,
                               ids_buf *out) {
  /* escape: optional leading space, every ' ' -> U+2581 (3 bytes) */
  char *w = malloc((len + 1) * 3 + 1);
  if (!w) return demo_fail(CLPA_ERR_OUT_OF_MEMORY, "out of memory (encode)");
  size_t wn = 0;
  if (prefix) {
    memcpy(w, "\xe2\x96\x81", 3);
    wn = 3;
  }
  for (size_t i = 0; i < len; i++) {
    if (text[i] == ' ') {
      memcpy(w + wn, "\xe2\x96\x81", 3);
      wn += 3;
    } else {
      w[wn++] = text[i];
    }
  }
  /* a symbol a character, as long as its first byte says (llama.cpp's
   * unicode_len_utf8, whatever the bytes after it are), so that invalid
   * UTF-8 makes the symbols llama.cpp's do. A symbol takes at least one
   * byte of w, so wn bounds them; len + 1 does not: a lead byte before a
   * space takes the U+2581's first byte, and its other two are symbols
   * alone ("\xc0 " is 4 symbols). */
  static const uint8_t lead_len[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  if (wn > INT32_MAX / 4) { /* symbols are int32_t, the heap 3 n of them */
    free(w);
    return demo_fail(CLPA_ERR_INVALID_ARG, "encode: a text segment of %zu bytes is too long", len);
  }
  sym *s = malloc((wn + 1) * sizeof *s);
  cand *h = malloc(3 * (wn + 1) * sizeof *h);
  clpa_status st = CLPA_OK;
  if (!s || !h) {
    free(w);
    free(s);
    free(h);
    return demo_fail(CLPA_ERR_OUT_OF_MEMORY, "out of memory (encode)");
  }
  int32_t n = 0;
  for (size_t i = 0; i < wn; n++) {
    size_t l = lead_len[(uint8_t)w[i] >> 4];
    if (l > wn - i) l = wn - i;
    s[n] = (sym){i, l, -1, n - 1, n + 1, 0, 0, false, 0};
    i += l;
  }
  if (n) s[n - 1].next = -1;
  merge_all(t, w, s, n, h);
  for (int32_t i = 0; !st && i >= 0 && i < n; i = s[i].next) {
    int32_t id = demo_tok_lookup(t, w + s[i].start, s[i].len);
    if (id >= 0) st = push(out, id);
    else
      for (size_t k = 0; !st && k < s[i].len; k++) st = push_byte(t, out, (uint8_t)w[s[i].start + k]);
  }
  free(w);
  free(s);
  free(h);
  return st;
}

/* ----------------------------------------------------- byte-level BPE */

static clpa_status bpe_word(const demo_tokenizer *t, const uint8_t *word, size_t len, sym *s,
                            cand *h, char *mapped, ids_buf *out) {
  if (t->ignore_merges) {
    /* a word that is a token as a whole */
    size_t mn = 0;
    for (size_t i = 0; i < len; i++) mn += demo_utf8_put(t->bmap.to_cp[word[i]], mapped + mn);
    int32_t id = demo_tok_lookup(t, mapped, mn);
    if (id >= 0) return push(out, id);
  }
  int32_t n = (int32_t)len;
  for (int32_t i = 0; i < n; i++)
    s[i] = (sym){(size_t)i, 1, t->byte_tok[word[i]], i - 1, i + 1 < n ? i + 1 : -1, 0, 0, false, 0};
  merge_all(t, NULL, s, n, h);
  clpa_status st = CLPA_OK;
  for (int32_t i = 0; !st && i >= 0 && i < n; i = s[i].next) {
    if (s[i].id >= 0) st = push(out, s[i].id);
    else if (t->unk >= 0) st = push(out, t->unk);
    else
      st = demo_fail(CLPA_ERR_INVALID_ARG,
                     "cannot encode byte 0x%02x: its character U+%04" PRIX32 " is no token and there is no unknown token",
                     word[s[i].start], t->bmap.to_cp[word[s[i].start]]);
  }
  return st;
}

/* A segment's words, split and merged as llama.cpp's: from its text
 * cleaned as llama.cpp's regex split gives its words back (an invalid byte
 * U+FFFD, its three bytes then; demo_utf8_clean). */
static clpa_status bpe_segment(const demo_tokenizer *t, const char *raw, size_t raw_len,
                               ids_buf *out) {
  size_t len = 0;
  char *text = demo_utf8_clean(raw, raw_len, &len);
  if (text && len > INT32_MAX / 4) { /* a word's symbols are int32_t, the heap 3 n of them */
    free(text);
    return demo_fail(CLPA_ERR_INVALID_ARG, "encode: a text segment of %zu bytes is too long",
                     raw_len);
  }
  demo_pretok x;
  const bool decoded = text && demo_pretok_init(&x, text, len);
  sym *s = malloc((len + 1) * sizeof *s);
  cand *h = malloc(3 * (len + 1) * sizeof *h);
  char *mapped = malloc(len * 2 + 1);
  clpa_status st = CLPA_OK;
  if (!decoded || !s || !h || !mapped) {
    st = demo_fail(CLPA_ERR_OUT_OF_MEMORY, "out of memory (encode)");
    goto done;
  }
  for (size_t i = 0; !st && i < x.n;) {
    size_t e = demo_pretok_next(&x, i, t->pre == PRE_LLAMA3);
    st = bpe_word(t, (const uint8_t *)text + x.off[i], x.off[e] - x.off[i], s, h, mapped, out);
    i = e;
  }
done:
  if (decoded) demo_pretok_free(&x);
  free(text);
  free(s);
  free(h);
  free(mapped);
  return st;
}

/* -------------------------------------------------------------- encode */

/* The longest special token at text[i..len), or -1. USER_DEFINED tokens
 * are always taken, CONTROL and UNKNOWN ones only with parse_special (as
 * llama.cpp's tokenizer_st_partition and HF tokenizers' added tokens do). */
static int32_t special_at(const demo_tokenizer *t, const char *text, size_t len, size_t i,
                          bool parse_special) {
  for (int32_t k = 0; k < t->n_specials; k++) {
    int32_t id = t->specials[k];
    size_t n = t->text_len[id];
    if (!parse_special && t->types[id] != DEMO_TOKEN_USER_DEFINED) continue;
    if (n <= len - i && !memcmp(text + i, tok_text(t, id), n)) return id;
  }
  return -1;
}

clpa_status demo_tokenizer_encode(const demo_tokenizer *t, const char *text, size_t len,
                                  bool add_bos, bool parse_special, int32_t **ids, size_t *n_ids) {
  if (!t || (!text && len) || !ids || !n_ids)
    return demo_fail(CLPA_ERR_INVALID_ARG, "demo_tokenizer_encode: NULL argument");
  if (add_bos && t->bos < 0)
    return demo_fail(CLPA_ERR_INVALID_ARG, "add_bos asked for, but the file has no tokenizer.ggml.bos_token_id");
  ids_buf out = {NULL, 0, 0};
  clpa_status st = add_bos ? push(&out, t->bos) : push(&out, 0);
  if (!add_bos) out.n = 0; /* allocates, so that *ids is never NULL */
  bool after_special = true; /* SentencePiece: a space prefix at the start and after specials */
  size_t seg = 0;
  for (size_t i = 0; !st && i <= len;) {
    int32_t sp = i < len ? special_at(t, text, len, i, parse_special) : -1;
    if (sp < 0 && i < len) {
      i++;
      continue;
    }
    if (i > seg) {
      if (t->kind == DEMO_TOKENIZER_SPM)
        st = spm_segment(t, text + seg, i - seg, t->add_space_prefix && after_special, &out);
      else
        st = bpe_segment(t, text + seg, i - seg, &out);
      after_special = false;
    }
    if (sp < 0 || st) break;
    st = push(&out, sp);
    after_special = true;
    i += t->text_len[sp];
    seg = i;
  }
  if (st) {
    free(out.v);
    return st;
  }
  *ids = out.v;
  *n_ids = out.n;
  return CLPA_OK;
}

/* -------------------------------------------------------------- decode */

clpa_status demo_tokenizer_piece(const demo_tokenizer *t, int32_t id, const char **bytes, size_t *len) {
  if (!t || !bytes || !len) return demo_fail(CLPA_ERR_INVALID_ARG, "demo_tokenizer_piece: NULL argument");
  if (id < 0 || id >= t->n_vocab)
    return demo_fail(CLPA_ERR_INVALID_ARG, "token id %" PRId32 " is not in [0, %" PRId32 ")", id, t->n_vocab);
  *bytes = t->piece_arena + t->piece_off[id];
  *len = t->piece_off[id + 1] - t->piece_off[id];
  return CLPA_OK;
}

clpa_status demo_tokenizer_decode(const demo_tokenizer *t, const int32_t *ids, size_t n, char **text,
                                  size_t *len) {
  if (!t || (!ids && n) || !text || !len) return demo_fail(CLPA_ERR_INVALID_ARG, "demo_tokenizer_decode: NULL argument");
  size_t total = 0;
  for (size_t i = 0; i < n; i++) {
    if (ids[i] < 0 || ids[i] >= t->n_vocab)
      return demo_fail(CLPA_ERR_INVALID_ARG, "ids[%zu] = %" PRId32 " is not in [0, %" PRId32 ")", i, ids[i], t->n_vocab);
    total += t->piece_off[ids[i] + 1] - t->piece_off[ids[i]];
  }
  char *p = malloc(total + 1);
  if (!p) return demo_fail(CLPA_ERR_OUT_OF_MEMORY, "out of memory (decode)");
  size_t w = 0;
  for (size_t i = 0; i < n; i++) {
    size_t l = t->piece_off[ids[i] + 1] - t->piece_off[ids[i]];
    memcpy(p + w, t->piece_arena + t->piece_off[ids[i]], l);
    w += l;
  }
  p[w] = '\0';
  if (t->kind == DEMO_TOKENIZER_SPM && t->add_space_prefix && w && p[0] == ' ') {
    memmove(p, p + 1, w);
    w--;
  }
  *text = p;
  *len = w;
  return CLPA_OK;
}
