/*
 * decode_rows.cl — decode shaped for CPUs (PoCL): a work-item owns the G
 * query heads of one KV head, one sequence and one partition of
 * PARTITION_SIZE tokens, with no barriers, explicit 16-wide vectors (what
 * an AVX-512 core computes at once) and its logits in private memory
 * (which a CPU keeps in L1/L2). Same arguments, outputs (v1's out, or v2's
 * partition states for reduce.cl) and results as decode.cl's
 * clpa_decode_paged. Three passes over the partition's blocks:
 *
 *   1. scores: a 16-element vector of the key layout holds VT = 16 / X
 *      tokens x X dimensions (one 16-byte row of X elements per token,
 *      kv.cl's key_index; gathered from VT rows in HND and NHD); the
 *      queries are held repeated VT times, so one
 *      multiply-add serves VT tokens, and TG such vectors of successive
 *      tokens share each query load (CLPA_KEY_VECTORS, 4, 2 or 1: as many
 *      as leave the TG x G accumulators in registers; lib/decode_plan.c); with
 *      4, their token sums are taken together (rows.cl's token_sums4);
 *   2. the softmax over the partition, per head;
 *   3. values: a value row is contiguous over a block's tokens; four rows
 *      at a time, the G heads' probabilities multiply VB tokens of each,
 *      accumulated lane-wise and summed once at the end.
 *
 * Grid:  (num_heads / G, num_seqs, max_parts), work-groups of 1.
 * Masks, faults and NaN handling as decode.cl: tokens outside [window
 * start, context) are -inf and their value slots zero; blocks with bad ids
 * set CLPA_FAULT_BAD_BLOCK and take no part.
 */
#ifndef CLPA_HEAD_SIZE
#error "CLPA_HEAD_SIZE: elements a head; required"
#endif
#ifndef CLPA_PARTITION_SIZE
#error "CLPA_PARTITION_SIZE: 0 for v1, else tokens a partition (a multiple of BLOCK_SIZE); required"
#endif
#ifndef CLPA_HEADS_PER_WG
#error "CLPA_HEADS_PER_WG: query heads of one KV head a work-group serves; required"
#endif
#ifndef CLPA_KEY_VECTORS
#error "CLPA_KEY_VECTORS: 16-element key vectors sharing each query load (4, 2 or 1); required"
#endif
#define HEAD_SIZE CLPA_HEAD_SIZE
#define BLOCK_SIZE CLPA_BLOCK_SIZE
#define PART CLPA_PARTITION_SIZE /* tokens per work-item (v1: the whole context fits) */
#define G CLPA_HEADS_PER_WG
#define NTG (BLOCK_SIZE / VT)     /* key vectors per block and chunk */
#define TG (NTG < CLPA_KEY_VECTORS ? NTG : CLPA_KEY_VECTORS) /* key vectors a query load */
#define NCH (HEAD_SIZE / ROWS_X)  /* key chunks of a row (rows.cl) */
#define VBLK 4 /* value blocks sharing each accumulator load and store */
/* The prefetch and touch distances: docs/decisions/0016-decode-rows-kernel.md */
#define KPF 2    /* key tiles prefetched this many blocks ahead, whole */
#define KTOUCH 4 /* and touched, a line a KB, this many */
#define VTOUCH 3 /* value tiles touched so, this many groups of VBLK ahead */
#define KTILE (HEAD_SIZE * BLOCK_SIZE * KV_BYTES) /* bytes of a block's keys (or values) */
#if PART % BLOCK_SIZE || TG < 1 || NTG % TG
#error "decode rows: partitions of whole blocks, head sizes of multiples of 4"
#endif
/* Key vectors whose token sums are taken together: a step's 4 (rows.cl
 * token_sums4: VS = 4 x VT tokens), else one at a time (VS = VT). */
#if TG == 4
#define SV 4
#define VS VT4
#define ROWS_SUMS(acc, i, r)                                                                  \
  token_sums4(acc[i][r], acc[(i) + 1][r], acc[(i) + 2][r], acc[(i) + 3][r])
#else
#define SV 1
#define VS VT
#define ROWS_SUMS(acc, i, r) token_sums(acc[i][r])
#endif
#define floatS CAT(float, VS)
#define intS CAT(int, VS)

/* The tile of the row's block b in a cache, as bytes to prefetch; NULL
 * for a block at or past b_end or an id outside the cache. */
inline __global const uchar *rows_tile(__global const kv_t *cache, ulong kv_off,
                                       page_row table, int b, int b_end,
                                       int num_blocks, ulong block_stride) {
  const int phys = b < b_end ? PAGE_OF(table, b) : -1;
  return phys >= 0 && phys < num_blocks
             ? (__global const uchar *)(cache + kv_off + (ulong)phys * block_stride)
             : NULL;
}

/* One line in each KB of the row's block b's tile (none past b_end or for
 * a bad id): the hardware prefetchers then bring the rest faster than
 * the whole-tile software prefetches alone
 * (docs/decisions/0016-decode-rows-kernel.md). */
inline void rows_touch(__global const kv_t *cache, ulong kv_off, page_row table, int b,
                       int b_end, int num_blocks, ulong block_stride) {
  __global const uchar *t = rows_tile(cache, kv_off, table, b, b_end, num_blocks, block_stride);
  for (int o = 0; t && o < KTILE; o += 1024) ROWS_PREFETCH(t + o);
}

/* Bytes of a value row within a tile; VROWS rows a prefetched line. */
#define VROW_BYTES (BLOCK_SIZE * KV_BYTES)
/* (rows of fewer than 4 bytes, blocks of 1 or 2 tokens: 16 a step, not a line) */
#define VROWS (VROW_BYTES >= 64 ? 1 : VROW_BYTES >= 4 ? 64 / VROW_BYTES : 16)
#if HEAD_SIZE % VROWS
#error "decode rows: head sizes of multiples of x"
#endif
/* Step 3's multiply-adds for VBLK value blocks (decode's locals): VROWS
 * rows at a time, a prefetch of each row's lines in the next group's
 * tiles (nv) per step. EDGE (a literal) masks the slots outside [lo,
 * t_end) and blocks that are missing or bad; without it the loop has no
 * selects nor branches (PoCL had kept the test and flags on the stack in
 * the loop: docs/decisions/0016-decode-rows-kernel.md). A
 * macro, not a function: PoCL keeps arrays passed by pointer in memory. */
#define ROWS_VALUE_STEP(EDGE)                                                                  \
  do {                                                                                        \
    for (int d0 = 0; d0 < HEAD_SIZE; d0 += VROWS) {                                           \
      _Pragma("unroll") for (int k = 0; k < VBLK; k++)                                        \
        _Pragma("unroll") for (int o = 0; o < VROWS * VROW_BYTES; o += 64)                    \
          ROWS_PREFETCH(nv[k] + d0 * VROW_BYTES + o);                                          \
      _Pragma("unroll") for (int d = d0; d < d0 + VROWS; d++)                                 \
        for (int c = 0; c < BLOCK_SIZE / VB; c++) {                                           \
          floatB a[G];                                                                        \
          _Pragma("unroll") for (int r = 0; r < G; r++) a[r] = acc[r][d];                      \
          _Pragma("unroll") for (int k = 0; k < VBLK; k++) {                                  \
            floatB v = KV_TOKENS(KV_LOAD, VB, vb[k] + value_index(d, c * VB, BLOCK_SIZE, ts), ts) * \
                       vscale;                                                                \
            if (EDGE) { /* slots outside the range may hold NaN: 0 * NaN is NaN */            \
              const intB jj = CAT(IOTA, VB) + ((b0 + k) * BLOCK_SIZE + c * VB);               \
              v = ok[k] ? select((floatB)(0.0f), v, jj >= lo && jj < t_end) : (floatB)(0.0f); \
            }                                                                                 \
            _Pragma("unroll") for (int r = 0; r < G; r++) a[r] = fma(pv[k][c][r], v, a[r]);    \
          }                                                                                   \
          _Pragma("unroll") for (int r = 0; r < G; r++) acc[r][d] = a[r];                      \
        }                                                                                     \
    }                                                                                         \
  } while (0)

/* ---- The kernel's phases ---- */

/* Softmax over a partition's n logits (whole blocks) per row: the max m
 * from the lane-wise maxima mv, the logits turned into probabilities in
 * place, their sum l. */
inline void rows_softmax(float lg[G][PART], const floatS *mv, float *m, float *l, int n) {
  for (int r = 0; r < G; r++) m[r] = CAT(vmax, VS)(mv[r]);
  for (int r = 0; r < G; r++) {
    floatB s = (floatB)(0.0f);
    const float mr = m[r] == -INFINITY ? 0.0f : m[r]; /* every logit -inf: p = 0 */
    for (int t = 0; t < n; t += VB) { /* n is whole blocks: a multiple of VB */
      const floatB p = exp(ROWS_LOADB(&lg[r][t]) - mr); /* e^(-inf) = 0 */
      ROWS_STOREB(p, &lg[r][t]);
      s += p;
    }
    l[r] = VSUM(VB, s);
  }
}

/* One row's result (sums res, max m, sum l; output row sh, query head
 * `head`): v1 (out given) the normalised output, the sink counted, and
 * its LSE; v2 the partition's normalised output and state. */
inline void rows_write(const float *res, float m, float l, size_t sh, int head, int part,
                       int max_parts, __global const float *sinks, __global io_t *out,
                       __global float *lse, __global float *tmp_out, __global float *max_logits,
                       __global float *exp_sums) {
  const softmax_state st = softmax_state_of(m, l);
  if (out) { /* the sink: one more logit in the softmax, with no value */
    const softmax_state all = sinks ? softmax_merge(st, softmax_logit(sinks[head])) : st;
    const float w = st.l > 0.0f ? softmax_weight(st, all) / st.l : 0.0f;
    for (int d = 0; d < HEAD_SIZE; d++) IO_STORE(res[d] * w, out, sh * HEAD_SIZE + d);
    if (lse) lse[sh] = softmax_lse(all);
  } else {
    const float inv = st.l > 0.0f ? 1.0f / st.l : 0.0f;
    for (int d = 0; d < HEAD_SIZE; d++)
      tmp_out[(sh * max_parts + part) * HEAD_SIZE + d] = res[d] * inv;
    max_logits[sh * max_parts + part] = st.m;
    exp_sums[sh * max_parts + part] = st.l;
  }
}

__kernel __attribute__((reqd_work_group_size(1, 1, 1))) void clpa_decode_rows(
    KERNEL_PARAMS(DECODE_ARG_LIST) PAGE_PARAMS) {
  (void)logits, (void)logits_stride, (void)part_counts, (void)work;
  const int head0 = get_group_id(0) * G, seq = get_group_id(1), part = get_group_id(2);
  const int kv_head = head0 / (num_heads / num_kv_heads);
  int L = SEQ_LEN(seq);
  if (L < 0 || L > max_context_len) {
    if (part == 0) atomic_or(faults, CLPA_FAULT_BAD_CONTEXT_LEN);
    L = 0;
  }
  const int lo = window > 0 ? max(L - window, 0) : 0; /* tokens before lo: never read */
  const size_t sh0 = (size_t)seq * num_heads + head0;
  if (!out && part * PART >= L) return; /* v2: the reduce kernel skips empty partitions */
  const int t_end = min((part + 1) * PART, L);
  const int b_begin = max(part * PART, lo) / BLOCK_SIZE, b_end = (t_end + BLOCK_SIZE - 1) / BLOCK_SIZE;
  page_row table = PAGE_ROW(seq);
  const ulong kv_off = kv_tile(0, kv_head, block_stride, head_stride); /* + block * block_stride */
  const int ts = kv_token_stride(num_kv_heads, head_stride, BLOCK_SIZE); /* HND, NHD */
  const float kscale = !KV_IS_FP8 ? 1.0f : k_scales ? k_scales[0] : k_scale;
  const float vscale = !KV_IS_FP8 ? 1.0f : v_scales ? v_scales[0] : v_scale;
  const int t0 = b_begin * BLOCK_SIZE; /* the logits' first token */

  /* ---- 1. scores ---- */
  float qf[G][HEAD_SIZE], slope[G];
  for (int r = 0; r < G; r++) {
    for (int d = 0; d < HEAD_SIZE; d++)
      qf[r][d] = IO_LOAD(q, (ulong)seq * q_stride + (ulong)(head0 + r) * HEAD_SIZE + d);
    slope[r] = alibi ? alibi[head0 + r] : 0.0f;
  }
  float16 q16[G][NCH];
  for (int r = 0; r < G; r++)
    for (int c = 0; c < NCH; c++) q16[r][c] = QREP(&qf[r][c * ROWS_X]);
  float lg[G][PART], m[G];
  floatS mv[G]; /* the running max, lane-wise */
  for (int r = 0; r < G; r++) mv[r] = (floatS)(-INFINITY);
  for (int b = b_begin; b < b_end; b++) {
    const int phys = PAGE_OF(table, b), j0 = b * BLOCK_SIZE;
    const int valid = phys >= 0 && phys < num_blocks;
    if (!valid) atomic_or(faults, CLPA_FAULT_BAD_BLOCK);
    __global const kv_t *kb = k_cache + kv_off + (ulong)(valid ? phys : 0) * block_stride;
    __global const uchar *nk = /* the keys KPF blocks ahead start coming */
        rows_tile(k_cache, kv_off, table, b + KPF, b_end, num_blocks, block_stride);
    /* and one line in each KB of the keys KTOUCH blocks ahead: with it the
     * full prefetches come faster (docs/decisions/0016-decode-rows-kernel.md) */
    rows_touch(k_cache, kv_off, table, b + KTOUCH, b_end, num_blocks, block_stride);
    for (int o0 = 0; o0 < NTG; o0 += TG) { /* TG key vectors: tokens VT (o0 .. o0 + TG) */
      /* a slice of that block's lines each step, spread over its chunks */
      __global const uchar *pf = nk ? nk + o0 * KTILE / NTG : NULL;
      float16 acc[TG][G];
      if (valid) ROWS_KEY_PRODUCTS(acc, TG, G, kb, o0, q16, kscale, BLOCK_SIZE, ts, pf);
      else ROWS_KEY_PRODUCTS(acc, TG, G, kb, o0, q16, 0.0f, BLOCK_SIZE, ts, pf); /* masked below */
#pragma unroll
      for (int i = 0; i < TG; i += SV) {
        const int j = j0 + (o0 + i) * VT; /* tokens j .. j + VS - 1 */
        const intS jj = CAT(IOTA, VS) + j;
        const intS masked = (jj < lo) | (jj >= t_end);
#pragma unroll
        for (int r = 0; r < G; r++) {
          floatS x = ROWS_SUMS(acc, i, r) * scale;
          if (soft_cap > 0.0f) x = soft_cap * tanh(x / soft_cap);
          if (alibi) x += slope[r] * CAT(TO_FLOAT, VS)(jj - L + 1);
          x = valid ? select(x, (floatS)(-INFINITY), masked) : (floatS)(-INFINITY);
#if VS == 1
          lg[r][j - t0] = x;
#else
          CAT(vstore, VS)(x, 0, &lg[r][j - t0]);
#endif
          mv[r] = fmax(mv[r], x);
        }
      }
    }
  }

  /* ---- 2. softmax over the partition ---- */
  float l[G];
  rows_softmax(lg, mv, m, l, (b_end - b_begin) * BLOCK_SIZE);

  /* ---- 3. values: a block at a time (its value tile is contiguous, so the
   * reads stream; the accumulators stay in L1), every row of it ---- */
  floatB acc[G][HEAD_SIZE];
  for (int r = 0; r < G; r++)
    for (int d = 0; d < HEAD_SIZE; d++) acc[r][d] = (floatB)(0.0f);
  for (int b0 = b_begin; b0 < b_end; b0 += VBLK) {
    /* VBLK blocks at once: each accumulator load and store serves VBLK
     * multiply-adds. Missing or bad blocks read block 0 with zero weights. */
    floatB pv[VBLK][BLOCK_SIZE / VB][G];
    __global const kv_t *vb[VBLK];
    int ok[VBLK], all_ok = 1;
#pragma unroll
    for (int k = 0; k < VBLK; k++) {
      const int b = b0 + k, j0 = b * BLOCK_SIZE, phys = b < b_end ? PAGE_OF(table, b) : -1;
      ok[k] = phys >= 0 && phys < num_blocks;
      all_ok &= ok[k];
      vb[k] = v_cache + kv_off + (ulong)(ok[k] ? phys : 0) * block_stride;
      for (int c = 0; c < BLOCK_SIZE / VB; c++)
#pragma unroll
        for (int r = 0; r < G; r++)
          pv[k][c][r] = ok[k] ? ROWS_LOADB(&lg[r][j0 + c * VB - t0]) : (floatB)(0.0f);
    }
    const int edge = !all_ok || b0 * BLOCK_SIZE < lo || (b0 + VBLK) * BLOCK_SIZE > t_end;
    /* the next group's values, a line per VROWS rows as those rows are
     * read (a block past the end or a bad id: this group's, in cache) */
    __global const uchar *nv[VBLK];
    for (int k = 0; k < VBLK; k++) {
      nv[k] = rows_tile(v_cache, kv_off, table, b0 + VBLK + k, b_end, num_blocks, block_stride);
      if (!nv[k]) nv[k] = (__global const uchar *)vb[k];
      /* and touched, a line a KB, VTOUCH groups ahead */
      rows_touch(v_cache, kv_off, table, b0 + VTOUCH * VBLK + k, b_end, num_blocks, block_stride);
    }
    if (edge) ROWS_VALUE_STEP(1);
    else ROWS_VALUE_STEP(0); /* no masks: the loop every group but the row's ends takes */
  }
  float res[G][HEAD_SIZE];
  for (int r = 0; r < G; r++) row_sums(acc[r], res[r], HEAD_SIZE);

  /* ---- 4. write the output (v1) or the partition's state (v2) ---- */
  for (int r = 0; r < G; r++)
    rows_write(res[r], m[r], l[r], sh0 + r, head0 + r, part, max_parts, sinks, out, lse, tmp_out,
               max_logits, exp_sums);
}
