/*
 * kernels.h — every kernel family, described once: which embedded sources
 * make its program and which tunables specialise it. A family's tunables
 * are the int32 fields of its spec struct; the launch path (launch.c)
 * renders them as canonical -DCLPA_<NAME>=<value> options in the order the
 * family lists them, so the program caches key on what a program means,
 * never on how an option string happened to be spelled. Not installed.
 */
#ifndef CLPA_LIB_KERNELS_H
#define CLPA_LIB_KERNELS_H

#include <stddef.h>
#include <stdint.h>

typedef struct clpa_tunable {
  const char *name; /* rendered as -DCLPA_<name> */
  size_t offset;    /* of an int32_t field in the family's spec */
} clpa_tunable;

typedef struct clpa_family {
  const char *name;           /* "decode": also the name clpa_program_get takes */
  const char *parts[11];      /* embedded sources before the family's own file, NULL-ended */
  const clpa_tunable *tunables;
  size_t num_tunables;
} clpa_family;

/* decode.cl: clpa_decode_paged (see its banner for the derived sizes);
 * decode_mma.cl: clpa_decode_mma, decode_rows.cl: clpa_decode_rows (the same
 * fields; sg 0; rows: num_threads 1, partition_size also for v1). */
typedef struct clpa_decode_spec {
  int32_t head_size, block_size, kv_dtype, io_dtype;
  int32_t num_threads;    /* work-group size */
  int32_t sg;             /* lanes per lane group */
  int32_t partition_size; /* 0: v1 */
  int32_t heads_per_wg;   /* GQA packing */
  int32_t key_vectors;    /* rows: 16-element key vectors sharing each query load, else 0 */
  int32_t maxnreg;        /* NVIDIA: registers a work-item at most (program.c), 0 = ptxas's choice */
  int32_t chunk;          /* mma: tokens a warp takes at a time (16, or 32 for fp8), else 0 */
  int32_t pipe;           /* mma: 1 where a warp loads its next chunk while it computes one, else 0 */
  int32_t merge;          /* v2: 1 where the last partition of a row merges them (in the launch),
                             0 where reduce.cl's kernel does (always on the rows path) */
  int32_t kv_layout;      /* the cache's clpa_kv_layout_kind (CLPA_KV_LAYOUT) */
  int32_t page_table;     /* the call's clpa_page_table (CLPA_PAGE_TABLE: pages.cl) */
  int32_t device_list;    /* mma v2: 1 where the work list is the device's (clpa_decode_mma_list
                             makes it; its entries give the chunks a partition), else 0 */
} clpa_decode_spec;
#define DECODE_THREADS 128   /* the lanes kernel's work-group */

/* reduce.cl: clpa_decode_reduce. */
typedef struct clpa_reduce_spec {
  int32_t head_size, io_dtype, partition_size;
  int32_t block_size; /* CSR: the cache's (a length counts pages in it); padded: 0 */
  int32_t page_table; /* the call's clpa_page_table (CLPA_PAGE_TABLE: pages.cl) */
} clpa_reduce_spec;

/* prefill_tiles.cl: clpa_prefill_paged, prefill_rows.cl: clpa_prefill_rows,
 * prefill_mma.cl: clpa_prefill_mma (each after prefill.cl). */
typedef struct clpa_prefill_spec {
  int32_t head_size, block_size, kv_dtype, io_dtype;
  int32_t num_threads; /* work-group size */
  int32_t rows, keys;  /* query rows per work-group, keys per tile */
  int32_t path;        /* clpa_prefill_path: which family (file) runs it, not an option */
  int32_t stages;      /* mma: key and value tiles in flight (1 or 2) */
  int32_t sparse;      /* tiles, mma: 1 where a block mask is given (the dense build skips none);
                        * mma: 2 where mask blocks hold whole work-groups (prefill.c sparse_build) */
  int32_t maxnreg;     /* NVIDIA: registers a work-item at most (program.c), 0 = ptxas's choice */
  int32_t vkeys;       /* tiles: keys a chunk of values in local memory (4 .. 32), else 0 */
  int32_t kv_layout;   /* the cache's clpa_kv_layout_kind (CLPA_KV_LAYOUT) */
  int32_t page_table;  /* the call's clpa_page_table (CLPA_PAGE_TABLE: pages.cl) */
  int32_t mt;          /* mma: row tiles of 16 a warp, 1 or 2 (prefill_mma.cl's MT); else 1 */
  int32_t items;       /* mma: 1 where the plan has split items or a decode row's tile (its
                        * idle warps skip the products; prefill.c mma_items), else 0 */
} clpa_prefill_spec;

/* merge.cl: clpa_merge_states. */
typedef struct clpa_merge_spec {
  int32_t io_dtype, num_threads;
} clpa_merge_spec;

/* xattn.cl: clpa_xattn_stats, clpa_xattn_mass, clpa_xattn_select (stride,
 * block and chunk are kernel arguments: one program serves every shape;
 * the first four fields). xattn_mma.cl: clpa_xattn_stats_mma, built for a
 * stride, columns per key block and tile shape (all fields). */
typedef struct clpa_xattn_spec {
  int32_t head_size, block_size, kv_dtype, io_dtype;
  int32_t num_threads, stride, bcols; /* mma: work-group size, S, B / S */
  int32_t rows, cols, kc;             /* mma: strided rows, columns a tile, k indices a step */
  int32_t stages;                     /* mma: steps in local memory (2-4) */
  int32_t kv_layout;                  /* the cache's clpa_kv_layout_kind (CLPA_KV_LAYOUT) */
} clpa_xattn_spec;

/* cache.cl: clpa_cache_reshape (the source dtype is a kernel argument). */
typedef struct clpa_cache_spec {
  int32_t kv_dtype;
  int32_t kv_layout; /* the cache's clpa_kv_layout_kind (CLPA_KV_LAYOUT) */
} clpa_cache_spec;

extern const clpa_family clpa_family_decode, clpa_family_decode_mma, clpa_family_decode_rows,
    clpa_family_reduce, clpa_family_prefill_tiles, clpa_family_prefill_rows,
    clpa_family_prefill_mma,
    clpa_family_merge, clpa_family_cache, clpa_family_blocks, clpa_family_smoke,
    clpa_family_xattn, clpa_family_xattn_mma;

/* The family called `name`, or NULL. */
const clpa_family *clpa_family_find(const char *name);

#endif
