/*
 * prefill_paths.h — inside lib/ only: which prefill kernel a call takes
 * (prefill_paths.c): path and tile shape, the mma path's rows a warp, and
 * the build (clpa_prefill_spec) they make. prefill.c calls these while it
 * fills a plan.
 */
#ifndef CLPA_LIB_PREFILL_PATHS_H
#define CLPA_LIB_PREFILL_PATHS_H

#include "kernels.h"
#include "internal.h"

/* Path (a clpa_prefill_path) and shape (rows a work-group, keys a tile):
 * forced, or the tuning table's, or rows (4 a work-item) on CPUs, mma on
 * NVIDIA where it applies, else the first tile shape that fits local
 * memory. Returns CLPA_OK, CLPA_ERR_INVALID_ARG (a bad field) or
 * CLPA_ERR_UNSUPPORTED (a forced path or shape the cache or device cannot
 * take), with the reason in the context's error. */
clpa_status clpa_prefill_pick_path(clpa_context *ctx, const clpa_prefill_params *p,
                                   const clpa_kv_layout *kv, int *path, int *rows, int *keys);

/* The mma path's row tiles of 16 a warp (1 or 2) for work-groups of
 * `rows` rows and tiles of *keys keys over the sequences from `from` on,
 * and with 2 the keys a tile where the tuning row takes 64 for the table's
 * 32. Refuses a forced 32 rows a warp that cannot be. */
clpa_status clpa_prefill_mma_mt(clpa_context *ctx, const clpa_prefill_params *p,
                                const clpa_kv_layout *kv, int rows, int *keys, int32_t from,
                                int *mt);

/* The build of a path and shape (items 0: the plan sets it). */
clpa_prefill_spec clpa_prefill_spec_for(const clpa_context *ctx, const clpa_prefill_params *p,
                                        const clpa_kv_layout *kv, int path, int rows, int keys,
                                        int mt);

#endif
