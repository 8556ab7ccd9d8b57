/*
 * test_demo_gguf.c — the demo's GGUF reader and tokenizers (host suite).
 *
 * The test writes its own tiny GGUF files (a writer below: metadata of
 * every type, a two-layer Llama of hidden 8 with f32/f16/bf16 tensors,
 * tensors of each quantized block type quant.h knows, and a tokenizer of
 * each kind), reads them back and
 * checks every value; encodes and decodes strings whose ids were worked
 * out by hand for the tiny vocabularies; then corrupts the file in every
 * way the reader must catch and checks the status and that the message
 * names the problem; and ends with seeded random byte flips that must
 * never crash (run under ASan/UBSan too).
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__unix__) || defined(__APPLE__)
#include <sys/stat.h>
#include <unistd.h>
#endif

#include "../tools/demo/gguf.h"
#include "../tools/demo/pretok.h"
#include "../tools/demo/quant.h"
#include "../tools/demo/tokenizer.h"
#include "clpa_base.h"
#include "tap.h"

/* ================================================================ writer */

typedef struct buf {
  uint8_t *p;
  size_t n, cap;
} buf;

static void put(buf *b, const void *src, size_t n) {
  if (b->n + n > b->cap) {
    b->cap = (b->n + n) * 2 + 64;
    b->p = realloc(b->p, b->cap);
    if (!b->p) BAIL_OUT("out of memory");
  }
  memcpy(b->p + b->n, src, n);
  b->n += n;
}
static void put_le(buf *b, uint64_t v, int n) {
  uint8_t x[8];
  for (int i = 0; i < n; i++) x[i] = (uint8_t)(v >> (8 * i));
  put(b, x, (size_t)n);
}
static void put_strn(buf *b, const char *s, size_t n) {
  put_le(b, n, 8);
  put(b, s, n);
}
static void put_str(buf *b, const char *s) { put_strn(b, s, strlen(s)); }
static uint64_t f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}
static uint64_t f64_bits(double f) {
  uint64_t u;
  memcpy(&u, &f, 8);
  return u;
}

/* What a file holds, and the variations the corruption tests need. */
typedef struct spec {
  int tok;                  /* DEMO_TOKENIZER_SPM / _BPE */
  const char *pre;          /* tokenizer.ggml.pre (BPE), NULL: none */
  const char *arch;         /* general.architecture */
  const char *skip_key;     /* a metadata key left out */
  const char *skip_tensor;  /* a tensor left out */
  const char *odd_tensor;   /* a tensor stored as i8 instead */
  const char *tok_model;    /* tokenizer.ggml.model override */
  size_t arch_len, tok_model_len; /* their lengths when they hold a NUL (0: strlen) */
  uint32_t alignment;       /* 0: no general.alignment key (32) */
  int32_t user_defined;     /* a token written as USER_DEFINED (0: none) */
  bool dup_key, bad_merge, block_count_as_string;
  bool no_extras;           /* without the extra.* tensors (the quantized ones) */
  const char *more_tensor;  /* an f32 tensor of [HIDDEN] added (NULL: none) */
  struct {                  /* more metadata after the Llama config's (key NULL: none) */
    const char *key;
    uint32_t type;          /* DEMO_GGUF_U32, _F32, _BOOL or _STRING */
    uint64_t bits;          /* the value's bits (f32_bits for f32) */
    const char *str;        /* the value of a string */
  } more[3];
} spec;

/* Offsets in the written file of fields the corruption tests patch. */
typedef struct marks {
  size_t name_len;       /* general.name's value length */
  size_t first_key_len;  /* pair 0's key length */
  size_t tokens_count;   /* tokenizer.ggml.tokens' element count */
  size_t u8_type;        /* test.u8's value type */
  size_t arr_elem_type;  /* test.arr_u8's element type */
  size_t t_ndims[64], t_type[64], t_offset[64], t_name[64]; /* per tensor */
  int n_tensors, k_tensor; /* index of blk.0.attn_k.weight */
  size_t infos_end;      /* end of the tensor infos */
  uint64_t data_start;
  size_t data_end;       /* end of the last tensor's bytes (padding follows) */
} marks;

typedef struct kvs {
  buf b;
  uint64_t n;
  const spec *sp;
  size_t base; /* where b starts in the file (24) */
} kvs;

static bool skip(kvs *k, const char *key) {
  if (k->sp->skip_key && !strcmp(k->sp->skip_key, key)) return true;
  put_str(&k->b, key);
  k->n++;
  return false;
}
static void kv_scalar(kvs *k, const char *key, uint32_t type, uint64_t bits, int size) {
  if (skip(k, key)) return;
  put_le(&k->b, type, 4);
  put_le(&k->b, bits, size);
}
static void kv_strn(kvs *k, const char *key, const char *v, size_t n, size_t *len_mark) {
  if (skip(k, key)) return;
  put_le(&k->b, DEMO_GGUF_STRING, 4);
  if (len_mark) *len_mark = k->base + k->b.n;
  put_strn(&k->b, v, n);
}
static void kv_str(kvs *k, const char *key, const char *v, size_t *len_mark) {
  kv_strn(k, key, v, strlen(v), len_mark);
}
static void kv_arr_head(kvs *k, uint32_t et, uint64_t n, size_t *type_mark, size_t *count_mark) {
  put_le(&k->b, DEMO_GGUF_ARRAY, 4);
  if (type_mark) *type_mark = k->base + k->b.n;
  put_le(&k->b, et, 4);
  if (count_mark) *count_mark = k->base + k->b.n;
  put_le(&k->b, n, 8);
}
static void kv_arr_strs(kvs *k, const char *key, char **v, size_t n, size_t *count_mark) {
  if (skip(k, key)) return;
  kv_arr_head(k, DEMO_GGUF_STRING, n, NULL, count_mark);
  for (size_t i = 0; i < n; i++) put_str(&k->b, v[i]);
}

/* ------------------------------------------------------ tiny vocabularies */

#define SPM_VOCAB 276
#define BPE_VOCAB 272
static char *spm_tokens[SPM_VOCAB], *bpe_tokens[BPE_VOCAB];
static float spm_scores[SPM_VOCAB];
static int32_t spm_types[SPM_VOCAB], bpe_types[BPE_VOCAB];
static char *bpe_merges[11];

static char *dupstr(const char *s) {
  char *p = malloc(strlen(s) + 1);
  if (!p) BAIL_OUT("out of memory");
  return strcpy(p, s);
}

/* SentencePiece: <unk> <s> </s>, 256 byte tokens, then pieces with scores. */
static void make_spm_vocab(void) {
  static const struct {
    const char *s;
    float score;
  } pieces[] = {
      {"\xe2\x96\x81", -1}, {"h", -2},   {"e", -2},     {"l", -2},      {"o", -2},
      {"w", -2},            {"r", -2},   {"d", -2},     {"he", -3},     {"ll", -1.5f},
      {"llo", -4},          {"hello", -5}, {"\xe2\x96\x81hello", -6},   {"\xe2\x96\x81w", -3},
      {"or", -3.5f},        {"ld", -2.5f}, {"\xe2\x96\x81wor", -7},
  };
  spm_tokens[0] = dupstr("<unk>");
  spm_types[0] = DEMO_TOKEN_UNKNOWN;
  spm_tokens[1] = dupstr("<s>");
  spm_tokens[2] = dupstr("</s>");
  spm_types[1] = spm_types[2] = DEMO_TOKEN_CONTROL;
  for (int b = 0; b < 256; b++) {
    char s[8];
    snprintf(s, sizeof s, "<0x%02X>", b);
    spm_tokens[3 + b] = dupstr(s);
    spm_types[3 + b] = DEMO_TOKEN_BYTE;
  }
  for (int i = 0; i < 17; i++) {
    spm_tokens[259 + i] = dupstr(pieces[i].s);
    spm_scores[259 + i] = pieces[i].score;
    spm_types[259 + i] = DEMO_TOKEN_NORMAL;
  }
}

/* Byte-level: ids 0..255 are the bytes' characters (id == byte), then two
 * specials and the merged tokens. */
static void make_bpe_vocab(void) {
  for (int b = 0; b < 256; b++) {
    bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
    int extra = 0;
    for (int c = 0; c < b; c++)
      if (!((c >= 33 && c <= 126) || (c >= 161 && c <= 172) || c >= 174)) extra++;
    uint32_t cp = printable ? (uint32_t)b : 256u + (uint32_t)extra;
    char s[4] = {0};
    if (cp < 0x80) s[0] = (char)cp;
    else {
      s[0] = (char)(0xc0 | (cp >> 6));
      s[1] = (char)(0x80 | (cp & 0x3f));
    }
    bpe_tokens[b] = dupstr(s);
    bpe_types[b] = DEMO_TOKEN_NORMAL;
  }
  static const char *more[] = {"<|begin_of_text|>", "<|end_of_text|>", "ll", "he", "hell", "hello",
                               "\xc4\xa0w", "or", "\xc4\xa0wor", "ld", "\xc4\xa0world",
                               "\xc3\x83\xc2\xa9", "\xc4\xa0\x32" /* Ġ2 */,
                               "world" /* no merge makes it */,
                               "<|eot_id|>", "<|im_end|>" /* end-of-generation texts */};
  for (int i = 0; i < 16; i++) {
    bpe_tokens[256 + i] = dupstr(more[i]);
    bpe_types[256 + i] = i < 2 || i >= 14 ? DEMO_TOKEN_CONTROL : DEMO_TOKEN_NORMAL;
  }
  static const char *merges[] = {"l l", "h e", "he ll", "\xc4\xa0 w", "o r", "hell o", "l d",
                                 "\xc4\xa0w or", "\xc4\xa0wor ld", "\xc3\x83 \xc2\xa9", "\xc4\xa0 2"};
  for (int i = 0; i < 11; i++) bpe_merges[i] = dupstr(merges[i]);
}

/* ------------------------------------------------------------ the model */

#define HIDDEN 8
#define HEADS 2
#define KV_HEADS 1
#define HD 4
#define FFN 12
#define LAYERS 2

typedef struct tdesc {
  char name[48];
  uint32_t type;
  int64_t ne0, ne1; /* ne1 0: 1-D */
} tdesc;

static float tval(int t, int64_t i) { return (float)(((i * 7 + t * 3) % 17) - 8) * 0.125f; }

static int model_tensors(const spec *sp, tdesc *td) {
  int n = 0, vocab = sp->tok == DEMO_TOKENIZER_SPM ? SPM_VOCAB : BPE_VOCAB;
#define T(nm, ty, a, b) (snprintf(td[n].name, sizeof td[n].name, "%s", nm), td[n].type = ty, td[n].ne0 = a, td[n++].ne1 = b)
  T("token_embd.weight", DEMO_GGML_F16, HIDDEN, vocab);
  T("output_norm.weight", DEMO_GGML_F32, HIDDEN, 0);
  if (sp->tok == DEMO_TOKENIZER_SPM) T("output.weight", DEMO_GGML_BF16, HIDDEN, vocab); /* BPE: tied */
  for (int l = 0; l < LAYERS; l++) {
    static const struct {
      const char *w;
      uint32_t ty;
      int64_t a, b;
    } per[] = {{"attn_norm", DEMO_GGML_F32, HIDDEN, 0},      {"attn_q", DEMO_GGML_F32, HIDDEN, HEADS * HD},
               {"attn_k", DEMO_GGML_F16, HIDDEN, KV_HEADS * HD}, {"attn_v", DEMO_GGML_BF16, HIDDEN, KV_HEADS * HD},
               {"attn_output", DEMO_GGML_F32, HEADS * HD, HIDDEN}, {"ffn_norm", DEMO_GGML_F32, HIDDEN, 0},
               {"ffn_gate", DEMO_GGML_F16, HIDDEN, FFN},      {"ffn_up", DEMO_GGML_BF16, HIDDEN, FFN},
               {"ffn_down", DEMO_GGML_F32, FFN, HIDDEN}};
    for (int i = 0; i < 9; i++) {
      char nm[48];
      snprintf(nm, sizeof nm, "blk.%d.%s.weight", l, per[i].w);
      T(nm, per[i].ty, per[i].a, per[i].b);
    }
  }
  /* quantized: encoded by quant.c from tval (q8_0's blocks are by hand) */
  T("extra.q4_0", DEMO_GGML_Q4_0, 64, 2);
  T("extra.q4_K", DEMO_GGML_Q4_K, 256, 2);
  T("extra.q5_K", DEMO_GGML_Q5_K, 512, 0);
  T("extra.q6_K", DEMO_GGML_Q6_K, 256, 3);
  T("extra.q8", DEMO_GGML_Q8_0, 32, 2); /* last: the corruption tests name it */
  if (sp->more_tensor) T(sp->more_tensor, DEMO_GGML_F32, HIDDEN, 0);
#undef T
  int w = 0;
  for (int i = 0; i < n; i++) {
    if (sp->skip_tensor && !strcmp(sp->skip_tensor, td[i].name)) continue;
    if (sp->no_extras && !strncmp(td[i].name, "extra.", 6)) continue;
    if (sp->odd_tensor && !strcmp(sp->odd_tensor, td[i].name)) td[i].type = 24; /* i8 */
    td[w++] = td[i];
  }
  return w;
}

static size_t type_bytes(uint32_t t, int64_t n) {
  if (demo_quant_supported(t)) return (size_t)n / demo_quant_block_elems(t) * demo_quant_block_bytes(t);
  return t == DEMO_GGML_F32 ? 4 * (size_t)n : t == 24 ? (size_t)n : 2 * (size_t)n;
}

/* Tensor i's quantized bytes as the writer stores them: quant.c's encoding
 * of tval; q8_0 by hand, block b = scale 0.5, quants 0..31 (element e is
 * e % 32 * 0.5). Returns malloc'd bytes. */
static uint8_t *quant_bytes(int i, uint32_t type, int64_t ne) {
  uint8_t *q = malloc(type_bytes(type, ne));
  float *v = malloc(sizeof(float) * (size_t)ne);
  if (!q || !v) BAIL_OUT("out of memory");
  for (int64_t e = 0; e < ne; e++) v[e] = tval(i, e);
  if (type == DEMO_GGML_Q8_0)
    for (int64_t b = 0; b < ne / 32; b++) {
      q[34 * b] = (uint8_t)clpa_f32_to_f16(0.5f);
      q[34 * b + 1] = (uint8_t)(clpa_f32_to_f16(0.5f) >> 8);
      for (int k = 0; k < 32; k++) q[34 * b + 2 + k] = (uint8_t)k;
    }
  else if (demo_quant_quantize(type, v, q, (uint64_t)ne))
    BAIL_OUT("%s", demo_last_error());
  free(v);
  return q;
}

static void write_metadata(kvs *k, const spec *sp, marks *m) {
  const char *arch = sp->arch ? sp->arch : "llama";
  kv_strn(k, "general.architecture", arch, sp->arch_len ? sp->arch_len : strlen(arch), NULL);
  kv_str(k, "general.name", "tiny", &m->name_len);
  if (sp->alignment) kv_scalar(k, "general.alignment", DEMO_GGUF_U32, sp->alignment, 4);
  /* one of every type */
  m->u8_type = k->base + k->b.n + 8 + strlen("test.u8");
  kv_scalar(k, "test.u8", DEMO_GGUF_U8, 200, 1);
  kv_scalar(k, "test.i8", DEMO_GGUF_I8, (uint8_t)-100, 1);
  kv_scalar(k, "test.u16", DEMO_GGUF_U16, 60000, 2);
  kv_scalar(k, "test.i16", DEMO_GGUF_I16, (uint16_t)-30000, 2);
  kv_scalar(k, "test.u32", DEMO_GGUF_U32, 4000000000u, 4);
  kv_scalar(k, "test.i32", DEMO_GGUF_I32, (uint32_t)-2000000000, 4);
  kv_scalar(k, "test.f32", DEMO_GGUF_F32, f32_bits(1.5f), 4);
  kv_scalar(k, "test.bool", DEMO_GGUF_BOOL, 1, 1);
  kv_str(k, "test.str", "hello", NULL);
  kv_scalar(k, "test.u64", DEMO_GGUF_U64, (1ull << 40) + 3, 8);
  kv_scalar(k, "test.i64", DEMO_GGUF_I64, (uint64_t)-(1ll << 40), 8);
  kv_scalar(k, "test.f64", DEMO_GGUF_F64, f64_bits(0.1), 8);
  if (!skip(k, "test.arr_u8")) {
    kv_arr_head(k, DEMO_GGUF_U8, 3, &m->arr_elem_type, NULL);
    put_le(&k->b, 0x030201, 3);
  }
  if (!skip(k, "test.arr_i16")) {
    kv_arr_head(k, DEMO_GGUF_I16, 2, NULL, NULL);
    put_le(&k->b, 0xffff, 2);
    put_le(&k->b, 7, 2);
  }
  if (!skip(k, "test.arr_f64")) {
    kv_arr_head(k, DEMO_GGUF_F64, 5, NULL, NULL);
    put_le(&k->b, f64_bits(0.5), 8);
    put_le(&k->b, f64_bits(-2), 8);
    put_le(&k->b, f64_bits(0.49999999999999994), 8);
    put_le(&k->b, f64_bits(4503599627370497.0), 8); /* 2^52 + 1 */
    put_le(&k->b, f64_bits(-2.5), 8);
  }
  if (!skip(k, "test.arr_bool")) {
    kv_arr_head(k, DEMO_GGUF_BOOL, 2, NULL, NULL);
    put_le(&k->b, 1, 1);
    put_le(&k->b, 0, 1);
  }
  char *strs[] = {"a", "", "ccc"};
  kv_arr_strs(k, "test.arr_str", strs, 3, NULL);
  if (sp->dup_key) kv_scalar(k, "test.u8", DEMO_GGUF_U8, 1, 1);
  /* the Llama config */
  if (sp->block_count_as_string) kv_str(k, "llama.block_count", "2", NULL);
  else kv_scalar(k, "llama.block_count", DEMO_GGUF_U32, LAYERS, 4);
  kv_scalar(k, "llama.embedding_length", DEMO_GGUF_U32, HIDDEN, 4);
  kv_scalar(k, "llama.attention.head_count", DEMO_GGUF_U32, HEADS, 4);
  kv_scalar(k, "llama.attention.head_count_kv", DEMO_GGUF_U32, KV_HEADS, 4);
  kv_scalar(k, "llama.feed_forward_length", DEMO_GGUF_U32, FFN, 4);
  kv_scalar(k, "llama.context_length", DEMO_GGUF_U32, 64, 4);
  kv_scalar(k, "llama.rope.freq_base", DEMO_GGUF_F32, f32_bits(500000.0f), 4);
  kv_scalar(k, "llama.attention.layer_norm_rms_epsilon", DEMO_GGUF_F32, f32_bits(1e-5f), 4);
  kv_scalar(k, "llama.rope.dimension_count", DEMO_GGUF_U32, HD, 4);
  for (int i = 0; i < 3 && sp->more[i].key; i++) {
    if (sp->more[i].type == DEMO_GGUF_STRING) kv_str(k, sp->more[i].key, sp->more[i].str, NULL);
    else kv_scalar(k, sp->more[i].key, sp->more[i].type, sp->more[i].bits,
                   sp->more[i].type == DEMO_GGUF_BOOL ? 1 : 4);
  }
  /* the tokenizer */
  bool spm = sp->tok == DEMO_TOKENIZER_SPM;
  const char *tm = sp->tok_model ? sp->tok_model : spm ? "llama" : "gpt2";
  kv_strn(k, "tokenizer.ggml.model", tm, sp->tok_model_len ? sp->tok_model_len : strlen(tm), NULL);
  if (!spm && sp->pre) kv_str(k, "tokenizer.ggml.pre", sp->pre, NULL);
  kv_arr_strs(k, "tokenizer.ggml.tokens", spm ? spm_tokens : bpe_tokens, spm ? SPM_VOCAB : BPE_VOCAB,
              &m->tokens_count);
  if (spm && !skip(k, "tokenizer.ggml.scores")) {
    kv_arr_head(k, DEMO_GGUF_F32, SPM_VOCAB, NULL, NULL);
    for (int i = 0; i < SPM_VOCAB; i++) put_le(&k->b, f32_bits(spm_scores[i]), 4);
  }
  if (!skip(k, "tokenizer.ggml.token_type")) {
    int n = spm ? SPM_VOCAB : BPE_VOCAB;
    kv_arr_head(k, DEMO_GGUF_I32, (uint64_t)n, NULL, NULL);
    for (int i = 0; i < n; i++) {
      const int32_t ty = i && i == sp->user_defined ? DEMO_TOKEN_USER_DEFINED
                                                    : (spm ? spm_types : bpe_types)[i];
      put_le(&k->b, (uint32_t)ty, 4);
    }
  }
  if (!spm) {
    char *merges[11];
    memcpy(merges, bpe_merges, sizeof merges);
    if (sp->bad_merge) merges[0] = "l q";
    kv_arr_strs(k, "tokenizer.ggml.merges", merges, 11, NULL);
  }
  kv_scalar(k, "tokenizer.ggml.bos_token_id", DEMO_GGUF_U32, spm ? 1 : 256, 4);
  kv_scalar(k, "tokenizer.ggml.eos_token_id", DEMO_GGUF_U32, spm ? 2 : 257, 4);
  if (spm) kv_scalar(k, "tokenizer.ggml.unknown_token_id", DEMO_GGUF_U32, 0, 4);
  kv_scalar(k, "tokenizer.ggml.add_bos_token", DEMO_GGUF_BOOL, 1, 1);
}

/* Writes the whole file; returns its bytes (free them). */
static uint8_t *build(const spec *sp, size_t *size, marks *m) {
  memset(m, 0, sizeof *m);
  kvs k = {{NULL, 0, 0}, 0, sp, 24};
  write_metadata(&k, sp, m);
  tdesc td[64];
  int nt = model_tensors(sp, td);
  uint64_t align = sp->alignment ? sp->alignment : 32;
  buf f = {NULL, 0, 0};
  put(&f, "GGUF", 4);
  put_le(&f, 3, 4);
  put_le(&f, (uint64_t)nt, 8);
  put_le(&f, k.n, 8);
  m->first_key_len = f.n;
  put(&f, k.b.p, k.b.n);
  free(k.b.p);
  uint64_t off = 0;
  m->n_tensors = nt;
  m->k_tensor = -1;
  for (int i = 0; i < nt; i++) {
    if (!strcmp(td[i].name, "blk.0.attn_k.weight")) m->k_tensor = i;
    m->t_name[i] = f.n + 8;
    put_str(&f, td[i].name);
    m->t_ndims[i] = f.n;
    put_le(&f, td[i].ne1 ? 2 : 1, 4);
    put_le(&f, (uint64_t)td[i].ne0, 8);
    if (td[i].ne1) put_le(&f, (uint64_t)td[i].ne1, 8);
    m->t_type[i] = f.n;
    put_le(&f, td[i].type, 4);
    m->t_offset[i] = f.n;
    put_le(&f, off, 8);
    int64_t ne = td[i].ne0 * (td[i].ne1 ? td[i].ne1 : 1);
    off += (type_bytes(td[i].type, ne) + align - 1) / align * align;
  }
  m->infos_end = f.n;
  while (f.n % align) put_le(&f, 0, 1);
  m->data_start = f.n;
  for (int i = 0; i < nt; i++) {
    int64_t ne = td[i].ne0 * (td[i].ne1 ? td[i].ne1 : 1);
    for (int64_t e = 0; e < ne; e++) {
      float v = tval(i, e);
      if (td[i].type == DEMO_GGML_F32) put_le(&f, f32_bits(v), 4);
      else if (td[i].type == DEMO_GGML_F16) put_le(&f, clpa_f32_to_f16(v), 2);
      else if (td[i].type == DEMO_GGML_BF16) put_le(&f, clpa_f32_to_bf16(v), 2);
      else if (td[i].type == 24) put_le(&f, (uint8_t)e, 1);
    }
    if (demo_quant_supported(td[i].type)) {
      uint8_t *q = quant_bytes(i, td[i].type, ne);
      put(&f, q, type_bytes(td[i].type, ne));
      free(q);
    }
    m->data_end = f.n;
    while ((f.n - m->data_start) % align) put_le(&f, 0, 1);
  }
  *size = f.n;
  return f.p;
}

static demo_gguf *open_spec(const spec *sp, uint8_t **bytes) {
  size_t n;
  marks m;
  *bytes = build(sp, &n, &m);
  demo_gguf *g = NULL;
  if (demo_gguf_open_memory(*bytes, n, &g)) diag("open failed: %s", demo_last_error());
  return g;
}

/* ============================================================== reading */

static void test_metadata(void) {
  spec sp = {.tok = DEMO_TOKENIZER_SPM, .alignment = 64};
  size_t n;
  marks m;
  uint8_t *bytes = build(&sp, &n, &m);
  /* through a real file, as the demo opens it */
  const char *dir = getenv("CLPA_TEST_TMP");
  char path[512];
  snprintf(path, sizeof path, "%s/test_demo_gguf.gguf", dir ? dir : ".");
  FILE *fp = fopen(path, "wb");
  if (!fp || fwrite(bytes, 1, n, fp) != n || fclose(fp)) BAIL_OUT("cannot write %s", path);
  demo_gguf *g = NULL;
  clpa_status st = demo_gguf_open(path, &g);
  if (!ok(st == CLPA_OK, "open %s (%zu bytes)", path, n)) BAIL_OUT("%s", demo_last_error());
  remove(path);
  ok(demo_gguf_version(g) == 3, "version 3");

  uint32_t u32 = 0;
  int32_t i32 = 0;
  uint64_t u64 = 0;
  int64_t i64 = 0;
  float f32 = 0;
  double f64 = 0;
  bool b = false, found = true;
  demo_gguf_str s;
  ok(!demo_gguf_get_u32(g, "test.u8", &u32, NULL) && u32 == 200, "u8 200 as u32");
  ok(!demo_gguf_get_i32(g, "test.i8", &i32, NULL) && i32 == -100, "i8 -100");
  ok(!demo_gguf_get_u32(g, "test.u16", &u32, NULL) && u32 == 60000, "u16 60000");
  ok(!demo_gguf_get_i32(g, "test.i16", &i32, NULL) && i32 == -30000, "i16 -30000");
  ok(!demo_gguf_get_u32(g, "test.u32", &u32, NULL) && u32 == 4000000000u, "u32 4e9");
  ok(!demo_gguf_get_i32(g, "test.i32", &i32, NULL) && i32 == -2000000000, "i32 -2e9");
  ok(!demo_gguf_get_f32(g, "test.f32", &f32, NULL) && f32 == 1.5f, "f32 1.5");
  ok(!demo_gguf_get_bool(g, "test.bool", &b, NULL) && b, "bool true");
  ok(!demo_gguf_get_str(g, "test.str", &s, NULL) && s.len == 5 && !strcmp(s.s, "hello"), "string 'hello'");
  ok(!demo_gguf_get_u64(g, "test.u64", &u64, NULL) && u64 == (1ull << 40) + 3, "u64 2^40+3");
  ok(!demo_gguf_get_i64(g, "test.i64", &i64, NULL) && i64 == -(1ll << 40), "i64 -2^40");
  ok(!demo_gguf_get_f64(g, "test.f64", &f64, NULL) && f64 == 0.1, "f64 0.1");
  ok(!demo_gguf_get_u32(g, "general.alignment", &u32, NULL) && u32 == 64, "general.alignment 64");
  /* type checks and conversions */
  st = demo_gguf_get_u32(g, "test.i8", &u32, NULL);
  ok(st == CLPA_ERR_INVALID_ARG && strstr(demo_last_error(), "does not fit"), "i8 -100 as u32: %s",
     demo_last_error());
  st = demo_gguf_get_u32(g, "test.u64", &u32, NULL);
  ok(st == CLPA_ERR_INVALID_ARG && strstr(demo_last_error(), "test.u64"), "u64 2^40 as u32: %s",
     demo_last_error());
  st = demo_gguf_get_u32(g, "test.str", &u32, NULL);
  ok(st == CLPA_ERR_INVALID_ARG && strstr(demo_last_error(), "'test.str' is a string, expected u32"),
     "string as u32: %s", demo_last_error());
  st = demo_gguf_get_str(g, "test.u32", &s, NULL);
  ok(st == CLPA_ERR_INVALID_ARG && strstr(demo_last_error(), "u32, expected string"), "u32 as string: %s",
     demo_last_error());
  st = demo_gguf_get_bool(g, "test.u8", &b, NULL);
  ok(st == CLPA_ERR_INVALID_ARG, "u8 as bool: %s", demo_last_error());
  ok(!demo_gguf_get_f64(g, "test.i32", &f64, NULL) && f64 == -2e9, "i32 as f64");
  st = demo_gguf_get_u32(g, "no.such.key", &u32, NULL);
  ok(st == CLPA_ERR_INVALID_ARG && strstr(demo_last_error(), "missing metadata key 'no.such.key'"),
     "required missing key: %s", demo_last_error());
  u32 = 77;
  ok(!demo_gguf_get_u32(g, "no.such.key", &u32, &found) && !found && u32 == 77, "optional missing key");
  ok(!demo_gguf_get_u32(g, "test.u32", &u32, &found) && found, "optional present key");
  /* arrays */
  demo_gguf_arr a;
  ok(!demo_gguf_get_arr(g, "test.arr_u8", DEMO_GGUF_U8, &a, NULL) && a.n == 3 &&
         demo_gguf_arr_i64(&a, 0) == 1 && demo_gguf_arr_i64(&a, 2) == 3 && demo_gguf_arr_i64(&a, 3) == 0,
     "u8 array [1, 2, 3]");
  ok(!demo_gguf_get_arr(g, "test.arr_i16", DEMO_GGUF_TYPE_COUNT_, &a, NULL) && a.type == DEMO_GGUF_I16 &&
         a.n == 2 && demo_gguf_arr_i64(&a, 0) == -1 && demo_gguf_arr_i64(&a, 1) == 7,
     "i16 array [-1, 7]");
  ok(!demo_gguf_get_arr(g, "test.arr_f64", DEMO_GGUF_F64, &a, NULL) && demo_gguf_arr_f64(&a, 0) == 0.5 &&
         demo_gguf_arr_f32(&a, 1) == -2.0f,
     "f64 array [0.5, -2, ...]");
  /* regress: arr_i64 rounded by (int64_t)(d + 0.5), whose sum rounds first */
  {
    static const int64_t want[5] = {1, -2, 0, 4503599627370497, -3};
    int64_t got[5];
    bool same = true;
    for (int i = 0; i < 5; i++) same &= (got[i] = demo_gguf_arr_i64(&a, (uint64_t)i)) == want[i];
    ok(same,
       "regress: f64 to the nearest, ties away from zero: 1 -2 0 4503599627370497 -3 = %" PRId64
       " %" PRId64 " %" PRId64 " %" PRId64 " %" PRId64,
       got[0], got[1], got[2], got[3], got[4]);
  }
  ok(!demo_gguf_get_arr(g, "test.arr_bool", DEMO_GGUF_BOOL, &a, NULL) && demo_gguf_arr_i64(&a, 0) == 1 &&
         demo_gguf_arr_i64(&a, 1) == 0,
     "bool array [true, false]");
  ok(!demo_gguf_get_arr(g, "test.arr_str", DEMO_GGUF_STRING, &a, NULL) && a.n == 3 && !strcmp(a.strs[0].s, "a") &&
         a.strs[1].len == 0 && !strcmp(a.strs[2].s, "ccc"),
     "string array [a, '', ccc]");
  st = demo_gguf_get_arr(g, "test.arr_str", DEMO_GGUF_F32, &a, NULL);
  ok(st == CLPA_ERR_INVALID_ARG && strstr(demo_last_error(), "array of string, expected an array of f32"),
     "string array as f32 array: %s", demo_last_error());
  st = demo_gguf_get_arr(g, "test.u8", DEMO_GGUF_U8, &a, NULL);
  ok(st == CLPA_ERR_INVALID_ARG, "scalar as array: %s", demo_last_error());
  ok(!demo_gguf_get_arr(g, "tokenizer.ggml.scores", DEMO_GGUF_F32, &a, NULL) && a.n == SPM_VOCAB &&
         demo_gguf_arr_f32(&a, 268) == -1.5f,
     "scores");
  ok(!demo_gguf_get_arr(g, "tokenizer.ggml.token_type", DEMO_GGUF_I32, &a, NULL) &&
         demo_gguf_arr_i64(&a, 5) == DEMO_TOKEN_BYTE,
     "token types");
  /* enumeration */
  bool saw = false;
  for (uint64_t i = 0; i < demo_gguf_kv_count(g); i++)
    if (!strcmp(demo_gguf_kv_key(g, i), "test.f64")) saw = demo_gguf_kv_type(g, i) == DEMO_GGUF_F64;
  ok(saw && !demo_gguf_kv_key(g, demo_gguf_kv_count(g)), "kv enumeration");
  demo_gguf_close(g);
  free(bytes);
}

/* A quantized tensor read back: its raw blocks are the bytes the writer
 * stored, at the size rows x ne[0] / block x block bytes; as floats it is
 * quant.c's decoding of those bytes, bit for bit, and (q8_0 by hand) the
 * values the blocks were built to hold. */
static void check_quant_tensor(const demo_gguf_tensor *t, int i, uint32_t type, int64_t ne) {
  const char *name = demo_gguf_ggml_type_name(type);
  uint8_t *want_bytes = quant_bytes(i, type, ne);
  size_t nbytes = type_bytes(type, ne);
  float *got = malloc(sizeof(float) * (size_t)ne), *want = malloc(sizeof(float) * (size_t)ne);
  for (int64_t e = 0; e < ne; e++) got[e] = NAN;
  demo_gguf_raw r;
  clpa_status st = demo_gguf_tensor_raw(t, &r);
  uint64_t rows = (uint64_t)(ne / t->ne[0]), row_bytes = (uint64_t)t->ne[0] / demo_quant_block_elems(type) *
                                                         demo_quant_block_bytes(type);
  ok(st == CLPA_OK && r.data == t->data && r.type == type && r.size == nbytes && r.size == t->size &&
         r.rows == rows && r.row_bytes == row_bytes && r.block_elems == demo_quant_block_elems(type) &&
         r.block_bytes == demo_quant_block_bytes(type) && !memcmp(r.data, want_bytes, nbytes),
     "%s: raw blocks are the written bytes, %llu rows of %llu bytes", t->name, (unsigned long long)r.rows,
     (unsigned long long)r.row_bytes);
  st = demo_gguf_tensor_to_f32(t, got, (uint64_t)ne);
  demo_quant_dequantize(type, want_bytes, want, (uint64_t)ne);
  int64_t bad = -1;
  for (int64_t e = 0; e < ne && bad < 0; e++)
    if (memcmp(&got[e], &want[e], 4) ||
        (type == DEMO_GGML_Q8_0 ? got[e] != (float)(e % 32) * 0.5f : fabsf(got[e] - tval(i, e)) > 0.25f))
      bad = e;
  if (bad >= 0) diag("%s [%lld] = %g; quant.c gives %g from the written blocks; written from %g", t->name,
                     (long long)bad, (double)got[bad], (double)want[bad], (double)tval(i, bad));
  ok(st == CLPA_OK && bad < 0, "%s (%s, %lld elements) to floats: quant.c's decoding of its blocks%s", t->name,
     name, (long long)ne, type == DEMO_GGML_Q8_0 ? ", q*0.5 as built by hand" : "");
  free(want_bytes);
  free(got);
  free(want);
}

static void test_tensors_and_config(int tok) {
  spec sp = {.tok = tok, .alignment = tok == DEMO_TOKENIZER_SPM ? 64 : 0};
  uint8_t *bytes;
  demo_gguf *g = open_spec(&sp, &bytes);
  if (!ok(g != NULL, "open the %s file", tok ? "gpt2" : "llama")) BAIL_OUT("cannot go on");
  tdesc td[64];
  int nt = model_tensors(&sp, td);
  ok(demo_gguf_tensor_count(g) == (uint64_t)nt, "%d tensors", nt);
  int bad = 0;
  float *f = malloc(sizeof(float) * 8 * 300);
  for (int i = 0; i < nt; i++) {
    const demo_gguf_tensor *t = demo_gguf_get_tensor(g, td[i].name);
    int64_t ne = td[i].ne0 * (td[i].ne1 ? td[i].ne1 : 1);
    if (!t || t != demo_gguf_tensor_at(g, (uint64_t)i) || t->type != td[i].type || t->ne[0] != td[i].ne0 ||
        t->ne[1] != (td[i].ne1 ? td[i].ne1 : 1) || t->n_dims != (td[i].ne1 ? 2u : 1u) || t->n_elems != ne ||
        t->ne[2] != 1 || t->ne[3] != 1 ||
        ((uintptr_t)t->data - (uintptr_t)bytes) % (sp.alignment ? sp.alignment : 32)) {
      diag("tensor %s: wrong info", td[i].name);
      bad++;
      continue;
    }
    if (demo_quant_supported(td[i].type)) {
      check_quant_tensor(t, i, td[i].type, ne);
      continue;
    }
    if (demo_gguf_tensor_to_f32(t, f, (uint64_t)ne)) {
      diag("%s", demo_last_error());
      bad++;
      continue;
    }
    for (int64_t e = 0; e < ne; e++)
      if (f[e] != tval(i, e)) {
        diag("tensor %s [%lld] = %g, expected %g", td[i].name, (long long)e, (double)f[e], (double)tval(i, e));
        bad++;
        break;
      }
  }
  ok(bad == 0, "every tensor's info and values (f32, f16, bf16 exact)");
  ok(demo_gguf_get_tensor(g, "nope") == NULL && demo_gguf_get_tensor(g, "blk.0.attn_q") == NULL,
     "unknown names give NULL");
  {
    demo_gguf_raw r;
    const demo_gguf_tensor *e = demo_gguf_get_tensor(g, "token_embd.weight");
    int32_t v = tok == DEMO_TOKENIZER_SPM ? SPM_VOCAB : BPE_VOCAB;
    ok(e && !demo_gguf_tensor_raw(e, &r) && r.data == e->data && r.type == DEMO_GGML_F16 && r.rows == (uint64_t)v &&
           r.row_bytes == 2 * HIDDEN && r.size == r.rows * r.row_bytes && r.block_elems == 1 && r.block_bytes == 2,
       "raw token_embd.weight (f16): %d rows of %d bytes", (int)v, 2 * HIDDEN);
    ok(demo_gguf_tensor_raw(NULL, &r) == CLPA_ERR_INVALID_ARG && demo_gguf_tensor_raw(e, NULL) == CLPA_ERR_INVALID_ARG,
       "raw: NULL refused");
    const demo_gguf_tensor *qt = NULL;
    ok(!demo_gguf_expect(g, "extra.q4_K", 256, 2, &qt) && qt == demo_gguf_get_tensor(g, "extra.q4_K") &&
           !demo_gguf_expect(g, "extra.q5_K", 512, 0, &qt),
       "expect: quantized tensors are of a type the demo reads");
  }
  const demo_gguf_tensor *t = demo_gguf_get_tensor(g, "blk.0.attn_q.weight");
  ok(demo_gguf_tensor_to_f32(t, f, 3) == CLPA_ERR_INVALID_ARG, "to_f32 with the wrong count: %s",
     demo_last_error());
  clpa_status st = demo_gguf_expect(g, "blk.0.attn_q.weight", 8, 4, &t);
  ok(st == CLPA_ERR_INVALID_ARG && strstr(demo_last_error(), "has shape [8, 8], expected [8, 4]"),
     "expect: shape named: %s", demo_last_error());
  free(f);

  demo_gguf_llama c;
  st = demo_gguf_llama_config(g, &c);
  ok(st == CLPA_ERR_UNSUPPORTED &&
         strstr(demo_last_error(), "tensor 'extra.q4_0' is not one of the Llama tensors"),
     "llama config of a file with tensors the model does not use: %s", demo_last_error());
  demo_gguf_close(g);
  free(bytes);
  sp.no_extras = true;
  g = open_spec(&sp, &bytes);
  st = g ? demo_gguf_llama_config(g, &c) : CLPA_ERR_STATE;
  if (!ok(st == CLPA_OK, "llama config")) diag("%s", demo_last_error());
  int32_t vocab = tok == DEMO_TOKENIZER_SPM ? SPM_VOCAB : BPE_VOCAB;
  ok(c.vocab == vocab && c.hidden == HIDDEN && c.layers == LAYERS && c.heads == HEADS && c.kv_heads == KV_HEADS &&
         c.head_size == HD && c.ffn == FFN && c.max_positions == 64 && c.rope_theta == 500000.0f &&
         c.norm_eps == 1e-5f && !c.has_rope_freqs,
     "config values");
  ok(c.tied_embeddings == (tok == DEMO_TOKENIZER_BPE), "tied embeddings %s", tok ? "(no output.weight)" : "off");
  demo_gguf_close(g);
  free(bytes);
}

/* The documented RoPE convention: GGUF's permuted Q/K with the interleaved
 * rotation give the same q.k as the unpermuted (HF) rows with the
 * half-split rotation; and unpermute inverts the converter's permute. */
static void rope_interleaved(float *x, int hd, int pos, float theta) {
  for (int i = 0; i < hd / 2; i++) {
    float a = (float)pos * powf(theta, -2.0f * (float)i / (float)hd), c = cosf(a), s = sinf(a);
    float x0 = x[2 * i], x1 = x[2 * i + 1];
    x[2 * i] = x0 * c - x1 * s;
    x[2 * i + 1] = x0 * s + x1 * c;
  }
}
static void rope_half(float *x, int hd, int pos, float theta) {
  for (int i = 0; i < hd / 2; i++) {
    float a = (float)pos * powf(theta, -2.0f * (float)i / (float)hd), c = cosf(a), s = sinf(a);
    float x0 = x[i], x1 = x[i + hd / 2];
    x[i] = x0 * c - x1 * s;
    x[i + hd / 2] = x0 * s + x1 * c;
  }
}
static void test_rope_convention(void) {
  enum { NH = 2, D = 8, IN = 5 };
  float hf_q[NH * D][IN], hf_k[NH * D][IN], gq[NH * D][IN], gk[NH * D][IN], x[IN], y[IN];
  for (int r = 0; r < NH * D; r++)
    for (int c = 0; c < IN; c++) {
      hf_q[r][c] = (float)rng_uniform(-1, 1);
      hf_k[r][c] = (float)rng_uniform(-1, 1);
    }
  for (int c = 0; c < IN; c++) {
    x[c] = (float)rng_uniform(-1, 1);
    y[c] = (float)rng_uniform(-1, 1);
  }
  /* convert_hf_to_gguf.py's permute: reshape(n_head, 2, D/2, IN).swapaxes(1, 2) */
  for (int h = 0; h < NH; h++)
    for (int i = 0; i < D / 2; i++)
      for (int k = 0; k < 2; k++) {
        memcpy(gq[h * D + 2 * i + k], hf_q[h * D + k * D / 2 + i], sizeof gq[0]);
        memcpy(gk[h * D + 2 * i + k], hf_k[h * D + k * D / 2 + i], sizeof gk[0]);
      }
  double worst = 0;
  for (int h = 0; h < NH; h++) {
    float q1[D], k1[D], q2[D], k2[D];
    for (int r = 0; r < D; r++) {
      q1[r] = k1[r] = q2[r] = k2[r] = 0;
      for (int c = 0; c < IN; c++) {
        q1[r] += gq[h * D + r][c] * x[c];
        k1[r] += gk[h * D + r][c] * y[c];
        q2[r] += hf_q[h * D + r][c] * x[c];
        k2[r] += hf_k[h * D + r][c] * y[c];
      }
    }
    rope_interleaved(q1, D, 7, 10000.0f);
    rope_interleaved(k1, D, 3, 10000.0f);
    rope_half(q2, D, 7, 10000.0f);
    rope_half(k2, D, 3, 10000.0f);
    double d1 = 0, d2 = 0;
    for (int r = 0; r < D; r++) {
      d1 += (double)q1[r] * k1[r];
      d2 += (double)q2[r] * k2[r];
    }
    worst = fmax(worst, fabs(d1 - d2));
  }
  ok(worst < 1e-5, "GGUF Q/K + interleaved RoPE == HF Q/K + half-split RoPE (worst |dq.k| %g)", worst);
  ok(demo_gguf_unpermute_qk(&gq[0][0], NH, D, IN) == CLPA_OK && !memcmp(gq, hf_q, sizeof gq),
     "unpermute_qk restores the HF rows exactly");
  ok(demo_gguf_unpermute_qk(&gq[0][0], NH, 3, IN) == CLPA_ERR_INVALID_ARG, "unpermute_qk: odd head size refused");
}

/* ============================================================ tokenizers */

static bool ids_eq(const int32_t *a, size_t n, const int32_t *b, size_t m) {
  return n == m && (n == 0 || !memcmp(a, b, n * sizeof *a));
}

static void check_encode(demo_tokenizer *t, const char *text, bool bos, bool special, const int32_t *want,
                         size_t n_want, bool roundtrip) {
  int32_t *ids = NULL;
  size_t n = 0;
  clpa_status st = demo_tokenizer_encode(t, text, strlen(text), bos, special, &ids, &n);
  char got[512] = "";
  for (size_t i = 0; st == CLPA_OK && i < n && strlen(got) < 480; i++)
    snprintf(got + strlen(got), sizeof got - strlen(got), " %d", ids[i]);
  ok(st == CLPA_OK && ids_eq(ids, n, want, n_want), "encode '%s'%s%s -> [%s ]", text, bos ? " +bos" : "",
     special ? " +special" : "", got);
  if (st) diag("%s", demo_last_error());
  if (roundtrip && st == CLPA_OK) {
    char *back = NULL;
    size_t len = 0;
    st = demo_tokenizer_decode(t, ids, n, &back, &len);
    ok(st == CLPA_OK && len == strlen(text) && !strcmp(back, text), "decode gives back '%s' (got '%s')", text,
       back ? back : "(null)");
    free(back);
  }
  free(ids);
}

static void test_spm(void) {
  spec sp = {.tok = DEMO_TOKENIZER_SPM};
  uint8_t *bytes;
  demo_gguf *g = open_spec(&sp, &bytes);
  demo_tokenizer *t = NULL;
  clpa_status st = demo_tokenizer_create(g, &t);
  if (!ok(st == CLPA_OK, "SentencePiece tokenizer")) BAIL_OUT("%s", demo_last_error());
  demo_gguf_close(g); /* the tokenizer keeps its own copy */
  free(bytes);
  ok(demo_tokenizer_get_kind(t) == DEMO_TOKENIZER_SPM && demo_tokenizer_vocab_size(t) == SPM_VOCAB &&
         demo_tokenizer_bos(t) == 1 && demo_tokenizer_eos(t) == 2 && demo_tokenizer_add_bos(t) &&
         demo_tokenizer_is_eog(t, 2) && !demo_tokenizer_is_eog(t, 1),
     "SPM: kind, vocab, bos/eos, add_bos");
  /* "▁hello▁world": ll(-1.5), ld(-2.5), he(-3, leftmost of two -3), ▁w(-3),
   * or(-3.5), llo(-4), hello(-5), ▁hello(-6), ▁wor(-7); "▁world" is no token */
  check_encode(t, "hello world", true, false, (const int32_t[]){1, 271, 275, 274}, 4, true);
  /* byte fallback: i and ! are no pieces */
  check_encode(t, "hi!", false, false, (const int32_t[]){259, 260, 3 + 'i', 3 + '!'}, 4, true);
  check_encode(t, "\xc3\xa9", false, false, (const int32_t[]){259, 3 + 0xc3, 3 + 0xa9}, 3, true);
  check_encode(t, "", false, false, NULL, 0, true);
  /* special tokens: parsed (a space prefix after them), or plain text */
  check_encode(t, "<s>hello", false, true, (const int32_t[]){1, 271}, 2, false);
  check_encode(t, "<s>hello", false, false, (const int32_t[]){259, 3 + '<', 3 + 's', 3 + '>', 270}, 5, true);
  const char *p;
  size_t len;
  ok(!demo_tokenizer_piece(t, 271, &p, &len) && len == 6 && !memcmp(p, " hello", 6), "piece 271 is ' hello'");
  ok(!demo_tokenizer_piece(t, 3 + 0x0a, &p, &len) && len == 1 && p[0] == '\n', "piece <0x0A> is a newline");
  ok(!demo_tokenizer_piece(t, 1, &p, &len) && len == 0, "piece <s> is empty");
  ok(demo_tokenizer_piece(t, SPM_VOCAB, &p, &len) == CLPA_ERR_INVALID_ARG, "piece out of range: %s",
     demo_last_error());
  char *text;
  st = demo_tokenizer_decode(t, (const int32_t[]){1, 5}, 2, &text, &len);
  ok(st == CLPA_OK && len == 1 && text[0] == 2, "decode skips <s>, byte 0x02");
  if (!st) free(text);
  ok(demo_tokenizer_decode(t, (const int32_t[]){-1}, 1, &text, &len) == CLPA_ERR_INVALID_ARG &&
         strstr(demo_last_error(), "ids[0] = -1"),
     "decode of a bad id: %s", demo_last_error());
  demo_tokenizer_destroy(t);
}

/* SentencePiece's merges against a plain model (the quadratic scan: the best-scoring adjacent
 * pair whose text is a token merges, ties leftmost, until none is), over random vocabularies of
 * pieces from four symbols with few distinct scores (ties everywhere) and random texts. */
static const char *const spm_sym[4] = {"\xe2\x96\x81", "a", "b", "c"};

/* The piece s[0..n) among ids 259 .. end - 1, or -1. */
static int32_t piece_below(const char *s, size_t n, int32_t end) {
  for (int32_t i = 259; i < end; i++)
    if (strlen(spm_tokens[i]) == n && !memcmp(spm_tokens[i], s, n)) return i;
  return -1;
}

static int32_t model_piece(const char *s, size_t n) { return piece_below(s, n, SPM_VOCAB); }

static size_t model_encode(const char *text, int32_t *ids) {
  char w[4 * 512];
  size_t wn = 0, start[512], len[512], n = 0;
  if (!*text) return 0;
  memcpy(w, spm_sym[0], 3), wn = 3; /* add_space_prefix */
  for (const char *c = text; *c; c++) {
    const char *e = *c == ' ' ? spm_sym[0] : (char[2]){*c, 0};
    memcpy(w + wn, e, strlen(e)), wn += strlen(e);
  }
  for (size_t i = 0; i < wn; i += len[n++]) /* a symbol a character: ▁ is 3 bytes */
    start[n] = i, len[n] = strchr("abc", w[i]) ? 1 : 3;
  for (;;) {
    size_t best = n;
    float top = 0;
    for (size_t i = 0; i + 1 < n; i++) {
      const int32_t id = model_piece(w + start[i], len[i] + len[i + 1]);
      if (id >= 0 && (best == n || spm_scores[id] > top)) best = i, top = spm_scores[id];
    }
    if (best == n) break;
    len[best] += len[best + 1];
    memmove(start + best + 1, start + best + 2, (n - best - 2) * sizeof *start);
    memmove(len + best + 1, len + best + 2, (n - best - 2) * sizeof *len);
    n--;
  }
  for (size_t i = 0; i < n; i++) ids[i] = model_piece(w + start[i], len[i]);
  return n;
}

static void test_spm_merges_model(void) {
  char *saved[SPM_VOCAB - 259];
  float saved_score[SPM_VOCAB - 259];
  memcpy(saved, spm_tokens + 259, sizeof saved);
  memcpy(saved_score, spm_scores + 259, sizeof saved_score);
  int vocabs = 0, texts = 0, bad = 0;
  for (int v = 0; v < 24; v++) {
    for (int i = 259; i < SPM_VOCAB; i++) { /* the 4 symbols, then 13 distinct pieces of 2-5 */
      char p[16] = "";
      do {
        p[0] = 0;
        const int k = i < 263 ? 1 : 2 + (int)rng_below(4);
        for (int j = 0; j < k; j++) strcat(p, spm_sym[i < 263 ? i - 259 : (int)rng_below(4)]);
      } while (i >= 263 && piece_below(p, strlen(p), i) >= 0); /* (ids from i: last round's) */
      spm_tokens[i] = dupstr(p);
      spm_scores[i] = -(float)(1 + rng_below(3));
    }
    spec sp = {.tok = DEMO_TOKENIZER_SPM};
    uint8_t *bytes;
    demo_gguf *g = open_spec(&sp, &bytes);
    demo_tokenizer *t = NULL;
    if (!demo_tokenizer_create(g, &t)) {
      vocabs++;
      for (int x = 0; x < 40; x++, texts++) {
        char text[401];
        const size_t tl = rng_below(400);
        for (size_t i = 0; i < tl; i++) text[i] = " abc"[rng_below(4)];
        text[tl] = 0;
        int32_t want[512], *ids = NULL;
        size_t n = 0, nw = model_encode(text, want);
        const bool differs =
            demo_tokenizer_encode(t, text, tl, false, false, &ids, &n) || !ids_eq(ids, n, want, nw);
        if (differs && !bad++)
          diag("vocabulary %d, text '%s': %zu ids, the model %zu", v, text, n, nw);
        free(ids);
      }
    }
    demo_tokenizer_destroy(t);
    demo_gguf_close(g);
    free(bytes);
    for (int i = 259; i < SPM_VOCAB; i++) free(spm_tokens[i]);
  }
  memcpy(spm_tokens + 259, saved, sizeof saved);
  memcpy(spm_scores + 259, saved_score, sizeof saved_score);
  ok(vocabs == 24 && bad == 0,
     "SPM merges equal the quadratic scan's on %d random vocabularies, %d texts (%d differ)",
     vocabs, texts, bad);
}

static void test_bpe(const char *pre) {
  spec sp = {.tok = DEMO_TOKENIZER_BPE, .pre = pre};
  uint8_t *bytes;
  demo_gguf *g = open_spec(&sp, &bytes);
  demo_tokenizer *t = NULL;
  clpa_status st = demo_tokenizer_create(g, &t);
  if (!ok(st == CLPA_OK, "byte-level BPE tokenizer (pre %s)", pre ? pre : "none")) BAIL_OUT("%s", demo_last_error());
  demo_gguf_close(g);
  free(bytes);
  bool llama3 = pre != NULL;
  ok(demo_tokenizer_get_kind(t) == DEMO_TOKENIZER_BPE && demo_tokenizer_bos(t) == 256 && demo_tokenizer_add_bos(t),
     "BPE: kind, bos, add_bos");
  /* "hello" and " world" are tokens whole, or merge to them */
  check_encode(t, "hello world", true, false, (const int32_t[]){256, 261, 266}, 3, true);
  /* "hellod": ll, he, hell, hello; then no merge with d */
  check_encode(t, "hellod", false, false, (const int32_t[]){261, 'd'}, 2, true);
  /* é = C3 A9 -> "Ã©" */
  check_encode(t, "\xc3\xa9", false, false, (const int32_t[]){267}, 1, true);
  /* Llama 3 splits " " from "2024" (and 2024 into 202|4); GPT-2 keeps
   * " 2024", where the merge "Ġ 2" applies */
  if (llama3)
    check_encode(t, "it's 2024!!\n\nok", false, false,
                 (const int32_t[]){'i', 't', '\'', 's', 32, '2', '0', '2', '4', '!', '!', 10, 10, 'o', 'k'}, 15, true);
  else
    check_encode(t, "it's 2024!!\n\nok", false, false,
                 (const int32_t[]){'i', 't', '\'', 's', 268, '0', '2', '4', '!', '!', 10, 10, 'o', 'k'}, 14, true);
  check_encode(t, "<|begin_of_text|>hi", false, true, (const int32_t[]){256, 'h', 'i'}, 3, false);
  const char *p;
  size_t len;
  ok(!demo_tokenizer_piece(t, 266, &p, &len) && len == 6 && !memcmp(p, " world", 6), "piece Ġworld is ' world'");
  ok(!demo_tokenizer_piece(t, 256, &p, &len) && len == 0, "piece <|begin_of_text|> is empty");
  demo_tokenizer_destroy(t);
}

/* A tokenizer from sp, or a bail-out. */
static demo_tokenizer *tokenizer_of(const spec *sp) {
  uint8_t *bytes;
  demo_gguf *g = open_spec(sp, &bytes);
  demo_tokenizer *t = NULL;
  if (!g || demo_tokenizer_create(g, &t)) BAIL_OUT("tokenizer: %s", demo_last_error());
  demo_gguf_close(g);
  free(bytes);
  return t;
}

/* tokenizer.ggml.pre as llama.cpp reads it: "llama-v3", "falcon3",
 * "pixtral" (... all Llama 3's) split with Llama 3's regex, take a word
 * that is a token whole ("world", which no merge makes) and add BOS when
 * add_bos_token is missing; "smaug-bpe" splits the same way but merges
 * "world" to w|or|ld and adds BOS only when asked. Before, the three were
 * GPT-2's split without BOS, and smaug-bpe took "world" whole. */
static void regress_llama3_pre_tokenizer_names(void) {
  static const char *const pres[] = {"llama-bpe", "llama-v3", "falcon3", "pixtral", "smaug-bpe"};
  for (int i = 0; i < 5; i++) {
    const bool smaug = i == 4;
    spec sp = {.tok = DEMO_TOKENIZER_BPE, .pre = pres[i],
               .skip_key = "tokenizer.ggml.add_bos_token"};
    demo_tokenizer *t = tokenizer_of(&sp);
    ok(demo_tokenizer_add_bos(t) == !smaug, "regress: pre %s without add_bos_token: add_bos %d",
       pres[i], demo_tokenizer_add_bos(t));
    check_encode(t, "'S 2024", false, false, (const int32_t[]){'\'', 'S', 32, '2', '0', '2', '4'},
                 7, true);
    if (smaug) check_encode(t, "world", false, false, (const int32_t[]){'w', 263, 265}, 3, true);
    else check_encode(t, "world", false, false, (const int32_t[]){269}, 1, true);
    demo_tokenizer_destroy(t);
  }
  spec gpt2 = {.tok = DEMO_TOKENIZER_BPE, .skip_key = "tokenizer.ggml.add_bos_token"};
  demo_tokenizer *t = tokenizer_of(&gpt2);
  ok(!demo_tokenizer_add_bos(t), "regress: no pre, no add_bos_token: no BOS");
  check_encode(t, "world", false, false, (const int32_t[]){'w', 263, 265}, 3, true);
  demo_tokenizer_destroy(t);
}

/* A USER_DEFINED token is split out of the text even without
 * parse_special, as llama.cpp's tokenizer_st_partition does (and HF's added
 * tokens), and SentencePiece puts a space in front of the text after it;
 * "<unk>" (UNKNOWN) is split out with parse_special. Before, both were plain
 * text: "ohello!" with "hello" user-defined gave ▁ o hello ! [259 263 270
 * 36] (llama.cpp: ▁ o | hello | ▁ ! [259 263 270 259 36]), byte-level "hello"
 * with "ll" user-defined gave [261] (llama.cpp: he | ll | o [259 258 111]),
 * and "<unk>" gave ▁ and its bytes (llama.cpp: [0]). */
static void regress_user_defined_tokens_without_parse_special(void) {
  spec sp = {.tok = DEMO_TOKENIZER_SPM, .user_defined = 270};
  demo_tokenizer *t = tokenizer_of(&sp);
  check_encode(t, "ohello!", false, false, (const int32_t[]){259, 263, 270, 259, 3 + '!'}, 5, false);
  check_encode(t, "<unk>", false, true, (const int32_t[]){0}, 1, false);
  check_encode(t, "<unk>", false, false,
               (const int32_t[]){259, 3 + '<', 3 + 'u', 3 + 'n', 3 + 'k', 3 + '>'}, 6, true);
  demo_tokenizer_destroy(t);
  spec bp = {.tok = DEMO_TOKENIZER_BPE, .user_defined = 258};
  t = tokenizer_of(&bp);
  check_encode(t, "hello", false, false, (const int32_t[]){259, 258, 'o'}, 3, true);
  demo_tokenizer_destroy(t);
}

/* What ends generation, as llama.cpp finds it: the file's eos
 * (<|end_of_text|>, 257) and, with no eot_token_id, the tokens of its
 * end-of-turn texts (<|eot_id|> 270, <|im_end|> 271), which an older Llama 3
 * Instruct file ends its turns with. Before, only eos/eot/eom from the
 * metadata: 270 and 271 did not end an answer. */
static void regress_eog_by_text(void) {
  spec sp = {.tok = DEMO_TOKENIZER_BPE, .pre = "llama-bpe"};
  demo_tokenizer *t = tokenizer_of(&sp);
  int32_t n = 0;
  const int32_t *ids = demo_tokenizer_eog(t, &n);
  ok(n == 3 && ids[0] == 257 && ids[1] == 270 && ids[2] == 271 && demo_tokenizer_is_eog(t, 257) &&
         demo_tokenizer_is_eog(t, 270) && demo_tokenizer_is_eog(t, 271) &&
         !demo_tokenizer_is_eog(t, 256) && !demo_tokenizer_is_eog(t, 'a'),
     "regress: eos, <|eot_id|> and <|im_end|> end generation (%d ids)", (int)n);
  demo_tokenizer_destroy(t);
}

/* An UNKNOWN token prints nothing, as llama.cpp's token_to_piece gives it
 * with special = false, the way llama-cli and llama-server print an answer
 * (common_token_to_piece(ctx, id, params.special), --special off); with
 * special it would be its text "<unk>". Before, SentencePiece's <unk> was
 * "\xe2\x96\x85" (U+2585), what llama.cpp printed before its pull 7587
 * (June 2024): "hi<unk>" read "hi\xe2\x96\x85" where llama.cpp shows "hi". */
static void regress_unknown_piece_is_empty(void) {
  spec sp = {.tok = DEMO_TOKENIZER_SPM};
  demo_tokenizer *t = tokenizer_of(&sp);
  const char *p = NULL;
  size_t len = 99;
  const bool got = !demo_tokenizer_piece(t, 0, &p, &len);
  ok(got && len == 0, "regress: SPM piece <unk> is empty, as llama.cpp prints it (got %zu bytes)",
     len);
  char *text = NULL;
  const clpa_status st = demo_tokenizer_decode(t, (const int32_t[]){260, 0}, 2, &text, &len);
  ok(st == CLPA_OK && !strcmp(text, "h"), "regress: decode h <unk> is 'h' (got '%s')",
     text ? text : "(null)");
  free(text);
  demo_tokenizer_destroy(t);
}

/* A token typed UNUSED or UNDEFINED prints nothing: llama.cpp's
 * token_to_piece copies only NORMAL, BYTE, USER_DEFINED (and, with special,
 * CONTROL and UNKNOWN) tokens ("we accept all unsupported token types,
 * suppressing them like CONTROL tokens"). Before, they were printed as
 * NORMAL ones: SPM "\xe2\x96\x81hello" typed UNUSED read " hello",
 * byte-level "\xc4\xa0world" " world" and UNDEFINED "world" "world"; a
 * converter's padding tokens ("[PAD32000]", UNUSED) read as text. */
static void regress_unused_piece_is_empty(void) {
  spm_types[271] = DEMO_TOKEN_UNUSED;
  spec sp = {.tok = DEMO_TOKENIZER_SPM};
  demo_tokenizer *t = tokenizer_of(&sp);
  spm_types[271] = DEMO_TOKEN_NORMAL;
  const char *p = NULL;
  size_t len = 99;
  bool got = !demo_tokenizer_piece(t, 271, &p, &len);
  ok(got && len == 0, "regress: SPM piece of UNUSED '\xe2\x96\x81hello' is empty (got %zu bytes)",
     len);
  demo_tokenizer_destroy(t);
  bpe_types[266] = DEMO_TOKEN_UNUSED;
  bpe_types[269] = DEMO_TOKEN_UNDEFINED;
  spec bp = {.tok = DEMO_TOKENIZER_BPE};
  t = tokenizer_of(&bp);
  bpe_types[266] = bpe_types[269] = DEMO_TOKEN_NORMAL;
  got = !demo_tokenizer_piece(t, 266, &p, &len);
  ok(got && len == 0, "regress: BPE piece of UNUSED '\xc4\xa0world' is empty (got %zu bytes)", len);
  got = !demo_tokenizer_piece(t, 269, &p, &len);
  ok(got && len == 0, "regress: BPE piece of UNDEFINED 'world' is empty (got %zu bytes)", len);
  demo_tokenizer_destroy(t);
}

/* A USER_DEFINED token prints its text as it is, U+2581 included, in
 * SentencePiece as in byte-level BPE: llama.cpp's token_to_piece copies
 * it before it unescapes a NORMAL token's whitespace (convert_hf_to_gguf
 * writes added tokens' spaces as spaces, so that encode finds them in the
 * text; the demo's encode matches them as they are too). Before, SPM's
 * user-defined "\xe2\x96\x81hello" read " hello". */
static void regress_user_defined_piece_as_is(void) {
  spec sp = {.tok = DEMO_TOKENIZER_SPM, .user_defined = 271};
  demo_tokenizer *t = tokenizer_of(&sp);
  const char *p = NULL;
  size_t len = 0;
  const bool got = !demo_tokenizer_piece(t, 271, &p, &len);
  ok(got && len == 8 && !memcmp(p, "\xe2\x96\x81hello", 8),
     "regress: SPM piece of USER_DEFINED '\xe2\x96\x81hello' is its text (got '%.*s')",
     got ? (int)len : 0, got ? p : "");
  demo_tokenizer_destroy(t);
}

/* Byte-level BPE: a character of a NORMAL token outside GPT-2's
 * bytes_to_unicode table (an invalid byte: U+FFFD) prints as llama.cpp's
 * llama_decode_text writes it, where unicode_utf8_to_byte throws:
 * "[UNK_BYTE_0x" + the character's UTF-8 in hex + the token's whole text
 * + "]". Before, the character was copied as it is: "\xe2\x96\x81is" read
 * "\xe2\x96\x81is" (llama.cpp: "[UNK_BYTE_0xe29681\xe2\x96\x81is]is"), and
 * "a\xff" "a\xff" (llama.cpp: "a[UNK_BYTE_0xefbfbda\xff]"). */
static void regress_bpe_piece_outside_byte_table(void) {
  static const char *const texts[] = {"\xe2\x96\x81is", "a\xff"};
  static const char *const want[] = {"[UNK_BYTE_0xe29681\xe2\x96\x81is]is",
                                     "a[UNK_BYTE_0xefbfbda\xff]"};
  char *saved = bpe_tokens[269]; /* "world": no merge makes it */
  for (int i = 0; i < 2; i++) {
    bpe_tokens[269] = (char *)texts[i];
    spec sp = {.tok = DEMO_TOKENIZER_BPE};
    demo_tokenizer *t = tokenizer_of(&sp);
    const char *p = NULL;
    size_t len = 0;
    const bool got = !demo_tokenizer_piece(t, 269, &p, &len);
    ok(got && len == strlen(want[i]) && !memcmp(p, want[i], len),
       "regress: BPE piece '%s' is '%s', as llama.cpp's (got '%.*s')", texts[i], want[i],
       got ? (int)len : 0, got ? p : "");
    demo_tokenizer_destroy(t);
  }
  bpe_tokens[269] = saved;
}

/* An end-of-generation token found by its text is made CONTROL before
 * the pieces and the special tokens are made, as llama.cpp's vocabulary
 * loader does for every token of its EOG texts (attr |= CONTROL, "this is
 * probably a bug in the model") before it builds cache_special_tokens and
 * cache_token_to_piece: so an answer that ends on it prints nothing for it
 * (llama-cli and llama-server print it without special), and encode splits
 * it out only with parse_special. Before, <|eot_id|> and <|im_end|> typed
 * USER_DEFINED printed their text ("...<|eot_id|>" at an answer's end),
 * <|eot_id|> was made CONTROL only after its piece, <|im_end|> never. */
static void regress_eog_by_text_is_control(void) {
  bpe_types[270] = bpe_types[271] = DEMO_TOKEN_USER_DEFINED;
  spec sp = {.tok = DEMO_TOKENIZER_BPE, .pre = "llama-bpe"};
  demo_tokenizer *t = tokenizer_of(&sp);
  bpe_types[270] = bpe_types[271] = DEMO_TOKEN_CONTROL;
  for (int32_t id = 270; id <= 271; id++) {
    const char *p = NULL;
    size_t len = 99;
    const bool got = !demo_tokenizer_piece(t, id, &p, &len);
    ok(got && len == 0 && demo_tokenizer_token_type(t, id) == DEMO_TOKEN_CONTROL,
       "regress: USER_DEFINED %s ends generation: CONTROL (type %d), piece empty (%zu bytes)",
       demo_tokenizer_token_text(t, id), (int)demo_tokenizer_token_type(t, id), len);
  }
  int32_t *ids = NULL;
  size_t n = 0;
  bool split = false;
  if (demo_tokenizer_encode(t, "a<|im_end|>", 11, false, false, &ids, &n)) BAIL_OUT("encode");
  for (size_t i = 0; i < n; i++) split |= ids[i] == 271;
  free(ids);
  ok(!split, "regress: <|im_end|> made CONTROL is text without parse_special");
  demo_tokenizer_destroy(t);
}

/* text's words by the pre-tokenizer, joined by '|'. */
static void check_split(const char *text, bool llama3, const char *want) {
  demo_pretok x;
  char got[256] = "";
  if (!demo_pretok_init(&x, text, strlen(text))) BAIL_OUT("out of memory");
  for (size_t i = 0, e; i < x.n && strlen(got) + x.off[x.n] + 2 < sizeof got; i = e) {
    e = demo_pretok_next(&x, i, llama3);
    if (i) strcat(got, "|");
    strncat(got, text + x.off[i], x.off[e] - x.off[i]);
  }
  demo_pretok_free(&x);
  ok(!strcmp(got, want), "%s split '%s' -> '%s' (want '%s')", llama3 ? "Llama 3" : "GPT-2", text,
     got, want);
}

/* \p{L} is letters only, as in llama.cpp's unicode flags (and HF's regex):
 * a combining mark (Devanagari's vowel signs and virama, U+0301) ends a
 * word and starts the next as [^\r\n\p{L}\p{N}]? would, or joins a run of
 * punctuation; the danda U+0964 is punctuation; Thai digits are \p{N}, in
 * groups of 3. Before, every code point outside a short list was a letter:
 * "नमस्ते दुनिया।" was two words (llama.cpp: नमस|्त|े| द|ुन|िय|ा।), "๑๒๓๔"
 * one, "cafe\u0301" one. */
static void regress_pretok_unicode_classes(void) {
  check_split("\xe0\xa4\xa8\xe0\xa4\xae\xe0\xa4\xb8\xe0\xa5\x8d\xe0\xa4\xa4\xe0\xa5\x87 "
              "\xe0\xa4\xa6\xe0\xa5\x81\xe0\xa4\xa8\xe0\xa4\xbf\xe0\xa4\xaf"
              "\xe0\xa4\xbe\xe0\xa5\xa4",
              true,
              "\xe0\xa4\xa8\xe0\xa4\xae\xe0\xa4\xb8|\xe0\xa5\x8d\xe0\xa4\xa4|\xe0\xa5\x87| "
              "\xe0\xa4\xa6|\xe0\xa5\x81\xe0\xa4\xa8|\xe0\xa4\xbf\xe0\xa4\xaf|"
              "\xe0\xa4\xbe\xe0\xa5\xa4");
  check_split("\xe0\xb9\x91\xe0\xb9\x92\xe0\xb9\x93\xe0\xb9\x94", true,
              "\xe0\xb9\x91\xe0\xb9\x92\xe0\xb9\x93|\xe0\xb9\x94");
  check_split("cafe\xcc\x81 ok", true, "cafe|\xcc\x81| ok");
  check_split("cafe\xcc\x81 ok", false, "cafe|\xcc\x81| ok");
  check_split("it's  2024!!\n\nok", true, "it|'s| | |202|4|!!\n\n|ok");
}

/* SentencePiece's symbols are as long as their first byte says, as in
 * llama.cpp's llm_tokenizer_spm_session (unicode_len_utf8), also where the
 * bytes after it are no continuation: "\xc3ll" is ▁ | \xc3 l | l, and
 * \xc3 l is no piece, so its bytes [259 198 111 262]. Before, the invalid
 * \xc3 was a symbol alone and "ll" merged: [259 198 268]. */
static void regress_spm_invalid_utf8_symbols(void) {
  spec sp = {.tok = DEMO_TOKENIZER_SPM};
  demo_tokenizer *t = tokenizer_of(&sp);
  check_encode(t, "\xc3ll", false, false, (const int32_t[]){259, 3 + 0xc3, 3 + 'l', 262}, 4, true);
  check_encode(t, "ll\xe2\x96", false, false, (const int32_t[]){259, 268, 3 + 0xe2, 3 + 0x96}, 4,
               true);
  demo_tokenizer_destroy(t);
}

/* A lead byte before a space takes the first byte of its U+2581 into its
 * symbol, and the other two become symbols alone: "\xc0 " is U+2581 |
 * \xc0 \xe2 | \x96 | \x81, four symbols of two bytes of text. The symbol
 * and heap buffers were sized by the text's length (len + 1 symbols), so
 * such text wrote past them (ASan: heap-buffer-overflow in spm_segment). */
static void regress_spm_lead_byte_before_space(void) {
  spec sp = {.tok = DEMO_TOKENIZER_SPM};
  demo_tokenizer *t = tokenizer_of(&sp);
  check_encode(t, "\xc0 ", false, false,
               (const int32_t[]){259, 3 + 0xc0, 3 + 0xe2, 3 + 0x96, 3 + 0x81}, 5, false);
  char text[301];
  for (int i = 0; i < 300; i += 2) text[i] = '\xc0', text[i + 1] = ' ';
  text[300] = '\0';
  int32_t *ids = NULL;
  size_t n = 0;
  const clpa_status st = demo_tokenizer_encode(t, text, 300, false, false, &ids, &n);
  ok(st == CLPA_OK && n == 1 + 150 * 4, "regress: 150 x \"\\xc0 \" -> %zu ids (601)", n);
  free(ids);
  demo_tokenizer_destroy(t);
}

/* Byte-level BPE splits and merges the text llama.cpp's regex split gives
 * back (unicode_cpts_from_utf8, then unicode_cpt_to_utf8): an invalid byte
 * is U+FFFD, no letter (Llama 3's split puts it before the next word,
 * GPT-2's alone) and its three bytes EF BF BD; an overlong form is its
 * character ("\xc1\x81" is "A").
 * Before, \xff was the letter U+00FF inside the word: "ll\xffll" gave
 * [258 255 258] (llama.cpp: ll | \xef\xbf\xbd | ll, [258 239 191 189 258]). */
static void regress_bpe_invalid_utf8(void) {
  spec sp = {.tok = DEMO_TOKENIZER_BPE, .pre = "llama-bpe"};
  demo_tokenizer *t = tokenizer_of(&sp);
  check_encode(t, "ll\xffll", false, false, (const int32_t[]){258, 0xef, 0xbf, 0xbd, 258}, 5,
               false);
  check_encode(t, "he\xc3", false, false, (const int32_t[]){259, 0xef, 0xbf, 0xbd}, 4, false);
  check_encode(t, "\xc1\x81", false, false, (const int32_t[]){'A'}, 1, false);
  demo_tokenizer_destroy(t);
  spec g2 = {.tok = DEMO_TOKENIZER_BPE};
  t = tokenizer_of(&g2);
  check_encode(t, "ll\xffll", false, false, (const int32_t[]){258, 0xef, 0xbf, 0xbd, 258}, 5,
               false);
  demo_tokenizer_destroy(t);
  check_split("ll\xffll", true, "ll|\xffll");
  check_split("ll\xffll", false, "ll|\xff|ll");
}

/* A file of metadata k alone (no tensors); k's bytes are freed. */
static uint8_t *metadata_file(kvs *k, size_t *size) {
  buf f = {NULL, 0, 0};
  put(&f, "GGUF", 4);
  put_le(&f, 3, 4);
  put_le(&f, 0, 8);
  put_le(&f, k->n, 8);
  put(&f, k->b.p, k->b.n);
  free(k->b.p);
  *size = f.n;
  return f.p;
}

/* A file of a byte-level BPE tokenizer alone: the tiny vocabulary and
 * merges, then one more token, text[0 .. n) (free the bytes). */
static uint8_t *bpe_file_with_token(const char *text, size_t n, size_t *size) {
  spec sp = {.tok = DEMO_TOKENIZER_BPE};
  kvs k = {{NULL, 0, 0}, 0, &sp, 24};
  kv_str(&k, "tokenizer.ggml.model", "gpt2", NULL);
  put_str(&k.b, "tokenizer.ggml.tokens");
  k.n++;
  kv_arr_head(&k, DEMO_GGUF_STRING, BPE_VOCAB + 1, NULL, NULL);
  for (int i = 0; i < BPE_VOCAB; i++) put_str(&k.b, bpe_tokens[i]);
  put_strn(&k.b, text, n);
  kv_arr_strs(&k, "tokenizer.ggml.merges", bpe_merges, 11, NULL);
  return metadata_file(&k, size);
}

/* A byte-level token's piece spells each character outside GPT-2's byte
 * table as "[UNK_BYTE_0x" + its UTF-8 + the token's whole text + "]" (as
 * llama.cpp's llama_decode_text), so a token of n such characters has a
 * piece of about n * n bytes. The pieces were capped at 4 GiB only: one
 * token of 60000 bytes 0xff (a 63 KB file) made the tokenizer allocate and
 * write 3.6 GB. Pieces may now be at most 64 times the tokens' texts (and
 * 1 MiB more); a real vocabulary's are about as long as its texts. */
static void regress_bpe_pieces_bounded_by_texts(void) {
  const size_t n = 60000;
  char *text = malloc(n);
  if (!text) BAIL_OUT("out of memory");
  memset(text, 0xff, n);
  size_t size;
  uint8_t *bytes = bpe_file_with_token(text, n, &size);
  demo_gguf *g = NULL;
  demo_tokenizer *t = NULL;
  clpa_status st = demo_gguf_open_memory(bytes, size, &g);
  if (st == CLPA_OK) st = demo_tokenizer_create(g, &t);
  ok(st == CLPA_ERR_INVALID_ARG && !t && strstr(demo_last_error(), "token 272") &&
         strstr(demo_last_error(), "pieces"),
     "regress: a %zu-byte file whose one token's piece is %zu bytes -> %s: %s", size,
     n * (n + 19), clpa_status_name(st), demo_last_error());
  demo_tokenizer_destroy(t);
  demo_gguf_close(g);
  free(bytes);
  /* a few such characters still decode as llama.cpp's */
  bytes = bpe_file_with_token("a\xff" "b", 3, &size);
  t = NULL;
  g = NULL;
  st = demo_gguf_open_memory(bytes, size, &g);
  if (st == CLPA_OK) st = demo_tokenizer_create(g, &t);
  const char *p = NULL;
  size_t len = 0;
  if (st == CLPA_OK) st = demo_tokenizer_piece(t, BPE_VOCAB, &p, &len);
  static const char want[] = "a[UNK_BYTE_0xefbfbda\xff" "b]b";
  ok(st == CLPA_OK && len == sizeof want - 1 && !memcmp(p, want, len),
     "a token 'a\\xffb' still has the piece a[UNK_BYTE_0xefbfbd...]b: %s",
     st ? demo_last_error() : "");
  demo_tokenizer_destroy(t);
  demo_gguf_close(g);
  free(bytes);
  free(text);
}

/* A file of a SentencePiece tokenizer alone: the tiny vocabulary's tokens,
 * n_scores scores and n_types token types (-1: no such key), bos as the
 * BOS id and merges, when not NULL, as tokenizer.ggml.merges of a "gpt2"
 * model instead (free the bytes). */
static uint8_t *spm_file(int n_scores, int n_types, uint32_t bos, const char *merge,
                         size_t *size) {
  spec sp = {.tok = DEMO_TOKENIZER_SPM};
  kvs k = {{NULL, 0, 0}, 0, &sp, 24};
  kv_str(&k, "tokenizer.ggml.model", merge ? "gpt2" : "llama", NULL);
  kv_arr_strs(&k, "tokenizer.ggml.tokens", spm_tokens, SPM_VOCAB, NULL);
  if (n_scores >= 0) {
    put_str(&k.b, "tokenizer.ggml.scores");
    k.n++;
    kv_arr_head(&k, DEMO_GGUF_F32, (uint64_t)n_scores, NULL, NULL);
    for (int i = 0; i < n_scores; i++) put_le(&k.b, f32_bits(spm_scores[i % SPM_VOCAB]), 4);
  }
  if (n_types >= 0) {
    put_str(&k.b, "tokenizer.ggml.token_type");
    k.n++;
    kv_arr_head(&k, DEMO_GGUF_I32, (uint64_t)n_types, NULL, NULL);
    for (int i = 0; i < n_types; i++) put_le(&k.b, (uint32_t)spm_types[i % SPM_VOCAB], 4);
  }
  if (merge) {
    char *m[1] = {(char *)merge};
    kv_arr_strs(&k, "tokenizer.ggml.merges", m, 1, NULL);
  }
  kv_scalar(&k, "tokenizer.ggml.bos_token_id", DEMO_GGUF_U32, bos, 4);
  return metadata_file(&k, size);
}

/* The vocabulary's arrays and ids against each other: each mismatch is
 * refused, naming the key (checked safe; pinned so that it stays so). */
static void test_vocab_mismatches(void) {
  static const struct {
    int n_scores, n_types;
    uint32_t bos;
    const char *merge, *needle, *what;
  } cases[] = {
      {SPM_VOCAB - 1, SPM_VOCAB, 1, NULL, "tokenizer.ggml.scores has 275 scores for 276 tokens",
       "one score fewer than tokens"},
      {SPM_VOCAB + 1, SPM_VOCAB, 1, NULL, "tokenizer.ggml.scores has 277 scores", "one score more"},
      {SPM_VOCAB, SPM_VOCAB - 1, 1, NULL, "tokenizer.ggml.token_type is 275 i32, expected 276",
       "one token type fewer"},
      {SPM_VOCAB, SPM_VOCAB, SPM_VOCAB, NULL,
       "tokenizer.ggml.bos_token_id = 276 is not a token id (vocab 276)", "bos one past the vocab"},
      {SPM_VOCAB, SPM_VOCAB, UINT32_MAX, NULL, "bos_token_id = 4294967295 is not a token id",
       "bos 2^32 - 1"},
      {-1, SPM_VOCAB, 1, "h zz", "merges[0] = 'h zz': the right part is not a token",
       "a merge naming an unknown token"},
      {-1, SPM_VOCAB, 1, "hz", "merges[0] = 'hz' is not \"left right\"", "a merge without a space"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    size_t size;
    uint8_t *bytes = spm_file(cases[i].n_scores, cases[i].n_types, cases[i].bos, cases[i].merge,
                              &size);
    demo_gguf *g = NULL;
    demo_tokenizer *t = NULL;
    clpa_status st = demo_gguf_open_memory(bytes, size, &g);
    if (st == CLPA_OK) st = demo_tokenizer_create(g, &t);
    ok(st == CLPA_ERR_INVALID_ARG && !t && strstr(demo_last_error(), cases[i].needle),
       "%s -> %s: %s", cases[i].what, clpa_status_name(st), demo_last_error());
    demo_tokenizer_destroy(t);
    demo_gguf_close(g);
    free(bytes);
  }
}

/* ========================================================== corruptions */

static void patch_le(uint8_t *p, size_t at, uint64_t v, int n) {
  for (int i = 0; i < n; i++) p[at + (size_t)i] = (uint8_t)(v >> (8 * i));
}

/* Opens a patched copy; expects status want and a message holding each
 * of the NULL-terminated needles. */
static void expect_open(const uint8_t *bytes, size_t n, clpa_status want, const char *what, ...) {
  demo_gguf *g = NULL;
  clpa_status st = demo_gguf_open_memory(bytes, n, &g);
  const char *msg = demo_last_error();
  bool all = true;
  va_list ap;
  va_start(ap, what);
  for (const char *needle; (needle = va_arg(ap, const char *));)
    if (!strstr(msg, needle)) all = false;
  va_end(ap);
  ok(st == want && all && !g, "%s -> %s: %s", what, clpa_status_name(st), msg);
  demo_gguf_close(g);
}

static void test_corruptions(void) {
  spec sp = {.tok = DEMO_TOKENIZER_SPM};
  size_t n;
  marks m;
  uint8_t *good = build(&sp, &n, &m);
  uint8_t *b = malloc(n);
#define FRESH() memcpy(b, good, n)

  /* truncation at every offset through the tensor infos, then every 61st
   * (cuts in the padding after the last tensor are no loss) */
  int bad = 0, count = 0;
  for (size_t cut = 0; cut < m.data_end; cut += cut < m.data_start + 8 ? 1 : 61) {
    demo_gguf *g = NULL;
    clpa_status st = demo_gguf_open_memory(good, cut, &g);
    const char *msg = demo_last_error();
    count++;
    if (st != CLPA_ERR_INVALID_ARG || g ||
        !(strstr(msg, "truncated") || strstr(msg, "past the end") || strstr(msg, "can hold") ||
          strstr(msg, "more than the"))) {
      if (bad++ < 5) diag("cut at %zu: %s: %s", cut, clpa_status_name(st), msg);
      demo_gguf_close(g);
    }
  }
  ok(bad == 0, "%d truncations each refused with a message saying so", count);
  static const struct {
    size_t cut;
    const char *needle;
  } heads[] = {{0, "24-byte GGUF header"}, {3, "24-byte GGUF header"}, {6, "24-byte GGUF header"},
               {12, "24-byte GGUF header"}, {23, "24-byte GGUF header"}};
  for (size_t i = 0; i < sizeof heads / sizeof heads[0]; i++)
    expect_open(good, heads[i].cut, CLPA_ERR_INVALID_ARG, "truncated inside the header", heads[i].needle, NULL);
  expect_open(good, 24 + 4, CLPA_ERR_INVALID_ARG, "truncated in the first key's length", "can hold", NULL);
  expect_open(good, m.infos_end - 3, CLPA_ERR_INVALID_ARG, "truncated in the last offset", "truncated",
              "offset of tensor 'extra.q8'", NULL);
  expect_open(good, m.data_end - 1, CLPA_ERR_INVALID_ARG, "one byte short", "'extra.q8'", "runs past the end", NULL);

  FRESH();
  b[0] = 'X';
  expect_open(b, n, CLPA_ERR_INVALID_ARG, "bad magic", "bad magic", NULL);
  /* regress: a file shorter than the header that is no GGUF at all was
   * "truncated: the file is 6 bytes, shorter than the 24-byte GGUF header" */
  expect_open((const uint8_t *)"hello\n", 6, CLPA_ERR_INVALID_ARG, "regress: a 6-byte text file",
              "bad magic: the file starts with 68 65 6c 6c, not \"GGUF\"", NULL);
  expect_open((const uint8_t *)"GX", 2, CLPA_ERR_INVALID_ARG, "regress: a 2-byte file, not GGUF",
              "bad magic: the file starts with 47 58, not", NULL);
  FRESH();
  patch_le(b, 4, 1, 4);
  expect_open(b, n, CLPA_ERR_UNSUPPORTED, "version 1", "version 1 is not supported", NULL);
  patch_le(b, 4, 99, 4);
  expect_open(b, n, CLPA_ERR_UNSUPPORTED, "version 99", "version 99", NULL);
  /* regress: a big-endian v3 file (GGUF allows one) was "version 50331648
   * is not supported (only 2 and 3)", not saying why */
  patch_le(b, 4, 0x03000000u, 4);
  expect_open(b, n, CLPA_ERR_UNSUPPORTED, "regress: a big-endian GGUF v3",
              "big-endian GGUF (version 3 read byte-swapped as 50331648)", "only little-endian",
              NULL);
  patch_le(b, 4, 2, 4);
  demo_gguf *g2 = NULL;
  ok(demo_gguf_open_memory(b, n, &g2) == CLPA_OK && demo_gguf_version(g2) == 2, "version 2 opens");
  demo_gguf_close(g2);
  FRESH();
  patch_le(b, 8, 1ull << 62, 8);
  expect_open(b, n, CLPA_ERR_INVALID_ARG, "tensor count 2^62", "tensor count 4611686018427387904", NULL);
  FRESH();
  patch_le(b, 16, UINT64_MAX, 8);
  expect_open(b, n, CLPA_ERR_INVALID_ARG, "metadata count 2^64-1", "metadata count", NULL);
  FRESH();
  patch_le(b, 16, 3, 8); /* fewer pairs: tensor infos are then read from metadata bytes */
  expect_open(b, n, CLPA_ERR_INVALID_ARG, "metadata count too small", "tensor", NULL);
  FRESH();
  patch_le(b, m.first_key_len, 1ull << 40, 8);
  expect_open(b, n, CLPA_ERR_INVALID_ARG, "key length 2^40", "key of metadata pair 0", "runs past the end", NULL);
  FRESH();
  patch_le(b, m.name_len, n, 8);
  expect_open(b, n, CLPA_ERR_INVALID_ARG, "string length past the end", "value of metadata 'general.name'",
              "runs past the end", NULL);
  FRESH();
  patch_le(b, m.name_len, UINT64_MAX, 8);
  expect_open(b, n, CLPA_ERR_INVALID_ARG, "string length 2^64-1", "general.name", NULL);
  FRESH();
  patch_le(b, m.tokens_count, 1ull << 60, 8);
  expect_open(b, n, CLPA_ERR_INVALID_ARG, "array count 2^60", "tokenizer.ggml.tokens", "more than the", NULL);
  FRESH();
  patch_le(b, m.u8_type, 13, 4);
  expect_open(b, n, CLPA_ERR_INVALID_ARG, "unknown value type", "'test.u8': unknown value type 13", NULL);
  FRESH();
  patch_le(b, m.arr_elem_type, DEMO_GGUF_ARRAY, 4);
  expect_open(b, n, CLPA_ERR_UNSUPPORTED, "array of arrays", "'test.arr_u8': arrays of arrays", NULL);
  FRESH();
  patch_le(b, m.arr_elem_type, 77, 4);
  expect_open(b, n, CLPA_ERR_INVALID_ARG, "unknown array element type", "unknown array element type 77", NULL);

  int last = m.n_tensors - 1, k = m.k_tensor;
  FRESH();
  patch_le(b, m.t_offset[last], (n - m.data_start + 31) / 32 * 32, 8);
  expect_open(b, n, CLPA_ERR_INVALID_ARG, "tensor data past the end", "tensor 'extra.q8': data [",
              "runs past the end of the file (size", NULL);
  FRESH();
  patch_le(b, m.t_offset[last], UINT64_MAX - 31, 8);
  expect_open(b, n, CLPA_ERR_INVALID_ARG, "tensor offset near 2^64", "'extra.q8'", "runs past the end", NULL);
  FRESH();
  patch_le(b, m.t_offset[k], 32 * 1000 + 4, 8);
  expect_open(b, n, CLPA_ERR_INVALID_ARG, "misaligned offset", "'blk.0.attn_k.weight': offset 32004",
              "not a multiple of the alignment 32", NULL);
  FRESH();
  patch_le(b, m.t_type[k], 4, 4);
  expect_open(b, n, CLPA_ERR_INVALID_ARG, "removed tensor type 4", "'blk.0.attn_k.weight': unknown ggml type 4", NULL);
  patch_le(b, m.t_type[k], 1000, 4);
  expect_open(b, n, CLPA_ERR_INVALID_ARG, "tensor type 1000", "unknown ggml type 1000", NULL);
  FRESH();
  patch_le(b, m.t_type[k], 2, 4); /* q4_0 over ne[0] = 8: not whole blocks */
  expect_open(b, n, CLPA_ERR_INVALID_ARG, "q4_0 with ne[0] 8", "not a multiple of q4_0's block of 32", NULL);
  int q4 = -1, norm = -1;
  for (int i = 0; i < m.n_tensors; i++) {
    const char *nm = (const char *)good + m.t_name[i];
    if (!strncmp(nm, "extra.q4_0", 10)) q4 = i;
    if (!strncmp(nm, "output_norm.weight", 18)) norm = i;
  }
  FRESH();
  patch_le(b, m.t_type[q4], DEMO_GGML_Q4_K, 4); /* q4_K over ne[0] = 64: not whole super-blocks */
  expect_open(b, n, CLPA_ERR_INVALID_ARG, "q4_K with ne[0] 64",
              "tensor 'extra.q4_0': ne[0] = 64 is not a multiple of q4_K's block of 256", NULL);
  patch_le(b, m.t_type[q4], DEMO_GGML_Q6_K, 4);
  expect_open(b, n, CLPA_ERR_INVALID_ARG, "q6_K with ne[0] 64", "not a multiple of q6_K's block of 256", NULL);
  FRESH();
  patch_le(b, m.t_type[q4], 3, 4); /* q4_1: whole blocks, opens, but not read */
  {
    demo_gguf *g = NULL;
    demo_gguf_raw r;
    float f[128];
    clpa_status st = demo_gguf_open_memory(b, n, &g);
    const demo_gguf_tensor *t = g ? demo_gguf_get_tensor(g, "extra.q4_0") : NULL;
    st = t ? demo_gguf_tensor_to_f32(t, f, 128) : st;
    ok(st == CLPA_ERR_UNSUPPORTED &&
           strstr(demo_last_error(),
                  "tensor 'extra.q4_0' has type q4_1; the demo reads f32, f16, bf16, q4_0, q8_0, q4_K, q5_K and q6_K") &&
           t && demo_gguf_tensor_raw(t, &r) == CLPA_ERR_UNSUPPORTED,
       "a q4_1 tensor opens, but to_f32 and raw refuse it, listing the types read: %s", demo_last_error());
    demo_gguf_close(g);
  }
  /* regress: an f32 tensor of 2^62 elements has 2^64 bytes; the size
   * wrapped to 0, and the file opened */
  FRESH();
  patch_le(b, m.t_ndims[norm] + 4, 1ull << 62, 8);
  expect_open(b, n, CLPA_ERR_INVALID_ARG, "regress: an f32 tensor of 2^62 elements",
              "tensor 'output_norm.weight': 4611686018427387904 elements of f32 take more than 2^64 bytes", NULL);
  FRESH();
  patch_le(b, m.t_ndims[k], 5, 4);
  expect_open(b, n, CLPA_ERR_INVALID_ARG, "n_dims 5", "'blk.0.attn_k.weight': n_dims 5 is not in [1, 4]", NULL);
  patch_le(b, m.t_ndims[k], 0, 4);
  expect_open(b, n, CLPA_ERR_INVALID_ARG, "n_dims 0", "n_dims 0", NULL);
  FRESH();
  patch_le(b, m.t_ndims[k] + 4, 1ull << 62, 8);
  patch_le(b, m.t_ndims[k] + 12, 1ull << 62, 8);
  expect_open(b, n, CLPA_ERR_INVALID_ARG, "dims whose product overflows", "overflow", NULL);
  /* regress: tensors sharing bytes opened ("not checked, harmless to
   * read"), but the loader makes floats of each, so the same bytes named by
   * every layer made a small file ask for many times its size */
  int q = -1;
  for (int i = 0; i < m.n_tensors; i++)
    if (!strncmp((const char *)good + m.t_name[i], "blk.0.attn_q.weight", 19)) q = i;
  FRESH();
  memcpy(b + m.t_offset[k], good + m.t_offset[q], 8); /* attn_k [8, 4] inside attn_q [8, 8] */
  expect_open(b, n, CLPA_ERR_INVALID_ARG, "regress: attn_k's data inside attn_q's",
              "'blk.0.attn_k.weight': data [", "overlaps tensor 'blk.0.attn_q.weight' at [", NULL);
  FRESH();
  memcpy(b + m.t_name[k], "blk.0.attn_q.weight", 19); /* attn_k -> attn_q */
  expect_open(b, n, CLPA_ERR_INVALID_ARG, "duplicate tensor names", "duplicate tensor name 'blk.0.attn_q.weight'", NULL);
  FRESH();
  b[m.t_name[k] + 3] = 0;
  expect_open(b, n, CLPA_ERR_INVALID_ARG, "NUL inside a tensor name", "NUL", NULL);

  /* variations the writer makes */
  size_t vn;
  marks vm;
  uint8_t *v;
  spec dup = {.tok = DEMO_TOKENIZER_SPM, .dup_key = true};
  v = build(&dup, &vn, &vm);
  expect_open(v, vn, CLPA_ERR_INVALID_ARG, "duplicate key", "duplicate metadata key 'test.u8'", NULL);
  free(v);
  spec al = {.tok = DEMO_TOKENIZER_SPM, .alignment = 48};
  v = build(&al, &vn, &vm);
  expect_open(v, vn, CLPA_ERR_INVALID_ARG, "alignment 48", "general.alignment 48 is not a power of two", NULL);
  free(v);
  demo_gguf *g = NULL;
  ok(demo_gguf_open("/nonexistent/dir/model.gguf", &g) == CLPA_ERR_IO && !g &&
         strstr(demo_last_error(), "cannot open '/nonexistent/dir/model.gguf'"),
     "missing file -> CLPA_ERR_IO: %s", demo_last_error());
  free(b);
  free(good);
}

/* Files that open but whose model or tokenizer must be refused. */
static void expect_config(const spec *sp, clpa_status want, const char *needle, const char *what) {
  uint8_t *bytes;
  demo_gguf *g = open_spec(sp, &bytes);
  demo_gguf_llama c;
  clpa_status st = g ? demo_gguf_llama_config(g, &c) : CLPA_ERR_STATE;
  ok(st == want && strstr(demo_last_error(), needle), "%s -> %s: %s", what, clpa_status_name(st),
     demo_last_error());
  demo_gguf_close(g);
  free(bytes);
}
static void expect_tokenizer(const spec *sp, clpa_status want, const char *needle, const char *what) {
  uint8_t *bytes;
  demo_gguf *g = open_spec(sp, &bytes);
  demo_tokenizer *t = NULL;
  clpa_status st = g ? demo_tokenizer_create(g, &t) : CLPA_ERR_STATE;
  ok(st == want && !t && strstr(demo_last_error(), needle), "%s -> %s: %s", what, clpa_status_name(st),
     demo_last_error());
  demo_tokenizer_destroy(t);
  demo_gguf_close(g);
  free(bytes);
}

static void test_model_refusals(void) {
  spec s = {.tok = DEMO_TOKENIZER_SPM, .arch = "gpt2"};
  expect_config(&s, CLPA_ERR_UNSUPPORTED, "architecture 'gpt2' is not supported", "non-llama architecture");
  static const char *required[] = {"general.architecture", "llama.embedding_length", "llama.block_count",
                                   "llama.attention.head_count", "llama.feed_forward_length",
                                   "llama.context_length", "llama.attention.layer_norm_rms_epsilon"};
  for (size_t i = 0; i < sizeof required / sizeof required[0]; i++) {
    spec r = {.tok = DEMO_TOKENIZER_SPM, .skip_key = required[i]};
    char needle[128];
    snprintf(needle, sizeof needle, "missing metadata key '%s'", required[i]);
    expect_config(&r, CLPA_ERR_INVALID_ARG, needle, "missing required key");
  }
  spec opt = {.tok = DEMO_TOKENIZER_SPM, .skip_key = "llama.attention.head_count_kv"};
  expect_config(&opt, CLPA_ERR_INVALID_ARG, "'blk.0.attn_k.weight' has shape [8, 4], expected [8, 8]",
                "head_count_kv defaults to head_count (then attn_k's shape is wrong)");
  spec ws = {.tok = DEMO_TOKENIZER_SPM, .block_count_as_string = true};
  expect_config(&ws, CLPA_ERR_INVALID_ARG, "'llama.block_count' is a string, expected u32", "ill-typed key");
  spec mt = {.tok = DEMO_TOKENIZER_SPM, .skip_tensor = "blk.1.ffn_down.weight"};
  expect_config(&mt, CLPA_ERR_INVALID_ARG, "missing tensor 'blk.1.ffn_down.weight'", "missing tensor");
  spec ot = {.tok = DEMO_TOKENIZER_SPM, .odd_tensor = "blk.1.attn_v.weight"};
  expect_config(&ot, CLPA_ERR_UNSUPPORTED, "'blk.1.attn_v.weight' has type i8", "tensor of an unsupported type");
  spec me = {.tok = DEMO_TOKENIZER_SPM, .skip_key = "tokenizer.ggml.model"};
  expect_tokenizer(&me, CLPA_ERR_INVALID_ARG, "missing metadata key 'tokenizer.ggml.model'", "no tokenizer model");
  spec bert = {.tok = DEMO_TOKENIZER_SPM, .tok_model = "bert"};
  expect_tokenizer(&bert, CLPA_ERR_UNSUPPORTED, "tokenizer.ggml.model 'bert' is not supported", "bert tokenizer");
  spec ns = {.tok = DEMO_TOKENIZER_SPM, .skip_key = "tokenizer.ggml.scores"};
  expect_tokenizer(&ns, CLPA_ERR_INVALID_ARG, "missing metadata key 'tokenizer.ggml.scores'", "SPM without scores");
  spec nt = {.tok = DEMO_TOKENIZER_SPM, .skip_key = "tokenizer.ggml.tokens"};
  expect_tokenizer(&nt, CLPA_ERR_INVALID_ARG, "missing metadata key 'tokenizer.ggml.tokens'", "no tokens");
  spec nm = {.tok = DEMO_TOKENIZER_BPE, .skip_key = "tokenizer.ggml.merges"};
  expect_tokenizer(&nm, CLPA_ERR_INVALID_ARG, "missing metadata key 'tokenizer.ggml.merges'", "BPE without merges");
  spec bm = {.tok = DEMO_TOKENIZER_BPE, .bad_merge = true};
  expect_tokenizer(&bm, CLPA_ERR_INVALID_ARG, "tokenizer.ggml.merges[0] = 'l q': the merged text is not a token",
                   "merge whose result is no token");
}

/* llama.cpp's Llama creates optional tensors (llama-model.cpp: the
 * attention biases attn_q/k/v/output.bias, the MLP biases ffn_gate/up/
 * down.bias, experts) and adds them where present; the demo ignored every
 * tensor it did not ask for, so such a file ran without its biases. Now
 * every tensor must be one the demo runs, as llama.cpp's loader refuses a
 * tensor it does not create. */
static void regress_unused_tensors_refused(void) {
  static const char *const extra[] = {"blk.0.attn_q.bias", "blk.1.attn_output.bias",
                                      "blk.0.ffn_down.bias", "blk.2.attn_norm.weight",
                                      "blk.01.attn_norm.weight", "output_norm.bias"};
  for (size_t i = 0; i < sizeof extra / sizeof extra[0]; i++) {
    spec s = {.tok = DEMO_TOKENIZER_SPM, .no_extras = true, .more_tensor = extra[i]};
    char needle[96];
    snprintf(needle, sizeof needle, "tensor '%s' is not one of the Llama tensors", extra[i]);
    expect_config(&s, CLPA_ERR_UNSUPPORTED, needle, "regress: a tensor the demo does not run");
  }
}

/* Keys with which llama.cpp runs a Llama otherwise were ignored: experts
 * (llama.expert_count: llama.cpp runs its MoE branch) and a non-causal
 * mask. Each is refused, naming the key; harmless values still load, and
 * so do the keys llama.cpp ignores for a Llama (a sliding window, a
 * clamped or rescaled attention: its other architectures' keys). */
static void regress_unsupported_keys_refused(void) {
  static const struct {
    const char *key;
    uint32_t type;
    uint64_t bits;
    const char *needle; /* NULL: loads */
  } cases[] = {
      {"llama.expert_count", DEMO_GGUF_U32, 8, "llama.expert_count = 8: mixture-of-experts"},
      {"llama.expert_count", DEMO_GGUF_U32, 0, NULL},
      {"llama.attention.causal", DEMO_GGUF_BOOL, 0, "llama.attention.causal = false"},
      {"llama.attention.causal", DEMO_GGUF_BOOL, 1, NULL},
      {"llama.attention.sliding_window", DEMO_GGUF_U32, 16, NULL},
      {"llama.attention.clamp_kqv", DEMO_GGUF_F32, 0x41000000, NULL},
      {"llama.attention.scale", DEMO_GGUF_F32, 0x3e000000, NULL},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    spec s = {.tok = DEMO_TOKENIZER_SPM, .no_extras = true};
    s.more[0].key = cases[i].key, s.more[0].type = cases[i].type, s.more[0].bits = cases[i].bits;
    char what[96];
    snprintf(what, sizeof what, "regress: %s = %llu (bits)", cases[i].key,
             (unsigned long long)cases[i].bits);
    expect_config(&s, cases[i].needle ? CLPA_ERR_UNSUPPORTED : CLPA_OK,
                  cases[i].needle ? cases[i].needle : "", what);
  }
}

/* llama.cpp's RoPE scaling keys (llama-model.cpp's load_hparams): the type
 * defaults to linear, the factor is rope.scaling.factor or the older
 * rope.scale_linear, "none" never scales. They were ignored, so a linearly
 * scaled model (a long-context fine-tune) ran with unscaled RoPE, and a
 * YaRN one was taken for an unscaled one. */
static void regress_rope_scaling_keys(void) {
  static const struct {
    const char *type;  /* rope.scaling.type, NULL: absent */
    const char *key;   /* the factor's key, NULL: absent */
    float factor, attn; /* attn 0: no attn_factor key */
    clpa_status want;
    float scale;       /* rope_linear_scale wanted */
    const char *needle;
  } cases[] = {
      {NULL, NULL, 0, 0, CLPA_OK, 1.0f, ""},
      {NULL, "llama.rope.scaling.factor", 4, 0, CLPA_OK, 4.0f, ""},
      {"linear", "llama.rope.scaling.factor", 8, 1, CLPA_OK, 8.0f, ""},
      {"linear", "llama.rope.scaling.factor", 0, 0, CLPA_OK, 1.0f, ""},
      {NULL, "llama.rope.scale_linear", 2, 0, CLPA_OK, 2.0f, ""},
      {"none", "llama.rope.scaling.factor", 4, 0, CLPA_OK, 1.0f, ""},
      {"yarn", "llama.rope.scaling.factor", 4, 0, CLPA_ERR_UNSUPPORTED, 0,
       "llama.rope.scaling.type 'yarn' is not supported (only linear and none)"},
      {"longrope", NULL, 0, 0, CLPA_ERR_UNSUPPORTED, 0, "'longrope' is not supported"},
      {"linear", "llama.rope.scaling.factor", 2, 0.5f, CLPA_ERR_UNSUPPORTED, 0,
       "llama.rope.scaling.attn_factor = 0.5 is not supported"},
      {"linear", "llama.rope.scaling.factor", -1, 0, CLPA_ERR_INVALID_ARG, 0,
       "llama.rope.scaling.factor = -1 is not in [0, 1e6]"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    spec s = {.tok = DEMO_TOKENIZER_SPM, .no_extras = true};
    int n = 0;
    if (cases[i].type)
      s.more[n].key = "llama.rope.scaling.type", s.more[n].type = DEMO_GGUF_STRING,
      s.more[n++].str = cases[i].type;
    if (cases[i].key)
      s.more[n].key = cases[i].key, s.more[n].type = DEMO_GGUF_F32,
      s.more[n++].bits = f32_bits(cases[i].factor);
    if (cases[i].attn != 0)
      s.more[n].key = "llama.rope.scaling.attn_factor", s.more[n].type = DEMO_GGUF_F32,
      s.more[n++].bits = f32_bits(cases[i].attn);
    uint8_t *bytes;
    demo_gguf *g = open_spec(&s, &bytes);
    demo_gguf_llama c;
    memset(&c, 0, sizeof c);
    clpa_status st = g ? demo_gguf_llama_config(g, &c) : CLPA_ERR_STATE;
    ok(st == cases[i].want && (st != CLPA_OK || c.rope_linear_scale == cases[i].scale) &&
           (st == CLPA_OK || strstr(demo_last_error(), cases[i].needle)),
       "regress: rope.scaling.type %s, %s %g -> %s, scale %g%s%s",
       cases[i].type ? cases[i].type : "-", cases[i].key ? cases[i].key : "no factor",
       (double)cases[i].factor, clpa_status_name(st), (double)c.rope_linear_scale,
       st ? ": " : "", st ? demo_last_error() : "");
    demo_gguf_close(g);
    free(bytes);
  }
}

/* GGUF strings are length-prefixed: "llama\0x" (7 bytes) read as a C
 * string was "llama", and the demo took the file for a Llama (issue 41).
 * The file still opens (an unused value may hold anything); reading such a
 * value as a string is refused, naming the key, for every key alike. */
static void regress_string_with_nul_is_refused(void) {
  spec s = {.tok = DEMO_TOKENIZER_SPM, .arch = "llama\0x", .arch_len = 7};
  uint8_t *bytes;
  demo_gguf *g = open_spec(&s, &bytes);
  ok(g != NULL, "regress: a file whose general.architecture is \"llama\\0x\" opens");
  demo_gguf_str v = {"", 0};
  clpa_status st = g ? demo_gguf_get_str(g, "general.architecture", &v, NULL) : CLPA_ERR_STATE;
  ok(st == CLPA_ERR_INVALID_ARG &&
         strstr(demo_last_error(), "metadata 'general.architecture' holds a NUL byte (byte 5 of 7)"),
     "regress: demo_gguf_get_str refuses it -> %s: %s", clpa_status_name(st), demo_last_error());
  demo_gguf_close(g);
  free(bytes);
  expect_config(&s, CLPA_ERR_INVALID_ARG, "metadata 'general.architecture' holds a NUL byte",
                "regress: \"llama\\0x\" is not taken for a Llama");
  spec t = {.tok = DEMO_TOKENIZER_SPM, .tok_model = "llama\0", .tok_model_len = 6};
  expect_tokenizer(&t, CLPA_ERR_INVALID_ARG, "metadata 'tokenizer.ggml.model' holds a NUL byte (byte 5 of 6)",
                   "regress: nor \"llama\\0\" for a SentencePiece tokenizer");
}

/* A path that is not a regular file is refused, saying what it is: a
 * directory was "not a readable regular file: " followed by whatever errno
 * an earlier call had left (fstat had succeeded), and a FIFO blocked in
 * open() until a writer came, forever (the alarm makes that a failure). */
static void regress_special_files_are_refused(void) {
#if defined(__unix__) || defined(__APPLE__)
  demo_gguf *g = NULL;
  errno = ENOENT;
  clpa_status st = demo_gguf_open("/", &g);
  const char *msg = demo_last_error();
  ok(st == CLPA_ERR_IO && !g && strstr(msg, "'/' is a directory, not a regular file") &&
         !strstr(msg, "No such file"),
     "regress: a directory -> %s: %s", clpa_status_name(st), demo_last_error());
  const char *tmp = getenv("CLPA_TEST_TMP");
  char fifo[4096];
  snprintf(fifo, sizeof fifo, "%s/test_demo_gguf_fifo_%ld", tmp ? tmp : "/tmp", (long)getpid());
  unlink(fifo);
  if (mkfifo(fifo, 0600)) {
    ok(1, "# SKIP cannot make a FIFO at %s", fifo);
    return;
  }
  alarm(20);
  st = demo_gguf_open(fifo, &g);
  alarm(0);
  ok(st == CLPA_ERR_IO && !g && strstr(demo_last_error(), "is a FIFO, not a regular file"),
     "regress: a FIFO is refused at once -> %s: %s", clpa_status_name(st), demo_last_error());
  unlink(fifo);
#else
  ok(1, "# SKIP no FIFOs here");
#endif
}

/* ================================================================= fuzz */

static void fuzz(int iters) {
  /* the BPE file without the extra.* tensors, so that its flips reach the whole llama config */
  spec specs[2] = {{.tok = DEMO_TOKENIZER_SPM},
                   {.tok = DEMO_TOKENIZER_BPE, .pre = "llama-bpe", .no_extras = true}};
  int opened = 0, configs = 0, toks = 0;
  for (int w = 0; w < 2; w++) {
    size_t n;
    marks m;
    uint8_t *good = build(&specs[w], &n, &m), *b = malloc(n);
    float *f = malloc(sizeof(float) * 8 * 300);
    for (int it = 0; it < iters; it++) {
      memcpy(b, good, n);
      int flips = 1 + (int)rng_below(4);
      for (int k = 0; k < flips; k++) {
        /* mostly the metadata and tensor infos: flipping data is dull */
        size_t at = rng_below(4) ? rng_below((uint32_t)m.data_start) : rng_below((uint32_t)n);
        b[at] ^= (uint8_t)(1u << rng_below(8));
      }
      size_t len = rng_below(8) ? n : rng_below((uint32_t)n);
      demo_gguf *g = NULL;
      if (demo_gguf_open_memory(b, len, &g)) continue;
      opened++;
      demo_gguf_llama c;
      if (!demo_gguf_llama_config(g, &c)) configs++;
      for (uint64_t i = 0; i < demo_gguf_tensor_count(g); i++) {
        const demo_gguf_tensor *t = demo_gguf_tensor_at(g, i);
        if (t->n_elems <= 8 * 300) demo_gguf_tensor_to_f32(t, f, (uint64_t)t->n_elems);
      }
      demo_tokenizer *t = NULL;
      if (!demo_tokenizer_create(g, &t)) {
        toks++;
        int32_t *ids = NULL;
        size_t nid = 0;
        const char *text = "<s>hello world, it's 2024!\n\xc3\xa9\xff";
        if (!demo_tokenizer_encode(t, text, strlen(text), demo_tokenizer_bos(t) >= 0, true, &ids, &nid)) {
          char *out = NULL;
          size_t ol;
          if (!demo_tokenizer_decode(t, ids, nid, &out, &ol)) free(out);
          free(ids);
        }
      }
      demo_tokenizer_destroy(t);
      demo_gguf_close(g);
    }
    free(f);
    free(b);
    free(good);
  }
  ok(1, "fuzz: %d flipped files, %d opened, %d llama configs, %d tokenizers, no crash", 2 * iters, opened, configs,
     toks);
}

int main(int argc, char **argv) {
  rng_seed_from_env();
  int iters = argc > 1 ? atoi(argv[1]) : 3000;
  make_spm_vocab();
  make_bpe_vocab();
  test_metadata();
  test_tensors_and_config(DEMO_TOKENIZER_SPM);
  test_tensors_and_config(DEMO_TOKENIZER_BPE);
  test_rope_convention();
  test_spm();
  test_spm_merges_model();
  test_bpe("llama-bpe");
  test_bpe(NULL);
  regress_llama3_pre_tokenizer_names();
  regress_user_defined_tokens_without_parse_special();
  regress_eog_by_text();
  regress_unknown_piece_is_empty();
  regress_unused_piece_is_empty();
  regress_user_defined_piece_as_is();
  regress_bpe_piece_outside_byte_table();
  regress_eog_by_text_is_control();
  regress_pretok_unicode_classes();
  regress_bpe_invalid_utf8();
  regress_spm_invalid_utf8_symbols();
  regress_spm_lead_byte_before_space();
  regress_bpe_pieces_bounded_by_texts();
  test_vocab_mismatches();
  test_corruptions();
  test_model_refusals();
  regress_rope_scaling_keys();
  regress_unused_tensors_refused();
  regress_unsupported_keys_refused();
  regress_string_with_nul_is_refused();
  regress_special_files_are_refused();
  fuzz(iters);
  for (int i = 0; i < SPM_VOCAB; i++) free(spm_tokens[i]);
  for (int i = 0; i < BPE_VOCAB; i++) free(bpe_tokens[i]);
  for (int i = 0; i < 11; i++) free(bpe_merges[i]);
  return done_testing();
}
