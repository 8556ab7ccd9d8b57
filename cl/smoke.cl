/*
 * smoke.cl — y = a*x + y, to prove the compiler, the queue and the program
 * cache work on a device (clpa_smoke_test). Grid: n work-items.
 */
__kernel void clpa_smoke_axpy(float a, __global const float *x, __global float *y, uint n) {
  uint i = get_global_id(0);
  if (i < n) y[i] = fma(a, x[i], y[i]);
}

#ifdef CLPA_SMOKE_BREAK
/* Lets tests prove that a failed build reports CLPA_ERR_BUILD with its log. */
#error "deliberately broken build (CLPA_SMOKE_BREAK)"
#endif
