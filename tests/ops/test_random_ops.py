"""The random ops: statistics of their draws with fixed seeds (bounds generous enough for
any seed, tight enough to catch a wrong distribution or parameter), shapes, reproducibility
(seed 0 draws the program's stream, a non-zero seed the same values every call), and
generators taken back by `RandomStreams.seek`, as a rewind does."""
import numpy as np
import pytest
from ops.harness import build_op, run_forward

from fluid_interactive.errors import DTypeError, ShapeError
from fluid_interactive.ops import get_spec, infer_op, prepare_kernel
from fluid_interactive.ops.spec import TensorType
from fluid_interactive.runtime.plan.streams import RandomStreams

N = 20000


def draw(op_type, attrs, inputs=None, seed=0):
    return run_forward(op_type, inputs or {}, attrs, rng=np.random.default_rng(seed))


def test_uniform_random_statistics():
    out = draw("uniform_random", {"shape": [100, 200], "min": -5.0, "max": 10.0})["Out"][0]
    assert out.dtype == np.float32 and out.shape == (100, 200)
    assert out.min() >= -5.0 and out.max() < 10.0
    assert abs(out.mean() - 2.5) < 0.15 and abs(out.std() - 15 / np.sqrt(12)) < 0.1
    hist, _ = np.histogram(out, bins=10, range=(-5, 10))
    assert np.all(np.abs(hist / out.size - 0.1) < 0.01)   # flat, as Paddle's test checks


@pytest.mark.parametrize("mean,std,dtype", [(1.0, 2.0, "float32"), (-3.0, 0.5, "float64")])
def test_gaussian_random_statistics(mean, std, dtype):
    out = draw("gaussian_random", {"shape": [N], "mean": mean, "std": std,
                                   "dtype": dtype})["Out"][0]
    assert out.dtype == dtype
    assert abs(out.mean() - mean) < 0.05 * std and abs(out.std() - std) < 0.05 * std


@pytest.mark.parametrize("op_type,attrs,check", [
    ("uniform_random_batch_size_like", {"shape": [-1, 500], "min": 1.0, "max": 3.0},
     lambda o: o.min() >= 1.0 and o.max() < 3.0 and abs(o.mean() - 2.0) < 0.05),
    ("gaussian_random_batch_size_like", {"shape": [2, -1], "input_dim_idx": 0,
                                         "output_dim_idx": 1, "mean": 5.0, "std": 2.0},
     lambda o: abs(o.mean() - 5.0) < 0.5 and abs(o.std() - 2.0) < 0.4),
])
def test_batch_size_like_take_the_batch_from_the_input(op_type, attrs, check):
    x = np.zeros((7, 3), np.float32)
    out = draw(op_type, attrs, {"Input": x})["Out"][0]
    shape = list(attrs["shape"])
    shape[attrs.get("output_dim_idx", 0)] = 7
    assert out.shape == tuple(shape) and check(out)
    types = infer_op(build_op(op_type, {"Input": x}, attrs)[0],
                     lambda n: TensorType((-1, 3), "float32"))
    assert types["Out"][0].shape == tuple(-1 if d == 7 else d for d in shape)


@pytest.mark.parametrize("low,high,dtype", [(-5, 10, "int64"), (0, 3, "int32")])
def test_randint_statistics(low, high, dtype):
    out = draw("randint", {"shape": [N], "low": low, "high": high, "dtype": dtype})["Out"][0]
    assert out.dtype == dtype and out.min() == low and out.max() == high - 1
    counts = np.bincount(out - low, minlength=high - low) / N
    assert np.all(np.abs(counts - 1 / (high - low)) < 0.02)


def test_randperm_is_a_permutation_and_each_place_is_uniform():
    out = draw("randperm", {"n": 100})["Out"][0]
    assert out.dtype == np.int64 and sorted(out) == list(range(100))
    firsts = [draw("randperm", {"n": 4}, seed=s)["Out"][0][0] for s in range(400)]
    assert np.all(np.abs(np.bincount(firsts, minlength=4) / 400 - 0.25) < 0.08)


def test_sampling_id_follows_the_probabilities():
    p = np.tile(np.array([[0.1, 0.2, 0.0, 0.7]], np.float32), (N, 1))
    out = draw("sampling_id", {}, {"X": p})["Out"][0]
    assert out.shape == (N,) and out.dtype == np.int64
    freq = np.bincount(out, minlength=4) / N
    np.testing.assert_allclose(freq, [0.1, 0.2, 0.0, 0.7], atol=0.015)


def test_sampling_id_gives_the_last_id_past_the_total():
    p = np.full((5, 3), 0.1, np.float32)   # sums to 0.3: draws above fall off the end
    out = draw("sampling_id", {"min": 0.5, "max": 0.9}, {"X": p})["Out"][0]
    np.testing.assert_array_equal(out, [2] * 5)


def test_random_crop_takes_windows_and_advances_its_seed():
    x = np.arange(4 * 2 * 6 * 5, dtype=np.float32).reshape(4, 2, 6, 5)
    got = draw("random_crop", {"shape": [3, 2]}, {"X": x, "Seed": np.array([11])})
    out, seed = got["Out"][0], got["SeedOut"][0]
    assert out.shape == (4, 2, 3, 2) and seed.dtype == np.int64 and seed[0] != 11
    for b in range(4):
        for c in range(2):
            w = out[b, c]
            r, q = np.argwhere(x[b, c] == w[0, 0])[0]
            np.testing.assert_array_equal(w, x[b, c, r:r + 3, q:q + 2])   # a real window
    again = draw("random_crop", {"shape": [3, 2]}, {"X": x, "Seed": np.array([11])})
    np.testing.assert_array_equal(again["Out"][0], out)      # the seed fixes the crops
    other = draw("random_crop", {"shape": [3, 2]}, {"X": x, "Seed": seed})
    assert not np.array_equal(other["Out"][0], out)


def test_random_crop_rejects_a_window_too_large():
    with pytest.raises(ShapeError, match=r"window \[7\] does not fit X \[2, 6\]"):
        draw("random_crop", {"shape": [7]}, {"X": np.zeros((2, 6)), "Seed": np.array([1])})
    with pytest.raises(DTypeError, match="Seed must be an int64"):
        draw("random_crop", {"shape": [2]}, {"X": np.zeros((2, 6)), "Seed": np.array([1.0])})


@pytest.mark.parametrize("attrs,match", [
    ({"shape": [3], "low": 5, "high": 5}, "low=5 must be less than high=5"),
    ({"shape": [], "low": 0, "high": 5}, "non-empty list"),
    ({"shape": [3], "low": 0, "high": 5, "dtype": "float32"}, "int32 or int64"),
])
def test_randint_attribute_errors(attrs, match):
    with pytest.raises((ShapeError, DTypeError), match=match):
        draw("randint", attrs)


# --- seeds and streams --------------------------------------------------------------------------

CASES = [("uniform_random", {"shape": [3, 4]}, {}),
         ("gaussian_random", {"shape": [5]}, {}),
         ("randint", {"shape": [6], "low": 0, "high": 1000}, {}),
         ("randperm", {"n": 10}, {}),
         ("uniform_random_batch_size_like", {"shape": [-1, 3]},
          {"Input": np.zeros((4, 2), np.float32)}),
         ("gaussian_random_batch_size_like", {"shape": [-1, 3]},
          {"Input": np.zeros((4, 2), np.float32)}),
         ("sampling_id", {}, {"X": np.full((8, 4), 0.25, np.float32)})]


def _kernel(op_type, attrs, inputs, rng):
    op, env = build_op(op_type, inputs, attrs)
    types = {n: TensorType(a.shape, a.dtype.name) for n, a in env.items()}
    for slot, names in op.outputs.items():
        types.update(zip(names, infer_op(op, types.__getitem__)[slot]))
    fn = prepare_kernel(op, types.__getitem__, np, rng=rng)
    args = [env[n] for n in op.input_names()]
    return lambda: np.array(fn(*args), copy=True)


@pytest.mark.parametrize("op_type,attrs,inputs", CASES)
def test_seed_zero_draws_the_stream_and_a_seed_repeats(op_type, attrs, inputs):
    assert get_spec(op_type).random
    one = _kernel(op_type, attrs, inputs, np.random.default_rng([1, 2]))
    two = _kernel(op_type, attrs, inputs, np.random.default_rng([1, 2]))
    a = [one() for _ in range(3)]
    for x, y in zip(a, [two() for _ in range(3)]):
        np.testing.assert_array_equal(x, y)                  # equal seeds, equal streams
    assert not np.array_equal(a[0], a[1])                    # the stream goes on
    fixed = _kernel(op_type, {**attrs, "seed": 17}, inputs, np.random.default_rng(0))
    np.testing.assert_array_equal(fixed(), fixed())          # Paddle's fixed seed


@pytest.mark.parametrize("op_type,attrs,inputs", CASES)
def test_streams_seek_takes_the_draws_back(op_type, attrs, inputs):
    streams = RandomStreams(seed=5)
    fn = _kernel(op_type, attrs, inputs, streams.get(1, 3))
    fn()
    state = streams.tell()
    later = [fn() for _ in range(3)]
    streams.seek(state)
    for want in later:
        np.testing.assert_array_equal(fn(), want)
    streams.seek({})                                        # before the first draw
    np.testing.assert_array_equal(fn(), _kernel(op_type, attrs, inputs,
                                                RandomStreams(seed=5).get(1, 3))())
