"""Control flow as sub-blocks (Paddle's op names and slots):

``while``
    runs its sub-block while the bool ``Condition`` ([1]) is true. ``X`` lists the vars of
    the blocks around that the body reads, ``Out`` those it writes: a var in both is
    carried from one iteration to the next and keeps its shape and dtype. The body must
    write the condition. ``StepScopes`` collects, per iteration, the values named by the
    ``keep`` attr (set by the backward pass: what the gradient reads, nothing more).
``conditional_block``
    runs its sub-block once if the bool ``Cond`` ([1]) is true; ``Input``/``Out``/``Scope``
    as ``X``/``Out``/``StepScopes`` of ``while``. A var of ``Out`` that the block does not
    run for keeps its value (or stays unset, when it had none: ``select_input`` then
    picks the branch that ran).
``while_grad`` / ``conditional_block_grad``
    replay a gradient block once per kept iteration, newest first. The gradient block
    updates, in place, the gradient of each var the forward body wrote (initialised from
    the gradient after the loop: zero iterations pass it through unchanged) and sums the
    gradient of each var the body only read.
``select_input``
    ``Out = X[Mask]``: the value of the branch of ``fluid.layers.cond`` that ran.

Reading a condition (or a mask) is the one host read of these ops: a loop reads its
condition once per iteration, plus once to start.
"""
from __future__ import annotations

from collections.abc import Callable

from ..errors import OpArgumentError
from ..ir.records import FLOAT_DTYPES
from ..ir.text import format_shape
from .loop_guard import LoopGuard
from .registry import register
from .spec import GradContext, InferContext, KernelContext, OpSpec, TensorType, grad_names, slots
from .sub_block import STEP_SCOPES, EmitContext, RunContext, SubBlockRule

#: How a bool mask becomes one condition value (whether any of it holds), with layers that
#: exist in every version of the project.
ANY_OF_MASK = "fluid.layers.reduce_sum(fluid.layers.cast(mask, 'int32')) > 0"


def _describe(t: TensorType) -> str:
    return f"{t.dtype}{format_shape(t.shape)}"


def check_condition(ctx: InferContext, slot: str, what: str) -> None:
    """A condition is a bool var of shape [1]."""
    c = ctx.input(slot)
    if c.dtype != "bool" or c.kind != "tensor" or len(c.shape) != 1 or c.shape[0] not in (1, -1):
        ctx.fail(f"the condition of {what} must be a bool var of shape [1], got "
                 f"{_describe(c)}; make it with a comparison of one-element vars, e.g. "
                 f"fluid.layers.less_than(i, n), or reduce a mask to one value, e.g. "
                 f"{ANY_OF_MASK}")


def compatible(a: TensorType, b: TensorType) -> bool:
    """Same dtype, kind and rank, and no known dim that differs; an array whose element
    shape is not known yet (``[]``) takes any."""
    if a.dtype != b.dtype or a.kind != b.kind:
        return False
    if a.kind == "tensor_array" and (not a.shape or not b.shape):
        return True
    return len(a.shape) == len(b.shape) and all(
        x < 0 or y < 0 or x == y for x, y in zip(a.shape, b.shape))


def _refines(old: TensorType, new: TensorType) -> bool:
    """``new`` knows more of the type than ``old`` (an array's element shape)."""
    return old != new and compatible(old, new) and (
        (old.kind == "tensor_array" and not old.shape and bool(new.shape))
        or sum(d < 0 for d in new.shape) < sum(d < 0 for d in old.shape))


def join(a: TensorType, b: TensorType) -> TensorType | None:
    """The type of a var holding a value of type ``a`` or of type ``b``: -1 where their
    dims differ; None where their dtypes, kinds or ranks differ."""
    if a.dtype != b.dtype or a.kind != b.kind or len(a.shape) != len(b.shape):
        return None
    return TensorType(tuple(d if d == e else -1 for d, e in zip(a.shape, b.shape)),
                      a.dtype, a.kind)


def _after_runs(before: TensorType, run: TensorType) -> TensorType | None:
    """The type of a carried var that had type ``before`` and a run wrote a value of type
    ``run`` into: ``run`` where it knows more (an array learning its element type), the
    join of the two otherwise (None: they differ in dtype or rank)."""
    if _refines(before, run):
        return run
    if compatible(run, before) and not run.shape:   # an array a run did not type
        return before
    return join(before, run)


def written_types(ctx: InferContext, reads: str, writes: str, what: str,
                  feeds: dict | None = None) -> list[TensorType]:
    """The types of the vars the sub-block writes after its runs. A var it also reads (a
    carried var) keeps its dtype and rank; its dims may change from run to run (-1 where
    they do: the body is typed again with the looser type until nothing changes), and an
    array learns its element type from the runs."""
    op = ctx.op
    assert op is not None
    before = dict(zip(op.input(reads), ctx.inputs(reads)))
    outs = op.output(writes)
    looser: dict[str, TensorType] = {}
    after = ctx.sub_block_types(feeds)
    for _ in range(len(outs) + 1):   # each pass only loosens: it ends
        changed = {}
        for name in outs:
            old, t = before.get(name), after(name)
            if old is None or old == t:
                continue
            new = _after_runs(old, t)
            if new is None:
                ctx.fail(f"{what} changes {name!r} from {_describe(old)} to {_describe(t)}; a "
                         f"var carried from one run to the next keeps its dtype and rank "
                         f"(write a value of the same dtype and rank, or use a new var)")
            if new != old:
                changed[name] = new
        if not changed:
            break
        before.update(changed)
        looser.update(changed)
        after = ctx.sub_block_types({**(feeds or {}), **looser})
    return [before[n] if n in before else after(n) for n in outs]


def _set_kept(ctx: InferContext, slot: str) -> None:
    if ctx.has_output(slot):
        ctx.set_output(slot, (), "float32", STEP_SCOPES)


# --- while ---------------------------------------------------------------------------------

def _while_infer(ctx: InferContext) -> None:
    check_condition(ctx, "Condition", "a While loop")
    cond = ctx.op.input("Condition")[0]   # type: ignore[union-attr]
    if cond not in ctx.op.output("Out"):   # type: ignore[union-attr]
        ctx.fail(f"the loop body never writes its condition {cond!r}, so it would run for "
                 f"ever or not at all; update it in the body, e.g. "
                 f"fluid.layers.less_than(x=i, y=n, cond={cond})")
    ctx.set_outputs("Out", written_types(ctx, "X", "Out", "the While loop"))
    _set_kept(ctx, "StepScopes")


def _while_emit(e: EmitContext) -> None:
    cond = e.local(e.op.input("Condition")[0])
    n = e.counter()
    kept = e.kept()
    guard = LoopGuard(e.op, "StepScopes", e.attrs["max_iterations"], kept is not None)
    e.line(f"{n} = 0")
    if guard.needed:   # max_iterations, and the size of the runs kept (loop_guard.py)
        watch = e.fresh("watch")
        e.line(f"{watch} = {e.bind(guard.watch, 'watch_loop')}()")
    e.line(f"while {cond}:")   # the condition read: one host read per iteration
    if guard.needed:
        e.line(f"    if {n} == {watch}.next: {watch}({n}, {kept})")
    e.run_body(count=n)


def _while_interpret(r: RunContext) -> None:
    cond = r.op.input("Condition")[0]
    guard = LoopGuard(r.op, "StepScopes", r.attrs.get("max_iterations", 0), False)
    runs = 0
    while bool(r.value(cond)):
        if guard.max_iterations and runs == guard.max_iterations:
            raise guard.stop(runs)
        r.run_body()
        runs += 1


def check_keep(g: GradContext, what: str) -> None:
    if g.attrs.get("is_test"):
        raise OpArgumentError(f"{what} was made with is_test=True, so it keeps nothing for a "
                              f"gradient; make it with is_test=False to differentiate "
                              f"through it")


def _is_float(g: GradContext, name: str) -> bool:
    t = g.var_type(name)
    return t.dtype in FLOAT_DTYPES and t.kind in ("tensor", "tensor_array")


def block_grad_maker(grad_type: str, reads: str, writes: str, keeps: str, what: str
                     ) -> Callable[[GradContext], None]:
    """The gradient of an op that runs its sub-block zero or more times in place (``while``,
    ``conditional_block``): see the module docstring."""
    def grad(g: GradContext) -> None:
        outs, xs = g.output(writes), g.input(reads)
        out_grads = dict(zip(outs, g.out_grad(writes)))
        if not any(out_grads.values()):
            return
        check_keep(g, what)
        in_grads = dict(zip(xs, g.in_grad(reads)))
        carried: dict[str, str] = {n: in_grads.get(n) or g.tmp(n) for n in outs
                                   if _is_float(g, n)}
        for n, name in carried.items():   # zero runs pass the gradient through
            src = out_grads.get(n)
            if src:
                g.emit("assign", {"X": [src]}, {"Out": [name]})
            else:
                g.emit("fill_zeros_like", {"X": [n]}, {"Out": [name]})
        summed: dict[str, str] = {n: g_name for n in xs if n not in carried and _is_float(g, n)
                                  and (g_name := in_grads.get(n)) is not None}
        for n, acc in summed.items():
            g.emit("fill_zeros_like", {"X": [n]}, {"Out": [acc]})
        sub = g.differentiate(carried, list(carried) + list(summed))
        for n, name in carried.items():   # the gradient flowing to the run before
            got = sub.grad(n)
            if got:
                sub.emit("assign", {"X": [got]}, {"Out": [name]})
            else:
                sub.emit("fill_zeros_like", {"X": [name]}, {"Out": [name]})
        for n, acc in summed.items():   # the sum over the runs
            got = sub.grad(n)
            if got and g.var_type(n).kind == "tensor_array":
                sub.emit("sum", {"X": [acc, got]}, {"Out": [acc]})
            elif got:
                sub.emit("elementwise_add", {"X": [acc], "Y": [got]}, {"Out": [acc]})
        body_reads, body_writes = sub.finish()
        g.emit(grad_type, {"X": body_reads, "StepScopes": g.output(keeps)},
               {"Out": body_writes}, {"sub_block": sub.block})
    return grad


_LOOP_ATTRS = {"sub_block": -1, "is_test": False, "keep": [], "keep_shapes": [],
               "max_iterations": 0}

register(OpSpec(
    "while", slots("X*?", "Condition"), slots("Out*?", "StepScopes?"), _while_infer,
    attrs=_LOOP_ATTRS, aliases=True,
    grad=block_grad_maker("while_grad", "X", "Out", "StepScopes", "the While loop"),
    sub_block=SubBlockRule("X", "Out", _while_emit, _while_interpret, keeps="StepScopes"),
    doc="run the sub-block while Condition is true; Out are the vars it writes"))


# --- replaying kept runs: the gradients -------------------------------------------------------

def _replay_infer(ctx: InferContext) -> None:
    ctx.set_outputs("Out", written_types(ctx, "X", "Out", "the gradient block"))


def _replay_emit(e: EmitContext) -> None:
    kept_runs = e.local(e.op.input("StepScopes")[0])
    n, kept = e.counter(), e.fresh("kept")
    e.line(f"{n} = len({kept_runs})")
    e.line(f"for {kept} in reversed({kept_runs}):")
    e.line(f"    {n} -= 1")
    e.run_body(feeds=e.replayed(kept))


def _replay_interpret(r: RunContext) -> None:
    for kept in reversed(r.value(r.op.input("StepScopes")[0])):
        r.run_body(r.replayed(kept))


for _type in ("while_grad", "conditional_block_grad"):
    register(OpSpec(
        _type, slots("X*?", "StepScopes"), slots("Out*?"), _replay_infer,
        attrs={"sub_block": -1}, aliases=True,
        sub_block=SubBlockRule("X", "Out", _replay_emit, _replay_interpret,
                               replays="StepScopes"),
        doc="replay the gradient block once per kept run of the forward op, newest first"))


# --- conditional_block -------------------------------------------------------------------------

def _cond_infer(ctx: InferContext) -> None:
    if not ctx.attrs["is_scalar_condition"]:
        ctx.fail("only is_scalar_condition=True is supported: Cond is one bool value")
    check_condition(ctx, "Cond", "a conditional block")
    ctx.set_outputs("Out", written_types(ctx, "Input", "Out", "the conditional block"))
    _set_kept(ctx, "Scope")


def _cond_emit(e: EmitContext) -> None:
    cond = e.local(e.op.input("Cond")[0])
    e.line(f"if {cond}:")   # the condition read
    e.run_body()


def _cond_interpret(r: RunContext) -> None:
    if bool(r.value(r.op.input("Cond")[0])):
        r.run_body()


register(OpSpec(
    "conditional_block", slots("Cond", "Input*?"), slots("Out*?", "Scope?"), _cond_infer,
    attrs={"sub_block": -1, "is_scalar_condition": True, "is_test": False, "keep": [],
           "keep_shapes": []},
    aliases=True,
    grad=block_grad_maker("conditional_block_grad", "Input", "Out", "Scope",
                          "the conditional block"),
    sub_block=SubBlockRule("Input", "Out", _cond_emit, _cond_interpret, keeps="Scope"),
    doc="run the sub-block once if Cond is true; Out are the vars it writes"))


# --- select_input -----------------------------------------------------------------------------

def _select_infer(ctx: InferContext) -> None:
    xs = ctx.inputs("X")
    mask = ctx.input("Mask")
    if mask.dtype not in ("int32", "int64") or len(mask.shape) != 1 or mask.shape[0] not in (1, -1):
        ctx.fail_dtype(f"Mask must be an int32 var of shape [1], got {_describe(mask)}")
    shape = list(xs[0].shape)
    for i, t in enumerate(xs[1:], 1):
        if t.kind != xs[0].kind:
            ctx.fail(f"the branches give a {xs[0].kind} and a {t.kind} (input {i}); return "
                     f"values of one kind from both branches of cond")
        # dims that differ are unknown until the method runs, every dim where the ranks
        # differ (the declared rank is then X[0]'s, as Paddle declares it)
        shape = ([d if d == e else -1 for d, e in zip(shape, t.shape)]
                 if len(t.shape) == len(shape) else [-1] * len(shape))
    # as Paddle declares it: X[0]'s dtype (cond's false branch); a value of another dtype
    # is cast to it
    ctx.set_output("Out", shape, xs[0].dtype, xs[0].kind)


def _select_kernel(ctx: KernelContext):
    n = len(ctx.inputs("X"))
    dtype = ctx.output("Out").dtype

    def select(*args):
        chosen = args[int(args[n].item())]   # reads the mask: which branch ran
        # (a tensor array has no dtype of its own: it is handed on as it is)
        return chosen if getattr(chosen, "dtype", dtype) == dtype else chosen.astype(dtype)
    return select


def _select_grad(g: GradContext) -> None:
    dout = g.out_grad("Out")
    if dout and dout[0] is not None and g.wants("X"):
        names = [n or g.tmp("X_unused") for n in g.in_grad("X")]
        g.emit("select_input_grad", {"X": g.input("X"), "Mask": g.input("Mask"),
                                     "Out@GRAD": grad_names(dout)}, {"X@GRAD": names})


def _select_grad_infer(ctx: InferContext) -> None:
    ctx.set_outputs("X@GRAD", ctx.inputs("X")[:ctx.output_count("X@GRAD")])


def _select_grad_kernel(ctx: KernelContext):
    xp = ctx.xp
    zeros = [xp.zeros(t.shape, t.dtype) for t in ctx.out_slots["X@GRAD"]]

    def grad(*args):
        chosen, dout = int(args[-2].item()), args[-1]
        return tuple(dout.astype(z.dtype, copy=False) if k == chosen else z
                     for k, z in enumerate(zeros))
    return (lambda *args: grad(*args)[0]) if len(zeros) == 1 else grad


register(OpSpec("select_input", slots("X*", "Mask"), slots("Out"), _select_infer,
                _select_kernel, _select_grad, aliases=True, host_access="reads",
                doc="Out = X[Mask]: the value of the branch that ran"))
register(OpSpec("select_input_grad", slots("X*", "Mask", "Out@GRAD"), slots("X@GRAD*"),
                _select_grad_infer, _select_grad_kernel, aliases=True, host_access="reads",
                shape_only=("X",), doc="X@GRAD[Mask] = Out@GRAD, zeros elsewhere"))
