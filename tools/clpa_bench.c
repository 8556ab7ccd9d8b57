/*
 * clpa-bench — speed of clpa's operations, as achieved bandwidth (or
 * operations per second) next to a ceiling measured in the same run.
 *
 *   clpa-bench decode [options]   decode attention on the selected device
 *   clpa-bench sweep [options]    decode over a grid of shapes: a CSV and a PNG
 *   clpa-bench prefill [options]  prefill attention on the selected device
 *   clpa-bench mixed [options]    a mixed step: one prefill call against decode + prefill
 *   clpa-bench xattn [options]    XAttention: estimation, density, sparse speed-up
 *   clpa-bench radix [options]    the radix prefix cache on a synthetic trace; no device
 *   clpa-bench kvman [options]    KV-manager host work per decode step; no device
 *
 * Every subcommand takes --help (its flags and their defaults) and --json
 * (one line on stdout whose "op" names the subcommand). The device is
 * CLPA_DEVICE's, else the default (clpa-info shows it).
 */
#include <stdio.h>
#include <string.h>

#include "bench_common.h"

static const char USAGE[] =
    "usage: clpa-bench COMMAND [options]\n"
    "Speed of clpa's operations, next to a ceiling measured in the same run.\n"
    "\n"
    "commands:\n"
    "  decode    decode attention on the selected device: GB/s of K/V read and the\n"
    "            ratio to the device's copy bandwidth\n"
    "  sweep     decode over a grid of shapes (heads, GQA ratio, batch, context,\n"
    "            lengths, dtype): a CSV and, with gnuplot, a PNG of the ratio\n"
    "  prefill   prefill attention on the selected device: TFLOP/s next to the\n"
    "            device's f32 FMA peak\n"
    "  mixed     a mixed step's attention (decode rows beside prefill chunks) as\n"
    "            one clpa_prefill call against a decode and a prefill call\n"
    "  xattn     XAttention on long prompts: estimation time, mask density and the\n"
    "            speed-up of block-sparse over dense prefill, estimation included\n"
    "  radix     the prefix cache on a synthetic serving trace, through the KV\n"
    "            manager: calls per second and hit rate (no device)\n"
    "  kvman     the KV manager's host work per decode step with an engine-like\n"
    "            driver: steps per second, us per step (no device)\n"
    "  linear    clpa-demo's linear layers on a model's weight shapes: GB/s of\n"
    "            weights read over the copy bandwidth, per engine and row count\n"
    "            (built with CLBlast)\n"
    "\n"
    "options:\n"
    "  -h, --help     this text ('clpa-bench COMMAND --help': a command's options)\n"
    "  --version      print clpa's version\n"
    "\n"
    "The device is CLPA_DEVICE's (P:D or a name substring), else the first GPU, else\n"
    "the first device; clpa-info lists them. --json on any command prints one JSON\n"
    "line whose \"op\" names the command. On a CPU, prefill, xattn and sweep default\n"
    "to shapes that end within a minute on 2 cores (their --shapes picks).\n";

/* The commands this build has, as the messages below list them. */
#ifdef CLPA_BENCH_CLBLAST
#define COMMANDS "decode, sweep, prefill, mixed, xattn, radix, kvman or linear"
#else
#define COMMANDS "decode, sweep, prefill, mixed, xattn, radix or kvman"
#endif

int main(int argc, char **argv) {
  const char *cmd = argc >= 2 ? argv[1] : NULL;
  if (cmd && strcmp(cmd, "decode") == 0) return bench_decode(argc - 1, argv + 1);
  if (cmd && strcmp(cmd, "sweep") == 0) return bench_sweep(argc - 1, argv + 1);
  if (cmd && strcmp(cmd, "prefill") == 0) return bench_prefill(argc - 1, argv + 1);
  if (cmd && strcmp(cmd, "xattn") == 0) return bench_xattn(argc - 1, argv + 1);
  if (cmd && strcmp(cmd, "mixed") == 0) return bench_mixed(argc - 1, argv + 1);
  if (cmd && strcmp(cmd, "radix") == 0) return clpa_bench_radix(argc - 1, argv + 1);
  if (cmd && strcmp(cmd, "kvman") == 0) return clpa_bench_kvman(argc - 1, argv + 1);
#ifdef CLPA_BENCH_CLBLAST
  if (cmd && strcmp(cmd, "linear") == 0) return bench_linear(argc - 1, argv + 1);
#endif
  if (cmd && (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0)) {
    fputs(USAGE, stdout);
    return 0;
  }
  if (cmd && strcmp(cmd, "--version") == 0) {
    printf("clpa-bench (clpa %s)\n", clpa_version_string());
    return 0;
  }
  if (!cmd)
    fputs("clpa-bench: which command? " COMMANDS "\n", stderr);
  else if (cmd[0] == '-')
    fprintf(stderr, "clpa-bench: unknown option '%s' (options follow the command)\n", cmd);
  else
    fprintf(stderr, "clpa-bench: unknown command '%s' (" COMMANDS ")\n", cmd);
  fputs("Try 'clpa-bench --help'.\n", stderr);
  return 2;
}
