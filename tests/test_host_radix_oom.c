/*
 * Out of memory leaves the tree intact. An allocator that fails on purpose
 * (after a countdown) drives random matches and inserts; every call that
 * fails must return CLPA_ERR_OUT_OF_MEMORY and leave the tree exactly as it
 * was: the same drawing (ticks and locks included), the same stats, the
 * same pool refcounts. Then the call is retried with memory and must work.
 * The allocator also checks the sizes it is given back and that nothing
 * leaks.
 */
#include <string.h>

#include "clpa_radix.h"
#include "tap.h"

typedef struct hdr {
  size_t size;
  size_t pad;
} hdr;

static long countdown = -1; /* fail when it reaches 0; -1 = never */
static long live_bytes, bad_sizes, injected;

static void *test_alloc(void *user, void *ptr, size_t old, size_t n) {
  (void)user;
  if (ptr) {
    hdr *h = (hdr *)ptr - 1;
    if (h->size != old) bad_sizes++;
    if (n == 0) {
      live_bytes -= (long)old;
      free(h);
      return NULL;
    }
  }
  if (countdown == 0) {
    injected++;
    return NULL;
  }
  if (countdown > 0) countdown--;
  hdr *h = realloc(ptr ? (hdr *)ptr - 1 : NULL, sizeof(hdr) + n);
  if (!h) return NULL;
  live_bytes += (long)n - (long)(ptr ? old : 0);
  h->size = n;
  return h + 1;
}

static char snap[1 << 16];
static const char *snapshot(clpa_radix *t, clpa_pool *p) {
  FILE *f = fmemopen(snap, sizeof snap, "w");
  clpa_radix_dump(t, f);
  clpa_radix_stats st;
  clpa_radix_stats_get(t, &st);
  fprintf(f, "%d %d %d %lld\n", (int)st.num_nodes, (int)st.evictable_blocks,
          (int)st.protected_blocks, (long long)st.splits);
  clpa_pool_stats ps;
  clpa_pool_stats_get(p, &ps);
  for (int32_t b = 0; b < ps.num_blocks; b++) fprintf(f, "%d,", (int)clpa_pool_refcount(p, b));
  fclose(f);
  return snap;
}

int main(void) {
  rng_seed_from_env();
  clpa_allocator a = {test_alloc, NULL};
  clpa_pool_config pc;
  clpa_pool_config_init(&pc);
  pc.num_blocks = 256;
  pc.block_size = 4;
  clpa_pool *pool;
  if (clpa_pool_create(&pc, &pool) != CLPA_OK) return 1;

  /* create fails cleanly at every allocation it makes */
  clpa_radix_config rc;
  clpa_radix_config_init(&rc);
  rc.allocator = a;
  clpa_radix *tree = NULL;
  int create_fails = 0;
  for (long k = 0;; k++) {
    countdown = k;
    clpa_status s = clpa_radix_create(pool, &rc, &tree);
    countdown = -1;
    if (s == CLPA_OK) break;
    create_fails += s == CLPA_ERR_OUT_OF_MEMORY && live_bytes == 0;
    if (s != CLPA_ERR_OUT_OF_MEMORY || live_bytes != 0) break;
  }
  ok(tree && create_fails > 0, "create fails cleanly at each of its %d allocations", create_fails);
  if (!tree) return done_testing();

  static char before[sizeof snap];
  int32_t tok[64], blk[16], mblk[16];
  int failed_calls = 0, bad = 0;
  clpa_radix_node *locked[8];
  int nlocked = 0;
  for (int op = 0; op < 20000 && bad < 5; op++) {
    int32_t n = 1 + (int32_t)rng_below(63), cut = (int32_t)rng_below((uint32_t)n);
    for (int32_t i = 0; i < n; i++) tok[i] = i < cut ? i * 7 : (int32_t)rng_below(2);
    uint64_t ns = rng_below(2);
    int is_insert = rng_below(2);
    int32_t nb = n / 4;
    if (is_insert) {
      if (clpa_pool_num_free(pool) < nb) clpa_radix_evict(tree, nb, NULL);
      if (clpa_pool_alloc(pool, nb, blk) != CLPA_OK) continue;
    }
    strcpy(before, snapshot(tree, pool));
    clpa_radix_insert_result ir;
    clpa_radix_match_result mr;
    clpa_radix_node *end;
    clpa_status s;
    int32_t *mout = rng_below(2) ? mblk : NULL; /* a match's blocks, or only its length */
    for (int i = 0; i < 16; i++) mblk[i] = -7;
    for (;;) {
      countdown = rng_below(3) ? (long)rng_below(3) : -1;
      s = is_insert ? clpa_radix_insert(tree, ns, tok, n, blk, &ir)
                    : clpa_radix_match(tree, ns, tok, n, mout, 16, &mr);
      countdown = -1;
      if (s != CLPA_ERR_OUT_OF_MEMORY) break;
      failed_calls++;
      if (strcmp(before, snapshot(tree, pool)) != 0) {
        bad++;
        diag("op %d: a failed %s changed the tree", op, is_insert ? "insert" : "match");
      }
      for (int i = 0; i < 16; i++)
        if (mblk[i] != -7 && !bad++) diag("op %d: a failed match wrote blocks[%d]", op, i);
    }
    if (s != CLPA_OK) {
      bad++;
      diag("op %d: %s", op, clpa_last_error());
    }
    if (is_insert)
      for (int32_t i = 0; i < nb; i++) clpa_pool_unref(pool, blk[i]);
    end = is_insert ? ir.node : mr.node;
    if (nlocked < 8 && rng_below(4) == 0) {
      clpa_radix_lock(tree, end);
      locked[nlocked++] = end;
    } else if (nlocked && rng_below(3) == 0) {
      clpa_radix_unlock(tree, locked[--nlocked]);
    }
    if (op % 500 == 0 && clpa_radix_check(tree) != CLPA_OK) {
      bad++;
      diag("op %d: %s", op, clpa_last_error());
    }
  }
  ok(bad == 0 && failed_calls > 1000,
     "%d calls failed on injected allocation failures (%ld injected); none changed the tree",
     failed_calls, injected);
  clpa_status vs = clpa_radix_check(tree);
  ok(vs == CLPA_OK, "the tree is valid%s%s", vs ? ": " : "", vs ? clpa_last_error() : "");
  clpa_radix_destroy(tree);
  ok(live_bytes == 0 && bad_sizes == 0,
     "no leak (%ld bytes live), sizes given back right (%ld bad)", live_bytes, bad_sizes);
  ok(clpa_pool_num_free(pool) == 256, "every block back in the pool");
  clpa_pool_destroy(pool);
  return done_testing();
}
