/*
 * util.h — internal helpers shared by host/ and lib/: error reporting and
 * the allocator hook. Not installed.
 */
#ifndef CLPA_HOST_UTIL_H
#define CLPA_HOST_UTIL_H

#include <stdarg.h>

#include "clpa_base.h"

/* Records a failure: formats "<func>: <message>" into this thread's
 * last-error buffer (and into ctx_buf when it is not NULL, a
 * CLPA_ERROR_MAX-byte buffer owned by a context). Returns status so it can
 * end a return statement. */
#define CLPA_ERROR_MAX 16384
clpa_status clpa_err_set(char *ctx_buf, clpa_status status, const char *func,
                         const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
clpa_status clpa_err_vset(char *ctx_buf, clpa_status status, const char *func,
                          const char *fmt, va_list ap);
/* Appends text to the last-error message of this thread (and ctx_buf). */
void clpa_err_append(char *ctx_buf, const char *text);
/* Names the field the last message is about: "<call>: <why>" becomes
 * "<call>: <field>: <why>" (a nested check's message, the call named once);
 * copies it into ctx_buf too. Returns status. */
clpa_status clpa_err_within(char *ctx_buf, clpa_status status, const char *field);
/* Copies this thread's last-error message into ctx_buf. */
void clpa_err_keep(char *ctx_buf);
/* Clears this thread's last-error message. */
void clpa_err_clear(void);

/* Messages name the public call the user made, not the internal function
 * that found the problem: clpa_api_begin(name) makes `name` the prefix of
 * every message this thread records until clpa_api_end, and clears the
 * last error. Nested public calls keep the outermost name. Returns the
 * token clpa_api_end takes. */
int clpa_api_begin(const char *name);
void clpa_api_end(int token);
/* The body of a public entry point that calls its implementation. */
#define CLPA_API_CALL(call)                        \
  do {                                             \
    const int api_token_ = clpa_api_begin(__func__); \
    const clpa_status api_status_ = (call);        \
    clpa_api_end(api_token_);                      \
    return api_status_;                            \
  } while (0)

/* One line per check, as zstd's RETURN_ERROR_IF: the message says where
 * and why. For host objects (no context) pass NULL as the buffer. */
#define CLPA_FAIL(buf, status, ...) clpa_err_set((buf), (status), __func__, __VA_ARGS__)
#define CLPA_CHECK(buf, cond, status, ...)                    \
  do {                                                        \
    if (cond) return clpa_err_set((buf), (status), __func__, __VA_ARGS__); \
  } while (0)

/* Every config and params struct ends in reserved words that must be 0
 * (README's ABI: room for fields to come). Returns the index of the first
 * nonzero one, or -1. */
int clpa_reserved_used(const uint64_t *reserved, int n);
/* Refuses s (a pointer to such a struct; `name` its access path in the
 * message, as "p->" or "p->decode.") whose reserved words are not all 0. */
#define CLPA_CHECK_RESERVED(buf, s, name)                                                   \
  do {                                                                                     \
    const int used_ = clpa_reserved_used((s)->reserved,                                    \
                                         (int)(sizeof (s)->reserved / sizeof *(s)->reserved)); \
    CLPA_CHECK(buf, used_ >= 0, CLPA_ERR_INVALID_ARG,                                      \
               "%sreserved[%d] = %llu (reserved words must be 0: fill the struct with its " \
               "_init function)",                                                          \
               name, used_, used_ >= 0 ? (unsigned long long)(s)->reserved[used_] : 0ull);  \
  } while (0)

/* Allocation through the hook; a->fn == NULL means libc. */
void *clpa_mem_alloc(const clpa_allocator *a, size_t size);
void *clpa_mem_calloc(const clpa_allocator *a, size_t count, size_t size);
void *clpa_mem_realloc(const clpa_allocator *a, void *ptr, size_t old_size, size_t new_size);
void clpa_mem_free(const clpa_allocator *a, void *ptr, size_t size);

/* Size arithmetic on numbers that come from users: *out = a * b + c.
 * Returns 1, or 0 (and leaves *out alone) when the result does not fit
 * in size_t. Every size computed from user input goes through it. */
int clpa_size_mul_add(size_t a, size_t b, size_t c, size_t *out);

/* Block-sparse prefill's coverage rule, one place for clpa_prefill and its
 * reference: the first sequence (cu_seqlens_q / cached_lens) with new
 * tokens whose last query or last key falls past mask_q_blocks /
 * mask_k_blocks blocks of mask_block (> 0) tokens, or -1 when the mask
 * covers them all. */
int32_t clpa_block_mask_uncovered(int32_t num_seqs, const int32_t *cu_seqlens_q,
                                  const int32_t *cached_lens, int32_t mask_block,
                                  int32_t mask_q_blocks, int32_t mask_k_blocks);

/* 64-bit FNV-1a, used for cache keys and source hashes. */
uint64_t clpa_hash64(uint64_t h, const void *data, size_t len);

/* PTX text (what NVIDIA's OpenCL returns as a program binary) with
 * `.maxnreg n` added to every kernel entry (before the `{` that opens its
 * body), so that ptxas caps the registers there: NVIDIA's OpenCL takes no
 * register option (-cl-nv-maxrregcount is accepted and ignored). `ptx` is
 * `len` bytes; whatever follows the text (NUL padding) is kept. Returns a
 * malloc'd copy and its length in *out_len, or NULL where there is no
 * entry, an entry already has .maxnreg, or memory ran out. */
unsigned char *clpa_ptx_with_maxnreg(const unsigned char *ptx, size_t len, int n,
                                     size_t *out_len);
#define CLPA_HASH64_INIT 0xcbf29ce484222325ULL

#endif
