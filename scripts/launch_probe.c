/*
 * launch_probe.c — what one kernel launch costs the host and the device
 * through an OpenCL platform, the floor under an engine step of many small
 * ops (docs/decisions/0039-demo-launch-cost.md):
 *
 *   gcc -O2 scripts/launch_probe.c -o /tmp/launch_probe -lOpenCL
 *   /tmp/launch_probe [platform-name-substring, default NVIDIA]
 *
 * Three kernels (one work-group of 32 that adds 1 to a float; 528
 * work-groups of 256 that do the same; a float4 read of 12 MiB, a
 * llama-1b QKV projection's f16 weight, L2-resident after the first),
 * each enqueued 1000 times back to back, in-order, on a plain queue, on a
 * profiling queue, and on the profiling queue with an event a launch.
 * Prints, per kernel and queue, the host's seconds in the enqueue loop and
 * to clFinish, a launch each, and (with events) the device's span from the
 * first start to the last end, a launch each. Then each kernel again, 1000
 * launches queued behind a spin kernel long enough that the host has
 * enqueued them all before the first starts: the device's span from the
 * spin's end to the last launch's end, a launch each (the device's own
 * cost, with no host in the way). Two rounds: the second is the figure.
 * Timing only: nothing is checked.
 */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec;
}
#define CK(x)                                                   \
  do {                                                          \
    cl_int e_ = (x);                                            \
    if (e_) { fprintf(stderr, "%s: %d\n", #x, e_); exit(1); }   \
  } while (0)

static const char *src =
    "__kernel void tiny(__global float *p) { if (get_global_id(0) == 0) p[0] += 1.0f; }\n"
    "__kernel void rd(__global const float4 *p, __global float *o, uint n) {\n"
    "  float4 s = 0; for (uint i = get_global_id(0); i < n; i += get_global_size(0)) s += p[i];\n"
    "  if (s.x == 1234.5f) o[0] = s.y; }\n"
    "__kernel void spin(__global float *p, uint iters) {\n"
    "  float x = p[1]; for (uint i = 0; i < iters; i++) x = x * 0.999999f + 1e-7f;\n"
    "  if (x == 1234.5f) p[2] = x; }\n";

int main(int argc, char **argv) {
  cl_platform_id pl[4];
  cl_uint np;
  CK(clGetPlatformIDs(4, pl, &np));
  cl_device_id dev = 0;
  for (cl_uint i = 0; i < np; i++) {
    char name[256];
    CK(clGetPlatformInfo(pl[i], CL_PLATFORM_NAME, sizeof name, name, NULL));
    if (strstr(name, argc > 1 ? argv[1] : "NVIDIA")) CK(clGetDeviceIDs(pl[i], CL_DEVICE_TYPE_ALL, 1, &dev, NULL));
  }
  if (!dev) return 2;
  cl_int err;
  cl_context c = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
  CK(err);
  cl_command_queue qp = clCreateCommandQueue(c, dev, CL_QUEUE_PROFILING_ENABLE, &err);
  CK(err);
  cl_command_queue qn = clCreateCommandQueue(c, dev, 0, &err);
  CK(err);
  cl_program p = clCreateProgramWithSource(c, 1, &src, NULL, &err);
  CK(err);
  CK(clBuildProgram(p, 1, &dev, "", NULL, NULL));
  cl_kernel kt = clCreateKernel(p, "tiny", &err);
  CK(err);
  cl_kernel kr = clCreateKernel(p, "rd", &err);
  CK(err);
  size_t big = 12582912; /* qkv's bytes */
  cl_mem b = clCreateBuffer(c, CL_MEM_READ_WRITE, 64 << 20, NULL, &err);
  CK(err);
  cl_mem o = clCreateBuffer(c, CL_MEM_READ_WRITE, 4096, NULL, &err);
  CK(err);
  CK(clEnqueueFillBuffer(qn, b, (float[]){0.5f}, 4, 0, 64 << 20, 0, NULL, NULL));
  CK(clFinish(qn));
  cl_uint n4 = (cl_uint)(big / 16);
  CK(clSetKernelArg(kt, 0, sizeof o, &o));
  CK(clSetKernelArg(kr, 0, sizeof b, &b));
  CK(clSetKernelArg(kr, 1, sizeof o, &o));
  CK(clSetKernelArg(kr, 2, sizeof n4, &n4));
  struct { const char *name; cl_kernel k; size_t g, l; } ks[] = {
      {"tiny 1 wg", kt, 32, 32}, {"tiny 528 wg", kt, 528 * 256, 256}, {"read 12.6MB", kr, 132 * 8 * 256, 256}};
  for (int rep = 0; rep < 2; rep++)
    for (int ki = 0; ki < 3; ki++)
      for (int qi = 0; qi < 3; qi++) {
        cl_command_queue q = qi == 0 ? qn : qp;
        int N = 1000;
        cl_event *ev = qi == 2 ? calloc(N, sizeof *ev) : NULL;
        if (qi == 2 && !ev) return 1;
        for (int w = 0; w < 20; w++) CK(clEnqueueNDRangeKernel(q, ks[ki].k, 1, NULL, &ks[ki].g, &ks[ki].l, 0, NULL, NULL));
        CK(clFinish(q));
        double t0 = now();
        for (int i = 0; i < N; i++)
          CK(clEnqueueNDRangeKernel(q, ks[ki].k, 1, NULL, &ks[ki].g, &ks[ki].l, 0, NULL, ev ? &ev[i] : NULL));
        double t1 = now();
        CK(clFinish(q));
        double t2 = now();
        double dev_us = 0;
        if (ev) {
          cl_ulong s, e;
          CK(clGetEventProfilingInfo(ev[0], CL_PROFILING_COMMAND_START, sizeof s, &s, NULL));
          CK(clGetEventProfilingInfo(ev[N - 1], CL_PROFILING_COMMAND_END, sizeof e, &e, NULL));
          dev_us = (e - s) * 1e-3 / N;
          for (int i = 0; i < N; i++) clReleaseEvent(ev[i]);
          free(ev);
        }
        printf("%-12s %-14s enqueue %.2f us/kernel, wall %.2f us/kernel, events %.2f\n", ks[ki].name,
               qi == 0 ? "plain" : qi == 1 ? "profiling" : "profiling+ev", (t1 - t0) * 1e6 / N,
               (t2 - t0) * 1e6 / N, dev_us);
      }
  /* The device's own cost: the same launches queued behind a spin kernel of a few ms (one
   * work-group), so that the host has enqueued them all before the first starts; the device's
   * span from the spin's end to the last one's end, a launch each (two events alone). */
  cl_kernel ks_spin = clCreateKernel(p, "spin", &err);
  CK(err);
  cl_uint iters = 1u << 22;
  CK(clSetKernelArg(ks_spin, 0, sizeof o, &o));
  CK(clSetKernelArg(ks_spin, 1, sizeof iters, &iters));
  const size_t one = 1;
  for (int rep = 0; rep < 2; rep++)
    for (int ki = 0; ki < 3; ki++) {
      int N = 1000;
      cl_event e0, e1;
      CK(clEnqueueNDRangeKernel(qp, ks_spin, 1, NULL, &one, &one, 0, NULL, &e0));
      double t0 = now();
      for (int i = 0; i < N - 1; i++)
        CK(clEnqueueNDRangeKernel(qp, ks[ki].k, 1, NULL, &ks[ki].g, &ks[ki].l, 0, NULL, NULL));
      CK(clEnqueueNDRangeKernel(qp, ks[ki].k, 1, NULL, &ks[ki].g, &ks[ki].l, 0, NULL, &e1));
      double t1 = now();
      CK(clFinish(qp));
      cl_ulong s0, s1, f1;
      CK(clGetEventProfilingInfo(e0, CL_PROFILING_COMMAND_START, sizeof s0, &s0, NULL));
      CK(clGetEventProfilingInfo(e0, CL_PROFILING_COMMAND_END, sizeof s1, &s1, NULL));
      CK(clGetEventProfilingInfo(e1, CL_PROFILING_COMMAND_END, sizeof f1, &f1, NULL));
      printf("%-12s queued behind a %.1f ms spin (host enqueued them in %.1f ms): %.2f us/kernel on the device\n",
             ks[ki].name, (s1 - s0) * 1e-6, (t1 - t0) * 1e3, (f1 - s1) * 1e-3 / N);
      clReleaseEvent(e0), clReleaseEvent(e1);
    }
  return 0;
}
