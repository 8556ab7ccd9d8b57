/*
 * Pool, sequences and batch view against a plain model (kv_model.h) over
 * long random operation sequences, on pools from 1 block to 128 and block
 * sizes from 1 to 16. Usage: test_host_kv_model [total_ops] (default 1000000).
 */
#include <time.h>

#include "kv_model.h"

static const km_config configs[] = {
    {1, 1, 4, 0},    {2, 3, 6, 0},   {8, 1, 8, 2},    {16, 3, 8, 0},
    {33, 7, 24, 0},  {64, 4, 16, 5}, {64, 16, 24, 0}, {128, 2, 24, 64},
};
#define NCONFIGS (int)(sizeof configs / sizeof configs[0])

int main(int argc, char **argv) {
  long long total = argc > 1 ? atoll(argv[1]) : 1000000;
  uint64_t seed = rng_seed_from_env();
  km m;
  km_counts all;
  memset(&all, 0, sizeof all);
  clock_t t0 = clock();
  for (int c = 0; c < NCONFIGS; c++) {
    km_config cfg = configs[c];
    test_alloc ta;
    memset(&ta, 0, sizeof ta);
    long long steps = total / NCONFIGS;
    int rc = km_run(&m, cfg, &ta, steps, 1);
    if (!ok(rc == 0, "%lld ops on %d blocks of %d tokens, up to %d sequences: %lld copy-on-writes, "
                     "%lld exhausted, %lld refused bad calls, no leak",
            steps, cfg.num_blocks, cfg.block_size, cfg.max_seqs, m.n.cow, m.n.exhausted, m.n.bad)) {
      diag("%s", m.err);
      diag("replay with CLPA_TEST_SEED=%llu", (unsigned long long)seed);
    }
    for (int i = 0; i < OP_COUNT_; i++) all.ops[i] += m.n.ops[i];
    all.cow += m.n.cow;
    all.cow_exhausted += m.n.cow_exhausted;
    all.exhausted += m.n.exhausted;
    all.bad += m.n.bad;
    all.batch_reuse += m.n.batch_reuse;
    all.batch_grow += m.n.batch_grow;
    all.tokens += m.n.tokens;
    all.batch_same_list += m.n.batch_same_list;
    all.rows_skipped += m.n.rows_skipped;
    all.rows_rewritten += m.n.rows_rewritten;
  }
  double secs = (double)(clock() - t0) / CLOCKS_PER_SEC;
  long long sum = 0;
  int every_op = 1;
  for (int i = 0; i < OP_COUNT_; i++) {
    sum += all.ops[i];
    every_op &= all.ops[i] > 0;
    diag("%-14s %lld", km_op_names[i], all.ops[i]);
  }
  diag("%lld ops, %lld tokens appended, %.2f s CPU", sum, all.tokens, secs);
  ok(every_op, "every kind of operation ran");
  ok(all.cow > 1000, "copy-on-write exercised (%lld times)", all.cow);
  ok(all.cow_exhausted > 0, "an append refused for want of the copy-on-write block alone (%lld times)",
     all.cow_exhausted);
  ok(all.exhausted > 1000, "pool exhaustion exercised (%lld times)", all.exhausted);
  ok(all.batch_reuse > 0 && all.batch_grow > 0,
     "batch views built without reallocating %lld times, grew %lld times", all.batch_reuse,
     all.batch_grow);
  ok(all.batch_same_list > 1000 && all.rows_skipped > 1000 && all.rows_rewritten > 1000,
     "incremental batch builds: %lld over the previous rows, %lld rows skipped, %lld rewritten, "
     "each exactly as the model expects",
     all.batch_same_list, all.rows_skipped, all.rows_rewritten);
  return done_testing();
}
