"""Paddle 1.8's creation, random and utility layers in compiled programs: signatures,
values, ``out=`` targets, state vars (create_global_var, autoincreased_step_counter,
random_crop's seed) that are saved and rewound, and the errors each layer raises at the
user's line."""
import inspect
import os

import numpy as np
import pytest

import fluid
from fluid_interactive.errors import DTypeError, NameConflictError, OpArgumentError, ShapeError

L = fluid.layers
THIS_FILE = os.path.basename(__file__)


def run(build, feeds=None, seed=0):
    """Compile a one-method program whose method returns ``build(*data vars)``; call it."""
    feeds = feeds or {}

    class One(fluid.Program):
        @fluid.network(*feeds)
        def f(self, *args):
            xs = [L.data(n, shape=list(a.shape), dtype=a.dtype.name, append_batch_size=False)
                  for n, a in feeds.items()]
            return build(*xs)
    prog = One().Compile(seed=seed)
    return prog, prog.f(*feeds.values())


# --- signatures ---------------------------------------------------------------------------------

PADDLE_SIGNATURES = {
    "zeros": "(shape, dtype, force_cpu=False)",
    "ones": "(shape, dtype, force_cpu=False)",
    "zeros_like": "(x, out=None)",
    "ones_like": "(x, out=None)",
    "full": "(shape, fill_value, out=None, dtype=None, device=None, stop_gradient=True, "
            "name=None)",
    "full_like": "(input, fill_value, out=None, dtype=None, device=None, stop_gradient=True, "
                 "name=None)",
    "arange": "(start, end, step=1, dtype=None, name=None)",
    "range": "(start, end, step, dtype)",
    "linspace": "(start, stop, num, dtype)",
    "eye": "(num_rows, num_columns=None, batch_shape=None, dtype='float32')",
    "diag": "(diagonal)",
    "diag_embed": "(input, offset=0, dim1=-2, dim2=-1)",
    "tril": "(input, diagonal=0, name=None)",
    "triu": "(input, diagonal=0, name=None)",
    "create_global_var": "(shape, value, dtype, persistable=False, force_cpu=False, "
                         "name=None)",
    "fill_constant": "(shape, dtype, value, force_cpu=False, out=None)",
    "fill_constant_batch_size_like": "(input, shape, dtype, value, input_dim_idx=0, "
                                     "output_dim_idx=0, force_cpu=False)",
    "sums": "(input, out=None)",
    "assign": "(input, output=None)",
    "cast": "(x, dtype)",
    "create_parameter": "(shape, dtype, name=None, attr=None, is_bias=False, "
                        "default_initializer=None)",
    "uniform_random": "(shape, dtype='float32', min=-1.0, max=1.0, seed=0)",
    "uniform_random_batch_size_like": "(input, shape, dtype='float32', input_dim_idx=0, "
                                      "output_dim_idx=0, min=-1.0, max=1.0, seed=0)",
    "gaussian_random": "(shape, mean=0.0, std=1.0, seed=0, dtype='float32')",
    "gaussian_random_batch_size_like": "(input, shape, input_dim_idx=0, output_dim_idx=0, "
                                       "mean=0.0, std=1.0, seed=0, dtype='float32')",
    "randint": "(low, high=None, shape=None, out=None, dtype=None, device=None, "
               "stop_gradient=False, seed=0, name=None)",
    "randn": "(shape, out=None, dtype=None, device=None, stop_gradient=True, name=None)",
    "randperm": "(n, out=None, dtype='int64', device=None, stop_gradient=True, seed=0)",
    "sampling_id": "(x, min=0.0, max=1.0, seed=0, dtype='float32')",
    "random_crop": "(x, shape, seed=None)",
    "autoincreased_step_counter": "(counter_name=None, begin=1, step=1)",
    "has_inf": "(x)", "has_nan": "(x)", "isfinite": "(x)",
    "allclose": "(input, other, rtol=1e-05, atol=1e-08, equal_nan=False, name=None)",
    "elementwise_equal": "(x, y, name=None)",
    "kron": "(x, y, out=None, name=None)",
    "trace": "(input, offset=0, dim1=0, dim2=1, out=None, name=None)",
    "argmin": "(x, axis=0)", "argsort": "(input, axis=-1, descending=False, name=None)",
    "shape": "(input)", "size": "(input)", "rank": "(input)",
    "meshgrid": "(input, name=None)", "reverse": "(x, axis)",
    "hash": "(input, hash_size, num_hash=1, name=None)",
    "shard_index": "(input, index_num, nshards, shard_id, ignore_value=-1)",
    "noam_decay": "(d_model, warmup_steps, learning_rate=1.0)",
    "polynomial_decay": "(learning_rate, decay_steps, end_learning_rate=0.0001, power=1.0, "
                        "cycle=False)",
    "linear_lr_warmup": "(learning_rate, warmup_steps, start_lr, end_lr)",
    "inverse_time_decay": "(learning_rate, decay_steps, decay_rate, staircase=False)",
    "natural_exp_decay": "(learning_rate, decay_steps, decay_rate, staircase=False)",
    "py_func": "(func, x, out, backward_func=None, skip_vars_in_backward_input=None)",
}


@pytest.mark.parametrize("name", sorted(PADDLE_SIGNATURES))
def test_paddle_signature(name):
    """Paddle's parameters, in order, with its defaults; keywords beyond them only after."""
    sig = inspect.signature(getattr(L, name))
    text = "(" + ", ".join(str(p).split(":")[0] + (f"={p.default!r}" if p.default
                                                   is not inspect.Parameter.empty else "")
                           for p in sig.parameters.values()) + ")"
    want = PADDLE_SIGNATURES[name]
    assert text == want or text.startswith(want[:-1] + ", "), text


# --- filled and sequences -------------------------------------------------------------------------

def test_filled_values():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    _, got = run(lambda x: (L.zeros([2, 3], "int32"), L.ones([2], "float64"),
                            L.full([2, 2], 7.5), L.zeros_like(x), L.ones_like(x),
                            L.full_like(x, 3, dtype="int64")), {"x": x})
    want = (np.zeros((2, 3), np.int32), np.ones(2), np.full((2, 2), 7.5, np.float32),
            np.zeros_like(x), np.ones_like(x), np.full((2, 3), 3, np.int64))
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
        assert g.dtype == w.dtype


def test_full_and_fill_constant_take_a_value_variable():
    v = np.array([2.5], np.float32)
    _, (a, b) = run(lambda v: (L.full([2, 3], v), L.fill_constant([3], "float64", v)), {"v": v})
    np.testing.assert_array_equal(a, np.full((2, 3), 2.5, np.float32))
    np.testing.assert_array_equal(b, np.full(3, 2.5))


def test_sequences_with_numbers_and_variables():
    feeds = {"s": np.array([2.0], np.float32), "n": np.array([4], np.int32)}
    prog, got = run(lambda s, n: (L.arange(0, 5), L.arange(1, 10, 3, "int64"),
                                  L.range(10, 1, -2, "int32"), L.range(s, 5.0, 0.5, "float64"),
                                  L.linspace(0, 1, 5, "float32"), L.linspace(s, 3.0, n,
                                                                             "float32")), feeds)
    want = (np.arange(0, 5, dtype=np.float32), np.arange(1, 10, 3), np.arange(10, 1, -2),
            np.arange(2.0, 5.0, 0.5), np.linspace(0, 1, 5), np.linspace(2, 3, 4))
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-6)
    block = prog.program.block("f")
    shapes = [prog.program.find_var(block, n).shape for n in
              [op.output("Out")[0] for op in block.ops if op.type in ("range", "linspace")]]
    assert shapes == [(5,), (3,), (5,), (-1,), (5,), (-1,)]   # known where numbers were given


def test_eye_diag_and_triangles():
    d = np.array([1.0, 2.0, 3.0], np.float32)
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    _, got = run(lambda d, x: (L.eye(3), L.eye(2, 3, batch_shape=[2], dtype="int32"),
                               L.diag(d), L.diag(np.array([4, 5], "int64")),
                               L.diag_embed(x, offset=1), L.tril(x, -1), L.triu(x, 1)),
                 {"d": d, "x": x})
    want = (np.eye(3, dtype=np.float32), np.stack([np.eye(2, 3, dtype=np.int32)] * 2),
            np.diag(d), np.diag([4, 5]), np.stack([np.diag(r, 1) for r in x]), np.tril(x, -1),
            np.triu(x, 1))
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


# --- out= targets and vars of the program's own ----------------------------------------------

def test_out_targets_take_the_type_their_first_writer_gives():
    x = np.ones((2, 3), np.float32)

    def build(x):
        t = L.create_tensor("float32")
        L.fill_constant([2, 3], "float32", 4.0, out=t)
        s = L.create_tensor("float32")
        L.sums([x, t], out=s)
        a = L.create_tensor("float32")
        L.assign(s, output=a)
        return t, s, a
    _, (t, s, a) = run(build, {"x": x})
    np.testing.assert_array_equal(t, np.full((2, 3), 4.0))
    np.testing.assert_array_equal(s, np.full((2, 3), 5.0))
    np.testing.assert_array_equal(a, s)


def test_create_global_var_is_state_shared_by_methods_saved_and_rewound(tmp_path):
    class Counted(fluid.Program):
        @fluid.network()
        def bump(self):
            g = L.create_global_var([2], 1.5, "float32", persistable=True, name="g")
            L.assign(g + 1.0, output=g)
            return g

        @fluid.network()
        def read(self):
            return L.create_global_var([2], 1.5, "float32", persistable=True, name="g") * 1.0

    prog = Counted().Compile(seed=0)
    np.testing.assert_array_equal(prog.read(), [1.5, 1.5])
    prog.keep_history()
    prog.bump()
    prog.bump()
    np.testing.assert_array_equal(prog.read(), [3.5, 3.5])
    prog.save(str(tmp_path / "c"))
    prog.rewind(1)
    np.testing.assert_array_equal(prog.read(), [2.5, 2.5])
    np.testing.assert_array_equal(fluid.load(str(tmp_path / "c")).read(), [3.5, 3.5])


def test_autoincreased_step_counter_counts_calls_from_begin():
    class Steps(fluid.Program):
        @fluid.network()
        def step(self):
            return L.autoincreased_step_counter(begin=5) * 1

        @fluid.network()
        def peek(self):
            return L.autoincreased_step_counter() * 1   # the same counter, not advanced

    prog = Steps().Compile(seed=0)
    assert [prog.step() for _ in range(3)] == [5, 6, 7]   # one value: a Python int
    assert prog.peek() == 7
    prog.keep_history()
    prog.step()
    prog.rewind(1)
    assert prog.step() == 8


def test_rank_shape_and_size():
    x = np.zeros((4, 3, 2), np.float32)
    _, (r, s, n) = run(lambda x: (L.rank(x), L.shape(x), L.size(x)), {"x": x})
    assert r == 3
    np.testing.assert_array_equal(s, [4, 3, 2])
    np.testing.assert_array_equal(n, [24])


def test_utility_layers():
    x = np.array([[1.0, np.inf], [3.0, 2.0]], np.float32)
    y = np.array([[1.0, 2.0], [3.0, 0.0]], np.float32)
    i = np.array([[3], [9], [14]], np.int64)
    _, got = run(lambda x, y, i: (L.has_inf(x), L.has_nan(x), L.isfinite(y),
                                  L.allclose(y, y + 1e-9), L.elementwise_equal(x, y),
                                  L.kron(y, y), L.trace(y), L.argmin(y, axis=1),
                                  L.argsort(y, axis=1, descending=True)[1],
                                  L.reverse(y, 0), L.shard_index(i, 20, 2, 1),
                                  L.hash(i, 1000, 2)), {"x": x, "y": y, "i": i})
    want = ([1.0], [0.0], [True], [True], x == y, np.kron(y, y), [np.trace(y)],
            np.argmin(y, 1), [[1, 0], [0, 1]], y[::-1], [[-1], [-1], [4]])
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, np.asarray(w))
    assert got[-1].shape == (3, 2, 1) and got[-1].dtype == np.int64


def test_meshgrid_gradients_flow():
    a, b = np.array([1.0, 2.0], np.float32), np.array([3.0, 4.0, 5.0], np.float32)

    def build(a, b):
        a.stop_gradient = b.stop_gradient = False
        ga, gb = L.meshgrid([a, b])
        loss = L.reduce_sum(ga * gb)
        return (ga, gb) + tuple(fluid.gradients(loss, [a, b]))
    _, (ga, gb, da, db) = run(build, {"a": a, "b": b})
    np.testing.assert_array_equal(ga, np.meshgrid(a, b, indexing="ij")[0])
    np.testing.assert_allclose(da, [b.sum()] * 2)
    np.testing.assert_allclose(db, [a.sum()] * 3)


# --- random layers ------------------------------------------------------------------------------

def _draws():
    x = np.zeros((5, 3), np.float32)
    p = np.tile(np.array([[0.2, 0.3, 0.5]], np.float32), (5, 1))
    return (lambda x, p: (L.uniform_random([4, 3]), L.gaussian_random([2, 2], seed=7),
                          L.randn([3]), L.randint(3, 9, [4]), L.randperm(6),
                          L.uniform_random_batch_size_like(x, [-1, 2], min=2.0, max=3.0),
                          L.gaussian_random_batch_size_like(x, [1, -1], 1, 1),
                          L.sampling_id(p), L.random_crop(x, [2])),
            {"x": x, "p": p})


def test_random_layers_give_their_shapes_and_equal_seeds_equal_draws():
    build, feeds = _draws()
    prog, first = run(build, feeds, seed=3)
    again = prog.f(**feeds)
    _, same_seed = run(build, feeds, seed=3)
    _, other_seed = run(build, feeds, seed=4)
    shapes = [(4, 3), (2, 2), (3,), (4,), (6,), (5, 2), (1, 3), (5,), (5, 2)]
    assert [g.shape for g in first] == shapes
    for a, b in zip(first, same_seed):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(first[1], again[1])   # seed=7: the same every call
    assert not np.array_equal(first[0], again[0])       # seed 0: the stream goes on
    assert not np.array_equal(first[0], other_seed[0])
    assert sorted(first[4]) == list(range(6))
    assert ((first[5] >= 2) & (first[5] < 3)).all()


def test_rewind_repeats_every_random_layer():
    build, feeds = _draws()
    prog, _ = run(build, feeds, seed=5)
    prog.keep_history()
    calls = [prog.f(**feeds) for _ in range(4)]
    prog.rewind(3)
    for want in calls[1:]:
        for g, w in zip(prog.f(**feeds), want):
            np.testing.assert_array_equal(g, w)


# --- errors at the user's line --------------------------------------------------------------------

@pytest.mark.parametrize("build,cls,match", [
    (lambda x: L.tril(L.reshape(x, [-1])), ShapeError, "tril: input shape must be at least 2-D"),
    (lambda x: L.triu(x, 1.5), OpArgumentError, "diagonal must be a Python int"),
    (lambda x: L.eye(-1), OpArgumentError, "num_rows must be a non-negative int"),
    (lambda x: L.eye(2, batch_shape=[0]), OpArgumentError, "batch_shape must be a list"),
    (lambda x: L.arange(0, 5, 0), ShapeError, "step must not be 0"),
    (lambda x: L.range(0, 5, 1, "bool"), OpArgumentError, "dtype must be float32"),
    (lambda x: L.linspace(0, 1, 0, "float32"), OpArgumentError, "num must be a positive int"),
    (lambda x: L.full_like(x, "a"), OpArgumentError, "fill value must be a number"),
    (lambda x: L.fill_constant([2], "int32", np.zeros(2)), OpArgumentError,
     "value must be a number"),
    (lambda x: L.randint(5, 2), OpArgumentError, "low must be less than high"),
    (lambda x: L.randperm(0), OpArgumentError, "n must be an int >= 1"),
    (lambda x: L.uniform_random([2, 0]), OpArgumentError, "positive sizes"),
    (lambda x: L.uniform_random(L.shape(x)), OpArgumentError, "shape given as a Variable"),
    (lambda x: L.gaussian_random([2], dtype="int32"), OpArgumentError, "float32 or float64"),
    (lambda x: L.random_crop(x, [9]), ShapeError, "does not fit X"),
    (lambda x: L.allclose(x, x, rtol=1), OpArgumentError, "rtol must be a float"),
    (lambda x: L.trace(x, dim1=1, dim2=-1), OpArgumentError, "two different dims"),
    (lambda x: L.shard_index(L.cast(x, "int64"), 10, 2, 2), OpArgumentError,
     r"shard_id=2 must be in \[0, nshards=2\)"),
    (lambda x: L.hash(x, 10), DTypeError, "int32 or int64, got float32"),
    (lambda x: L.meshgrid(x), OpArgumentError, "input must be a list"),
    (lambda x: L.kron(x, x, out=L.create_tensor("float32", shape=[3])), ShapeError,
     r"its result is float32\[4, 9\] but out"),
    (lambda x: L.fill_constant([2], "int64", 1, out=L.create_tensor("float32")), DTypeError,
     "was created as float32"),
    (lambda x: L.create_tensor("float32") + 1.0, OpArgumentError, "holds nothing yet"),
    (lambda x: L.sums([x, np.ones((2, 3))]), OpArgumentError, "must be a fluid Variable"),
])
def test_errors_name_the_line(build, cls, match):
    x = np.zeros((2, 3), np.float32)
    with pytest.raises(cls, match=match) as info:
        run(build, {"x": x})
    assert THIS_FILE in str(info.value)


def test_create_global_var_refuses_a_name_with_another_type():
    def build():
        L.create_global_var([2], 0.0, "float32", name="g")
        return L.create_global_var([3], 0.0, "float32", name="g")
    with pytest.raises(NameConflictError, match=r"state 'g' already exists as f32\[2\] but "
                                                r"this layer needs persistable state f32\[3\]"):
        run(build)


def test_a_method_may_return_state_that_no_op_reads():
    """A global var or parameter returned as it is (no op of the method reads it)."""
    prog, (g, w) = run(lambda: (L.create_global_var([2], 3.0, "float32", name="g"),
                                L.create_parameter([3], "float32", name="w")))
    np.testing.assert_array_equal(g, [3.0, 3.0])
    np.testing.assert_array_equal(w, prog.get_var("w"))


def test_a_persistable_create_tensor_becomes_state_its_writer_types():
    class Kept(fluid.Program):
        @fluid.network("x")
        def write(self, x):
            x = L.data("x", shape=[2], dtype="float32")
            kept = L.create_tensor("float32", name="kept", persistable=True)
            L.assign(L.reduce_sum(x, dim=0), output=kept)
            return x * 1.0

        @fluid.network()
        def read(self):
            return L.create_global_var([2], 0.0, "float32", name="kept") * 2.0

    prog = Kept().Compile(seed=0)
    var = prog.program.global_block().vars["kept"]
    assert var.persistable and var.shape == (2,)
    prog.write(np.array([[1.0, 2.0], [3.0, 4.0]], np.float32))
    np.testing.assert_array_equal(prog.get_var("kept"), [4.0, 6.0])
    np.testing.assert_array_equal(prog.read(), [8.0, 12.0])   # another method reads it
