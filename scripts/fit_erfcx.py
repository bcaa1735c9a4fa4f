#!/usr/bin/env python3
"""Dev-side: refits the polynomial of kernels/cpu/vmath.c's erfcx_over_t.

erfcx(z) / t for t = 1 / (1 + z/2), z in [0, 10.5] (t in [1/6.25, 1]), as
a polynomial in t of degree --deg: least squares in relative error on 4001
Chebyshev points, reweighted by Lawson's iteration towards the minimax fit,
against mpmath's erfc at 30 digits. Prints the max relative error on a
finer grid and the coefficients, constant term first.

    pip install numpy mpmath; python3 scripts/fit_erfcx.py [--deg 10]
"""
import argparse

import mpmath as mp
import numpy as np


def target(t):
    z = mp.mpf(2) * (1 - t) / t
    return mp.erfc(z) * mp.exp(z * z) / t


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--deg", type=int, default=10)
    ap.add_argument("--iters", type=int, default=30)
    a = ap.parse_args()
    mp.mp.dps = 30
    t0 = 1 / (1 + 10.5 / 2)
    ts = np.cos(np.linspace(0, np.pi, 4001)) * (1 - t0) / 2 + (1 + t0) / 2
    fv = np.array([float(target(mp.mpf(t))) for t in ts])
    vand = np.vander(ts, a.deg + 1, increasing=True)
    w = np.ones_like(ts)
    for _ in range(a.iters):
        c, *_ = np.linalg.lstsq(vand * (w / fv)[:, None], w, rcond=None)
        err = (vand @ c - fv) / fv
        w = w * np.abs(err) ** 0.5
        w /= w.max()
    tt = np.linspace(t0, 1, 2001)
    ft = np.array([float(target(mp.mpf(x))) for x in tt])
    rel = np.max(np.abs((np.vander(tt, a.deg + 1, increasing=True) @ c - ft) / ft))
    print(f"degree {a.deg}: max relative error {rel:.3g}")
    print(", ".join(repr(x) for x in c.tolist()))


if __name__ == "__main__":
    main()
