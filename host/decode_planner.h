/*
 * decode_planner.h — decode's plan as pure host code: from a shape (the
 * caller's forced fields and, where given, the host's context lengths),
 * the device's facts and its tuning row to the kernel, v1 or v2, the
 * partition, the query heads and warps a work-group. No OpenCL and no
 * context: lib/decode_plan.c fills the three inputs from a context and
 * copies the plan into its decode_call; tests/test_host_planner.c holds
 * the planner to tests/data/decode_plans.txt and to its invariants.
 * Not installed.
 *
 *   clpa_decode_shape  ─┐
 *   clpa_device_facts  ─┼─> clpa_decode_planner() ─> clpa_decode_decision
 *   clpa_decode_tuning ─┘        (or a status and the context's message)
 */
#ifndef CLPA_HOST_DECODE_PLANNER_H
#define CLPA_HOST_DECODE_PLANNER_H

#include <stddef.h>
#include <stdint.h>

#include "clpa_base.h"
#include "clpa_layout.h"

/* The lanes kernel's work-group (lib/kernels.h's DECODE_THREADS; lib/decode_plan.c checks that
 * they agree). */
#define CLPA_PLANNER_LANES_THREADS 128

/* The most pairs a work list holds: they are the grid's second dimension, which NVIDIA's
 * OpenCL holds to 65535 work-groups (CUDA's gridDim.y); a longer list runs the rectangle. */
#define CLPA_PLANNER_WORK_LIST_MAX 65535

/* clpa_decode_path's, clpa_decode_variant's and clpa_precision's values (clpa.h, which needs
 * OpenCL's headers; lib/decode_plan.c checks that they agree). */
enum { CLPA_PLANNER_AUTO = 0, CLPA_PLANNER_LANES = 1, CLPA_PLANNER_MMA = 2, CLPA_PLANNER_ROWS = 3 };
enum { CLPA_PLANNER_V1 = 1, CLPA_PLANNER_V2 = 2 };
enum { CLPA_PLANNER_PRECISION_F32 = 1 };

/* What a decode call works on, checked by lib/'s clpa_decode_validate:
 * the sizes, the cache's dtype and block, and the caller's choices (0:
 * the planner's). */
typedef struct clpa_decode_shape {
  int32_t num_seqs, num_heads, num_kv_heads, head_size, block_size;
  clpa_dtype kv_dtype;
  int32_t max_context_len;
  const int32_t
      *host_context_lens;  /* [num_seqs] in [0, max_context_len], or NULL: all at the max */
  int32_t path;            /* CLPA_PLANNER_AUTO, _LANES, _MMA or _ROWS */
  int32_t variant;         /* 0, CLPA_PLANNER_V1 or _V2 */
  int32_t precision;       /* 0 or CLPA_PLANNER_PRECISION_F32 */
  int32_t partition_size;  /* a multiple of block_size, or 0 */
  int32_t heads_per_group; /* divides num_heads / num_kv_heads (at most 16), or 0 */
  clpa_kv_layout_kind kv_layout; /* f32 caches on the mma path: heads of 32 in HND and NHD */
  int32_t sliding_window;  /* 0: off (the work list counts a row's partitions from its window) */
  int32_t work_list;       /* mma: 1 a list of the busy partitions (with host lengths the host's,
                              without them the device's) wherever there are partitions, -1
                              never, 0 the tuning row's rules */
} clpa_decode_shape;

/* What the plan needs to know of the device (clpa_device_info and the
 * lanes the context settled on; lib/device_caps.c's clpa_device_facts_of). */
typedef struct clpa_device_facts {
  const char *name; /* for messages */
  int is_cpu;
  unsigned compute_units; /* 0 counts as 1 */
  uint64_t local_mem_bytes;
  size_t max_work_group_size;
  unsigned native_float_width; /* a CPU's SIMD floats */
  int lane_width; /* lanes a lane group: 32, or a narrower subgroup; 0: emulated, one lane a key
                     token (the block size) */
  int mma_native; /* the tensor-core paths: 1 native (NVIDIA, 8.0 on), 0 cannot build (NVIDIA
                     before 8.0), -1 emulated (elsewhere) */
  int compute_capability; /* NVIDIA: 10 * major + minor; 0 elsewhere */
  int merge_in_launch;    /* decode v2's work-group kernels merge their partitions (lib/context.c's
                             pick_merge), which a device-made list needs */
} clpa_device_facts;

/* Decode's part of a tuning-table row (lib/tuning.c: each value names
 * the decision record that set it). */
typedef struct clpa_decode_tuning {
  int32_t partition;        /* lanes, rows: v2 tokens a partition (clpa_tuning.decode_partition) */
  int32_t resident;         /* lanes: its work-groups a compute unit holds, 0: not known */
  int32_t mma_warps_per_cu; /* decode_mma.cl's warps a compute unit holds */
  int32_t mma_f32_warps_per_cu; /* ... of its f32 (3xTF32) build */
  int32_t mma_pipe_warps;       /* the most warps a work-group of its PIPE build */
  int32_t blind_partition;      /* mma without host lengths: partitions need not be shorter */
  int32_t lanes_f32_maxnreg;    /* the lanes kernel's f32 build with up to 4 heads: registers (0:
                                   the compiler's choice; NVIDIA's build alone honours it) */
  int32_t mma_work_list;        /* mma with host lengths: a list of the busy (sequence,
                                   partition) pairs where at most 1 in this many of the grid's
                                   work-groups would be busy (0: never) */
  int32_t mma_list_partition;   /* a listed plan's partitions: at most this many tokens (cut
                                   evenly, whole units; 0: the plan's own) */
  int32_t mma_device_list;      /* mma v2 without host lengths: a list the device makes from its
                                   lengths each run, in partitions of this many tokens at least
                                   (0: never; the blind rectangle) */
} clpa_decode_tuning;

/* The plan: lib/decode.c launches it as decode_call. */
typedef struct clpa_decode_decision {
  int path;            /* CLPA_PLANNER_LANES, _MMA or _ROWS */
  int v2;              /* partitions, merged by their log-sum-exps */
  int partition;       /* tokens a partition (v1: the work-group's whole context) */
  int heads_per_group; /* query heads a work-group (rows: a work-item) */
  int max_parts;       /* partitions of the longest context: the grid's third size (v1: 1) */
  int threads;         /* work-group size (rows: the kernel's, launched one a work-group) */
  int sg;              /* lanes a lane group */
  int key_vectors;     /* rows: key vectors a query load */
  int logits_stride;   /* lanes: floats of local logits a head; 1 elsewhere */
  int chunk;           /* mma: tokens a chunk */
  int pipe;            /* mma: the next chunk loaded while one is computed */
  int maxnreg;         /* registers a work-item at most, 0: the compiler's choice */
  size_t local_bytes;  /* local memory the work-group takes, as the plan counts it (rows: 0) */
  int64_t work_pairs;  /* mma v2 from host lengths: the busy (sequence, partition) pairs the
                          work-groups take from a list (clpa_decode_work_list), 0: the grid is
                          heads x sequences x max_parts */
  int32_t list_entries; /* mma v2 without host lengths: the entries of the list a kernel makes
                           from the device's lengths each run (cl/decode_mma.cl's
                           clpa_decode_mma_list), the grid's second size; 0: no such list */
  int32_t list_want;    /* ... the busy work-groups that list aims at */
} clpa_decode_decision;

/* Plans decode for a shape that lib/'s clpa_decode_validate passed. err:
 * NULL or a CLPA_ERROR_MAX-byte buffer (a context's) that receives the
 * message, as this thread's last error does.
 * Returns CLPA_OK, CLPA_ERR_INVALID_ARG (path or precision out of range)
 * or CLPA_ERR_UNSUPPORTED (a forced choice the device or the shape cannot
 * take, a context whose logits do not fit: named). */
clpa_status clpa_decode_planner(const clpa_decode_shape *s, const clpa_device_facts *dev,
                                const clpa_decode_tuning *t, clpa_decode_decision *out, char *err);

/* The list of d->work_pairs busy (sequence, partition) pairs for s's host
 * lengths: four words a pair, {seq, part, the sequence's partitions, 0},
 * the sequences with the most partitions first (their walk is the call's
 * longest), each one's partitions in order. A row's partitions count its
 * chunks from its window's first (cl/decode_mma.cl's mma_extent_of), one at
 * least. out: 4 d->work_pairs words. */
void clpa_decode_work_list(const clpa_decode_shape *s, const clpa_decode_decision *d,
                           int32_t *out);

/* A forced tensor-core path: CLPA_OK, or CLPA_ERR_UNSUPPORTED (message
 * in err, as above) where dev->mma_native is 0. */
clpa_status clpa_planner_mma_check(const clpa_device_facts *dev, char *err);

/* Whether the tensor-core paths take fp8 caches on this device: their
 * pairs become f16 pairs by cvt.rn.f16x2.e4m3x2 (compute capability 8.9
 * and later) on NVIDIA; emulated, everywhere. Returns 1 or 0. */
int clpa_planner_mma_fp8(const clpa_device_facts *dev);

/* Whether the rows kernels (decode_rows.cl, prefill_rows.cl) take blocks of
 * block_size tokens with this head size and cache dtype: 8 tokens or more
 * (a power of two), else a head of multiples of 16 and a block of one
 * token (its key one run of dims) or of at least a 16-byte key row's
 * tokens (rows.cl's VT, 16 / x). Returns 1 or 0. */
int clpa_rows_takes_block(int block_size, int head_size, clpa_dtype kv);


#endif
