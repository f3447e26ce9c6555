"""`fluid.batch_reader`: a reader that is part of the program, not a loop around it.

    reader = fluid.batch_reader(file='./data.recordio', batch_size=128,
                                shape=[[13], [1]], dtype=['float32', 'float32'])
    x, y = reader.next_item()

The reader is created when the program compiles (a ``create_batch_reader`` op in block 0)
and opens its files lazily on the first call; its position lives in the compiled program's
scope, so consecutive calls walk through the data. At the end of the data the call raises
`fluid.EOFException` and changes nothing; ``reader.reset()`` or
``compiled.reset_readers()`` starts again.
"""
from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import OpArgumentError
from ..ir.records import VarDesc, canonical_dtype
from .tracing import TraceContext, current_trace, error_at
from .variable import Variable

Shapes = Sequence[Sequence[int]]


class Reader:
    """The handle ``fluid.batch_reader`` returns while a method is traced."""

    def __init__(self, trace: TraceContext, name: str, shapes: list[tuple[int, ...]],
                 dtypes: list[str]):
        self._trace, self.name = trace, name
        self.shapes, self.dtypes = shapes, dtypes
        self._compiled: weakref.WeakSet[Any] = weakref.WeakSet()

    def next_item(self) -> Variable | tuple[Variable, ...]:
        """Data vars holding the next batch, one per slot (a tuple when there are several)."""
        trace = current_trace("reader.next_item")
        outs = [trace.unique_in_block(f"{self.name}.slot_{i}") for i in range(len(self.shapes))]
        for out, shape, dtype in zip(outs, self.shapes, self.dtypes):
            trace.declare(VarDesc(out, (-1,) + shape, dtype, stop_gradient=True))
        trace.append_op("read", {"Reader": [self.name]}, {"Out": outs},
                        {"shapes": [list(s) for s in self.shapes], "dtypes": self.dtypes})
        vars_ = tuple(Variable(trace, n) for n in outs)
        return vars_[0] if len(vars_) == 1 else vars_

    def bind(self, compiled: Any) -> None:
        """Called by `Compile()`: `reset()` then reaches this reader in that program."""
        self._compiled.add(compiled)

    def reset(self) -> None:
        """Start the data again from the first epoch, in every program compiled with it.
        Safe at any time."""
        for compiled in list(self._compiled):
            compiled.reset_readers([self.name])

    def __repr__(self) -> str:
        slots = ", ".join(f"{d}{list(s)}" for s, d in zip(self.shapes, self.dtypes))
        return f"Reader({self.name}: {slots})"


def _as_list(value: Any) -> list:
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _slot_specs(shape: Shapes | None, dtype: Any, data: Sequence[np.ndarray] | None
                ) -> tuple[list[tuple[int, ...]], list[str]]:
    if data is not None:
        shapes = [tuple(a.shape[1:]) for a in data] if shape is None else [tuple(s) for s in shape]
        dtypes = [a.dtype.name for a in data] if dtype is None else _as_list(dtype)
    else:
        if shape is None or dtype is None:
            raise error_at(OpArgumentError, "batch_reader(file=...) needs shape=[[...], ...] "
                                            "and dtype=[...], one per slot of each record")
        shapes, dtypes = [tuple(int(d) for d in s) for s in shape], _as_list(dtype)
    if len(shapes) != len(dtypes):
        raise error_at(OpArgumentError, f"batch_reader got {len(shapes)} shapes but "
                                        f"{len(dtypes)} dtypes; give one of each per slot")
    try:
        return shapes, [canonical_dtype(d) for d in dtypes]
    except TypeError as e:
        raise error_at(OpArgumentError, f"batch_reader: {e}") from None


def _data_arrays(data: Any) -> list[np.ndarray]:
    arrays = [np.asarray(a) for a in _as_list(data)]
    if not arrays or any(a.ndim == 0 for a in arrays):
        raise error_at(OpArgumentError, "batch_reader(data=...) takes a tuple of arrays with "
                                        "a leading sample dimension, e.g. data=(X, Y)")
    n = {len(a) for a in arrays}
    if len(n) != 1:
        raise error_at(OpArgumentError, f"batch_reader(data=...): arrays hold different "
                                        f"numbers of samples: {[len(a) for a in arrays]}")
    return arrays


def batch_reader(file: str | Sequence[str] | None = None, batch_size: int = 1,
                 shape: Shapes | None = None, dtype: Any = None, format: str = "recordio",
                 shuffle: bool = False, shuffle_buffer: int | None = None,
                 seed: int | None = None, epochs: int | None = 1,
                 drop_last: bool = False, data: Any = None, trainer_shard: bool = True
                 ) -> Reader:
    """A reader of batches from RecordIO ``file`` (a path, a glob or a list of them) or from
    in-memory ``data=(X, Y, ...)``.

    ``shape`` and ``dtype`` give each slot's per-sample shape and dtype (from the arrays
    when ``data`` is given). ``epochs=N`` passes over the data N times, ``None`` forever.
    Shuffling is deterministic for a given ``seed``. In a program transpiled for several
    trainers, trainer ``i`` of ``n`` reads samples ``i, i+n, i+2n, ...`` of the files
    (``trainer_shard=False``: every trainer reads all of them).
    """
    trace = current_trace("fluid.batch_reader")
    if (file is None) == (data is None):
        raise error_at(OpArgumentError, "batch_reader needs exactly one of file=... (RecordIO "
                                        "files) or data=(X, Y, ...) (arrays in memory)")
    if format != "recordio":
        raise error_at(OpArgumentError, f"batch_reader format {format!r} is not supported; "
                                        f"use 'recordio' (write files with fluid.recordio)")
    if not isinstance(batch_size, int) or batch_size < 1:
        raise error_at(OpArgumentError, f"batch_size must be a positive int, got {batch_size!r}")
    if epochs is not None and (not isinstance(epochs, int) or epochs < 1):
        raise error_at(OpArgumentError, f"epochs must be a positive int or None, got {epochs!r}")
    arrays = _data_arrays(data) if data is not None else None
    shapes, dtypes = _slot_specs(shape, dtype, arrays)
    name = trace.state_names.generate("reader")
    inputs = _declare_data(trace, name, arrays, dtypes) if arrays is not None else []
    trace.declare(VarDesc(name, (), "float32", persistable=True, kind="reader"),
                  in_global=True)
    attrs = {"files": [] if file is None else [str(f) for f in _as_list(file)],
             "batch_size": batch_size, "shapes": [list(s) for s in shapes], "dtypes": dtypes,
             "shuffle": bool(shuffle),
             "shuffle_buffer": -1 if shuffle_buffer is None else int(shuffle_buffer),
             "seed": -1 if seed is None else int(seed),
             "epochs": -1 if epochs is None else int(epochs), "drop_last": bool(drop_last),
             "trainer_shard": bool(trainer_shard)}
    trace.append_op("create_batch_reader", {"Data": inputs}, {"Out": [name]}, attrs,
                    in_global=True)
    reader = Reader(trace, name, shapes, dtypes)
    trace.readers.append(reader)
    return reader


def _declare_data(trace: TraceContext, name: str, arrays: list[np.ndarray],
                  dtypes: list[str]) -> list[str]:
    """In-memory data become persistable vars of block 0, filled when the program compiles
    (and saved with checkpoints)."""
    names = []
    for i, (array, dtype) in enumerate(zip(arrays, dtypes)):
        var = f"{name}.data_{i}"
        trace.declare(VarDesc(var, tuple(array.shape), dtype, persistable=True), in_global=True)
        trace.initial_values[var] = np.ascontiguousarray(array, dtype=dtype)
        names.append(var)
    return names
