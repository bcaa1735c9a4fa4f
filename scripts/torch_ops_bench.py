#!/usr/bin/env python3
"""Side by side: the ops of `dtorch bench ops` in PyTorch eager (float32,
torch.set_num_threads(N), N = the CPUs by default) and in dtorch (runs
build/dtorch bench ops and parses its JSON lines). Best of --reps for
both; the two are interleaved op by op (dtorch --only OP, then PyTorch's
OP, every round) so both see the same phase of a noisy machine: on the
project's VMs memory bandwidth swings by 2x within seconds, and a whole
suite between the two (--by-suite, the old order) put ~10 s between them.
Dev-side, not CI:

    python3 scripts/torch_ops_bench.py [--dtorch build/dtorch] [--reps 7]
                                       [--rounds 3] [--threads 2] [--only OP]
                                       [--by-suite]

To time what a CPU without AVX-512 runs on one that has it, cap both
sides: dtorch built with -DDTORCH_SIMD_MAX=avx2 (bench ops' "simd" field
says what its kernels ran at) and --cap avx2, which reruns the script
with ATEN_CPU_CAPABILITY=avx2 and MKL_ENABLE_INSTRUCTIONS=AVX2 (PyTorch's
kernels and its BLAS) and OPENBLAS_CORETYPE=Haswell (dtorch's BLAS) in
the environment; the header names both sides' levels and BLAS kernels.

    python3 scripts/torch_ops_bench.py --dtorch build-avx2/dtorch --cap avx2

Prints a Markdown table: op, shape, dtorch ms, PyTorch ms, dtorch/PyTorch
(lower is better; <= 1.0 is dtorch at least as fast), dtorch's ratio to
the STREAM (or GEMM) baseline from the same run, and for ops bound by a
transcendental per element its ratio to the roofline max(memory time,
libmvec compute time) (bench ops' ratio_roofline)."""
import argparse
import json
import os
import subprocess
import sys
import time

# --cap: the environment must be set before PyTorch (and MKL) load
CAP_ENV = {"avx2": {"ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2",
                    "OPENBLAS_CORETYPE": "Haswell"}}
if "--cap" in sys.argv[1:-1]:
    _want = CAP_ENV.get(sys.argv[sys.argv.index("--cap") + 1])
    if _want and any(os.environ.get(k) != v for k, v in _want.items()):
        os.environ.update(_want)
        os.execv(sys.executable, [sys.executable] + sys.argv)

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402


def torch_cases():
    """name -> (setup() -> args, fn(*args)); the shapes of bench_ops.c"""
    g = torch.Generator().manual_seed(18)

    def randn(*s):
        return torch.randn(*s, generator=g)

    def ce_setup():
        x = randn(4096, 1000)
        t = (torch.arange(4096, dtype=torch.int64) * 7919) % 1000
        return x, t

    def ce_bw_setup():
        x, t = ce_setup()
        lsm = torch.log_softmax(x, 1)
        return lsm, t, torch.ones(()), torch.tensor(4096.0)

    def ce_bw(lsm, t, gout, total):
        g = torch.ops.aten.nll_loss_backward(gout, lsm, t, None, 1, -100, total)
        return torch.ops.aten._log_softmax_backward_data(g, lsm, 1, torch.float32)

    def emb_setup():
        w = randn(4096, 1024)
        i = (torch.arange(4096, dtype=torch.int64) * 7919) % 4096
        return i, w

    return {
        "add": (lambda: (randn(4096, 4096), randn(4096, 4096)), torch.add),
        "gelu": (lambda: (randn(4096, 4096),), F.gelu),
        "sum": (lambda: (randn(4096, 4096),), torch.sum),
        "matmul": (lambda: (randn(1024, 1024), randn(1024, 1024)), torch.matmul),
        "softmax": (lambda: (randn(4096, 1024),), lambda x: torch.softmax(x, -1)),
        "log_softmax": (lambda: (randn(4096, 1024),),
                        lambda x: torch.log_softmax(x, -1)),
        "layer_norm": (lambda: (randn(4096, 1024), randn(1024), randn(1024)),
                       lambda x, w, b: F.layer_norm(x, (1024,), w, b, 1e-5)),
        "cross_entropy": (ce_setup, F.cross_entropy),
        "transpose_contiguous": (lambda: (randn(4096, 1024),),
                                 lambda x: x.transpose(0, 1).contiguous()),
        "cast_bf16": (lambda: (randn(4096, 4096),),
                      lambda x: x.to(torch.bfloat16)),
        "embedding": (emb_setup, F.embedding),
        "cat": (lambda: (randn(4096, 1024), randn(4096, 1024)),
                lambda a, b: torch.cat([a, b], 0)),
        "rand": (lambda: (), lambda: torch.rand(4096, 4096)),
        "randn": (lambda: (), lambda: torch.randn(4096, 4096)),
        "log": (lambda: (randn(4096, 4096).abs(),), torch.log),
        "sin": (lambda: (randn(4096, 4096),), torch.sin),
        "gelu_backward": (lambda: (randn(4096, 4096), randn(4096, 4096)),
                          lambda g, x: torch.ops.aten.gelu_backward(g, x)),
        # what autograd runs for F.cross_entropy's backward: nll_loss's
        # backward, then log_softmax's (its output saved by the forward)
        "cross_entropy_backward": (ce_bw_setup, ce_bw),
    }


def time_torch(setup, fn, reps):
    args = setup()
    fn(*args)  # warm
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        fn(*args)
        best = min(best, time.perf_counter() - t0)
    return best * 1e3


def run_dtorch(exe, reps, only):
    cmd = [exe, "bench", "ops", "--reps", str(reps)]
    if only:
        cmd += ["--only", only]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return {j["op"]: j for j in map(json.loads, out.splitlines()) if j.get("bench") == "ops"}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap.add_argument("--dtorch", default=os.path.join(root, "build", "dtorch"))
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--only")
    ap.add_argument("--by-suite", action="store_true")
    ap.add_argument("--cap", choices=sorted(CAP_ENV),
                    help="cap both sides' SIMD level (dtorch: build with "
                         "-DDTORCH_SIMD_MAX to match)")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    cases = torch_cases()
    best_dt, best_pt, lines = {}, {}, {}

    def keep(op, j):
        if op not in best_dt or j["ms"] < best_dt[op]:
            best_dt[op], lines[op] = j["ms"], j

    def torch_once(op):
        if op in cases:
            t = time_torch(*cases[op], a.reps)
            best_pt[op] = min(best_pt.get(op, float("inf")), t)

    ops = list(run_dtorch(a.dtorch, a.reps, a.only).items())
    for op, j in ops:  # the first suite: the op list, and a first time
        keep(op, j)
    for _ in range(a.rounds):
        if a.by_suite:
            for op, j in run_dtorch(a.dtorch, a.reps, a.only).items():
                keep(op, j)
            for op in best_dt:
                torch_once(op)
            continue
        for op, _ in ops:
            for o, j in run_dtorch(a.dtorch, a.reps, op).items():
                keep(o, j)
            torch_once(op)
    simd = sorted({j.get("simd", "?") for j in lines.values()})
    blas = sorted({j["blas_core"] for j in lines.values() if "blas_core" in j})
    if a.cap and simd != [a.cap]:
        print(f"warning: --cap {a.cap}, but dtorch's kernels ran at "
              f"{'/'.join(simd)} (build it with -DDTORCH_SIMD_MAX={a.cap})")
    mkl = os.environ.get("MKL_ENABLE_INSTRUCTIONS", "MKL's own choice")
    print(f"torch {torch.__version__} ({torch.backends.cpu.get_cpu_capability()}, "
          f"MKL {mkl}), dtorch kernels {'/'.join(simd)} (OpenBLAS "
          f"{'/'.join(blas) or '-'}), {a.threads} threads; best of "
          f"{a.reps} x {a.rounds} rounds\n")
    print("| op | shape | dtorch ms | PyTorch ms | dtorch/PyTorch | "
          "ratio to STREAM / GEMM | ratio to roofline (with libmvec) |")
    print("|---|---|---|---|---|---|---|")
    for op, ms in best_dt.items():
        pt = best_pt.get(op)
        r = f"{ms / pt:.2f}" if pt else "-"
        pts = f"{pt:.2f}" if pt else "-"
        roof = lines[op].get("ratio_roofline")
        roofs = f"{roof:.2f}" if roof is not None else "-"
        print(f"| {op} | {lines[op]['shape']} | {ms:.2f} | {pts} | {r} | "
              f"{lines[op]['ratio']:.2f} | {roofs} |")


if __name__ == "__main__":
    main()
