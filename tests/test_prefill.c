/*
 * Prefill (cl/prefill*.cl) against clpa_ref_prefill on fresh random
 * inputs: variable-length batches over cached prefixes (none, part of a
 * block, many blocks), new_len 0 and 1, GQA/MQA, every option, causal and
 * not, every head size, block size and KV dtype, f32/f16/bf16 queries,
 * forced tile shapes; outputs poisoned first, unused cache slots NaN,
 * unused table entries far outside the cache, blocks shared between
 * sequences. Then the identities an engine relies on, on the device:
 * chunked prefill (1, 2, 7 chunks) equals one-shot prefill; one new token
 * equals decode; merge_states over a split key set equals attention over
 * the whole. Bad block ids set the fault bit; bad arguments are refused
 * with nothing written.
 *
 * Tolerances (|got - want| <= atol + rtol |want|): the reference reads the
 * same stored values, so what remains is f32 arithmetic in a different
 * order (online softmax), and the rounding of the stored output:
 *   f32 1e-4 / 1e-4,  f16 1e-3 / 2e-3,  bf16 4e-3 / 8e-3,  lse 1e-4 / 1e-5
 * On the mma path, also the rounding of P to the cache's dtype
 * (tolerance_for).
 *
 * The HND and NHD cache layouts (test_layouts): a few grid cases on the
 * tiles and rows paths and the automatic choice, and two on the mma path,
 * same tolerances; `--layouts` the mma path over head sizes from 32 to
 * 256 and its page sizes (8 to 32) in both layouts.
 */
#include <stdio.h>

#include "clpa_xattn.h"
#include "cl_util.h"
#include "attn_scene.h"
#include "ref_attention.h"

static const struct {
  clpa_dtype io;
  double atol, rtol;
} tolerance[] = {{CLPA_DTYPE_F32, 1e-4, 1e-4}, {CLPA_DTYPE_F16, 1e-3, 2e-3},
                 {CLPA_DTYPE_BF16, 4e-3, 8e-3}};
#define LSE_ATOL 1e-4
#define LSE_RTOL 1e-5

typedef struct pcase {
  int seqs, heads, kv_heads, hs, bs, max_new, max_cached;
  clpa_dtype kv, io;
  int rows, keys; /* tiles path: 0 = auto (the rows path picks its own count per case) */
  int causal, alibi, window, softcap, sinks, lse, q_pad, dev_scale;
} pcase;

static clpa_context *ctx;
static clpa_kv_layout_kind layout = CLPA_KV_LAYOUT_SPLIT_KEY; /* of the scenes' caches */
static int pitch_gap; /* of the scenes' caches: elements between blocks (attn_scene_spec) */

static void describe(const pcase *c, char *buf, size_t cap) {
  const int n = snprintf(buf, cap,
           "%sseqs %d heads %d/%d hs %d bs %d new<=%d cached<=%d kv %s io %s tile %dx%d%s%s%s%s%s%s%s%s",
           layout == CLPA_KV_LAYOUT_HND ? "hnd " : layout == CLPA_KV_LAYOUT_NHD ? "nhd " : "",
           c->seqs, c->heads, c->kv_heads, c->hs, c->bs, c->max_new, c->max_cached,
           clpa_dtype_name(c->kv), clpa_dtype_name(c->io), c->rows, c->keys,
           c->causal ? " causal" : " full", c->alibi ? " alibi" : "", c->window ? " window" : "",
           c->softcap ? " softcap" : "", c->sinks ? " sinks" : "", c->lse ? " lse" : "",
           c->q_pad ? " q_stride" : "", c->dev_scale ? " device scales" : "");
  if (pitch_gap && n > 0 && (size_t)n < cap)
    snprintf(buf + n, cap - (size_t)n, " pitch +%d", pitch_gap);
}

/* A case's scene (attn_scene.h) over the given lengths. */
static void scene_of(const pcase *c, const int32_t *lens, const int32_t *cached, attn_scene *sc) {
  const attn_scene_spec sp = {.seqs = c->seqs, .heads = c->heads, .kv_heads = c->kv_heads,
                              .head_size = c->hs, .block_size = c->bs, .kv = c->kv, .io = c->io,
                              .lens = lens, .cached = cached, .q_pad = c->q_pad ? 24 : 0,
                              .q_amp = 2.0, .alibi = c->alibi, .sinks = c->sinks,
                              .softcap = c->softcap,
                              .window_max = c->window ? c->max_new + c->max_cached : 0,
                              .layout = layout, .pitch_gap = pitch_gap};
  attn_scene_build(sc, &sp);
}

/* Set while cases run as a mixed step with split decode rows (test_splits):
 * split_keys forced to this, and make_scene's batch a mixed step's; or
 * (route) with its leading decode rows on decode's kernel. */
static int32_t split;
static int route;

/* A case's scene: the first sequence at both maxima, the second without
 * a prefix, the third with one new token, the fourth with none, the
 * fifth's prefix ending mid-block; the others anywhere up to the maxima.
 * With `split`, a mixed step: decode rows (one or two new tokens) over
 * 150 to 549 cached ones, one with none cached, a prefill chunk second
 * (the case's maxima), none in the sixth. */
static void make_scene(const pcase *c, attn_scene *sc) {
  const int bs = c->bs;
  int32_t *lens = malloc(sizeof(int32_t) * (size_t)c->seqs);
  int32_t *cached = malloc(sizeof(int32_t) * (size_t)c->seqs);
  for (int s = 0; split && s < c->seqs; s++) {
    int n = s == 2 ? 2 : 1, k = 150 + (int)rng_below(400);
    if (s == 1) n = c->max_new, k = (int)rng_below((uint32_t)c->max_cached + 1);
    if (s == 3) k = 0;
    if (s == 5) n = 0;
    cached[s] = k, lens[s] = k + n;
  }
  /* route: three leading decode rows (one with nothing cached), a chunk, a decode row after it */
  for (int s = 0; route && s < c->seqs; s++) {
    int n = 1, k = s == 2 ? 0 : 150 + (int)rng_below(400);
    if (s == 3) n = c->max_new, k = (int)rng_below((uint32_t)c->max_cached + 1);
    if (s == 5) n = 0;
    cached[s] = k, lens[s] = k + n;
  }
  for (int s = 0; !split && !route && s < c->seqs; s++) {
    int n = (int)rng_below((uint32_t)c->max_new + 1), k = (int)rng_below((uint32_t)c->max_cached + 1);
    if (s == 0) n = c->max_new, k = c->max_cached;
    if (s == 1) k = 0;                      /* no prefix */
    if (s == 2) n = 1;                      /* one new token */
    if (s == 3) n = 0;                      /* nothing to do */
    if (s == 4 && c->max_cached > bs) k = bs * (c->max_cached / bs / 2) + bs / 2; /* mid-block */
    cached[s] = k, lens[s] = k + n;
  }
  scene_of(c, lens, cached, sc);
  free(lens), free(cached);
}

static clpa_ref_prefill_args ref_args(const pcase *c, const attn_scene *in, double *out, double *lse) {
  clpa_ref_prefill_args a;
  memset(&a, 0, sizeof a);
  a.num_seqs = c->seqs, a.num_heads = c->heads, a.kv = in->kv, a.max_blocks_per_seq = in->max_blocks;
  a.query = in->q, a.q_stride = in->q_stride, a.cu_seqlens_q = in->cu, a.cached_lens = in->cached;
  a.key_cache = in->kf, a.value_cache = in->vf, a.block_tables = in->tables;
  a.scale = 1.0f / sqrtf((float)c->hs), a.alibi_slopes = in->alibi;
  a.sliding_window = in->window, a.soft_cap = in->soft_cap, a.sinks = in->sinks;
  a.causal = c->causal, a.out = out, a.lse = lse;
  return a;
}

/* A case's scene on the device, and prefill params that point at it. */
static void upload(const pcase *c, const attn_scene *in, attn_scene_dev *d,
                   clpa_prefill_params *p) {
  attn_scene_upload(ctx, in, c->lse, c->dev_scale, d);
  clpa_prefill_params_init(p);
  p->num_seqs = c->seqs, p->num_heads = c->heads, p->kv = in->kv;
  p->key_cache = d->kc, p->value_cache = d->vc, p->max_blocks_per_seq = in->max_blocks;
  p->cu_seqlens_q = in->cu, p->cached_lens = in->cached, p->causal = c->causal;
  p->q_dtype = c->io, p->soft_cap = in->soft_cap;
  /* about half the grid leaves the default (0: 1/sqrt(head_size), the reference's scale) */
  p->scale = (c->hs / 16 + c->seqs) % 2 ? 0.0f : 1.0f / sqrtf((float)c->hs);
  p->sliding_window = in->window, p->q_stride = in->q_stride;
  if (c->dev_scale) /* the host values must be ignored: make them wrong */
    p->k_scale = 7.0f, p->v_scale = 9.0f, p->k_scale_buffer = d->ks, p->v_scale_buffer = d->vs;
  else
    p->k_scale = in->k_scale, p->v_scale = in->v_scale;
  p->query = d->q, p->block_tables = d->bt, p->out = d->out, p->lse = d->lse;
  p->alibi_slopes = d->al, p->sinks = d->sk;
  p->rows_per_group = c->rows, p->keys_per_tile = c->keys;
}

static void tolerance_of(clpa_dtype io, double *atol, double *rtol) {
  for (size_t i = 0; i < sizeof tolerance / sizeof *tolerance; i++)
    if (tolerance[i].io == io) *atol = tolerance[i].atol, *rtol = tolerance[i].rtol;
}

/* Reads out (and lse) back as floats. */
static void read_out(const pcase *c, const attn_scene_dev *d, size_t n, float *got, float *got_lse) {
  void *store = malloc(d->out_bytes);
  test_read(ctx, d->out, store, d->out_bytes);
  clpa_dtype_decode(c->io, store, got, n, 1.0f);
  free(store);
  if (got_lse && d->lse) test_read(ctx, d->lse, got_lse, d->lse_bytes);
}

static int compare(const char *what, const float *got, const double *want, size_t n, double atol,
                   double rtol, int hs, int heads) {
  size_t at;
  const double worst = test_worst(got, want, n, atol, rtol, &at);
  const int good = ok(worst <= 1.0, "%s within tolerance (worst %.3g of allowed)", what, worst);
  if (!good && n)
    diag("worst element %zu (token %zu head %zu dim %zu): got %.9g want %.9g", at,
         at / ((size_t)heads * hs), at / hs % heads, at % hs, got[at], want[at]);
  return good;
}

static const char *path_name(clpa_prefill_path path) {
  return path == CLPA_PREFILL_ROWS ? "rows" : path == CLPA_PREFILL_MMA ? "mma"
         : path == CLPA_PREFILL_TILES ? "tiles" : "auto";
}

/* The mma path takes f16 and bf16 caches, and fp8 ones where the device
 * converts them, with head sizes of multiples of 16; its operands (the
 * queries, P, and fp8 keys and values, exactly) are attn_scene_mma_dtype's. */
static int mma_applies(const pcase *c) {
  return c->kv != CLPA_DTYPE_F32 && (clpa_dtype_size(c->kv) == 2 || attn_scene_mma_fp8(ctx)) &&
         c->hs % 16 == 0;
}

/* The output's tolerance: the io dtype's; on the mma path P is rounded to
 * the operand type too, so the coarser of the two, and at least the
 * absolute bound of that rounding (cl_util.h's test_p_round_atol: bf16
 * 7.8e-3 for values in [-2, 2], where bf16's own atol is 4e-3). */
static void tolerance_for(const pcase *c, clpa_prefill_path path, double *atol, double *rtol) {
  tolerance_of(c->io, atol, rtol);
  if (path != CLPA_PREFILL_MMA) return;
  double a2 = 0, r2 = 0;
  const clpa_dtype op = attn_scene_mma_dtype(c->kv);
  tolerance_of(op, &a2, &r2);
  a2 = fmax(a2, test_p_round_atol(op, ATTN_SCENE_V_MAX));
  *atol = *atol > a2 ? *atol : a2, *rtol = *rtol > r2 ? *rtol : r2;
}

/* Set while cases run on CSR page tables (test_csr): each runs on the scene's padded
 * table first, and the CSR call must give its results bit for bit. */
static int csr;

/* p (on scene sc, uploaded into d) switched to the scene's table as CSR. */
static void use_csr(const attn_scene *sc, attn_scene_dev *d, clpa_prefill_params *p) {
  attn_scene_csr(ctx, sc, 3, d, NULL);
  p->page_table = CLPA_PAGE_TABLE_CSR, p->page_indptr = d->indptr, p->page_indices = d->indices;
  p->last_page_len = d->last, p->num_page_indices = d->num_indices;
  p->block_tables = NULL, p->max_blocks_per_seq = 0;
}

/* The padded table's results for p, read back; the outputs poisoned again.
 * A tile shape this device's local memory cannot hold is refused on both
 * tables: run_case_on skips the case after the CSR call (nothing here). */
static void padded_results(clpa_prefill_params *p, attn_scene_dev *d, void **out, void **lse) {
  const clpa_status st = clpa_prefill(ctx, p);
  *out = *lse = NULL;
  if (st == CLPA_ERR_UNSUPPORTED && strstr(clpa_context_last_error(ctx), "local memory")) return;
  ok(st == CLPA_OK, "prefill on the padded table%s%s", st ? ": " : "",
     st ? clpa_context_last_error(ctx) : "");
  *out = malloc(d->out_bytes), *lse = d->lse ? malloc(d->lse_bytes) : NULL;
  test_read(ctx, d->out, *out, d->out_bytes);
  test_poison(ctx, d->out, d->out_bytes);
  if (d->lse) test_read(ctx, d->lse, *lse, d->lse_bytes), test_poison(ctx, d->lse, d->lse_bytes);
}

/* Whether buffer m holds the bytes `want` (n of them). */
static int same_bytes(cl_mem m, const void *want, size_t n) {
  void *got = malloc(n ? n : 1);
  test_read(ctx, m, got, n);
  const int same = memcmp(got, want, n) == 0;
  free(got);
  return same;
}

/* The decode rows a plan with split_keys P splits (a simple model of
 * lib/prefill.c's rule, forced): new tokens whose rows fill at most one
 * work-group of `rows`, over more than P keys (from the first token's
 * window start to the last token). */
static int32_t split_rows_model(const pcase *c, const attn_scene *in, int rows, int32_t P) {
  const int qpk = c->heads / c->kv_heads;
  int32_t n = 0;
  for (int s = 0; s < c->seqs; s++) {
    const int64_t len = in->cu[s + 1] - in->cu[s], k = in->cached[s];
    const int64_t lo = in->window > 0 && k - in->window + 1 > 0 ? k - in->window + 1 : 0;
    n += len > 0 && len * qpk <= rows && k + len - lo > P;
  }
  return n;
}

/* With `split` or `route`: the plan of p (after its call) splits the rows
 * the model says, or gives decode's kernel the three leading decode rows,
 * and two runs of it give the call's bits (the outputs hold the call's:
 * poisoned before each run). */
static int plan_agrees(const pcase *c, const attn_scene *in, attn_scene_dev *d,
                       const clpa_prefill_params *p, const char *name) {
  clpa_plan *plan = NULL;
  clpa_plan_info info;
  memset(&info, 0, sizeof info);
  int good = ok(clpa_plan_prefill(ctx, p, &plan) == CLPA_OK &&
                    clpa_plan_describe(plan, &info) == CLPA_OK,
                "plan of %s", name);
  const int32_t want = split ? split_rows_model(c, in, info.rows, split) : 0;
  good &= ok(info.split_rows == want && info.split_keys == (want ? split : 0),
             "the plan splits %d decode rows by %d keys (the model: %d rows of %d)",
             info.split_rows, info.split_keys, want, info.rows);
  good &= ok(info.decode_rows == (route ? 3 : 0), "the plan gives decode's kernel %d rows (%d)",
             info.decode_rows, route ? 3 : 0);
  void *o = malloc(d->out_bytes), *l = d->lse ? malloc(d->lse_bytes) : NULL;
  test_read(ctx, d->out, o, d->out_bytes);
  if (l) test_read(ctx, d->lse, l, d->lse_bytes);
  clpa_attn_inputs run;
  clpa_attn_inputs_init(&run);
  run.key_cache = p->key_cache, run.value_cache = p->value_cache, run.query = p->query;
  run.out = p->out, run.lse = p->lse, run.block_tables = p->block_tables;
  run.k_scale = p->k_scale, run.v_scale = p->v_scale, run.k_scale_buffer = p->k_scale_buffer;
  run.v_scale_buffer = p->v_scale_buffer, run.alibi_slopes = p->alibi_slopes;
  run.sinks = p->sinks, run.num_page_indices = p->num_page_indices;
  run.page_indptr = p->page_indptr, run.page_indices = p->page_indices;
  run.last_page_len = p->last_page_len;
  for (int r = 0; r < 2 && plan; r++) {
    test_poison(ctx, d->out, d->out_bytes);
    if (l) test_poison(ctx, d->lse, d->lse_bytes);
    good &= ok(clpa_run(plan, &run) == CLPA_OK && same_bytes(d->out, o, d->out_bytes) &&
                   (!l || same_bytes(d->lse, l, d->lse_bytes)),
               "run %d of the plan: the call's output and lse, bit for bit", r + 1);
  }
  clpa_plan_release(plan);
  free(o), free(l);
  return good;
}

static int run_case_on(const pcase *c, clpa_prefill_path path) {
  char name[360], shape[320];
  describe(c, shape, sizeof shape);
  snprintf(name, sizeof name, "%s, %s path", shape, path_name(path));
  attn_scene in;
  make_scene(c, &in);
  attn_scene_dev d;
  clpa_prefill_params p;
  upload(c, &in, &d, &p);
  p.path = path;
  /* The automatic choice is checked as the path it takes (mma rounds the queries and P). */
  clpa_prefill_path taken = path;
  if (path == CLPA_PREFILL_AUTO && clpa_prefill_choice(ctx, &p, &taken, NULL, NULL) != CLPA_OK)
    taken = path;
  const int mma = taken == CLPA_PREFILL_MMA;
  if (mma) { /* as the path rounds them */
    attn_scene_release(&d);
    attn_scene_round_queries(&in, attn_scene_mma_dtype(c->kv));
    upload(c, &in, &d, &p);
  }
  const size_t rows = (size_t)in.q_rows * c->heads, outn = rows * c->hs;
  double *want = malloc(sizeof(double) * (outn ? outn : 1));
  double *want_lse = malloc(sizeof(double) * (rows ? rows : 1));
  clpa_ref_prefill_args ra = ref_args(c, &in, want, want_lse);
  int good = ok(clpa_ref_prefill(&ra) == CLPA_OK, "reference for %s", name);
  if (!good) diag("%s", clpa_last_error());

  p.path = path;
  if (path == CLPA_PREFILL_ROWS) { /* every rows-per-work-item count over the grid */
    static const int counts[] = {0, 1, 2, 4, 8, 16};
    p.rows_per_group = counts[(c->hs / 8 + c->bs + c->heads) % 6], p.keys_per_tile = 0;
  }
  if (path == CLPA_PREFILL_MMA) { /* rows auto or 128, keys auto, 32 or 64 over the grid: two tiles in flight
               * where 48 KiB hold them (head 128 with 32 keys), else one (head 128 with 64);
               * 32 rows a warp (queries in local memory) in about half the cases up to head 128 */
    static const int keys[] = {0, 32, 64};
    const int a = c->max_new + c->bs;
    p.rows_per_group = a / 3 % 2 ? 128 : 0, p.keys_per_tile = keys[a % 3];
    p.rows_per_warp = c->hs <= 128 && (c->hs / 16 + c->seqs + c->kv_heads) % 2 ? 32 : 0;
    if (p.rows_per_warp) strncat(name, ", 32 rows a warp", sizeof name - strlen(name) - 1);
  }
  if (split) { /* every row on prefill's kernel: the splits are the case */
    p.split_keys = split, p.decode_rows_kernel = -1;
    char more[40];
    snprintf(more, sizeof more, ", keys split by %d", (int)split);
    strncat(name, more, sizeof name - strlen(name) - 1);
  }
  if (route) { /* decode's kernel in f32 where prefill's path keeps f32 (its own rounds as mma) */
    p.decode_rows_kernel = 1, p.split_keys = -1;
    if (path != CLPA_PREFILL_MMA) p.precision = CLPA_PRECISION_F32;
    strncat(name, ", leading decode rows on decode's kernel", sizeof name - strlen(name) - 1);
  }
  void *padded_out = NULL, *padded_lse = NULL;
  if (csr) padded_results(&p, &d, &padded_out, &padded_lse), use_csr(&in, &d, &p);
  clpa_status st = clpa_prefill(ctx, &p);
  if (st == CLPA_ERR_UNSUPPORTED && (path == CLPA_PREFILL_MMA || c->rows || c->keys) &&
      path != CLPA_PREFILL_ROWS && strstr(clpa_context_last_error(ctx), "local memory")) {
    /* A forced tile shape this device's local memory cannot hold (64 x 8 at head 256 needs
     * 76 KiB, mma's 64 keys at head 256 71 KiB; NVIDIA has 48): refused, as it must be. */
    ok(1, "# SKIP %s: %s", name, clpa_context_last_error(ctx));
    free(want), free(want_lse);
    attn_scene_release(&d);
    attn_scene_free(&in);
    return good;
  }
  good &= ok(st == CLPA_OK, "prefill %s", name);
  if (st != CLPA_OK) diag("%s: %s", clpa_status_name(st), clpa_context_last_error(ctx));
  good &= test_no_faults(ctx, "after the call");
  float *got = malloc(sizeof(float) * (outn ? outn : 1)), *gl = malloc(sizeof(float) * (rows ? rows : 1));
  read_out(c, &d, outn, got, gl);
  if (csr) {
    good &= ok(padded_out && same_bytes(d.out, padded_out, d.out_bytes) &&
                   (!d.lse || same_bytes(d.lse, padded_lse, d.lse_bytes)),
               "CSR table: the output and lse are the padded table's, bit for bit");
    free(padded_out), free(padded_lse);
  }
  double atol = 0, rtol = 0;
  tolerance_for(c, taken, &atol, &rtol);
  /* split rows' partials are rounded to the io dtype (as decode v2's): twice its tolerance */
  if (split) atol *= 2, rtol *= 2;
  if (split || route) good &= plan_agrees(c, &in, &d, &p, name);
  good &= compare("output", got, want, outn, atol, rtol, c->hs, c->heads);
  /* decode's mma path sums its probabilities as it rounds them: its LSE within that rounding */
  double lse_atol = LSE_ATOL, a2 = 0, r2 = 0;
  if (route && taken == CLPA_PREFILL_MMA)
    tolerance_of(attn_scene_mma_dtype(c->kv), &a2, &r2), lse_atol = fmax(lse_atol, r2);
  if (c->lse) good &= compare("lse", gl, want_lse, rows, lse_atol, LSE_RTOL, 1, c->heads);
  if (!good) diag("failed case: %s", name);
  free(got), free(gl), free(want), free(want_lse);
  attn_scene_release(&d);
  attn_scene_free(&in);
  return good;
}

/* Every case on every path that takes it: they must give the same results. */
static int run_case(const pcase *c) {
  return run_case_on(c, CLPA_PREFILL_TILES) & run_case_on(c, CLPA_PREFILL_ROWS) &
         (mma_applies(c) ? run_case_on(c, CLPA_PREFILL_MMA) : 1);
}

/* The path this device runs natively: its tuning entry's, tiles where that
 * is mma and the case is not for it; by type where the entry leaves it open. */
static clpa_prefill_path native_path(const pcase *c) {
  clpa_tuning t;
  clpa_context_tuning(ctx, &t);
  const clpa_prefill_path p = (clpa_prefill_path)t.prefill_path;
  if (p == CLPA_PREFILL_MMA) return mma_applies(c) ? p : CLPA_PREFILL_TILES;
  if (p != CLPA_PREFILL_AUTO) return p;
  clpa_device_info info;
  clpa_context_device_info(ctx, &info);
  return info.is_cpu ? CLPA_PREFILL_ROWS : CLPA_PREFILL_TILES;
}

#define F32 CLPA_DTYPE_F32
#define F16 CLPA_DTYPE_F16
#define BF16 CLPA_DTYPE_BF16
#define E4M3 CLPA_DTYPE_FP8_E4M3
#define E5M2 CLPA_DTYPE_FP8_E5M2

/* seqs heads kvh hs bs new cached kv io rows keys causal alibi window softcap sinks lse q_pad dev_scale */
static const pcase default_grid[] = {
    {5, 4, 4, 32, 16, 40, 0, F16, F32, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0},
    {5, 8, 2, 64, 8, 70, 100, F32, F32, 0, 0, 1, 0, 0, 0, 0, 1, 1, 0},
    {5, 8, 1, 80, 32, 50, 200, BF16, F16, 0, 0, 1, 1, 0, 0, 0, 1, 0, 0},
    {6, 8, 4, 96, 16, 33, 64, E4M3, F32, 16, 32, 1, 0, 1, 0, 0, 1, 0, 1},
    {5, 4, 4, 112, 16, 45, 90, E5M2, F16, 0, 0, 0, 0, 0, 1, 0, 1, 0, 0},
    {5, 12, 4, 120, 8, 30, 50, F16, F32, 32, 16, 1, 0, 0, 0, 1, 1, 0, 0},
    {5, 16, 4, 128, 16, 64, 300, F16, F32, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0},
    {5, 4, 4, 192, 32, 40, 70, F32, BF16, 0, 0, 1, 0, 1, 1, 1, 1, 1, 0},
    {5, 4, 1, 256, 16, 37, 120, BF16, F32, 0, 0, 1, 1, 1, 1, 0, 1, 0, 0},
    {5, 8, 8, 128, 32, 20, 40, E4M3, F16, 8, 64, 0, 0, 0, 0, 1, 1, 0, 1},
    {5, 16, 2, 256, 8, 25, 60, E5M2, F32, 64, 8, 1, 0, 1, 0, 0, 1, 0, 0},
    {5, 8, 2, 64, 16, 150, 600, F16, F32, 0, 0, 1, 1, 1, 1, 1, 1, 1, 0}, /* long: many tiles */
    {5, 6, 2, 112, 32, 50, 33, F32, F16, 16, 16, 1, 0, 0, 1, 0, 0, 0, 0},
    {5, 8, 2, 128, 8, 70, 90, BF16, BF16, 0, 0, 0, 0, 1, 0, 0, 1, 0, 0}, /* full attention, window */
};

/* The case forced onto a path that cannot take it: refused, naming what
 * (`want`), before anything is written (attn_scene_refused). */
static int refused_on(const pcase *c, clpa_prefill_path path, const char *want) {
  attn_scene in;
  make_scene(c, &in);
  attn_scene_dev d;
  clpa_prefill_params p;
  upload(c, &in, &d, &p);
  p.path = path;
  return attn_scene_refused(ctx, clpa_prefill(ctx, &p), want, &in, &d);
}

/* The HND and NHD layouts: grid cases on the tiles path, the rows path
 * and the automatic choice (f32 block 8 GQA, fp8 with a window, bf16 block
 * 32 with ALiBi; bf16 block 8 full attention, f16 block 8 with sinks, e5m2
 * full attention), and the mma path (prefill_mma.cl copies their rows
 * token-major, values read through ldmatrix .trans): `all` (--layouts)
 * every case of mma_layout_cases in both layouts (heads of 32 to 256,
 * whose rows of 4 to 32 chunks take different swizzles, blocks of 8 to
 * 32, one and two tiles in flight), else two (f16 GQA causal in HND, bf16
 * head 80 MQA with ALiBi in NHD), as each costs PoCL a build. The
 * automatic choice is checked as the path it takes (mma on NVIDIA). */
static void test_layouts(int all) {
  /* seqs heads kvh hs bs new cached kv io rows keys causal alibi window softcap sinks lse q_pad dev_scale */
  static const pcase mma_layout_cases[] = {
      {5, 8, 2, 128, 16, 64, 300, F16, F32, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0},
      {5, 8, 1, 80, 32, 50, 200, BF16, F16, 0, 0, 1, 1, 0, 0, 0, 1, 0, 0},
      {5, 4, 4, 32, 8, 40, 60, F16, BF16, 0, 0, 0, 0, 1, 0, 1, 1, 0, 0},   /* full, window, sinks */
      {5, 4, 1, 256, 16, 37, 120, BF16, F32, 0, 0, 1, 1, 1, 1, 0, 1, 0, 0},
      {5, 6, 2, 96, 8, 70, 90, F16, F32, 0, 0, 1, 0, 0, 1, 0, 1, 1, 0},    /* soft cap, q_stride */
      {5, 8, 2, 64, 32, 150, 600, BF16, F32, 0, 0, 1, 0, 1, 0, 1, 1, 0, 0}, /* long: many tiles */
      {5, 8, 4, 112, 16, 45, 33, F16, F16, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0},   /* head 112: 14 chunks */
  };
  static const int picks[][3] = {{1, 3, 2}, {13, 5, 4}}; /* a kind's tiles, rows, auto case */
  const size_t n = all ? sizeof mma_layout_cases / sizeof *mma_layout_cases : 2;
  for (int k = 0; k < 2; k++) {
    layout = k ? CLPA_KV_LAYOUT_NHD : CLPA_KV_LAYOUT_HND;
    run_case_on(&default_grid[picks[k][0]], CLPA_PREFILL_TILES);
    run_case_on(&default_grid[picks[k][1]], CLPA_PREFILL_ROWS);
    run_case_on(&default_grid[picks[k][2]], CLPA_PREFILL_AUTO);
    for (size_t i = all ? 0 : (size_t)k; i < n; i += all ? 1 : 2)
      run_case_on(&mma_layout_cases[i], CLPA_PREFILL_MMA);
  }
  /* Blocks a block_pitch apart: K and V interleaved as FlashInfer's [pages, 2, ...] (a gap of
   * a block) or a gap of 8 rows, on cases and paths run above (the pitch is an argument, not
   * a build option, so no new builds). */
  struct { clpa_kv_layout_kind kind; const pcase *c; clpa_prefill_path path; int interleave; } pitched[] = {
      {CLPA_KV_LAYOUT_HND, &default_grid[2], CLPA_PREFILL_AUTO, 1},
      {CLPA_KV_LAYOUT_HND, &mma_layout_cases[0], CLPA_PREFILL_MMA, 0},
      {CLPA_KV_LAYOUT_NHD, &default_grid[13], CLPA_PREFILL_TILES, 1},
      {CLPA_KV_LAYOUT_NHD, &mma_layout_cases[1], CLPA_PREFILL_MMA, 1},
      {CLPA_KV_LAYOUT_SPLIT_KEY, &default_grid[1], CLPA_PREFILL_TILES, 1}};
  for (size_t i = 0; i < sizeof pitched / sizeof *pitched; i++) {
    const pcase *pc = pitched[i].c;
    layout = pitched[i].kind;
    pitch_gap = pitched[i].interleave ? pc->kv_heads * pc->hs * pc->bs
                                      : 8 * (int)(16 / clpa_dtype_size(pc->kv));
    run_case_on(pc, pitched[i].path);
  }
  pitch_gap = 0;
  layout = CLPA_KV_LAYOUT_SPLIT_KEY;
}

/* Page sizes past 8, 16 and 32 (issue 46): blocks of 1 (SGLang's token
 * pool) on rows, the one prefill kernel that takes them; 4, 64 and 256 on
 * tiles and rows (one case a size: f16 GQA causal at 1, bf16 with a window
 * at 4, f32 with sinks at 64, e5m2 full attention at 256), against the
 * double reference. A build costs PoCL seconds, so the default run (a
 * cold kernel cache in CI) builds three: 1 on rows, 64 on tiles, 256 on
 * rows; `all` (--pages, --full) every path that takes each size, and
 * block 1 in the HND layout. Then the refusals, which build nothing:
 * tiles below 4 tokens, mma past 32 (prefill_mma.cl's tiles of 32 or 64
 * keys measured wrong at 64). */
static void test_pages(int all) {
  static const pcase pages[] = {
      {5, 8, 2, 128, 1, 40, 90, F16, F32, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0},
      {5, 4, 4, 64, 4, 33, 64, BF16, F32, 0, 0, 1, 0, 1, 0, 0, 1, 0, 0},
      {5, 8, 2, 128, 64, 50, 150, F32, F16, 0, 0, 1, 0, 0, 0, 1, 1, 0, 0},
      {4, 4, 1, 64, 256, 40, 300, E5M2, F32, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0},
  };
  for (size_t i = 0; i < sizeof pages / sizeof *pages; i++) {
    const int bs = pages[i].bs;
    if (bs >= 4 && (all || bs == 64)) run_case_on(&pages[i], CLPA_PREFILL_TILES);
    if (all || bs == 1 || bs == 256) run_case_on(&pages[i], CLPA_PREFILL_ROWS);
  }
  layout = CLPA_KV_LAYOUT_HND;
  if (all) run_case_on(&pages[0], CLPA_PREFILL_ROWS);
  layout = CLPA_KV_LAYOUT_SPLIT_KEY;
  refused_on(&pages[0], CLPA_PREFILL_TILES,
               "clpa_prefill: path tiles takes blocks of multiples of 4 tokens, and block_size"
               " is 1");
  pcase c = pages[2];
  c.kv = F16;
  refused_on(&c, CLPA_PREFILL_MMA,
               "clpa_prefill: path mma takes blocks of 8, 16 or 32 tokens, and block_size is 64");
}

/* Chunked prefill: each sequence's new tokens in k calls with growing
 * cached_lens give what one call gives. Call `part` takes chunk `part` of
 * every sequence as its batch (its queries gathered into a buffer of their
 * own). The new tokens' K/V are already in the cache, as after
 * reshape_and_cache of the whole prompt. */
static void test_chunks(void) {
  const pcase c = {4, 8, 2, 64, 16, 70, 40, F16, F32, 0, 0, 1, 1, 0, 1, 1, 1, 0, 0};
  const int chunks[] = {1, 2, 7};
  attn_scene in;
  make_scene(&c, &in);
  attn_scene_dev d;
  clpa_prefill_params p;
  upload(&c, &in, &d, &p);
  const size_t rows = (size_t)in.q_rows * c.heads, outn = rows * c.hs, hd = (size_t)c.heads * c.hs;
  float *one = malloc(sizeof(float) * outn), *got = malloc(sizeof(float) * outn);
  float *one_l = malloc(sizeof(float) * rows), *gl = malloc(sizeof(float) * rows);
  float *part_o = malloc(sizeof(float) * outn), *part_l = malloc(sizeof(float) * rows);
  float *part_q = malloc(sizeof(float) * in.q_stride * (size_t)in.q_rows);
  ok(clpa_prefill(ctx, &p) == CLPA_OK, "one call over the whole batch");
  read_out(&c, &d, outn, one, one_l);
  for (size_t ci = 0; ci < sizeof chunks / sizeof *chunks; ci++) {
    const int k = chunks[ci];
    int good = 1;
    for (int part = 0; part < k; part++) {
      int32_t cu[16], cached[16], from[16];
      cu[0] = 0;
      for (int s = 0; s < c.seqs; s++) {
        const int n = in.cu[s + 1] - in.cu[s], a = n * part / k, b = n * (part + 1) / k;
        cu[s + 1] = cu[s] + (b - a), cached[s] = in.cached[s] + a, from[s] = in.cu[s] + a;
        memcpy(part_q + (size_t)cu[s] * in.q_stride, in.q + (size_t)from[s] * in.q_stride,
               sizeof(float) * in.q_stride * (size_t)(b - a));
      }
      const int tot = cu[c.seqs];
      if (tot == 0) continue;
      cl_mem qb = test_buffer(ctx, part_q, sizeof(float) * in.q_stride * (size_t)tot);
      cl_mem ob = test_buffer(ctx, NULL, sizeof(float) * hd * (size_t)tot);
      cl_mem lb = test_buffer(ctx, NULL, sizeof(float) * c.heads * (size_t)tot);
      clpa_prefill_params q = p;
      q.cu_seqlens_q = cu, q.cached_lens = cached, q.query = qb, q.out = ob, q.lse = lb;
      if (clpa_prefill(ctx, &q) != CLPA_OK) {
        good = 0;
        diag("%s", clpa_context_last_error(ctx));
      }
      test_read(ctx, ob, part_o, sizeof(float) * hd * (size_t)tot);
      test_read(ctx, lb, part_l, sizeof(float) * c.heads * (size_t)tot);
      for (int s = 0; s < c.seqs; s++) {
        const size_t n = (size_t)(cu[s + 1] - cu[s]);
        memcpy(got + (size_t)from[s] * hd, part_o + (size_t)cu[s] * hd, sizeof(float) * hd * n);
        memcpy(gl + (size_t)from[s] * c.heads, part_l + (size_t)cu[s] * c.heads,
               sizeof(float) * c.heads * n);
      }
      clReleaseMemObject(qb), clReleaseMemObject(ob), clReleaseMemObject(lb);
    }
    double worst = 0;
    for (size_t i = 0; i < outn; i++)
      worst = fmax(worst, fabs(got[i] - one[i]) / (1e-5 + 1e-5 * fabs(one[i])));
    for (size_t i = 0; i < rows; i++)
      worst = fmax(worst, fabs(gl[i] - one_l[i]) / (1e-5 + 1e-5 * fabs(one_l[i])));
    ok(good && worst <= 1.0, "%d chunks per sequence equal one call (worst %.3g of 1e-5)", k, worst);
  }
  free(one), free(got), free(one_l), free(gl), free(part_o), free(part_l), free(part_q);
  attn_scene_release(&d);
  attn_scene_free(&in);
}

/* One new token per sequence is decode: the same queries through
 * clpa_decode (context = cached + 1) and clpa_prefill agree. */
static void test_decode_equal(void) {
  pcase c = {6, 8, 2, 128, 16, 1, 300, F16, F32, 0, 0, 1, 1, 1, 1, 1, 1, 0, 0};
  attn_scene in;
  { /* one new token after 0-300 cached ones each */
    int32_t lens[6], cached[6];
    for (int s = 0; s < c.seqs; s++) {
      cached[s] = s ? (int32_t)rng_below((uint32_t)c.max_cached + 1) : c.max_cached;
      lens[s] = cached[s] + 1;
    }
    scene_of(&c, lens, cached, &in);
  }
  attn_scene_dev d;
  clpa_prefill_params p;
  upload(&c, &in, &d, &p);
  int32_t lens[16];
  int maxc = 0;
  for (int s = 0; s < c.seqs; s++) lens[s] = in.cached[s] + 1, maxc = lens[s] > maxc ? lens[s] : maxc;
  cl_mem bl = test_buffer(ctx, lens, sizeof(int32_t) * c.seqs);
  cl_mem dout = test_buffer(ctx, NULL, d.out_bytes), dlse = test_buffer(ctx, NULL, d.lse_bytes);
  clpa_decode_params dp;
  clpa_decode_params_init(&dp);
  dp.num_seqs = c.seqs, dp.num_heads = c.heads, dp.kv = in.kv, dp.key_cache = d.kc;
  dp.value_cache = d.vc, dp.max_blocks_per_seq = in.max_blocks, dp.max_context_len = maxc;
  dp.q_dtype = c.io, dp.scale = p.scale, dp.soft_cap = p.soft_cap, dp.sliding_window = p.sliding_window;
  dp.q_stride = p.q_stride, dp.query = d.q, dp.block_tables = d.bt, dp.context_lens = bl;
  dp.out = dout, dp.lse = dlse, dp.alibi_slopes = d.al, dp.sinks = d.sk;
  const size_t rows = (size_t)c.seqs * c.heads, n = rows * c.hs;
  float *a = malloc(sizeof(float) * n), *b = malloc(sizeof(float) * n);
  float al[256], bl2[256];
  /* f32 paths against each other, then (an f16 cache) the tensor-core ones,
   * which round queries and probabilities alike, within the f16 tolerance. */
  for (int mma = 0; mma < 2; mma++) {
    clpa_prefill_path chosen = CLPA_PREFILL_AUTO;
    p.path = mma ? CLPA_PREFILL_MMA : CLPA_PREFILL_AUTO;
    if (!mma && clpa_prefill_choice(ctx, &p, &chosen, NULL, NULL) == CLPA_OK &&
        chosen == CLPA_PREFILL_MMA)
      p.path = CLPA_PREFILL_TILES; /* auto takes mma on NVIDIA */
    dp.path = mma ? CLPA_DECODE_PATH_MMA : CLPA_DECODE_PATH_LANES;
    test_poison(ctx, d.out, d.out_bytes), test_poison(ctx, d.lse, d.lse_bytes);
    int good = clpa_prefill(ctx, &p) == CLPA_OK && clpa_decode(ctx, &dp) == CLPA_OK;
    read_out(&c, &d, n, a, al);
    test_read(ctx, dout, b, sizeof(float) * n);
    test_read(ctx, dlse, bl2, sizeof(float) * rows);
    const double at = mma ? 1e-3 : 1e-4, rt = mma ? 2e-3 : 1e-4;
    double worst = 0;
    for (size_t i = 0; i < n; i++) { /* NaN counts as a failure */
      const double e = fabs(a[i] - b[i]) / (at + rt * fabs(b[i]));
      worst = e <= worst ? worst : isnan(e) ? INFINITY : e;
    }
    for (size_t i = 0; i < rows; i++) {
      const double e = fabs(al[i] - bl2[i]) / (1e-4 + 1e-5 * fabs(bl2[i]));
      worst = e <= worst ? worst : isnan(e) ? INFINITY : e;
    }
    ok(good && worst <= 1.0, "one new token: prefill equals decode, %s paths (worst %.3g): %s",
       mma ? "mma" : "f32", worst, clpa_last_error());
  }
  free(a), free(b);
  clReleaseMemObject(bl), clReleaseMemObject(dout), clReleaseMemObject(dlse);
  attn_scene_release(&d);
  attn_scene_free(&in);
}

/* merge_states against clpa_ref_merge_states (itself checked to give
 * attention over a whole key set from its parts, test_host_ref_prefill):
 * k = 2, 3, 4 inputs in f32, f16 and bf16, merged in place, with empty
 * sets (lse -inf, their outputs NaN: never read) and an all-empty row. */
static void test_merge(void) {
  /* Random rows, k = 2..4 inputs, some lse -inf (empty sets), f32/f16/bf16. */
  const clpa_dtype dts[] = {F32, F16, BF16};
  for (int k = 2; k <= 4; k++) {
    const clpa_dtype dt = dts[k - 2];
    const int rows = 37, hs = 80;
    const size_t n = (size_t)rows * hs, esz = clpa_dtype_size(dt);
    float *o[4], l[4][37];
    void *st[4];
    cl_mem bo[4], bl[4];
    double *want = malloc(sizeof(double) * n), want_l[37], *tmp = malloc(sizeof(double) * n);
    double *acc = malloc(sizeof(double) * n), acc_l[37];
    for (int i = 0; i < k; i++) {
      o[i] = malloc(sizeof(float) * n);
      st[i] = malloc(esz * n);
      for (size_t e = 0; e < n; e++) o[i][e] = (float)rng_uniform(-3, 3);
      for (int r = 0; r < rows; r++) l[i][r] = rng_below(6) == 0 ? -INFINITY : (float)rng_uniform(-20, 20);
      if (i == 0) l[0][5] = NAN; /* an empty set's output may be anything: l 0 -inf below */
      l[i][7] = -INFINITY;        /* row 7: every set empty */
      clpa_dtype_encode(dt, o[i], st[i], n, 1.0f);
      clpa_dtype_decode(dt, st[i], o[i], n, 1.0f);
      if (i == 0) {
        l[0][5] = -INFINITY;
        for (int d = 0; d < hs; d++) o[0][5 * hs + d] = NAN; /* never read */
        clpa_dtype_encode(dt, o[0], st[0], n, 1.0f);
      }
      bo[i] = test_buffer(ctx, st[i], esz * n);
      bl[i] = test_buffer(ctx, l[i], sizeof(float) * rows);
    }
    /* The reference: merge pairwise in double (it is associative). */
    for (size_t e = 0; e < n; e++) acc[e] = o[0][e];
    for (int r = 0; r < rows; r++) acc_l[r] = l[0][r];
    for (int i = 1; i < k; i++) {
      for (size_t e = 0; e < n; e++) tmp[e] = o[i][e];
      double li[37];
      for (int r = 0; r < rows; r++) li[r] = l[i][r];
      clpa_ref_merge_states((size_t)rows, (size_t)hs, acc, acc_l, tmp, li, acc, acc_l);
    }
    memcpy(want, acc, sizeof(double) * n);
    memcpy(want_l, acc_l, sizeof want_l);
    clpa_merge_states_params mp;
    clpa_merge_states_params_init(&mp);
    mp.num_rows = rows, mp.head_size = hs, mp.dtype = dt, mp.num_inputs = k;
    for (int i = 0; i < k; i++) mp.outs[i] = bo[i], mp.lses[i] = bl[i];
    mp.out = bo[0], mp.lse = bl[0]; /* in place */
    clpa_status s = clpa_merge_states(ctx, &mp);
    float *got = malloc(sizeof(float) * n), gl[37];
    void *gs = malloc(esz * n);
    test_read(ctx, bo[0], gs, esz * n);
    test_read(ctx, bl[0], gl, sizeof gl);
    clpa_dtype_decode(dt, gs, got, n, 1.0f);
    double atol = 0, rtol = 0;
    tolerance_of(dt, &atol, &rtol);
    size_t at;
    const double w = test_worst(got, want, n, atol, rtol, &at);
    const double wl = test_worst(gl, want_l, (size_t)rows, LSE_ATOL, LSE_RTOL, &at);
    ok(s == CLPA_OK && w <= 1.0 && wl <= 1.0,
       "merge_states of %d %s inputs in place equals the reference (worst %.3g, lse %.3g)", k,
       clpa_dtype_name(dt), w, wl);
    if (w > 1.0) diag("worst %zu: got %.9g want %.9g", at, got[at], want[at]);
    for (int i = 0; i < k; i++) free(o[i]), free(st[i]), clReleaseMemObject(bo[i]), clReleaseMemObject(bl[i]);
    free(want), free(tmp), free(acc), free(got), free(gs);
  }

}

/* cu_seqlens_q[0] > 0: the batch's rows start there, and the rows before
 * it (an engine's decode rows, say) are neither read nor written. */
static void test_offset_rows(void) {
  const pcase c = {3, 8, 4, 64, 16, 30, 40, F32, F32, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0};
  const int skip = 5;
  attn_scene in;
  make_scene(&c, &in);
  const size_t rows = (size_t)in.q_rows * c.heads, outn = rows * c.hs, hd = (size_t)c.heads * c.hs;
  double *want = malloc(sizeof(double) * outn), *want_l = malloc(sizeof(double) * rows);
  clpa_ref_prefill_args ra = ref_args(&c, &in, want, want_l);
  int good = clpa_ref_prefill(&ra) == CLPA_OK;
  attn_scene_dev d;
  clpa_prefill_params p;
  upload(&c, &in, &d, &p);
  /* The same queries after `skip` rows of NaN, the output `skip` rows longer. */
  float *q2 = malloc(sizeof(float) * in.q_stride * (size_t)(in.q_rows + skip));
  for (size_t i = 0; i < in.q_stride * (size_t)skip; i++) q2[i] = NAN;
  memcpy(q2 + in.q_stride * (size_t)skip, in.q, sizeof(float) * in.q_stride * (size_t)in.q_rows);
  cl_mem bq = test_buffer(ctx, q2, sizeof(float) * in.q_stride * (size_t)(in.q_rows + skip));
  cl_mem bo = test_buffer(ctx, NULL, sizeof(float) * hd * (size_t)(in.q_rows + skip));
  cl_mem bl = test_buffer(ctx, NULL, sizeof(float) * c.heads * (size_t)(in.q_rows + skip));
  test_poison(ctx, bo, sizeof(float) * hd * (size_t)(in.q_rows + skip));
  test_poison(ctx, bl, sizeof(float) * c.heads * (size_t)(in.q_rows + skip));
  int32_t cu[8];
  for (int s = 0; s <= c.seqs; s++) cu[s] = in.cu[s] + skip;
  p.cu_seqlens_q = cu, p.query = bq, p.out = bo, p.lse = bl;
  good &= clpa_prefill(ctx, &p) == CLPA_OK;
  float *got = malloc(sizeof(float) * hd * (size_t)(in.q_rows + skip));
  float *gl = malloc(sizeof(float) * c.heads * (size_t)(in.q_rows + skip));
  test_read(ctx, bo, got, sizeof(float) * hd * (size_t)(in.q_rows + skip));
  test_read(ctx, bl, gl, sizeof(float) * c.heads * (size_t)(in.q_rows + skip));
  int untouched = 1;
  for (size_t i = 0; i < hd * (size_t)skip; i++) untouched &= isnan(got[i]); /* 0xFF.. is NaN */
  for (size_t i = 0; i < (size_t)c.heads * skip; i++) untouched &= isnan(gl[i]);
  size_t at;
  const double w = test_worst(got + hd * (size_t)skip, want, outn, 1e-4, 1e-4, &at);
  const double wl = test_worst(gl + (size_t)c.heads * skip, want_l, rows, LSE_ATOL, LSE_RTOL, &at);
  ok(good && untouched && w <= 1.0 && wl <= 1.0,
     "rows from cu_seqlens_q[0] = %d on: results right (worst %.3g, lse %.3g), rows before"
     " untouched (%d)", skip, w, wl, untouched);
  free(want), free(want_l), free(q2), free(got), free(gl);
  clReleaseMemObject(bq), clReleaseMemObject(bo), clReleaseMemObject(bl);
  attn_scene_release(&d);
  attn_scene_free(&in);
}

/* Block-sparse prefill (XAttention's mask) against the reference with the
 * same mask, on every path: random masks (about half the blocks dropped,
 * some query blocks dropping every key), and an all-ones mask equals no
 * mask. The fp8 case takes the mma path's staged copies (mma_fetch_tile)
 * with a mask; cache blocks of 128 and 256 tokens straddle mask blocks. */
static void test_sparse(void) {
  const pcase cases[] = {
      {4, 8, 2, 64, 16, 150, 200, F16, F32, 0, 0, 1, 0, 0, 0, 1, 1, 0, 0},
      {3, 4, 4, 128, 32, 130, 300, BF16, F16, 0, 0, 0, 1, 0, 1, 0, 1, 0, 0},
      {3, 8, 1, 96, 8, 100, 64, F32, F32, 0, 0, 1, 0, 1, 0, 0, 1, 0, 0},
      {3, 8, 2, 64, 16, 140, 260, E4M3, F16, 0, 0, 1, 0, 0, 0, 0, 1, 0, 1},
      /* cache blocks that straddle mask blocks (the rows path's MASK_STRADDLES) */
      {2, 4, 2, 64, 128, 150, 200, F16, F32, 0, 0, 1, 0, 0, 0, 1, 1, 0, 0},
      {2, 4, 2, 64, 256, 150, 300, F32, F32, 0, 0, 1, 0, 1, 0, 0, 1, 0, 0},
  };
  for (size_t ci = 0; ci < sizeof cases / sizeof *cases; ci++)
    for (int pi = 0; pi < 3; pi++) {
      const pcase *c = &cases[ci];
      /* mask blocks of 64 or 128 tokens; on mma work-groups of 128 rows (case 0: two mask rows
       * a work-group, the group minimum) or 64 (one, the one-row build where B is 128) */
      const int B = ci % 2 ? 128 : 64, mma_rows = ci == 0 ? 128 : 64;
      const clpa_prefill_path path = (clpa_prefill_path)(pi + 1); /* tiles, rows, mma */
      if (path == CLPA_PREFILL_MMA && (!mma_applies(c) || c->bs > 32)) continue; /* mma: 8-32 */
      attn_scene in;
      make_scene(c, &in);
      if (path == CLPA_PREFILL_MMA) /* as the path rounds them */
        attn_scene_round_queries(&in, attn_scene_mma_dtype(c->kv));
      int maxn = 0, maxl = 0;
      for (int s = 0; s < c->seqs; s++) {
        const int n = in.cu[s + 1] - in.cu[s];
        maxn = n > maxn ? n : maxn, maxl = n + in.cached[s] > maxl ? n + in.cached[s] : maxl;
      }
      const int qb = (maxn + B - 1) / B + 1, kb = (maxl + B - 1) / B + 1; /* one spare each */
      const size_t mn = (size_t)c->seqs * c->heads * qb * kb;
      uint8_t *mask = malloc(mn), *ones = malloc(mn);
      for (size_t i = 0; i < mn; i++) mask[i] = rng_below(2), ones[i] = 1;
      for (int h = 0; h < c->heads; h += 3) /* some query blocks drop everything */
        memset(mask + ((size_t)h * qb) * kb, 0, (size_t)kb);
      const size_t rows = (size_t)in.q_rows * c->heads, outn = rows * c->hs;
      double *want = malloc(sizeof(double) * outn), *want_l = malloc(sizeof(double) * rows);
      clpa_ref_prefill_args ra = ref_args(c, &in, want, want_l);
      ra.block_mask = mask, ra.mask_block = B, ra.mask_q_blocks = qb, ra.mask_k_blocks = kb;
      int good = clpa_ref_prefill(&ra) == CLPA_OK;
      attn_scene_dev d;
      clpa_prefill_params p;
      upload(c, &in, &d, &p);
      p.path = path;
      if (path == CLPA_PREFILL_MMA) p.rows_per_group = mma_rows;
      cl_mem bm = test_buffer(ctx, mask, mn), bo = test_buffer(ctx, ones, mn);
      p.block_mask = bm, p.mask_block = B, p.mask_q_blocks = qb, p.mask_k_blocks = kb;
      good &= clpa_prefill(ctx, &p) == CLPA_OK;
      float *got = malloc(sizeof(float) * outn), *gl = malloc(sizeof(float) * rows);
      read_out(c, &d, outn, got, gl);
      double atol = 0, rtol = 0;
      tolerance_for(c, path, &atol, &rtol);
      size_t at;
      const double w = test_worst(got, want, outn, atol, rtol, &at);
      const double wl = test_worst(gl, want_l, rows, LSE_ATOL, LSE_RTOL, &at);
      ok(good && w <= 1.0 && wl <= 1.0,
         "block-sparse prefill, %s path, case %zu: a random mask equals the masked reference"
         " (worst %.3g, lse %.3g)", path_name(path), ci, w, wl);
      /* All ones: the dense result (the unmasked call) exactly. */
      float *dense = malloc(sizeof(float) * outn), *dl = malloc(sizeof(float) * rows);
      p.block_mask = NULL;
      good = clpa_prefill(ctx, &p) == CLPA_OK;
      read_out(c, &d, outn, dense, dl);
      p.block_mask = bo;
      good &= clpa_prefill(ctx, &p) == CLPA_OK;
      read_out(c, &d, outn, got, gl);
      ok(good && memcmp(got, dense, sizeof(float) * outn) == 0 &&
             memcmp(gl, dl, sizeof(float) * rows) == 0,
         "an all-ones mask gives the unmasked result bit for bit (%s path)", path_name(path));
      free(mask), free(ones), free(want), free(want_l), free(got), free(gl), free(dense), free(dl);
      clReleaseMemObject(bm), clReleaseMemObject(bo);
      attn_scene_release(&d);
      attn_scene_free(&in);
    }
}

/* XAttention end to end: clpa_xattn_estimate's mask, on the device, fed
 * straight to clpa_prefill's block_mask (the same [heads][q blocks][k
 * blocks] shape for one sequence) equals the reference masked by the mask
 * read back; the mask is really sparse (tau 0.5) and keeps block 0 and
 * every diagonal. */
static void test_xattn_feeds_prefill(void) {
  const pcase c = {1, 4, 2, 64, 16, 256, 128, F16, F16, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0};
  const int B = 64;
  attn_scene in;
  make_scene(&c, &in);
  const int nq = in.cu[1], off = in.cached[0];
  const int qb = (nq + B - 1) / B, kb = (off + nq + B - 1) / B;
  const size_t mn = (size_t)c.heads * qb * kb;
  attn_scene_dev d;
  clpa_prefill_params p;
  upload(&c, &in, &d, &p);
  cl_mem bm = test_buffer(ctx, NULL, mn);
  test_poison(ctx, bm, mn);
  clpa_xattn_params x;
  clpa_xattn_params_init(&x);
  x.num_heads = c.heads, x.key_cache = d.kc, x.kv = in.kv, x.block_table = d.bt;
  x.max_blocks_per_seq = in.max_blocks, x.query = d.q, x.q_dtype = c.io, x.q_stride = in.q_stride;
  x.num_q = nq, x.q_offset = off, x.stride = 8, x.block = B, x.tau = 0.5, x.mask = bm;
  int good = clpa_xattn_estimate(ctx, &x) == CLPA_OK;
  if (!good) diag("%s", clpa_last_error());
  p.block_mask = bm, p.mask_block = B, p.mask_q_blocks = qb, p.mask_k_blocks = kb;
  good &= clpa_prefill(ctx, &p) == CLPA_OK;
  uint8_t *mask = malloc(mn);
  test_read(ctx, bm, mask, mn);
  size_t kept = 0, causal = 0;
  int diag_ok = 1;
  for (int h = 0; h < c.heads; h++)
    for (int i = 0; i < qb; i++) {
      const uint8_t *row = mask + ((size_t)h * qb + i) * kb;
      const int dg = off / B + i;
      diag_ok &= row[0] == 1 && row[dg] == 1;
      for (int j = 0; j < kb; j++) {
        diag_ok &= row[j] <= 1 && (j <= dg || row[j] == 0);
        kept += j <= dg && row[j], causal += j <= dg;
      }
    }
  ok(good && diag_ok && kept < causal,
     "xattn's mask: 0/1, block 0 and the diagonals kept, nothing past them, sparse (%zu of %zu)",
     kept, causal);
  const size_t rows = (size_t)in.q_rows * c.heads, outn = rows * c.hs;
  double *want = malloc(sizeof(double) * outn), *want_l = malloc(sizeof(double) * rows);
  clpa_ref_prefill_args ra = ref_args(&c, &in, want, want_l);
  ra.block_mask = mask, ra.mask_block = B, ra.mask_q_blocks = qb, ra.mask_k_blocks = kb;
  good &= clpa_ref_prefill(&ra) == CLPA_OK;
  float *got = malloc(sizeof(float) * outn), *gl = malloc(sizeof(float) * rows);
  read_out(&c, &d, outn, got, gl);
  double atol = 0, rtol = 0;
  tolerance_of(c.io, &atol, &rtol);
  size_t at;
  const double w = test_worst(got, want, outn, atol, rtol, &at);
  const double wl = test_worst(gl, want_l, rows, LSE_ATOL, LSE_RTOL, &at);
  ok(good && w <= 1.0 && wl <= 1.0,
     "prefill under xattn's device mask equals the reference under it (worst %.3g, lse %.3g)", w,
     wl);
  free(mask), free(want), free(want_l), free(got), free(gl);
  clReleaseMemObject(bm);
  attn_scene_release(&d);
  attn_scene_free(&in);
}

/* Attention concentrated as real models' is (clpa-bench xattn's recipe,
 * at a smaller scale): dims 0..15 rotary pairs (near the diagonal), dim 16 sinks on
 * keys 0..3, dim 17 on 4 scattered keys, the rest small noise (rotary
 * amplitude 2.5: attention spread over a few blocks, so tau matters). Rewrites
 * a one-sequence case's keys and queries (storage and rounded floats). */
static void make_structured(const pcase *c, attn_scene *in) {
  const int L = in->lens[0], D = c->hs;
  char *hot = calloc((size_t)L, 1);
  for (int i = 0; i < 4; i++) hot[rng_below((uint32_t)L)] = 1;
  float *row = malloc(sizeof(float) * D);
  for (int pass = 0; pass < 2; pass++) /* keys, then queries */
    for (int t = 0; t < (pass ? in->q_rows : L); t++)
      for (int h = 0; h < (pass ? c->heads : c->kv_heads); h++) {
        const int pos = pass ? in->cached[0] + t : t;
        for (int e = 0; e < D; e++) row[e] = (float)rng_uniform(-0.5, 0.5);
        for (int f = 0; f < 8; f++) {
          const double w = 6.283185307179586 / (16.0 * (double)(1 << f));
          row[2 * f] = (float)(2.5 * cos(w * pos)), row[2 * f + 1] = (float)(2.5 * sin(w * pos));
        }
        row[16] = pass ? 3.0f : pos < 4 ? 12.0f : 0.0f;
        row[17] = pass ? 2.0f : hot[pos] ? 12.0f : 0.0f;
        for (int e = 0; e < D; e++)
          if (pass)
            in->q[(size_t)t * in->q_stride + (size_t)h * D + e] = row[e];
          else
            in->kf[attn_scene_key_index(in, 0, h, t, e)] = row[e];
      }
  free(row), free(hot);
  attn_scene_store(in);
}

/* XAttention's accuracy, device end to end on the structured input: tau 1
 * keeps every causal block and gives dense prefill's output bit for bit;
 * below 1 (0.99, 0.9, 0.5) the density falls with tau and the output
 * stays within 1.3 (1 - tau) + 0.01 of dense prefill's, as a relative
 * Frobenius error (measured 0.005-0.007, 0.08-0.11, 0.52-0.55 over seeds
 * 1-3: about 1 - tau, the mass left out). */
static void test_xattn_tau(void) {
  const pcase c = {1, 4, 2, 64, 16, 1024, 0, F16, F16, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0};
  const int B = 64;
  attn_scene in;
  make_scene(&c, &in);
  make_structured(&c, &in);
  const int nq = in.cu[1], qb = (nq + B - 1) / B, kb = qb;
  const size_t mn = (size_t)c.heads * qb * kb, outn = (size_t)nq * c.heads * c.hs;
  attn_scene_dev d;
  clpa_prefill_params p;
  upload(&c, &in, &d, &p);
  float *dense = malloc(sizeof(float) * outn), *got = malloc(sizeof(float) * outn);
  int good = clpa_prefill(ctx, &p) == CLPA_OK;
  read_out(&c, &d, outn, dense, NULL);
  cl_mem bm = test_buffer(ctx, NULL, mn);
  uint8_t *mask = malloc(mn);
  const double taus[] = {1.0, 0.99, 0.9, 0.5};
  double last_density = 2;
  for (int ti = 0; ti < 4; ti++) {
    clpa_xattn_params x;
    clpa_xattn_params_init(&x);
    x.num_heads = c.heads, x.key_cache = d.kc, x.kv = in.kv, x.block_table = d.bt;
    x.max_blocks_per_seq = in.max_blocks, x.query = d.q, x.q_dtype = c.io, x.num_q = nq;
    x.block = B, x.tau = taus[ti], x.mask = bm;
    test_poison(ctx, bm, mn);
    test_poison(ctx, d.out, d.out_bytes);
    int g = clpa_xattn_estimate(ctx, &x) == CLPA_OK;
    p.block_mask = bm, p.mask_block = B, p.mask_q_blocks = qb, p.mask_k_blocks = kb;
    g &= clpa_prefill(ctx, &p) == CLPA_OK;
    test_read(ctx, bm, mask, mn);
    read_out(&c, &d, outn, got, NULL);
    size_t kept = 0, causal = 0;
    for (int h = 0; h < c.heads; h++)
      for (int i = 0; i < qb; i++)
        for (int j = 0; j <= i; j++) kept += mask[((size_t)h * qb + i) * kb + j] != 0, causal++;
    double num = 0, den = 0;
    for (size_t i = 0; i < outn; i++)
      num += ((double)got[i] - dense[i]) * ((double)got[i] - dense[i]),
          den += (double)dense[i] * dense[i];
    const double err = sqrt(num / den), density = (double)kept / (double)causal;
    if (ti == 0)
      ok(good && g && kept == causal && memcmp(got, dense, sizeof(float) * outn) == 0,
         "xattn tau 1: every causal block kept (%zu of %zu), dense prefill's output bit for bit",
         kept, causal);
    else
      ok(good && g && err <= 1.3 * (1 - taus[ti]) + 0.01 && density < 1 && density <= last_density,
         "xattn tau %.2f: density %.3f (falls with tau), output within %.2f of dense (%.4f)",
         taus[ti], density, 1.3 * (1 - taus[ti]) + 0.01, err);
    last_density = density;
  }
  free(dense), free(got), free(mask);
  clReleaseMemObject(bm);
  attn_scene_release(&d);
  attn_scene_free(&in);
}

/* Bad block ids are never followed; they set the fault bit, on every
 * path (each looks its tiles' block ids up its own way). */
static void test_faults(void) {
  pcase c = {4, 4, 2, 64, 16, 20, 40, F16, F32, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0};
  attn_scene in;
  make_scene(&c, &in);
  in.tables[1] = -5;                    /* seq 0, block 1 */
  in.tables[in.max_blocks] = 1 << 30;   /* seq 1, block 0 */
  attn_scene_dev d;
  clpa_prefill_params p;
  upload(&c, &in, &d, &p);
  for (int pi = CLPA_PREFILL_TILES; pi <= CLPA_PREFILL_MMA; pi++) {
    const char *name = path_name((clpa_prefill_path)pi);
    p.path = (clpa_prefill_path)pi;
    ok(clpa_prefill(ctx, &p) == CLPA_OK, "%s path: prefill with bad table entries is enqueued",
       name);
    int32_t f = 0;
    const clpa_status st = clpa_context_check_faults(ctx, &f);
    ok(st == CLPA_ERR_BAD_BLOCK && (f & CLPA_FAULT_BAD_BLOCK), "%s path: the fault is reported:"
       " 0x%x, %s", name, f, clpa_context_last_error(ctx));
    ok(clpa_context_check_faults(ctx, &f) == CLPA_OK && f == 0,
       "%s path: reading the faults clears them", name);
  }
  attn_scene_release(&d);
  attn_scene_free(&in);
}

/* The mma path's keys a tile (docs/decisions/0046-prefill-mma-local-and-keys.md):
 * on NVIDIA the tuning row takes 64 for heads of 128 in f16 or bf16, 128
 * rows a work-group, where two stages of 64-key tiles and the queries fit
 * its 96 KiB (split-key caches; HND and NHD, rows padded, take 100 KiB and
 * keep 32) and a call's work-groups walk 16 tiles of 64 keys or more on
 * average, else 32; elsewhere (no such row) always 32. The path is forced
 * (mma runs emulated off NVIDIA), so the rows are too: a forced path takes
 * 64 rows, not the table's 128. Plans only: nothing runs. */
static void test_mma_keys_rule(void) {
  enum { HS = 128, BS = 16, BLOCKS = 256, HEADS = 4, LONG = BLOCKS * BS };
  const clpa_kv_layout_kind SPLIT = CLPA_KV_LAYOUT_SPLIT_KEY;
  clpa_device_info info;
  clpa_context_device_info(ctx, &info);
  const int nv = info.lanes == CLPA_LANES_NV_PTX;
  clpa_kv_layout kv, nhd;
  if (!ok(clpa_kv_layout_init(&kv, F16, BLOCKS, BS, 1, HS) == CLPA_OK &&
              clpa_kv_layout_init_kind(&nhd, CLPA_KV_LAYOUT_NHD, F16, BLOCKS, BS, 1, HS) ==
                  CLPA_OK,
          "keys rule: layouts"))
    return;
  int32_t table[BLOCKS];
  for (int i = 0; i < BLOCKS; i++) table[i] = BLOCKS - 1 - i;
  const size_t qbytes = (size_t)LONG * HEADS * HS * 2; /* f16 queries and output */
  const size_t cbytes = kv.cache_bytes > nhd.cache_bytes ? kv.cache_bytes : nhd.cache_bytes;
  cl_mem kc = test_buffer(ctx, NULL, cbytes), vc = test_buffer(ctx, NULL, cbytes);
  cl_mem bt = test_buffer(ctx, table, sizeof table);
  cl_mem q = test_buffer(ctx, NULL, qbytes), out = test_buffer(ctx, NULL, qbytes);
  const struct {
    int32_t new_len, cached, rows;
    clpa_dtype dtype;
    clpa_kv_layout_kind kind;
    int want_nv; /* keys on NVIDIA; 32 elsewhere */
  } cases[] = {
      {LONG, 0, 128, F16, SPLIT, 64},                    /* about 32 tiles of 64 a work-group */
      {LONG / 2, LONG / 2, 128, CLPA_DTYPE_BF16, SPLIT, 64}, /* behind a cached prefix */
      {512, 0, 128, F16, SPLIT, 32},                     /* about 4: the tiles of 32 */
      {LONG, 0, 128, CLPA_DTYPE_FP8_E4M3, SPLIT, 32},    /* fp8: 32 */
      {LONG, 0, 64, F16, SPLIT, 32},                     /* 64 rows a work-group: 32 */
      {LONG, 0, 128, F16, CLPA_KV_LAYOUT_NHD, 32},       /* two stages of 64 pass 96 KiB */
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    clpa_kv_layout l;
    clpa_kv_layout_init_kind(&l, cases[i].kind, cases[i].dtype, BLOCKS, BS, 1, HS);
    const int32_t cu[] = {0, cases[i].new_len}, cached[] = {cases[i].cached};
    clpa_prefill_params p;
    clpa_prefill_params_init(&p);
    p.num_seqs = 1, p.num_heads = HEADS, p.key_cache = kc, p.value_cache = vc, p.kv = l;
    p.block_tables = bt, p.max_blocks_per_seq = BLOCKS, p.cu_seqlens_q = cu;
    p.cached_lens = cached, p.query = q, p.q_dtype = F16, p.out = out;
    p.path = CLPA_PREFILL_MMA; /* emulated off NVIDIA: the same planning */
    p.rows_per_group = cases[i].rows;
    clpa_prefill_path path = CLPA_PREFILL_AUTO;
    int32_t rows = 0, keys = 0;
    const clpa_status st = clpa_prefill_choice(ctx, &p, &path, &rows, &keys);
    const int want = nv ? cases[i].want_nv : 32;
    /* an fp8 cache where the device does not convert it (NVIDIA before 8.9): no mma at all */
    const int fp8_refused = cases[i].dtype == CLPA_DTYPE_FP8_E4M3 && nv &&
                            info.nv_compute_capability < 89 && st == CLPA_ERR_UNSUPPORTED;
    ok(fp8_refused || (st == CLPA_OK && path == CLPA_PREFILL_MMA && keys == want),
       "keys rule: %d new over %d cached, %s %s cache, %d rows: %d keys a tile (want %d, %s)"
       " (%s)", cases[i].new_len, cases[i].cached, clpa_dtype_name(cases[i].dtype),
       cases[i].kind == CLPA_KV_LAYOUT_NHD ? "nhd" : "split-key", rows, keys, want,
       nv ? "NVIDIA" : "no NVIDIA row", st == CLPA_OK ? "ok" : clpa_last_error());
  }
  clReleaseMemObject(kc), clReleaseMemObject(vc), clReleaseMemObject(bt);
  clReleaseMemObject(q), clReleaseMemObject(out);
}

/* Every bad argument is refused with a message naming it and the public
 * call, before anything is enqueued: the poisoned output stays. */
static void test_bad_args(void) {
  clpa_kv_layout kv;
  clpa_kv_layout_init(&kv, F16, 4, 16, 2, 64);
  cl_mem q = test_buffer(ctx, NULL, 4 * 4 * 64 * 10), kc = test_buffer(ctx, NULL, kv.cache_bytes);
  cl_mem vc = test_buffer(ctx, NULL, kv.cache_bytes), bt = test_buffer(ctx, NULL, 4 * 8);
  cl_mem out = test_buffer(ctx, NULL, 4 * 4 * 64 * 10), small = test_buffer(ctx, NULL, 64);
  cl_mem tiny = test_buffer(ctx, NULL, 8); /* two floats: less than 4 heads need */
  test_poison(ctx, out, 4 * 4 * 64 * 10);
  int32_t cu[3] = {0, 6, 10}, cached[2] = {5, 20}, bad_cu[3] = {0, 7, 4}, cu1[3] = {-1, 6, 10};
  int32_t neg[2] = {-1, 0}, big[2] = {120, 0}, big2[2] = {60, 0};
  cl_event null_ev[1] = {NULL};
  clpa_prefill_params good;
  clpa_prefill_params_init(&good);
  good.num_seqs = 2, good.num_heads = 4, good.kv = kv, good.key_cache = kc, good.value_cache = vc;
  good.max_blocks_per_seq = 4, good.cu_seqlens_q = cu, good.cached_lens = cached;
  good.scale = 0.125f, good.query = q, good.block_tables = bt, good.out = out;
  BAD_CALLS(clpa_prefill_params, 64);
  BAD(num_seqs = -1, "num_seqs = -1", CLPA_ERR_INVALID_ARG);
  BAD(num_heads = 3, "num_heads = 3", CLPA_ERR_INVALID_ARG);
  BAD(num_heads = INT32_MIN, "num_heads", CLPA_ERR_INVALID_ARG);
  BAD(kv.head_size = 48, "head_size = 48", CLPA_ERR_UNSUPPORTED);
  BAD(kv.block_size = 12, "block_size = 12 (supported: powers of two, 1 to 256)",
      CLPA_ERR_UNSUPPORTED);
  BAD(kv.block_size = 512, "block_size = 512", CLPA_ERR_UNSUPPORTED);
  BAD(kv.num_blocks = 5, "key_cache holds", CLPA_ERR_INVALID_ARG);
  BAD(kv.dtype = (clpa_dtype)-3, "dtype", CLPA_ERR_INVALID_ARG);
  BAD(value_cache = small, "value_cache holds", CLPA_ERR_INVALID_ARG);
  BAD(cache = (const clpa_cache *)1, "not both", CLPA_ERR_INVALID_ARG);
  BAD(cu_seqlens_q = NULL, "cu_seqlens_q", CLPA_ERR_INVALID_ARG);
  BAD(cached_lens = NULL, "cached_lens", CLPA_ERR_INVALID_ARG);
  BAD(cu_seqlens_q = bad_cu, "must not decrease", CLPA_ERR_INVALID_ARG);
  BAD(cu_seqlens_q = cu1, "cu_seqlens_q[0] = -1", CLPA_ERR_INVALID_ARG);
  BAD(cached_lens = neg, "cached_lens[0] = -1", CLPA_ERR_INVALID_ARG);
  BAD(cached_lens = big, "block-table row", CLPA_ERR_INVALID_ARG);
  BAD(max_blocks_per_seq = 0, "max_blocks_per_seq = 0", CLPA_ERR_INVALID_ARG);
  BAD(max_blocks_per_seq = INT32_MAX, "block_tables holds", CLPA_ERR_INVALID_ARG);
  BAD(causal = 2, "causal = 2", CLPA_ERR_INVALID_ARG);
  BAD(q_dtype = E4M3, "q_dtype", CLPA_ERR_UNSUPPORTED);
  BAD(scale = INFINITY, "scale", CLPA_ERR_INVALID_ARG);
  BAD(k_scale = -1, "k_scale", CLPA_ERR_INVALID_ARG);
  BAD(soft_cap = NAN, "soft_cap", CLPA_ERR_INVALID_ARG);
  BAD(sliding_window = -1, "sliding_window", CLPA_ERR_INVALID_ARG);
  BAD(q_stride = 100, "q_stride", CLPA_ERR_INVALID_ARG);
  BAD(q_stride = SIZE_MAX, "overflows", CLPA_ERR_INVALID_ARG);
  BAD(query = small, "query holds", CLPA_ERR_INVALID_ARG);
  BAD(out = NULL, "out", CLPA_ERR_INVALID_ARG);
  BAD(lse = small, "lse holds", CLPA_ERR_INVALID_ARG);
  BAD(alibi_slopes = tiny, "alibi_slopes holds", CLPA_ERR_INVALID_ARG);
  BAD(sinks = tiny, "sinks holds", CLPA_ERR_INVALID_ARG);
  BAD(k_scale_buffer = tiny, "k_scale_buffer", CLPA_ERR_INVALID_ARG); /* 8 bytes: fine */
  bad[n - 1].p.v_scale_buffer = bt, bad[n - 1].p.sinks = tiny, bad[n - 1].needle = "sinks holds";
  BAD(rows_per_group = 12, "rows_per_group = 12", CLPA_ERR_INVALID_ARG);
  bad[n - 1].p.path = CLPA_PREFILL_TILES;
  BAD(keys_per_tile = -8, "keys_per_tile = -8", CLPA_ERR_INVALID_ARG);
  bad[n - 1].p.path = CLPA_PREFILL_TILES;
  BAD(keys_per_tile = 8, "no prefill tile", CLPA_ERR_UNSUPPORTED);
  bad[n - 1].p.rows_per_group = 8, bad[n - 1].p.path = CLPA_PREFILL_TILES; /* 16 lanes a row cannot share 8 keys */
  BAD(rows_per_group = 32, "rows_per_group = 32", CLPA_ERR_INVALID_ARG);
  bad[n - 1].p.path = CLPA_PREFILL_ROWS;
  BAD(path = (clpa_prefill_path)4, "path = 4", CLPA_ERR_INVALID_ARG);
  BAD(rows_per_group = 16, "the mma path: 0 = auto, 64 or 128", CLPA_ERR_INVALID_ARG);
  bad[n - 1].p.path = CLPA_PREFILL_MMA;
  BAD(keys_per_tile = 16, "the mma path: 0 = auto, 32 or 64", CLPA_ERR_INVALID_ARG);
  bad[n - 1].p.path = CLPA_PREFILL_MMA;
  BAD(path = CLPA_PREFILL_MMA, "f16, bf16 or fp8 cache", CLPA_ERR_UNSUPPORTED);
  bad[n - 1].p.kv.dtype = F32, bad[n - 1].p.kv.num_blocks = 2; /* the same bytes: fits the buffers */
  BAD(rows_per_warp = 24, "rows_per_warp = 24 (0 = auto, 16 or 32)", CLPA_ERR_INVALID_ARG);
  bad[n - 1].p.path = CLPA_PREFILL_MMA;
  BAD(rows_per_warp = 32, "is the mma path's, and the call takes the tiles path",
      CLPA_ERR_INVALID_ARG);
  bad[n - 1].p.path = CLPA_PREFILL_TILES;
  BAD(rows_per_warp = 32, "rows_per_warp = 32 takes no block_mask", CLPA_ERR_UNSUPPORTED);
  bad[n - 1].p.path = CLPA_PREFILL_MMA, bad[n - 1].p.block_mask = small;
  bad[n - 1].p.mask_block = 64, bad[n - 1].p.mask_q_blocks = 1, bad[n - 1].p.mask_k_blocks = 1;
  BAD(split_keys = 100, "split_keys = 100 (0 = auto, -1 = never, or a positive multiple of 64)",
      CLPA_ERR_INVALID_ARG);
  BAD(split_keys = -2, "split_keys = -2", CLPA_ERR_INVALID_ARG);
  BAD(decode_rows_kernel = 2, "decode_rows_kernel = 2 (0 = auto, 1 = always, -1 = never)",
      CLPA_ERR_INVALID_ARG);
  BAD(decode_rows_kernel = 1, "decode's kernel takes no block_mask", CLPA_ERR_UNSUPPORTED);
  bad[n - 1].p.block_mask = small, bad[n - 1].p.mask_block = 64;
  bad[n - 1].p.mask_q_blocks = 1, bad[n - 1].p.mask_k_blocks = 1;
  BAD(reserved32 = 1, "reserved32 = 1", CLPA_ERR_INVALID_ARG);
  BAD(split_keys = 64, "calls with a block_mask are not split", CLPA_ERR_UNSUPPORTED);
  bad[n - 1].p.block_mask = small, bad[n - 1].p.mask_block = 64;
  bad[n - 1].p.mask_q_blocks = 1, bad[n - 1].p.mask_k_blocks = 1;
  BAD(precision = (clpa_precision)-1, "precision = -1", CLPA_ERR_INVALID_ARG);
  BAD(path = CLPA_PREFILL_MMA, "precision is f32", CLPA_ERR_UNSUPPORTED);
  bad[n - 1].p.precision = CLPA_PRECISION_F32;
  BAD(block_mask = small, "mask_block = 0", CLPA_ERR_INVALID_ARG);
  BAD(block_mask = small, "mask_block = 96", CLPA_ERR_INVALID_ARG);
  bad[n - 1].p.mask_block = 96;
  BAD(block_mask = small, "mask_q_blocks = 0", CLPA_ERR_INVALID_ARG);
  bad[n - 1].p.mask_block = 64;
  BAD(block_mask = small, "need more than", CLPA_ERR_INVALID_ARG); /* 60 + 6 keys need 2 blocks */
  bad[n - 1].p.mask_block = 64, bad[n - 1].p.mask_q_blocks = 1, bad[n - 1].p.mask_k_blocks = 1;
  bad[n - 1].p.num_seqs = 1, bad[n - 1].p.max_blocks_per_seq = 8, bad[n - 1].p.cached_lens = big2;
  BAD(block_mask = tiny, "block_mask holds", CLPA_ERR_INVALID_ARG);
  bad[n - 1].p.mask_block = 64, bad[n - 1].p.mask_q_blocks = 1, bad[n - 1].p.mask_k_blocks = 4;
  BAD(num_wait_events = 1, "wait_events", CLPA_ERR_INVALID_ARG);
  BAD(wait_events = null_ev, "wait_events[0] is NULL", CLPA_ERR_INVALID_ARG);
  bad[n - 1].p.num_wait_events = 1;
  /* 2^27 new tokens x 16 query heads a KV head: query rows past 32 bits (the table row holds
   * the tokens; the buffers are checked after the plan) */
  int32_t cu_huge[2] = {0, 1 << 27}, none[1] = {0};
  cl_mem bt_huge = test_buffer(ctx, NULL, (size_t)4 << 23);
  BAD(num_heads = 32, "past the prefill kernels' 32-bit row numbers", CLPA_ERR_UNSUPPORTED);
  bad[n - 1].p.num_seqs = 1, bad[n - 1].p.cu_seqlens_q = cu_huge, bad[n - 1].p.cached_lens = none;
  bad[n - 1].p.max_blocks_per_seq = 1 << 23, bad[n - 1].p.block_tables = bt_huge;
  BAD_CALLS_CHECK(clpa_prefill, "clpa_prefill: ");
  ok(clpa_prefill(NULL, &good) == CLPA_ERR_INVALID_ARG, "NULL context");
  ok(clpa_prefill(ctx, NULL) == CLPA_ERR_INVALID_ARG, "NULL params");
  ok(test_untouched(ctx, out, 4 * 4 * 64 * 10), "no refused call wrote to the output");
  /* merge_states' refusals */
  clpa_merge_states_params m;
  clpa_merge_states_params_init(&m);
  m.num_rows = 4, m.head_size = 64, m.outs[0] = m.outs[1] = q, m.lses[0] = m.lses[1] = small;
  m.out = out;
  clpa_merge_states_params mb = m;
  mb.num_inputs = 1;
  ok(clpa_merge_states(ctx, &mb) == CLPA_ERR_INVALID_ARG && strstr(clpa_last_error(), "num_inputs"),
     "merge_states: one input refused: %s", clpa_last_error());
  mb = m, mb.num_inputs = 9;
  ok(clpa_merge_states(ctx, &mb) == CLPA_ERR_INVALID_ARG, "merge_states: nine inputs refused");
  mb = m, mb.num_rows = 17; /* 68 bytes of lse > 64 */
  ok(clpa_merge_states(ctx, &mb) == CLPA_ERR_INVALID_ARG && strstr(clpa_last_error(), "lses[0] holds"),
     "merge_states: a short lse refused: %s", clpa_last_error());
  mb = m, mb.dtype = E5M2;
  ok(clpa_merge_states(ctx, &mb) == CLPA_ERR_UNSUPPORTED, "merge_states: fp8 outputs refused");
  mb = m, mb.num_rows = INT32_MAX, mb.head_size = INT32_MAX;
  ok(clpa_merge_states(ctx, &mb) == CLPA_ERR_INVALID_ARG,
     "merge_states: INT32_MAX rows of INT32_MAX refused: %s", clpa_last_error());
  mb = m, mb.outs[1] = NULL;
  ok(clpa_merge_states(ctx, &mb) == CLPA_ERR_INVALID_ARG && strstr(clpa_last_error(), "outs[1]"),
     "merge_states: a missing input named: %s", clpa_last_error());
  cl_mem all[] = {q, kc, vc, bt, out, small, tiny, bt_huge};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) clReleaseMemObject(all[i]);
}

/* CSR page tables (FlashInfer's) on the scenes' tables (shuffled, shared
 * within the cached prefixes, spare entries), against the reference and
 * bit for bit against the padded table: `all` (--csr) the grid on every
 * path, else one case on each. */
static void test_csr(int all) {
  csr = 1;
  if (all)
    for (size_t i = 0; i < sizeof default_grid / sizeof *default_grid; i++) run_case(&default_grid[i]);
  else
    run_case(&default_grid[1]);
  csr = 0;
}

/* A bad CSR table is never followed: a page index outside the cache sets
 * CLPA_FAULT_BAD_BLOCK and masks its keys; a row whose length is not the
 * host's (cached_lens + new tokens) sets CLPA_FAULT_BAD_CONTEXT_LEN and
 * gives no pages (its keys masked: CLPA_FAULT_BAD_BLOCK too, where
 * prefill's kernel reads it; decode's reads none); the other sequences'
 * rows are the padded table's, bit for bit. On each path, then (route) a
 * mixed step whose leading decode rows run on decode's kernel, one of
 * them spoilt. */
static void test_csr_faults(void) {
  const pcase *c = &default_grid[1];
  for (int pi = CLPA_PREFILL_TILES; pi <= CLPA_PREFILL_MMA + 1; pi++) {
    if (pi == CLPA_PREFILL_MMA && !mma_applies(c)) continue;
    route = pi > CLPA_PREFILL_MMA;
    attn_scene in;
    make_scene(c, &in);
    attn_scene_dev d;
    clpa_prefill_params p;
    upload(c, &in, &d, &p);
    p.path = route ? CLPA_PREFILL_TILES : (clpa_prefill_path)pi;
    if (route) p.decode_rows_kernel = 1, p.split_keys = -1;
    route = 0;
    void *pout, *plse;
    padded_results(&p, &d, &pout, &plse);
    attn_scene_csr_host h;
    attn_scene_csr(ctx, &in, 3, &d, &h);
    for (int e = 0; e < 3; e++) {
      int s = 0; /* the spoilt sequence: one with new tokens and pages */
      while (s < c->seqs - 1 && (in.cu[s + 1] == in.cu[s] || h.indptr[s + 1] == h.indptr[s])) s++;
      int32_t *ix = malloc(sizeof(int32_t) * (size_t)h.num_indices), *lp = malloc(sizeof(int32_t) * (size_t)c->seqs);
      memcpy(ix, h.indices, sizeof(int32_t) * (size_t)h.num_indices);
      memcpy(lp, h.last, sizeof(int32_t) * (size_t)c->seqs);
      int want = CLPA_FAULT_BAD_CONTEXT_LEN | (p.decode_rows_kernel > 0 ? 0 : CLPA_FAULT_BAD_BLOCK);
      if (e == 0) ix[h.indptr[s + 1] - 1] = in.num_blocks, want = CLPA_FAULT_BAD_BLOCK;
      if (e == 1) lp[s] = lp[s] > 1 ? lp[s] - 1 : 2; /* in [1, block_size], another length */
      if (e == 2) lp[s] = c->bs + 1;
      clReleaseMemObject(d.indices), clReleaseMemObject(d.last);
      d.indices = test_buffer(ctx, ix, sizeof(int32_t) * (size_t)h.num_indices);
      d.last = test_buffer(ctx, lp, sizeof(int32_t) * (size_t)c->seqs);
      p.page_table = CLPA_PAGE_TABLE_CSR, p.page_indptr = d.indptr, p.page_indices = d.indices;
      p.last_page_len = d.last, p.num_page_indices = h.num_indices;
      p.block_tables = NULL, p.max_blocks_per_seq = 0;
      test_poison(ctx, d.out, d.out_bytes), test_poison(ctx, d.lse, d.lse_bytes);
      const char *on = p.decode_rows_kernel > 0 ? " (sequence 0 on decode's kernel)" : "";
      ok(clpa_prefill(ctx, &p) == CLPA_OK, "%s path%s, CSR fault %d: enqueued", path_name(p.path),
         on, e);
      int32_t f = 0;
      clpa_context_check_faults(ctx, &f);
      ok(f == want, "%s path%s, %s: fault bits 0x%x (want 0x%x)", path_name(p.path), on,
         e == 0 ? "a page index = num_blocks" : e == 1 ? "a length not the host's" : "last_page_len = block_size + 1",
         f, want);
      char *o = malloc(d.out_bytes), *l = malloc(d.lse_bytes);
      test_read(ctx, d.out, o, d.out_bytes), test_read(ctx, d.lse, l, d.lse_bytes);
      const size_t orow = d.out_bytes / (size_t)in.q_rows, lrow = d.lse_bytes / (size_t)in.q_rows;
      int same = 1;
      for (int t = 0; t < in.q_rows; t++)
        if (t < in.cu[s] || t >= in.cu[s + 1])
          same &= memcmp(o + t * orow, (char *)pout + t * orow, orow) == 0 &&
                  memcmp(l + t * lrow, (char *)plse + t * lrow, lrow) == 0;
      ok(same, "... the other sequences' rows are the padded table's");
      free(o), free(l), free(ix), free(lp);
    }
    free(h.indptr), free(h.indices), free(h.last), free(pout), free(plse);
    attn_scene_release(&d);
    attn_scene_free(&in);
  }
}

/* A mixed step (decode rows over long contexts beside a prefill chunk)
 * with the decode rows' keys split (split_keys forced: 64 and 192 keys a
 * part), on every path, against the reference; each plan splits the rows
 * the model says and its runs give the call's bits. The grid's cases that
 * run on every path, so that no program is built for these alone (the
 * merge kernel is in each path's program); `all` every such case. */
static void test_splits(int all) {
  static const int cases[] = {11, 12, 4, 3, 2, 8, 10};
  const size_t n = all ? sizeof cases / sizeof *cases : 4;
  for (size_t i = 0; i < n; i++) {
    split = i % 2 ? 192 : 64;
    run_case(&default_grid[cases[i]]);
  }
  split = 0;
  /* the leading decode rows on decode's kernel, beside a chunk and a decode row after it */
  route = 1;
  for (size_t i = 0; i < n; i++) run_case(&default_grid[cases[i]]);
  /* both on CSR tables (test_csr's case): the padded table's results, bit for bit */
  csr = 1;
  run_case(&default_grid[1]);
  route = 0, split = 64;
  run_case(&default_grid[1]);
  split = 0, csr = 0;
}

int main(int argc, char **argv) {
  rng_seed_from_env();
  ctx = test_context(0);
  if (argc > 1 && strcmp(argv[1], "--faults") == 0) { /* the bad-block checks alone */
    test_faults();
    return test_context_done(ctx);
  }
  if (argc > 1 && strcmp(argv[1], "--layouts") == 0) { /* the HND and NHD cases alone */
    test_layouts(1);
    return test_context_done(ctx);
  }
  if (argc > 1 && strcmp(argv[1], "--csr") == 0) { /* CSR page tables alone, broadly */
    test_csr(1);
    test_csr_faults();
    return test_context_done(ctx);
  }
  if (argc > 1 && strcmp(argv[1], "--sparse") == 0) { /* block masks alone */
    test_sparse();
    test_xattn_feeds_prefill();
    return test_context_done(ctx);
  }
  if (argc > 1 && strcmp(argv[1], "--bad-args") == 0) { /* the refusals alone */
    test_bad_args();
    return test_context_done(ctx);
  }
  if (argc > 1 && strcmp(argv[1], "--splits") == 0) { /* mixed steps' split rows alone */
    test_splits(1);
    return test_context_done(ctx);
  }
  if (argc > 1 && strcmp(argv[1], "--pages") == 0) { /* the page sizes alone */
    test_pages(1);
    return test_context_done(ctx);
  }
  for (int pi = CLPA_PREFILL_TILES; argc > 1 && pi <= CLPA_PREFILL_MMA; pi++) {
    char flag[16];
    snprintf(flag, sizeof flag, "--%s", path_name((clpa_prefill_path)pi));
    if (strcmp(argv[1], flag) != 0) continue;
    for (size_t i = 0; i < sizeof default_grid / sizeof *default_grid; i++) /* one path's grid */
      if (pi != CLPA_PREFILL_MMA || mma_applies(&default_grid[i]))
        run_case_on(&default_grid[i], (clpa_prefill_path)pi);
    if (pi == CLPA_PREFILL_MMA) test_mma_keys_rule();
    return test_context_done(ctx);
  }
  /* Every case on the device's own path; half of them (all with --full: the
   * slow suite) on every path, the others emulated, so that a cold kernel
   * cache builds half the emulated programs (CI). The half keeps mma on f16
   * and bf16, head sizes 64, 80 and 256 and a long case, forced tiles of
   * 16 x 32, 64 x 8 and 16 x 16, full attention and an f32 cache. */
  const int full = argc > 1 && strcmp(argv[1], "--full") == 0;
  const unsigned every_path = 1u << 2 | 1u << 3 | 1u << 4 | 1u << 8 | 1u << 10 | 1u << 11 | 1u << 12;
  for (size_t i = 0; i < sizeof default_grid / sizeof *default_grid; i++) {
    if (full || (every_path >> i & 1u))
      run_case(&default_grid[i]);
    else
      run_case_on(&default_grid[i], native_path(&default_grid[i]));
  }
  test_layouts(0);
  test_pages(full);
  test_chunks();
  test_splits(full);
  test_decode_equal();
  test_offset_rows();
  test_sparse();
  test_xattn_feeds_prefill();
  test_xattn_tau();
  test_merge();
  test_faults();
  test_csr(0);
  test_csr_faults();
  test_bad_args();
  test_mma_keys_rule();
  return test_context_done(ctx);
}
