"""Which ops are drawn together: one node per layer, per parameter's optimizer update, and
one for the whole backward pass.

A layer's vars carry its name (`ir.layers`: ``mlp/fc_0.tmp_2`` belongs to layer ``mlp/fc_0``
in scope ``mlp``). Everything else is decided by op roles:

* forward ops group by the layer of their first output; a layer whose ops run again later in
  the block (a network called twice, a shared discriminator) is a second *call*, drawn as its
  own node, so the drawing follows the data;
* backward ops form one group (drawn folded unless asked for), or, drawn on their own (the
  backward pass or a gradient block opened), one group per layer they differentiate
  (`gradient_layer`);
* optimize ops group by the parameter in their ``op_role_var``: one group per parameter,
  holding its update and its optimizer state;
* learning-rate schedule ops form one group, RPC and distributed ops another, reader ops (ops
  that touch a var of reader kind) a third;
* an op that owns a sub-block (a loop, a branch, a StaticRNN step, or the gradient of one)
  is a group of its own whatever its role, named after what it runs (`nesting`): it is
  drawn as one box that opens into its body.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field

from ..ir.blocks import sub_block_index
from ..ir.layers import layer_of, layer_type, scope_of
from ..ir.records import BlockDesc, OpDesc, OpRole, ProgramDesc
from .nesting import construct_name
from .style import VarLookup, is_reader_op, op_kind

__all__ = ["Group", "group_ops", "layer_of", "scope_of", "layer_type", "NOT_FORWARD",
           "forward_values", "gradient_layer"]

# forward_only drops every op carrying one of these bits (LR schedule ops only feed the
# optimizer, so they go with it).
NOT_FORWARD = OpRole.BACKWARD | OpRole.OPTIMIZE | OpRole.LRSCHED


@dataclass
class Group:
    """Ops of one block drawn as one node (or, when expanded, as one cluster)."""
    key: str                 # unique within the block: 'mlp/fc_0', 'mlp/fc_0#2', '@backward'
    kind: str                # palette key: forward, backward, optimize, lrsched, rpc, reader
    layer: str = ""          # forward: the layer; optimize: the parameter; else ''
    ops: list[int] = field(default_factory=list)
    call: int = 1            # forward: which use of the layer in this block
    sub_block: int | None = None   # the block its one op runs (a loop, a branch), or None

    @property
    def scope(self) -> str:
        return scope_of(self.layer) if self.kind == "forward" else ""

    @property
    def runs_block(self) -> bool:
        return self.sub_block is not None

    @property
    def short(self) -> str:
        return self.layer.rpartition("/")[2] if self.layer else self.key


def _first_name(op: OpDesc) -> str | None:
    for names in list(op.outputs.values()) + list(op.inputs.values()):
        if names:
            return names[0]
    return None


def forward_values(program: ProgramDesc) -> set[str]:
    """Names the forward computation gives: what ops without a gradient, optimize or
    schedule role write, what a forward sub-block takes per run (a step's slice and
    memories), and the program's data and state."""
    found: set[str] = set()
    for block in program.blocks:
        found.update(n for n, v in block.vars.items() if v.persistable or v.is_data)
        for op in block.ops:
            if op.role & NOT_FORWARD:
                continue
            found.update(op.output_names())
            sub = sub_block_index(op)
            if sub is not None and 0 < sub < len(program.blocks):
                found.update(program.blocks[sub].feeds)
    return found


def gradient_layer(op: OpDesc, forward: set[str]) -> str:
    """The layer a backward op belongs to: that of the gradient it takes (its first
    input that is no forward value), or of the gradient it writes when it sums or passes
    on gradients of that one var (its output's layer is among its inputs'); that of its
    output when it takes none (a loss's seed, zeros for an accumulator)."""
    taken = [layer_of(n) for n in op.input_names() if n not in forward]
    written = [layer_of(n) for n in op.output_names()]
    if written and written[0] in taken:
        return written[0]
    if taken:
        return taken[0]
    return written[0] if written else op.type


def _classify(op: OpDesc, var_of: VarLookup) -> tuple[str, str, str]:
    """(kind, group key, layer) of one op; forward keys are made unique by the caller."""
    role = op.role
    # keys of non-forward groups start with '@', which no layer name does
    if is_reader_op(op, var_of):
        return "reader", "@reader", ""
    if role & (OpRole.RPC | OpRole.DIST):
        return "rpc", "@communication", ""
    if role & OpRole.LRSCHED:
        return "lrsched", "@lr", ""
    if role & OpRole.OPTIMIZE:
        param = op.role_var[0] if op.role_var else ""
        return "optimize", "@optimize:" + param, param
    if role & OpRole.BACKWARD:
        return "backward", "@backward", ""
    first = _first_name(op)
    return "forward", "", layer_of(first) if first else op.type


def group_ops(program: ProgramDesc, block: BlockDesc, *, forward_only: bool = False,
              backward_layers: bool = False) -> list[Group]:
    """The groups of ``block``'s ops, in the order their first op appears; with
    ``backward_layers`` the backward ops group by the layer they differentiate."""
    groups: list[Group] = []
    by_key: dict[str, Group] = {}
    calls: dict[str, int] = {}
    run_state: set[str] = set()   # persistable vars the current forward run has read
    var_of = functools.partial(program.find_var, block)
    forward = forward_values(program) if backward_layers else set()
    for i, op in enumerate(block.ops):
        if forward_only and op.role & NOT_FORWARD:
            continue
        sub = sub_block_index(op)
        if sub is not None:
            groups.append(Group(f"@block{sub}", op_kind(op, var_of),
                                construct_name(program, block, op), [i], sub_block=sub))
            continue
        kind, key, layer = _classify(op, var_of)
        if kind == "backward" and backward_layers:
            _gradient_run(groups, calls, gradient_layer(op, forward), i)
            continue
        if kind == "forward":
            state = {n for n in op.input_names()
                     if (v := program.find_var(block, n)) is not None and v.persistable}
            last = groups[-1] if groups else None
            # the same layer again right away is a second call once it reads its weights
            # a second time
            if last is not None and last.kind == "forward" and last.layer == layer \
                    and not last.runs_block and not state & run_state:
                last.ops.append(i)
                run_state |= state
                continue
            run_state = set(state)
            n = calls[layer] = calls.get(layer, 0) + 1
            group = Group(layer if n == 1 else f"{layer}#{n}", kind, layer, [i], n)
            groups.append(group)
            by_key[group.key] = group
            continue
        found = by_key.get(key)
        if found is None:
            found = by_key[key] = Group(key, kind, layer)
            groups.append(found)
        found.ops.append(i)
    return groups


def _gradient_run(groups: list[Group], calls: dict[str, int], layer: str, i: int) -> None:
    """Backward op ``i`` of ``layer``'s gradient joins the group before it when that is
    the same layer's, else starts the layer's next run (an accumulation after other
    layers' gradients is a box of its own, ``fc_0 (2)``)."""
    last = groups[-1] if groups else None
    if last is not None and last.kind == "backward" and last.layer == layer \
            and not last.runs_block:
        last.ops.append(i)
        return
    key = "@backward:" + layer
    n = calls[key] = calls.get(key, 0) + 1
    groups.append(Group(key if n == 1 else f"{key}#{n}", "backward", layer, [i], n))
