/* tokenizer_vocab.c — the demo tokenizer built from GGUF metadata (see
 * tokenizer.h): token texts in one arena with an open-addressing hash from
 * text to id; byte-level merges in a second hash from the pair (left id,
 * right id) to (rank, merged id); the pieces decode prints, the special
 * tokens encode splits out, and what ends generation, as llama.cpp's
 * vocabulary loader finds them. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "tokenizer_internal.h"

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

int32_t demo_tok_lookup(const demo_tokenizer *t, const char *s, size_t n) {
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

const pair_slot *demo_tok_pair_find(const demo_tokenizer *t, int32_t l, int32_t r) {
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
    t->byte_tok[b] = demo_tok_lookup(t, buf, n);
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
  /* "[UNK_BYTE_0x...]" repeats a token's text for each character outside
   * the byte table, so a token of n such characters has a piece of n * n
   * bytes: bounded by the texts (a real vocabulary's pieces are about as
   * long), or a 64 KB file would ask for 4 GiB */
  uint64_t texts = 0, total = 0;
  for (int32_t i = 0; i < t->n_vocab; i++) texts += t->text_len[i];
  const uint64_t limit = 64 * texts + (1u << 20) < UINT32_MAX ? 64 * texts + (1u << 20)
                                                               : UINT32_MAX;
  for (int32_t i = 0; i < t->n_vocab; i++) {
    t->piece_off[i] = (uint32_t)total;
    total += make_piece(t, i, NULL);
    if (total > limit)
      return demo_fail(CLPA_ERR_INVALID_ARG,
                       "tokenizer.ggml.tokens: the pieces up to token %" PRId32 " pass %" PRIu64
                       " bytes (64 times the texts' %" PRIu64 " bytes, and 1 MiB): token %" PRId32
                       "'s text repeats in its piece for each character outside the byte table",
                       i, limit, texts, i);
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
    int32_t l = demo_tok_lookup(t, s->s, ll), r = demo_tok_lookup(t, sp + 1, rl);
    char cat[512];
    int32_t merged = -1;
    if (ll + rl < sizeof cat) {
      memcpy(cat, s->s, ll);
      memcpy(cat + ll, sp + 1, rl);
      merged = demo_tok_lookup(t, cat, ll + rl);
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
    const int32_t id = demo_tok_lookup(t, texts[i], strlen(texts[i]));
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
