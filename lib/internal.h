/*
 * internal.h — what lib/ files share: the context, OpenCL error handling,
 * the program cache. Not installed.
 */
#ifndef CLPA_LIB_INTERNAL_H
#define CLPA_LIB_INTERNAL_H

#include "clpa.h"
#include "decode_planner.h"
#include "kernels.h"
#include "last_error.h"
#include "reserved.h"

typedef struct clpa_program_entry {
  struct clpa_program_entry *next;
  char *key; /* family + '\n' + full build options */
  cl_program program;
  /* Kernels made from it, kept so a launch costs no clCreateKernel. A
   * context is used by one thread at a time, so sharing them is safe. */
  cl_kernel kernels[4];
  char *kernel_names[4];
} clpa_program_entry;

/* Host words a one call's non-blocking work-list writes read until `written` (NULL: free). */
typedef struct clpa_staging {
  int32_t *host;
  size_t words;
  cl_event written;
} clpa_staging;
enum { CLPA_SCRATCH_SLOTS = 10, CLPA_STAGING_RING = 8 /* the ring's first size */ };

/* Prefill's part of a tuning-table row (tuning.c: each value names the
 * decision record that set it). */
typedef struct clpa_prefill_tuning {
  int32_t mma_warp_rows_from; /* mma: 32 query rows a warp where a call's work-groups walk at
                                 least this many key tiles on average (0: 16 rows always) */
  uint32_t mma_local_bytes;   /* mma with 32 rows a warp: local memory its kernels may declare
                                 (0: what the device reports) */
  int32_t mma_keys64_from;    /* ... and 64-key tiles (head 128, f16 or bf16 caches, two stages
                                 in mma_local_bytes) where they walk at least this many 64-key
                                 tiles on average (0: the table's keys always) */
  int32_t split_groups_per_cu; /* split_keys 0: a decode row's keys split into parts of a fair
                                  share of this many work-groups a compute unit (0: never) */
  int32_t split_min_keys;      /* ... and of this many keys at least */
  int32_t decode_rows_alone;   /* decode_rows_kernel 0: a call of leading decode rows alone runs
                                  them on decode's kernel (0: on prefill's) */
  int32_t decode_rows_from_keys; /* ... as do a mixed call's where one walks more keys than
                                    this (0: never) */
  int32_t mixed_rows;          /* mma, rows the table's 128: rows a work-group where a call's
                                  decode rows make half its work items or more (0: the table's) */
} clpa_prefill_tuning;

struct clpa_context {
  cl_platform_id platform;
  cl_device_id dev;
  cl_context cl;
  cl_command_queue queue;
  int owns_queue; /* clpa created the queue (and the context) */
  clpa_device_info info;
  clpa_lanes lanes;
  int lanes_forced; /* the config asked for this path: never fall back from it */
  int binary_cache;
  char *cache_dir;
  uint64_t cache_max_bytes; /* cap of the disk cache; program.c prunes to it */
  clpa_program_entry *programs;
  clpa_program_stats stats;
  cl_mem faults;       /* int32 fault word the kernels OR into; created on first use */
  cl_mem scratch[CLPA_SCRATCH_SLOTS]; /* grow-only temporary buffers (clpa_scratch) */
  size_t scratch_size[CLPA_SCRATCH_SLOTS];
  cl_mem part_counts;  /* decode_mma.cl's v2 counters, zero between calls; grow-only */
  size_t part_counts_size;
  clpa_staging *staging; /* one calls' work lists on their way (clpa_staging_take): a ring */
  int staging_count, staging_next; /* of staging_count arrays (0: none yet), the next to try */
  int subgroup_size;   /* lanes of a subgroup in our kernels, learnt on first build (0: not yet) */
  int merge_in_launch; /* decode v2's work-group kernels merge their partitions (context.c's pick_merge) */
  const char *merge_std; /* the -cl-std option those programs need, or "" */
  int decode_work_list;  /* CLPA_DECODE_WORK_LIST: 1 on, -1 off, 0 the tuning row's rule */
  clpa_tuning tuning;  /* the tuning table's entry for the device (tuning.c) */
  clpa_decode_tuning decode_tuning; /* its decode part, device facts included (tuning.c) */
  clpa_prefill_tuning prefill_tuning; /* its prefill facts (tuning.c) */
  char error[CLPA_ERROR_MAX];
};

/* A cache (cache.c): slices (one layer's key or value cache each) inside
 * arenas (the buffers clpa allocated, or the application's buffers). */
typedef struct clpa_cache_arena {
  cl_mem mem;           /* NULL for a host cache in plain memory */
  unsigned char *host;  /* host caches: the mapped or allocated memory */
  size_t size;          /* bytes */
  int first_slice, num_slices;
  int owned;            /* mem was created (and host mapped/allocated) by clpa */
} clpa_cache_arena;

typedef struct clpa_cache_slice {
  cl_mem mem;          /* what kernels get: a sub-buffer, or the app's buffer; NULL on host */
  int arena;           /* index into arenas */
  size_t offset;       /* bytes from the arena's start */
  unsigned char *host; /* host caches */
} clpa_cache_slice;

struct clpa_cache {
  clpa_context *ctx;
  clpa_cache_info info;
  size_t slice_stride;      /* bytes between consecutive slices of an arena */
  clpa_cache_arena *arenas; /* info.num_arenas */
  clpa_cache_slice *slices; /* 2 * num_layers: layer l's key at 2l, its value at 2l + 1 */
};

/* Layer `layer` of a device cache of this context: its key and value
 * buffers and its layout; refuses (naming the problem) a NULL cache, one
 * of another context, a host cache or a layer out of range. */
clpa_status clpa_cache_layer(clpa_context *ctx, const clpa_cache *cache, int32_t layer, cl_mem *k,
                             cl_mem *v, clpa_kv_layout *kv);

/* What decode and prefill share (attention.c): the caches, the query and
 * output, the options. The ops copy their params in, then resolve and
 * check through the functions below, in this order. */
typedef struct clpa_attn {
  cl_mem k, v;           /* the caches ... */
  clpa_kv_layout kv;     /* ... and their layout, checked */
  int32_t num_heads, max_blocks_per_seq, sliding_window;
  clpa_dtype q_dtype;
  size_t q_stride;       /* 0 until clpa_attn_check_buffers sets the default */
  float scale, k_scale, v_scale, soft_cap;
  cl_mem query, block_tables, out, lse, alibi_slopes, sinks, k_scale_buffer, v_scale_buffer;
  cl_uint num_wait_events;
  const cl_event *wait_events;
  clpa_page_table page_table;             /* and, for CSR, the table: */
  int32_t num_page_indices;
  cl_mem page_indptr, page_indices, last_page_len;
} clpa_attn;
/* Fills clpa_attn *a from a params struct p of decode or prefill (the
 * fields share their names). */
#define CLPA_ATTN_OF(a, p)                                                                   \
  do {                                                                                       \
    memset((a), 0, sizeof *(a));                                                             \
    (a)->num_heads = (p)->num_heads, (a)->max_blocks_per_seq = (p)->max_blocks_per_seq;     \
    (a)->sliding_window = (p)->sliding_window, (a)->q_dtype = (p)->q_dtype;                 \
    (a)->q_stride = (p)->q_stride, (a)->scale = (p)->scale, (a)->k_scale = (p)->k_scale;    \
    (a)->v_scale = (p)->v_scale, (a)->soft_cap = (p)->soft_cap, (a)->query = (p)->query;    \
    (a)->block_tables = (p)->block_tables, (a)->out = (p)->out, (a)->lse = (p)->lse;        \
    (a)->alibi_slopes = (p)->alibi_slopes, (a)->sinks = (p)->sinks;                         \
    (a)->k_scale_buffer = (p)->k_scale_buffer, (a)->v_scale_buffer = (p)->v_scale_buffer;   \
    (a)->num_wait_events = (p)->num_wait_events, (a)->wait_events = (p)->wait_events;       \
    (a)->page_table = (p)->page_table, (a)->num_page_indices = (p)->num_page_indices;       \
    (a)->page_indptr = (p)->page_indptr, (a)->page_indices = (p)->page_indices;             \
    (a)->last_page_len = (p)->last_page_len;                                                \
  } while (0)
/* The caches: from cache + layer, or the application's buffers with kv. */
clpa_status clpa_attn_caches(clpa_context *ctx, clpa_attn *a, const clpa_cache *cache,
                             int32_t layer, cl_mem key_cache, cl_mem value_cache,
                             const clpa_kv_layout *kv);
/* A plan's caches' shape: as clpa_attn_caches where any cache is given,
 * else kv alone (a plan reads no buffer). */
clpa_status clpa_attn_layout(clpa_context *ctx, clpa_attn *a, const clpa_cache *cache,
                             int32_t layer, cl_mem key_cache, cl_mem value_cache,
                             const clpa_kv_layout *kv);
/* Heads, head and block sizes, dtypes, options, wait list; the page
 * table's form (padded or CSR: one of them, whole). */
clpa_status clpa_attn_validate(clpa_context *ctx, const clpa_attn *a);
/* The softmax scale a kernel takes: the call's, or for 0 (the params'
 * default) 1/sqrt(head_size), as FlashInfer's sm_scale defaults. */
float clpa_softmax_scale(float scale, int32_t head_size);
/* Every buffer against what num_rows query rows (tokens) of num_seqs
 * sequences need; sets a->q_stride's default. */
clpa_status clpa_attn_check_buffers(clpa_context *ctx, clpa_attn *a, int32_t num_seqs,
                                    size_t num_rows);

/* Decode's own checks (variant, partition, heads per group, context
 * bound), after clpa_attn_validate; cascade decode runs them first too. */
clpa_status clpa_decode_validate(clpa_context *ctx, const clpa_decode_params *p,
                                 const clpa_kv_layout *kv);

/* Checks that buffer `name` holds at least `need` bytes; NULL is refused
 * unless optional. */
clpa_status clpa_check_buffer(clpa_context *ctx, cl_mem buf, const char *name, size_t need,
                              int optional);
/* Refuses a wait list before anything is enqueued: NULL with n > 0, set
 * with n == 0, a NULL entry, or an event of another OpenCL context. */
clpa_status clpa_check_wait_list(clpa_context *ctx, cl_uint n, const cl_event *evs);
/* The fault word, created and zeroed on first use. */
clpa_status clpa_faults_buffer(clpa_context *ctx, cl_mem *out);
/* At least n int32 counters that are zero between calls (the kernels
 * that count in them set them back to zero), created zeroed. */
clpa_status clpa_part_counts(clpa_context *ctx, size_t n, cl_mem *out);
/* Temporary buffer number slot (< CLPA_SCRATCH_SLOTS: 0-2 decode v2's partials and xattn's
 * statistics, 3 xattn's, 4-5 a prefill call's work list, 6 a decode call's, or the list a decode
 * run makes on the device) of at least `size` bytes, contents undefined. The queue is in order,
 * so a later call may reuse it. */
clpa_status clpa_scratch(clpa_context *ctx, int slot, size_t size, cl_mem *out);
/* A staging array of the ring for a one call's work list, of at least `words` words: the next
 * whose last write is done, or where every write is still queued a new one (the ring grows):
 * a call never waits for the device, whose queue may be held behind a user event that the
 * application sets only after its calls return, and creates no buffer
 * (docs/decisions/0024-prefill-work-list.md). */
clpa_status clpa_staging_take(clpa_context *ctx, size_t words, clpa_staging **out);
/* Writes `n` words of s->host from word `first` into m at its start, without blocking; `last`:
 * the final write from s, whose event frees s. The writes from s go in order of `first`: where
 * one fails after others (first > 0), s is freed by a marker behind them instead, as they may
 * still read it (no wait: the queue may be held); `what` names the write in the message. */
clpa_status clpa_staging_write(clpa_context *ctx, clpa_staging *s, cl_mem m, size_t first,
                               size_t n, int last, const char *what);
/* Waits for every staging write and frees the arrays (the context's destroy). */
void clpa_staging_free(clpa_context *ctx);

/* Name of an OpenCL error code ("CL_INVALID_VALUE"), or "CL_UNKNOWN_ERROR". */
const char *clpa_cl_error_name(cl_int err);
/* Maps an OpenCL error to the closest clpa_status. */
clpa_status clpa_status_from_cl(cl_int err);

/* Records an OpenCL failure in the context: "<what> failed: CL_X (n)". */
#define CLPA_CL_FAIL(ctx, err, what)                                                     \
  clpa_err_set((ctx) ? (ctx)->error : NULL, clpa_status_from_cl(err), __func__,           \
               "%s failed: %s (%d)", (what), clpa_cl_error_name(err), (int)(err))
#define CLPA_CL_CHECK(ctx, err, what)                              \
  do {                                                             \
    cl_int e_ = (err);                                             \
    if (e_ != CL_SUCCESS) return CLPA_CL_FAIL((ctx), e_, (what));  \
  } while (0)
/* Forgets a refusal a plan falls back from: the thread's message as the call began (clear,
 * clpa_api_begin's), the context's as it was (before, CLPA_ERROR_MAX bytes copied from
 * ctx->error before the refused try). */
void clpa_forget_refusal(clpa_context *ctx, const char *before);
/* Argument checks that record in the context. */
#define CLPA_CTX_CHECK(ctx, cond, status, ...) CLPA_CHECK((ctx)->error, cond, status, __VA_ARGS__)

/* Fills info for one device; lanes is the path clpa would pick. */
clpa_status clpa_device_query(cl_platform_id p, cl_device_id d, clpa_device_info *info);

/* Program cache (program.c). */
clpa_status clpa_program_get_internal(clpa_context *ctx, const char *family, const char *options,
                                      cl_program *out);
void clpa_programs_release(clpa_context *ctx);
/* A kernel by name from a family's program, retained for the caller, who
 * releases it (the cache keeps its own reference). */
clpa_status clpa_kernel_create(clpa_context *ctx, const char *family, const char *options,
                               const char *name, cl_kernel *out);
/* Build options with their words sorted and repeats dropped, so the same
 * defines in another order name the same program ("-D name" and "-I dir"
 * joined first, as "-Dname" and "-Idir"); caller frees (NULL: out of
 * memory). */
char *clpa_options_canonical(const char *options);

/* The tuning table's entry for a device (tuning.c): the public part and
 * decode's, whose partition and residency the public part repeats. */
void clpa_tuning_lookup(const clpa_device_info *in, clpa_tuning *out, clpa_decode_tuning *decode,
                        clpa_prefill_tuning *prefill);

/* Device capabilities (device_caps.c). */
/* Settles the context's lane-group path: on the subgroup path, learns the
 * subgroup size our kernels get (device_caps.c builds decode's default
 * kernel for that), and falls back to emulated lanes when it cannot be
 * learnt and the path was not forced. Called once by clpa_context_create. */
clpa_status clpa_lanes_settle(clpa_context *ctx);
/* Lanes per lane group the kernels use on this context. */
int clpa_lane_width(const clpa_context *ctx, int block_size);

/* 1: the tensor-core paths run natively (NVIDIA, compute capability 8.0 or
 * later); 0: on NVIDIA before 8.0 they cannot build; -1: elsewhere, where
 * a forced one runs emulated. */
int clpa_mma_native(const clpa_context *ctx);
/* A forced tensor-core path: CLPA_OK, or CLPA_ERR_UNSUPPORTED on NVIDIA
 * before 8.0 (the message names the device). */
clpa_status clpa_mma_check(clpa_context *ctx);
/* What the planners know of the context's device (host/decode_planner.h). */
void clpa_device_facts_of(const clpa_context *ctx, clpa_device_facts *out);

/* The launch path (launch.c). */
/* A kernel family's kernel `name`, built for spec (the family's spec
 * struct) on first use, retained for the caller, who releases it. */
clpa_status clpa_family_kernel(clpa_context *ctx, const clpa_family *f, const void *spec,
                               const char *name, cl_kernel *out);
/* One kernel argument: a value of `size` bytes, or local memory of `size`
 * bytes when value is NULL. */
typedef struct clpa_arg {
  size_t size;
  const void *value;
} clpa_arg;
#define CLPA_ARG(v) {sizeof(v), &(v)}
#define CLPA_ARG_LOCAL(bytes) {(bytes), NULL}
/* A kernel's parameter as the host sets it: its name and the bytes of its
 * value (0: local memory, a size and no value). A kernel whose parameters
 * are a list in cl/ (decode_args.h, prefill_args.h: ARG(kind, type, name)
 * entries, the same list the kernel's parameters are written from) gets
 * its table and its positions from that list:
 *   static const clpa_param params[] = {DECODE_ARG_LIST(CLPA_PARAM_OF, )};
 *   #define DECODE_SLOT(kind, type, name) DECODE_ARG_##name,
 *   enum { DECODE_ARG_LIST(DECODE_SLOT, ) DECODE_NUM_ARGS };
 * and fills args[] by name with designated initializers
 * ([DECODE_ARG_q] = CLPA_ARG(...)); clpa_enqueue_listed checks them. */
typedef struct clpa_param {
  const char *name;
  size_t size;
} clpa_param;
#define CLPA_PARAM_SIZE_GLOBAL(t) sizeof(cl_mem)
#define CLPA_PARAM_SIZE_GLOBAL_CONST(t) sizeof(cl_mem)
#define CLPA_PARAM_SIZE_GLOBAL_VOLATILE(t) sizeof(cl_mem)
#define CLPA_PARAM_SIZE_LOCAL(t) 0
#define CLPA_PARAM_SIZE_VALUE(t) sizeof(cl_##t)
#define CLPA_PARAM_OF(kind, type, name) {#name, CLPA_PARAM_SIZE_##kind(type)},
/* Where and after what a kernel runs; local[0] == 0 lets the driver pick. */
typedef struct clpa_ndrange {
  cl_uint dims;
  size_t global[3], local[3];
  cl_uint num_wait_events;
  const cl_event *wait_events;
  cl_event *event;
} clpa_ndrange;
/* Sets args[0 .. num_args) in order and enqueues k; `name` goes into the
 * message of a failure. Does not release k. */
clpa_status clpa_enqueue(clpa_context *ctx, cl_kernel k, const char *name, const clpa_arg *args,
                         size_t num_args, const clpa_ndrange *r);
/* clpa_enqueue for a kernel whose num_args parameters are `params` (from
 * its list in cl/), after checking that args[] sets each one: a value of
 * the parameter's size, or local memory of some size. A slot left unset,
 * or set with a value of another size, fails with the parameter's name
 * before anything is enqueued (CLPA_ERR_INVALID_ARG: a bug in clpa). */
clpa_status clpa_enqueue_listed(clpa_context *ctx, cl_kernel k, const char *name,
                                const clpa_param *params, const clpa_arg *args, size_t num_args,
                                const clpa_ndrange *r);
#define CLPA_NARGS(a) (sizeof(a) / sizeof *(a))

#endif
