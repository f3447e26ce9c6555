"""Step 1b: updates that need more than one row block of a parameter.

* **Whole parameters.** An update group whose op reads a tensor whole (its spec's
  ``reads_whole``: Lamb's and LARS's norms, DP-SGD's clipping), or that computes from the
  parameter, its gradient or its state a temporary of another shape (a norm: a gradient
  clipped by its norm), is not cut into row blocks: the parameter stays whole on one
  server, where the update sees all of it.
* **Joint ops.** An optimize op whose ``op_role_var`` names several (param, grad) pairs
  reads the gradients of all of them (a global-norm clip: the norm of every clipped
  gradient together). Its parameters stay whole; every server that holds one of them
  receives every gradient of the joint, runs the joint ops (and the ops of each group
  that feed them) on the averaged gradients in a block of its own before its updates,
  and keeps their results (the clip's scale) for its updates to read. Each server so
  computes the same values one process computes, at the cost of receiving each of those
  gradients once per server (docs/distributed.md).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ...errors import ProgramDefinitionError
from ...ir.records import BlockDesc, OpDesc, ProgramDesc
from ...ir.text import format_op
from ...ops.registry import get_spec


@dataclass
class Joint:
    """The optimize ops of one method that read several (param, grad) pairs at once."""
    pairs: tuple[tuple[str, str], ...]
    ops: list[int] = field(default_factory=list)
    results: list[str] = field(default_factory=list)   # what the joint ops write

    @property
    def params(self) -> list[str]:
        return [p for p, _ in self.pairs]


def pairs_of(op: OpDesc) -> list[tuple[str, str]]:
    rv = list(op.role_var)
    return list(dict.fromkeys(zip(rv[0::2], rv[1::2])))


def collect_joints(block: BlockDesc, opt_ops: list[int]) -> tuple[list[int], list[Joint]]:
    """(the optimize ops of one pair or none, the joints of the others, by their pairs)."""
    single: list[int] = []
    joints: dict[tuple, Joint] = {}
    for i in opt_ops:
        pairs = tuple(pairs_of(block.ops[i]))
        if len(pairs) <= 1:
            single.append(i)
            continue
        joint = joints.setdefault(pairs, Joint(pairs))
        joint.ops.append(i)
        joint.results += [n for n in block.ops[i].output_names() if n not in joint.results]
    return single, list(joints.values())


def check_joint(program: ProgramDesc, block: BlockDesc, method: str, joint: Joint,
                group_outputs: dict[str, set[str]]) -> None:
    """A joint reads only what its pairs' update groups or its own ops compute."""
    own = set(joint.results)
    allowed = own.union(*(group_outputs.get(p, set()) for p in joint.params))
    for i in joint.ops:
        op = block.ops[i]
        stray = [n for n in op.input_names() if n not in allowed]
        if stray:
            raise ProgramDefinitionError(
                f"transpile: an optimize op of {method!r} reading the gradients of several "
                f"parameters reads {stray[0]!r}, which no update of those parameters "
                f"computes:\n  {format_op(op, lambda n: program.find_var(block, n))}")


def feeding_ops(block: BlockDesc, group_ops: list[int], joint: Joint) -> list[int]:
    """The ops of an update group whose results the joint reads (with the group's ops those
    read), in order."""
    wanted = {n for i in joint.ops for n in block.ops[i].input_names()}
    out = []
    for i in reversed(group_ops):
        if wanted.intersection(block.ops[i].output_names()):
            out.append(i)
            wanted.update(block.ops[i].input_names())
    return sorted(out)


def needs_whole(program: ProgramDesc, block: BlockDesc, ops: list[int], param: str,
                grad: str) -> bool:
    """Whether the update ``ops`` of ``param`` must see the parameter whole (see the
    module docstring)."""
    pvar = program.find_var(block, param)
    shape = tuple(pvar.shape) if pvar is not None else ()
    rows = {param, grad}
    for i in ops:
        op = block.ops[i]
        if get_spec(op.type).reads_whole:
            return True
        if not rows.intersection(op.input_names()):
            continue
        for n in op.output_names():
            var = program.find_var(block, n)
            if var is None:
                continue
            if var.persistable:
                if tuple(var.shape) == shape:
                    rows.add(n)
            elif tuple(var.shape) == shape:
                rows.add(n)
            else:
                return True   # a temporary computed from whole rows: a norm, a sum
    return False
