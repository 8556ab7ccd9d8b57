/*
 * clpa-bench mixed — a mixed engine step's attention as one clpa_prefill
 * over all its sequences (decode rows as one-token sequences) against the
 * two calls it replaces (clpa_decode over the decode rows, clpa_prefill
 * over the prefill chunks), each a plan made once and run as an engine
 * runs it per layer.
 *
 * The step: --decode-rows sequences of one new token over contexts as
 * --decode-lengths says (up to --decode-context), then --batch prefill
 * chunks of --new-tokens over --cached-tokens each (none with --batch 0).
 * Query rows: the decode rows first, so that the decode call reads the
 * first rows of the same query and output (as an engine's step lays them
 * out); each call has its own block-table rows. Method: random finite
 * inputs, shuffled blocks; a first call of each (kernel builds), then
 * timed as `decode` times (cold L2 on GPUs: from the flush's end to the
 * last kernel's end, profiling events, the median), each twice, alternated,
 * the lower kept; K/V bytes read over the copy bandwidth measured in the
 * same run.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"
#include "clpa.h"

typedef struct mixed_args {
  int32_t heads, kv_heads, head_size, block_size;
  int32_t decode_rows, decode_context, decode_short, batch, new_tokens, cached, split_keys;
  int32_t repeats, rows, decode_kernel;
  bench_lengths lengths;
  clpa_dtype dtype, q_dtype;
  int json, cold, hot;
} mixed_args;

#define MAX_DIM (1 << 24)

static int parse(int argc, char **argv, mixed_args *a) {
  *a = (mixed_args){32, 8, 64, 16, 16, 320, 0, 1, 256, 0, 0, 15, 0, 0, BENCH_LENGTHS_UNIFORM,
                    CLPA_DTYPE_F16, CLPA_DTYPE_F16, 0, 0, 0};
  const cli_opt opts[] = {
      {"heads", CLI_INT, &a->heads, 1, MAX_DIM, "N", "query heads", NULL, NULL},
      {"kv-heads", CLI_INT, &a->kv_heads, 1, MAX_DIM, "N", "key/value heads, a divisor of --heads",
       NULL, NULL},
      {"head-size", CLI_INT, &a->head_size, 1, MAX_DIM, "N", "elements per head", NULL, NULL},
      {"block-size", CLI_INT, &a->block_size, 1, MAX_DIM, "N", "tokens per cache block", NULL,
       NULL},
      {"decode-rows", CLI_INT, &a->decode_rows, 0, MAX_DIM, "N",
       "decode rows: sequences of one new token", NULL, NULL},
      {"decode-context", CLI_INT, &a->decode_context, 1, MAX_DIM, "N",
       "the decode rows' longest context (their new\ntoken included)", NULL, NULL},
      {"decode-lengths", CLI_WORD, &a->lengths, 0, 0, "KIND",
       "the decode rows' contexts: uniform (all at\n--decode-context), loguniform (in [16, it])\n"
       "or one-long (the first at it, the others at\n--decode-short)", "uniform",
       bench_parse_lengths},
      {"decode-short", CLI_INT, &a->decode_short, 0, MAX_DIM, "N",
       "one-long: the others' context (0: a 64th of\n--decode-context, at least 16)", NULL, NULL},
      {"batch", CLI_INT, &a->batch, 0, MAX_DIM, "N", "prefill chunks (0: a decode-only step)",
       NULL, NULL},
      {"new-tokens", CLI_INT, &a->new_tokens, 1, MAX_DIM, "N", "new tokens a prefill chunk",
       NULL, NULL},
      {"cached-tokens", CLI_INT, &a->cached, 0, MAX_DIM, "N",
       "tokens a prefill chunk's sequence has cached", NULL, NULL},
      {"split-keys", CLI_INT, &a->split_keys, -1, MAX_DIM, "N",
       "the one call's split_keys: 0 the plan's rule,\n-1 never, N keys a part", NULL, NULL},
      {"decode-kernel", CLI_INT, &a->decode_kernel, -1, 1, "N",
       "the one call's decode_rows_kernel: 0 the\nplan's rule, 1 the decode rows on decode's\n"
       "kernel, -1 on prefill's (one launch)", NULL, NULL},
      {"rows", CLI_INT, &a->rows, 0, 128, "N",
       "the one call's query rows a work-group\n(rows_per_group; 0 picks)", NULL, NULL},
      {"dtype", CLI_WORD, &a->dtype, 0, 0, "NAME",
       "cache dtype: f32, f16, bf16, fp8_e4m3 or\nfp8_e5m2", "f16", bench_parse_dtype},
      {"q-dtype", CLI_WORD, &a->q_dtype, 0, 0, "NAME", "query and output dtype: f32, f16 or bf16",
       "f16", bench_parse_dtype},
      {"cold", CLI_FLAG, &a->cold, 0, 0, NULL,
       "flush the L2 before each timed step (the\ndefault on GPUs)", NULL, NULL},
      {"hot", CLI_FLAG, &a->hot, 0, 0, NULL, "back-to-back steps (the default on CPUs)", NULL,
       NULL},
      {"repeats", CLI_INT, &a->repeats, 1, 10000, "N", "cold: timed steps (the median)", NULL,
       NULL},
      {"json", CLI_FLAG, &a->json, 0, 0, NULL, "print one JSON line instead of the table", NULL,
       NULL},
      {NULL, 0, NULL, 0, 0, NULL, NULL, NULL, NULL},
  };
  const cli_cmd cmd = {
      "clpa-bench mixed",
      "Times a mixed engine step's attention (decode rows beside prefill chunks)\n"
      "as one clpa_prefill call against a clpa_decode and a clpa_prefill call,\n"
      "each a plan made once and run as an engine runs it per layer.",
      opts,
      "Defaults: the demo's llama-1b step (32/8 heads, head 64): 16 decode rows\n"
      "at 320 tokens and one 256-token chunk. Each is timed twice, alternated,\n"
      "and the lower kept. K/V bytes: what the step's rows read once, over the\n"
      "copy bandwidth measured in the same run.\n"
      "JSON keys: op, device, lanes, mode (cold or hot; also as timing), heads,\n"
      "kv_heads, head_size, block_size, dtype, q_dtype, decode_rows, decode_context,\n"
      "decode_lengths, batch, new_tokens, cached_tokens, kv_bytes, copy_gbps,\n"
      "us_one_call, us_two_calls, one_over_two, one_ratio (K/V bytes over time over\n"
      "copy),\n"
      "path (the one call's), rows, split_keys, split_rows, decode_kernel_rows\n"
      "(its rows on decode's kernel), decode_path, decode_partition (0: v1).",
      clpa_version_string(),
  };
  int rc = cli_parse(&cmd, argc, argv);
  if (rc != CLI_RUN) return rc;
  if (a->cold && a->hot) return cli_error(&cmd, "--cold and --hot exclude each other");
  if (a->decode_rows + a->batch == 0)
    return cli_error(&cmd, "no sequences: --decode-rows 0 and --batch 0");
  if (a->lengths == BENCH_LENGTHS_ONE_LONG && a->decode_short > a->decode_context)
    return cli_error(&cmd, "--decode-short %d is longer than --decode-context %d (the longest)",
                     (int)a->decode_short, (int)a->decode_context);
  if (a->split_keys > 0 && a->split_keys % 64)
    return cli_error(&cmd, "--split-keys %d: a multiple of 64", (int)a->split_keys);
  const long long per = ((long long)a->cached + a->new_tokens) > a->decode_context
                            ? (long long)a->cached + a->new_tokens
                            : a->decode_context;
  const long long seqs = (long long)a->decode_rows + a->batch;
  if ((per + a->block_size - 1) / a->block_size * seqs > INT32_MAX)
    return cli_error(&cmd, "the step's blocks are more than the library indexes");
  return CLI_RUN;
}

/* The two ways of running the step: plans and their inputs. */
typedef struct step_runs {
  clpa_plan *one, *decode, *prefill; /* decode or prefill NULL: no such rows */
  clpa_attn_inputs one_in, decode_in, prefill_in;
} step_runs;

static clpa_status one_call(clpa_context *ctx, const void *arg, cl_event *event) {
  (void)ctx;
  const step_runs *r = arg;
  clpa_attn_inputs in = r->one_in;
  in.event = event;
  return clpa_run(r->one, &in);
}

static clpa_status two_calls(clpa_context *ctx, const void *arg, cl_event *event) {
  (void)ctx;
  const step_runs *r = arg;
  clpa_attn_inputs d = r->decode_in, p = r->prefill_in;
  d.event = r->prefill ? NULL : event, p.event = event;
  clpa_status st = r->decode ? clpa_run(r->decode, &d) : CLPA_OK;
  if (st == CLPA_OK && r->prefill) st = clpa_run(r->prefill, &p);
  return st;
}

#define FAIL(...) BENCH_FAIL("mixed", __VA_ARGS__)

int bench_mixed(int argc, char **argv) {
  mixed_args a;
  int parsed = parse(argc, argv, &a);
  if (parsed != CLI_RUN) return parsed;
  bench_env env;
  if (bench_open(&env)) return 1;
  bench_timing timing;
  bench_timing_pick(&env, a.cold, a.hot, a.repeats, &timing);
  const int nd = a.decode_rows, np = a.batch, ns = nd + np;
  int rc = 1;
  int32_t *lens = calloc((size_t)ns, sizeof(int32_t));
  int32_t *cu = calloc((size_t)ns + 1, sizeof(int32_t));
  int32_t *cached = calloc((size_t)ns, sizeof(int32_t));
  step_runs r;
  memset(&r, 0, sizeof r);
  cl_mem kc = NULL, vc = NULL, bq = NULL, out = NULL, bt = NULL, btd = NULL, btp = NULL, bl = NULL;
  int32_t *tables = NULL;
  float *q = NULL;
  void *qs = NULL;
  if (!lens || !cu || !cached) FAIL("out of host memory");
  bench_make_lengths(a.lengths, a.decode_context, a.decode_short, nd, lens); /* new token in */
  for (int s = 0; s < ns; s++) {
    const int32_t n = s < nd ? 1 : a.new_tokens;
    if (s >= nd) lens[s] = a.cached + a.new_tokens;
    cached[s] = lens[s] - n, cu[s + 1] = cu[s] + n;
  }
  int32_t bpseq = 1, max_ctx = 1;
  double kv_tokens = 0;
  for (int s = 0; s < ns; s++) {
    const int32_t b = (lens[s] + a.block_size - 1) / a.block_size;
    bpseq = b > bpseq ? b : bpseq, max_ctx = s < nd && lens[s] > max_ctx ? lens[s] : max_ctx;
    kv_tokens += lens[s];
  }
  const int32_t nblocks = bpseq * ns;
  const size_t esz = clpa_dtype_size(a.dtype), qsz = clpa_dtype_size(a.q_dtype);
  const size_t cache_elems = (size_t)nblocks * a.kv_heads * a.head_size * a.block_size;
  const size_t qn = (size_t)cu[ns] * a.heads * a.head_size;
  tables = malloc(sizeof(int32_t) * (size_t)nblocks);
  q = malloc(sizeof(float) * qn), qs = malloc(qsz * qn);
  if (!tables || !q || !qs) FAIL("out of host memory");
  bench_shuffled(tables, nblocks);
  bench_random_values(q, qn);
  if (clpa_dtype_encode(a.q_dtype, q, qs, qn, 1.0f) != CLPA_OK) FAIL("%s", clpa_last_error());
  cli_progress("mixed: making random K/V caches (2 x %.0f MB)...",
               (double)(cache_elems * esz) / 1e6);
  kc = bench_random_cache(&env, a.dtype, cache_elems);
  vc = kc ? bench_random_cache(&env, a.dtype, cache_elems) : NULL;
  cli_progress_end();
  bq = bench_buffer(&env, qs, qsz * qn);
  out = bench_buffer(&env, NULL, qsz * qn);
  bt = bench_buffer(&env, tables, sizeof(int32_t) * (size_t)nblocks);
  btd = nd ? bench_buffer(&env, tables, sizeof(int32_t) * (size_t)nd * bpseq) : NULL;
  btp = np ? bench_buffer(&env, tables + (size_t)nd * bpseq, sizeof(int32_t) * (size_t)np * bpseq)
           : NULL;
  bl = nd ? bench_buffer(&env, lens, sizeof(int32_t) * (size_t)nd) : NULL;
  if (!kc || !vc || !bq || !out || !bt || (nd && (!btd || !bl)) || (np && !btp))
    FAIL("could not make the inputs");

  clpa_kv_layout kv;
  if (clpa_kv_layout_init(&kv, a.dtype, nblocks, a.block_size, a.kv_heads, a.head_size))
    FAIL("%s", clpa_last_error());
  const float scale = 1.0f / sqrtf((float)a.head_size);
  /* the one call: every sequence */
  clpa_prefill_params p;
  clpa_prefill_params_init(&p);
  p.num_seqs = ns, p.num_heads = a.heads, p.kv = kv, p.max_blocks_per_seq = bpseq;
  p.cu_seqlens_q = cu, p.cached_lens = cached, p.q_dtype = a.q_dtype, p.scale = scale;
  p.k_scale = p.v_scale = 0.01f, p.split_keys = a.split_keys, p.rows_per_group = a.rows;
  p.decode_rows_kernel = a.decode_kernel;
  clpa_plan_info one;
  if (clpa_plan_prefill(env.ctx, &p, &r.one) != CLPA_OK || clpa_plan_describe(r.one, &one))
    FAIL("the one call: %s", clpa_context_last_error(env.ctx));
  clpa_attn_inputs_init(&r.one_in);
  r.one_in.key_cache = kc, r.one_in.value_cache = vc, r.one_in.query = bq, r.one_in.out = out;
  r.one_in.block_tables = bt, r.one_in.k_scale = r.one_in.v_scale = 0.01f;
  /* the two calls: decode over the first rows, prefill over the rest (from row nd on) */
  clpa_plan_info dec = {0};
  if (nd) {
    clpa_decode_params d;
    clpa_decode_params_init(&d);
    d.num_seqs = nd, d.num_heads = a.heads, d.kv = kv, d.max_blocks_per_seq = bpseq;
    d.max_context_len = max_ctx, d.host_context_lens = lens, d.q_dtype = a.q_dtype;
    d.scale = scale, d.k_scale = d.v_scale = 0.01f;
    if (clpa_plan_decode(env.ctx, &d, &r.decode) != CLPA_OK || clpa_plan_describe(r.decode, &dec))
      FAIL("the decode call: %s", clpa_context_last_error(env.ctx));
    r.decode_in = r.one_in;
    r.decode_in.block_tables = btd, r.decode_in.context_lens = bl;
  }
  if (np) {
    p.num_seqs = np, p.cu_seqlens_q = cu + nd, p.cached_lens = cached + nd, p.split_keys = 0;
    p.rows_per_group = 0, p.decode_rows_kernel = 0;
    if (clpa_plan_prefill(env.ctx, &p, &r.prefill) != CLPA_OK)
      FAIL("the prefill call: %s", clpa_context_last_error(env.ctx));
    r.prefill_in = r.one_in;
    r.prefill_in.block_tables = btp;
  }
  cli_progress("mixed: first steps (a cold kernel cache builds the kernels now)...");
  clpa_status st = one_call(env.ctx, &r, NULL);
  if (st == CLPA_OK) st = two_calls(env.ctx, &r, NULL);
  if (st == CLPA_OK) st = clpa_context_finish(env.ctx);
  cli_progress_end();
  if (st != CLPA_OK) FAIL("%s", clpa_context_last_error(env.ctx));
  /* each timed twice, alternated, the lower kept: on PoCL whatever was
   * timed first read up to 1.8x slower (record 0042, "CPUs") */
  double t1 = 0, t2 = 0;
  for (int round = 0; round < 2; round++) {
    double u1 = 0, u2 = 0;
    if (bench_measure(&env, "one call", one_call, &r, &timing, &u1) ||
        bench_measure(&env, "two calls", two_calls, &r, &timing, &u2))
      goto done;
    if (!round || u1 < t1) t1 = u1;
    if (!round || u2 < t2) t2 = u2;
  }
  if (clpa_context_check_faults(env.ctx, NULL) != CLPA_OK)
    FAIL("%s", clpa_context_last_error(env.ctx));
  const double kv_bytes = kv_tokens * 2.0 * a.kv_heads * a.head_size * (double)esz;
  const double copy = bench_copy_gbps(&env, (size_t)(kv_bytes > 64e6 ? kv_bytes : 64e6), &timing);
  const double ratio = copy > 0 ? kv_bytes / t1 / 1e9 / copy : 0;
  const char *path = one.path == CLPA_PREFILL_ROWS  ? "rows"
                     : one.path == CLPA_PREFILL_MMA ? "mma"
                                                    : "tiles";
  if (a.json) {
    cli_json j;
    cli_json_begin(&j, stdout);
    cli_json_str(&j, "op", "mixed");
    cli_json_str(&j, "device", env.info.name);
    cli_json_str(&j, "lanes", clpa_lanes_name(env.info.lanes));
    cli_json_str(&j, "mode", bench_mode_name(&timing));
    cli_json_str(&j, "timing", bench_mode_name(&timing)); /* mode's first name (record 0042) */
    cli_json_int(&j, "heads", a.heads);
    cli_json_int(&j, "kv_heads", a.kv_heads);
    cli_json_int(&j, "head_size", a.head_size);
    cli_json_int(&j, "block_size", a.block_size);
    cli_json_str(&j, "dtype", clpa_dtype_name(a.dtype));
    cli_json_str(&j, "q_dtype", clpa_dtype_name(a.q_dtype));
    cli_json_int(&j, "decode_rows", nd);
    cli_json_int(&j, "decode_context", a.decode_context);
    cli_json_str(&j, "decode_lengths", bench_lengths_name(a.lengths));
    cli_json_int(&j, "batch", np);
    cli_json_int(&j, "new_tokens", np ? a.new_tokens : 0);
    cli_json_int(&j, "cached_tokens", np ? a.cached : 0);
    cli_json_num(&j, "kv_bytes", kv_bytes, 0);
    cli_json_num(&j, "copy_gbps", copy, 1);
    cli_json_num(&j, "us_one_call", t1 * 1e6, 2);
    cli_json_num(&j, "us_two_calls", t2 * 1e6, 2);
    cli_json_num(&j, "one_over_two", t1 / t2, 4);
    cli_json_num(&j, "one_ratio", ratio, 4);
    cli_json_str(&j, "path", path);
    cli_json_int(&j, "rows", one.rows);
    cli_json_int(&j, "split_keys", one.split_keys);
    cli_json_int(&j, "split_rows", one.split_rows);
    cli_json_int(&j, "decode_kernel_rows", one.decode_rows);
    cli_json_str(&j, "decode_path", nd ? bench_path_name((clpa_decode_path)dec.path) : "none");
    cli_json_int(&j, "decode_partition", dec.partition_size);
    cli_json_end(&j);
  } else {
    char t1s[32], t2s[32];
    printf("device      %s (%s lanes), %s timing\n", env.info.name,
           clpa_lanes_name(env.info.lanes), bench_mode_name(&timing));
    printf("step        %d decode rows (%s, up to %d tokens) and %d chunks of %d over %d cached;"
           " heads %d/%d, head size %d, block %d, %s cache, %s queries\n",
           nd, bench_lengths_name(a.lengths), a.decode_context, np, a.new_tokens, a.cached,
           a.heads, a.kv_heads, a.head_size, a.block_size, clpa_dtype_name(a.dtype),
           clpa_dtype_name(a.q_dtype));
    printf("one call    %s (%s path, %d rows a work-group; %d decode rows split by %d keys;"
           " %d on decode's kernel)\n", cli_time_text(t1s, sizeof t1s, t1, 0), path, one.rows,
           one.split_rows, one.split_keys, one.decode_rows);
    printf("two calls   %s (decode on %s, partition %d)\n", cli_time_text(t2s, sizeof t2s, t2, 0),
           nd ? bench_path_name((clpa_decode_path)dec.path) : "none", dec.partition_size);
    printf("one / two   %.3f\n", t1 / t2);
    printf("K/V read    %.1f MB: the one call at %.3f of copy (%.0f GB/s, same run)\n",
           kv_bytes / 1e6, ratio, copy);
  }
  rc = 0;
done:
  cli_progress_end();
  clpa_plan_release(r.one), clpa_plan_release(r.decode), clpa_plan_release(r.prefill);
  free(lens), free(cu), free(cached), free(tables), free(q), free(qs);
  cl_mem all[] = {kc, vc, bq, out, bt, btd, btp, bl};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++)
    if (all[i]) clReleaseMemObject(all[i]);
  bench_close(&env);
  return rc;
}
