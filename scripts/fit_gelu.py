#!/usr/bin/env python3
"""Dev-side: refits the table of kernels/cpu/vmath.c's gelu (cpu_gelu_tab).

gelu(x) = x Phi(x); with a = |x|, Phi(-a) = exp(-a^2/2) R(a), where
R(a) = Phi(-a) exp(a^2/2) = erfcx(a / sqrt 2) / 2 is smooth and slowly
varying. On [0, 14.85] R is a polynomial of degree --deg in u = a - 2i on
each of the 8 intervals around the even numbers 2i = 0..14 (u in [-1, 1];
i = 0 from 0, i = 7 up to 14.85). Eight, so that one 8-entry vpermps
picks a coefficient on AVX2 (the 16 intervals of width 1 at degree 7 this
replaced took two and a blend); width 2 needs degree 9.

The coefficients are fitted one at a time, lowest first: least squares in
relative error on 400 Chebyshev points per interval, reweighted by
Lawson's iteration towards the minimax fit, against mpmath at 30 digits;
then the lowest one not yet fixed is rounded to float and the rest are
refitted around it, so the higher ones absorb the rounding of the lower
(rounding all of them at once left 5.6e-8; this 5.0e-8, and R(0) = 1/2
exactly). Prints the max relative error with the coefficients as float
and the C table: row k holds coefficient k (of u^k) of the 8 intervals.

    pip install numpy mpmath; python3 scripts/fit_gelu.py [--deg 9]
"""
import argparse

import mpmath as mp
import numpy as np

A_MAX = 14.85


def r_exact(a):
    a = mp.mpf(a)
    return float(mp.ncdf(-a) * mp.exp(a * a / 2))


def lawson(vand, target, f, iters):
    """least squares of vand c ~ target in error relative to f, reweighted"""
    w = np.ones_like(f)
    for _ in range(iters):
        c, *_ = np.linalg.lstsq(vand * (w / f)[:, None], target * w / f, rcond=None)
        err = (vand @ c - target) / f
        w = w * np.abs(err) ** 0.5 + 1e-30
        w /= w.max()
    return c


def fit(i, deg, iters):
    c0 = 2 * i
    lo, hi = max(0.0, c0 - 1.0), min(c0 + 1.0, A_MAX)
    u = np.cos(np.linspace(0, np.pi, 400)) * (hi - lo) / 2 + (hi + lo) / 2 - c0
    f = np.array([r_exact(x + c0) for x in u])
    vand = np.vander(u, deg + 1, increasing=True)
    fixed = []
    for k in range(deg + 1):
        done = vand[:, :k] @ np.array(fixed) if fixed else 0.0
        c = lawson(vand[:, k:], f - done, f, iters)
        fixed.append(float(np.float32(c[0])))
    c32 = np.array(fixed, dtype=np.float32)
    return c32, np.abs((vand @ c32.astype(np.float64) - f) / f).max()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--deg", type=int, default=9)
    ap.add_argument("--iters", type=int, default=40)
    a = ap.parse_args()
    mp.mp.dps = 30
    rows, worst = [], 0.0
    for i in range(8):
        c, e = fit(i, a.deg, a.iters)
        rows.append(c)
        worst = max(worst, e)
    print(f"max relative error {worst:.3g}")
    for k in range(a.deg + 1):
        vals = ", ".join("%.9gf" % rows[i][k] for i in range(8))
        print("    {" + vals + "},")


if __name__ == "__main__":
    main()
