/*
 * tool_cli.h — the command-line face that clpa-info and clpa-bench share:
 * options (getopt_long driven by one table per command, which also writes
 * the usage), a one-line JSON writer, and a progress line on the terminal.
 * libc only.
 */
#ifndef CLPA_TOOL_CLI_H
#define CLPA_TOOL_CLI_H

#include <stdint.h>
#include <stdio.h>

/* ----------------------------------------------------------------------
 * Options
 *
 * Every option is long (--name value or --name=value); -h and --help are
 * added to every table, and --version to every command that gives its
 * clpa version. The usage lists each option with its help and its
 * default, read from the target before parsing, so the text cannot drift
 * from the code.
 * -------------------------------------------------------------------- */
typedef enum cli_kind {
  CLI_FLAG, /* no value; sets the int at value to 1 */
  CLI_INT,  /* an int32_t in [min, max] */
  CLI_U64,  /* a uint64_t (seeds) */
  CLI_WORD, /* a word that parse turns into *value */
} cli_kind;

typedef struct cli_opt {
  const char *name; /* the long name without "--"; NULL ends a table */
  cli_kind kind;
  void *value;      /* int (FLAG), int32_t (INT), uint64_t (U64), parse's target (WORD) */
  int32_t min, max; /* INT: the accepted range */
  const char *arg;  /* the value's name in the usage ("N"); NULL for flags */
  const char *help; /* what it does; '\n' continues it on an indented line */
  const char *def;  /* the default as the usage shows it ('\n' as in help); NULL: the
                       value's (INT, U64) */
  /* WORD: parses text into *value; returns NULL, or what the option takes
   * ("v1, v2 or auto") for the error message. */
  const char *(*parse)(const char *text, void *value);
} cli_opt;

typedef struct cli_cmd {
  const char *name;     /* as messages start: "clpa-bench decode" */
  const char *about;    /* printed after the usage line; may be NULL */
  const cli_opt *opts;  /* ends with an entry whose name is NULL */
  const char *notes;    /* printed after the options; may be NULL */
  const char *version;  /* clpa's version, which --version prints as "NAME (clpa VERSION)";
                           NULL: no --version */
} cli_cmd;

#define CLI_RUN (-1)

/* Parses argv[1..argc) against cmd's options (argv[0] is the command's
 * own name). Returns CLI_RUN when the command should run, else the exit
 * status: 0 after printing the usage for -h/--help or the version for
 * --version, 2 after printing why
 * the command line was refused (an unknown, ambiguous or incomplete
 * option, a value outside what the option takes, a stray argument). */
int cli_parse(const cli_cmd *cmd, int argc, char **argv);
/* Prints cmd's usage to f. */
void cli_usage(const cli_cmd *cmd, FILE *f);
/* Prints "NAME: reason" and a pointer to --help on stderr; returns 2. */
int cli_error(const cli_cmd *cmd, const char *fmt, ...)
#if defined(__GNUC__) || defined(__clang__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* ----------------------------------------------------------------------
 * JSON: one object on one line, built member by member; objects and
 * arrays nest. Strings are escaped (quotes, backslashes, control bytes;
 * bytes that are not UTF-8 become U+FFFD), numbers that are not finite
 * are written as null. Keys are snake_case by convention.
 * -------------------------------------------------------------------- */
#define CLI_JSON_DEPTH 8

typedef struct cli_json {
  FILE *out;
  int depth;                          /* open objects and arrays */
  unsigned char used[CLI_JSON_DEPTH]; /* a member was written at that level */
  char closer[CLI_JSON_DEPTH];        /* '}' or ']' */
} cli_json;

/* Opens the top-level object. */
void cli_json_begin(cli_json *j, FILE *out);
/* Closes the innermost object or array; closing the top-level object ends
 * the line and flushes. */
void cli_json_end(cli_json *j);
/* Members: key is NULL for an element of an array. */
void cli_json_object(cli_json *j, const char *key);
void cli_json_array(cli_json *j, const char *key);
void cli_json_str(cli_json *j, const char *key, const char *s); /* NULL: null */
/* len bytes of s, NUL bytes included (written \u0000). */
void cli_json_strn(cli_json *j, const char *key, const char *s, size_t len);
void cli_json_int(cli_json *j, const char *key, long long v);
void cli_json_u64(cli_json *j, const char *key, unsigned long long v);
void cli_json_num(cli_json *j, const char *key, double v, int decimals);
/* A float setting as given: the fewest digits that read back as v (0.8,
 * 1e-05), where a fixed count of decimals would round it away. */
void cli_json_float(cli_json *j, const char *key, float v);
void cli_json_bool(cli_json *j, const char *key, int v);
/* Writes s as a JSON string (with its quotes); _n: len bytes of s. */
void cli_json_string(FILE *out, const char *s);
void cli_json_string_n(FILE *out, const char *s, size_t len);

/* ----------------------------------------------------------------------
 * Times for people: the unit follows the magnitude (JSON keeps its fixed
 * units; these are for tables and lines).
 * -------------------------------------------------------------------- */
/* seconds in µs, ms or s, whichever puts it under 1000, with three or four
 * significant digits: "25.6 µs", "107.3 ms", "22.4 s", "1.00 ms" (not
 * "1000.0 µs"); "-" when it is negative or not finite. width > 0 pads it
 * on the left to that many columns (µ counts as one, though UTF-8 makes
 * it two bytes, so printf's widths would misalign it). Returns buf. */
const char *cli_time_text(char *buf, size_t size, double seconds, int width);
/* A duration to wait, rounded for a progress line: "35 s", "4 min 05 s",
 * "2 h 03 min"; "-" when negative or not finite. Returns buf. */
const char *cli_duration_text(char *buf, size_t size, double seconds);
/* The q-quantile (0 <= q <= 1) of v[0 .. n), which it sorts in place: linear
 * between the two nearest order statistics (numpy's default), so that the
 * median of an even count is the mean of the middle two; 0 when n is 0. */
double cli_quantile(double *v, size_t n, double q);

/* ----------------------------------------------------------------------
 * Progress: one status line on stderr, rewritten in place with \r, only
 * when stderr is a terminal (never in a pipe, a log or the JSON).
 * -------------------------------------------------------------------- */
/* Text put before every line from now on (NULL: none), such as a long
 * loop's counter, so that the steps inside the loop keep it on screen. */
void cli_progress_prefix(const char *text);
/* Shows the line now (before a call that blocks, such as a kernel build). */
void cli_progress(const char *fmt, ...)
#if defined(__GNUC__) || defined(__clang__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;
/* A long loop starts: cli_progress_due answers 1 from one second on. */
void cli_progress_begin(void);
/* 1 when the loop should print a new line: a terminal, a second into the
 * loop, and a quarter of a second since the last line. Cheap enough for
 * every iteration. */
int cli_progress_due(void);
/* Erases the line (no-op when none is shown). */
void cli_progress_end(void);

#endif
