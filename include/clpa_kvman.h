/*
 * clpa_kvman.h — the KV manager: what an inference engine calls to keep its
 * KV cache in blocks and share prefixes between requests.
 *
 * Introduction
 *
 * The manager owns a block pool (clpa_kv.h) and a prefix cache
 * (clpa_radix.h) and runs the life of each request over them:
 *
 *   admit        match the longest cached prefix of the prompt and lock it,
 *                allocate blocks for the rest (evicting cached prefixes,
 *                least recently used first, when the pool is short) and
 *                hand back the slot mapping of the tokens still to compute
 *   append       reserve slots for decoded tokens (evicting likewise)
 *   checkpoint   chunked prefill: cache what is computed so far, so that
 *                requests admitted meanwhile share it; the request goes on
 *   finish       cache the request's tokens (whole blocks only), drop its
 *                duplicates of blocks already cached and its partial last
 *                block, unlock its prefix
 *
 * A request's sequence (clpa_kvreq_seq) is what the batch view and the
 * attention kernels read. Every token given to admit or append gets a slot;
 * the engine must write that token's K/V there (reshape_and_cache) before
 * the request is checkpointed or finished, since those calls publish the
 * blocks to other requests.
 *
 *    admit("SYS q1")          admit("SYS q2")            tree after both finish
 *    cached 0, computes 6     cached 3 ("SYS"), computes 3     [SYS] -- [ q1]
 *                                                                  \-- [ q2]
 *
 * At least one prompt token is always computed, even when the whole prompt
 * is cached: the engine needs its logits.
 *
 * A decode step. The running requests sit in rows (clpa_kvman_running):
 * admit appends a row, finish moves the last row into the finished one's,
 * so rows stay put while requests run. One step is then three calls, each
 * O(running) with small constants:
 *
 *   clpa_kvman_append_batch(km, clpa_kvman_running(km), n, NULL, toks, slots)
 *                                        one token per request, slots out
 *   clpa_kvman_batch_build(km, batch, &view)
 *                                        block tables and lengths, rewriting
 *                                        only the rows that changed
 *   clpa_kvman_reclaim(km, NULL)         off the critical path (e.g. while
 *                                        the device runs): evict down to the
 *                                        free-block watermark, so that admit
 *                                        and append rarely evict themselves
 *
 * Admission may pass the expected output length (clpa_kvman_admit_ex's
 * reserve_tokens) so that the decode steps allocate no host memory.
 *
 * Failure. Calls return a clpa_status and set clpa_last_error(). A failed
 * admit holds nothing (no blocks, no locks); a failed append changes
 * nothing. Both may have evicted cached prefixes while looking for memory,
 * and a failed admit may have refreshed or split the tree's nodes along its
 * prefix; neither changes what is cached or what requests hold.
 *
 * Threads: one thread at a time per manager.
 */
#ifndef CLPA_KVMAN_H
#define CLPA_KVMAN_H

#include "clpa_radix.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct clpa_kvman clpa_kvman;
typedef struct clpa_kvreq clpa_kvreq; /* one admitted request */

typedef struct clpa_kvman_config {
  int32_t num_blocks;       /* physical blocks of the device cache, > 0 */
  int32_t block_size;       /* tokens per block, > 0 (default 16) */
  int32_t prefix_cache;     /* 1 (default): share prefixes; 0: never match or cache */
  clpa_allocator allocator; /* host memory for everything; {NULL, NULL} = libc */
  int32_t free_watermark;   /* free blocks clpa_kvman_reclaim keeps in the pool by
                               evicting ahead, in [0, num_blocks]; 0 (default): none */
  uint64_t reserved[8]; /* 0 (what ..._init leaves): room for fields to come, README's ABI */
} clpa_kvman_config;

/* Fills cfg with defaults: block_size 16, prefix_cache 1, libc, no
 * watermark; num_blocks must still be set. */
CLPA_API void clpa_kvman_config_init(clpa_kvman_config *cfg);

/* Creates a manager with its own pool and tree.
 * Returns CLPA_OK and *out, CLPA_ERR_INVALID_ARG (NULL cfg or out, bad
 * sizes, prefix_cache other than 0 or 1, free_watermark outside
 * [0, num_blocks]) or CLPA_ERR_OUT_OF_MEMORY. */
CLPA_API clpa_status clpa_kvman_create(const clpa_kvman_config *cfg, clpa_kvman **out);

/* Releases every request still admitted (as clpa_kvman_finish without
 * caching), then the tree and the pool. Accepts NULL. */
CLPA_API void clpa_kvman_destroy(clpa_kvman *km);

/* ======================================================================
 * Requests
 * ==================================================================== */
typedef struct clpa_kvman_admit_result {
  clpa_kvreq *req;
  int32_t cached_tokens;  /* leading tokens whose KV is already cached: a
                             multiple of block_size, < num_tokens */
  int32_t num_new_tokens; /* num_tokens - cached_tokens: the tokens to
                             compute, at positions cached_tokens + i */
  uint64_t reserved[8]; /* room for fields to come (README's ABI) */
} clpa_kvman_admit_result;

/* Admits a request with prompt tokens[0..num_tokens) in namespace ns and
 * writes the slots of the tokens to compute to slots[0..num_new_tokens)
 * (slots must have room for num_tokens entries).
 * Returns CLPA_OK and *out, CLPA_ERR_INVALID_ARG (NULL km, tokens, slots or
 * out; num_tokens < 1), CLPA_ERR_POOL_EXHAUSTED (not enough blocks even
 * after evicting every unlocked prefix) or CLPA_ERR_OUT_OF_MEMORY. On
 * failure the request holds nothing and *out is untouched. */
CLPA_API clpa_status clpa_kvman_admit(clpa_kvman *km, uint64_t ns, const int32_t *tokens,
                                      int32_t num_tokens, int64_t *slots,
                                      clpa_kvman_admit_result *out);

typedef struct clpa_kvman_admit_options {
  /* Tokens the request is expected to add after its prompt (its output
   * length, or an estimate): host memory for them (the token buffer and
   * the block table, not pool blocks) is taken at admission, so appends up
   * to that length allocate nothing. 0 (default): only the prompt. */
  int32_t reserve_tokens;
  uint64_t reserved[8]; /* 0 (what ..._init leaves): room for fields to come, README's ABI */
} clpa_kvman_admit_options;

/* Fills opt with defaults (reserve_tokens 0). */
CLPA_API void clpa_kvman_admit_options_init(clpa_kvman_admit_options *opt);

/* clpa_kvman_admit with options; opt may be NULL for defaults. The new
 * request takes the next row (clpa_kvreq_row = the old running count).
 * Returns what clpa_kvman_admit returns, and CLPA_ERR_INVALID_ARG for
 * reserve_tokens < 0 or num_tokens + reserve_tokens > INT32_MAX. */
CLPA_API clpa_status clpa_kvman_admit_ex(clpa_kvman *km, uint64_t ns, const int32_t *tokens,
                                         int32_t num_tokens,
                                         const clpa_kvman_admit_options *opt, int64_t *slots,
                                         clpa_kvman_admit_result *out);

/* Appends n tokens (decoded ones, or the next chunk of a prompt) and writes
 * their slots to slots[0..n). Evicts cached prefixes when the pool is short.
 * Never needs a block copy: a request's partial last block is never shared.
 * Returns CLPA_OK, CLPA_ERR_INVALID_ARG (NULL km, req, tokens or slots with
 * n > 0; n < 0), CLPA_ERR_POOL_EXHAUSTED or CLPA_ERR_OUT_OF_MEMORY; on
 * failure the request is unchanged. */
CLPA_API clpa_status clpa_kvman_append(clpa_kvman *km, clpa_kvreq *req, const int32_t *tokens,
                                       int32_t n, int64_t *slots);

/* Appends to many requests at once: counts[i] tokens to reqs[i] (counts
 * NULL: one each, the decode step), taken in order from tokens, with their
 * slots written in the same order to slots (as many as tokens). Passing
 * clpa_kvman_running(km) and clpa_kvman_num_running(km) appends to every
 * running request in row order. All or nothing: the blocks for the whole
 * batch are found first (evicting cached prefixes when the pool is short),
 * then host memory, and only then is anything appended.
 * Returns CLPA_OK, CLPA_ERR_INVALID_ARG (NULL km; NULL reqs with
 * num_reqs > 0; num_reqs < 0; a NULL request, one of another manager or
 * one listed twice; a negative count; a request or the batch past
 * INT32_MAX tokens; NULL tokens or slots with tokens to append),
 * CLPA_ERR_POOL_EXHAUSTED or CLPA_ERR_OUT_OF_MEMORY; on failure no
 * request changed and nothing was written to slots. */
CLPA_API clpa_status clpa_kvman_append_batch(clpa_kvman *km, clpa_kvreq *const *reqs,
                                             int32_t num_reqs, const int32_t *counts,
                                             const int32_t *tokens, int64_t *slots);

/* Caches the whole blocks of the request's first num_computed tokens (whose
 * K/V the engine has written) and moves the request's lock down to them;
 * the request goes on. Does nothing when the prefix cache is off.
 * Returns CLPA_OK, CLPA_ERR_INVALID_ARG (NULL km or req, num_computed
 * outside [0, clpa_kvreq_num_tokens]) or CLPA_ERR_OUT_OF_MEMORY (nothing
 * changed). */
CLPA_API clpa_status clpa_kvman_checkpoint(clpa_kvman *km, clpa_kvreq *req, int32_t num_computed);

/* Ends a request. With cache == 1 (and the prefix cache on) its tokens'
 * whole blocks go into the tree first; blocks that duplicate cached ones
 * and the partial last block go back to the pool. cache == 0 is an abort.
 * The request is released in every case but invalid arguments.
 * Returns CLPA_OK, CLPA_ERR_INVALID_ARG (NULL km or req, cache other than
 * 0 or 1; nothing released) or CLPA_ERR_OUT_OF_MEMORY (released, but its
 * tokens were not cached). */
CLPA_API clpa_status clpa_kvman_finish(clpa_kvman *km, clpa_kvreq *req, int cache);

/* Evicts cached prefixes until at least num_blocks blocks are free in the
 * pool, or nothing evictable is left; *num_freed (may be NULL) receives
 * how many blocks it freed.
 * Returns CLPA_OK or CLPA_ERR_INVALID_ARG (NULL km, num_blocks < 0). */
CLPA_API clpa_status clpa_kvman_evict(clpa_kvman *km, int32_t num_blocks, int32_t *num_freed);

/* The watermark: clpa_kvman_evict(km, cfg.free_watermark, num_freed).
 * Meant for the engine's idle moments (while the device computes a step),
 * so that admit and append find free blocks without evicting on the
 * critical path; O(1) when the pool is above the watermark.
 * Returns CLPA_OK or CLPA_ERR_INVALID_ARG (NULL km). */
CLPA_API clpa_status clpa_kvman_reclaim(clpa_kvman *km, int32_t *num_freed);

/* ======================================================================
 * Running requests and the batch view
 * ==================================================================== */

/* Returns the number of running requests (admitted, not finished), -1 for
 * NULL. */
CLPA_API int32_t clpa_kvman_num_running(const clpa_kvman *km);

/* Returns the running requests in row order, clpa_kvman_num_running of
 * them (NULL for NULL km, or before the first admit); valid until the
 * next admit or finish. Admit appends a row; finish moves the last row
 * into the finished request's row; nothing else moves a request. */
CLPA_API clpa_kvreq *const *clpa_kvman_running(const clpa_kvman *km);

/* Builds the batch view of every running request in row order (row i of
 * the view is clpa_kvman_running(km)[i]) into batch, which must be made
 * from clpa_kvman_pool(km). Like clpa_batch_build, it rewrites only the
 * rows whose request changed (another request in the row, or a block
 * added) and lists them in out->changed_rows.
 * Returns what clpa_batch_build returns (CLPA_ERR_INVALID_ARG also for
 * NULL km, or a batch of another pool). */
CLPA_API clpa_status clpa_kvman_batch_build(clpa_kvman *km, clpa_batch *batch,
                                            clpa_batch_view *out);

/* The request's sequence (block table, token count) for the batch view. */
CLPA_API const clpa_seq *clpa_kvreq_seq(const clpa_kvreq *req);
/* Returns the request's token count (prompt + appended), -1 for NULL. */
CLPA_API int32_t clpa_kvreq_num_tokens(const clpa_kvreq *req);
/* Returns the request's tokens (clpa_kvreq_num_tokens of them), NULL for
 * NULL; valid until the next call that changes req. */
CLPA_API const int32_t *clpa_kvreq_tokens(const clpa_kvreq *req);
/* Returns the request's namespace (0 for NULL). */
CLPA_API uint64_t clpa_kvreq_ns(const clpa_kvreq *req);
/* Returns the request's row: its index in clpa_kvman_running and in the
 * batch view of clpa_kvman_batch_build; -1 for NULL. */
CLPA_API int32_t clpa_kvreq_row(const clpa_kvreq *req);

/* ======================================================================
 * Statistics and parts
 * ==================================================================== */
typedef struct clpa_kvman_stats {
  int64_t requests;        /* admitted over the manager's life */
  int64_t prompt_tokens;   /* given to admit */
  int64_t hit_tokens;      /* of those, found in the cache */
  int64_t computed_tokens; /* prompt tokens not found + appended tokens */
  int64_t evicted_blocks;  /* blocks the tree gave up */
  int64_t evictions;       /* eviction rounds (admit/append short of blocks, evict, reclaim) */
  int32_t running;         /* requests admitted and not finished */
  int32_t blocks_total;
  int32_t blocks_free;      /* in the pool */
  int32_t blocks_used;      /* referenced by a request or the tree */
  int32_t blocks_cached;    /* held by the tree (some also by requests) */
  int32_t blocks_evictable; /* cached and not locked by a request */
  int64_t hot_evictions;    /* of the rounds, those inside admit or append: the
                               critical path a watermark (reclaim) keeps them off */
  uint64_t reserved[8]; /* room for fields to come (README's ABI) */
} clpa_kvman_stats;

/* Fills *out (zeros for NULL km; nothing for NULL out). O(1). */
CLPA_API void clpa_kvman_stats_get(const clpa_kvman *km, clpa_kvman_stats *out);

/* The manager's pool and tree, for inspection and tests; do not change
 * them behind the manager's back (reading, validate and dump are fine). */
CLPA_API clpa_pool *clpa_kvman_pool(const clpa_kvman *km);
CLPA_API clpa_radix *clpa_kvman_radix(const clpa_kvman *km);

#ifdef __cplusplus
}
#endif
#endif /* CLPA_KVMAN_H */
