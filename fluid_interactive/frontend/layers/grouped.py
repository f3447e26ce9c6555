"""The small ops of a composite layer (`rnn`, `dynamic_decode`, a beam search) recorded
under the layer's one name (``rnn_0.tmp_3``), so that a drawing shows the layer as one box
instead of the dozen transposes, flips and casts it is made of (drawings group ops by the
layer their outputs name)."""
from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from ...ir.records import VarDesc
from ...ops.tensor_array import ARRAY
from ..variable import Variable
from .helpers import LayerHelper
from .list_args import list_arg

_END = 2 ** 62   # a slice's "to the end"
_CURRENT: ContextVar[LayerOps | None] = ContextVar("layer_ops", default=None)


def current_group() -> LayerOps | None:
    """The composite layer recording now (`LayerOps.recording`), or None."""
    return _CURRENT.get()


class LayerOps:
    """Records ops whose outputs are temporaries of one layer."""

    def __init__(self, layer_type: str):
        self.helper = LayerHelper(layer_type)

    @contextmanager
    def recording(self) -> Iterator[None]:
        """While inside, helpers that ask `current_group` (the default states of a cell)
        record their ops under this layer too."""
        token = _CURRENT.set(self)
        try:
            yield
        finally:
            _CURRENT.reset(token)

    def op(self, op_type: str, inputs: dict[str, Any], attrs: dict | None = None
           ) -> Variable:
        return self.helper.append_one(op_type, inputs, attrs, final=False)

    def transpose(self, x: Variable, perm: Sequence[int]) -> Variable:
        return self.op("transpose", {"X": x}, {"axis": list(perm)})

    def swap_batch_time(self, x: Variable) -> Variable:
        """``[B, T, ...]`` <-> ``[T, B, ...]``."""
        return self.transpose(x, [1, 0] + list(range(2, len(x.shape))))

    def flip(self, x: Variable, dims: Sequence[int]) -> Variable:
        return self.op("flip", {"X": x}, {"dims": list(dims)})

    def last(self, x: Variable) -> Variable:
        """``x[-1]``: the last entry along the first dim."""
        end = self.op("slice", {"X": x}, {"axes": [0], "starts": [-1], "ends": [_END],
                                          "infer_flags": [1]})
        return self.op("squeeze", {"X": end}, {"axes": [0]})

    def where(self, cond: Variable, x: Variable, y: Variable) -> Variable:
        """``x`` where ``cond``, else ``y`` (``cond`` and ``y`` broadcast to ``x``)."""
        return self.op("where", {"Condition": cond, "X": x, "Y": y})

    def constant(self, shape: Sequence[int], dtype: str, value: float) -> Variable:
        out = self.op("fill_constant", {}, {"shape": list(shape), "dtype": dtype,
                                            "value": value})
        out.stop_gradient = True
        return out

    def copy(self, x: Variable) -> Variable:
        return self.op("assign", {"X": x})

    def not_all(self, flags: Variable) -> Variable:
        """Whether some flag of the bool ``flags`` is false: a bool [1]."""
        every = self.op("reduce_all", {"X": flags}, {"dim": [], "keep_dim": False,
                                                    "reduce_all": True})
        return self.op("logical_not", {"X": self.op("reshape", {"X": every},
                                                    {"shape": [1]})})

    def array(self, dtype: str) -> Variable:
        """An empty tensor array of ``dtype`` (its element shape set by its first write)."""
        name = self.helper.tmp()
        self.helper.trace.declare(VarDesc(name, (), dtype, kind=ARRAY, stop_gradient=False))
        self.helper.append("create_array", {}, {"dtype": dtype}, outputs={"Out": [name]})
        return Variable(self.helper.trace, name)

    def stacked(self, array: Variable) -> Variable:
        """The elements of ``array`` stacked along a new first dim."""
        return self.op("tensor_array_to_tensor", {"X": array}, {"axis": 0, "use_stack": True})

    def reshape_like(self, x: Variable, lead: list[int], like: Variable, start: int
                     ) -> Variable:
        """``x`` reshaped to ``lead + like.shape[start:]``; dims of ``like`` unknown while
        tracing are read from its shape when the method runs."""
        dims: list[Any] = list(like.shape[start:])
        if any(d < 0 for d in dims):
            whole = self.op("shape", {"Input": like})
            dims = [d if d >= 0 else self.op("slice", {"X": whole}, {
                "axes": [0], "starts": [start + i], "ends": [start + i + 1],
                "infer_flags": [1]}) for i, d in enumerate(dims)]
        arg = list_arg(lead + dims, "shape", "reshape", every_entry=True)
        return self.op("reshape", {"X": x, **arg.inputs("Shape", "ShapeTensor")},
                       {"shape": arg.values})

    def tile_beams(self, x: Variable, beam: int) -> Variable:
        """``[batch, ...]`` -> ``[batch, beam, ...]``, each row repeated ``beam`` times."""
        one = self.op("unsqueeze", {"X": x}, {"axes": [1]})
        return self.op("expand", {"X": one},
                       {"expand_times": [1, beam] + [1] * (len(x.shape) - 1)})

    def fill_like_batch(self, ref: Variable, shape: list[int], dtype: str, value: Any,
                        ref_dim: int = 0) -> Variable:
        """``shape`` filled with ``value``, its first dim (-1) the size of ``ref``'s dim
        ``ref_dim``."""
        out = self.op("fill_constant_batch_size_like", {"Input": ref},
                      {"shape": shape, "dtype": dtype, "value": value,
                       "input_dim_idx": ref_dim, "output_dim_idx": 0})
        out.stop_gradient = True
        return out
