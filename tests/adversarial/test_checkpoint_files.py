"""Files a checkpoint must refuse, each with a clear `CheckpointError` and no hang: named
pipes, links out of the checkpoint, sizes and shapes that overflow, programs the full check
rejects; and `save` deletes only what it wrote."""
import json
import os

import numpy as np
import pytest

import fluid
from fluid_interactive.runtime.live import checkpoint

from .bounded import call_within, release_fifo
from .programs import W, batch, edit_program, manifest, saved, write_manifest

DEADLINE = 20.0


def _load(path):
    return call_within(DEADLINE, fluid.load, str(path))


def _var_file(path, name=W):
    return next(e["file"] for e in manifest(path)["vars"] if e["name"] == name)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes on this platform")
@pytest.mark.parametrize("which", ["manifest", "program", "var"])
def test_a_named_pipe_is_refused_without_blocking(tmp_path, which):
    path = saved(tmp_path / "ckpt")
    name = {"manifest": checkpoint.MANIFEST, "program": checkpoint.PROGRAM,
            "var": _var_file(path)}[which]
    (path / name).unlink()
    os.mkfifo(path / name)
    try:
        with pytest.raises(fluid.CheckpointError, match="named pipe"):
            _load(path)
    finally:
        release_fifo(path / name)


def test_a_symlink_inside_the_checkpoint_is_not_followed(tmp_path):
    path = saved(tmp_path / "ckpt")
    outside = tmp_path / "elsewhere.npy"
    var = _var_file(path)
    os.replace(path / var, outside)        # the same bytes, so the hashes still match
    os.symlink(outside, path / var)
    with pytest.raises(fluid.CheckpointError, match="symbolic link"):
        _load(path)


def test_a_symlinked_manifest_is_not_followed(tmp_path):
    path = saved(tmp_path / "ckpt")
    os.replace(path / checkpoint.MANIFEST, tmp_path / "m.json")
    os.symlink(tmp_path / "m.json", path / checkpoint.MANIFEST)
    with pytest.raises(fluid.CheckpointError, match="symbolic link"):
        _load(path)


def test_a_checkpoint_directory_reached_through_a_link_still_loads(tmp_path):
    path = saved(tmp_path / "ckpt")
    os.symlink(path, tmp_path / "latest")
    assert _load(tmp_path / "latest").get_var(W).shape == (13, 1)


@pytest.mark.parametrize("size", [2 ** 62, 2 ** 80, -1, 1e30, True])
def test_file_sizes_that_overflow_are_refused(tmp_path, size):
    path = saved(tmp_path / "ckpt")
    doc = manifest(path)
    doc["files"][_var_file(path)]["size"] = size
    write_manifest(path, doc)
    with pytest.raises(fluid.CheckpointError, match="malformed"):
        _load(path)


@pytest.mark.parametrize("shape", [[2 ** 40, 2 ** 40], [2 ** 63, 1], [-1, 1], [0, 2 ** 70]])
def test_shapes_that_overflow_are_refused(tmp_path, shape):
    path = saved(tmp_path / "ckpt")
    doc = manifest(path)
    for entry in doc["vars"]:
        if entry["name"] == W:
            entry["shape"] = shape
    write_manifest(path, doc)
    with pytest.raises(fluid.CheckpointError):
        _load(path)


def test_an_npy_header_with_an_overflowing_shape_is_refused(tmp_path):
    from .programs import reseal
    path = saved(tmp_path / "ckpt")
    var = _var_file(path)
    header = {"descr": "<f4", "fortran_order": False, "shape": (2 ** 40, 2 ** 40)}
    buf = __import__("io").BytesIO()
    np.lib.format.write_array_header_1_0(buf, header)
    reseal(path, var, buf.getvalue())
    with pytest.raises(fluid.CheckpointError):
        _load(path)


@pytest.mark.parametrize("seed", [-1, 2 ** 64, 1.5, "0"])
def test_a_bad_seed_is_refused_at_load(tmp_path, seed):
    path = saved(tmp_path / "ckpt")
    doc = manifest(path)
    doc["seed"] = seed
    write_manifest(path, doc)
    with pytest.raises(fluid.CheckpointError, match="malformed"):
        _load(path)


def test_an_unknown_op_is_refused_at_load_not_at_the_first_call(tmp_path):
    path = saved(tmp_path / "ckpt")

    def rename_op(doc):
        doc["blocks"][1]["ops"][0]["type"] = "definitely_not_an_op"
    edit_program(path, rename_op)
    with pytest.raises(fluid.CheckpointError, match="definitely_not_an_op"):
        _load(path)


def test_an_op_whose_shape_rule_fails_is_refused_at_load(tmp_path):
    path = saved(tmp_path / "ckpt")

    def bad_attr(doc):
        for op in doc["blocks"][1]["ops"]:
            if op["type"] == "mul":
                op["attrs"]["x_num_col_dims"] = 7
    edit_program(path, bad_attr)
    with pytest.raises(fluid.CheckpointError, match="shape rule"):
        _load(path)


def test_compile_rejects_a_negative_seed():
    from .programs import FitALine
    with pytest.raises(fluid.ProgramDefinitionError, match="seed"):
        FitALine().Compile(seed=-1)


def test_save_never_deletes_files_that_merely_look_like_a_checkpoint(tmp_path):
    prog = fluid.load(str(saved(tmp_path / "ckpt")))
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "manifest.json").write_text(json.dumps({"their": "data"}))
    (theirs / "program.json").write_text("{}")
    (theirs / "var-00000.npy").write_bytes(b"precious")
    with pytest.raises(fluid.CheckpointError, match="refusing to overwrite"):
        prog.save(str(theirs))
    assert sorted(p.name for p in theirs.iterdir()) == ["manifest.json", "program.json",
                                                         "var-00000.npy"]
    assert (theirs / "var-00000.npy").read_bytes() == b"precious"


def test_save_replaces_a_checkpoint_it_wrote(tmp_path):
    path = saved(tmp_path / "ckpt")
    prog = fluid.load(str(path))
    prog.train_step(*batch(seed=3))
    prog.save(str(path))
    np.testing.assert_array_equal(fluid.load(str(path)).get_var(W), prog.get_var(W))


def test_a_failed_load_leaves_no_trace_on_disk(tmp_path):
    path = saved(tmp_path / "ckpt")
    doc = manifest(path)
    doc["seed"] = -5
    write_manifest(path, doc)
    before = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*"))
    with pytest.raises(fluid.CheckpointError):
        _load(path)
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")) == before


@pytest.mark.parametrize("attr", ["keep", "keep_shapes"])
def test_an_attr_naming_a_missing_var_is_refused_at_load_not_at_the_first_call(tmp_path,
                                                                               attr):
    from .programs import Loop
    prog = Loop().Compile(seed=0)
    prog.save(str(tmp_path / "ckpt"))

    def name_a_ghost(doc):
        loop = next(op for b in doc["blocks"] for op in b["ops"] if "sub_block" in op["attrs"])
        loop["attrs"][attr] = ["nope.tmp"]
    edit_program(tmp_path / "ckpt", name_a_ghost)
    with pytest.raises(fluid.CheckpointError, match=f"attr '{attr}' names 'nope.tmp'"):
        _load(tmp_path / "ckpt")
