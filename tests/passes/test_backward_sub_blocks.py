"""The backward pass through sub-blocks, structurally: a loop's gradient is one op with a
gradient block of its own, the forward loop keeps exactly the values that block reads, a
value overwritten before its gradient needs it is read from a snapshot, and every
program it makes passes the verifier."""
import numpy as np

import fluid
from fluid_interactive.frontend.program import trace_program
from fluid_interactive.ir.blocks import outer_interface, walk_ops
from fluid_interactive.ops.registry import get_spec

L = fluid.layers


class Loop(fluid.Program):
    @fluid.network("x", "n")
    def step(self, x, n):
        x = L.data(name="x", shape=[3], dtype="float32")
        n = L.data(name="n", shape=[1], dtype="int64", append_batch_size=False)
        w = L.create_parameter([3, 3], "float32", name="w")
        p = L.create_parameter([3], "float32", name="p")
        h = L.scale(x * p, 1.0)
        early = h * h                      # reads h before the loop overwrites it
        i = L.fill_constant([1], "int64", 0)
        cond = L.less_than(i, n)
        loop = L.While(cond)
        with loop.block():
            a = L.matmul(h, w)
            b = L.elementwise_add(a, x)     # add's gradient reads shapes, a's value unused
            L.assign(L.tanh(b), output=h)
            L.increment(i, in_place=True)
            L.less_than(i, n, cond=cond)
        loss = L.mean(h) + L.mean(early)
        fluid.optimizer.SGD(learning_rate=0.1).minimize(loss)
        return loss


def _ops(program, block, type_):
    return [op for op in block.ops if op.type == type_]


def test_a_loop_gradient_is_one_op_with_a_gradient_block():
    program = trace_program(Loop())
    method = program.block("step")
    (forward,), (grad,) = _ops(program, method, "while"), _ops(program, method, "while_grad")
    grad_block = program.blocks[grad.attrs["sub_block"]]
    assert grad_block.parent_idx == method.idx
    assert grad.input("StepScopes") == forward.output("StepScopes")
    reads, writes = outer_interface(program, grad_block)
    assert grad.input("X") == reads and grad.output("Out") == writes
    assert "w@GRAD" in writes   # the weight's gradient, summed over the iterations
    assert all(op.role & fluid.OpRole.BACKWARD for op in grad_block.ops)


def test_the_forward_keeps_only_what_the_gradient_block_reads():
    program = trace_program(Loop())
    method = program.block("step")
    (forward,), (grad,) = _ops(program, method, "while"), _ops(program, method, "while_grad")
    grad_block = program.blocks[grad.attrs["sub_block"]]
    kept, shapes = forward.attrs["keep"], forward.attrs["keep_shapes"]
    assert sorted(kept + shapes) == sorted(grad_block.feeds)
    read = {n for _, op in walk_ops(program, grad_block) for n in op.input_names()}
    assert set(kept) <= read
    body = program.blocks[forward.attrs["sub_block"]]
    assert "i" not in kept and not any(n.startswith("less_than") for n in kept)
    assert set(kept) <= set(body.vars) | set(outer_interface(program, body)[1])
    # the add's gradient reads its inputs for their shapes: the matmul's value is not kept
    matmul = next(n for n in body.vars if n.startswith("matmul"))
    assert shapes == [matmul] and matmul not in kept
    assert any(n.startswith("tanh") for n in kept)   # tanh's gradient reads its output


def test_a_value_overwritten_before_its_gradient_reads_a_snapshot():
    program = trace_program(Loop())
    method = program.block("step")
    (forward,) = _ops(program, method, "while")
    h = next(n for n in forward.input("X") if n.startswith("scale"))
    snapshots = [op for op in method.ops if op.type == "assign" and op.input("X") == [h]
                 and "@SNAPSHOT" in op.output("Out")[0]]
    assert len(snapshots) == 1
    assert method.ops.index(snapshots[0]) == method.ops.index(forward) - 1
    # the gradient of `early = h * h` reads the snapshot, not h after the loop
    squared = [op for op in method.ops if op.type == "elementwise_mul_grad"
               and op.input("X") == op.input("Y")]
    assert [op.input("X") for op in squared] == [snapshots[0].output("Out")]
    body = program.blocks[forward.attrs["sub_block"]]
    assert any("@SNAPSHOT" in n for n in body.vars)   # h before the body's assign


def test_programs_with_loop_gradients_verify_and_run(rng):
    prog = Loop().Compile(seed=0)
    fluid.check_program(prog.program)
    x = rng.standard_normal((4, 3)).astype(np.float32)
    losses = [prog.step(x, np.array([3])) for _ in range(5)]
    assert losses[-1] < losses[0]


def test_every_grad_op_has_a_spec_and_every_owner_a_rule():
    program = trace_program(Loop())
    for _, op in walk_ops(program, program.block("step")):
        spec = get_spec(op.type)
        assert ("sub_block" in op.attrs) == (spec.sub_block is not None)
