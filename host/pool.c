/* pool.c — the block pool: a free stack and a refcount per block (see clpa_kv.h). */
#include <string.h>

#include "kv_internal.h"

void clpa_pool_config_init(clpa_pool_config *cfg) {
  if (!cfg) return;
  memset(cfg, 0, sizeof *cfg);
  cfg->block_size = 16;
}

clpa_status clpa_pool_create(const clpa_pool_config *cfg, clpa_pool **out) {
  CLPA_CHECK(NULL, !cfg, CLPA_ERR_INVALID_ARG, "cfg must not be NULL");
  CLPA_CHECK(NULL, !out, CLPA_ERR_INVALID_ARG, "out must not be NULL");
  CLPA_CHECK_RESERVED(NULL, cfg, "cfg->");
  CLPA_CHECK(NULL, cfg->num_blocks <= 0, CLPA_ERR_INVALID_ARG,
             "cfg->num_blocks (%d) must be > 0", (int)cfg->num_blocks);
  CLPA_CHECK(NULL, cfg->block_size <= 0, CLPA_ERR_INVALID_ARG,
             "cfg->block_size (%d) must be > 0", (int)cfg->block_size);
  CLPA_CHECK(NULL, !cfg->allocator.fn && cfg->allocator.user, CLPA_ERR_INVALID_ARG,
             "cfg->allocator.user is set but cfg->allocator.fn is NULL");

  const clpa_allocator *a = &cfg->allocator;
  clpa_pool *p = clpa_mem_alloc(a, sizeof *p);
  CLPA_CHECK(NULL, !p, CLPA_ERR_OUT_OF_MEMORY, "cannot allocate the pool");
  size_t n = (size_t)cfg->num_blocks;
  /* One array: refcounts first, then the free stack. */
  int32_t *arrays = (n <= SIZE_MAX / (2 * sizeof(int32_t)))
                        ? clpa_mem_alloc(a, 2 * n * sizeof(int32_t))
                        : NULL;
  if (!arrays) {
    clpa_mem_free(a, p, sizeof *p);
    return CLPA_FAIL(NULL, CLPA_ERR_OUT_OF_MEMORY, "cannot allocate %d blocks' bookkeeping",
                     (int)cfg->num_blocks);
  }
  p->alloc = *a;
  p->num_blocks = cfg->num_blocks;
  p->block_size = cfg->block_size;
  p->num_free = cfg->num_blocks;
  p->num_shared = 0;
  p->refcount = arrays;
  p->free_stack = arrays + n;
  memset(p->refcount, 0, n * sizeof(int32_t));
  /* Lowest id on top, so a fresh pool hands out 0, 1, 2, ... */
  for (int32_t i = 0; i < p->num_blocks; i++) p->free_stack[i] = p->num_blocks - 1 - i;
  *out = p;
  return CLPA_OK;
}

void clpa_pool_destroy(clpa_pool *pool) {
  if (!pool) return;
  clpa_allocator a = pool->alloc;
  clpa_mem_free(&a, pool->refcount, 2 * (size_t)pool->num_blocks * sizeof(int32_t));
  clpa_mem_free(&a, pool, sizeof *pool);
}

clpa_status clpa_pool_alloc(clpa_pool *pool, int32_t n, int32_t *blocks) {
  CLPA_CHECK(NULL, !pool, CLPA_ERR_INVALID_ARG, "pool must not be NULL");
  CLPA_CHECK(NULL, n < 0, CLPA_ERR_INVALID_ARG, "n (%d) must be >= 0", (int)n);
  CLPA_CHECK(NULL, !blocks && n > 0, CLPA_ERR_INVALID_ARG, "blocks must not be NULL (n = %d)",
             (int)n);
  CLPA_CHECK(NULL, n > pool->num_free, CLPA_ERR_POOL_EXHAUSTED,
             "need %d blocks, only %d of %d are free", (int)n, (int)pool->num_free,
             (int)pool->num_blocks);
  for (int32_t i = 0; i < n; i++) blocks[i] = clpa_pool_pop_(pool);
  return CLPA_OK;
}

/* Shared by ref and unref: pool non-NULL and block in range. */
#define CHECK_BLOCK(pool, block)                                                          \
  do {                                                                                    \
    CLPA_CHECK(NULL, !(pool), CLPA_ERR_INVALID_ARG, "pool must not be NULL");             \
    CLPA_CHECK(NULL, (block) < 0 || (block) >= (pool)->num_blocks, CLPA_ERR_INVALID_ARG,  \
               "block %d is out of range [0, %d)", (int)(block), (int)(pool)->num_blocks); \
  } while (0)

clpa_status clpa_pool_ref(clpa_pool *pool, int32_t block) {
  CHECK_BLOCK(pool, block);
  CLPA_CHECK(NULL, pool->refcount[block] == 0, CLPA_ERR_STATE,
             "block %d is free; only a block in use can gain a reference", (int)block);
  CLPA_CHECK(NULL, pool->refcount[block] == INT32_MAX, CLPA_ERR_STATE,
             "block %d already has INT32_MAX references", (int)block);
  clpa_pool_incref_(pool, block);
  return CLPA_OK;
}

clpa_status clpa_pool_unref(clpa_pool *pool, int32_t block) {
  CHECK_BLOCK(pool, block);
  CLPA_CHECK(NULL, pool->refcount[block] == 0, CLPA_ERR_STATE,
             "block %d is already free (double unref?)", (int)block);
  clpa_pool_decref_(pool, block);
  return CLPA_OK;
}

int32_t clpa_pool_refcount(const clpa_pool *pool, int32_t block) {
  if (!pool || block < 0 || block >= pool->num_blocks) return -1;
  return pool->refcount[block];
}

void clpa_pool_stats_get(const clpa_pool *pool, clpa_pool_stats *out) {
  if (!out) return;
  if (!pool) {
    memset(out, 0, sizeof *out);
    return;
  }
  out->num_blocks = pool->num_blocks;
  out->free = pool->num_free;
  out->used = pool->num_blocks - pool->num_free;
  out->shared = pool->num_shared;
}

int32_t clpa_pool_block_size(const clpa_pool *pool) { return pool ? pool->block_size : -1; }

int32_t clpa_pool_num_free(const clpa_pool *pool) { return pool ? pool->num_free : -1; }

clpa_status clpa_pool_check(const clpa_pool *pool) {
  CLPA_CHECK(NULL, !pool, CLPA_ERR_INVALID_ARG, "pool must not be NULL");
  int32_t nb = pool->num_blocks;
  CLPA_CHECK(NULL, pool->num_free < 0 || pool->num_free > nb, CLPA_ERR_STATE,
             "free counter %d outside [0, %d]", (int)pool->num_free, (int)nb);
  size_t bytes = ((size_t)nb + 7) / 8;
  unsigned char *seen = clpa_mem_calloc(&pool->alloc, bytes, 1);
  CLPA_CHECK(NULL, !seen, CLPA_ERR_OUT_OF_MEMORY, "cannot allocate a %zu-byte bitmap", bytes);
  clpa_status st = CLPA_OK;
  for (int32_t i = 0; i < pool->num_free && st == CLPA_OK; i++) {
    int32_t b = pool->free_stack[i];
    if (b < 0 || b >= nb) {
      st = CLPA_FAIL(NULL, CLPA_ERR_STATE, "free list entry %d holds block %d, out of range",
                     (int)i, (int)b);
    } else if (seen[b / 8] & (1u << (b % 8))) {
      st = CLPA_FAIL(NULL, CLPA_ERR_STATE, "block %d is on the free list twice", (int)b);
    } else if (pool->refcount[b] != 0) {
      st = CLPA_FAIL(NULL, CLPA_ERR_STATE, "block %d is on the free list with refcount %d",
                     (int)b, (int)pool->refcount[b]);
    } else {
      seen[b / 8] |= (unsigned char)(1u << (b % 8));
    }
  }
  int32_t shared = 0;
  for (int32_t b = 0; b < nb && st == CLPA_OK; b++) {
    int32_t rc = pool->refcount[b];
    if (rc < 0) {
      st = CLPA_FAIL(NULL, CLPA_ERR_STATE, "block %d has refcount %d", (int)b, (int)rc);
    } else if (rc == 0 && !(seen[b / 8] & (1u << (b % 8)))) {
      st = CLPA_FAIL(NULL, CLPA_ERR_STATE, "block %d has refcount 0 but is not on the free list",
                     (int)b);
    }
    shared += rc > 1;
  }
  if (st == CLPA_OK && shared != pool->num_shared) {
    st = CLPA_FAIL(NULL, CLPA_ERR_STATE, "shared counter %d, but %d blocks have refcount > 1",
                   (int)pool->num_shared, (int)shared);
  }
  clpa_mem_free(&pool->alloc, seen, bytes);
  return st;
}
