/*
 * fuzz_kvman.c — drives the KV manager with operation streams decoded from
 * the input bytes and checks, after every operation:
 *
 *   - the pool's and the tree's own invariants (clpa_pool_check,
 *     clpa_radix_check);
 *   - every block's refcount = (1 if the tree holds it) + (number of running
 *     requests whose block table holds it);
 *   - the "KV" itself: the harness keeps a fake device cache, one 64-bit
 *     value per slot, and writes into each slot it is handed a hash of the
 *     namespace and the token prefix ending there. Every running request
 *     must read its own prefix back through its block table, and every
 *     cached node must hold the prefix its path spells. A block handed out
 *     while still in use, a wrong match or a wrong insert shows up here;
 *   - the manager's counters against the pool's and the tree's;
 *   - the running requests: every request sits in the row it reports, and
 *     the manager's batch view, built incrementally over the whole run,
 *     equals a view built from scratch.
 *
 * Allocation failures are injected through the allocator hook (an input
 * byte arms a countdown); a failed call must leave all of the above intact.
 *
 * Built two ways: with clang -fsanitize=fuzzer (meson -Dfuzz=true, CC=clang)
 * as a libFuzzer target, and with CLPA_FUZZ_MAIN as a plain program that
 * replays pseudo-random inputs (CLPA_TEST_SEED replays a run; file
 * arguments replay crash inputs).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clpa_kvman.h"

#define MAX_REQ 8
#define MAX_TOK 512
#define MAX_BLOCKS 80

typedef struct input {
  const uint8_t *d;
  size_t n, i;
} input;

static uint32_t byte(input *in) { return in->i < in->n ? in->d[in->i++] : 0; }

static long countdown = -1;
static void *fuzz_alloc(void *user, void *ptr, size_t old, size_t n) {
  (void)user;
  (void)old;
  if (n == 0) {
    free(ptr);
    return NULL;
  }
  if (countdown == 0) return NULL;
  if (countdown > 0) countdown--;
  return realloc(ptr, n);
}

#define FAIL(...)                                \
  do {                                           \
    fprintf(stderr, "fuzz_kvman: " __VA_ARGS__); \
    fputc('\n', stderr);                         \
    abort();                                     \
  } while (0)

static struct {
  clpa_kvman *km;
  clpa_pool *pool;
  clpa_radix *tree;
  clpa_batch *batch; /* kept over the whole run: incremental builds */
  int32_t watermark;
  int32_t bs, nblocks;
  clpa_kvreq *reqs[MAX_REQ];
  int nreqs;
  uint64_t kv[MAX_BLOCKS * 8];
  int32_t refs[MAX_BLOCKS];
  int32_t tree_blocks;
} F;

static uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
static uint64_t kv_start(uint64_t ns) { return mix(ns + 0x1234567ULL); }
static uint64_t kv_next(uint64_t h, int32_t tok) { return mix(h ^ ((uint64_t)(uint32_t)tok << 1)); }

static void write_kv(uint64_t ns, const int32_t *tok, int32_t from, int32_t n,
                     const int64_t *slots) {
  uint64_t h = kv_start(ns);
  for (int32_t i = 0; i < from + n; i++) {
    h = kv_next(h, tok[i]);
    if (i >= from) F.kv[slots[i - from]] = h;
  }
}

static void check_req(clpa_kvreq *r) {
  static int64_t slots[MAX_TOK * 2];
  const clpa_seq *seq = clpa_kvreq_seq(r);
  int32_t n = clpa_kvreq_num_tokens(r);
  if (clpa_seq_num_tokens(seq) != n) FAIL("request and sequence disagree on the length");
  if (clpa_seq_slots(seq, 0, n, slots) != CLPA_OK) FAIL("slots: %s", clpa_last_error());
  const int32_t *tok = clpa_kvreq_tokens(r);
  uint64_t h = kv_start(clpa_kvreq_ns(r));
  for (int32_t i = 0; i < n; i++) {
    h = kv_next(h, tok[i]);
    if (F.kv[slots[i]] != h) FAIL("request reads a wrong KV at token %d of %d", (int)i, (int)n);
  }
  const int32_t *bt = clpa_seq_block_table(seq);
  for (int32_t b = 0; b < clpa_seq_num_blocks(seq); b++) F.refs[bt[b]]++;
}

static int check_node(void *user, const clpa_radix_node *node, const clpa_radix_node_info *info) {
  (void)user;
  const clpa_radix_node *path[MAX_TOK];
  int depth = 0;
  for (const clpa_radix_node *n = node; n != clpa_radix_root(F.tree);) {
    clpa_radix_node_info pi;
    clpa_radix_node_get(F.tree, n, &pi);
    path[depth++] = n;
    n = pi.parent;
  }
  uint64_t h = kv_start(info->ns);
  while (depth-- > 0) {
    clpa_radix_node_info pi;
    clpa_radix_node_get(F.tree, path[depth], &pi);
    for (int32_t t = 0; t < pi.num_blocks * F.bs; t++) {
      h = kv_next(h, pi.tokens[t]);
      if (depth == 0 && F.kv[(int64_t)pi.blocks[t / F.bs] * F.bs + t % F.bs] != h)
        FAIL("cached block %d holds a wrong KV", (int)pi.blocks[t / F.bs]);
    }
  }
  for (int32_t b = 0; b < info->num_blocks; b++) F.refs[info->blocks[b]]++;
  F.tree_blocks += info->num_blocks;
  return 0;
}

/* Rows and the batch view: the incremental view equals a fresh one. */
static void check_running(void) {
  clpa_kvreq *const *run = clpa_kvman_running(F.km);
  if (clpa_kvman_num_running(F.km) != F.nreqs) FAIL("%d running, harness has %d",
                                                     (int)clpa_kvman_num_running(F.km), F.nreqs);
  for (int i = 0; i < F.nreqs; i++) {
    int32_t row = clpa_kvreq_row(F.reqs[i]);
    if (row < 0 || row >= F.nreqs || run[row] != F.reqs[i]) FAIL("request in the wrong row %d", (int)row);
  }
  clpa_batch_view v, w;
  if (clpa_kvman_batch_build(F.km, F.batch, &v) != CLPA_OK) FAIL("batch: %s", clpa_last_error());
  clpa_batch *fresh;
  const clpa_seq *seqs[MAX_REQ];
  for (int i = 0; i < F.nreqs; i++) seqs[i] = clpa_kvreq_seq(run[i]);
  if (clpa_batch_create(F.pool, NULL, &fresh) != CLPA_OK ||
      clpa_batch_build(fresh, seqs, F.nreqs, &w) != CLPA_OK)
    FAIL("fresh batch: %s", clpa_last_error());
  if (v.num_seqs != w.num_seqs || v.max_blocks_per_seq != w.max_blocks_per_seq ||
      v.max_context_len != w.max_context_len ||
      memcmp(v.block_tables, w.block_tables,
             (size_t)w.num_seqs * (size_t)w.max_blocks_per_seq * sizeof(int32_t)) ||
      memcmp(v.context_lens, w.context_lens, (size_t)w.num_seqs * sizeof(int32_t)))
    FAIL("the incremental batch view differs from a fresh build");
  for (int32_t c = 1; c < v.num_changed_rows; c++)
    if (v.changed_rows[c] <= v.changed_rows[c - 1]) FAIL("changed_rows not ascending");
  clpa_batch_destroy(fresh);
}

static void check_all(void) {
  check_running();
  if (clpa_pool_check(F.pool) != CLPA_OK) FAIL("pool: %s", clpa_last_error());
  if (clpa_radix_check(F.tree) != CLPA_OK) FAIL("tree: %s", clpa_last_error());
  memset(F.refs, 0, sizeof F.refs);
  F.tree_blocks = 0;
  for (int i = 0; i < F.nreqs; i++) check_req(F.reqs[i]);
  clpa_radix_foreach(F.tree, check_node, NULL);
  for (int32_t b = 0; b < F.nblocks; b++)
    if (clpa_pool_refcount(F.pool, b) != F.refs[b])
      FAIL("block %d: refcount %d, holders %d", (int)b, (int)clpa_pool_refcount(F.pool, b),
           (int)F.refs[b]);
  clpa_kvman_stats st;
  clpa_kvman_stats_get(F.km, &st);
  if (st.running != F.nreqs || st.blocks_free != clpa_pool_num_free(F.pool) ||
      st.blocks_cached != F.tree_blocks || st.blocks_free + st.blocks_used != F.nblocks ||
      st.blocks_evictable > st.blocks_cached || st.hit_tokens > st.prompt_tokens ||
      (F.nreqs == 0 && st.blocks_evictable != st.blocks_cached))
    FAIL("stats disagree (or a lock outlived its request): running %d/%d free %d cached %d/%d",
         (int)st.running, F.nreqs, (int)st.blocks_free, (int)st.blocks_cached, (int)F.tree_blocks);
}

/* What the streams exercised, summed over inputs (printed by the replay). */
static struct {
  long admits, hits, hit_tokens, appends, batch_appends, checkpoints, finishes, evicted,
      reclaims, failures;
} T;

static void expect_soft(clpa_status s, const char *what) {
  T.failures += s != CLPA_OK;
  if (s != CLPA_OK && s != CLPA_ERR_POOL_EXHAUSTED && s != CLPA_ERR_OUT_OF_MEMORY)
    FAIL("%s: unexpected %s: %s", what, clpa_status_name(s), clpa_last_error());
}

/* A request may be refused for lack of blocks only after the tree gave up
 * everything it could: nothing evictable is left but, after a failed admit,
 * the prefix that admit had matched and locked (at most `slack` blocks). */
static void check_exhausted(clpa_status s, int32_t slack) {
  if (s != CLPA_ERR_POOL_EXHAUSTED) return;
  clpa_kvman_stats st;
  clpa_kvman_stats_get(F.km, &st);
  if (st.blocks_evictable > slack)
    FAIL("refused for lack of blocks with %d evictable (slack %d)", (int)st.blocks_evictable,
         (int)slack);
}

static void drop_req(int i) { F.reqs[i] = F.reqs[--F.nreqs]; }

static void op_admit(input *in) {
  static const int32_t bases[3][8] = {
      {5, 9, 5, 9, 3, 3, 7, 1}, {5, 9, 5, 9, 4, 4, 4, 4}, {8, 6, 8, 6, 8, 6, 8, 6}};
  int32_t tok[MAX_TOK];
  static int64_t slots[MAX_TOK];
  uint64_t ns = byte(in) % 3;
  int32_t n = 1 + (int32_t)(byte(in) % 96), cut = (int32_t)(byte(in) % 96);
  const int32_t *base = bases[byte(in) % 3];
  for (int32_t i = 0; i < n; i++) tok[i] = i < cut ? base[(i / 3) % 8] : (int32_t)(byte(in) % 3);
  clpa_kvman_admit_result r;
  clpa_kvman_admit_options opt;
  clpa_kvman_admit_options_init(&opt);
  opt.reserve_tokens = (int32_t)(byte(in) % 4) * 8;
  int32_t row = F.nreqs;
  clpa_status s = clpa_kvman_admit_ex(F.km, ns, tok, n, &opt, slots, &r);
  expect_soft(s, "admit");
  check_exhausted(s, (n - 1) / F.bs);
  if (s != CLPA_OK) return;
  if (r.cached_tokens % F.bs || r.cached_tokens >= n || r.num_new_tokens != n - r.cached_tokens)
    FAIL("admit: cached %d of %d tokens", (int)r.cached_tokens, (int)n);
  write_kv(ns, tok, r.cached_tokens, r.num_new_tokens, slots);
  if (clpa_kvreq_row(r.req) != row) FAIL("admit: row %d, expected %d", (int)clpa_kvreq_row(r.req), (int)row);
  T.admits++;
  T.hits += r.cached_tokens > 0;
  T.hit_tokens += r.cached_tokens;
  F.reqs[F.nreqs++] = r.req;
}

static void op_append(input *in, int i) {
  int32_t tok[16];
  int64_t slots[16];
  int32_t k = (int32_t)(byte(in) % 12);
  clpa_kvreq *r = F.reqs[i];
  int32_t n = clpa_kvreq_num_tokens(r);
  if (n + k > MAX_TOK) return;
  for (int32_t j = 0; j < k; j++) tok[j] = (int32_t)(byte(in) % 4);
  clpa_status s = clpa_kvman_append(F.km, r, tok, k, slots);
  expect_soft(s, "append");
  check_exhausted(s, 0);
  if (s == CLPA_OK) write_kv(clpa_kvreq_ns(r), clpa_kvreq_tokens(r), n, k, slots);
  T.appends += s == CLPA_OK;
}

/* A batch append: a random subset (or every running request, in row
 * order) with 0-3 tokens each; all or nothing. */
static void op_append_batch(input *in) {
  clpa_kvreq *reqs[MAX_REQ];
  int32_t counts[MAX_REQ], before[MAX_REQ], tok[MAX_REQ * 4];
  int64_t slots[MAX_REQ * 4 + 1];
  int32_t k = 0, total = 0;
  int all = byte(in) % 2;
  for (int i = 0; i < F.nreqs; i++) {
    clpa_kvreq *r = all ? clpa_kvman_running(F.km)[i] : F.reqs[i];
    if (!all && byte(in) % 2) continue;
    counts[k] = (int32_t)(byte(in) % 4);
    if (clpa_kvreq_num_tokens(r) + counts[k] > MAX_TOK) counts[k] = 0;
    before[k] = clpa_kvreq_num_tokens(r);
    reqs[k++] = r;
  }
  int ones = byte(in) % 2; /* counts NULL: one token each */
  for (int32_t i = 0; i < k; i++) total += ones ? 1 : counts[i];
  for (int32_t j = 0; j < total; j++) tok[j] = (int32_t)(byte(in) % 4);
  slots[total] = -7;
  clpa_status s = clpa_kvman_append_batch(F.km, reqs, k, ones ? NULL : counts, tok, slots);
  expect_soft(s, "append_batch");
  check_exhausted(s, 0);
  if (slots[total] != -7) FAIL("append_batch wrote past its slots");
  int32_t at = 0;
  for (int32_t i = 0; i < k; i++) {
    int32_t c = ones ? 1 : counts[i], n = clpa_kvreq_num_tokens(reqs[i]);
    if (n != before[i] + (s == CLPA_OK ? c : 0))
      FAIL("append_batch: request %d has %d tokens, expected %d", (int)i, (int)n,
           (int)(before[i] + (s == CLPA_OK ? c : 0)));
    if (s == CLPA_OK) {
      if (memcmp(clpa_kvreq_tokens(reqs[i]) + before[i], tok + at, (size_t)c * sizeof(int32_t)))
        FAIL("append_batch: request %d got the wrong tokens", (int)i);
      write_kv(clpa_kvreq_ns(reqs[i]), clpa_kvreq_tokens(reqs[i]), before[i], c, slots + at);
    }
    at += c;
  }
  T.batch_appends += s == CLPA_OK;
  if (k >= 2 && byte(in) % 4 == 0) { /* a request listed twice is refused */
    reqs[1] = reqs[0];
    if (clpa_kvman_append_batch(F.km, reqs, 2, NULL, tok, slots) != CLPA_ERR_INVALID_ARG)
      FAIL("append_batch took a request listed twice");
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  input in = {data, size, 0};
  static const int32_t sizes[4] = {1, 2, 4, 8};
  memset(&F, 0, sizeof F);
  F.bs = sizes[byte(&in) % 4];
  F.nblocks = 4 + (int32_t)(byte(&in) % (MAX_BLOCKS - 4));
  clpa_kvman_config cfg;
  clpa_kvman_config_init(&cfg);
  cfg.num_blocks = F.nblocks;
  cfg.block_size = F.bs;
  cfg.prefix_cache = byte(&in) % 8 != 0;
  cfg.free_watermark = (int32_t)(byte(&in) % (uint32_t)(F.nblocks / 2 + 1));
  F.watermark = cfg.free_watermark;
  cfg.allocator.fn = fuzz_alloc;
  countdown = -1;
  if (clpa_kvman_create(&cfg, &F.km) != CLPA_OK) FAIL("create: %s", clpa_last_error());
  F.pool = clpa_kvman_pool(F.km);
  F.tree = clpa_kvman_radix(F.km);
  if (clpa_batch_create(F.pool, NULL, &F.batch) != CLPA_OK) FAIL("batch: %s", clpa_last_error());
  while (in.i < in.n) {
    uint32_t op = byte(&in) % 10;
    int i = F.nreqs ? (int)(byte(&in) % (uint32_t)F.nreqs) : -1;
    clpa_status s;
    switch (op) {
      case 0:
      case 1:
        if (F.nreqs < MAX_REQ) op_admit(&in);
        break;
      case 2:
        if (i >= 0) op_append(&in, i);
        break;
      case 3:
        if (i >= 0) {
          int32_t n = clpa_kvreq_num_tokens(F.reqs[i]);
          s = clpa_kvman_checkpoint(F.km, F.reqs[i], (int32_t)(byte(&in) % (uint32_t)(n + 1)));
          expect_soft(s, "checkpoint");
          T.checkpoints += s == CLPA_OK;
        }
        break;
      case 4:
      case 5:
        if (i >= 0) {
          s = clpa_kvman_finish(F.km, F.reqs[i], op == 4);
          expect_soft(s, "finish");
          T.finishes++;
          drop_req(i);
        }
        break;
      case 6: {
        int32_t freed;
        s = clpa_kvman_evict(F.km, (int32_t)(byte(&in) % 8), &freed);
        if (s != CLPA_OK || freed < 0) FAIL("evict: %s", clpa_last_error());
        break;
      }
      case 7:
        countdown = (long)(byte(&in) % 4); /* the next few allocations, then failure */
        continue;
      case 8:
        op_append_batch(&in);
        break;
      case 9: {
        int32_t freed;
        clpa_kvman_stats st;
        s = clpa_kvman_reclaim(F.km, &freed);
        clpa_kvman_stats_get(F.km, &st);
        if (s != CLPA_OK || freed < 0 ||
            (F.nreqs >= 0 && cfg.prefix_cache && st.blocks_free < F.watermark &&
             st.blocks_evictable > 0))
          FAIL("reclaim left %d free (watermark %d) with %d evictable: %s", (int)st.blocks_free,
               (int)F.watermark, (int)st.blocks_evictable, clpa_last_error());
        T.reclaims++;
        break;
      }
    }
    countdown = -1;
    check_all();
  }
  countdown = -1;
  clpa_kvman_stats st;
  clpa_kvman_stats_get(F.km, &st);
  T.evicted += st.evicted_blocks;
  clpa_batch_destroy(F.batch);
  clpa_kvman_destroy(F.km);
  return 0;
}

#ifdef CLPA_FUZZ_MAIN
#include "tap.h"

static int replay_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return 1;
  static uint8_t buf[1 << 20];
  size_t n = fread(buf, 1, sizeof buf, f);
  fclose(f);
  LLVMFuzzerTestOneInput(buf, n);
  return 0;
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "--runs") != 0) {
    for (int i = 1; i < argc; i++)
      if (replay_file(argv[i])) return 1;
    return 0;
  }
  long runs = argc > 2 ? atol(argv[2]) : 3000;
  rng_seed_from_env();
  static uint8_t buf[2048];
  long bytes = 0;
  for (long r = 0; r < runs; r++) {
    size_t n = 1 + rng_below(sizeof buf);
    for (size_t i = 0; i < n; i++) buf[i] = (uint8_t)rng_next();
    LLVMFuzzerTestOneInput(buf, n);
    bytes += (long)n;
  }
  diag(
      "%ld admits (%ld hit the cache, %ld tokens), %ld appends, %ld batch appends, %ld "
      "checkpoints, %ld finishes, %ld reclaims, %ld blocks evicted, %ld calls failed soft (pool "
      "or injected OOM)",
      T.admits, T.hits, T.hit_tokens, T.appends, T.batch_appends, T.checkpoints, T.finishes,
      T.reclaims, T.evicted, T.failures);
  ok(1, "%ld pseudo-random operation streams (%ld bytes) kept every invariant", runs, bytes);
  return done_testing();
}
#endif
