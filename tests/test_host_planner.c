/*
 * test_host_planner.c — decode's planner (host/decode_planner.c) without a
 * device:
 *   1. the plans of tests/plan_grid.h's grid are those tests/data/
 *      decode_plans.txt records (each grid's count and hash, and every
 *      line the file shows), so a change of plan is a change of that file;
 *   2. its invariants over the grid and over random shapes, lengths,
 *      devices and tuning rows: every token in exactly one partition, no
 *      partition past its bound, the work-group and its local memory on
 *      the device, the grid's sizes in range, the forced fields kept.
 *
 *   test_host_planner DATA [RANDOM_CASES]   the checks (the seed from CLPA_TEST_SEED)
 *   test_host_planner --record              writes the data file to stdout
 *   test_host_planner --all                 every line of the grid, for a diff
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "decode_planner.h"
#include "last_error.h"
#include "plan_grid.h"
#include "tap.h"

#define SAMPLE 199                /* the data file shows every 199th line of a grid */
#define ROWS_LOGITS 16384         /* decode_rows.cl's private logits a work-item (floats) */
#define MAX_CONTEXT_LEN (1 << 30) /* clpa.h's CLPA_MAX_CONTEXT_LEN */

/* A grid device's facts and tuning row, as lib/device_caps.c and
 * lib/tuning.c give them (the decode facts are every row's). */
static void device_of(const grid_device *d, clpa_device_facts *dev, clpa_decode_tuning *t) {
  memset(dev, 0, sizeof *dev);
  dev->name = d->name, dev->is_cpu = d->is_cpu, dev->compute_units = d->compute_units;
  dev->local_mem_bytes = d->local_mem_bytes, dev->max_work_group_size = d->max_work_group_size;
  dev->native_float_width = d->native_float_width;
  dev->lane_width = d->lanes == 2   ? 32
                    : d->lanes == 1 ? (d->subgroup_size < 32 ? d->subgroup_size : 32)
                                    : 0;
  dev->mma_native = d->lanes == 2 ? d->cc >= 80 : -1;
  dev->compute_capability = d->cc;
  dev->merge_in_launch = 1;
  const clpa_decode_tuning row = {d->partition, d->resident, 12, 8, 8, 512, 128,
                                  d->work_list, d->list_partition, d->device_list};
  *t = row;
}

static clpa_decode_shape shape_of(const grid_case *c) {
  const clpa_decode_shape s = {
      c->num_seqs,  c->num_heads,       c->num_kv_heads,   c->head_size, c->block_size,
      c->dtype,     c->max_context_len, c->host_lens,      c->path,      c->variant,
      c->precision, c->partition_size,  c->heads_per_group, CLPA_KV_LAYOUT_SPLIT_KEY, 0, 0};
  return s;
}

static void to_grid_plan(const clpa_decode_decision *d, grid_plan *g) {
  const grid_plan p = {d->path,      d->v2,      d->partition,   d->heads_per_group, d->sg,
                       d->max_parts, d->threads, d->key_vectors, d->logits_stride,   d->chunk,
                       d->pipe,      d->maxnreg,  d->list_entries};
  *g = p;
}

/* ---- invariants ---------------------------------------------------------- */

/* Whether decode_rows.cl builds for the block size: blocks of 8 or more; smaller ones a head of
 * 16s (its key vectors and value rows), one token or a key vector's VT = 16 / x of them. */
static int rows_build(const clpa_decode_shape *s) {
  const int bs = s->block_size;
  return bs >= 8 || (s->head_size % 16 == 0 && (bs == 1 || bs >= (int)clpa_dtype_size(s->kv_dtype)));
}

/* Whether decode.cl builds for the block size (its #errors, restated): emulated lanes one a
 * token within the work-group; real ones a head of whole TGS x VEC_SIZE vectors, a block's
 * value vectors within a lane group; and the planner keeps real ones at blocks of 8 to 32
 * (the shapes tests have run). */
static int lanes_build(const clpa_decode_shape *s, const clpa_device_facts *dev) {
  const int bs = s->block_size, sg = dev->lane_width ? dev->lane_width : bs;
  const int bytes = (int)clpa_dtype_size(s->kv_dtype), x = 16 / bytes;
  const int tgs = sg / bs > 1 ? sg / bs : 1;
  const int ve = 16 / (tgs * bytes);
  const int vec = ve >= 16 ? 16 : ve >= 8 ? 8 : ve >= 4 ? 4 : ve >= 2 ? 2 : 1;
  const int vvecs = bs / (x < bs ? x : bs);
  return CLPA_PLANNER_LANES_THREADS % sg == 0 && s->head_size % (tgs * vec) == 0 && vvecs <= sg &&
         (dev->lane_width || tgs == 1) && (!dev->lane_width || (bs >= 8 && bs <= 32));
}

static int ceil_div(int64_t a, int64_t b) { return (int)((a + b - 1) / b); }
static int64_t round_up(int64_t a, int64_t b) { return (a + b - 1) / b * b; }

/* Row i's partitions counted in tokens from its window's first chunk (the
 * planner counts chunks: the same where a partition is whole chunks). */
static int64_t list_row_parts(const clpa_decode_shape *s, const clpa_decode_decision *d, int i) {
  const int64_t L = s->host_context_lens[i], w = s->sliding_window;
  const int64_t first = w > 0 && L > w ? (L - w) / d->chunk * d->chunk : 0;
  const int64_t n = (L - first + d->partition - 1) / d->partition;
  return n > 1 ? n : 1;
}

static long device_lists_checked; /* broken_device_list's plans with a device list */

/* A plan without host lengths whose list the device makes (clpa_decode_mma_list): there where
 * the caller or the tuning row asks for one in place of a blind v2 rectangle, 4 warps, the
 * tuning row's floor a partition, and its bounds: for random lengths, cut as the kernel cuts
 * them, no row past max_parts partitions and all of them within the entries. */
static const char *broken_device_list(const clpa_decode_shape *s, const clpa_device_facts *dev,
                                      const clpa_decode_decision *d, const clpa_decode_tuning *t) {
  const int on = s->work_list > 0 ||
                 (s->work_list == 0 && t->mma_device_list > 0 && s->num_seqs > 1);
  if (!(d->path == CLPA_PLANNER_MMA && d->v2 && !s->host_context_lens && on &&
        !s->partition_size && dev->merge_in_launch))
    return d->list_entries ? "a device list where none applies" : NULL;
  if (!d->list_entries) return NULL; /* no room for 4 warps, or past the grid: the rectangle */
  const int64_t cus = dev->compute_units ? dev->compute_units : 1;
  const int64_t want = 3 * cus / 2 > 0 ? 3 * cus / 2 : 1, groups = s->num_heads / d->heads_per_group;
  const int64_t share_parts = (want + groups - 1) / groups;
  const int max_ctx = s->max_context_len > 0 ? s->max_context_len : 1;
  const int mu = clpa_dtype_size(s->kv_dtype) == 1 ? 32 : 16;
  const int unit = s->block_size < mu ? mu : s->block_size;
  const int64_t floor = round_up(t->mma_device_list > 0 ? t->mma_device_list : 256, unit);
  const int64_t mp = share_parts < ceil_div(max_ctx, floor) ? share_parts : ceil_div(max_ctx, floor);
  if (d->list_want != want || d->list_entries != s->num_seqs + share_parts || d->max_parts != mp ||
      d->partition != floor || d->threads != 128 || d->work_pairs || d->pipe ||
      d->partition % d->chunk)
    return "device list: its entries, want, partitions or warps";
  device_lists_checked++;
  const int64_t pch = floor / d->chunk, longest = (max_ctx + d->chunk - 1) / d->chunk + 1;
  int64_t *c = malloc(sizeof(int64_t) * (size_t)s->num_seqs);
  if (!c) BAIL_OUT("out of memory");
  const char *why = NULL;
  for (int trial = 0; trial < 3 && !why; trial++) {
    int64_t total = 0, entries = 0;
    for (int i = 0; i < s->num_seqs; i++) {
      const int64_t L = trial == 0 ? max_ctx
                        : trial == 1 ? (i ? 0 : max_ctx)
                                     : (int64_t)rng_below((uint32_t)max_ctx + 1);
      const int64_t w = s->sliding_window, lo = w > 0 && L > w ? L - w : 0;
      const int64_t t0 = lo / d->chunk * d->chunk;
      c[i] = (L - t0 + d->chunk - 1) / d->chunk, total += c[i];
    }
    int64_t share = (total * groups + want - 1) / want;
    share = share < pch ? pch : share > longest ? longest : share;
    for (int i = 0; i < s->num_seqs && !why; i++) {
      const int64_t n = c[i] > share ? (c[i] + share - 1) / share : 1;
      if (n > d->max_parts) why = "device list: a row past max_parts";
      entries += n;
    }
    if (!why && entries > d->list_entries) why = "device list: more entries than the grid";
  }
  free(c);
  return why;
}

static long lists_checked; /* broken_list's lists built and walked */
static long cut_checked;   /* ... and listed plans checked against mma_list_partition */

/* The work list's invariants: there where the caller or the tuning rule asks for one (mma,
 * v2, host lengths), and then each row's partitions once each, in order, every row's
 * partitions at once, the rows with the most first. */
static const char *broken_list(const clpa_decode_shape *s, const clpa_device_facts *dev,
                               const clpa_decode_decision *d, const clpa_decode_tuning *t) {
  const int eligible = d->path == CLPA_PLANNER_MMA && d->v2 && s->host_context_lens &&
                       s->work_list >= 0;
  if (!eligible) return d->work_pairs ? "a work list where none applies" : NULL;
  int64_t pairs = 0;
  for (int i = 0; i < s->num_seqs; i++) pairs += list_row_parts(s, d, i);
  const int want = pairs <= 65535 && /* NVIDIA's grid dimension: the rectangle past it */
                   (s->work_list > 0 ||
                    (t->mma_work_list > 0 &&
                     pairs * t->mma_work_list <= (int64_t)s->num_seqs * d->max_parts));
  if (d->work_pairs != (want ? pairs : 0)) return "work list: its pairs or the rule";
  if (!want) return NULL;
  /* Listed partitions of 2-byte caches no longer than the row's mma_list_partition (the even
   * cut within it, whole units), unless the plan at that cut would take no list */
  const int cap = t->mma_list_partition, max_ctx = s->max_context_len > 0 ? s->max_context_len : 1;
  if (!s->partition_size && cap > 0 && clpa_dtype_size(s->kv_dtype) == 2) {
    const int unit = s->block_size > 16 ? s->block_size : 16;
    const int cut = (int)round_up(ceil_div(max_ctx, ceil_div(max_ctx, cap)), unit);
    if (d->partition > cut) {
      clpa_decode_shape f = *s;
      f.partition_size = cut;
      clpa_decode_decision d2;
      char err[CLPA_ERROR_MAX] = "";
      if (clpa_decode_planner(&f, dev, t, &d2, err) != CLPA_OK || d2.work_pairs > 0)
        return "work list: partitions past mma_list_partition where the cut keeps a list";
    }
    cut_checked++;
  }
  lists_checked++;
  int32_t *e = malloc(sizeof(int32_t) * 4 * (size_t)pairs);
  int32_t *seen = calloc((size_t)s->num_seqs, sizeof(int32_t));
  if (!e || !seen) BAIL_OUT("out of memory");
  memset(e, 0xa5, sizeof(int32_t) * 4 * (size_t)pairs);
  clpa_decode_work_list(s, d, e);
  const char *why = NULL;
  for (int64_t k = 0; k < pairs && !why; k++) {
    const int32_t *x = e + 4 * k;
    if (x[0] < 0 || x[0] >= s->num_seqs || x[3] != 0) why = "work list: a bad entry";
    else if (x[2] != list_row_parts(s, d, x[0])) why = "work list: a row's partitions";
    else if (x[1] != seen[x[0]]++) why = "work list: a partition twice, out of order or missed";
    else if (k > 0 && x[2] > e[4 * (k - 1) + 2]) why = "work list: a longer row after a shorter";
    else if (k > 0 && x[1] > 0 && (e[4 * (k - 1)] != x[0])) why = "work list: a row split";
  }
  for (int i = 0; i < s->num_seqs && !why; i++)
    if (seen[i] != list_row_parts(s, d, i)) why = "work list: a row's partitions missing";
  free(e), free(seen);
  return why;
}

/* The first invariant a plan breaks, or NULL. */
static const char *broken(const clpa_decode_shape *s, const clpa_device_facts *dev,
                          const clpa_decode_tuning *t, const clpa_decode_decision *d) {
  const int max_ctx = s->max_context_len > 0 ? s->max_context_len : 1;
  const int qpk = s->num_heads / s->num_kv_heads, bs = s->block_size, g = d->heads_per_group;
  const int lanes = d->path == CLPA_PLANNER_LANES, mma = d->path == CLPA_PLANNER_MMA;
  const int rows = d->path == CLPA_PLANNER_ROWS;
  const int fp8 = clpa_dtype_size(s->kv_dtype) == 1;
  if (!lanes && !mma && !rows) return "no path";
  if (s->path && d->path != s->path) return "the forced path";
  if (mma && dev->mma_native == 0) return "mma where it cannot build";
  if (mma && s->precision == CLPA_PLANNER_PRECISION_F32 && s->kv_dtype != CLPA_DTYPE_F32)
    return "mma rounds a query the caller wants kept";
  if (!s->path && rows != ((dev->is_cpu || !lanes_build(s, dev)) && rows_build(s) && !mma))
    return "auto: rows on CPUs and where lanes cannot build, where rows can (mma first)";
  if (lanes && !lanes_build(s, dev)) return "lanes: a block size decode.cl refuses";
  if (mma && bs % 4 &&
      (s->kv_dtype == CLPA_DTYPE_F32 || (bs == 2 && s->kv_layout == CLPA_KV_LAYOUT_SPLIT_KEY)))
    return "mma: blocks neither whole runs of 4 tokens nor token rows (1, or 2 in HND and NHD)";
  if (rows && !rows_build(s)) return "rows: a block size rows.cl cannot vectorize";
  if (!s->path && mma && dev->mma_native != 1) return "auto: mma only where native";
  if (s->variant == CLPA_PLANNER_V1 && d->v2) return "the forced v1";
  if (s->variant == CLPA_PLANNER_V2 && !d->v2) return "the forced v2";
  if (s->heads_per_group && g != s->heads_per_group) return "the forced heads a work-group";
  if (g < 1 || g > 16 || qpk % g) return "heads a work-group do not divide a KV head's";
  if (d->partition < 1 || d->partition % bs) return "partition not whole blocks";
  /* every token in exactly one partition: [k P, (k + 1) P) for k < max_parts cover the
   * context and the last one starts inside it */
  if (d->v2) { /* a device list's partitions are the device's share (broken_device_list) */
    if (!d->list_entries && (int64_t)d->max_parts * d->partition < max_ctx)
      return "v2: partitions miss tokens";
    if (!d->list_entries && (int64_t)(d->max_parts - 1) * d->partition >= max_ctx)
      return "v2: an empty partition";
  } else {
    if (d->max_parts != 1) return "v1: more than one partition";
    if (lanes && d->logits_stride < max_ctx) return "lanes v1: logits miss tokens";
    if (rows && d->partition < max_ctx) return "rows v1: the partition misses tokens";
  }
  if (s->partition_size && d->v2 && !rows && d->partition != s->partition_size)
    return "the forced partition";
  if (s->partition_size && rows && d->partition > s->partition_size && d->v2)
    return "rows: a partition past the forced one";
  /* bounds */
  const int64_t tuned = round_up(t->partition, bs);
  if (lanes && !s->partition_size && d->v2 &&
      (tuned % d->partition || (d->partition < 128 && d->partition != tuned)))
    return "lanes: a partition that is no halving of the table's (not below 128)";
  if (lanes && d->logits_stride != (d->v2 ? d->partition : round_up(max_ctx, bs)))
    return "lanes: logits stride";
  if (!lanes && d->logits_stride != 1) return "logits stride past lanes";
  if (rows && (int64_t)g * d->partition > ROWS_LOGITS) return "rows: logits past private memory";
  if (mma && d->v2 && d->partition % 16) return "mma: partition not whole chunks";
  const int unit = mma && bs < (fp8 ? 32 : 16) ? (fp8 ? 32 : 16) : bs;
  if (mma && !s->partition_size && d->partition % unit) return "mma: partition not whole units";
  if (mma && !s->partition_size && !s->host_context_lens && !d->list_entries) { /* blind cap */
    const int64_t want = 3L * (dev->compute_units ? dev->compute_units : 1) / 2;
    const int64_t groups = s->num_heads / g, k = (want + groups - 1) / groups;
    const int64_t cap = round_up(ceil_div(max_ctx, k < max_ctx ? k : max_ctx), unit);
    const int64_t blind = round_up(t->blind_partition, unit);
    if (d->partition > (cap > blind ? cap : blind)) return "mma: partition past the blind cap";
  }
  /* the work-group on the device */
  if (!rows && (size_t)d->threads > dev->max_work_group_size) return "work-group past the device's";
  if (!rows && d->local_bytes > dev->local_mem_bytes) return "local memory past the device's";
  if (lanes && d->threads != CLPA_PLANNER_LANES_THREADS) return "lanes: work-group";
  if (mma && (d->threads % 32 || d->threads < 64 || d->threads > 384)) return "mma: warps";
  if (mma && d->pipe && d->threads > 32 * t->mma_pipe_warps) return "mma: PIPE past its warps";
  if (d->sg != (dev->lane_width ? dev->lane_width : bs) ||
      (lanes && CLPA_PLANNER_LANES_THREADS % d->sg))
    return "lane width";
  if (mma != (d->chunk != 0) || (d->chunk && d->chunk != 16 && d->chunk != 32)) return "chunk";
  if (d->chunk == 32 && (!fp8 || bs % 8 || (d->v2 && d->partition % 32))) return "32-token chunks";
  if (d->pipe && d->chunk != 32) return "PIPE without 32-token chunks";
  if (rows != (d->key_vectors != 0)) return "key vectors";
  if (rows) {
    const int wide = dev->native_float_width >= 16, regs = wide ? 32 : 16;
    if (d->key_vectors != 1 && d->key_vectors != 2 && d->key_vectors != 4) return "key vectors";
    if (d->key_vectors > 1 && g * d->key_vectors * (wide ? 1 : 2) > regs / 2)
      return "rows: key vectors past the registers";
  }
  if (d->maxnreg != (lanes && s->kv_dtype == CLPA_DTYPE_F32 && g <= 4 ? t->lanes_f32_maxnreg : 0))
    return "register cap";
  const char *list = broken_list(s, dev, d, t);
  if (!list) list = broken_device_list(s, dev, d, t);
  if (list) return list;
  /* the grid: (num_heads / g) x threads, num_seqs, max_parts in size_t, partitions in int */
  if (d->max_parts < 1 || d->max_parts > max_ctx) return "partitions of the grid";
  const uint64_t x = (uint64_t)(s->num_heads / g) * (uint64_t)d->threads;
  if (x > SIZE_MAX || (uint64_t)s->num_seqs * (uint64_t)d->max_parts * x > SIZE_MAX)
    return "grid past size_t";
  return NULL;
}

/* ---- 1. the recorded plans ------------------------------------------------ */

typedef struct walk {
  int mode; /* 0 check, 1 record, 2 all */
  long count[3];
  uint64_t hash[3];
  FILE *out;
  char **samples; /* sorted lines of the data file */
  size_t nsamples;
  unsigned char *seen;
  long invariants_broken, plans, refused, differ;
} walk;

static int cmp_line(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static int one(const grid_case *gc, void *arg) {
  walk *w = arg;
  clpa_device_facts dev;
  clpa_decode_tuning t;
  device_of(gc->dev, &dev, &t);
  const clpa_decode_shape s = shape_of(gc);
  clpa_decode_decision d;
  memset(&d, 0, sizeof d);
  char err[CLPA_ERROR_MAX] = "";
  const clpa_status st = clpa_decode_planner(&s, &dev, &t, &d, err);
  grid_plan gp;
  to_grid_plan(&d, &gp);
  static char key[256], plan[CLPA_ERROR_MAX], line[CLPA_ERROR_MAX + 300];
  grid_key(gc, key, sizeof key);
  grid_plan_text(st, err, &gp, plan, sizeof plan);
  snprintf(line, sizeof line, "%s : %s\n", key, plan);
  w->hash[gc->grid] = grid_hash(w->hash[gc->grid], line);
  if (w->mode == 2 || (w->mode == 1 && w->count[gc->grid] % SAMPLE == 0)) fputs(line, w->out);
  w->count[gc->grid]++;
  if (w->mode) return 0;
  /* a line the data file shows: the same plan */
  const size_t klen = strlen(key);
  size_t lo = 0, hi = w->nsamples;
  while (lo < hi) { /* the first sample line >= key */
    const size_t mid = (lo + hi) / 2;
    if (strcmp(w->samples[mid], key) < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo < w->nsamples && !strncmp(w->samples[lo], key, klen) && w->samples[lo][klen] == ' ') {
    line[strlen(line) - 1] = '\0';
    if (strcmp(w->samples[lo], line) && w->differ++ < 10)
      diag("recorded %s\nplanned  %s", w->samples[lo], line);
    w->seen[lo] = 1;
  }
  w->plans++;
  if (st != CLPA_OK) {
    w->refused++;
    if (st != CLPA_ERR_UNSUPPORTED && st != CLPA_ERR_INVALID_ARG)
      ok(0, "%s: refused with %s", key, clpa_status_name(st));
    return 0;
  }
  const char *why = broken(&s, &dev, &t, &d);
  if (why && w->invariants_broken++ < 10) ok(0, "grid invariant: %s: %s (%s)", why, key, plan);
  return 0;
}

static void header(FILE *f) {
  fprintf(f,
          "# Decode plans over tests/plan_grid.h's grid: one line a case (the grid's header says\n"
          "# the format). `grid G N HASH`: grid G has N cases, and HASH is the 64-bit FNV-1a of\n"
          "# all their lines in order; the lines below are every %dth of each grid.\n"
          "# First written by tests/plan_record.c at a8c4edf (lib/decode_plan.c before the\n"
          "# planner moved into host/); now by `test_host_planner --record`.\n",
          SAMPLE);
}

static int record(int all) {
  walk w;
  memset(&w, 0, sizeof w);
  w.mode = all ? 2 : 1;
  w.out = all ? stdout : tmpfile();
  if (!w.out) return 1;
  for (int g = 0; g < 3; g++) w.hash[g] = GRID_HASH_START;
  grid_walk(one, &w);
  if (all) return 0;
  header(stdout);
  for (int g = 0; g < 3; g++) printf("grid %d %ld %016" PRIx64 "\n", g, w.count[g], w.hash[g]);
  rewind(w.out);
  char buf[CLPA_ERROR_MAX + 300];
  while (fgets(buf, sizeof buf, w.out)) fputs(buf, stdout);
  fclose(w.out);
  return 0;
}

static void check_recorded(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) BAIL_OUT("cannot open %s", path);
  walk w;
  memset(&w, 0, sizeof w);
  long want_count[3] = {-1, -1, -1};
  uint64_t want_hash[3] = {0};
  static char buf[CLPA_ERROR_MAX + 300];
  size_t cap = 0;
  while (fgets(buf, sizeof buf, f)) {
    buf[strcspn(buf, "\n")] = '\0';
    int g;
    long n;
    uint64_t h;
    if (buf[0] == '#' || !buf[0]) continue;
    if (sscanf(buf, "grid %d %ld %" SCNx64, &g, &n, &h) == 3 && g >= 0 && g < 3) {
      want_count[g] = n, want_hash[g] = h;
      continue;
    }
    if (w.nsamples == cap &&
        !(w.samples = realloc(w.samples, (cap = cap ? 2 * cap : 1024) * sizeof *w.samples)))
      BAIL_OUT("out of memory");
    if (!(w.samples[w.nsamples++] = strdup(buf))) BAIL_OUT("out of memory");
  }
  fclose(f);
  qsort(w.samples, w.nsamples, sizeof *w.samples, cmp_line);
  w.seen = calloc(w.nsamples + 1, 1);
  for (int g = 0; g < 3; g++) w.hash[g] = GRID_HASH_START;
  grid_walk(one, &w);
  for (int g = 0; g < 3; g++) {
    ok(w.count[g] == want_count[g], "grid %d: %ld cases (recorded %ld)", g, w.count[g],
       want_count[g]);
    if (!ok(w.hash[g] == want_hash[g], "grid %d: every plan as recorded (hash %016" PRIx64 ")", g,
            w.hash[g]))
      diag("recorded hash %016" PRIx64
           "; `test_host_planner --all` prints every line to diff "
           "with the recording commit's",
           want_hash[g]);
  }
  size_t unseen = 0;
  for (size_t i = 0; i < w.nsamples; i++) unseen += !w.seen[i];
  ok(w.nsamples > 500 && unseen == 0 && w.differ == 0,
     "%zu recorded lines, every one planned (%zu not) as recorded (%ld not)", w.nsamples, unseen,
     w.differ);
  ok(w.invariants_broken == 0,
     "the grid's %ld plans (%ld refused) keep the invariants (%ld break them)", w.plans, w.refused,
     w.invariants_broken);
  for (size_t i = 0; i < w.nsamples; i++) free(w.samples[i]);
  free(w.samples), free(w.seen);
}

/* ---- 2. random shapes ------------------------------------------------------ */

static int pick(const int *v, int n) { return v[rng_below((uint32_t)n)]; }
#define PICK(a) pick(a, (int)(sizeof(a) / sizeof *(a)))

static void random_cases(long n) {
  static const int lmems[] = {16 << 10, 32 << 10,  48 << 10, 64 << 10,
                              96 << 10, 228 << 10, 512 << 10};
  static const int wgs[] = {128, 256, 512, 1024, 4096}, widths[] = {1, 4, 8, 16};
  static const int lane_widths[] = {0, 8, 16, 32}, natives[] = {-1, 0, 1}, ccs[] = {75, 80, 89, 90};
  static const int parts[] = {128, 256, 512, 1024, 2048, 4096, 8192};
  static const int bss[] = {1, 2, 4, 8, 16, 32, 64, 128, 256};
  static const int kvs[] = {1, 2, 4, 8}, qpks[] = {1, 2, 3, 4, 7, 8, 16};
  static const int hss[] = {32, 64, 80, 96, 112, 120, 128, 192, 256};
  static const clpa_dtype dts[] = {CLPA_DTYPE_F32, CLPA_DTYPE_F16, CLPA_DTYPE_BF16,
                                   CLPA_DTYPE_FP8_E4M3, CLPA_DTYPE_FP8_E5M2};
  static int32_t lens[512];
  long bad = 0, refused = 0;
  for (long i = 0; i < n; i++) {
    const uint64_t replay = tap_rng_state; /* CLPA_TEST_SEED's state before this case */
    clpa_device_facts dev = {"random",
                             (int)rng_below(2),
                             1 + rng_below(256),
                             (uint64_t)PICK(lmems),
                             (size_t)PICK(wgs),
                             (unsigned)PICK(widths),
                             PICK(lane_widths),
                             PICK(natives),
                             0,
                             (int)rng_below(2)};
    dev.compute_capability = dev.mma_native >= 0 ? PICK(ccs) : 0;
    if (dev.mma_native == 0) dev.compute_capability = 75;
    if (dev.mma_native == 1 && dev.compute_capability < 80) dev.compute_capability = 80;
    const clpa_decode_tuning t = {PICK(parts),
                                  (int)rng_below(9),
                                  8 + 4 * (int)rng_below(3),
                                  4 + 4 * (int)rng_below(2),
                                  4 + 4 * (int)rng_below(2),
                                  256 << rng_below(3),
                                  128 * (int)rng_below(2),
                                  (int)rng_below(4) & 3,
                                  rng_below(2) ? 256 << rng_below(4) : 0,
                                  rng_below(2) ? 64 << rng_below(4) : 0};
    clpa_decode_shape s;
    memset(&s, 0, sizeof s);
    s.block_size = PICK(bss), s.num_kv_heads = PICK(kvs);
    s.num_heads = s.num_kv_heads * PICK(qpks);
    s.kv_dtype = dts[rng_below(5)];
    do s.head_size = PICK(hss);
    while (s.head_size % (16 / (int)clpa_dtype_size(s.kv_dtype)));
    s.num_seqs = (int)rng_below(8) ? 1 + (int)rng_below(rng_below(2) ? 8 : 300) : 0;
    /* contexts log-uniform up to 2^30 tokens, some 0 */
    s.max_context_len =
        rng_below(16) ? (int)(rng_next() % ((uint64_t)1 << (1 + rng_below(30)))) : 0;
    if (s.max_context_len > MAX_CONTEXT_LEN) s.max_context_len = MAX_CONTEXT_LEN;
    switch (rng_below(4)) {
      case 0:
        break;
      case 1:
        for (int j = 0; j < s.num_seqs; j++) lens[j] = s.max_context_len;
        s.host_context_lens = lens;
        break;
      default:
        for (int j = 0; j < s.num_seqs; j++)
          lens[j] = (int32_t)(rng_next() % ((uint64_t)s.max_context_len + 1));
        s.host_context_lens = lens;
    }
    s.path = (int32_t)rng_below(6) < 3 ? 0 : (int32_t)rng_below(4);
    s.variant = (int32_t)rng_below(5) < 3 ? 0 : 1 + (int32_t)rng_below(2);
    s.precision = (int32_t)rng_below(4) == 0;
    if (rng_below(4) == 0) s.partition_size = s.block_size * (1 + (int32_t)rng_below(512));
    if (rng_below(4) == 0) s.sliding_window = 1 + (int32_t)rng_below(1 + (uint32_t)s.max_context_len);
    s.work_list = (int32_t)rng_below(3) - 1;
    if (rng_below(4) == 0) { /* a divisor of the KV head's queries */
      const int qpk = s.num_heads / s.num_kv_heads;
      do s.heads_per_group = 1 + (int32_t)rng_below(qpk < 16 ? qpk : 16);
      while (qpk % s.heads_per_group);
    }
    clpa_decode_decision d, again;
    memset(&d, 0, sizeof d), memset(&again, 0x5a, sizeof again);
    char err[CLPA_ERROR_MAX] = "";
    const clpa_status st = clpa_decode_planner(&s, &dev, &t, &d, err);
    const clpa_status st2 = clpa_decode_planner(&s, &dev, &t, &again, NULL);
    const char *why = NULL;
    if (st != st2)
      why = "a second plan differs";
    else if (st != CLPA_OK) {
      refused++;
      if (st != CLPA_ERR_UNSUPPORTED && st != CLPA_ERR_INVALID_ARG)
        why = "refused with another status";
      else if (!strstr(err, ": ") || !*(strstr(err, ": ") + 2))
        why = "refused without a message";
      else if (s.path == 0 && s.variant == 0 && !s.partition_size && !s.heads_per_group &&
               !strstr(err, "no decode path takes block_size"))
        why = "refused with nothing forced";
    } else if (memcmp(&d, &again, sizeof d))
      why = "a second plan differs";
    else
      why = broken(&s, &dev, &t, &d);
    if (why && bad++ < 10) {
      ok(0, "random case %ld: %s", i, why);
      diag("replay: CLPA_TEST_SEED's state %" PRIu64
           "; %d seqs %d/%d heads, head %d, %s, block %d,"
           " max %d, lengths %s; path %d variant %d precision %d partition %d heads %d; device %u"
           " units, %" PRIu64 " B local, wg %zu, lanes %d, mma %d cc %d%s%s",
           replay, s.num_seqs, s.num_heads, s.num_kv_heads, s.head_size,
           clpa_dtype_name(s.kv_dtype), s.block_size, s.max_context_len,
           s.host_context_lens ? "given" : "none", s.path, s.variant, s.precision, s.partition_size,
           s.heads_per_group, dev.compute_units, dev.local_mem_bytes, dev.max_work_group_size,
           dev.lane_width, dev.mma_native, dev.compute_capability, st ? "; refused: " : "",
           st ? err : "");
      if (st == CLPA_OK)
        diag(
            "plan: path %d v2 %d partition %d heads %d parts %d threads %d chunk %d pipe %d,"
            " %zu B local",
            d.path, d.v2, d.partition, d.heads_per_group, d.max_parts, d.threads, d.chunk, d.pipe,
            d.local_bytes);
    }
  }
  ok(bad == 0, "%ld random shapes (%ld refused) keep the invariants (%ld break them)", n, refused,
     bad);
  ok(lists_checked > n / 100, "%ld of them had a work list, built and checked", lists_checked);
  ok(device_lists_checked > n / 1000, "%ld of them had a device list, its bounds checked on"
     " lengths cut as the kernel cuts them", device_lists_checked);
  ok(cut_checked > n / 1000, "%ld listed plans checked against mma_list_partition", cut_checked);
}

/* ---- refusals the public API promises -------------------------------------- */

static void refusals(void) {
  const grid_device *t4 = &grid_devices[4];
  clpa_device_facts dev;
  clpa_decode_tuning t;
  device_of(t4, &dev, &t);
  clpa_decode_shape s = {4, 32, 8, 128, 16, CLPA_DTYPE_F16, 4096, NULL, CLPA_PLANNER_MMA,
                         0, 0,  0, 0, CLPA_KV_LAYOUT_SPLIT_KEY, 0, 0};
  clpa_decode_decision d;
  char err[CLPA_ERROR_MAX] = "";
  ok(clpa_decode_planner(&s, &dev, &t, &d, err) == CLPA_ERR_UNSUPPORTED &&
         strstr(err, "path mma needs compute capability 8.0 on NVIDIA ('t4' has 7.5)"),
     "mma forced on a T4: refused, named (%s)", err);
  ok(!strcmp(clpa_last_error(), err), "the message is this thread's last error too");
  s.path = 7;
  ok(clpa_decode_planner(&s, &dev, &t, &d, NULL) == CLPA_ERR_INVALID_ARG &&
         strstr(clpa_last_error(), "path = 7 (0 auto, 1 lanes, 2 mma, 3 rows)"),
     "path 7: refused without an error buffer (%s)", clpa_last_error());
}

/* The HND and NHD layouts on the tensor-core path: where the instructions
 * are emulated, mma forced takes them with split-key's plan (the layout
 * changes the kernel's loads, not its shape), and f32 caches there need
 * heads of multiples of 32 (decode_mma_chunk.cl's out_dim): head 80 is refused,
 * named. On the H200 auto takes mma on them with split-key's plan. */
/* The tensor-core paths' fp8 rule (decode's and prefill's): the device's
 * conversion on NVIDIA from compute capability 8.9, everywhere emulated;
 * and decode's auto follows it. */
static void mma_fp8_rule(void) {
  clpa_device_facts d;
  clpa_decode_tuning t;
  device_of(&grid_devices[2], &d, &t);
  static const struct { int native, cc, want; } cases[] = {
      {1, 80, 0}, {1, 86, 0}, {1, 89, 1}, {1, 90, 1}, {-1, 0, 1}, {0, 75, 0}};
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    d.mma_native = cases[i].native, d.compute_capability = cases[i].cc;
    ok(clpa_planner_mma_fp8(&d) == cases[i].want, "fp8 on the mma paths: native %d, cc %d: %d",
       cases[i].native, cases[i].cc, cases[i].want);
  }
  clpa_decode_shape s = {4, 32, 8, 128, 16, CLPA_DTYPE_FP8_E4M3, 4096, NULL, CLPA_PLANNER_AUTO,
                         0, 0, 0, 0, CLPA_KV_LAYOUT_SPLIT_KEY, 0, 0};
  clpa_decode_decision dec;
  d.mma_native = 1, d.compute_capability = 80;
  ok(clpa_decode_planner(&s, &d, &t, &dec, NULL) == CLPA_OK && dec.path != CLPA_PLANNER_MMA,
     "decode's auto: no mma for fp8 before compute capability 8.9");
}

static void layouts_on_mma(void) {
  clpa_device_facts h200, emu;
  clpa_decode_tuning t;
  device_of(&grid_devices[2], &h200, &t);
  emu = h200, emu.mma_native = -1, emu.lane_width = 0;
  static const clpa_dtype dts[] = {CLPA_DTYPE_F16, CLPA_DTYPE_BF16, CLPA_DTYPE_FP8_E4M3,
                                   CLPA_DTYPE_F32};
  for (size_t i = 0; i < sizeof dts / sizeof *dts; i++) {
    clpa_decode_shape s = {4, 32, 8, 128, 16, dts[i], 4096, NULL, CLPA_PLANNER_AUTO,
                           0, 0,  0, 0, CLPA_KV_LAYOUT_SPLIT_KEY, 0, 0};
    clpa_decode_decision want, d;
    ok(clpa_decode_planner(&s, &h200, &t, &want, NULL) == CLPA_OK && want.path == CLPA_PLANNER_MMA,
       "h200, split-key %s cache: auto takes mma", clpa_dtype_name(dts[i]));
    s.path = CLPA_PLANNER_MMA;
    ok(clpa_decode_planner(&s, &emu, &t, &want, NULL) == CLPA_OK && want.path == CLPA_PLANNER_MMA,
       "emulated, split-key %s cache: mma forced takes it", clpa_dtype_name(dts[i]));
    for (int k = CLPA_KV_LAYOUT_HND; k <= CLPA_KV_LAYOUT_NHD; k++) {
      s.kv_layout = (clpa_kv_layout_kind)k, s.path = CLPA_PLANNER_MMA;
      memset(&d, 0x55, sizeof d);
      ok(clpa_decode_planner(&s, &emu, &t, &d, NULL) == CLPA_OK && d.path == want.path &&
             d.v2 == want.v2 && d.partition == want.partition &&
             d.heads_per_group == want.heads_per_group && d.max_parts == want.max_parts &&
             d.threads == want.threads && d.chunk == want.chunk && d.pipe == want.pipe &&
             d.maxnreg == want.maxnreg && d.local_bytes == want.local_bytes,
         "emulated, %s %s cache: mma forced takes split-key's plan",
         clpa_kv_layout_kind_name(s.kv_layout), clpa_dtype_name(dts[i]));
      s.path = CLPA_PLANNER_AUTO;
      clpa_decode_decision split;
      s.kv_layout = CLPA_KV_LAYOUT_SPLIT_KEY;
      const clpa_status st0 = clpa_decode_planner(&s, &h200, &t, &split, NULL);
      s.kv_layout = (clpa_kv_layout_kind)k;
      memset(&d, 0x55, sizeof d);
      ok(st0 == CLPA_OK && clpa_decode_planner(&s, &h200, &t, &d, NULL) == CLPA_OK &&
             d.path == CLPA_PLANNER_MMA && d.v2 == split.v2 && d.partition == split.partition &&
             d.heads_per_group == split.heads_per_group && d.threads == split.threads &&
             d.chunk == split.chunk && d.pipe == split.pipe,
         "h200, %s %s cache: auto takes mma, split-key's plan", clpa_kv_layout_kind_name(s.kv_layout),
         clpa_dtype_name(dts[i]));
      s.kv_layout = CLPA_KV_LAYOUT_SPLIT_KEY;
    }
  }
  clpa_decode_shape s = {4, 32, 8, 80, 16, CLPA_DTYPE_F32, 4096, NULL, CLPA_PLANNER_MMA,
                         0, 0,  0, 0, CLPA_KV_LAYOUT_SPLIT_KEY, 0, 0};
  clpa_decode_decision d;
  ok(clpa_decode_planner(&s, &emu, &t, &d, NULL) == CLPA_OK && d.path == CLPA_PLANNER_MMA,
     "emulated, split-key f32 cache, head 80: mma forced takes it");
  s.kv_layout = CLPA_KV_LAYOUT_NHD;
  ok(clpa_decode_planner(&s, &emu, &t, &d, NULL) == CLPA_ERR_UNSUPPORTED &&
         strstr(clpa_last_error(), "path mma takes f32 caches in the nhd layout with head sizes of"
                                   " multiples of 32, and head_size is 80"),
     "emulated, nhd f32 cache, head 80, mma forced: refused (%s)", clpa_last_error());
  s.path = CLPA_PLANNER_AUTO;
  ok(clpa_decode_planner(&s, &h200, &t, &d, NULL) == CLPA_OK && d.path == CLPA_PLANNER_LANES,
     "h200, nhd f32 cache, head 80: auto takes lanes");
}

/* Page sizes (issue 46): the H200 takes mma for blocks of multiples of 4 tokens and 1, rows
 * for 2; an emulated-lanes GPU takes lanes up to 128 and rows for 256 (past its
 * work-group); a 32-lane GPU takes lanes for 8 to 32 and rows elsewhere, and no path takes
 * block 1 with head 120; forced paths that cannot take a size are refused, naming it. */
static void page_sizes(void) {
  clpa_device_facts h200, emu, sub;
  clpa_decode_tuning t;
  device_of(&grid_devices[2], &h200, &t);
  emu = h200, emu.lane_width = 0, emu.mma_native = -1, emu.is_cpu = 0;
  sub = emu, sub.lane_width = 32;
  clpa_decode_shape s = {4, 32, 8, 128, 1, CLPA_DTYPE_F16, 4096, NULL, CLPA_PLANNER_AUTO,
                         0, 0,  0, 0, CLPA_KV_LAYOUT_SPLIT_KEY, 0, 0};
  clpa_decode_decision d;
  const struct {
    const clpa_device_facts *dev;
    int bs, hs, path;
    const char *name;
  } picks[] = {{&h200, 1, 128, CLPA_PLANNER_MMA, "h200, block 1: mma"},
               {&h200, 2, 128, CLPA_PLANNER_ROWS, "h200, block 2: rows"},
               {&h200, 4, 128, CLPA_PLANNER_MMA, "h200, block 4: mma"},
               {&h200, 64, 128, CLPA_PLANNER_MMA, "h200, block 64: mma"},
               {&h200, 256, 128, CLPA_PLANNER_MMA, "h200, block 256: mma"},
               {&emu, 128, 128, CLPA_PLANNER_LANES, "emulated lanes, block 128: lanes"},
               {&emu, 256, 128, CLPA_PLANNER_ROWS, "emulated lanes, block 256: rows"},
               {&sub, 1, 80, CLPA_PLANNER_ROWS, "32 lanes, block 1, head 80: rows"},
               {&sub, 32, 128, CLPA_PLANNER_LANES, "32 lanes, block 32: lanes"},
               {&sub, 64, 128, CLPA_PLANNER_ROWS, "32 lanes, block 64: rows"}};
  for (size_t i = 0; i < sizeof picks / sizeof *picks; i++) {
    s.block_size = picks[i].bs, s.head_size = picks[i].hs;
    const clpa_status st = clpa_decode_planner(&s, picks[i].dev, &t, &d, NULL);
    ok(st == CLPA_OK && d.path == picks[i].path && !broken(&s, picks[i].dev, &t, &d), "%s (%s)",
       picks[i].name, st ? clpa_last_error() : "planned");
  }
  s.block_size = 1, s.head_size = 120;
  ok(clpa_decode_planner(&s, &sub, &t, &d, NULL) == CLPA_ERR_UNSUPPORTED &&
         strstr(clpa_last_error(), "no decode path takes block_size 1 with head_size 120"),
     "32 lanes, block 1, head 120: refused (%s)", clpa_last_error());
  const struct {
    const clpa_device_facts *dev;
    int bs, path;
    clpa_dtype dt;
    const char *want;
  } refused[] = {
      {&h200, 2, CLPA_PLANNER_MMA, CLPA_DTYPE_F16,
       "path mma takes blocks of multiples of 4 tokens, or of 1 (and 2 in HND and NHD) with f16,"
       " bf16 or fp8 caches, and block_size is 2 with a f16 cache in the split_key layout"},
      {&h200, 2, CLPA_PLANNER_ROWS, CLPA_DTYPE_F32,
       "path rows does not take block_size 2 with head_size 128 and a f32 cache"},
      {&emu, 256, CLPA_PLANNER_LANES, CLPA_DTYPE_F16,
       "path lanes does not take block_size 256 with head_size 128, a f16 cache and 256-lane"},
      {&sub, 64, CLPA_PLANNER_LANES, CLPA_DTYPE_F16,
       "path lanes does not take block_size 64 with head_size 128, a f16 cache and 32-lane"
       " groups (real lane groups: blocks of 8 to 32 tokens"}};
  for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
    s.block_size = refused[i].bs, s.head_size = 128, s.path = refused[i].path;
    s.kv_dtype = refused[i].dt;
    ok(clpa_decode_planner(&s, refused[i].dev, &t, &d, NULL) == CLPA_ERR_UNSUPPORTED &&
           strstr(clpa_last_error(), refused[i].want),
       "block %d forced on path %d: refused (%s)", refused[i].bs, refused[i].path,
       clpa_last_error());
  }
}

/* PIPE's cap of 8 warps gives a 12-warp work-group more output slices (8 against 6): on a
 * 32 KiB device with emulated products its local memory no longer fit, so no PIPE there. */
static void regress_pipe_keeps_local_memory(void) {
  const clpa_device_facts dev = {"emulated, 32 KiB", 0, 8, 32 << 10, 1024, 4, 8, -1, 0, 1};
  const clpa_decode_tuning t = {512, 0, 12, 8, 8, 512, 128, 0, 0, 0};
  const int32_t lens[1] = {4096};
  const clpa_decode_shape s = {1,    4, 1, 192, 16, CLPA_DTYPE_FP8_E5M2, 4096, lens,
                               CLPA_PLANNER_MMA, 0, 0, 0,   0, CLPA_KV_LAYOUT_SPLIT_KEY, 0, 0};
  clpa_decode_decision d;
  const clpa_status st = clpa_decode_planner(&s, &dev, &t, &d, NULL);
  ok(st == CLPA_OK && d.chunk == 32 && d.threads == 384 && !d.pipe &&
         d.local_bytes <= dev.local_mem_bytes && !broken(&s, &dev, &t, &d),
     "regress_pipe_keeps_local_memory: 12 warps, no PIPE, %zu bytes of local memory", d.local_bytes);
}

/* The work list of one batch, by hand: lengths 0, 100, 33 and 64 at 32-token partitions
 * (16-token chunks) have 1, 4, 2 and 2 partitions; with a window of 40 tokens, 100 starts at
 * chunk 3 (token 48: 52 tokens, 2 partitions) and the others keep theirs (33: from token 0; 64:
 * from token 16, 48 tokens). The longest rows first, ties by row. */
static void work_list_by_hand(void) {
  const grid_device *h = &grid_devices[0];
  clpa_device_facts dev;
  clpa_decode_tuning t;
  for (int i = 0; i < GRID_DEVICES; i++)
    if (grid_devices[i].lanes == 2 && grid_devices[i].cc >= 80) h = &grid_devices[i];
  device_of(h, &dev, &t);
  const int32_t lens[4] = {0, 100, 33, 64};
  clpa_decode_shape s = {4, 32, 8, 128, 16, CLPA_DTYPE_F16, 128, lens, CLPA_PLANNER_MMA,
                         CLPA_PLANNER_V2, 0, 32, 0, CLPA_KV_LAYOUT_SPLIT_KEY, 0, 1};
  static const int32_t want[2][9][3] = {
      {{1, 0, 4}, {1, 1, 4}, {1, 2, 4}, {1, 3, 4}, {2, 0, 2}, {2, 1, 2}, {3, 0, 2}, {3, 1, 2},
       {0, 0, 1}},
      {{1, 0, 2}, {1, 1, 2}, {2, 0, 2}, {2, 1, 2}, {3, 0, 2}, {3, 1, 2}, {0, 0, 1}}};
  const int64_t pairs[2] = {9, 7};
  for (int w = 0; w < 2; w++) {
    s.sliding_window = w ? 40 : 0;
    clpa_decode_decision d;
    char err[CLPA_ERROR_MAX] = "";
    const clpa_status st = clpa_decode_planner(&s, &dev, &t, &d, err);
    int32_t got[9 * 4];
    memset(got, 0xa5, sizeof got);
    int same = st == CLPA_OK && d.chunk == 16 && d.work_pairs == pairs[w];
    if (same) clpa_decode_work_list(&s, &d, got);
    for (int k = 0; same && k < pairs[w]; k++)
      same = got[4 * k] == want[w][k][0] && got[4 * k + 1] == want[w][k][1] &&
             got[4 * k + 2] == want[w][k][2] && got[4 * k + 3] == 0;
    ok(same, "work list by hand%s: %lld pairs, the longest rows first (%s)",
       w ? ", window 40" : "", (long long)(st == CLPA_OK ? d.work_pairs : -1), err);
  }
  s.work_list = 0, s.sliding_window = 0, t.mma_work_list = 0; /* the rule: 0 is never */
  clpa_decode_decision d;
  ok(clpa_decode_planner(&s, &dev, &t, &d, NULL) == CLPA_OK && d.work_pairs == 0,
     "no work list where the tuning row's mma_work_list is 0 and nothing forces one");
  t.mma_work_list = 2; /* 9 busy of 4 x 4: not at most 1 in 2 */
  ok(clpa_decode_planner(&s, &dev, &t, &d, NULL) == CLPA_OK && d.work_pairs == 0,
     "none where more than 1 in mma_work_list (2) of the grid's work-groups are busy (9 of 16)");
  s.work_list = -1, t.mma_work_list = 1;
  ok(clpa_decode_planner(&s, &dev, &t, &d, NULL) == CLPA_OK && d.work_pairs == 0,
     "none where CLPA_DECODE_WORK_LIST is off, whatever the row says");
  s.work_list = 0;
  ok(clpa_decode_planner(&s, &dev, &t, &d, NULL) == CLPA_OK && d.work_pairs == 9,
     "a list where the row's rule holds (9 busy of 16, mma_work_list 1)");
  /* Record 0013's skewed batch (64 sequences, one of 32 k, 63 of 256) on the H200's row: the
   * plan's own 1936-token partitions, then as listed 1024 (95 pairs), as measured best */
  static int32_t skew[64];
  for (int i = 0; i < 64; i++) skew[i] = i ? 256 : 32768;
  for (int i = 0; i < GRID_DEVICES; i++)
    if (!strcmp(grid_devices[i].name, "h200")) device_of(&grid_devices[i], &dev, &t);
  ok(!strcmp(dev.name, "h200") && t.mma_list_partition == 1024 && t.mma_work_list == 2,
     "the grid's h200 row carries the list rule of lib/tuning.c's NVIDIA row (2, 1024)");
  const clpa_decode_shape k = {64, 32, 8, 128, 16, CLPA_DTYPE_F16, 32768, skew, 0, 0, 0, 0, 0,
                               CLPA_KV_LAYOUT_SPLIT_KEY, 0, 0};
  clpa_status st = clpa_decode_planner(&k, &dev, &t, &d, NULL);
  ok(st == CLPA_OK && d.partition == 1024 && d.work_pairs == 95,
     "the skewed batch, listed: 1024-token partitions, 95 pairs (%d, %lld)", d.partition,
     (long long)d.work_pairs);
  t.mma_list_partition = 0;
  st = clpa_decode_planner(&k, &dev, &t, &d, NULL);
  ok(st == CLPA_OK && d.partition == 1936 && d.work_pairs == 80,
     "and with no mma_list_partition the plan's own 1936 (80 pairs; %d, %lld)", d.partition,
     (long long)d.work_pairs);
  clpa_decode_shape f8 = k;
  f8.kv_dtype = CLPA_DTYPE_FP8_E4M3, t.mma_list_partition = 1024;
  st = clpa_decode_planner(&f8, &dev, &t, &d, NULL);
  ok(st == CLPA_OK && d.work_pairs > 0 && d.partition > 1024,
     "fp8 (not measured with a cut) keeps its own partitions (%d)", d.partition);
}

int main(int argc, char **argv) {
  if (argc > 1 && !strcmp(argv[1], "--record")) return record(0);
  if (argc > 1 && !strcmp(argv[1], "--all")) return record(1);
  if (argc < 2) BAIL_OUT("usage: test_host_planner DATA [RANDOM_CASES] | --record | --all");
  rng_seed_from_env();
  check_recorded(argv[1]);
  random_cases(argc > 2 ? atol(argv[2]) : 20000);
  refusals();
  layouts_on_mma();
  mma_fp8_rule();
  page_sizes();
  regress_pipe_keeps_local_memory();
  work_list_by_hand();
  return done_testing();
}
