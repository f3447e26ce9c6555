"""Paddle 1.8's case, switch_case, IfElse, is_empty and Print: the values each gives, their
gradients against float64 finite differences (through the op harness's `check_block`:
plan, reference interpreter, device module), Print's lines from inside a compiled While
loop and from the backward pass, and the errors each gives at the user's line."""
import numpy as np
import pytest
from ops.harness import check_block, check_grad, run_forward

import fluid
from fluid_interactive.errors import OpArgumentError, ProgramDefinitionError, ShapeError

L = fluid.layers


def _data(name, shape, dtype="float64", grad=True):
    return L.data(name=name, shape=shape, dtype=dtype, append_batch_size=False,
                  stop_gradient=not grad)


# --- case, switch_case -------------------------------------------------------------------------

def _case_build():
    x, k = _data("x", [2, 3]), _data("k", [1], "int64", grad=False)
    one, two = L.fill_constant([1], "int64", 1), L.fill_constant([1], "int64", 2)
    return L.case([(L.less_than(k, one), lambda: L.tanh(x)),
                   (L.less_than(k, two), lambda: x * x)],
                  default=lambda: L.scale(x, -3.0))


@pytest.mark.parametrize("k,want", [(0, np.tanh), (1, np.square), (5, lambda v: -3 * v)])
def test_case_runs_the_first_true_branch_and_differentiates_through_it(rng, k, want):
    x = rng.standard_normal((2, 3))
    (out,) = check_block(_case_build, {"x": x, "k": np.array([k])}, wrt=["x"])
    np.testing.assert_allclose(out, want(x), rtol=1e-12)


def test_case_without_default_takes_the_last_pair():
    def build():
        x, k = _data("x", [2]), _data("k", [1], "int64", grad=False)
        zero = L.fill_constant([1], "int64", 0)
        return L.case([(L.equal(k, zero), lambda: x + 1.0), (L.equal(k, k), lambda: x - 1.0)])
    for k, shift in ((0, 1.0), (3, -1.0)):
        (out,) = check_block(build, {"x": np.ones(2), "k": np.array([k])})
        np.testing.assert_array_equal(out, 1.0 + shift)


def _switch_build(fns_kind):
    def build():
        x, k = _data("x", [3]), _data("k", [1], "int64", grad=False)
        fns = [lambda: L.exp(x), lambda: x * 2.0, lambda: L.square(x)]
        if fns_kind == "dict":
            branches = {0: fns[0], 4: fns[1], 2: fns[2]}
        elif fns_kind == "pairs":
            branches = [(0, fns[0]), (4, fns[1]), (2, fns[2])]
        else:
            branches = fns
        return L.switch_case(k, branches, default=lambda: L.scale(x, 0.5))
    return build


@pytest.mark.parametrize("kind", ["dict", "pairs", "list"])
def test_switch_case_picks_the_branch_of_the_index(rng, kind):
    x = rng.standard_normal(3)
    index = {"dict": (0, 4, 2), "pairs": (0, 4, 2), "list": (0, 1, 2)}[kind]
    for k, want in zip(index + (7,), (np.exp(x), 2 * x, np.square(x), 0.5 * x)):
        (out,) = check_block(_switch_build(kind), {"x": x, "k": np.array([k])}, wrt=["x"])
        np.testing.assert_allclose(out, want, rtol=1e-12)


def test_switch_case_without_default_takes_the_largest_index(rng):
    def build():
        x, k = _data("x", [2]), _data("k", [1], "int64", grad=False)
        return L.switch_case(k, {3: lambda: x * 3.0, 1: lambda: x * 1.0})
    (out,) = check_block(build, {"x": np.ones(2), "k": np.array([9])})
    np.testing.assert_array_equal(out, [3.0, 3.0])


# --- IfElse ---------------------------------------------------------------------------------

def _ifelse_build():
    x, w = _data("x", [5, 3]), _data("w", [3, 2])
    limit = L.fill_constant([1], "float64", 0.0)
    mask = L.less_than(L.reduce_sum(x, dim=1, keep_dim=True), limit)      # [5, 1]
    ie = L.IfElse(mask)
    with ie.true_block():
        rows = ie.input(x)
        ie.output(L.tanh(L.matmul(rows, w)), L.reduce_sum(rows, dim=1, keep_dim=True))
    with ie.false_block():
        rows = ie.input(x)
        scaled = rows * L.reduce_mean(rows)     # the mean of the false rows only
        ie.output(L.matmul(scaled, w) * 2.0, L.reduce_max(rows, dim=1, keep_dim=True))
    return ie()


def test_ifelse_routes_rows_and_merges_them_back_in_order(rng):
    x, w = rng.standard_normal((5, 3)), rng.standard_normal((3, 2))
    x[0] = -abs(x[0]) - 1.0    # both sides get rows
    x[1] = abs(x[1]) + 1.0
    out, other = check_block(_ifelse_build, {"x": x, "w": w}, wrt=["x", "w"])
    true = x.sum(1) < 0
    want = np.where(true[:, None], np.tanh(x @ w), (x * x[~true].mean()) @ w * 2.0)
    np.testing.assert_allclose(out, want, rtol=1e-12)
    np.testing.assert_allclose(other[:, 0], np.where(true, x.sum(1), x.max(1)), rtol=1e-12)


def test_ifelse_with_every_row_on_one_side(rng):
    """The true side runs on no rows at all."""
    x, w = abs(rng.standard_normal((5, 3))) + 0.1, rng.standard_normal((3, 2))
    out, _ = check_block(_ifelse_build, {"x": x, "w": w}, wrt=["x", "w"])
    np.testing.assert_allclose(out, (x * x.mean()) @ w * 2.0, rtol=1e-12)


# --- is_empty -----------------------------------------------------------------------------------

def test_is_empty(rng):
    class P(fluid.Program):
        @fluid.network("x")
        def f(self, x):
            x = L.data("x", shape=[-1, 2], dtype="float32", append_batch_size=False)
            ie = L.IfElse(L.reduce_sum(x, dim=1, keep_dim=True) > 0)
            with ie.true_block():
                x = ie.input(x)         # the rows of positive sum: maybe none
            flag = L.fill_constant([1], "bool", False)
            i, n = L.fill_constant([1], "int64", 0), L.fill_constant([1], "int64", 2)
            cond = L.less_than(i, n)
            loop = L.While(cond)
            with loop.block():      # cond= writes the var in place, as a loop's condition
                L.is_empty(x, cond=flag)
                L.increment(i, in_place=True)
                L.less_than(i, n, cond=cond)
            return L.is_empty(x), flag
    prog = P().Compile()
    assert [bool(v) for v in prog.f(np.zeros((3, 2), np.float32))] == [True, True]
    assert [bool(v) for v in prog.f(np.ones((3, 2), np.float32))] == [False, False]


# --- Print --------------------------------------------------------------------------------------

class Printing(fluid.Program):
    @fluid.network("x")
    def train(self, x):
        x = L.data("x", shape=[-1, 2], dtype="float32", append_batch_size=False)
        w = L.create_parameter([2, 2], "float32", name="w")
        h = L.matmul(x, w)
        i, n = L.fill_constant([1], "int64", 0), L.fill_constant([1], "int64", 3)
        cond = L.less_than(i, n)
        loop = L.While(cond)
        with loop.block():
            L.Print(i, message="step", summarize=1, print_tensor_lod=False)
            L.increment(i, in_place=True)
            L.less_than(i, n, cond=cond)
        shown = L.Print(h, first_n=1, message="hidden", print_phase="backward",
                        print_tensor_type=False)
        L.Print(x, summarize=2, print_tensor_shape=False)     # its result is never read
        loss = L.mean(shown)
        fluid.optimizer.SGD(0.1).minimize(loss)
        return loss


def test_print_inside_a_loop_and_in_the_backward_pass(capsys):
    prog = Printing().Compile(seed=0)
    x = np.arange(6, dtype=np.float32).reshape(3, 2)
    prog.train(x)
    out = capsys.readouterr().out
    assert out.count("step\nVariable: fill_constant") == 3          # every iteration
    assert [line for line in out.splitlines() if "- data" in line][:3] == [
        "  - data: [0]", "  - data: [1]", "  - data: [2]"]
    assert "hidden\nVariable: " in out and "@GRAD" in out            # the gradient, printed
    assert out.count("hidden") == 1 and "  - dtype: float32" in out
    assert "  - data: [0.0 1.0]" in out                              # summarize=2, unread
    prog.train(x)
    assert capsys.readouterr().out.count("hidden") == 0               # first_n=1


def test_print_passes_its_value_and_gradient_through(capsys):
    check_grad("print", {"In": np.arange(3.0)}, {"message": "m"}, wrt=["In"])
    got = run_forward("print", {"In": np.ones((2, 2))}, {"print_phase": "FORWARD"})
    np.testing.assert_array_equal(got["Out"][0], np.ones((2, 2)))
    assert "Variable: In_0" in capsys.readouterr().out


# --- errors -------------------------------------------------------------------------------------

def _compile(body):
    class P(fluid.Program):
        @fluid.network("x")
        def f(self, x):
            x = L.data("x", shape=[-1, 3], dtype="float32", append_batch_size=False)
            return body(x)
    return P().Compile()


@pytest.mark.parametrize("body,error,match", [
    (lambda x: L.case([]), OpArgumentError, "non-empty list of \\(pred, fn\\)"),
    (lambda x: L.case([(x, lambda: x)]), fluid.DTypeError, "case: a pred must be a bool"),
    (lambda x: L.case([(L.reduce_sum(x) > 0, x)]), OpArgumentError, "\\(bool var, function\\)"),
    (lambda x: L.switch_case(L.fill_constant([1], "int64", 0), {1: lambda: x, 1.5: lambda: x}),
     OpArgumentError, "\\(int, function\\) tuple"),
    (lambda x: L.switch_case(L.fill_constant([1], "int64", 0), [(1, lambda: x), (1, lambda: x)]),
     OpArgumentError, "index 1 appears more than once"),
    (lambda x: L.switch_case(x, [lambda: x]), fluid.DTypeError, "branch_index must be an int"),
    (lambda x: L.IfElse(x), ShapeError, "bool mask \\[N, 1\\]"),
    (lambda x: L.IfElse(L.reduce_sum(x, dim=1, keep_dim=True) > 0).input(x),
     ProgramDefinitionError, "inside 'with ie.true_block\\(\\):'"),
    (lambda x: L.IfElse(L.reduce_sum(x, dim=1, keep_dim=True) > 0)(),
     ProgramDefinitionError, "no block gave an output"),
    (lambda x: L.Print(x, print_phase="sideways"), OpArgumentError, "print_phase must be"),
    (lambda x: L.is_empty(x, cond=L.fill_constant([1], "bool", False)), OpArgumentError,
     "already holds a value"),
    (lambda x: L.Print(np.ones(2)), OpArgumentError, "must be a fluid Variable"),
])
def test_errors_name_the_line(body, error, match):
    with pytest.raises(error, match=match) as info:
        _compile(body)
    assert "test_control_flow2.py" in str(info.value)


def test_ifelse_sides_must_give_as_many_outputs():
    def body(x):
        ie = L.IfElse(L.reduce_sum(x, dim=1, keep_dim=True) > 0)
        with ie.true_block():
            ie.output(ie.input(x), ie.input(x))
        with ie.false_block():
            ie.output(ie.input(x))
        return ie()
    with pytest.raises(OpArgumentError, match="gives 2 outputs and the false block 1"):
        _compile(body)


def test_dynamic_rnn_step_input_takes_paddles_level_before_lengths():
    def body(x):
        drnn = L.DynamicRNN()
        seq = L.reshape(x, [-1, 3, 1])
        with drnn.block():
            drnn.output(drnn.step_input(seq, 1))
        return drnn()
    with pytest.raises(OpArgumentError, match="level must be 0"):
        _compile(body)
