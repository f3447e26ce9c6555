"""Each op added for Paddle 1.8's layers against the NumPy expression a careful person
would write (benchmarks/op_cases/), timed in interleaved blocks in one process.

    python benchmarks/bench_ops.py [--only cumsum,topk] [--rounds 7] [--check]

Prints µs per call for the compiled method (one op, its feed and its return included) and
for the NumPy expression, and their ratio. It also times the call floor: a method whose
one op scales a single number, i.e. what binding the arguments, checking the feed and
copying the result out cost whatever the op. An op is marked when, beyond that floor, it
costs more than 2.0 times its NumPy expression (``shape`` or ``size`` cost NumPy about a
microsecond, less than any call of a compiled method). ``--check`` only runs each case
once and compares the values (the test suite runs that).
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE), os.path.join(os.path.dirname(HERE), "extension")]

from _timing import interleaved_us  # noqa: E402
from op_cases import OpCase, all_cases  # noqa: E402

import fluid  # noqa: E402

LIMIT = 2.0   # the slowest an op may be against its NumPy expression


def compiled(case: OpCase):
    """The case's layer as the one method of a compiled program: ``one_op(*arrays)``
    (not ``run``, a name the compiled program keeps for itself)."""
    names = list(case.inputs)

    class OneOp(fluid.Program):
        @fluid.network(*names)
        def one_op(self, *args):
            vs = [fluid.layers.data(name=n, shape=list(case.shapes.get(n, a.shape)),
                                    dtype=a.dtype.name, append_batch_size=False)
                  for n, a in case.inputs.items()]
            return case.layer(*vs)

    return OneOp().Compile(seed=0).one_op


def check(case: OpCase) -> None:
    arrays = list(case.inputs.values())
    got = compiled(case)(*arrays)
    want = case.numpy(*arrays)
    got_list = got if isinstance(got, tuple) else (got,)
    want_list = want if isinstance(want, tuple) else (want,)
    for g, w in zip(got_list, want_list):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=case.rtol,
                                   atol=case.atol, err_msg=case.name)


def time_case(case: OpCase, rounds: int) -> tuple[float, float]:
    arrays = list(case.inputs.values())
    run = compiled(case)
    calls = 50
    us = interleaved_us({"fluid": lambda: run(*arrays),
                         "numpy": lambda: case.numpy(*arrays)}, calls, rounds)
    return us["fluid"], us["numpy"]


def call_floor_us(rounds: int) -> float:
    """µs of the cheapest call of a compiled method: one feed of one number, one op."""
    class Floor(fluid.Program):
        @fluid.network("x")
        def one_op(self, x):
            x = fluid.layers.data(name="x", shape=[1], dtype="float32",
                                  append_batch_size=False)
            return fluid.layers.scale(x, 2.0)

    run, x = Floor().Compile(seed=0).one_op, np.ones(1, np.float32)
    return interleaved_us({"floor": lambda: run(x)}, 50, rounds)["floor"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default="", help="comma-separated case names")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--check", action="store_true", help="compare values, time nothing")
    args = parser.parse_args()
    only = {s for s in args.only.split(",") if s}
    cases = [c for c in all_cases() if not only or c.name in only]
    if args.check:
        for case in cases:
            check(case)
        print(f"{len(cases)} cases agree with their NumPy expressions")
        return 0
    floor = call_floor_us(args.rounds)
    print(f"the call floor (a method of one op on one number): {floor:.1f} µs")
    print(f"{'op':32} {'fluid µs':>10} {'NumPy µs':>10} {'ratio':>7} {'beyond floor':>13}")
    slow = []
    for case in cases:
        check(case)
        f, n = time_case(case, args.rounds)
        beyond = max(f - floor, 0.0) / n
        mark = "  > 2x" if beyond > LIMIT else ""
        if mark:
            slow.append(case.name)
        print(f"{case.name:32} {f:10.1f} {n:10.1f} {f / n:7.2f} {beyond:13.2f}{mark}")
    print(f"{len(cases)} ops; beyond the call floor, slower than {LIMIT}x NumPy: "
          f"{', '.join(slow) or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
