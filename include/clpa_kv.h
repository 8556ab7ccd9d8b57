/*
 * clpa_kv.h — the host side of the paged KV cache: the block pool,
 * sequences (block tables with fork and copy-on-write) and the batch view
 * that turns a set of sequences into the arrays the attention kernels read.
 *
 * Introduction
 *
 * The KV cache lives on the device as num_blocks physical blocks of
 * block_size tokens each. None of that memory is touched here: this part of
 * clpa only decides which block holds which token, so it needs nothing but
 * the C library and can be used (and tested) without OpenCL.
 *
 *   pool      num_blocks physical blocks, a free list and a reference count
 *             per block. Allocation and release are O(1).
 *   sequence  one request: a block table (logical block i -> physical
 *             block) and a token count. Token t of a sequence lives in slot
 *
 *                 slot = table[t / block_size] * block_size + t % block_size
 *
 *             which is what the slot mapping of reshape_and_cache holds.
 *   batch     the padded int32 block-table matrix [num_seqs,
 *             max_blocks_per_seq] and the int32 context lengths [num_seqs]
 *             for one step, built into buffers that are kept between steps.
 *
 * Sharing and copy-on-write. clpa_seq_fork makes a child that shares every
 * block of its parent (parallel sampling, beam search); a prefix cache can
 * hand blocks to a sequence with clpa_seq_append_blocks. A block with
 * refcount > 1 is never written. When clpa_seq_append must write into a
 * partially filled last block that is shared, it moves the sequence onto a
 * fresh block and reports the pair (src, dst): the caller copies that block
 * on the device (copy_blocks) before writing the new tokens. Only that one
 * block is copied; full shared blocks stay shared.
 *
 *     parent  [ 7 | 3 | 5:ab.. ]      fork       parent [ 7 | 3 | 5:ab.. ]
 *                                    ------>     child  [ 7 | 3 | 5:ab.. ]  refcount(5) = 2
 *
 *     child appends "c":  child [ 7 | 3 | 9:abc. ]   copy (src 5, dst 9), refcount(5) = 1
 *
 * Failure. Every call that can fail returns a clpa_status and, on failure,
 * sets the message read by clpa_last_error() (it names the argument or the
 * shortage). A failed call changes nothing: no block is half-allocated, no
 * sequence half-grown, and nothing is written through its out-pointers.
 * Host memory comes from the pool's allocator (clpa_pool_config.allocator),
 * for the pool and for every sequence and batch made from it.
 *
 * Threads. A pool and everything made from it must be used by one thread
 * at a time; different pools are independent.
 *
 * Lifetime. Destroy sequences and batches before their pool.
 */
#ifndef CLPA_KV_H
#define CLPA_KV_H

#include "clpa_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ======================================================================
 * Block pool
 * ==================================================================== */
typedef struct clpa_pool clpa_pool;

typedef struct clpa_pool_config {
  int32_t num_blocks;       /* physical blocks in the device cache, > 0 */
  int32_t block_size;       /* tokens per block, > 0 */
  clpa_allocator allocator; /* host memory for the pool and its sequences; {NULL, NULL} = libc */
  uint64_t reserved[8]; /* 0 (what ..._init leaves): room for fields to come, README's ABI */
} clpa_pool_config;

/* Fills cfg with defaults: everything zero except block_size = 16.
 * num_blocks must still be set. */
CLPA_API void clpa_pool_config_init(clpa_pool_config *cfg);

/* Creates a pool whose blocks are all free. Blocks are handed out lowest
 * id first from a fresh pool.
 * Returns CLPA_OK and *out, CLPA_ERR_INVALID_ARG (NULL cfg or out,
 * num_blocks or block_size <= 0, or an allocator with user data but no fn)
 * or CLPA_ERR_OUT_OF_MEMORY. */
CLPA_API clpa_status clpa_pool_create(const clpa_pool_config *cfg, clpa_pool **out);

/* Frees the pool. Accepts NULL. Sequences and batches made from it must be
 * destroyed first. */
CLPA_API void clpa_pool_destroy(clpa_pool *pool);

/* Takes n free blocks, all or nothing, and writes their ids to blocks[0..n).
 * Each gets refcount 1. n == 0 succeeds and writes nothing (blocks may then
 * be NULL).
 * Returns CLPA_OK, CLPA_ERR_POOL_EXHAUSTED (fewer than n free; nothing was
 * taken) or CLPA_ERR_INVALID_ARG (NULL pool, NULL blocks, n < 0). */
CLPA_API clpa_status clpa_pool_alloc(clpa_pool *pool, int32_t n, int32_t *blocks);

/* Adds a reference to a block that is in use (refcount > 0).
 * Returns CLPA_OK, CLPA_ERR_INVALID_ARG (NULL pool, block out of range) or
 * CLPA_ERR_STATE (the block is free, or its refcount is at INT32_MAX). */
CLPA_API clpa_status clpa_pool_ref(clpa_pool *pool, int32_t block);

/* Drops a reference; at refcount 0 the block goes back to the free list.
 * Returns CLPA_OK, CLPA_ERR_INVALID_ARG (NULL pool, block out of range) or
 * CLPA_ERR_STATE (the block is already free: a double unref). */
CLPA_API clpa_status clpa_pool_unref(clpa_pool *pool, int32_t block);

/* Returns the block's reference count: 0 when free, -1 when block is out
 * of range or pool is NULL. */
CLPA_API int32_t clpa_pool_refcount(const clpa_pool *pool, int32_t block);

typedef struct clpa_pool_stats {
  int32_t num_blocks; /* total */
  int32_t free;       /* refcount 0 */
  int32_t used;       /* refcount > 0; free + used = num_blocks */
  int32_t shared;     /* refcount > 1 (a subset of used) */
  uint64_t reserved[8]; /* room for fields to come (README's ABI) */
} clpa_pool_stats;

/* Fills *out with the pool's counters (all zero for a NULL pool). Does
 * nothing when out is NULL. Constant time. */
CLPA_API void clpa_pool_stats_get(const clpa_pool *pool, clpa_pool_stats *out);

/* Returns tokens per block, or -1 for a NULL pool. */
CLPA_API int32_t clpa_pool_block_size(const clpa_pool *pool);

/* Returns the number of free blocks, or -1 for a NULL pool. */
CLPA_API int32_t clpa_pool_num_free(const clpa_pool *pool);

/* Verifies the pool's internal invariants in O(num_blocks) time: every
 * free-list entry is distinct and has refcount 0, every block with
 * refcount 0 is on the free list, no refcount is negative, and the free and
 * shared counters match the refcounts. For tests and debugging.
 * Returns CLPA_OK, CLPA_ERR_INVALID_ARG (NULL pool), CLPA_ERR_OUT_OF_MEMORY
 * (for its scratch bitmap) or CLPA_ERR_STATE naming the first broken
 * invariant. */
CLPA_API clpa_status clpa_pool_check(const clpa_pool *pool);

/* ======================================================================
 * Sequences
 *
 * A sequence always holds exactly ceil(num_tokens / block_size) blocks,
 * one reference each.
 * ==================================================================== */
typedef struct clpa_seq clpa_seq;

/* A device block copy the caller must perform (copy-on-write): copy every
 * layer's K and V of block src into block dst. src < 0 means no copy. */
typedef struct clpa_block_copy {
  int32_t src;
  int32_t dst;
} clpa_block_copy;

/* Creates an empty sequence (no tokens, no blocks) drawing on pool.
 * Returns CLPA_OK and *out, CLPA_ERR_INVALID_ARG (NULL pool or out) or
 * CLPA_ERR_OUT_OF_MEMORY. */
CLPA_API clpa_status clpa_seq_create(clpa_pool *pool, clpa_seq **out);

/* Drops the sequence's reference on every block it holds and frees it.
 * Accepts NULL. */
CLPA_API void clpa_seq_destroy(clpa_seq *seq);

/* Makes room in the sequence's block table (host memory only, no pool
 * blocks) for num_tokens tokens, so that appends up to that length
 * allocate no host memory and cannot fail for want of it. Never shrinks.
 * Returns CLPA_OK, CLPA_ERR_INVALID_ARG (NULL seq, num_tokens < 0) or
 * CLPA_ERR_OUT_OF_MEMORY (nothing changed). */
CLPA_API clpa_status clpa_seq_reserve(clpa_seq *seq, int32_t num_tokens);

/* Reserves slots for the next n tokens, allocating blocks as needed, and
 * writes their slot mapping to slots[0..n) (slots may be NULL when the
 * caller does not want it; see clpa_seq_slots).
 *
 * If the first new token falls into a partially filled last block that is
 * shared (refcount > 1), the sequence moves to a fresh copy of that block:
 * *copy receives {src = the shared block, dst = the fresh one}, and the
 * caller must copy src to dst on the device before writing the new tokens.
 * Otherwise *copy is {-1, -1}. At most one copy is ever needed per append.
 *
 * Returns CLPA_OK, CLPA_ERR_POOL_EXHAUSTED (not enough free blocks, counting
 * the copy), CLPA_ERR_OUT_OF_MEMORY or CLPA_ERR_INVALID_ARG (NULL seq or
 * copy, n < 0, more than INT32_MAX tokens in all). On failure nothing
 * changed and nothing was written. */
CLPA_API clpa_status clpa_seq_append(clpa_seq *seq, int32_t n, int64_t *slots,
                                     clpa_block_copy *copy);

/* Appends n whole blocks that are already in use (typically a prefix found
 * in a cache) to a sequence that ends on a block boundary; each gets one
 * more reference and the sequence grows by n * block_size tokens. The
 * blocks must be distinct and not already in the sequence; they are shared,
 * so a later append never writes into them.
 * Returns CLPA_OK, CLPA_ERR_OUT_OF_MEMORY, CLPA_ERR_INVALID_ARG (NULL seq,
 * NULL blocks with n > 0, n < 0, a block out of range, too many tokens) or
 * CLPA_ERR_STATE (the sequence ends inside a block, a block is free or
 * has INT32_MAX references). On failure no block gained a reference. */
CLPA_API clpa_status clpa_seq_append_blocks(clpa_seq *seq, const int32_t *blocks, int32_t n);

/* Creates a child with the same tokens that shares every block of parent
 * (each block's refcount goes up by one). Writes into the shared last
 * block are handled by clpa_seq_append's copy-on-write.
 * Returns CLPA_OK and *out, CLPA_ERR_INVALID_ARG (NULL parent or out),
 * CLPA_ERR_STATE (a refcount at INT32_MAX) or CLPA_ERR_OUT_OF_MEMORY. */
CLPA_API clpa_status clpa_seq_fork(const clpa_seq *parent, clpa_seq **out);

/* Shortens the sequence to num_tokens tokens (speculative decoding rolls
 * back rejected tokens this way); blocks that become empty lose this
 * sequence's reference. Never allocates.
 * Returns CLPA_OK or CLPA_ERR_INVALID_ARG (NULL seq, num_tokens < 0 or
 * greater than the current count). */
CLPA_API clpa_status clpa_seq_truncate(clpa_seq *seq, int32_t num_tokens);

/* Removes the last n tokens: clpa_seq_truncate(seq, count - n).
 * Returns CLPA_OK or CLPA_ERR_INVALID_ARG (NULL seq, n < 0 or greater than
 * the current count). */
CLPA_API clpa_status clpa_seq_pop(clpa_seq *seq, int32_t n);

/* Writes the slots of tokens [start, start + n) to slots[0..n), e.g. the
 * tokens of a prefill that follow a cached prefix.
 * Returns CLPA_OK or CLPA_ERR_INVALID_ARG (NULL seq, NULL slots with
 * n > 0, a range outside [0, num_tokens)). */
CLPA_API clpa_status clpa_seq_slots(const clpa_seq *seq, int32_t start, int32_t n,
                                    int64_t *slots);

/* Returns the number of tokens, or -1 for a NULL seq. */
CLPA_API int32_t clpa_seq_num_tokens(const clpa_seq *seq);

/* Returns the number of blocks (ceil(tokens / block_size)), or -1 for a
 * NULL seq. */
CLPA_API int32_t clpa_seq_num_blocks(const clpa_seq *seq);

/* Returns the block table, clpa_seq_num_blocks(seq) physical block ids,
 * valid until the next call that changes seq; NULL for a NULL seq or one
 * that has never held a block. */
CLPA_API const int32_t *clpa_seq_block_table(const clpa_seq *seq);

/* ======================================================================
 * Batch view
 *
 * A batch object owns the arrays one step of attention reads and keeps
 * them between steps: building a batch no larger than any before it
 * allocates nothing, and a build rewrites only the rows whose sequence
 * changed since the previous build (another sequence in that row, or a
 * block added, dropped or copied on write); the other rows already hold
 * the right table. In a decode step most sequences only fill their last
 * block, so most rows are left alone, and the view says which rows it
 * rewrote (changed_rows) so that an engine can upload only those.
 *
 *   block_tables  int32 [num_seqs, max_blocks_per_seq], row-major: row i
 *                 is seqs[i]'s table, then padding up to the row's end
 *   context_lens  int32 [num_seqs]: seqs[i]'s token count
 *
 * Padding entries hold block 0, a valid block id, so a kernel that reads
 * past a sequence's end (it never should) reads real memory; context_lens
 * is what bounds every read.
 * ==================================================================== */
typedef struct clpa_batch clpa_batch;

typedef struct clpa_batch_config {
  /* The table is at least this wide: a fixed width (e.g. the model's
   * maximum context in blocks) keeps the device buffer's shape the same
   * from step to step. 0 = as wide as the longest sequence. Never less
   * than 1, so the table is never empty when num_seqs > 0. */
  int32_t min_blocks_per_seq;
  uint64_t reserved[8]; /* 0 (what ..._init leaves): room for fields to come, README's ABI */
} clpa_batch_config;

/* What clpa_batch_build produced; the arrays stay valid until the next
 * build or the batch's destruction. */
typedef struct clpa_batch_view {
  const int32_t *block_tables; /* [num_seqs, max_blocks_per_seq] */
  const int32_t *context_lens; /* [num_seqs] */
  int32_t num_seqs;
  int32_t max_blocks_per_seq;  /* the row width */
  int32_t max_context_len;     /* the longest sequence, in tokens */
  /* The rows of block_tables this build wrote, ascending; every other row
   * is exactly as the previous build left it. All rows are listed after
   * the first build, a change of width, or a growth of the arrays.
   * context_lens is rewritten in full every build. */
  const int32_t *changed_rows; /* [num_changed_rows] */
  int32_t num_changed_rows;
  uint64_t reserved[8]; /* room for fields to come (README's ABI) */
} clpa_batch_view;

/* Fills cfg with defaults (min_blocks_per_seq = 0). */
CLPA_API void clpa_batch_config_init(clpa_batch_config *cfg);

/* Creates a batch for sequences of pool. cfg may be NULL for defaults.
 * Returns CLPA_OK and *out, CLPA_ERR_INVALID_ARG (NULL pool or out,
 * min_blocks_per_seq < 0) or CLPA_ERR_OUT_OF_MEMORY. */
CLPA_API clpa_status clpa_batch_create(clpa_pool *pool, const clpa_batch_config *cfg,
                                       clpa_batch **out);

/* Frees the batch and its arrays. Accepts NULL. */
CLPA_API void clpa_batch_destroy(clpa_batch *batch);

/* Fills the batch's arrays from seqs[0..num_seqs) and describes them in
 * *out. The contents are always those of a build from scratch; rows whose
 * sequence is the same as in the previous build's row and has not changed
 * its table since are not rewritten (O(1) each), so a step costs
 * O(num_seqs + the entries of the rows that changed). The arrays grow
 * (geometrically) only when this batch is larger than any before it.
 * Returns CLPA_OK, CLPA_ERR_INVALID_ARG (NULL batch or out, NULL seqs with
 * num_seqs > 0, num_seqs < 0, a NULL sequence or one from another pool),
 * CLPA_ERR_UNSUPPORTED (the table would pass INT32_MAX entries) or
 * CLPA_ERR_OUT_OF_MEMORY (the previous view stays valid). */
CLPA_API clpa_status clpa_batch_build(clpa_batch *batch, const clpa_seq *const *seqs,
                                      int32_t num_seqs, clpa_batch_view *out);

#ifdef __cplusplus
}
#endif
#endif /* CLPA_KV_H */
