/*
 * test_tool_cli.c — the tools' JSON writer and option parser (tools/tool_cli.c)
 * on inputs a device name could bring: quotes, backslashes, control bytes,
 * bytes that are not UTF-8, numbers that are not finite, settings written as
 * given (a seed past 2^63, floats in their fewest digits); and the times
 * printed for people (µs, ms or s by magnitude, the ETA). No device.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"
#include "tool_cli.h"

/* Runs fn against a memory stream and compares what it wrote with want. */
static void check_json(const char *what, void (*fn)(cli_json *), const char *want) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  if (!f) BAIL_OUT("open_memstream failed");
  cli_json j;
  cli_json_begin(&j, f);
  fn(&j);
  cli_json_end(&j);
  fclose(f);
  if (!ok(strcmp(buf, want) == 0, "json: %s", what)) diag("got  %s\nwant %s", buf, want);
  free(buf);
}

static void strings(cli_json *j) {
  cli_json_str(j, "device", "Dev \"quoted\" \\back\\slash");
  cli_json_str(j, "controls", "a\nb\tc\rd\x01\x1f");
  cli_json_str(j, "utf8", "caf\xc3\xa9 \xe2\x80\xa6");
  cli_json_str(j, "not_utf8", "x\xff\xc3(\xed\xa0\x80y");
  cli_json_str(j, "null", NULL);
  cli_json_str(j, "key \"q\"", "");
}

/* Lengths, not terminators: a NUL byte is written, a character cut by the
 * length is not read past it. */
static void counted(cli_json *j) {
  cli_json_strn(j, "nul", "a\0b", 3);
  cli_json_strn(j, "cut", "caf\xc3\xa9", 4);
  cli_json_strn(j, "empty", "xyz", 0);
}

static void numbers(cli_json *j) {
  cli_json_int(j, "i", -42);
  cli_json_int(j, "big", 4600790016LL);
  cli_json_num(j, "x", 1.23456, 2);
  cli_json_num(j, "inf", INFINITY, 2);
  cli_json_num(j, "nan", NAN, 0);
  cli_json_bool(j, "t", 1);
  cli_json_bool(j, "f", 0);
}

/* Settings as given: the fewest digits that read back as the float. */
static void settings(cli_json *j) {
  cli_json_u64(j, "seed", 18446744073709551615ULL);
  cli_json_float(j, "t", 0.8f);
  cli_json_float(j, "small", 1e-5f);
  cli_json_float(j, "p", 0.99999f);
  cli_json_float(j, "third", 1.0f / 3);
  cli_json_float(j, "max", 3.40282347e38f);
  cli_json_float(j, "tiny", 1e-45f);
  cli_json_float(j, "nan", NAN);
}

static void nested(cli_json *j) {
  cli_json_str(j, "op", "kvman");
  cli_json_array(j, "runs");
  for (int i = 0; i < 2; i++) {
    cli_json_object(j, NULL);
    cli_json_int(j, "running", 64 << (2 * i));
    cli_json_end(j);
  }
  cli_json_end(j);
  cli_json_array(j, "empty");
  cli_json_end(j);
}

/* Option parsing: argv is split on spaces; returns cli_parse's answer. */
typedef struct opts {
  int32_t n;
  uint64_t seed;
  int flag;
  int word;
} opts;

static const char *parse_word(const char *text, void *value) {
  if (strcmp(text, "yes") == 0) *(int *)value = 1;
  else if (strcmp(text, "no") == 0) *(int *)value = 0;
  else return "yes or no";
  return NULL;
}

/* With line NULL, writes the usage to *usage (to free) instead of parsing.
 * version: the command has a --version. */
static int run_parse_v(const char *line, opts *o, char **usage, int version) {
  char buf[256], *argv[16];
  int argc = 0;
  snprintf(buf, sizeof buf, "test %s", line ? line : "");
  for (char *t = strtok(buf, " "); t && argc < 15; t = strtok(NULL, " ")) argv[argc++] = t;
  argv[argc] = NULL;
  *o = (opts){7, 1, 0, 0};
  const cli_opt table[] = {
      {"n", CLI_INT, &o->n, 1, 100, "N", "a number", NULL, NULL},
      {"number-two", CLI_INT, &o->n, 0, 100, "N", "the same number", NULL, NULL},
      {"seed", CLI_U64, &o->seed, 0, 0, "N", "a seed", NULL, NULL},
      {"flag", CLI_FLAG, &o->flag, 0, 0, NULL, "a flag", NULL, NULL},
      {"word", CLI_WORD, &o->word, 0, 0, "W", "yes or no", "no", parse_word},
      {"other-flag", CLI_FLAG, &o->flag, 0, 0, NULL, "a flag whose default takes two lines",
       "off here;\nbut on there", NULL},
      {NULL, CLI_FLAG, NULL, 0, 0, NULL, NULL, NULL, NULL},
  };
  const cli_cmd cmd = {"test", NULL, table, NULL, version ? "9.8.7" : NULL};
  if (line) return cli_parse(&cmd, argc, argv);
  size_t len;
  FILE *f = open_memstream(usage, &len);
  if (!f) BAIL_OUT("open_memstream failed");
  cli_usage(&cmd, f);
  fclose(f);
  return 0;
}

static int run_parse(const char *line, opts *o, char **usage) {
  return run_parse_v(line, o, usage, 1);
}

/* cli_time_text(seconds, width) against want. */
static void check_time(double seconds, int width, const char *want) {
  char buf[64];
  cli_time_text(buf, sizeof buf, seconds, width);
  if (!ok(strcmp(buf, want) == 0, "time %g s, width %d: '%s'", seconds, width, want))
    diag("got '%s'", buf);
}

static void check_duration(double seconds, const char *want) {
  char buf[64];
  cli_duration_text(buf, sizeof buf, seconds);
  if (!ok(strcmp(buf, want) == 0, "duration %g s: '%s'", seconds, want)) diag("got '%s'", buf);
}

/* cli_quantile of v[0 .. n) at q against want (v is copied: the call sorts it). */
static void check_quantile(const double *v, size_t n, double q, double want) {
  double w[32];
  memcpy(w, v, sizeof *v * n);
  const double got = cli_quantile(w, n, q);
  if (!ok(fabs(got - want) <= 1e-12 * (fabs(want) + 1), "quantile %g of %zu values: %g", q, n,
          want))
    diag("got %.17g", got);
}

int main(void) {
  check_json("escaping", strings,
             "{\"device\":\"Dev \\\"quoted\\\" \\\\back\\\\slash\","
             "\"controls\":\"a\\nb\\tc\\rd\\u0001\\u001f\","
             "\"utf8\":\"caf\xc3\xa9 \xe2\x80\xa6\","
             "\"not_utf8\":\"x\\ufffd\\ufffd(\\ufffd\\ufffd\\ufffdy\","
             "\"null\":null,\"key \\\"q\\\"\":\"\"}\n");
  check_json("counted strings", counted,
             "{\"nul\":\"a\\u0000b\",\"cut\":\"caf\\ufffd\",\"empty\":\"\"}\n");
  check_json("numbers", numbers,
             "{\"i\":-42,\"big\":4600790016,\"x\":1.23,\"inf\":null,\"nan\":null,"
             "\"t\":true,\"f\":false}\n");
  check_json("settings", settings,
             "{\"seed\":18446744073709551615,\"t\":0.8,\"small\":1e-05,\"p\":0.99999,"
             "\"third\":0.33333334,\"max\":3.4028235e+38,\"tiny\":1e-45,\"nan\":null}\n");
  check_json("nesting", nested,
             "{\"op\":\"kvman\",\"runs\":[{\"running\":64},{\"running\":256}],\"empty\":[]}\n");

  opts o;
  ok(run_parse("", &o, NULL) == CLI_RUN && o.n == 7, "no options: defaults");
  ok(run_parse("--n 5 --flag", &o, NULL) == CLI_RUN && o.n == 5 && o.flag, "--n 5 --flag");
  ok(run_parse("--n=9", &o, NULL) == CLI_RUN && o.n == 9, "--n=9");
  ok(run_parse("--number 3", &o, NULL) == CLI_RUN && o.n == 3, "an unambiguous prefix");
  ok(run_parse("--seed 18446744073709551615", &o, NULL) == CLI_RUN && o.seed == UINT64_MAX,
     "--seed takes all of uint64");
  ok(run_parse("--word=yes", &o, NULL) == CLI_RUN && o.word == 1, "a word");
  char *usage = NULL;
  run_parse(NULL, &o, &usage);
  if (!ok(strstr(usage, "usage: test [options]") && strstr(usage, "--n N") &&
              strstr(usage, "a number (default 7)") && strstr(usage, "(default no)") &&
              strstr(usage, "--seed N") && strstr(usage, "(default 1)") &&
              strstr(usage, "-h, --help") && strstr(usage, "--version"),
          "the usage lists every option with its default, and --version"))
    diag("%s", usage);
  char two_lines[128];
  snprintf(two_lines, sizeof two_lines, "(default off here;\n%26sbut on there)\n", "");
  if (!ok(strstr(usage, two_lines) != NULL, "a default of two lines: the second indented"))
    diag("%s", usage);
  free(usage);
  run_parse_v(NULL, &o, &usage, 0);
  ok(!strstr(usage, "--version"), "no --version in the usage of a command without one");
  free(usage);
  ok(run_parse_v("--version", &o, NULL, 0) == 2, "--version where there is none: 2");
  ok(run_parse("--version=1", &o, NULL) == 2, "--version with a value: 2");

  /* The unit follows the magnitude, chosen after rounding. */
  check_time(22.4279897, 0, "22.4 s");
  check_time(0.1072921, 0, "107.3 ms");
  check_time(25.6e-6, 0, "25.6 \xc2\xb5s");
  check_time(2.5e-6, 0, "2.50 \xc2\xb5s");
  check_time(0.0, 0, "0.00 \xc2\xb5s");
  check_time(999.96e-6, 0, "1.00 ms");
  check_time(0.99996, 0, "1.00 s");
  check_time(9.9951e-3, 0, "10.0 ms");
  check_time(3725.0, 0, "3725.0 s");
  check_time(25.6e-6, 10, "   25.6 \xc2\xb5s"); /* µ is one column of the ten */
  check_time(0.1072921, 10, "  107.3 ms");
  check_time(1.5, 10, "    1.50 s");
  check_time(-1.0, 4, "   -");
  check_time(NAN, 0, "-");
  check_duration(0.2, "0 s");
  check_duration(35.4, "35 s");
  check_duration(59.6, "1 min 00 s");
  check_duration(245, "4 min 05 s");
  check_duration(7380, "2 h 03 min");
  check_duration(INFINITY, "-");
  /* the p50 and p99 of clpa-demo's TTFT and TPOT: an even count's median is the mean of the
   * middle two (the nearest index above it made --requests 2's p50 the larger of the two) */
  static const double two[] = {0.641, 0.290}, four[] = {4, 1, 3, 2}, three[] = {3, 1, 2};
  double many[24];
  for (int i = 0; i < 24; i++) many[i] = (double)((i * 7) % 24 + 1); /* 1 .. 24, shuffled */
  check_quantile(two, 2, 0.5, (0.290 + 0.641) / 2);
  check_quantile(two, 2, 0.99, 0.290 + 0.99 * (0.641 - 0.290));
  check_quantile(two, 2, 0.0, 0.290);
  check_quantile(two, 2, 1.0, 0.641);
  check_quantile(four, 4, 0.5, 2.5);
  check_quantile(three, 3, 0.5, 2);
  check_quantile(many, 24, 0.5, 12.5);
  check_quantile(many, 24, 0.99, 23.77);
  check_quantile(three, 1, 0.99, 3);
  check_quantile(three, 0, 0.5, 0);
  ok(run_parse("--foo", &o, NULL) == 2, "unknown option: 2");
  ok(run_parse("--n x", &o, NULL) == 2, "--n x: 2");
  ok(run_parse("--n 0", &o, NULL) == 2, "--n below its range: 2");
  ok(run_parse("--n 101", &o, NULL) == 2, "--n above its range: 2");
  ok(run_parse("--n", &o, NULL) == 2, "--n without a value: 2");
  ok(run_parse("--flag=1", &o, NULL) == 2, "a flag with a value: 2");
  ok(run_parse("--seed -1", &o, NULL) == 2, "a negative seed: 2");
  ok(run_parse("--word maybe", &o, NULL) == 2, "a word it does not take: 2");
  ok(run_parse("stray", &o, NULL) == 2, "a stray argument: 2");
  return done_testing();
}
