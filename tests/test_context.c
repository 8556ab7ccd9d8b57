/*
 * Context creation from a spec, from CLPA_DEVICE, from the default rule and
 * around the application's own handles; bad specs and bad arguments give
 * the right status and a message naming what was wrong.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clpa.h"
#include "tap.h"

static clpa_status create_with(const char *spec, clpa_context **ctx) {
  clpa_context_config cfg;
  clpa_context_config_init(&cfg);
  cfg.device = spec;
  return clpa_context_create(&cfg, ctx);
}

static void test_specs(const clpa_device_info *first) {
  clpa_context *ctx = NULL;
  ok(clpa_context_create(NULL, &ctx) == CLPA_OK && ctx, "default context: %s",
     clpa_last_error());
  clpa_device_info info;
  ok(clpa_context_device_info(ctx, &info) == CLPA_OK && info.name[0] && info.compute_units > 0,
     "device info of the default context: %s, %u units", info.name, info.compute_units);
  ok(clpa_smoke_test(ctx, 4096) == CLPA_OK, "smoke kernel runs: %s", clpa_last_error());
  clpa_context_destroy(ctx);

  char spec[32];
  snprintf(spec, sizeof spec, "%d:%d", first->platform_index, first->device_index);
  ctx = NULL;
  ok(create_with(spec, &ctx) == CLPA_OK && clpa_context_device_info(ctx, &info) == CLPA_OK &&
         strcmp(info.name, first->name) == 0 && info.platform_index == first->platform_index,
     "spec '%s' selects %s", spec, first->name);
  clpa_context_destroy(ctx);

  /* A name substring, in another case than the device reports it. */
  char sub[8] = {0};
  for (int i = 0; i < 4 && first->name[i]; i++)
    sub[i] = (char)((first->name[i] >= 'a' && first->name[i] <= 'z') ? first->name[i] - 32
                                                                      : first->name[i]);
  ctx = NULL;
  ok(create_with(sub, &ctx) == CLPA_OK, "name substring '%s' selects a device", sub);
  clpa_context_destroy(ctx);

  setenv("CLPA_DEVICE", spec, 1);
  ctx = NULL;
  ok(clpa_context_create(NULL, &ctx) == CLPA_OK, "CLPA_DEVICE=%s is honoured", spec);
  clpa_context_destroy(ctx);
  setenv("CLPA_DEVICE", "no-such-device-xyz", 1);
  ctx = (clpa_context *)1;
  ok(clpa_context_create(NULL, &ctx) == CLPA_ERR_DEVICE_NOT_FOUND && ctx == NULL &&
         strstr(clpa_last_error(), "CLPA_DEVICE") && strstr(clpa_last_error(), "no-such-device") &&
         strncmp(clpa_last_error(), "clpa_context_create: ", 21) == 0,
     "a bad CLPA_DEVICE is reported with its origin: %s", clpa_last_error());
  size_t idx;
  ok(clpa_device_select(NULL, &idx) == CLPA_ERR_DEVICE_NOT_FOUND, "device_select follows env too");
  unsetenv("CLPA_DEVICE");

  const char *bad[] = {"99:0", "0:99", "", "no-such-device-xyz"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    ctx = (clpa_context *)1;
    clpa_status st = create_with(bad[i], &ctx);
    ok(st == CLPA_ERR_DEVICE_NOT_FOUND && ctx == NULL && strlen(clpa_last_error()) > 10,
       "bad spec '%s' -> %s: %s", bad[i], clpa_status_name(st), clpa_last_error());
  }
}

static void test_bad_args(void) {
  ok(clpa_context_create(NULL, NULL) == CLPA_ERR_INVALID_ARG && strstr(clpa_last_error(), "out"),
     "NULL out: %s", clpa_last_error());
  clpa_context_config cfg;
  clpa_context *ctx = NULL;
  clpa_context_config_init(&cfg);
  cfg.binary_cache = 7;
  ok(clpa_context_create(&cfg, &ctx) == CLPA_ERR_INVALID_ARG &&
         strstr(clpa_last_error(), "binary_cache"),
     "binary_cache = 7: %s", clpa_last_error());
  /* regress_boolean_fields_are_0_or_1: profiling = 2 used to be taken as on */
  clpa_context_config_init(&cfg);
  cfg.profiling = 2;
  ctx = (clpa_context *)1;
  ok(clpa_context_create(&cfg, &ctx) == CLPA_ERR_INVALID_ARG && ctx == NULL &&
         strstr(clpa_last_error(), "profiling = 2"),
     "profiling = 2: %s", clpa_last_error());
  clpa_context_config_init(&cfg);
  cfg.binary_cache = -1;
  ok(clpa_context_create(&cfg, &ctx) == CLPA_ERR_INVALID_ARG &&
         strstr(clpa_last_error(), "binary_cache = -1"),
     "binary_cache = -1: %s", clpa_last_error());
  /* regress_env_switch_is_0_or_1: CLPA_NO_BINARY_CACHE=yes was ignored */
  setenv("CLPA_NO_BINARY_CACHE", "yes", 1);
  ctx = (clpa_context *)1;
  ok(clpa_context_create(NULL, &ctx) == CLPA_ERR_INVALID_ARG && ctx == NULL &&
         strstr(clpa_last_error(), "CLPA_NO_BINARY_CACHE"),
     "CLPA_NO_BINARY_CACHE=yes: %s", clpa_last_error());
  unsetenv("CLPA_NO_BINARY_CACHE");
  setenv("CLPA_DECODE_MERGE", "reduce", 1); /* auto or kernel */
  ctx = (clpa_context *)1;
  ok(clpa_context_create(NULL, &ctx) == CLPA_ERR_INVALID_ARG && ctx == NULL &&
         strstr(clpa_last_error(), "CLPA_DECODE_MERGE = 'reduce'"),
     "CLPA_DECODE_MERGE=reduce: %s", clpa_last_error());
  unsetenv("CLPA_DECODE_MERGE");
  setenv("CLPA_DECODE_WORK_LIST", "1", 1); /* auto, on or off */
  ctx = (clpa_context *)1;
  ok(clpa_context_create(NULL, &ctx) == CLPA_ERR_INVALID_ARG && ctx == NULL &&
         strstr(clpa_last_error(), "CLPA_DECODE_WORK_LIST = '1'"),
     "CLPA_DECODE_WORK_LIST=1: %s", clpa_last_error());
  unsetenv("CLPA_DECODE_WORK_LIST");
  clpa_context_config_init(&cfg);
  cfg.lanes = (clpa_lanes)42;
  ok(clpa_context_create(&cfg, &ctx) == CLPA_ERR_INVALID_ARG && strstr(clpa_last_error(), "lanes"),
     "lanes = 42: %s", clpa_last_error());
  clpa_context_config_init(&cfg);
  cfg.cl_queue = (cl_command_queue)&cfg;
  ok(clpa_context_create(&cfg, &ctx) == CLPA_ERR_INVALID_ARG && strstr(clpa_last_error(), "cl_ctx"),
     "queue without context: %s", clpa_last_error());
  ok(clpa_context_device_info(NULL, NULL) == CLPA_ERR_INVALID_ARG, "device_info(NULL)");
  ok(clpa_context_finish(NULL) == CLPA_ERR_INVALID_ARG, "finish(NULL)");
  ok(clpa_smoke_test(NULL, 1) == CLPA_ERR_INVALID_ARG, "smoke_test(NULL)");
  size_t n;
  ok(clpa_devices_list(NULL, 3, &n) == CLPA_ERR_INVALID_ARG, "devices_list NULL out, cap 3");
  ok(clpa_devices_list(NULL, 0, NULL) == CLPA_ERR_INVALID_ARG, "devices_list NULL count");
  clpa_program_stats ps;
  cl_program prog;
  ok(clpa_context_program_stats(NULL, &ps) == CLPA_ERR_INVALID_ARG && clpa_last_error()[0],
     "program_stats(NULL): %s", clpa_last_error());
  ok(clpa_program_get(NULL, "smoke", "", &prog) == CLPA_ERR_INVALID_ARG, "program_get(NULL ctx)");
  ok(clpa_context_check_faults(NULL, NULL) == CLPA_ERR_INVALID_ARG, "check_faults(NULL)");
  ok(clpa_device_select(NULL, NULL) == CLPA_ERR_INVALID_ARG && strstr(clpa_last_error(), "index"),
     "device_select NULL index: %s", clpa_last_error());
  ok(strcmp(clpa_context_last_error(NULL), "") != 0 && clpa_context_cl_queue(NULL) == NULL &&
         clpa_context_cl_context(NULL) == NULL && clpa_context_cl_device(NULL) == NULL,
     "accessors of a NULL context answer without crashing");
  ok(strcmp(clpa_lanes_name((clpa_lanes)99), "invalid") == 0, "lanes name of a bad value");
  clpa_context_destroy(NULL); /* must be a no-op */
  ok(clpa_context_create(NULL, &ctx) == CLPA_OK, "context for argument checks");
  ok(clpa_smoke_test(ctx, 0) == CLPA_ERR_INVALID_ARG &&
         strstr(clpa_context_last_error(ctx), "n = 0"),
     "smoke_test n = 0, message kept in the context: %s", clpa_context_last_error(ctx));
  cl_program p;
  ok(clpa_program_get(ctx, NULL, "", &p) == CLPA_ERR_INVALID_ARG &&
         strstr(clpa_context_last_error(ctx), "family"),
     "NULL family: %s", clpa_context_last_error(ctx));
  ok(clpa_program_get(ctx, "no_such_family", "", &p) == CLPA_ERR_INVALID_ARG &&
         strstr(clpa_last_error(), "no_such_family"),
     "unknown family: %s", clpa_last_error());
  ok(clpa_program_get(ctx, "common", "", &p) == CLPA_ERR_INVALID_ARG, "common is no family");
  clpa_device_info info;
  clpa_context_device_info(ctx, &info);
  clpa_context_destroy(ctx);
  clpa_context_config_init(&cfg);
  cfg.lanes = info.lanes == CLPA_LANES_NV_PTX ? CLPA_LANES_SUBGROUP : CLPA_LANES_NV_PTX;
  if (!(cfg.lanes == CLPA_LANES_SUBGROUP && info.has_subgroups && info.has_subgroup_shuffle)) {
    ctx = NULL;
    ok(clpa_context_create(&cfg, &ctx) == CLPA_ERR_UNSUPPORTED && ctx == NULL,
       "forcing lanes '%s' the device lacks: %s", clpa_lanes_name(cfg.lanes), clpa_last_error());
  }
  clpa_context_config_init(&cfg);
  cfg.lanes = CLPA_LANES_EMULATED;
  ctx = NULL;
  ok(clpa_context_create(&cfg, &ctx) == CLPA_OK && clpa_context_device_info(ctx, &info) == CLPA_OK &&
         info.lanes == CLPA_LANES_EMULATED && clpa_smoke_test(ctx, 100) == CLPA_OK,
     "emulated lanes can always be forced");
  clpa_context_destroy(ctx);
}

/* The application's own context, device and queue are used, not copied,
 * and survive clpa_context_destroy. */
static void test_wrapped(void) {
  clpa_context *own = NULL;
  if (!ok(clpa_context_create(NULL, &own) == CLPA_OK, "context to borrow a device from")) return;
  cl_device_id dev = clpa_context_cl_device(own);
  cl_int err;
  cl_context app_ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
  cl_command_queue app_q = clCreateCommandQueueWithProperties(app_ctx, dev, NULL, &err);
  ok(err == CL_SUCCESS, "application context and queue");
  clpa_context_config cfg;
  clpa_context_config_init(&cfg);
  cfg.cl_ctx = app_ctx;
  cfg.cl_dev = dev;
  cfg.cl_queue = app_q;
  cl_uint refs0 = 0, refs = 0;
  clGetContextInfo(app_ctx, CL_CONTEXT_REFERENCE_COUNT, sizeof refs0, &refs0, NULL);
  clpa_context *ctx = NULL;
  ok(clpa_context_create(&cfg, &ctx) == CLPA_OK, "wrap the application's handles: %s",
     clpa_last_error());
  ok(clpa_context_cl_context(ctx) == app_ctx && clpa_context_cl_queue(ctx) == app_q &&
         clpa_context_cl_device(ctx) == dev,
     "the wrapped context uses exactly those handles");
  ok(clpa_smoke_test(ctx, 1000) == CLPA_OK, "kernels run on the wrapped queue");
  clpa_device_info info;
  clpa_context_device_info(ctx, &info);
  ok(info.platform_index >= 0 && info.device_index >= 0, "wrapped device located at %d:%d",
     info.platform_index, info.device_index);
  clpa_context_destroy(ctx);
  clGetContextInfo(app_ctx, CL_CONTEXT_REFERENCE_COUNT, sizeof refs, &refs, NULL);
  ok(refs == refs0, "destroy gives back every reference clpa took (count %u, was %u)", refs,
     refs0);
  ok(clFinish(app_q) == CL_SUCCESS, "the application's queue still works after destroy");

  /* A queue of another context is refused. */
  cl_command_queue other_q = clpa_context_cl_queue(own);
  cfg.cl_queue = other_q;
  ctx = NULL;
  ok(clpa_context_create(&cfg, &ctx) == CLPA_ERR_INVALID_ARG && ctx == NULL &&
         strstr(clpa_last_error(), "cl_queue"),
     "mismatched queue: %s", clpa_last_error());
  cfg.cl_queue = app_q;
  cfg.device = "0:0";
  ok(clpa_context_create(&cfg, &ctx) == CLPA_ERR_INVALID_ARG, "device spec with handles: %s",
     clpa_last_error());
  clReleaseCommandQueue(app_q);
  clReleaseContext(app_ctx);
  clpa_context_destroy(own);
}

/* regress_no_device_messages: in a fresh process (the ICD loader reads its
 * environment once) with env name=value set, context creation must fail
 * with CLPA_ERR_DEVICE_NOT_FOUND and a message holding want and not
 * forbid; clpa_devices_list must answer CLPA_OK, zero devices, and the
 * same reason. Returns 0 pass, 1 fail, 2 when the variable changed nothing
 * (another OpenCL implementation). Before, both cases said "no OpenCL
 * device found (is an ICD ... installed?)". */
static int no_device_child(const char *name, const char *value, const char *want,
                           const char *forbid) {
  pid_t pid = fork();
  if (pid == 0) {
    setenv(name, value, 1);
    clpa_context *ctx = NULL;
    clpa_status st = clpa_context_create(NULL, &ctx);
    if (st == CLPA_OK) {
      clpa_context_destroy(ctx);
      _exit(2);
    }
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", clpa_last_error());
    printf("# %s=%s: %s: %s\n", name, value, clpa_status_name(st), msg);
    size_t n = 99;
    clpa_status ls = clpa_devices_list(NULL, 0, &n);
    printf("# clpa_devices_list: %s, %zu devices: %s\n", clpa_status_name(ls), n,
           clpa_last_error());
    int good = st == CLPA_ERR_DEVICE_NOT_FOUND && ctx == NULL && strstr(msg, want) &&
               !strstr(msg, forbid) && ls == CLPA_OK && n == 0 && strstr(clpa_last_error(), want);
    fflush(stdout);
    _exit(good ? 0 : 1);
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return 1;
  return WEXITSTATUS(status);
}

static void test_no_device_messages(void) {
  const int icd = no_device_child("OCL_ICD_VENDORS", "/nonexistent-clpa-test", "no OpenCL platform",
                                  "lists no device");
  if (icd == 2) /* e.g. the NVIDIA machine, whose driver ships its own libOpenCL */
    ok(1, "# SKIP the ICD loader here ignores OCL_ICD_VENDORS (a device was still found)");
  else
    ok(icd == 0, "no ICD: the message says no platform is installed");
  int r = no_device_child("POCL_DEVICES", "no-such-pocl-device", "lists no device", "ICD");
  if (r == 2)
    ok(1, "# SKIP POCL_DEVICES changes nothing here (not PoCL)");
  else
    ok(r == 0, "a platform without devices is named, not reported as a missing ICD");
}

/* The tuning table's entry: device, else vendor, else type, else default;
 * what decode and prefill then pick follows it. */
static void test_tuning(void) {
  clpa_context *ctx = NULL;
  if (!ok(clpa_context_create(NULL, &ctx) == CLPA_OK, "a context for the tuning entry")) return;
  clpa_device_info in;
  clpa_context_device_info(ctx, &in);
  clpa_tuning t;
  memset(&t, 0, sizeof t);
  const clpa_status st = clpa_context_tuning(ctx, &t); /* before the message reads t */
  ok(st == CLPA_OK && t.matched[0] && t.decode_partition > 0,
     "tuning entry '%s': decode partition %d (%d resident), prefill path %d, rows %d, keys %d",
     t.matched, t.decode_partition, t.decode_resident, t.prefill_path, t.prefill_rows,
     t.prefill_keys);
  if (in.is_cpu)
    ok(strcmp(t.matched, "type:cpu") == 0 && t.prefill_path == CLPA_PREFILL_ROWS,
       "a CPU gets the CPU entry (rows prefill)");
  else if (in.is_gpu)
    ok(strncmp(t.matched, "type:gpu", 8) == 0 || strncmp(t.matched, "device:", 7) == 0 ||
           (strncmp(t.matched, "vendor:", 7) == 0 && strstr(in.vendor, t.matched + 7)),
       "a GPU gets its own entry, its vendor's or the GPU one ('%s', vendor '%s')", t.matched,
       in.vendor);
  ok(clpa_context_tuning(NULL, &t) == CLPA_ERR_INVALID_ARG &&
         clpa_context_tuning(ctx, NULL) == CLPA_ERR_INVALID_ARG,
     "NULL context or output refused");
  clpa_context_destroy(ctx);
}

int main(void) {
  unsetenv("CLPA_DEVICE");
  /* before this process touches OpenCL: the children inherit its state */
  test_no_device_messages();
  size_t n = 0;
  clpa_status st = clpa_devices_list(NULL, 0, &n);
  if (!ok(st == CLPA_OK && n > 0, "%zu OpenCL device(s): %s", n, clpa_last_error()))
    return done_testing();
  test_tuning();
  clpa_device_info *devs = calloc(n, sizeof *devs);
  ok(clpa_devices_list(devs, n, &n) == CLPA_OK, "list devices");
  for (size_t i = 0; i < n; i++)
    diag("[%d:%d] %s — lanes %s", devs[i].platform_index, devs[i].device_index, devs[i].name,
         clpa_lanes_name(devs[i].lanes));
  test_specs(&devs[0]);
  test_bad_args();
  test_wrapped();
  free(devs);
  return done_testing();
}
