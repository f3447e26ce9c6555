"""Every traced program passes the op-aware verifier after backward and optimizers ran,
and the verifier catches an op whose declared output type its shape rule contradicts."""
import pytest

import fluid
from fluid_interactive.ir.records import VarDesc


class Net(fluid.Program):
    @fluid.network("x", "y")
    def train(self, x, y):
        x = fluid.layers.data(name="x", shape=[5], dtype="float32")
        y = fluid.layers.data(name="y", shape=[2], dtype="float32")
        h = fluid.layers.fc(input=x, size=4, act="relu")
        h = h * 2.0 + fluid.layers.fc(input=x, size=4)
        out = fluid.layers.fc(input=h, size=2, act="tanh")
        loss = fluid.layers.mean(fluid.layers.square_error_cost(out, y))
        fluid.optimizer.SGD(learning_rate=0.1).minimize(loss)
        return loss


def test_traced_program_verifies():
    prog = Net().Compile(seed=0)
    fluid.check_program(prog.program)


def test_verifier_catches_a_wrong_declared_type():
    prog = Net().Compile(seed=0)
    program = prog.program.clone()
    block = program.block("train")
    name = block.ops[0].outputs["Out"][0]
    block.vars[name] = VarDesc(name, (-1, 7), "float32")
    with pytest.raises(fluid.VerifyError, match="declared float32\\[\\?, 7\\]"):
        fluid.check_program(program)


def test_verifier_catches_an_unknown_attr():
    program = Net().Compile(seed=0).program.clone()
    program.block("train").ops[0].attrs["bogus"] = 1
    with pytest.raises(fluid.VerifyError, match="no attribute"):
        fluid.check_program(program)
