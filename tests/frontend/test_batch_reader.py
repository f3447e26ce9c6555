"""The reader inside the program: DESIGN §1's train_step as written, reading RecordIO."""
import gc
import threading

import numpy as np
import pytest

import fluid

from ..leaks import open_fds, settles

FEATURES = 13


def make_data(n, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, FEATURES)).astype(np.float32)
    w = np.linspace(-1, 1, FEATURES).astype(np.float32).reshape(-1, 1)
    return x, (x @ w + 0.5).astype(np.float32)


class FitALine(fluid.Program):
    DEFAULT_READER_FILE_PATH = './data.recordio'
    batch_size = 128
    epochs = 1
    shuffle = False

    @fluid.network()
    def train_step(self):
        reader = fluid.batch_reader(file=self.DEFAULT_READER_FILE_PATH,
                                    batch_size=self.batch_size,
                                    shape=[[13], [1]], dtype=['float32', 'float32'],
                                    format='recordio', epochs=self.epochs,
                                    shuffle=self.shuffle, seed=7)
        x, y = reader.next_item()
        with fluid.var_scope('prediction'):
            y_predict = fluid.layers.fc(input=x, size=1, act=None)
        cost = fluid.layers.square_error_cost(input=y_predict, label=y)
        avg_cost = fluid.layers.mean(cost, name='avg_cost')
        fluid.optimizer.SGD(learning_rate=0.01).minimize(avg_cost)
        return avg_cost

    @fluid.network("x")
    def infer(self, x):
        x = fluid.layers.data(name='x', shape=[13], dtype='float32')
        with fluid.var_scope('prediction'):
            return fluid.layers.fc(input=x, size=1, act=None)


class InMemory(FitALine):
    data = None

    @fluid.network()
    def train_step(self):
        reader = fluid.batch_reader(data=self.data, batch_size=self.batch_size,
                                    epochs=self.epochs)
        x, y = reader.next_item()
        with fluid.var_scope('prediction'):
            y_predict = fluid.layers.fc(input=x, size=1, act=None)
        avg_cost = fluid.layers.mean(fluid.layers.square_error_cost(y_predict, y))
        fluid.optimizer.SGD(learning_rate=0.01).minimize(avg_cost)
        return avg_cost


@pytest.fixture
def recordio_file(tmp_path):
    x, y = make_data(1000)
    path = str(tmp_path / "data.recordio")
    fluid.recordio.write_arrays(path, (x, y))
    return path, x, y


def run_epoch(prog):
    losses = []
    while True:
        try:
            losses.append(prog.train_step())
        except fluid.EOFException:
            return losses


def test_design_example_runs_as_written_from_a_file(recordio_file):
    path, x, y = recordio_file
    prog = FitALine(DEFAULT_READER_FILE_PATH=path, batch_size=100).Compile(seed=0)
    losses = run_epoch(prog)
    assert len(losses) == 10 and losses[-1] < losses[0]
    pred = prog.infer([3, 4, 6, 3, 5, 7, 8, 6, 5, 4, 1, 5, 8])
    assert pred.shape == (1, 1)


def test_file_and_memory_learn_the_same(recordio_file):
    path, x, y = recordio_file
    a = FitALine(DEFAULT_READER_FILE_PATH=path, batch_size=64, epochs=3).Compile(seed=1)
    b = InMemory(data=(x, y), batch_size=64, epochs=3).Compile(seed=1)
    la, lb = run_epoch(a), run_epoch(b)
    assert len(la) == len(lb) == 3 * 16       # 1000 / 64 -> 15 full batches + a short one
    np.testing.assert_allclose(la, lb, rtol=1e-6)
    for k, v in a.parameters().items():
        np.testing.assert_allclose(v, b.parameters()[k], rtol=1e-6)


def test_eof_leaves_parameters_untouched_and_reset_restarts(recordio_file):
    path, _, _ = recordio_file
    prog = FitALine(DEFAULT_READER_FILE_PATH=path, batch_size=500).Compile(seed=0)
    first = prog.train_step()
    prog.train_step()
    before = prog.parameters()
    with pytest.raises(fluid.EOFException):
        prog.train_step()
    for k, v in before.items():
        np.testing.assert_array_equal(prog.parameters()[k], v)
    prog.reset_readers()
    again = prog.train_step()
    assert again != first     # same batch, trained parameters: a smaller loss
    assert again < first


def test_consecutive_calls_walk_the_data_and_other_methods_do_not_disturb(recordio_file):
    path, x, y = recordio_file
    prog = InMemory(data=(x, y), batch_size=250, epochs=1).Compile(seed=0)
    ref = InMemory(data=(x, y), batch_size=250, epochs=1).Compile(seed=0)
    seen = []
    for _ in range(4):
        seen.append(prog.train_step())
        prog.infer(x[:3])                     # an unrelated method in between
    assert seen == [ref.train_step() for _ in range(4)]


def test_epochs_none_never_ends(recordio_file):
    path, x, y = recordio_file
    prog = InMemory(data=(x[:10], y[:10]), batch_size=4, epochs=None).Compile(seed=0)
    for _ in range(50):
        prog.train_step()


def test_short_last_batch_gets_its_own_plan(recordio_file):
    path, x, y = recordio_file
    prog = InMemory(data=(x[:10], y[:10]), batch_size=4, epochs=1).Compile(seed=0)
    assert len(run_epoch(prog)) == 3
    assert len(prog.train_step._runner.plans) == 2   # batches of 4 and of 2


def test_reader_reset_through_the_handle(recordio_file):
    path, x, y = recordio_file
    handles = []

    class Keep(InMemory):
        @fluid.network()
        def train_step(self):
            reader = fluid.batch_reader(data=self.data, batch_size=5)
            handles.append(reader)
            x, y = reader.next_item()
            return fluid.layers.mean(x)

    prog = Keep(data=(x[:10], y[:10])).Compile()
    a = prog.train_step()
    prog.train_step()
    with pytest.raises(fluid.EOFException):
        prog.train_step()
    handles[0].reset()
    assert prog.train_step() == a


def test_reader_shows_in_program_text(recordio_file):
    path, _, _ = recordio_file
    prog = FitALine(DEFAULT_READER_FILE_PATH=path).Compile()
    text = str(prog)
    assert "reader_0 = create_batch_reader(" in text.replace(":reader", "")
    assert "= read(Reader=reader_0)" in text
    fluid.check_program(prog.program)


def test_bad_reader_arguments_are_clear_errors(recordio_file):
    class Bad(fluid.Program):
        @fluid.network()
        def f(self):
            fluid.batch_reader(file="x.recordio", batch_size=0, shape=[[1]], dtype=["float32"])

    with pytest.raises(fluid.OpArgumentError, match="batch_size"):
        Bad().Compile()


def test_no_thread_or_file_leaks_after_many_compile_close_cycles(recordio_file):
    path, _, _ = recordio_file
    threads, fds = threading.active_count(), open_fds()
    for i in range(100):
        prog = FitALine(DEFAULT_READER_FILE_PATH=path, batch_size=100).Compile(seed=i)
        prog.train_step()
        if i % 2:
            prog.close()
        del prog
        gc.collect()
    got_threads, got_fds = settles(threads, fds)
    assert got_threads <= threads and got_fds <= fds


def test_a_sample_of_the_wrong_shape_is_a_clear_error(recordio_file):
    path, _, _ = recordio_file

    class WrongShape(FitALine):
        @fluid.network()
        def train_step(self):
            reader = fluid.batch_reader(file=self.DEFAULT_READER_FILE_PATH, batch_size=10,
                                        shape=[[12], [1]], dtype=["float32", "float32"])
            x, y = reader.next_item()
            return fluid.layers.mean(x)

    prog = WrongShape(DEFAULT_READER_FILE_PATH=path).Compile()
    with pytest.raises(fluid.ReaderError) as info:
        prog.train_step()
    message = str(info.value)
    assert path in message and "12" in message and "13" in message
    prog.close()


def test_a_corrupt_file_fails_the_call_and_changes_nothing(recordio_file, tmp_path):
    path, _, _ = recordio_file
    with open(path, "rb") as f:
        data = bytearray(f.read())
    data[len(data) // 2] ^= 0xFF                    # inside a later chunk's payload
    bad = str(tmp_path / "bad.recordio")
    with open(bad, "wb") as f:
        f.write(bytes(data))
    prog = FitALine(DEFAULT_READER_FILE_PATH=bad, batch_size=100).Compile(seed=0)
    with pytest.raises((fluid.ReaderError, fluid.RecordIOError)) as info:
        for _ in range(20):
            before = prog.parameters()
            prog.train_step()
    assert "bad.recordio" in str(info.value) or "bad.recordio" in str(info.value.__cause__)
    for k, v in before.items():
        np.testing.assert_array_equal(prog.parameters()[k], v)
    prog.close()
