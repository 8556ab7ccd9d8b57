/*
 * wfmt.h — the demo's weight forms: how a matrix W [n, k] is stored on the
 * device (f32, f16 or bf16 row-major, f16 or bf16 tiled, ggml's blocks),
 * their names, sizes and the tiling. The linear layers (linear.h) read
 * every form; the model (model.c) and the GGUF loader choose one.
 */
#ifndef CLPA_DEMO_WFMT_H
#define CLPA_DEMO_WFMT_H

#include <stddef.h>
#include <stdint.h>

#include "clpa.h"

/* A weight's stored form. The block formats are quant.h's: a row of k
 * elements is k / 32 (Q8_0, Q4_0) or k / 256 (the K-quants) blocks. The
 * tiled forms hold f16 or bf16 elements as tiles of 16 rows x 32 k (k a
 * multiple of 32; the rows padded to a multiple of 16), each tile 1 KB in
 * the order gemv's lanes load it: element (c, kk) of W [n, k] at
 *   (c / 16) 16 k + (kk / 32) 512 + ((c % 16) / 8) 256 + (c % 8) 32 + kk % 32
 * (demo_wfmt_tile writes it), so that a warp's load is 512 contiguous
 * bytes (docs/decisions/0036-demo-gemv-streaming-loads.md). Every engine
 * reads them. */
typedef enum demo_wfmt {
  DEMO_W_F32, DEMO_W_F16, DEMO_W_BF16,
  DEMO_W_F16_TILED, DEMO_W_BF16_TILED,
  DEMO_W_Q8_0, DEMO_W_Q4_0, DEMO_W_Q4_K, DEMO_W_Q5_K, DEMO_W_Q6_K,
  DEMO_W_COUNT /* none */
} demo_wfmt;
/* The form of a clpa dtype (f32, f16, bf16) or of a ggml type number (never a tiled form);
 * DEMO_W_COUNT for others. */
demo_wfmt demo_wfmt_of_dtype(clpa_dtype d);
demo_wfmt demo_wfmt_of_ggml(uint32_t type);
/* "f32", "f16", "bf16", "f16_tiled", "bf16_tiled", "q8_0", "q4_0", "q4_K", "q5_K", "q6_K"
 * ("invalid"). */
const char *demo_wfmt_name(demo_wfmt w);
/* The form of that name; DEMO_W_COUNT for another. */
demo_wfmt demo_wfmt_of_name(const char *name);
/* ggml's type number of a form (quant.h's for the block forms; 0 f32, 1 f16, 30 bf16). */
uint32_t demo_wfmt_ggml(demo_wfmt w);
/* Bytes of a row of k elements: 0 where k is not a whole number of blocks (of 32 for the
 * tiled forms). */
size_t demo_wfmt_row_bytes(demo_wfmt w, int32_t k);
/* Bytes of a weight [n, k] in form w (the tiled forms' rows padded to a multiple of 16); 0
 * where k is not a whole number of blocks or n < 1. */
size_t demo_wfmt_bytes(demo_wfmt w, int32_t n, int32_t k);
/* The tiled form of f16 or bf16; w itself for the others. */
demo_wfmt demo_wfmt_tiled(demo_wfmt w);
/* f16 or bf16 for their tiled forms; w itself for the others. */
demo_wfmt demo_wfmt_untiled(demo_wfmt w);
/* Whether w is one of the tiled forms. */
int demo_wfmt_is_tiled(demo_wfmt w);
/* Whether w is one of ggml's block forms (Q8_0 to Q6_K). */
int demo_wfmt_is_block(demo_wfmt w);
/* Elements of a block of w along k: 1 for f32, f16 and bf16, a tile's 32 for the tiled forms,
 * quant.h's for ggml's (0 for no form). */
uint32_t demo_wfmt_block_elems(demo_wfmt w);
/* dst (demo_wfmt_bytes(w, n, k) bytes) = src [n, k] of 16-bit elements row-major as tiled
 * form w holds it, the padding rows zero. Returns 0, or -1 (nothing written) where w is not
 * tiled, k is not a multiple of 32 or n < 1. */
int demo_wfmt_tile(demo_wfmt w, const void *src, void *dst, int32_t n, int32_t k);

#endif
