/* The `dtorch` command line: demo, bench, ops. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/bench.h"
#include "bench/bench_collectives.h"
#include "tools/stress.h"
#include "tools/tools.h"

static int usage(FILE *out) {
  fprintf(out,
          "usage: dtorch <command> [args]\n"
          "  demo             the main job: DP x TP training vs one device (demo --help)\n"
          "  stress           random programs under chaos and faults vs one device\n"
          "                   [--seconds T | --iters N] [--seed S] [--replay SEED]\n"
          "  bench core       tensor-core benchmarks (JSON lines)\n"
          "  bench sched      scheduler benchmarks: deque, queue, spawn_pool, wake, publish\n"
          "  bench collectives  emulated collectives: 2/4/8 ranks, 8 B .. 256 MiB\n"
          "                   (--api: through dt_redistribute; --mpi, under mpirun:\n"
          "                   across the job's processes, against MPI's own)\n"
          "  bench dispatch   DTensor dispatch: cache lookup, cached add (8/64 ranks), matmul miss\n"
          "  bench demo       a DP x TP training step (mlp, transformer) vs one device and\n"
          "                   its floor; --breakdown: where each rank's time goes;\n"
          "                   --ranks-sweep: 8 to 256 ranks (bench demo --help)\n"
          "  bench io         safetensors load/save (warm, O_DIRECT), notify_ring latency\n"
          "  bench ops        single ops (softmax, gelu, matmul, ...) vs their same-run roofline\n"
          "  bench gpu        the CUDA backend: add vs D2D copy, sgemm vs cuBLAS, issue cost\n"
          "  bench python     the Python binding vs PyTorch: DTensor add, plain add;\n"
          "                   the MLP step in Python vs this CLI's bench demo\n"
          "                   (runs python -m dtorch.bench; DTORCH_PYTHON, else python3)\n"
          "  ops              list the registered ops and their schemas\n"
          "  help             this text\n");
  return out == stdout ? 0 : 2;
}

/* `bench python`: the package's own benchmark (python/dtorch/bench.py),
 * run by the interpreter DTORCH_PYTHON names, else python3 on PATH; the
 * package must be importable there (installed, or PYTHONPATH=python) */
static int bench_python(int argc, char **argv) {
  const char *py = getenv("DTORCH_PYTHON");
  if (!py || !*py) py = "python3";
  char *args[64];
  int n = 0;
  args[n++] = (char *)py;
  args[n++] = "-m";
  args[n++] = "dtorch.bench";
  for (int i = 0; i < argc && n < 63; i++) args[n++] = argv[i];
  args[n] = NULL;
  /* mlp_step's C side is this CLI's `bench demo` (unless the caller chose) */
  char self[4096];
  ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
  if (len > 0 && !getenv("DTORCH_CLI")) {
    self[len] = '\0';
    setenv("DTORCH_CLI", self, 0);
  }
  fflush(stdout);
  execvp(py, args);
  fprintf(stderr, "dtorch bench python: cannot run %s (set DTORCH_PYTHON to a "
          "Python with the dtorch package): %s\n", py, strerror(errno));
  return 2;
}

int main(int argc, char **argv) {
  if (argc < 2) return usage(stderr);
  const char *cmd = argv[1];
  if (!strcmp(cmd, "demo")) return tool_demo(argc - 2, argv + 2);
  if (!strcmp(cmd, "ops")) return tool_ops();
  if (!strcmp(cmd, "stress")) return tool_stress(argc - 2, argv + 2);
  if (!strcmp(cmd, "help") || !strcmp(cmd, "--help")) return usage(stdout);
  if (!strcmp(cmd, "bench")) {
    if (argc >= 3 && !strcmp(argv[2], "core")) return bench_core(argc - 3, argv + 3);
    if (argc >= 3 && !strcmp(argv[2], "sched")) return bench_sched(argc - 3, argv + 3);
    if (argc >= 3 && !strcmp(argv[2], "collectives"))
      return bench_collectives(argc - 3, argv + 3);
    if (argc >= 3 && !strcmp(argv[2], "dispatch"))
      return bench_dispatch(argc - 3, argv + 3);
    if (argc >= 3 && !strcmp(argv[2], "demo"))
      return bench_demo(argc - 3, argv + 3);
    if (argc >= 3 && !strcmp(argv[2], "io")) return bench_io(argc - 3, argv + 3);
    if (argc >= 3 && !strcmp(argv[2], "ops")) return bench_ops(argc - 3, argv + 3);
    if (argc >= 3 && !strcmp(argv[2], "gpu")) return bench_gpu(argc - 3, argv + 3);
    if (argc >= 3 && !strcmp(argv[2], "python"))
      return bench_python(argc - 3, argv + 3);
    fprintf(stderr, "dtorch bench: unknown suite '%s' (available: core, sched, "
            "collectives, dispatch, demo, io, ops, gpu, python)\n",
            argc >= 3 ? argv[2] : "");
    return 2;
  }
  fprintf(stderr, "dtorch: unknown command '%s'\n", cmd);
  return usage(stderr);
}
