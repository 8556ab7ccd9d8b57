/*
 * clpa-bench sweep — decode over a grid of shapes: dtype x heads x GQA
 * ratio x batch x lengths x context, each point measured by
 * bench_decode_measure (what `clpa-bench decode` prints) next to the copy
 * ceiling over the same bytes, in one mode (cold or hot) for the whole run.
 *
 * Output: a CSV (one row per point, written as it goes, so a long sweep
 * that stops keeps what it measured), a line per point on stdout, and a
 * PNG when gnuplot is installed: one panel per (dtype, lengths), the ratio
 * against the context, one line per batch size; a point of a line is the
 * median ratio over the grid's (heads, GQA) pairs; every panel has the
 * same y range, so dtypes compare at a glance. Shapes the device cannot
 * hold, and shapes the library refuses, are skipped with a note. On a
 * terminal the progress line counts the points and gives an ETA.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"
#include "clpa.h"

#define LIST_MAX 32
#define MAX_DIM (1 << 24)

typedef struct int_list {
  int n; /* 0: not given (the default or --quick grid applies) */
  int32_t v[LIST_MAX];
} int_list;

/* Splits text at commas and parses each item with one, into l. */
static const char *parse_list(const char *text, int_list *l, const char *takes,
                              int (*one)(const char *item, int32_t *v)) {
  char item[64];
  l->n = 0;
  for (const char *p = text;; p++) {
    size_t len = strcspn(p, ",");
    if (len == 0 || len >= sizeof item || l->n == LIST_MAX) return takes;
    memcpy(item, p, len);
    item[len] = '\0';
    if (!one(item, &l->v[l->n++])) return takes;
    p += len;
    if (!*p) return NULL;
  }
}

static int one_int(const char *item, int32_t *v) {
  char *end;
  long x = strtol(item, &end, 10);
  *v = (int32_t)x;
  return *end == '\0' && x >= 1 && x <= MAX_DIM;
}

static int one_dtype(const char *item, int32_t *v) {
  clpa_dtype d;
  if (bench_parse_dtype(item, &d)) return 0;
  *v = (int32_t)d;
  return 1;
}

static int one_lengths(const char *item, int32_t *v) {
  bench_lengths l;
  if (bench_parse_lengths(item, &l)) return 0;
  *v = (int32_t)l;
  return 1;
}

static const char *parse_ints(const char *text, void *value) {
  return parse_list(text, value, "a comma-separated list of positive integers", one_int);
}

static const char *parse_dtypes(const char *text, void *value) {
  return parse_list(text, value, "a comma-separated list of f32, f16, bf16, fp8_e4m3, fp8_e5m2",
                    one_dtype);
}

static int one_path(const char *item, int32_t *v) {
  clpa_decode_path p;
  if (bench_parse_path(item, &p) || p == CLPA_DECODE_PATH_AUTO) return 0;
  *v = (int32_t)p;
  return 1;
}

static const char *parse_paths(const char *text, void *value) {
  return parse_list(text, value, "a comma-separated list of lanes, mma, rows", one_path);
}

static const char *parse_lengths_list(const char *text, void *value) {
  return parse_list(text, value, "a comma-separated list of uniform, loguniform, one-long",
                    one_lengths);
}

static void list_default(int_list *l, const int32_t *v, int n) {
  if (l->n) return;
  l->n = n;
  memcpy(l->v, v, sizeof *v * (size_t)n);
}
#define DEFAULT(l, ...)                                        \
  do {                                                         \
    static const int32_t v_[] = {__VA_ARGS__};                 \
    list_default(&(l), v_, (int)(sizeof v_ / sizeof *v_));     \
  } while (0)

typedef struct sweep_args {
  int_list heads, gqa, batch, context, dtypes, lengths, paths;
  int32_t head_size, block_size, repeats;
  int quick, cold, hot, json;
  bench_shapes shapes; /* the defaults taken: gpu or cpu (auto until parse picks) */
  const char *csv, *png;
} sweep_args;

/* The grid the lists not given take: "quick", "cpu" or "gpu". */
static const char *grid_name(const sweep_args *a) {
  return a->quick ? "quick" : bench_shapes_name(a->shapes);
}

static const char *parse_path(const char *text, void *value) {
  if (!*text) return "a file name";
  *(const char **)value = text;
  return NULL;
}

/* Returns CLI_RUN or the exit status. */
static int parse(int argc, char **argv, sweep_args *a) {
  memset(a, 0, sizeof *a);
  a->block_size = 16, a->repeats = 30, a->csv = "clpa-sweep.csv";
  const cli_opt opts[] = {
      {"quick", CLI_FLAG, &a->quick, 0, 0, NULL,
       "a tiny grid that takes seconds (for tests): heads 4,\nGQA 2, head size 64, batch 1,4, "
       "context 64,512,\ndtype f16, lengths uniform,one-long",
       NULL, NULL},
      {"shapes", CLI_WORD, &a->shapes, 0, 0, "SET",
       "the grid of the lists not given: gpu, cpu\n(marked CPU; under a minute on a 2-core CPU)\n"
       "or auto (cpu when the device is a CPU)", "auto", bench_parse_shapes},
      {"dtypes", CLI_WORD, &a->dtypes, 0, 0, "LIST", "cache dtypes",
       "f32,f16,bf16,fp8_e4m3,fp8_e5m2", parse_dtypes},
      {"heads", CLI_WORD, &a->heads, 0, 0, "LIST", "query heads", "8,32,128; CPU 32", parse_ints},
      {"gqa", CLI_WORD, &a->gqa, 0, 0, "LIST",
       "query heads per K/V head (pairs where it does\nnot divide --heads are left out)",
       "1,4,16; CPU 4", parse_ints},
      {"batch", CLI_WORD, &a->batch, 0, 0, "LIST", "sequences", "1,16,256; CPU 1,16", parse_ints},
      {"context", CLI_WORD, &a->context, 0, 0, "LIST", "tokens of the longest sequence",
       "128,1024,8192,32768,131072;\nCPU 512,2048", parse_ints},
      {"lengths", CLI_WORD, &a->lengths, 0, 0, "LIST",
       "as in decode --lengths; batch 1 runs only\nuniform",
       "uniform,loguniform,one-long;\nCPU uniform,one-long", parse_lengths_list},
      {"head-size", CLI_INT, &a->head_size, 1, MAX_DIM, "N", "elements per head",
       "128; 64 with --quick", NULL},
      {"block-size", CLI_INT, &a->block_size, 1, MAX_DIM, "N", "tokens per cache block", NULL,
       NULL},
      {"cold", CLI_FLAG, &a->cold, 0, 0, NULL, "as in decode: flush the L2 before every call",
       "on a GPU", NULL},
      {"hot", CLI_FLAG, &a->hot, 0, 0, NULL, "as in decode: back-to-back calls", "elsewhere",
       NULL},
      {"repeats", CLI_INT, &a->repeats, 1, 100000, "N", "cold: timed calls per point", NULL, NULL},
      {"csv", CLI_WORD, &a->csv, 0, 0, "FILE", "where the rows go", "clpa-sweep.csv", parse_path},
      {"png", CLI_WORD, &a->png, 0, 0, "FILE", "the plot ('none': no plot)",
       "the CSV's name, .png", parse_path},
      {"paths", CLI_WORD, &a->paths, 0, 0, "LIST",
       "also time each point on these paths (lanes, mma,\nrows; each with its own plan, on "
       "auto's\nlengths) and give auto's time against the\nfastest path's",
       "none", parse_paths},
      {"json", CLI_FLAG, &a->json, 0, 0, NULL,
       "print one JSON line (the summary) instead of a\nline per point", NULL, NULL},
      {NULL, 0, NULL, 0, 0, NULL, NULL, NULL, NULL},
  };
  const cli_cmd cmd = {
      "clpa-bench sweep",
      "Runs clpa-bench decode over a grid of shapes on the selected device and\n"
      "writes a CSV and, when gnuplot is installed, a PNG of the ratio to the copy\n"
      "bandwidth against the context, one line per batch size.",
      opts,
      "The grid: every dtype x heads x GQA ratio x batch x lengths x context, with\n"
      "the options' lists, leaving out the ratios that do not divide the heads and\n"
      "batch 1's lengths but uniform: the GPU's defaults make 1400 points, the CPU's\n"
      "30 (under a minute on PoCL with 2 cores and a warm kernel cache). Each point is\n"
      "measured as decode measures it (see 'clpa-bench decode --help'), the copy\n"
      "ceiling over the same bytes in the same mode. Shapes the device cannot hold\n"
      "or the library refuses are skipped with a note on stderr.\n"
      "CSV columns: device, mode, dtype, heads, kv_heads, head_size, block_size,\n"
      "batch, context, lengths, us_per_call, gbps, copy_gbps, ratio, path (auto's),\n"
      "best_path, best_us, auto_vs_best (best_us / us_per_call; the last three\n"
      "empty without --paths). A path that refuses a point is left out of it.\n"
      "The plot: a panel per dtype and lengths, all on one y range; a point is the\n"
      "median ratio over the (heads, GQA) pairs of the grid. Without gnuplot it says\n"
      "so and skips it. On a terminal, a progress line counts the points (i/N) and\n"
      "gives an ETA from the points so far.\n"
      "JSON keys: op, device, mode, points, measured, skipped, failed, csv, png,\n"
      "shapes (the grid the lists not given took: gpu, cpu or quick); with --paths\n"
      "also worst_auto_vs_best, worst_point and below_0_8 (points\n"
      "where auto takes more than 1.25x the fastest path's time).",
      clpa_version_string(),
  };
  int rc = cli_parse(&cmd, argc, argv);
  if (rc != CLI_RUN) return rc;
  if (a->cold && a->hot) return cli_error(&cmd, "--cold and --hot exclude each other");
  if (a->quick && a->shapes != BENCH_SHAPES_AUTO)
    return cli_error(&cmd, "--quick and --shapes exclude each other");
  if (!a->quick) a->shapes = bench_shapes_pick(a->shapes);
  if (a->shapes == BENCH_SHAPES_CPU) { /* 30 points */
    DEFAULT(a->heads, 32);
    DEFAULT(a->gqa, 4);
    DEFAULT(a->batch, 1, 16);
    DEFAULT(a->context, 512, 2048);
    DEFAULT(a->lengths, BENCH_LENGTHS_UNIFORM, BENCH_LENGTHS_ONE_LONG);
  }
  if (a->quick) {
    DEFAULT(a->dtypes, CLPA_DTYPE_F16);
    DEFAULT(a->heads, 4);
    DEFAULT(a->gqa, 2);
    DEFAULT(a->batch, 1, 4);
    DEFAULT(a->context, 64, 512);
    DEFAULT(a->lengths, BENCH_LENGTHS_UNIFORM, BENCH_LENGTHS_ONE_LONG);
    if (!a->head_size) a->head_size = 64;
  }
  DEFAULT(a->dtypes, CLPA_DTYPE_F32, CLPA_DTYPE_F16, CLPA_DTYPE_BF16, CLPA_DTYPE_FP8_E4M3,
          CLPA_DTYPE_FP8_E5M2);
  DEFAULT(a->heads, 8, 32, 128); /* 1400 points */
  DEFAULT(a->gqa, 1, 4, 16);
  DEFAULT(a->batch, 1, 16, 256);
  DEFAULT(a->context, 128, 1024, 8192, 32768, 131072);
  DEFAULT(a->lengths, BENCH_LENGTHS_UNIFORM, BENCH_LENGTHS_LOGUNIFORM, BENCH_LENGTHS_ONE_LONG);
  if (!a->head_size) a->head_size = 128;
  return CLI_RUN;
}

/* ----------------------------------------------------------------------
 * The grid
 * -------------------------------------------------------------------- */
typedef struct sweep_row {
  bench_decode_shape s;
  double us, gbps, copy, ratio;
  clpa_decode_path path, best_path; /* auto's; the fastest's (--paths) */
  double best_us;                   /* the fastest path's time (auto's without --paths) */
} sweep_row;

/* Calls visit for every point of the grid, in order; returns the count. */
static int grid_each(const sweep_args *a, void (*visit)(const bench_decode_shape *, void *),
                     void *ctx) {
  int n = 0;
  for (int d = 0; d < a->dtypes.n; d++)
    for (int h = 0; h < a->heads.n; h++)
      for (int g = 0; g < a->gqa.n; g++)
        for (int b = 0; b < a->batch.n; b++)
          for (int l = 0; l < a->lengths.n; l++)
            for (int c = 0; c < a->context.n; c++) {
              if (a->heads.v[h] % a->gqa.v[g]) continue;
              if (a->batch.v[b] == 1 && a->lengths.v[l] != BENCH_LENGTHS_UNIFORM) continue;
              const bench_decode_shape s = {a->heads.v[h], a->heads.v[h] / a->gqa.v[g],
                                            a->head_size, a->block_size, a->batch.v[b],
                                            a->context.v[c], 0, 0, (clpa_dtype)a->dtypes.v[d],
                                            CLPA_DECODE_AUTO, CLPA_DECODE_PATH_AUTO,
                                            (bench_lengths)a->lengths.v[l], 0, 0, 0, 0,
                                            CLPA_KV_LAYOUT_SPLIT_KEY};
              if (visit) visit(&s, ctx);
              n++;
            }
  return n;
}

/* A CSV field: quoted when it holds a comma, a quote or a line break. */
static void csv_field(FILE *f, const char *s) {
  if (!strpbrk(s, ",\"\r\n")) {
    fputs(s, f);
    return;
  }
  fputc('"', f);
  for (; *s; s++) {
    if (*s == '"') fputc('"', f);
    fputc(*s, f);
  }
  fputc('"', f);
}

typedef struct copy_memo {
  size_t bytes;
  double gbps;
} copy_memo;

typedef struct sweep_run {
  const sweep_args *a;
  bench_env *env;
  bench_timing t;
  FILE *csv;
  int points, done, measured, skipped, failed;
  sweep_row *rows;
  copy_memo memo[64];
  int memo_n;
  double started; /* when the first point began (bench_now), for the ETA */
} sweep_run;

/* The copy ceiling over bytes, measured once per size. */
static double copy_for(sweep_run *r, size_t bytes) {
  for (int i = 0; i < r->memo_n; i++)
    if (r->memo[i].bytes == bytes) return r->memo[i].gbps;
  double g = bench_copy_gbps(r->env, bytes, &r->t);
  if (g > 0 && r->memo_n < (int)(sizeof r->memo / sizeof *r->memo))
    r->memo[r->memo_n++] = (copy_memo){bytes, g};
  return g;
}

/* The point in words; padded: in columns for the table. */
static void shape_text(const bench_decode_shape *s, int padded, char *buf, size_t size) {
  snprintf(buf, size,
           padded ? "%-8s heads %3d/%-3d batch %3d context %6d %-10s"
                  : "%s heads %d/%d batch %d context %d %s",
           clpa_dtype_name(s->dtype), (int)s->heads, (int)s->kv_heads, (int)s->batch,
           (int)s->context, bench_lengths_name(s->lengths));
}

/* --paths: auto's time against the fastest path's (1: auto is the fastest). */
static double auto_vs_best(const sweep_row *row) { return row->best_us / row->us; }

/* --paths: the point on each listed path other than auto's own (whose
 * time is auto's), each with its own plan; the fastest goes into row.
 * Each path draws what auto's call drew (the rng from `drawn`, auto's
 * `tokens`: log-uniform lengths differ between draws); the rng then goes
 * on from where auto's call left it, so later points do not depend on
 * --paths. */
static void compare_paths(sweep_run *r, sweep_row *row, const char *what, uint64_t drawn,
                          long long tokens) {
  const uint64_t after = bench_rand_state();
  for (int i = 0; i < r->a->paths.n; i++) {
    const clpa_decode_path p = (clpa_decode_path)r->a->paths.v[i];
    if (p == row->path) continue;
    bench_decode_shape sp = row->s;
    sp.path = p;
    bench_decode_figures f;
    char why[2048];
    cli_progress("%s, %s path", what, bench_path_name(p));
    bench_rand_restore(drawn);
    int rc = bench_decode_measure(r->env, &sp, &r->t, &f, why, sizeof why);
    cli_progress_end();
    if (rc == BENCH_MEASURED && f.tokens != tokens) {
      rc = BENCH_FAILED;
      snprintf(why, sizeof why, "%lld tokens, auto's call %lld", f.tokens, tokens);
    }
    if (rc == BENCH_MEASURED && f.per_call * 1e6 < row->best_us)
      row->best_us = f.per_call * 1e6, row->best_path = p;
    if (rc == BENCH_FAILED) {
      r->failed++;
      fprintf(stderr, "clpa-bench sweep: failed %s, %s path: %s\n", what, bench_path_name(p),
              why[0] ? why : "(see above)");
    }
  }
  bench_rand_restore(after);
}

static void measure_point(const bench_decode_shape *s, void *ctx) {
  sweep_run *r = ctx;
  char what[160], why[2048];
  shape_text(s, 0, what, sizeof what);
  /* The counter and the ETA (from the points so far) stay on every
   * progress line of the point. */
  char counter[96], eta[32];
  const int finished = r->done++;
  if (finished > 0)
    snprintf(counter, sizeof counter, "sweep %d/%d, ETA %s: ", r->done, r->points,
             cli_duration_text(eta, sizeof eta,
                               (bench_now() - r->started) / finished * (r->points - finished)));
  else
    snprintf(counter, sizeof counter, "sweep %d/%d: ", r->done, r->points);
  cli_progress_prefix(counter);
  cli_progress("%s", what);
  bench_decode_figures f;
  const uint64_t drawn = bench_rand_state();
  int rc = bench_decode_measure(r->env, s, &r->t, &f, why, sizeof why);
  double copy = rc == BENCH_MEASURED ? copy_for(r, f.cache_bytes) : 0;
  cli_progress_end();
  if (rc == BENCH_MEASURED && copy <= 0) {
    rc = BENCH_FAILED;
    snprintf(why, sizeof why, "could not measure the copy bandwidth");
  }
  if (rc != BENCH_MEASURED) {
    if (rc == BENCH_FAILED) r->failed++;
    else r->skipped++;
    fprintf(stderr, "clpa-bench sweep: %s %s: %s\n", rc == BENCH_FAILED ? "failed" : "skipped",
            what, why[0] ? why : "(see above)");
    return;
  }
  sweep_row *row = &r->rows[r->measured++];
  *row = (sweep_row){*s, f.per_call * 1e6, f.kv_bytes / f.per_call / 1e9, copy, 0, f.path, f.path,
                     f.per_call * 1e6};
  row->ratio = row->gbps / copy;
  compare_paths(r, row, what, drawn, f.tokens);
  csv_field(r->csv, r->env->info.name);
  fprintf(r->csv, ",%s,%s,%d,%d,%d,%d,%d,%d,%s,%.2f,%.3f,%.3f,%.4f,%s", bench_mode_name(&r->t),
          clpa_dtype_name(s->dtype), (int)s->heads, (int)s->kv_heads, (int)s->head_size,
          (int)s->block_size, (int)s->batch, (int)s->context, bench_lengths_name(s->lengths),
          row->us, row->gbps, row->copy, row->ratio, bench_path_name(row->path));
  if (r->a->paths.n)
    fprintf(r->csv, ",%s,%.2f,%.4f\n", bench_path_name(row->best_path), row->best_us,
            auto_vs_best(row));
  else
    fputs(",,,\n", r->csv);
  fflush(r->csv);
  shape_text(s, 1, what, sizeof what);
  if (!r->a->json) {
    char tt[32];
    printf("%s %s %9.2f GB/s  ratio %.3f  %-5s", what,
           cli_time_text(tt, sizeof tt, row->us * 1e-6, 10), row->gbps, row->ratio,
           bench_path_name(row->path));
    if (r->a->paths.n)
      printf("  %.2f of the fastest (%s, %s)", auto_vs_best(row), bench_path_name(row->best_path),
             cli_time_text(tt, sizeof tt, row->best_us * 1e-6, 0));
    printf("\n");
  }
  fflush(stdout);
}

/* ----------------------------------------------------------------------
 * The plot
 * -------------------------------------------------------------------- */
/* Writes s in a gnuplot single-quoted string (a quote is doubled). */
static void gp_string(FILE *f, const char *s) {
  fputc('\'', f);
  for (; *s; s++) {
    if (*s == '\'') fputc('\'', f);
    fputc(*s, f);
  }
  fputc('\'', f);
}

static int gnuplot_installed(void) {
  FILE *p = popen("command -v gnuplot 2>/dev/null", "r");
  if (!p) return 0;
  char line[4096];
  int found = fgets(line, sizeof line, p) != NULL && line[0] == '/';
  return pclose(p) == 0 && found;
}

/* The median ratio of the rows of (dtype, lengths, batch, context); < 0: none. */
static double median_ratio(const sweep_run *r, int32_t dtype, int32_t lengths, int32_t batch,
                           int32_t context, double *buf) {
  int n = 0;
  for (int i = 0; i < r->measured; i++) {
    const bench_decode_shape *s = &r->rows[i].s;
    if ((int32_t)s->dtype == dtype && (int32_t)s->lengths == lengths && s->batch == batch &&
        s->context == context)
      buf[n++] = r->rows[i].ratio;
  }
  if (!n) return -1;
  return cli_quantile(buf, (size_t)n, 0.5);
}

/* The top of the panels' shared y range: a tenth above the highest point,
 * rounded up to a tenth, so that panels compare at a glance (1 when
 * nothing was measured). */
static double plot_ymax(const sweep_run *r, double *buf) {
  const sweep_args *a = r->a;
  double top = 0;
  for (int d = 0; d < a->dtypes.n; d++)
    for (int l = 0; l < a->lengths.n; l++)
      for (int b = 0; b < a->batch.n; b++)
        for (int c = 0; c < a->context.n; c++) {
          const double m = median_ratio(r, a->dtypes.v[d], a->lengths.v[l], a->batch.v[b],
                                        a->context.v[c], buf);
          if (m > top) top = m;
        }
  return top > 0 ? ceil(top * 1.1 * 10 - 1e-9) / 10 : 1;
}

/* Writes the gnuplot script (data inline as datablocks) to f. Text is
 * literal (noenhanced: fp8_e4m3 is no subscript); every panel has the
 * same y range. */
static void plot_script(const sweep_run *r, const char *png, FILE *f, double *buf) {
  const sweep_args *a = r->a;
  int cols = a->lengths.n, rows = a->dtypes.n;
  fprintf(f, "set terminal png noenhanced size %d,%d\nset output ", 560 * cols, 420 * rows);
  gp_string(f, png);
  fputs("\nset multiplot layout ", f);
  fprintf(f, "%d,%d title ", rows, cols);
  char title[512];
  snprintf(title, sizeof title,
           "clpa decode: K/V GB/s / copy GB/s, %s L2, median over heads x GQA - %s",
           bench_mode_name(&r->t), r->env->info.name);
  gp_string(f, title);
  fputs("\nset logscale x 2\nset xlabel 'context (tokens)'\nset ylabel 'ratio'\n"
        "set key top left\nset grid\n",
        f);
  fprintf(f, "set yrange [0:%.1f]\n", plot_ymax(r, buf));
  for (int d = 0; d < a->dtypes.n; d++)
    for (int l = 0; l < a->lengths.n; l++) {
      int lines = 0;
      for (int b = 0; b < a->batch.n; b++) {
        fprintf(f, "$d%d_%d_%d << EOD\n", d, l, b);
        for (int c = 0; c < a->context.n; c++) {
          double m = median_ratio(r, a->dtypes.v[d], a->lengths.v[l], a->batch.v[b],
                                  a->context.v[c], buf);
          if (m >= 0) fprintf(f, "%d %.5f\n", (int)a->context.v[c], m), lines++;
        }
        fputs("EOD\n", f);
      }
      snprintf(title, sizeof title, "%s, %s lengths", clpa_dtype_name((clpa_dtype)a->dtypes.v[d]),
               bench_lengths_name((bench_lengths)a->lengths.v[l]));
      fputs("set title ", f);
      gp_string(f, title);
      fputc('\n', f);
      if (!lines) { /* nothing measured here: an empty panel keeps the layout */
        fputs("set key off\nplot [1:2] NaN notitle\nset key on\n", f);
        continue;
      }
      fputs("plot ", f);
      int first = 1;
      for (int b = 0; b < a->batch.n; b++) {
        if (a->batch.v[b] == 1 && a->lengths.v[l] != BENCH_LENGTHS_UNIFORM) continue;
        /* A batch size keeps its line type in every panel. */
        fprintf(f, "%s$d%d_%d_%d using 1:2 with linespoints lt %d title 'batch %d'",
                first ? "" : ", ", d, l, b, b + 1, (int)a->batch.v[b]);
        first = 0;
      }
      fputc('\n', f);
    }
  fputs("unset multiplot\n", f);
}

/* Draws the plot when gnuplot is there; returns 1 when it wrote png. */
static int plot(const sweep_run *r, const char *png) {
  if (!gnuplot_installed()) {
    fprintf(stderr, "clpa-bench sweep: gnuplot is not installed: skipped the plot "
                    "(Debian: apt-get install gnuplot-nox)\n");
    return 0;
  }
  double *buf = malloc(sizeof *buf * (size_t)(r->measured ? r->measured : 1));
  FILE *gp = buf ? popen("gnuplot", "w") : NULL;
  if (!gp) {
    free(buf);
    fprintf(stderr, "clpa-bench sweep: could not start gnuplot: skipped the plot\n");
    return 0;
  }
  remove(png);
  plot_script(r, png, gp, buf);
  free(buf);
  int status = pclose(gp);
  FILE *check = fopen(png, "rb");
  if (check) fclose(check);
  if (status != 0 || !check) {
    fprintf(stderr, "clpa-bench sweep: gnuplot could not write %s (exit status %d)\n", png, status);
    return 0;
  }
  return 1;
}

/* ----------------------------------------------------------------------
 * clpa-bench sweep
 * -------------------------------------------------------------------- */
/* --paths: the point where auto is furthest from the fastest path (-1: none). */
static int worst_point(const sweep_run *r) {
  int w = -1;
  for (int i = 0; i < r->measured; i++)
    if (w < 0 || auto_vs_best(&r->rows[i]) < auto_vs_best(&r->rows[w])) w = i;
  return w;
}

/* Points where auto is below `at` of the fastest path's speed. */
static int below(const sweep_run *r, double at) {
  int n = 0;
  for (int i = 0; i < r->measured; i++) n += auto_vs_best(&r->rows[i]) < at;
  return n;
}

static void print_json(const sweep_run *r, const char *csv, const char *png) {
  cli_json j;
  cli_json_begin(&j, stdout);
  cli_json_str(&j, "op", "sweep");
  cli_json_str(&j, "device", r->env->info.name);
  cli_json_str(&j, "mode", bench_mode_name(&r->t));
  cli_json_int(&j, "points", r->points);
  cli_json_int(&j, "measured", r->measured);
  cli_json_int(&j, "skipped", r->skipped);
  cli_json_int(&j, "failed", r->failed);
  cli_json_str(&j, "csv", csv);
  cli_json_str(&j, "png", png);
  cli_json_str(&j, "shapes", grid_name(r->a));
  if (r->a->paths.n) {
    char what[160] = "";
    const int w = worst_point(r);
    if (w >= 0) shape_text(&r->rows[w].s, 0, what, sizeof what);
    cli_json_num(&j, "worst_auto_vs_best", w >= 0 ? auto_vs_best(&r->rows[w]) : 1.0, 4);
    cli_json_str(&j, "worst_point", what);
    cli_json_int(&j, "below_0_8", below(r, 0.8));
  }
  cli_json_end(&j);
}

/* The plot's default name: the CSV's, its .csv (if any) turned into .png. */
static char *png_name(const char *csv) {
  size_t n = strlen(csv);
  if (n >= 4 && strcmp(csv + n - 4, ".csv") == 0) n -= 4;
  char *s = malloc(n + 5);
  if (s) memcpy(s, csv, n), memcpy(s + n, ".png", 5);
  return s;
}

int bench_sweep(int argc, char **argv) {
  sweep_args a;
  int parsed = parse(argc, argv, &a);
  if (parsed != CLI_RUN) return parsed;
  char *png = a.png ? NULL : png_name(a.csv);
  const char *png_path = a.png ? (strcmp(a.png, "none") == 0 ? NULL : a.png) : png;
  sweep_run r = {&a, NULL, {0, 0}, NULL, 0, 0, 0, 0, 0, NULL, {{0, 0}}, 0, 0};
  r.points = grid_each(&a, NULL, NULL);
  r.rows = malloc(sizeof *r.rows * (size_t)(r.points ? r.points : 1));
  if (!r.rows || (!a.png && !png)) {
    fprintf(stderr, "clpa-bench sweep: out of host memory\n");
    free(r.rows), free(png);
    return 1;
  }
  bench_env env;
  if (bench_open(&env)) {
    free(r.rows), free(png);
    return 1;
  }
  r.env = &env;
  bench_timing_pick(&env, a.cold, a.hot, a.repeats, &r.t);
  int rc = 1;
  r.csv = fopen(a.csv, "w");
  if (!r.csv) {
    fprintf(stderr, "clpa-bench sweep: cannot write %s\n", a.csv);
    goto done;
  }
  fputs("device,mode,dtype,heads,kv_heads,head_size,block_size,batch,context,lengths,"
        "us_per_call,gbps,copy_gbps,ratio,path,best_path,best_us,auto_vs_best\n",
        r.csv);
  if (!a.json)
    printf("device %s, %s L2, %d points (%s grid) -> %s\n", env.info.name, bench_mode_name(&r.t),
           r.points, grid_name(&a), a.csv);
  fflush(stdout);
  r.started = bench_now();
  grid_each(&a, measure_point, &r);
  cli_progress_prefix(NULL);
  int closed = fclose(r.csv);
  r.csv = NULL;
  if (closed != 0) {
    fprintf(stderr, "clpa-bench sweep: could not finish writing %s\n", a.csv);
    goto done;
  }
  int plotted = png_path && r.measured ? plot(&r, png_path) : 0;
  if (a.json) {
    print_json(&r, a.csv, plotted ? png_path : NULL);
  } else {
    printf("%d measured, %d skipped, %d failed; rows in %s", r.measured, r.skipped, r.failed,
           a.csv);
    if (plotted) printf(", plot in %s", png_path);
    printf("\n");
    const int w = a.paths.n ? worst_point(&r) : -1;
    if (w >= 0) {
      char what[160];
      shape_text(&r.rows[w].s, 0, what, sizeof what);
      char t1[32], t2[32];
      printf("auto against the fastest path: %.2f at worst (%s: %s %s, %s %s); %d of %d"
             " points below 0.8\n",
             auto_vs_best(&r.rows[w]), what, bench_path_name(r.rows[w].path),
             cli_time_text(t1, sizeof t1, r.rows[w].us * 1e-6, 0),
             bench_path_name(r.rows[w].best_path),
             cli_time_text(t2, sizeof t2, r.rows[w].best_us * 1e-6, 0), below(&r, 0.8), r.measured);
    }
  }
  rc = r.failed ? 1 : 0;
done:
  if (r.csv) fclose(r.csv);
  bench_close(&env);
  free(r.rows), free(png);
  return rc;
}
