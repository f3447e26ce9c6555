"""``recurrent``: run a step block once per time step (what ``fluid.layers.StaticRNN``
records), and ``recurrent_grad``.

The step block takes, per step ``t``, the slices ``x[t]`` of the time-major ``Inputs``
(``[T, B, ...]``; its feeds named by ``step_inputs``) and the memories (``ex_states``:
the ``InitialStates`` at step 0, then what the previous step gave as ``states``), and
gives back the new memories and the ``step_outputs``, stacked into ``Outputs``
(``[T, B, ...]``). It reads ``Parameters`` of the blocks around and writes none of them.
T is the inputs' first dim: a plan for a new T reuses the step block's function.

``recurrent_grad`` replays the step gradient block from the last step to the first: it
takes the step's slice of each output gradient (its feeds ``step_grads``) and the kept
values, updates the memory gradients (vars around it, zero before the last step: the
final memories are not outputs) and the sums of the parameter gradients, and gives the
step inputs' gradients (``input_grads``), stacked into ``Inputs@GRAD``.
"""
from __future__ import annotations

from .control import check_keep, compatible, written_types
from .registry import register
from .spec import GradContext, InferContext, OpSpec, TensorType, slots
from .sub_block import STEP_SCOPES, EmitContext, RunContext, SubBlockRule


def _steps(ctx: InferContext, slot: str) -> int:
    xs = ctx.inputs(slot)
    lengths = {x.shape[0] for x in xs if x.shape and x.shape[0] >= 0}
    if any(not x.shape for x in xs) or len(lengths) > 1:
        ctx.fail(f"the {slot} of a StaticRNN are time-major [T, batch, ...] with one T, got "
                 f"{[list(x.shape) for x in xs]}")
    if lengths == {0}:
        ctx.fail("a StaticRNN needs at least one time step (T is 0)")
    return lengths.pop() if lengths else -1


def _recurrent_infer(ctx: InferContext) -> None:
    a = ctx.attrs
    steps = _steps(ctx, "Inputs")
    feeds = {n: TensorType(x.shape[1:], x.dtype)
             for n, x in zip(a["step_inputs"], ctx.inputs("Inputs"))}
    feeds.update(zip(a["ex_states"], ctx.inputs("InitialStates")))
    after = ctx.sub_block_types(feeds)
    for ex, new in zip(a["ex_states"], a["states"]):
        if not compatible(feeds[ex], after(new)):
            ctx.fail(f"memory {ex!r} is {feeds[ex].dtype}{list(feeds[ex].shape)} but the step "
                     f"updates it to {after(new).dtype}{list(after(new).shape)}; a memory "
                     f"keeps its shape and dtype from step to step")
    ctx.set_outputs("Outputs", [TensorType((steps,) + after(y).shape, after(y).dtype)
                                for y in a["step_outputs"]])
    if ctx.has_output("StepScopes"):
        ctx.set_output("StepScopes", (), "float32", STEP_SCOPES)


def _bind_stacked(e: EmitContext, slot: str, steps: str) -> list[str]:
    locals_ = []
    for i, name in enumerate(e.op.output(slot)):
        local = e.local(name)
        e.line(f"{local} = {e.output_array(slot, i, steps)}")
        locals_.append(local)
    return locals_


def _recurrent_emit(e: EmitContext) -> None:
    xs = [e.local(n) for n in e.op.input("Inputs")]
    mems = []
    for n in e.op.input("InitialStates"):
        mems.append(e.fresh("memory"))
        e.line(f"{mems[-1]} = {e.local(n)}")
    steps, t = e.fresh("steps"), e.counter()
    e.line(f"{steps} = len({xs[0]})")
    outs = _bind_stacked(e, "Outputs", steps)
    ys = [e.fresh("step_out") for _ in outs]
    e.line(f"for {t} in range({steps}):")
    e.run_body(feeds=[f"{x}[{t}]" for x in xs] + mems, returns=mems + ys)
    for out, y in zip(outs, ys):
        e.line(f"    {out}[{t}] = {y}")


def _recurrent_interpret(r: RunContext) -> None:
    a = r.attrs
    xs = [r.value(n) for n in r.op.input("Inputs")]
    mems = [r.value(n) for n in r.op.input("InitialStates")]
    outs: list[list] = [[] for _ in a["step_outputs"]]
    for t in range(len(xs[0])):
        feeds = dict(zip(a["step_inputs"], [x[t] for x in xs]))
        feeds.update(zip(a["ex_states"], mems))
        got = r.run_body(feeds)
        mems = [got[n] for n in a["states"]]
        for k, n in enumerate(a["step_outputs"]):
            outs[k].append(got[n])
    for name, values in zip(r.op.output("Outputs"), outs):
        r.set(name, r.xp.stack(values))


def _zeros(g: GradContext, like: str) -> str:
    name = g.tmp(like)
    g.emit("fill_zeros_like", {"X": [like]}, {"Out": [name]})
    return name


def _recurrent_grad(g: GradContext) -> None:
    a = g.attrs
    dys = g.out_grad("Outputs")
    if not any(dys):
        return
    check_keep(g, "the StaticRNN")
    grads = [d or _zeros(g, y) for d, y in zip(dys, g.output("Outputs"))]
    # the memories' gradients, carried from a step to the one before (zero at the end)
    inits = g.input("InitialStates")
    mem_grads = {}
    for ex, init, name in zip(a["ex_states"], inits, g.in_grad("InitialStates")):
        mem_grads[ex] = name or g.tmp(init)
        g.emit("fill_zeros_like", {"X": [init]}, {"Out": [mem_grads[ex]]})
    params = {p: n for p, n in zip(g.input("Parameters"), g.in_grad("Parameters")) if n}
    for p, name in params.items():
        g.emit("fill_zeros_like", {"X": [p]}, {"Out": [name]})
    step_grads = [f"{y}@GRAD@STEP" for y in a["step_outputs"]]
    # a var that is both a new memory and a step output gets both gradients
    seeds = list(zip(a["states"], [mem_grads[ex] for ex in a["ex_states"]]))
    seeds += list(zip(a["step_outputs"], step_grads))
    sub = g.differentiate(seeds, list(a["ex_states"]) + list(a["step_inputs"]) + list(params),
                          feeds=step_grads)
    for ex, name in mem_grads.items():
        got = sub.grad(ex)
        if got:
            sub.emit("assign", {"X": [got]}, {"Out": [name]})
        else:
            sub.emit("fill_zeros_like", {"X": [name]}, {"Out": [name]})
    for p, name in params.items():
        got = sub.grad(p)
        if got:
            sub.emit("elementwise_add", {"X": [name], "Y": [got]}, {"Out": [name]})
    input_grads = [sub.grad(x) or sub.zeros_like(x) for x in a["step_inputs"]]
    reads, writes = sub.finish(returns=input_grads)
    wanted = [n or g.tmp(x) for n, x in zip(g.in_grad("Inputs"), g.input("Inputs"))]
    g.emit("recurrent_grad",
           {"Outputs@GRAD": grads, "X": reads, "StepScopes": g.output("StepScopes")},
           {"Out": writes, "Inputs@GRAD": wanted},
           {"sub_block": sub.block, "step_grads": step_grads, "input_grads": input_grads})


def _grad_infer(ctx: InferContext) -> None:
    a = ctx.attrs
    steps = _steps(ctx, "Outputs@GRAD")
    feeds = {n: TensorType(d.shape[1:], d.dtype)
             for n, d in zip(a["step_grads"], ctx.inputs("Outputs@GRAD"))}
    ctx.set_outputs("Out", written_types(ctx, "X", "Out", "the StaticRNN gradient", feeds))
    after = ctx.sub_block_types(feeds)
    ctx.set_outputs("Inputs@GRAD", [TensorType((steps,) + after(n).shape, after(n).dtype)
                                    for n in a["input_grads"]])


def _grad_emit(e: EmitContext) -> None:
    kept_runs = e.local(e.op.input("StepScopes")[0])
    dys = [e.local(n) for n in e.op.input("Outputs@GRAD")]
    steps, t, kept = e.fresh("steps"), e.counter(), e.fresh("kept")
    e.line(f"{steps} = len({kept_runs})")
    outs = _bind_stacked(e, "Inputs@GRAD", steps)
    dxs = [e.fresh("step_grad") for _ in outs]
    e.line(f"for {t} in range({steps} - 1, -1, -1):")
    e.line(f"    {kept} = {kept_runs}[{t}]")
    e.run_body(feeds=[f"{d}[{t}]" for d in dys] + e.replayed(kept), returns=dxs)
    for out, dx in zip(outs, dxs):
        e.line(f"    {out}[{t}] = {dx}")


def _grad_interpret(r: RunContext) -> None:
    a = r.attrs
    dys = [r.value(n) for n in r.op.input("Outputs@GRAD")]
    runs = r.value(r.op.input("StepScopes")[0])
    dxs: list = [[None] * len(runs) for _ in a["input_grads"]]
    for t in range(len(runs) - 1, -1, -1):
        feeds = dict(zip(a["step_grads"], [d[t] for d in dys]))
        feeds.update(r.replayed(runs[t]))
        got = r.run_body(feeds)
        for k, n in enumerate(a["input_grads"]):
            dxs[k][t] = got[n]
    for name, values in zip(r.op.output("Inputs@GRAD"), dxs):
        r.set(name, r.xp.stack(values))


_ATTRS = {"sub_block": -1, "step_inputs": [], "ex_states": [], "states": [],
          "step_outputs": [], "is_test": False, "keep": [], "keep_shapes": []}

register(OpSpec(
    "recurrent", slots("Inputs*", "InitialStates*?", "Parameters*?"),
    slots("Outputs*", "StepScopes?"), _recurrent_infer, grad=_recurrent_grad, attrs=_ATTRS,
    aliases=True,
    sub_block=SubBlockRule("Parameters", "", _recurrent_emit, _recurrent_interpret,
                           keeps="StepScopes", stacked=("Outputs",),
                           var_attrs=("step_inputs", "ex_states", "states", "step_outputs",
                                      "keep", "keep_shapes")),
    doc="run the step block once per time step of Inputs; Outputs stack its step outputs"))
register(OpSpec(
    "recurrent_grad", slots("Outputs@GRAD*", "X*?", "StepScopes"),
    slots("Out*?", "Inputs@GRAD*"), _grad_infer,
    attrs={"sub_block": -1, "step_grads": [], "input_grads": []}, aliases=True,
    sub_block=SubBlockRule("X", "Out", _grad_emit, _grad_interpret, replays="StepScopes",
                           stacked=("Inputs@GRAD",), var_attrs=("step_grads", "input_grads")),
    doc="replay the step gradient block from the last step to the first"))
