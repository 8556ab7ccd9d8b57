/*
 * prefill_paths.c — which prefill kernel a call takes: the path (rows,
 * tiles or mma) and its tile shape, forced or the tuning table's or the
 * device's, refused with a reason where the cache or device cannot take
 * it; then the build options that follow (threads, stages, register cap,
 * value chunks, the sparse and mma builds). prefill.c fills a plan with
 * these; the kernels' files are cl/prefill_*.cl.
 */
#include <math.h>

#include "decode_planner.h"
#include "prefill_paths.h"

#define PREFILL_THREADS 128 /* the tiles path's work-group */

static int is_tile_size(int32_t v) { return v == 8 || v == 16 || v == 32 || v == 64; }

/* cl/prefill_tiles.cl's clpa_prefill_paged, a tile of rows x keys: the
 * scores a work-item (SPT there, at least 1), and work-items a row group
 * (CG: keys over TN, the keys a work-item scores, with TM = min(SPT, 8)
 * rows a work-item). */
static int tile_scores(int rows, int keys) { return rows * keys / PREFILL_THREADS; }
static int tile_cols(int rows, int keys) {
  const int spt = tile_scores(rows, keys), tm = spt < 8 ? spt : 8;
  return keys / (spt / tm);
}

/* Its local memory with value chunks of vk keys (the kernel's
 * declarations): chunks of 32 head dims of queries and keys, transposed,
 * rows padded by 4 floats, sharing their space with the value chunk; the
 * probabilities; the row reductions (rows padded by 1); per row the
 * running max, rescale, head, position and slope; the next kept tile; two
 * tiles' block offsets (64-bit, at most 2 x 8: blocks hold 8 tokens or
 * more). */
static size_t tile_local_bytes(int head_size, int rows, int keys, int vk) {
  const size_t qk = 32 * (size_t)(rows + 4) + 32 * (size_t)(keys + 4);
  const size_t v = (size_t)vk * (size_t)(head_size + 4), un = qk > v ? qk : v;
  return sizeof(float) * ((un + 3) / 4 * 4 + (size_t)keys * (rows + 4) +
                          (size_t)rows * (tile_cols(rows, keys) + 1) + 5 * (size_t)rows + 1) +
         sizeof(int64_t) * 2 * (keys >= 8 ? (size_t)keys / 8 : 1) + 256; /* slack */
}

/* The value chunk: the most keys (32, 16, 8 or 4, at most the tile's)
 * whose tile fits lmem bytes; 0 if none. */
static int tile_vkeys(uint64_t lmem, int head_size, int rows, int keys) {
  for (int vk = 32; vk >= 4; vk /= 2)
    if (vk <= keys && tile_local_bytes(head_size, rows, keys, vk) <= lmem) return vk;
  return 0;
}

/* The block sizes each kernel takes (clpa_attn_validate lets powers of two
 * from 1 to 256 through): prefill_mma.cl copies a tile's BK = 32 or 64
 * keys as whole blocks of 8 tokens or more, and was measured wrong at 64
 * (blocks of 8 to 32: the default tile's keys hold whole ones);
 * prefill_tiles.cl reads values 4 tokens at a time; the rows kernel: host
 * clpa_rows_takes_block. */
static int mma_takes_block(int bs) { return bs >= 8 && bs <= 32; }
static int tiles_take_block(int bs) { return bs % 4 == 0; }

/* The tensor-core path applies: an f16 or bf16 cache, or an fp8 one
 * where the device converts it (converted to f16 as tiles are copied;
 * host/decode_planner.c's clpa_planner_mma_fp8, decode's rule), in any
 * layout, a head size that is a multiple of 16. */
static int mma_applies(const clpa_context *ctx, const clpa_kv_layout *kv) {
  clpa_device_facts dev;
  clpa_device_facts_of(ctx, &dev);
  const int fp8 = clpa_dtype_size(kv->dtype) == 1;
  return kv->dtype != CLPA_DTYPE_F32 && (!fp8 || clpa_planner_mma_fp8(&dev)) &&
         kv->head_size % 16 == 0 && mma_takes_block(kv->block_size);
}

/* cl/prefill_mma.cl's clpa_prefill_mma, with `stages` tiles in flight: keys
 * and values in f16/bf16 (HND and NHD: a token's row padded by 8
 * elements), with 2 row tiles a warp the queries, and mma.cl's scratch
 * when emulated (2 work-items a row); on NVIDIA with the queries nothing
 * else. */
static size_t mma_local_bytes(const clpa_kv_layout *kv, int rows, int keys, int stages,
                              int emulated, int mt) {
  const size_t row = (size_t)kv->head_size + (kv->kind == CLPA_KV_LAYOUT_SPLIT_KEY ? 0 : 8);
  const size_t tile = 2 * 2 * (size_t)keys * row;
  const size_t queries = mt == 2 ? 2 * (size_t)rows * kv->head_size : 0;
  const size_t threads = 2 * (size_t)rows / mt;
  const size_t scratch = mt == 2 && !emulated ? 0 : 4 * (emulated ? 6 * threads : 1) + 64;
  return stages * tile + queries + scratch;
}

/* The local memory the mma kernels may declare: with 32 rows a warp on
 * NVIDIA the tuning row's, where it is more than the device reports;
 * emulated, NVIDIA's 48 KiB, so that tests elsewhere make NVIDIA's
 * choices (with the kernel's NVIDIA layout: mma_local_bytes's emulated 0). */
static uint64_t mma_lmem(const clpa_context *ctx, int mt) {
  if (ctx->lanes != CLPA_LANES_NV_PTX) return 48 * 1024;
  const uint64_t t = mt == 2 ? ctx->prefill_tuning.mma_local_bytes : 0;
  return t > ctx->info.local_mem_bytes ? t : ctx->info.local_mem_bytes;
}

/* Two tiles in flight (the next one's copies overlap the whole tile's
 * products) where local memory holds them, else one. */
static int mma_stages(const clpa_context *ctx, const clpa_kv_layout *kv, int rows, int keys,
                      int mt) {
  return mma_local_bytes(kv, rows, keys, 2, 0, mt) <= mma_lmem(ctx, mt) ? 2 : 1;
}

/* The key tiles of `keys` that the call's work-groups of `rows` rows walk
 * on average (each up to its last token's causal bound, from its first
 * token's window), over the sequences from `from` on (those before are
 * decode's). */
static double mean_key_tiles(const clpa_prefill_params *p, int32_t from, int qpk, int rows,
                             int keys) {
  double tiles = 0.0, groups = 0.0;
  const double per = (double)rows / qpk; /* tokens a work-group */
  for (int32_t s = from; s < p->num_seqs; s++) {
    const double n = p->cu_seqlens_q[s + 1] - p->cu_seqlens_q[s], c = p->cached_lens[s];
    const int64_t w_end = ((int64_t)n * qpk + rows - 1) / rows;
    for (int64_t w = 0; w < w_end; w++) {
      const double hi = c + (p->causal ? fmin((double)(w + 1) * per, n) : n);
      const double lo =
          p->sliding_window > 0 ? fmax(0.0, c + (double)w * per - p->sliding_window + 1) : 0.0;
      tiles += ceil((hi - lo) / keys), groups += 1.0;
    }
  }
  return groups > 0.0 ? tiles / groups : 0.0;
}

/* 64-key tiles for a call with 32 rows a warp, where the tuning row's
 * rule says: heads of 128 (64 ran slower, 96 even) in f16 or bf16 tiles
 * (fp8 ran slower), 128 rows a work-group, two stages of them and the
 * queries in local memory, and work-groups that walk enough 64-key tiles
 * on average (docs/decisions/0046-prefill-mma-local-and-keys.md). */
static int mma_keys64(const clpa_context *ctx, const clpa_prefill_params *p,
                      const clpa_kv_layout *kv, int qpk, int rows, int32_t from) {
  const int from_tiles = ctx->prefill_tuning.mma_keys64_from;
  return from_tiles > 0 && kv->head_size == 128 && clpa_dtype_size(kv->dtype) == 2 &&
         rows == 128 && mma_local_bytes(kv, rows, 64, 2, 0, 2) <= mma_lmem(ctx, 2) &&
         mean_key_tiles(p, from, qpk, rows, 64) >= from_tiles;
}

/* Query rows a warp on the mma path, as 16-row tiles: forced
 * (rows_per_warp), else 2 where the tuning row's rule says: heads of 64,
 * 112 or 128 (80 and 96 ran slower), and work-groups that walk enough key tiles
 * on average to earn back the queries' trip through local memory with
 * half the warps (docs/decisions/0041-prefill-mma-warp-rows.md); else 1.
 * Refused where forced and not possible: a block mask, heads past 128
 * (the output accumulators alone would take the registers), tiles and
 * queries past local memory. With 2, *keys (the table's 32, not the
 * caller's) becomes 64 where the row's rule says so (mma_keys64). */
clpa_status clpa_prefill_mma_mt(clpa_context *ctx, const clpa_prefill_params *p,
                                const clpa_kv_layout *kv, int rows, int *keys, int32_t from,
                                int *mt) {
  const int fits = mma_local_bytes(kv, rows, *keys, 1, 0, 2) <= mma_lmem(ctx, 2);
  const int can = !p->block_mask && kv->head_size <= 128 && fits;
  CLPA_CTX_CHECK(ctx, p->rows_per_warp == 32 && !can, CLPA_ERR_UNSUPPORTED,
                 "rows_per_warp = 32 takes no block_mask, a head_size up to 128 and %d x %d"
                 " queries plus a tile of %d keys in %llu bytes of local memory (block_mask %s,"
                 " head_size %d)", rows, kv->head_size, *keys,
                 (unsigned long long)mma_lmem(ctx, 2), p->block_mask ? "given" : "NULL",
                 kv->head_size);
  const int tiles = ctx->prefill_tuning.mma_warp_rows_from;
  const int measured = kv->head_size == 64 || kv->head_size == 112 || kv->head_size == 128;
  const int qpk = p->num_heads / kv->num_kv_heads;
  *mt = p->rows_per_warp == 32 || (!p->rows_per_warp && can && measured && tiles > 0 &&
                                   mean_key_tiles(p, from, qpk, rows, *keys) >= tiles)
            ? 2
            : 1;
  if (*mt == 2 && !p->keys_per_tile && *keys == 32 && mma_keys64(ctx, p, kv, qpk, rows, from))
    *keys = 64;
  return CLPA_OK;
}

/* The mma path's register cap on NVIDIA (program.c writes it into the
 * PTX): 128 where the head's accumulators and queries (3 head_size / 4
 * registers) leave room, so that 4 work-groups of 64 rows (or 2 of 128)
 * fit an SM, where ptxas alone fits 2; larger heads keep ptxas's choice
 * (docs/decisions/0019-prefill-mma-register-cap.md). With 32 rows a warp
 * (twice the accumulators), 168 for heads up to 64, so that 3 work-groups
 * of 4 warps fit an SM, else ptxas's choice
 * (docs/decisions/0041-prefill-mma-warp-rows.md). */
static int32_t mma_maxnreg(const clpa_context *ctx, int head_size, int mt) {
  if (mt == 2) return ctx->lanes == CLPA_LANES_NV_PTX && head_size <= 64 ? 168 : 0;
  return ctx->lanes == CLPA_LANES_NV_PTX && head_size <= 128 ? 128 : 0;
}

/* The mma path's shape: rows the caller's, else the table's, else 64 (4
 * warps of 16, 2 work-items a row); keys per tile the caller's, else the
 * tuning table's, else 32 (refused where they do not fit local memory). */
static clpa_status pick_mma(clpa_context *ctx, const clpa_prefill_params *p,
                            const clpa_kv_layout *kv, int *rows, int *keys) {
  CLPA_CTX_CHECK(ctx, !mma_takes_block(kv->block_size), CLPA_ERR_UNSUPPORTED,
                 "path mma takes blocks of 8, 16 or 32 tokens, and block_size is %d (tiles or"
                 " rows take it; path auto picks one of them)", kv->block_size);
  CLPA_CTX_CHECK(ctx, !mma_applies(ctx, kv), CLPA_ERR_UNSUPPORTED,
                 "path mma needs an f16, bf16 or fp8 cache (fp8 where the device converts it:"
                 " compute capability 8.9) and a head size that is a multiple of 16 (cache %s,"
                 " head_size %d)", clpa_dtype_name(kv->dtype), kv->head_size);
  CLPA_CTX_CHECK(ctx, p->precision == CLPA_PRECISION_F32, CLPA_ERR_UNSUPPORTED,
                 "path mma rounds the query to %s (a %s cache's operands), and precision is f32"
                 " (tiles and rows keep it)", kv->dtype == CLPA_DTYPE_BF16 ? "bf16" : "f16",
                 clpa_dtype_name(kv->dtype));
  CLPA_CTX_CHECK(ctx, p->rows_per_group != 0 && p->rows_per_group != 64 &&
                          p->rows_per_group != 128,
                 CLPA_ERR_INVALID_ARG, "rows_per_group = %d (the mma path: 0 = auto, 64 or 128)",
                 p->rows_per_group);
  CLPA_CTX_CHECK(ctx, p->keys_per_tile != 0 && p->keys_per_tile != 32 && p->keys_per_tile != 64,
                 CLPA_ERR_INVALID_ARG, "keys_per_tile = %d (the mma path: 0 = auto, 32 or 64)",
                 p->keys_per_tile);
  clpa_status st = clpa_mma_check(ctx);
  if (st != CLPA_OK) return st;
  const int emulated = ctx->lanes != CLPA_LANES_NV_PTX;
  const uint64_t lmem = ctx->info.local_mem_bytes;
  const int table = p->path == CLPA_PREFILL_AUTO && ctx->tuning.prefill_path == CLPA_PREFILL_MMA &&
                    (ctx->tuning.prefill_keys == 32 || ctx->tuning.prefill_keys == 64);
  const int table_rows =
      table && (ctx->tuning.prefill_rows == 64 || ctx->tuning.prefill_rows == 128);
  *rows = p->rows_per_group ? p->rows_per_group : table_rows ? ctx->tuning.prefill_rows : 64;
  /* 32 keys by default (docs/decisions/0020-prefill-mma-tile.md) */
  *keys = p->keys_per_tile ? p->keys_per_tile : table ? ctx->tuning.prefill_keys : 32;
  CLPA_CTX_CHECK(ctx, mma_local_bytes(kv, *rows, *keys, 1, emulated, 1) > lmem,
                 CLPA_ERR_UNSUPPORTED, "the mma path's tile of %d keys x head_size %d does not fit"
                 " %llu bytes of local memory", *keys, kv->head_size, (unsigned long long)lmem);
  return CLPA_OK;
}

/* Path and shape: forced, or the tuning table's, or rows (4 a
 * work-item) on CPUs, mma on NVIDIA where it applies, else the first of
 * candidate tiles below whose smallest value chunk fits local memory. */
clpa_status clpa_prefill_pick_path(clpa_context *ctx, const clpa_prefill_params *p,
                                   const clpa_kv_layout *kv, int *path, int *rows, int *keys) {
  const int head_size = kv->head_size;
  const uint64_t lmem = ctx->info.local_mem_bytes;
  CLPA_CTX_CHECK(ctx, (unsigned)p->path > CLPA_PREFILL_MMA, CLPA_ERR_INVALID_ARG,
                 "path = %d (0 auto, 1 tiles, 2 rows, 3 mma)", (int)p->path);
  CLPA_CTX_CHECK(ctx, (unsigned)p->precision > CLPA_PRECISION_F32, CLPA_ERR_INVALID_ARG,
                 "precision = %d (0 auto, 1 f32)", (int)p->precision);
  const clpa_tuning *tu = &ctx->tuning;
  const int mma_auto = clpa_mma_native(ctx) == 1 && mma_applies(ctx, kv) &&
                       p->precision != CLPA_PRECISION_F32;
  *path = p->path               ? (int)p->path
          : tu->prefill_path    ? tu->prefill_path
          : ctx->info.is_cpu    ? CLPA_PREFILL_ROWS
          : mma_auto            ? CLPA_PREFILL_MMA
                                : CLPA_PREFILL_TILES;
  const int forced = p->path != CLPA_PREFILL_AUTO; /* a forced path ignores the table's shape */
  const int bs = kv->block_size;
  const int rows_ok = clpa_rows_takes_block(bs, head_size, kv->dtype);
  if (*path == CLPA_PREFILL_MMA && !forced && !mma_auto) *path = CLPA_PREFILL_TILES;
  /* auto: where the table's or the device's path cannot take the block
   * size, the portable one that can (tiles, else rows) */
  if (!forced && *path == CLPA_PREFILL_TILES && !tiles_take_block(bs) && rows_ok)
    *path = CLPA_PREFILL_ROWS;
  if (!forced && *path == CLPA_PREFILL_ROWS && !rows_ok && tiles_take_block(bs))
    *path = CLPA_PREFILL_TILES;
  CLPA_CTX_CHECK(ctx, *path == CLPA_PREFILL_TILES && !tiles_take_block(bs), CLPA_ERR_UNSUPPORTED,
                 "path tiles takes blocks of multiples of 4 tokens, and block_size is %d (%s)", bs,
                 forced ? "path auto picks a path that takes it"
                        : "and path rows does not take it with this head size and dtype");
  CLPA_CTX_CHECK(ctx, *path == CLPA_PREFILL_ROWS && !rows_ok, CLPA_ERR_UNSUPPORTED,
                 "path rows does not take block_size %d with head_size %d and a %s cache (blocks of"
                 " fewer than 8 tokens need a head of multiples of 16, and one token or as many as"
                 " the dtype has bytes; path auto picks a path that takes it)", bs, head_size,
                 clpa_dtype_name(kv->dtype));
  if (*path == CLPA_PREFILL_MMA) return pick_mma(ctx, p, kv, rows, keys);
  if (*path == CLPA_PREFILL_ROWS) {
    const int32_t r = p->rows_per_group ? p->rows_per_group
                      : !forced && tu->prefill_path == CLPA_PREFILL_ROWS ? tu->prefill_rows
                                                                          : 0;
    CLPA_CTX_CHECK(ctx, r != 0 && r != 1 && r != 2 && r != 4 && r != 8 && r != 16,
                   CLPA_ERR_INVALID_ARG, "rows_per_group = %d (the rows path: 0 = auto, 1, 2, 4,"
                   " 8 or 16)", r);
    *rows = r ? r : 4, *keys = 16; /* keys: unused by the rows path */
    return CLPA_OK;
  }
  CLPA_CTX_CHECK(ctx, (p->rows_per_group && !is_tile_size(p->rows_per_group)) ||
                          (p->keys_per_tile && !is_tile_size(p->keys_per_tile)),
                 CLPA_ERR_INVALID_ARG,
                 "rows_per_group = %d, keys_per_tile = %d (each 0 = auto, or 8, 16, 32, 64)",
                 p->rows_per_group, p->keys_per_tile);
  /* 64 x 64 first (docs/decisions/0022-prefill-tiles-shape.md) */
  static const int cand[][2] = {{64, 64}, {64, 32}, {32, 64}, {32, 32}, {64, 16},
                                {16, 64}, {32, 16}, {16, 32}, {16, 16}, {8, 16}};
  const int table_shape = !forced && tu->prefill_path == CLPA_PREFILL_TILES;
  const int32_t want_r = p->rows_per_group ? p->rows_per_group : table_shape ? tu->prefill_rows : 0;
  const int32_t want_k = p->keys_per_tile ? p->keys_per_tile : table_shape ? tu->prefill_keys : 0;
  *rows = *keys = 0;
  for (size_t i = 0; i < sizeof cand / sizeof *cand && !*rows; i++) {
    const int r = want_r ? want_r : cand[i][0];
    const int k = want_k ? want_k : cand[i][1];
    if (tile_scores(r, k) < 1 || !tile_vkeys(lmem, head_size, r, k)) continue;
    *rows = r, *keys = k;
  }
  CLPA_CTX_CHECK(ctx, !*rows, CLPA_ERR_UNSUPPORTED,
                 "no prefill tile of rows_per_group = %d, keys_per_tile = %d fits head_size %d in"
                 " %llu bytes of local memory (rows x keys must be at least %d)",
                 p->rows_per_group, p->keys_per_tile, head_size, (unsigned long long)lmem,
                 PREFILL_THREADS);
  return CLPA_OK;
}

/* The build a call takes: 0 without a block mask (or on the rows path,
 * which has one build); with one, 1, or 2 on mma where each mask block
 * holds whole work-groups (mask_block a multiple of rows: with heads apart
 * a work-group then reads one mask row; cl/prefill_mma.cl's one_row;
 * docs/decisions/0021-prefill-mma-sparse-scan.md). */
static int sparse_build(const clpa_prefill_params *p, int path, int rows) {
  if (path == CLPA_PREFILL_ROWS || !p->block_mask) return 0;
  return path == CLPA_PREFILL_MMA && p->mask_block % rows == 0 ? 2 : 1;
}

clpa_prefill_spec clpa_prefill_spec_for(const clpa_context *ctx, const clpa_prefill_params *p,
                                        const clpa_kv_layout *kv, int path, int rows, int keys,
                                        int mt) {
  const int mma = path == CLPA_PREFILL_MMA;
  const clpa_prefill_spec spec = {
      .head_size = kv->head_size,
      .block_size = kv->block_size,
      .kv_dtype = (int32_t)kv->dtype,
      .io_dtype = (int32_t)p->q_dtype,
      .num_threads = mma ? 2 * rows / mt : PREFILL_THREADS,
      .rows = rows,
      .keys = keys,
      .path = path,
      .stages = mma ? mma_stages(ctx, kv, rows, keys, mt) : 1,
      .sparse = sparse_build(p, path, rows),
      .maxnreg = mma ? mma_maxnreg(ctx, kv->head_size, mt) : 0,
      .vkeys = path == CLPA_PREFILL_TILES
                   ? tile_vkeys(ctx->info.local_mem_bytes, kv->head_size, rows, keys)
                   : 0,
      .kv_layout = (int32_t)kv->kind,
      .page_table = (int32_t)p->page_table,
      .mt = mt,
      .items = 0};
  return spec;
}
