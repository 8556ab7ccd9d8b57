/*
 * tokenizer.h — the tokenizer stored in a GGUF file's metadata, for
 * clpa-demo: text -> token ids (prompt) and ids -> text (streamed output).
 * Host C11, libc only.
 *
 * Two models, chosen by tokenizer.ggml.model:
 *
 *   "llama"  SentencePiece BPE with scores (Llama 1/2, TinyLlama, Mistral):
 *            spaces become U+2581 "▁" (one is also put in front of the text,
 *            and after each special token, when add_space_prefix holds,
 *            as llama.cpp does); the text starts as one symbol per UTF-8
 *            character; the adjacent pair whose concatenation is a token
 *            with the highest score merges first (ties: leftmost), until no
 *            pair is a token. A character that is no token becomes its
 *            UTF-8 bytes' <0xXX> tokens (byte fallback), else the unknown
 *            token.
 *   "gpt2"   byte-level BPE with merges (Llama 3): the text is split into
 *            words by a pre-tokenizer, each word's bytes are mapped to
 *            characters by GPT-2's bytes_to_unicode table, then the adjacent
 *            pair with the lowest merge rank merges first (ties: leftmost).
 *            With tokenizer.ggml.pre "llama-bpe" (or the other names
 *            llama.cpp reads as Llama 3's: "llama3", "llama-v3", "falcon3",
 *            "falcon-h1", "pixtral", "midm-2.0", "lfm2", "jina-v5-nano") a
 *            word that is a token as a whole is taken without merging
 *            (llama.cpp's ignore_merges), BOS is added unless
 *            add_bos_token is false, and the split is Llama 3's regex
 *            ("smaug-bpe" and "dbrx": the same split, but always merged)
 *              (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}
 *              | ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
 *            otherwise GPT-2's
 *              's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 *            A byte that is no valid UTF-8 is U+FFFD there (its three bytes
 *            in the word), as in llama.cpp.
 *
 * What is simplified: the pre-tokenizer's Unicode classes come from a
 * table generated from Python's Unicode database (tools/demo/
 * pretok_classes.h), of Unicode 14 where llama.cpp's may be newer; there,
 * as in llama.cpp, \p{L} is letters only (a combining mark is not one),
 * \p{N} numbers of every script, \s the 25 whitespace code points, and
 * unassigned code points count as letters. Other pre-tokenizers (Qwen,
 * DeepSeek, ...) are not modelled. No Unicode normalization is applied
 * (SentencePiece models usually ask for none at inference in GGUF form).
 *
 * Special tokens are split out of the text before it is tokenized, the
 * longest first at each place: USER_DEFINED tokens always, CONTROL and
 * UNKNOWN tokens (e.g. "<s>", "<unk>", "<|begin_of_text|>", "<|eot_id|>")
 * only when encode is asked to (parse_special), otherwise they are plain
 * text, as in llama.cpp.
 *
 * Errors return a clpa_status with a message in demo_last_error() (error.h):
 * CLPA_ERR_UNSUPPORTED for another tokenizer model ("bert", "t5", ...),
 * CLPA_ERR_INVALID_ARG for missing or malformed metadata (naming the key
 * and, for a bad element, its index), CLPA_ERR_OUT_OF_MEMORY.
 */
#ifndef CLPA_DEMO_TOKENIZER_H
#define CLPA_DEMO_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "clpa_base.h"
#include "error.h"

struct demo_gguf;
typedef struct demo_tokenizer demo_tokenizer;

typedef enum demo_tokenizer_kind {
  DEMO_TOKENIZER_SPM = 0, /* tokenizer.ggml.model "llama" */
  DEMO_TOKENIZER_BPE = 1, /* tokenizer.ggml.model "gpt2" */
} demo_tokenizer_kind;

/* tokenizer.ggml.token_type values */
enum {
  DEMO_TOKEN_UNDEFINED = 0,
  DEMO_TOKEN_NORMAL = 1,
  DEMO_TOKEN_UNKNOWN = 2,
  DEMO_TOKEN_CONTROL = 3,
  DEMO_TOKEN_USER_DEFINED = 4,
  DEMO_TOKEN_UNUSED = 5,
  DEMO_TOKEN_BYTE = 6,
};

/* Builds the tokenizer from g's metadata:
 *   tokenizer.ggml.model*           "llama" or "gpt2"
 *   tokenizer.ggml.tokens*          string array, the vocabulary
 *   tokenizer.ggml.scores           f32 array (* for "llama")
 *   tokenizer.ggml.merges           string array "left right" (* for "gpt2")
 *   tokenizer.ggml.token_type       i32 array (default: NORMAL, "<0xXX>" BYTE
 *                                   for "llama", bos/eos CONTROL)
 *   tokenizer.ggml.pre              string, the pre-tokenizer ("gpt2" style
 *                                   unless one of Llama 3's, see above)
 *   tokenizer.ggml.bos_token_id, eos_token_id, unknown_token_id,
 *   eot_token_id, eom_token_id      u32 (optional; < vocab)
 *   tokenizer.ggml.add_bos_token    bool (default true for "llama" and
 *                                   Llama 3's pre-tokenizers, else false)
 *   tokenizer.ggml.add_space_prefix bool (default true for "llama"; never
 *                                   used by "gpt2")
 * Copies what it needs: g may be closed afterwards. Returns CLPA_OK with
 * *out set, or an error naming the key (nothing allocated). */
clpa_status demo_tokenizer_create(const struct demo_gguf *g, demo_tokenizer **out);
/* Accepts NULL. */
void demo_tokenizer_destroy(demo_tokenizer *t);

demo_tokenizer_kind demo_tokenizer_get_kind(const demo_tokenizer *t);
int32_t demo_tokenizer_vocab_size(const demo_tokenizer *t);
/* Special ids, -1 when the file has none. */
int32_t demo_tokenizer_bos(const demo_tokenizer *t);
int32_t demo_tokenizer_eos(const demo_tokenizer *t);
/* Whether prompts should start with BOS (tokenizer.ggml.add_bos_token). */
bool demo_tokenizer_add_bos(const demo_tokenizer *t);
/* The tokens that end generation, as llama.cpp finds them: eos, eot and eom
 * (without eot_token_id, the first of "<|eot_id|>", "<|im_end|>", "<|end|>",
 * "<end_of_turn>", "<|endoftext|>", "<EOT>", "_<EOT>" and DeepSeek's end of
 * sentence that is a token, made CONTROL; without eom_token_id, "<|eom_id|>"),
 * and every token of "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>",
 * "<|endoftext|>", "<|eom_id|>", "<EOT>", "_<EOT>" and "<|end_of_text|>" (an
 * older Llama 3 Instruct file has eos <|end_of_text|> and no eot_token_id,
 * and ends its turns with <|eot_id|>). Every token found by its text is
 * made CONTROL, as llama.cpp makes it: it prints nothing (demo_tokenizer_
 * piece), and encode splits it out only with parse_special. At most
 * DEMO_TOKENIZER_MAX_EOG. */
#define DEMO_TOKENIZER_MAX_EOG 16
bool demo_tokenizer_is_eog(const demo_tokenizer *t, int32_t id);
/* The same set: *n ids (owned by t). */
const int32_t *demo_tokenizer_eog(const demo_tokenizer *t, int32_t *n);
/* Token id's type (DEMO_TOKEN_*), and its text as stored in the vocabulary
 * (NUL-terminated; NULL for an id out of range). */
int32_t demo_tokenizer_token_type(const demo_tokenizer *t, int32_t id);
const char *demo_tokenizer_token_text(const demo_tokenizer *t, int32_t id);

/* Encodes len bytes of text (need not be valid UTF-8 nor NUL-terminated).
 * add_bos puts BOS first (an error if the file has no BOS);
 * parse_special recognizes special tokens' text (see above). On CLPA_OK,
 * *ids is a malloc'd array of *n_ids ids (free() it; non-NULL even when
 * *n_ids is 0). CLPA_ERR_INVALID_ARG when a character has neither a token,
 * a byte token nor an unknown token to fall back on. */
clpa_status demo_tokenizer_encode(const demo_tokenizer *t, const char *text, size_t len,
                                  bool add_bos, bool parse_special, int32_t **ids, size_t *n_ids);

/* The bytes that token id stands for, for streaming: "▁" is a space, a
 * byte token is its byte (so a piece may be part of a UTF-8 character:
 * print the bytes as they come), CONTROL and UNKNOWN tokens are empty (as
 * llama.cpp's token_to_piece gives them without special, the way
 * llama-cli and llama-server print an answer; before mid-2024 it gave "▅"
 * for an UNKNOWN token of "llama"), and so are UNUSED and UNDEFINED ones;
 * a USER_DEFINED token is its text as stored ("▁" kept, as llama.cpp's).
 * For "gpt2", a character outside GPT-2's byte table in a NORMAL token is
 * written as llama.cpp's llama_decode_text writes it: "[UNK_BYTE_0x", its
 * UTF-8 in hex, the token's whole text, "]" (an invalid byte: U+FFFD's).
 * *bytes stays valid while t lives (not NUL-terminated). Returns CLPA_OK or
 * CLPA_ERR_INVALID_ARG (id out of range). */
clpa_status demo_tokenizer_piece(const demo_tokenizer *t, int32_t id, const char **bytes,
                                 size_t *len);

/* Concatenates the pieces of n ids into a malloc'd NUL-terminated *text
 * (free() it) of *len bytes; for "llama" with add_space_prefix, drops the
 * one space that encode put in front, so decode(encode(s)) == s for text
 * without special tokens. Not llama.cpp's llama_detokenize, which the
 * demo's answers do not follow either (they are their pieces one after
 * another, as llama-cli and llama-server print them, report.h): that one
 * strips a space from the first id's piece only, so none after a BOS or
 * another CONTROL id ([BOS ▁hello] is " hello" there, "hello" here), and
 * for "gpt2" applies clean_up_tokenization_spaces (" ." to ".", " 's" to
 * "'s", ...; llama.cpp's clean_spaces, set by tokenizer.ggml.pre, e.g. on
 * for Llama 3, no GGUF key). Returns CLPA_OK or CLPA_ERR_INVALID_ARG (an
 * id out of range, named by its index). */
clpa_status demo_tokenizer_decode(const demo_tokenizer *t, const int32_t *ids, size_t n, char **text,
                                  size_t *len);

#endif /* CLPA_DEMO_TOKENIZER_H */
