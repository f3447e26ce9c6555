"""Which layer and which ``var_scope`` a var belongs to, read from its name.

A layer helper names a layer ``<scope>/<type>_<n>`` (``mlp/fc_0``), its outputs
``<layer>.tmp_<k>`` and its parameters ``<layer>.w_<k>`` / ``<layer>.b_<k>``, so the layer of
a var is its name up to the first ``.`` after the last ``/``, and its scope what comes
before that ``/``. Drawings group ops by it (`render.groups`), summaries count parameters
by it, watching a scope selects by it.
"""
from __future__ import annotations

import re
from collections.abc import Iterator

from .blocks import body_ops, sub_block_index, walk_ops
from .records import BlockDesc, OpDesc, OpRole, ProgramDesc

__all__ = ["layer_of", "scope_of", "layer_type", "in_scope", "model_ops", "NOT_MODEL",
           "own_names", "construct_name"]

#: Roles of ops that are not the model's own computation: its gradient, its optimizer, the
#: learning-rate schedule and communication.
NOT_MODEL = OpRole.BACKWARD | OpRole.OPTIMIZE | OpRole.LRSCHED | OpRole.RPC | OpRole.DIST


def layer_of(name: str) -> str:
    """``mlp/fc_0.tmp_2`` -> ``mlp/fc_0``; ``avg_cost`` -> ``avg_cost``."""
    head, sep, last = name.rpartition("/")
    stem = last.split(".", 1)[0] or last
    return head + sep + stem


def scope_of(layer: str) -> str:
    """``mlp/fc_0`` -> ``mlp``; ``fc_0`` -> ``''``."""
    return layer.rpartition("/")[0]


def layer_type(layer: str) -> str:
    """``mlp/fc_0`` -> ``fc``: the layer function that made it."""
    short = layer.rpartition("/")[2]
    return re.sub(r"_\d+$", "", short) or short


def in_scope(name: str, scope: str) -> bool:
    """Whether var ``name`` lies in ``scope`` (``'mlp'`` or ``'mlp/'``) or is that layer
    (``'mlp/fc_0'`` holds ``mlp/fc_0.tmp_2``)."""
    scope = scope.rstrip("/")
    return name.startswith(scope + "/") or layer_of(name) == scope


def model_ops(block: BlockDesc, program: ProgramDesc | None = None
              ) -> Iterator[tuple[str, OpDesc]]:
    """``(layer, op)`` for each op of the model in ``block`` (a forward op that writes
    something), in block order; the layer is that of the op's first output. With
    ``program``, the ops of the blocks nested in ``block`` (a loop's body) come in place
    of the op that runs them."""
    ops = [op for _, op in walk_ops(program, block)] if program is not None else block.ops
    for op in ops:
        outputs = op.output_names()
        if program is not None and sub_block_index(op) is not None:
            continue
        if outputs and not op.role & NOT_MODEL:
            yield layer_of(outputs[0]), op


def own_names(program: ProgramDesc, op: OpDesc) -> tuple[list[str], list[str]]:
    """The inputs of ``op`` its body does not read and the outputs it does not write:
    what the op itself reads (a loop's condition, a sequence it slices) and makes (the
    stacked outputs, the values kept for the gradient)."""
    ops = body_ops(program, op)
    reads = {n for o in ops for n in o.input_names()}
    writes = {n for o in ops for n in o.output_names()}
    ins = list(dict.fromkeys(n for n in op.input_names() if n not in reads))
    outs = list(dict.fromkeys(n for n in op.output_names() if n not in writes))
    return ins, outs


def construct_name(program: ProgramDesc, block: BlockDesc, op: OpDesc) -> str:
    """The name of what an op running a block runs (``while_1``, ``static_rnn_0``,
    ``cond_0``): the layer of the op's own vars (`own_names`), one that is not a plain
    tensor first (the kept values); the op's type when it has none."""
    ins, outs = own_names(program, op)
    names = outs + ins
    special = [n for n in names
               if (v := program.find_var(block, n)) is not None and v.kind != "tensor"]
    for n in special + names:
        return layer_of(n)
    return op.type
