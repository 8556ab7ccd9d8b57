/*
 * clpa-info — lists every OpenCL platform and device with what clpa needs
 * to know of it, and marks the one CLPA_DEVICE (or the default rule)
 * selects. With --smoke it also builds and runs a tiny kernel there.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clpa.h"

static void print_device(const clpa_device_info *d, int selected) {
  printf("%s [%d:%d] %s\n", selected ? "*" : " ", d->platform_index, d->device_index, d->name);
  printf("      platform     %s (%s)\n", d->platform_name, d->platform_version);
  printf("      vendor       %s, driver %s\n", d->vendor, d->driver_version);
  printf("      version      %s, %s\n", d->device_version, d->c_version);
  printf("      type         %s\n", d->is_gpu ? "GPU" : d->is_cpu ? "CPU" : "other");
  printf("      compute      %u units, max work-group %zu\n", d->compute_units,
         d->max_work_group_size);
  printf("      memory       global %.1f GiB (max alloc %.1f GiB), local %llu KiB\n",
         (double)d->global_mem_bytes / (1 << 30), (double)d->max_alloc_bytes / (1 << 30),
         (unsigned long long)(d->local_mem_bytes / 1024));
  printf("      subgroups    %s%s\n", d->has_subgroups ? "yes" : "no",
         d->has_subgroups ? (d->has_subgroup_shuffle ? " (with shuffles)" : " (no shuffles)") : "");
  printf("      fp16 / fp64  %s / %s\n", d->has_fp16 ? "yes" : "no", d->has_fp64 ? "yes" : "no");
  printf("      lane groups  %s\n", clpa_lanes_name(d->lanes));
}

int main(int argc, char **argv) {
  int smoke = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--smoke") == 0) {
      smoke = 1;
    } else {
      printf("usage: clpa-info [--smoke]\n"
             "Lists OpenCL devices; '*' marks the one clpa selects (CLPA_DEVICE=P:D or a name"
             " substring overrides the default: first GPU, else first device).\n");
      return strcmp(argv[i], "--help") == 0 ? 0 : 2;
    }
  }
  printf("clpa %s\n", clpa_version_string());
  size_t n = 0;
  if (clpa_devices_list(NULL, 0, &n) != CLPA_OK) {
    fprintf(stderr, "clpa-info: %s\n", clpa_last_error());
    return 1;
  }
  if (n == 0) {
    /* the library says why: no platform (no ICD), or which platform failed */
    printf("%s\n", clpa_last_error());
    return 1;
  }
  clpa_device_info *devs = calloc(n, sizeof *devs);
  if (!devs || clpa_devices_list(devs, n, &n) != CLPA_OK) {
    fprintf(stderr, "clpa-info: %s\n", devs ? clpa_last_error() : "out of memory");
    free(devs);
    return 1;
  }
  size_t sel = 0;
  clpa_status st = clpa_device_select(NULL, &sel);
  if (st != CLPA_OK) printf("selection: %s\n", clpa_last_error());
  const char *env = getenv("CLPA_DEVICE");
  printf("%zu device(s); selected by %s\n", n, env ? "CLPA_DEVICE" : "the default rule");
  for (size_t i = 0; i < n; i++) print_device(&devs[i], st == CLPA_OK && i == sel);
  free(devs);
  if (st != CLPA_OK) return 1;
  if (smoke) {
    clpa_context *ctx;
    st = clpa_context_create(NULL, &ctx);
    if (st == CLPA_OK) st = clpa_smoke_test(ctx, 1 << 20);
    clpa_program_stats ps = {0};
    if (st == CLPA_OK) clpa_context_program_stats(ctx, &ps);
    if (st == CLPA_OK) {
      printf("smoke kernel: ok (program %s in %.3f s)\n",
             ps.loaded_from_disk ? "loaded from the binary cache" : "built from source",
             ps.build_seconds);
      const char *dir = clpa_context_cache_dir(ctx);
      printf("binary cache: %s%s\n", dir ? dir : "off",
             ps.disk_write_failed ? " (NOT WRITABLE: programs are rebuilt in every process)"
             : ps.disk_rejected   ? " (a cache file was refused and rebuilt)"
                                  : "");
    } else
      printf("smoke kernel: FAILED: %s: %s\n", clpa_status_name(st), clpa_last_error());
    clpa_context_destroy(ctx);
    if (st != CLPA_OK) return 1;
  }
  return 0;
}
