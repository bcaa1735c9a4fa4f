#!/usr/bin/env python3
"""Load test of dtorch_server on loopback (the standard library only).

  load_test.py --server PATH --dir DIR [--clients 16] [--requests 2000]

1. writes a model (dtorch_server --write-model), starts the server on a
   free port, and computes reference outputs in float64 from the weights
   file itself (its own safetensors reader: an independent computation);
2. N clients on keep-alive connections send a fixed number of requests
   (1-8 rows each) at once; every answer is checked against the reference;
   p50/p99 latency and throughput are reported;
3. after the run /metrics must show the live tensors and every rank's
   memory back at their values before it (no leak) and every rank's queue
   empty;
4. SIGTERM with requests in flight, made so rather than hoped for: HOLD
   requests with "hold": true are computed and then wait at the server's
   gate (--hold-fd, a pipe the test holds) until /metrics shows all of
   them held; then SIGTERM; once the server prints "draining: HOLD
   requests in flight" a new connection must be refused, and only then
   the test opens the gate: each held request must be answered correctly,
   the server must exit 0 with 0 unanswered and 0 live tensors. Every
   wait has a deadline, so a hang fails the test.
Exits 1 on any wrong answer, error, leak or unclean shutdown; writes the
figures to DIR/load_result.json."""
import argparse
import asyncio
import json
import os
import random
import signal
import struct
import subprocess
import sys
import time

IN_ROWS = 64  # distinct input rows the requests draw from
HOLD = 8      # requests held open across the shutdown signal
WAIT_S = 60   # the longest any step of the shutdown check may take


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        assert e["dtype"] == "F32", e
        lo, hi = e["data_offsets"]
        flat = struct.unpack(f"<{(hi - lo) // 4}f", data[8 + n + lo:8 + n + hi])
        out[name] = (e["shape"], flat)
    return out


def reference(weights, x):
    (hid, inn), w1 = weights["w1"]
    _, b1 = weights["b1"]
    (out, _), w2 = weights["w2"]
    _, b2 = weights["b2"]
    h = [max(0.0, sum(w1[j * inn + k] * x[k] for k in range(inn)) + b1[j]) for j in range(hid)]
    return [sum(w2[o * hid + j] * h[j] for j in range(hid)) + b2[o] for o in range(out)]


async def http(reader, writer, method, path, body=b""):
    writer.write(f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                 f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
                 .encode() + body)
    await writer.drain()
    status = int((await reader.readline()).split()[1])
    length = 0
    while True:
        line = await reader.readline()
        if line in (b"\r\n", b""):
            break
        k, _, v = line.decode().partition(":")
        if k.lower() == "content-length":
            length = int(v)
    return status, await reader.readexactly(length)


async def metrics(port):
    r, w = await asyncio.open_connection("127.0.0.1", port)
    try:
        status, body = await http(r, w, "GET", "/metrics")
    finally:
        w.close()
    assert status == 200
    out = {}
    for line in body.decode().splitlines():
        if line and not line.startswith("#"):
            k, v = line.rsplit(" ", 1)
            out[k] = float(v)
    return out


def check(rows, got, refs, rtol=1e-4, atol=1e-4):
    if len(got) != len(rows):
        return f"{len(got)} rows for {len(rows)}"
    for i, (r, g) in enumerate(zip(rows, got)):
        for o, (a, b) in enumerate(zip(g, refs[r])):
            if abs(a - b) > atol + rtol * abs(b):
                return f"row {i} out {o}: {a} vs {b}"
    return None


async def client(port, jobs, inputs, refs, lat, failures):
    r, w = await asyncio.open_connection("127.0.0.1", port)
    try:
        for rows in jobs:
            body = json.dumps({"input": [inputs[i] for i in rows]}).encode()
            t0 = time.perf_counter()
            status, text = await http(r, w, "POST", "/v1/forward", body)
            lat.append(time.perf_counter() - t0)
            if status != 200:
                failures.append(f"HTTP {status}: {text[:200]!r}")
                continue
            bad = check(rows, json.loads(text)["output"], refs)
            if bad:
                failures.append(bad)
    finally:
        w.close()


async def one_request(port, rows, inputs, refs, hold):
    try:
        r, w = await asyncio.open_connection("127.0.0.1", port)
    except OSError:
        return "refused"
    try:
        body = json.dumps({"input": [inputs[i] for i in rows], "hold": hold}).encode()
        status, text = await http(r, w, "POST", "/v1/forward", body)
    except (OSError, asyncio.IncompleteReadError, IndexError, ValueError):
        return "dropped"
    finally:
        w.close()
    if status != 200:
        return f"HTTP {status}"
    return check(rows, json.loads(text)["output"], refs) or "ok"


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * (len(xs) - 1)))]


async def run(args, port, proc, gate, inputs, refs):
    rng = random.Random(2)
    res = {"clients": args.clients, "requests": args.requests}
    # the baseline: the model loaded (the server waited for its reads),
    # no request yet
    base = await metrics(port)
    await client(port, [[0]], inputs, refs, [], [])  # warm-up
    jobs = [rng.sample(range(IN_ROWS), rng.randint(1, 8)) for _ in range(args.requests)]
    lat, failures = [], []
    t0 = time.perf_counter()
    await asyncio.gather(*(client(port, jobs[c::args.clients], inputs, refs, lat, failures)
                           for c in range(args.clients)))
    elapsed = time.perf_counter() - t0
    res.update(answered=len(lat), errors=len(failures), seconds=round(elapsed, 3),
               requests_per_s=round(len(lat) / elapsed, 1),
               rows_per_s=round(sum(len(j) for j in jobs) / elapsed, 1),
               p50_ms=round(pct(lat, 0.5) * 1e3, 3), p99_ms=round(pct(lat, 0.99) * 1e3, 3))
    after = await metrics(port)
    res["server_p50_ms"] = round(after['dtorch_server_latency_seconds{quantile="0.5"}'] * 1e3, 3)
    res["server_p99_ms"] = round(after['dtorch_server_latency_seconds{quantile="0.99"}'] * 1e3, 3)
    # no leak: the live tensors and each rank's memory in use return to
    # their values before the run, and every rank's queue empties (frees
    # are stream-ordered: allow 5 s)
    want = {k: base[k] for k in base if k == "dtorch_live_tensors" or
            k.startswith("dtorch_rank_memory_used_bytes")}
    want.update({k: 0 for k in base if k.startswith("dtorch_rank_queue_depth")})
    deadline = time.time() + 5
    while any(after[k] != v for k, v in want.items()) and time.time() < deadline:
        await asyncio.sleep(0.05)
        after = await metrics(port)
    leaks = {k: (v, after[k]) for k, v in want.items() if after[k] != v}
    res["leaks"] = leaks
    res["live_tensors_after"] = int(after["dtorch_live_tensors"])

    # SIGTERM with HOLD requests in flight: they wait at the gate until
    # the test opens it, after the server has said it is draining
    held = [asyncio.ensure_future(one_request(port, rng.sample(range(IN_ROWS), 8), inputs,
                                              refs, True)) for _ in range(HOLD)]
    deadline = time.time() + WAIT_S
    m = await metrics(port)
    while m["dtorch_server_held"] < HOLD and time.time() < deadline:
        await asyncio.sleep(0.01)
        m = await metrics(port)
    res["held_at_signal"] = int(m["dtorch_server_held"])
    res["in_flight_at_signal"] = int(m["dtorch_server_in_flight"])
    proc.send_signal(signal.SIGTERM)
    loop = asyncio.get_running_loop()
    try:
        line = await asyncio.wait_for(loop.run_in_executor(None, proc.stdout.readline), WAIT_S)
    except asyncio.TimeoutError:
        line = "(nothing within the deadline)"
    res["draining"] = line.strip()
    # no connection is accepted once draining
    res["after_draining"] = await one_request(port, [0], inputs, refs, False)
    os.write(gate, b"x")
    os.close(gate)
    try:
        outcomes = await asyncio.wait_for(asyncio.gather(*held), WAIT_S)
    except asyncio.TimeoutError:
        outcomes = ["no answer within the deadline"] * HOLD
    res["shutdown_outcomes"] = {o: outcomes.count(o) for o in set(outcomes)}
    return res, failures


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", required=True)
    ap.add_argument("--dir", required=True)
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--tp", type=int, default=4)
    ap.add_argument("--threads", type=int, default=4)
    args = ap.parse_args()
    os.makedirs(args.dir, exist_ok=True)
    path = os.path.join(args.dir, "model.safetensors")
    subprocess.run([args.server, "--write-model", path], check=True)
    weights = read_safetensors(path)
    rng = random.Random(1)
    inputs = [[rng.uniform(-1, 1) for _ in range(weights["w1"][0][1])] for _ in range(IN_ROWS)]
    refs = [reference(weights, x) for x in inputs]

    # the gate: the server reads the pipe's read end; a byte from the
    # test opens it
    gate_r, gate = os.pipe()
    proc = subprocess.Popen([args.server, "--model", path, "--port", "0", "--tp", str(args.tp),
                             "--threads", str(args.threads), "--hold-fd", str(gate_r)],
                            stdout=subprocess.PIPE, text=True, pass_fds=(gate_r,))
    os.close(gate_r)
    first = proc.stdout.readline()
    if not first.startswith("listening on 127.0.0.1:"):
        print("load test: the server did not start:", first)
        proc.kill()
        return 1
    port = int(first.split(":")[1].split()[0])
    print(first.strip())
    try:
        res, failures = asyncio.run(run(args, port, proc, gate, inputs, refs))
    except BaseException:
        proc.kill()
        raise
    try:
        rest, _ = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        print("load test: the server did not stop within 60 s of SIGTERM")
        return 1
    print(rest.strip())
    res["server_exit"] = proc.returncode
    with open(os.path.join(args.dir, "load_result.json"), "w") as f:
        json.dump(res, f, indent=1)
    print(json.dumps(res))
    ok = True
    if failures:
        print(f"load test: {len(failures)} wrong or failed answers, first: {failures[0]}")
        ok = False
    if res["answered"] != args.requests:
        print(f"load test: {res['answered']} of {args.requests} requests answered")
        ok = False
    if res["leaks"]:
        print(f"load test: leak after the run (before, after): {res['leaks']}")
        ok = False
    outs = res["shutdown_outcomes"]
    if res["held_at_signal"] != HOLD or res["in_flight_at_signal"] != HOLD:
        print(f"load test: shutdown: {res['held_at_signal']} held and "
              f"{res['in_flight_at_signal']} in flight at the signal, want {HOLD} "
              f"(within {WAIT_S} s)")
        ok = False
    if res["draining"] != f"draining: {HOLD} requests in flight":
        print(f"load test: shutdown: the server said {res['draining']!r}")
        ok = False
    if res["after_draining"] != "refused":
        print(f"load test: shutdown: a request while draining got {res['after_draining']!r}")
        ok = False
    if outs != {"ok": HOLD}:
        print(f"load test: shutdown: {outs} for the {HOLD} held requests")
        ok = False
    if (proc.returncode != 0 or "live tensors 0" not in rest or " 0 unanswered" not in rest
            or f"{HOLD} requests in flight at the signal" not in rest):
        print("load test: the server did not stop cleanly")
        ok = False
    print(f"load test: {'passed' if ok else 'FAILED'}: {res['answered']} requests, "
          f"{args.clients} clients, {res['requests_per_s']} req/s, "
          f"p50 {res['p50_ms']} ms, p99 {res['p99_ms']} ms, {res['errors']} errors")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
