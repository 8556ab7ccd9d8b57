/*
 * test_abi.c — what lets a built application meet a newer library
 * (README's ABI): clpa_context_create refuses a clpa.h of another ABI,
 * and every config and params struct refuses nonzero reserved words,
 * naming the struct and the word, before it reads anything else.
 */
#include <stdio.h>
#include <string.h>

#include "cl_util.h"
#include "clpa_kvman.h"
#include "clpa_xattn.h"

/* The call was refused with status st and a message holding `has`. */
static int refused(clpa_status got, clpa_status st, const char *has, const char *what) {
  const char *msg = clpa_last_error();
  return ok(got == st && strstr(msg, has) != NULL, "%s: %s (%s)", what, clpa_status_name(got), msg);
}

/* A word of the reserved tail, set to a value that is not 0. */
#define POKE(s, i) ((s).reserved[(i)] = 0x5eedull + (i))

static void versions(void) {
  clpa_context_config cfg;
  clpa_context_config_init(&cfg);
  ok(cfg.header_version == CLPA_VERSION_NUMBER && clpa_version_number() == CLPA_VERSION_NUMBER,
     "clpa_context_config_init records this header's version (%u)", cfg.header_version);
  clpa_context *ctx = NULL;
  cfg.header_version = 0;
  refused(clpa_context_create(&cfg, &ctx), CLPA_ERR_VERSION, "clpa_context_config_init",
          "a config not filled by clpa_context_config_init");
  ok(ctx == NULL, "and no context is made");
  const unsigned major = CLPA_VERSION_MAJOR, minor = CLPA_VERSION_MINOR;
  const unsigned other_minor = major * 10000 + (minor + 1) % 100 * 100;
  clpa_context_config_init_version(&cfg, other_minor);
  char want[64];
  snprintf(want, sizeof want, "built with clpa.h %u.%u.0, this library is %s", major,
           (minor + 1) % 100, clpa_version_string());
  refused(clpa_context_create(&cfg, &ctx), major == 0 ? CLPA_ERR_VERSION : CLPA_OK, want,
          "another minor version while the major is 0");
  clpa_context_config_init_version(&cfg, (major + 1) * 10000 + minor * 100);
  refused(clpa_context_create(&cfg, &ctx), CLPA_ERR_VERSION, "their ABIs differ",
          "another major version");
  /* Patch releases keep the ABI: either way round, the context is made. */
  const unsigned patch = CLPA_VERSION_PATCH;
  clpa_context_config_init_version(&cfg, major * 10000 + minor * 100 + (patch + 1) % 100);
  const clpa_status st = clpa_context_create(&cfg, &ctx);
  ok(st == CLPA_OK && ctx, "another patch version is accepted (%s)", clpa_status_name(st));
  clpa_context_destroy(ctx);
  clpa_context_config_init(&cfg);
  POKE(cfg, 7);
  ctx = NULL;
  refused(clpa_context_create(&cfg, &ctx), CLPA_ERR_INVALID_ARG, "cfg->reserved[7]",
          "clpa_context_config with a reserved word set");
  ok(strcmp(clpa_status_name(CLPA_ERR_VERSION), "CLPA_ERR_VERSION") == 0 &&
         CLPA_ERR_VERSION == -1008,
     "CLPA_ERR_VERSION is -1008 and named");
}

/* The host objects' configs. */
static void host_structs(void) {
  clpa_pool_config pc;
  clpa_pool_config_init(&pc);
  pc.num_blocks = 8, pc.block_size = 16;
  clpa_pool *pool = NULL;
  POKE(pc, 0);
  refused(clpa_pool_create(&pc, &pool), CLPA_ERR_INVALID_ARG, "cfg->reserved[0]", "pool config");
  pc.reserved[0] = 0;
  ok(clpa_pool_create(&pc, &pool) == CLPA_OK, "the same pool config with reserved 0 is taken");

  clpa_batch_config bc;
  clpa_batch_config_init(&bc);
  POKE(bc, 3);
  clpa_batch *batch = NULL;
  refused(clpa_batch_create(pool, &bc, &batch), CLPA_ERR_INVALID_ARG, "cfg->reserved[3]",
          "batch config");
  clpa_radix_config rc;
  clpa_radix_config_init(&rc);
  POKE(rc, 5);
  clpa_radix *tree = NULL;
  refused(clpa_radix_create(pool, &rc, &tree), CLPA_ERR_INVALID_ARG, "cfg->reserved[5]",
          "radix config");
  clpa_pool_destroy(pool);

  clpa_kvman_config kc;
  clpa_kvman_config_init(&kc);
  kc.num_blocks = 8, kc.block_size = 16;
  POKE(kc, 1);
  clpa_kvman *km = NULL;
  refused(clpa_kvman_create(&kc, &km), CLPA_ERR_INVALID_ARG, "cfg->reserved[1]", "kvman config");
  kc.reserved[1] = 0;
  ok(clpa_kvman_create(&kc, &km) == CLPA_OK, "the same kvman config with reserved 0 is taken");
  clpa_kvman_admit_options opt;
  clpa_kvman_admit_options_init(&opt);
  POKE(opt, 2);
  int32_t tokens[4] = {1, 2, 3, 4};
  int64_t slots[4];
  clpa_kvman_admit_result res;
  refused(clpa_kvman_admit_ex(km, 0, tokens, 4, &opt, slots, &res), CLPA_ERR_INVALID_ARG,
          "opt->reserved[2]", "admit options");
  clpa_kvman_destroy(km);

  clpa_kv_layout l, out;
  ok(clpa_kv_layout_init(&l, CLPA_DTYPE_F16, 4, 16, 2, 64) == CLPA_OK, "a layout");
  POKE(l, 3);
  refused(clpa_kv_layout_check(&l, &out), CLPA_ERR_INVALID_ARG, "layout->reserved[3]",
          "a layout filled by hand with a reserved word set");
}
/* block_pitch took the first of the layout's 5 reserved words: its size and earlier offsets
 * are those of before. */
_Static_assert(offsetof(clpa_kv_layout, block_pitch) + 5 * sizeof(uint64_t) ==
                   sizeof(clpa_kv_layout),
               "clpa_kv_layout: block_pitch takes a reserved word");

/* The CSR page tables' fields took 4 of the 8 reserved words that ended
 * decode's and prefill's params and the run inputs: the sizes and every
 * earlier offset are those of before (README's ABI). */
#define TOOK_FOUR_WORDS(T)                                                                   \
  _Static_assert(offsetof(T, reserved) + sizeof(((T *)0)->reserved) ==                      \
                     offsetof(T, CSR_FIRST_##T) + 8 * sizeof(uint64_t),                     \
                 #T ": the CSR fields take 4 reserved words")
#define CSR_FIRST_clpa_decode_params page_table
#define CSR_FIRST_clpa_prefill_params page_table
#define CSR_FIRST_clpa_attn_inputs num_page_indices
TOOK_FOUR_WORDS(clpa_decode_params);
TOOK_FOUR_WORDS(clpa_prefill_params);
TOOK_FOUR_WORDS(clpa_attn_inputs);

/* The ops' params, each refused before anything else is looked at. */
static void op_structs(clpa_context *ctx) {
  clpa_cache_config cc;
  clpa_cache_config_init(&cc);
  cc.num_layers = 1, cc.num_kv_heads = 1, cc.head_size = 64, cc.block_size = 16;
  cc.num_blocks = 4, cc.dtype = CLPA_DTYPE_F32;
  POKE(cc, 6);
  clpa_cache *cache = NULL;
  refused(clpa_cache_create(ctx, &cc, &cache), CLPA_ERR_INVALID_ARG, "cfg->reserved[6]",
          "cache config");
  cc.reserved[6] = 0;
  ok(clpa_cache_create(ctx, &cc, &cache) == CLPA_OK, "the same cache config with reserved 0");

  clpa_decode_params dp;
  clpa_decode_params_init(&dp);
  POKE(dp, 0);
  refused(clpa_decode(ctx, &dp), CLPA_ERR_INVALID_ARG, "p->reserved[0]", "decode params");
  clpa_prefill_params pp;
  clpa_prefill_params_init(&pp);
  POKE(pp, 1);
  refused(clpa_prefill(ctx, &pp), CLPA_ERR_INVALID_ARG, "p->reserved[1]", "prefill params");
  pp.reserved[1] = 0, pp.reserved32 = 7;
  refused(clpa_prefill(ctx, &pp), CLPA_ERR_INVALID_ARG, "p->reserved32 = 7", "prefill's reserved32");
  clpa_cascade_params cp;
  clpa_cascade_params_init(&cp);
  POKE(cp, 1);
  refused(clpa_cascade_decode(ctx, &cp), CLPA_ERR_INVALID_ARG, "p->reserved[1]",
          "cascade params");
  cp.reserved[1] = 0;
  POKE(cp.decode, 2);
  refused(clpa_cascade_decode(ctx, &cp), CLPA_ERR_INVALID_ARG, "p->decode.reserved[2]",
          "cascade's decode params");
  clpa_merge_states_params mp;
  clpa_merge_states_params_init(&mp);
  POKE(mp, 3);
  refused(clpa_merge_states(ctx, &mp), CLPA_ERR_INVALID_ARG, "p->reserved[3]", "merge params");
  clpa_reshape_and_cache_params rp;
  clpa_reshape_and_cache_params_init(&rp);
  POKE(rp, 4);
  refused(clpa_reshape_and_cache(ctx, &rp), CLPA_ERR_INVALID_ARG, "p->reserved[4]",
          "reshape_and_cache params");
  clpa_copy_blocks_params kp;
  clpa_copy_blocks_params_init(&kp);
  POKE(kp, 5);
  refused(clpa_copy_blocks(ctx, &kp), CLPA_ERR_INVALID_ARG, "p->reserved[5]", "copy params");
  clpa_swap_blocks_params sp;
  clpa_swap_blocks_params_init(&sp);
  POKE(sp, 6);
  refused(clpa_swap_blocks(ctx, &sp), CLPA_ERR_INVALID_ARG, "p->reserved[6]", "swap params");
  clpa_xattn_params xp;
  clpa_xattn_params_init(&xp);
  POKE(xp, 7);
  refused(clpa_xattn_estimate(ctx, &xp), CLPA_ERR_INVALID_ARG, "p->reserved[7]", "xattn params");

  /* A real plan, then a run whose inputs carry a reserved word. */
  clpa_decode_params_init(&dp);
  dp.num_seqs = 1, dp.num_heads = 1, dp.cache = cache, dp.max_blocks_per_seq = 4;
  dp.max_context_len = 64, dp.q_dtype = CLPA_DTYPE_F32, dp.scale = 0.125f;
  clpa_plan *plan = NULL;
  const clpa_status st = clpa_plan_decode(ctx, &dp, &plan);
  ok(st == CLPA_OK, "a decode plan (%s)", clpa_status_name(st));
  clpa_attn_inputs in;
  clpa_attn_inputs_init(&in);
  POKE(in, 1);
  refused(clpa_run(plan, &in), CLPA_ERR_INVALID_ARG, "in->reserved[1]", "run inputs");
  clpa_plan_release(plan);
  clpa_cache_destroy(cache);
}

int main(void) {
  versions();
  host_structs();
  clpa_context *ctx = test_context(0);
  op_structs(ctx);
  return test_context_done(ctx);
}
