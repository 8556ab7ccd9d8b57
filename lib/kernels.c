/*
 * kernels.c — every kernel family, described once (kernels.h): its
 * embedded sources and the tunables of its spec, and the lookup by name
 * that the program cache (program.c) and the launch path (launch.c) use.
 */
#include <stddef.h>
#include <string.h>

#include "kernels.h"

#define T(spec, field, name) {name, offsetof(spec, field)}
static const clpa_tunable decode_tunables[] = {
    T(clpa_decode_spec, head_size, "HEAD_SIZE"),
    T(clpa_decode_spec, block_size, "BLOCK_SIZE"),
    T(clpa_decode_spec, kv_dtype, "KV_DTYPE"),
    T(clpa_decode_spec, kv_layout, "KV_LAYOUT"),
    T(clpa_decode_spec, io_dtype, "IO_DTYPE"),
    T(clpa_decode_spec, num_threads, "NUM_THREADS"),
    T(clpa_decode_spec, sg, "SG"),
    T(clpa_decode_spec, partition_size, "PARTITION_SIZE"),
    T(clpa_decode_spec, heads_per_wg, "HEADS_PER_WG"),
    T(clpa_decode_spec, key_vectors, "KEY_VECTORS"),
    T(clpa_decode_spec, maxnreg, "MAXNREG"),
    T(clpa_decode_spec, chunk, "CHUNK"),
    T(clpa_decode_spec, pipe, "PIPE"),
    T(clpa_decode_spec, merge, "MERGE"),
    T(clpa_decode_spec, page_table, "PAGE_TABLE"),
    T(clpa_decode_spec, device_list, "DEVICE_LIST"),
};
static const clpa_tunable reduce_tunables[] = {
    T(clpa_reduce_spec, head_size, "HEAD_SIZE"),
    T(clpa_reduce_spec, io_dtype, "IO_DTYPE"),
    T(clpa_reduce_spec, partition_size, "PARTITION_SIZE"),
    T(clpa_reduce_spec, block_size, "BLOCK_SIZE"),
    T(clpa_reduce_spec, page_table, "PAGE_TABLE"),
};
static const clpa_tunable prefill_tunables[] = {
    T(clpa_prefill_spec, head_size, "HEAD_SIZE"),
    T(clpa_prefill_spec, block_size, "BLOCK_SIZE"),
    T(clpa_prefill_spec, kv_dtype, "KV_DTYPE"),
    T(clpa_prefill_spec, kv_layout, "KV_LAYOUT"),
    T(clpa_prefill_spec, io_dtype, "IO_DTYPE"),
    T(clpa_prefill_spec, num_threads, "NUM_THREADS"),
    T(clpa_prefill_spec, rows, "ROWS"),
    T(clpa_prefill_spec, keys, "KEYS"),
    T(clpa_prefill_spec, stages, "STAGES"),
    T(clpa_prefill_spec, sparse, "SPARSE"),
    T(clpa_prefill_spec, maxnreg, "MAXNREG"),
    T(clpa_prefill_spec, vkeys, "VKEYS"),
    T(clpa_prefill_spec, page_table, "PAGE_TABLE"),
    T(clpa_prefill_spec, mt, "MT"),
    T(clpa_prefill_spec, items, "ITEMS"),
};
static const clpa_tunable merge_tunables[] = {
    T(clpa_merge_spec, io_dtype, "IO_DTYPE"),
    T(clpa_merge_spec, num_threads, "NUM_THREADS"),
};
static const clpa_tunable xattn_tunables[] = {
    T(clpa_xattn_spec, head_size, "HEAD_SIZE"),
    T(clpa_xattn_spec, block_size, "BLOCK_SIZE"),
    T(clpa_xattn_spec, kv_dtype, "KV_DTYPE"),
    T(clpa_xattn_spec, kv_layout, "KV_LAYOUT"),
    T(clpa_xattn_spec, io_dtype, "IO_DTYPE"),
};
static const clpa_tunable xattn_mma_tunables[] = {
    T(clpa_xattn_spec, head_size, "HEAD_SIZE"),
    T(clpa_xattn_spec, block_size, "BLOCK_SIZE"),
    T(clpa_xattn_spec, kv_dtype, "KV_DTYPE"),
    T(clpa_xattn_spec, kv_layout, "KV_LAYOUT"),
    T(clpa_xattn_spec, io_dtype, "IO_DTYPE"),
    T(clpa_xattn_spec, num_threads, "NUM_THREADS"),
    T(clpa_xattn_spec, stride, "STRIDE"),
    T(clpa_xattn_spec, bcols, "BCOLS"),
    T(clpa_xattn_spec, rows, "ROWS"),
    T(clpa_xattn_spec, cols, "COLS"),
    T(clpa_xattn_spec, kc, "KC"),
    T(clpa_xattn_spec, stages, "STAGES"),
};
static const clpa_tunable cache_tunables[] = {T(clpa_cache_spec, kv_dtype, "KV_DTYPE"),
                                              T(clpa_cache_spec, kv_layout, "KV_LAYOUT")};
#undef T
#define N(a) (sizeof a / sizeof *a)

/* Each family's parts, in order: common.cl first; io.cl where there are
 * queries or outputs; kv.cl where the cache is read or written; mma.cl on
 * the tensor-core paths; then what a group of paths shares (decode_args.h
 * and decode_merge.cl, rows.cl, prefill_args.h and prefill.cl; pages_args.h
 * and pages.cl, the page table, after the argument lists) or the
 * family's parameter lists (merge_args.h, xattn_args.h,
 * cache_args.h, blocks_args.h). */
#define F(name, tunables, ...) {name, {__VA_ARGS__, NULL}, tunables, N(tunables)}
/* decode_mma.cl and decode_rows.cl take decode's specification (SG unused: 0). */
const clpa_family clpa_family_decode =
    F("decode", decode_tunables, "common", "io", "kv", "decode_args", "pages_args", "pages",
      "decode_merge");
const clpa_family clpa_family_decode_rows =
    F("decode_rows", decode_tunables, "common", "io", "kv", "decode_args", "pages_args",
      "pages", "rows");
const clpa_family clpa_family_decode_mma =
    F("decode_mma", decode_tunables, "common", "io", "kv", "mma", "decode_args", "pages_args", "pages",
      "decode_merge", "decode_mma_shape", "decode_mma_chunk");
const clpa_family clpa_family_reduce = F("reduce", reduce_tunables, "common", "io", "decode_args", "pages_args", "pages");
/* Prefill's paths: prefill.cl (what they share), then each path's file. */
const clpa_family clpa_family_prefill_tiles =
    F("prefill_tiles", prefill_tunables, "common", "io", "kv", "prefill_args", "pages_args", "pages",
      "prefill");
const clpa_family clpa_family_prefill_rows =
    F("prefill_rows", prefill_tunables, "common", "io", "kv", "rows", "prefill_args", "pages_args", "pages",
      "prefill");
const clpa_family clpa_family_prefill_mma =
    F("prefill_mma", prefill_tunables, "common", "io", "kv", "mma", "prefill_args", "pages_args", "pages",
      "prefill", "prefill_mma_tiles");
const clpa_family clpa_family_merge = F("merge", merge_tunables, "common", "io", "merge_args");
const clpa_family clpa_family_cache = F("cache", cache_tunables, "common", "kv", "cache_args");
const clpa_family clpa_family_xattn =
    F("xattn", xattn_tunables, "common", "io", "kv", "xattn_args");
const clpa_family clpa_family_xattn_mma =
    F("xattn_mma", xattn_mma_tunables, "common", "io", "kv", "mma", "xattn_args");
/* blocks.cl takes no option: common.cl for KERNEL_PARAMS, then its list. */
const clpa_family clpa_family_blocks = {"blocks", {"common", "blocks_args", NULL}, NULL, 0};
const clpa_family clpa_family_smoke = {"smoke", {NULL}, NULL, 0};
#undef F

const clpa_family *clpa_family_find(const char *name) {
  static const clpa_family *const all[] = {
      &clpa_family_decode, &clpa_family_reduce, &clpa_family_prefill_tiles,
      &clpa_family_prefill_rows, &clpa_family_prefill_mma, &clpa_family_merge,
      &clpa_family_cache,  &clpa_family_blocks, &clpa_family_smoke, &clpa_family_xattn,
      &clpa_family_decode_mma, &clpa_family_decode_rows, &clpa_family_xattn_mma};
  for (size_t i = 0; name && i < N(all); i++)
    if (strcmp(all[i]->name, name) == 0) return all[i];
  return NULL;
}
