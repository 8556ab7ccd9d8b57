/* tokenizer_internal.h — the demo tokenizer's object, shared by its two
 * halves: tokenizer_vocab.c builds it from GGUF metadata (the token
 * tables, their hashes, the pieces, the specials, what ends generation);
 * tokenizer.c encodes and decodes with it (see tokenizer.h). */
#ifndef CLPA_DEMO_TOKENIZER_INTERNAL_H
#define CLPA_DEMO_TOKENIZER_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pretok.h"
#include "tokenizer.h"

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

static inline const char *tok_text(const demo_tokenizer *t, int32_t id) { return t->text_arena + t->text_off[id]; }

/* The id whose text is s[0..n), or -1 (tokenizer_vocab.c's text hash). */
int32_t demo_tok_lookup(const demo_tokenizer *t, const char *s, size_t n);
/* The merge of ids (l, r), or NULL (the byte-level merges' hash). */
const pair_slot *demo_tok_pair_find(const demo_tokenizer *t, int32_t l, int32_t r);

#endif
