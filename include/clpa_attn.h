/*
 * clpa_attn.h — the attention ops: decode (one query token a sequence),
 * prefill (many, over a cached prefix), merge_states, cascade decode, and
 * the plans an engine makes once a step and runs once a layer. They run
 * on a context (clpa_runtime.h) over paged caches (clpa_layout.h,
 * clpa_cache.h). clpa.h includes it; it may also be included alone.
 *
 * Sections:
 *   4. Decode: paged attention, one query token per sequence
 *   5. Prefill: many new tokens per sequence over a cached prefix
 *   6. merge_states: combining attention over disjoint key sets
 *   7. Cascade decode: a shared prefix attended once per group
 *   8. Plans: plan once per step, run per layer (what engines call)
 */
#ifndef CLPA_ATTN_H
#define CLPA_ATTN_H

#include "clpa_base.h"
#include "clpa_cache.h"
#include "clpa_layout.h"
#include "clpa_runtime.h"
#include "clpa_xattn.h"

#ifdef __cplusplus
extern "C" {
#endif


/* ======================================================================
 * 4. Decode: paged attention for one query token per sequence
 *
 * The layouts are vLLM's, so an engine can hand over its tensors as they
 * are (element counts; the caches as clpa_layout.h draws them):
 *
 *   query        [num_seqs, q_stride]  (head h at h * head_size; q_stride 0 = num_heads * head_size)
 *   key_cache    [num_blocks, num_kv_heads, head_size / x, block_size, x]
 *   value_cache  [num_blocks, num_kv_heads, head_size, block_size]
 *   block_tables int32 [num_seqs, max_blocks_per_seq]
 *   context_lens int32 [num_seqs]
 *     or, with page_table = CLPA_PAGE_TABLE_CSR (FlashInfer's page table):
 *   page_indptr   int32 [num_seqs + 1]
 *   page_indices  int32 [num_page_indices]
 *   last_page_len int32 [num_seqs]
 *   out          [num_seqs, num_heads, head_size]   (dtype of the query)
 *   lse          float [num_seqs, num_heads], optional
 *   alibi_slopes, sinks  float [num_heads], optional
 *   k_scale_buffer, v_scale_buffer  float [1], optional (vLLM's scale tensors)
 *
 * The caches come either from a clpa_cache (cache + layer: its layout and
 * that layer's buffers) or from the application (key_cache, value_cache
 * and kv, their layout from clpa_kv_layout_init: the buffers must hold
 * kv.cache_bytes each; their sizes are checked, never used to guess the
 * shape).
 *
 * For sequence s, query head h (KV head h / (num_heads / num_kv_heads)),
 * context length L and key tokens j < L:
 *   logit_j = scale * q . k_j; then soft_cap * tanh(logit_j / soft_cap) if
 *   soft_cap > 0; then + alibi_slopes[h] * (j - L + 1); tokens with
 *   L - 1 - j >= sliding_window take no part when sliding_window > 0.
 *   A sink logit sinks[h] adds exp(sink - max) to the softmax denominator
 *   and no value. out = softmax . V; lse = natural log of the denominator
 *   (sink included); L == 0 gives out = 0 and lse = -inf (or the sink).
 * fp8 caches store value / k_scale (v_scale); other dtypes ignore scales.
 * Arithmetic is f32.
 *
 * Precision, against the exact result (tests/test_decode.c holds every
 * path to it against a double-precision reference): the lanes and rows
 * paths, and f32 caches on the mma path (3xTF32, products within ~2^-21
 * of f32's), compute in f32 from the query as given: errors of f32
 * sums (test_decode.c: 1e-4 + 1e-4 |out| with values in [-2, 2]), then
 * the output's own rounding (f16 2^-11, bf16 2^-8 relative). The mma
 * path on f16, bf16 and fp8 caches rounds the query and the softmax
 * weights to the cache's dtype (f16 for fp8), unit roundoff u = 2^-11 for
 * f16 and 2^-8 for bf16: a logit moves by at most
 * u * scale * sum_d |q_d k_d|, and the output by about twice the largest
 * such move times max |v|, plus u * max |v| for the weights. So with a
 * bf16 cache and large queries it can be off in the third digit, where
 * lanes is not. precision = CLPA_PRECISION_F32 keeps the query as given:
 * auto then takes no path that rounds it (vLLM's kernel rounds the
 * weights as the mma path does).
 *
 * Supported: head_size 32, 64, 80, 96, 112, 120, 128, 192, 256 (head_size a
 * multiple of x: fp8 excludes 120, as in vLLM); block_size a power of two
 * from 1 to 256 (each path takes what its kernel can, the automatic choice
 * one that does: docs/guide.md's page-size table); num_heads % num_kv_heads == 0; query/out f32, f16 or bf16; contexts up
 * to CLPA_MAX_CONTEXT_LEN tokens.
 * ==================================================================== */

/* The longest context decode, prefill, cascade decode and XAttention take,
 * and so the largest position + 1: 2^30 tokens. The kernels keep positions,
 * and what they add to them (a tile's or a partition's end, a rounding up),
 * in 32-bit ints; under this bound none of those passes 2^31. A call past
 * it (max_context_len, cached_lens + new tokens, q_offset + num_q) is
 * refused with CLPA_ERR_UNSUPPORTED and the field named. */
#define CLPA_MAX_CONTEXT_LEN (1 << 30)

/* How the query is taken by decode, prefill and cascade decode. */
typedef enum clpa_precision {
  CLPA_PRECISION_AUTO = 0, /* the fastest path: the tensor cores may round the query and the
                              softmax weights to the cache's dtype (see "Precision" above) */
  CLPA_PRECISION_F32 = 1   /* f32 products of the query as given: auto takes no path that rounds
                              it, and such a path forced is refused (CLPA_ERR_UNSUPPORTED) */
} clpa_precision;

typedef enum clpa_decode_variant {
  CLPA_DECODE_AUTO = 0, /* the heuristic below */
  CLPA_DECODE_V1 = 1,   /* one work-group per (heads, sequence) walks the whole context */
  CLPA_DECODE_V2 = 2    /* partitions of partition_size tokens, merged by their log-sum-exps */

} clpa_decode_variant;

/* v2's merge: in the same launch, by the last partition of a row to
 * finish, where the device orders one work-group's writes before another's
 * reads at device scope: NVIDIA (inline PTX fences) and devices of OpenCL C
 * 2.0 or later with device-scope acquire/release atomics (OpenCL 3.0:
 * __opencl_c_atomic_order_acq_rel and __opencl_c_atomic_scope_device; those
 * programs are built with -cl-std=CL2.0 or CL3.0). Elsewhere (OpenCL 1.2
 * orders nothing between work-groups), on the rows path, and everywhere
 * when the environment has CLPA_DECODE_MERGE=kernel (else auto), a reduce
 * kernel merges them after the launch. */

/* Which kernel computes the products (every path gives the same results,
 * up to the rounding below). Cache layouts (clpa_layout.h): every path
 * reads every kind (split-key, HND, NHD); mma takes f32 caches in HND and
 * NHD with head sizes of multiples of 32 only (docs/guide.md). */
typedef enum clpa_decode_path {
  /* rows on CPUs; mma on NVIDIA (compute capability 8.0 and later; 8.9
   * for fp8) where it applies; else lanes */
  CLPA_DECODE_PATH_AUTO = 0,
  CLPA_DECODE_PATH_LANES = 1, /* vLLM's kernel: lane groups, f32 FMAs, every dtype and head size */
  /* Tensor cores: mma.sync m16n8k16 on NVIDIA with the keys' tokens and the
   * values' dimensions as the rows and the query heads of a KV head as the
   * columns (up to 16 a work-group), f16 or bf16 caches with head sizes that
   * are multiples of 32, fp8 caches (converted to f16 exactly) with multiples
   * of 64, partitions of multiples of 16 tokens; queries and probabilities
   * rounded to the cache's dtype (f16 for fp8), sums in f32. f32 caches with
   * head sizes that are multiples of 16 take m16n8k8 on tf32 three times
   * (3xTF32: each operand's high part and remainder), within ~2^-21 of f32
   * products, queries and probabilities not rounded. Auto takes it for f32
   * up to head 128 (past it the build spills); what it gave against lanes
   * is in docs/decisions/0001-decode-path.md. Forced on other devices it runs
   * emulated (slow: for tests). */
  CLPA_DECODE_PATH_MMA = 2,
  /* CPUs: a work-item per (query heads of a KV head, sequence, partition),
   * explicit 16-wide vectors, no barriers; every dtype and head size. */
  CLPA_DECODE_PATH_ROWS = 3
} clpa_decode_path;

/* How a call names each sequence's blocks (decode, prefill, their plans
 * and runs).
 *  - PADDED (the default): vLLM's block_tables, int32 [num_seqs,
 *    max_blocks_per_seq], row s listing sequence s's blocks, and (decode)
 *    context_lens int32 [num_seqs], its tokens.
 *  - CSR: FlashInfer's paged_kv_indptr / paged_kv_indices /
 *    paged_kv_last_page_len. Sequence s's blocks are page_indices[
 *    page_indptr[s] .. page_indptr[s + 1]) (page_indptr[0] = 0, non-
 *    decreasing, page_indptr[num_seqs] <= num_page_indices); with p > 0
 *    pages it has (p - 1) * block_size + last_page_len[s] tokens,
 *    last_page_len[s] in [1, block_size]; with none, 0 tokens
 *    (last_page_len[s] is not read). Pages may be shared between sequences
 *    and come in any order. The lengths come from the table, as in
 *    FlashInfer: decode's context_lens is NULL, and block_tables and
 *    max_blocks_per_seq are NULL and 0 (a call that gives both forms, or
 *    CSR fields with PADDED, is refused: CLPA_ERR_INVALID_ARG naming the
 *    field). Prefill's lengths stay its host arrays (cached_lens + new
 *    tokens), which the table's must equal.
 * The table lives on the device: the kernels check it as they check block
 * tables. A row whose page_indptr entries leave [0, num_page_indices) or
 * decrease, or whose last_page_len is outside [1, block_size], or (decode)
 * whose length passes max_context_len, sets CLPA_FAULT_BAD_CONTEXT_LEN and
 * the sequence is taken as empty (decode: out 0, lse -inf or the sink; a
 * prefill row's length that is not the host's does the same, and its keys
 * are masked with CLPA_FAULT_BAD_BLOCK); a page index outside [0,
 * num_blocks) sets CLPA_FAULT_BAD_BLOCK and its tokens are masked. No
 * entry outside a sequence's row is read. */
typedef enum clpa_page_table {
  CLPA_PAGE_TABLE_PADDED = CLPA_CODE_PAGE_TABLE_PADDED,
  CLPA_PAGE_TABLE_CSR = CLPA_CODE_PAGE_TABLE_CSR
} clpa_page_table;

typedef struct clpa_decode_params {
  int32_t num_seqs;           /* >= 0 */
  int32_t num_heads;          /* query heads, a multiple of the cache's num_kv_heads */
  /* The paged caches: cache and layer, or key_cache, value_cache and kv. */
  const clpa_cache *cache;    /* a device cache of this context, or NULL */
  int32_t layer;              /* with cache: which layer */
  cl_mem key_cache, value_cache; /* without cache: the application's buffers ... */
  clpa_kv_layout kv;          /* ... and their layout */
  int32_t max_blocks_per_seq; /* columns of block_tables (0 with CSR tables) */
  int32_t max_context_len;    /* upper bound of every length: >= 0, <= max_blocks_per_seq *
                                 block_size (padded tables) and <= CLPA_MAX_CONTEXT_LEN */
  clpa_dtype q_dtype;         /* query and output: f32, f16 or bf16 */
  float scale;                /* softmax scale; 0 (the default): 1/sqrt(head_size) */
  float k_scale, v_scale;     /* fp8 per-tensor scales (1 by default) */
  cl_mem k_scale_buffer, v_scale_buffer; /* optional: the scales as float [1] on the device, used instead */
  float soft_cap;             /* 0: off */
  int32_t sliding_window;     /* 0: off; else the last sliding_window tokens take part */
  size_t q_stride;            /* elements between sequences of the query; 0 = num_heads * head_size */
  cl_mem query, block_tables, context_lens, out;
  cl_mem lse;                 /* optional */
  cl_mem alibi_slopes;        /* optional */
  cl_mem sinks;               /* optional */
  /* Optional: the lengths as the host knows them (int32 [num_seqs], each in
   * [0, max_context_len]; with CSR tables (pages - 1) * block_size +
   * last_page_len, or 0), read only to plan how the work is split (the
   * kernels read the device's): with it, a batch of one long context among
   * short ones gets its long one cut finely enough to fill the device. */
  const int32_t *host_context_lens;
  /* Kernel choice; every field can be forced for tests and benchmarks. */
  clpa_decode_variant variant;
  int32_t partition_size;     /* v2 tokens per partition, a multiple of block_size;
                                 0 = planned: the mma path's rule (clpa_decode), else the
                                 tuning table's (clpa_context_tuning) */
  int32_t heads_per_group;    /* query heads per work-group (GQA packing); 0 = auto, else divides num_heads / num_kv_heads */
  clpa_decode_path path;      /* 0 = auto */
  clpa_precision precision;   /* 0 = auto */
  /* Events: wait for these before starting; *event (if not NULL) receives
   * an event that completes with the last kernel; the caller releases it. */
  cl_uint num_wait_events;
  const cl_event *wait_events;
  cl_event *event;
  /* CSR page tables (clpa_page_table), in place of block_tables and
   * context_lens; a plan fixes page_table, a run takes the buffers. */
  clpa_page_table page_table; /* 0 = PADDED */
  int32_t num_page_indices;   /* CSR: entries of page_indices, >= 0 */
  cl_mem page_indptr, page_indices, last_page_len; /* CSR (page_indices may be NULL when empty) */
  uint64_t reserved[4]; /* 0 (what ..._init leaves): room for fields to come, README's ABI */
} clpa_decode_params;

/* Fills p with the defaults: zeros and NULLs (scale 0: 1/sqrt(head_size)),
 * q_dtype f32, k_scale = v_scale = 1, variant AUTO. The caller sets the
 * shapes, the caches and the buffers. */
CLPA_API void clpa_decode_params_init(clpa_decode_params *p);

/* Enqueues decode attention on the context's queue; does not wait.
 *
 * The plan, for fields left 0 and CLPA_DECODE_AUTO (host/decode_planner.c has each
 * rule, docs/decisions/ the measurements behind it; clpa_decode_choice says
 * what a call would run):
 *  - path: see clpa_decode_path.
 *  - mma: 4, 8 or 16 query heads a work-group, more as the K/V tokens a
 *    compute unit reads grow; the fewest partitions of the longest context
 *    (evenly cut, at least 256 tokens) that give 1.5 busy work-groups a
 *    compute unit, 2.5 for fp8 caches where that leaves partitions of 512
 *    tokens or more, counted from host_context_lens when given (so one long
 *    context among short ones is cut finely enough to fill the device);
 *    without them, no partition longer than what one context at
 *    max_context_len needs to fill the device alone, or 512 tokens where
 *    that is longer; v1 where one partition holds the longest context; with
 *    host lengths, where the grid would be mostly idle, a list of the busy
 *    (sequence, partition) pairs in its place (clpa_plan_info's work_pairs),
 *    and then f16 and bf16 partitions of at most a tuned length; 2 to 12 warps a
 *    work-group, and fewer, wider work-groups in place of partitions where
 *    they keep as many warps in flight. fp8 caches run in 32-token chunks
 *    where every busy warp is resident at once, and with one busy
 *    work-group a compute unit or fewer each warp loads its next chunk while
 *    it computes one.
 *  - lanes: the tuning table's partition (clpa_context_tuning) or the
 *    longest of its halvings that keeps 2 busy work-groups a compute unit
 *    and fills its waves; v1 when one partition holds the context and its
 *    logits fit local memory; 8, 4 or 2 query heads a work-group where local
 *    memory allows and 2 work-groups a compute unit remain.
 *  - rows: every query head of a KV head in one work-item (up to 16), the
 *    tuning table's partition, shortened while its logits would pass 64 KiB.
 *
 * Everything is validated before anything is enqueued (shapes, dtypes,
 * the layout, buffer sizes against what the shapes need). Block ids and
 * context lengths live on the device, so the kernels check them: a block
 * id outside [0, num_blocks) is never read (its tokens are masked) and a
 * context length outside [0, max_context_len] is treated as 0; either sets
 * a bit in the context's fault word, which clpa_context_check_faults reads.
 *
 * Returns CLPA_OK, CLPA_ERR_INVALID_ARG (which field, which value),
 * CLPA_ERR_UNSUPPORTED (shape or dtype not supported, a context past
 * CLPA_MAX_CONTEXT_LEN: named),
 * CLPA_ERR_BUILD, CLPA_ERR_OPENCL or CLPA_ERR_DEVICE_MEMORY. */
CLPA_API clpa_status clpa_decode(clpa_context *ctx, const clpa_decode_params *p);

/* What clpa_decode would run for p, after the same checks, with nothing
 * enqueued: the path, v1 or v2, v2's partition (0 for v1) and the query
 * heads per work-group. Any output may be NULL. */
CLPA_API clpa_status clpa_decode_choice(clpa_context *ctx, const clpa_decode_params *p,
                                        clpa_decode_path *path, clpa_decode_variant *variant,
                                        int32_t *partition_size, int32_t *heads_per_group);

/* ======================================================================
 * 5. Prefill: paged attention for many new query tokens per sequence
 *
 * FlashAttention-2 style over the paged cache: the new tokens' K/V are
 * written first (clpa_reshape_and_cache), then their queries attend to
 * the whole cached prefix and, causally, to each other. A radix-cache hit
 * is a large cached_len; chunked prefill is several calls with growing
 * cached_len. Layouts as decode's, with a variable-length batch of new
 * tokens (element counts):
 *
 *   query   [total_new, q_stride]   (token t = cu_seqlens_q[s] + i of sequence s; head h at h * head_size)
 *   out     [total_new, num_heads, head_size]   (dtype of the query)
 *   lse     float [total_new, num_heads], optional
 *
 * Row t of query and out is token t, so the buffers hold cu_seqlens_q[num_seqs]
 * rows; cu_seqlens_q[0] > 0 leaves the first rows alone (an engine that
 * runs decode on them, say). Query i of sequence s sits at
 * position p = cached_lens[s] + i and attends to the key positions j <
 * cached_lens[s] + new_len with j <= p (causal; all of them when causal
 * is 0), p - j < sliding_window when it is > 0; logits, soft cap, ALiBi
 * (slope * (j - p)), sinks, lse and scales exactly as decode's. The
 * sequence lengths are host arrays (as FlashInfer's plan takes them), so
 * that every one is checked before anything is enqueued; the block tables
 * live on the device and a bad id there is masked and sets
 * CLPA_FAULT_BAD_BLOCK.
 *
 * Supported: decode's head sizes, block sizes and dtypes; cached_lens[s]
 * + new tokens up to CLPA_MAX_CONTEXT_LEN.
 * ==================================================================== */

/* How the work is shaped; every path gives the same results. Cache
 * layouts (clpa_layout.h): every path reads every kind (split-key, HND,
 * NHD). */
typedef enum clpa_prefill_path {
  CLPA_PREFILL_AUTO = 0,  /* rows on CPUs, mma on NVIDIA where it applies, else tiles */
  CLPA_PREFILL_TILES = 1, /* FlashAttention-2 tiles in local memory, 128 work-items a group (GPUs) */
  CLPA_PREFILL_ROWS = 2,  /* a few rows per work-item, private accumulators, no barriers (CPUs) */
  /* Tensor cores: mma.sync m16n8k16 on NVIDIA, f16, bf16 or fp8 caches
   * (fp8 from compute capability 8.9; queries and probabilities rounded to
   * bf16 for a bf16 cache, else f16; fp8 keys and values converted to f16,
   * exactly; f32 accumulation), head sizes that are multiples of 16; 64
   * rows a work-group. Auto picks it on NVIDIA where it applies. Forced
   * on other devices it runs emulated through local memory (slow: for
   * tests). */
  CLPA_PREFILL_MMA = 3
} clpa_prefill_path;

typedef struct clpa_prefill_params {
  int32_t num_seqs;               /* >= 0 */
  int32_t num_heads;              /* query heads, a multiple of the cache's num_kv_heads */
  const clpa_cache *cache;        /* the paged caches, as in clpa_decode_params */
  int32_t layer;
  cl_mem key_cache, value_cache;
  clpa_kv_layout kv;
  int32_t max_blocks_per_seq;     /* columns of block_tables (0 with CSR tables) */
  const int32_t *cu_seqlens_q;    /* host [num_seqs + 1]: >= 0, non-decreasing (usually from 0) */
  const int32_t *cached_lens;     /* host [num_seqs]: tokens already in the cache before the new ones */
  int causal;                     /* 1 (default): query i attends to keys up to its own position */
  clpa_dtype q_dtype;             /* query and output: f32, f16 or bf16 */
  float scale;                    /* softmax scale; 0 (the default): 1/sqrt(head_size) */
  float k_scale, v_scale;         /* fp8 per-tensor scales (1 by default) */
  cl_mem k_scale_buffer, v_scale_buffer; /* optional: the scales as float [1] on the device */
  float soft_cap;                 /* 0: off */
  int32_t sliding_window;         /* 0: off */
  size_t q_stride;                /* elements between query tokens; 0 = num_heads * head_size */
  cl_mem query, block_tables, out;
  cl_mem lse, alibi_slopes, sinks; /* optional */
  /* Path and shape (0 = the heuristic below; forced for tests and
   * benchmarks): query rows (token x query head pairs of one KV head) per
   * work-group, 8, 16, 32 or 64 for tiles, 1, 2, 4, 8 or 16 for rows, 64
   * or 128 for mma; keys per tile, 8, 16, 32 or 64 for tiles, 32 or 64 for
   * mma. */
  clpa_prefill_path path;
  int32_t rows_per_group, keys_per_tile;
  clpa_precision precision;       /* 0 = auto; as decode's (the mma path rounds the query and P) */
  /* Block-sparse prefill (XAttention's mask, clpa_xattn.h), or NULL: uint8
   * [num_seqs][num_heads][mask_q_blocks][mask_k_blocks] on the device;
   * query i of sequence s, head h, drops the keys j with mask[s][h]
   * [i / mask_block][j / mask_block] == 0 (a row that drops every key gets
   * out 0 and lse -inf, or its sink). mask_block is a multiple of 64
   * tokens; key tiles no row keeps are never read. */
  cl_mem block_mask;
  int32_t mask_block, mask_q_blocks, mask_k_blocks;
  cl_uint num_wait_events;
  const cl_event *wait_events;
  cl_event *event;                /* completes with the kernel; the caller releases it */
  /* CSR page tables (clpa_page_table), in place of block_tables: each
   * sequence's length (pages - 1) * block_size + last_page_len must be
   * cached_lens[s] + its new tokens. */
  clpa_page_table page_table;     /* 0 = PADDED */
  int32_t num_page_indices;       /* CSR: entries of page_indices, >= 0 */
  cl_mem page_indptr, page_indices, last_page_len; /* CSR (page_indices may be NULL when empty) */
  /* The mma path's query rows a warp (0 = the tuning table's rule;
   * forced for tests and benchmarks): 16, or 32 (FlashAttention-2's: each
   * key and value fragment serves twice the products; calls without a
   * block_mask, head sizes up to 128). */
  int32_t rows_per_warp;
  /* A mixed step's decode rows (sequences whose new tokens' rows fill one
   * work-group: one new token, or a few) over long contexts: their keys
   * split into parts that run side by side, each a work-group, merged by
   * their log-sum-exps in a second launch, as decode splits them. 0 = the
   * tuning table's rule (on GPUs where measured: parts of a fair share of
   * the batch's work, where such a row would otherwise walk the most keys
   * in the call), -1 = never, N > 0 = parts of N keys (a multiple of 64)
   * wherever a row spans more than one; calls with a block_mask are not
   * split. */
  int32_t split_keys;
  /* Leading decode rows (sequences 0 .. n - 1 with one new token each at
   * query rows 0 .. n - 1, as engines order a step: decodes first) on
   * decode's kernel and plan (clpa_decode's work division, the same
   * buffers' first rows; a second launch where the call has other rows):
   * 0 = the tuning table's rule (on devices where measured: a call of
   * decode rows alone, or whose decode rows read many K/V bytes; else every
   * row in one launch), 1 = always (where decode takes the call's shape),
   * -1 = never. */
  int32_t decode_rows_kernel;
  int32_t reserved32;   /* 0 */
  uint64_t reserved[2]; /* 0 (what ..._init leaves): room for fields to come, README's ABI */
} clpa_prefill_params;

/* Fills p with the defaults: zeros and NULLs (scale 0: 1/sqrt(head_size)),
 * causal 1, q_dtype f32, k_scale = v_scale = 1. */
CLPA_API void clpa_prefill_params_init(clpa_prefill_params *p);

/* Enqueues prefill attention; does not wait. Heuristic (after the
 * tuning table): the rows path on CPUs (4 rows a work-item); on NVIDIA
 * the mma path (tensor cores) for f16/bf16/fp8 caches and head sizes that
 * are multiples of 16, with 32 rows a warp for dense calls (heads 64, 112,
 * 128) whose work-groups walk 16 key tiles or more on average; elsewhere
 * the tiles path with the first of 64 x 64, 64 x 32, 32 x 64, 32 x 32 and
 * smaller tiles (rows x keys) that fits the device's local memory
 * (docs/decisions/0017-tuning-cpu.md, 0020-prefill-mma-tile.md,
 * 0022-prefill-tiles-shape.md, 0041-prefill-mma-warp-rows.md). A mixed
 * step's decode rows: on NVIDIA the leading ones on decode's kernel where
 * one walks more than 512 keys or the call has nothing else, else 64 rows
 * a work-group where they make half its work, and long ones split; on
 * CPUs the leading ones on decode's kernel always (split_keys,
 * decode_rows_kernel; 0042-prefill-mixed-step-splits.md).
 * Returns CLPA_OK, CLPA_ERR_INVALID_ARG (which field, which value: a
 * decreasing cu_seqlens_q, a sequence longer than its block-table row,
 * buffers too small), CLPA_ERR_UNSUPPORTED, CLPA_ERR_BUILD or
 * CLPA_ERR_OPENCL. */
CLPA_API clpa_status clpa_prefill(clpa_context *ctx, const clpa_prefill_params *p);

/* The path and shape clpa_prefill would take for p (rows and keys per
 * work-group; keys 0 on the rows path), after the same checks, with
 * nothing enqueued. Any output may be NULL. */
CLPA_API clpa_status clpa_prefill_choice(clpa_context *ctx, const clpa_prefill_params *p,
                                         clpa_prefill_path *path, int32_t *rows, int32_t *keys);

/* ======================================================================
 * 6. merge_states: attention over disjoint key sets, combined
 *
 * k partial results of the same queries over disjoint key sets, each an
 * output normalised over its own keys and the log-sum-exp of its logits,
 * combine into the result over the union (the online-softmax identity,
 * common.cl's softmax_merge):
 *   m = max_i lse_i,  w_i = e^(lse_i - m) / sum_j e^(lse_j - m)
 *   out = sum_i w_i out_i,  lse = m + log(sum_j e^(lse_j - m))
 * An lse of -inf is an empty set (its output is never read, so it may be
 * anything); all empty gives out 0 and lse -inf. Rows are (token, head)
 * pairs: outputs [num_rows, head_size] in the io dtype, lse float
 * [num_rows]. out may be one of the inputs (in place), lse likewise.
 * ==================================================================== */

#define CLPA_MERGE_MAX_INPUTS 8

typedef struct clpa_merge_states_params {
  int32_t num_rows;   /* >= 0: tokens x heads */
  int32_t head_size;  /* > 0 */
  clpa_dtype dtype;   /* of the outputs: f32, f16 or bf16 */
  int32_t num_inputs; /* 2 .. CLPA_MERGE_MAX_INPUTS */
  cl_mem outs[CLPA_MERGE_MAX_INPUTS], lses[CLPA_MERGE_MAX_INPUTS];
  cl_mem out, lse;    /* lse optional */
  cl_uint num_wait_events;
  const cl_event *wait_events;
  cl_event *event;
  uint64_t reserved[8]; /* 0 (what ..._init leaves): room for fields to come, README's ABI */
} clpa_merge_states_params;

/* Fills p with the defaults: zeros and NULLs, dtype f32, num_inputs 2. */
CLPA_API void clpa_merge_states_params_init(clpa_merge_states_params *p);

/* Enqueues the merge; does not wait. Returns CLPA_OK, CLPA_ERR_INVALID_ARG
 * (named), CLPA_ERR_UNSUPPORTED (dtype), CLPA_ERR_BUILD or CLPA_ERR_OPENCL. */
CLPA_API clpa_status clpa_merge_states(clpa_context *ctx, const clpa_merge_states_params *p);

/* ======================================================================
 * 7. Cascade decode: a shared prefix attended once per group
 *
 * When several sequences of a decode batch share a long prefix (the radix
 * cache knows: the same first blocks in their tables), decode can read
 * the shared blocks once for the whole group instead of once per
 * sequence: the group's queries attend to the shared prefix together (one
 * non-causal prefill per group), each sequence attends to its own suffix
 * (decode over the rest of its table), and clpa_merge_states combines the
 * two by their log-sum-exps. The result is clpa_decode's.
 *
 * The batch is clpa_decode's (every sequence's whole table and context);
 * groups are runs of consecutive sequences, group g being sequences
 * [group_starts[g], group_starts[g + 1]), and group_starts[0] == 0;
 * sequences after the last group share nothing. Every member's first
 * shared_blocks[g] table entries must be the same blocks (the caller's
 * promise: the radix tree gives it) and its context at least that long;
 * the kernels check the lengths: a shorter one, or one outside [0,
 * max_context_len], sets CLPA_FAULT_BAD_CONTEXT_LEN and is taken as 0, as
 * clpa_decode takes a bad length (out 0, lse -inf or the sink). A group
 * must share at least as many tokens as it has members, and at most
 * max_context_len. ALiBi and
 * sliding windows are not supported here (they depend on each sequence's
 * own position in the shared part).
 * ==================================================================== */
typedef struct clpa_cascade_params {
  clpa_decode_params decode;   /* the batch, as clpa_decode takes it */
  int32_t num_groups;          /* >= 0 */
  const int32_t *group_starts; /* host [num_groups + 1]: 0, then increasing, <= num_seqs */
  const int32_t *shared_blocks; /* host [num_groups]: >= 1 */
  uint64_t reserved[8]; /* 0 (what ..._init leaves): room for fields to come, README's ABI */
} clpa_cascade_params;

/* Fills p with defaults: clpa_decode_params_init's, no groups. */
CLPA_API void clpa_cascade_params_init(clpa_cascade_params *p);

/* Enqueues cascade decode (the suffix view, the group tables, the prefix
 * attention, the suffix decode, the merge); does not wait.
 *
 * When it pays (the caller decides): a group sharing S tokens reads them
 * once instead of once per member, against a prefill launch and a merge.
 * On CPUs, with decode on the rows path, it does not pay; on GPUs it is
 * not measured yet, and the gain should follow the K/V bytes saved
 * (docs/decisions/0025-cascade-when-it-pays.md). The prefix runs in
 * decode's precision: on prefill's mma path only when decode runs on
 * CLPA_DECODE_PATH_MMA with an f16 or bf16 cache (else tiles or rows:
 * decode's f32 products keep f32's precision), so the result is decode's;
 * but prefill's mma path takes blocks of 8 to 32 tokens only, and with
 * other blocks the prefix keeps f32 (closer to the exact result than
 * decode's rounded query: the two differ at the cache dtype's rounding).
 * Returns CLPA_OK, CLPA_ERR_INVALID_ARG (named: a group out of order or
 * too small for its members, a shared prefix past the table or past
 * max_context_len),
 * CLPA_ERR_UNSUPPORTED (ALiBi, a sliding window), what clpa_decode and
 * clpa_prefill return, CLPA_ERR_DEVICE_MEMORY. */
CLPA_API clpa_status clpa_cascade_decode(clpa_context *ctx, const clpa_cascade_params *p);

/* ======================================================================
 * 8. Plans: plan once per step, run per layer
 *
 * An engine calls attention once per layer with the same batch. A plan is
 * made once per step from the params of decode, prefill, cascade decode or
 * XAttention's estimation (the shapes, dtypes, options and host lengths):
 * it checks them, picks
 * the path and the work division, builds the kernels and, for prefill and
 * cascade, uploads its work list. clpa_run then takes only what a layer
 * changes (clpa_attn_inputs: the caches, query, output and per-layer
 * options) and enqueues. clpa_decode, clpa_prefill and clpa_cascade_decode
 * are a plan, one run and a release, so a run's results are theirs bit for
 * bit.
 *
 * A plan fixes everything in its params but the buffers and the fields of
 * clpa_attn_inputs: the number of sequences, heads, q_dtype, scale, soft
 * cap, window, q_stride, path and shape; the caches' shape (dtype, block
 * size, KV heads, head size: a run's caches must have it; their number of
 * blocks may differ); whether there is a block mask; and
 *  - decode: max_context_len. The device lengths (context_lens) and block
 *    tables (or the CSR table) are read by each run, so both may change between runs within
 *    max_context_len: the next step can run on this step's plan. A plan
 *    made from host_context_lens divides the work for those lengths (the
 *    fastest for them; where it lists the busy partitions, a sequence's
 *    last listed one runs to the length the device holds, so any lengths
 *    stay correct); one made without divides it so that no
 *    work-group walks much more than its share of any lengths up to
 *    max_context_len.
 *  - prefill: cu_seqlens_q and cached_lens (the work list is made from
 *    them); the block tables may change.
 *  - cascade: decode's, and the groups and their shared blocks.
 *  - xattn: num_q, q_offset, max_blocks_per_seq, stride, block, chunk,
 *    tau and scratch_limit; a run reads the key cache (cache and layer, or
 *    key_cache), query, block_tables (the sequence's table) and k_scale,
 *    writes block_mask (the mask) and, where given, mass; it refuses the
 *    other buffers. clpa_xattn_estimate stays a call of its own.
 * The params' buffers are not read (they may be NULL); their cache (any
 * valid layer) or kv gives the caches' shape, and cache or key_cache and
 * value_cache may be left out when kv is given.
 * A plan belongs to its context: use it from one thread at a time (the
 * context's), release it before the context.
 * ==================================================================== */

typedef struct clpa_plan clpa_plan;

/* What a run takes: one layer's buffers and per-layer options. */
typedef struct clpa_attn_inputs {
  const clpa_cache *cache;       /* a device cache of this context, or NULL */
  int32_t layer;                 /* with cache: which layer */
  cl_mem key_cache, value_cache; /* without cache: buffers in the plan's layout */
  cl_mem query, out;
  cl_mem lse;                    /* optional */
  cl_mem block_tables;           /* int32 [num_seqs, max_blocks_per_seq]: padded plans */
  cl_mem context_lens;           /* decode and cascade: int32 [num_seqs]: padded plans */
  float k_scale, v_scale;        /* fp8 per-tensor scales (1 by default) */
  cl_mem k_scale_buffer, v_scale_buffer; /* optional, as in clpa_decode_params */
  cl_mem alibi_slopes, sinks;    /* optional (cascade refuses ALiBi) */
  cl_mem block_mask;             /* prefill: where the plan's params had one; xattn: its output */
  cl_mem mass;                   /* xattn: optional, the block masses it writes */
  cl_uint num_wait_events;
  const cl_event *wait_events;
  cl_event *event;               /* completes with the last kernel; the caller releases it */
  /* CSR plans (page_table = CLPA_PAGE_TABLE_CSR): the table, as in
   * clpa_decode_params; it may change from run to run. */
  int32_t num_page_indices;
  cl_mem page_indptr, page_indices, last_page_len;
  uint64_t reserved[4]; /* 0 (what ..._init leaves): room for fields to come, README's ABI */
} clpa_attn_inputs;

/* Fills in with the defaults: zeros and NULLs, k_scale = v_scale = 1. */
CLPA_API void clpa_attn_inputs_init(clpa_attn_inputs *in);

/* Plans p as clpa_decode, clpa_prefill, clpa_cascade_decode or
 * clpa_xattn_estimate would run it, with nothing enqueued (prefill and cascade upload their work lists;
 * the plan's first run waits for that). *plan receives the plan, or NULL on
 * failure. Returns what those calls return for p's shapes and options, and
 * CLPA_ERR_OUT_OF_MEMORY. */
CLPA_API clpa_status clpa_plan_decode(clpa_context *ctx, const clpa_decode_params *p,
                                      clpa_plan **plan);
CLPA_API clpa_status clpa_plan_prefill(clpa_context *ctx, const clpa_prefill_params *p,
                                       clpa_plan **plan);
CLPA_API clpa_status clpa_plan_cascade(clpa_context *ctx, const clpa_cascade_params *p,
                                       clpa_plan **plan);
CLPA_API clpa_status clpa_plan_xattn(clpa_context *ctx, const clpa_xattn_params *p,
                                     clpa_plan **plan);

/* Enqueues the planned attention over in's buffers; does not wait. Every
 * buffer is checked against the plan's shapes first, and the caches
 * against its layout; a buffer the plan's kind does not read (context_lens
 * to a prefill plan, block_mask to decode or cascade, mass to any but
 * XAttention's) is refused, not ignored. Returns CLPA_OK,
 * CLPA_ERR_INVALID_ARG (named), CLPA_ERR_OPENCL or CLPA_ERR_DEVICE_MEMORY. */
CLPA_API clpa_status clpa_run(clpa_plan *plan, const clpa_attn_inputs *in);

/* What a plan runs: decode's path (clpa_decode_path), variant, partition
 * (0 for v1), query heads a work-group and work_pairs; prefill's path
 * (clpa_prefill_path) and rows and keys a work-group; cascade's suffix
 * decode as decode's. work_pairs: the busy (sequence, partition) pairs of
 * the plan's host lengths that its work-groups take from a list, or 0
 * where the grid is every sequence at the longest one's partitions (the
 * tensor-core path, v2, host lengths given, where the tuning table's rule
 * or CLPA_DECODE_WORK_LIST=on asks for it; a run's lengths may still be
 * any within max_context_len: a sequence's last listed partition runs to
 * its length). list_entries: without host lengths, on the same path, the
 * list a small kernel makes before each run from the lengths the device
 * holds (partitions of a share of the batch's work, partition_size their
 * floor), where the tuning table's rule or CLPA_DECODE_WORK_LIST=on asks
 * for it; 0: the grid. */
typedef struct clpa_plan_info {
  int32_t path;
  clpa_decode_variant variant;
  int32_t partition_size, heads_per_group;
  int32_t rows, keys;
  int64_t work_pairs;
  int32_t list_entries; /* decode without host lengths: the entries of the list the device makes
                           from its lengths each run (0: none) */
  int32_t rows_per_warp; /* prefill's mma path: query rows a warp (16 or 32); else 0 */
  int32_t split_keys;    /* prefill: keys a split part (0: nothing split) */
  int32_t split_rows;    /* prefill: the row tiles split (each merged by a second launch) */
  int32_t decode_rows;   /* prefill: the leading decode rows run by decode's kernel (0: none;
                            variant, partition_size and heads_per_group then describe its plan) */
  int32_t reserved32;
  uint64_t reserved[4]; /* room for fields to come (README's ABI) */
} clpa_plan_info;

/* Fills *out for plan. Returns CLPA_OK or CLPA_ERR_INVALID_ARG (NULL). */
CLPA_API clpa_status clpa_plan_describe(const clpa_plan *plan, clpa_plan_info *out);

/* Releases the plan (NULL is fine); runs already enqueued complete. */
CLPA_API void clpa_plan_release(clpa_plan *plan);

#ifdef __cplusplus
}
#endif

#endif /* CLPA_ATTN_H */
