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
 * Grid:  (num_tiles * NUM_THREADS, num_kv_heads); work[t] = (s, R0, kb,
 *        slot) says which sequence and first row tile t takes, and, for a
 *        split item (slot >= 0), that it walks only the keys in [kb, kb +
 *        split_keys) and writes its rows to partial slot `slot` (host-built;
 *        work_item_of below).
 * Group: NUM_THREADS work-items (each path's file gives its shape).
 *
 * Splits (a mixed step's decode rows over long contexts, the way decode
 * splits them): the items of one row tile cover its keys in turn, each
 * writes its normalised rows and their LSE to part_out [slots,
 * num_kv_heads, ROWS, HEAD_SIZE] (io_t, as decode v2's partials) and
 * part_lse [slots, num_kv_heads, ROWS], the first one (from the tile's
 * first key) with the sink; clpa_prefill_merge then combines a tile's
 * slots by their LSEs (softmax_merge) into out and lse.
 *
 * Buffers (element counts):
 *   q            [total_new, q_stride]               head h at h * HEAD_SIZE
 *   k_cache      [num_blocks, num_kv_heads, HEAD_SIZE / X, BLOCK_SIZE, X]
 *   v_cache      [num_blocks, num_kv_heads, HEAD_SIZE, BLOCK_SIZE]
 *   block_tables [num_seqs, max_blocks_per_seq]       int32
 *   seq_info     [num_seqs, 3] int32: first new token (cu_seqlens_q[s]),
 *                new_len, cached_len
 *   work         [num_tiles, 4] int32: (s, R0, kb, slot)
 *   out          [total_new, num_heads, HEAD_SIZE]   io_t
 *   lse          [total_new, num_heads] float, or NULL
 *   block_mask   [num_seqs, num_heads, mask_qb, mask_kb] uchar, or NULL:
 *                block-sparse prefill (XAttention): query i of head h drops
 *                the keys of block j / mask_block when [i / mask_block] says 0
 *                (mask_block a multiple of 64, so a key tile lies in one
 *                mask block; a cache block of the rows path may straddle
 *                two, prefill_rows.cl's MASK_STRADDLES); a tile no row
 *                keeps is not read
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

/* A work item (see the top): sequence, first row, a split's first key and
 * partial slot (-1: not split). */
typedef struct work_item {
  int s, R0, kb, slot;
} work_item;
inline work_item work_item_of(__global const int *work, size_t t) { /* 4 t may pass 2^31 */
  const work_item w = {work[4 * t], work[4 * t + 1], work[4 * t + 2], work[4 * t + 3]};
  return w;
}

/* The keys an item walks: its rows' [keys.x, keys.y), within its split. */
inline int2 item_keys(int2 keys, work_item w, int split_keys) {
  return w.slot < 0 ? keys : (int2)(max(keys.x, w.kb), min(keys.y, w.kb + split_keys));
}

/* Whether the item's softmax starts from the sink: not split, or its
 * tile's first split (rows' keys from `keys`, before item_keys). */
inline int item_has_sink(int2 keys, work_item w) { return w.slot < 0 || w.kb <= keys.x; }

/* Where row R (R0 <= R < R0 + ROWS) of the item writes: its token and
 * head's row of out and lse, or (split) its row of the partials. */
inline size_t item_row(work_item w, int R, int first, int qpk, int num_heads, int kv_head,
                       int num_kv_heads) {
  return w.slot < 0 ? (size_t)(first + R / qpk) * num_heads + kv_head * qpk + R % qpk
                    : ((size_t)w.slot * num_kv_heads + kv_head) * ROWS + (R - w.R0);
}

/*
 * clpa_prefill_merge — the split items' partials into out and lse.
 * Grid: (num_groups * ROWS * MERGE_THREADS, num_kv_heads), a work-group a
 * row of a group's tile; groups[groups_at + g] = (s, R0, first slot,
 * slots) in words of 4 (the work list's, after its items), a tile's items
 * in consecutive slots. A row whose slots are all empty (LSE -inf)
 * gets out 0 and lse -inf.
 */
#define MERGE_THREADS 32
__kernel __attribute__((reqd_work_group_size(MERGE_THREADS, 1, 1))) void clpa_prefill_merge(
    KERNEL_PARAMS(PREFILL_MERGE_ARG_LIST)) {
  const int gi = get_group_id(0) / ROWS, r = get_group_id(0) % ROWS, kv_head = get_group_id(1);
  __global const int *gr = groups + 4 * ((size_t)groups_at + gi);
  const int s = gr[0], R0 = gr[1], slot0 = gr[2], n = gr[3];
  const int qpk = num_heads / num_kv_heads, R = R0 + r;
  if (R >= seq_info[3 * s + 1] * qpk) return; /* the whole work-group: no barrier below */
  const work_item part = {s, R0, 0, slot0};
  const size_t p0 = item_row(part, R, 0, qpk, num_heads, kv_head, num_kv_heads);
  const size_t pstep = (size_t)num_kv_heads * ROWS; /* a slot's rows */
  softmax_state all = softmax_empty();
  for (int i = 0; i < n; i++) all = softmax_merge(all, softmax_logit(part_lse[p0 + i * pstep]));
  const work_item whole = {s, R0, 0, -1};
  const size_t row = item_row(whole, R, seq_info[3 * s], qpk, num_heads, kv_head, num_kv_heads);
  float acc[(HEAD_SIZE + MERGE_THREADS - 1) / MERGE_THREADS];
  for (int j = 0; j < (HEAD_SIZE + MERGE_THREADS - 1) / MERGE_THREADS; j++) acc[j] = 0.0f;
  for (int i = 0; i < n; i++) {
    const float w = softmax_weight(softmax_logit(part_lse[p0 + i * pstep]), all);
    if (w == 0.0f) continue; /* an empty slot's rows are never read */
    for (int j = 0, d = get_local_id(0); d < HEAD_SIZE; j++, d += MERGE_THREADS)
      acc[j] += w * IO_LOAD(part_out, (p0 + i * pstep) * HEAD_SIZE + d);
  }
  for (int j = 0, d = get_local_id(0); d < HEAD_SIZE; j++, d += MERGE_THREADS)
    IO_STORE(acc[j], out, row * HEAD_SIZE + d);
  if (lse && get_local_id(0) == 0) lse[row] = softmax_lse(all);
}
