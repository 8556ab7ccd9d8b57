/*
 * Out-of-memory injection: the same scripted operations (kv_model.h, a
 * fixed seed per script) run once per allocation the script makes, with
 * the allocator failing exactly that allocation. Each run must see
 * CLPA_ERR_OUT_OF_MEMORY from the call that hit the failure (and from no
 * other), leave pool and sequences equal to the model, and free every byte.
 * Usage: test_host_kv_oom [script_steps] (default 400).
 */
#include "kv_model.h"

static const km_config configs[] = {
    {4, 2, 6, 0}, {16, 3, 12, 0}, {40, 4, 24, 3}, {64, 1, 24, 0}};
#define NCONFIGS (int)(sizeof configs / sizeof configs[0])
int main(int argc, char **argv) {
  long long script_steps = argc > 1 ? atoll(argv[1]) : 400;
  uint64_t seed = rng_seed_from_env();
  km m;
  long long by_op[OP_COUNT_ + 1] = {0};
  for (int c = 0; c < NCONFIGS; c++) {
    km_config cfg = configs[c];
    uint64_t script = seed + 0x9e3779b97f4a7c15ULL * (uint64_t)(c + 1);
    test_alloc ta;
    memset(&ta, 0, sizeof ta);
    tap_rng_state = script;
    int rc = km_run(&m, cfg, &ta, script_steps, 1);
    long long points = ta.calls;
    if (!ok(rc == 0, "config %d: script of %lld steps without failures makes %lld allocations", c,
            script_steps, points))
      diag("%s", m.err);
    long long bad = 0, injected = 0, ooms = 0;
    for (long long n = 1; n <= points && bad < 3; n++) {
      memset(&ta, 0, sizeof ta);
      ta.fail_at = n;
      tap_rng_state = script;
      if (km_run(&m, cfg, &ta, script_steps, 1) != 0) {
        bad++;
        diag("config %d, failing allocation %lld: %s", c, n, m.err);
      }
      injected += ta.failures;
      ooms += m.n.oom;
      for (int i = 0; i <= OP_COUNT_; i++) by_op[i] += m.n.oom_by_op[i];
    }
    ok(bad == 0, "config %d: each of the %lld allocations failed in turn leaves a consistent "
                 "state and no leak", c, points);
    /* A failure is not injected when the run diverged before reaching it. */
    ok(injected > points / 2 && ooms == injected,
       "config %d: %lld failures injected, %lld reported as CLPA_ERR_OUT_OF_MEMORY", c, injected,
       ooms);
  }
  /* Every call that allocates must have been caught failing. */
  static const int allocating[] = {OP_CREATE, OP_APPEND, OP_FORK, OP_APPEND_BLOCKS, OP_BATCH,
                                   OP_COUNT_};
  for (size_t i = 0; i < sizeof allocating / sizeof allocating[0]; i++) {
    int op = allocating[i];
    ok(by_op[op] > 0, "out of memory injected into %s %lld times",
       op == OP_COUNT_ ? "pool/batch create" : km_op_names[op], by_op[op]);
  }
  return done_testing();
}
