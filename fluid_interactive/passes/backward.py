"""Reverse-mode autodiff as a pure pass: appends gradient ops to a block.

`append_backward(program, block, loss, ...)` returns a *new* program and the
``(param, grad)`` pairs. The steps, each a function below:

1. mark the op that produces the loss (role Forward|Loss) and seed ``loss@GRAD`` with ones
   (role Backward|Loss);
2. find the forward ops on the path from the wanted inputs to the loss (`_ops_on_path`);
3. walk them in reverse, asking each op's spec to emit its gradient ops; a var read by
   several ops gets one gradient per read, summed before it is used (`_Accumulator`);
4. declare every new var from its op's shape rule, tag the op writing each parameter's
   gradient with ``op_role_var = (param, grad)``.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from ..errors import OpArgumentError
from ..ir.records import FLOAT_DTYPES, BlockDesc, OpDesc, OpRole, ProgramDesc, VarDesc
from ..ir.text import format_shape
from ..ops.apply import infer_op
from ..ops.registry import get_spec
from ..ops.spec import GradContext, TensorType, var_type

GRAD = "@GRAD"
FORWARD_ROLES = (OpRole.FORWARD, OpRole.FORWARD | OpRole.LOSS)


def grad_var_name(name: str) -> str:
    return name + GRAD


@dataclass
class BackwardResult:
    program: ProgramDesc
    params_grads: list[tuple[str, str]]
    grads: dict[str, str] = field(default_factory=dict)  # every var's final gradient name


def _unique(block: BlockDesc, program: ProgramDesc, name: str) -> str:
    """``name``, or ``name@k`` when a previous backward pass in the block already used it."""
    if program.find_var(block, name) is None:
        return name
    k = 1
    while program.find_var(block, f"{name}@{k}") is not None:
        k += 1
    return f"{name}@{k}"


def _ops_on_path(ops: Sequence[OpDesc], targets: Iterable[str], leaves: set[str]
                 ) -> tuple[list[OpDesc], set[str]]:
    """Forward ops through which a wanted leaf reaches a target, and the vars that carry a
    gradient (those depending on a leaf)."""
    needed = set(targets)
    on_target_path = []
    for op in reversed(ops):
        if op.role in FORWARD_ROLES and needed.intersection(op.output_names()):
            on_target_path.append(op)
            needed.update(op.input_names())
    on_target_path.reverse()
    carries = set(leaves)
    path = []
    for op in on_target_path:
        if carries.intersection(op.input_names()) and get_spec(op.type).grad is not None:
            path.append(op)
            carries.update(op.output_names())
    return path, carries


class _Accumulator:
    """Names each read's gradient and sums several into one before it is used."""

    def __init__(self, program: ProgramDesc, block: BlockDesc, path: Sequence[OpDesc],
                 carries: set[str]):
        self.program, self.block = program, block
        self.reads: dict[str, int] = {}
        for op in path:
            for n in op.input_names():
                if n in carries:
                    self.reads[n] = self.reads.get(n, 0) + 1
        self.parts: dict[str, list[str]] = {}
        self.final: dict[str, str] = {}
        self.reserved: set[str] = set()
        self.loc_of: dict[str, object] = {}   # gradient part -> the forward op's source line

    def new_part(self, var: str) -> str:
        base = grad_var_name(var)
        if self.reads.get(var, 0) > 1:
            base = f"{base}@RENAME@{len(self.parts.get(var, []))}"
        name = self._fresh(base)
        self.parts.setdefault(var, []).append(name)
        return name

    def _fresh(self, base: str) -> str:
        name = _unique(self.block, self.program, base)
        k = 1
        while name in self.reserved:
            name = f"{base}@{k}"
            k += 1
        self.reserved.add(name)
        return name

    def resolve(self, var: str, written: set[str], emit) -> str | None:
        """The single gradient name of ``var``, summing its parts first if needed."""
        if var in self.final:
            return self.final[var]
        parts = [p for p in self.parts.get(var, []) if p in written]
        if not parts:
            return None
        if len(parts) == 1:
            self.final[var] = parts[0]
            return parts[0]
        total = self._fresh(grad_var_name(var))
        emit(OpDesc("sum", {"X": parts}, {"Out": [total]}, loc=self.loc_of.get(parts[0])))
        self.final[var] = total
        return total


def _declare(program: ProgramDesc, block: BlockDesc, op: OpDesc) -> None:
    def type_of(name: str) -> TensorType:
        v = program.find_var(block, name)
        return var_type(v)
    for slot, types in infer_op(op, type_of).items():
        for name, t in zip(op.outputs[slot], types):
            if program.find_var(block, name) is None:
                block.vars[name] = VarDesc(name, t.shape, t.dtype, kind=t.kind)


def _seed(program: ProgramDesc, block: BlockDesc, target: str, name: str,
          require_scalar: bool) -> OpDesc:
    """The op writing d(target)/d(target) = ones; marks the target's producer as the loss."""
    var = program.find_var(block, target)
    if var is None:
        raise OpArgumentError(f"{target!r} is not a var of block {block.name!r}")
    if require_scalar and var.has_batch_dim:
        raise OpArgumentError(
            f"loss {target!r} has shape {format_shape(var.shape)} with a batch dimension; "
            f"reduce it to a scalar first, e.g. fluid.layers.mean(cost)")
    if var.dtype not in FLOAT_DTYPES:
        raise OpArgumentError(f"{target!r} is {var.dtype}; gradients need a float target")
    for op in reversed(block.ops):
        if target in op.output_names():
            op.role |= OpRole.LOSS
            break
    role = OpRole.BACKWARD | OpRole.LOSS
    if var.has_batch_dim:
        return OpDesc("fill_ones_like", {"X": [target]}, {"Out": [name]}, role=role)
    return OpDesc("fill_constant", {}, {"Out": [name]},
                  {"shape": list(var.shape), "dtype": var.dtype, "value": 1.0}, role=role)


def _default_leaves(program: ProgramDesc, block: BlockDesc,
                    no_grad: set[str]) -> set[str]:
    leaves = set()
    for b in (program.global_block(), block):
        for v in b.vars.values():
            trainable = v.is_parameter and v.trainable
            differentiable_data = v.is_data and v.dtype in FLOAT_DTYPES
            if (trainable or differentiable_data) and not v.stop_gradient:
                leaves.add(v.name)
    return leaves - no_grad


def _float_only(program: ProgramDesc, block: BlockDesc, names: set[str]) -> set[str]:
    return {n for n in names
            if (v := program.find_var(block, n)) is not None and v.dtype in FLOAT_DTYPES
            and not (v.stop_gradient and not v.is_parameter)}


def append_backward(program: ProgramDesc, block_idx: int, loss: str,
                    parameter_list: Sequence[str] | None = None,
                    no_grad_set: Iterable[str] | None = None) -> BackwardResult:
    """Gradients of the scalar ``loss`` w.r.t. the parameters, appended to a copy of
    ``program``. ``parameter_list`` restricts which parameters get gradients;
    ``no_grad_set`` names vars through which no gradient flows."""
    prog = program.clone()
    block = prog.blocks[block_idx]
    no_grad = set(no_grad_set or ())
    leaves = (set(parameter_list) if parameter_list is not None
              else _default_leaves(prog, block, no_grad)) - no_grad
    return _backward(prog, block, [loss], leaves, no_grad, require_scalar=True)


def calc_gradient(program: ProgramDesc, block_idx: int, targets: Sequence[str],
                  inputs: Sequence[str], no_grad_set: Iterable[str] | None = None
                  ) -> BackwardResult:
    """Gradients of sum(targets) w.r.t. ``inputs`` (any float vars), on a copy."""
    prog = program.clone()
    block = prog.blocks[block_idx]
    no_grad = set(no_grad_set or ())
    return _backward(prog, block, list(targets), set(inputs) - no_grad, no_grad,
                     require_scalar=False)


def _backward(prog: ProgramDesc, block: BlockDesc, targets: list[str], leaves: set[str],
              no_grad: set[str], require_scalar: bool) -> BackwardResult:
    path, carries = _ops_on_path(list(block.ops), targets, leaves)
    carries = _float_only(prog, block, carries - no_grad) | (leaves & carries)
    acc = _Accumulator(prog, block, path, carries)
    new_ops: list[OpDesc] = []
    written: set[str] = set()

    def emit(op: OpDesc, loc=None) -> None:
        op.role = op.role if op.role != OpRole.FORWARD else OpRole.BACKWARD
        op.loc = op.loc or loc
        _declare(prog, block, op)
        block.ops.append(op)
        new_ops.append(op)
        written.update(op.output_names())

    for target in targets:
        seed = acc._fresh(grad_var_name(target))
        acc.parts.setdefault(target, []).append(seed)
        producer = next((op for op in reversed(block.ops) if target in op.output_names()), None)
        emit(_seed(prog, block, target, seed, require_scalar),
             producer.loc if producer is not None else None)
    for op in reversed(path):
        _emit_grad_of(op, prog, block, acc, carries, written, emit)
    grads = {v: acc.resolve(v, written, emit) for v in sorted(carries | set(targets))}
    grads = {v: g for v, g in grads.items() if g is not None}
    pairs = sorted((p, grads[p]) for p in leaves if p in grads
                   and (prog.find_var(block, p) or VarDesc(p, ())).is_parameter)
    _tag_role_vars(new_ops, pairs)
    return BackwardResult(prog, pairs, grads)


def _emit_grad_of(op: OpDesc, prog: ProgramDesc, block: BlockDesc, acc: _Accumulator,
                  carries: set[str], written: set[str], emit) -> None:
    spec = get_spec(op.type)
    out_grads = {slot: [acc.resolve(n, written, lambda o: emit(o, op.loc)) for n in names]
                 for slot, names in op.outputs.items()}
    flowing = [n for names in out_grads.values() for n in names if n is not None]
    if not flowing:
        return
    if sum(len(v) for v in out_grads.values()) > 1:
        out_grads = _fill_missing(op, out_grads, acc, lambda o: emit(o, op.loc))
    in_grads = {slot: [acc.new_part(n) if n in carries else None for n in names]
                for slot, names in op.inputs.items()}
    for names in in_grads.values():
        acc.loc_of.update((n, op.loc) for n in names if n is not None)

    def emit_op(type_, inputs, outputs, attrs):
        emit(OpDesc(type_, inputs, outputs, attrs), op.loc)

    ctx = GradContext(op, spec.full_attrs(op.attrs), out_grads, in_grads, emit_op,
                      lambda hint: acc._fresh(f"{hint}@GRAD_TMP"))
    spec.grad(ctx)


def _fill_missing(op: OpDesc, out_grads, acc: _Accumulator, emit):
    """Outputs of a multi-output op that no gradient reached get zeros, so gradient
    makers always see a complete set."""
    filled = {}
    for slot, names in out_grads.items():
        filled[slot] = []
        for fwd, g in zip(op.outputs[slot], names):
            if g is None:
                g = acc._fresh(grad_var_name(fwd) + "@ZERO")
                emit(OpDesc("fill_zeros_like", {"X": [fwd]}, {"Out": [g]}))
            filled[slot].append(g)
    return filled


def _tag_role_vars(ops: Sequence[OpDesc], pairs: Sequence[tuple[str, str]]) -> None:
    by_grad = {g: p for p, g in pairs}
    for op in ops:
        for name in op.output_names():
            if name in by_grad:
                op.role_var = op.role_var + (by_grad[name], name)
