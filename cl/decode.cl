/*
 * decode.cl — paged attention for decode (one query token per sequence),
 * the OpenCL port of vLLM's paged_attention_kernel
 * (csrc/attention/attention_kernels.cuh). Checked by tests/test_decode.c
 * against clpa_ref_decode (host/ref_attention.c).
 *
 * Grid:  (num_heads / HEADS_PER_WG * NUM_THREADS, num_seqs, partitions)
 * Group: NUM_THREADS work-items = NUM_WARPS lane groups of SG lanes.
 *   v1 (PARTITION_SIZE 0): one work-group walks the whole context and
 *       writes out (and lse).
 *   v2: one work-group per PARTITION_SIZE tokens writes its partition's
 *       softmax state (max_logits, exp_sums) and normalised output
 *       (tmp_out); with CLPA_MERGE 1 the last of a row's partitions to
 *       finish merges them into out (and lse): decode_merge.cl's decode_last_part
 *       and decode_merge_parts, and a row of one partition writes out
 *       directly, as v1; with CLPA_MERGE 0 (devices without device-scope
 *       ordering) reduce.cl's kernel merges every row after the launch.
 * A work-group serves HEADS_PER_WG query heads that share one KV head
 * (GQA packing), so each K/V byte it reads serves all of them.
 *
 * Buffers (element counts):
 *   q            [num_seqs, q_stride]            head h at h * HEAD_SIZE
 *   k_cache      [num_blocks, num_kv_heads, HEAD_SIZE / X, BLOCK_SIZE, X]
 *   v_cache      [num_blocks, num_kv_heads, HEAD_SIZE, BLOCK_SIZE]
 *                (split-key; or HND, NHD: kv.cl's key_index, value_index)
 *   block_tables [num_seqs, max_blocks_per_seq]  int32
 *   context_lens [num_seqs]                      int32
 *   v1: out      [num_seqs, num_heads, HEAD_SIZE] io_t; lse [num_seqs, num_heads] or NULL
 *   v2: tmp_out  [num_seqs, num_heads, max_parts, HEAD_SIZE] float;
 *       max_logits, exp_sums [num_seqs, num_heads, max_parts] float
 *   k_scales, v_scales  [1] float or NULL (then k_scale, v_scale): fp8 only
 *
 * Key cache layout, one block of one KV head (X elements = 16 bytes;
 * kv.cl's key_index):
 *
 *        token 0   token 1        token B-1
 *      +---------+---------+ ... +---------+   dims 0 .. X-1
 *      +---------+---------+ ... +---------+   dims X .. 2X-1
 *      ...                                     (HEAD_SIZE / X rows)
 *
 * A thread group of TGS lanes shares one token; together its lanes fetch
 * 16 bytes (VEC_SIZE elements each) per step, and adjacent groups read
 * adjacent tokens, so a lane group reads whole 16-byte rows of the block.
 * In the HND and NHD layouts a token's dims are contiguous, so the key
 * loads stay vectors; the values (V_VEC_SIZE tokens of one dim) are then
 * V_VEC_SIZE loads a token stride apart (kv.cl's KV_TOKENS).
 *
 * Phases: 1 load the query, 2 score the keys (logits into local memory),
 * 3 softmax, 4 accumulate the values, 5 reduce across lanes, 6 write, 7
 * (v2) the last partition of a row merges them.
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
#ifndef CLPA_SG
#error "CLPA_SG: lanes a lane group (the CUDA warp); required"
#endif
#ifndef CLPA_PARTITION_SIZE
#error "CLPA_PARTITION_SIZE: 0 for v1, else tokens a partition (a multiple of BLOCK_SIZE); required"
#endif
#ifndef CLPA_HEADS_PER_WG
#error "CLPA_HEADS_PER_WG: query heads of one KV head a work-group serves; required"
#endif
#define HEAD_SIZE CLPA_HEAD_SIZE
#define BLOCK_SIZE CLPA_BLOCK_SIZE
#define NUM_THREADS CLPA_NUM_THREADS
#define SG CLPA_SG
#define PARTITION_SIZE CLPA_PARTITION_SIZE
#define G CLPA_HEADS_PER_WG
/* Derived sizes. Example: f16 cache, SG 32, BLOCK_SIZE 16, HEAD_SIZE 128:
 * TGS 2 lanes per token, VEC_SIZE 4 halves (8 bytes) per lane per step,
 * 16 vecs per lane; V_VEC_SIZE 8 tokens, 2 lanes per value row, 16 rows
 * per lane-group step, 8 rows per lane. */
#define NUM_WARPS (NUM_THREADS / SG)
#define TGS ((SG / BLOCK_SIZE) > 1 ? (SG / BLOCK_SIZE) : 1)
#define NUM_TOKENS_PER_TG ((BLOCK_SIZE + SG - 1) / SG)
/* Vector widths must be literals (they are pasted into vloadN names). */
#define VEC_ELEMS_ (16 / (TGS * KV_BYTES))
#if VEC_ELEMS_ >= 16
#define VEC_SIZE 16
#elif VEC_ELEMS_ >= 8
#define VEC_SIZE 8
#elif VEC_ELEMS_ >= 4
#define VEC_SIZE 4
#elif VEC_ELEMS_ >= 2
#define VEC_SIZE 2
#else
#define VEC_SIZE 1
#endif
#define NUM_VECS_PER_THREAD (HEAD_SIZE / (TGS * VEC_SIZE))
/* Key blocks a lane group takes per step of the QK loop, so that each
 * query load from local memory serves several keys: 4 when the heads
 * times the vector width make 16, 2 otherwise
 * (docs/decisions/0005-decode-lanes-kernel.md). */
#if G * VEC_SIZE == 16
#define KEY_BLOCKS 4
#else
#define KEY_BLOCKS 2
#endif
#define V_ELEMS_ (X < BLOCK_SIZE ? X : BLOCK_SIZE)
#if V_ELEMS_ >= 16
#define V_VEC_SIZE 16
#elif V_ELEMS_ >= 8
#define V_VEC_SIZE 8
#elif V_ELEMS_ >= 4
#define V_VEC_SIZE 4
#elif V_ELEMS_ >= 2
#define V_VEC_SIZE 2
#else
#define V_VEC_SIZE 1
#endif
#define NUM_V_VECS_PER_ROW (BLOCK_SIZE / V_VEC_SIZE)
#define NUM_ROWS_PER_ITER (SG / NUM_V_VECS_PER_ROW)
#define NUM_ROWS_PER_THREAD ((HEAD_SIZE + NUM_ROWS_PER_ITER - 1) / NUM_ROWS_PER_ITER)

#if HEAD_SIZE % X != 0
#error "HEAD_SIZE must be a multiple of X (16 bytes of the cache dtype)"
#endif
#if HEAD_SIZE % (TGS * VEC_SIZE) != 0
#error "HEAD_SIZE must be a multiple of TGS * VEC_SIZE"
#endif
#if NUM_V_VECS_PER_ROW > SG || NUM_THREADS % SG != 0
#error "lane group too small for this block size"
#endif
#if CLPA_LANES == 1 && TGS != 1
#error "emulated lanes need SG == BLOCK_SIZE (one lane per key token, no reduction in the key loop)"
#endif

/* Keys and values come in aligned vectors: one load each (KV_LOADA). Not
 * for f32, where they cost NVIDIA's build registers and speed
 * (docs/decisions/0005-decode-lanes-kernel.md); KV_LOAD's element loads
 * stay there. */
#if KV_BYTES == 4
#define DECODE_LOAD KV_LOAD
#else
#define DECODE_LOAD KV_LOADA
#endif

#define floatV CAT(float, V_VEC_SIZE)
#define floatK CAT(float, VEC_SIZE)

/* ---- 1. load the query (G heads) into local memory ---- */
inline void load_query(__local float *q_s, __global const io_t *q_ptr) {
  for (int i = get_local_id(0); i < G * HEAD_SIZE; i += NUM_THREADS) q_s[i] = IO_LOAD(q_ptr, i);
  barrier(CLK_LOCAL_MEM_FENCE);
}

/* ---- 3. softmax over the work-group's tokens, one head ----
 * Turns the head's logits into probabilities in place and returns the
 * softmax state of this work-group's keys (with the sink, when has_sink,
 * as one more logit that takes mass and gives no value). */
inline softmax_state softmax_logits(__local float *lg, int num_tokens, float qk_max,
                                    int has_sink, float sink, __local float *red) {
  const int lid = get_local_id(0);
  float m = block_reduce(qk_max, 1, NUM_THREADS, SG, red);
  if (has_sink) m = fmax(m, sink);
  float sum = 0.0f;
  for (int i = lid; i < num_tokens; i += NUM_THREADS) {
    const float p = lg[i] == -INFINITY ? 0.0f : exp(lg[i] - m);
    lg[i] = p;
    sum += p;
  }
  sum = block_reduce(sum, 0, NUM_THREADS, SG, red);
  if (has_sink) sum += exp(sink - m);
  const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
  for (int i = lid; i < num_tokens; i += NUM_THREADS) lg[i] *= inv;
  return softmax_state_of(m, sum);
}

/* ---- 5. reduce: across the lanes of a row, then across lane groups ----
 * Leaves the work-group's output rows in out_s[g * HEAD_SIZE + row]. */
inline void reduce_rows(__local float *out_s, float accs[G][NUM_ROWS_PER_THREAD],
                        __local float *red) {
  const int lane = get_local_id(0) % SG, warp = get_local_id(0) / SG;
  for (int g = 0; g < G; g++)
    for (int i = 0; i < NUM_ROWS_PER_THREAD; i++)
      accs[g][i] = lane_group_sum(accs[g][i], NUM_V_VECS_PER_ROW, red);
  for (int w = 0; w < NUM_WARPS; w++) {
    if (warp == w && lane % NUM_V_VECS_PER_ROW == 0) {
      for (int g = 0; g < G; g++)
        for (int i = 0; i < NUM_ROWS_PER_THREAD; i++) {
          const int row = lane / NUM_V_VECS_PER_ROW + i * NUM_ROWS_PER_ITER;
          if (row < HEAD_SIZE)
            out_s[g * HEAD_SIZE + row] = (w == 0 ? 0.0f : out_s[g * HEAD_SIZE + row]) + accs[g][i];
        }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
}

/* ---- 2. score the keys (SCORE_KEYS, in the kernel's scope) ----
 * Each lane group takes KEY_BLOCKS whole blocks per step (so each query
 * load from local memory serves several keys), a thread group one token.
 * Every work-item runs the same number of iterations, so the shuffles
 * inside stay in uniform control flow even where a subgroup spans the
 * whole work-group (PoCL); lane groups past the end work on a masked
 * stand-in block. Reads the partition's blocks (start_block .. end_block,
 * table), q_s and the kernel's arguments; writes the heads' logits and
 * their maxima qk_max[G].
 * Phases 2 and 4 are macros, expanded in the kernel body: written as inline
 * functions (private arrays passed by pointer, the same PTX size and
 * registers) they ran slower (docs/decisions/0005-decode-lanes-kernel.md). */
#if TGS > 1
#define TG_SUM(x) lane_group_sum(x, TGS, red) /* never emulated: see the #error above */
#else
#define TG_SUM(x) (x)
#endif
#define SCORE_KEYS() \
  const int tg_idx = lane / TGS, tg_off = lane % TGS; \
  const int iters = (end_block - start_block + NUM_WARPS * KEY_BLOCKS - 1) / (NUM_WARPS * KEY_BLOCKS); \
  for (int it = 0; it < iters; it++) { \
    /* KEY_BLOCKS blocks per step, so each query load serves several keys. */ \
    int blk[KEY_BLOCKS], valid[KEY_BLOCKS], in_range[KEY_BLOCKS]; \
    __global const kv_t *kb[KEY_BLOCKS]; \
    for (int b = 0; b < KEY_BLOCKS; b++) { \
      blk[b] = start_block + warp + (it * KEY_BLOCKS + b) * NUM_WARPS; \
      in_range[b] = blk[b] < end_block; \
      int phys = in_range[b] ? PAGE_OF(table, blk[b]) : 0; \
      valid[b] = in_range[b] && phys >= 0 && phys < num_blocks; \
      if (!valid[b]) { \
        if (in_range[b] && lane == 0) atomic_or(faults, CLPA_FAULT_BAD_BLOCK); \
        phys = 0; /* read a real block, mask every token of it */ \
      } \
      kb[b] = k_cache + kv_tile((ulong)phys, kv_head, block_stride, head_stride); \
    } \
    for (int t = 0; t < NUM_TOKENS_PER_TG; t++) { \
      const int offset = (tg_idx + t * SG) % BLOCK_SIZE; \
      floatK acc[KEY_BLOCKS][G]; \
      for (int b = 0; b < KEY_BLOCKS; b++) \
        for (int g = 0; g < G; g++) acc[b][g] = 0.0f; \
      for (int j = 0; j < NUM_VECS_PER_THREAD; j++) { \
        const int e = (tg_off + j * TGS) * VEC_SIZE; /* first dim of this vec */ \
        const int koff = key_index(e, offset, BLOCK_SIZE, ts); \
        floatK k[KEY_BLOCKS]; \
        for (int b = 0; b < KEY_BLOCKS; b++) k[b] = DECODE_LOAD(VEC_SIZE, kb[b] + koff) * kscale; \
        for (int g = 0; g < G; g++) { \
          const floatK qv = CAT(VLOAD, VEC_SIZE)(q_s + g * HEAD_SIZE + e); \
          for (int b = 0; b < KEY_BLOCKS; b++) acc[b][g] = mad(qv, k[b], acc[b][g]); \
        } \
      } \
      for (int b = 0; b < KEY_BLOCKS; b++) { \
        const int token = blk[b] * BLOCK_SIZE + offset; \
        const int masked = !valid[b] || token >= L || token < lo; \
        for (int g = 0; g < G; g++) { \
          float qk = TG_SUM(VSUM(VEC_SIZE, acc[b][g])); \
          qk *= scale; \
          if (soft_cap > 0.0f) qk = soft_cap * tanh(qk / soft_cap); \
          qk += slope[g] * (float)(token - L + 1); \
          if (tg_off == 0 && in_range[b]) \
            logits[g * logits_stride + token - start_token] = masked ? -INFINITY : qk; \
          if (!masked) qk_max[g] = fmax(qk_max[g], qk); \
        } \
      } \
    } \
  }

/* ---- 4. accumulate the values (ACCUMULATE_VALUES, in the kernel's scope) ----
 * Lanes take V_VEC_SIZE tokens of value rows; declares and fills
 * accs[G][NUM_ROWS_PER_THREAD] from the probabilities in logits. A mad
 * chain for 16-wide rows, a tree sum for narrower ones
 * (docs/decisions/0005-decode-lanes-kernel.md). */
#if V_VEC_SIZE >= 16
#define ROW_ADD(acc, lv, v) acc = VDOT(V_VEC_SIZE, lv, v, acc)
#else
#define ROW_ADD(acc, lv, v) acc += VSUM(V_VEC_SIZE, lv * v)
#endif
#define ACCUMULATE_VALUES() \
  float accs[G][NUM_ROWS_PER_THREAD]; \
  for (int g = 0; g < G; g++) \
    for (int i = 0; i < NUM_ROWS_PER_THREAD; i++) accs[g][i] = 0.0f; \
  const int vcol = (lane % NUM_V_VECS_PER_ROW) * V_VEC_SIZE; \
  for (int blk = start_block + warp; blk < end_block; blk += NUM_WARPS) { \
    const int phys = PAGE_OF(table, blk); \
    if (phys < 0 || phys >= num_blocks) continue; /* its logits are 0; never read it */ \
    const int tok0 = blk * BLOCK_SIZE + vcol; \
    floatV lv[G]; \
    for (int g = 0; g < G; g++) \
      lv[g] = CAT(VLOAD, V_VEC_SIZE)(logits + g * logits_stride + tok0 - start_token); \
    __global const kv_t *vb = v_cache + kv_tile((ulong)phys, kv_head, block_stride, head_stride); \
    for (int i = 0; i < NUM_ROWS_PER_THREAD; i++) { \
      const int row = lane / NUM_V_VECS_PER_ROW + i * NUM_ROWS_PER_ITER; \
      if (row < HEAD_SIZE) { \
        floatV v = KV_TOKENS(DECODE_LOAD, V_VEC_SIZE, vb + value_index(row, vcol, BLOCK_SIZE, ts), \
                             ts) * vscale; \
        /* Slots past the context (or before the window) may hold anything, \
         * NaN included: 0 * NaN is NaN, so zero the values, not just the \
         * weights. */ \
        if (blk == ctx_blocks - 1 || blk == start_block) { \
          const CAT(int, V_VEC_SIZE) tok = CAT(IOTA, V_VEC_SIZE) + tok0; \
          v = select((floatV)(0.0f), v, tok < L && tok >= lo); \
        } \
        for (int g = 0; g < G; g++) ROW_ADD(accs[g][i], lv[g], v); \
      } \
    } \
  }

__kernel __attribute__((reqd_work_group_size(NUM_THREADS, 1, 1))) void clpa_decode_paged(
    KERNEL_PARAMS(DECODE_ARG_LIST) PAGE_PARAMS) {
  __local float q_s[G * HEAD_SIZE];
  __local float out_s[G * HEAD_SIZE];
  __local float red[NUM_THREADS];
#if PARTITION_SIZE && CLPA_MERGE
  __local float red_l[NUM_THREADS], row_m[G], row_l[G]; /* the merge's (step 7) */
  __local int last[1];
#else
  (void)part_counts, (void)work; /* v1, or reduce.cl's kernel merges; no work list */
#endif

  const int lid = get_local_id(0);
  const int warp = lid / SG, lane = lid % SG;
  const int head0 = get_group_id(0) * G;
  const int seq = get_group_id(1);
  const int part = get_group_id(2);
  const int kv_head = head0 / (num_heads / num_kv_heads);

#if CLPA_LANES == 2
  /* Lane groups must be aligned slices of real subgroups. */
  if (get_sub_group_size() % SG != 0 || get_sub_group_local_id() % SG != (uint)lane) {
    if (lid == 0) atomic_or(faults, CLPA_FAULT_LANES);
  }
#endif
  int L = SEQ_LEN(seq);
  if (L < 0 || L > max_context_len) {
    if (lid == 0 && part == 0) atomic_or(faults, CLPA_FAULT_BAD_CONTEXT_LEN);
    L = 0;
  }
  const int ctx_blocks = (L + BLOCK_SIZE - 1) / BLOCK_SIZE;
  /* Tokens before lo are outside the sliding window: their blocks are
   * neither read nor checked (an engine may already have freed them). */
  const int lo = window > 0 ? max(L - window, 0) : 0;
#if PARTITION_SIZE
  /* The row's partitions: its context's, and one for an empty context
   * (which writes the empty output). A partition wholly before the window
   * is empty (no blocks), and still counts for the merge. */
  const int nparts = max((L + PARTITION_SIZE - 1) / PARTITION_SIZE, 1);
  const int alone = CLPA_MERGE && nparts == 1; /* else reduce.cl reads every partition's state */
  /* Work-groups past the row's partitions do nothing. On NVIDIA they leave
   * here; elsewhere they run through with no blocks and no writes (after
   * this return PoCL 3.1 got the spread merge wrong, as in decode_mma.cl:
   * docs/decisions/0002-decode-v2-merge.md). */
  const int live = part < nparts;
#if CLPA_LANES == 3
  if (!live) return;
#endif
  const int end_block = live ? min((part + 1) * (PARTITION_SIZE / BLOCK_SIZE), ctx_blocks) : 0;
  const int start_block = min(max(part * (PARTITION_SIZE / BLOCK_SIZE), lo / BLOCK_SIZE), end_block);
#else
  const int alone = 1, live = 1;
  const int start_block = lo / BLOCK_SIZE, end_block = ctx_blocks;
#endif
  const int start_token = start_block * BLOCK_SIZE;
  const int num_tokens = (end_block - start_block) * BLOCK_SIZE; /* padded to whole blocks */
  page_row table = PAGE_ROW(seq);

  load_query(q_s, q + seq * q_stride + (size_t)head0 * HEAD_SIZE);

  const float kscale = !KV_IS_FP8 ? 1.0f : k_scales ? k_scales[0] : k_scale;
  const int ts = kv_token_stride(num_kv_heads, head_stride, BLOCK_SIZE); /* HND, NHD */
  const float vscale = !KV_IS_FP8 ? 1.0f : v_scales ? v_scales[0] : v_scale;
  float slope[G], qk_max[G];
  for (int g = 0; g < G; g++) {
    slope[g] = alibi ? alibi[head0 + g] : 0.0f;
    qk_max[g] = -INFINITY;
  }

  SCORE_KEYS();
  barrier(CLK_LOCAL_MEM_FENCE);

  /* ---- 3. softmax over this work-group's tokens, per head (with the sink
   * where this is the row's only partition; else the merge adds it) ---- */
  for (int g = 0; g < G; g++) {
    const int has_sink = alone && sinks;
    softmax_state st = softmax_logits(logits + g * logits_stride, num_tokens, qk_max[g], has_sink,
                                      has_sink ? sinks[head0 + g] : 0.0f, red);
    if (live && lid == 0) { /* a constant (v1's live) on the right of && draws a clang warning */
      const size_t sh = (size_t)seq * num_heads + head0 + g;
      if (alone) {
        if (lse) lse[sh] = softmax_lse(st);
      } else {
        max_logits[sh * max_parts + part] = st.m;
        exp_sums[sh * max_parts + part] = st.l;
      }
    }
  }
  barrier(CLK_LOCAL_MEM_FENCE);

  ACCUMULATE_VALUES();

  reduce_rows(out_s, accs, red);

  /* ---- 6. write the output (v1, or the row's only partition) or the
   * partition's ---- */
  for (int i = lid; live && i < G * HEAD_SIZE; i += NUM_THREADS) {
    const size_t sh = (size_t)seq * num_heads + head0 + i / HEAD_SIZE;
    if (alone)
      IO_STORE(out_s[i], out, sh * HEAD_SIZE + i % HEAD_SIZE);
    else
      tmp_out[(sh * max_parts + part) * HEAD_SIZE + i % HEAD_SIZE] = out_s[i];
  }
#if PARTITION_SIZE && CLPA_MERGE
  /* ---- 7. the last partition of the row to finish merges them (decode_merge.cl;
   * q_s is free: the weights' local memory) ---- */
  const int merging = decode_last_part(live && !alone, part_counts, seq, nparts, last);
  decode_merge_parts(merging, nparts, seq, head0, num_heads, max_parts, max_logits, exp_sums,
                     tmp_out, sinks, out, lse, G, HEAD_SIZE, NUM_THREADS, red, red_l, row_m, row_l,
                     q_s, HEAD_SIZE, 0);
#endif
}
