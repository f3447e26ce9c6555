"""What becomes of each persistable var when a program's state moves to another program:
kept, added, dropped or started again (`state_changes`), the one rule a recompilation and
`fluid.diff` both use:

* a parameter is kept when its name, shape and dtype still match, whatever its
  initialiser (trained weights survive an edit of the initialiser);
* other state (learning rates, optimizer accumulators, readers, counters) is kept only
  while the op that initialises it is unchanged too, so an edited learning rate or reader
  takes effect;
* the optimizer state of a parameter that starts again starts again with it: every var
  written by an optimizer op whose ``op_role_var`` names the parameter (Adam's moments
  *and* its beta-power accumulators), found from the ops, never from names.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .records import OpDesc, OpRole, ProgramDesc, VarDesc
from .text import short_shape

__all__ = ["StateChange", "state_changes", "optimizer_state_of"]


@dataclass
class StateChange:
    """One persistable var: ``status`` is 'kept', 'added', 'dropped' or 'reinitialised'."""
    name: str
    status: str
    old: VarDesc | None = None
    new: VarDesc | None = None
    reason: str = ""                 # why it starts again
    values: str = ""                 # for kept tensors with values on both sides

    @property
    def is_parameter(self) -> bool:
        var = self.new or self.old
        return bool(var is not None and var.is_parameter)



def _persistables(program: ProgramDesc) -> dict[str, VarDesc]:
    return {v.name: v for v in program.global_block().vars.values() if v.persistable}


def _creators(program: ProgramDesc) -> dict[str, OpDesc]:
    """Each var of block 0 -> the first op there that writes it (its initialiser): one
    pass, so that diffing stays linear in the program's size."""
    found: dict[str, OpDesc] = {}
    for op in program.global_block().ops:
        for name in op.output_names():
            found.setdefault(name, op)
    return found


def _creator_change(old: OpDesc | None, new: OpDesc | None) -> str | None:
    """Why an initialiser differs (None when it does not)."""
    if old is None or new is None:
        return None if old is new else "its initialiser was added or removed"
    if old.type != new.type:
        return f"its initialiser changed from {old.type} to {new.type}"
    for key in list(old.attrs) + [k for k in new.attrs if k not in old.attrs]:
        a, b = old.attrs.get(key, "(unset)"), new.attrs.get(key, "(unset)")
        if a != b or type(a) is not type(b):
            return f"its initialiser's {key} changed from {a!r} to {b!r}"
    if old.inputs != new.inputs:
        return "its initialiser reads other inputs"
    return None


def _var_change(old: VarDesc, new: VarDesc) -> str | None:
    if old.kind != new.kind:
        return f"it was a {old.kind} and is now a {new.kind}"
    if old.shape != new.shape:
        return f"shape {short_shape(old.shape)} -> {short_shape(new.shape)}"
    if old.dtype != new.dtype:
        return f"dtype {old.dtype} -> {new.dtype}"
    return None


def optimizer_state_of(program: ProgramDesc, param: str) -> list[str]:
    """The persistable vars optimizer ops keep for ``param``: everything written by an op
    with the Optimize role whose ``op_role_var`` names it, except the parameter itself."""
    return _optimizer_states(program).get(param, [])


def _optimizer_states(program: ProgramDesc) -> dict[str, list[str]]:
    """`optimizer_state_of` for every parameter, in one pass over the ops."""
    found: dict[str, dict[str, None]] = {}
    state = _persistables(program)
    for block in program.blocks:
        for op in block.ops:
            if not op.role & OpRole.OPTIMIZE or not op.role_var:
                continue
            param = op.role_var[0]
            names = found.setdefault(param, {})
            for name in op.output_names():
                if name != param and name in state:
                    names[name] = None
    return {param: list(names) for param, names in found.items()}


def state_changes(old: ProgramDesc, new: ProgramDesc,
                  same_constant: Callable[[str], bool] | None = None
                  ) -> list[StateChange]:
    """What becomes of each persistable var when ``old``'s state moves to ``new`` (the
    module docstring has the rules). ``same_constant(name)`` decides for a var no op
    initialises (arrays the trace supplied, such as in-memory reader data); without it
    such a var is kept."""
    old_vars, new_vars = _persistables(old), _persistables(new)
    old_creators, new_creators = _creators(old), _creators(new)
    changes: dict[str, StateChange] = {}
    for name, nv in new_vars.items():
        ov = old_vars.get(name)
        if ov is None:
            changes[name] = StateChange(name, "added", new=nv)
            continue
        reason = _var_change(ov, nv)
        if reason is None and not nv.is_parameter:
            creator = new_creators.get(name)
            reason = _creator_change(old_creators.get(name), creator)
            if reason is None and creator is None and same_constant is not None and \
                    not same_constant(name):
                reason = "its value (given when the program compiled) differs"
        status = "kept" if reason is None else "reinitialised"
        changes[name] = StateChange(name, status, ov, nv, reason or "")
    states = _optimizer_states(new)
    for param in [n for n, c in changes.items() if c.status != "kept" and c.is_parameter]:
        for name in states.get(param, []):
            change = changes.get(name)
            if change is not None and change.status == "kept":
                change.status = "reinitialised"
                change.reason = f"optimizer state of {param}, which starts again"
    dropped = [StateChange(n, "dropped", old=v) for n, v in old_vars.items()
               if n not in new_vars]
    return list(changes.values()) + dropped
