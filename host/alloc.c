/* alloc.c — allocation through the allocator hook (see alloc.h). */
#include "alloc.h"

#include <stdlib.h>
#include <string.h>

void *clpa_mem_realloc(const clpa_allocator *a, void *ptr, size_t old_size, size_t new_size) {
  if (a && a->fn) return a->fn(a->user, ptr, old_size, new_size);
  if (new_size == 0) {
    free(ptr);
    return NULL;
  }
  return realloc(ptr, new_size);
}

void *clpa_mem_alloc(const clpa_allocator *a, size_t size) {
  return clpa_mem_realloc(a, NULL, 0, size ? size : 1);
}

void *clpa_mem_calloc(const clpa_allocator *a, size_t count, size_t size) {
  if (size && count > SIZE_MAX / size) return NULL;
  void *p = clpa_mem_alloc(a, count * size);
  if (p && count * size > 0) memset(p, 0, count * size);
  return p;
}

void clpa_mem_free(const clpa_allocator *a, void *ptr, size_t size) {
  if (ptr) clpa_mem_realloc(a, ptr, size ? size : 1, 0);
}
