"""Tables on parameter servers: bytes a trainer sends per step, and the memory of a job whose
table could not be held whole.

1. Bytes per trainer step. 2 trainers x 2 servers (in this process), a table of dim D read
   by 8 id slots per sample: trainer 0's communicator counts the array bytes it sends and
   receives. The gradient a trainer sends is its batch's distinct rows only, ids and values:
   rows x (8 + 4D) bytes; the prefetch sends the same ids (8 bytes a row) and receives the
   rows (4D bytes a row). Nothing scales with the table's capacity.
2. Peak memory. A table of capacity 10,000,000 x 16 (640 MB as one float32 array) trained
   with Adagrad (an accumulator per row) by 2 trainers x 2 servers in one process, from a
   traced program that is never compiled whole: a child process reports its peak RSS,
   beside a child that only imports the package. Goal: below one full copy of the table.

    python benchmarks/bench_sparse_dist.py [--steps N] [--rss-steps N]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path[:0] = [ROOT, os.path.join(ROOT, "extension")]

import fluid  # noqa: E402
from fluid_interactive.distributed import launch, transpile  # noqa: E402
from fluid_interactive.frontend.program import trace_program  # noqa: E402

SLOTS = 8


class Table(fluid.Program):
    capacity = 100_000
    dim = 16

    @fluid.network("ids", "y")
    def train_step(self, ids, y):
        ids = fluid.layers.data(name="ids", shape=[SLOTS, 1], dtype="int64")
        y = fluid.layers.data(name="y", shape=[1], dtype="float32")
        e = fluid.layers.embedding(ids, size=[self.capacity, self.dim], is_distributed=True,
                                   param_attr=fluid.ParamAttr(name="table"))
        p = fluid.layers.fc(fluid.layers.reshape(e, [-1, SLOTS * self.dim]), size=1)
        loss = fluid.layers.mean(fluid.layers.square_error_cost(p, y))
        fluid.optimizer.Adagrad(learning_rate=0.1).minimize(loss)
        return loss


def batch(rng: np.random.Generator, size: int, hashed: bool) -> tuple[np.ndarray, np.ndarray]:
    ids = rng.integers(-2**62, 2**62, size=(size, SLOTS, 1)) if hashed else \
        np.minimum(rng.zipf(1.2, size=(size, SLOTS, 1)), 50_000)
    return ids.astype(np.int64), rng.normal(size=(size, 1)).astype(np.float32)


def bytes_per_step(dim: int, steps: int, size: int = 512) -> dict:
    plan = transpile(trace_program(Table(dim=dim)), trainers=2, pservers=2)
    rng = np.random.default_rng(0)
    sent = received = rows = 0
    with launch(plan, seed=0) as dist:
        comm = dist.trainers[0].comm
        for _ in range(steps):
            ids, y = batch(rng, size, hashed=False)
            rows += np.unique(ids[:size // 2]).size      # trainer 0's half of the batch
            before = comm.bytes_sent, comm.bytes_received
            dist.train_step(ids, y)
            sent += comm.bytes_sent - before[0]
            received += comm.bytes_received - before[1]
    dense = sum(int(np.prod(v.shape)) * 4 for v in plan.program.global_block().vars.values()
                if v.is_parameter and v.name != "table") * 2   # fc's gradient out, value in
    return {"dim": dim, "rows": rows / steps, "sent": sent / steps,
            "received": received / steps, "dense": dense,
            "predicted": rows / steps * (8 + 4 * dim)}


CHILD = """
import json, resource, sys
sys.path[:0] = {paths!r}
sys.argv = ['bench']
import numpy as np
from benchmarks.bench_sparse_dist import Table, batch
from fluid_interactive.distributed import launch, transpile
from fluid_interactive.frontend.program import trace_program
steps = {steps}
live = 0
if steps:
    plan = transpile(trace_program(Table(capacity=10_000_000, dim=16)), trainers=2, pservers=2)
    rng = np.random.default_rng(0)
    with launch(plan, seed=0) as dist:
        for _ in range(steps):
            dist.train_step(*batch(rng, 1024, hashed=True))
        live = sum(s[0] for ep in dist.table_stats().values() for s in ep.values())
print(json.dumps({{"peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "rows": live}}))
"""


def peak_rss(steps: int) -> dict:
    code = CHILD.format(paths=[ROOT, os.path.join(ROOT, "extension")], steps=steps)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=ROOT, timeout=3600)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--rss-steps", type=int, default=100)
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print("\n1. bytes per trainer step (2 trainers x 2 servers, batch 512 = 256 a trainer, "
          f"{SLOTS} Zipf id slots a sample)")
    print("   dim | distinct rows | sent (B) | rows x (8 + 4D) | + dense grads | received (B)")
    for dim in (16, 32):
        r = bytes_per_step(dim, args.steps)
        print(f"   {r['dim']:3d} | {r['rows']:13.1f} | {r['sent']:8.0f} | {r['predicted']:15.0f}"
              f" | {r['dense'] // 2:13d} | {r['received']:12.0f}")
        print(f"         sent = ids of the prefetch (8 a row) + gradient rows (8 + 4D a row) "
              f"+ dense gradients: {r['rows'] * 8 + r['predicted'] + r['dense'] // 2:.0f}")
    print(f"\n2. peak RSS, capacity 10,000,000 x 16 (one float32 copy: 640 MB), Adagrad, "
          f"2 trainers x 2 servers in one process, {args.rss_steps} steps of 1024 samples "
          f"x {SLOTS} hashed ids")
    base = peak_rss(0)
    job = peak_rss(args.rss_steps)
    print(f"   importing the package alone: {base['peak_mb']:.0f} MB")
    print(f"   the job: {job['peak_mb']:.0f} MB peak, {job['rows']} rows made "
          f"({job['rows'] * 16 * 4 * 2 / 2**20:.0f} MB of rows and accumulators); "
          f"{'below' if job['peak_mb'] < 640 else 'NOT below'} one full copy (640 MB)")


if __name__ == "__main__":
    main()
