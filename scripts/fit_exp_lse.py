#!/usr/bin/env python3
"""Dev-side: refits the polynomial of kernels/cpu/vmath.h's vm_lse_term.

exp(r) = 1 + r P(r) on [-ln2/2, ln2/2] (widened by 0.05% for the rounding
of r), P of degree --deg: least squares in the relative error of exp on
4000 Chebyshev points, reweighted by Lawson's iteration towards the
minimax fit. Prints the max relative error and the coefficients
VM_LSE_C1..VM_LSE_C5 as floats (c0 = 1).

    pip install numpy; python3 scripts/fit_exp_lse.py [--deg 4]
"""
import argparse

import numpy as np


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--deg", type=int, default=4)
    ap.add_argument("--iters", type=int, default=60)
    a = ap.parse_args()
    half = np.log(2) / 2 * 1.0005
    r = np.cos(np.linspace(0, np.pi, 4000)) * half
    r = r[np.abs(r) > 1e-6]
    f = np.expm1(r) / r                     # P's target
    scale = np.abs(r) / np.exp(r)           # P's error -> exp's relative
    vand = np.vander(r, a.deg + 1, increasing=True)
    w = np.ones_like(r)
    for _ in range(a.iters):
        sw = np.sqrt(w) * scale
        c, *_ = np.linalg.lstsq(vand * sw[:, None], f * sw, rcond=None)
        err = np.abs((vand @ c - f) * scale)
        w = w * err
        w /= w.sum()
    print(f"max relative error {err.max():.3g}")
    for k, x in enumerate(c):
        print("#define VM_LSE_C%d %.9gf" % (k + 1, np.float32(x)))


if __name__ == "__main__":
    main()
