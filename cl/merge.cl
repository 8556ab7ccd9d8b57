/*
 * merge.cl — clpa_merge_states, its parameters merge_args.h's list.
 * Checked by tests/test_merge.c against clpa_ref_merge_states
 * (host/ref_attention.c).
 */
#ifndef CLPA_NUM_THREADS
#error "CLPA_NUM_THREADS: work-items a work-group; required"
#endif
#define NUM_THREADS CLPA_NUM_THREADS

/*
 * merge_states: k attention results over disjoint key sets of the same
 * rows, combined by their log-sum-exps (clpa_merge_states): an output
 * normalised over its own keys and its lse are the softmax state
 * (lse, 1), so the merged state and each input's weight come from
 * softmax_merge and softmax_weight as above.
 *
 * Grid:  (num_rows * NUM_THREADS); one work-group per row.
 * Buffers: outs[i] [num_rows, HEAD_SIZE] io_t, lses[i] [num_rows] float,
 *          out, lse likewise (lse may be NULL). out and lse may be
 *          inputs too: every work-item reads the lses before the barrier,
 *          and each element of out is read and written by one work-item.
 * Up to 8 inputs (unused ones are NULL and n says how many).
 */
__kernel __attribute__((reqd_work_group_size(NUM_THREADS, 1, 1))) void clpa_merge_states(
    KERNEL_PARAMS(MERGE_ARG_LIST)) {
  const size_t row = get_group_id(0);
  __global const io_t *o[8] = {o0, o1, o2, o3, o4, o5, o6, o7};
  __global const float *l[8] = {l0, l1, l2, l3, l4, l5, l6, l7};
  float w[8];
  softmax_state all = softmax_empty();
  for (int i = 0; i < n; i++) all = softmax_merge(all, softmax_logit(l[i][row]));
  for (int i = 0; i < n; i++) w[i] = softmax_weight(softmax_logit(l[i][row]), all);
  barrier(CLK_GLOBAL_MEM_FENCE); /* every lse read before one is overwritten */
  for (int d = get_local_id(0); d < head_size; d += NUM_THREADS) {
    const size_t e = row * (size_t)head_size + d;
    float acc = 0.0f;
    for (int i = 0; i < n; i++)
      if (w[i] != 0.0f) acc += w[i] * IO_LOAD(o[i], e); /* an empty set's output is never read */
    IO_STORE(acc, out, e);
  }
  if (lse && get_local_id(0) == 0) lse[row] = softmax_lse(all);
}
