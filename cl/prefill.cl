/*
 * prefill.cl — paged attention for prefill: many new query tokens per
 * sequence over the paged cache, FlashAttention-2 style (Dao, 2023):
 * a work-group owns a tile of query rows, walks the keys in tiles read
 * through the block table, keeps each row's running max m and sum l and
 * rescales its output accumulator when m grows (common.cl's softmax
 * state), and normalises once at the end. This file is what the three
 * paths share (the row and key-range helpers, the layouts below; their
 * arguments are prefill_args.h's); each path's kernel is a file of its own, built after
 * it: prefill_tiles.cl (local memory, f32, any OpenCL 1.2 device),
 * prefill_rows.cl (rows a work-item, for CPUs) and prefill_mma.cl (tensor
 * cores). Checked by tests/test_prefill.c against clpa_ref_prefill
 * (host/ref_attention.c).
 *
 * Rows. For sequence s with new_len new tokens, query row R of its
 * (KV head) group is token i = R / QPK (position p = cached_len + i) of
 * query head kv_head * QPK + R % QPK, so the QPK query heads that share a
 * KV head read each key tile once (GQA packing). R < new_len * QPK.
 *
 * Grid:  (num_tiles * NUM_THREADS, num_kv_heads); work[t] = (s, R0) says
 *        which sequence and first row tile t takes (host-built).
 * Group: NUM_THREADS work-items (each path's file gives its shape).
 *
 * Buffers (element counts):
 *   q            [total_new, q_stride]               head h at h * HEAD_SIZE
 *   k_cache      [num_blocks, num_kv_heads, HEAD_SIZE / X, BLOCK_SIZE, X]
 *   v_cache      [num_blocks, num_kv_heads, HEAD_SIZE, BLOCK_SIZE]
 *   block_tables [num_seqs, max_blocks_per_seq]       int32
 *   seq_info     [num_seqs, 3] int32: first new token (cu_seqlens_q[s]),
 *                new_len, cached_len
 *   work         [num_tiles, 2] int32: (s, R0)
 *   out          [total_new, num_heads, HEAD_SIZE]   io_t
 *   lse          [total_new, num_heads] float, or NULL
 *   block_mask   [num_seqs, num_heads, mask_qb, mask_kb] uchar, or NULL:
 *                block-sparse prefill (XAttention): query i of head h drops
 *                the keys of block j / mask_block when [i / mask_block] says 0
 *                (mask_block a multiple of 64, so a key tile or cache block
 *                lies in one mask block); a tile no row keeps is not read
 *
 * Keys of a tile: positions k0 .. k0 + BK - 1 (k0 a multiple of BK). For
 * row position p they take part when j < cached_len + new_len, j <= p if
 * causal, and p - j < window if window > 0; a block id outside the cache
 * masks its keys and sets CLPA_FAULT_BAD_BLOCK. Tiles wholly outside
 * every row's range are never read (nor their block ids checked).
 */
#ifndef CLPA_HEAD_SIZE
#error "CLPA_HEAD_SIZE: elements a head; required"
#endif
#ifndef CLPA_BLOCK_SIZE
#error "CLPA_BLOCK_SIZE: tokens a cache block; required"
#endif
#ifndef CLPA_NUM_THREADS
#error "CLPA_NUM_THREADS: work-items a work-group; required"
#endif
#ifndef CLPA_ROWS
#error "CLPA_ROWS: query rows a work-group; required"
#endif
#ifndef CLPA_KEYS
#error "CLPA_KEYS: keys a tile; required"
#endif
#define HEAD_SIZE CLPA_HEAD_SIZE
#define BLOCK_SIZE CLPA_BLOCK_SIZE
#define NUM_THREADS CLPA_NUM_THREADS
#define ROWS CLPA_ROWS
#define BK CLPA_KEYS

/* Query row R of a tile (see the top): its head and position into *head
 * and *pos (a row past the sequence's nrows gets the KV head's first
 * query head at position cached, and is never written); whether it
 * exists. */
inline int tile_row(int R, int nrows, int qpk, int kv_head, int cached, int *head, int *pos) {
  const int live = R < nrows;
  *head = kv_head * qpk + (live ? R % qpk : 0);
  *pos = cached + (live ? R / qpk : 0);
  return live;
}

/* The block-mask row (mask_kb flags) of new token i of sequence s, query
 * head `head`; NULL without a mask. */
inline __global const uchar *mask_row(__global const uchar *block_mask, int s, int num_heads,
                                      int head, int i, int mask_block, int mask_qb, int mask_kb) {
  return block_mask ? block_mask + (((size_t)s * num_heads + head) * mask_qb + i / mask_block) *
                                       (size_t)mask_kb
                    : NULL;
}

/* Block-sparse skipping, without a barrier per skipped tile: the first
 * key from k0 (k0 itself, or a later mask block's start) that mask row m
 * keeps, k_end if none (m NULL: none). */
inline int mask_next(__global const uchar *m, int k0, int k_end, int mask_block) {
  if (m)
    for (int b = k0 / mask_block; b * mask_block < k_end; b++)
      if (m[b]) return max(b * mask_block, k0);
  return k_end;
}

/* The least of every work-item's v (all call it): three barriers. */
inline int group_min(int v, __local int *slot) {
  barrier(CLK_LOCAL_MEM_FENCE); /* the last call's answer is read */
  if (get_local_id(0) == 0) *slot = INT_MAX;
  barrier(CLK_LOCAL_MEM_FENCE);
  atomic_min(slot, v);
  barrier(CLK_LOCAL_MEM_FENCE);
  return *slot;
}

/* The keys rows at positions p_lo .. p_hi walk: [k_lo, k_end) = (.x, .y),
 * up to the last row when causal, from the first row's window start. */
inline int2 tile_keys(int p_lo, int p_hi, int kv_end, int causal, int window) {
  return (int2)(window > 0 ? max(p_lo - window + 1, 0) : 0,
                causal ? min(kv_end, p_hi + 1) : kv_end);
}
