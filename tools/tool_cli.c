/* tool_cli.c — options, JSON and the progress line of clpa's tools (see tool_cli.h). */
#include "tool_cli.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ----------------------------------------------------------------------
 * Options
 * -------------------------------------------------------------------- */
#define MAX_OPTS 32
#define OPT_VAL 256 /* getopt_long's value of opts[i] is OPT_VAL + i, clear of 'h' and 'V' */
#define HELP_COLUMN 26 /* where the help text starts */
#define LINE_WIDTH 80

static int count_opts(const cli_opt *o) {
  int n = 0;
  while (o[n].name) n++;
  return n;
}

/* "a positive integer", with its bounds when the value broke them. */
static const char *describe_int(const cli_opt *o, char *buf, size_t cap, int broke_min,
                                int broke_max) {
  const char *base = o->min == 1 ? "a positive integer" : o->min == 0 ? "a non-negative integer"
                                                                      : "an integer";
  if (broke_max && o->min >= 0)
    snprintf(buf, cap, "%s up to %ld", base, (long)o->max);
  else if ((broke_min || broke_max) && (o->min > 1 || o->min < 0)) /* -2 is "an integer" */
    snprintf(buf, cap, "an integer from %ld to %ld", (long)o->min, (long)o->max);
  else
    snprintf(buf, cap, "%s", base);
  return buf;
}

static void print_opt(FILE *f, const char *left, const char *help, const char *def) {
  int n = fprintf(f, "  %s", left);
  if (n + 2 > HELP_COLUMN) {
    fputc('\n', f);
    n = 0;
  }
  fprintf(f, "%*s", HELP_COLUMN - n, "");
  n = HELP_COLUMN;
  for (const char *p = help; *p; p++, n++) {
    fputc(*p, f);
    if (*p == '\n') n = fprintf(f, "%*s", HELP_COLUMN, "") - 1;
  }
  if (def) { /* on the help's last line when it fits, else on its own; '\n' as in help */
    char text[128];
    snprintf(text, sizeof text, "(default %s)", def);
    const int len = (int)strcspn(text, "\n");
    if (n + 1 + len < LINE_WIDTH)
      fputc(' ', f);
    else
      fprintf(f, "\n%*s", HELP_COLUMN, "");
    for (const char *p = text; *p; p++) {
      fputc(*p, f);
      if (*p == '\n') fprintf(f, "%*s", HELP_COLUMN, "");
    }
  }
  fputc('\n', f);
}

void cli_usage(const cli_cmd *cmd, FILE *f) {
  fprintf(f, "usage: %s [options]\n", cmd->name);
  if (cmd->about) fprintf(f, "%s\n", cmd->about);
  fputs("\noptions:\n", f);
  for (const cli_opt *o = cmd->opts; o->name; o++) {
    char left[64], def[64];
    const char *d = o->def;
    snprintf(left, sizeof left, "--%s%s%s", o->name, o->arg ? " " : "", o->arg ? o->arg : "");
    if (!d && o->kind == CLI_INT) {
      snprintf(def, sizeof def, "%ld", (long)*(const int32_t *)o->value);
      d = def;
    } else if (!d && o->kind == CLI_U64) {
      snprintf(def, sizeof def, "%llu", (unsigned long long)*(const uint64_t *)o->value);
      d = def;
    }
    print_opt(f, left, o->help, d);
  }
  print_opt(f, "-h, --help", "this text", NULL);
  if (cmd->version) print_opt(f, "--version", "print the version", NULL);
  if (cmd->notes) fprintf(f, "\n%s\n", cmd->notes);
}

int cli_error(const cli_cmd *cmd, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "%s: ", cmd->name);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, "\nTry '%s --help' for the options.\n", cmd->name);
  return 2;
}

/* Stores one option's value; returns 0 or the exit status 2. */
static int take_value(const cli_cmd *cmd, const cli_opt *o, const char *text) {
  char what[96];
  char *end;
  switch (o->kind) {
    case CLI_FLAG:
      *(int *)o->value = 1;
      return 0;
    case CLI_INT: {
      errno = 0;
      long long v = strtoll(text, &end, 10);
      if (end == text || *end)
        return cli_error(cmd, "--%s takes %s, not '%s'", o->name,
                         describe_int(o, what, sizeof what, 0, 0), text);
      if (errno == ERANGE || v < o->min || v > o->max)
        return cli_error(cmd, "--%s takes %s, not '%s'", o->name,
                         describe_int(o, what, sizeof what, v < o->min, v >= o->min), text);
      *(int32_t *)o->value = (int32_t)v;
      return 0;
    }
    case CLI_U64: {
      errno = 0;
      unsigned long long v = strtoull(text, &end, 10);
      if (end == text || *end || strchr(text, '-') || errno == ERANGE)
        return cli_error(cmd, "--%s takes an integer from 0 to %llu, not '%s'", o->name,
                         (unsigned long long)UINT64_MAX, text);
      *(uint64_t *)o->value = (uint64_t)v;
      return 0;
    }
    case CLI_WORD: {
      const char *takes = o->parse(text, o->value);
      if (takes) return cli_error(cmd, "--%s takes %s, not '%s'", o->name, takes, text);
      return 0;
    }
  }
  return 0;
}

/* Why getopt_long refused argument `text`: an unknown name, or a prefix of
 * several (getopt_long takes any unambiguous prefix). */
static int unknown(const cli_cmd *cmd, const char *text) {
  char name[64], all[512] = "";
  snprintf(name, sizeof name, "%.*s", (int)strcspn(text, "="), text);
  const char *prefix = strncmp(name, "--", 2) == 0 && name[2] ? name + 2 : NULL;
  size_t used = 0;
  int matches = 0;
  const int n = count_opts(cmd->opts);
  for (int i = 0; prefix && i < n + 2; i++) { /* the table, then help and version */
    const char *o = i < n ? cmd->opts[i].name : i == n ? "help" : cmd->version ? "version" : "";
    if (*o && strncmp(o, prefix, strlen(prefix)) == 0 && used < sizeof all)
      used += (size_t)snprintf(all + used, sizeof all - used, "%s--%s", matches++ ? ", " : "", o);
  }
  if (matches > 1) return cli_error(cmd, "ambiguous option '%s' (%s)", name, all);
  return cli_error(cmd, "unknown option '%s'", name);
}

int cli_parse(const cli_cmd *cmd, int argc, char **argv) {
  const int n = count_opts(cmd->opts);
  struct option longs[MAX_OPTS + 3];
  if (n > MAX_OPTS) abort(); /* a table this long is a mistake in the tool */
  for (int i = 0; i < n; i++)
    longs[i] = (struct option){cmd->opts[i].name,
                               cmd->opts[i].kind == CLI_FLAG ? no_argument : required_argument,
                               NULL, OPT_VAL + i};
  longs[n] = (struct option){"help", no_argument, NULL, 'h'};
  longs[n + 1] = cmd->version ? (struct option){"version", no_argument, NULL, 'V'}
                              : (struct option){NULL, 0, NULL, 0};
  longs[n + 2] = (struct option){NULL, 0, NULL, 0};

  opterr = 0; /* every message is ours */
  optind = 1;
  for (;;) {
    int c = getopt_long(argc, argv, ":h", longs, NULL);
    if (c == -1) break;
    if (c == 'h') {
      cli_usage(cmd, stdout);
      return 0;
    }
    if (c == 'V') {
      printf("%s (clpa %s)\n", cmd->name, cmd->version);
      return 0;
    }
    if (c >= OPT_VAL && c < OPT_VAL + n) {
      if (take_value(cmd, &cmd->opts[c - OPT_VAL], optarg)) return 2;
      continue;
    }
    /* An error: optopt holds the option's value when getopt_long knew it. */
    const char *arg = argv[optind - 1];
    const cli_opt *known = optopt >= OPT_VAL && optopt < OPT_VAL + n ? &cmd->opts[optopt - OPT_VAL]
                                                                      : NULL;
    if (c == ':' && known) {
      char what[96];
      return cli_error(cmd, "--%s needs a value: %s", known->name,
                       known->kind == CLI_INT ? describe_int(known, what, sizeof what, 0, 0)
                                              : known->arg);
    }
    if (known || ((optopt == 'h' || optopt == 'V') && strncmp(arg, "--", 2) == 0))
      return cli_error(cmd, "--%s takes no value",
                       known ? known->name : optopt == 'h' ? "help" : "version");
    if (optopt) return cli_error(cmd, "unknown option '-%c'", optopt);
    return unknown(cmd, arg);
  }
  if (optind < argc) return cli_error(cmd, "unexpected argument '%s'", argv[optind]);
  return CLI_RUN;
}

/* ----------------------------------------------------------------------
 * JSON
 * -------------------------------------------------------------------- */

/* The length of the well-formed UTF-8 sequence at s, or 0. */
static int utf8_len(const unsigned char *s, size_t left) {
  int n = s[0] >= 0xf0 && s[0] <= 0xf4 ? 4 : s[0] >= 0xe0 ? 3 : s[0] >= 0xc2 && s[0] < 0xe0 ? 2 : 0;
  if (n == 3 && s[0] > 0xef) n = 0;
  if ((size_t)n > left) return 0;
  for (int i = 1; i < n; i++)
    if ((s[i] & 0xc0) != 0x80) return 0;
  /* overlong forms, UTF-16 surrogates, past U+10FFFF */
  if ((s[0] == 0xe0 && s[1] < 0xa0) || (s[0] == 0xed && s[1] > 0x9f) ||
      (s[0] == 0xf0 && s[1] < 0x90) || (s[0] == 0xf4 && s[1] > 0x8f))
    return 0;
  return n;
}

void cli_json_string(FILE *out, const char *s) { cli_json_string_n(out, s, strlen(s)); }

void cli_json_string_n(FILE *out, const char *s, size_t len) {
  fputc('"', out);
  const unsigned char *p = (const unsigned char *)s, *end = p + len;
  while (p < end) {
    unsigned char c = *p;
    if (c == '"' || c == '\\') {
      fputc('\\', out), fputc(c, out), p++;
    } else if (c < 0x20) {
      const char *short_form = c == '\n' ? "\\n" : c == '\r' ? "\\r" : c == '\t' ? "\\t" : NULL;
      if (short_form)
        fputs(short_form, out);
      else
        fprintf(out, "\\u%04x", c);
      p++;
    } else if (c < 0x80) {
      fputc(c, out), p++;
    } else {
      int n = utf8_len(p, (size_t)(end - p));
      if (n)
        fwrite(p, 1, (size_t)n, out), p += n;
      else
        fputs("\\ufffd", out), p++;
    }
  }
  fputc('"', out);
}

/* The separator and key before a member. */
static void member(cli_json *j, const char *key) {
  if (j->depth > 0 && j->used[j->depth - 1]) fputc(',', j->out);
  if (j->depth > 0) j->used[j->depth - 1] = 1;
  if (key) {
    cli_json_string(j->out, key);
    fputc(':', j->out);
  }
}

static void open_level(cli_json *j, const char *key, char opener) {
  if (j->depth >= CLI_JSON_DEPTH) abort(); /* nesting this deep is a mistake in the tool */
  if (j->depth > 0) member(j, key);
  fputc(opener, j->out);
  j->closer[j->depth] = opener == '{' ? '}' : ']';
  j->used[j->depth++] = 0;
}

void cli_json_begin(cli_json *j, FILE *out) {
  j->out = out;
  j->depth = 0;
  open_level(j, NULL, '{');
}

void cli_json_object(cli_json *j, const char *key) { open_level(j, key, '{'); }
void cli_json_array(cli_json *j, const char *key) { open_level(j, key, '['); }

void cli_json_end(cli_json *j) {
  if (j->depth == 0) return;
  j->depth--;
  fputc(j->closer[j->depth], j->out);
  if (j->depth == 0) {
    fputc('\n', j->out);
    fflush(j->out);
  }
}

void cli_json_str(cli_json *j, const char *key, const char *s) {
  member(j, key);
  if (s)
    cli_json_string(j->out, s);
  else
    fputs("null", j->out);
}

void cli_json_strn(cli_json *j, const char *key, const char *s, size_t len) {
  member(j, key);
  cli_json_string_n(j->out, s, len);
}

void cli_json_int(cli_json *j, const char *key, long long v) {
  member(j, key);
  fprintf(j->out, "%lld", v);
}

void cli_json_u64(cli_json *j, const char *key, unsigned long long v) {
  member(j, key);
  fprintf(j->out, "%llu", v);
}

void cli_json_float(cli_json *j, const char *key, float v) {
  member(j, key);
  if (!isfinite(v)) {
    fputs("null", j->out);
    return;
  }
  char text[32];
  for (int digits = 1; digits <= 9; digits++) { /* 9 digits always read back as the float */
    snprintf(text, sizeof text, "%.*g", digits, (double)v);
    if (strtof(text, NULL) == v) break;
  }
  fputs(text, j->out);
}

void cli_json_num(cli_json *j, const char *key, double v, int decimals) {
  member(j, key);
  if (isfinite(v))
    fprintf(j->out, "%.*f", decimals, v);
  else
    fputs("null", j->out); /* JSON has no inf or NaN */
}

void cli_json_bool(cli_json *j, const char *key, int v) {
  member(j, key);
  fputs(v ? "true" : "false", j->out);
}

/* ----------------------------------------------------------------------
 * Times for people
 * -------------------------------------------------------------------- */
const char *cli_time_text(char *buf, size_t size, double seconds, int width) {
  char text[64];
  if (!isfinite(seconds) || seconds < 0) {
    snprintf(text, sizeof text, "-");
  } else {
    /* The unit is chosen on the rounded value: 999.96 µs is 1.00 ms. */
    static const char *const unit[] = {"\xc2\xb5s", "ms", "s"}; /* µs: U+00B5 */
    double v = seconds * 1e6;
    int u = 0;
    while (u < 2 && v >= 999.95) v /= 1e3, u++;
    snprintf(text, sizeof text, "%.*f %s", v < 9.995 ? 2 : 1, v, unit[u]);
  }
  /* columns: every byte but UTF-8's continuation bytes */
  int cols = 0;
  for (const char *p = text; *p; p++) cols += ((unsigned char)*p & 0xc0) != 0x80;
  snprintf(buf, size, "%*s%s", width > cols ? width - cols : 0, "", text);
  return buf;
}

const char *cli_duration_text(char *buf, size_t size, double seconds) {
  if (!isfinite(seconds) || seconds < 0 || seconds > 1e9) {
    snprintf(buf, size, "-");
    return buf;
  }
  const long s = (long)(seconds + 0.5), m = (s + 30) / 60; /* past an hour, whole minutes */
  if (s < 60)
    snprintf(buf, size, "%ld s", s);
  else if (s < 3600)
    snprintf(buf, size, "%ld min %02ld s", s / 60, s % 60);
  else
    snprintf(buf, size, "%ld h %02ld min", m / 60, m % 60);
  return buf;
}

static int cmp_double(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

double cli_quantile(double *v, size_t n, double q) {
  if (n == 0) return 0;
  qsort(v, n, sizeof *v, cmp_double);
  const double at = (q < 0 ? 0 : q > 1 ? 1 : q) * (double)(n - 1);
  const size_t i = (size_t)at;
  return i + 1 < n ? v[i] + (at - (double)i) * (v[i + 1] - v[i]) : v[n - 1];
}

/* ----------------------------------------------------------------------
 * Progress
 * -------------------------------------------------------------------- */
static int progress_tty = -1; /* unknown until first asked */
static int progress_shown;    /* characters on the line now */
static char progress_before[96]; /* cli_progress_prefix's text */
static double progress_start, progress_last;

static double seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int on_terminal(void) {
  if (progress_tty < 0) progress_tty = isatty(fileno(stderr));
  return progress_tty;
}

void cli_progress_prefix(const char *text) {
  snprintf(progress_before, sizeof progress_before, "%s", text ? text : "");
}

void cli_progress(const char *fmt, ...) {
  if (!on_terminal()) return;
  char line[160];
  const int before = snprintf(line, sizeof line, "%s", progress_before);
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(line + before, sizeof line - (size_t)before, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  n += before;
  if (n >= (int)sizeof line) n = (int)sizeof line - 1;
  /* spaces wipe what is left of a longer line before */
  fprintf(stderr, "\r%s%*s", line, progress_shown > n ? progress_shown - n : 0, "");
  if (progress_shown > n) fprintf(stderr, "\r%s", line);
  fflush(stderr);
  progress_shown = n;
  progress_last = seconds();
}

void cli_progress_begin(void) { progress_start = progress_last = seconds(); }

int cli_progress_due(void) {
  if (!on_terminal()) return 0;
  double t = seconds();
  return t - progress_start >= 1.0 && t - progress_last >= 0.25;
}

void cli_progress_end(void) {
  if (!progress_shown) return;
  fprintf(stderr, "\r%*s\r", progress_shown, "");
  fflush(stderr);
  progress_shown = 0;
}
