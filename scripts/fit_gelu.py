#!/usr/bin/env python3
"""Dev-side: refits the table of kernels/cpu/vmath.c's gelu (cpu_gelu_tab).

gelu(x) = x Phi(x); with a = |x|, Phi(-a) = exp(-a^2/2) R(a), where
R(a) = Phi(-a) exp(a^2/2) = erfcx(a / sqrt 2) / 2 is smooth and slowly
varying. On [0, 14.85] R is a polynomial of degree --deg in u = a - i on
each of the 16 intervals around the integers i = 0..15 (u in [-1/2, 1/2];
i = 0 from 0, i = 15 up to 14.85): least squares in relative error on 400
Chebyshev points per interval, reweighted by Lawson's iteration towards
the minimax fit, against mpmath at 30 digits. Prints the max relative
error with the coefficients rounded to float, and the C table: row k holds
coefficient k (of u^k) of the 16 intervals.

    pip install numpy mpmath; python3 scripts/fit_gelu.py [--deg 7]
"""
import argparse

import mpmath as mp
import numpy as np

A_MAX = 14.85


def r_exact(a):
    a = mp.mpf(a)
    return float(mp.ncdf(-a) * mp.exp(a * a / 2))


def fit(i, deg, iters):
    lo, hi = max(0.0, i - 0.5), min(i + 0.5, A_MAX)
    u = np.cos(np.linspace(0, np.pi, 400)) * (hi - lo) / 2 + (hi + lo) / 2 - i
    f = np.array([r_exact(x + i) for x in u])
    vand = np.vander(u, deg + 1, increasing=True)
    w = np.ones_like(u)
    for _ in range(iters):
        c, *_ = np.linalg.lstsq(vand * (w / f)[:, None], w, rcond=None)
        err = (vand @ c - f) / f
        w = w * np.abs(err) ** 0.5
        w /= w.max()
    c32 = c.astype(np.float32)
    return c32, np.abs((vand @ c32.astype(np.float64) - f) / f).max()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--deg", type=int, default=7)
    ap.add_argument("--iters", type=int, default=40)
    a = ap.parse_args()
    mp.mp.dps = 30
    rows, worst = [], 0.0
    for i in range(16):
        c, e = fit(i, a.deg, a.iters)
        rows.append(c)
        worst = max(worst, e)
    print(f"max relative error {worst:.3g}")
    for k in range(a.deg + 1):
        vals = ", ".join("%.9gf" % rows[i][k] for i in range(16))
        print("    {" + vals + "},")


if __name__ == "__main__":
    main()
