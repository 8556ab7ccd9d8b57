/*
 * context.c — devices (enumerate, describe, select by spec) and the
 * context that holds the chosen device, its queue and the program cache.
 */
#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

/* OpenCL implementations set up their platforms and devices lazily, and
 * not all of them guard that: two threads in clGetPlatformIDs or
 * clGetDeviceIDs at once crash PoCL 3.1 (5 runs in 6). So clpa never has
 * two threads enumerating, or creating a context or queue, at once; it
 * holds this lock from enumeration to the new queue. */
static pthread_mutex_t cl_setup_lock = PTHREAD_MUTEX_INITIALIZER;

typedef struct dev_ref {
  cl_platform_id platform;
  cl_device_id device;
  int pi, di;
} dev_ref;

/* Why a platform gave no device, appended to why (cap bytes, "" first). */
static void note_platform(char *why, size_t cap, cl_platform_id p, cl_int err) {
  char name[128] = "";
  if (clGetPlatformInfo(p, CL_PLATFORM_NAME, sizeof name, name, NULL) != CL_SUCCESS) name[0] = 0;
  name[sizeof name - 1] = '\0';
  size_t used = strlen(why);
  snprintf(why + used, cap - used, "%splatform '%s' lists no device: clGetDeviceIDs gave %s (%d)",
           used ? "; " : "", name, clpa_cl_error_name(err), (int)err);
}

/* Every device of every platform, in platform then device order. Zero
 * devices is not an error when there is no platform (no ICD installed) or
 * when the platforms report CL_DEVICE_NOT_FOUND; then why (cap bytes)
 * says which. A platform that fails otherwise is skipped when another has
 * devices (as clinfo does), and is the error when none has. Called with
 * cl_setup_lock held. */
static clpa_status enumerate(dev_ref **out, size_t *count, char *why, size_t cap) {
  *out = NULL;
  *count = 0;
  why[0] = '\0';
  cl_uint np = 0;
  cl_int err = clGetPlatformIDs(0, NULL, &np);
  if (err == -1001 /* CL_PLATFORM_NOT_FOUND_KHR */ || (err == CL_SUCCESS && np == 0)) {
    snprintf(why, cap, "no OpenCL platform found: no ICD is installed (e.g. pocl-opencl-icd), or"
             " OCL_ICD_VENDORS / OCL_ICD_FILENAMES point to none");
    return CLPA_OK;
  }
  /* Any other error: a loader and ICDs are there, but a platform failed. */
  if (err != CL_SUCCESS)
    return clpa_err_set(NULL, clpa_status_from_cl(err), __func__,
                        "clGetPlatformIDs failed: %s (%d): an OpenCL platform is installed but"
                        " failed to start", clpa_cl_error_name(err), (int)err);
  cl_platform_id *plats = calloc(np, sizeof *plats);
  if (!plats) return CLPA_FAIL(NULL, CLPA_ERR_OUT_OF_MEMORY, "out of memory");
  err = clGetPlatformIDs(np, plats, NULL);
  if (err != CL_SUCCESS) {
    free(plats);
    return CLPA_CL_FAIL((clpa_context *)NULL, err, "clGetPlatformIDs");
  }
  dev_ref *list = NULL;
  size_t n = 0;
  cl_int hard = CL_SUCCESS; /* a platform error other than "no device" */
  for (cl_uint p = 0; p < np; p++) {
    cl_uint nd = 0;
    err = clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, 0, NULL, &nd);
    if (err == CL_SUCCESS && nd == 0) err = CL_DEVICE_NOT_FOUND;
    if (err != CL_SUCCESS) {
      note_platform(why, cap, plats[p], err);
      if (err != CL_DEVICE_NOT_FOUND) hard = err;
      continue;
    }
    cl_device_id *devs = calloc(nd, sizeof *devs);
    dev_ref *grown = realloc(list, (n + nd) * sizeof *list);
    if (!devs || !grown) {
      free(devs);
      free(grown ? grown : list);
      free(plats);
      return CLPA_FAIL(NULL, CLPA_ERR_OUT_OF_MEMORY, "out of memory");
    }
    list = grown;
    if (clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, nd, devs, NULL) == CL_SUCCESS) {
      for (cl_uint d = 0; d < nd; d++)
        list[n++] = (dev_ref){plats[p], devs[d], (int)p, (int)d};
    }
    free(devs);
  }
  free(plats);
  if (n == 0 && hard != CL_SUCCESS)
    return clpa_err_set(NULL, clpa_status_from_cl(hard), __func__,
                        "no usable OpenCL device: %s", why);
  *out = list;
  *count = n;
  return CLPA_OK;
}

static void str_info(cl_device_id d, cl_device_info what, char *buf, size_t cap) {
  buf[0] = '\0';
  if (clGetDeviceInfo(d, what, cap, buf, NULL) != CL_SUCCESS) buf[0] = '\0';
  buf[cap - 1] = '\0';
}

static int has_ext(const char *exts, const char *name) {
  size_t n = strlen(name);
  for (const char *p = exts; (p = strstr(p, name)) != NULL; p += n)
    if ((p == exts || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0')) return 1;
  return 0;
}

/* OpenCL 3.0 devices list optional OpenCL C features by name. */
static int has_c_feature(cl_device_id d, const char *feature) {
#ifdef CL_DEVICE_OPENCL_C_FEATURES
  size_t sz = 0;
  if (clGetDeviceInfo(d, CL_DEVICE_OPENCL_C_FEATURES, 0, NULL, &sz) != CL_SUCCESS || sz == 0)
    return 0;
  cl_name_version *f = malloc(sz);
  if (!f) return 0;
  int found = 0;
  if (clGetDeviceInfo(d, CL_DEVICE_OPENCL_C_FEATURES, sz, f, NULL) == CL_SUCCESS)
    for (size_t i = 0; i < sz / sizeof *f; i++)
      if (strcmp(f[i].name, feature) == 0) found = 1;
  free(f);
  return found;
#else
  (void)d, (void)feature;
  return 0;
#endif
}

clpa_status clpa_device_query(cl_platform_id p, cl_device_id d, clpa_device_info *info) {
  memset(info, 0, sizeof *info);
  if (clGetPlatformInfo(p, CL_PLATFORM_NAME, sizeof info->platform_name, info->platform_name,
                        NULL) != CL_SUCCESS)
    info->platform_name[0] = '\0';
  if (clGetPlatformInfo(p, CL_PLATFORM_VERSION, sizeof info->platform_version,
                        info->platform_version, NULL) != CL_SUCCESS)
    info->platform_version[0] = '\0';
  str_info(d, CL_DEVICE_NAME, info->name, sizeof info->name);
  str_info(d, CL_DEVICE_VENDOR, info->vendor, sizeof info->vendor);
  str_info(d, CL_DRIVER_VERSION, info->driver_version, sizeof info->driver_version);
  str_info(d, CL_DEVICE_VERSION, info->device_version, sizeof info->device_version);
  str_info(d, CL_DEVICE_OPENCL_C_VERSION, info->c_version, sizeof info->c_version);
  cl_device_type type = 0;
  cl_uint cu = 0;
  cl_ulong gmem = 0, lmem = 0, maxalloc = 0;
  size_t wg = 0;
  cl_int err = clGetDeviceInfo(d, CL_DEVICE_TYPE, sizeof type, &type, NULL);
  err |= clGetDeviceInfo(d, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof cu, &cu, NULL);
  err |= clGetDeviceInfo(d, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof gmem, &gmem, NULL);
  err |= clGetDeviceInfo(d, CL_DEVICE_LOCAL_MEM_SIZE, sizeof lmem, &lmem, NULL);
  err |= clGetDeviceInfo(d, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof maxalloc, &maxalloc, NULL);
  err |= clGetDeviceInfo(d, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof wg, &wg, NULL);
  if (err != CL_SUCCESS)
    return CLPA_FAIL(NULL, CLPA_ERR_OPENCL, "clGetDeviceInfo failed for device '%s'", info->name);
  info->is_gpu = (type & CL_DEVICE_TYPE_GPU) != 0;
  info->is_cpu = (type & CL_DEVICE_TYPE_CPU) != 0;
  info->compute_units = cu;
  info->global_mem_bytes = gmem;
  info->local_mem_bytes = lmem;
  info->max_alloc_bytes = maxalloc;
  info->max_work_group_size = wg;
  cl_uint fw = 0;
  if (clGetDeviceInfo(d, CL_DEVICE_NATIVE_VECTOR_WIDTH_FLOAT, sizeof fw, &fw, NULL) == CL_SUCCESS)
    info->native_float_width = fw;

  size_t sz = 0;
  char *exts = NULL;
  if (clGetDeviceInfo(d, CL_DEVICE_EXTENSIONS, 0, NULL, &sz) == CL_SUCCESS && sz > 0 &&
      (exts = calloc(1, sz + 1)) != NULL &&
      clGetDeviceInfo(d, CL_DEVICE_EXTENSIONS, sz, exts, NULL) == CL_SUCCESS) {
    info->has_subgroups = has_ext(exts, "cl_khr_subgroups") || has_ext(exts, "cl_intel_subgroups");
    info->has_subgroup_shuffle =
        has_ext(exts, "cl_khr_subgroup_shuffle") || has_ext(exts, "cl_intel_subgroups");
    info->has_fp16 = has_ext(exts, "cl_khr_fp16");
    info->has_fp64 = has_ext(exts, "cl_khr_fp64");
  }
  free(exts);
  if (!info->has_subgroups && strncmp(info->device_version, "OpenCL 3", 8) == 0)
    info->has_subgroups = has_c_feature(d, "__opencl_c_subgroups");

  /* NVIDIA's compiler takes inline PTX, so its warps shuffle directly;
   * elsewhere real subgroups need shuffles for the butterfly reductions. */
  int nvidia = strstr(info->platform_name, "NVIDIA") != NULL;
  if (nvidia) {
    info->lanes = CLPA_LANES_NV_PTX;
    /* cl_nv_device_attribute_query: the tensor-core paths need 8.0 (mma.sync
     * m16n8k16, cp.async, bf16). */
    cl_uint major = 0, minor = 0;
    if (clGetDeviceInfo(d, 0x4000 /* CL_DEVICE_COMPUTE_CAPABILITY_MAJOR_NV */, sizeof major, &major,
                        NULL) == CL_SUCCESS &&
        clGetDeviceInfo(d, 0x4001 /* CL_DEVICE_COMPUTE_CAPABILITY_MINOR_NV */, sizeof minor, &minor,
                        NULL) == CL_SUCCESS)
      info->nv_compute_capability = (int)(major * 10 + minor);
  }
  else if (info->has_subgroups && info->has_subgroup_shuffle)
    info->lanes = CLPA_LANES_SUBGROUP;
  else
    info->lanes = CLPA_LANES_EMULATED;
  return CLPA_OK;
}

const char *clpa_lanes_name(clpa_lanes lanes) {
  switch (lanes) {
    case CLPA_LANES_AUTO: return "auto";
    case CLPA_LANES_EMULATED: return "emulated";
    case CLPA_LANES_SUBGROUP: return "subgroup";
    case CLPA_LANES_NV_PTX: return "nv_ptx";
  }
  return "invalid";
}

static clpa_status clpa_devices_list_impl(clpa_device_info *out, size_t cap, size_t *count) {
  CLPA_CHECK(NULL, !count, CLPA_ERR_INVALID_ARG, "count must not be NULL");
  CLPA_CHECK(NULL, cap > 0 && !out, CLPA_ERR_INVALID_ARG, "out is NULL but cap is %zu", cap);
  dev_ref *list;
  size_t n;
  char why[1024];
  pthread_mutex_lock(&cl_setup_lock);
  clpa_status st = enumerate(&list, &n, why, sizeof why);
  /* Zero devices is an answer, not a failure; the message says why. */
  if (st == CLPA_OK && n == 0) clpa_err_set(NULL, CLPA_OK, __func__, "no OpenCL device: %s", why);
  for (size_t i = 0; st == CLPA_OK && i < n && i < cap; i++) {
    st = clpa_device_query(list[i].platform, list[i].device, &out[i]);
    out[i].platform_index = list[i].pi;
    out[i].device_index = list[i].di;
  }
  pthread_mutex_unlock(&cl_setup_lock);
  free(list);
  if (st == CLPA_OK) *count = n;
  return st;
}

clpa_status clpa_devices_list(clpa_device_info *out, size_t cap, size_t *count) {
  CLPA_API_CALL(clpa_devices_list_impl(out, cap, count));
}

static int contains_nocase(const char *hay, const char *needle) {
  size_t n = strlen(needle);
  for (; *hay; hay++) {
    size_t i = 0;
    while (i < n && hay[i] && tolower((unsigned char)hay[i]) == tolower((unsigned char)needle[i]))
      i++;
    if (i == n) return 1;
  }
  return 0;
}

/* Parses "P:D" (both decimal). Returns 1 and the indices, else 0. */
static int parse_indices(const char *s, int *p, int *d) {
  char *end;
  if (!isdigit((unsigned char)s[0])) return 0;
  long a = strtol(s, &end, 10);
  if (*end != ':' || !isdigit((unsigned char)end[1])) return 0;
  long b = strtol(end + 1, &end, 10);
  if (*end != '\0' || a > 1000000 || b > 1000000) return 0;
  *p = (int)a;
  *d = (int)b;
  return 1;
}

/* Resolves spec (already defaulted from the environment) in list. */
static clpa_status select_in(const dev_ref *list, size_t n, const char *why, const char *spec,
                             const char *origin, size_t *index) {
  if (n == 0) return CLPA_FAIL(NULL, CLPA_ERR_DEVICE_NOT_FOUND, "no OpenCL device: %s", why);
  if (!spec) {
    for (size_t i = 0; i < n; i++) {
      cl_device_type t = 0;
      if (clGetDeviceInfo(list[i].device, CL_DEVICE_TYPE, sizeof t, &t, NULL) == CL_SUCCESS &&
          (t & CL_DEVICE_TYPE_GPU)) {
        *index = i;
        return CLPA_OK;
      }
    }
    *index = 0;
    return CLPA_OK;
  }
  if (spec[0] == '\0')
    return CLPA_FAIL(NULL, CLPA_ERR_DEVICE_NOT_FOUND, "empty device spec (from %s)", origin);
  int p, d;
  if (parse_indices(spec, &p, &d)) {
    for (size_t i = 0; i < n; i++)
      if (list[i].pi == p && list[i].di == d) {
        *index = i;
        return CLPA_OK;
      }
    return CLPA_FAIL(NULL, CLPA_ERR_DEVICE_NOT_FOUND,
                     "device spec '%s' (from %s): no device %d on platform %d (%zu devices in all;"
                     " clpa-info lists them)", spec, origin, d, p, n);
  }
  for (size_t i = 0; i < n; i++) {
    clpa_device_info info;
    if (clpa_device_query(list[i].platform, list[i].device, &info) != CLPA_OK) continue;
    if (contains_nocase(info.name, spec) || contains_nocase(info.vendor, spec) ||
        contains_nocase(info.platform_name, spec)) {
      *index = i;
      return CLPA_OK;
    }
  }
  return CLPA_FAIL(NULL, CLPA_ERR_DEVICE_NOT_FOUND,
                   "device spec '%s' (from %s) matches no device name, vendor or platform; use"
                   " 'P:D' indices or a name substring (clpa-info lists them)", spec, origin);
}

/* The spec in force: the explicit one, else CLPA_DEVICE, else NULL. */
static const char *effective_spec(const char *spec, const char **origin) {
  *origin = "the config";
  if (spec) return spec;
  const char *env = getenv("CLPA_DEVICE");
  *origin = "CLPA_DEVICE";
  if (env) return env;
  *origin = "the default rule";
  return NULL;
}

static clpa_status clpa_device_select_impl(const char *spec, size_t *index) {
  CLPA_CHECK(NULL, !index, CLPA_ERR_INVALID_ARG, "index must not be NULL");
  const char *origin;
  spec = effective_spec(spec, &origin);
  dev_ref *list;
  size_t n;
  char why[1024];
  pthread_mutex_lock(&cl_setup_lock);
  clpa_status st = enumerate(&list, &n, why, sizeof why);
  if (st == CLPA_OK) st = select_in(list, n, why, spec, origin, index);
  pthread_mutex_unlock(&cl_setup_lock);
  free(list);
  return st;
}

clpa_status clpa_device_select(const char *spec, size_t *index) {
  CLPA_API_CALL(clpa_device_select_impl(spec, index));
}

void clpa_context_config_init_version(clpa_context_config *cfg, unsigned header_version) {
  if (!cfg) return;
  memset(cfg, 0, sizeof *cfg);
  cfg->header_version = header_version;
  cfg->binary_cache = 1;
  cfg->lanes = CLPA_LANES_AUTO;
}

static clpa_status pick_lanes(clpa_context *ctx, clpa_lanes want) {
  const clpa_device_info *in = &ctx->info;
  if (want == CLPA_LANES_AUTO) {
    ctx->lanes = in->lanes;
    return CLPA_OK;
  }
  CLPA_CTX_CHECK(ctx, (unsigned)want > CLPA_LANES_NV_PTX, CLPA_ERR_INVALID_ARG,
                 "cfg->lanes = %d is not a clpa_lanes value", (int)want);
  CLPA_CTX_CHECK(ctx, want == CLPA_LANES_SUBGROUP && !(in->has_subgroups && in->has_subgroup_shuffle),
                 CLPA_ERR_UNSUPPORTED, "lanes 'subgroup' forced but device '%s' has no subgroup"
                 " shuffles", in->name);
  CLPA_CTX_CHECK(ctx, want == CLPA_LANES_NV_PTX && in->lanes != CLPA_LANES_NV_PTX,
                 CLPA_ERR_UNSUPPORTED, "lanes 'nv_ptx' forced but device '%s' is not on NVIDIA's"
                 " OpenCL platform", in->name);
  ctx->lanes = want;
  ctx->lanes_forced = 1;
  return CLPA_OK;
}

/* How decode v2's work-group kernels merge their partitions (decode_merge.cl's
 * CLPA_MERGE): in the launch where the device orders one work-group's
 * writes before another's reads at device scope (inline PTX on NVIDIA;
 * elsewhere OpenCL C 2.0's acquire-release atomics, so those programs
 * build with -cl-std=CL2.0, or CL3.0 where the device lists the features),
 * else by reduce.cl's kernel after the launch, which any OpenCL 1.2 device
 * runs. CLPA_DECODE_MERGE=kernel takes the reduce kernel everywhere. */
static clpa_status pick_merge(clpa_context *ctx) {
  const char *env = getenv("CLPA_DECODE_MERGE");
  CLPA_CTX_CHECK(ctx, env && env[0] && strcmp(env, "auto") != 0 && strcmp(env, "kernel") != 0,
                 CLPA_ERR_INVALID_ARG, "CLPA_DECODE_MERGE = '%s' (expected auto or kernel)", env);
  ctx->merge_in_launch = 0;
  ctx->merge_std = "";
  if (env && strcmp(env, "kernel") == 0) return CLPA_OK;
  if (ctx->lanes == CLPA_LANES_NV_PTX) {
    ctx->merge_in_launch = 1;
  } else if (strncmp(ctx->info.c_version, "OpenCL C 2.", 11) == 0) {
    ctx->merge_in_launch = 1, ctx->merge_std = "-cl-std=CL2.0";
  } else if (has_c_feature(ctx->dev, "__opencl_c_atomic_order_acq_rel") &&
             has_c_feature(ctx->dev, "__opencl_c_atomic_scope_device")) {
    ctx->merge_in_launch = 1, ctx->merge_std = "-cl-std=CL3.0";
  }
  return CLPA_OK;
}

/* Whether decode plans run their busy partitions from a list: made from host
 * lengths (host/decode_planner.c's mma_work_list) or, without them, by the device
 * (plan_mma_device_list): CLPA_DECODE_WORK_LIST = on, off or auto (the tuning
 * row's rules), for tests and benchmarks. */
static clpa_status pick_work_list(clpa_context *ctx) {
  const char *env = getenv("CLPA_DECODE_WORK_LIST");
  const int on = env && strcmp(env, "on") == 0, off = env && strcmp(env, "off") == 0;
  CLPA_CTX_CHECK(ctx, env && env[0] && !on && !off && strcmp(env, "auto") != 0,
                 CLPA_ERR_INVALID_ARG, "CLPA_DECODE_WORK_LIST = '%s' (expected auto, on or off)",
                 env);
  ctx->decode_work_list = on ? 1 : off ? -1 : 0;
  return CLPA_OK;
}

/* The cache directory in force. Without HOME (cron, services) the
 * fallback lives in the shared temporary directory, so it is per user:
 * binary_cache.c refuses it unless this user owns it and nobody else can
 * write it. */
static char *default_cache_dir(const char *given) {
  const char *xdg = getenv("XDG_CACHE_HOME");
  const char *home = getenv("HOME");
  const char *tmp = getenv("TMPDIR");
  const char *head = given, *tail = "";
  char uid[32];
  if (given) {
    /* as given */
  } else if (xdg && xdg[0] == '/') {
    head = xdg, tail = "/clpa";
  } else if (home && home[0]) {
    head = home, tail = "/.cache/clpa";
  } else {
    head = tmp && tmp[0] == '/' ? tmp : "/tmp";
    snprintf(uid, sizeof uid, "/clpa-%lu", (unsigned long)geteuid());
    tail = uid;
  }
  /* Sized to fit: a path cut short would be another directory (a parent). */
  size_t n = strlen(head) + strlen(tail) + 1;
  char *dir = malloc(n);
  if (dir) snprintf(dir, n, "%s%s", head, tail);
  return dir;
}

/* The binary cache settings from the config and the environment:
 * CLPA_NO_BINARY_CACHE=1 turns it off, CLPA_CACHE_MAX_MB caps it when the
 * config gives no cap. A value that means nothing is refused, not
 * ignored (as a typo would be). */
static clpa_status cache_settings(const clpa_context_config *cfg, int *on, uint64_t *cap) {
  const char *no = getenv("CLPA_NO_BINARY_CACHE");
  CLPA_CHECK(NULL, no && no[0] && strcmp(no, "0") != 0 && strcmp(no, "1") != 0,
             CLPA_ERR_INVALID_ARG, "CLPA_NO_BINARY_CACHE = '%s' (expected 0 or 1)", no);
  *on = cfg->binary_cache && !(no && strcmp(no, "1") == 0);
  *cap = cfg->cache_max_bytes ? cfg->cache_max_bytes : CLPA_CACHE_MAX_DEFAULT;
  const char *env = getenv("CLPA_CACHE_MAX_MB");
  if (cfg->cache_max_bytes || !env) return CLPA_OK;
  char *end;
  errno = 0;
  unsigned long long mb = strtoull(env, &end, 10);
  CLPA_CHECK(NULL, !isdigit((unsigned char)env[0]) || *end || errno || mb == 0 ||
                       mb > UINT64_MAX / (1024 * 1024),
             CLPA_ERR_INVALID_ARG,
             "CLPA_CACHE_MAX_MB = '%s' (expected a whole number of MiB >= 1)", env);
  *cap = (uint64_t)mb * 1024 * 1024;
  return CLPA_OK;
}

/* Wraps the application's objects: checks they belong together. */
static clpa_status wrap_handles(clpa_context *ctx, const clpa_context_config *cfg) {
  CLPA_CTX_CHECK(ctx, !cfg->cl_dev || !cfg->cl_queue, CLPA_ERR_INVALID_ARG,
                 "cfg->cl_ctx is set, so cfg->cl_dev and cfg->cl_queue must be set too");
  CLPA_CTX_CHECK(ctx, cfg->device != NULL, CLPA_ERR_INVALID_ARG,
                 "cfg->device ('%s') and cfg->cl_ctx are exclusive", cfg->device);
  cl_context qctx = NULL;
  cl_device_id qdev = NULL;
  cl_int err = clGetCommandQueueInfo(cfg->cl_queue, CL_QUEUE_CONTEXT, sizeof qctx, &qctx, NULL);
  if (err != CL_SUCCESS) return CLPA_CL_FAIL(ctx, err, "clGetCommandQueueInfo(cfg->cl_queue)");
  err = clGetCommandQueueInfo(cfg->cl_queue, CL_QUEUE_DEVICE, sizeof qdev, &qdev, NULL);
  if (err != CL_SUCCESS) return CLPA_CL_FAIL(ctx, err, "clGetCommandQueueInfo(cfg->cl_queue)");
  CLPA_CTX_CHECK(ctx, qctx != cfg->cl_ctx || qdev != cfg->cl_dev, CLPA_ERR_INVALID_ARG,
                 "cfg->cl_queue belongs to another context or device than cfg->cl_ctx/cl_dev");
  cl_command_queue_properties qprops = 0;
  err = clGetCommandQueueInfo(cfg->cl_queue, CL_QUEUE_PROPERTIES, sizeof qprops, &qprops, NULL);
  if (err != CL_SUCCESS) return CLPA_CL_FAIL(ctx, err, "clGetCommandQueueInfo(cfg->cl_queue)");
  CLPA_CTX_CHECK(ctx, qprops & CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE, CLPA_ERR_UNSUPPORTED,
                 "cfg->cl_queue is out of order; clpa needs an in-order queue");
  cl_platform_id plat = NULL;
  err = clGetDeviceInfo(cfg->cl_dev, CL_DEVICE_PLATFORM, sizeof plat, &plat, NULL);
  if (err != CL_SUCCESS) return CLPA_CL_FAIL(ctx, err, "clGetDeviceInfo(cfg->cl_dev)");
  CLPA_CL_CHECK(ctx, clRetainContext(cfg->cl_ctx), "clRetainContext");
  ctx->cl = cfg->cl_ctx;
  CLPA_CL_CHECK(ctx, clRetainCommandQueue(cfg->cl_queue), "clRetainCommandQueue");
  ctx->queue = cfg->cl_queue;
  ctx->platform = plat;
  ctx->dev = cfg->cl_dev;
  return CLPA_OK;
}

/* Creates clpa's own context and queue on the selected device; called
 * with cl_setup_lock held. */
static clpa_status open_device_locked(clpa_context *ctx, const clpa_context_config *cfg, int *pi,
                                      int *di) {
  const char *origin;
  const char *spec = effective_spec(cfg->device, &origin);
  dev_ref *list;
  size_t n, idx = 0;
  char why[1024];
  clpa_status st = enumerate(&list, &n, why, sizeof why);
  if (st == CLPA_OK) st = select_in(list, n, why, spec, origin, &idx);
  if (st != CLPA_OK) {
    free(list);
    clpa_err_keep(ctx->error);
    return st;
  }
  ctx->platform = list[idx].platform;
  ctx->dev = list[idx].device;
  *pi = list[idx].pi;
  *di = list[idx].di;
  free(list);
  cl_int err;
  cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)ctx->platform, 0};
  ctx->cl = clCreateContext(props, 1, &ctx->dev, NULL, NULL, &err);
  if (err != CL_SUCCESS) return CLPA_CL_FAIL(ctx, err, "clCreateContext");
  cl_command_queue_properties qp = cfg->profiling ? CL_QUEUE_PROFILING_ENABLE : 0;
#ifdef CL_VERSION_2_0
  cl_queue_properties qprops[] = {CL_QUEUE_PROPERTIES, qp, 0};
  ctx->queue = clCreateCommandQueueWithProperties(ctx->cl, ctx->dev, qprops, &err);
  if (err != CL_SUCCESS)
#endif
  {
    /* OpenCL 1.2 platforms have only the old entry point. */
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#endif
    ctx->queue = clCreateCommandQueue(ctx->cl, ctx->dev, qp, &err);
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif
  }
  if (err != CL_SUCCESS) return CLPA_CL_FAIL(ctx, err, "clCreateCommandQueue");
  ctx->owns_queue = 1;
  return CLPA_OK;
}

static clpa_status open_device(clpa_context *ctx, const clpa_context_config *cfg, int *pi,
                               int *di) {
  pthread_mutex_lock(&cl_setup_lock);
  clpa_status st = open_device_locked(ctx, cfg, pi, di);
  pthread_mutex_unlock(&cl_setup_lock);
  return st;
}

/* Finds the "P:D" indices of a wrapped device. */
static void locate(clpa_context *ctx) {
  dev_ref *list;
  size_t n;
  ctx->info.platform_index = ctx->info.device_index = -1;
  pthread_mutex_lock(&cl_setup_lock);
  char why[1024];
  clpa_status st = enumerate(&list, &n, why, sizeof why);
  pthread_mutex_unlock(&cl_setup_lock);
  if (st != CLPA_OK) return;
  for (size_t i = 0; i < n; i++)
    if (list[i].device == ctx->dev) {
      ctx->info.platform_index = list[i].pi;
      ctx->info.device_index = list[i].di;
    }
  free(list);
}

/* The application's clpa.h against this library (README's ABI): the same
 * minor version while the major is 0, the same major after. */
static clpa_status check_version(unsigned header) {
  CLPA_CHECK(NULL, header == 0, CLPA_ERR_VERSION,
             "cfg->header_version = 0: fill cfg with clpa_context_config_init(), which records "
             "the version of clpa.h the application was built with");
  const unsigned major = header / 10000, minor = header / 100 % 100;
  CLPA_CHECK(NULL, major != CLPA_VERSION_MAJOR || (major == 0 && minor != CLPA_VERSION_MINOR),
             CLPA_ERR_VERSION,
             "the application was built with clpa.h %u.%u.%u, this library is %s: their ABIs "
             "differ (rebuild the application against this library's headers)",
             major, minor, header % 100, clpa_version_string());
  return CLPA_OK;
}

static clpa_status clpa_context_create_impl(const clpa_context_config *cfg, clpa_context **out) {
  CLPA_CHECK(NULL, !out, CLPA_ERR_INVALID_ARG, "out must not be NULL");
  *out = NULL;
  clpa_context_config defaults;
  if (!cfg) {
    clpa_context_config_init(&defaults);
    cfg = &defaults;
  }
  clpa_status st = check_version(cfg->header_version);
  if (st != CLPA_OK) return st;
  CLPA_CHECK_RESERVED(NULL, cfg, "cfg->");
  CLPA_CHECK(NULL, cfg->binary_cache != 0 && cfg->binary_cache != 1, CLPA_ERR_INVALID_ARG,
             "cfg->binary_cache = %d (expected 0 or 1)", cfg->binary_cache);
  CLPA_CHECK(NULL, cfg->profiling != 0 && cfg->profiling != 1, CLPA_ERR_INVALID_ARG,
             "cfg->profiling = %d (expected 0 or 1)", cfg->profiling);
  CLPA_CHECK(NULL, !cfg->cl_ctx && (cfg->cl_dev || cfg->cl_queue), CLPA_ERR_INVALID_ARG,
             "cfg->cl_dev/cl_queue given without cfg->cl_ctx");
  int cache_on = 0;
  uint64_t cache_max = 0;
  st = cache_settings(cfg, &cache_on, &cache_max);
  if (st != CLPA_OK) return st;
  clpa_context *ctx = calloc(1, sizeof *ctx);
  CLPA_CHECK(NULL, !ctx, CLPA_ERR_OUT_OF_MEMORY, "out of memory");
  ctx->binary_cache = cache_on;
  ctx->cache_max_bytes = cache_max;
  int pi = -1, di = -1;
  st = cfg->cl_ctx ? wrap_handles(ctx, cfg) : open_device(ctx, cfg, &pi, &di);
  if (st == CLPA_OK) st = clpa_device_query(ctx->platform, ctx->dev, &ctx->info);
  if (st == CLPA_OK) st = pick_lanes(ctx, cfg->lanes);
  if (st == CLPA_OK) st = pick_merge(ctx);
  if (st == CLPA_OK) st = pick_work_list(ctx);
  if (st == CLPA_OK && cfg->cl_ctx) {
    locate(ctx);
  } else if (st == CLPA_OK) {
    ctx->info.platform_index = pi;
    ctx->info.device_index = di;
  }
  if (st == CLPA_OK) {
    ctx->cache_dir = default_cache_dir(cfg->cache_dir);
    if (!ctx->cache_dir) st = CLPA_FAIL(ctx->error, CLPA_ERR_OUT_OF_MEMORY, "out of memory");
  }
  /* The lane-group path is settled once, here, not by whichever kernel
   * happens to be built first. */
  if (st == CLPA_OK) st = clpa_lanes_settle(ctx);
  if (st == CLPA_OK) clpa_tuning_lookup(&ctx->info, &ctx->tuning, &ctx->decode_tuning, &ctx->prefill_tuning);
  if (st != CLPA_OK) {
    clpa_context_destroy(ctx);
    return st;
  }
  *out = ctx;
  return CLPA_OK;
}

clpa_status clpa_context_create(const clpa_context_config *cfg, clpa_context **out) {
  CLPA_API_CALL(clpa_context_create_impl(cfg, out));
}

void clpa_context_destroy(clpa_context *ctx) {
  if (!ctx) return;
  if (ctx->queue && ctx->owns_queue) clFinish(ctx->queue);
  clpa_programs_release(ctx);
  if (ctx->faults) clReleaseMemObject(ctx->faults);
  if (ctx->part_counts) clReleaseMemObject(ctx->part_counts);
  for (int i = 0; i < CLPA_SCRATCH_SLOTS; i++)
    if (ctx->scratch[i]) clReleaseMemObject(ctx->scratch[i]);
  clpa_staging_free(ctx);
  if (ctx->queue) clReleaseCommandQueue(ctx->queue);
  if (ctx->cl) clReleaseContext(ctx->cl);
  free(ctx->cache_dir);
  free(ctx);
}

/* internal.h */
void clpa_forget_refusal(clpa_context *ctx, const char *before) {
  clpa_err_clear();
  memcpy(ctx->error, before, CLPA_ERROR_MAX);
}

const char *clpa_context_last_error(const clpa_context *ctx) {
  return ctx ? ctx->error : "clpa_context_last_error: ctx is NULL";
}

const char *clpa_context_cache_dir(const clpa_context *ctx) {
  return ctx && ctx->binary_cache ? ctx->cache_dir : NULL;
}

cl_context clpa_context_cl_context(const clpa_context *ctx) { return ctx ? ctx->cl : NULL; }
cl_device_id clpa_context_cl_device(const clpa_context *ctx) { return ctx ? ctx->dev : NULL; }
cl_command_queue clpa_context_cl_queue(const clpa_context *ctx) { return ctx ? ctx->queue : NULL; }

clpa_status clpa_context_finish(clpa_context *ctx) {
  CLPA_CHECK(NULL, !ctx, CLPA_ERR_INVALID_ARG, "ctx must not be NULL");
  CLPA_CL_CHECK(ctx, clFinish(ctx->queue), "clFinish");
  return CLPA_OK;
}

clpa_status clpa_context_device_info(const clpa_context *ctx, clpa_device_info *out) {
  CLPA_CHECK(NULL, !ctx || !out, CLPA_ERR_INVALID_ARG, "ctx and out must not be NULL");
  *out = ctx->info;
  out->lanes = ctx->lanes;
  return CLPA_OK;
}
