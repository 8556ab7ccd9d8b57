/*
 * decode_merge.cl — decode v2's partitions merged in the launch, by the
 * last of a row's work-groups to finish. Part of the work-group decode
 * families (decode.cl, decode_mma.cl; lib/kernels.c), after kv.cl and
 * decode_args.h. lib/decode.c builds them with CLPA_MERGE 1 where the
 * device orders work-groups (lib/context.c's pick_merge); elsewhere, and
 * always on the rows path, reduce.cl's kernel merges after the launch.
 *
 * Each partition writes its state (max_logits, exp_sums: the natural-log
 * max and sum of its logits, the sink left out) and its normalised output
 * (tmp_out), reduce.cl's layout; decode_last_part counts the work-group
 * done, and the last of the row's to count merges them all
 * (decode_merge_parts). The CUDA threadfence-reduction pattern, which
 * needs ordering between work-groups that OpenCL 1.2 does not give: the
 * partitions' writes released and the last one's reads acquired at device
 * scope around the counter. On NVIDIA inline PTX gives it; elsewhere
 * OpenCL C 2.0's atomics with memory_scope_device (lib/context.c builds
 * these programs with -cl-std=CL2.0 or CL3.0 only where the device has
 * them). The in-launch merge saves the reduce kernel's launch
 * (docs/decisions/0002-decode-v2-merge.md).
 */
#ifndef CLPA_MERGE
#error "CLPA_MERGE: v2: 1 where the last partition of a row merges them, 0 where reduce.cl's kernel does; required"
#endif
#if CLPA_MERGE
#if CLPA_LANES == 3
/* PTX's fence-based release and acquire patterns: membar.gl (fence.sc.gpu)
 * before the counter's relaxed atomic and, in the last work-group, after
 * it. Fences are cumulative: work-item 0's covers the writes the barrier
 * ordered before it. */
inline int count_done(__global volatile int *count, int nparts) {
  asm volatile("membar.gl;" ::: "memory");
  const int last = atomic_inc(count) == nparts - 1;
  if (last) {
    asm volatile("membar.gl;" ::: "memory");
    atomic_xchg(count, 0); /* for the next call: every partition has counted */
  }
  return last;
}
#define COUNTED_FENCE CLK_LOCAL_MEM_FENCE /* bar.sync orders global memory too */
#elif __OPENCL_C_VERSION__ >= 200
/* Acquire-release at device scope: the barrier before it orders the
 * work-group's writes before work-item 0's release, the one after it
 * orders work-item 0's acquire before the others' reads. */
inline int count_done(__global volatile int *count, int nparts) {
  volatile __global atomic_int *c = (volatile __global atomic_int *)count;
  const int last =
      atomic_fetch_add_explicit(c, 1, memory_order_acq_rel, memory_scope_device) == nparts - 1;
  if (last) atomic_store_explicit(c, 0, memory_order_relaxed, memory_scope_device);
  return last;
}
#define COUNTED_FENCE (CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE)
#else
#error "CLPA_MERGE needs inline PTX or OpenCL C 2.0's atomics (else reduce.cl merges: CLPA_MERGE 0)"
#endif

/* Whether this work-group is the last of its row's nparts partitions to
 * finish (the same answer for every work-item; 0 where `counts` is 0, and
 * the counter left alone). The row's counter is part_counts' entry for
 * sequence seq and this work-group's head group (get_group_id(0)); the
 * last sets it back to zero for the next call. Every work-item calls it. */
inline int decode_last_part(int counts, __global volatile int *part_counts, int seq,
                            int nparts, __local int *flag) {
  __global volatile int *count = part_counts + (size_t)seq * get_num_groups(0) + get_group_id(0);
  barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);
  if (get_local_id(0) == 0) flag[0] = counts && count_done(count, nparts);
  barrier(COUNTED_FENCE);
  return flag[0];
}
#endif

/* The most partitions decode_merge_parts merges in registers, each
 * work-item all of them for its output element. */
#define MERGE_REG 8

/* A partition's weight l e^(m - M) against the row's largest logit M (0
 * for an empty one): softmax_weight over a sum of 1. */
inline float part_weight(float m, float l, float M) {
  return softmax_weight(softmax_state_of(m, l), softmax_state_of(M, 1.0f));
}

/* The merge of a row's nparts partitions (ng heads of head size hs from
 * head head0 of sequence seq) into out and lse, by the work-group of nt
 * work-items that `merging` (where it is 0, only the barriers). No
 * work-item walks the partitions in a chain of dependent loads
 * (docs/decisions/0002-decode-v2-merge.md):
 *   - up to mreg partitions (MERGE_REG in decode_mma.cl, 0 in decode.cl):
 *     each work-item loads every partition's state and output of its
 *     element at once (one round trip to the L2) and merges them in
 *     registers (in decode.cl the registers it holds cost more than it
 *     saves);
 *   - more: each step spread over the work-group:
 *     a. each head's largest logit (the sink's too), ht = nt / ng
 *        work-items a head, each over every ht-th partition, then over the
 *        ht maxima (red_m);
 *     b. the partitions' weights l_p e^(m_p - M), into local memory (wts,
 *        the first wcap a head), and their sums (red_l);
 *     c. each output element, the weighted sum of the partitions'
 *        outputs, its loads independent of one another.
 * Local memory: red_m, red_l nt floats, row_m, row_l ng, wts ng x wcap. */
inline void decode_merge_parts(int merging, int nparts, int seq, int head0, int num_heads,
                               int max_parts, __global const float *max_logits,
                               __global const float *exp_sums, __global const float *tmp_out,
                               __global const float *sinks, __global io_t *out,
                               __global float *lse, const int ng, const int hs, const int nt,
                               __local float *red_m, __local float *red_l, __local float *row_m,
                               __local float *row_l, __local float *wts, const int wcap,
                               const int mreg) {
  const int lid = get_local_id(0);
  for (int i = lid; mreg > 0 && merging && nparts <= mreg && i < ng * hs; i += nt) {
    const int r = i / hs, d = i % hs;
    const size_t sh = (size_t)seq * num_heads + head0 + r;
    float pm[MERGE_REG], pl[MERGE_REG], po[MERGE_REG];
#pragma unroll
    for (int p = 0; p < MERGE_REG; p++) {
      pm[p] = p < nparts ? max_logits[sh * max_parts + p] : -INFINITY;
      pl[p] = p < nparts ? exp_sums[sh * max_parts + p] : 0.0f;
      po[p] = p < nparts ? tmp_out[(sh * max_parts + p) * hs + d] : 0.0f;
    }
    float M = sinks ? sinks[head0 + r] : -INFINITY;
#pragma unroll
    for (int p = 0; p < MERGE_REG; p++) M = fmax(M, pm[p]);
    float sum = sinks ? exp(sinks[head0 + r] - M) : 0.0f, acc = 0.0f;
#pragma unroll
    for (int p = 0; p < MERGE_REG; p++) { /* empty partitions (and p >= nparts) weigh 0 */
      const float w = part_weight(pm[p], pl[p], M);
      sum += w, acc += w * po[p];
    }
    const softmax_state all = softmax_state_of(M, sum);
    IO_STORE(all.l > 0.0f ? acc / all.l : 0.0f, out, sh * hs + d);
    if (d == 0 && lse) lse[sh] = softmax_lse(all);
  }
  const int spread = merging && nparts > mreg, ht = nt / ng;
  const int r8 = lid / ht, k8 = lid % ht;
  const size_t sh8 = (size_t)seq * num_heads + head0 + r8;
  if (spread && lid < ng * ht) {
    float M = -INFINITY;
    for (int p = k8; p < nparts; p += ht) M = fmax(M, max_logits[sh8 * max_parts + p]);
    red_m[lid] = M;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  if (spread && lid < ng * ht) {
    float M = sinks ? sinks[head0 + r8] : -INFINITY, sum = 0.0f;
    for (int k = 0; k < ht; k++) M = fmax(M, red_m[r8 * ht + k]);
    for (int p = k8; p < nparts; p += ht) {
      const size_t at = sh8 * max_parts + p;
      const float w = part_weight(max_logits[at], exp_sums[at], M);
      if (p < wcap) wts[r8 * wcap + p] = w;
      sum += w;
    }
    red_l[lid] = sum;
    if (k8 == 0) row_m[r8] = M;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  if (spread && lid < ng) { /* the sink: one more logit, with no value */
    float sum = sinks ? exp(sinks[head0 + lid] - row_m[lid]) : 0.0f;
    for (int k = 0; k < ht; k++) sum += red_l[lid * ht + k];
    row_l[lid] = sum;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int i = lid; spread && i < ng * hs; i += nt) {
    const int r = i / hs, d = i % hs;
    const size_t sh = (size_t)seq * num_heads + head0 + r;
    __global const float *op = tmp_out + sh * max_parts * hs + d;
    float acc = 0.0f; /* empty partitions wrote 0 outputs, and weigh 0 */
    /* Not unrolled: unrolled 8, it cost NVIDIA time at 1-4 partitions
     * (docs/decisions/0002-decode-v2-merge.md). */
    for (int p = 0; p < min(nparts, wcap); p++) acc += wts[r * wcap + p] * op[(size_t)p * hs];
    for (int p = wcap; p < nparts; p++)
      acc += part_weight(max_logits[sh * max_parts + p], exp_sums[sh * max_parts + p], row_m[r]) *
             op[(size_t)p * hs];
    const softmax_state all = softmax_state_of(row_m[r], row_l[r]);
    IO_STORE(all.l > 0.0f ? acc / all.l : 0.0f, out, sh * hs + d);
    if (d == 0 && lse) lse[sh] = softmax_lse(all);
  }
}
