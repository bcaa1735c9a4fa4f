"""Awaiting TensorFutures: many at once on one event loop, driven by the
futures' eventfds (loop.add_reader) — the loop stays responsive and
nothing polls; errors raised by await; get() with a timeout."""
import asyncio

import pytest
import torch

import dtorch


def test_many_futures_awaited_concurrently():
    n = 64
    dtorch.manual_seed(7)
    xs = [dtorch.randn(128, 128) for _ in range(n)]
    ws = dtorch.randn(128, 128)
    ys = [(x @ ws).relu().sum(dim=1) for x in xs]
    want = [(x.to_torch().double() @ ws.to_torch().double()).relu().sum(dim=1) for x in xs]
    calls = {"ready": 0}
    real = dtorch.TensorFuture.is_ready

    def counting(self):
        calls["ready"] += 1
        return real(self)

    async def main():
        ticks = 0
        stop = False

        async def ticker():  # runs while the fetches are pending
            nonlocal ticks
            while not stop:
                ticks += 1
                await asyncio.sleep(0)
        t = asyncio.ensure_future(ticker())
        out = await asyncio.gather(*(y.to_torch_async() for y in ys))
        stop = True
        await t
        return out, ticks

    dtorch.TensorFuture.is_ready = counting
    try:
        out, ticks = asyncio.run(main())
    finally:
        dtorch.TensorFuture.is_ready = real
    assert len(out) == n
    for got, w in zip(out, want):
        torch.testing.assert_close(got.double(), w, rtol=1e-4, atol=1e-3)
    assert ticks > 0
    # one readiness check per await: the loop waited on the fds, no polling
    assert calls["ready"] == n


def test_await_reports_the_computation_error():
    a = dtorch.tensor([7, 8, 9])
    z = dtorch.tensor([1, 0, 1])
    bad = a // z  # integer division by zero: found when the rank runs it

    async def main():
        return await bad.to_torch_async()

    with pytest.raises(dtorch.DTorchError, match="zero") as e:
        asyncio.run(main())
    assert e.value.status == "DT_ERR_INVALID_ARGUMENT"


def test_get_with_timeout_and_is_ready():
    c = dtorch.matmul(dtorch.rand(256, 256), dtorch.rand(256, 256))
    f = c.to_torch_async()
    r = f.get(timeout=30)
    assert f.is_ready() and tuple(r.shape) == (256, 256)
    assert f.get(0) is r


def test_await_from_several_loops_in_threads():
    import concurrent.futures

    def one(i):
        t = dtorch.full((16,), float(i))

        async def main():
            return await (t * 2.0).to_torch_async()
        return asyncio.run(main())

    with concurrent.futures.ThreadPoolExecutor(4) as ex:
        res = list(ex.map(one, range(16)))
    for i, r in enumerate(res):
        torch.testing.assert_close(r, torch.full((16,), 2.0 * i))


def test_dropped_future_keeps_its_buffer_until_done():
    import gc
    gc.collect()
    base = dtorch.live_tensors()
    for _ in range(20):
        c = dtorch.matmul(dtorch.rand(200, 200), dtorch.rand(200, 200))
        c.to_torch_async()  # dropped at once: its destination must outlive the fetch
        del c
    gc.collect()
    dtorch.synchronize()
    assert dtorch.live_tensors() == base
