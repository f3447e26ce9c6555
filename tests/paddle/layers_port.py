"""How the port of Paddle 1.8's test_layers.py runs a case: Paddle's program as a compiled
method, fed with arrays of the shapes its data vars declare.

A case is a function of one `Case`: it declares data vars through the case (Paddle's
``self._get_data`` of TestBook, or a plain ``layers.data`` that Paddle's other tests
write, which Paddle often never ran), calls the layers with Paddle's arguments and
returns what Paddle fetched (or what it built). `run_case` traces it into the method of a
`fluid.Program`, compiles it, calls it once with the arrays the declarations made and
returns the values, each checked to have the shape and dtype the trace declared and to
be finite.

LoD data become padded batches with lengths (`Case.sequence`), as docs/sequences.md says.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import fluid
from fluid_interactive.frontend.tracing import TraceContext

layers = fluid.layers


class Case:
    """Paddle's TestBook state for one case: a batch of 2, ints drawn from [0, 2), floats
    uniform in [0, 1) (TestBook's ``_get_data``); the other dims Paddle left unknown (a
    sequence's steps) are ``steps`` long. Only a case made with ``feeding=True`` makes
    the arrays (the first of the two traces `run_case` runs)."""

    def __init__(self, batch_size: int = 2, steps: int = 3, low: int = 0, high: int = 2,
                 feeding: bool = False):
        self._batch_size, self.steps = batch_size, steps
        self._low_data_bound, self._high_data_bound = low, high
        self.feeding = feeding
        self.feeds: dict[str, Any] = {}

    def _feed(self, name: str, dims: Sequence[int], dtype: str, value: Any = None) -> None:
        if not self.feeding:
            self.feeds[name] = None
        elif value is not None:
            self.feeds[name] = np.asarray(value).astype(dtype)
        else:
            rng = np.random.default_rng(111 + len(self.feeds))
            self.feeds[name] = (rng.random(dims, dtype=np.dtype(dtype))
                                if dtype.startswith("float") else
                                rng.integers(self._low_data_bound, self._high_data_bound,
                                             dims).astype(dtype))

    def _get_data(self, name: str, shape: Sequence[int], dtype: str, set_feed_dict: bool = True,
                  append_batch_size: bool = True) -> Any:
        """TestBook's helper: the data var and its feed."""
        dims = ([self._batch_size] if append_batch_size else []) + list(shape)
        self._feed(name, dims, dtype)
        return layers.data(name=name, shape=shape, dtype=dtype,
                           append_batch_size=append_batch_size)

    def data(self, name: str, shape: Sequence[int | None], dtype: str = "float32",
             append_batch_size: bool = True, value: Any = None, **kwargs: Any) -> Any:
        """``layers.data`` as Paddle's case calls it (without ``lod_level``: see
        `sequence`), fed ``value`` or an array of the declared shape: an unknown first
        dim ``_batch_size`` long, another unknown dim ``steps``."""
        var = layers.data(name=name, shape=list(shape), dtype=dtype,
                          append_batch_size=append_batch_size, **kwargs)
        dims = [d if d >= 0 else self._batch_size if k == 0 else self.steps
                for k, d in enumerate(var.shape)]
        self._feed(name, dims, dtype, value)
        return var

    def sequence(self, name: str, shape: Sequence[int], dtype: str = "float32",
                 lengths: Sequence[int] | None = None, value: Any = None) -> tuple[Any, Any]:
        """A LoD data var (Paddle: ``shape`` per step, ``lod_level=1``) as a padded batch
        ``[B, T, *shape]`` and its int64 lengths ``[B]`` (``<name>_len``): ``lengths``
        (Paddle's recursive sequence lengths) give B and T, else every row is `steps`
        long. ``value`` holds Paddle's LoD rows ``[sum(lengths), *shape]``."""
        lengths = list(lengths) if lengths is not None else [self.steps] * self._batch_size
        if value is None:
            value = np.random.default_rng(7).random((sum(lengths), *shape))
        var = self.data(name, [-1, -1] + list(shape), dtype, append_batch_size=False,
                        value=pad_rows(np.asarray(value), lengths))
        length = self.data(f"{name}_len", [-1], "int64", append_batch_size=False,
                           value=np.asarray(lengths, np.int64))
        return var, length


def pad_rows(flat: np.ndarray, lengths: Sequence[int]) -> np.ndarray:
    """Paddle's LoD rows ``[sum(lengths), ...]`` as a padded batch ``[B, T, ...]``."""
    out = np.zeros((len(lengths), max(lengths)) + flat.shape[1:], flat.dtype)
    starts = np.cumsum([0] + list(lengths))
    for b, n in enumerate(lengths):
        out[b, :n] = flat[starts[b]:starts[b] + n]
    return out


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    return list(value) if isinstance(value, (list, tuple)) else [value]


def run_case(build: Callable[[Case], Any], seed: int = 111, check_types: bool = True,
             **case: Any) -> list[np.ndarray]:
    """Trace ``build(Case(**case))`` into a compiled method fed by the data vars it
    declares, run it once, and return what it returned: each value an array of the shape
    the trace declared (unknown dims as the feeds made them) and its dtype (unless
    ``check_types`` is off), finite."""
    return run_case_with_feeds(build, seed, check_types, **case)[0]


def run_case_with_feeds(build: Callable[[Case], Any], seed: int = 111,
                        check_types: bool = True, **case: Any
                        ) -> tuple[list[np.ndarray], dict[str, np.ndarray]]:
    """`run_case`, and the arrays it fed (by data var name)."""
    probe = Case(feeding=True, **case)
    trace = TraceContext("probe")        # a first trace tells which data vars to feed
    with trace.method_block("main"):
        build(probe)
    declared: list[Any] = []

    class Ported(fluid.Program):
        @fluid.network(*probe.feeds)
        def main(self):
            outs = _as_list(build(Case(**case)))
            declared[:] = [(tuple(v.shape), v.dtype) for v in outs]
            return tuple(outs)

    prog = Ported().Compile(seed=seed)
    values = [np.asarray(v) for v in _as_list(prog.main(**probe.feeds))]
    for k, ((shape, dtype), value) in enumerate(zip(declared, values)):
        if isinstance(value.item(0) if value.ndim == 0 else value, (int, float)):
            # one value (no batch dim) comes back as a Python number
            values[k] = value = value.astype(dtype).reshape(shape)
        if check_types:
            assert len(shape) == value.ndim and all(
                d < 0 or d == n for d, n in zip(shape, value.shape)), (shape, value.shape)
            assert value.dtype == np.dtype(dtype), (value.dtype, dtype)
        assert value.dtype.kind not in "fc" or np.isfinite(value).all()
    return values, probe.feeds
