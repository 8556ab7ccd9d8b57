/*
 * decode_planner.c — decode's plan (decode_planner.h): which kernel, v1 or
 * v2, how long a partition, how many query heads and warps a work-group,
 * from the shape, the device's facts, its tuning row and, where the caller
 * gives them, the host's context lengths. Each rule names its decision
 * record (docs/decisions/): the measurements behind it. The device facts
 * the rules count with (warps a compute unit holds, register caps, the
 * blind partition) are the tuning row's, so a device measured otherwise
 * gets its own row, not a new constant here.
 */
#include <stdint.h>
#include <stdlib.h>

#include "decode_planner.h"
#include "last_error.h"

#define THREADS CLPA_PLANNER_LANES_THREADS
/* decode_rows.cl's logits a work-item, G heads x PARTITION floats in private memory: 64 KiB */
#define ROWS_LOGITS 16384

/* The lanes kernel's local memory with g heads and logits_stride floats
 * of logits a head. */
static size_t local_bytes(int head_size, int g, int logits_stride, int v2) {
  /* v2: the merge's sums (THREADS), per-head max and sum, flag */
  const size_t merge = v2 ? sizeof(float) * (THREADS + 2 * (size_t)g) + sizeof(int) : 0;
  return sizeof(float) * ((size_t)2 * g * head_size + THREADS + (size_t)g * logits_stride) +
         merge + 256; /* 256: compiler slack */
}

/* ceil(a / b) and a rounded up to a multiple of b, for a, b in (0,
 * CLPA_MAX_CONTEXT_LEN]: the sum a + b - 1 can pass INT32_MAX, so in 64 bits. */
static int ceil_div(int a, int b) { return (int)(((int64_t)a + b - 1) / b); }
static int round_up(int a, int b) { return ceil_div(a, b) * b; }

clpa_status clpa_planner_mma_check(const clpa_device_facts *dev, char *err) {
  CLPA_CHECK(err, dev->mma_native == 0, CLPA_ERR_UNSUPPORTED,
             "path mma needs compute capability 8.0 on NVIDIA ('%s' has %d.%d)", dev->name,
             dev->compute_capability / 10, dev->compute_capability % 10);
  return CLPA_OK;
}

int clpa_planner_mma_fp8(const clpa_device_facts *dev) {
  return dev->mma_native < 0 || dev->compute_capability >= 89;
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
static size_t mma_local_bytes(const clpa_device_facts *dev, int g, int head_size, int warps) {
  const size_t threads = 32 * (size_t)warps;
  const size_t floats = (size_t)mma_slices(g, head_size, warps) * g * head_size + 2 * 16 * (size_t)warps +
                        32 + 2 * threads + 1;
  return sizeof(float) * floats + 4 * (dev->mma_native >= 0 ? 1 : 6 * threads) + 256;
}

/* decode_mma.cl takes the context in chunks of 16 tokens; fp8 caches in
 * chunks of 32 where that pays (mma_chunk_for), so the partitions the
 * plan cuts for them are whole 32-token units. */
static int mma_unit(clpa_dtype kv) { return clpa_dtype_size(kv) == 1 ? 32 : 16; }

/* The block sizes each kernel takes (clpa_attn_validate lets powers of two
 * from 1 to 256 through). decode_mma.cl: whole runs of 4 value tokens a
 * lane (its RUN; fp8's 32-token chunks want 8, mma_chunk_for), or a table
 * entry a token (its TOKB) where a token's key and value are 16-byte rows:
 * blocks of 1 (any layout: split-key's is then HND's) or 2 in HND and NHD,
 * of f16, bf16 or fp8 (docs/decisions/0030-mma-layouts-and-token-blocks.md). */
static int mma_takes_block(const clpa_decode_shape *s) {
  const int bs = s->block_size;
  return bs % 4 == 0 || (s->kv_dtype != CLPA_DTYPE_F32 &&
                         (bs == 1 || (bs == 2 && s->kv_layout != CLPA_KV_LAYOUT_SPLIT_KEY)));
}

int clpa_rows_takes_block(int block_size, int head_size, clpa_dtype kv) {
  return block_size >= 8 ||
         (head_size % 16 == 0 && (block_size == 1 || block_size >= (int)clpa_dtype_size(kv)));
}

/* decode.cl (vLLM's shapes): emulated lanes are one a key token, so a
 * block fills a lane group that the work-group's THREADS must hold; real
 * lane groups of sg lanes give each token TGS = sg / bs lanes, whose
 * vectors of VEC_SIZE elements (16 bytes a token's TGS lanes, a power of
 * two) must tile the head, and a block's value row of VB = min(x, bs)
 * token vectors must fit the lane group. Real lane groups keep blocks of 8
 * to 32 tokens for now: past them a token group walks several tokens of a
 * block (NUM_TOKENS_PER_TG > 1), below them a block spreads its token over
 * 8 lanes or more, shapes emulated lanes (sg = bs: one token a lane) never
 * run, so no test on PoCL has checked them. */
static int lanes_takes_block(const clpa_decode_shape *s, const clpa_device_facts *dev) {
  const int bs = s->block_size, sg = dev->lane_width;
  if (!sg) return bs <= THREADS;
  if (bs < 8 || bs > 32) return 0;
  const int bytes = (int)clpa_dtype_size(s->kv_dtype), x = 16 / bytes;
  const int tgs = sg / bs > 1 ? sg / bs : 1;
  int vec = 16;
  while (vec > 1 && vec > 16 / (tgs * bytes)) vec /= 2;
  return THREADS % sg == 0 && s->head_size % (tgs * vec) == 0 && bs / (x < bs ? x : bs) <= sg;
}

/* The tensor-core kernel or the lanes kernel: forced, or mma on NVIDIA
 * for f16/bf16 caches with head sizes of multiples of 32, f32 caches
 * (3xTF32) with multiples of 16 up to 128, fp8 caches with multiples of
 * 64, and partitions of whole 16-token chunks. */
static clpa_status pick_path(const clpa_decode_shape *s, const clpa_device_facts *dev,
                             clpa_decode_decision *out, char *err) {
  CLPA_CHECK(err, (unsigned)s->path > CLPA_PLANNER_ROWS, CLPA_ERR_INVALID_ARG,
             "path = %d (0 auto, 1 lanes, 2 mma, 3 rows)", (int)s->path);
  CLPA_CHECK(err, (unsigned)s->precision > CLPA_PLANNER_PRECISION_F32, CLPA_ERR_INVALID_ARG,
             "precision = %d (0 auto, 1 f32)", (int)s->precision);
  const clpa_dtype kv = s->kv_dtype;
  const int fp8 = clpa_dtype_size(kv) == 1;
  const int fp8_ok = clpa_planner_mma_fp8(dev);
  const int f32 = kv == CLPA_DTYPE_F32; /* 3xTF32 */
  /* f32 in HND and NHD: a lane's 16-byte value pieces are rows of two
   * m-tiles (decode_mma_chunk.cl's out_dim), so heads of multiples of 32 */
  const int f32_head = s->kv_layout == CLPA_KV_LAYOUT_SPLIT_KEY ? 16 : 32;
  const int fits = (kv == CLPA_DTYPE_F16 || kv == CLPA_DTYPE_BF16 || f32 || (fp8 && fp8_ok)) &&
                   s->head_size % (fp8 ? 64 : f32 ? f32_head : 32) == 0 &&
                   s->partition_size % 16 == 0 &&
                   mma_local_bytes(dev, 16, s->head_size, 4) <= dev->local_mem_bytes;
  if (s->path == CLPA_PLANNER_MMA) {
    clpa_status st = clpa_planner_mma_check(dev, err);
    if (st != CLPA_OK) return st;
  }
  const int bs = s->block_size, lanes_ok = lanes_takes_block(s, dev);
  const int rows_ok = clpa_rows_takes_block(bs, s->head_size, kv);
  CLPA_CHECK(err, s->path == CLPA_PLANNER_MMA && !mma_takes_block(s), CLPA_ERR_UNSUPPORTED,
             "path mma takes blocks of multiples of 4 tokens, or of 1 (and 2 in HND and NHD) with"
             " f16, bf16 or fp8 caches, and block_size is %d with a %s cache in the %s layout"
             " (path auto picks a path that takes it)", bs, clpa_dtype_name(kv),
             clpa_kv_layout_kind_name(s->kv_layout));
  CLPA_CHECK(err, s->path == CLPA_PLANNER_ROWS && !rows_ok, CLPA_ERR_UNSUPPORTED,
             "path rows does not take block_size %d with head_size %d and a %s cache (blocks of"
             " fewer than 8 tokens need a head of multiples of 16, and one token or as many as"
             " the dtype has bytes; path auto picks a path that takes it)", bs, s->head_size,
             clpa_dtype_name(kv));
  CLPA_CHECK(err, s->path == CLPA_PLANNER_LANES && !lanes_ok, CLPA_ERR_UNSUPPORTED,
             "path lanes does not take block_size %d with head_size %d, a %s cache and %d-lane"
             " groups (%s; path auto picks a path that takes it)", bs, s->head_size,
             clpa_dtype_name(kv), dev->lane_width ? dev->lane_width : bs,
             dev->lane_width ? "real lane groups: blocks of 8 to 32 tokens"
                             : "emulated lanes: one a token, a block within the work-group");
  /* the tensor cores round the query and the weights, but for f32 caches (3xTF32) */
  const int exact = s->precision != CLPA_PLANNER_PRECISION_F32 || f32;
  CLPA_CHECK(err, s->path == CLPA_PLANNER_MMA && !exact, CLPA_ERR_UNSUPPORTED,
             "path mma rounds the query to the %s cache's dtype, and precision is f32 (lanes"
             " and rows keep it)", clpa_dtype_name(kv));
  CLPA_CHECK(err, s->path == CLPA_PLANNER_MMA && f32 && f32_head == 32 && s->head_size % 16 == 0 &&
                      s->head_size % 32 != 0, CLPA_ERR_UNSUPPORTED,
             "path mma takes f32 caches in the %s layout with head sizes of multiples of 32, and"
             " head_size is %d (lanes and rows take it; path auto picks one of them)",
             clpa_kv_layout_kind_name(s->kv_layout), s->head_size);
  CLPA_CHECK(err, s->path == CLPA_PLANNER_MMA && !fits, CLPA_ERR_UNSUPPORTED,
             "path mma needs an f32, f16 or bf16 cache (or fp8 where the device converts it:"
             " compute capability 8.9), a head size that is a multiple of 32 (fp8: 64, f32: 16)"
             " and partitions of multiples of 16 tokens (cache %s, head_size %d, partition_size"
             " %d)",
             clpa_dtype_name(kv), s->head_size, s->partition_size);
  /* Auto takes mma where it runs natively, f32 caches up to head 128 (past it
   * their build spills): docs/decisions/0001-decode-path.md. */
  const int auto_ok = (!f32 || s->head_size <= 128) && exact && mma_takes_block(s);
  const int mma = s->path == CLPA_PLANNER_MMA ||
                  (s->path == CLPA_PLANNER_AUTO && fits && auto_ok && dev->mma_native == 1);
  /* auto: rows on CPUs, and where the lanes kernel cannot take the block size */
  const int rows = s->path == CLPA_PLANNER_ROWS ||
                   (s->path == CLPA_PLANNER_AUTO && rows_ok &&
                    (dev->is_cpu || !lanes_ok));
  CLPA_CHECK(err, s->path == CLPA_PLANNER_AUTO && !mma && !rows && !lanes_ok,
             CLPA_ERR_UNSUPPORTED,
             "no decode path takes block_size %d with head_size %d and a %s cache on this device"
             " (lanes: %d-lane groups; rows: see path rows)", bs, s->head_size,
             clpa_dtype_name(kv), dev->lane_width ? dev->lane_width : bs);
  out->path = mma ? CLPA_PLANNER_MMA : rows ? CLPA_PLANNER_ROWS : CLPA_PLANNER_LANES;
  return CLPA_OK;
}

/* Query heads per work-group: the caller's, else the most query heads of
 * a KV head up to `cap` (the largest divisor of qpk that is). */
static int heads_upto(const clpa_decode_shape *s, int qpk, int cap) {
  int g = s->heads_per_group;
  for (int cand = cap; g == 0; cand--)
    if (qpk % cand == 0) g = cand;
  return g;
}

/* decode_rows.cl's plan: every query head of a KV head in one work-item
 * (up to 16), the tuning table's partition (or the caller's), shortened
 * while the logits would pass 64 KiB of private memory; v1 when one
 * partition holds the longest context. */
static clpa_status plan_rows(const clpa_decode_shape *s, const clpa_device_facts *dev,
                             clpa_decode_decision *c, int qpk, int max_ctx, char *err) {
  const int bs = s->block_size, g = heads_upto(s, qpk, 16);
  int part = c->partition; /* the caller's or the table's, whole blocks */
  const int cap = ROWS_LOGITS / g / bs * bs; /* logits: g x part floats */
  if (part > cap) part = cap;
  const int parts = ceil_div(max_ctx, part);
  c->v2 = s->variant == CLPA_PLANNER_V2 || (s->variant == 0 && parts > 1);
  if (!c->v2) part = round_up(max_ctx, bs); /* v1: the whole context, no larger than needed */
  CLPA_CHECK(err, part > ROWS_LOGITS / g, CLPA_ERR_UNSUPPORTED,
             "rows path v1: a context of %d tokens x %d heads does not fit one work-item's"
             " logits (%d; use v2)", max_ctx, g, ROWS_LOGITS);
  c->partition = part, c->heads_per_group = g, c->logits_stride = 1;
  /* Key vectors sharing each query load: the most (4, 2, 1) whose g x kv
   * float16 accumulators take at most half the SIMD registers, 32 of 16
   * floats (AVX-512) or 16 of 8 (AVX2 and narrower); past that they spill
   * (docs/decisions/0015-decode-rows-key-vectors.md). */
  const int wide = dev->native_float_width >= 16, regs = wide ? 32 : 16;
  c->key_vectors = 4;
  while (c->key_vectors > 1 && g * c->key_vectors * (wide ? 1 : 2) > regs / 2) c->key_vectors /= 2;
  c->max_parts = c->v2 ? parts : 1;
  return CLPA_OK;
}

/* The work-groups that have work at partition size `part`: `groups` a
 * sequence and partition, the partitions counted from the host's lengths
 * when the caller gave them, else every sequence at max_ctx. */
static int64_t busy_groups(const clpa_decode_shape *s, int64_t groups, int part, int max_ctx) {
  int64_t parts = 0;
  if (!s->host_context_lens) parts = (int64_t)s->num_seqs * ceil_div(max_ctx, part);
  for (int32_t i = 0; s->host_context_lens && i < s->num_seqs; i++)
    parts += ceil_div(s->host_context_lens[i], part);
  return parts * groups;
}

/* The tokens the work-groups read, each counted once per work-group
 * (`groups` a sequence) that reads it. */
static int64_t total_work(const clpa_decode_shape *s, int64_t groups, int max_ctx) {
  int64_t work = 0;
  if (!s->host_context_lens) work = (int64_t)s->num_seqs * max_ctx;
  for (int32_t i = 0; s->host_context_lens && i < s->num_seqs; i++) work += s->host_context_lens[i];
  return work * groups;
}

/* decode_mma.cl's: a KV head's query heads, up to 16 where the K/V tokens
 * a compute unit reads (KV heads x the sequences' tokens / compute units)
 * are 1536 or more, 8 from 192, else 4 (f32 caches at most 8): fewer heads
 * a work-group give a short call more work-groups
 * (docs/decisions/0006-decode-mma-heads.md). kv_tokens: the KV heads x the
 * sequences' tokens. */
static int mma_heads(const clpa_decode_shape *s, int qpk, int64_t kv_tokens, unsigned cus, int f32) {
  const int64_t per_cu = kv_tokens / (int64_t)cus;
  return heads_upto(s, qpk, per_cu >= 1536 && !f32 ? 16 : per_cu >= 192 ? 8 : 4);
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
 * (resident), the longest whose waves are within 0.05 of the
 * fullest (one wave counts as full: it streams at the rate of a full
 * one), as the last wave's few work-groups take as long as a full wave's;
 * else the longest (docs/decisions/0003-decode-lanes-partition.md). */
static void lanes_partition(const clpa_decode_shape *s, const clpa_device_facts *dev,
                            const clpa_decode_tuning *t, clpa_decode_decision *c, int qpk,
                            int max_ctx, unsigned cus) {
  if (s->partition_size) return;
  const int hs = s->head_size, unit = s->block_size;
  const int64_t groups = s->num_kv_heads, slots = (int64_t)t->resident * cus;
  int gmax = 8; /* the most heads a work-group the plan below can give */
  while (qpk % gmax) gmax /= 2;
  int parts[16], n = 0;
  double fill[16], best = 0.0;
  for (int part = c->partition; n < 16; part /= 2) {
    const int64_t busy = busy_groups(s, groups, part, max_ctx);
    parts[n] = part;
    fill[n] = local_bytes(hs, gmax, part, 1) > dev->local_mem_bytes ? -1.0 /* fewer heads */
              : busy < 2L * cus                                      ? -1.0 /* thin */
              : !slots || busy <= slots                              ? 1.0
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
static int mma_partition(const clpa_decode_shape *s, int64_t groups, int max_ctx, unsigned cus,
                         int unit, int64_t halves) {
  const int64_t want = halves * cus / 2, work = total_work(s, groups, max_ctx);
  int lo = 1, hi = (max_ctx + 255) / 256; /* partitions of the longest context */
  if (hi < 1) hi = 1;
  while (lo < hi) { /* the fewest k in [lo, hi] whose partitions pass both tests */
    const int k = lo + (hi - lo) / 2, part = round_up(ceil_div(max_ctx, k), unit);
    if (busy_groups(s, groups, part, max_ctx) >= want && (int64_t)part * want <= work)
      hi = k;
    else
      lo = k + 1;
  }
  return round_up(ceil_div(max_ctx, lo), unit);
}

/* decode_mma.cl's warps a compute unit: the tuning row's, and for f32
 * caches (3xTF32: the queries' high parts and remainders) its f32 build's,
 * counted so at every head size (docs/decisions/0008-decode-mma-warps.md). */
static int mma_resident(const clpa_decode_tuning *t, clpa_dtype kv) {
  return kv == CLPA_DTYPE_F32 ? t->mma_f32_warps_per_cu : t->mma_warps_per_cu;
}

/* Whether work-groups of `warps` warps (g heads) fit the device: their
 * local memory and their size. */
static int mma_width_fits(const clpa_device_facts *dev, int g, int head_size, int warps) {
  return mma_local_bytes(dev, g, head_size, warps) <= dev->local_mem_bytes &&
         32 * (size_t)warps <= dev->max_work_group_size;
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
 * The waves count `resident` warps of this kernel a compute unit (the
 * tuning row's mma_warps_per_cu, whose value and measurement are in
 * docs/decisions/0008-decode-mma-warps.md). */
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
 * resident at once at the tuning row's warps a compute unit (the 32-token
 * build holds fewer warps a unit than the 16-token one); v2's partition
 * must be whole 32-token units and the block size 8 or more
 * (docs/decisions/0010-decode-mma-fp8-chunk.md). */
static int mma_chunk_for(const clpa_decode_tuning *t, clpa_dtype kv, int partition, int block_size,
                         int64_t busy, int warps, unsigned cus) {
  const int fits = partition % 32 == 0 && block_size % 8 == 0 &&
                   busy * warps <= (int64_t)t->mma_warps_per_cu * cus;
  return clpa_dtype_size(kv) == 1 && fits ? 32 : 16;
}

/* decode_mma.cl's PIPE (a warp loads its next chunk while it computes
 * one) where fp8 runs in 32-token chunks and no compute unit holds more
 * than one busy work-group: its registers hold fewer warps a unit (the
 * tuning row's mma_pipe_warps against mma_warps_per_cu without), so
 * those work-groups take that many at most
 * (docs/decisions/0011-decode-mma-pipe.md). */
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
static void mma_widen(const clpa_decode_shape *s, const clpa_device_facts *dev,
                      const clpa_decode_tuning *t, int64_t groups, int max_ctx, unsigned cus,
                      int unit, int g, int64_t busy0, int64_t work, int cap,
                      clpa_decode_decision *c) {
  const int widest = clpa_dtype_size(s->kv_dtype) == 1 ? 12 : 8;
  const int64_t had = busy0 * (c->threads / 32), most = (int64_t)widest * cus;
  const double want = 0.95 * (double)(had < most ? had : most);
  const int k0 = ceil_div(max_ctx, c->partition);
  for (int k = 1; k < k0; k++) {
    const int part = round_up(ceil_div(max_ctx, k), unit);
    if (part > cap) continue; /* blind_cap */
    const int64_t busy = busy_groups(s, groups, part, max_ctx);
    if (4 * busy < (int64_t)cus || 4 * work < 3L * part * busy) continue; /* too few, not mostly full */
    for (size_t i = 0; i < sizeof mma_widths / sizeof *mma_widths; i++) {
      const int w = mma_widths[i];
      if ((double)busy * w < want) continue;
      if (w > widest || busy > (int64_t)cus * (mma_resident(t, s->kv_dtype) / w) || part < 64 * w ||
          !mma_width_fits(dev, g, s->head_size, w))
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
 * by itself, or the tuning row's blind_partition tokens where that is
 * longer (a uniform batch then pays a few partitions more than it needs).
 * The evidence: docs/decisions/0013-decode-blind-partitions.md. */
static int blind_cap(const clpa_decode_tuning *t, int max_ctx, int64_t groups, int64_t want,
                     int unit) {
  const int64_t k = (want + groups - 1) / groups; /* partitions of the one long context */
  const int part = round_up(ceil_div(max_ctx, (int)(k < max_ctx ? k : max_ctx)), unit);
  return part > t->blind_partition ? part : round_up(t->blind_partition, unit);
}

/* Row i's partitions as decode_mma.cl counts them: its chunks from the
 * window's first (mma_extent_of), d->partition / d->chunk a partition. */
static int row_parts(const clpa_decode_shape *s, const clpa_decode_decision *d, int i) {
  const int L = s->host_context_lens[i], w = s->sliding_window;
  const int lo = w > 0 && L > w ? L - w : 0, t0 = lo / d->chunk * d->chunk;
  const int pch = d->partition / d->chunk, total = ceil_div(L - t0, d->chunk);
  const int n = total > 0 ? ceil_div(total, pch) : 0;
  return n > 1 ? n : 1;
}

/* A list of the busy (sequence, partition) pairs in place of the grid's
 * rectangle (every row at the longest row's partitions) where the caller
 * asks for one, or the tuning row's mma_work_list says the rectangle is
 * mostly idle: there each idle work-group still costs its launch and a
 * length read, and a long row's last partitions start only after the
 * others' (docs/decisions/0013-decode-blind-partitions.md). Host lengths only: the list
 * is made from them. */
static void mma_work_list(const clpa_decode_shape *s, const clpa_decode_tuning *t,
                          clpa_decode_decision *c) {
  c->work_pairs = 0;
  if (!c->v2 || !s->host_context_lens || s->work_list < 0 ||
      (s->work_list == 0 && t->mma_work_list <= 0))
    return;
  int64_t pairs = 0;
  for (int32_t i = 0; i < s->num_seqs; i++) pairs += row_parts(s, c, i);
  if (pairs > CLPA_PLANNER_WORK_LIST_MAX) return; /* the rectangle then */
  if (s->work_list > 0 || pairs * t->mma_work_list <= (int64_t)s->num_seqs * c->max_parts)
    c->work_pairs = pairs;
}

/* (partitions, row) pairs: the most partitions first, then the lower row */
static int by_parts(const void *a, const void *b) {
  const int32_t *x = a, *y = b;
  return x[0] != y[0] ? (x[0] < y[0] ? 1 : -1) : (x[1] > y[1]) - (x[1] < y[1]);
}

void clpa_decode_work_list(const clpa_decode_shape *s, const clpa_decode_decision *d,
                           int32_t *out) {
  /* out's first 2 num_seqs words (of 4 work_pairs >= 4 num_seqs) hold the rows' (partitions,
   * row) keys, sorted; the entries are written from the last key back, so that none lands on
   * a key not yet read (key j's entries start at word 4 x its predecessors' partitions >= 4 j) */
  int64_t at = 0;
  for (int32_t i = 0; i < s->num_seqs; i++) {
    out[2 * i] = row_parts(s, d, i), out[2 * i + 1] = i;
    at += out[2 * i];
  }
  qsort(out, (size_t)s->num_seqs, 2 * sizeof *out, by_parts);
  for (int32_t j = s->num_seqs - 1; j >= 0; j--) {
    const int32_t n = out[2 * j], row = out[2 * j + 1];
    at -= n;
    for (int32_t p = n - 1; p >= 0; p--) {
      int32_t *e = out + 4 * (at + p);
      e[0] = row, e[1] = p, e[2] = n, e[3] = 0;
    }
  }
}

/* The tensor-core kernel's plan: heads, split, warps, then wider
 * work-groups in place of partitions, the chunk and PIPE. */
static void plan_mma(const clpa_decode_shape *s, const clpa_device_facts *dev,
                     const clpa_decode_tuning *t, clpa_decode_decision *c, int qpk, int max_ctx,
                     unsigned cus, int unit) {
  const int hs = s->head_size;
  const int64_t tokens = total_work(s, 1, max_ctx); /* the sequences' */
  const int g = mma_heads(s, qpk, tokens * s->num_kv_heads, cus, s->kv_dtype == CLPA_DTYPE_F32);
  const int64_t groups = s->num_heads / g;
  /* With host lengths nothing caps the split: no partition passes the longest context. */
  const int cap = s->host_context_lens ? INT32_MAX : blind_cap(t, max_ctx, groups, 3L * cus / 2, unit);
  if (!s->partition_size) {
    c->partition = mma_partition(s, groups, max_ctx, cus, unit, 3);
    if (clpa_dtype_size(s->kv_dtype) == 1) { /* fp8: more in flight, unless too short */
      const int more = mma_partition(s, groups, max_ctx, cus, unit, 5);
      if (more >= 512) c->partition = more;
    }
    if (c->partition > cap) c->partition = cap;
  }
  const int64_t busy = busy_groups(s, groups, c->partition, max_ctx);
  /* K/V bytes of 16 tokens (mma_warps's measure, whatever the kernel's chunk) */
  const int64_t chunk_bytes = 2L * 16 * hs * (int64_t)clpa_dtype_size(s->kv_dtype);
  const int64_t work = tokens * groups;
  const int wide = mma_width_fits(dev, g, hs, 8);
  c->threads = 32 * mma_warps(busy, work, c->partition, cus, chunk_bytes, wide,
                              mma_resident(t, s->kv_dtype));
  if (!s->partition_size && s->variant == 0)
    mma_widen(s, dev, t, groups, max_ctx, cus, unit, g, busy, work, cap, c);
  const int parts = ceil_div(max_ctx, c->partition);
  c->v2 = s->variant == CLPA_PLANNER_V2 || (s->variant == 0 && parts > 1);
  const int64_t busy_now = busy_groups(s, groups, c->partition, max_ctx);
  c->chunk = mma_chunk_for(t, s->kv_dtype, c->v2 ? c->partition : 0, s->block_size, busy_now,
                           c->threads / 32, cus);
  c->pipe = mma_pipe(c->chunk, busy_now, cus);
  if (c->pipe && c->threads > 32 * t->mma_pipe_warps) {
    /* fewer warps may take more local memory (more output slices): no PIPE where it does not fit */
    if (mma_width_fits(dev, g, hs, t->mma_pipe_warps))
      c->threads = 32 * t->mma_pipe_warps;
    else
      c->pipe = 0;
  }
  c->heads_per_group = g;
  c->logits_stride = 1; /* no logits in local memory */
  c->max_parts = c->v2 ? parts : 1;
  c->local_bytes = mma_local_bytes(dev, g, hs, c->threads / 32);
  mma_work_list(s, t, c);
}

/* plan_mma, then where the plan takes a list and chose partitions longer than the tuning
 * row's mma_list_partition: the plan again with its partition forced to the longest even cut
 * within it, if that plan keeps a list. Without the idle work-groups of the rectangle,
 * shorter partitions balance a mixed batch at little cost; measured on f16 caches, so
 * 2-byte caches only (docs/decisions/0013-decode-blind-partitions.md). */
static void plan_mma_listed(const clpa_decode_shape *s, const clpa_device_facts *dev,
                            const clpa_decode_tuning *t, clpa_decode_decision *c, int qpk,
                            int max_ctx, unsigned cus, int unit) {
  const clpa_decode_decision before = *c;
  plan_mma(s, dev, t, c, qpk, max_ctx, cus, unit);
  const int cap = t->mma_list_partition;
  if (c->work_pairs == 0 || s->partition_size || cap <= 0 || c->partition <= cap ||
      clpa_dtype_size(s->kv_dtype) != 2)
    return;
  clpa_decode_shape cut = *s;
  cut.partition_size = round_up(ceil_div(max_ctx, ceil_div(max_ctx, cap)), unit);
  if (cut.partition_size >= c->partition) return; /* a unit past the cap: nothing shorter */
  clpa_decode_decision d = before;
  d.partition = cut.partition_size;
  plan_mma(&cut, dev, t, &d, qpk, max_ctx, cus, unit);
  if (d.work_pairs > 0) *c = d;
}

/* Without host lengths, in place of the blind rectangle (v2, its partitions the plan's
 * own), a list that a kernel makes from the device's lengths before each run: the rows'
 * chunks summed, a share of max(the tuning row's mma_device_list tokens, their work over
 * `want` busy work-groups) a partition, each row cut into ceil(chunks / share) partitions (one
 * at least), void entries after them. So no row's partitions pass ceil(want / groups) nor the
 * longest context's at the floor (max_parts), and the entries num_seqs + ceil(want / groups),
 * whatever the lengths; 4 warps, as the host plans of such batches take
 * (docs/decisions/0013-decode-blind-partitions.md). Only where the work-group kernels merge
 * the partitions: reduce.cl counts a row's at a fixed length. */
static void plan_mma_device_list(const clpa_decode_shape *s, const clpa_device_facts *dev,
                                 const clpa_decode_tuning *t, clpa_decode_decision *c,
                                 int max_ctx, unsigned cus, int unit) {
  /* the rule: where the tuning row has a floor, and more than one row (one has no others to
   * be balanced against, and the list's launch costs a few microseconds) */
  const int on = s->work_list > 0 ||
                 (s->work_list == 0 && t->mma_device_list > 0 && s->num_seqs > 1);
  if (s->host_context_lens || !on || !c->v2 || s->partition_size ||
      !dev->merge_in_launch)
    return;
  const int g = c->heads_per_group, warps = 4;
  const int64_t groups = s->num_heads / g, want = 3L * cus / 2 > 0 ? 3L * cus / 2 : 1;
  const int64_t shares = (want + groups - 1) / groups; /* a row's partitions at most */
  const int floor = round_up(t->mma_device_list > 0 ? t->mma_device_list : 256, unit);
  if (s->num_seqs + shares > CLPA_PLANNER_WORK_LIST_MAX ||
      !mma_width_fits(dev, g, s->head_size, warps))
    return;
  /* a row's chunks are at most the longest context's: no more partitions than at the floor */
  const int64_t mp = shares < ceil_div(max_ctx, floor) ? shares : ceil_div(max_ctx, floor);
  c->partition = floor;
  c->threads = 32 * warps;
  c->max_parts = (int)mp;
  c->chunk = mma_chunk_for(t, s->kv_dtype, c->partition, s->block_size, want, warps, cus);
  c->pipe = 0;
  c->local_bytes = mma_local_bytes(dev, g, s->head_size, warps);
  c->work_pairs = 0;
  c->list_entries = (int32_t)(s->num_seqs + shares);
  c->list_want = (int32_t)want;
}

/* The lanes kernel's plan: the partition, v1 or v2, then 8, 4 or 2 query
 * heads a work-group where local memory allows and 2 work-groups a compute
 * unit remain; work-groups serve at most a KV head's query heads, so
 * num_kv_heads groups per sequence and partition at the least. */
static clpa_status plan_lanes(const clpa_decode_shape *s, const clpa_device_facts *dev,
                              const clpa_decode_tuning *t, clpa_decode_decision *c, int qpk,
                              int max_ctx, unsigned cus, char *err) {
  const uint64_t lmem = dev->local_mem_bytes;
  const int hs = s->head_size, bs = s->block_size;
  lanes_partition(s, dev, t, c, qpk, max_ctx, cus);
  const int v1_stride = round_up(max_ctx, bs);
  const int parts = ceil_div(max_ctx, c->partition);
  if (s->variant == CLPA_PLANNER_V1)
    c->v2 = 0;
  else if (s->variant == CLPA_PLANNER_V2)
    c->v2 = 1;
  else
    c->v2 = parts > 1 || local_bytes(hs, 1, v1_stride, 0) > lmem;
  const int stride = c->v2 ? c->partition : v1_stride;
  int g = s->heads_per_group;
  if (g == 0) {
    g = 1;
    for (int cand = 8; cand >= 2; cand /= 2) {
      int64_t groups = (int64_t)s->num_seqs * (s->num_heads / cand) * (c->v2 ? parts : 1);
      if (qpk % cand == 0 && local_bytes(hs, cand, stride, c->v2) <= lmem && groups >= 2L * cus) {
        g = cand;
        break;
      }
    }
  }
  c->heads_per_group = g;
  c->logits_stride = stride;
  c->max_parts = c->v2 ? parts : 1;
  c->local_bytes = local_bytes(hs, g, stride, c->v2);
  c->maxnreg = s->kv_dtype == CLPA_DTYPE_F32 && g <= 4 ? t->lanes_f32_maxnreg : 0;
  CLPA_CHECK(err, c->local_bytes > lmem, CLPA_ERR_UNSUPPORTED,
             "%s with %d heads per group needs %zu bytes of local memory; the device has %llu"
             " (use v2 or a smaller partition_size)", c->v2 ? "v2" : "v1", g, c->local_bytes,
             (unsigned long long)lmem);
  return CLPA_OK;
}

clpa_status clpa_decode_planner(const clpa_decode_shape *s, const clpa_device_facts *dev,
                                const clpa_decode_tuning *t, clpa_decode_decision *out, char *err) {
  clpa_decode_decision c = {0};
  const int bs = s->block_size, qpk = s->num_heads / s->num_kv_heads;
  clpa_status st = pick_path(s, dev, &c, err);
  if (st != CLPA_OK) return st;
  c.sg = dev->lane_width ? dev->lane_width : bs;
  c.threads = THREADS;
  const unsigned cus = dev->compute_units ? dev->compute_units : 1;
  /* The caller's partition as it is (whole blocks, and on the mma path
   * whole 16-token chunks: checked); the plan's whole blocks and, on the
   * mma path, whole units (the larger of a chunk and a block: both powers
   * of two, so whole blocks and whole chunks). */
  const int mma = c.path == CLPA_PLANNER_MMA;
  const int unit = mma && bs < mma_unit(s->kv_dtype) ? mma_unit(s->kv_dtype) : bs;
  c.partition = s->partition_size ? s->partition_size : round_up(t->partition, unit);
  const int max_ctx = s->max_context_len > 0 ? s->max_context_len : 1;
  if (c.path == CLPA_PLANNER_ROWS)
    st = plan_rows(s, dev, &c, qpk, max_ctx, err);
  else if (mma) {
    plan_mma_listed(s, dev, t, &c, qpk, max_ctx, cus, unit);
    plan_mma_device_list(s, dev, t, &c, max_ctx, cus, unit);
  }
  else
    st = plan_lanes(s, dev, t, &c, qpk, max_ctx, cus, err);
  if (st == CLPA_OK) *out = c;
  return st;
}
