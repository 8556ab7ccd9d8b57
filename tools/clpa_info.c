/*
 * clpa-info — lists every OpenCL platform and device with what clpa needs
 * to know of it, and marks the one CLPA_DEVICE (or the default rule)
 * selects. With --smoke it also builds and runs a tiny kernel there; with
 * --json it prints all of it as one JSON line.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clpa.h"
#include "tool_cli.h"

static void print_device(const clpa_device_info *d, int selected) {
  printf("%s [%d:%d] %s\n", selected ? "*" : " ", d->platform_index, d->device_index, d->name);
  printf("      platform     %s (%s)\n", d->platform_name, d->platform_version);
  printf("      vendor       %s, driver %s\n", d->vendor, d->driver_version);
  printf("      version      %s, %s\n", d->device_version, d->c_version);
  printf("      type         %s\n", d->is_gpu ? "GPU" : d->is_cpu ? "CPU" : "other");
  printf("      compute      %u units, max work-group %zu, native float vector %u\n",
         d->compute_units, d->max_work_group_size, d->native_float_width);
  printf("      memory       global %.1f GiB (max alloc %.1f GiB), local %llu KiB\n",
         (double)d->global_mem_bytes / (1 << 30), (double)d->max_alloc_bytes / (1 << 30),
         (unsigned long long)(d->local_mem_bytes / 1024));
  printf("      subgroups    %s%s\n", d->has_subgroups ? "yes" : "no",
         d->has_subgroups ? (d->has_subgroup_shuffle ? " (with shuffles)" : " (no shuffles)") : "");
  printf("      fp16 / fp64  %s / %s\n", d->has_fp16 ? "yes" : "no", d->has_fp64 ? "yes" : "no");
  printf("      lane groups  %s\n", clpa_lanes_name(d->lanes));
  if (d->nv_compute_capability)
    printf("      NVIDIA       compute capability %d.%d (tensor-core paths: %s)\n",
           d->nv_compute_capability / 10, d->nv_compute_capability % 10,
           d->nv_compute_capability >= 80 ? "yes" : "no, they need 8.0");
}

static const char *type_name(const clpa_device_info *d) {
  return d->is_gpu ? "gpu" : d->is_cpu ? "cpu" : "other";
}

static void json_device(cli_json *j, const clpa_device_info *d, int selected) {
  cli_json_object(j, NULL);
  cli_json_int(j, "platform_index", d->platform_index);
  cli_json_int(j, "device_index", d->device_index);
  cli_json_bool(j, "selected", selected);
  cli_json_str(j, "name", d->name);
  cli_json_str(j, "vendor", d->vendor);
  cli_json_str(j, "platform", d->platform_name);
  cli_json_str(j, "platform_version", d->platform_version);
  cli_json_str(j, "driver_version", d->driver_version);
  cli_json_str(j, "device_version", d->device_version);
  cli_json_str(j, "c_version", d->c_version);
  cli_json_str(j, "type", type_name(d));
  cli_json_int(j, "compute_units", d->compute_units);
  cli_json_int(j, "max_work_group_size", (long long)d->max_work_group_size);
  cli_json_int(j, "native_float_width", d->native_float_width);
  cli_json_int(j, "global_mem_bytes", (long long)d->global_mem_bytes);
  cli_json_int(j, "max_alloc_bytes", (long long)d->max_alloc_bytes);
  cli_json_int(j, "local_mem_bytes", (long long)d->local_mem_bytes);
  cli_json_bool(j, "subgroups", d->has_subgroups);
  cli_json_bool(j, "subgroup_shuffle", d->has_subgroup_shuffle);
  cli_json_bool(j, "fp16", d->has_fp16);
  cli_json_bool(j, "fp64", d->has_fp64);
  cli_json_str(j, "lanes", clpa_lanes_name(d->lanes));
  cli_json_int(j, "nv_compute_capability", d->nv_compute_capability);
  cli_json_end(j);
}

typedef struct smoke_result {
  clpa_status status;
  const char *error;      /* when status is not CLPA_OK */
  clpa_program_stats ps;
  char cache_dir[1024];   /* "" when the binary cache is off */
  clpa_tuning tuning;     /* the context's tuning-table entry */
} smoke_result;

/* Builds and runs the smoke kernel on the selected device. */
static void smoke(smoke_result *r) {
  static char error[1024];
  clpa_context *ctx = NULL;
  memset(r, 0, sizeof *r);
  cli_progress("clpa-info: building and running the smoke kernel...");
  r->status = clpa_context_create(NULL, &ctx);
  if (r->status == CLPA_OK) r->status = clpa_smoke_test(ctx, 1 << 20);
  if (r->status == CLPA_OK) clpa_context_program_stats(ctx, &r->ps);
  if (r->status == CLPA_OK) r->status = clpa_context_tuning(ctx, &r->tuning);
  const char *dir = ctx ? clpa_context_cache_dir(ctx) : NULL;
  snprintf(r->cache_dir, sizeof r->cache_dir, "%s", dir ? dir : "");
  snprintf(error, sizeof error, "%s", clpa_last_error());
  r->error = error;
  clpa_context_destroy(ctx);
  cli_progress_end();
}

static void print_smoke(const smoke_result *r) {
  if (r->status != CLPA_OK) {
    printf("smoke kernel: FAILED: %s: %s\n", clpa_status_name(r->status), r->error);
    return;
  }
  printf("smoke kernel: ok (program %s in %.3f s)\n",
         r->ps.loaded_from_disk ? "loaded from the binary cache" : "built from source",
         r->ps.build_seconds);
  printf("binary cache: %s%s\n", r->cache_dir[0] ? r->cache_dir : "off",
         r->ps.disk_write_failed ? " (NOT WRITABLE: programs are rebuilt in every process)"
         : r->ps.disk_rejected   ? " (a cache file was refused and rebuilt)"
                                 : "");
  const clpa_tuning *t = &r->tuning;
  printf("tuning:       %s (decode partition %d", t->matched, t->decode_partition);
  if (t->decode_resident) printf(", %d lanes work-groups a compute unit", t->decode_resident);
  printf("; prefill %s path",
         t->prefill_path == CLPA_PREFILL_ROWS    ? "rows"
         : t->prefill_path == CLPA_PREFILL_TILES ? "tiles"
         : t->prefill_path == CLPA_PREFILL_MMA   ? "mma"
                                                 : "auto");
  if (t->prefill_rows) printf(", %d rows", t->prefill_rows);
  if (t->prefill_keys) printf(", %d keys", t->prefill_keys);
  printf(")\n");
}

static void json_smoke(cli_json *j, const smoke_result *r) {
  cli_json_object(j, "smoke");
  cli_json_bool(j, "ok", r->status == CLPA_OK);
  if (r->status != CLPA_OK) {
    cli_json_str(j, "status", clpa_status_name(r->status));
    cli_json_str(j, "error", r->error);
  } else {
    cli_json_str(j, "program", r->ps.loaded_from_disk ? "binary_cache" : "built");
    cli_json_num(j, "build_seconds", r->ps.build_seconds, 3);
    cli_json_str(j, "cache_dir", r->cache_dir[0] ? r->cache_dir : NULL);
    cli_json_bool(j, "cache_writable", !r->ps.disk_write_failed);
    cli_json_bool(j, "cache_file_refused", r->ps.disk_rejected > 0);
    cli_json_str(j, "tuning", r->tuning.matched);
    cli_json_num(j, "decode_partition", r->tuning.decode_partition, 0);
    cli_json_num(j, "decode_resident", r->tuning.decode_resident, 0);
  }
  cli_json_end(j);
}

static int parse(int argc, char **argv, int *smoke_run, int *json) {
  const cli_opt opts[] = {
      {"smoke", CLI_FLAG, smoke_run, 0, 0, NULL,
       "also build and run a tiny kernel on the selected\ndevice and say whether the program "
       "came from the\nbinary cache, how long that took, where the\ncache is, and the tuning-table entry it uses",
       NULL, NULL},
      {"json", CLI_FLAG, json, 0, 0, NULL,
       "print one JSON line: op (\"info\"), version,\n"
       "selected_by, selected (an index into devices or\nnull), "
       "error,\ndevices (an array), and smoke with --smoke", NULL, NULL},
      {NULL, 0, NULL, 0, 0, NULL, NULL, NULL, NULL},
  };
  const cli_cmd cmd = {
      "clpa-info",
      "Lists every OpenCL platform and device with what clpa needs to know of it; '*'\n"
      "marks the one clpa selects: CLPA_DEVICE (P:D indices, or a case-insensitive\n"
      "substring of the device, vendor or platform name), else the first GPU, else the\n"
      "first device.",
      opts,
      "Exit status: 0, 1 when there is no device, the selection fails or the smoke\n"
      "kernel fails, 2 for a bad command line.\n"
      "Device JSON keys: platform_index, device_index, selected, name, vendor,\n"
      "platform, platform_version, driver_version, device_version, c_version, type\n"
      "(gpu, cpu, other), compute_units, max_work_group_size, global_mem_bytes,\n"
      "max_alloc_bytes, local_mem_bytes, subgroups, subgroup_shuffle, fp16, fp64,\n"
      "lanes.",
      clpa_version_string(),
  };
  return cli_parse(&cmd, argc, argv);
}

/* The --json report: everything main prints, as one line. */
static int report_json(const clpa_device_info *devs, size_t n, clpa_status st, size_t sel,
                       const char *why, int smoke_run) {
  smoke_result r = {CLPA_OK, NULL, {0}, "", {"", 0, 0, 0, 0, 0, {0}}};
  if (smoke_run && st == CLPA_OK) smoke(&r);
  cli_json j;
  cli_json_begin(&j, stdout);
  cli_json_str(&j, "op", "info");
  cli_json_str(&j, "version", clpa_version_string());
  cli_json_str(&j, "selected_by", getenv("CLPA_DEVICE") ? "CLPA_DEVICE" : "default");
  if (st == CLPA_OK && n > 0)
    cli_json_int(&j, "selected", (long long)sel);
  else
    cli_json_str(&j, "selected", NULL);
  cli_json_str(&j, "error", why);
  cli_json_array(&j, "devices");
  for (size_t i = 0; i < n; i++) json_device(&j, &devs[i], st == CLPA_OK && i == sel);
  cli_json_end(&j);
  if (smoke_run && st == CLPA_OK) json_smoke(&j, &r);
  cli_json_end(&j);
  return st != CLPA_OK || n == 0 || (smoke_run && r.status != CLPA_OK);
}

int main(int argc, char **argv) {
  int smoke_run = 0, json = 0;
  int parsed = parse(argc, argv, &smoke_run, &json);
  if (parsed != CLI_RUN) return parsed;
  size_t n = 0;
  clpa_device_info *devs = NULL;
  clpa_status st = clpa_devices_list(NULL, 0, &n);
  if (st == CLPA_OK && n > 0) {
    devs = calloc(n, sizeof *devs);
    st = devs ? clpa_devices_list(devs, n, &n) : CLPA_ERR_OUT_OF_MEMORY;
  }
  /* no device: the library says why (no platform, or which one failed) */
  char why[1024] = "";
  if (st != CLPA_OK || n == 0) {
    snprintf(why, sizeof why, "%s", st == CLPA_ERR_OUT_OF_MEMORY ? "out of memory"
                                                                 : clpa_last_error());
    free(devs);
    devs = NULL;
  }
  size_t sel = 0;
  if (st == CLPA_OK && n > 0 && (st = clpa_device_select(NULL, &sel)) != CLPA_OK)
    snprintf(why, sizeof why, "selection: %s", clpa_last_error());
  if (json) {
    int rc = report_json(devs, devs ? n : 0, st, sel, why[0] ? why : NULL, smoke_run);
    free(devs);
    return rc;
  }
  printf("clpa %s\n", clpa_version_string());
  if (!devs) {
    if (st != CLPA_OK)
      fprintf(stderr, "clpa-info: %s\n", why);
    else
      printf("%s\n", why);
    return 1;
  }
  if (st != CLPA_OK) printf("%s\n", why);
  const char *env = getenv("CLPA_DEVICE");
  printf("%zu device(s); selected by %s\n", n, env ? "CLPA_DEVICE" : "the default rule");
  for (size_t i = 0; i < n; i++) print_device(&devs[i], st == CLPA_OK && i == sel);
  free(devs);
  if (st != CLPA_OK) return 1;
  if (smoke_run) {
    smoke_result r;
    smoke(&r);
    print_smoke(&r);
    if (r.status != CLPA_OK) return 1;
  }
  return 0;
}
