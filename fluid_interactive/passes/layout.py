"""`choose_layouts`: run chains of image ops in the layout their kernels are fastest in.

A program holds NCHW images, as written, drawn and exported. Convolutions and strided
pooling run faster batch innermost (CHWN: `ops/layouts.py`), and the elementwise ops, the
normalisations and the gradients between them run in any layout. This pass, run when a
block is planned, finds the *chains*: ops whose spec has a `LayoutRule` accepting a
layout, joined through the 4-D vars of their image slots. It runs a chain in that layout
when the gains its ops' rules estimate outweigh the conversions at its ends; then each
member op reads and writes renamed vars (``<name>@CHWN``, declared in the block it
returns) with its attrs in that layout (`LayoutRule.attrs_in`), a ``transfer_layout`` op
brings each var the chain reads from outside into the layout (before its first reader
in the chain), and one takes each var the chain produces back to NCHW, under its own
name, right after its producer, when anything reads it in NCHW (an op outside the chain,
a member through a slot that is not an image slot, a sub-block, the method's return).
Nothing else changes: the other ops stay the same objects, and the block as written is
untouched.

It decides from the specs alone: an op joins a chain only where its rule accepts the
layout, its layout attr says NCHW, its attrs can be expressed in the layout, it writes no
persistable image and every image it touches has known sizes but for the batch.
"""
from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from math import prod
from typing import Any

from ..ir.blocks import owned_blocks, walk_ops
from ..ir.names import fresh_name
from ..ir.records import BlockDesc, OpDesc, ProgramDesc, VarDesc, returned_names
from ..ops.layouts import NCHW, TRANSFER_NS, LayoutRule, to_layout
from ..ops.registry import get_spec


@dataclass
class _Member:
    """An op that may run in a layout: its index, rule, the 4-D vars of its image slots
    (``made``: those it writes), the vars of its other slots (``plain``: these keep their
    NCHW names), and its attrs and gain there."""
    index: int
    rule: LayoutRule
    images: set[str]
    made: set[str]
    plain: set[str]
    attrs: dict[str, Any]
    gain: float


@dataclass
class _Chain:
    layout: str
    members: list[_Member] = field(default_factory=list)

    @property
    def images(self) -> set[str]:
        return {n for m in self.members for n in m.images}


class _Block:
    """What the pass needs to know of the block: types, writers, readers outside it."""

    def __init__(self, program: ProgramDesc, block: BlockDesc):
        self.program, self.block = program, block
        self.writers: dict[str, list[int]] = defaultdict(list)
        self.readers: dict[str, list[int]] = defaultdict(list)
        for i, op in enumerate(block.ops):
            for n in op.output_names():
                self.writers[n].append(i)
            for n in op.input_names():
                self.readers[n].append(i)
        # read from elsewhere than this block's ops: returned, or used in a sub-block
        self.outside = set(returned_names(block.returns))
        for sub in owned_blocks(program, block):
            self.outside.update(n for _, op in walk_ops(program, sub)
                                for n in op.input_names())

    def var(self, name: str) -> VarDesc | None:
        return self.program.find_var(self.block, name)

    def is_image(self, name: str) -> bool:
        var = self.var(name)
        return var is not None and var.kind == "tensor" and len(var.shape) == 4


def _slot_shapes(info: _Block, op: OpDesc) -> dict[str, tuple[int, ...]]:
    shapes = {}
    for slots in (op.inputs, op.outputs):
        for slot, names in slots.items():
            var = info.var(names[0]) if names else None
            if var is not None:
                shapes[slot] = var.shape
    return shapes


def _image_vars(info: _Block, op: OpDesc, rule: LayoutRule
                ) -> tuple[set[str], set[str]] | None:
    """(the 4-D vars in the op's image slots, those of them it writes), or None when one
    rules the op out."""
    images, made = set(), set()
    for slots, writes in ((op.inputs, False), (op.outputs, True)):
        for slot in rule.images:
            for name in slots.get(slot, ()):
                if not info.is_image(name):
                    continue
                var = info.var(name)
                assert var is not None
                if any(d < 0 for d in var.shape[1:]) or len(info.writers[name]) > 1 or (
                        writes and var.persistable):
                    return None
                images.add(name)
                if writes:
                    made.add(name)
    return images, made


def _member(info: _Block, index: int, layout: str) -> _Member | None:
    op = info.block.ops[index]
    spec = get_spec(op.type)
    rule = spec.layout
    if rule is None or layout not in rule.layouts or spec.random:
        return None
    full = spec.full_attrs(op.attrs)
    if rule.attr is not None and full.get(rule.attr) != NCHW:
        return None
    found = _image_vars(info, op, rule)
    if not found or not found[0]:
        return None
    shapes = _slot_shapes(info, op)
    attrs = rule.attrs_in(op.attrs, layout, shapes)
    if attrs is None:
        return None
    gain = rule.gain(full, shapes) if rule.gain is not None else 0.0
    plain = {n for slots in (op.inputs, op.outputs) for slot, names in slots.items()
             if slot not in rule.images for n in names}
    return _Member(index, rule, found[0], found[1], plain, attrs, gain)


def _chains(members: list[_Member], layout: str) -> list[_Chain]:
    """The members joined through shared image vars (union-find over the vars)."""
    parent: dict[str, str] = {}

    def root(name: str) -> str:
        while parent.setdefault(name, name) != name:
            parent[name] = parent[parent[name]]
            name = parent[name]
        return name

    for m in members:
        first, *rest = sorted(m.images)
        for name in rest:
            parent[root(name)] = root(first)
    chains: dict[str, _Chain] = {}
    for m in members:
        chains.setdefault(root(min(m.images)), _Chain(layout)).members.append(m)
    return list(chains.values())


@dataclass
class _Conversions:
    """Where a chain's vars cross its ends: entering vars by the member index that reads
    them first, leaving vars by the index of their producer."""
    entering: dict[str, int]
    leaving: dict[str, int]


def _conversions(info: _Block, chain: _Chain) -> _Conversions:
    """A var the chain does not make in its layout enters before the first member that
    reads it as an image; one it makes leaves when anything reads it in NCHW: an op
    outside, a member through another slot, a sub-block or the method's return."""
    inside = {m.index for m in chain.members}
    made = {n: m.index for m in chain.members for n in m.made}
    plain = {n for m in chain.members for n in m.plain}
    entering, leaving = {}, {}
    for name in chain.images:
        if name not in made:
            entering[name] = min(m.index for m in chain.members if name in m.images)
        elif name in info.outside or name in plain or \
                any(i not in inside for i in info.readers[name]):
            leaving[name] = made[name]
    return _Conversions(entering, leaving)


def _per_image(info: _Block, name: str) -> int:
    var = info.var(name)
    assert var is not None
    return prod(var.shape[1:])


def _pays(info: _Block, chain: _Chain, moves: _Conversions) -> bool:
    crossing = list(moves.entering) + list(moves.leaving)
    cost = TRANSFER_NS * sum(_per_image(info, n) for n in crossing)
    return sum(m.gain for m in chain.members) > cost


def _chosen(info: _Block, layouts: Iterable[str]) -> list[tuple[_Chain, _Conversions]]:
    taken: set[int] = set()
    chosen = []
    for layout in layouts:
        members = [m for i in range(len(info.block.ops)) if i not in taken
                   for m in [_member(info, i, layout)] if m is not None]
        for chain in _chains(members, layout):
            moves = _conversions(info, chain)
            if _pays(info, chain, moves):
                chosen.append((chain, moves))
                taken.update(m.index for m in chain.members)
    return chosen


def _layouts_preferred(block: BlockDesc) -> list[str]:
    """The layouts some op of the block gains by, in the order of their first such op."""
    found: list[str] = []
    for op in block.ops:
        rule = get_spec(op.type).layout
        if rule is not None and rule.gain is not None and rule.layouts[0] not in found:
            found.append(rule.layouts[0])
    return found


def _renamed(op: OpDesc, member: _Member, names: dict[str, str]) -> OpDesc:
    def rename(slots: dict[str, list[str]]) -> dict[str, list[str]]:
        return {slot: [names[n] if slot in member.rule.images and n in member.images
                       else n for n in vs] for slot, vs in slots.items()}
    return dataclasses.replace(op, inputs=rename(op.inputs), outputs=rename(op.outputs),
                               attrs=member.attrs)


def _transfer(src: str, dst: str, src_layout: str, dst_layout: str, like: OpDesc) -> OpDesc:
    return OpDesc("transfer_layout", {"X": [src]}, {"Out": [dst]},
                  {"src_layout": src_layout, "dst_layout": dst_layout}, like.role, (),
                  like.loc)


def _rewrite(info: _Block, chosen: list[tuple[_Chain, _Conversions]]) -> BlockDesc:
    program, block = info.program, info.block
    new_vars = dict(block.vars)
    before: dict[int, list[OpDesc]] = defaultdict(list)
    after: dict[int, list[OpDesc]] = defaultdict(list)
    replaced: dict[int, OpDesc] = {}
    for chain, moves in chosen:
        names = {}
        for name in sorted(chain.images):
            var = info.var(name)
            assert var is not None
            new = fresh_name(f"{name}@{chain.layout}",
                             lambda n: n in new_vars or program.find_var(block, n) is not None)
            names[name] = new
            new_vars[new] = VarDesc(new, to_layout(var.shape, chain.layout), var.dtype)
        for m in chain.members:
            replaced[m.index] = _renamed(block.ops[m.index], m, names)
        for name, i in moves.entering.items():
            before[i].append(_transfer(name, names[name], NCHW, chain.layout, block.ops[i]))
        for name, i in moves.leaving.items():
            after[i].append(_transfer(names[name], name, chain.layout, NCHW, block.ops[i]))
    ops: list[OpDesc] = []
    for i, op in enumerate(block.ops):
        ops.extend(before[i])
        ops.append(replaced.get(i, op))
        ops.extend(after[i])
    return dataclasses.replace(block, ops=ops, vars=new_vars)


def choose_layouts(program: ProgramDesc, block: BlockDesc) -> BlockDesc:
    """``block`` with its chains of image ops run in their kernels' faster layout where
    that pays (see the module doc); the same block when nothing does."""
    layouts = _layouts_preferred(block)
    if not layouts:
        return block
    info = _Block(program, block)
    chosen = _chosen(info, layouts)
    return _rewrite(info, chosen) if chosen else block
