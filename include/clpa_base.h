/*
 * clpa_base.h — what every part of clpa shares: version, status codes,
 * storage dtypes, the allocator hook and the last-error message.
 *
 * This header needs nothing but the C standard library, so the host-only
 * parts of clpa (block pool, sequences, radix cache: clpa_kv.h) can be used
 * and tested without OpenCL. clpa.h includes it.
 */
#ifndef CLPA_BASE_H
#define CLPA_BASE_H

#include <stddef.h>
#include <stdint.h>

#include "clpa_codes.h"
#include "clpa_version.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32) && defined(CLPA_BUILDING_DLL)
#define CLPA_API __declspec(dllexport)
#elif defined(__GNUC__)
#define CLPA_API __attribute__((visibility("default")))
#else
#define CLPA_API
#endif

/* ======================================================================
 * Version
 * ==================================================================== */

/* Returns CLPA_VERSION_NUMBER of the library actually linked. */
CLPA_API unsigned clpa_version_number(void);
/* Returns "MAJOR.MINOR.PATCH" of the library actually linked. */
CLPA_API const char *clpa_version_string(void);

/* ======================================================================
 * Status codes
 *
 * Every clpa call returns a clpa_status. The values are frozen. Where a
 * code means what an OpenCL error means, it reuses OpenCL's number (as
 * CLBlast does); clpa's own codes live at -1000 and below.
 * ==================================================================== */
typedef enum clpa_status {
  CLPA_OK = 0,
  CLPA_ERR_DEVICE_NOT_FOUND = -1,  /* no device matches the spec (CL_DEVICE_NOT_FOUND) */
  CLPA_ERR_DEVICE_MEMORY = -4,     /* device allocation failed (CL_MEM_OBJECT_ALLOCATION_FAILURE) */
  CLPA_ERR_OUT_OF_RESOURCES = -5,  /* device ran out of resources (CL_OUT_OF_RESOURCES) */
  CLPA_ERR_OUT_OF_MEMORY = -6,     /* host allocation failed (CL_OUT_OF_HOST_MEMORY) */
  CLPA_ERR_BUILD = -11,            /* kernel build failed; the log is in the message (CL_BUILD_PROGRAM_FAILURE) */
  CLPA_ERR_INVALID_ARG = -30,      /* an argument is invalid; the message names it (CL_INVALID_VALUE) */
  CLPA_ERR_OPENCL = -1000,         /* any other OpenCL error; the message names it */
  CLPA_ERR_UNSUPPORTED = -1001,    /* shape, dtype or feature not supported (message names the value) */
  CLPA_ERR_POOL_EXHAUSTED = -1002, /* the block pool has too few free blocks; nothing was taken */
  CLPA_ERR_BAD_BLOCK = -1003,      /* a kernel saw a block id outside the cache and skipped it */
  CLPA_ERR_IO = -1004,             /* file system error (binary cache) */
  CLPA_ERR_STATE = -1005,          /* the call is not valid in the object's current state */
  CLPA_ERR_BAD_CONTEXT_LEN = -1006,/* a kernel saw a context length < 0 or > max_context_len (used 0) */
  CLPA_ERR_LANE_MISMATCH = -1007,  /* the device's subgroups did not match clpa's lane groups: results invalid */
  CLPA_ERR_VERSION = -1008         /* the application's clpa.h and the library differ in ABI (README's ABI) */
} clpa_status;

/* Returns the enumerator's name ("CLPA_ERR_INVALID_ARG"), or
 * "CLPA_ERR_UNKNOWN" for a value that is not a clpa_status. */
CLPA_API const char *clpa_status_name(clpa_status status);

/* Returns the message of the last failed clpa call made by this thread
 * ("" if none failed yet). Calls that take a clpa_context also keep the
 * message in the context (clpa_context_last_error). The pointer stays valid
 * until this thread's next clpa call. */
CLPA_API const char *clpa_last_error(void);

/* ======================================================================
 * Storage dtypes of the KV cache (and of query/output where allowed)
 * ==================================================================== */
typedef enum clpa_dtype {
  CLPA_DTYPE_F32 = CLPA_CODE_F32,
  CLPA_DTYPE_F16 = CLPA_CODE_F16,           /* IEEE half, through vload_half/vstore_half */
  CLPA_DTYPE_BF16 = CLPA_CODE_BF16,         /* bfloat16 stored as 16-bit words */
  CLPA_DTYPE_FP8_E4M3 = CLPA_CODE_FP8_E4M3, /* OCP fp8 e4m3fn (max 448, no inf), with a per-tensor scale */
  CLPA_DTYPE_FP8_E5M2 = CLPA_CODE_FP8_E5M2, /* OCP fp8 e5m2 (max 57344), with a per-tensor scale */
  CLPA_DTYPE_COUNT_ = CLPA_CODE_DTYPE_COUNT
} clpa_dtype;

/* Returns the size of one element in bytes, or 0 for an invalid dtype. */
CLPA_API size_t clpa_dtype_size(clpa_dtype dtype);
/* Returns "f32", "f16", "bf16", "fp8_e4m3", "fp8_e5m2", or "invalid". */
CLPA_API const char *clpa_dtype_name(clpa_dtype dtype);
/* Parses a name as printed by clpa_dtype_name. Returns CLPA_OK or
 * CLPA_ERR_INVALID_ARG. */
CLPA_API clpa_status clpa_dtype_parse(const char *name, clpa_dtype *out);

/* Host conversions between float and the storage dtypes, bit for bit as
 * the kernels store and load (host/dtype_convert.h has the notes): every
 * conversion from float rounds to nearest even and keeps subnormals;
 * every conversion to float is exact. fp8 e4m3 is OCP e4m3fn (no inf:
 * beyond +-448, inf included, saturates); e5m2 keeps inf and saturates
 * finite overflow at +-57344; fp8 NaN encodes as sign | 0x7f. */
CLPA_API uint16_t clpa_f32_to_f16(float f);
CLPA_API float clpa_f16_to_f32(uint16_t h);
CLPA_API uint16_t clpa_f32_to_bf16(float f);
CLPA_API float clpa_bf16_to_f32(uint16_t h);
/* dtype CLPA_DTYPE_FP8_E4M3 or CLPA_DTYPE_FP8_E5M2; any other dtype gives
 * 0 (to fp8) or NaN (to float). */
CLPA_API uint8_t clpa_f32_to_fp8(float f, clpa_dtype dtype);
CLPA_API float clpa_fp8_to_f32(uint8_t code, clpa_dtype dtype);

/* Encodes n floats into n storage elements of dtype at dst (f32: a copy;
 * f16/bf16: uint16_t words; fp8: bytes), as clpa_reshape_and_cache does:
 * fp8 stores fp8(src[i] / scale), the quotient in f32 (vLLM's per-tensor
 * k_scale / v_scale); other dtypes ignore scale. Returns CLPA_OK, or
 * CLPA_ERR_INVALID_ARG (an invalid dtype, NULL pointers with n > 0, an fp8
 * scale that is not finite and > 0) with nothing written. */
CLPA_API clpa_status clpa_dtype_encode(clpa_dtype dtype, const float *src, void *dst, size_t n,
                                       float scale);
/* Decodes n storage elements of dtype at src into floats: the exact value,
 * for fp8 times scale in f32 (one rounding, as the kernels do). Returns as
 * clpa_dtype_encode. */
CLPA_API clpa_status clpa_dtype_decode(clpa_dtype dtype, const void *src, float *dst, size_t n,
                                       float scale);

/* ======================================================================
 * Allocator hook
 *
 * One function does everything, like Lua's lua_Alloc:
 *   fn(user, NULL, 0, n)      allocate n bytes
 *   fn(user, p, old, n)       resize p from old to n bytes (n > 0)
 *   fn(user, p, old, 0)       free p; returns NULL
 * Returning NULL for n > 0 is an allocation failure, which every clpa
 * object survives intact; tests use this to inject out-of-memory.
 * A NULL fn means the C library's malloc/realloc/free.
 * ==================================================================== */
typedef void *(*clpa_alloc_fn)(void *user, void *ptr, size_t old_size, size_t new_size);
typedef struct clpa_allocator {
  clpa_alloc_fn fn;
  void *user;
} clpa_allocator;

#ifdef __cplusplus
}
#endif
#endif /* CLPA_BASE_H */
