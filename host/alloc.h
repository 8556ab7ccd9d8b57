/*
 * alloc.h — allocation through clpa_allocator (clpa_base.h), the hook every
 * host object takes. Not installed.
 */
#ifndef CLPA_HOST_ALLOC_H
#define CLPA_HOST_ALLOC_H

#include "clpa_base.h"

/* Allocation through the hook; a->fn == NULL means libc. */
void *clpa_mem_alloc(const clpa_allocator *a, size_t size);
void *clpa_mem_calloc(const clpa_allocator *a, size_t count, size_t size);
void *clpa_mem_realloc(const clpa_allocator *a, void *ptr, size_t old_size, size_t new_size);
void clpa_mem_free(const clpa_allocator *a, void *ptr, size_t size);

#endif
