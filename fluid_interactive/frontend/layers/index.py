"""Layers that index: pick the k largest entries, gather rows or elements by integer
indices, scatter updates into a copy, and find the coordinates of true elements.

Indices are int32 or int64 Variables. ``where``, ``nonzero``, ``unique`` and
``unique_with_counts`` give results whose size depends on the values (a dim shown as ``?``
while tracing); a compiled method sizes them, and the ops that follow, each time it runs.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ...errors import OpArgumentError
from ..tracing import error_at
from ..variable import Variable
from .helpers import LayerHelper, append_simple, as_variable
from .tensor import _dtype, _ints, fill_constant
from .tensor import slice as slice_layer

__all__ = ["topk", "gather", "gather_nd", "index_select", "index_sample", "where", "nonzero",
           "gather_tree", "scatter", "scatter_nd_add", "scatter_nd",
           "unique", "unique_with_counts", "multiplex"]


def check_int(value: Any, what: str, layer: str, minimum: int | None = None) -> int:
    """A Python int (a NumPy integer too; not a bool), at least ``minimum`` when given."""
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool):
        raise error_at(OpArgumentError, f"{layer}: {what} must be an int, got "
                                        f"{type(value).__name__} {value!r:.40}")
    if minimum is not None and value < minimum:
        raise error_at(OpArgumentError, f"{layer}: {what}={value} must be at least {minimum}")
    return int(value)


def check_bool(value: Any, what: str, layer: str) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise error_at(OpArgumentError, f"{layer}: {what} must be True or False, got "
                                        f"{value!r:.40}")
    return bool(value)


def _no_gradient(*outs: Variable) -> None:
    for v in outs:
        v.stop_gradient = True


def topk(input: Variable, k: int | Variable, name: str | None = None
         ) -> tuple[Variable, Variable]:
    """The ``k`` largest entries of each row along the last dim of ``input``, largest first,
    and their positions (int64): two Variables of shape ``input.shape[:-1] + [k]``.

    ``k`` may be an int or an int32/int64 Variable holding one value (the result's last
    dim is then known only when the method runs). As in Paddle, both results have
    ``stop_gradient=True``; set ``values.stop_gradient = False`` to pass a gradient back to
    the selected entries of ``input``.
    """
    x = as_variable(input, "topk: input")
    helper = LayerHelper("topk", name)
    if isinstance(k, Variable):
        inputs: dict[str, Any] = {"X": x, "K": k}
        attrs: dict[str, Any] = {}
    else:
        inputs, attrs = {"X": x}, {"k": check_int(k, "k", "topk", minimum=1)}
    outs = helper.append("top_k", inputs, attrs)
    values, indices = outs["Out"][0], outs["Indices"][0]
    _no_gradient(values, indices)
    return values, indices


def gather(input: Variable, index: Variable, overwrite: bool = True) -> Variable:
    """The rows of ``input`` (along its first dim) listed in ``index`` (int32/int64, shape
    ``[N]`` or ``[N, 1]``): shape ``[N] + input.shape[1:]``.

    ``overwrite`` decides the gradient of a row listed more than once: True (Paddle's
    default) keeps the gradient of its last occurrence, False adds them all up.
    """
    x = as_variable(input, "gather: input")
    idx = as_variable(index, "gather: index")
    return append_simple("gather", {"X": x, "Index": idx},
                         {"overwrite": check_bool(overwrite, "overwrite", "gather")})


def gather_nd(input: Variable, index: Variable, name: str | None = None) -> Variable:
    """Slices or elements of ``input`` addressed by the rows of ``index``
    (int32/int64, shape ``[..., k]`` with ``k <= rank(input)``): each row holds the
    coordinates of the first ``k`` dims. The result is ``index.shape[:-1] +
    input.shape[k:]``; e.g. ``gather_nd(x, fluid.layers.where(x > 0))`` gives the positive
    entries of ``x``."""
    x = as_variable(input, "gather_nd: input")
    idx = as_variable(index, "gather_nd: index")
    return append_simple("gather_nd", {"X": x, "Index": idx}, name=name)


def index_select(input: Variable, index: Variable, dim: int = 0) -> Variable:
    """``input`` re-indexed along ``dim`` by the int32/int64 vector ``index``: the result
    has ``len(index)`` entries along ``dim``. Repeated indices repeat slices, and their
    gradients add up."""
    x = as_variable(input, "index_select: input")
    idx = as_variable(index, "index_select: index")
    return append_simple("index_select", {"X": x, "Index": idx},
                         {"dim": check_int(dim, "dim", "index_select")})


def index_sample(x: Variable, index: Variable) -> Variable:
    """Per row, the entries of ``x`` [B, D] at the columns ``index`` [B, K] lists:
    ``out[b, j] = x[b, index[b, j]]`` (e.g. the scores of each row's top-k ids)."""
    xv = as_variable(x, "index_sample: x")
    idx = as_variable(index, "index_sample: index")
    return append_simple("index_sample", {"X": xv, "Index": idx})


def where(condition: Variable) -> Variable:
    """The coordinates of the true elements of ``condition``: an int64 Variable
    ``[N, rank(condition)]``, one row per true element in row-major order. N depends on
    the values (``?`` while tracing). No gradient flows through it."""
    cond = as_variable(condition, "where: condition")
    out = append_simple("where_index", {"Condition": cond}, layer="where")
    _no_gradient(out)
    return out


def nonzero(input: Variable, as_tuple: bool = False) -> Variable | tuple[Variable, ...]:
    """The coordinates of the non-zero elements of ``input``: an int64 Variable
    ``[N, rank(input)]`` (as `where`). With ``as_tuple`` a tuple of ``rank`` Variables
    ``[N, 1]``, one per dim of ``input``."""
    x = as_variable(input, "nonzero: input")
    as_tuple = check_bool(as_tuple, "as_tuple", "nonzero")
    out = append_simple("where_index", {"Condition": x}, layer="nonzero")
    _no_gradient(out)
    if not as_tuple:
        return out
    rank = len(x.shape)
    if rank == 1:
        return (out,)
    return tuple(slice_layer(out, axes=[1], starts=[i], ends=[i + 1]) for i in range(rank))


def gather_tree(ids: Variable, parents: Variable) -> Variable:
    """The full sequences a beam search kept, from the ids it chose at each step and the
    beam each step extended: ``ids`` and ``parents`` are int32/int64 ``[max_len, batch,
    beam]``; the result (same shape) holds, for each final beam, its ids from the first
    step to the last, traced back through ``parents``."""
    ids_v = as_variable(ids, "gather_tree: ids")
    parents_v = as_variable(parents, "gather_tree: parents")
    out = append_simple("gather_tree", {"Ids": ids_v, "Parents": parents_v})
    _no_gradient(out)
    return out


def scatter(input: Variable, index: Variable, updates: Variable, name: str | None = None,
            overwrite: bool = True) -> Variable:
    """A copy of ``input`` whose rows ``index`` (int32/int64 ``[N]``) are replaced by the
    rows of ``updates`` ``[N] + input.shape[1:]``.

    A row listed twice: with ``overwrite`` (the default) its last update wins; otherwise
    the row is zeroed and all its updates are added. Gradients: ``input``'s reaches the
    rows not replaced, each update's the row it landed in (none for an overwritten one).
    """
    x = as_variable(input, "scatter: input")
    idx = as_variable(index, "scatter: index")
    upd = as_variable(updates, "scatter: updates")
    return append_simple("scatter", {"X": x, "Ids": idx, "Updates": upd},
                         {"overwrite": check_bool(overwrite, "overwrite", "scatter")},
                         name=name)


def _same_dtype(ref: Variable, updates: Variable, layer: str) -> None:
    if ref.dtype != updates.dtype:
        raise error_at(OpArgumentError, f"{layer}: ref and updates must have the same dtype, "
                                        f"got {ref.dtype} and {updates.dtype}")


def scatter_nd_add(ref: Variable, index: Variable, updates: Variable,
                   name: str | None = None) -> Variable:
    """A copy of ``ref`` with ``updates`` added at the positions the rows of ``index``
    (int32/int64 ``[..., k]``, as in `gather_nd`) address; ``updates`` is
    ``index.shape[:-1] + ref.shape[k:]``, and updates to one position add up."""
    r = as_variable(ref, "scatter_nd_add: ref")
    idx = as_variable(index, "scatter_nd_add: index")
    upd = as_variable(updates, "scatter_nd_add: updates")
    _same_dtype(r, upd, "scatter_nd_add")
    return append_simple("scatter_nd_add", {"X": r, "Index": idx, "Updates": upd}, name=name)


def scatter_nd(index: Variable, updates: Variable, shape: Sequence[int],
               name: str | None = None) -> Variable:
    """`scatter_nd_add` into zeros of ``shape`` (a list of ints) and ``updates``' dtype."""
    upd = as_variable(updates, "scatter_nd: updates")
    zeros = fill_constant(_ints(shape, "shape", "scatter_nd"), upd.dtype, 0.0)
    return scatter_nd_add(zeros, index, upd, name)


def _unique(op_type: str, x: Variable, dtype: Any) -> list[Variable]:
    xv = as_variable(x, f"{op_type}: x")
    helper = LayerHelper(op_type)
    outs = helper.append(op_type, {"X": xv}, {"dtype": _dtype(dtype, op_type)})
    found = [v for slot in ("Out", "Index", "Count") for v in outs.get(slot, [])]
    _no_gradient(*found)
    return found


def unique(x: Variable, dtype: Any = "int32") -> tuple[Variable, Variable]:
    """The distinct values of the 1-D ``x`` in the order they first appear (their number
    is known only when the method runs), and for each element of ``x`` its position among
    them (``dtype`` int32 or int64): ``out[index]`` gives ``x`` back."""
    out, index = _unique("unique", x, dtype)
    return out, index


def unique_with_counts(x: Variable, dtype: Any = "int32"
                       ) -> tuple[Variable, Variable, Variable]:
    """`unique`'s ``(out, index)``, and ``count``: how often each value of ``out``
    appears in ``x`` (``dtype``)."""
    out, index, count = _unique("unique_with_counts", x, dtype)
    return out, index, count


def multiplex(inputs: Sequence[Variable], index: Variable) -> Variable:
    """Row by row, the row of the candidate ``index`` names: ``out[i] = inputs[index[i,
    0]][i]`` for two or more candidates of one shape ``[B, ...]`` and ``index`` int32/int64
    ``[B, 1]``. The gradient reaches only the rows chosen."""
    if not isinstance(inputs, (list, tuple)):
        raise error_at(OpArgumentError, f"multiplex: inputs must be a list of Variables, got "
                                        f"{type(inputs).__name__}")
    if len(inputs) < 2:
        raise error_at(OpArgumentError, f"multiplex: inputs must hold at least 2 Variables, "
                                        f"got {len(inputs)}")
    xs = [as_variable(v, f"multiplex: inputs[{i}]") for i, v in enumerate(inputs)]
    idx = as_variable(index, "multiplex: index")
    return append_simple("multiplex", {"X": xs, "Ids": idx})
