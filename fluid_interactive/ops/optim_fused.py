"""Fused optimizer updates: one op updates every parameter of one optimizer (same kind,
same learning-rate var, same attrs, same dtype) with a few vectorised calls over flat
arrays, instead of a few calls per parameter.

Each fused spec is derived from its per-parameter spec (slots with an "s" appended and
duplicable, the shared learning rate kept single; the shape rule is the per-parameter
rule run for each parameter), and its kernel runs the same update function
(`optim.sgd_update`, `momentum_update`, `adam_update`) on flat arrays, so the values are
bit-identical to the unfused ops'. The flat state is double-buffered (ops/flat_state.py):
a step writes only into arrays nobody references and returns views of them; the new
parameters' array serves as the update's scratch until they are written, so a fused
update needs no memory beyond its two generations and the flat gradients.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from math import prod
from typing import Any

from ..kernels.optim import update_source
from .compiled import compiled_kernel, run_compiled
from .flat_state import DoubleBuffer, FlatInput
from .optim import adam_rate, adam_update, corrected_rates_into, momentum_update, sgd_update
from .registry import get_spec, register
from .spec import InferContext, KernelContext, OpSpec, Slot


def fused_slot(spec: OpSpec, slot: str) -> str:
    """The fused op's slot standing for ``slot`` of the per-parameter op."""
    return slot if slot in spec.fused_shared else slot + "s"


def _fused_infer(base: OpSpec) -> Callable[[InferContext], None]:
    def infer(ctx: InferContext) -> None:
        per_param = [s.name for s in base.inputs if s.name not in base.fused_shared]
        n = len(ctx.inputs(fused_slot(base, per_param[0])))
        for slot in per_param:
            if len(ctx.inputs(fused_slot(base, slot))) != n:
                ctx.fail(f"{fused_slot(base, slot)} lists "
                         f"{len(ctx.inputs(fused_slot(base, slot)))} vars for {n} parameters")
        outs: dict[str, list] = {fused_slot(base, s.name): [] for s in base.outputs}
        for i in range(n):
            inputs = {s.name: [ctx.inputs(fused_slot(base, s.name))[
                0 if s.name in base.fused_shared else i]] for s in base.inputs}
            one = InferContext(base, inputs, ctx.attrs, {s.name: 1 for s in base.outputs})
            base.infer(one)
            for s in base.outputs:
                outs[fused_slot(base, s.name)] += one.outputs[s.name]
        for slot, types in outs.items():
            ctx.set_outputs(slot, types)
    return infer


def _split(ctx: KernelContext, base: OpSpec) -> Callable[[tuple], list]:
    """args (flat, in slot order) -> one list per input slot of the fused op."""
    counts = [len(ctx.inputs(fused_slot(base, s.name))) for s in base.inputs]

    def split(args: tuple) -> list:
        out, at = [], 0
        for c in counts:
            out.append(args[at:at + c])
            at += c
        return out
    return split


class _FlatUpdate:
    """What every fused kernel does around its update: find or copy the input state
    (kinds: the per-parameter state slots, parameters first), gather the gradients."""

    def __init__(self, ctx: KernelContext, state_slots: Sequence[str]):
        xp = self.xp = ctx.xp
        params = ctx.inputs("Params")
        self.shapes = [t.shape for t in params]
        self.dtype = params[0].dtype
        layouts = [[t.shape for t in ctx.inputs(s)] for s in state_slots]
        # one for every size's plan, by its first gradient: a step at another batch size
        # then finds its inputs in a generation and updates them flat, and the plans of
        # many sizes keep two generations in all, not two each
        self.buffers = ctx.shared_by_sizes(
            DoubleBuffer, ctx.input_name("Grads"),
            lambda: DoubleBuffer(xp, layouts, [self.dtype] * len(layouts)))
        self.grads = FlatInput(xp, self.shapes, self.dtype)
        self.block: Any = None   # the scratch of `blocks`, made when first needed
        self.segments = []
        at = 0
        for s in self.shapes:
            self.segments.append(slice(at, at + prod(s)))
            at += prod(s)
        self.scalar = xp.dtype(self.dtype).type

    def compiled(self, ctx: KernelContext, function: str):
        """The handle on ``kernels/loops.<function>`` for this update, or None where the
        tier does not apply (a device, an integer dtype, a learning rate of another
        dtype: NumPy would compute that product in the wider type)."""
        lr = ctx.in_slots.get("LearningRate")
        if lr and lr[0].dtype != self.dtype:
            return None
        return compiled_kernel(ctx, self.dtype, lambda: update_source(function, self.dtype),
                               label=f"fluid_interactive/kernels/loops.py:{function}")

    def begin(self, state: Sequence[Sequence[Any]]):
        """(the generation holding the inputs, or None, and the generation to write). The
        inputs are the last step's outputs; or (values set from outside, a first step)
        they are read where they are, parameter by parameter (see `parts`). The generation
        written is never the inputs', so an update may use its parameter array as scratch
        before the new parameters land in it."""
        src = self.buffers.holding(tuple(a for arrays in state for a in arrays))
        return src, self.buffers.acquire(src)

    def run_loop(self, compiled: Any, ins: Sequence[Any], scalars: Sequence[Any],
                 outs: Sequence[Any], numpy_update: Callable, *numpy_args: Any) -> None:
        """One part's update by the compiled loop (``ins``, ``scalars``, ``outs``: its
        arguments, the new parameters first of the outputs), or by ``numpy_update`` until
        the plan switches to it."""
        if not run_compiled(compiled, lambda: (*(a.reshape(-1) for a in ins), *scalars,
                                               *(a.reshape(-1) for a in outs))):
            numpy_update(*numpy_args)

    def blocks(self, arrays: Sequence[Any], scratches: int = 1) -> Iterator[list[Any]]:
        """``arrays`` (1-D or not, all of one size) in blocks of at most `_BLOCK` elements,
        with ``scratches`` block scratches of this update last: the NumPy kernels' way of
        updating with more than one scratch without full-size scratches."""
        flat = [a.reshape(-1) for a in arrays]
        n = flat[0].size
        if self.block is None or self.block.shape[0] < scratches:
            size = min(_BLOCK, sum(map(prod, self.shapes)))
            self.block = self.xp.empty((scratches, size), self.dtype)
        for start in range(0, n, _BLOCK):
            stop = min(start + _BLOCK, n)
            yield [a[start:stop] for a in flat] + [self.block[k, :stop - start]
                                                   for k in range(scratches)]

    def parts(self, src, state: Sequence[Sequence[Any]], gen, g: Any,
              per_parameter: bool = False) -> Iterator[tuple[list, Any, list]]:
        """(inputs per kind, gradient, outputs per kind) to update: the flat arrays at once,
        or one parameter at a time when the inputs are not one generation's (or when the
        caller asks, e.g. for different rates)."""
        if src is not None and not per_parameter:
            yield src.flats, g, gen.flats
            return
        for i, (shape, seg) in enumerate(zip(self.shapes, self.segments)):
            ins = [(src.views[k] if src is not None else state[k])[i] for k in range(len(state))]
            yield ins, g[seg].reshape(shape), [views[i] for views in gen.views]

    @staticmethod
    def outputs(gen) -> Any:
        return gen.every[0] if len(gen.every) == 1 else gen.every


#: elements per block when a NumPy update runs in blocks (16K float32: 64 KB, in cache)
_BLOCK = 1 << 14


def _sgd_kernel(ctx: KernelContext):
    base, xp = get_spec("sgd"), ctx.xp
    split, flat = _split(ctx, base), _FlatUpdate(ctx, ["Params"])
    compiled = flat.compiled(ctx, "sgd")

    def fn(*args):
        params, grads, (lr,) = split(args)
        g_flat = flat.grads(grads)
        src, gen = flat.begin([params])
        for (p,), g, (p_out,) in flat.parts(src, [params], gen, g_flat):
            # scratch: the new parameters
            if compiled is None:
                sgd_update(xp, p, g, lr, p_out, p_out)
            else:
                flat.run_loop(compiled, (p, g), (lr.reshape(-1)[0],), (p_out,),
                              sgd_update, xp, p, g, lr, p_out, p_out)
        return flat.outputs(gen)
    return fn


def _momentum_kernel(ctx: KernelContext):
    base, xp = get_spec("momentum"), ctx.xp
    mu, nesterov = float(ctx.attrs["mu"]), bool(ctx.attrs["use_nesterov"])
    split, flat = _split(ctx, base), _FlatUpdate(ctx, ["Params", "Velocitys"])
    compiled = flat.compiled(ctx, "momentum_nesterov" if nesterov else "momentum")
    mu_t = flat.scalar(mu)

    def numpy_update(p, g, v, lr, p_out, v_out):   # scratch: the new parameters
        momentum_update(xp, mu, nesterov, p, g, v, lr, p_out, v_out, p_out)

    def fn(*args):
        params, grads, velocities, (lr,) = split(args)
        state = [params, velocities]
        g_flat = flat.grads(grads)
        src, gen = flat.begin(state)
        for (p, v), g, (p_out, v_out) in flat.parts(src, state, gen, g_flat):
            if compiled is None:
                numpy_update(p, g, v, lr, p_out, v_out)
            else:
                flat.run_loop(compiled, (p, g, v), (mu_t, lr.reshape(-1)[0]),
                              (p_out, v_out), numpy_update, p, g, v, lr, p_out, v_out)
        return flat.outputs(gen)
    return fn


def _adam_kernel(ctx: KernelContext):
    base, xp = get_spec("adam"), ctx.xp
    b1, b2, eps = (float(ctx.attrs[k]) for k in ("beta1", "beta2", "epsilon"))
    split = _split(ctx, base)
    flat = _FlatUpdate(ctx, ["Params", "Moment1s", "Moment2s", "Beta1Pows", "Beta2Pows"])
    on_host = xp.__name__ == "numpy"
    compiled = flat.compiled(ctx, "adam")
    consts = tuple(map(flat.scalar, (b1, 1.0 - b1, b2, 1.0 - b2, eps)))
    corrected_rate = adam_rate(xp, flat.dtype)

    def numpy_update(p, g, m1, m2, rate, p_out, m1_out, m2_out):   # scratch: p_out
        adam_update(xp, b1, b2, eps, p, g, m1, m2, rate, p_out, m1_out, m2_out, p_out)
    n = len(flat.shapes)
    if not on_host:   # per-parameter rates, computed on the device and spread per element
        sizes = xp.asarray([prod(s) for s in flat.shapes])
        one, r1 = xp.empty(n, flat.dtype), xp.empty(n, flat.dtype)

        def device_rates(lr, b1p, b2p):
            corrected_rates_into(xp, lr, b1p, b2p, r1, one)
            return r1.reshape(()) if n == 1 else xp.repeat(r1, sizes)

    def fn(*args):
        params, grads, (lr,), m1, m2, b1p, b2p = split(args)
        state = [params, m1, m2, b1p, b2p]
        g = flat.grads(grads)
        src, gen = flat.begin(state)
        per_parameter = False
        if on_host:   # Python floats: one rate for all (the usual case) runs flat
            pows = src.views[3:5] if src is not None else state[3:5]
            rates = [corrected_rate(lr, p1, p2) for p1, p2 in zip(*pows)]
            per_parameter = any(r != rates[0] for r in rates)
        for i, ((p, m1_in, m2_in, p1, p2), g_i, (p_out, m1_out, m2_out, p1_out, p2_out)) in \
                enumerate(flat.parts(src, state, gen, g, per_parameter)):
            if on_host:
                rate = rates[i]
            elif src is not None:    # the flat arrays: rates per parameter, per element
                rate = device_rates(lr, p1, p2)
            else:                    # one parameter: its rate, used before the next one
                rate = corrected_rate(lr, p1, p2)
            arrays = (p, g_i, m1_in, m2_in, rate, p_out, m1_out, m2_out)
            if compiled is None:   # (on a device, always)
                numpy_update(*arrays)
            else:
                flat.run_loop(compiled, (p, g_i, m1_in, m2_in),
                              (*consts, flat.scalar(rate)), (p_out, m1_out, m2_out),
                              numpy_update, *arrays)
            xp.multiply(p1, b1, out=p1_out)
            xp.multiply(p2, b2, out=p2_out)
        return flat.outputs(gen)
    return fn


@dataclass(frozen=True)
class FusedRule:
    """How an elementwise update op runs fused (`register_fused_rule`): the state it keeps
    per parameter and the update of one part of the flat arrays.

    ``numpy(xp, attrs)`` gives ``update(p, g, *states, rate, p_out, *state_outs,
    *scratches)``: it writes the new parameters last and reads nothing after, and needs
    ``scratches`` arrays of the part's size (with one, the new parameters' array
    serves). ``rate(xp, dtype)`` gives ``rate(lr, *pows)``, the number the update scales
    by (a Python float on the host, a 0-d array on a device); without it the rate is the
    learning-rate array (None for an op without one). ``loop(attrs)`` names the compiled
    loop of `kernels/loops.py` (None: NumPy only), which takes the arrays, then
    ``scalars(attrs)`` and the rate, then the outputs. Each of ``pows`` is a one-element
    state multiplied by the attr it names at each step (Adamax's beta1 power)."""
    states: tuple[str, ...]
    numpy: Callable[[Any, Mapping[str, Any]], Callable[..., Any]]
    loop: Callable[[Mapping[str, Any]], str | None]
    scalars: Callable[[Mapping[str, Any]], tuple[float, ...]]
    pows: tuple[tuple[str, str], ...] = ()
    scratches: int = 1
    rate: Callable[[Any, str], Callable[..., Any]] | None = None


def _rule_numpy(flat: _FlatUpdate, rule: FusedRule, update: Callable) -> Callable:
    """The rule's NumPy update of one part: over whole arrays with the new parameters as
    its scratch where one scratch does, else over blocks with small scratches of their
    own."""
    n = len(rule.states)

    def part(p, g, states, rate, p_out, state_outs):
        if rule.scratches == 1:
            update(p, g, *states, rate, p_out, *state_outs, p_out)
            return
        for b in flat.blocks((p, g, *states, p_out, *state_outs), rule.scratches):
            update(b[0], b[1], *b[2:2 + n], rate, b[2 + n], *b[3 + n:3 + 2 * n],
                   *b[3 + 2 * n:])
    return part


def _rule_rates(ctx: KernelContext, flat: _FlatUpdate, rule: FusedRule) -> Callable:
    """``rates(lr, pows, flat_arrays)``: the rate of each parameter (host: Python floats,
    ``flat_arrays`` or not; device: one 0-d array per parameter, or per element when
    ``flat_arrays``) and whether they differ (then the parts are the parameters)."""
    xp = ctx.xp
    if rule.rate is None:
        return lambda lr, pows, flat_arrays: ([lr] * len(flat.shapes), False)
    one = rule.rate(xp, flat.dtype)
    if xp.__name__ == "numpy":
        def host_rates(lr, pows, flat_arrays):
            rates = [one(lr, *ps) for ps in zip(*pows)]
            return rates, any(r != rates[0] for r in rates)
        return host_rates
    sizes = xp.asarray([prod(s) for s in flat.shapes])

    def device_rates(lr, pows, flat_arrays):
        if not flat_arrays:
            return [one(lr, *ps) for ps in zip(*pows)], True
        per = xp.concatenate([one(lr, *ps).reshape(1) for ps in zip(*pows)])
        return [per.reshape(()) if len(flat.shapes) == 1 else xp.repeat(per, sizes)], False
    return device_rates


def _rule_kernel(base_type: str, rule: FusedRule) -> Callable[[KernelContext], Callable]:
    def kernel(ctx: KernelContext):
        base, xp, attrs = get_spec(base_type), ctx.xp, ctx.attrs
        slots = [s.name for s in base.inputs]
        kinds = ["Param", *rule.states, *(p for p, _ in rule.pows)]
        split, flat = _split(ctx, base), _FlatUpdate(ctx, [fused_slot(base, k) for k in kinds])
        loop = rule.loop(attrs)
        compiled = flat.compiled(ctx, loop) if loop else None
        consts = tuple(map(flat.scalar, rule.scalars(attrs)))
        update = rule.numpy(xp, attrs)
        numpy = _rule_numpy(flat, rule, update)
        rates_of = _rule_rates(ctx, flat, rule)
        n = len(rule.states)

        def fn(*args):
            given = dict(zip(slots, split(args)))
            lr = given["LearningRate"][0] if "LearningRate" in given else None
            state = [given[k] for k in kinds]
            g_flat = flat.grads(given["Grad"])
            src, gen = flat.begin(state)
            pows = (src.views if src is not None else state)[1 + n:]
            rates, differ = rates_of(lr, pows, src is not None)
            for i, (ins, g, outs) in enumerate(flat.parts(src, state, gen, g_flat, differ)):
                rate = rates[i]
                arrays = (ins[0], g, ins[1:1 + n], rate, outs[0], outs[1:1 + n])
                if compiled is None:
                    numpy(*arrays)
                else:
                    # the learning rate as it is, or the rule's rate (none: neither)
                    scalar = () if rate is None else (
                        (rate.reshape(-1)[0],) if rule.rate is None else (flat.scalar(rate),))
                    flat.run_loop(compiled, (ins[0], g, *ins[1:1 + n]),
                                  (*consts, *scalar), outs[:1 + n], numpy, *arrays)
                for (_, attr), a, o in zip(rule.pows, ins[1 + n:], outs[1 + n:]):
                    xp.multiply(a, float(attrs[attr]), out=o)
            return flat.outputs(gen)
        return fn
    return kernel


def register_fused_rule(base_type: str, rule: FusedRule) -> None:
    """Register the fused form of the per-parameter update op ``base_type`` (its spec names
    it in ``fused``), run by ``rule``."""
    _register_fused(base_type, _rule_kernel(base_type, rule))


def _register_fused(base_type: str, kernel: Callable[[KernelContext], Callable]) -> None:
    base = get_spec(base_type)

    def plural(slot_list: tuple[Slot, ...]) -> tuple[Slot, ...]:
        return tuple(s if s.name in base.fused_shared else Slot(s.name + "s", duplicable=True)
                     for s in slot_list)
    register(OpSpec(base.fused, plural(base.inputs), plural(base.outputs),
                    _fused_infer(base), kernel, attrs=dict(base.attrs),
                    contiguous=(fused_slot(base, "Grad"),),
                    doc=f"`{base_type}` of many parameters at once, over flat arrays "
                        f"(made by the fusion pass; values bit-identical)"))


_register_fused("sgd", _sgd_kernel)
_register_fused("momentum", _momentum_kernel)
_register_fused("adam", _adam_kernel)
