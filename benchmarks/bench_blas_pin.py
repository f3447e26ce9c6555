"""OpenBLAS's kernels pinned to AVX2 (``OPENBLAS_CORETYPE=Haswell``, as some machines set
for old OpenBLAS builds) against its own choice (both pin variables unset): hand NumPy's
W2 GEMM floor and steps, and fluid's, each in a fresh process of the peer suite, the two
settings interleaved round by round.

    python benchmarks/bench_blas_pin.py [--rounds 5] [--workloads W2-gemm,W2-sgd,W2-adam]
        [--frameworks numpy,fluid]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import bench_peers  # noqa: E402 (after the path set-up above)

PIN = {"OPENBLAS_CORETYPE": "Haswell"}


def timed(framework: str, names: list[str], pinned: bool) -> dict:
    """One worker process of the peer suite, with the pin or without either variable."""
    env = dict(os.environ)
    if pinned:
        env.update(PIN)
    else:
        for k in bench_peers.BLAS_PINS:
            env.pop(k, None)
    return bench_peers.run_worker(framework, "time", names, base_env=env)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--workloads", default="W2-gemm,W2-sgd,W2-adam")
    ap.add_argument("--frameworks", default="numpy,fluid")
    args = ap.parse_args()
    names, frameworks = args.workloads.split(","), args.frameworks.split(",")
    got: dict[tuple[str, str, bool], list[float]] = {}
    for r in range(args.rounds):
        for pinned in ((True, False) if r % 2 == 0 else (False, True)):
            for f in frameworks:
                for name, v in timed(f, names, pinned).items():
                    got.setdefault((f, name, pinned), []).append(v["us"])
        print(f"round {r + 1}/{args.rounds} done", file=sys.stderr)
    print(f"# OpenBLAS pinned to {PIN['OPENBLAS_CORETYPE']} kernels against its own choice, "
          f"{args.rounds} rounds\n")
    print("| workload | framework | pinned µs | own choice µs | own ÷ pinned, median [min-max] |")
    print("|---|---|---|---|---|")
    for f in frameworks:
        for name in names:
            pin, own = got.get((f, name, True)), got.get((f, name, False))
            if not pin or not own:
                continue
            ratios = [b / a for a, b in zip(pin, own)]
            print(f"| {name} | {f} | {statistics.median(pin):,.0f} | "
                  f"{statistics.median(own):,.0f} | {statistics.median(ratios):.2f} "
                  f"[{min(ratios):.2f}-{max(ratios):.2f}] |")


if __name__ == "__main__":
    main()
