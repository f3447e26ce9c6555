"""Sub-blocks in the program description: the text form prints a sub-block under its op,
JSON and checkpoints round-trip it, names resolve to the innermost declaration, and the
verifier checks sub-block references, owners, slots and what leaves a sub-block."""
import copy

import numpy as np
import pytest

import fluid
from fluid_interactive.frontend.program import trace_program
from fluid_interactive.ir.blocks import outer_interface, owners, sub_block_index, walk_ops
from fluid_interactive.ir.records import OpDesc, VarDesc

L = fluid.layers


class Loop(fluid.Program):
    @fluid.network("x", "n")
    def step(self, x, n):
        x = L.data(name="x", shape=[3], dtype="float32")
        n = L.data(name="n", shape=[1], dtype="int64", append_batch_size=False)
        w = L.create_parameter([3, 3], "float32", name="w")
        h = L.scale(x, 1.0)
        i = L.fill_constant([1], "int64", 0)
        cond = L.less_than(i, n)
        loop = L.While(cond)
        with loop.block():
            L.assign(L.tanh(L.matmul(h, w)), output=h)
            L.increment(i, in_place=True)
            L.less_than(i, n, cond=cond)
        loss = L.mean(h)
        fluid.optimizer.SGD(learning_rate=0.1).minimize(loss)
        return loss


@pytest.fixture
def program():
    return trace_program(Loop())


def test_a_sub_block_is_printed_under_its_op(program):
    text = fluid.format_program(program)
    lines = text.splitlines()
    while_line = next(k for k, line in enumerate(lines) if "= while(" in line)
    assert lines[while_line].startswith("  ") and not lines[while_line].startswith("    ")
    assert lines[while_line + 1].startswith("    block 2 (in block 1)")
    assert lines[while_line + 2].startswith("      ") and "matmul(" in lines[while_line + 2]
    grad_line = next(k for k, line in enumerate(lines) if "= while_grad(" in line)
    assert lines[grad_line + 1].startswith("    block 3 (in block 1); takes ")
    assert text.count("matmul(X=") == 1 and "\nblock 2" not in text   # printed once, nested


def test_names_resolve_to_the_innermost_declaration(program):
    grad_block = program.blocks[3]
    kept = grad_block.feeds
    assert kept and all(n in grad_block.vars for n in kept)
    for name in kept:   # the gradient block's own copy, not the var of the forward body
        assert program.find_var(grad_block, name) is grad_block.vars[name]
    assert program.find_var(program.blocks[2], "w") is program.global_block().vars["w"]


def test_json_round_trip_keeps_sub_blocks(program):
    back = fluid.program_from_json(fluid.program_to_json(program))
    assert fluid.format_program(back) == fluid.format_program(program)
    assert [b.parent_idx for b in back.blocks] == [b.parent_idx for b in program.blocks]
    assert [b.feeds for b in back.blocks] == [b.feeds for b in program.blocks]
    fluid.check_program(back)


def test_a_checkpoint_of_a_program_with_loops_loads_and_runs(tmp_path, rng):
    prog = Loop().Compile(seed=0)
    x = rng.standard_normal((2, 3)).astype(np.float32)
    prog.step(x, np.array([3]))
    prog.save(str(tmp_path / "ckpt"))
    loaded = fluid.load(str(tmp_path / "ckpt"))
    assert loaded.step(x, np.array([3])) == pytest.approx(prog.step(x, np.array([3])))


def test_block_structure_helpers(program):
    method = program.block("step")
    (owner_block, index) = owners(program)[2]
    assert owner_block is method and sub_block_index(method.ops[index]) == 2
    reads, writes = outer_interface(program, program.blocks[2])
    assert set(writes) == {method.ops[index].output("Out")[k] for k in range(len(writes))}
    assert "w" in reads and "n" in reads
    types = [op.type for _, op in walk_ops(program, method)]
    assert types.index("while") < types.index("matmul")   # an owner before its block's ops


def _error(program) -> str:
    with pytest.raises(fluid.VerifyError) as err:
        fluid.check_program(program)
    return str(err.value)


def _while_op(program):
    return next(op for op in program.block("step").ops if op.type == "while")


def test_verifier_checks_sub_block_references(program):
    bad = copy.deepcopy(program)
    _while_op(bad).attrs["sub_block"] = 9
    assert "not the index of a block" in _error(bad)
    bad = copy.deepcopy(program)
    _while_op(bad).attrs["sub_block"] = 3     # the gradient block: owned by while_grad
    assert "owns block 3, which op" in _error(bad) or "whose parent" in _error(bad)
    bad = copy.deepcopy(program)
    bad.blocks[2].parent_idx = 0
    assert "whose parent is block 0" in _error(bad)
    bad = copy.deepcopy(program)
    del _while_op(bad).attrs["sub_block"]
    assert "no op owns it" in _error(bad)


def test_verifier_checks_the_owner_lists_what_its_block_uses(program):
    bad = copy.deepcopy(program)
    op = _while_op(bad)
    op.inputs["X"] = [n for n in op.inputs["X"] if n != "w"]
    assert "reads ['w']" in _error(bad)


def test_a_value_leaving_a_sub_block_is_declared_outside(program):
    bad = copy.deepcopy(program)
    body = bad.blocks[2]
    inner = next(n for n in body.vars if n.startswith("tanh"))
    method = bad.block("step")
    method.ops.insert(len(method.ops) - 1, OpDesc("assign", {"X": [inner]}, {"Out": ["leak"]}))
    method.vars["leak"] = VarDesc("leak", (-1, 3))
    assert f"reads {inner!r}, which is declared only inside block 2" in _error(bad)


def test_only_updating_ops_and_sub_blocks_write_a_var_twice(program):
    ok = copy.deepcopy(program)
    fluid.check_program(ok)   # the while op rewrites h, i and cond; increment updates i
    bad = copy.deepcopy(program)
    method = bad.block("step")
    scale = next(op for op in method.ops if op.type == "scale")
    method.ops.insert(method.ops.index(scale) + 1,
                      OpDesc("tanh", {"X": scale.output("Out")}, {"Out": scale.output("Out")}))
    assert "a second time" in _error(bad)


def test_the_condition_is_checked_as_a_bool_of_one_value(program):
    bad = copy.deepcopy(program)
    op = _while_op(bad)
    op.inputs["Condition"] = [next(n for n in op.input("X") if n.startswith("scale"))]
    message = _error(bad)
    assert "condition of a While loop must be a bool var of shape [1]" in message
    assert "got float32[?, 3]" in message


def _variant(activation, shift):
    class P(fluid.Program):
        @fluid.network("x")
        def step(self, x):
            x = L.data("x", shape=[3])
            h = L.scale(L.scale(x, 2.0) if shift else x, 1.0)
            i, n = L.fill_constant([1], "int64", 0), L.fill_constant([1], "int64", 3)
            cond = L.less_than(i, n)
            loop = L.While(cond)
            with loop.block():
                L.assign(getattr(L, activation)(h), output=h)
                L.increment(i, in_place=True)
                L.less_than(i, n, cond=cond)
            return h
    return P


def test_diff_reports_changes_inside_a_loop_body():
    same = fluid.diff(_variant("tanh", False), _variant("tanh", False))
    assert not same.changed
    moved = fluid.diff(_variant("tanh", False), _variant("tanh", True)).text()
    assert "in its block" not in moved   # the body is the same; its block index is no change
    edited = fluid.diff(_variant("tanh", False), _variant("sigmoid", False))
    assert "while body: tanh → sigmoid" in edited.text()          # by layer
    ops = edited.text(detail="ops")                                # and op by op
    assert "in its block: ~ sigmoid_0.tmp_0" in ops and "type tanh -> sigmoid" in ops
