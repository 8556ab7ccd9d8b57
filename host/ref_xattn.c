/* ref_xattn.c — XAttention's estimation, naive in double (see ref_xattn.h). */
#include "ref_xattn.h"

#include <math.h>
#include <stdlib.h>

#include "last_error.h"
#include "size_math.h"

/* ======================================================================
 * Checks
 * ==================================================================== */

static clpa_status check_shape(const clpa_ref_xattn_shape *sh, clpa_ref_xattn_dims *d) {
  CLPA_CHECK(NULL, !sh, CLPA_ERR_INVALID_ARG, "shape must not be NULL");
  CLPA_CHECK(NULL, sh->num_q <= 0, CLPA_ERR_INVALID_ARG, "num_q = %d must be > 0", sh->num_q);
  CLPA_CHECK(NULL, sh->head_dim <= 0, CLPA_ERR_INVALID_ARG, "head_dim = %d must be > 0",
             sh->head_dim);
  CLPA_CHECK(NULL, sh->stride <= 0, CLPA_ERR_INVALID_ARG, "stride = %d must be > 0", sh->stride);
  CLPA_CHECK(NULL, sh->block_size <= 0 || sh->block_size % sh->stride != 0, CLPA_ERR_INVALID_ARG,
             "block_size = %d is not a positive multiple of stride = %d", sh->block_size,
             sh->stride);
  CLPA_CHECK(NULL, sh->num_k < 0, CLPA_ERR_INVALID_ARG, "num_k = %d must be >= 0", sh->num_k);
  CLPA_CHECK(NULL, sh->q_offset < 0 || sh->q_offset % sh->block_size != 0, CLPA_ERR_INVALID_ARG,
             "q_offset = %d is not a non-negative multiple of block_size = %d", sh->q_offset,
             sh->block_size);
  CLPA_CHECK(NULL, (int64_t)sh->q_offset + sh->num_q > sh->num_k, CLPA_ERR_INVALID_ARG,
             "q_offset + num_q = %d + %d exceeds num_k = %d (a query without its key)",
             sh->q_offset, sh->num_q, sh->num_k);
  const int32_t bs = sh->block_size / sh->stride;
  /* Whole strided groups, the last one padded with zero tokens. */
  const int32_t rows = (int32_t)(((int64_t)sh->num_q + sh->stride - 1) / sh->stride);
  const int32_t cols = (int32_t)(((int64_t)sh->num_k + sh->stride - 1) / sh->stride);
  const int32_t qb = (int32_t)(((int64_t)rows + bs - 1) / bs);
  const int32_t kb = (int32_t)(((int64_t)cols + bs - 1) / bs);
  const size_t dim = (size_t)sh->head_dim;
  size_t bytes;
  CLPA_CHECK(NULL,
             !clpa_size_mul_add((size_t)sh->num_q, dim, 0, &bytes) ||
                 !clpa_size_mul_add(bytes, sizeof(float), 0, &bytes) ||
                 !clpa_size_mul_add((size_t)sh->num_k, dim, 0, &bytes) ||
                 !clpa_size_mul_add(bytes, sizeof(float), 0, &bytes),
             CLPA_ERR_INVALID_ARG,
             "q [%d][%d] or k [%d][%d] floats do not fit in size_t bytes", sh->num_q,
             sh->head_dim, sh->num_k, sh->head_dim);
  CLPA_CHECK(NULL,
             !clpa_size_mul_add((size_t)qb, (size_t)kb, 0, &bytes) ||
                 !clpa_size_mul_add(bytes, sizeof(double), 0, &bytes),
             CLPA_ERR_INVALID_ARG, "the [%d][%d] block arrays do not fit in size_t bytes", qb, kb);
  /* Scratch: one row of scores (the oracle), one row of ranked blocks. */
  CLPA_CHECK(NULL,
             !clpa_size_mul_add((size_t)cols, sizeof(double), 0, &bytes) ||
                 !clpa_size_mul_add((size_t)kb, 2 * sizeof(double), 0, &bytes),
             CLPA_ERR_INVALID_ARG, "scratch for %d columns or %d blocks does not fit in size_t",
             cols, kb);
  d->rows = rows;
  d->cols = cols;
  d->rows_per_block = bs;
  d->q_blocks = qb;
  d->k_blocks = kb;
  d->row0 = sh->q_offset / sh->stride;
  d->diag0 = sh->q_offset / sh->block_size;
  return CLPA_OK;
}

clpa_status clpa_ref_xattn_dims_get(const clpa_ref_xattn_shape *shape, clpa_ref_xattn_dims *dims) {
  clpa_ref_xattn_dims d;
  clpa_status st = check_shape(shape, &d);
  if (st == CLPA_OK && dims) *dims = d;
  return st;
}

/* The chunk lies in [0, rows) x [0, cols) and its scores array fits;
 * with aligned, it also starts on a block and ends on one or at the end. */
static clpa_status check_chunk(const clpa_ref_xattn_dims *d, clpa_ref_xattn_chunk c,
                               int aligned) {
  CLPA_CHECK(NULL, c.q_start < 0 || c.q_len <= 0 || c.q_start > d->rows - c.q_len,
             CLPA_ERR_INVALID_ARG,
             "chunk rows [q_start = %d, + q_len = %d) are empty or outside [0, rows = %d)",
             c.q_start, c.q_len, d->rows);
  CLPA_CHECK(NULL, c.k_start < 0 || c.k_len <= 0 || c.k_start > d->cols - c.k_len,
             CLPA_ERR_INVALID_ARG,
             "chunk columns [k_start = %d, + k_len = %d) are empty or outside [0, cols = %d)",
             c.k_start, c.k_len, d->cols);
  size_t bytes;
  CLPA_CHECK(NULL,
             !clpa_size_mul_add((size_t)c.q_len, (size_t)c.k_len, 0, &bytes) ||
                 !clpa_size_mul_add(bytes, sizeof(double), 0, &bytes),
             CLPA_ERR_INVALID_ARG, "chunk scores [%d][%d] do not fit in size_t bytes", c.q_len,
             c.k_len);
  if (!aligned) return CLPA_OK;
  const int32_t bs = d->rows_per_block, q_end = c.q_start + c.q_len, k_end = c.k_start + c.k_len;
  CLPA_CHECK(NULL, c.q_start % bs != 0 || (q_end % bs != 0 && q_end != d->rows),
             CLPA_ERR_INVALID_ARG,
             "chunk rows [%d, %d) are not block-aligned (multiples of block_size/stride = %d, "
             "or ending at rows = %d)",
             c.q_start, q_end, bs, d->rows);
  CLPA_CHECK(NULL, c.k_start % bs != 0 || (k_end % bs != 0 && k_end != d->cols),
             CLPA_ERR_INVALID_ARG,
             "chunk columns [%d, %d) are not block-aligned (multiples of block_size/stride = %d, "
             "or ending at cols = %d)",
             c.k_start, k_end, bs, d->cols);
  return CLPA_OK;
}

/* Visible columns of the chunk's row i: [k_start, k_start + n), n >= 0. */
static int32_t visible(const clpa_ref_xattn_dims *d, clpa_ref_xattn_chunk c, int32_t i) {
  const int64_t n = (int64_t)d->row0 + c.q_start + i + 1 - c.k_start;
  return n < 0 ? 0 : n > c.k_len ? c.k_len : (int32_t)n;
}

/* Token rows [first, first + n) of a [.][dim] float array are finite. */
static clpa_status check_floats(const char *name, const float *x, size_t dim, int64_t first,
                                int64_t n) {
  for (int64_t t = first; t < first + n; t++)
    for (size_t e = 0; e < dim; e++)
      CLPA_CHECK(NULL, !isfinite(x[(size_t)t * dim + e]), CLPA_ERR_INVALID_ARG,
                 "%s[%lld][%zu] = %g is not finite", name, (long long)t, e,
                 (double)x[(size_t)t * dim + e]);
  return CLPA_OK;
}

/* Every visible score of the chunk is finite. */
static clpa_status check_scores(const clpa_ref_xattn_dims *d, clpa_ref_xattn_chunk c,
                                const double *scores) {
  for (int32_t i = 0; i < c.q_len; i++) {
    const double *row = scores + (size_t)i * (size_t)c.k_len;
    const int32_t n = visible(d, c, i);
    for (int32_t j = 0; j < n; j++)
      CLPA_CHECK(NULL, !isfinite(row[j]), CLPA_ERR_INVALID_ARG,
                 "scores[%d][%d] = %g (visible) is not finite", i, j, row[j]);
  }
  return CLPA_OK;
}

/* ======================================================================
 * Scores
 * ==================================================================== */

static double xattn_scale(const clpa_ref_xattn_shape *sh) {
  return 1.0 / (sqrt((double)sh->head_dim) * (double)sh->stride);
}

/* Whether the pair (q[qi], k[kj]) adds to a score: a token past num_q or
 * num_k is zero padding, neither read nor added. */
static int real_pair(const clpa_ref_xattn_shape *sh, size_t qi, size_t kj) {
  return qi < (size_t)sh->num_q && kj < (size_t)sh->num_k;
}

/* score(r, c) the reshape way: one dot of the two S*D vectors, element
 * e = t*D + dd of each being q[rS + S-1-t][dd] and k[cS + t][dd]. */
static double strided_dot(const clpa_ref_xattn_shape *sh, const float *q, const float *k,
                          int32_t r, int32_t c) {
  const size_t dim = (size_t)sh->head_dim, s = (size_t)sh->stride;
  double dot = 0.0;
  for (size_t e = 0; e < s * dim; e++) {
    const size_t t = e / dim, dd = e % dim, qi = (size_t)r * s + s - 1 - t, kj = (size_t)c * s + t;
    if (real_pair(sh, qi, kj)) dot += (double)q[qi * dim + dd] * (double)k[kj * dim + dd];
  }
  return dot;
}

/* Token rows [first, first + n) of a [.][dim] float array cut at its
 * last token, num (the padding is not read). */
static clpa_status check_tokens(const char *name, const float *x, size_t dim, int64_t first,
                                int64_t n, int64_t num) {
  return check_floats(name, x, dim, first, (first + n < num ? first + n : num) - first);
}

clpa_status clpa_ref_xattn_scores(const clpa_ref_xattn_shape *shape, const float *q,
                                  const float *k, clpa_ref_xattn_chunk chunk, double *scores) {
  clpa_ref_xattn_dims d;
  clpa_status st = check_shape(shape, &d);
  if (st == CLPA_OK) st = check_chunk(&d, chunk, 0);
  if (st != CLPA_OK) return st;
  CLPA_CHECK(NULL, !q || !k || !scores, CLPA_ERR_INVALID_ARG,
             "q, k and scores must not be NULL");
  const int64_t s = shape->stride;
  const size_t dim = (size_t)shape->head_dim;
  /* The last row sees the most columns. */
  const int32_t kvis = visible(&d, chunk, chunk.q_len - 1);
  st = check_tokens("q", q, dim, chunk.q_start * s, chunk.q_len * s, shape->num_q);
  if (st == CLPA_OK) st = check_tokens("k", k, dim, chunk.k_start * s, kvis * s, shape->num_k);
  if (st != CLPA_OK) return st;

  const double scale = xattn_scale(shape);
  for (int32_t i = 0; i < chunk.q_len; i++) {
    double *row = scores + (size_t)i * (size_t)chunk.k_len;
    const int32_t n = visible(&d, chunk, i);
    for (int32_t j = 0; j < chunk.k_len; j++)
      row[j] = j < n ? scale * strided_dot(shape, q, k, chunk.q_start + i, chunk.k_start + j)
                     : -INFINITY;
  }
  return CLPA_OK;
}

/* ======================================================================
 * Phase 1: partial statistics of one key chunk
 * ==================================================================== */

clpa_status clpa_ref_xattn_partial_stats(const clpa_ref_xattn_shape *shape,
                                         clpa_ref_xattn_chunk chunk, const double *scores,
                                         double *m, double *l) {
  clpa_ref_xattn_dims d;
  clpa_status st = check_shape(shape, &d);
  if (st == CLPA_OK) st = check_chunk(&d, chunk, 0);
  if (st != CLPA_OK) return st;
  CLPA_CHECK(NULL, !scores || !m || !l, CLPA_ERR_INVALID_ARG,
             "scores, m and l must not be NULL");
  st = check_scores(&d, chunk, scores);
  if (st != CLPA_OK) return st;

  for (int32_t i = 0; i < chunk.q_len; i++) {
    const double *row = scores + (size_t)i * (size_t)chunk.k_len;
    const int32_t n = visible(&d, chunk, i);
    double mi = -INFINITY, li = 0.0;
    for (int32_t j = 0; j < n; j++)
      if (row[j] > mi) mi = row[j];
    for (int32_t j = 0; j < n; j++) li += exp(row[j] - mi);
    m[i] = mi;
    l[i] = li;
  }
  return CLPA_OK;
}

/* ======================================================================
 * Phase 2: merge across key chunks
 * ==================================================================== */

clpa_status clpa_ref_xattn_merge_stats(size_t num_chunks, size_t num_rows, const double *m_parts,
                                       const double *l_parts, double *m, double *l) {
  CLPA_CHECK(NULL, num_chunks == 0, CLPA_ERR_INVALID_ARG, "num_chunks must be > 0");
  size_t bytes;
  CLPA_CHECK(NULL,
             !clpa_size_mul_add(num_chunks, num_rows, 0, &bytes) ||
                 !clpa_size_mul_add(bytes, sizeof(double), 0, &bytes),
             CLPA_ERR_INVALID_ARG, "num_chunks*num_rows = %zu*%zu doubles do not fit in size_t",
             num_chunks, num_rows);
  if (num_rows == 0) return CLPA_OK;
  CLPA_CHECK(NULL, !m_parts || !l_parts || !m || !l, CLPA_ERR_INVALID_ARG,
             "m_parts, l_parts, m and l must not be NULL");
  for (size_t c = 0; c < num_chunks; c++)
    for (size_t r = 0; r < num_rows; r++) {
      const double mi = m_parts[c * num_rows + r], li = l_parts[c * num_rows + r];
      CLPA_CHECK(NULL,
                 !(mi == -INFINITY && li == 0.0) && !(isfinite(mi) && isfinite(li) && li > 0),
                 CLPA_ERR_INVALID_ARG,
                 "part %zu row %zu: (m, l) = (%g, %g) is neither (-inf, 0) nor (finite, > 0)", c,
                 r, mi, li);
    }

  for (size_t r = 0; r < num_rows; r++) {
    double mr = -INFINITY, lr = 0.0;
    for (size_t c = 0; c < num_chunks; c++)
      if (m_parts[c * num_rows + r] > mr) mr = m_parts[c * num_rows + r];
    for (size_t c = 0; c < num_chunks; c++) {
      const double mi = m_parts[c * num_rows + r];
      if (mi != -INFINITY) lr += l_parts[c * num_rows + r] * exp(mi - mr);
    }
    m[r] = mr;
    l[r] = lr;
  }
  return CLPA_OK;
}

/* ======================================================================
 * Phase 3: normalise with the global statistics, sum into blocks
 * ==================================================================== */

clpa_status clpa_ref_xattn_block_sums(const clpa_ref_xattn_shape *shape,
                                      clpa_ref_xattn_chunk chunk, const double *scores,
                                      const double *m, const double *l, double *mass) {
  clpa_ref_xattn_dims d;
  clpa_status st = check_shape(shape, &d);
  if (st == CLPA_OK) st = check_chunk(&d, chunk, 1);
  if (st != CLPA_OK) return st;
  CLPA_CHECK(NULL, !scores || !m || !l || !mass, CLPA_ERR_INVALID_ARG,
             "scores, m, l and mass must not be NULL");
  st = check_scores(&d, chunk, scores);
  if (st != CLPA_OK) return st;
  for (int32_t i = 0; i < chunk.q_len; i++)
    CLPA_CHECK(NULL, visible(&d, chunk, i) > 0 && !(isfinite(m[i]) && isfinite(l[i]) && l[i] > 0),
               CLPA_ERR_INVALID_ARG,
               "row %d: global (m, l) = (%g, %g) must be finite with l > 0 (global stats of a "
               "row with keys)",
               i, m[i], l[i]);

  const int32_t bs = d.rows_per_block;
  const size_t kb_n = (size_t)d.k_blocks;
  const int32_t qb0 = chunk.q_start / bs, qb1 = (chunk.q_start + chunk.q_len - 1) / bs;
  const int32_t kb0 = chunk.k_start / bs, kb1 = (chunk.k_start + chunk.k_len - 1) / bs;
  for (int32_t qb = qb0; qb <= qb1; qb++)
    for (int32_t kb = kb0; kb <= kb1; kb++) mass[(size_t)qb * kb_n + (size_t)kb] = 0.0;
  for (int32_t i = 0; i < chunk.q_len; i++) {
    const double *row = scores + (size_t)i * (size_t)chunk.k_len;
    double *out = mass + (size_t)((chunk.q_start + i) / bs) * kb_n;
    const int32_t n = visible(&d, chunk, i);
    for (int32_t j = 0; j < n; j++) out[(chunk.k_start + j) / bs] += exp(row[j] - m[i]) / l[i];
  }
  return CLPA_OK;
}

/* ======================================================================
 * Phase 4: selection
 * ==================================================================== */

typedef struct ranked {
  double mass;
  int32_t index;
} ranked;

/* Mass descending, then index ascending: a total order, so qsort's lack
 * of stability cannot matter. */
static int by_mass_desc(const void *pa, const void *pb) {
  const ranked *a = pa, *b = pb;
  if (a->mass != b->mass) return a->mass > b->mass ? -1 : 1;
  return (a->index > b->index) - (a->index < b->index);
}

static clpa_status check_select(const clpa_ref_xattn_dims *d, const double *mass, double tau,
                                const uint8_t *mask) {
  CLPA_CHECK(NULL, !(tau > 0.0 && tau <= 1.0), CLPA_ERR_INVALID_ARG,
             "tau = %g is outside (0, 1]", tau);
  CLPA_CHECK(NULL, !mass || !mask, CLPA_ERR_INVALID_ARG, "mass and mask must not be NULL");
  for (int32_t qb = 0; qb < d->q_blocks; qb++)
    for (int32_t kb = 0; kb <= d->diag0 + qb; kb++) {
      const double x = mass[(size_t)qb * (size_t)d->k_blocks + (size_t)kb];
      CLPA_CHECK(NULL, !(isfinite(x) && x >= 0.0), CLPA_ERR_INVALID_ARG,
                 "mass[%d][%d] = %g (causal) must be finite and >= 0", qb, kb, x);
    }
  return CLPA_OK;
}

/* The selection of ref_xattn.h, arguments already checked; order has
 * room for k_blocks entries. */
static void select_blocks(const clpa_ref_xattn_dims *d, const double *mass, double tau,
                          uint8_t *mask, double *density, ranked *order) {
  const size_t kb_n = (size_t)d->k_blocks;
  int64_t kept = 0, causal = 0;
  for (int32_t qb = 0; qb < d->q_blocks; qb++) {
    const double *row = mass + (size_t)qb * kb_n;
    uint8_t *out = mask + (size_t)qb * kb_n;
    const int32_t diag = d->diag0 + qb;
    for (size_t kb = 0; kb < kb_n; kb++) out[kb] = 0;
    causal += diag + 1;
    if (tau == 1.0) { /* full attention, whatever the rounding */
      for (int32_t kb = 0; kb <= diag; kb++) out[kb] = 1;
      kept += diag + 1;
      continue;
    }
    double total = 0.0;
    for (int32_t kb = 0; kb <= diag; kb++) total += row[kb];
    const double need = tau * total;
    /* The forced blocks first: 0, then the diagonal. */
    double acc = row[0];
    out[0] = 1;
    kept++;
    if (diag > 0) {
      acc += row[diag];
      out[diag] = 1;
      kept++;
    }
    int32_t n = 0;
    for (int32_t kb = 1; kb < diag; kb++) order[n++] = (ranked){row[kb], kb};
    qsort(order, (size_t)n, sizeof *order, by_mass_desc);
    for (int32_t i = 0; i < n && acc < need; i++) {
      out[order[i].index] = 1;
      kept++;
      acc += order[i].mass;
    }
  }
  if (density) *density = (double)kept / (double)causal;
}

clpa_status clpa_ref_xattn_select(const clpa_ref_xattn_shape *shape, const double *mass,
                                  double tau, uint8_t *mask, double *density) {
  clpa_ref_xattn_dims d;
  clpa_status st = check_shape(shape, &d);
  if (st == CLPA_OK) st = check_select(&d, mass, tau, mask);
  if (st != CLPA_OK) return st;
  ranked *order = malloc((size_t)d.k_blocks * sizeof *order);
  CLPA_CHECK(NULL, !order, CLPA_ERR_OUT_OF_MEMORY, "no memory to rank %d key blocks",
             d.k_blocks);
  select_blocks(&d, mass, tau, mask, density, order);
  free(order);
  return CLPA_OK;
}

/* ======================================================================
 * The oracle: everything unchunked
 * ==================================================================== */

/* score(r, c) token by token: S dot products of D, then their sum. */
static double antidiagonal(const clpa_ref_xattn_shape *sh, const float *q, const float *k,
                           int32_t r, int32_t c) {
  const size_t dim = (size_t)sh->head_dim, s = (size_t)sh->stride;
  double sum = 0.0;
  for (size_t t = 0; t < s; t++) {
    if (!real_pair(sh, (size_t)r * s + s - 1 - t, (size_t)c * s + t)) continue;
    const float *qi = q + ((size_t)r * s + s - 1 - t) * dim, *kj = k + ((size_t)c * s + t) * dim;
    double dot = 0.0;
    for (size_t dd = 0; dd < dim; dd++) dot += (double)qi[dd] * (double)kj[dd];
    sum += dot;
  }
  return sum * xattn_scale(sh);
}

clpa_status clpa_ref_xattn_estimate_dense(const clpa_ref_xattn_shape *shape, const float *q,
                                          const float *k, double tau, double *mass,
                                          uint8_t *mask, double *density) {
  clpa_ref_xattn_dims d;
  clpa_status st = check_shape(shape, &d);
  if (st != CLPA_OK) return st;
  CLPA_CHECK(NULL, !q || !k || !mass || !mask, CLPA_ERR_INVALID_ARG,
             "q, k, mass and mask must not be NULL");
  CLPA_CHECK(NULL, !(tau > 0.0 && tau <= 1.0), CLPA_ERR_INVALID_ARG,
             "tau = %g is outside (0, 1]", tau);
  const size_t dim = (size_t)shape->head_dim;
  /* Keys after the last query's group are never visible, so never read. */
  const int64_t seen = ((int64_t)d.row0 + d.rows) * shape->stride;
  st = check_floats("q", q, dim, 0, shape->num_q);
  if (st == CLPA_OK) st = check_tokens("k", k, dim, 0, seen, shape->num_k);
  if (st != CLPA_OK) return st;
  double *logits = malloc((size_t)d.cols * sizeof *logits);
  ranked *order = malloc((size_t)d.k_blocks * sizeof *order);
  if (!logits || !order) {
    free(logits);
    free(order);
    return CLPA_FAIL(NULL, CLPA_ERR_OUT_OF_MEMORY, "no memory for %d scores", d.cols);
  }

  const size_t kb_n = (size_t)d.k_blocks, bs = (size_t)d.rows_per_block;
  for (size_t e = 0; e < (size_t)d.q_blocks * kb_n; e++) mass[e] = 0.0;
  for (int32_t r = 0; r < d.rows; r++) {
    const int32_t n = d.row0 + r + 1; /* columns 0..R(r) */
    double mr = -INFINITY, lr = 0.0;
    for (int32_t c = 0; c < n; c++) {
      logits[c] = antidiagonal(shape, q, k, r, c);
      if (logits[c] > mr) mr = logits[c];
    }
    for (int32_t c = 0; c < n; c++) lr += exp(logits[c] - mr);
    double *out = mass + ((size_t)r / bs) * kb_n;
    for (int32_t c = 0; c < n; c++) out[(size_t)c / bs] += exp(logits[c] - mr) / lr;
  }
  select_blocks(&d, mass, tau, mask, density, order);
  free(logits);
  free(order);
  return CLPA_OK;
}
