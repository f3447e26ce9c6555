"""A reference interpreter: run ops one by one over a dict of arrays.

No planning, no buffers, no caching: the executable definition of what a list of ops
means. Tests compare the compiled runtime against it; the op-test harness runs gradient
ops with it.
"""
from __future__ import annotations

from collections.abc import Iterable, MutableMapping
from typing import Any

import numpy as np

from ..ir.records import OpDesc
from .apply import flat_inputs, flat_outputs, infer_op, prepare_kernel
from .registry import get_spec
from .spec import Forward, TensorType


def _type_of_array(a: Any) -> TensorType:
    return TensorType(tuple(a.shape), np.dtype(a.dtype).name)


def run_ops(ops: Iterable[OpDesc], env: MutableMapping[str, Any], xp: Any = np,
            rng: Any = None, is_test: bool = False) -> MutableMapping[str, Any]:
    """Execute ``ops`` in order, reading and writing ``env`` (name -> array)."""
    for op in ops:
        spec = get_spec(op.type)
        known = {n: _type_of_array(env[n]) for n in op.input_names()}
        out_types = infer_op(op, known.__getitem__)
        types = dict(known)
        for slot, names in op.outputs.items():
            types.update(zip(names, out_types[slot]))
        fn = prepare_kernel(op, types.__getitem__, xp, rng=rng or np.random.default_rng(0),
                            is_test=is_test)
        args = [env[n] for n in flat_inputs(spec, op)]
        result = args[fn.input_index] if isinstance(fn, Forward) else fn(*args)
        outs = flat_outputs(spec, op)
        values = (result,) if len(outs) == 1 else tuple(result)
        for name, value in zip(outs, values):
            env[name] = value
    return env
