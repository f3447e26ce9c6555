"""Control flow as sub-blocks: `While`, `while_loop`, `cond`, `Switch` and `increment`.

A loop or a branch is never unrolled: its body is traced once into a sub-block of the
method's block, and one op (``while``, ``conditional_block``) runs it. The body reads the
vars of the method around it and updates them with ``fluid.layers.assign(value,
output=var)``, ``increment(i, in_place=True)`` or a comparison's ``cond=``: such a var is
carried from one iteration to the next and keeps its shape. The generated code of the
method is a real Python ``while``/``if`` calling the body's own generated function::

    i = fluid.layers.fill_constant(shape=[1], dtype='int64', value=0)
    cond = fluid.layers.less_than(x=i, y=n)
    loop = fluid.layers.While(cond=cond)
    with loop.block():
        fluid.layers.assign(fluid.layers.tanh(fluid.layers.matmul(h, w) + x), output=h)
        fluid.layers.increment(x=i, value=1, in_place=True)
        fluid.layers.less_than(x=i, y=n, cond=cond)

Gradients flow through all of it (`fluid.optimizer`, `fluid.gradients`); see
docs/control_flow.md for what a loop keeps for its gradient.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from ...errors import DTypeError, OpArgumentError, ProgramDefinitionError
from ...ir.blocks import outer_interface
from ...ir.records import BlockDesc, SourceLoc, VarDesc
from ...ir.source import user_location
from ...ir.text import short_type
from ...ops.control import ANY_OF_MASK, join
from ...ops.loop_guard import check_max_iterations
from ...ops.spec import var_type
from ...ops.sub_block import STEP_SCOPES
from ..tracing import TraceContext, error_at
from ..variable import Variable
from .helpers import LayerHelper, as_variable
from .structure import flatten, pack

__all__ = ["While", "while_loop", "cond", "Switch", "increment"]


def condition(value: Any, what: str) -> Variable:
    """``value`` as a condition: a bool Variable of shape [1]."""
    var = as_variable(value, what)
    if var.dtype != "bool":
        raise error_at(DTypeError, f"{what} must be a bool var of shape [1], got "
                                   f"{var.name}:{short_type(var.desc)}; compare to get one, "
                                   f"e.g. fluid.layers.less_than(x=i, y=n)")
    if tuple(var.shape) not in ((1,), (-1,)):   # a TypeError too, as in Paddle
        raise error_at(OpArgumentError, f"{what} must hold one value (shape [1]), got "
                                   f"{var.name}:{short_type(var.desc)}; reduce a mask to one "
                                   f"value first, e.g. {ANY_OF_MASK} (any of it)")
    return var


def record_owner(helper: LayerHelper, op_type: str, body: BlockDesc,
                 slots: tuple[str, str, str], inputs: dict[str, list[str]],
                 attrs: dict[str, Any], loc: SourceLoc | None) -> None:
    """Append the op running ``body`` to the block around it. ``slots`` names its reads,
    writes and kept-values slots: it reads what the body reads of the blocks around and
    what the body writes that already has a value (a run that does not happen leaves that
    value), and writes what the body writes."""
    trace = helper.trace
    reads, writes = outer_interface(trace.program, body)
    reads += [n for n in writes if n not in reads and trace.has_value(n)]
    kept = trace.unique_in_block(f"{helper.name}.step_scopes")
    trace.declare(VarDesc(kept, (), "float32", kind=STEP_SCOPES, stop_gradient=True))
    trace.append_op(op_type, {**inputs, slots[0]: reads},
                    {slots[1]: writes, slots[2]: [kept]}, {**attrs, "sub_block": body.idx},
                    loc=loc)


class While:
    """A loop: ``with loop.block():`` traces its body once; the body runs while the bool
    var ``cond`` (shape [1]) is true, and must update it (``less_than(..., cond=cond)``).

    ``is_test=True`` keeps nothing for a gradient (inference). ``max_iterations=N``
    stops a call whose loop would start iteration N+1 with a `fluid.LoopLimitError`
    naming the loop (docs/control_flow.md, "A loop that does not end")."""

    def __init__(self, cond: Variable, is_test: bool = False, name: str | None = None,
                 max_iterations: int | None = None):
        self._helper = LayerHelper("while", name)
        self.cond = condition(cond, "While: cond")
        self.is_test = bool(is_test)
        try:
            self.max_iterations = check_max_iterations(max_iterations, "While")
        except OpArgumentError as e:
            raise error_at(OpArgumentError, str(e)) from None
        self._loc = user_location()
        self._used = False

    @contextmanager
    def block(self) -> Iterator[None]:
        if self._used:
            raise error_at(ProgramDefinitionError, "a While has one body; make another "
                                                   "fluid.layers.While for another loop")
        self._used = True
        trace = self._helper.trace
        with trace.sub_block() as body:
            yield
        if self.cond.name not in outer_interface(trace.program, body)[1]:
            raise error_at(ProgramDefinitionError,
                           f"the While body never updates its condition {self.cond.name!r}, "
                           f"so the loop would run for ever (or not at all); end the body "
                           f"with e.g. fluid.layers.less_than(x=i, y=n, cond=cond)")
        attrs: dict[str, Any] = {"is_test": self.is_test}
        if self.max_iterations:   # only when given: the text of other loops stays as it was
            attrs["max_iterations"] = self.max_iterations
        record_owner(self._helper, "while", body, ("X", "Out", "StepScopes"),
                     {"Condition": [self.cond.name]}, attrs, self._loc)


def while_loop(cond: Callable[..., Variable], body: Callable[..., Any],
               loop_vars: Sequence[Any], is_test: bool = False,
               name: str | None = None, max_iterations: int | None = None) -> list[Any]:
    """The functional loop: while ``cond(*loop_vars)`` is true, ``loop_vars =
    body(*loop_vars)``. A loop var is a Variable or a tuple, list or dict of them (nested);
    ``body`` returns the same structure. Returns the loop vars after the loop (the same
    vars, updated, in new containers). ``max_iterations``: as `While`'s."""
    if not callable(cond) or not callable(body):
        raise error_at(OpArgumentError, "while_loop: cond and body must be functions of the "
                                        "loop vars")
    if not isinstance(loop_vars, (list, tuple)):
        raise error_at(OpArgumentError, f"while_loop: loop_vars must be a list or tuple of "
                                        f"loop vars, got {type(loop_vars).__name__}")
    if not loop_vars:
        raise error_at(OpArgumentError, "while_loop: loop_vars is empty; give at least one "
                                        "loop var")
    structure, variables = flatten(list(loop_vars), "while_loop: a loop var")
    pre = condition(cond(*loop_vars), "while_loop: what cond returns")
    loop = While(pre, is_test, name, max_iterations)
    with loop.block():
        # the body gets containers of its own: changing them changes nothing outside
        outs = body(*pack(structure, variables))
        outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
        if len(outs) != len(loop_vars):
            raise error_at(OpArgumentError, f"while_loop: body returns {len(outs)} value(s) "
                                            f"for {len(loop_vars)} loop var(s)")
        got, new_values = flatten(outs, "while_loop: what body returns")
        if got != structure:
            raise error_at(OpArgumentError, "while_loop: body must return the loop vars' "
                                            "structure (the same lists, tuples and dict keys, "
                                            "one var for each var)")
        now = condition(cond(*outs), "while_loop: what cond returns")
        for new, var in zip(new_values, variables):
            _update(new, var)
        _update(now, pre)
    return pack(structure, variables)


def _update(value: Variable, var: Variable) -> None:
    """``var = value`` at the end of a loop's body: a value of other dims makes them -1 in
    the var's type (a body may reshape a loop var); its dtype and rank stay."""
    from .tensor import assign
    if value.name == var.name:
        return
    joined = join(var_type(var.desc), var_type(value.desc))
    if joined is None:
        raise error_at(OpArgumentError, f"while_loop: body returns {value.name}:"
                                        f"{short_type(value.desc)} for the loop var "
                                        f"{var.name}:{short_type(var.desc)}; a loop var keeps "
                                        f"its dtype and rank")
    var.desc.shape = joined.shape
    assign(value, output=var)


def increment(x: Variable, value: float = 1.0, in_place: bool = True) -> Variable:
    """``x + value`` for a one-element ``x`` (a loop counter); with ``in_place`` the result
    is written into ``x`` itself."""
    helper = LayerHelper("increment")
    x = as_variable(x, "increment: x")
    out = x.name if in_place else helper.out_name()
    helper.append("increment", {"X": x}, {"step": float(value)}, outputs={"Out": [out]})
    return x if in_place else Variable(helper.trace, out)


class _ConditionalBlock:
    """One ``conditional_block`` op: its body runs once when ``cond`` is true."""

    def __init__(self, cond: Variable, helper: LayerHelper):
        self.cond, self.helper = cond, helper
        self.loc = user_location()

    @contextmanager
    def block(self) -> Iterator[BlockDesc]:
        trace = self.helper.trace
        with trace.sub_block() as body:
            yield body
        record_owner(self.helper, "conditional_block", body, ("Input", "Out", "Scope"),
                     {"Cond": [self.cond.name]}, {"is_scalar_condition": True}, self.loc)


def _logical(op_type: str, helper: LayerHelper, *xs: Variable) -> Variable:
    inputs = {"X": xs[0]} if len(xs) == 1 else {"X": xs[0], "Y": xs[1]}
    out = helper.append_one(op_type, inputs, {} if len(xs) == 1 else {"axis": -1},
                            final=False)
    out.stop_gradient = True
    return out


def _branch(helper: LayerHelper, pred: Variable, fn: Callable[[], Any], what: str
            ) -> tuple[Any, list[Variable]] | None:
    """Run ``fn`` in a conditional block of ``pred``; its values are copied into vars
    declared around the block. Returns (structure, those vars), or None."""
    from .tensor import assign
    trace: TraceContext = helper.trace
    parent = trace.block
    with _ConditionalBlock(pred, helper).block():
        result = fn()
        if result is None:
            return None
        structure, values = flatten(result, f"cond: what {what} returns")
        outs = []
        for k, value in enumerate(values):
            name = trace.unique_in_block(f"{helper.name}.{what}_{k}")
            trace.declare(VarDesc(name, value.shape, value.dtype), block=parent)
            outs.append(assign(value, output=Variable(trace, name)))
    return structure, outs


def cond(pred: Variable, true_fn: Callable[[], Any] | None = None,
         false_fn: Callable[[], Any] | None = None, name: str | None = None) -> Any:
    """``true_fn()`` if the bool var ``pred`` ([1]) is true, else ``false_fn()``: each runs
    in its own block, only the taken one runs. Both return the same structure (a var, a
    tuple, list or dict of vars, or None). Where the two vars of a place differ in their
    dims, the result has -1 there (known when the method runs); where they differ in
    dtype, it has the false branch's, to which the true branch's value is cast."""
    pred = condition(pred, "cond: pred")
    for what, fn in (("true_fn", true_fn), ("false_fn", false_fn)):
        if fn is not None and not callable(fn):
            raise error_at(OpArgumentError, f"cond: {what} must be a function of no arguments "
                                            f"(or None), got {type(fn).__name__}")
    if name is not None and not isinstance(name, str):
        raise error_at(OpArgumentError, f"cond: name must be a str or None, got "
                                        f"{type(name).__name__}")
    helper = LayerHelper("cond", name)
    taken = _branch(helper, pred, true_fn, "true") if true_fn is not None else None
    other = (_branch(helper, _logical("logical_not", helper, pred), false_fn, "false")
             if false_fn is not None else None)
    if taken is None and other is None:
        return None
    if taken is None or other is None or taken[0] != other[0]:
        raise error_at(OpArgumentError, f"Incompatible return values of true_fn and false_fn "
                                        f"in cond: true_fn returns {_returned(taken)}, "
                                        f"false_fn {_returned(other)}; both must return the "
                                        f"same structure of vars (or both None)")
    mask = helper.append_one("cast", {"X": pred}, {"out_dtype": "int32"}, final=False)
    merged = [helper.append_one("select_input", {"X": [f, t], "Mask": mask})
              for t, f in zip(taken[1], other[1])]
    return pack(taken[0], merged)


def _returned(branch: tuple[Any, list[Variable]] | None) -> str:
    if branch is None:
        return "None"
    structure, values = branch
    return f"{len(values)} var(s)" if structure is not None else "one var"


class Switch:
    """Cases tried in order; the first whose bool condition is true runs, else the
    default::

        with fluid.layers.Switch() as switch:
            with switch.case(step < warmup):
                fluid.layers.assign(warm_lr, output=lr)
            with switch.default():
                fluid.layers.assign(base_lr, output=lr)
    """

    def __init__(self, name: str | None = None):
        self._helper = LayerHelper("switch", name)
        self._matched: Variable | None = None   # whether an earlier case was true
        self._done = False

    def __enter__(self) -> Switch:
        return self

    def __exit__(self, *exc: object) -> None:
        self._done = True

    @contextmanager
    def case(self, condition_var: Variable) -> Iterator[None]:
        """The body runs when ``condition_var`` is true and no earlier case was."""
        if self._done:
            raise error_at(ProgramDefinitionError, "Switch: a case after default(); the "
                                                   "default comes last")
        c = condition(condition_var, "Switch.case: the condition")
        run = c if self._matched is None else _logical(
            "logical_and", self._helper, _logical("logical_not", self._helper, self._matched), c)
        self._matched = c if self._matched is None else _logical(
            "logical_or", self._helper, self._matched, c)
        with _ConditionalBlock(run, self._helper).block():
            yield

    @contextmanager
    def default(self) -> Iterator[None]:
        """The body runs when no case was true."""
        if self._matched is None:
            raise error_at(ProgramDefinitionError, "Switch: default() before any case()")
        run = _logical("logical_not", self._helper, self._matched)
        self._done = True
        with _ConditionalBlock(run, self._helper).block():
            yield
