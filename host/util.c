/* util.c — error messages, allocator hook, hashing (see util.h). */
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static _Thread_local char tls_error[CLPA_ERROR_MAX];

unsigned clpa_version_number(void) { return CLPA_VERSION_NUMBER; }

const char *clpa_version_string(void) {
#define CLPA_STR2(x) #x
#define CLPA_STR(x) CLPA_STR2(x)
  return CLPA_STR(CLPA_VERSION_MAJOR) "." CLPA_STR(CLPA_VERSION_MINOR) "." CLPA_STR(
      CLPA_VERSION_PATCH);
}

const char *clpa_status_name(clpa_status status) {
  switch (status) {
#define CASE(x) \
  case x:       \
    return #x
    CASE(CLPA_OK);
    CASE(CLPA_ERR_DEVICE_NOT_FOUND);
    CASE(CLPA_ERR_DEVICE_MEMORY);
    CASE(CLPA_ERR_OUT_OF_RESOURCES);
    CASE(CLPA_ERR_OUT_OF_MEMORY);
    CASE(CLPA_ERR_BUILD);
    CASE(CLPA_ERR_INVALID_ARG);
    CASE(CLPA_ERR_OPENCL);
    CASE(CLPA_ERR_UNSUPPORTED);
    CASE(CLPA_ERR_POOL_EXHAUSTED);
    CASE(CLPA_ERR_BAD_BLOCK);
    CASE(CLPA_ERR_IO);
    CASE(CLPA_ERR_STATE);
    CASE(CLPA_ERR_BAD_CONTEXT_LEN);
    CASE(CLPA_ERR_LANE_MISMATCH);
    CASE(CLPA_ERR_VERSION);
#undef CASE
  }
  return "CLPA_ERR_UNKNOWN";
}

const char *clpa_last_error(void) { return tls_error; }

clpa_status clpa_err_within(char *ctx_buf, clpa_status status, const char *field) {
  char why[sizeof tls_error];
  const char *sep = strstr(tls_error, ": ");
  const size_t head = sep ? (size_t)(sep - tls_error) + 2 : 0;
  snprintf(why, sizeof why, "%s", tls_error + head);
  snprintf(tls_error + head, sizeof tls_error - head, "%s: %s", field, why);
  if (ctx_buf) memcpy(ctx_buf, tls_error, sizeof tls_error);
  return status;
}

void clpa_err_keep(char *ctx_buf) { memcpy(ctx_buf, tls_error, sizeof tls_error); }

void clpa_err_clear(void) { tls_error[0] = '\0'; }

static _Thread_local const char *tls_api;

int clpa_api_begin(const char *name) {
  if (tls_api) return 0;
  tls_api = name;
  tls_error[0] = '\0';
  return 1;
}

void clpa_api_end(int token) {
  if (token) tls_api = NULL;
}

clpa_status clpa_err_vset(char *ctx_buf, clpa_status status, const char *func,
                          const char *fmt, va_list ap) {
  int n = snprintf(tls_error, sizeof tls_error, "%s: ", tls_api ? tls_api : func);
  if (n < 0 || (size_t)n >= sizeof tls_error) n = 0;
  vsnprintf(tls_error + n, sizeof tls_error - (size_t)n, fmt, ap);
  if (ctx_buf) memcpy(ctx_buf, tls_error, sizeof tls_error);
  return status;
}

clpa_status clpa_err_set(char *ctx_buf, clpa_status status, const char *func,
                         const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  clpa_err_vset(ctx_buf, status, func, fmt, ap);
  va_end(ap);
  return status;
}

void clpa_err_append(char *ctx_buf, const char *text) {
  size_t n = strlen(tls_error);
  snprintf(tls_error + n, sizeof tls_error - n, "%s", text);
  if (ctx_buf) memcpy(ctx_buf, tls_error, sizeof tls_error);
}

size_t clpa_dtype_size(clpa_dtype dtype) {
  switch (dtype) {
    case CLPA_DTYPE_F32: return 4;
    case CLPA_DTYPE_F16:
    case CLPA_DTYPE_BF16: return 2;
    case CLPA_DTYPE_FP8_E4M3:
    case CLPA_DTYPE_FP8_E5M2: return 1;
    default: return 0;
  }
}

static const char *const dtype_names[CLPA_DTYPE_COUNT_] = {"f32", "f16", "bf16", "fp8_e4m3",
                                                           "fp8_e5m2"};

const char *clpa_dtype_name(clpa_dtype dtype) {
  if ((unsigned)dtype >= CLPA_DTYPE_COUNT_) return "invalid";
  return dtype_names[dtype];
}

clpa_status clpa_dtype_parse(const char *name, clpa_dtype *out) {
  CLPA_CHECK(NULL, !name || !out, CLPA_ERR_INVALID_ARG, "name and out must not be NULL");
  for (int i = 0; i < CLPA_DTYPE_COUNT_; i++) {
    if (strcmp(name, dtype_names[i]) == 0) {
      *out = (clpa_dtype)i;
      return CLPA_OK;
    }
  }
  return CLPA_FAIL(NULL, CLPA_ERR_INVALID_ARG,
                   "unknown dtype '%s' (expected f32, f16, bf16, fp8_e4m3 or fp8_e5m2)", name);
}

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

int32_t clpa_block_mask_uncovered(int32_t num_seqs, const int32_t *cu_seqlens_q,
                                  const int32_t *cached_lens, int32_t mask_block,
                                  int32_t mask_q_blocks, int32_t mask_k_blocks) {
  for (int32_t s = 0; s < num_seqs; s++) {
    const int64_t n = (int64_t)cu_seqlens_q[s + 1] - cu_seqlens_q[s], len = cached_lens[s] + n;
    if (n > 0 && ((n - 1) / mask_block >= mask_q_blocks || (len - 1) / mask_block >= mask_k_blocks))
      return s;
  }
  return -1;
}

uint64_t clpa_hash64(uint64_t h, const void *data, size_t len) {
  const unsigned char *p = data;
  for (size_t i = 0; i < len; i++) {
    h ^= p[i];
    h *= 0x100000001b3ULL;
  }
  return h;
}

int clpa_size_mul_add(size_t a, size_t b, size_t c, size_t *out) {
  if (b && a > (SIZE_MAX - c) / b) return 0;
  *out = a * b + c;
  return 1;
}

/* The first occurrence of `needle` (NUL-terminated) in p[0, len), or NULL. */
static const unsigned char *find_bytes(const unsigned char *p, size_t len, const char *needle) {
  const size_t n = strlen(needle);
  for (size_t i = 0; n <= len && i <= len - n; i++)
    if (memcmp(p + i, needle, n) == 0) return p + i;
  return NULL;
}

unsigned char *clpa_ptx_with_maxnreg(const unsigned char *ptx, size_t len, int n,
                                     size_t *out_len) {
  if (!ptx || n <= 0) return NULL;
  char dir[32];
  const int dl = snprintf(dir, sizeof dir, ".maxnreg %d\n", n);
  /* Each entry's body opens at the first line that is "{" after it. */
  size_t entries = 0;
  for (const unsigned char *e = find_bytes(ptx, len, ".entry "); e;) {
    const size_t at = (size_t)(e - ptx);
    const unsigned char *body = find_bytes(e, len - at, "\n{");
    if (!body) return NULL;
    const unsigned char *again = find_bytes(e, (size_t)(body - e), ".maxnreg");
    if (again) return NULL;
    entries++;
    e = find_bytes(body, len - (size_t)(body - ptx), ".entry ");
  }
  if (entries == 0) return NULL;
  unsigned char *out = malloc(len + entries * (size_t)dl);
  if (!out) return NULL;
  size_t o = 0, i = 0;
  for (const unsigned char *e = find_bytes(ptx, len, ".entry "); e;) {
    const unsigned char *body = find_bytes(e, len - (size_t)(e - ptx), "\n{");
    const size_t cut = (size_t)(body - ptx) + 1; /* after the newline */
    memcpy(out + o, ptx + i, cut - i), o += cut - i, i = cut;
    memcpy(out + o, dir, (size_t)dl), o += (size_t)dl;
    e = find_bytes(body, len - (size_t)(body - ptx), ".entry ");
  }
  memcpy(out + o, ptx + i, len - i), o += len - i;
  *out_len = o;
  return out;
}

int clpa_reserved_used(const uint64_t *reserved, int n) {
  for (int i = 0; i < n; i++)
    if (reserved[i] != 0) return i;
  return -1;
}
