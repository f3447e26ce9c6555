"""Milliseconds per training step: one process, the in-process engine, and the Ray engine
(2 trainers x 2 parameter servers, sync mode), beside Ray's own floor measured in the same
run, for fit_a_line and the digits MLP.

Ray's floor is a round trip to a no-op actor carrying the same bytes as the step's own round
trips. A Ray step has two on its critical path, both trainers in parallel: driver -> trainer
actor (the trainer's half of the batch in, the loss out) and trainer -> parameter servers
(one exchange per server, all in flight together: gradient blocks in, parameter blocks out).
The goal: a Ray step within 3x (floor of those two round trips). Timings are medians over
interleaved rounds (each round times every configuration once), so a busy machine slows all
of them alike. Run:

    python benchmarks/bench_distributed.py [--steps N] [--rounds R]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.dirname(HERE), os.path.join(os.path.dirname(HERE), "extension")]

import fluid  # noqa: E402
from fluid_interactive.distributed import (  # noqa: E402
    launch,
    pserver_spec,
    stop_ray,
    transpile,
)
from fluid_interactive.distributed.state import Snapshot, StateDir  # noqa: E402


class FitALine(fluid.Program):
    @fluid.network("x", "y")
    def train(self, x, y):
        x = fluid.layers.data(name="x", shape=[13], dtype="float32")
        y = fluid.layers.data(name="y", shape=[1], dtype="float32")
        pred = fluid.layers.fc(input=x, size=1)
        loss = fluid.layers.mean(fluid.layers.square_error_cost(input=pred, label=y))
        fluid.optimizer.SGD(learning_rate=0.01).minimize(loss)
        return loss


class DigitsMLP(fluid.Program):
    """examples/digits_mlp.py's network (64-128-64-10, Adam), fed by arguments."""

    @fluid.network("image", "label")
    def train(self, image, label):
        image = fluid.layers.data(name="image", shape=[64], dtype="float32")
        label = fluid.layers.data(name="label", shape=[1], dtype="int64")
        h = fluid.layers.fc(input=image, size=128, act="relu")
        h = fluid.layers.fc(input=h, size=64, act="relu")
        logits = fluid.layers.fc(input=h, size=10)
        loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, label))
        fluid.optimizer.Adam(learning_rate=0.001).minimize(loss)
        return loss


def batch(program: type, size: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    if program is FitALine:
        return (rng.standard_normal((size, 13)).astype(np.float32),
                rng.standard_normal((size, 1)).astype(np.float32))
    return (rng.random((size, 64), dtype=np.float32),
            rng.integers(0, 10, (size, 1)).astype(np.int64))


class Echo:
    """A no-op actor: takes bytes, returns a preallocated reply."""

    def __init__(self, reply_bytes: int):
        self.reply = np.zeros(max(1, reply_bytes // 4), np.float32)

    def echo(self, payload):
        return self.reply


def step_ms(fn, steps: int) -> float:
    start = time.perf_counter()
    for _ in range(steps):
        fn()
    return (time.perf_counter() - start) * 1e3 / steps


def exchange_bytes(plan) -> tuple[int, int]:
    """Bytes one trainer sends to and receives from the busiest server in one step."""
    worst = (0, 0)
    for ep in plan.endpoints:
        spec = pserver_spec(plan, ep)
        names = plan.received("train").get(ep, [])
        got = sum(int(np.prod(spec.program.global_block().vars[n].shape)) * 4 for n in names)
        worst = max(worst, (got, got))   # a gradient block is the size of its parameter
    return worst


def state_write_ms(plan) -> float:
    """One prepared-step file of a server (what it writes per step to survive a restart)."""
    spec = pserver_spec(plan, plan.endpoints[0])
    values = {n: np.zeros(v.shape, v.dtype) for n, v in spec.program.global_block().vars.items()
              if v.persistable and all(d > 0 for d in v.shape)}
    with tempfile.TemporaryDirectory() as d:
        state = StateDir(d)
        start = time.perf_counter()
        for k in range(1, 51):
            state.save_prepared(Snapshot(k, values, [0, 0]))
            state.commit(k)
        return (time.perf_counter() - start) * 1e3 / 50


def bench(program: type, size: int, steps: int, rounds: int, ray) -> dict[str, float]:
    x, y = batch(program, size)
    hx, hy = x[: size // 2], y[: size // 2]
    single = program().Compile(seed=0)
    half = program().Compile(seed=0)
    plan = transpile(program().Compile(seed=0), main="train", trainers=2, pservers=2)
    local = launch(plan)
    on_ray = launch(plan, engine="ray", timeout=120)
    grad_bytes, param_bytes = exchange_bytes(plan)
    echo_cls = ray.remote(num_cpus=0, max_concurrency=16)(Echo)
    to_trainer, to_server = echo_cls.remote(8), echo_cls.remote(param_bytes)
    grads = np.zeros(max(1, grad_bytes // 4), np.float32)
    ray.get([to_trainer.echo.remote(None), to_server.echo.remote(None)])
    configs = {
        "single process": lambda: single.train(x, y),
        "single process, half batch": lambda: half.train(hx, hy),
        "in-process engine": lambda: local.train(x, y),
        "ray engine": lambda: on_ray.train(x, y),
        "floor: driver->trainer": lambda: ray.get(to_trainer.echo.remote((hx, hy))),
        "floor: trainer->server": lambda: ray.get(to_server.echo.remote(grads)),
    }
    for fn in configs.values():      # warm up: plans, actors, connections
        for _ in range(5):
            fn()
    times: dict[str, list[float]] = {k: [] for k in configs}
    for _ in range(rounds):
        for name, fn in configs.items():
            times[name].append(step_ms(fn, steps))
    out = {k: statistics.median(v) for k, v in times.items()}
    out["state file per step"] = state_write_ms(plan)
    out["bytes driver->trainer"] = float(hx.nbytes + hy.nbytes)
    out["bytes trainer<->server"] = float(grad_bytes + param_bytes)
    local.close()
    on_ray.close()
    for a in (to_trainer, to_server):
        ray.kill(a)
    return out


def report(name: str, r: dict[str, float]) -> None:
    floor = r["floor: driver->trainer"] + r["floor: trainer->server"]
    print(f"\n{name}")
    for key in ("single process", "single process, half batch", "in-process engine",
                "ray engine", "floor: driver->trainer", "floor: trainer->server",
                "state file per step"):
        print(f"  {key:28s} {r[key]:8.3f} ms")
    print(f"  bytes per round trip: driver->trainer {r['bytes driver->trainer']:.0f}, "
          f"trainer<->busiest server {r['bytes trainer<->server']:.0f}")
    rest = r["ray engine"] - floor - r["single process, half batch"]
    print(f"  ray step / floor of its 2 round trips: {r['ray engine'] / floor:.2f}x "
          f"(goal <= 3x)")
    print(f"  where a ray step goes: round-trip floor {floor:.2f} ms, a trainer's compute "
          f"{r['single process, half batch']:.2f} ms, the rest {rest:.2f} ms (serialising "
          f"arguments and results, the servers' update, the state file, scheduling)")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    from fluid_interactive.distributed.ray_engine import ensure_connected
    started = time.perf_counter()
    ray = ensure_connected(None, "bench")
    print(f"private Ray cluster up in {time.perf_counter() - started:.1f} s")
    try:
        for program, size in ((FitALine, 128), (DigitsMLP, 128)):
            report(f"{program.__name__}, batch {size} (2 trainers x {size // 2} rows)",
                   bench(program, size, args.steps, args.rounds, ray))
    finally:
        stop_ray()


if __name__ == "__main__":
    main()
