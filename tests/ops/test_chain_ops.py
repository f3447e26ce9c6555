"""``fused_elementwise`` against its members run one by one: bit-identical, with and
without side inputs, in place or not; a chain whose members change the shape is refused."""
import numpy as np
import pytest
from ops.harness import check_op, run_forward

f32 = np.float32


def members(x, ys, ops):
    """The chain's result, member by member through the ordinary ops."""
    h, side = x, iter(ys)
    for op_type, attrs, has_side in ops:
        inputs = {"X": h, "Y": next(side)} if has_side else {"X": h}
        h = run_forward(op_type, inputs, attrs)["Out"][0]
    return h


@pytest.mark.parametrize("ops,side_shapes", [
    ([["elementwise_add", {"axis": 1}, True], ["relu", {}, False]], [(5,)]),
    ([["scale", {"scale": 3.0, "bias": -1.0}, False], ["tanh", {}, False],
      ["elementwise_mul", {"axis": -1}, True], ["sigmoid", {}, False]], [(4, 5)]),
    ([["elementwise_sub", {"axis": -1}, True], ["elementwise_max", {"axis": 1}, True],
      ["sqrt", {}, False]], [(4, 5), (5,)]),
])
def test_chain_equals_its_members(rng, ops, side_shapes):
    x = rng.standard_normal((4, 5)).astype(f32)
    ys = [rng.standard_normal(s).astype(f32) for s in side_shapes]
    if ops[-1][0] == "sqrt":
        ys[1] = np.abs(ys[1])
    expected = members(x, ys, ops)
    got = check_op("fused_elementwise", {"X": x, "Ys": ys}, {"ops": ops},
                   reference=lambda **a: expected, rtol=0, atol=0)
    np.testing.assert_array_equal(got["Out"][0], expected)


def test_a_member_that_changes_the_shape_is_refused(rng):
    from fluid_interactive.errors import FluidError
    x = rng.standard_normal((4, 1)).astype(f32)
    y = rng.standard_normal((4, 5)).astype(f32)
    ops = [["relu", {}, False], ["elementwise_add", {"axis": -1}, True], ["relu", {}, False]]
    with pytest.raises((FluidError, ValueError), match="chain"):
        check_op("fused_elementwise", {"X": x, "Ys": [y]}, {"ops": ops})
