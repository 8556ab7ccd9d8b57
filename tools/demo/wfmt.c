/* wfmt.c — the demo's weight forms (wfmt.h). */
#include "wfmt.h"

#include <string.h>

/* Elements and bytes of a block of each form (a float a "block" of 1). */
static const struct {
  const char *name;
  uint32_t ggml, elems, bytes;
} forms[DEMO_W_COUNT] = {
    {"f32", 0, 1, 4},       {"f16", 1, 1, 2},        {"bf16", 30, 1, 2},
    {"f16_tiled", 1, 32, 64}, {"bf16_tiled", 30, 32, 64}, /* their ggml types: the elements' */
    {"q8_0", 8, 32, 34},
    {"q4_0", 2, 32, 18},    {"q4_K", 12, 256, 144}, {"q5_K", 13, 256, 176}, {"q6_K", 14, 256, 210},
};

int demo_wfmt_is_tiled(demo_wfmt w) { return w == DEMO_W_F16_TILED || w == DEMO_W_BF16_TILED; }

int demo_wfmt_is_block(demo_wfmt w) { return w >= DEMO_W_Q8_0 && w < DEMO_W_COUNT; }

uint32_t demo_wfmt_block_elems(demo_wfmt w) { return (unsigned)w < DEMO_W_COUNT ? forms[w].elems : 0; }

demo_wfmt demo_wfmt_of_dtype(clpa_dtype d) {
  return d == CLPA_DTYPE_F32    ? DEMO_W_F32
         : d == CLPA_DTYPE_F16  ? DEMO_W_F16
         : d == CLPA_DTYPE_BF16 ? DEMO_W_BF16
                                : DEMO_W_COUNT;
}

demo_wfmt demo_wfmt_of_ggml(uint32_t type) {
  for (int w = 0; w < DEMO_W_COUNT; w++)
    if (forms[w].ggml == type && !demo_wfmt_is_tiled((demo_wfmt)w)) return (demo_wfmt)w;
  return DEMO_W_COUNT;
}

const char *demo_wfmt_name(demo_wfmt w) { return (unsigned)w < DEMO_W_COUNT ? forms[w].name : "invalid"; }

demo_wfmt demo_wfmt_of_name(const char *name) {
  for (int w = 0; name && w < DEMO_W_COUNT; w++)
    if (strcmp(forms[w].name, name) == 0) return (demo_wfmt)w;
  return DEMO_W_COUNT;
}

uint32_t demo_wfmt_ggml(demo_wfmt w) { return (unsigned)w < DEMO_W_COUNT ? forms[w].ggml : 0; }

size_t demo_wfmt_row_bytes(demo_wfmt w, int32_t k) {
  if ((unsigned)w >= DEMO_W_COUNT || k < 0 || k % (int32_t)forms[w].elems) return 0;
  return (size_t)(k / (int32_t)forms[w].elems) * forms[w].bytes;
}

demo_wfmt demo_wfmt_tiled(demo_wfmt w) {
  return w == DEMO_W_F16 ? DEMO_W_F16_TILED : w == DEMO_W_BF16 ? DEMO_W_BF16_TILED : w;
}

demo_wfmt demo_wfmt_untiled(demo_wfmt w) {
  return w == DEMO_W_F16_TILED ? DEMO_W_F16 : w == DEMO_W_BF16_TILED ? DEMO_W_BF16 : w;
}

size_t demo_wfmt_bytes(demo_wfmt w, int32_t n, int32_t k) {
  const int64_t rows = demo_wfmt_is_tiled(w) ? ((int64_t)n + 15) / 16 * 16 : n;
  return n < 1 ? 0 : demo_wfmt_row_bytes(w, k) * (size_t)rows;
}

int demo_wfmt_tile(demo_wfmt w, const void *src, void *dst, int32_t n, int32_t k) {
  if (!demo_wfmt_is_tiled(w) || n < 1 || k < 32 || k % 32) return -1;
  const uint16_t *s = src;
  uint16_t *d = dst;
  const size_t kk = (size_t)k, rows = ((size_t)n + 15) / 16 * 16;
  for (size_t c = 0; c < rows; c++)
    for (size_t j = 0; j < kk; j++)
      d[c / 16 * 16 * kk + j / 32 * 512 + c % 16 / 8 * 256 + c % 8 * 32 + j % 32] =
          c < (size_t)n ? s[c * kk + j] : 0;
  return 0;
}
