/* tokenizer.c — SentencePiece-BPE and byte-level BPE from GGUF metadata
 * (see tokenizer.h). Token texts live in one arena with an open-addressing
 * hash from text to id; byte-level merges in a second hash from the pair
 * (left id, right id) to (rank, merged id). Each merge loop keeps the
 * symbols as a linked list over the word and its pairs in a heap, best
 * first: O(n log n) in the length of a word (BPE) or a text segment
 * (SentencePiece), whose segment is the whole text between special tokens. */
#include "tokenizer.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "pretok.h"

/* ------------------------------------------------------------ the object */

typedef struct pair_slot {
  uint64_t key; /* (left << 32 | right) + 1; 0 = empty */
  int32_t rank, merged;
} pair_slot;

enum { PRE_GPT2 = 0, PRE_LLAMA3 = 1 };


struct demo_tokenizer {
  demo_tokenizer_kind kind;
  int pre;
  bool ignore_merges; /* BPE: a word that is a token whole is taken as it is */
  int32_t n_vocab;
  char *text_arena;
  uint32_t *text_off, *text_len; /* [n_vocab] */
  float *scores;                 /* [n_vocab], SPM */
  uint8_t *types;                /* [n_vocab] */
  uint32_t *hash;                /* id + 1, 0 = empty */
  uint64_t hash_mask;
  pair_slot *pairs; /* BPE merges */
  uint64_t pairs_mask;
  char *piece_arena;
  uint32_t *piece_off; /* [n_vocab + 1] */
  int32_t byte_tok[256];
  demo_byte_map bmap;
  int32_t *specials; /* CONTROL / USER_DEFINED ids, longest text first */
  int32_t n_specials;
  int32_t bos, eos, eot, eom, unk;
  int32_t eog[DEMO_TOKENIZER_MAX_EOG], n_eog; /* the tokens that end generation */
  bool add_bos, add_space_prefix;
};

static const char *tok_text(const demo_tokenizer *t, int32_t id) { return t->text_arena + t->text_off[id]; }

/* ------------------------------------------------------------- hashing */

static uint64_t fnv1a(const char *s, size_t n) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 0x100000001b3ULL;
  return h;
}

static uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

/* The id whose text is s[0..n), or -1. */
static int32_t lookup(const demo_tokenizer *t, const char *s, size_t n) {
  for (uint64_t h = fnv1a(s, n) & t->hash_mask;; h = (h + 1) & t->hash_mask) {
    uint32_t v = t->hash[h];
    if (!v) return -1;
    int32_t id = (int32_t)(v - 1);
    if (t->text_len[id] == n && !memcmp(tok_text(t, id), s, n)) return id;
  }
}

/* Later duplicates win, as in llama.cpp's token_to_id map. */
static void insert(demo_tokenizer *t, int32_t id) {
  const char *s = tok_text(t, id);
  size_t n = t->text_len[id];
  for (uint64_t h = fnv1a(s, n) & t->hash_mask;; h = (h + 1) & t->hash_mask) {
    uint32_t v = t->hash[h];
    if (!v || (t->text_len[v - 1] == n && !memcmp(tok_text(t, (int32_t)(v - 1)), s, n))) {
      t->hash[h] = (uint32_t)id + 1;
      return;
    }
  }
}

static const pair_slot *pair_find(const demo_tokenizer *t, int32_t l, int32_t r) {
  uint64_t key = (((uint64_t)(uint32_t)l << 32) | (uint32_t)r) + 1;
  for (uint64_t h = mix64(key) & t->pairs_mask;; h = (h + 1) & t->pairs_mask) {
    if (!t->pairs[h].key) return NULL;
    if (t->pairs[h].key == key) return &t->pairs[h];
  }
}

/* The first (lowest) rank of a pair wins. */
static void pair_insert(demo_tokenizer *t, int32_t l, int32_t r, int32_t rank, int32_t merged) {
  uint64_t key = (((uint64_t)(uint32_t)l << 32) | (uint32_t)r) + 1;
  for (uint64_t h = mix64(key) & t->pairs_mask;; h = (h + 1) & t->pairs_mask) {
    if (t->pairs[h].key == key) return;
    if (!t->pairs[h].key) {
      t->pairs[h] = (pair_slot){key, rank, merged};
      return;
    }
  }
}

static uint64_t pow2_at_least(uint64_t n) {
  uint64_t p = 16;
  while (p < n) p *= 2;
  return p;
}

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
    int32_t id = lookup(t, word + s[a].start, s[a].len + s[b].len);
    if (id < 0) return;
    s[a].has_pair = true;
    s[a].best = t->scores[id];
    s[a].merged = id;
  } else {
    if (s[a].id < 0 || s[b].id < 0) return;
    const pair_slot *p = pair_find(t, s[a].id, s[b].id);
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
  size_t cap = (len + 1) * 3 + 1;
  char *w = malloc(cap);
  sym *s = malloc((len + 1) * sizeof *s);
  cand *h = malloc(3 * (len + 1) * sizeof *h);
  clpa_status st = CLPA_OK;
  if (!w || !s || !h) {
    free(w);
    free(s);
    free(h);
    return demo_fail(CLPA_ERR_OUT_OF_MEMORY, "out of memory (encode)");
  }
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
   * UTF-8 makes the symbols llama.cpp's do */
  static const uint8_t lead_len[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
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
    int32_t id = lookup(t, w + s[i].start, s[i].len);
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
    int32_t id = lookup(t, mapped, mn);
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

/* -------------------------------------------------------------- create */

/* Writes token id's piece at out (NULL: only measures). Returns its length. */
static size_t make_piece(const demo_tokenizer *t, int32_t id, char *out) {
  const char *s = tok_text(t, id);
  size_t n = t->text_len[id], w = 0;
  switch (t->types[id]) {
    case DEMO_TOKEN_CONTROL:
    case DEMO_TOKEN_UNKNOWN: return 0; /* llama.cpp's token_to_piece without special */
    case DEMO_TOKEN_BYTE:
      if (t->kind == DEMO_TOKENIZER_SPM && n == 6) {
        if (out) out[0] = (char)strtoul(s + 3, NULL, 16);
        return 1;
      }
      break;
    case DEMO_TOKEN_USER_DEFINED: /* its text as is, U+2581 included, as llama.cpp's */
      if (out) memcpy(out, s, n);
      return n;
    case DEMO_TOKEN_NORMAL: break;
    default: return 0; /* UNUSED, UNDEFINED: llama.cpp suppresses them like CONTROL */
  }
  if (t->kind == DEMO_TOKENIZER_SPM) {
    for (size_t i = 0; i < n;) {
      if (n - i >= 3 && !memcmp(s + i, "\xe2\x96\x81", 3)) {
        if (out) out[w] = ' ';
        w++;
        i += 3;
      } else {
        if (out) out[w] = s[i];
        w++;
        i++;
      }
    }
    return w;
  }
  /* byte-level: each character back to its byte, as llama_decode_text; one
   * outside GPT-2's table (an invalid byte: U+FFFD) is written there as
   * "[UNK_BYTE_0x" + its UTF-8 in hex + the token's whole text + "]" */
  for (size_t i = 0; i < n;) {
    uint32_t cp;
    const size_t l = demo_utf8_next_cpt((const uint8_t *)s + i, n - i, &cp);
    const int b = demo_byte_map_byte(&t->bmap, cp);
    if (b >= 0) {
      if (out) out[w] = (char)b;
      w++;
    } else {
      char tmp[4], mark[24] = "[UNK_BYTE_0x";
      const size_t k = demo_utf8_put(cp, tmp);
      for (size_t j = 0; j < k; j++) snprintf(mark + 12 + 2 * j, 3, "%02x", (uint8_t)tmp[j]);
      const size_t ml = 12 + 2 * k;
      if (out) {
        memcpy(out + w, mark, ml);
        memcpy(out + w + ml, s, n);
        out[w + ml + n] = ']';
      }
      w += ml + n + 1;
    }
    i += l;
  }
  return w;
}

static bool is_byte_token(const char *s, size_t n) {
  static const char hex[] = "0123456789ABCDEFabcdef";
  return n == 6 && !memcmp(s, "<0x", 3) && s[5] == '>' && s[3] && strchr(hex, s[3]) && s[4] &&
         strchr(hex, s[4]);
}

static clpa_status opt_id(const struct demo_gguf *g, const char *key, int32_t n_vocab, int32_t *out) {
  uint32_t v;
  bool found;
  clpa_status st = demo_gguf_get_u32(g, key, &v, &found);
  if (st) return st;
  *out = -1;
  if (!found) return CLPA_OK;
  if (v >= (uint32_t)n_vocab)
    return demo_fail(CLPA_ERR_INVALID_ARG, "%s = %" PRIu32 " is not a token id (vocab %" PRId32 ")", key, v, n_vocab);
  *out = (int32_t)v;
  return CLPA_OK;
}

static int cmp_special(const void *a, const void *b, const demo_tokenizer *t) {
  int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
  if (t->text_len[x] != t->text_len[y]) return t->text_len[x] > t->text_len[y] ? -1 : 1;
  return (x > y) - (x < y);
}
static _Thread_local const demo_tokenizer *sort_t; /* qsort has no context argument */
static int cmp_special_q(const void *a, const void *b) { return cmp_special(a, b, sort_t); }

static void find_eog(demo_tokenizer *t);

/* Everything after the vocabulary: types, hash, bytes, what ends generation
 * (it may make tokens CONTROL), specials, pieces. */
static clpa_status build_tables(demo_tokenizer *t, const struct demo_gguf *g) {
  demo_gguf_arr types;
  bool found;
  clpa_status st = demo_gguf_get_arr(g, "tokenizer.ggml.token_type", DEMO_GGUF_TYPE_COUNT_, &types, &found);
  if (st) return st;
  if (found && (types.n != (uint64_t)t->n_vocab || types.type == DEMO_GGUF_STRING ||
                types.type == DEMO_GGUF_F32 || types.type == DEMO_GGUF_F64))
    return demo_fail(CLPA_ERR_INVALID_ARG, "tokenizer.ggml.token_type is %" PRIu64 " %s, expected %" PRId32 " integers",
                     types.n, demo_gguf_type_name(types.type), t->n_vocab);
  for (int32_t i = 0; i < t->n_vocab; i++) {
    int64_t ty = found ? demo_gguf_arr_i64(&types, (uint64_t)i) : DEMO_TOKEN_NORMAL;
    if (ty < 0 || ty > DEMO_TOKEN_BYTE)
      return demo_fail(CLPA_ERR_INVALID_ARG, "tokenizer.ggml.token_type[%" PRId32 "] = %" PRId64 " is not a token type",
                       i, ty);
    if (!found && t->kind == DEMO_TOKENIZER_SPM && is_byte_token(tok_text(t, i), t->text_len[i]))
      ty = DEMO_TOKEN_BYTE;
    t->types[i] = (uint8_t)ty;
  }
  if (!found) {
    if (t->bos >= 0) t->types[t->bos] = DEMO_TOKEN_CONTROL;
    if (t->eos >= 0) t->types[t->eos] = DEMO_TOKEN_CONTROL;
    if (t->unk >= 0) t->types[t->unk] = DEMO_TOKEN_UNKNOWN;
  }
  for (int32_t i = 0; i < t->n_vocab; i++) insert(t, i);
  for (int b = 0; b < 256; b++) {
    char buf[8];
    size_t n;
    if (t->kind == DEMO_TOKENIZER_SPM) n = (size_t)snprintf(buf, sizeof buf, "<0x%02X>", b);
    else n = demo_utf8_put(t->bmap.to_cp[b], buf);
    t->byte_tok[b] = lookup(t, buf, n);
  }
  find_eog(t);
  t->specials = malloc((size_t)t->n_vocab * sizeof(int32_t));
  if (!t->specials) return demo_fail(CLPA_ERR_OUT_OF_MEMORY, "out of memory (tokenizer)");
  for (int32_t i = 0; i < t->n_vocab; i++)
    if ((t->types[i] == DEMO_TOKEN_CONTROL || t->types[i] == DEMO_TOKEN_USER_DEFINED ||
         t->types[i] == DEMO_TOKEN_UNKNOWN) &&
        t->text_len[i])
      t->specials[t->n_specials++] = i;
  sort_t = t;
  qsort(t->specials, (size_t)t->n_specials, sizeof(int32_t), cmp_special_q);
  sort_t = NULL;
  uint64_t total = 0;
  for (int32_t i = 0; i < t->n_vocab; i++) {
    t->piece_off[i] = (uint32_t)total;
    total += make_piece(t, i, NULL);
    if (total > UINT32_MAX) /* "[UNK_BYTE_0x...]" repeats a token's text for each odd character */
      return demo_fail(CLPA_ERR_INVALID_ARG,
                       "tokenizer.ggml.tokens: the pieces up to token %" PRId32 " pass 4 GiB", i);
  }
  t->piece_off[t->n_vocab] = (uint32_t)total;
  t->piece_arena = malloc((size_t)total + 1);
  if (!t->piece_arena) return demo_fail(CLPA_ERR_OUT_OF_MEMORY, "out of memory (tokenizer pieces)");
  for (int32_t i = 0; i < t->n_vocab; i++) make_piece(t, i, t->piece_arena + t->piece_off[i]);
  return CLPA_OK;
}

static clpa_status build_merges(demo_tokenizer *t, const struct demo_gguf *g) {
  demo_gguf_arr m;
  clpa_status st = demo_gguf_get_arr(g, "tokenizer.ggml.merges", DEMO_GGUF_STRING, &m, NULL);
  if (st) return st;
  if (m.n >= (1u << 24))
    return demo_fail(CLPA_ERR_INVALID_ARG, "tokenizer.ggml.merges has %" PRIu64 " merges (at most 2^24)", m.n);
  t->pairs_mask = pow2_at_least(m.n * 2 + 1) - 1;
  t->pairs = calloc((size_t)t->pairs_mask + 1, sizeof *t->pairs);
  if (!t->pairs) return demo_fail(CLPA_ERR_OUT_OF_MEMORY, "out of memory (merges)");
  for (uint64_t i = 0; i < m.n; i++) {
    const demo_gguf_str *s = &m.strs[i];
    /* the separator is the first space after the first character */
    const char *sp = s->len > 1 ? memchr(s->s + 1, ' ', s->len - 1) : NULL;
    if (!sp)
      return demo_fail(CLPA_ERR_INVALID_ARG, "tokenizer.ggml.merges[%" PRIu64 "] = '%.60s' is not \"left right\"", i,
                       s->s);
    size_t ll = (size_t)(sp - s->s), rl = s->len - ll - 1;
    int32_t l = lookup(t, s->s, ll), r = lookup(t, sp + 1, rl);
    char cat[512];
    int32_t merged = -1;
    if (ll + rl < sizeof cat) {
      memcpy(cat, s->s, ll);
      memcpy(cat + ll, sp + 1, rl);
      merged = lookup(t, cat, ll + rl);
    }
    if (l < 0 || r < 0 || merged < 0)
      return demo_fail(CLPA_ERR_INVALID_ARG,
                       "tokenizer.ggml.merges[%" PRIu64 "] = '%.60s': %s is not a token", i, s->s,
                       l < 0 ? "the left part" : r < 0 ? "the right part" : "the merged text");
    pair_insert(t, l, r, (int32_t)i, merged);
  }
  return CLPA_OK;
}

/* tokenizer.ggml.pre as llama.cpp's vocabulary loader reads it: the first
 * names split with Llama 3's regex, take a word that is a token whole
 * (ignore_merges) and add BOS unless add_bos_token says otherwise (Llama 3
 * files converted before add_bos_token was written have none); the second
 * use the same regex but always merge and add BOS only when asked. Any
 * other name splits with GPT-2's regex. */
static clpa_status pre_tokenizer(demo_tokenizer *t, const struct demo_gguf *g) {
  static const char *const llama3[] = {"llama3",    "llama-v3", "llama-bpe", "falcon3",
                                       "falcon-h1", "pixtral",  "midm-2.0",  "lfm2",
                                       "jina-v5-nano"};
  static const char *const llama3_regex[] = {"smaug-bpe", "dbrx"};
  demo_gguf_str pre = {"", 0};
  bool found;
  clpa_status st = demo_gguf_get_str(g, "tokenizer.ggml.pre", &pre, &found);
  t->pre = PRE_GPT2;
  if (st || !found || t->kind != DEMO_TOKENIZER_BPE) return st;
  for (size_t i = 0; i < sizeof llama3 / sizeof *llama3; i++)
    if (!strcmp(pre.s, llama3[i])) t->pre = PRE_LLAMA3, t->ignore_merges = true;
  for (size_t i = 0; i < sizeof llama3_regex / sizeof *llama3_regex; i++)
    if (!strcmp(pre.s, llama3_regex[i])) t->pre = PRE_LLAMA3;
  return CLPA_OK;
}

/* The ids of texts[0 .. n) that are tokens, first found to last. */
static int32_t find_texts(const demo_tokenizer *t, const char *const *texts, size_t n, int32_t *ids,
                          int32_t cap) {
  int32_t k = 0;
  for (size_t i = 0; i < n && k < cap; i++) {
    const int32_t id = lookup(t, texts[i], strlen(texts[i]));
    if (id >= 0) ids[k++] = id;
  }
  return k;
}

static void eog_add(demo_tokenizer *t, int32_t id) {
  if (id < 0 || t->n_eog == DEMO_TOKENIZER_MAX_EOG) return;
  for (int32_t i = 0; i < t->n_eog; i++)
    if (t->eog[i] == id) return;
  t->eog[t->n_eog++] = id;
}

/* What ends generation, as llama.cpp's vocabulary loader finds it: without
 * eot_token_id (or eom_token_id) the first of its end-of-turn texts that is
 * a token (an older Llama 3 Instruct file: eos <|end_of_text|>, turns
 * ended by <|eot_id|>); then eos, eot, eom and every token of its
 * end-of-generation texts. The tokens found by text are made CONTROL, as
 * llama.cpp makes them before it builds its special tokens and pieces (so
 * they print nothing and are split out only with parse_special). */
static void find_eog(demo_tokenizer *t) {
  static const char *const eot_texts[] = {
      "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<EOT>", "_<EOT>",
      "<\xef\xbd\x9c" "end\xe2\x96\x81" "of\xe2\x96\x81" "sentence\xef\xbd\x9c>"}; /* DeepSeek's */
  static const char *const eom_texts[] = {"<|eom_id|>"};
  static const char *const eog_texts[] = {"<|eot_id|>",    "<|im_end|>",    "<|end|>",
                                          "<end_of_turn>", "<|endoftext|>", "<|eom_id|>",
                                          "<EOT>",         "_<EOT>",        "<|end_of_text|>"};
  if (t->eot < 0 && find_texts(t, eot_texts, sizeof eot_texts / sizeof *eot_texts, &t->eot, 1))
    t->types[t->eot] = DEMO_TOKEN_CONTROL;
  if (t->eom < 0 && find_texts(t, eom_texts, 1, &t->eom, 1)) t->types[t->eom] = DEMO_TOKEN_CONTROL;
  eog_add(t, t->eos), eog_add(t, t->eot), eog_add(t, t->eom);
  int32_t ids[sizeof eog_texts / sizeof *eog_texts];
  const int32_t n = find_texts(t, eog_texts, sizeof eog_texts / sizeof *eog_texts, ids,
                               (int32_t)(sizeof ids / sizeof *ids));
  for (int32_t i = 0; i < n; i++) {
    eog_add(t, ids[i]);
    t->types[ids[i]] = DEMO_TOKEN_CONTROL;
  }
}

static clpa_status create(demo_tokenizer *t, const struct demo_gguf *g) {
  demo_gguf_str model = {"", 0};
  demo_gguf_arr toks;
  bool found;
  clpa_status st;
  if ((st = demo_gguf_get_str(g, "tokenizer.ggml.model", &model, NULL))) return st;
  if (!strcmp(model.s, "llama")) t->kind = DEMO_TOKENIZER_SPM;
  else if (!strcmp(model.s, "gpt2")) t->kind = DEMO_TOKENIZER_BPE;
  else
    return demo_fail(CLPA_ERR_UNSUPPORTED, "tokenizer.ggml.model '%.60s' is not supported (only 'llama' and 'gpt2')",
                     model.s);
  if ((st = demo_gguf_get_arr(g, "tokenizer.ggml.tokens", DEMO_GGUF_STRING, &toks, NULL)))
    return st;
  if (toks.n == 0 || toks.n >= INT32_MAX)
    return demo_fail(CLPA_ERR_INVALID_ARG, "tokenizer.ggml.tokens has %" PRIu64 " tokens", toks.n);
  t->n_vocab = (int32_t)toks.n;
  uint64_t total = 0;
  for (uint64_t i = 0; i < toks.n; i++) total += toks.strs[i].len + 1;
  if (total > UINT32_MAX) return demo_fail(CLPA_ERR_INVALID_ARG, "tokenizer.ggml.tokens is too large");
  size_t nv = (size_t)toks.n;
  t->text_arena = malloc((size_t)total);
  t->text_off = malloc(nv * sizeof(uint32_t));
  t->text_len = malloc(nv * sizeof(uint32_t));
  t->types = malloc(nv);
  t->piece_off = malloc((nv + 1) * sizeof(uint32_t));
  t->hash_mask = pow2_at_least(toks.n * 2 + 1) - 1;
  t->hash = calloc((size_t)t->hash_mask + 1, sizeof(uint32_t));
  if (!t->text_arena || !t->text_off || !t->text_len || !t->types || !t->piece_off || !t->hash)
    return demo_fail(CLPA_ERR_OUT_OF_MEMORY, "out of memory (tokenizer of %" PRIu64 " tokens)", toks.n);
  size_t w = 0;
  for (size_t i = 0; i < nv; i++) {
    memcpy(t->text_arena + w, toks.strs[i].s, toks.strs[i].len + 1);
    t->text_off[i] = (uint32_t)w;
    t->text_len[i] = (uint32_t)toks.strs[i].len;
    w += toks.strs[i].len + 1;
  }
  if (t->kind == DEMO_TOKENIZER_SPM) {
    demo_gguf_arr sc;
    if ((st = demo_gguf_get_arr(g, "tokenizer.ggml.scores", DEMO_GGUF_F32, &sc, NULL)))
      return st;
    if (sc.n != toks.n)
      return demo_fail(CLPA_ERR_INVALID_ARG, "tokenizer.ggml.scores has %" PRIu64 " scores for %" PRIu64 " tokens",
                       sc.n, toks.n);
    t->scores = malloc(nv * sizeof(float));
    if (!t->scores) return demo_fail(CLPA_ERR_OUT_OF_MEMORY, "out of memory (scores)");
    for (size_t i = 0; i < nv; i++) t->scores[i] = demo_gguf_arr_f32(&sc, i);
  }
  if ((st = opt_id(g, "tokenizer.ggml.bos_token_id", t->n_vocab, &t->bos))) return st;
  if ((st = opt_id(g, "tokenizer.ggml.eos_token_id", t->n_vocab, &t->eos))) return st;
  if ((st = opt_id(g, "tokenizer.ggml.unknown_token_id", t->n_vocab, &t->unk))) return st;
  if ((st = opt_id(g, "tokenizer.ggml.eot_token_id", t->n_vocab, &t->eot))) return st;
  if ((st = opt_id(g, "tokenizer.ggml.eom_token_id", t->n_vocab, &t->eom))) return st;
  if ((st = pre_tokenizer(t, g))) return st;
  t->add_bos = t->kind == DEMO_TOKENIZER_SPM || t->ignore_merges;
  if ((st = demo_gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &t->add_bos, &found)))
    return st;
  t->add_space_prefix = t->kind == DEMO_TOKENIZER_SPM;
  if ((st = demo_gguf_get_bool(g, "tokenizer.ggml.add_space_prefix", &t->add_space_prefix, &found)))
    return st;
  if (t->kind == DEMO_TOKENIZER_BPE) t->add_space_prefix = false;
  if (t->unk < 0 && t->kind == DEMO_TOKENIZER_SPM) {
    /* llama.cpp's SPM default: token 0 when it is "<unk>" */
    if (t->text_len[0] == 5 && !memcmp(tok_text(t, 0), "<unk>", 5)) t->unk = 0;
  }
  if ((st = build_tables(t, g))) return st;
  if (t->kind == DEMO_TOKENIZER_BPE && (st = build_merges(t, g))) return st;
  return CLPA_OK;
}

clpa_status demo_tokenizer_create(const struct demo_gguf *g, demo_tokenizer **out) {
  if (!g || !out) return demo_fail(CLPA_ERR_INVALID_ARG, "demo_tokenizer_create: NULL argument");
  demo_tokenizer *t = calloc(1, sizeof *t);
  if (!t) return demo_fail(CLPA_ERR_OUT_OF_MEMORY, "out of memory (tokenizer)");
  demo_byte_map_init(&t->bmap);
  clpa_status st = create(t, g);
  if (st) {
    demo_tokenizer_destroy(t);
    return st;
  }
  *out = t;
  return CLPA_OK;
}

void demo_tokenizer_destroy(demo_tokenizer *t) {
  if (!t) return;
  free(t->text_arena);
  free(t->text_off);
  free(t->text_len);
  free(t->scores);
  free(t->types);
  free(t->hash);
  free(t->pairs);
  free(t->piece_arena);
  free(t->piece_off);
  free(t->specials);
  free(t);
}

demo_tokenizer_kind demo_tokenizer_get_kind(const demo_tokenizer *t) { return t->kind; }
int32_t demo_tokenizer_vocab_size(const demo_tokenizer *t) { return t->n_vocab; }
int32_t demo_tokenizer_bos(const demo_tokenizer *t) { return t->bos; }
int32_t demo_tokenizer_eos(const demo_tokenizer *t) { return t->eos; }
bool demo_tokenizer_add_bos(const demo_tokenizer *t) { return t->add_bos; }
bool demo_tokenizer_is_eog(const demo_tokenizer *t, int32_t id) {
  for (int32_t i = 0; i < t->n_eog; i++)
    if (t->eog[i] == id) return true;
  return false;
}
const int32_t *demo_tokenizer_eog(const demo_tokenizer *t, int32_t *n) {
  *n = t->n_eog;
  return t->eog;
}
int32_t demo_tokenizer_token_type(const demo_tokenizer *t, int32_t id) {
  return id >= 0 && id < t->n_vocab ? t->types[id] : DEMO_TOKEN_UNDEFINED;
}
const char *demo_tokenizer_token_text(const demo_tokenizer *t, int32_t id) {
  return id >= 0 && id < t->n_vocab ? tok_text(t, id) : NULL;
}
