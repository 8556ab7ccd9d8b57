/*
 * merge_args.h — the parameters of merge.cl's clpa_merge_states, in
 * order, written once (MERGE_ARG_LIST): the output, its n inputs (o0, l0
 * .. o7, l7: an output and its lse each, unused ones NULL); merge.cl's
 * banner shapes them. Read by both compilers, as decode_args.h (which
 * says how): a part of the merge family (lib/kernels.c) and included by
 * lib/prefill.c.
 */
#ifndef CLPA_MERGE_ARGS_H
#define CLPA_MERGE_ARGS_H

#define MERGE_ARG_LIST(ARG, SEP)   \
  ARG(GLOBAL, io_t, out) SEP       \
  ARG(GLOBAL, float, lse) SEP      \
  ARG(VALUE, int, n) SEP           \
  ARG(VALUE, int, head_size) SEP   \
  ARG(GLOBAL_CONST, io_t, o0) SEP  \
  ARG(GLOBAL_CONST, float, l0) SEP \
  ARG(GLOBAL_CONST, io_t, o1) SEP  \
  ARG(GLOBAL_CONST, float, l1) SEP \
  ARG(GLOBAL_CONST, io_t, o2) SEP  \
  ARG(GLOBAL_CONST, float, l2) SEP \
  ARG(GLOBAL_CONST, io_t, o3) SEP  \
  ARG(GLOBAL_CONST, float, l3) SEP \
  ARG(GLOBAL_CONST, io_t, o4) SEP  \
  ARG(GLOBAL_CONST, float, l4) SEP \
  ARG(GLOBAL_CONST, io_t, o5) SEP  \
  ARG(GLOBAL_CONST, float, l5) SEP \
  ARG(GLOBAL_CONST, io_t, o6) SEP  \
  ARG(GLOBAL_CONST, float, l6) SEP \
  ARG(GLOBAL_CONST, io_t, o7) SEP  \
  ARG(GLOBAL_CONST, float, l7)

#endif
