"""Checkpoints: `CompiledProgram.save(dir)` and `fluid.load(dir)`.

Round trips (state, results and continued training bit-identical, in this process and a
fresh one), atomicity under failures at every step of a save, corruption and tampering
detection, and refusal of anything that could run code while loading.
"""
import hashlib
import io
import json
import os
import pathlib
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import fluid
from fluid_interactive.ir.records import OpDesc, VarDesc
from fluid_interactive.runtime.live import checkpoint

ROOT = pathlib.Path(__file__).resolve().parents[2]
PYTHONPATH = os.pathsep.join([str(ROOT), str(ROOT / "extension")])


class FitALine(fluid.Program):
    @fluid.network("x", "y")
    def train_step(self, x, y):
        x = fluid.layers.data(name='x', shape=[13], dtype='float32')
        y = fluid.layers.data(name='y', shape=[1], dtype='float32')
        with fluid.var_scope('prediction'):
            y_predict = fluid.layers.fc(input=x, size=1, act=None)
        avg_cost = fluid.layers.mean(fluid.layers.square_error_cost(input=y_predict, label=y))
        fluid.optimizer.SGD(learning_rate=0.01).minimize(avg_cost)
        return avg_cost

    @fluid.network("x")
    def infer(self, x):
        x = fluid.layers.data(name='x', shape=[13], dtype='float32')
        with fluid.var_scope('prediction'):
            return fluid.layers.fc(input=x, size=1, act=None)


W = "prediction/fc_0.w_0"


def batches(n, seed=7):
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal((8, 13)).astype("float32"),
             rng.standard_normal((8, 1)).astype("float32")) for _ in range(n)]


def train(prog, data):
    return [prog.train_step(x, y) for x, y in data]


def state(prog):
    return {n: prog.get_var(n) for n in prog.var_names() if n in prog.scope}


def assert_same_state(a, b):
    assert a.keys() == b.keys()
    for name in a:
        assert a[name].dtype == b[name].dtype, name
        assert a[name].shape == b[name].shape, name
        assert a[name].tobytes() == b[name].tobytes(), name


@pytest.fixture
def prog():
    p = FitALine().Compile(seed=0, device="cpu")
    train(p, batches(3))
    return p


@pytest.fixture
def ckpt(tmp_path, prog):
    path = tmp_path / "ckpt"
    prog.save(str(path))
    return path


# --- helpers that tamper with a checkpoint --------------------------------------------------

def read_manifest(path):
    return json.loads((path / "manifest.json").read_text())


def write_manifest(path, doc, fix_digest=True):
    if fix_digest:
        body = {k: v for k, v in doc.items() if k != "manifest_sha256"}
        canon = json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
        doc["manifest_sha256"] = hashlib.sha256(canon).hexdigest()
    (path / "manifest.json").write_text(json.dumps(doc))


def replace_file(path, name, data):
    """Replace ``name`` with ``data`` and make the manifest agree (a forged checkpoint)."""
    (path / name).write_bytes(data)
    doc = read_manifest(path)
    doc["files"][name] = {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    write_manifest(path, doc)


def file_of(path, var):
    return next(e["file"] for e in read_manifest(path)["vars"] if e["name"] == var)


def npy(array, allow_pickle=False):
    buf = io.BytesIO()
    np.save(buf, array, allow_pickle=allow_pickle)
    return buf.getvalue()


def leftovers(parent):
    return sorted(n for n in os.listdir(parent) if n.startswith("."))


# --- round trips -----------------------------------------------------------------------------

def test_round_trip_state_program_and_results(ckpt, prog):
    prog.set_var("learning_rate_0", np.array([0.03], "float32"))  # non-parameter state
    prog.save(str(ckpt))
    loaded = fluid.load(str(ckpt))
    assert isinstance(loaded, fluid.CompiledProgram)
    assert loaded.seed == 0 and loaded.device == "cpu"
    assert loaded.var_names() == prog.var_names()
    assert fluid.program_to_json(loaded.program) == fluid.program_to_json(prog.program)
    assert_same_state(state(loaded), state(prog))
    assert loaded.get_var("learning_rate_0")[0] == np.float32(0.03)
    x = batches(1, seed=3)[0][0]
    assert loaded.infer(x).tobytes() == prog.infer(x).tobytes()
    assert loaded.infer(x=x[:3]).tobytes() == prog.infer(x[:3]).tobytes()


def test_training_continues_identically(tmp_path):
    data = batches(8)
    reference = FitALine().Compile(seed=0)
    ref_losses = train(reference, data)

    saved = FitALine().Compile(seed=0)
    losses = train(saved, data[:3])
    saved.save(str(tmp_path / "ck"))
    loaded = fluid.load(str(tmp_path / "ck"))
    loaded_losses = losses + train(loaded, data[3:])
    saved_losses = losses + train(saved, data[3:])

    assert loaded_losses == ref_losses == saved_losses
    assert_same_state(state(loaded), state(reference))
    assert_same_state(state(saved), state(reference))


class TwoLayers(fluid.Program):
    def __init__(self, make_optimizer):
        self.make_optimizer = make_optimizer

    @fluid.network("x", "y")
    def train_step(self, x, y):
        x = fluid.layers.data(name='x', shape=[13], dtype='float32')
        y = fluid.layers.data(name='y', shape=[1], dtype='float32')
        hidden = fluid.layers.fc(input=x, size=4, act='relu')
        pred = fluid.layers.fc(input=hidden, size=1)
        cost = fluid.layers.mean(fluid.layers.square_error_cost(input=pred, label=y))
        self.make_optimizer().minimize(cost)
        return cost


@pytest.mark.parametrize("optimizer,kwargs", [("Momentum", {"momentum": 0.9}), ("Adam", {})])
def test_optimizer_accumulators_are_saved(tmp_path, optimizer, kwargs):
    cls = getattr(fluid.optimizer, optimizer, None)
    if cls is None:
        pytest.skip(f"fluid.optimizer.{optimizer} is not available")

    def build():
        return TwoLayers(lambda: cls(learning_rate=0.01, **kwargs)).Compile(seed=0)

    data = batches(8, seed=2)
    reference = build()
    train(reference, data)

    first = build()
    train(first, data[:3])
    accumulators = [n for n in first.var_names() if n not in first.parameters()
                    and not n.startswith("learning_rate")]
    assert accumulators and any(first.get_var(n).any() for n in accumulators)
    first.save(str(tmp_path / "ck"))
    loaded = fluid.load(str(tmp_path / "ck"))
    assert_same_state(state(loaded), state(first))
    train(loaded, data[3:])
    assert_same_state(state(loaded), state(reference))


def test_save_does_not_change_the_program(tmp_path, prog):
    before_objects = prog.scope.snapshot()
    before = state(prog)
    program_json = fluid.program_to_json(prog.program)
    prog.save(str(tmp_path / "a"))
    prog.save(str(tmp_path / "a"))
    assert prog.scope.snapshot().keys() == before_objects.keys()
    assert all(prog.scope[k] is v for k, v in before_objects.items())
    assert_same_state(state(prog), before)
    assert fluid.program_to_json(prog.program) == program_json


def test_fresh_process_gives_identical_results(ckpt, prog, tmp_path):
    x, y = batches(1, seed=11)[0]
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", y)
    script = textwrap.dedent("""
        import sys, numpy as np, fluid
        ckpt, d = sys.argv[1], sys.argv[2]
        p = fluid.load(ckpt)
        x, y = np.load(d + "/x.npy"), np.load(d + "/y.npy")
        np.save(d + "/infer.npy", p.infer(x))
        p.train_step(x, y)
        np.save(d + "/w.npy", p.get_var("prediction/fc_0.w_0"))
        print("ok")
    """)
    env = dict(os.environ, PYTHONPATH=PYTHONPATH)
    out = subprocess.run([sys.executable, "-W", "error", "-c", script, str(ckpt),
                          str(tmp_path)], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    expected_infer = prog.infer(x)
    prog.train_step(x, y)
    assert np.load(tmp_path / "infer.npy").tobytes() == expected_infer.tobytes()
    assert np.load(tmp_path / "w.npy").tobytes() == prog.get_var(W).tobytes()


def test_every_persistable_dtype_and_uninitialized_state(tmp_path):
    program = FitALine().Compile(seed=1).program.clone()
    block0 = program.global_block()
    for name, dtype, shape, value in (("step", "int64", (1,), 5), ("flags", "bool", (2, 2), 1),
                                      ("ema", "float64", (3,), 0.5), ("half", "float16", (),
                                                                       0.25)):
        block0.vars[name] = VarDesc(name, shape, dtype, persistable=True)
        block0.ops.append(OpDesc("fill_constant", {}, {"Out": [name]},
                                 {"shape": list(shape), "dtype": dtype, "value": float(value)}))
    block0.vars["never_set"] = VarDesc("never_set", (2,), "float32", persistable=True)
    prog = fluid.CompiledProgram(program, seed=1)
    prog.set_var("step", np.array([123456789012], "int64"))
    prog.set_var("flags", np.array([[True, False], [False, True]]))
    assert "never_set" not in prog.scope

    prog.save(str(tmp_path / "ck"))
    assert read_manifest(tmp_path / "ck")["uninitialized"] == ["never_set"]
    loaded = fluid.load(tmp_path / "ck", device="cpu")  # a pathlib.Path works too
    assert "never_set" not in loaded.scope
    assert_same_state(state(loaded), state(prog))
    assert loaded.get_var("step").dtype == np.int64
    assert loaded.get_var("step")[0] == 123456789012
    assert loaded.get_var("half").dtype == np.float16 and loaded.get_var("half").shape == ()


def test_overwrite_replaces_the_checkpoint_completely(ckpt, prog, tmp_path):
    before = sorted(p.name for p in ckpt.iterdir())
    train(prog, batches(2, seed=5))
    prog.save(str(ckpt))
    assert sorted(p.name for p in ckpt.iterdir()) == before
    assert_same_state(state(fluid.load(str(ckpt))), state(prog))
    assert leftovers(tmp_path) == []


def test_refuses_to_overwrite_a_checkpoint_holding_a_file_it_did_not_write(ckpt, prog):
    (ckpt / "var-00099.npy").write_bytes(b"someone else's file")
    with pytest.raises(fluid.CheckpointError, match="does not list.*var-00099.npy"):
        prog.save(str(ckpt))
    assert (ckpt / "var-00099.npy").read_bytes() == b"someone else's file"


def test_refuses_to_overwrite_what_is_not_a_checkpoint(tmp_path, prog):
    other = tmp_path / "notes"
    other.mkdir()
    (other / "thesis.tex").write_text("precious")
    with pytest.raises(fluid.CheckpointError, match="not a checkpoint"):
        prog.save(str(other))
    assert (other / "thesis.tex").read_text() == "precious"
    a_file = tmp_path / "file"
    a_file.write_text("x")
    with pytest.raises(fluid.CheckpointError, match="not a directory"):
        prog.save(str(a_file))
    empty = tmp_path / "empty"
    empty.mkdir()
    prog.save(str(empty))
    assert_same_state(state(fluid.load(str(empty))), state(prog))
    prog.save(str(tmp_path / "new" / "nested" / "ck"))  # parents are created
    assert_same_state(state(fluid.load(str(tmp_path / "new" / "nested" / "ck"))), state(prog))


# --- atomicity ---------------------------------------------------------------------------------

def expect_old_or_error(path, old_state):
    """The invariant: the old checkpoint, unchanged, or a clean CheckpointError."""
    try:
        loaded = fluid.load(str(path))
    except fluid.CheckpointError as e:
        return e
    assert_same_state(state(loaded), old_state)
    return None


class Crash(Exception):
    pass


def failing_on(n, real, always_after=False):
    calls = {"n": 0}

    def fn(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == n or (always_after and calls["n"] > n):
            raise Crash(f"simulated crash at call {calls['n']}")
        return real(*args, **kwargs)
    return fn


N_WRITES = 5  # program.json, three vars, manifest.json


@pytest.mark.parametrize("cleanup", [True, False], ids=["cleanup", "no-cleanup"])
@pytest.mark.parametrize("at", range(1, N_WRITES + 1))
def test_crash_while_writing_keeps_the_old_checkpoint(ckpt, prog, tmp_path, monkeypatch,
                                                      at, cleanup):
    old = state(fluid.load(str(ckpt)))
    train(prog, batches(2, seed=9))
    monkeypatch.setattr(checkpoint, "_write_file", failing_on(at, checkpoint._write_file))
    if not cleanup:  # as if the process died: nothing is removed
        monkeypatch.setattr(checkpoint, "_remove", lambda path: None)
    with pytest.raises(Crash):
        prog.save(str(ckpt))
    assert expect_old_or_error(ckpt, old) is None
    assert (leftovers(tmp_path) == []) == cleanup
    monkeypatch.undo()
    prog.save(str(ckpt))  # a later save works and clears what the crash left
    assert leftovers(tmp_path) == []
    assert_same_state(state(fluid.load(str(ckpt))), state(prog))


@pytest.mark.parametrize("at", [1, 2])
def test_crash_while_renaming_rolls_back(ckpt, prog, tmp_path, monkeypatch, at):
    old = state(fluid.load(str(ckpt)))
    train(prog, batches(2, seed=9))
    monkeypatch.setattr(os, "replace", failing_on(at, os.replace))
    with pytest.raises(Crash):
        prog.save(str(ckpt))
    monkeypatch.undo()
    assert expect_old_or_error(ckpt, old) is None
    assert leftovers(tmp_path) == []


def test_crash_between_renames_leaves_nothing_loadable(ckpt, prog, tmp_path, monkeypatch):
    old = state(fluid.load(str(ckpt)))
    train(prog, batches(2, seed=9))
    # The old checkpoint moves aside; every later rename (including the rollback) fails.
    monkeypatch.setattr(os, "replace", failing_on(2, os.replace, always_after=True))
    with pytest.raises(Crash):
        prog.save(str(ckpt))
    monkeypatch.undo()
    error = expect_old_or_error(ckpt, old)
    assert error is not None and "does not exist" in str(error)
    assert "interrupted" in str(error) and "being replaced" in str(error)
    aside = [n for n in leftovers(tmp_path) if ".old-" in n]
    assert len(aside) == 1
    assert_same_state(state(fluid.load(str(tmp_path / aside[0]))), old)  # still complete
    prog.save(str(ckpt))
    assert leftovers(tmp_path) == []
    assert_same_state(state(fluid.load(str(ckpt))), state(prog))


def test_crash_on_first_save_leaves_nothing(tmp_path, prog, monkeypatch):
    monkeypatch.setattr(checkpoint, "_write_file", failing_on(N_WRITES, checkpoint._write_file))
    with pytest.raises(Crash):
        prog.save(str(tmp_path / "ck"))
    with pytest.raises(fluid.CheckpointError, match="does not exist"):
        fluid.load(str(tmp_path / "ck"))
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize("where", ["write:3", "write:5", "replace:1", "replace:2"])
def test_process_killed_mid_save(ckpt, prog, tmp_path, where):
    """A real crash: a child process dies (os._exit) at a point of its save."""
    old = state(fluid.load(str(ckpt)))
    kind, n = where.split(":")
    script = textwrap.dedent(f"""
        import os, sys
        import fluid
        from fluid_interactive.runtime.live import checkpoint
        p = fluid.load(sys.argv[1])
        p.set_var("learning_rate_0", [0.5])
        calls = [0]
        def dying(real):
            def fn(*a, **k):
                calls[0] += 1
                if calls[0] == {n}:
                    os._exit(17)
                return real(*a, **k)
            return fn
        if {kind!r} == "write":
            checkpoint._write_file = dying(checkpoint._write_file)
        else:
            os.replace = dying(os.replace)
        p.save(sys.argv[1])
    """)
    env = dict(os.environ, PYTHONPATH=PYTHONPATH)
    out = subprocess.run([sys.executable, "-W", "error", "-c", script, str(ckpt)], env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 17, out.stderr
    assert leftovers(tmp_path)  # the dead process could not clean up
    error = expect_old_or_error(ckpt, old)
    assert (error is not None) == (where == "replace:2")
    prog.save(str(ckpt))  # the dead process's leftovers are removed
    assert leftovers(tmp_path) == []


def test_loads_during_saves_see_old_or_new(tmp_path):
    import threading
    progs = [FitALine().Compile(seed=s) for s in range(3)]
    weights = {p.get_var(W).tobytes() for p in progs}
    path = str(tmp_path / "ck")
    progs[0].save(path)
    errors, loads, done = [], [0], threading.Event()

    def saver(p):
        try:
            for _ in range(15):
                p.save(path)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    def loader():
        while not done.is_set():
            try:
                assert fluid.load(path).get_var(W).tobytes() in weights
                loads[0] += 1
            except Exception as e:  # pragma: no cover - reported below
                errors.append(e)

    savers = [threading.Thread(target=saver, args=(p,)) for p in progs]
    reader = threading.Thread(target=loader)
    reader.start()
    for t in savers:
        t.start()
    for t in savers:
        t.join()
    done.set()
    reader.join()
    assert errors == [] and loads[0] > 0
    assert leftovers(tmp_path) == []


def test_the_overwrite_check_runs_under_the_path_lock(ckpt, prog, monkeypatch):
    """A save of another thread between its renames makes a checkpoint look like something
    else for an instant: the check that refuses to overwrite must not run then."""
    held = []
    check = checkpoint._refusal

    def recording(target):
        held.append(checkpoint._path_lock(target).locked())
        return check(target)
    monkeypatch.setattr(checkpoint, "_refusal", recording)
    prog.save(str(ckpt))
    assert held and all(held)


def pause_between_renames(monkeypatch):
    """Make the next save stop after moving the old checkpoint aside (the path names
    nothing then) until the returned event is set; returns (reached, release)."""
    import threading
    reached, release = threading.Event(), threading.Event()
    real = os.replace
    calls = [0]

    def replace(src, dst):
        real(src, dst)
        calls[0] += 1
        if calls[0] == 1:
            reached.set()
            assert release.wait(30)
    monkeypatch.setattr(os, "replace", replace)
    return reached, release


def test_a_load_waits_for_a_save_in_progress(ckpt, prog, monkeypatch):
    import threading
    train(prog, batches(2, seed=9))
    reached, release = pause_between_renames(monkeypatch)
    saver = threading.Thread(target=prog.save, args=(str(ckpt),))
    saver.start()
    assert reached.wait(30)
    assert not ckpt.exists()  # between the renames: the old one aside, the new one not in
    threading.Timer(0.5, release.set).start()
    loaded = fluid.load(str(ckpt))   # waits for the save, then reads what it wrote
    saver.join()
    assert_same_state(state(loaded), state(prog))


def test_a_load_that_cannot_get_a_stable_read_says_so(ckpt, monkeypatch):
    """Saves of another process that keep replacing the checkpoint: after `LOAD_WAIT` the
    error says so instead of naming a file as missing."""
    monkeypatch.setattr(checkpoint, "LOAD_WAIT", 0.3)
    monkeypatch.setattr(checkpoint._Reader, "replaced", lambda self: True)
    os.remove(ckpt / file_of(ckpt, W))
    with pytest.raises(fluid.CheckpointError, match="replaced it while it was read") as info:
        fluid.load(str(ckpt))
    assert "the last attempt found" in str(info.value)


@pytest.mark.parametrize("path", ["", ".", "./", "sub/.."])
def test_save_refuses_the_working_directory(tmp_path, prog, monkeypatch, path):
    empty = tmp_path / "work"
    empty.mkdir()
    if path == "sub/..":
        (empty / "sub").mkdir()
    monkeypatch.chdir(empty)
    with pytest.raises(fluid.CheckpointError, match="working directory"):
        prog.save(path)
    assert empty.is_dir() and os.getcwd() == str(empty)
    assert os.listdir(empty) == ([] if path != "sub/.." else ["sub"])
    assert leftovers(tmp_path) == []


def test_save_refuses_a_directory_that_is_neither_empty_nor_a_checkpoint(tmp_path, prog):
    other = tmp_path / "results"
    (other / "nested").mkdir(parents=True)
    with pytest.raises(fluid.CheckpointError, match="not a checkpoint"):
        prog.save(str(other))
    assert os.listdir(other) == ["nested"]


def test_leftovers_of_live_saves_are_kept(ckpt, prog, tmp_path):
    live = tmp_path / f".ckpt.tmp-{os.getppid()}-{'0' * 16}"  # the parent process is alive
    live.mkdir()
    prog.save(str(ckpt))
    assert live.exists()
    assert_same_state(state(fluid.load(str(ckpt))), state(prog))


# --- corruption and tampering --------------------------------------------------------------------

def test_truncated_array_file(ckpt):
    f = ckpt / file_of(ckpt, W)
    f.write_bytes(f.read_bytes()[:-4])
    with pytest.raises(fluid.CheckpointError, match=r"var-\d+\.npy: size is .*truncated"):
        fluid.load(str(ckpt))


@pytest.mark.parametrize("name", ["program.json", "var-00000.npy", "var-00002.npy"])
def test_flipped_byte(ckpt, name):
    f = ckpt / name
    data = bytearray(f.read_bytes())
    data[len(data) - 2] ^= 0x01
    f.write_bytes(bytes(data))
    with pytest.raises(fluid.CheckpointError, match=rf"{name}: SHA-256 .*corrupt"):
        fluid.load(str(ckpt))


@pytest.mark.parametrize("name", ["program.json", "var-00001.npy"])
def test_deleted_file(ckpt, name):
    (ckpt / name).unlink()
    with pytest.raises(fluid.CheckpointError, match=rf"{name}: the file is missing"):
        fluid.load(str(ckpt))


def test_deleted_manifest(ckpt):
    (ckpt / "manifest.json").unlink()
    with pytest.raises(fluid.CheckpointError, match="no manifest.json"):
        fluid.load(str(ckpt))


def test_edited_manifest(ckpt):
    doc = read_manifest(ckpt)
    doc["vars"][0]["shape"] = [12, 1]
    write_manifest(ckpt, doc, fix_digest=False)
    with pytest.raises(fluid.CheckpointError, match="manifest.json: its checksum"):
        fluid.load(str(ckpt))


def test_edited_manifest_with_matching_checksum(ckpt):
    doc = read_manifest(ckpt)
    doc["files"]["var-00000.npy"]["size"] += 1
    write_manifest(ckpt, doc)
    with pytest.raises(fluid.CheckpointError, match=r"var-00000.npy: size .* manifest says"):
        fluid.load(str(ckpt))


@pytest.mark.parametrize("content", [b"", b"{not json", b"[1, 2]", b'{"format": "other"}'])
def test_unreadable_manifest(ckpt, content):
    (ckpt / "manifest.json").write_bytes(content)
    with pytest.raises(fluid.CheckpointError, match="manifest.json"):
        fluid.load(str(ckpt))


@pytest.mark.parametrize("version", [3, 0, "1", "2", None, True, 1.0])
def test_unknown_format_version(ckpt, version):
    doc = read_manifest(ckpt)
    doc["format_version"] = version
    write_manifest(ckpt, doc)
    with pytest.raises(fluid.CheckpointError, match="unknown format version"):
        fluid.load(str(ckpt))


@pytest.mark.parametrize("bad", ["../outside.npy", "/etc/passwd", "sub/dir.npy", ".hidden"])
def test_manifest_file_names_stay_inside(ckpt, bad):
    doc = read_manifest(ckpt)
    doc["files"][bad] = doc["files"].pop("var-00000.npy")
    doc["vars"][0]["file"] = bad
    write_manifest(ckpt, doc)
    with pytest.raises(fluid.CheckpointError, match="malformed"):
        fluid.load(str(ckpt))


def test_missing_var_entry(ckpt):
    doc = read_manifest(ckpt)
    del doc["vars"][1]
    write_manifest(ckpt, doc)
    with pytest.raises(fluid.CheckpointError, match="no value for persistable var"):
        fluid.load(str(ckpt))


def test_not_a_directory(tmp_path):
    with pytest.raises(fluid.CheckpointError, match="does not exist"):
        fluid.load(str(tmp_path / "nothing"))
    (tmp_path / "f").write_text("x")
    with pytest.raises(fluid.CheckpointError, match="is not a directory"):
        fluid.load(str(tmp_path / "f"))


# --- shapes and dtypes against the program ----------------------------------------------------

def test_array_shape_mismatch(ckpt):
    replace_file(ckpt, file_of(ckpt, W), npy(np.zeros((12, 1), "float32")))
    with pytest.raises(fluid.CheckpointError) as info:
        fluid.load(str(ckpt))
    message = str(info.value)
    assert W in message and "float32[13, 1]" in message and "float32[12, 1]" in message


def test_array_dtype_mismatch(ckpt):
    replace_file(ckpt, file_of(ckpt, W), npy(np.zeros((13, 1), "float64")))
    with pytest.raises(fluid.CheckpointError, match=r"declares float32\[13, 1\].*float64"):
        fluid.load(str(ckpt))


def test_program_declares_another_shape(ckpt):
    text = (ckpt / "program.json").read_text()
    doc = json.loads(text)
    var = next(v for v in doc["blocks"][0]["vars"] if v["name"] == W)
    var["shape"] = [14, 1]
    replace_file(ckpt, "program.json", json.dumps(doc).encode())
    with pytest.raises(fluid.CheckpointError) as info:
        fluid.load(str(ckpt))
    message = str(info.value)
    assert W in message and "[14, 1]" in message and "[13, 1]" in message


def test_bad_npy_header(ckpt):
    name = file_of(ckpt, W)
    replace_file(ckpt, name, b"\x93NUMPY\x01\x00garbage")
    with pytest.raises(fluid.CheckpointError, match=rf"{name}: not a valid .npy"):
        fluid.load(str(ckpt))


def test_extra_bytes_after_array(ckpt):
    name = file_of(ckpt, W)
    replace_file(ckpt, name, (ckpt / name).read_bytes() + b"\0" * 4)
    with pytest.raises(fluid.CheckpointError, match="data bytes"):
        fluid.load(str(ckpt))


def test_big_endian_and_fortran_arrays_load(ckpt, prog):
    w = prog.get_var(W)
    replace_file(ckpt, file_of(ckpt, W), npy(np.asfortranarray(w.astype(">f4"))))
    loaded = fluid.load(str(ckpt))
    got = loaded.get_var(W)
    assert got.dtype == np.dtype("float32") and got.dtype.isnative
    assert got.tobytes() == w.tobytes()


# --- loading runs no code ----------------------------------------------------------------------

class _Touch:
    """Unpickling this creates the marker file: proof that pickled data was executed."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (pathlib.Path.touch, (pathlib.Path(self.marker),))


@pytest.mark.parametrize("form", ["object-npy", "raw-pickle", "npz"])
def test_crafted_pickle_never_runs(ckpt, tmp_path, monkeypatch, form):
    marker = tmp_path / "PWNED"
    payload = np.empty((13, 1), dtype=object)
    payload[0, 0] = _Touch(marker)
    if form == "object-npy":
        data = npy(payload, allow_pickle=True)
    elif form == "raw-pickle":
        import pickle
        data = pickle.dumps(payload)
    else:
        buf = io.BytesIO()
        np.savez(buf, w=np.zeros((13, 1), "float32"))
        data = buf.getvalue()
    # The payload really is live: unpickling it would create the marker.
    if form != "npz":
        np.load(io.BytesIO(data), allow_pickle=True)
        assert marker.exists()
        marker.unlink()

    name = file_of(ckpt, W)
    replace_file(ckpt, name, data)  # size and hash match: only the content is hostile
    doc = read_manifest(ckpt)
    for entry in doc["vars"]:
        if entry["name"] == W:
            entry["dtype"] = "float32"
    write_manifest(ckpt, doc)

    import pickle
    monkeypatch.setattr(pickle, "loads", lambda *a, **k: pytest.fail("pickle.loads called"))
    monkeypatch.setattr(pickle, "load", lambda *a, **k: pytest.fail("pickle.load called"))
    with pytest.raises(fluid.CheckpointError, match=name):
        fluid.load(str(ckpt))
    assert not marker.exists()


def test_checkpoint_module_never_uses_pickle():
    source = pathlib.Path(checkpoint.__file__).read_text()
    assert "import pickle" not in source and "allow_pickle=True" not in source
    assert "np.load(" not in source  # arrays are parsed from verified bytes


def test_save_refuses_state_that_does_not_match_the_program(tmp_path, prog):
    prog.scope.values[W] = np.zeros((2, 2), "float32")  # only a bug elsewhere could do this
    with pytest.raises(fluid.CheckpointError, match="declared"):
        prog.save(str(tmp_path / "ck"))
    assert not (tmp_path / "ck").exists() and leftovers(tmp_path) == []
