"""Programs whose blocks do not nest as a tree (a block its own parent, two blocks each
other's parent, a sub_block attr out of range or naming its own block, nesting 10,000
deep), given to every entry point that takes a program: each refuses it with a
`VerifyError` within a few seconds, never loops for ever or overflows the stack."""
import copy

import numpy as np
import pytest

import fluid
from fluid_interactive.ir.blocks import MAX_NESTING
from fluid_interactive.ir.records import BlockDesc, OpDesc, ProgramDesc

from .bounded import call_within
from .programs import Loop, edit_program, saved


def _loop_program() -> ProgramDesc:
    return Loop().Compile(seed=0).program


def _owner(program: ProgramDesc) -> OpDesc:
    """The op owning the loop's body."""
    return next(op for b in program.blocks for op in b.ops if "sub_block" in op.attrs)


def _self_parent(p):
    p.blocks[-1].parent_idx = p.blocks[-1].idx


def _cycle(p):
    body = p.blocks[-1]
    p.blocks.append(BlockDesc(len(p.blocks), body.idx))
    body.parent_idx = len(p.blocks) - 1


def _out_of_range(p):
    _owner(p).attrs["sub_block"] = 99


def _own_block(p):
    owner = _owner(p)
    holder = next(b for b in p.blocks if owner in b.ops)
    owner.attrs["sub_block"] = holder.idx


def _negative(p):
    _owner(p).attrs["sub_block"] = -1


EDITS = {"self_parent": _self_parent, "cycle": _cycle, "out_of_range": _out_of_range,
         "own_block": _own_block, "negative": _negative}


def _deep(depth: int = 10_000) -> ProgramDesc:
    """A well-linked program nesting ``depth`` blocks, each owned by an op of its parent."""
    blocks = [BlockDesc(0, -1)]
    for i in range(1, depth + 1):
        blocks.append(BlockDesc(i, i - 1))
        blocks[i - 1].ops.append(OpDesc("conditional_block", attrs={"sub_block": i}))
    return ProgramDesc(blocks=blocks, name="deep")


def _hostile(kind: str) -> ProgramDesc:
    if kind == "deep":
        return _deep()
    program = copy.deepcopy(_loop_program())
    EDITS[kind](program)
    return program


ENTRY_POINTS = {
    "format_program": fluid.format_program,
    "graph": fluid.graph,
    "graph_ops": lambda p: fluid.graph(p, detail="ops"),
    "diff_old": lambda p: str(fluid.diff(p, _loop_program())),
    "diff_new": lambda p: str(fluid.diff(_loop_program(), p)),
    "transpile": lambda p: fluid.transpile(p, trainers=2, pservers=2),
    "json": lambda p: fluid.program_from_json(fluid.program_to_json(p)),
    "compile": lambda p: fluid.CompiledProgram(p, seed=0),
}


@pytest.mark.parametrize("kind", [*EDITS, "deep"])
@pytest.mark.parametrize("entry", list(ENTRY_POINTS))
def test_every_entry_point_refuses_a_program_that_does_not_nest(kind, entry):
    program = _hostile(kind)
    with pytest.raises(fluid.VerifyError):
        call_within(20, ENTRY_POINTS[entry], program)


def test_nesting_just_within_the_bound_still_formats_draws_and_diffs():
    program = _deep(MAX_NESTING)
    text = call_within(20, fluid.format_program, program)
    assert text.count("conditional_block") == MAX_NESTING
    drawing = call_within(20, lambda: fluid.graph(program, detail="ops").dot)
    assert drawing.count("subgraph") >= MAX_NESTING   # a cluster per nested block
    assert "no differences" in str(call_within(20, fluid.diff, program, program))


@pytest.mark.parametrize("kind", list(EDITS))
def test_a_checkpoint_with_such_a_program_is_refused_at_load(tmp_path, kind):
    path = saved(tmp_path / "ckpt")

    def edit(doc):
        blocks = doc["blocks"]
        if kind == "self_parent":
            blocks[-1]["parent_idx"] = blocks[-1]["idx"]
        elif kind == "cycle":
            blocks[1]["parent_idx"] = len(blocks) - 1
        else:
            value = {"out_of_range": 99, "own_block": 1, "negative": -1}[kind]
            blocks[1]["ops"][0]["attrs"]["sub_block"] = value
    edit_program(path, edit)
    with pytest.raises(fluid.CheckpointError):
        call_within(20, fluid.load, str(path))


def test_a_well_formed_loop_program_still_passes_every_entry_point():
    program = _loop_program()
    for name, entry in ENTRY_POINTS.items():
        if name != "compile":
            call_within(60, entry, program)
    prog = fluid.CompiledProgram(program, seed=0)
    assert np.isfinite(prog.train_step(np.ones((2, 4), "float32")))


class Rnn(fluid.Program):
    @fluid.network("x")
    def train_step(self, x):
        x = fluid.layers.data(name="x", shape=[-1, -1, 2], dtype="float32",
                              append_batch_size=False)
        w = fluid.layers.create_parameter(shape=[2, 2], dtype="float32", name="w")
        rnn = fluid.layers.StaticRNN()
        with rnn.step():
            x_t = rnn.step_input(x)
            h = rnn.memory(shape=[-1, 2], batch_ref=x_t)
            new = fluid.layers.tanh(fluid.layers.matmul(h, w) + x_t)
            rnn.update_memory(h, new)
            rnn.step_output(new)
        loss = fluid.layers.mean(rnn())
        fluid.optimizer.SGD(learning_rate=0.1).minimize(loss)
        return loss


@pytest.mark.parametrize("attr", ["step_inputs", "ex_states", "states", "step_outputs",
                                  "keep", "step_grads", "input_grads"])
def test_a_loop_attr_naming_no_var_is_a_verify_error(attr):
    program = copy.deepcopy(Rnn().Compile(seed=0).program)
    op = next(op for b in program.blocks for op in b.ops if attr in op.attrs)
    op.attrs[attr] = [*op.attrs[attr], "nope.tmp"]
    with pytest.raises(fluid.VerifyError, match=f"attr '{attr}' names 'nope.tmp'"):
        fluid.check_program(program)
