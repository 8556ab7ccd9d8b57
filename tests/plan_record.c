/*
 * plan_record.c — writes tests/data/decode_plans.txt from lib/'s decode
 * plan as it stood before the planner moved into host/ (issue 43): a
 * context faked from each grid device (plan_grid.h), clpa_decode_validate
 * and clpa_decode_plan on every case. Throwaway: not built by Meson; at
 * its commit, after `ninja -C build`:
 *
 *   cc -std=c11 -O2 -Iinclude -Ibuild/include -Ihost -Ilib tests/plan_record.c \
 *      build/lib/libclpa.a -lOpenCL -lm -lpthread -o /tmp/plan_record
 *   /tmp/plan_record > tests/data/decode_plans.txt   (--all: every line)
 */
#include <assert.h>
#include <stdlib.h>

#include "decode_plan.h"
#include "plan_grid.h"

#define SAMPLE 199 /* every 199th line of a grid goes into the file */

typedef struct walk {
  int all, grid;
  long count[3];
  uint64_t hash[3];
  FILE *sample;
} walk;

static void fake_context(const grid_device *d, clpa_context *ctx) {
  memset(ctx, 0, sizeof *ctx);
  snprintf(ctx->info.name, sizeof ctx->info.name, "%s", d->name);
  snprintf(ctx->info.vendor, sizeof ctx->info.vendor, "%s", d->vendor);
  ctx->info.is_cpu = d->is_cpu, ctx->info.is_gpu = d->is_gpu;
  ctx->info.compute_units = d->compute_units;
  ctx->info.local_mem_bytes = d->local_mem_bytes;
  ctx->info.max_work_group_size = d->max_work_group_size;
  ctx->info.native_float_width = d->native_float_width;
  ctx->info.nv_compute_capability = d->cc;
  ctx->lanes = d->lanes == 2 ? CLPA_LANES_NV_PTX : d->lanes == 1 ? CLPA_LANES_SUBGROUP
                                                                 : CLPA_LANES_EMULATED;
  ctx->info.lanes = ctx->lanes;
  ctx->subgroup_size = d->subgroup_size;
  clpa_tuning_lookup(&ctx->info, &ctx->tuning);
  if (ctx->tuning.decode_partition != d->partition || ctx->tuning.decode_resident != d->resident) {
    fprintf(stderr, "%s: the table says %d/%d\n", d->name, ctx->tuning.decode_partition,
            ctx->tuning.decode_resident);
    exit(1);
  }
}

static int one(const grid_case *gc, void *arg) {
  walk *w = arg;
  static clpa_context ctx;
  static const grid_device *faked;
  if (faked != gc->dev) fake_context(gc->dev, &ctx), faked = gc->dev;
  clpa_decode_params p;
  clpa_decode_params_init(&p);
  p.num_seqs = gc->num_seqs, p.num_heads = gc->num_heads;
  p.max_context_len = gc->max_context_len;
  p.max_blocks_per_seq = (gc->max_context_len + gc->block_size - 1) / gc->block_size;
  p.host_context_lens = gc->host_lens;
  p.path = (clpa_decode_path)gc->path, p.variant = (clpa_decode_variant)gc->variant;
  p.precision = (clpa_precision)gc->precision;
  p.partition_size = gc->partition_size, p.heads_per_group = gc->heads_per_group;
  decode_call c;
  memset(&c, 0, sizeof c);
  c.a.kv.dtype = gc->dtype, c.a.kv.block_size = gc->block_size;
  c.a.kv.num_kv_heads = gc->num_kv_heads, c.a.kv.head_size = gc->head_size;
  c.a.num_heads = gc->num_heads;
  if (clpa_decode_validate(&ctx, &p, &c.a.kv) != CLPA_OK) {
    fprintf(stderr, "invalid case: %s\n", ctx.error);
    exit(1);
  }
  ctx.error[0] = '\0';
  const clpa_status st = clpa_decode_plan(&ctx, &p, &c);
  const int lanes = !c.mma && !c.rows;
  const grid_plan gp = {c.mma ? 2 : c.rows ? 3 : 1, c.v2, c.partition, c.heads_per_group, c.sg,
                        c.max_parts, c.threads, c.key_vectors, c.logits_stride, c.chunk, c.pipe,
                        /* lib/decode.c's decode_spec */
                        lanes && gc->dtype == CLPA_DTYPE_F32 && c.heads_per_group <= 4 ? 128 : 0};
  char key[256], plan[CLPA_ERROR_MAX], line[CLPA_ERROR_MAX + 300];
  grid_key(gc, key, sizeof key);
  grid_plan_text(st, ctx.error, &gp, plan, sizeof plan);
  snprintf(line, sizeof line, "%s : %s\n", key, plan);
  w->hash[gc->grid] = grid_hash(w->hash[gc->grid], line);
  if (w->all || w->count[gc->grid] % SAMPLE == 0) fputs(line, w->sample);
  w->count[gc->grid]++;
  return 0;
}

int main(int argc, char **argv) {
  walk w = {argc > 1 && !strcmp(argv[1], "--all"), 0, {0}, {0}, tmpfile()};
  for (int g = 0; g < 3; g++) w.hash[g] = GRID_HASH_START;
  if (!w.sample) return 1;
  grid_walk(one, &w);
  printf("# Decode plans over tests/plan_grid.h's grid: one line a case (the grid's header says\n"
         "# the format). `grid G N HASH`: grid G has N cases, and HASH is the 64-bit FNV-1a of\n"
         "# all their lines in order; the lines below are every %dth of each grid.\n"
         "# Written by tests/plan_record.c (lib/decode_plan.c before the planner moved into\n"
         "# host/); now by test_host_planner --record.\n", SAMPLE);
  for (int g = 0; g < 3; g++)
    printf("grid %d %ld %016llx\n", g, w.count[g], (unsigned long long)w.hash[g]);
  rewind(w.sample);
  char buf[CLPA_ERROR_MAX + 300];
  while (fgets(buf, sizeof buf, w.sample)) fputs(buf, stdout);
  return 0;
}
