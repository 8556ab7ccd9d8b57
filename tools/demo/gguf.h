/*
 * gguf.h — a validating reader of GGUF v2/v3 files (llama.cpp's model
 * format) for clpa-demo: metadata, tensor directory, tensor data, and the
 * Llama configuration. Host C11, libc only (plus mmap where POSIX has it).
 *
 * The file, little-endian throughout:
 *
 *   "GGUF"  u32 version (2 or 3)  u64 tensor_count  u64 kv_count
 *   kv_count x   { string key, u32 value_type, value }
 *   tensor_count x { string name, u32 n_dims, u64 ne[n_dims], u32 ggml_type, u64 offset }
 *   padding to general.alignment (default 32)
 *   data section: tensor t's bytes at data_start + offset(t), offset a multiple
 *                 of the alignment
 *
 *   string = u64 length, then that many bytes (no terminator)
 *   array  = u32 element type, u64 count, then the elements (no arrays of arrays)
 *
 * demo_gguf_open checks all of it before returning anything: every length
 * and count against the bytes left (so a corrupt count cannot make it
 * allocate or read past the end), UTF-8-agnostic but NUL-free keys and
 * names, duplicate keys and tensor names, n_dims in [1, 4], known tensor
 * types (any type ggml defines: the file opens; asking for one the demo
 * cannot convert as floats is CLPA_ERR_UNSUPPORTED), ne[0] a whole number
 * of the type's blocks, each tensor's size (rows x ne[0] / block x bytes
 * per block) within 64 bits and its [offset, offset + size) aligned and
 * inside the file, no two sharing a byte (ggml packs them; sharing would
 * let a small file make the loader allocate many times its size). Every
 * failure returns a status with a message naming the problem in
 * demo_last_error() (error.h):
 *
 *   CLPA_ERR_IO           the file cannot be opened, sized or read
 *   CLPA_ERR_UNSUPPORTED  version other than 2/3, a big-endian file (v3
 *                         allows one; named as such), arrays of arrays, a
 *                         non-llama architecture, a tensor type the demo
 *                         cannot convert (asked for by name)
 *   CLPA_ERR_INVALID_ARG  malformed content (truncation, bad magic, bad
 *                         counts, lengths, types, offsets, duplicates,
 *                         missing or ill-typed keys, wrong shapes)
 *   CLPA_ERR_OUT_OF_MEMORY
 *
 * Tensor shapes are in GGUF order: ne[0] varies fastest. A 2-D weight
 * with ne = [in, out] is therefore, in memory, the row-major matrix
 * [out][in] (one row per output feature), which is what the demo's
 * weights are: no transposition is ever needed.
 */
#ifndef CLPA_DEMO_GGUF_H
#define CLPA_DEMO_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "clpa_base.h"
#include "error.h"
#include "quant.h"

/* ======================================================================
 * Opening
 * ==================================================================== */

struct demo_gguf;
typedef struct demo_gguf demo_gguf;

/* Opens and validates path (mapped read-only where POSIX mmap exists, else
 * read whole). Returns CLPA_OK with *out set, or an error (see above) with
 * *out untouched. */
clpa_status demo_gguf_open(const char *path, demo_gguf **out);
/* The same over bytes in memory, which are borrowed (not copied): they must
 * outlive the returned object. */
clpa_status demo_gguf_open_memory(const void *data, size_t size, demo_gguf **out);
/* Frees everything (and unmaps); accepts NULL. */
void demo_gguf_close(demo_gguf *g);

/* Returns the file's GGUF version (2 or 3). */
uint32_t demo_gguf_version(const demo_gguf *g);

/* ======================================================================
 * Metadata
 *
 * Every getter takes `found`: NULL makes a missing key an error
 * (CLPA_ERR_INVALID_ARG "missing metadata key 'k'"); non-NULL makes it
 * optional (CLPA_OK, *found = false, *out untouched). A present key of
 * the wrong type is always CLPA_ERR_INVALID_ARG naming the key, its type
 * and the type wanted; so is a string value holding a NUL byte (the file
 * opens, but demo_gguf_get_str refuses it: its s would end early). Conversions allowed: the integer getters take any
 * integer type whose value fits; demo_gguf_get_f32 takes f32, f64 (rounded)
 * and integers; nothing converts to or from strings, bools or arrays.
 * ==================================================================== */

typedef enum demo_gguf_type {
  DEMO_GGUF_U8 = 0,
  DEMO_GGUF_I8 = 1,
  DEMO_GGUF_U16 = 2,
  DEMO_GGUF_I16 = 3,
  DEMO_GGUF_U32 = 4,
  DEMO_GGUF_I32 = 5,
  DEMO_GGUF_F32 = 6,
  DEMO_GGUF_BOOL = 7,
  DEMO_GGUF_STRING = 8,
  DEMO_GGUF_ARRAY = 9,
  DEMO_GGUF_U64 = 10,
  DEMO_GGUF_I64 = 11,
  DEMO_GGUF_F64 = 12,
  DEMO_GGUF_TYPE_COUNT_ = 13
} demo_gguf_type;

/* Returns "u8", "i32", "string", "array", ... or "invalid". */
const char *demo_gguf_type_name(demo_gguf_type t);

/* A string from the file: s is a NUL-terminated copy, len its length in
 * bytes. A string in an array may hold NUL bytes (read it by len); keys,
 * tensor names and what demo_gguf_get_str returns may not. */
typedef struct demo_gguf_str {
  const char *s;
  size_t len;
} demo_gguf_str;

/* An array value. Fixed-size elements stay in the file's bytes (raw,
 * little-endian, possibly unaligned: read them through the accessors);
 * string elements are in strs. */
typedef struct demo_gguf_arr {
  demo_gguf_type type; /* element type, never DEMO_GGUF_ARRAY */
  uint64_t n;
  const void *raw;           /* fixed-size types; NULL for strings */
  const demo_gguf_str *strs; /* DEMO_GGUF_STRING; NULL otherwise */
} demo_gguf_arr;

/* The number of metadata pairs, and pair i's key and value type (i in
 * [0, count), in file order); NULL / DEMO_GGUF_TYPE_COUNT_ out of range. */
uint64_t demo_gguf_kv_count(const demo_gguf *g);
const char *demo_gguf_kv_key(const demo_gguf *g, uint64_t i);
demo_gguf_type demo_gguf_kv_type(const demo_gguf *g, uint64_t i);

clpa_status demo_gguf_get_u32(const demo_gguf *g, const char *key, uint32_t *out, bool *found);
clpa_status demo_gguf_get_i32(const demo_gguf *g, const char *key, int32_t *out, bool *found);
clpa_status demo_gguf_get_u64(const demo_gguf *g, const char *key, uint64_t *out, bool *found);
clpa_status demo_gguf_get_i64(const demo_gguf *g, const char *key, int64_t *out, bool *found);
clpa_status demo_gguf_get_f32(const demo_gguf *g, const char *key, float *out, bool *found);
clpa_status demo_gguf_get_f64(const demo_gguf *g, const char *key, double *out, bool *found);
clpa_status demo_gguf_get_bool(const demo_gguf *g, const char *key, bool *out, bool *found);
clpa_status demo_gguf_get_str(const demo_gguf *g, const char *key, demo_gguf_str *out, bool *found);
/* elem_type: the element type wanted, or DEMO_GGUF_TYPE_COUNT_ for any. */
clpa_status demo_gguf_get_arr(const demo_gguf *g, const char *key, demo_gguf_type elem_type,
                              demo_gguf_arr *out, bool *found);

/* Element i (< a->n) of a numeric or bool array, converted: exactly for
 * integers that fit; f32/f64 to the nearest. Out of range or a string
 * array gives 0. */
int64_t demo_gguf_arr_i64(const demo_gguf_arr *a, uint64_t i);
double demo_gguf_arr_f64(const demo_gguf_arr *a, uint64_t i);
float demo_gguf_arr_f32(const demo_gguf_arr *a, uint64_t i);

/* ======================================================================
 * Tensors
 * ==================================================================== */

/* ggml tensor types the demo converts to floats: these three and quant.h's
 * block types (DEMO_GGML_Q4_0, _Q8_0, _Q4_K, _Q5_K, _Q6_K). The file may
 * hold any type ggml knows (demo_gguf_ggml_type_name names them). */
enum {
  DEMO_GGML_F32 = 0,
  DEMO_GGML_F16 = 1,
  DEMO_GGML_BF16 = 30,
};
/* For messages: every type the demo reads. */
#define DEMO_GGUF_TYPE_NAMES "f32, f16, bf16, " DEMO_QUANT_TYPE_NAMES

/* Returns "f32", "f16", "q4_0", "q8_0", "bf16", ... or NULL for a type
 * number ggml does not define. */
const char *demo_gguf_ggml_type_name(uint32_t type);

typedef struct demo_gguf_tensor {
  const char *name;
  uint32_t n_dims;  /* 1..4 */
  int64_t ne[4];    /* GGUF order, ne[0] fastest; 1 past n_dims */
  int64_t n_elems;  /* product of ne */
  uint32_t type;    /* ggml type number */
  uint64_t offset;  /* from the start of the data section */
  uint64_t size;    /* bytes: ne[1] * ne[2] * ne[3] rows of ne[0] / block blocks */
  const void *data; /* inside the file's bytes; aligned as the file says */
} demo_gguf_tensor;

uint64_t demo_gguf_tensor_count(const demo_gguf *g);
/* Tensor i in file order, or NULL out of range. */
const demo_gguf_tensor *demo_gguf_tensor_at(const demo_gguf *g, uint64_t i);
/* The tensor named name, or NULL (not an error: nothing is recorded). */
const demo_gguf_tensor *demo_gguf_get_tensor(const demo_gguf *g, const char *name);

/* Looks up a tensor the model needs and checks it: present
 * (CLPA_ERR_INVALID_ARG "missing tensor 'x'"), of shape [ne0] (ne1 == 0)
 * or [ne0, ne1] in GGUF order (CLPA_ERR_INVALID_ARG naming both shapes),
 * of a type the demo reads, DEMO_GGUF_TYPE_NAMES (else
 * CLPA_ERR_UNSUPPORTED naming tensor and type and listing those). Returns
 * CLPA_OK with *out set. */
clpa_status demo_gguf_expect(const demo_gguf *g, const char *name, int64_t ne0, int64_t ne1,
                             const demo_gguf_tensor **out);

/* Converts all of t's elements to floats in file order (for 2-D, the
 * row-major [ne1][ne0]): exact for f32, f16 and bf16 (clpa_f16_to_f32,
 * clpa_bf16_to_f32); the quantized types decoded on the host by
 * demo_quant_dequantize, bit for bit as ggml's dequantize_row_*. n must
 * equal t->n_elems. Returns CLPA_OK, CLPA_ERR_UNSUPPORTED (other types,
 * naming tensor and type and listing DEMO_GGUF_TYPE_NAMES) or
 * CLPA_ERR_INVALID_ARG (n wrong, NULL). */
clpa_status demo_gguf_tensor_to_f32(const demo_gguf_tensor *t, float *dst, uint64_t n);

/* A tensor's bytes as the file holds them (little-endian; for the block
 * types, ne[0] / block blocks per row laid out as quant.h draws them), for
 * a caller that uploads quantized weights as they are. */
typedef struct demo_gguf_raw {
  const void *data;      /* t->data */
  uint32_t type;         /* ggml type number (DEMO_GGML_*) */
  uint64_t size;         /* bytes: rows * row_bytes */
  uint64_t rows;         /* ne[1] * ne[2] * ne[3] (0 when ne[0] is) */
  uint64_t row_bytes;    /* ne[0] / block_elems * block_bytes */
  uint32_t block_elems;  /* 1 for f32 / f16 / bf16; 32 or 256 */
  uint32_t block_bytes;  /* 4 or 2; 18, 34, 144, 176 or 210 */
} demo_gguf_raw;

/* Fills *out for a tensor of a type the demo reads (DEMO_GGUF_TYPE_NAMES;
 * t->data, t->type and t->size hold the same for any type). Returns
 * CLPA_OK, CLPA_ERR_UNSUPPORTED (another type, as demo_gguf_tensor_to_f32
 * says it) or CLPA_ERR_INVALID_ARG (NULL); *out untouched on an error. */
clpa_status demo_gguf_tensor_raw(const demo_gguf_tensor *t, demo_gguf_raw *out);

/* ======================================================================
 * Llama (gguf_llama.c: llama.cpp's conventions over the reader above)
 *
 * Metadata read (llama.cpp's names; * = required):
 *   general.architecture*            "llama" (else CLPA_ERR_UNSUPPORTED naming it)
 *   llama.embedding_length*          hidden
 *   llama.block_count*               layers
 *   llama.attention.head_count*      heads (hidden % heads == 0; head_size = hidden / heads)
 *   llama.attention.head_count_kv    kv_heads (default heads; heads % kv_heads == 0)
 *   llama.feed_forward_length*       ffn
 *   llama.context_length*            max_positions
 *   llama.rope.freq_base             rope_theta (default 10000)
 *   llama.attention.layer_norm_rms_epsilon*  norm_eps
 *   llama.rope.scaling.type          "linear" (llama.cpp's default) or "none"; others
 *                                    (yarn, longrope) CLPA_ERR_UNSUPPORTED
 *   llama.rope.scaling.factor        (or the older llama.rope.scale_linear) linear
 *                                    scaling: every RoPE frequency divided by it
 *                                    (0 or absent: 1; type "none": ignored)
 *   llama.rope.scaling.attn_factor   must be 1
 *   llama.expert_count               must be 0 (no mixture of experts)
 *   llama.attention.causal           must be true
 *   (llama.attention.sliding_window, clamp_kqv and scale are ignored, as
 *   llama.cpp ignores them for a Llama)
 *   llama.rope.dimension_count       must equal head_size (partial RoPE unsupported)
 *   llama.attention.key_length / value_length  must equal head_size
 *   llama.vocab_size / tokenizer.ggml.tokens   must agree with token_embd's rows
 *
 * Tensors (GGUF order [ne0, ne1] = row-major [ne1][ne0] = [out][in]):
 *   token_embd.weight          [hidden, vocab]      rows are the embeddings
 *   output_norm.weight         [hidden]
 *   output.weight              [hidden, vocab]      absent when tied: the LM head
 *                                                   is token_embd.weight
 *   blk.N.attn_norm.weight     [hidden]
 *   blk.N.attn_q.weight        [hidden, heads*hd]     Q/K rows permuted, see below
 *   blk.N.attn_k.weight        [hidden, kv_heads*hd]
 *   blk.N.attn_v.weight        [hidden, kv_heads*hd]
 *   blk.N.attn_output.weight   [heads*hd, hidden]
 *   blk.N.ffn_norm.weight      [hidden]
 *   blk.N.ffn_gate.weight      [hidden, ffn]        silu(gate) * up
 *   blk.N.ffn_up.weight        [hidden, ffn]
 *   blk.N.ffn_down.weight      [ffn, hidden]
 *   rope_freqs.weight          [hd/2], optional     Llama 3.1+ RoPE scaling: divide
 *                                                   pair i's frequency by factor i
 *
 * and no other tensor (CLPA_ERR_UNSUPPORTED naming it): llama.cpp's loader
 * refuses a tensor its model does not create, and its Llama creates
 * optional ones the demo does not run (blk.N.attn_q/k/v/output.bias,
 * blk.N.ffn_gate/up/down.bias, experts), so none may be ignored.
 *
 * RoPE. llama.cpp's converter permutes each head's rows of attn_q and
 * attn_k (convert_hf_to_gguf.py, LlamaModel.permute) so that its "normal"
 * RoPE (LLAMA_ROPE_TYPE_NORM) applies:
 *
 *   GGUF weights expect the INTERLEAVED rotation: within each head of
 *   size d, rotate the adjacent pairs (x[2i], x[2i+1]), i in [0, d/2), by
 *   angle pos * theta^(-2i/d).
 *
 * An engine whose RoPE is the half-split one of Hugging Face / GPT-NeoX
 * (pairs (x[i], x[i + d/2])) must first undo the permutation with
 * demo_gguf_unpermute_qk on the attn_q and attn_k matrices (never on V or
 * anything else). Either way gives the same attention: q.k is invariant
 * under the same permutation of both.
 * ==================================================================== */

typedef struct demo_gguf_llama {
  int32_t vocab, hidden, layers, heads, kv_heads, head_size, ffn;
  float rope_theta, norm_eps;
  int32_t max_positions;   /* llama.context_length */
  bool tied_embeddings;    /* no output.weight: use token_embd.weight as the LM head */
  bool has_rope_freqs;     /* rope_freqs.weight present (see above) */
  float rope_linear_scale; /* linear RoPE scaling factor, 1 for none: frequencies / it */
} demo_gguf_llama;

/* Reads the configuration and checks every tensor above for presence,
 * shape and a convertible type, so that a model built from it cannot fail
 * on a missing or odd tensor later. Returns CLPA_OK with *out filled, or
 * an error naming the key or tensor (nothing written). */
clpa_status demo_gguf_llama_config(const demo_gguf *g, demo_gguf_llama *out);

/* Reorders the rows of a GGUF attn_q / attn_k matrix w ([n_head * hd][in],
 * row-major floats, as demo_gguf_tensor_to_f32 gives it) in place, from
 * the interleaved RoPE order to the half-split (Hugging Face) order:
 * within each head, GGUF row 2i+k becomes row k*hd/2 + i. hd must be
 * even. Returns CLPA_OK, CLPA_ERR_INVALID_ARG or CLPA_ERR_OUT_OF_MEMORY. */
clpa_status demo_gguf_unpermute_qk(float *w, int32_t n_head, int32_t hd, int64_t in);

#endif /* CLPA_DEMO_GGUF_H */
