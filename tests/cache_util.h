/*
 * cache_util.h — what the cache tests share: random bytes, reading and
 * writing whole cache slices, and a byte comparison of cache contents
 * that names the first differing element in cache coordinates.
 */
#ifndef CLPA_TEST_CACHE_UTIL_H
#define CLPA_TEST_CACHE_UTIL_H

#include <stdio.h>

#include "cl_util.h"
#include "dtype_convert.h"

static inline void fill_random_bytes(void *p, size_t n) {
  unsigned char *b = p;
  for (size_t i = 0; i < n; i++) b[i] = (unsigned char)rng_next();
}

/* Writes n bytes of host memory to the start of a buffer (blocking). */
static inline void test_write(clpa_context *ctx, cl_mem m, const void *host, size_t n) {
  cl_int err =
      clEnqueueWriteBuffer(clpa_context_cl_queue(ctx), m, CL_TRUE, 0, n, host, 0, NULL, NULL);
  if (err != CL_SUCCESS) {
    printf("not ok - clEnqueueWriteBuffer failed: %d\n", err);
    exit(1);
  }
}

/* One layer's key (v = 0) or value (v = 1) slice of a device cache. */
static inline cl_mem slice_mem(const clpa_cache *c, int layer, int v) {
  return v ? clpa_cache_value(c, layer) : clpa_cache_key(c, layer);
}

/* Host copies of every slice of a cache: slices[2 * layer + v]. */
typedef struct cache_image {
  int n;
  size_t bytes; /* per slice */
  unsigned char **slices;
} cache_image;

static inline cache_image image_alloc(const clpa_cache *c) {
  clpa_cache_info in;
  clpa_cache_get_info(c, &in);
  cache_image im = {2 * in.num_layers, (size_t)in.layer_bytes, NULL};
  im.slices = calloc((size_t)im.n, sizeof *im.slices);
  for (int s = 0; s < im.n; s++) im.slices[s] = malloc(im.bytes ? im.bytes : 1);
  return im;
}

static inline void image_free(cache_image *im) {
  for (int s = 0; s < im->n; s++) free(im->slices[s]);
  free(im->slices);
  im->slices = NULL;
}

/* Fills every slice of a device or host cache with random bytes and keeps
 * them in a new image. */
static inline cache_image cache_randomize(clpa_context *ctx, const clpa_cache *c) {
  cache_image im = image_alloc(c);
  for (int s = 0; s < im.n; s++) {
    fill_random_bytes(im.slices[s], im.bytes);
    void *host = s & 1 ? clpa_cache_value_host(c, s / 2) : clpa_cache_key_host(c, s / 2);
    if (host)
      memcpy(host, im.slices[s], im.bytes);
    else
      test_write(ctx, slice_mem(c, s / 2, s & 1), im.slices[s], im.bytes);
  }
  return im;
}

/* Reads every slice of a cache (after clFinish for host caches). */
static inline cache_image cache_snapshot(clpa_context *ctx, const clpa_cache *c) {
  cache_image im = image_alloc(c);
  clpa_context_finish(ctx);
  for (int s = 0; s < im.n; s++) {
    void *host = s & 1 ? clpa_cache_value_host(c, s / 2) : clpa_cache_key_host(c, s / 2);
    if (host)
      memcpy(im.slices[s], host, im.bytes);
    else
      test_read(ctx, slice_mem(c, s / 2, s & 1), im.slices[s], im.bytes);
  }
  return im;
}

/* Compares two images byte for byte; on a difference prints the slice, the
 * block and the byte within it, and returns 0. */
static inline int image_equal(const cache_image *got, const cache_image *want,
                              size_t block_bytes, const char *what) {
  for (int s = 0; s < want->n; s++)
    for (size_t i = 0; i < want->bytes; i++)
      if (got->slices[s][i] != want->slices[s][i]) {
        diag("%s: layer %d %s, block %zu byte %zu: got 0x%02x want 0x%02x", what, s / 2,
             s & 1 ? "value" : "key", i / block_bytes, i % block_bytes, got->slices[s][i],
             want->slices[s][i]);
        return 0;
      }
  return 1;
}

/* Element equality in a storage dtype: same bits, or both NaN (devices
 * may canonicalise NaNs differently; see dtype_convert.h). */
static inline int elem_equal(clpa_dtype d, const unsigned char *a, const unsigned char *b) {
  size_t es = clpa_dtype_size(d);
  if (memcmp(a, b, es) == 0) return 1;
  float fa, fb;
  clpa_dtype_decode(d, a, &fa, 1, 1.0f);
  clpa_dtype_decode(d, b, &fb, 1, 1.0f);
  return isnan(fa) && isnan(fb);
}

#endif
