/*
 * report.c — see report.h. Latencies are wall clock from a request's
 * arrival: time to first token (TTFT) and time per output token after it
 * (TPOT). Prefill and decode throughput split each step's time between
 * its prefill and decode tokens in proportion to their counts.
 */
#include "report.h"

#include <stdlib.h>
#include <string.h>

#include "../tool_cli.h"

void demo_report_progress(const demo_engine *e, void *user) {
  (void)user;
  if (!cli_progress_due()) return;
  int32_t done, running, waiting, used, total;
  demo_engine_live(e, &done, &running, &waiting, &used, &total);
  const demo_run_stats *st = demo_engine_stats(e);
  int32_t count;
  demo_engine_results(e, &count);
  const double secs = st->decode_s + st->prefill_s;
  cli_progress("clpa-demo: %d requests done, %d running, %d waiting | %.0f tokens/s | cache hit"
               " %.0f%% | blocks %d/%d",
               done, running, waiting,
               secs > 0 ? (double)(st->computed_tokens + st->generated_tokens) / secs : 0.0,
               st->prompt_tokens ? 100.0 * (double)st->cached_tokens / (double)st->prompt_tokens : 0.0,
               used, total);
}

static double avg(int64_t sum, int64_t n) { return n > 0 ? (double)sum / (double)n : 0; }

void demo_report_summary(FILE *out, const demo_engine *e, const demo_report_info *in, int json) {
  const demo_run_stats *st = demo_engine_stats(e);
  int32_t count;
  const demo_result *res = demo_engine_results(e, &count);
  double *ttft = malloc(sizeof(double) * (size_t)(count + 1));
  double *tpot = malloc(sizeof(double) * (size_t)(count + 1));
  int32_t nt = 0, np = 0;
  for (int32_t i = 0; ttft && tpot && i < count; i++) {
    const demo_result *r = &res[i];
    if (!r->req || r->refused || r->num_generated == 0) continue;
    ttft[nt++] = r->first_token_s - r->arrived_s;
    if (r->num_generated > 1)
      tpot[np++] = (r->done_s - r->first_token_s) / (double)(r->num_generated - 1);
  }
  /* p50 of an even count: the mean of the middle two (cli_quantile) */
  const double ttft50 = cli_quantile(ttft, (size_t)nt, 0.5);
  const double ttft99 = cli_quantile(ttft, (size_t)nt, 0.99);
  const double tpot50 = cli_quantile(tpot, (size_t)np, 0.5);
  const double tpot99 = cli_quantile(tpot, (size_t)np, 0.99);
  free(ttft), free(tpot);
  const double tps = st->seconds > 0 ? (double)(st->computed_tokens + st->generated_tokens) / st->seconds : 0;
  const double prefill_tps = st->prefill_s > 0 ? (double)st->prefill_tokens_in_prefill_steps / st->prefill_s : 0;
  /* the decode rows' tokens: a request's first token comes from its last prefill chunk */
  const double decode_tps = st->decode_s > 0 ? (double)st->decode_tokens / st->decode_s : 0;
  const double dev = st->device.attention_s + st->device.gemm_s + st->device.other_s;
  /* The step floor: a decode step reads every weight and its sequences' K/V once. */
  const double kv_step = st->decode_steps ? (double)st->decode_kv_tokens / st->decode_steps * in->kv_bytes_per_token : 0;
  const double floor_s = in->copy_gbps > 0 ? (in->weight_bytes + kv_step) / (in->copy_gbps * 1e9) : 0;
  if (json) {
    cli_json j;
    cli_json_begin(&j, out);
    cli_json_str(&j, "op", "demo");
    cli_json_str(&j, "device", in->device);
    cli_json_str(&j, "lanes", in->lanes);
    cli_json_str(&j, "model", in->model);
    cli_json_str(&j, "schedule", in->schedule);
    cli_json_bool(&j, "prefix_cache", in->prefix_cache);
    cli_json_str(&j, "kv_dtype", in->kv_dtype);
    cli_json_str(&j, "weight_dtype", in->weight_dtype);
    cli_json_int(&j, "num_blocks", in->num_blocks);
    cli_json_int(&j, "block_size", in->block_size);
    cli_json_float(&j, "temperature", in->temperature);
    if (in->temperature > 0) {
      cli_json_int(&j, "top_k", in->top_k);
      cli_json_float(&j, "top_p", in->top_p);
      cli_json_u64(&j, "seed", in->seed);
    }
    cli_json_int(&j, "requests", st->requests);
    cli_json_int(&j, "refused", st->refused);
    cli_json_int(&j, "steps", st->steps);
    cli_json_int(&j, "prompt_tokens", st->prompt_tokens);
    cli_json_int(&j, "cached_tokens", st->cached_tokens);
    cli_json_int(&j, "computed_tokens", st->computed_tokens);
    cli_json_int(&j, "generated_tokens", st->generated_tokens);
    cli_json_num(&j, "hit_rate", st->hit_rate, 4);
    cli_json_num(&j, "seconds", st->seconds, 3);
    cli_json_num(&j, "tokens_per_s", tps, 1);
    cli_json_num(&j, "prefill_tokens_per_s", prefill_tps, 1);
    cli_json_num(&j, "decode_tokens_per_s", decode_tps, 1);
    cli_json_num(&j, "ttft_p50_ms", ttft50 * 1e3, 2);
    cli_json_num(&j, "ttft_p99_ms", ttft99 * 1e3, 2);
    cli_json_num(&j, "tpot_p50_ms", tpot50 * 1e3, 2);
    cli_json_num(&j, "tpot_p99_ms", tpot99 * 1e3, 2);
    cli_json_int(&j, "peak_blocks", st->peak_blocks);
    cli_json_int(&j, "evicted_blocks", st->evicted_blocks);
    cli_json_int(&j, "preemptions", st->preemptions);
    cli_json_bool(&j, "time_split", dev > 0);
    cli_json_num(&j, "attention_s", st->device.attention_s, 4);
    cli_json_num(&j, "gemm_s", st->device.gemm_s, 4);
    cli_json_num(&j, "other_s", st->device.other_s, 4);
    /* A decode-only step on average: its wall clock, and the device's busy time in it. */
    cli_json_num(&j, "decode_step_ms", st->decode_steps ? st->decode_step_s / st->decode_steps * 1e3 : 0, 3);
    cli_json_num(&j, "decode_step_device_ms",
                 st->decode_steps ? st->decode_step_device_s / st->decode_steps * 1e3 : 0, 3);
    cli_json_int(&j, "programs_built", (long long)in->programs_built);
    cli_json_int(&j, "programs_loaded", (long long)in->programs_loaded);
    cli_json_num(&j, "build_s", in->build_s, 3);
    cli_json_num(&j, "warmup_s", in->warmup_s, 3);
    cli_json_int(&j, "warmup_programs_built", (long long)in->warmup_built);
    cli_json_int(&j, "attention_calls", in->attention_calls);
    /* ops enqueued a step on average (model.h's demo_times.ops), and a layer's of them */
    cli_json_num(&j, "ops_decode_step", avg(st->decode_ops, st->decode_steps), 1);
    cli_json_num(&j, "ops_decode_layer", avg(st->decode_layer_ops, (int64_t)st->decode_steps * in->layers), 2);
    cli_json_num(&j, "ops_mixed_step", avg(st->mixed_ops, st->mixed_steps), 1);
    cli_json_num(&j, "ops_mixed_layer", avg(st->mixed_layer_ops, (int64_t)st->mixed_steps * in->layers), 2);
    cli_json_str(&j, "linear", in->linear ? in->linear : "");
    cli_json_num(&j, "copy_gbps", in->copy_gbps, 1);
    cli_json_num(&j, "step_floor_ms", floor_s * 1e3, 6); /* a tiny model on a GPU: ~1 us */
    cli_json_num(&j, "tpot_floor_ratio", floor_s > 0 ? tpot50 / floor_s : 0, 2);
    if (in->check) {
      cli_json_bool(&j, "check_ok", in->check_ok);
      cli_json_str(&j, "check", in->check);
    }
    cli_json_end(&j);
    return;
  }
  fprintf(out, "clpa-demo on %s (%s lanes): model %s, %s weights, %s KV cache of %d blocks x %d\n",
          in->device, in->lanes, in->model, in->weight_dtype, in->kv_dtype, in->num_blocks,
          in->block_size);
  fprintf(out, "schedule %s, prefix cache %s, ", in->schedule, in->prefix_cache ? "on" : "off");
  if (in->temperature > 0)
    fprintf(out, "sampling at temperature %g, top-k %d, top-p %g, seed %llu\n\n",
            (double)in->temperature, (int)in->top_k, (double)in->top_p,
            (unsigned long long)in->seed);
  else
    fprintf(out, "greedy\n\n");
  fprintf(out, "  requests              %8d  (%d refused: too long for the model or cache)\n",
          st->requests, st->refused);
  fprintf(out, "  prompt tokens         %8lld\n", (long long)st->prompt_tokens);
  fprintf(out, "  served from cache     %8lld  (hit rate %.1f%%)\n", (long long)st->cached_tokens,
          100.0 * st->hit_rate);
  fprintf(out, "  computed tokens       %8lld  (prompt tokens run through the model, recomputation"
               " included)\n", (long long)st->computed_tokens);
  fprintf(out, "  generated tokens      %8lld\n", (long long)st->generated_tokens);
  fprintf(out, "  wall time             %8.2f s over %d steps: %.0f tokens/s\n", st->seconds,
          st->steps, tps);
  fprintf(out, "  prefill throughput    %8.0f tokens/s\n", prefill_tps);
  fprintf(out, "  decode throughput     %8.0f tokens/s\n", decode_tps);
  fprintf(out, "  time to first token   p50 %8.1f ms   p99 %8.1f ms\n", ttft50 * 1e3, ttft99 * 1e3);
  fprintf(out, "  time per output token p50 %8.1f ms   p99 %8.1f ms\n", tpot50 * 1e3, tpot99 * 1e3);
  fprintf(out, "  peak blocks           %8d of %d\n", st->peak_blocks, in->num_blocks);
  fprintf(out, "  evicted blocks        %8lld\n", (long long)st->evicted_blocks);
  fprintf(out, "  preemptions           %8lld\n", (long long)st->preemptions);
  if (dev <= 0)
    fprintf(out, "  device time           not split (--time-split splits it, by profiling events)\n");
  else
    fprintf(out, "  device time           attention %.1f%%, GEMM %.1f%%, other %.1f%% (%.2f s,"
                 " profiling events)\n",
            100 * st->device.attention_s / dev, 100 * st->device.gemm_s / dev,
            100 * st->device.other_s / dev, dev);
  if (st->decode_steps)
    fprintf(out, "  decode-only step      %8.2f ms on average over %d steps\n",
            st->decode_step_s / st->decode_steps * 1e3, st->decode_steps);
  if (st->decode_steps && st->decode_step_device_s > 0)
    fprintf(out, "                        %8.2f ms of it the device's (profiling events)\n",
            st->decode_step_device_s / st->decode_steps * 1e3);
  if (st->decode_steps || st->mixed_steps)
    fprintf(out, "  ops a step            %8.1f decode-only (%.2f a layer), %.1f with prefill (%.2f a"
                 " layer), on average\n",
            avg(st->decode_ops, st->decode_steps),
            avg(st->decode_layer_ops, (int64_t)st->decode_steps * in->layers),
            avg(st->mixed_ops, st->mixed_steps),
            avg(st->mixed_layer_ops, (int64_t)st->mixed_steps * in->layers));
  if (in->linear) fprintf(out, "  linear layers         %s\n", in->linear);
  fprintf(out, "  attention             %s\n",
          in->attention_calls == 1 ? "one clpa_prefill call a layer"
                                   : "a decode call and a prefill call a layer (--two-attention-calls)");
  if (floor_s > 0)
    fprintf(out, "  step floor            %8.2f ms  (%.3g MB of weights + %.3g MB of K/V a decode step at"
                 " %.0f GB/s, the copy bandwidth of this run); TPOT p50 is %.1fx it\n",
            floor_s * 1e3, in->weight_bytes / 1e6, kv_step / 1e6, in->copy_gbps, tpot50 / floor_s);
  if (in->warmup_s >= 0)
    fprintf(out, "  warm-up               %8.2f s  (the workload served once untimed first, %u programs"
                 " built: the times above are a warm run's)\n",
            in->warmup_s, in->warmup_built);
  if (in->programs_built)
    fprintf(out, "  kernel builds         %8.2f s  (%u programs built on first use, in the times above;"
                 " the next run loads them)\n",
            in->build_s, in->programs_built);
  if (in->check) fprintf(out, "\ncheck: %s\n", in->check);
}

char *demo_report_text(const demo_tokenizer *tok, const int32_t *ids, int32_t n, size_t *len) {
  size_t total = 0;
  for (int32_t i = 0; i < n; i++) {
    const char *b;
    size_t bl;
    if (demo_tokenizer_piece(tok, ids[i], &b, &bl) == CLPA_OK) total += bl;
  }
  char *text = malloc(total + 1);
  if (!text) return NULL;
  size_t at = 0;
  for (int32_t i = 0; i < n; i++) {
    const char *b;
    size_t bl;
    if (demo_tokenizer_piece(tok, ids[i], &b, &bl) != CLPA_OK) continue;
    memcpy(text + at, b, bl);
    at += bl;
  }
  text[at] = '\0';
  *len = at;
  return text;
}

/* Why request r was refused, in a few words. */
static void refusal(const demo_request *r, demo_finish f, const demo_answers_info *in, char *why,
                    size_t cap) {
  const int64_t blocks = demo_request_kv_blocks(r, in->block_size);
  if (f == DEMO_FINISH_CONTEXT)
    snprintf(why, cap, "%d prompt tokens + max_tokens %d is past the model's context of %d tokens",
             (int)r->prompt_len, (int)r->max_new_tokens, (int)in->context);
  else if (blocks > in->num_blocks)
    snprintf(why, cap, "it needs %lld blocks of %d tokens, the KV cache has %d (--blocks)",
             (long long)blocks, (int)in->block_size, (int)in->num_blocks);
  else
    snprintf(why, cap, "the KV cache of %d blocks could not admit it", (int)in->num_blocks);
}

static const char *finish_name(demo_finish f) {
  return f == DEMO_FINISH_STOP ? "stop" : f == DEMO_FINISH_LENGTH ? "length" : "refused";
}

int demo_report_answers(FILE *out, const demo_engine *e, const demo_answers_info *in, int json) {
  int32_t count;
  const demo_result *res = demo_engine_results(e, &count);
  for (int32_t i = 0; i < count; i++) {
    const demo_result *r = &res[i];
    if (!r->req) continue;
    char why[256] = "";
    if (r->refused) refusal(r->req, r->finish, in, why, sizeof why);
    size_t len = 0;
    char *text = demo_report_text(in->tok, r->generated, r->num_generated, &len);
    if (!text) return -1;
    if (json) {
      cli_json j;
      cli_json_begin(&j, out);
      cli_json_str(&j, "op", "answer");
      cli_json_int(&j, "index", i);
      if (in->lines) cli_json_int(&j, "line", in->lines[i]);
      cli_json_int(&j, "prompt_tokens", r->req->prompt_len);
      cli_json_int(&j, "generated_tokens", r->num_generated);
      cli_json_strn(&j, "text", text, len);
      cli_json_str(&j, "finish_reason", finish_name(r->finish));
      if (r->refused) cli_json_str(&j, "error", why);
      cli_json_end(&j);
    } else if (r->refused) {
      fprintf(out, "[refused: %s]\n", why);
    } else {
      for (size_t k = 0; k < len; k++) {
        const char c = text[k];
        if (c == '\\' || c == '\n' || c == '\r')
          fputc('\\', out), fputc(c == '\n' ? 'n' : c == '\r' ? 'r' : '\\', out);
        else
          fputc(c, out);
      }
      fputc('\n', out);
    }
    free(text);
  }
  fflush(out);
  return 0;
}
