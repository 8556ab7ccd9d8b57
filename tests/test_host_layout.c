/*
 * The paged layout (clpa_layout.h): clpa_kv_key_index and
 * clpa_kv_value_index, the one host formula every reference and test
 * addresses the cache through, against the layout itself — a walk over
 * the nested dimensions in memory order, which counts elements without
 * any index arithmetic:
 *   split-key  key   [num_blocks][num_kv_heads][head_size / x][block_size][x]
 *              value [num_blocks][num_kv_heads][head_size][block_size]
 *   HND        both  [num_blocks][num_kv_heads][block_size][head_size]
 *   NHD        both  [num_blocks][block_size][num_kv_heads][head_size]
 * for every kind and dtype (x 4, 8, 16) and several shapes, block sizes 1
 * to 256, blocks packed or a block_pitch apart (each block's walk starts
 * there); then the strides and sizes, and every refused layout.
 */
#include <string.h>

#include "clpa_kvman.h"
#include "clpa_layout.h"
#include "tap.h"

/* Where the walk of a layout's blocks ends: the bytes each buffer must hold. */
static int spans(const clpa_kv_layout *l) {
  const uint64_t es = clpa_dtype_size(l->dtype);
  return ((uint64_t)(l->num_blocks - 1) * l->block_stride) * es + l->block_bytes == l->cache_bytes;
}

/* HND and NHD: keys and values alike, a token's head_size elements in a row. */
static int walk_token_major(const clpa_kv_layout *l) {
  const int nhd = l->kind == CLPA_KV_LAYOUT_NHD;
  const int32_t n1 = nhd ? l->block_size : l->num_kv_heads, n2 = nhd ? l->num_kv_heads : l->block_size;
  uint64_t i = 0;
  for (int32_t b = 0; b < l->num_blocks; b++, i = (uint64_t)b * l->block_stride)
    for (int32_t u = 0; u < n1; u++)
      for (int32_t w = 0; w < n2; w++)
        for (int32_t d = 0; d < l->head_size; d++, i++) {
          const int32_t h = nhd ? w : u, t = nhd ? u : w;
          if (clpa_kv_key_index(l, b, h, t, d) != i || clpa_kv_value_index(l, b, h, t, d) != i)
            return 0;
        }
  return spans(l);
}

static int walk_matches(const clpa_kv_layout *l) {
  if (l->kind != CLPA_KV_LAYOUT_SPLIT_KEY) return walk_token_major(l);
  uint64_t i = 0;
  for (int32_t b = 0; b < l->num_blocks; b++, i = (uint64_t)b * l->block_stride)
    for (int32_t h = 0; h < l->num_kv_heads; h++)
      for (int32_t r = 0; r < l->head_size / l->x; r++)
        for (int32_t t = 0; t < l->block_size; t++)
          for (int32_t e = 0; e < l->x; e++, i++)
            if (clpa_kv_key_index(l, b, h, t, r * l->x + e) != i) return 0;
  i = 0;
  for (int32_t b = 0; b < l->num_blocks; b++, i = (uint64_t)b * l->block_stride)
    for (int32_t h = 0; h < l->num_kv_heads; h++)
      for (int32_t d = 0; d < l->head_size; d++)
        for (int32_t t = 0; t < l->block_size; t++, i++)
          if (clpa_kv_value_index(l, b, h, t, d) != i) return 0;
  return spans(l);
}

int main(void) {
  rng_seed_from_env();
  static const int32_t heads[] = {32, 64, 80, 128, 256};
  for (int kind = 0; kind < CLPA_KV_LAYOUT_COUNT_; kind++)
    for (int dt = 0; dt < CLPA_DTYPE_COUNT_; dt++)
      for (int k = 0; k < 5; k++) {
        const int32_t hs = heads[k], bs = 1 << (rng_below(9)), nkv = 1 + (int32_t)rng_below(4);
        const int32_t nb = 1 + (int32_t)rng_below(5);
        const char *kn = clpa_kv_layout_kind_name((clpa_kv_layout_kind)kind);
        clpa_kv_layout l;
        clpa_status st =
            clpa_kv_layout_init_kind(&l, (clpa_kv_layout_kind)kind, (clpa_dtype)dt, nb, bs, nkv, hs);
        if (hs % (int32_t)(16 / clpa_dtype_size((clpa_dtype)dt))) {
          ok(st == CLPA_ERR_INVALID_ARG && strstr(clpa_last_error(), "multiple of x"),
             "%s %s head %d refused: %s", kn, clpa_dtype_name((clpa_dtype)dt), hs,
             clpa_last_error());
          continue;
        }
        if (st == CLPA_OK && rng_below(2)) { /* blocks further apart than their size */
          l.block_pitch = l.block_stride + (uint64_t)l.x * rng_below(5);
          st = clpa_kv_layout_check(&l, &l);
        }
        ok(st == CLPA_OK && (int)l.kind == kind && walk_matches(&l),
           "%s %s: %d blocks, %d heads, head %d, block %d, pitch %llu: the index functions walk"
           " memory in layout order", kn, clpa_dtype_name((clpa_dtype)dt), nb, nkv, hs, bs,
           (unsigned long long)l.block_pitch);
      }

  clpa_kv_layout l, c;
  ok(clpa_kv_layout_init(&l, CLPA_DTYPE_F16, 1000, 16, 8, 128) == CLPA_OK && l.x == 8 &&
         l.head_stride == 2048 && l.block_stride == 16384 && l.block_bytes == 32768 &&
         l.cache_bytes == 32768000ull,
     "f16, 8 heads x 128, block 16: strides 2048 / 16384, 32 KiB a block");
  ok(l.kind == CLPA_KV_LAYOUT_SPLIT_KEY && l.key_token_stride == 8 && l.value_token_stride == 1,
     "clpa_kv_layout_init gives the split-key layout: token strides x and 1");
  ok(clpa_kv_layout_init_kind(&l, CLPA_KV_LAYOUT_HND, CLPA_DTYPE_F16, 1000, 16, 8, 128) ==
             CLPA_OK &&
         l.head_stride == 2048 && l.block_stride == 16384 && l.key_token_stride == 128 &&
         l.value_token_stride == 128 && l.cache_bytes == 32768000ull,
     "HND: head stride 2048, block stride 16384, token stride 128");
  ok(clpa_kv_layout_init_kind(&l, CLPA_KV_LAYOUT_NHD, CLPA_DTYPE_F16, 1000, 16, 8, 128) ==
             CLPA_OK &&
         l.head_stride == 128 && l.block_stride == 16384 && l.key_token_stride == 1024 &&
         l.value_token_stride == 1024 && l.cache_bytes == 32768000ull,
     "NHD: head stride 128, block stride 16384, token stride 1024");
  ok(clpa_kv_layout_init_kind(&l, CLPA_KV_LAYOUT_NHD, CLPA_DTYPE_F16, 1000, 16, 8, 128) == CLPA_OK &&
         (l.block_pitch = 2 * l.block_stride, clpa_kv_layout_check(&l, &l)) == CLPA_OK &&
         l.block_stride == 32768 && l.block_bytes == 32768 &&
         l.cache_bytes == (999ull * 32768 + 16384) * 2 && l.key_token_stride == 1024 &&
         clpa_kv_value_index(&l, 3, 1, 2, 5) == 3 * 32768 + 2 * 1024 + 128 + 5,
     "NHD with K and V interleaved (FlashInfer's [pages, 2, ...]): pitch 32768, 999 pitches and"
     " a block to hold");
  c = l;
  l.block_pitch = 16384 + 4;
  ok(clpa_kv_layout_check(&l, &c) == CLPA_ERR_INVALID_ARG && strstr(clpa_last_error(), "block_pitch = 16388") &&
         strstr(clpa_last_error(), "multiple of x = 8"),
     "a pitch that is no multiple of x is refused: %s", clpa_last_error());
  l.block_pitch = 16384 - 8;
  ok(clpa_kv_layout_check(&l, &c) == CLPA_ERR_INVALID_ARG && strstr(clpa_last_error(), "block_pitch = 16376") &&
         strstr(clpa_last_error(), "at least a block's 16384 elements"),
     "a pitch shorter than a block is refused: %s", clpa_last_error());
  l.block_pitch = UINT64_MAX / 2 / 8 * 8;
  ok(clpa_kv_layout_check(&l, &c) == CLPA_ERR_INVALID_ARG && strstr(clpa_last_error(), "64 bits"),
     "a pitch whose span passes 64 bits is refused: %s", clpa_last_error());
  clpa_kv_layout hand;
  memset(&hand, 0, sizeof hand);
  hand.dtype = CLPA_DTYPE_FP8_E5M2, hand.num_blocks = 3, hand.block_size = 32;
  hand.num_kv_heads = 2, hand.head_size = 64;
  ok(clpa_kv_layout_check(&hand, &c) == CLPA_OK && c.x == 16 && c.block_bytes == 4096 &&
         c.cache_bytes == 3 * 4096 && c.kind == CLPA_KV_LAYOUT_SPLIT_KEY,
     "a layout filled by hand gets its derived fields from clpa_kv_layout_check (kind 0:"
     " split-key)");
  ok(clpa_kv_layout_check(&hand, &hand) == CLPA_OK && hand.x == 16, "in place too");
  hand.kind = CLPA_KV_LAYOUT_NHD;
  ok(clpa_kv_layout_check(&hand, &hand) == CLPA_OK && hand.head_stride == 64 &&
         hand.key_token_stride == 128,
     "kind set after _init, then clpa_kv_layout_check: NHD strides");
  hand.kind = (clpa_kv_layout_kind)3;
  c = hand;
  ok(clpa_kv_layout_check(&hand, &c) == CLPA_ERR_INVALID_ARG &&
         strstr(clpa_last_error(), "layout->kind = 3") && memcmp(&c, &hand, sizeof c) == 0,
     "an unknown kind is refused, naming the field: %s", clpa_last_error());
  hand.kind = CLPA_KV_LAYOUT_HND, hand.reserved32 = 1;
  ok(clpa_kv_layout_check(&hand, &c) == CLPA_ERR_INVALID_ARG &&
         strstr(clpa_last_error(), "layout->reserved32"),
     "a nonzero reserved32 is refused: %s", clpa_last_error());
  ok(clpa_kv_layout_init_kind(&l, (clpa_kv_layout_kind)-1, CLPA_DTYPE_F16, 1, 16, 1, 64) ==
             CLPA_ERR_INVALID_ARG &&
         strstr(clpa_last_error(), "kind = -1"),
     "clpa_kv_layout_init_kind refuses kind -1: %s", clpa_last_error());
  ok(clpa_kv_layout_init_kind(&l, CLPA_KV_LAYOUT_NHD, CLPA_DTYPE_F32, 1, 1 << 16, 1 << 8, 1 << 7) ==
             CLPA_ERR_INVALID_ARG &&
         strstr(clpa_last_error(), "32 bits") &&
         clpa_kv_layout_init_kind(&l, CLPA_KV_LAYOUT_SPLIT_KEY, CLPA_DTYPE_F32, 1, 1 << 16,
                                  1 << 8, 1 << 7) == CLPA_OK,
     "a block of 2^31 elements: refused in NHD (%s), taken in split-key",
     clpa_kv_layout_init_kind(&l, CLPA_KV_LAYOUT_NHD, CLPA_DTYPE_F32, 1, 1 << 16, 1 << 8, 1 << 7)
         ? clpa_last_error() : "");
  /* regress_split_key_head_tile_32_bits: the split-key kernels index
   * within a (block, head) tile in 32 bits (kv.cl's key_index,
   * value_index), so a tile of head_size x block_size past 2^31 - 1
   * elements is refused; it was taken, and reshape_and_cache's index
   * wrapped to before the tile. */
  ok(clpa_kv_layout_init(&l, CLPA_DTYPE_FP8_E4M3, 1, (1 << 27) + 1, 1, 16) ==
             CLPA_ERR_INVALID_ARG &&
         strstr(clpa_last_error(), "32 bits") && strstr(clpa_last_error(), "split_key") &&
         clpa_kv_layout_init(&l, CLPA_DTYPE_FP8_E4M3, 1, (1 << 27) - 1, 1, 16) == CLPA_OK,
     "a split-key head tile of 2^31 + 16 elements refused, of 2^31 - 16 taken: %s",
     clpa_kv_layout_init(&l, CLPA_DTYPE_FP8_E4M3, 1, (1 << 27) + 1, 1, 16) ? clpa_last_error()
                                                                            : "taken");
  ok(strcmp(clpa_kv_layout_kind_name(CLPA_KV_LAYOUT_SPLIT_KEY), "split_key") == 0 &&
         strcmp(clpa_kv_layout_kind_name(CLPA_KV_LAYOUT_HND), "hnd") == 0 &&
         strcmp(clpa_kv_layout_kind_name(CLPA_KV_LAYOUT_NHD), "nhd") == 0 &&
         strcmp(clpa_kv_layout_kind_name((clpa_kv_layout_kind)9), "?") == 0,
     "the kinds' names");

  /* Refusals leave *out untouched. */
  struct {
    clpa_dtype dt;
    int32_t nb, bs, nkv, hs;
    const char *needle;
  } bad[] = {{(clpa_dtype)5, 1, 16, 1, 64, "dtype"},
             {(clpa_dtype)-1, 1, 16, 1, 64, "dtype"},
             {CLPA_DTYPE_F16, -1, 16, 1, 64, "num_blocks = -1"},
             {CLPA_DTYPE_F16, 1, 0, 1, 64, "block_size = 0"},
             {CLPA_DTYPE_F16, 1, -16, 1, 64, "block_size = -16"},
             {CLPA_DTYPE_F16, 1, 16, 0, 64, "num_kv_heads = 0"},
             {CLPA_DTYPE_F16, 1, 16, INT32_MIN, 64, "num_kv_heads"},
             {CLPA_DTYPE_F16, 1, 16, 1, 0, "head_size = 0"},
             {CLPA_DTYPE_F16, 1, 16, 1, 12, "head_size = 12"},
             {CLPA_DTYPE_FP8_E4M3, 1, 16, 1, 120, "x = 16"},
             {CLPA_DTYPE_F32, INT32_MAX, INT32_MAX, INT32_MAX, 1 << 30, "64 bits"},
             {CLPA_DTYPE_F32, INT32_MAX, 1 << 20, 1 << 20, 1 << 10, "64 bits"}};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    clpa_kv_layout out;
    memset(&out, 0x5a, sizeof out);
    clpa_kv_layout before = out;
    clpa_status st = clpa_kv_layout_init(&out, bad[i].dt, bad[i].nb, bad[i].bs, bad[i].nkv, bad[i].hs);
    ok(st == CLPA_ERR_INVALID_ARG && strstr(clpa_last_error(), bad[i].needle) &&
           memcmp(&out, &before, sizeof out) == 0,
       "refused (%s): %s", bad[i].needle, clpa_last_error());
  }
  ok(clpa_kv_layout_init(NULL, CLPA_DTYPE_F16, 1, 16, 1, 64) == CLPA_ERR_INVALID_ARG, "NULL out");
  ok(clpa_kv_layout_check(NULL, &c) == CLPA_ERR_INVALID_ARG, "NULL layout");
  ok(clpa_kv_layout_init(&l, CLPA_DTYPE_BF16, 0, 16, 1, 64) == CLPA_OK && l.cache_bytes == 0,
     "a layout of no blocks is valid (its ops refuse what they cannot use)");

  /* The host side is set up from the layout. */
  clpa_kv_layout_init(&l, CLPA_DTYPE_F16, 777, 32, 8, 128);
  clpa_pool_config pc;
  clpa_pool_config_init(&pc);
  clpa_pool_config_from_layout(&pc, &l);
  clpa_kvman_config kc;
  clpa_kvman_config_init(&kc);
  clpa_kvman_config_from_layout(&kc, &l);
  ok(pc.num_blocks == 777 && pc.block_size == 32 && kc.num_blocks == 777 && kc.block_size == 32 &&
         kc.prefix_cache == 1,
     "pool and KV manager configs take num_blocks and block_size from the layout");
  return done_testing();
}
