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
from .differentiate import GRAD, Differentiation, grad_var_name

__all__ = ["GRAD", "BackwardResult", "append_backward", "calc_gradient", "grad_var_name"]


@dataclass
class BackwardResult:
    program: ProgramDesc
    params_grads: list[tuple[str, str]]
    # every var's final gradient name (an op's output: the one its gradient op read)
    grads: dict[str, str] = field(default_factory=dict)


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


def append_backward(program: ProgramDesc, block_idx: int, loss: str,
                    parameter_list: Sequence[str] | None = None,
                    no_grad_set: Iterable[str] | None = None) -> BackwardResult:
    """Gradients of the scalar ``loss`` w.r.t. the parameters, appended to a copy of
    ``program``. ``parameter_list`` names the vars that get gradients instead (parameters,
    or any float var on the path to the loss, as Paddle allows); ``no_grad_set`` names
    vars through which no gradient flows."""
    prog = program.clone()
    block = prog.blocks[block_idx]
    no_grad = set(no_grad_set or ())
    leaves = (set(parameter_list) if parameter_list is not None
              else _default_leaves(prog, block, no_grad)) - no_grad
    return _backward(prog, block, [loss], leaves, no_grad, require_scalar=True,
                     any_var=parameter_list is not None)


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
              no_grad: set[str], require_scalar: bool, any_var: bool = False
              ) -> BackwardResult:
    if block.parent_idx > 0:
        raise OpArgumentError("gradients are taken in a method's block, after its loops and "
                              "branches: call minimize/append_backward/gradients outside of "
                              "a While, cond or Switch body")
    diff = Differentiation(prog, block, block, targets, leaves, no_grad,
                           keep_written_leaves=True)
    for target in targets:
        seed = diff.acc.fresh(grad_var_name(target))
        producer = next((op for op in reversed(block.ops) if target in op.output_names()), None)
        diff.emit(_seed(prog, block, target, seed, require_scalar),
                  producer.loc if producer is not None else None)
        diff.seed(target, seed)
    diff.run()
    resolved = {v: diff.wanted_grad(v) if v in leaves else diff.resolve(v)
                for v in sorted(diff.carries | set(targets))}
    grads = {**diff.output_grads, **{v: g for v, g in resolved.items() if g is not None}}
    diff.versions.apply()
    params = {p for p in leaves if (prog.find_var(block, p) or VarDesc(p, ())).is_parameter}
    pairs = sorted((p, grads[p]) for p in leaves if p in grads and (any_var or p in params))
    _tag_role_vars(diff.new_ops, [(p, g) for p, g in pairs if p in params])
    return BackwardResult(prog, pairs, grads)


def _tag_role_vars(ops: Sequence[OpDesc], pairs: Sequence[tuple[str, str]]) -> None:
    by_grad = {g: p for p, g in pairs}
    for op in ops:
        for name in op.output_names():
            if name in by_grad:
                op.role_var = op.role_var + (by_grad[name], name)
