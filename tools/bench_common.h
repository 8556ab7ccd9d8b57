/* bench_common.h — what clpa-bench's subcommands share (public API only). */
#ifndef CLPA_BENCH_COMMON_H
#define CLPA_BENCH_COMMON_H

#include <stdint.h>

#include "clpa.h"
#include "tool_cli.h"

typedef struct bench_env {
  clpa_context *ctx;
  clpa_device_info info;
} bench_env;

/* Opens a context on the selected device (CLPA_DEVICE); prints why not. */
int bench_open(bench_env *env);
void bench_close(bench_env *env);
uint64_t bench_rand(void);
/* A device buffer with a copy of host (or uninitialised when host is NULL). */
cl_mem bench_buffer(bench_env *env, const void *host, size_t bytes);
/* A cache of n elements of dtype holding random finite values of moderate size. */
cl_mem bench_random_cache(bench_env *env, clpa_dtype dtype, size_t n);

/* One call of the operation being timed; returns a clpa_status. */
typedef clpa_status (*bench_fn)(clpa_context *ctx, const void *arg);
/* Median seconds per call over 7 batches of back-to-back calls, after two
 * warm-up calls (the first may build kernels). `what` names the operation
 * on the progress line. Returns 0, or 1 after printing the error. */
int bench_time(bench_env *env, const char *what, bench_fn fn, const void *arg, double *per_call);
/* The device's copy bandwidth in GB/s (bytes read + written): the better of
 * clEnqueueCopyBuffer and a float4 copy kernel over `bytes`. <= 0 on error. */
double bench_copy_gbps(bench_env *env, size_t bytes);

/* The device's f32 FMA peak in TFLOP/s, measured with 8 independent
 * chains of float16 mads per work-item (clpa_smoke_fma); <= 0 on failure. */
double bench_fma_tflops(bench_env *env);

int bench_decode(int argc, char **argv);
int bench_prefill(int argc, char **argv);
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
