"""Silent mistakes warned about at trace time (`frontend/hints.py`): a batch-major sequence
fed to a StaticRNN, a padded batch pooled without the lengths the method declares. Each
warning names the user's line and the right form; the right form never warns (pytest
turns any warning into an error, so a test of the right form fails if one is given)."""
import warnings

import numpy as np
import pytest

import fluid
from fluid_interactive.errors import FluidWarning, SequenceWarning

L = fluid.layers
HERE = __file__


def _compile(cls):
    return cls().Compile(seed=0)


def _rnn(x, hidden=4):
    """A step that sums its projected inputs: the warning looks at the step input only."""
    rnn = L.StaticRNN()
    with rnn.step():
        x_t = rnn.step_input(x)
        total = rnn.memory(shape=[-1, hidden], batch_ref=x_t)
        rnn.update_memory(total, total + L.fc(input=x_t, size=hidden))
        rnn.step_output(total)
    return rnn()


class BatchMajorRNN(fluid.Program):
    @fluid.network("x")
    def infer(self, x):
        x = L.data(name="x", shape=[5, 3], dtype="float32")      # [?, 5, 3]: batch first
        return _rnn(x)


class BatchMajorThroughFC(fluid.Program):
    @fluid.network("x")
    def infer(self, x):
        x = L.data(name="x", shape=[5, 3], dtype="float32")
        return _rnn(L.fc(input=x, size=6, num_flatten_dims=2))   # [?, 5, 6]


class TimeMajorRNN(fluid.Program):
    @fluid.network("x")
    def infer(self, x):
        x = L.data(name="x", shape=[-1, -1, 3], dtype="float32", append_batch_size=False)
        return _rnn(x)


class TransposedRNN(fluid.Program):
    @fluid.network("x")
    def infer(self, x):
        x = L.data(name="x", shape=[5, 3], dtype="float32")
        return _rnn(L.transpose(x, perm=[1, 0, 2]))              # [5, ?, 3]


def test_a_batch_major_sequence_in_a_static_rnn_warns_at_the_users_line():
    with pytest.warns(SequenceWarning) as caught:
        _compile(BatchMajorRNN)
    (w,) = caught
    text = str(w.message)
    assert "StaticRNN.step_input: x:f32[?,5,3] looks batch-major" in text, text
    assert "declared with append_batch_size" in text
    assert "fluid.layers.transpose(x, perm=[1, 0, 2])" in text
    assert "data('x', shape=[5, -1, 3], append_batch_size=False)" in text
    assert w.filename == HERE     # the user's line, not ours
    assert issubclass(w.category, FluidWarning)


def test_the_batch_dim_is_followed_through_the_layers_before_the_step():
    with pytest.warns(SequenceWarning, match="it comes from data var 'x'"):
        _compile(BatchMajorThroughFC)


@pytest.mark.parametrize("cls", [TimeMajorRNN, TransposedRNN])
def test_a_time_major_sequence_does_not_warn(cls):
    prog = _compile(cls)
    x = np.ones((5, 2, 3), np.float32)            # [T, B, 3]
    fed = x if cls is TimeMajorRNN else x.transpose(1, 0, 2)
    assert prog.infer(fed).shape == (5, 2, 4)


def _pooled(pool, lengths_name="lengths", give=False, lengths_used=False, shape=(-1,)):
    class Pooled(fluid.Program):
        @fluid.network("x", lengths_name)
        def infer(self, x, n):
            x = L.data(name="x", shape=[-1, -1, 3], dtype="float32", append_batch_size=False)
            n = L.data(name=lengths_name, shape=list(shape), dtype="int64",
                       append_batch_size=False)
            if lengths_used:
                x = L.sequence_softmax(L.reduce_sum(x, dim=2), lengths=n)
            return pool(x, n if give else None)
    return Pooled


POOLS = {
    "sequence_last_step": lambda x, n: L.sequence_last_step(x, lengths=n),
    "sequence_pool": lambda x, n: L.sequence_pool(x, "average", lengths=n),
}


@pytest.mark.parametrize("layer", sorted(POOLS))
def test_pooling_a_padded_batch_without_its_declared_lengths_warns(layer):
    with pytest.warns(SequenceWarning) as caught:
        _compile(_pooled(POOLS[layer]))
    (w,) = caught
    text = str(w.message)
    assert f"{layer}: x:f32[?,?,3] is pooled without lengths=" in text, text
    assert "infer() declares lengths:i64[?]" in text
    assert f"{layer}(..., lengths=lengths)" in text
    assert w.filename == HERE


def test_an_int_var_another_layer_takes_as_lengths_counts_whatever_its_name():
    with pytest.warns(SequenceWarning, match="declares n:i64"):
        _compile(_pooled(POOLS["sequence_last_step"], lengths_name="n", lengths_used=True))


@pytest.mark.parametrize("layer", sorted(POOLS))
def test_pooling_with_lengths_does_not_warn(layer):
    prog = _compile(_pooled(POOLS[layer], give=True))
    x = np.arange(2 * 4 * 3, dtype=np.float32).reshape(2, 4, 3)
    out = prog.infer(x, np.array([2, 4]))
    assert out.shape == (2, 3)


def test_an_int_var_that_is_not_lengths_does_not_warn():
    """A label [B, 1] beside a pooled batch of full-length rows is not lengths."""
    prog = _compile(_pooled(POOLS["sequence_last_step"], lengths_name="label",
                            shape=(-1, 1)))
    x = np.ones((2, 4, 3), np.float32)
    assert prog.infer(x, np.zeros((2, 1), np.int64)).shape == (2, 3)


def test_the_first_step_never_warns():
    _compile(_pooled(lambda x, n: L.sequence_first_step(x, lengths=n)))


def test_the_warning_can_be_made_an_error():
    with warnings.catch_warnings():
        warnings.filterwarnings("error", category=FluidWarning)
        with pytest.raises(SequenceWarning):
            _compile(BatchMajorRNN)
