"""fluid.layers.DynamicRNN over padded batches with lengths: a cell written by hand gives
what NumPy gives row by row at any B and T, padding never matters, gradients agree with
float64 finite differences (on the host and the device stand-in), a gru_unit cell is
dynamic_gru and an lstm_unit cell is dynamic_lstm (forward and gradients), plans do not
grow with T, and mistakes are errors at the user's line."""
import numpy as np
import pytest
from ops.harness import check_block

import fluid

L = fluid.layers
H = 4


def _data(name, shape, dtype="float64", grad=False):
    return L.data(name=name, shape=shape, dtype=dtype, append_batch_size=False,
                  stop_gradient=not grad)


def _padded(x, lengths, value):
    x = x.copy()
    x[np.arange(x.shape[1])[None, :] >= lengths[:, None]] = value
    return x


class TanhCell(fluid.Program):
    """h_t = tanh(fc([x_t, h_{t-1}])): the module docstring's example."""

    @fluid.network("x", "lengths")
    def f(self, x, lengths):
        x = _data("x", [-1, -1, 3])
        lengths = _data("lengths", [-1], "int64")
        drnn = L.DynamicRNN()
        with drnn.block():
            x_t = drnn.step_input(x, lengths=lengths)
            h = drnn.memory(shape=[H], dtype="float64")
            new_h = L.fc(input=[x_t, h], size=H, act="tanh")
            drnn.update_memory(h, new_h)
            drnn.output(new_h)
        return drnn()


def ref_tanh_cell(x, lengths, p):
    out = np.zeros(x.shape[:2] + (H,))
    for b in range(x.shape[0]):
        h = np.zeros(H)
        for t in range(int(lengths[b])):
            h = np.tanh(x[b, t] @ p["fc_0.w_0"] + h @ p["fc_0.w_1"] + p["fc_0.b_0"])
            out[b, t] = h
    return out


def test_a_cell_written_by_hand_matches_numpy_at_any_batch_and_length(rng):
    prog = TanhCell().Compile(seed=0)
    p = prog.parameters()
    for b, t in ((3, 5), (2, 9), (4, 1)):
        x = rng.standard_normal((b, t, 3))
        n = rng.integers(0, t + 1, b).astype(np.int64)
        n[0] = t
        want = ref_tanh_cell(x, n, p)
        np.testing.assert_allclose(prog.f(x, n), want, rtol=1e-12, atol=1e-12)
        for junk in (1e30, np.nan, -np.inf):      # padding may hold anything
            np.testing.assert_array_equal(prog.f(_padded(x, n, junk), n), prog.f(x, n))


def test_lengths_out_of_range_are_a_clear_error(rng):
    prog = TanhCell().Compile(seed=0)
    with pytest.raises(fluid.KernelError, match=r"(?s)lengths must lie in \[0, 5\].*"
                                                r"test_dynamic_rnn.py:\d+"):
        prog.f(rng.standard_normal((2, 5, 3)), np.array([5, 6]))


def _two_memories_two_outputs():
    """A memory given as init, one of rank 3 made from shape, a static input, and two
    outputs; lengths include 0 and the full length."""
    x = _data("x", [-1, -1, 2], grad=True)
    h0 = _data("h0", [-1, 3], grad=True)
    w = _data("w", [2, 3], grad=True)
    bias = _data("bias", [-1, 3], grad=True)
    lengths = _data("lengths", [-1], "int64")
    drnn = L.DynamicRNN()
    with drnn.block():
        x_t = drnn.step_input(x, lengths=lengths)
        h = drnn.memory(init=h0)
        acc = drnn.memory(shape=[2, 2], value=0.5, dtype="float64")
        new_h = L.tanh(L.matmul(x_t, w) + h * 0.7 + drnn.static_input(bias))
        new_acc = acc * 0.9 + L.reshape(x_t * x_t, [-1, 1, 2])
        drnn.update_memory(h, new_h)
        drnn.update_memory(acc, new_acc)
        drnn.output(new_h, L.reduce_sum(new_acc, dim=1))
    hs, accs = drnn()
    return [hs, accs, L.sequence_last_step(hs, lengths=lengths)]


def test_gradients_agree_with_finite_differences_and_padding_gets_none(rng):
    n = np.array([5, 2, 0, 4], np.int64)
    x = _padded(rng.standard_normal((4, 5, 2)), n, 1e30)
    feeds = {"x": x, "h0": rng.standard_normal((4, 3)), "w": rng.standard_normal((2, 3)),
             "bias": rng.standard_normal((4, 3)), "lengths": n}
    hs, accs, last = check_block(_two_memories_two_outputs, feeds,
                                 wrt=["x", "h0", "w", "bias"], max_elements=40)
    assert hs.shape == (4, 5, 3) and accs.shape == (4, 5, 2)
    padded = np.arange(5)[None, :] >= n[:, None]
    assert not hs[padded].any() and not accs[padded].any()
    np.testing.assert_array_equal(last[2], 0.0)           # an empty row has no last step
    np.testing.assert_allclose(last[1], hs[1, 1])


def test_without_lengths_every_row_runs_every_step(rng):
    def build():
        x = _data("x", [-1, -1, 2], grad=True)
        drnn = L.DynamicRNN()
        with drnn.block():
            x_t = drnn.step_input(x)
            total = drnn.memory(shape=[2], dtype="float64")
            drnn.update_memory(total, total + x_t)
            drnn.output(total + x_t)
        return drnn()
    x = rng.standard_normal((3, 6, 2))
    (out,) = check_block(build, {"x": x}, wrt=["x"])
    np.testing.assert_allclose(out, np.cumsum(x, axis=1), rtol=1e-12)


def test_step_idx_counts_the_steps_and_gradients_flow_past_it(rng):
    """The output at step t is x_t * (t + 1), up to each row's length: step_idx is 0 at the
    first step, the same for every row, and carries no gradient of its own."""
    def build():
        x = _data("x", [-1, -1, 2], grad=True)
        lengths = _data("lengths", [-1], "int64")
        drnn = L.DynamicRNN()
        with drnn.block():
            x_t = drnn.step_input(x, lengths=lengths)
            assert drnn.step_idx.name == drnn.step_idx.name   # one counter per network
            drnn.output(x_t * (L.cast(drnn.step_idx, "float64") + 1.0))
        return drnn()
    n = np.array([4, 1, 3], np.int64)
    x = _padded(rng.standard_normal((3, 4, 2)), n, 7.0)
    (out,) = check_block(build, {"x": x, "lengths": n}, wrt=["x"])
    want = x * np.arange(1, 5)[None, :, None]
    np.testing.assert_allclose(out, _padded(want, n, 0.0), rtol=1e-12)
    with pytest.raises(fluid.ProgramDefinitionError, match="DynamicRNN.step_idx is used "
                                                           "inside"):
        check_block(lambda: L.DynamicRNN().step_idx, {})


class Gru(fluid.Program):
    """dynamic_gru and a gru_unit cell in a DynamicRNN, sharing every parameter by name."""

    def net(self, by_hand):
        x = _data("x", [-1, -1, 5], grad=True)
        lengths = _data("lengths", [-1], "int64")
        cot = _data("cot", [-1, -1, H])
        proj = L.fc(input=x, size=3 * H, num_flatten_dims=2,
                    param_attr=fluid.ParamAttr(name="proj_w"),
                    bias_attr=fluid.ParamAttr(name="proj_b"))
        w, b = fluid.ParamAttr(name="gru_w"), fluid.ParamAttr(name="gru_b")
        if by_hand:
            drnn = L.DynamicRNN()
            with drnn.block():
                x_t = drnn.step_input(proj, lengths=lengths)
                h = drnn.memory(shape=[H], dtype="float64")
                new_h, _, _ = L.gru_unit(x_t, h, size=3 * H, param_attr=w, bias_attr=b)
                drnn.update_memory(h, new_h)
                drnn.output(new_h)
            hidden = drnn()
        else:
            hidden = L.dynamic_gru(proj, size=H, lengths=lengths, param_attr=w, bias_attr=b)
        params = [L.create_parameter(s, "float64", name=n)
                  for n, s in (("proj_w", [5, 3 * H]), ("gru_w", [H, 3 * H]),
                               ("gru_b", [1, 3 * H]))]
        grads = fluid.gradients(L.reduce_sum(hidden * cot), [x] + params)
        return [hidden] + grads

    @fluid.network("x", "lengths", "cot")
    def fused(self):
        return self.net(by_hand=False)

    @fluid.network("x", "lengths", "cot")
    def by_hand(self):
        return self.net(by_hand=True)


def test_a_gru_unit_cell_is_dynamic_gru(rng):
    prog = Gru().Compile(seed=0)
    prog.set_var("gru_b", 0.5 * rng.standard_normal((1, 3 * H)))
    n = np.array([6, 3, 0, 1], np.int64)
    args = (rng.standard_normal((4, 6, 5)), n, rng.standard_normal((4, 6, H)))
    for want, got in zip(prog.fused(*args), prog.by_hand(*args)):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


class Lstm(fluid.Program):
    """dynamic_lstm (use_peepholes=False) and an lstm_unit cell in a DynamicRNN; their
    parameters are laid out differently and set to the same values by the test."""

    def data(self):
        return (_data("x", [-1, -1, 5], grad=True), _data("lengths", [-1], "int64"),
                _data("cot", [-1, -1, H]))

    @fluid.network("x", "lengths", "cot")
    def fused(self):
        x, lengths, cot = self.data()
        proj = L.fc(input=x, size=4 * H, num_flatten_dims=2,
                    param_attr=fluid.ParamAttr(name="proj_w"),
                    bias_attr=fluid.ParamAttr(name="proj_b"))
        hidden, _ = L.dynamic_lstm(proj, size=4 * H, lengths=lengths, use_peepholes=False,
                                   param_attr=fluid.ParamAttr(name="lstm_w"),
                                   bias_attr=fluid.ParamAttr(name="lstm_b"))
        params = [L.create_parameter(s, "float64", name=n)
                  for n, s in (("proj_w", [5, 4 * H]), ("lstm_w", [H, 4 * H]))]
        return [hidden] + fluid.gradients(L.reduce_sum(hidden * cot), [x] + params)

    @fluid.network("x", "lengths", "cot")
    def by_hand(self):
        x, lengths, cot = self.data()
        w = L.create_parameter([5 + H, 4 * H], "float64", name="unit_w")
        drnn = L.DynamicRNN()
        with drnn.block():
            x_t = drnn.step_input(x, lengths=lengths)
            h = drnn.memory(shape=[H], dtype="float64")
            c = drnn.memory(shape=[H], dtype="float64")
            new_h, new_c = L.lstm_unit(x_t, h, c, param_attr=fluid.ParamAttr(name="unit_w"),
                                       bias_attr=fluid.ParamAttr(name="unit_b"))
            drnn.update_memory(h, new_h)
            drnn.update_memory(c, new_c)
            drnn.output(new_h)
        hidden = drnn()
        return [hidden] + fluid.gradients(L.reduce_sum(hidden * cot), [x, w])


def test_an_lstm_unit_cell_is_dynamic_lstm(rng):
    """dynamic_lstm's gates are c~, i, f, o; lstm_unit's i, f, o, c~ on fc([x_t, h])."""
    prog = Lstm().Compile(seed=0)
    cols = np.arange(4 * H).reshape(4, H)[[1, 2, 3, 0]].reshape(-1)   # (c, i, f, o) -> (i, f, o, c)
    p = {"proj_w": rng.standard_normal((5, 4 * H)), "proj_b": rng.standard_normal(4 * H),
         "lstm_w": rng.standard_normal((H, 4 * H)), "lstm_b": rng.standard_normal((1, 4 * H))}
    p["unit_w"] = np.concatenate([p["proj_w"], p["lstm_w"]])[:, cols]
    p["unit_b"] = (p["proj_b"] + p["lstm_b"][0])[cols]
    prog.set_parameters({k: v.reshape(prog.get_var(k).shape) for k, v in p.items()})
    n = np.array([6, 3, 0, 1], np.int64)
    args = (rng.standard_normal((4, 6, 5)), n, rng.standard_normal((4, 6, H)))
    hidden, dx, dproj_w, dlstm_w = prog.fused(*args)
    got_hidden, got_dx, dunit_w = prog.by_hand(*args)
    np.testing.assert_allclose(got_hidden, hidden, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(got_dx, dx, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(dunit_w, np.concatenate([dproj_w, dlstm_w])[:, cols],
                               rtol=1e-10, atol=1e-12)


def test_plans_do_not_grow_with_the_sequence_length(rng):
    """The step is one sub-block run by a for loop: the generated code for T = 1000 is the
    code for T = 10, except for the shapes in its comments."""
    class Train(TanhCell):
        @fluid.network("x", "lengths")
        def step(self, x, lengths):
            loss = L.mean(L.sequence_last_step(self.f(x, lengths), lengths=lengths))
            fluid.optimizer.SGD(learning_rate=0.1).minimize(loss)
            return loss
    prog = Train().Compile(seed=0)
    sources = []
    for t in (10, 1000):
        prog.step(rng.standard_normal((4, t, 3)), np.array([t, 1, 0, t // 2]))
        sources.append(prog.step.source)
    assert "for " in sources[0]
    short, long = (s.replace("1000", "10") for s in sources)
    assert short == long


def _compile(body):
    class P(fluid.Program):
        @fluid.network("x", "lengths")
        def f(self):
            x = _data("x", [-1, -1, 3])
            return body(x, _data("lengths", [-1], "int64"))
    return P().Compile(seed=0)


def _rnn(step):
    """A DynamicRNN whose block is ``step(drnn, x_t, h)`` after one step input and one
    memory h [B, H]."""
    def body(x, lengths):
        drnn = L.DynamicRNN()
        with drnn.block():
            x_t = drnn.step_input(x, lengths=lengths)
            h = drnn.memory(shape=[H], dtype="float64")
            step(drnn, x_t, h)
        return drnn()
    return body


HERE = r"test_dynamic_rnn.py:\d+"


def test_mistakes_are_errors_at_the_users_line():
    with pytest.raises(fluid.ProgramDefinitionError,
                       match=rf"(?s)step_input is used inside 'with drnn.block\(\):'.*{HERE}"):
        _compile(lambda x, n: L.DynamicRNN().step_input(x, lengths=n))

    def wrong_shape(drnn, x_t, h):
        drnn.update_memory(h, L.fc(x_t, size=H + 1))
        drnn.output(h)
    with pytest.raises(fluid.ShapeError, match=rf"(?s)memory dynamic_rnn_0.memory_0:f64\[\?,4\] "
                                               rf"cannot take fc_0.tmp_1:f64\[\?,5\].*{HERE}"):
        _compile(_rnn(wrong_shape))

    def not_a_memory(drnn, x_t, h):
        drnn.update_memory(x_t, h)
    with pytest.raises(fluid.OpArgumentError, match=rf"(?s)'dynamic_rnn_0.step_in_0' is not a "
                                                    rf"memory of this DynamicRNN.*{HERE}"):
        _compile(_rnn(not_a_memory))

    def never_updated(drnn, x_t, h):
        drnn.output(x_t)
    with pytest.raises(fluid.ProgramDefinitionError, match="never updated.*update_memory"):
        _compile(_rnn(never_updated))


def test_output_and_memory_mistakes():
    def output_without_batch(drnn, x_t, h):
        drnn.update_memory(h, h)
        drnn.output(L.reduce_sum(h))
    with pytest.raises(fluid.ShapeError, match=rf"(?s)output: reduce_sum_0.tmp_0:f64\[\] must "
                                               rf"be \[B, ...\].*{HERE}"):
        _compile(_rnn(output_without_batch))

    def output_of_another_batch(x, lengths):
        drnn, three_rows = L.DynamicRNN(), L.reshape(x, [3, -1, 3])
        with drnn.block():
            drnn.output(drnn.step_input(three_rows, lengths=lengths))
            drnn.output(L.fill_constant([2, H], "float64", 1.0))
        return drnn()
    with pytest.raises(fluid.ShapeError, match=rf"(?s)fill_constant_0.tmp_0:f64\[2,4\] must be "
                                               rf"\[B, ...\] with the batch of the step input "
                                               rf"dynamic_rnn_0.step_in_0:f64\[3,3\].*{HERE}"):
        _compile(output_of_another_batch)

    def memory_before_input(x, lengths):
        drnn = L.DynamicRNN()
        with drnn.block():
            drnn.memory(shape=[H])
    with pytest.raises(fluid.ProgramDefinitionError, match=rf"(?s)call drnn.step_input.*{HERE}"):
        _compile(memory_before_input)

    def batch_in_shape(drnn, x_t, h):
        drnn.memory(shape=[-1, H])
    with pytest.raises(fluid.OpArgumentError, match=r"shape=\[32\] gives \[B, 32\]"):
        _compile(_rnn(batch_in_shape))

    def updated_twice(drnn, x_t, h):
        drnn.update_memory(h, L.tanh(h))
        drnn.update_memory(h, L.tanh(h))
    with pytest.raises(fluid.ProgramDefinitionError, match=rf"(?s)already updated.*{HERE}"):
        _compile(_rnn(updated_twice))

    def init_inside(x, lengths):
        drnn = L.DynamicRNN()
        with drnn.block():
            x_t = drnn.step_input(x, lengths=lengths)
            drnn.memory(init=L.scale(x_t, 2.0))
    with pytest.raises(fluid.ProgramDefinitionError,
                       match=rf"(?s)memory: 'scale_0.tmp_0' is computed inside the block.*{HERE}"):
        _compile(init_inside)

    def other_lengths(x, lengths):
        drnn = L.DynamicRNN()
        with drnn.block():
            drnn.step_input(x, lengths=lengths)
            drnn.step_input(x, lengths=L.scale(lengths, 1.0))
    with pytest.raises(fluid.OpArgumentError, match="same lengths"):
        _compile(other_lengths)


def test_a_batch_mismatch_known_only_when_the_method_runs_names_the_users_line(rng):
    """The initial memory has 2 rows, the batch 3: the masked update fails when planned,
    at the line of update_memory."""
    def init_of_two_rows(x, lengths):
        h0 = L.fill_constant([2, H], "float64", 0.0)
        drnn = L.DynamicRNN()
        with drnn.block():
            x_t = drnn.step_input(x, lengths=lengths)
            h = drnn.memory(init=h0)
            drnn.update_memory(h, L.tanh(h))   # the line the error names
            drnn.output(L.fc(x_t, size=H))
        return drnn()

    class P(fluid.Program):
        @fluid.network("x", "lengths")
        def f(self):
            return init_of_two_rows(_data("x", [-1, -1, 3]), _data("lengths", [-1], "int64"))
    prog = P().Compile(seed=0)
    line = init_of_two_rows.__code__.co_firstlineno + 6
    with pytest.raises(fluid.ShapeError, match=rf"(?s)where.*\[3, 1\].*\[2, 4\]"
                                               rf".*test_dynamic_rnn.py:{line}"):
        prog.f(rng.standard_normal((3, 4, 3)), np.array([4, 1, 2]))

    def output_of_two_rows(x, lengths):
        drnn = L.DynamicRNN()
        with drnn.block():
            drnn.step_input(x, lengths=lengths)
            drnn.output(L.fill_constant([2, H], "float64", 1.0))   # the line the error names
        return drnn()
    prog = _compile(output_of_two_rows)
    line = output_of_two_rows.__code__.co_firstlineno + 4
    with pytest.raises(fluid.ShapeError, match=rf"(?s)where.*\[4, 3, 1\].*\[4, 2, 4\]"
                                               rf".*test_dynamic_rnn.py:{line}"):
        prog.f(rng.standard_normal((3, 4, 3)), np.array([4, 1, 2]))


def test_a_gru_cell_by_hand_learns(rng):
    """The class is which of three features has the largest sum over a row's valid steps."""
    class Classifier(fluid.Program):
        @fluid.network("x", "lengths", "label")
        def train_step(self, x, lengths, label):
            x = L.data(name="x", shape=[-1, -1, 6], dtype="float32", append_batch_size=False)
            lengths = _data("lengths", [-1], "int64")
            label = L.data(name="label", shape=[1], dtype="int64")
            proj = L.fc(x, size=3 * 16, num_flatten_dims=2)
            drnn = L.DynamicRNN()
            with drnn.block():
                x_t = drnn.step_input(proj, lengths=lengths)
                h = drnn.memory(shape=[16])
                new_h, _, _ = L.gru_unit(x_t, h, size=3 * 16)
                drnn.update_memory(h, new_h)
                drnn.output(new_h)
            last = L.sequence_last_step(drnn(), lengths=lengths)
            loss = L.mean(L.softmax_with_cross_entropy(L.fc(last, size=3), label))
            fluid.optimizer.Adam(learning_rate=0.02).minimize(loss)
            return loss
    x = rng.standard_normal((32, 7, 6)).astype(np.float32)
    n = rng.integers(1, 8, 32).astype(np.int64)
    y = (x[..., :3] * (np.arange(7)[None, :, None] < n[:, None, None])).sum(1).argmax(1)
    prog = Classifier().Compile(seed=0)
    losses = [prog.train_step(x, n, y.reshape(-1, 1)) for _ in range(60)]
    assert losses[-1] < 0.5 * losses[0]
