/* Put first on the include path of the host-only header tests: a header
 * that pulls in OpenCL fails to compile there. */
#error "a host-only clpa header included <CL/cl.h>"
