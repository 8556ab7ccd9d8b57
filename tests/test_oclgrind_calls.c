/*
 * One small call per kernel family through the public API, for oclgrind.
 * The slow suite runs this program under oclgrind, one call a process
 * (tests/meson.build: oclgrind_<call> with --data-races,
 * oclgrind_uninit_<call> with --uninitialized). oclgrind interprets every
 * work-item and reports data races, out-of-bounds accesses and uses of
 * uninitialised values to the file its --log option names, which it tells
 * us in OCLGRIND_LOG; after each call (and a clFinish) whatever it
 * appended fails that call's point, the reports summarised (kind, kernel,
 * source line, count), so a failure names the family and the line. A
 * canary kernel with a race and an uninitialised read proves first that
 * oclgrind's reports reach us.
 *
 *   call           API                                  kernel family
 *   cache_create   clpa_cache_create (zeroes the cache)  blocks (clpa_blocks_zero)
 *   reshape        clpa_reshape_and_cache                cache
 *   smoke          clpa_smoke_test                       smoke
 *   copy_blocks    clpa_copy_blocks                      blocks (clpa_blocks_copy)
 *   decode_v1      clpa_decode, lanes path, v1           decode
 *   decode_v2      lanes, v2, 2 partitions               decode (+ reduce where the
 *                                                        device merges with a kernel,
 *                                                        as OpenCL 1.2 oclgrind does)
 *   decode_mma     mma path, v2 (emulated off NVIDIA)    decode_mma (+ reduce, as v2)
 *   decode_rows    rows path, v2                         decode_rows, reduce
 *   prefill_tiles  clpa_prefill, tiles path              prefill_tiles
 *   prefill_rows   rows path                             prefill_rows
 *   prefill_mma    mma path (emulated off NVIDIA)        prefill_mma
 *   prefill_split_ a mixed step, every row on prefill's   prefill_tiles, _rows or _mma,
 *   tiles/rows/mma kernel, the first decode row split in  with clpa_prefill_merge
 *                  parts of 128 keys (split_keys)
 *   prefill_mixed  a mixed step, its two decode rows on   decode_mma (emulated: the
 *                  decode's kernel (decode_rows_kernel),  call's path is mma), then
 *                  the rest on the mma path               prefill_mma
 *   merge          clpa_merge_states                     merge
 *   cascade        clpa_cascade_decode, auto paths       blocks (clpa_blocks_cascade_split),
 *                  (on oclgrind, a CPU too: rows)        prefill_rows, decode_rows, merge
 *   xattn          clpa_xattn_estimate, f32 path         xattn
 *   xattn_mma      mma path (emulated off NVIDIA)        xattn_mma (+ xattn's merge, mass, select)
 *
 * Usage: test_oclgrind_calls [--oclgrind] [call ...]: the calls named (all
 * when none; cache_create and reshape always, they fill the cache the
 * others read). --oclgrind: refuse to run without OCLGRIND_LOG on the
 * oclgrind device, so that the job cannot pass by not looking. Without
 * oclgrind it is a plain (small) kernel test on any device.
 *
 * The scene is tiny because oclgrind is slow: one f16 cache of 10 blocks of
 * 16 tokens, 2 KV heads of 64, 4 query heads; two sequences of 50 and 37
 * tokens sharing their first 2 blocks (a cascade group); v2 partitions of
 * 32 tokens, so each context spans 2. Results are checked too, outputs
 * poisoned first: decode, prefill and cascade against clpa_ref_decode and
 * clpa_ref_prefill (f32 paths 1e-4 / 1e-4, lse 1e-4 / 1e-5; the mma paths
 * round queries and probabilities to f16, so the reference takes f16
 * queries and the tolerance is 1e-3 / 2e-3), merge against
 * clpa_ref_merge_states (1e-5 / 1e-5), XAttention (its own cache: 2 heads
 * of 32, stride 4, blocks of 32) against clpa_ref_xattn_estimate_dense
 * (masses 1e-6 / 1e-4, masks exactly: with 2 key blocks both are always
 * kept; 30 queries after 32 cached, neither a multiple of the stride, the
 * padding past them out of bounds), the caches byte for byte.
 */
#include <stdio.h>

#include "cl_util.h"
#include "ref_attention.h"
#include "ref_xattn.h"

#define HEADS 4
#define KV_HEADS 2
#define HS 64
#define BS 16
#define NUM_BLOCKS 10
#define MAX_BLOCKS 4
#define SEQS 2
#define SHARED 2 /* blocks the two sequences share */
#define PART 32  /* v2 tokens per partition */
#define ROW (KV_HEADS * HS)
#define QROW (HEADS * HS)
#define F16 CLPA_DTYPE_F16

static const int32_t lens[SEQS] = {50, 37};
/* Block ids; the last column of sequence 1 is past its context, never read. */
static const int32_t tables[SEQS][MAX_BLOCKS] = {{7, 2, 5, 0}, {7, 2, 9, 0x7fff0000}};
/* Prefill: the last tokens of each context are the new ones. */
static const int32_t cu_seqlens[SEQS + 1] = {0, 10, 15}, cached[SEQS] = {40, 32};
#define PREFILL_Q 15

static clpa_context *ctx;
static clpa_cache *cache;
static clpa_kv_layout kv;
static float *kf, *vf;                      /* the caches as they must be, decoded */
static float q[SEQS * QROW], pq[PREFILL_Q * QROW]; /* decode and prefill queries */
static cl_mem d_tables, d_lens, d_q, d_pq;

static void *xmalloc(size_t n) {
  void *p = calloc(n ? n : 1, 1);
  if (!p) BAIL_OUT("out of memory");
  return p;
}

/* Buffers are released at the end, not after their call: under oclgrind
 * 21.10's --uninitialized a new buffer that takes a released one's id, and
 * is larger, keeps the old one's shadow, so reads of what kernels wrote
 * into it are reported (a 40-line program shows it: a kernel fills 16 floats, the
 * buffer is released, a kernel fills a new one of 64, another sums them:
 * "Uninitialized value written"). clpa's scratch grows the same way
 * (xattn after decode_v2: false reports in clpa_xattn_mass), so run one
 * call a process under --uninitialized, as meson does. */
static cl_mem kept[64];
static int num_kept;

static void release_later(cl_mem m) {
  if (num_kept == (int)(sizeof kept / sizeof *kept)) BAIL_OUT("kept[] is full");
  kept[num_kept++] = m;
}

/* ---- oclgrind's log ---- */

static const char *og_log; /* NULL when not under oclgrind */
static long og_offset;     /* what earlier calls already accounted for */

/* One kind of report: its first line (the address cut off), kernel and place. */
typedef struct og_kind {
  char what[160], kernel[96], where[200];
  int count;
} og_kind;

/* What oclgrind logged since the last look. */
enum { OG_KINDS = 12 };
typedef struct og_reports {
  og_kind kinds[OG_KINDS];
  int num_kinds, reports, lines, dropped; /* dropped: reports of kinds past OG_KINDS */
} og_reports;

static void og_trim(char *s) {
  size_t n = strlen(s);
  while (n && (s[n - 1] == '\n' || s[n - 1] == ' ' || s[n - 1] == '\t')) s[--n] = '\0';
}

static void og_note(og_reports *r, const og_kind *k) {
  for (int i = 0; i < r->num_kinds; i++)
    if (!strcmp(r->kinds[i].what, k->what) && !strcmp(r->kinds[i].kernel, k->kernel) &&
        !strcmp(r->kinds[i].where, k->where)) {
      r->kinds[i].count++;
      return;
    }
  if (r->num_kinds == OG_KINDS) {
    r->dropped++;
    return;
  }
  r->kinds[r->num_kinds] = *k;
  r->kinds[r->num_kinds++].count = 1;
}

/* Reads the log from where the last look stopped; 0 when it cannot. A
 * report is a line at the left margin, then indented lines (Kernel:, At
 * line ...: and the source line). */
static int og_read(og_reports *r) {
  memset(r, 0, sizeof *r);
  FILE *f = fopen(og_log, "r");
  if (!f) return 0;
  fseek(f, og_offset, SEEK_SET);
  og_kind cur;
  int open = 0, want_src = 0;
  char line[1024];
  while (fgets(line, sizeof line, f)) {
    r->lines++;
    og_trim(line);
    const char *t = line + strspn(line, " \t");
    if (line[0] && line[0] != ' ' && line[0] != '\t') { /* a report's first line */
      if (open) og_note(r, &cur);
      memset(&cur, 0, sizeof cur);
      open = 1, r->reports++;
      char *addr = strstr(line, " address 0x"); /* one kind, whichever address */
      if (addr) addr[8] = '\0';
      snprintf(cur.what, sizeof cur.what, "%.*s", (int)sizeof cur.what - 1, line); /* what fits */
    } else if (open && !cur.kernel[0] && !strncmp(t, "Kernel: ", 8)) {
      snprintf(cur.kernel, sizeof cur.kernel, "%s", t + 8);
    } else if (open && !cur.where[0] && !strncmp(t, "At line ", 8)) {
      snprintf(cur.where, sizeof cur.where, "%s", t + 8);
      want_src = 1;
    } else if (want_src && *t) { /* the source line after the first "At line" */
      const size_t n = strlen(cur.where);
      snprintf(cur.where + n, sizeof cur.where - n, " %s", t);
      want_src = 0;
    }
  }
  if (open) og_note(r, &cur);
  og_offset = ftell(f);
  fclose(f);
  return 1;
}

static void og_show(const char *call, const og_reports *r) {
  for (int i = 0; i < r->num_kinds; i++)
    diag("%s: %dx %s in %s, at %s", call, r->kinds[i].count, r->kinds[i].what,
         r->kinds[i].kernel[0] ? r->kinds[i].kernel : "?",
         r->kinds[i].where[0] ? r->kinds[i].where : "?");
  if (r->dropped) diag("%s: and %d reports of other kinds", call, r->dropped);
}

/* After a call: waits for the queue, then fails the call's point when
 * oclgrind logged anything since the last look, with a summary of the
 * reports (kind, kernel, first source line, how many). The source lines
 * are those of the program clpa built (clpa_codes.h, then the family's
 * parts and file, as lib/kernels.h lists them), not of one cl/ file. */
static int oclgrind_quiet(const char *call) {
  const int finished = clpa_context_finish(ctx) == CLPA_OK;
  if (!og_log) return finished;
  og_reports r;
  if (!og_read(&r)) return ok(0, "%s: oclgrind's log %s opens", call, og_log);
  const int quiet = ok(finished && r.lines == 0, "%s: no oclgrind report (%d)", call, r.reports);
  og_show(call, &r);
  return quiet;
}

/* Proof that the job can fail: a kernel with a data race (every work-item
 * writes its own id to p[0]), a use of an uninitialised value (u is never
 * written) and a write past its buffer (p holds one int) must draw the
 * reports of the checks oclgrind runs: out-of-bounds always, the others
 * where OCLGRIND_DATA_RACES and OCLGRIND_UNINITIALIZED (its launcher sets
 * them) say so. */
static void oclgrind_canary(void) {
  static const char *src = "__kernel void canary(__global int *p, __global const int *u) {\n"
                           "  p[0] = (int)get_global_id(0) + u[0];\n"
                           "  if (get_global_id(0) == 0) p[1] = 0;\n"
                           "}\n";
  cl_context cl = clpa_context_cl_context(ctx);
  cl_device_id dev = clpa_context_cl_device(ctx);
  cl_int err;
  cl_program prog = clCreateProgramWithSource(cl, 1, &src, NULL, &err);
  if (err == CL_SUCCESS) err = clBuildProgram(prog, 1, &dev, "", NULL, NULL);
  cl_kernel k = err == CL_SUCCESS ? clCreateKernel(prog, "canary", &err) : NULL;
  cl_mem p = test_buffer(ctx, NULL, 4), u = test_buffer(ctx, NULL, 4);
  const size_t n = 16;
  if (err == CL_SUCCESS) err = clSetKernelArg(k, 0, sizeof p, &p);
  if (err == CL_SUCCESS) err = clSetKernelArg(k, 1, sizeof u, &u);
  if (err == CL_SUCCESS)
    err = clEnqueueNDRangeKernel(clpa_context_cl_queue(ctx), k, 1, NULL, &n, &n, 0, NULL, NULL);
  if (err == CL_SUCCESS) err = clFinish(clpa_context_cl_queue(ctx));
  ok(err == CL_SUCCESS, "canary: the racy kernel ran (%d)", err);
  og_reports r;
  og_read(&r);
  int races = 0, uninit = 0, oob = 0;
  for (int i = 0; i < r.num_kinds; i++) {
    races |= strstr(r.kinds[i].what, "data race") != NULL;
    uninit |= strstr(r.kinds[i].what, "ninitialized") != NULL;
    oob |= strstr(r.kinds[i].what, "Invalid write") != NULL;
  }
  ok(oob, "canary: oclgrind reports its write past the buffer");
  const char *e_races = getenv("OCLGRIND_DATA_RACES"), *e_uninit = getenv("OCLGRIND_UNINITIALIZED");
  const int want_races = e_races && *e_races == '1', want_uninit = e_uninit && *e_uninit == '1';
  if (want_races) ok(races, "canary: oclgrind reports its data race");
  if (want_uninit) ok(uninit, "canary: oclgrind reports its uninitialised value");
  if (!oob || (want_races && !races) || (want_uninit && !uninit)) og_show("canary", &r);
  release_later(p), release_later(u);
  if (k) clReleaseKernel(k);
  if (prog) clReleaseProgram(prog);
}

/* ---- checks ---- */


static cl_mem poisoned_buffer(size_t bytes) {
  cl_mem m = test_buffer(ctx, NULL, bytes);
  test_poison(ctx, m, bytes);
  return m;
}

/* Reads n floats of m and compares them with want; one point. */
static int check_floats(const char *call, const char *what, cl_mem m, const double *want,
                        size_t n, double atol, double rtol) {
  float *got = xmalloc(sizeof(float) * n);
  test_read(ctx, m, got, sizeof(float) * n);
  size_t at;
  const double worst = test_worst(got, want, n, atol, rtol, &at);
  const int good = ok(worst <= 1.0, "%s: %s within %g / %g (worst %.3g of it)", call, what, atol,
                      rtol, worst);
  if (!good)
    diag("%s: worst %s element %zu: got %.9g want %.9g", call, what, at, got[at], want[at]);
  free(got);
  return good;
}

/* The queries as the mma paths see them: rounded to the cache's f16. */
static float *rounded(const float *src, size_t n, int round) {
  float *r = xmalloc(sizeof(float) * n);
  memcpy(r, src, sizeof(float) * n);
  if (round) {
    void *t = xmalloc(2 * n);
    clpa_dtype_encode(F16, r, t, n, 1.0f);
    clpa_dtype_decode(F16, t, r, n, 1.0f);
    free(t);
  }
  return r;
}

/* Decode's answer for the scene, into want [SEQS][HEADS][HS] and want_lse. */
static void ref_decode(int round_q, double *want, double *want_lse) {
  float *qr = rounded(q, SEQS * QROW, round_q);
  const clpa_ref_decode_args a = {.num_seqs = SEQS, .num_heads = HEADS, .kv = kv,
                                  .max_blocks_per_seq = MAX_BLOCKS, .query = qr,
                                  .q_stride = QROW, .key_cache = kf, .value_cache = vf,
                                  .block_tables = &tables[0][0], .context_lens = lens,
                                  .scale = 0.125f, .out = want, .lse = want_lse};
  if (clpa_ref_decode(&a) != CLPA_OK) BAIL_OUT("reference decode: %s", clpa_last_error());
  free(qr);
}

static void decode_params(clpa_decode_params *p, cl_mem out, cl_mem lse) {
  clpa_decode_params_init(p);
  p->num_seqs = SEQS, p->num_heads = HEADS, p->cache = cache, p->layer = 0;
  p->max_blocks_per_seq = MAX_BLOCKS, p->max_context_len = lens[0], p->q_dtype = CLPA_DTYPE_F32;
  p->scale = 0.125f, p->query = d_q, p->block_tables = d_tables, p->context_lens = d_lens;
  p->out = out, p->lse = lse;
}

/* ---- the calls ---- */

static void call_decode(const char *call, clpa_decode_path path, clpa_decode_variant variant) {
  const int mma = path == CLPA_DECODE_PATH_MMA;
  const size_t n = (size_t)SEQS * QROW, nl = (size_t)SEQS * HEADS;
  cl_mem out = poisoned_buffer(4 * n), lse = poisoned_buffer(4 * nl);
  clpa_decode_params p;
  decode_params(&p, out, lse);
  p.path = path, p.variant = variant, p.partition_size = variant == CLPA_DECODE_V2 ? PART : 0;
  clpa_decode_path got_path = CLPA_DECODE_PATH_AUTO;
  clpa_decode_variant got_variant = CLPA_DECODE_AUTO;
  int32_t got_part = -1;
  const clpa_status ch = clpa_decode_choice(ctx, &p, &got_path, &got_variant, &got_part, NULL);
  if (!ok(ch == CLPA_OK && got_path == path && got_variant == variant &&
              got_part == (variant == CLPA_DECODE_V2 ? PART : 0),
          "%s: the plan is path %d, v%d, partition %d", call, (int)got_path, (int)got_variant,
          (int)got_part))
    diag("%s: %s", call, clpa_context_last_error(ctx));
  const clpa_status st = clpa_decode(ctx, &p);
  ok(st == CLPA_OK, "%s: clpa_decode %s", call, st ? clpa_context_last_error(ctx) : "ok");
  oclgrind_quiet(call);
  test_no_faults(ctx, call);
  double *want = xmalloc(sizeof(double) * n), *want_lse = xmalloc(sizeof(double) * nl);
  ref_decode(mma, want, want_lse);
  check_floats(call, "out", out, want, n, mma ? 1e-3 : 1e-4, mma ? 2e-3 : 1e-4);
  check_floats(call, "lse", lse, want_lse, nl, 1e-4, 1e-5);
  free(want), free(want_lse);
  release_later(out), release_later(lse);
}

/* p over the scene's cache and queries (pq) for the given sequences and
 * device table rows, with poisoned out and lse buffers of their rows. */
static void prefill_params(clpa_prefill_params *p, int32_t seqs, int32_t max_blocks,
                           const int32_t *cu, const int32_t *cached_lens, cl_mem tables_dev,
                           clpa_prefill_path path) {
  const size_t nq = (size_t)cu[seqs];
  clpa_prefill_params_init(p);
  p->num_seqs = seqs, p->num_heads = HEADS, p->cache = cache, p->layer = 0;
  p->max_blocks_per_seq = max_blocks, p->cu_seqlens_q = cu, p->cached_lens = cached_lens;
  p->q_dtype = CLPA_DTYPE_F32, p->scale = 0.125f, p->query = d_pq, p->block_tables = tables_dev;
  p->out = poisoned_buffer(4 * nq * QROW), p->lse = poisoned_buffer(4 * nq * HEADS);
  p->path = path;
}

/* Runs p (no oclgrind report, no fault), then checks its out and lse
 * (then kept for release) against the reference over p's sequences (host
 * table rows `tables_host`); the mma path's tolerance where p takes it. */
static void run_prefill(const char *call, const clpa_prefill_params *p,
                        const int32_t *tables_host) {
  const clpa_status st = clpa_prefill(ctx, p);
  ok(st == CLPA_OK, "%s: clpa_prefill %s", call, st ? clpa_context_last_error(ctx) : "ok");
  oclgrind_quiet(call);
  test_no_faults(ctx, call);
  const int mma = p->path == CLPA_PREFILL_MMA;
  const int32_t nq = p->cu_seqlens_q[p->num_seqs];
  const size_t n = (size_t)nq * QROW, nl = (size_t)nq * HEADS;
  double *want = xmalloc(sizeof(double) * n), *want_lse = xmalloc(sizeof(double) * nl);
  float *qr = rounded(pq, n, mma);
  const clpa_ref_prefill_args a = {.num_seqs = p->num_seqs, .num_heads = HEADS, .kv = kv,
                                   .max_blocks_per_seq = p->max_blocks_per_seq, .query = qr,
                                   .q_stride = QROW, .cu_seqlens_q = p->cu_seqlens_q,
                                   .cached_lens = p->cached_lens, .key_cache = kf,
                                   .value_cache = vf, .block_tables = tables_host,
                                   .scale = 0.125f, .causal = 1, .out = want, .lse = want_lse};
  if (clpa_ref_prefill(&a) != CLPA_OK) BAIL_OUT("reference prefill: %s", clpa_last_error());
  check_floats(call, "out", p->out, want, n, mma ? 1e-3 : 1e-4, mma ? 2e-3 : 1e-4);
  check_floats(call, "lse", p->lse, want_lse, nl, 1e-4, 1e-5);
  free(qr), free(want), free(want_lse);
  release_later(p->out), release_later(p->lse);
}

static void call_prefill(const char *call, clpa_prefill_path path) {
  clpa_prefill_params p;
  prefill_params(&p, SEQS, MAX_BLOCKS, cu_seqlens, cached, d_tables, path);
  clpa_prefill_path got_path = CLPA_PREFILL_AUTO;
  const clpa_status ch = clpa_prefill_choice(ctx, &p, &got_path, NULL, NULL);
  if (!ok(ch == CLPA_OK && got_path == path, "%s: the plan is path %d", call, (int)got_path))
    diag("%s: %s", call, clpa_context_last_error(ctx));
  run_prefill(call, &p, &tables[0][0]);
}

/* A mixed step (the scene's blocks, a table of its own): two decode rows
 * first (one token over 149 cached, the table repeating blocks, and one over
 * 49), then sequence 1's last 5 tokens over its 32 cached. split > 0: every
 * row on prefill's kernel, the first decode row cut in parts of `split` keys
 * (merged by clpa_prefill_merge; a first part of 128 keys is 8 whole blocks,
 * the rows path's step without tests); route: the two decode rows on
 * decode's kernel and plan, the rest on `path`. */
enum { MIX_SEQS = 3, MIX_BLOCKS = 10 };
#define NO_BLOCK 0x7fff0000 /* past the context: never read */
static const int32_t mix_tables[MIX_SEQS][MIX_BLOCKS] = {
    {7, 2, 5, 9, 2, 7, 9, 5, 2, 7},
    {7, 2, 5, 9, NO_BLOCK, NO_BLOCK, NO_BLOCK, NO_BLOCK, NO_BLOCK, NO_BLOCK},
    {7, 2, 9, NO_BLOCK, NO_BLOCK, NO_BLOCK, NO_BLOCK, NO_BLOCK, NO_BLOCK, NO_BLOCK}};
static const int32_t mix_cu[MIX_SEQS + 1] = {0, 1, 2, 7}, mix_cached[MIX_SEQS] = {149, 49, 32};

static void call_mixed(const char *call, clpa_prefill_path path, int32_t split, int route) {
  cl_mem d_mix = test_buffer(ctx, mix_tables, sizeof mix_tables);
  clpa_prefill_params p;
  prefill_params(&p, MIX_SEQS, MIX_BLOCKS, mix_cu, mix_cached, d_mix, path);
  p.split_keys = split ? split : -1, p.decode_rows_kernel = route ? 1 : -1;
  clpa_plan *plan = NULL;
  clpa_plan_info info;
  memset(&info, 0, sizeof info);
  const int planned = clpa_plan_prefill(ctx, &p, &plan) == CLPA_OK &&
                      clpa_plan_describe(plan, &info) == CLPA_OK;
  if (!ok(planned && info.path == (int32_t)path && info.split_rows == (split ? 1 : 0) &&
              info.decode_rows == (route ? 2 : 0),
          "%s: the plan: path %d, %d rows split, %d decode rows on decode's kernel", call,
          (int)info.path, (int)info.split_rows, (int)info.decode_rows))
    diag("%s: %s", call, clpa_context_last_error(ctx));
  clpa_plan_release(plan);
  /* split parts are written in the io dtype (f32 here) before their merge: no wider tolerance */
  run_prefill(call, &p, &mix_tables[0][0]);
  release_later(d_mix);
}

static void call_merge(const char *call) {
  enum { R = 8, N = R * HS };
  float o[2][N], l[2][R];
  double od[2][N], ld[2][R], want[N], want_lse[R];
  for (int i = 0; i < 2; i++) {
    for (int e = 0; e < N; e++) od[i][e] = o[i][e] = (float)rng_uniform(-1, 1);
    for (int r = 0; r < R; r++) ld[i][r] = l[i][r] = (float)rng_uniform(-1, 3);
  }
  ld[0][3] = l[0][3] = -INFINITY; /* an empty key set */
  if (clpa_ref_merge_states(R, HS, od[0], ld[0], od[1], ld[1], want, want_lse) != CLPA_OK)
    BAIL_OUT("reference merge: %s", clpa_last_error());
  clpa_merge_states_params p;
  clpa_merge_states_params_init(&p);
  p.num_rows = R, p.head_size = HS, p.num_inputs = 2;
  for (int i = 0; i < 2; i++) {
    p.outs[i] = test_buffer(ctx, o[i], sizeof o[i]);
    p.lses[i] = test_buffer(ctx, l[i], sizeof l[i]);
  }
  p.out = poisoned_buffer(sizeof o[0]), p.lse = poisoned_buffer(sizeof l[0]);
  const clpa_status st = clpa_merge_states(ctx, &p);
  ok(st == CLPA_OK, "%s: clpa_merge_states %s", call, st ? clpa_context_last_error(ctx) : "ok");
  oclgrind_quiet(call);
  check_floats(call, "out", p.out, want, N, 1e-5, 1e-5);
  check_floats(call, "lse", p.lse, want_lse, R, 1e-5, 1e-5);
  cl_mem all[] = {p.outs[0], p.outs[1], p.lses[0], p.lses[1], p.out, p.lse};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) release_later(all[i]);
}

static void call_cascade(const char *call) {
  const size_t n = (size_t)SEQS * QROW, nl = (size_t)SEQS * HEADS;
  cl_mem out = poisoned_buffer(4 * n), lse = poisoned_buffer(4 * nl);
  clpa_cascade_params p;
  clpa_cascade_params_init(&p);
  decode_params(&p.decode, out, lse);
  const int32_t starts[2] = {0, SEQS}, shared[1] = {SHARED};
  p.num_groups = 1, p.group_starts = starts, p.shared_blocks = shared;
  clpa_decode_path path = CLPA_DECODE_PATH_AUTO;
  clpa_decode_variant variant = CLPA_DECODE_AUTO;
  clpa_decode_choice(ctx, &p.decode, &path, &variant, NULL, NULL);
  diag("%s: the suffixes' decode on path %d, v%d", call, (int)path, (int)variant);
  const clpa_status st = clpa_cascade_decode(ctx, &p);
  ok(st == CLPA_OK, "%s: clpa_cascade_decode %s", call, st ? clpa_context_last_error(ctx) : "ok");
  oclgrind_quiet(call);
  test_no_faults(ctx, call);
  double *want = xmalloc(sizeof(double) * n), *want_lse = xmalloc(sizeof(double) * nl);
  ref_decode(0, want, want_lse);
  check_floats(call, "out", out, want, n, 1e-4, 1e-4);
  check_floats(call, "lse", lse, want_lse, nl, 1e-4, 1e-5);
  free(want), free(want_lse);
  release_later(out), release_later(lse);
}

static void call_copy_blocks(const char *call) {
  const clpa_block_copy pair = {5, 3}; /* a used block to a spare one */
  clpa_copy_blocks_params p;
  clpa_copy_blocks_params_init(&p);
  p.cache = cache, p.num_pairs = 1, p.pairs = &pair;
  const clpa_status st = clpa_copy_blocks(ctx, &p);
  ok(st == CLPA_OK, "%s: clpa_copy_blocks %s", call, st ? clpa_context_last_error(ctx) : "ok");
  oclgrind_quiet(call);
  test_no_faults(ctx, call);
  int same = 1;
  for (int c = 0; c < 2; c++) {
    unsigned char *h = xmalloc(kv.cache_bytes);
    test_read(ctx, c ? clpa_cache_value(cache, 0) : clpa_cache_key(cache, 0), h, kv.cache_bytes);
    same &= !memcmp(h + kv.block_bytes * 3, h + kv.block_bytes * 5, kv.block_bytes);
    free(h);
  }
  ok(same, "%s: block 3 is block 5, keys and values", call);
}

static void call_xattn(const char *call, clpa_xattn_path path) {
  /* Its own key cache, smaller than the scene's: the emulated mma tile
   * (64 strided rows, 64 columns, 128 work-items) is oclgrind's slowest. */
  /* NQ and NK are not multiples of S: the last strided group is padding,
   * which the kernels must not read. The query buffer and the block table
   * end where the tokens do, so a read of the padding is out of bounds
   * (reported by oclgrind); the slots past NK hold NaN. */
  enum { XH = 2, XKV = 1, XD = 32, S = 4, B = 32, NQ = 30, QOFF = 32 };
  enum { NK = QOFF + NQ, NT = (NK + BS - 1) / BS, NB = NT + 1, XROW = XH * XD };
  clpa_kv_layout xl;
  if (clpa_kv_layout_init(&xl, F16, NB, BS, XKV, XD) != CLPA_OK)
    BAIL_OUT("layout: %s", clpa_last_error());
  const size_t elems = xl.block_stride * NB, nqe = (size_t)NQ * XROW;
  int32_t table[NT]; /* blocks in reverse; the spare (block 0) NaN, never read */
  for (int b = 0; b < NT; b++) table[b] = NB - 1 - b;
  float *k = xmalloc(sizeof(float) * elems), *xq = xmalloc(sizeof(float) * nqe);
  for (size_t i = 0; i < elems; i++)
    k[i] = i < xl.block_stride ? NAN : (float)rng_uniform(-1.5, 1.5);
  for (int j = NK; j < NT * BS; j++)
    for (int d = 0; d < XD; d++) k[clpa_kv_key_index(&xl, table[j / BS], 0, j % BS, d)] = NAN;
  for (size_t i = 0; i < nqe; i++) xq[i] = (float)rng_uniform(-2, 2);
  void *kst = xmalloc(2 * elems);
  clpa_dtype_encode(F16, k, kst, elems, 1.0f);
  clpa_dtype_decode(F16, kst, k, elems, 1.0f);
  const clpa_ref_xattn_shape sh = {NQ, NK, QOFF, XD, S, B};
  clpa_ref_xattn_dims dims;
  if (clpa_ref_xattn_dims_get(&sh, &dims) != CLPA_OK) BAIL_OUT("shape: %s", clpa_last_error());
  const size_t nb = (size_t)dims.q_blocks * dims.k_blocks, n = nb * XH;
  double *want = xmalloc(sizeof(double) * n);
  uint8_t *want_mask = xmalloc(n), *got_mask = xmalloc(n);
  float *qr = rounded(xq, nqe, path == CLPA_XATTN_MMA), *qh = xmalloc(sizeof(float) * NQ * XD);
  float *kh = xmalloc(sizeof(float) * NK * XD);
  for (int h = 0; h < XH; h++) {
    for (int i = 0; i < NQ; i++) memcpy(qh + i * XD, qr + (size_t)i * XROW + h * XD, 4 * XD);
    for (int j = 0; j < NK; j++)
      for (int d = 0; d < XD; d++)
        kh[j * XD + d] = k[clpa_kv_key_index(&xl, table[j / BS], h / (XH / XKV), j % BS, d)];
    if (clpa_ref_xattn_estimate_dense(&sh, qh, kh, 0.9, want + h * nb, want_mask + h * nb, NULL))
      BAIL_OUT("reference xattn: %s", clpa_last_error());
  }
  cl_mem dk = test_buffer(ctx, kst, 2 * elems), dt = test_buffer(ctx, table, sizeof table);
  cl_mem dq = test_buffer(ctx, xq, 4 * nqe);
  cl_mem mask = poisoned_buffer(n), mass = poisoned_buffer(4 * n);
  clpa_xattn_params p;
  clpa_xattn_params_init(&p);
  p.num_heads = XH, p.key_cache = dk, p.kv = xl, p.block_table = dt, p.max_blocks_per_seq = NT;
  p.query = dq, p.num_q = NQ, p.q_offset = QOFF, p.stride = S, p.block = B, p.chunk = B;
  p.mask = mask, p.mass = mass, p.path = path;
  const clpa_status st = clpa_xattn_estimate(ctx, &p);
  ok(st == CLPA_OK, "%s: clpa_xattn_estimate %s", call, st ? clpa_context_last_error(ctx) : "ok");
  oclgrind_quiet(call);
  test_no_faults(ctx, call);
  check_floats(call, "masses", mass, want, n, 1e-6, 1e-4);
  test_read(ctx, mask, got_mask, n);
  ok(!memcmp(got_mask, want_mask, n), "%s: the mask is the reference's", call);
  cl_mem all[] = {dk, dt, dq, mask, mass};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) release_later(all[i]);
  free(k), free(xq), free(kst), free(want), free(want_mask), free(got_mask), free(qr), free(qh);
  free(kh);
}

/* ---- the scene ---- */

/* The cache, zeroed, then every token's K/V written through the slots
 * (the shared blocks once, with a padding slot among them). */
static void make_scene(void) {
  clpa_cache_config cc;
  clpa_cache_config_init(&cc);
  cc.num_kv_heads = KV_HEADS, cc.head_size = HS, cc.block_size = BS, cc.dtype = F16;
  cc.num_blocks = NUM_BLOCKS;
  clpa_status st = clpa_cache_create(ctx, &cc, &cache);
  if (!ok(st == CLPA_OK, "cache_create: %s", st ? clpa_last_error() : "ok")) BAIL_OUT("no cache");
  oclgrind_quiet("cache_create");
  clpa_cache_get_layout(cache, &kv);
  const size_t elems = kv.block_stride * NUM_BLOCKS;
  unsigned char *zero = xmalloc(kv.cache_bytes), *h = xmalloc(kv.cache_bytes);
  int zeroed = 1;
  for (int c = 0; c < 2; c++) {
    test_read(ctx, c ? clpa_cache_value(cache, 0) : clpa_cache_key(cache, 0), h, kv.cache_bytes);
    zeroed &= !memcmp(h, zero, kv.cache_bytes);
  }
  ok(zeroed, "cache_create: keys and values are zero");

  enum { T = 50 + (37 - SHARED * BS) + 1 }; /* sequence 0, sequence 1's own, a padding row */
  float *key = xmalloc(sizeof(float) * T * ROW), *val = xmalloc(sizeof(float) * T * ROW);
  int64_t slots[T];
  int t = 0;
  for (int s = 0; s < SEQS; s++)
    for (int j = s ? SHARED * BS : 0; j < lens[s]; j++) {
      if (t == 20) slots[t++] = -1; /* padding: skipped */
      slots[t++] = (int64_t)tables[s][j / BS] * BS + j % BS;
    }
  if (t != T) BAIL_OUT("scene: %d rows, not %d", t, (int)T);
  for (size_t i = 0; i < (size_t)T * ROW; i++)
    key[i] = (float)rng_uniform(-1.5, 1.5), val[i] = (float)rng_uniform(-2, 2);
  /* the host's caches: f16 rows through the reference scatter */
  kf = xmalloc(sizeof(float) * elems), vf = xmalloc(sizeof(float) * elems);
  float *kr = rounded(key, (size_t)T * ROW, 1), *vr = rounded(val, (size_t)T * ROW, 1);
  const clpa_ref_cache_args ra = {.num_tokens = T, .kv = kv, .key = kr, .key_stride = ROW,
                                  .value = vr, .value_stride = ROW, .slot_mapping = slots,
                                  .key_cache = kf, .value_cache = vf};
  if (clpa_ref_reshape_and_cache(&ra) != CLPA_OK) BAIL_OUT("reference: %s", clpa_last_error());
  cl_mem dk = test_buffer(ctx, key, sizeof(float) * T * ROW);
  cl_mem dv = test_buffer(ctx, val, sizeof(float) * T * ROW);
  cl_mem ds = test_buffer(ctx, slots, sizeof slots);
  clpa_reshape_and_cache_params p;
  clpa_reshape_and_cache_params_init(&p);
  p.cache = cache, p.num_tokens = T, p.key = dk, p.value = dv, p.slot_mapping = ds;
  st = clpa_reshape_and_cache(ctx, &p);
  ok(st == CLPA_OK, "reshape: clpa_reshape_and_cache %s", st ? clpa_context_last_error(ctx) : "ok");
  oclgrind_quiet("reshape");
  test_no_faults(ctx, "reshape");
  int same = 1;
  for (int c = 0; c < 2; c++) {
    clpa_dtype_encode(F16, c ? vf : kf, zero, elems, 1.0f);
    test_read(ctx, c ? clpa_cache_value(cache, 0) : clpa_cache_key(cache, 0), h, kv.cache_bytes);
    same &= !memcmp(h, zero, kv.cache_bytes);
  }
  ok(same, "reshape: the caches hold the reference's bytes");
  release_later(dk), release_later(dv), release_later(ds);
  free(key), free(val), free(kr), free(vr), free(zero), free(h);

  for (size_t i = 0; i < sizeof q / sizeof *q; i++) q[i] = (float)rng_uniform(-1, 1);
  for (size_t i = 0; i < sizeof pq / sizeof *pq; i++) pq[i] = (float)rng_uniform(-1, 1);
  d_q = test_buffer(ctx, q, sizeof q), d_pq = test_buffer(ctx, pq, sizeof pq);
  d_tables = test_buffer(ctx, tables, sizeof tables), d_lens = test_buffer(ctx, lens, sizeof lens);
}

static const char *const calls[] = {
    "smoke",       "copy_blocks",  "decode_v1",     "decode_v2",   "decode_mma",
    "decode_rows", "prefill_tiles", "prefill_rows", "prefill_mma", "merge",
    "cascade",     "xattn",        "xattn_mma",    "prefill_split_tiles", "prefill_split_rows",
    "prefill_split_mma", "prefill_mixed"};
#define NCALLS (sizeof calls / sizeof *calls)

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void run(const char *call) {
  const double t0 = now();
  if (!strcmp(call, "smoke")) {
    const clpa_status st = clpa_smoke_test(ctx, 100);
    ok(st == CLPA_OK, "smoke: clpa_smoke_test %s", st ? clpa_context_last_error(ctx) : "ok");
    oclgrind_quiet(call);
  } else if (!strcmp(call, "copy_blocks")) {
    call_copy_blocks(call);
  } else if (!strcmp(call, "decode_v1")) {
    call_decode(call, CLPA_DECODE_PATH_LANES, CLPA_DECODE_V1);
  } else if (!strcmp(call, "decode_v2")) {
    call_decode(call, CLPA_DECODE_PATH_LANES, CLPA_DECODE_V2);
  } else if (!strcmp(call, "decode_mma")) {
    call_decode(call, CLPA_DECODE_PATH_MMA, CLPA_DECODE_V2);
  } else if (!strcmp(call, "decode_rows")) {
    call_decode(call, CLPA_DECODE_PATH_ROWS, CLPA_DECODE_V2);
  } else if (!strcmp(call, "prefill_tiles")) {
    call_prefill(call, CLPA_PREFILL_TILES);
  } else if (!strcmp(call, "prefill_rows")) {
    call_prefill(call, CLPA_PREFILL_ROWS);
  } else if (!strcmp(call, "prefill_mma")) {
    call_prefill(call, CLPA_PREFILL_MMA);
  } else if (!strcmp(call, "prefill_split_tiles")) {
    call_mixed(call, CLPA_PREFILL_TILES, 128, 0);
  } else if (!strcmp(call, "prefill_split_rows")) {
    call_mixed(call, CLPA_PREFILL_ROWS, 128, 0);
  } else if (!strcmp(call, "prefill_split_mma")) {
    call_mixed(call, CLPA_PREFILL_MMA, 128, 0);
  } else if (!strcmp(call, "prefill_mixed")) {
    call_mixed(call, CLPA_PREFILL_MMA, 0, 1);
  } else if (!strcmp(call, "merge")) {
    call_merge(call);
  } else if (!strcmp(call, "cascade")) {
    call_cascade(call);
  } else if (!strcmp(call, "xattn")) {
    call_xattn(call, CLPA_XATTN_F32);
  } else if (!strcmp(call, "xattn_mma")) {
    call_xattn(call, CLPA_XATTN_MMA);
  }
  diag("%s: %.1f s", call, now() - t0);
}

int main(int argc, char **argv) {
  int require = 0, first = 1;
  if (argc > 1 && !strcmp(argv[1], "--oclgrind")) require = 1, first = 2;
  for (int i = first; i < argc; i++) {
    size_t c = 0;
    while (c < NCALLS && strcmp(calls[c], argv[i])) c++;
    if (c == NCALLS) {
      fprintf(stderr, "unknown call '%s'; the calls:", argv[i]);
      for (c = 0; c < NCALLS; c++) fprintf(stderr, " %s", calls[c]);
      fprintf(stderr, "\n");
      return 2;
    }
  }
  rng_seed_from_env();
  og_log = getenv("OCLGRIND_LOG");
  if (og_log && !*og_log) og_log = NULL;
  if (require && !og_log)
    BAIL_OUT("--oclgrind: OCLGRIND_LOG is not set (run under oclgrind --log FILE)");
  /* Programs are built for the options oclgrind adds (-cl-opt-disable and
   * the like) without clpa knowing: never load or store binaries. */
  clpa_context_config cfg;
  clpa_context_config_init(&cfg);
  cfg.binary_cache = 0;
  if (clpa_context_create(&cfg, &ctx) != CLPA_OK) BAIL_OUT("context: %s", clpa_last_error());
  clpa_device_info info;
  clpa_context_device_info(ctx, &info);
  diag("device %s (%s), lanes %s; oclgrind log %s", info.name, info.platform_name,
       clpa_lanes_name(info.lanes), og_log ? og_log : "none (not under oclgrind)");
  if (require && !ok(strstr(info.platform_name, "Oclgrind") != NULL, "the device is oclgrind's"))
    BAIL_OUT("not on oclgrind");
  if (og_log) {
    oclgrind_quiet("setup"); /* anything logged before the first call */
    oclgrind_canary();
  }
  const double t0 = now();
  make_scene();
  diag("cache_create, reshape: %.1f s", now() - t0);
  for (size_t c = 0; c < NCALLS; c++) {
    int chosen = argc <= first;
    for (int i = first; i < argc; i++) chosen |= !strcmp(calls[c], argv[i]);
    if (chosen) run(calls[c]);
  }
  release_later(d_q), release_later(d_pq), release_later(d_tables), release_later(d_lens);
  for (int i = 0; i < num_kept; i++) clReleaseMemObject(kept[i]);
  clpa_cache_destroy(cache);
  free(kf), free(vf);
  return test_context_done(ctx);
}
