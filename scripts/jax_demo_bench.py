#!/usr/bin/env python3
"""The peer's figure for `dtorch bench demo`: the same DP2 x TP4 MLP step
(hidden 1024, batch 64: Linear(h, 4h) -> GELU -> Linear(4h, h), mean
squared error) in JAX on 8 emulated CPU devices
(--xla_force_host_platform_device_count=8), against the same step jitted
on one device of the same process, the two alternating step by step.
Megatron's layout as NamedShardings on a ("dp", "tp") mesh: the batch
split over dp, w1 / b1 column-parallel and w2 row-parallel over tp; XLA
inserts the collectives. Dev-side (needs `pip install jax`), not CI:

    python3 scripts/jax_demo_bench.py [--steps 10] [--opt adamw|sgd]
                                      [--hidden 1024] [--batch 64]
                                      [--dp 2] [--tp 4]

One JSON line per optimiser: median ms of the distributed and the single
step and their ratio (distributed / single, lower is better), as
`dtorch bench demo` prints for its own step. AdamW is torch's update
(lr 3e-3, betas 0.9 / 0.999, eps 1e-8, weight decay 0.01), written in jnp;
SGD is p - lr g (the issue's first measurement used it)."""
import argparse
import json
import os
import time

A = argparse.ArgumentParser(description=__doc__.split("\n")[0])
A.add_argument("--steps", type=int, default=10)
A.add_argument("--opt", choices=["adamw", "sgd", "both"], default="both")
A.add_argument("--hidden", type=int, default=1024)
A.add_argument("--batch", type=int, default=64)
A.add_argument("--dp", type=int, default=2)
A.add_argument("--tp", type=int, default=4)
ARGS = A.parse_args()
os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                           f" --xla_force_host_platform_device_count={ARGS.dp * ARGS.tp}")

import jax  # noqa: E402  (after XLA_FLAGS)
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402

LR, B1, B2, EPS, WD = 3e-3, 0.9, 0.999, 1e-8, 0.01


def loss_fn(params, x, t):
    w1, b1, w2, b2 = params
    h = jax.nn.gelu(x @ w1 + b1, approximate=False)
    return jnp.mean((h @ w2 + b2 - t) ** 2)


def adamw(params, grads, m, v, step):
    bc1, bc2 = 1 - B1 ** step, 1 - B2 ** step
    out_p, out_m, out_v = [], [], []
    for p, g, mi, vi in zip(params, grads, m, v):
        mi = B1 * mi + (1 - B1) * g
        vi = B2 * vi + (1 - B2) * g * g
        p = p * (1 - LR * WD) - LR * (mi / bc1) / (jnp.sqrt(vi / bc2) + EPS)
        out_p.append(p)
        out_m.append(mi)
        out_v.append(vi)
    return tuple(out_p), tuple(out_m), tuple(out_v)


def step_adamw(params, m, v, step, x, t):
    loss, grads = jax.value_and_grad(loss_fn)(params, x, t)
    params, m, v = adamw(params, grads, m, v, step)
    return params, m, v, loss


def step_sgd(params, x, t):
    loss, grads = jax.value_and_grad(loss_fn)(params, x, t)
    return tuple(p - LR * g for p, g in zip(params, grads)), loss


def init(key, h, b):
    k = jax.random.split(key, 6)
    s1, s2 = 1 / h ** 0.5, 1 / (4 * h) ** 0.5
    params = (jax.random.uniform(k[0], (h, 4 * h), minval=-s1, maxval=s1),
              jax.random.uniform(k[1], (4 * h,), minval=-s1, maxval=s1),
              jax.random.uniform(k[2], (4 * h, h), minval=-s2, maxval=s2),
              jax.random.uniform(k[3], (h,), minval=-s2, maxval=s2))
    return params, jax.random.normal(k[4], (b, h)), jax.random.normal(k[5], (b, h))


def placed(opt, params, x, t, dist):
    """The step jitted for the mesh (dist) or one device, and its state."""
    if dist:
        mesh = Mesh(np.array(jax.devices()).reshape(ARGS.dp, ARGS.tp), ("dp", "tp"))
        ps = (P(None, "tp"), P("tp"), P("tp", None), P())
        shard = tuple(NamedSharding(mesh, s) for s in ps)
        data = NamedSharding(mesh, P("dp", None))
        rep = NamedSharding(mesh, P())
    else:
        dev = jax.devices()[0]
        shard = tuple(jax.sharding.SingleDeviceSharding(dev) for _ in params)
        data = rep = jax.sharding.SingleDeviceSharding(dev)
    params = tuple(jax.device_put(p, s) for p, s in zip(params, shard))
    x, t = jax.device_put(x, data), jax.device_put(t, data)
    if opt == "sgd":
        f = jax.jit(step_sgd, in_shardings=(shard, data, data), out_shardings=(shard, rep))
        state = [params]

        def run():
            state[0], loss = f(state[0], x, t)
            return loss
        return run
    zeros = tuple(jnp.zeros_like(p) for p in params)
    f = jax.jit(step_adamw, in_shardings=(shard, shard, shard, None, data, data),
                out_shardings=(shard, shard, shard, rep))
    state = [params, zeros, zeros, 0]

    def run():
        state[3] += 1
        state[0], state[1], state[2], loss = f(state[0], state[1], state[2],
                                                float(state[3]), x, t)
        return loss
    return run


def timed(run):
    t0 = time.perf_counter()
    run().block_until_ready()
    return (time.perf_counter() - t0) * 1e3


def main():
    params, x, t = init(jax.random.PRNGKey(0), ARGS.hidden, ARGS.batch)
    for opt in (["adamw", "sgd"] if ARGS.opt == "both" else [ARGS.opt]):
        dist, single = placed(opt, params, x, t, True), placed(opt, params, x, t, False)
        for _ in range(2):  # compile and warm up
            timed(dist), timed(single)
        ds, ss = [], []
        for _ in range(ARGS.steps):
            ds.append(timed(dist))
            ss.append(timed(single))
        ds.sort(), ss.sort()
        d, s = ds[len(ds) // 2], ss[len(ss) // 2]
        print(json.dumps({"bench": "jax_train_step", "opt": opt, "dp": ARGS.dp, "tp": ARGS.tp,
                          "hidden": ARGS.hidden, "batch": ARGS.batch, "ms": round(d, 3),
                          "single_ms": round(s, 3), "ratio": round(d / s, 3),
                          "jax": jax.__version__, "cpus": os.cpu_count()}), flush=True)


if __name__ == "__main__":
    main()
