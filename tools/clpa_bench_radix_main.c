/* clpa_bench_radix_main.c — a stand-alone runner for the radix benchmark
 * until clpa-bench dispatches `clpa-bench radix` to clpa_bench_radix(). */
int clpa_bench_radix(int argc, char **argv);

int main(int argc, char **argv) { return clpa_bench_radix(argc, argv); }
