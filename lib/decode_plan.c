/*
 * decode_plan.c — clpa_decode's plan (decode_plan.h): which kernel, v1 or
 * v2, how long a partition, how many query heads and warps a work-group,
 * from the shapes, the device and, where the caller gives them, the
 * host's context lengths; and the checks of decode's own fields. Each rule
 * names its decision record (docs/decisions/): the measurements behind it.
 */

#include "decode_plan.h"

static size_t local_bytes(int head_size, int g, int logits_stride, int v2) {
  /* v2: the merge's sums (DECODE_THREADS), per-head max and sum, flag */
  const size_t merge = v2 ? sizeof(float) * (DECODE_THREADS + 2 * (size_t)g) + sizeof(int) : 0;
  return sizeof(float) * ((size_t)2 * g * head_size + DECODE_THREADS + (size_t)g * logits_stride) +
         merge + 256; /* 256: compiler slack */
}

/* ceil(a / b) and a rounded up to a multiple of b, for a, b in (0,
 * CLPA_MAX_CONTEXT_LEN]: the sum a + b - 1 can pass INT32_MAX, so in 64 bits. */
static int ceil_div(int a, int b) { return (int)(((int64_t)a + b - 1) / b); }
static int round_up(int a, int b) { return ceil_div(a, b) * b; }


clpa_status clpa_decode_validate(clpa_context *ctx, const clpa_decode_params *p,
                                 const clpa_kv_layout *kv) {
  CLPA_CTX_CHECK(ctx, p->num_seqs < 0, CLPA_ERR_INVALID_ARG, "num_seqs = %d", p->num_seqs);
  CLPA_CTX_CHECK(ctx, p->max_context_len < 0, CLPA_ERR_INVALID_ARG,
                 "max_context_len = %d (must be >= 0)", p->max_context_len);
  CLPA_CTX_CHECK(ctx, (int64_t)p->max_context_len > (int64_t)p->max_blocks_per_seq * kv->block_size,
                 CLPA_ERR_INVALID_ARG,
                 "max_context_len = %d exceeds the table's capacity %d blocks x %d tokens",
                 p->max_context_len, p->max_blocks_per_seq, kv->block_size);
  CLPA_CTX_CHECK(ctx, p->max_context_len > CLPA_MAX_CONTEXT_LEN, CLPA_ERR_UNSUPPORTED,
                 "max_context_len = %d is past CLPA_MAX_CONTEXT_LEN = %d tokens",
                 p->max_context_len, CLPA_MAX_CONTEXT_LEN);
  CLPA_CTX_CHECK(ctx, (unsigned)p->variant > CLPA_DECODE_V2, CLPA_ERR_INVALID_ARG,
                 "variant = %d", (int)p->variant);
  CLPA_CTX_CHECK(ctx, p->partition_size < 0 || p->partition_size % kv->block_size != 0,
                 CLPA_ERR_INVALID_ARG, "partition_size = %d is not a multiple of block_size = %d",
                 p->partition_size, kv->block_size);
  CLPA_CTX_CHECK(ctx, p->partition_size > CLPA_MAX_CONTEXT_LEN, CLPA_ERR_UNSUPPORTED,
                 "partition_size = %d is past CLPA_MAX_CONTEXT_LEN = %d tokens", p->partition_size,
                 CLPA_MAX_CONTEXT_LEN);
  const int qpk = p->num_heads / kv->num_kv_heads;
  CLPA_CTX_CHECK(ctx, p->heads_per_group < 0 || (p->heads_per_group > 0 && qpk % p->heads_per_group),
                 CLPA_ERR_INVALID_ARG,
                 "heads_per_group = %d does not divide num_heads / num_kv_heads = %d",
                 p->heads_per_group, qpk);
  CLPA_CTX_CHECK(ctx, p->heads_per_group > 16, CLPA_ERR_UNSUPPORTED,
                 "heads_per_group = %d (at most 16)", p->heads_per_group);
  for (int32_t i = 0; p->host_context_lens && i < p->num_seqs; i++)
    CLPA_CTX_CHECK(ctx, p->host_context_lens[i] < 0 || p->host_context_lens[i] > p->max_context_len,
                   CLPA_ERR_INVALID_ARG, "host_context_lens[%d] = %d is outside [0, max_context_len = %d]",
                   i, p->host_context_lens[i], p->max_context_len);
  return CLPA_OK;
}

/* decode_mma.cl's slices for the warps' outputs (its SLICES): one a warp
 * where they fit in 32 KB, else the most that fit and divide the warps. */
static int mma_slices(int g, int head_size, int warps) {
  const int room = 8192 / (g * head_size);
  for (int d = warps; d > 1; d--)
    if (warps % d == 0 && d <= room) return d;
  return 1;
}

/* decode_mma.cl's local memory with g heads and `warps` warps: the warps'
 * output slices, their states, v2's merge sums and flag, and mma.cl's
 * scratch (6 words a work-item where the products are emulated). */
static size_t mma_local_bytes(const clpa_context *ctx, int g, int head_size, int warps) {
  const size_t threads = 32 * (size_t)warps;
  const size_t floats = (size_t)mma_slices(g, head_size, warps) * g * head_size + 2 * 16 * (size_t)warps +
                        32 + 2 * threads + 1;
  return sizeof(float) * floats + 4 * (ctx->lanes == CLPA_LANES_NV_PTX ? 1 : 6 * threads) + 256;
}

/* decode_mma.cl takes the context in chunks of 16 tokens; fp8 caches in
 * chunks of 32 where that pays (mma_chunk_for), so the partitions the
 * plan cuts for them are whole 32-token units. */
static int mma_unit(clpa_dtype kv) { return clpa_dtype_size(kv) == 1 ? 32 : 16; }

/* The tensor-core kernel or the lanes kernel: forced, or mma on NVIDIA
 * for f16/bf16 caches with head sizes of multiples of 32, f32 caches
 * (3xTF32) with multiples of 16 up to 128, fp8 caches with multiples of
 * 64, and partitions of whole 16-token chunks. */
static clpa_status pick_path(clpa_context *ctx, const clpa_decode_params *p, decode_call *c) {
  const clpa_kv_layout *kv = &c->a.kv;
  CLPA_CTX_CHECK(ctx, (unsigned)p->path > CLPA_DECODE_PATH_ROWS, CLPA_ERR_INVALID_ARG,
                 "path = %d (0 auto, 1 lanes, 2 mma, 3 rows)", (int)p->path);
  CLPA_CTX_CHECK(ctx, (unsigned)p->precision > CLPA_PRECISION_F32, CLPA_ERR_INVALID_ARG,
                 "precision = %d (0 auto, 1 f32)", (int)p->precision);
  const int fp8 = clpa_dtype_size(kv->dtype) == 1;
  /* fp8 pairs become f16 pairs by cvt.rn.f16x2.e4m3x2 (sm_89 and later) on NVIDIA */
  const int fp8_ok = ctx->lanes != CLPA_LANES_NV_PTX || ctx->info.nv_compute_capability >= 89;
  const int f32 = kv->dtype == CLPA_DTYPE_F32; /* 3xTF32 */
  const int fits = (kv->dtype == CLPA_DTYPE_F16 || kv->dtype == CLPA_DTYPE_BF16 || f32 || (fp8 && fp8_ok)) &&
                   kv->head_size % (fp8 ? 64 : f32 ? 16 : 32) == 0 && p->partition_size % 16 == 0 &&
                   mma_local_bytes(ctx, 16, kv->head_size, 4) <= ctx->info.local_mem_bytes;
  if (p->path == CLPA_DECODE_PATH_MMA) {
    clpa_status st = clpa_mma_check(ctx);
    if (st != CLPA_OK) return st;
  }
  /* the tensor cores round the query and the weights, but for f32 caches (3xTF32) */
  const int exact = p->precision != CLPA_PRECISION_F32 || f32;
  CLPA_CTX_CHECK(ctx, p->path == CLPA_DECODE_PATH_MMA && !exact, CLPA_ERR_UNSUPPORTED,
                 "path mma rounds the query to the %s cache's dtype, and precision is f32 (lanes"
                 " and rows keep it)", clpa_dtype_name(kv->dtype));
  CLPA_CTX_CHECK(ctx, p->path == CLPA_DECODE_PATH_MMA && !fits, CLPA_ERR_UNSUPPORTED,
                 "path mma needs an f32, f16 or bf16 cache (or fp8 where the device converts it:"
                 " compute capability 8.9), a head size that is a multiple of 32 (fp8: 64, f32: 16)"
                 " and partitions of multiples of 16 tokens (cache %s, head_size %d, partition_size"
                 " %d)",
                 clpa_dtype_name(kv->dtype), kv->head_size, p->partition_size);
  /* Auto takes mma where it runs natively, f32 caches up to head 128 (past it
   * their build spills): docs/decisions/0001-decode-path.md. */
  const int auto_ok = (!f32 || kv->head_size <= 128) && exact;
  c->mma = p->path == CLPA_DECODE_PATH_MMA ||
           (p->path == CLPA_DECODE_PATH_AUTO && fits && auto_ok && clpa_mma_native(ctx) == 1);
  c->rows = p->path == CLPA_DECODE_PATH_ROWS ||
            (p->path == CLPA_DECODE_PATH_AUTO && ctx->info.is_cpu);
  return CLPA_OK;
}

/* Query heads per work-group: the caller's, else the most query heads of
 * a KV head up to `cap` (the largest divisor of qpk that is). */
static int heads_upto(const clpa_decode_params *p, int qpk, int cap) {
  int g = p->heads_per_group;
  for (int cand = cap; g == 0; cand--)
    if (qpk % cand == 0) g = cand;
  return g;
}

/* The rows kernel's: every query head of a KV head, up to 16. */
static int all_heads(const clpa_decode_params *p, int qpk) { return heads_upto(p, qpk, 16); }

/* decode_rows.cl's plan: every query head of a KV head in one work-item
 * (up to 16), the tuning table's partition (or the caller's), shortened
 * while the logits would pass 64 KiB of private memory; v1 when one
 * partition holds the longest context. */
static clpa_status plan_rows(clpa_context *ctx, const clpa_decode_params *p, decode_call *c,
                             int qpk, int max_ctx) {
  const int bs = c->a.kv.block_size, g = all_heads(p, qpk);
  int part = c->partition; /* the caller's or the table's, whole blocks */
  const int cap = 16384 / g / bs * bs; /* logits: g x part floats */
  if (part > cap) part = cap;
  const int parts = ceil_div(max_ctx, part);
  c->v2 = p->variant == CLPA_DECODE_V2 || (p->variant == CLPA_DECODE_AUTO && parts > 1);
  if (!c->v2) part = round_up(max_ctx, bs); /* v1: the whole context, no larger than needed */
  CLPA_CTX_CHECK(ctx, part > 16384 / g, CLPA_ERR_UNSUPPORTED,
                 "rows path v1: a context of %d tokens x %d heads does not fit one work-item's"
                 " logits (16384; use v2)", max_ctx, g);
  c->partition = part, c->heads_per_group = g, c->logits_stride = 1;
  /* Key vectors sharing each query load: the most (4, 2, 1) whose g x kv
   * float16 accumulators take at most half the SIMD registers, 32 of 16
   * floats (AVX-512) or 16 of 8 (AVX2 and narrower); past that they spill
   * (docs/decisions/0015-decode-rows-key-vectors.md). */
  const int wide = ctx->info.native_float_width >= 16, regs = wide ? 32 : 16;
  c->key_vectors = 4;
  while (c->key_vectors > 1 && g * c->key_vectors * (wide ? 1 : 2) > regs / 2) c->key_vectors /= 2;
  c->max_parts = c->v2 ? parts : 1;
  return CLPA_OK;
}

/* The work-groups that have work at partition size `part`: `groups` a
 * sequence and partition, the partitions counted from the host's lengths
 * when the caller gave them, else every sequence at max_ctx. */
static int64_t busy_groups(const clpa_decode_params *p, int64_t groups, int part, int max_ctx) {
  int64_t parts = 0;
  if (!p->host_context_lens) parts = (int64_t)p->num_seqs * ceil_div(max_ctx, part);
  for (int32_t i = 0; p->host_context_lens && i < p->num_seqs; i++)
    parts += ceil_div(p->host_context_lens[i], part);
  return parts * groups;
}

/* The tokens the work-groups read, each counted once per work-group
 * (`groups` a sequence) that reads it. */
static int64_t total_work(const clpa_decode_params *p, int64_t groups, int max_ctx) {
  int64_t work = 0;
  if (!p->host_context_lens) work = (int64_t)p->num_seqs * max_ctx;
  for (int32_t i = 0; p->host_context_lens && i < p->num_seqs; i++) work += p->host_context_lens[i];
  return work * groups;
}

/* decode_mma.cl's: a KV head's query heads, up to 16 where the K/V tokens
 * a compute unit reads (KV heads x the sequences' tokens / compute units)
 * are 1536 or more, 8 from 192, else 4 (f32 caches at most 8): fewer heads
 * a work-group give a short call more work-groups
 * (docs/decisions/0006-decode-mma-heads.md). kv_tokens: the KV heads x the
 * sequences' tokens. */
static int mma_heads(const clpa_decode_params *p, int qpk, int64_t kv_tokens, unsigned cus, int f32) {
  const int64_t per_cu = kv_tokens / (int64_t)cus;
  return heads_upto(p, qpk, per_cu >= 1536 && !f32 ? 16 : per_cu >= 192 ? 8 : 4);
}

static double wave_fill(int64_t busy, int64_t slots) { /* the waves' mean fullness */
  return (double)busy / (double)(slots * ((busy + slots - 1) / slots));
}

/* The lanes path's partition, unless the caller fixed it: of the tuning
 * table's and its halvings (whole blocks, not below 128 tokens), those
 * that give 2 busy work-groups or more per compute unit (a batch of one
 * long context must not leave most compute units idle) and whose logits
 * fit local memory with as many heads a work-group as the KV head's
 * queries allow, up to 8 (else the shortest); of them, where the table
 * says how many of the kernel's work-groups a compute unit holds
 * (decode_resident), the longest whose waves are within 0.05 of the
 * fullest (one wave counts as full: it streams at the rate of a full
 * one), as the last wave's few work-groups take as long as a full wave's;
 * else the longest (docs/decisions/0003-decode-lanes-partition.md). */
static void lanes_partition(const clpa_context *ctx, const clpa_decode_params *p, decode_call *c,
                            int qpk, int max_ctx, unsigned cus) {
  if (p->partition_size) return;
  const int hs = c->a.kv.head_size, unit = c->a.kv.block_size;
  const int64_t groups = c->a.kv.num_kv_heads, slots = (int64_t)ctx->tuning.decode_resident * cus;
  int gmax = 8; /* the most heads a work-group the plan below can give */
  while (qpk % gmax) gmax /= 2;
  int parts[16], n = 0;
  double fill[16], best = 0.0;
  for (int part = c->partition; n < 16; part /= 2) {
    const int64_t busy = busy_groups(p, groups, part, max_ctx);
    parts[n] = part;
    fill[n] = local_bytes(hs, gmax, part, 1) > ctx->info.local_mem_bytes ? -1.0 /* fewer heads */
              : busy < 2L * cus                                           ? -1.0 /* thin */
              : !slots || busy <= slots                                   ? 1.0
                                                                          : wave_fill(busy, slots);
    if (fill[n] > best) best = fill[n];
    n++;
    if (part <= 128 || (part / 2) % unit) break;
  }
  c->partition = parts[n - 1]; /* every one thin or too long: the shortest */
  for (int i = n - 1; i >= 0; i--)
    if (fill[i] >= 0.0 && fill[i] >= best - 0.05) c->partition = parts[i];
}

/* decode_mma.cl's split, unless the caller fixed the partition: the
 * fewest partitions of the longest context (cut evenly, whole `unit`s,
 * not below 256 tokens) that give 1.5 busy work-groups per compute unit,
 * none of them longer than the whole work shared among that many (so that
 * one long context among short ones does not run on alone); one partition
 * (v1, no reduce) where the sequences alone satisfy both. Both tests are
 * monotone in the count: a binary search over it. fp8 caches want 2.5
 * busy work-groups per compute unit where that leaves partitions of 512
 * tokens or more (docs/decisions/0007-decode-mma-partition.md). `halves`:
 * the busy work-groups wanted per compute unit, times 2. */
static int mma_partition(const clpa_decode_params *p, int64_t groups, int max_ctx, unsigned cus,
                         int unit, int64_t halves) {
  const int64_t want = halves * cus / 2, work = total_work(p, groups, max_ctx);
  int lo = 1, hi = (max_ctx + 255) / 256; /* partitions of the longest context */
  if (hi < 1) hi = 1;
  while (lo < hi) { /* the fewest k in [lo, hi] whose partitions pass both tests */
    const int k = lo + (hi - lo) / 2, part = round_up(ceil_div(max_ctx, k), unit);
    if (busy_groups(p, groups, part, max_ctx) >= want && (int64_t)part * want <= work)
      hi = k;
    else
      lo = k + 1;
  }
  return round_up(ceil_div(max_ctx, lo), unit);
}

/* decode_mma.cl's warps per work-group: 4, or, where a busy work-group
 * reads fewer than 256 tokens on average (short work-groups),
 * - 2 where they overflow one wave of two-warp ones: the warps take
 *   16-token chunks in turn, so four would mostly wait in the epilogue;
 * - 8 where they are at most half the compute units (`wide`: where eight
 *   warps' local memory fits): the call is as long as a warp's chain of
 *   chunks, so shorter chains;
 * - 4 in between;
 * otherwise 4, or
 * - 2 where the busy work-groups overflow one wave of four-warp ones but
 *   fit one of two-warp ones, are mostly full (uniform lengths: a long
 *   work-group at half the warps would run on alone) and keep 40 KB of
 *   K/V chunks in flight per compute unit with two warps each;
 * - 3 where the busy work-groups take more than one wave of two-warp ones,
 *   three-warp waves end at least 5 % fuller than four-warp ones, the
 *   work-groups are mostly full and chunks are 8 KB or more (fp8 lost);
 * - 2 there where chunks are smaller (fp8, f16 head 64) and the
 *   work-groups mostly full.
 * The plan counts 12 warps of this kernel a compute unit: 3 work-groups of
 * four warps, 4 of three or 6 of two
 * (docs/decisions/0008-decode-mma-warps.md). */
#define MMA_WARPS_PER_CU 12
/* f32 caches' build (3xTF32: the queries' high parts and remainders)
 * holds 8 warps a compute unit, counted so at every head size
 * (docs/decisions/0008-decode-mma-warps.md). */
static int mma_resident(clpa_dtype kv) { return kv == CLPA_DTYPE_F32 ? 8 : MMA_WARPS_PER_CU; }

/* Whether work-groups of `warps` warps (g heads) fit the device: their
 * local memory and their size. */
static int mma_width_fits(const clpa_context *ctx, int g, int head_size, int warps) {
  return mma_local_bytes(ctx, g, head_size, warps) <= ctx->info.local_mem_bytes &&
         32 * (size_t)warps <= ctx->info.max_work_group_size;
}

static int mma_warps(int64_t busy, int64_t work, int partition, unsigned cus, int64_t chunk_bytes,
                     int wide, int resident) {
  if (busy <= 0) return 4;
  const int64_t four = (int64_t)cus * (resident / 4), three = (int64_t)cus * (resident / 3);
  const int64_t two = (int64_t)cus * (resident / 2);
  if (work < 256 * busy) return busy > two ? 2 : wide && 2 * busy <= (int64_t)cus ? 8 : 4;
  if (4 * work < 3L * partition * busy || busy <= four) return 4; /* not mostly full, one wave */
  if (busy <= two) return busy * 2 * chunk_bytes >= 40L * 1024 * cus ? 2 : 4;
  if (chunk_bytes < 8192) return 2;
  return wave_fill(busy, three) >= wave_fill(busy, four) + 0.05 ? 3 : 4;
}

/* decode_mma.cl's chunk: fp8 caches take 32 tokens a chunk (two m-tiles
 * of S^T; a lane's value rows 8 bytes instead of 4, the chunk's fixed
 * work shared by twice the tokens) where the call's busy warps are all
 * resident at once at MMA_WARPS_PER_CU a compute unit (the 32-token build
 * holds fewer warps a unit than the 16-token one); v2's partition must be
 * whole 32-token units and the block size 8 or more
 * (docs/decisions/0010-decode-mma-fp8-chunk.md). */
static int mma_chunk_for(clpa_dtype kv, int partition, int block_size, int64_t busy, int warps,
                         unsigned cus) {
  const int fits = partition % 32 == 0 && block_size % 8 == 0 &&
                   busy * warps <= (int64_t)MMA_WARPS_PER_CU * cus;
  return clpa_dtype_size(kv) == 1 && fits ? 32 : 16;
}

/* decode_mma.cl's PIPE (a warp loads its next chunk while it computes
 * one) where fp8 runs in 32-token chunks and no compute unit holds more
 * than one busy work-group: its registers hold 8 warps a unit, so those
 * work-groups take 8 warps at most (12 without)
 * (docs/decisions/0011-decode-mma-pipe.md). */
#define MMA_PIPE_WARPS 8
static int mma_pipe(int chunk, int64_t busy, unsigned cus) { return chunk == 32 && busy <= (int64_t)cus; }

/* Fewer, wider work-groups where they keep as many warps in flight: the
 * v2 partitions of decode_mma.cl each write a state and the last of a
 * row's merges them (fence, counter, L2 round trips at the end of the
 * call), while a work-group's warps merge in local memory. So, where the
 * caller fixed neither variant nor partition: of k = 1, 2, ... partitions
 * fewer than the plan's (evenly cut, whole `unit`s, none past `cap`), the first whose busy
 * work-groups are mostly full (uniform lengths), a quarter of the compute
 * units or more (with fewer a call is a few round trips long) and, at 4, 6, 8 or 12
 * warps (at most `widest`), keep 0.95 of min(widest a compute unit, the
 * plan's warps) in flight, in one wave (mma_resident's warps), with
 * 64 tokens a warp or more and their local memory and work-group size on
 * the device.
 * `widest` is 8 for 2-byte caches and 12 for fp8, which needs more bytes
 * in flight (docs/decisions/0009-decode-mma-widen.md). busy0 and work:
 * the split's busy work-groups and the tokens they read (plan's). */
static const int mma_widths[] = {4, 6, 8, 12};
static void mma_widen(const clpa_context *ctx, const clpa_decode_params *p, int64_t groups,
                      int max_ctx, unsigned cus, int unit, int g, int64_t busy0, int64_t work,
                      int cap, decode_call *c) {
  const int widest = clpa_dtype_size(c->a.kv.dtype) == 1 ? 12 : 8;
  const int64_t had = busy0 * (c->threads / 32), most = (int64_t)widest * cus;
  const double want = 0.95 * (double)(had < most ? had : most);
  const int k0 = ceil_div(max_ctx, c->partition);
  for (int k = 1; k < k0; k++) {
    const int part = round_up(ceil_div(max_ctx, k), unit);
    if (part > cap) continue; /* blind_cap */
    const int64_t busy = busy_groups(p, groups, part, max_ctx);
    if (4 * busy < (int64_t)cus || 4 * work < 3L * part * busy) continue; /* too few, not mostly full */
    for (size_t i = 0; i < sizeof mma_widths / sizeof *mma_widths; i++) {
      const int w = mma_widths[i];
      if ((double)busy * w < want) continue;
      if (w > widest || busy > (int64_t)cus * (mma_resident(c->a.kv.dtype) / w) || part < 64 * w ||
          !mma_width_fits(ctx, g, c->a.kv.head_size, w))
        break; /* wider only gets worse */
      c->partition = part, c->threads = 32 * w;
      return;
    }
  }
}

/* Without host lengths the plan counts every sequence at max_ctx, so it
 * would cut no partitions where one long context sits among short ones
 * and one work-group would walk it alone. So no partition is longer than
 * what a single sequence at max_ctx needs to give `want` busy work-groups
 * by itself, or BLIND_PARTITION tokens where that is longer (a uniform
 * batch then pays a few partitions more than it needs). The evidence:
 * docs/decisions/0013-decode-blind-partitions.md. */
#define BLIND_PARTITION 512
static int blind_cap(int max_ctx, int64_t groups, int64_t want, int unit) {
  const int64_t k = (want + groups - 1) / groups; /* partitions of the one long context */
  const int part = round_up(ceil_div(max_ctx, (int)(k < max_ctx ? k : max_ctx)), unit);
  return part > BLIND_PARTITION ? part : round_up(BLIND_PARTITION, unit);
}

clpa_status clpa_decode_plan(clpa_context *ctx, const clpa_decode_params *p, decode_call *c) {
  const uint64_t lmem = ctx->info.local_mem_bytes;
  const int hs = c->a.kv.head_size, bs = c->a.kv.block_size;
  const int qpk = p->num_heads / c->a.kv.num_kv_heads;
  clpa_status st = pick_path(ctx, p, c);
  if (st != CLPA_OK) return st;
  c->sg = clpa_lane_width(ctx, bs);
  c->threads = DECODE_THREADS;
  const unsigned cus = ctx->info.compute_units ? ctx->info.compute_units : 1;
  const int tuned = ctx->tuning.decode_partition > 0 ? ctx->tuning.decode_partition : DEFAULT_PARTITION;
  /* The caller's partition as it is (whole blocks, and on the mma path
   * whole 16-token chunks: checked); the plan's whole blocks and, on the
   * mma path, whole units (block sizes are 8, 16 or 32). */
  const int unit = c->mma && bs < mma_unit(c->a.kv.dtype) ? mma_unit(c->a.kv.dtype) : bs;
  c->partition = p->partition_size ? p->partition_size : round_up(tuned, unit);
  const int max_ctx = p->max_context_len > 0 ? p->max_context_len : 1;
  if (c->rows) return plan_rows(ctx, p, c, qpk, max_ctx);
  if (c->mma) {
    const int64_t tokens = total_work(p, 1, max_ctx); /* the sequences' */
    const int g = mma_heads(p, qpk, tokens * c->a.kv.num_kv_heads, cus,
                            c->a.kv.dtype == CLPA_DTYPE_F32);
    const int64_t groups = p->num_heads / g;
    const int cap = p->host_context_lens ? CLPA_MAX_CONTEXT_LEN
                                         : blind_cap(max_ctx, groups, 3L * cus / 2, unit);
    if (!p->partition_size) {
      c->partition = mma_partition(p, groups, max_ctx, cus, unit, 3);
      if (clpa_dtype_size(c->a.kv.dtype) == 1) { /* fp8: more in flight, unless too short */
        const int more = mma_partition(p, groups, max_ctx, cus, unit, 5);
        if (more >= 512) c->partition = more;
      }
      if (c->partition > cap) c->partition = cap;
    }
    const int64_t busy = busy_groups(p, groups, c->partition, max_ctx);
    /* K/V bytes of 16 tokens (mma_warps's measure, whatever the kernel's chunk) */
    const int64_t chunk_bytes = 2L * 16 * hs * (int64_t)clpa_dtype_size(c->a.kv.dtype);
    const int64_t work = tokens * groups;
    const int wide = mma_width_fits(ctx, g, hs, 8);
    c->threads = 32 * mma_warps(busy, work, c->partition, cus, chunk_bytes, wide,
                                mma_resident(c->a.kv.dtype));
    if (!p->partition_size && p->variant == CLPA_DECODE_AUTO)
      mma_widen(ctx, p, groups, max_ctx, cus, unit, g, busy, work, cap, c);
    const int parts = ceil_div(max_ctx, c->partition);
    c->v2 = p->variant == CLPA_DECODE_V2 || (p->variant == CLPA_DECODE_AUTO && parts > 1);
    const int64_t busy_now = busy_groups(p, groups, c->partition, max_ctx);
    c->chunk = mma_chunk_for(c->a.kv.dtype, c->v2 ? c->partition : 0, bs, busy_now,
                             c->threads / 32, cus);
    c->pipe = mma_pipe(c->chunk, busy_now, cus);
    if (c->pipe && c->threads > 32 * MMA_PIPE_WARPS) c->threads = 32 * MMA_PIPE_WARPS;
    c->heads_per_group = g;
    c->logits_stride = 1; /* no logits in local memory */
    c->max_parts = c->v2 ? parts : 1;
    return CLPA_OK;
  }
  /* Work-groups serve at most a KV head's query heads: num_kv_heads groups
   * per sequence and partition at the least. */
  lanes_partition(ctx, p, c, qpk, max_ctx, cus);
  const int v1_stride = round_up(max_ctx, bs);
  const int parts = ceil_div(max_ctx, c->partition);

  if (p->variant == CLPA_DECODE_V1)
    c->v2 = 0;
  else if (p->variant == CLPA_DECODE_V2)
    c->v2 = 1;
  else
    c->v2 = parts > 1 || local_bytes(hs, 1, v1_stride, 0) > lmem;
  const int stride = c->v2 ? c->partition : v1_stride;
  int g = p->heads_per_group;
  if (g == 0) {
    g = 1;
    for (int cand = 8; cand >= 2; cand /= 2) {
      int64_t groups = (int64_t)p->num_seqs * (p->num_heads / cand) * (c->v2 ? parts : 1);
      if (qpk % cand == 0 && local_bytes(hs, cand, stride, c->v2) <= lmem && groups >= 2L * cus) {
        g = cand;
        break;
      }
    }
  }
  c->heads_per_group = g;
  c->logits_stride = stride;
  c->max_parts = c->v2 ? parts : 1;
  CLPA_CTX_CHECK(ctx, local_bytes(hs, g, stride, c->v2) > lmem, CLPA_ERR_UNSUPPORTED,
                 "%s with %d heads per group needs %zu bytes of local memory; the device has %llu"
                 " (use v2 or a smaller partition_size)", c->v2 ? "v2" : "v1", g,
                 local_bytes(hs, g, stride, c->v2), (unsigned long long)lmem);
  return CLPA_OK;
}

