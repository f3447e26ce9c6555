"""`fluid.load` gives a program that continues exactly where the saved one was: readers
made anew and back at the batch they had reached, learning-rate counters, every var an
initialiser creates; also for a checkpoint a distributed job wrote."""
import json

import numpy as np
import pytest

import fluid
from fluid_interactive.distributed import launch, transpile
from fluid_interactive.runtime.live.checkpoint import MANIFEST, _manifest_digest


def _write(path, n=96, seed=0):
    rng = np.random.default_rng(seed)
    xs = rng.standard_normal((n, 4)).astype("float32")
    ys = (xs @ np.array([[1.0], [-1.0], [0.5], [2.0]], "float32") + 0.3).astype("float32")
    fluid.recordio.write_arrays(path, (xs, ys))
    return path


class ReaderFit(fluid.Program):
    path = ""
    decay = False

    @fluid.network()
    def train_step(self):
        reader = fluid.batch_reader(file=self.path, batch_size=8, shape=[[4], [1]],
                                    dtype=["float32", "float32"], format="recordio",
                                    epochs=None)
        x, y = reader.next_item()
        with fluid.var_scope("fit"):
            pred = fluid.layers.fc(input=x, size=1)
        loss = fluid.layers.mean(fluid.layers.square_error_cost(pred, y), name="loss")
        lr = (fluid.layers.exponential_decay(learning_rate=0.1, decay_steps=2, decay_rate=0.5)
              if self.decay else 0.05)
        fluid.optimizer.SGD(learning_rate=lr).minimize(loss)
        return loss


def _continue_both(original, loaded, steps=4):
    for _ in range(steps):
        assert loaded.train_step() == original.train_step()
    for name, value in original.parameters().items():
        np.testing.assert_array_equal(loaded.get_var(name), value)


def test_a_reader_program_loads_and_continues_from_its_batch(tmp_path):
    prog = ReaderFit(path=_write(str(tmp_path / "d.recordio"))).Compile(seed=0)
    for _ in range(5):
        prog.train_step()
    prog.save(str(tmp_path / "ck"))
    loaded = fluid.load(str(tmp_path / "ck"))
    assert loaded.reader_names() == prog.reader_names()
    assert loaded.scope.positions() == prog.scope.positions() == {
        prog.reader_names()[0]: 5}
    _continue_both(prog, loaded, steps=15)    # past the end of the first epoch too


def test_a_schedule_continues_its_learning_rate(tmp_path):
    prog = ReaderFit(path=_write(str(tmp_path / "d.recordio")), decay=True).Compile(seed=0)
    for _ in range(3):
        prog.train_step()
    prog.save(str(tmp_path / "ck"))
    loaded = fluid.load(str(tmp_path / "ck"))
    counters = [n for n in prog.var_names() if "COUNTER" in n]
    assert counters and all(loaded.get_var(n) == prog.get_var(n) for n in counters)
    _continue_both(prog, loaded)


def _rewrite_manifest(directory, edit):
    """Edit a checkpoint's manifest and seal it again (as a writer of that form would)."""
    manifest = directory / MANIFEST
    doc = json.loads(manifest.read_text())
    edit(doc)
    doc.pop("manifest_sha256")
    doc["manifest_sha256"] = _manifest_digest(doc)
    manifest.write_text(json.dumps(doc))


def test_a_checkpoint_without_reader_positions_starts_its_readers_afresh(tmp_path):
    path = _write(str(tmp_path / "d.recordio"))
    prog = ReaderFit(path=path).Compile(seed=0)
    prog.train_step()
    prog.save(str(tmp_path / "ck"))
    reader = prog.reader_names()[0]
    assert json.loads((tmp_path / "ck" / MANIFEST).read_text())["readers"] == {reader: 1}
    _rewrite_manifest(tmp_path / "ck", lambda doc: doc.pop("readers"))  # an older writer's
    loaded = fluid.load(str(tmp_path / "ck"))
    assert loaded.scope.positions() == {reader: 0}
    fresh = ReaderFit(path=path).Compile(seed=0)
    fresh.set_parameters(loaded.parameters())
    assert loaded.train_step() == fresh.train_step()     # both read batch 0


def test_a_distributed_save_loads_single_process(tmp_path):
    data = _write(str(tmp_path / "d.recordio"))
    compiled = ReaderFit(path=data).Compile(seed=0)
    with launch(transpile(compiled, main="train_step", trainers=2, pservers=1)) as job:
        for _ in range(3):
            job.train_step()
        job.save(str(tmp_path / "ck"))
        saved = job.parameters()
    loaded = fluid.load(str(tmp_path / "ck"))
    for name, value in saved.items():
        np.testing.assert_allclose(loaded.get_var(name), value)
    assert np.isfinite(loaded.train_step())      # its reader was made anew


@pytest.mark.parametrize("position", [-1, "3", 2 ** 70, None])
def test_a_malformed_reader_position_is_refused(tmp_path, position):
    prog = ReaderFit(path=_write(str(tmp_path / "d.recordio"))).Compile(seed=0)
    prog.train_step()
    prog.save(str(tmp_path / "ck"))
    reader = prog.reader_names()[0]
    _rewrite_manifest(tmp_path / "ck", lambda doc: doc.update(readers={reader: position}))
    with pytest.raises(fluid.CheckpointError, match="malformed"):
        fluid.load(str(tmp_path / "ck"))
