/*
 * binary_cache.h — the on-disk cache of program binaries (binary_cache.c),
 * used by the program cache (program.c). Not installed.
 */
#ifndef CLPA_LIB_BINARY_CACHE_H
#define CLPA_LIB_BINARY_CACHE_H

#include "internal.h"

/* The binary stored under key in ctx's cache directory (caller frees), or
 * NULL when there is none or it cannot be trusted; a file that was there
 * but refused counts in ctx->stats.disk_rejected. */
unsigned char *clpa_disk_cache_load(clpa_context *ctx, const char *key, size_t *len);

/* Stores bin under key, then prunes the directory to ctx->cache_max_bytes.
 * A failure only costs a later rebuild: it counts in
 * ctx->stats.disk_write_failed and, the first time in the process, is
 * said on stderr. */
void clpa_disk_cache_store(clpa_context *ctx, const char *key, const unsigned char *bin,
                           size_t len);

#endif
