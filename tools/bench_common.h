/* bench_common.h — what clpa-bench's subcommands share (public API only). */
#ifndef CLPA_BENCH_COMMON_H
#define CLPA_BENCH_COMMON_H

#include <stdint.h>

#include "clpa.h"
#include "tool_cli.h"

/* A command's failure: ends the progress line, prints "clpa-bench CMD: " and the message on
 * stderr, and jumps to the caller's `done` label (its cleanup). */
#define BENCH_FAIL(cmd, ...)                   \
  do {                                         \
    cli_progress_end();                        \
    fprintf(stderr, "clpa-bench " cmd ": ");   \
    fprintf(stderr, __VA_ARGS__);              \
    fputc('\n', stderr);                       \
    goto done;                                 \
  } while (0)

typedef struct bench_env {
  clpa_context *ctx; /* made with profiling on: the cold timing reads events */
  clpa_device_info info;
  /* The cold-L2 flush, made on first use (bench_time_cold). */
  cl_program flush_prog;
  cl_kernel flush_kernel;
  cl_mem flush_buf, flush_sink;
  size_t flush_bytes;
} bench_env;

/* The default shapes of prefill, xattn and sweep come in two sets: the
 * GPU's, and the CPU's, small enough that a default run ends within a
 * minute on a 2-core machine (PoCL). --shapes picks one; auto takes the
 * CPU's when the selected device is a CPU. */
typedef enum bench_shapes {
  BENCH_SHAPES_AUTO,
  BENCH_SHAPES_GPU,
  BENCH_SHAPES_CPU
} bench_shapes;

/* "auto", "gpu" or "cpu". */
const char *bench_shapes_name(bench_shapes s);
/* cli_opt's parse of a bench_shapes. */
const char *bench_parse_shapes(const char *text, void *value);
/* asked, or for auto the selected device's set (CLPA_DEVICE, else the
 * default rule): CPU for a CPU, GPU for any other device, and also when
 * no device can be listed (bench_open then says why). Lists the devices
 * and opens none. */
bench_shapes bench_shapes_pick(bench_shapes asked);

/* Opens a context on the selected device (CLPA_DEVICE); prints why not. */
int bench_open(bench_env *env);
void bench_close(bench_env *env);
uint64_t bench_rand(void);
/* bench_rand's state: saved before a measurement and restored, another
 * measurement draws the same lengths, tables and data. */
uint64_t bench_rand_state(void);
void bench_rand_restore(uint64_t state);
/* A device buffer with a copy of host (or uninitialised when host is NULL).
 * quiet: say nothing when it fails (the caller skips the shape). */
cl_mem bench_buffer(bench_env *env, const void *host, size_t bytes);
cl_mem bench_buffer_quiet(bench_env *env, const void *host, size_t bytes);
/* A cache of n elements of dtype holding random finite values of moderate
 * size; past 16 MiB the same random 16 MiB repeat (large caches fill fast).
 * NULL when the device cannot hold it (quietly). */
cl_mem bench_random_cache(bench_env *env, clpa_dtype dtype, size_t n);

/* How calls are timed.
 *   hot:  back to back (bench_time), caches warm from the previous call;
 *   cold: before every timed call a flush kernel reads flush_bytes (256
 *         MiB, or half the largest allocation on small devices), and the
 *         call's time runs from the flush's end to the end of the call's
 *         last kernel, from profiling events; the median of `repeats`.
 * The default is cold on a GPU (whose L2 would hold small shapes between
 * back-to-back calls and flatter them) and hot elsewhere. */
typedef struct bench_timing {
  int cold;
  int repeats; /* cold: timed calls (the median is reported) */
} bench_timing;

/* Reads --cold/--hot (at most one set) against the device's default. */
void bench_timing_pick(const bench_env *env, int cold, int hot, int32_t repeats, bench_timing *t);
/* "cold" or "hot". */
const char *bench_mode_name(const bench_timing *t);

/* One call of the operation being timed; returns a clpa_status. */
typedef clpa_status (*bench_fn)(clpa_context *ctx, const void *arg);
/* Median seconds per call over 7 batches of back-to-back calls, after two
 * warm-up calls (the first may build kernels). `what` names the operation
 * on the progress line. Returns 0, or 1 after printing the error. */
int bench_time(bench_env *env, const char *what, bench_fn fn, const void *arg, double *per_call);
/* One call that hands back, through event (NULL: none wanted), an event
 * that completes with its last kernel; returns a clpa_status. */
typedef clpa_status (*bench_event_fn)(clpa_context *ctx, const void *arg, cl_event *event);
/* The cold timing (see bench_timing): one untimed flush and call, then
 * t->repeats flushed calls; *per_call gets the median seconds. Returns 0,
 * or 1 after printing the error. */
int bench_time_cold(bench_env *env, const char *what, bench_event_fn fn, const void *arg,
                    int repeats, double *per_call);
/* bench_time or bench_time_cold, as t says. */
int bench_measure(bench_env *env, const char *what, bench_event_fn fn, const void *arg,
                  const bench_timing *t, double *per_call);
/* A 1-D kernel whose arguments are set, over `global` work-items in
 * work-groups of `local` (0: the driver's): bench_kernel_once enqueues it
 * once, as bench_time's fn. */
typedef struct bench_kernel_arg {
  cl_kernel k;
  size_t global, local;
} bench_kernel_arg;
clpa_status bench_kernel_once(clpa_context *ctx, const void *arg);
/* The device's copy bandwidth in GB/s (bytes read + written): the better of
 * clEnqueueCopyBuffer and a float4 copy kernel over `bytes`, timed as t
 * says. <= 0 on error. */
double bench_copy_gbps(bench_env *env, size_t bytes, const bench_timing *t);

/* Microseconds one read of the first `bytes` of buf takes (the cold-L2 flush
 * kernel's loop over it, the best of three grids), timed as t says: the
 * least a kernel that reads those bytes once can take, the floor of one
 * linear layer's call. <= 0 on failure. */
double bench_read_us(bench_env *env, cl_mem buf, size_t bytes, const bench_timing *t);

/* Microseconds a kernel of one work-group (a 4 KiB copy) takes back to
 * back with itself on the in-order queue: what each dependent launch of
 * a chain of small kernels costs at least. <= 0 on failure. */
double bench_launch_us(bench_env *env);

/* The device's f32 FMA peak in TFLOP/s, measured with 8 independent
 * chains of float16 mads per work-item (clpa_smoke_fma); <= 0 on failure. */
double bench_fma_tflops(bench_env *env);

/* ----------------------------------------------------------------------
 * Decode, one configuration (bench_decode.c): what `decode` prints once
 * and `sweep` over a grid.
 * -------------------------------------------------------------------- */
typedef enum bench_lengths {
  BENCH_LENGTHS_UNIFORM,    /* every sequence at the context */
  BENCH_LENGTHS_LOGUNIFORM, /* log-uniform in [16, context] */
  BENCH_LENGTHS_ONE_LONG    /* sequence 0 at the context, the others at context/64 (>= 16) */
} bench_lengths;

const char *bench_lengths_name(bench_lengths l);
/* n contexts as `kind` says, up to `context` (one-long: the others at short_len, 0: context / 64,
 * at least 16; log-uniform from 16), by bench_rand. */
void bench_make_lengths(bench_lengths kind, int32_t context, int32_t short_len, int n,
                        int32_t *lens);
/* v[0 .. n) = 0 .. n - 1 shuffled (a cache's blocks in random order), by bench_rand. */
void bench_shuffled(int32_t *v, int32_t n);
/* n random finite values in [-1, 1], by bench_rand. */
void bench_random_values(float *v, size_t n);
/* cli_opt parse functions: a bench_lengths, a clpa_dtype. */
const char *bench_parse_lengths(const char *text, void *value);
const char *bench_parse_dtype(const char *text, void *value);
/* cli_opt's parse of a clpa_kv_layout_kind by its name (split_key, hnd, nhd). */
const char *bench_parse_layout(const char *text, void *value);
/* A decode path's name (auto, lanes, mma, rows); cli_opt's parse of one. */
const char *bench_path_name(clpa_decode_path p);
const char *bench_parse_path(const char *text, void *value);

typedef struct bench_decode_shape {
  int32_t heads, kv_heads, head_size, block_size, batch, context, partition, hpg;
  clpa_dtype dtype;
  clpa_decode_variant variant;
  clpa_decode_path path;
  bench_lengths lengths;
  int paged_probe; /* also time the paged-read probe (bench_decode_figures.paged_gbps) */
  int32_t short_len;   /* one-long: the others' length (0: context / 64, at least 16) */
  int no_host_lengths; /* plan without host_context_lens (an engine with device lengths only) */
  int plan_run;        /* time clpa_run on a plan made once, and the host's cost per call */
  clpa_kv_layout_kind layout; /* the caches' layout (0: split-key) */
} bench_decode_shape;

typedef struct bench_decode_figures {
  double per_call;    /* seconds */
  double kv_bytes;    /* K and V bytes read per call, from the actual lengths */
  long long tokens;   /* the lengths' sum */
  size_t cache_bytes; /* one cache's bytes (the blocks the lengths use): the copy's size */
  /* What the library chose (clpa_decode_choice). */
  clpa_decode_path path;
  clpa_decode_variant variant;
  int32_t partition, hpg;
  double paged_gbps; /* the paged-read probe's K/V GB/s (shape.paged_probe), 0 if not run */
  /* plan_run: host seconds a plan takes to make, a clpa_run and a
   * clpa_decode to enqueue (means over back-to-back calls) */
  double plan_host, run_host, call_host;
  int64_t work_pairs; /* the listed partitions the calls run (clpa_plan_info), 0: none */
  int32_t list_entries; /* the entries of the list the device makes (clpa_plan_info), 0: none */
} bench_decode_figures;

#define BENCH_MEASURED 0
#define BENCH_FAILED 1  /* why says what; empty when it was printed already */
#define BENCH_REFUSED 2 /* the library refuses the shape; why says why */
#define BENCH_TOO_BIG 3 /* the device (or the host) cannot hold it; why says what */
/* Makes random inputs for s (blocks shuffled), makes a first call (kernel
 * builds; refusals), times decode as t says and checks the fault flags.
 * Returns one of BENCH_*; why (why_size bytes) gets the reason. */
int bench_decode_measure(bench_env *env, const bench_decode_shape *s, const bench_timing *t,
                         bench_decode_figures *f, char *why, size_t why_size);

int bench_decode(int argc, char **argv);
int bench_sweep(int argc, char **argv);
int bench_prefill(int argc, char **argv);
int bench_mixed(int argc, char **argv);
int bench_xattn(int argc, char **argv);
int bench_linear(int argc, char **argv); /* with CLBlast (clpa-demo's linear layers) */
int clpa_bench_radix(int argc, char **argv);
int clpa_bench_kvman(int argc, char **argv);

/* Seconds on the monotonic clock. */
double bench_now(void);

/* The synthetic serving trace of `clpa-bench radix` and `clpa-bench kvman`
 * (deterministic for a seed; host only). Every prompt starts with the same
 * 512-token system prompt, then either
 *   - few-shot (half): one of 24 example sets (1,024 tokens) and a fresh
 *     question (400-600 tokens), or
 *   - chat (half): the next turn of one of `chats` conversations: the whole
 *     history (earlier prompts and answers) plus a new user message
 *     (100-250 tokens); a conversation that could pass 3k tokens with its
 *     answer starts over. A conversation has one turn in flight at a time;
 *     when its conversation is busy a request is few-shot instead. */
#define TRACE_SYS_LEN 512
#define TRACE_FEWSHOT_SETS 24
#define TRACE_FEWSHOT_LEN 1024
#define TRACE_CHAT_MAX 3072
#define TRACE_MAX_PROMPT (TRACE_CHAT_MAX + 512) /* room for any prompt */

typedef struct bench_trace bench_trace;
/* A trace whose answers are at most max_answer tokens long (the chat
 * history must leave room for them); NULL when out of memory. */
bench_trace *bench_trace_create(uint64_t seed, int chats, int32_t max_answer);
void bench_trace_destroy(bench_trace *t);
/* Writes the next prompt to tokens[0..TRACE_MAX_PROMPT) and returns its
 * length; *chat receives its conversation, or -1 for few-shot. */
int32_t bench_trace_next(bench_trace *t, int32_t *tokens, int *chat);
/* A random token id, from the trace's generator. */
int32_t bench_trace_token(bench_trace *t);
/* A uniform integer in [lo, hi], from the trace's generator. */
int32_t bench_trace_between(bench_trace *t, int32_t lo, int32_t hi);
/* Ends the turn of conversation chat (no-op for -1): with answered set,
 * tokens[0..n) (prompt and answer) become its history; otherwise (the
 * request was refused) the history stays as it was. */
void bench_trace_end(bench_trace *t, int chat, const int32_t *tokens, int32_t n, int answered);

#endif
