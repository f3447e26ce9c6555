"""More of Paddle 1.8's control flow: `case`, `switch_case` (chains of `cond`), `IfElse`
(rows of a batch routed by a mask), `is_empty` and `Print`.

``case`` and ``switch_case`` run the first branch whose condition holds, as nested
``cond`` blocks: only that branch runs, and gradients flow through it. ``IfElse`` splits
the batch's rows by a bool mask ``[N, 1]``: the true block computes on the rows where the
mask holds, the false block on the others, and ``ie()`` puts each output's rows back in
the batch's order::

    ie = fluid.layers.IfElse(fluid.layers.less_than(x_sum, limit))    # [N, 1] bool
    with ie.true_block():
        ie.output(fluid.layers.fc(ie.input(x), size=4))
    with ie.false_block():
        ie.output(fluid.layers.scale(ie.input(x)[:, :4], -1.0))
    out, = ie()                                                       # [N, 4]
"""
from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from typing import Any

from ...errors import DTypeError, OpArgumentError, ProgramDefinitionError, ShapeError
from ...ir.text import short_type
from ..tracing import error_at
from ..variable import Variable
from .control_flow import cond, condition
from .helpers import LayerHelper, as_variable
from .tensor import fill_constant

__all__ = ["IfElse", "case", "switch_case", "is_empty", "Print"]


def _chain(pairs: list[tuple[Variable, Callable[[], Any]]], default: Callable[[], Any],
           name: str | None) -> Any:
    """cond(p1, f1, cond(p2, f2, ... default)): the first pair whose condition holds."""
    false_fn = default
    for pred, true_fn in reversed(pairs):
        false_fn = partial(cond, pred, true_fn, false_fn, name)
    return false_fn()


def case(pred_fn_pairs: Sequence[tuple[Variable, Callable[[], Any]]],
         default: Callable[[], Any] | None = None, name: str | None = None) -> Any:
    """The result of the first ``fn`` of ``pred_fn_pairs`` (pairs of a bool var [1] and a
    function) whose condition is true, else of ``default`` (without one, the last pair's
    function is the default). Every function returns the same structure of vars."""
    if not isinstance(pred_fn_pairs, (list, tuple)) or not pred_fn_pairs:
        raise error_at(OpArgumentError, "case: pred_fn_pairs must be a non-empty list of "
                                        "(pred, fn) tuples")
    pairs = []
    for pair in pred_fn_pairs:
        if not isinstance(pair, tuple) or len(pair) != 2 or not callable(pair[1]):
            raise error_at(OpArgumentError, f"case: each element of pred_fn_pairs must be a "
                                            f"(bool var, function) tuple, got {pair!r:.60}")
        pairs.append((condition(pair[0], "case: a pred"), pair[1]))
    if default is None:
        default = pairs.pop()[1]
    elif not callable(default):
        raise error_at(OpArgumentError, "case: default must be a function (or None)")
    return _chain(pairs, default, name)


def _branch_pairs(branch_fns: Any) -> list[tuple[int, Callable[[], Any]]]:
    """(index, fn) pairs from a dict, a list of pairs or a list of functions."""
    items = list(branch_fns.items()) if isinstance(branch_fns, dict) else branch_fns
    if not isinstance(items, (list, tuple)) or not items:
        raise error_at(OpArgumentError, "switch_case: branch_fns must be a non-empty dict, "
                                        "list of (int, fn) tuples or list of functions")
    if all(callable(fn) for fn in items):
        items = list(enumerate(items))
    seen: set[int] = set()
    for pair in items:
        if not isinstance(pair, tuple) or len(pair) != 2 or isinstance(pair[0], bool) or \
                not isinstance(pair[0], int) or not callable(pair[1]):
            raise error_at(OpArgumentError, f"switch_case: each branch must be an (int, "
                                            f"function) tuple, got {pair!r:.60}")
        if pair[0] in seen:
            raise error_at(OpArgumentError, f"switch_case: the index {pair[0]} appears more "
                                            f"than once in branch_fns")
        seen.add(pair[0])
    return sorted(items, key=lambda p: p[0])


def switch_case(branch_index: Variable, branch_fns: Any,
                default: Callable[[], Any] | None = None, name: str | None = None) -> Any:
    """The result of the branch whose index equals ``branch_index`` (an int var [1]), else
    of ``default`` (without one, the branch of the largest index). ``branch_fns``: a dict
    or list of (index, function) pairs, or a list of functions (indexed 0, 1, ...)."""
    index = as_variable(branch_index, "switch_case: branch_index")
    if not index.dtype.startswith(("int", "uint")):
        raise error_at(DTypeError, f"switch_case: branch_index must be an int var of shape "
                                   f"[1], got {index.name}:{short_type(index.desc)}")
    pairs = _branch_pairs(branch_fns)
    if default is None:
        default = pairs.pop()[1]
    elif not callable(default):
        raise error_at(OpArgumentError, "switch_case: default must be a function (or None)")
    from .compare import equal
    preds = [(equal(index, fill_constant([1], index.dtype, k)), fn) for k, fn in pairs]
    return _chain(preds, default, name)


def is_empty(x: Variable, cond: Variable | None = None) -> Variable:
    """A bool var [1]: whether ``x`` has no elements (a dim of 0). With ``cond`` the result
    is written into that bool var (a loop's condition)."""
    helper = LayerHelper("is_empty")
    x = as_variable(x, "is_empty: x")
    if cond is None:
        out = helper.append_one("is_empty", {"X": x})
    else:
        out = as_variable(cond, "is_empty: cond")
        if out.dtype != "bool":
            raise error_at(DTypeError, f"is_empty: cond must be a bool var, got "
                                       f"{out.name}:{short_type(out.desc)}")
        if helper.trace.block.name and helper.trace.has_value(out.name):
            raise error_at(OpArgumentError, f"is_empty: cond={out.name!r} already holds a "
                                            f"value; cond= updates a loop's condition inside "
                                            f"its body. Here, leave out cond=")
        helper.append("is_empty", {"X": x}, outputs={"Out": [out.name]})
    out.stop_gradient = True
    return out


def Print(input: Variable, first_n: int = -1, message: str | None = None,
          summarize: int = 20, print_tensor_name: bool = True,
          print_tensor_type: bool = True, print_tensor_shape: bool = True,
          print_tensor_lod: bool = True, print_phase: str = "both") -> Variable:
    """``input`` itself, printed to stdout each time the compiled method runs this point
    (in a loop, every iteration): ``message``, the var's name, lod, shape, dtype and its
    first ``summarize`` values (-1: all), at most ``first_n`` times (-1: always). The
    returned var's gradient is printed in the backward pass as well (``print_phase``:
    'forward', 'backward' or 'both'). A plan never drops a Print, even when nothing reads
    what it returns."""
    x = as_variable(input, "Print: input")
    if not isinstance(print_phase, str) or print_phase.lower() not in ("forward", "backward",
                                                                       "both"):
        raise error_at(OpArgumentError, f"Print: print_phase must be 'forward', 'backward' or "
                                        f"'both', got {print_phase!r}")
    for what, value in (("first_n", first_n), ("summarize", summarize)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise error_at(OpArgumentError, f"Print: {what} must be an int, got {value!r}")
    helper = LayerHelper("print")
    return helper.append_one("print", {"In": x}, {
        "first_n": first_n, "message": message or "", "summarize": summarize,
        "print_tensor_name": bool(print_tensor_name),
        "print_tensor_type": bool(print_tensor_type),
        "print_tensor_shape": bool(print_tensor_shape),
        "print_tensor_lod": bool(print_tensor_lod), "print_phase": print_phase.upper()})


class IfElse:
    """Rows of a batch routed by a bool mask ``cond`` ``[N, 1]``: see the module docstring.

    ``input(x)`` inside a block gives the rows of ``x`` ``[N, ...]`` on that block's side;
    ``output(*vars)`` names what the block gives (one row per row it received; each block
    gives as many outputs); ``ie()`` after both blocks returns the list of outputs with
    the rows merged back in order. Both sides run on every call, each on its own rows
    (possibly none), as ordinary ops: gradients reach the rows each side used.
    """

    def __init__(self, cond: Variable, name: str | None = None):
        self._helper = LayerHelper("ifelse", name)
        self.cond = as_variable(cond, "IfElse: cond")
        if self.cond.dtype != "bool" or len(self.cond.shape) not in (1, 2) or (
                len(self.cond.shape) == 2 and self.cond.shape[1] not in (1, -1)):
            raise error_at(ShapeError, f"IfElse: cond must be a bool mask [N, 1] with one value "
                                       f"per row, got {self.cond.name}:"
                                       f"{short_type(self.cond.desc)}")
        self._side: bool | None = None
        self._split: dict[str, tuple[Variable, Variable]] = {}
        self._outs: dict[bool, list[Variable]] = {True: [], False: []}

    @contextmanager
    def _block(self, side: bool) -> Iterator[None]:
        if self._side is not None:
            raise error_at(ProgramDefinitionError, "IfElse: a block inside another block; "
                                                   "close the true_block before false_block")
        self._side = side
        try:
            yield
        finally:
            self._side = None

    def true_block(self) -> Any:
        """The block computing on the rows where ``cond`` is true."""
        return self._block(True)

    def false_block(self) -> Any:
        """The block computing on the rows where ``cond`` is false."""
        return self._block(False)

    def _inside(self, what: str) -> bool:
        if self._side is None:
            raise error_at(ProgramDefinitionError, f"IfElse.{what} belongs inside "
                                                   f"'with ie.true_block():' or false_block()")
        return self._side

    def input(self, x: Variable) -> Variable:
        """The rows of ``x`` on this block's side."""
        side = self._inside("input")
        x = as_variable(x, "IfElse.input")
        if x.name not in self._split:
            outs = self._helper.append("split_lod_tensor", {"X": x, "Mask": self.cond},
                                       {"level": 0}, final=False)
            self._split[x.name] = (outs["OutTrue"][0], outs["OutFalse"][0])
        return self._split[x.name][0 if side else 1]

    def output(self, *outs: Variable) -> None:
        """What this block gives, one var per output of the IfElse."""
        side = self._inside("output")
        self._outs[side].extend(as_variable(o, "IfElse.output") for o in outs)

    def __call__(self) -> list[Variable]:
        if self._side is not None:
            raise error_at(ProgramDefinitionError, "IfElse: call ie() after its blocks")
        t, f = self._outs[True], self._outs[False]
        if not t and not f:
            raise error_at(ProgramDefinitionError, "IfElse: no block gave an output; call "
                                                   "ie.output(...) in true_block/false_block")
        if not t or not f:
            return list(t or f)
        if len(t) != len(f):
            raise error_at(OpArgumentError, f"IfElse: the true block gives {len(t)} outputs "
                                            f"and the false block {len(f)}; give as many")
        return [self._helper.append_one("merge_lod_tensor", {
            "X": self.cond, "Mask": self.cond, "InTrue": a, "InFalse": b}, {"level": 0})
            for a, b in zip(t, f)]
