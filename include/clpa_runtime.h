/*
 * clpa_runtime.h — the runtime the attention ops run on: the context (a
 * device and its queue, or the application's), the devices and what they
 * can do, the program cache and its statistics, the tuning entry and the
 * fault word the kernels set. clpa.h includes it; it may also be
 * included alone.
 *
 * Sections:
 *   1. Context: pick a device (or wrap the application's), last error
 *   2. Devices: list them and their capabilities
 *   3. Kernels: program cache controls and statistics, tuning
 *   Faults: what the kernels found in device-side ids and lengths
 */
#ifndef CLPA_RUNTIME_H
#define CLPA_RUNTIME_H

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 300
#endif
#include <CL/cl.h>

#include "clpa_base.h"

#ifdef __cplusplus
extern "C" {
#endif


/* ======================================================================
 * 1. Context
 * ==================================================================== */

typedef struct clpa_context clpa_context;

/* Which lane-group path the kernels use to emulate a CUDA warp. */
typedef enum clpa_lanes {
  CLPA_LANES_AUTO = 0,     /* pick from the device (config only) */
  CLPA_LANES_EMULATED = 1, /* local memory + barriers: any OpenCL 1.2 device */
  CLPA_LANES_SUBGROUP = 2, /* cl_khr_subgroups / cl_intel_subgroups / __opencl_c_subgroups with shuffles */
  CLPA_LANES_NV_PTX = 3    /* inline-PTX shfl.sync on NVIDIA's OpenCL */
} clpa_lanes;

/* Returns "auto", "emulated", "subgroup", "nv_ptx" or "invalid". */
CLPA_API const char *clpa_lanes_name(clpa_lanes lanes);

typedef struct clpa_context_config {
  /* CLPA_VERSION_NUMBER of the clpa.h the application was built with
   * (clpa_context_config_init records it). clpa_context_create refuses a
   * header whose ABI differs from the library's (README's ABI): the minor
   * version must match while the major is 0, the major after. */
  unsigned header_version;
  /* Device spec: "P:D" (platform and device indices, as clpa-info prints
   * them), or a case-insensitive substring of the device, vendor or
   * platform name. NULL: the CLPA_DEVICE environment variable, else the
   * first GPU, else the first device. */
  const char *device;
  /* Wrap the application's own objects instead: when cl_ctx is not NULL,
   * cl_dev and cl_queue must be given too, belong to it, and clpa creates
   * no OpenCL object of its own besides programs and kernels. clpa retains
   * them and releases its references in clpa_context_destroy. */
  cl_context cl_ctx;
  cl_device_id cl_dev;
  cl_command_queue cl_queue;
  /* Create clpa's own queue with profiling enabled (clpa-bench): 0 or 1. */
  int profiling;
  /* On-disk cache of program binaries (section 3): 1 (default) on, 0 off.
   * Also off when the environment has CLPA_NO_BINARY_CACHE=1 (0 or unset:
   * as configured; any other value is refused). */
  int binary_cache;
  /* Directory of the binary cache; NULL: $XDG_CACHE_HOME/clpa, else
   * $HOME/.cache/clpa, else (no HOME: cron, services) $TMPDIR/clpa-<uid>
   * (/tmp/clpa-<uid>). It must belong to the user and not be writable by
   * group or others, else it is not used (section 3). */
  const char *cache_dir;
  /* Force a lane-group path (tests, benchmarks); CLPA_LANES_AUTO picks. A
   * forced path the device cannot run is refused with CLPA_ERR_UNSUPPORTED. */
  clpa_lanes lanes;
  /* Cap of the binary cache directory in bytes; 0: the CLPA_CACHE_MAX_MB
   * environment variable (MiB), else CLPA_CACHE_MAX_DEFAULT. */
  uint64_t cache_max_bytes;
  uint64_t reserved[8]; /* 0 (what ..._init leaves): room for fields to come, README's ABI */
} clpa_context_config;

/* Default cap of the binary cache: 256 MiB. */
#define CLPA_CACHE_MAX_DEFAULT ((uint64_t)256 << 20)

/* Fills cfg with the defaults (all NULL/0, binary_cache 1, lanes AUTO)
 * and header_version with this header's CLPA_VERSION_NUMBER. A macro, so
 * that the version is the application's; a binding calls
 * clpa_context_config_init_version with the version it was written for. */
#define clpa_context_config_init(cfg) clpa_context_config_init_version((cfg), CLPA_VERSION_NUMBER)
CLPA_API void clpa_context_config_init_version(clpa_context_config *cfg, unsigned header_version);

/* Creates a context on the device the config selects (cfg NULL = defaults).
 * Returns CLPA_OK and *out, or CLPA_ERR_DEVICE_NOT_FOUND (bad or unmatched
 * spec, no OpenCL platform, or platforms without devices: the message
 * tells these apart), CLPA_ERR_INVALID_ARG, CLPA_ERR_UNSUPPORTED (a forced
 * lanes path the device cannot run, an out-of-order cl_queue),
 * CLPA_ERR_VERSION (header_version of another ABI, or 0), CLPA_ERR_OPENCL
 * (a platform failed to start: named, with its error),
 * CLPA_ERR_OUT_OF_MEMORY; on failure *out is NULL and clpa_last_error()
 * says why. */
CLPA_API clpa_status clpa_context_create(const clpa_context_config *cfg, clpa_context **out);

/* Releases everything the context holds (NULL is fine). Does not wait for
 * the queue unless clpa created it. */
CLPA_API void clpa_context_destroy(clpa_context *ctx);

/* Returns the message of the context's last failed call ("" if none). */
CLPA_API const char *clpa_context_last_error(const clpa_context *ctx);

/* The OpenCL objects the context uses (its own or the wrapped ones). */
CLPA_API cl_context clpa_context_cl_context(const clpa_context *ctx);
CLPA_API cl_device_id clpa_context_cl_device(const clpa_context *ctx);
CLPA_API cl_command_queue clpa_context_cl_queue(const clpa_context *ctx);

/* Waits for the context's queue (clFinish). Returns CLPA_OK or CLPA_ERR_OPENCL. */
CLPA_API clpa_status clpa_context_finish(clpa_context *ctx);

/* ======================================================================
 * 2. Devices
 * ==================================================================== */

typedef struct clpa_device_info {
  int platform_index, device_index; /* as "P:D" device specs use them */
  char platform_name[128], platform_version[128];
  char name[128], vendor[128], driver_version[128], device_version[128], c_version[64];
  int is_gpu, is_cpu;
  unsigned compute_units;
  uint64_t global_mem_bytes, local_mem_bytes, max_alloc_bytes;
  size_t max_work_group_size;
  int has_subgroups;       /* cl_khr_subgroups, cl_intel_subgroups or __opencl_c_subgroups */
  int has_subgroup_shuffle;/* cl_khr_subgroup_shuffle or cl_intel_subgroups */
  int has_fp16, has_fp64;  /* cl_khr_fp16 / cl_khr_fp64 (f16 storage needs neither) */
  clpa_lanes lanes;        /* the lane-group path clpa picks on this device */
  int nv_compute_capability; /* NVIDIA: major * 10 + minor (9.0 gives 90); 0 elsewhere */
  unsigned native_float_width; /* CL_DEVICE_NATIVE_VECTOR_WIDTH_FLOAT (a CPU's SIMD floats) */
  uint64_t reserved[8]; /* room for fields to come (README's ABI) */
} clpa_device_info;

/* Lists every device of every platform. Writes at most cap entries to out
 * (out may be NULL when cap is 0) and the total number to *count.
 * Returns CLPA_OK (also with zero devices: then clpa_last_error() says
 * whether no platform is installed or which platform listed no device),
 * CLPA_ERR_INVALID_ARG, or CLPA_ERR_OPENCL (or another status mapped from
 * the OpenCL error) when a platform failed to start and no other platform
 * has a device; the message names the platform and the error. A platform
 * that fails while another has devices is left out of the list. */
CLPA_API clpa_status clpa_devices_list(clpa_device_info *out, size_t cap, size_t *count);

/* Resolves a device spec (NULL: CLPA_DEVICE, else the default rule) to the
 * index into clpa_devices_list's order. Returns CLPA_OK,
 * CLPA_ERR_DEVICE_NOT_FOUND, CLPA_ERR_INVALID_ARG (NULL index) or
 * CLPA_ERR_OPENCL. */
CLPA_API clpa_status clpa_device_select(const char *spec, size_t *index);

/* Capabilities of the context's device. Returns CLPA_OK or CLPA_ERR_INVALID_ARG. */
CLPA_API clpa_status clpa_context_device_info(const clpa_context *ctx, clpa_device_info *out);

/* ======================================================================
 * 3. Kernels and the program cache
 *
 * Kernel sources are embedded in the library. A program is built on first
 * use for each specialization (a set of -D options), kept in the context
 * and, unless disabled, stored on disk as a binary keyed by device name,
 * driver version, platform version, source hash, options and clpa version.
 *
 * A program binary is native code the driver runs, so clpa uses only what
 * this user wrote: the cache directory (clpa_context_config.cache_dir) is
 * created 0700 and not used at all when it belongs to another user or is
 * writable by group or others; a cache file is loaded only when it is a
 * regular file (not a symlink, FIFO or device) owned by the user, not
 * writable by group or others, whole and with a matching key. Anything
 * else is rebuilt from source and replaced. Files are written under a
 * unique temporary name (mode 0600) and renamed into place, so processes
 * may share the directory.
 *
 * The directory is kept under a cap (cache_max_bytes, CLPA_CACHE_MAX_MB,
 * 256 MiB by default): after each write the least recently used files go
 * first (a load refreshes a file's modification time). When the directory
 * cannot be used or written, disk_write_failed counts the programs that
 * could not be stored, and the first such failure in a process prints one
 * line on stderr saying which directory and why.
 * ==================================================================== */

typedef struct clpa_program_stats {
  unsigned built_from_source; /* programs compiled from source */
  unsigned loaded_from_disk;  /* programs loaded from the binary cache */
  unsigned memory_hits;       /* lookups answered by the in-memory cache */
  unsigned disk_rejected;     /* cache files that were corrupt or refused (then rebuilt) */
  double build_seconds;       /* wall time spent building or loading programs */
  unsigned disk_write_failed; /* built programs that could not be stored (directory unusable or unwritable) */
  unsigned disk_pruned;       /* cache files removed to keep the directory under its cap */
  uint64_t reserved[8]; /* room for fields to come (README's ABI) */
} clpa_program_stats;

/* Returns the context's program-cache counters. */
CLPA_API clpa_status clpa_context_program_stats(const clpa_context *ctx, clpa_program_stats *out);

/* Returns the binary cache directory the context uses, or NULL when the
 * disk cache is off. Owned by the context. */
CLPA_API const char *clpa_context_cache_dir(const clpa_context *ctx);

/* Builds (or finds) the program of a kernel family ("smoke", "decode", …)
 * for the given extra -D options, and returns it in *out (owned by the
 * context; do not release). Mostly for tests and tools that warm the cache.
 * Returns CLPA_OK, CLPA_ERR_INVALID_ARG (unknown family), CLPA_ERR_BUILD
 * (the build log is in the message) or CLPA_ERR_OPENCL. */
CLPA_API clpa_status clpa_program_get(clpa_context *ctx, const char *family, const char *options,
                                      cl_program *out);

/* Runs a tiny kernel (y = a*x + y over n floats, read back and checked on
 * the host) to prove the device, the compiler and the queue work.
 * Returns CLPA_OK, or the failing call's status. */
CLPA_API clpa_status clpa_smoke_test(clpa_context *ctx, size_t n);

/* What clpa picks on this device when params leave a choice open: the
 * entry of the tuning table (lib/tuning.c, filled from clpa-bench runs)
 * that matches the device's name, else its vendor, else its type, else
 * the defaults. */
typedef struct clpa_tuning {
  char matched[128];          /* "device:NAME", "vendor:NAME", "type:cpu", "type:gpu" or "default" */
  int32_t decode_partition;   /* decode v2 tokens per partition when partition_size is 0 */
  int32_t prefill_path;       /* a clpa_prefill_path, when params.path is AUTO (AUTO: by type) */
  int32_t prefill_rows;       /* rows_per_group when 0 (0: the local-memory heuristic) */
  int32_t prefill_keys;       /* keys_per_tile when 0 (tiles only; 0: the heuristic) */
  int32_t decode_resident;    /* decode's lanes path: work-groups a compute unit holds (0: not
                                 known; the plan then only keeps every unit busy) */
  uint64_t reserved[8]; /* room for fields to come (README's ABI) */
} clpa_tuning;

/* The context's tuning entry. Returns CLPA_OK or CLPA_ERR_INVALID_ARG. */
CLPA_API clpa_status clpa_context_tuning(const clpa_context *ctx, clpa_tuning *out);

/* ======================================================================
 * Faults
 * ==================================================================== */

/* The fault bits the kernels set are CLPA_FAULT_* in clpa_codes.h. */

/* Waits for the queue, reads the fault word into *faults (may be NULL)
 * and clears it. Returns CLPA_OK when no bit was set; else one status for
 * the gravest bit set (*faults and the message name every bit):
 *   CLPA_ERR_LANE_MISMATCH    CLPA_FAULT_LANES (results of those launches are invalid)
 *   CLPA_ERR_BAD_BLOCK        CLPA_FAULT_BAD_BLOCK (the entry was skipped)
 *   CLPA_ERR_BAD_CONTEXT_LEN  CLPA_FAULT_BAD_CONTEXT_LEN (the length was taken as 0)
 * or CLPA_ERR_OPENCL when reading the word failed. */
CLPA_API clpa_status clpa_context_check_faults(clpa_context *ctx, int32_t *faults);

#ifdef __cplusplus
}
#endif

#endif /* CLPA_RUNTIME_H */
