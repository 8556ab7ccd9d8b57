/*
 * ptx.h — PTX text rewritten on the host (no OpenCL needed). Not
 * installed.
 */
#ifndef CLPA_HOST_PTX_H
#define CLPA_HOST_PTX_H

#include <stddef.h>

/* PTX text (what NVIDIA's OpenCL returns as a program binary) with
 * `.maxnreg n` added to every kernel entry (before the `{` that opens its
 * body), so that ptxas caps the registers there: NVIDIA's OpenCL takes no
 * register option (-cl-nv-maxrregcount is accepted and ignored). `ptx` is
 * `len` bytes; whatever follows the text (NUL padding) is kept. Returns a
 * malloc'd copy and its length in *out_len, or NULL where there is no
 * entry, an entry already has .maxnreg, or memory ran out. */
unsigned char *clpa_ptx_with_maxnreg(const unsigned char *ptx, size_t len, int n,
                                     size_t *out_len);

#endif
