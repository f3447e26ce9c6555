"""The learning-rate schedule ops (increment, exponential_decay, piecewise_decay,
cosine_decay, noam_decay, polynomial_decay, inverse_time_decay, natural_exp_decay,
linear_lr_warmup) against NumPy/Python references of Paddle's formulas, for int64 and float32
step counters; shape rules, attribute checks, no gradients, pure kernels and planner
buffers."""
import math

import numpy as np
import pytest
from ops.harness import check_grad, check_op

from fluid_interactive.errors import DTypeError, OpArgumentError, ShapeError
from fluid_interactive.ir.records import OpDesc
from fluid_interactive.ops import get_spec, infer_op, prepare_kernel
from fluid_interactive.ops.spec import TensorType

STEPS = list(range(0, 25)) + [99, 100, 101, 12345]
SCHEDULES = ("exponential_decay", "piecewise_decay", "cosine_decay", "noam_decay",
             "polynomial_decay", "inverse_time_decay", "natural_exp_decay", "linear_lr_warmup")


def step(k, dtype=np.int64):
    return np.array([k], dtype=dtype)


# --- references (float64, straight from the formulas) ---------------------------------------

def exponential_ref(Step, learning_rate, decay_steps, decay_rate, staircase, **_):
    e = float(Step[0]) / decay_steps
    if staircase:
        e = math.floor(e)
    return np.array([learning_rate * decay_rate ** e])


def piecewise_ref(Step, boundaries, values, **_):
    k = float(Step[0])
    for i, b in enumerate(boundaries):
        if k < b:
            return np.array([values[i]])
    return np.array([values[-1]])


def cosine_ref(Step, learning_rate, step_each_epoch, epochs, **_):
    epoch = math.floor(float(Step[0]) / step_each_epoch)
    return np.array([learning_rate * 0.5 * (math.cos(math.pi * epoch / epochs) + 1)])


# --- increment --------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.float32, np.float64])
@pytest.mark.parametrize("by", [1.0, 3.0, -2.0])
def test_increment(dtype, by):
    got = check_op("increment", {"X": step(41, dtype)}, {"step": by},
                   reference=lambda X, step, **_: X + step, rtol=0, atol=0)
    out = got["Out"][0]
    assert out.dtype == dtype and out.shape == (1,)
    assert out[0] == 41 + by


def test_increment_default_is_one_and_stays_exact_past_float32_precision():
    big = 2 ** 40 + 1                     # not representable in float32
    out = check_op("increment", {"X": step(big)})["Out"][0]
    assert out.dtype == np.int64 and int(out[0]) == big + 1


def test_increment_of_a_scalar_keeps_its_shape():
    out = check_op("increment", {"X": np.array(5, np.int64)})["Out"][0]
    assert out.shape == () and int(out) == 6


def test_increment_rejects_fractional_steps_on_int_counters_and_several_values():
    with pytest.raises(OpArgumentError, match=r"int64 counter takes whole steps"):
        infer_op(OpDesc("increment", {"X": ["c"]}, {"Out": ["c"]}, {"step": 0.5}),
                 lambda n: TensorType((1,), "int64"))
    with pytest.raises(ShapeError, match=r"X must hold a single value"):
        infer_op(OpDesc("increment", {"X": ["c"]}, {"Out": ["c"]}),
                 lambda n: TensorType((2,), "int64"))
    with pytest.raises(DTypeError, match=r"int or float"):
        infer_op(OpDesc("increment", {"X": ["c"]}, {"Out": ["c"]}),
                 lambda n: TensorType((1,), "bool"))
    # a float counter may take any finite step
    t = infer_op(OpDesc("increment", {"X": ["c"]}, {"Out": ["d"]}, {"step": 0.5}),
                 lambda n: TensorType((1,), "float32"))
    assert t["Out"] == [TensorType((1,), "float32")]


# --- the schedules ------------------------------------------------------------------------------

@pytest.mark.parametrize("staircase", [False, True])
@pytest.mark.parametrize("dtype", [np.int64, np.float32])
def test_exponential_decay(staircase, dtype):
    attrs = {"learning_rate": 0.3, "decay_steps": 7, "decay_rate": 0.6, "staircase": staircase}
    for k in STEPS:
        out = check_op("exponential_decay", {"Step": step(k, dtype)}, attrs,
                       reference=exponential_ref, rtol=1e-6, atol=0)["Out"][0]
        assert out.dtype == np.float32 and out.shape == (1,)
    # staircase: constant within a period, drops by decay_rate at each multiple
    if staircase:
        rate = [float(check_op("exponential_decay", {"Step": step(k)}, attrs)["Out"][0][0])
                for k in range(15)]
        assert rate[:7] == [np.float32(0.3)] * 7
        assert rate[7:14] == [np.float32(0.3 * 0.6)] * 7 and rate[14] == np.float32(0.3 * 0.36)


def test_exponential_decay_at_step_zero_is_the_initial_rate():
    out = check_op("exponential_decay", {"Step": step(0)},
                   {"learning_rate": 0.25, "decay_steps": 3, "decay_rate": 0.1})["Out"][0]
    assert out[0] == np.float32(0.25)


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.float32])
def test_piecewise_decay(dtype):
    attrs = {"boundaries": [3, 10, 20], "values": [1.0, 0.5, 0.1, 0.01]}
    seen = []
    for k in STEPS:
        out = check_op("piecewise_decay", {"Step": step(k, dtype)}, attrs,
                       reference=piecewise_ref, rtol=1e-7, atol=0)["Out"][0]
        assert out.dtype == np.float32 and out.shape == (1,)
        seen.append((k, float(out[0])))
    by_step = dict(seen)
    # values[i] for boundaries[i-1] <= k < boundaries[i]: a boundary belongs to the next piece
    assert by_step[2] == 1.0 and by_step[3] == 0.5 and by_step[9] == 0.5
    assert by_step[10] == np.float32(0.1) and by_step[19] == np.float32(0.1)
    assert by_step[20] == np.float32(0.01) and by_step[12345] == np.float32(0.01)


def test_piecewise_decay_without_boundaries_is_constant():
    for k in (0, 5, 1000):
        out = check_op("piecewise_decay", {"Step": step(k)},
                       {"boundaries": [], "values": [0.125]})["Out"][0]
        assert out[0] == 0.125


@pytest.mark.parametrize("dtype", [np.int64, np.float64])
def test_cosine_decay(dtype):
    attrs = {"learning_rate": 0.2, "step_each_epoch": 4, "epochs": 5}
    for k in STEPS:
        out = check_op("cosine_decay", {"Step": step(k, dtype)}, attrs,
                       reference=cosine_ref, rtol=1e-6, atol=1e-8)["Out"][0]
        assert out.dtype == np.float32 and out.shape == (1,)
    rates = [float(check_op("cosine_decay", {"Step": step(k)}, attrs)["Out"][0][0])
             for k in range(21)]
    assert rates[0] == np.float32(0.2) and len(set(rates[:4])) == 1      # constant in an epoch
    assert all(a > b for a, b in zip(rates[3:20:4], rates[4:21:4]))      # falls epoch by epoch
    assert rates[20] == pytest.approx(0.0, abs=1e-8)                     # epoch == epochs


def test_schedules_read_a_scalar_step_too():
    out = check_op("cosine_decay", {"Step": np.array(8, np.int64)},
                   {"learning_rate": 1.0, "step_each_epoch": 4, "epochs": 4})["Out"][0]
    assert out.shape == (1,)
    np.testing.assert_allclose(out, [0.5], rtol=1e-6)


# --- shape rules and attribute checks ----------------------------------------------------------

def _infer(op_type, attrs, shape=(1,), dtype="int64"):
    return infer_op(OpDesc(op_type, {"Step": ["k"]}, {"Out": ["lr"]}, attrs),
                    lambda n: TensorType(shape, dtype))


@pytest.mark.parametrize("op_type", SCHEDULES)
def test_schedules_give_one_float32_rate(op_type):
    attrs = {"piecewise_decay": {"boundaries": [1], "values": [1.0, 0.5]}}.get(op_type, {})
    for shape in [(1,), (), (-1,)]:
        assert _infer(op_type, attrs, shape)["Out"] == [TensorType((1,), "float32")]
    with pytest.raises(ShapeError, match=r"Step must hold a single value"):
        _infer(op_type, attrs, (3,))
    with pytest.raises(DTypeError, match=r"int or float step count"):
        _infer(op_type, attrs, dtype="bool")


@pytest.mark.parametrize("op_type,attrs,message", [
    ("exponential_decay", {"decay_steps": 0}, r"decay_steps must be a positive number, got 0"),
    ("exponential_decay", {"decay_steps": -3}, r"decay_steps must be a positive number"),
    ("exponential_decay", {"decay_rate": 0.0}, r"decay_rate must be a positive number"),
    ("exponential_decay", {"learning_rate": float("nan")}, r"learning_rate must be a positive"),
    ("piecewise_decay", {"boundaries": [5, 3], "values": [1, 2, 3]},
     r"boundaries must be strictly increasing, got \[5, 3\]"),
    ("piecewise_decay", {"boundaries": [2, 2], "values": [1, 2, 3]},
     r"boundaries must be strictly increasing"),
    ("piecewise_decay", {"boundaries": [2, 4], "values": [1, 2]},
     r"needs one more value than boundaries.*2 boundaries and 2 values"),
    ("piecewise_decay", {"boundaries": [1.5], "values": [1, 2]},
     r"boundaries must be a list of integer steps"),
    ("piecewise_decay", {"boundaries": [], "values": []}, r"values must be a non-empty list"),
    ("cosine_decay", {"step_each_epoch": 0}, r"step_each_epoch must be a positive integer"),
    ("cosine_decay", {"epochs": 2.5}, r"epochs must be a positive integer, got 2.5"),
    ("cosine_decay", {"learning_rate": -1.0}, r"learning_rate must be a positive number"),
    ("noam_decay", {"d_model": 0}, r"d_model must be a positive number"),
    ("polynomial_decay", {"power": -1.0}, r"power must be a number >= 0, got -1.0"),
    ("polynomial_decay", {"decay_steps": 0}, r"decay_steps must be a positive number"),
    ("inverse_time_decay", {"decay_rate": -0.5}, r"decay_rate must be a positive number"),
    ("natural_exp_decay", {"decay_steps": 0}, r"decay_steps must be a positive number"),
    ("linear_lr_warmup", {"warmup_steps": 0}, r"warmup_steps must be a positive number"),
    ("linear_lr_warmup", {"end_lr": float("inf")}, r"end_lr must be a finite number"),
])
def test_bad_attributes_are_argument_errors(op_type, attrs, message):
    with pytest.raises(OpArgumentError, match=op_type + ": " + message):
        _infer(op_type, attrs)


@pytest.mark.parametrize("op_type", SCHEDULES)
def test_no_gradient(op_type):
    assert get_spec(op_type).grad is None


def test_increment_passes_a_float_counters_gradient_through():
    # the step is a constant: dOut/dX = 1 (a float loop counter's true gradient)
    check_grad("increment", {"X": np.array([1.5])}, {"step": 2.0})


# --- purity and buffers ---------------------------------------------------------------------------

def _prepare(op_type, attrs, value, buffers=None):
    slot = "X" if op_type == "increment" else "Step"
    op = OpDesc(op_type, {slot: ["k"]}, {"Out": ["out"]}, attrs)
    types = {"k": TensorType(value.shape, value.dtype.name)}
    types.update(zip(["out"], infer_op(op, types.__getitem__)["Out"]))
    return prepare_kernel(op, types.__getitem__, np, buffers)


CASES = [("increment", {}), ("exponential_decay", {"decay_steps": 2, "decay_rate": 0.5}),
         ("piecewise_decay", {"boundaries": [2], "values": [1.0, 0.5]}),
         ("cosine_decay", {"step_each_epoch": 2, "epochs": 3}),
         ("noam_decay", {"d_model": 4, "warmup_steps": 3}),
         ("polynomial_decay", {"decay_steps": 4, "cycle": True}),
         ("inverse_time_decay", {"decay_steps": 2, "decay_rate": 0.5}),
         ("natural_exp_decay", {"decay_steps": 2, "decay_rate": 0.5, "staircase": True}),
         ("linear_lr_warmup", {"warmup_steps": 8})]


@pytest.mark.parametrize("op_type,attrs", CASES)
def test_kernels_never_write_into_the_counter_and_return_fresh_arrays(op_type, attrs):
    counter = step(3)
    fn = _prepare(op_type, attrs, counter)
    a, b = fn(counter), fn(counter)
    assert counter[0] == 3                      # the scope's value is untouched
    assert a is not counter and not np.shares_memory(a, counter)
    assert a is not b                            # a result may be kept by the caller
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("op_type,attrs", CASES[1:])
def test_schedules_write_into_an_offered_buffer(op_type, attrs):
    buf = np.full((1,), -1.0, np.float32)
    fn = _prepare(op_type, attrs, step(5), {"Out": [buf]})
    out = fn(step(5))
    assert out is buf and buf[0] > 0
    expected = _prepare(op_type, attrs, step(5))(step(5))
    np.testing.assert_array_equal(buf, expected)


# --- the schedules of ops/lr_decay.py -------------------------------------------------------------

def noam_ref(Step, d_model, warmup_steps, learning_rate, **_):
    s = float(Step[0]) + 1
    return np.array([learning_rate * d_model ** -0.5 * min(s ** -0.5, warmup_steps ** -1.5 * s)])


def polynomial_ref(Step, learning_rate, decay_steps, end_learning_rate, power, cycle, **_):
    k, n = float(Step[0]), float(decay_steps)
    if cycle:
        n = n * (math.ceil(k / n) or 1)
    else:
        k = min(k, n)
    return np.array([(learning_rate - end_learning_rate) * (1 - k / n) ** power
                     + end_learning_rate])


def time_ref(natural):
    def ref(Step, learning_rate, decay_steps, decay_rate, staircase, **_):
        e = float(Step[0]) / decay_steps
        e = math.floor(e) if staircase else e
        return np.array([learning_rate * math.exp(-decay_rate * e) if natural
                         else learning_rate / (1 + decay_rate * e)])
    return ref


def warmup_ref(Step, warmup_steps, start_lr, end_lr, learning_rate, LearningRate=None, **_):
    k = float(Step[0])
    after = learning_rate if LearningRate is None else float(LearningRate[0])
    return np.array([start_lr + (end_lr - start_lr) * k / warmup_steps if k < warmup_steps
                     else after])


@pytest.mark.parametrize("op_type,attrs,reference", [
    ("noam_decay", {"d_model": 512, "warmup_steps": 4000, "learning_rate": 2.0}, noam_ref),
    ("noam_decay", {"d_model": 8, "warmup_steps": 3}, noam_ref),
    ("polynomial_decay", {"learning_rate": 0.5, "decay_steps": 10, "power": 2.0},
     polynomial_ref),
    ("polynomial_decay", {"learning_rate": 0.5, "decay_steps": 7, "end_learning_rate": 0.1,
                          "cycle": True}, polynomial_ref),
    ("inverse_time_decay", {"learning_rate": 0.3, "decay_steps": 5, "decay_rate": 0.5},
     time_ref(False)),
    ("inverse_time_decay", {"learning_rate": 0.3, "decay_steps": 5, "decay_rate": 0.5,
                            "staircase": True}, time_ref(False)),
    ("natural_exp_decay", {"learning_rate": 0.3, "decay_steps": 5, "decay_rate": 0.5},
     time_ref(True)),
    ("natural_exp_decay", {"learning_rate": 0.3, "decay_steps": 5, "decay_rate": 0.5,
                           "staircase": True}, time_ref(True)),
    ("linear_lr_warmup", {"warmup_steps": 20, "start_lr": 0.01, "end_lr": 0.2,
                          "learning_rate": 0.3}, warmup_ref),
])
@pytest.mark.parametrize("dtype", [np.int64, np.float32])
def test_more_schedules(op_type, attrs, reference, dtype):
    for k in STEPS:
        check_op(op_type, {"Step": step(k, dtype)}, attrs, reference=reference,
                 rtol=1e-6, atol=0)


@pytest.mark.parametrize("rate_dtype", [np.float32, np.float64])
def test_linear_lr_warmup_before_another_rate(rate_dtype):
    attrs = {"warmup_steps": 6, "start_lr": 0.0, "end_lr": 0.6}
    for k in (0, 3, 5, 6, 50):
        got = check_op("linear_lr_warmup", {"Step": step(k),
                                            "LearningRate": np.array([0.25], rate_dtype)},
                       attrs, reference=warmup_ref, rtol=1e-6, atol=0)
        assert got["Out"][0].dtype == rate_dtype
