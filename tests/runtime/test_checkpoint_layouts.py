"""Checkpoints and the layouts of the values ops read (ops/value_layouts.py): a checkpoint
written before the GRU weight took Paddle's layout (format version 1, a fixture written by
that code: fixtures/make_gru_layout_v1.py) loads with its weights and their Adam moments
converted, computes what that code computed and trains on as it did; a new checkpoint
records the layout version; one from a newer layout is refused."""
import json
import pathlib
import shutil

import numpy as np
import pytest
from runtime.fixtures.make_gru_layout_v1 import GruNet, data

import fluid
from fluid_interactive.ops.gru import weight_from_blocks, weight_to_blocks
from fluid_interactive.ops.value_layouts import LAYOUT_VERSION, upgrade
from fluid_interactive.runtime.live import checkpoint

FIXTURES = pathlib.Path(__file__).resolve().parent / "fixtures"
V1 = FIXTURES / "gru_layout_v1"


@pytest.fixture
def v1_copy(tmp_path):
    path = tmp_path / "v1"
    shutil.copytree(V1, path)
    return path


def _manifest(path):
    return json.loads((path / "manifest.json").read_text())


def test_a_version_1_checkpoint_computes_and_trains_as_it_did():
    assert _manifest(V1)["format_version"] == 1 and "layout_version" not in _manifest(V1)
    want = np.load(FIXTURES / "gru_layout_v1.npz", allow_pickle=False)
    prog = fluid.load(str(V1), device="cpu")
    x, n, y = data(10)
    hidden, h = prog.infer(x, n)
    np.testing.assert_allclose(hidden, want["hidden"], rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(h, want["h"], rtol=1e-12, atol=1e-14)
    # Adam's moments of both GRU weights were converted with them: the step is the same
    np.testing.assert_allclose(prog.train(x, n, y), want["loss"], rtol=1e-12)
    hidden, h = prog.infer(x, n)
    np.testing.assert_allclose(hidden, want["hidden_after"], rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(h, want["h_after"], rtol=1e-12, atol=1e-14)


def test_the_weights_and_their_moments_load_in_paddles_layout():
    loaded = checkpoint.read(str(V1)).values
    doc = _manifest(V1)
    files = {e["name"]: np.load(V1 / e["file"], allow_pickle=False) for e in doc["vars"]}
    converted = [f"{w}{m}" for w in ("gru.w", "unit.w") for m in ("", "_moment1_0",
                                                                    "_moment2_0")]
    for name in converted:
        np.testing.assert_array_equal(loaded[name], weight_from_blocks(files[name]))
        assert not np.array_equal(loaded[name], files[name])
    for name in set(files) - set(converted):   # the projection, biases, powers of beta
        np.testing.assert_array_equal(loaded[name], files[name])


def test_a_new_checkpoint_records_the_layout_and_round_trips(tmp_path):
    prog = GruNet().Compile(seed=0, device="cpu")
    prog.train(*data(0))
    prog.save(str(tmp_path / "new"))
    doc = _manifest(tmp_path / "new")
    assert doc["format_version"] == checkpoint.FORMAT_VERSION == 2
    assert doc["layout_version"] == LAYOUT_VERSION
    loaded = fluid.load(str(tmp_path / "new"), device="cpu")
    for name in ("gru.w", "unit.w"):
        np.testing.assert_array_equal(loaded.get_var(name), prog.get_var(name))


def _rewrite(path, **entries):
    doc = _manifest(path)
    doc.update(entries)
    doc = {k: v for k, v in doc.items() if v is not None}
    doc["manifest_sha256"] = checkpoint._manifest_digest(doc)
    (path / "manifest.json").write_text(json.dumps(doc))


def test_a_newer_layout_version_is_refused(v1_copy):
    _rewrite(v1_copy, format_version=2, layout_version=LAYOUT_VERSION + 1)
    with pytest.raises(fluid.CheckpointError, match=f"layout version {LAYOUT_VERSION + 1}, "
                                                    f"written by a newer fluid_interactive"):
        fluid.load(str(v1_copy))


@pytest.mark.parametrize("layout", [None, 0, "2", True])
def test_a_version_2_manifest_needs_a_layout_version(v1_copy, layout):
    _rewrite(v1_copy, format_version=2, layout_version=layout)
    with pytest.raises(fluid.CheckpointError, match="malformed: layout_version"):
        fluid.load(str(v1_copy))


def test_a_version_2_manifest_of_layout_1_converts_as_version_1(v1_copy):
    _rewrite(v1_copy, format_version=2, layout_version=1)
    np.testing.assert_array_equal(checkpoint.read(str(v1_copy)).values["gru.w"],
                                  checkpoint.read(str(V1)).values["gru.w"])


def test_upgrade_converts_once_whichever_ops_read_a_weight(rng):
    """A weight read by gru and gru_unit both converts once; a current one is kept."""
    L = fluid.layers

    class Shared(fluid.Program):
        @fluid.network("x", "h")
        def f(self, x, h):
            x = L.data(name="x", shape=[-1, 2, 6], dtype="float64", append_batch_size=False)
            h = L.data(name="h", shape=[-1, 2], dtype="float64", append_batch_size=False)
            hidden = L.dynamic_gru(x, 2, param_attr="w", bias_attr=False)
            step = L.squeeze(L.slice(x, axes=[1], starts=[0], ends=[1]), axes=[1])
            h, _, _ = L.gru_unit(step, h, 6, param_attr="w", bias_attr=False)
            return hidden, h
    program = Shared().Compile(seed=0).program
    blocks = rng.standard_normal((2, 6))
    got = upgrade(program, {"w": blocks}, 1)["w"]
    np.testing.assert_array_equal(got, weight_from_blocks(blocks))
    np.testing.assert_array_equal(weight_to_blocks(got), blocks)
    assert upgrade(program, {"w": blocks}, LAYOUT_VERSION)["w"] is blocks

