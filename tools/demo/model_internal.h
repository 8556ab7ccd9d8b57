/*
 * model_internal.h — inside tools/demo only: the model object that model.c
 * builds and owns and model_step.c runs one engine step over, and the
 * helpers they share. Calls go one way:
 *
 *   model_step.c --> model.c           (the object: kernels, weights' forms)
 *        |             |
 *        +-------------+--> model_buffers.c  (the step's buffers, grown on demand)
 *                      +--> model_timing.c   (the step's profiling events)
 *
 * model.c calls the two below it only to release what they hold.
 */
#ifndef CLPA_DEMO_MODEL_INTERNAL_H
#define CLPA_DEMO_MODEL_INTERNAL_H

#include <stdio.h>
#include <time.h>

#include "kernels.h"
#include "linear.h"
#include "model_build.h"

/* The demo's own kernels (kernels.c), by index. */
enum { K_EMBED_F32, K_EMBED_F16, K_RMSNORM, K_RMSNORM_ROWS, K_ROPE, K_SILU_MUL, K_ARGMAX,
       K_RMSNORM_H, K_SILU_MUL_H, K_ROPE_CACHE, K_ARGMAX_PART, K_COUNT };
extern const char *const demo_kernel_names[K_COUNT]; /* model.c */
extern const char *const demo_matrix_names[DEMO_MAT_LM_HEAD + 1]; /* model.c: demo_matrix's */

/* The step's input regions (demo_model_inputs), in their order. */
enum { IN_LAST, IN_CTX, IN_TOKENS, IN_POS, IN_SLOTS, IN_BT_DEC, IN_BT_PRE, IN_COUNT };

typedef struct host_layer {
  float *attn_norm, *ffn_norm, *wqkv, *wo, *wgu, *wdown;
} host_layer;
typedef struct dev_layer {
  cl_mem attn_norm, ffn_norm, wqkv, wo, wgu, wdown;
  demo_wfmt form[DEMO_MAT_LM_HEAD]; /* of wqkv, wo, wgu, wdown: a block form where the source gave
                                      one (demo_model_set_blocks), else 0 (the weight dtype's) */
} dev_layer;

enum { TIME_ATTN, TIME_GEMM, TIME_OTHER };
typedef struct timed_event {
  cl_event start; /* a marker enqueued just before the op (none when tracing) */
  cl_event ev;    /* the op's (last) command */
  int kind;
  const char *name; /* for the trace: the kernel, matrix or clpa call */
  int32_t layer;    /* -1 outside the layers */
  double host_s;    /* when the host enqueued it, from the step's start */
} timed_event;

struct demo_model {
  clpa_context *ctx;
  cl_context clctx;
  cl_device_id dev;
  cl_command_queue queue;
  int queue_profiles; /* the queue takes profiling events */
  int timing;         /* demo_model_set_timing's choice */
  int profiling;      /* the steps take events: timing or a trace, where the queue profiles */
  FILE *trace;        /* demo_model_set_trace's file, or NULL */
  int64_t trace_step; /* steps traced so far */
  int32_t cur_layer;  /* the layer being enqueued, -1 outside (the trace's) */
  struct timespec step_t0; /* the step's start on the host clock */
  demo_config cfg;
  clpa_dtype wdtype;
  int32_t qkv_dim; /* (heads + 2 kv_heads) * head_size */

  cl_program prog;
  cl_kernel k[K_COUNT];
  int norm_wg; /* the RMSNorms' work-group (kernels.h's demo_norm_wg) */
  int gu_inter; /* wgu's rows interleaved by 8 (ffn a multiple of 8: model.c's interleave_gu) */
  int tiled;    /* f16 matrices not in blocks (and the embedding) held as linear.h's tiles */

  float *h_embed, *h_final_norm, *h_lm_head, *h_rope_factors;
  host_layer *hl;
  demo_layer_slots *slot_layers; /* the builder's view of hl */
  demo_host_weights hw;

  cl_mem d_embed, d_final_norm, d_lm_head, d_rope;
  demo_wfmt lm_form; /* d_lm_head's block form, or 0 (the weight dtype's) */
  dev_layer *dl;
  demo_linear *lin;          /* the linear layers' engines (linear.h) */
  demo_linear_engine engine; /* AUTO: the device's table; else forced (demo_model_set_linear) */
  int one_call;              /* attention as one prefill call a layer (demo_model_set_one_call) */
  int unfused;               /* each op its own launch, as before the fusions (demo_model_set_fused) */
  /* the last cache layout whose addresses demo_rope_cache's formula was
   * held to clpa_kv_key_index / clpa_kv_value_index (model_step.c), and
   * whether it matched */
  clpa_kv_layout fused_kv;
  int fused_kv_state; /* 0: none checked yet, 1: matched, -1: did not */

  /* per-step buffers, grown on demand */
  int32_t cap_t, cap_s;
  cl_mem x, xn, qkv, attn, gu, act, xl, logits, next;
  cl_mem part_v, part_i; /* the argmax's parts: [S][demo_argmax_parts(vocab)] */
  cl_mem xh, acth; /* xn and act as f16, for the linear layers that take them (linear.h) */
  /* The step's inputs from the host: sub-buffers of one buffer, written
   * by one command from one staging area of the same layout
   * (demo_model_inputs); h_pos, h_ctx and h_last point into the staging. */
  cl_mem tokens, positions, slots, ctx_lens, last_rows, bt_dec, bt_pre;
  int32_t *h_pos, *h_ctx, *h_last;
  cl_mem in_buf;
  unsigned char *h_in;
  size_t in_cap, in_align;         /* bytes of both; the sub-buffers' offset alignment */
  size_t in_off[IN_COUNT], in_len[IN_COUNT]; /* each region's place and sub-buffer's bytes */
  size_t in_want[IN_COUNT];        /* the step's bytes in each */
  size_t in_used;                  /* the step's bytes from the first to the last: the one write */

  timed_event *ev;
  int n_ev, cap_ev;
  int32_t ops; /* commands the step has enqueued so far (demo_times.ops) */
};

/* Releases *b (if any) and sets it to NULL. */
static inline void demo_release_mem(cl_mem *b) {
  if (*b) clReleaseMemObject(*b);
  *b = NULL;
}

/* model_buffers.c: grows the per-step buffers to T tokens and S
 * sequences (the previous steps' are idle: each step waits); releases
 * them and the staging. */
clpa_status demo_model_reserve(demo_model *m, int32_t T, int32_t S);
void demo_model_release_buffers(demo_model *m);
/* Lays the step's inputs out for T tokens, S sequences of which nd
 * decode ones, and mb block-table columns: last_rows, ctx_lens, tokens,
 * positions, slots, bt_dec, bt_pre, each at a multiple of the device's
 * sub-buffer alignment; sub-buffers made anew only when that changes. */
clpa_status demo_model_inputs(demo_model *m, int32_t T, int32_t S, int32_t nd, int32_t mb);
/* Region i's sub-buffer (IN_LAST ...): m->last_rows ... */
cl_mem *demo_model_input(demo_model *m, int i);

/* model_timing.c: where the next op's event goes (NULL when the queue does
 * not profile); the step's events summed by kind; their release (clear:
 * for the next step; free: with the model). */
cl_event *demo_model_event(demo_model *m, int kind, const char *name);
void demo_model_times(demo_model *m, demo_times *t);
/* Writes the step's ops to the trace file (demo_model_set_trace): after
 * the step's wait, before demo_model_events_clear. */
void demo_model_trace_step(demo_model *m, int32_t T, int32_t S, int32_t nd, double enqueue_s);
double demo_model_step_clock(const demo_model *m); /* seconds since step_t0 */
void demo_model_events_clear(demo_model *m);
void demo_model_events_free(demo_model *m);

#define TRY(expr)                          \
  do {                                     \
    if ((st = (expr)) != CLPA_OK) goto out; \
  } while (0)

#endif
