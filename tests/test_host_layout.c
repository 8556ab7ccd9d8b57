/*
 * The paged layout (clpa_layout.h): clpa_kv_key_index and
 * clpa_kv_value_index, the one host formula every reference and test
 * addresses the cache through, against the layout itself — a walk over
 * the nested dimensions in memory order, which counts elements without
 * any index arithmetic:
 *   key   [num_blocks][num_kv_heads][head_size / x][block_size][x]
 *   value [num_blocks][num_kv_heads][head_size][block_size]
 * for every dtype (x 4, 8, 16) and several shapes; then the strides and
 * sizes, and every refused layout.
 */
#include <string.h>

#include "clpa_layout.h"
#include "tap.h"

static int walk_matches(const clpa_kv_layout *l) {
  uint64_t i = 0;
  for (int32_t b = 0; b < l->num_blocks; b++)
    for (int32_t h = 0; h < l->num_kv_heads; h++)
      for (int32_t r = 0; r < l->head_size / l->x; r++)
        for (int32_t t = 0; t < l->block_size; t++)
          for (int32_t e = 0; e < l->x; e++, i++)
            if (clpa_kv_key_index(l, b, h, t, r * l->x + e) != i) return 0;
  if (i * clpa_dtype_size(l->dtype) != l->cache_bytes) return 0;
  i = 0;
  for (int32_t b = 0; b < l->num_blocks; b++)
    for (int32_t h = 0; h < l->num_kv_heads; h++)
      for (int32_t d = 0; d < l->head_size; d++)
        for (int32_t t = 0; t < l->block_size; t++, i++)
          if (clpa_kv_value_index(l, b, h, t, d) != i) return 0;
  return i * clpa_dtype_size(l->dtype) == l->cache_bytes;
}

int main(void) {
  rng_seed_from_env();
  static const int32_t heads[] = {32, 64, 80, 128, 256};
  for (int dt = 0; dt < CLPA_DTYPE_COUNT_; dt++)
    for (int k = 0; k < 5; k++) {
      const int32_t hs = heads[k], bs = 1 << (rng_below(6)), nkv = 1 + (int32_t)rng_below(4);
      const int32_t nb = 1 + (int32_t)rng_below(5);
      clpa_kv_layout l;
      clpa_status st = clpa_kv_layout_init(&l, (clpa_dtype)dt, nb, bs, nkv, hs);
      if (hs % (int32_t)(16 / clpa_dtype_size((clpa_dtype)dt))) {
        ok(st == CLPA_ERR_INVALID_ARG && strstr(clpa_last_error(), "multiple of x"),
           "%s head %d refused: %s", clpa_dtype_name((clpa_dtype)dt), hs, clpa_last_error());
        continue;
      }
      ok(st == CLPA_OK && walk_matches(&l), "%s: %d blocks, %d heads, head %d, block %d: the"
         " index functions walk memory in layout order", clpa_dtype_name((clpa_dtype)dt), nb, nkv,
         hs, bs);
    }

  clpa_kv_layout l, c;
  ok(clpa_kv_layout_init(&l, CLPA_DTYPE_F16, 1000, 16, 8, 128) == CLPA_OK && l.x == 8 &&
         l.head_stride == 2048 && l.block_stride == 16384 && l.block_bytes == 32768 &&
         l.cache_bytes == 32768000ull,
     "f16, 8 heads x 128, block 16: strides 2048 / 16384, 32 KiB a block");
  clpa_kv_layout hand = {CLPA_DTYPE_FP8_E5M2, 3, 32, 2, 64, 0, 0, 0, 0, 0, {0}};
  ok(clpa_kv_layout_check(&hand, &c) == CLPA_OK && c.x == 16 && c.block_bytes == 4096 &&
         c.cache_bytes == 3 * 4096,
     "a layout filled by hand gets its derived fields from clpa_kv_layout_check");
  ok(clpa_kv_layout_check(&hand, &hand) == CLPA_OK && hand.x == 16, "in place too");

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
