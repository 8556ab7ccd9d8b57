/*
 * hash.h — the hash of the program caches' keys and sources. Not installed.
 */
#ifndef CLPA_HOST_HASH_H
#define CLPA_HOST_HASH_H

#include <stddef.h>
#include <stdint.h>

/* 64-bit FNV-1a, used for cache keys and source hashes. */
uint64_t clpa_hash64(uint64_t h, const void *data, size_t len);
#define CLPA_HASH64_INIT 0xcbf29ce484222325ULL

#endif
