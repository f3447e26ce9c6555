"""What the ports of Paddle 1.8's unit tests share: a Paddle program as a compiled method.

A Paddle test builds ops under ``program_guard`` and runs ``exe.run(main, feed=...,
fetch_list=[...])``. Here the same layers are called in a traced method whose arguments
feed the data vars of ``feeds`` and whose return values are the fetch list; gradients a
Paddle test fetches by ``x.grad_name`` come from ``fluid.gradients``.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import fluid


def compile_fetches(build: Callable[[], Sequence[Any]], feeds: Sequence[str] = (),
                    seed: int = 0) -> Callable[..., list[np.ndarray]]:
    """A function of the arrays of ``feeds`` (by name, as Paddle's feed dict) returning
    the values of what ``build()`` returns (Paddle's fetch list), each an array of at
    least one dim (as Paddle's fetches are)."""
    class Ported(fluid.Program):
        @fluid.network(*feeds)
        def main(self):
            return tuple(build())

    prog = Ported().Compile(seed=seed)

    def run(**feed: Any) -> list[np.ndarray]:
        values = prog.main(*[feed[n] for n in feeds])
        return [np.atleast_1d(np.asarray(v)) for v in values]
    run.program = prog   # type: ignore[attr-defined]
    return run


def run_fetches(build: Callable[[], Sequence[Any]], **feed: Any) -> list[np.ndarray]:
    """One run: ``exe.run(main, feed=feed, fetch_list=build())``."""
    return compile_fetches(build, list(feed))(**feed)
