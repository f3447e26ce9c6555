"""Programs live across cells: re-running a class cell recompiles the live programs of the
old class in place and keeps each persistable var whose name, shape and dtype match."""
import gc
import weakref

import numpy as np
import pytest

pytest.importorskip("IPython")

import fluid
from fluid import live
from fluid.ipython import extension_state
from tests.extension.helpers import DATA_CELL, NET_CELL, run, run_capture


@pytest.fixture
def trained(ip):
    run(ip, NET_CELL)
    run(ip, DATA_CELL)
    run(ip, "net = Net(hidden=5).Compile(seed=1)\nfor _ in range(5): net.train_step(X, Y)")
    return ip.user_ns["net"]


def reports(ip):
    return extension_state(ip).reports


def test_rerunning_the_same_cell_keeps_everything(ip, trained):
    before = {n: trained.get_var(n) for n in trained.var_names()}
    infer_before = trained.infer(ip.user_ns["X"])
    old_class = ip.user_ns["Net"]
    result, out, err = run_capture(ip, NET_CELL)
    assert result.success
    assert ip.user_ns["Net"] is not old_class
    assert ip.user_ns["net"] is trained                      # same object, new code
    assert live.origin_of(trained).cls is ip.user_ns["Net"]
    assert live.origin_of(trained).options == {"hidden": 5}
    assert out.strip() == reports(ip)[0]
    assert reports(ip)[0].startswith("fluid: recompiled net from the new Net: kept 5")
    assert "added 0" in reports(ip)[0] and "dropped 0" in reports(ip)[0]
    for name, value in before.items():
        np.testing.assert_array_equal(trained.get_var(name), value)
    np.testing.assert_array_equal(trained.infer(ip.user_ns["X"]), infer_before)
    loss = trained.train_step(ip.user_ns["X"], ip.user_ns["Y"])   # still trains
    assert np.isfinite(loss)


def deeper_net(extra_layer: bool = True, learning_rate: float = 0.1,
               features: bool = False) -> str:
    """Net's cell, edited: an optional third layer, another learning rate, a new method."""
    third = ("            h = fluid.layers.fc(input=h, size=self.hidden, act='relu')\n"
             if extra_layer else "")
    body = (
        "import numpy as np\n"
        "class Net(fluid.Program):\n"
        f"    learning_rate = {learning_rate}\n"
        "    hidden = 4\n\n"
        "    def layers(self, x):\n"
        "        with fluid.var_scope('net'):\n"
        "            h = fluid.layers.fc(input=x, size=self.hidden, act='relu')\n"
        + third +
        "            return fluid.layers.fc(input=h, size=1)\n\n"
        "    @fluid.network('x', 'y')\n"
        "    def train_step(self, x, y):\n"
        "        x = fluid.layers.data(name='x', shape=[3], dtype='float32')\n"
        "        y = fluid.layers.data(name='y', shape=[1], dtype='float32')\n"
        "        cost = fluid.layers.mean(fluid.layers.square_error_cost(\n"
        "            input=self.layers(x), label=y), name='cost')\n"
        "        fluid.optimizer.SGD(learning_rate=self.learning_rate).minimize(cost)\n"
        "        return cost\n\n"
        "    @fluid.network('x')\n"
        "    def infer(self, x):\n"
        "        x = fluid.layers.data(name='x', shape=[3], dtype='float32')\n"
        "        return self.layers(x)\n")
    if features:
        body += ("\n    @fluid.network('x')\n"
                 "    def features(self, x):\n"
                 "        x = fluid.layers.data(name='x', shape=[3], dtype='float32')\n"
                 "        with fluid.var_scope('net'):\n"
                 "            return fluid.layers.fc(input=x, size=self.hidden, act='relu')\n")
    return body


def test_an_edit_that_adds_a_layer_and_a_method(ip, trained):
    w0 = trained.get_var("net/fc_0.w_0")
    run(ip, deeper_net(extra_layer=True, features=True))
    (text,) = reports(ip)
    # the new middle layer takes the name fc_1: its [5,5] weight and [5] bias replace the
    # output layer's [5,1] and [1] (new shapes, so they start again); the output layer
    # is the new fc_2
    assert "kept 3 (net/fc_0.w_0, net/fc_0.b_0, learning_rate_0)" in text
    assert "added 2 (net/fc_2.w_0, net/fc_2.b_0)" in text
    assert "reinitialised 2 (net/fc_1.w_0, net/fc_1.b_0)" in text
    np.testing.assert_array_equal(trained.get_var("net/fc_0.w_0"), w0)
    assert trained.get_var("net/fc_1.w_0").shape == (5, 5)
    assert list(trained.methods) == ["train_step", "infer", "features"]
    assert trained.features(ip.user_ns["X"]).shape == (16, 5)


def test_dropped_vars_and_an_edited_learning_rate(ip, trained):
    run(ip, deeper_net(extra_layer=True))
    run(ip, deeper_net(extra_layer=False, learning_rate=0.05))
    (text,) = reports(ip)
    assert "dropped 2 (net/fc_2.w_0, net/fc_2.b_0)" in text
    assert "kept 2 (net/fc_0.w_0, net/fc_0.b_0)" in text
    # fc_1 is the output layer again ([5,1]); the edited learning rate takes effect
    assert "reinitialised 3 (net/fc_1.w_0, net/fc_1.b_0, learning_rate_0)" in text
    np.testing.assert_allclose(trained.get_var("learning_rate_0"), [0.05])
    assert trained.get_var("net/fc_1.w_0").shape == (5, 1)


def test_options_the_new_class_lacks_are_reported(ip, trained):
    run(ip, NET_CELL.replace("    hidden = 4\n", "").replace("self.hidden", "4"))
    (text,) = reports(ip)
    assert "options no longer defined: hidden" in text


def test_a_new_class_that_fails_keeps_the_old_program(ip, trained):
    before = trained.get_var("net/fc_0.w_0")
    broken = NET_CELL.replace('p = fluid.layers.fc(input=h, size=1)',
                              'p = fluid.layers.fc(input=h, size=2)')  # p vs y: [?,2] - [?,1]
    result, out, err = run_capture(ip, broken)
    assert result.success                                   # the class cell itself ran
    (text,) = reports(ip)
    assert text.startswith("fluid: could not recompile net from the new Net (ShapeError")
    assert "keeps running the old code" in err
    np.testing.assert_array_equal(trained.get_var("net/fc_0.w_0"), before)
    trained.train_step(ip.user_ns["X"], ip.user_ns["Y"])


def test_live_reload_off(ip, trained):
    old_class = live.origin_of(trained).cls
    ip.run_line_magic("fluid", "live off")
    run(ip, NET_CELL)
    assert reports(ip) == []
    assert live.origin_of(trained).cls is old_class
    fluid.live_reload(True)
    run(ip, NET_CELL)                                       # a later run catches up
    assert live.origin_of(trained).cls is ip.user_ns["Net"]


def test_every_live_program_of_the_class_is_recompiled(ip, trained):
    run(ip, "other = Net(learning_rate=0.5).Compile(seed=7)\nothers = [other]\ndel other")
    run(ip, NET_CELL)
    texts = reports(ip)
    assert len(texts) == 2
    assert any(t.startswith("fluid: recompiled net ") for t in texts)
    held = ip.user_ns["others"][0]
    assert live.origin_of(held).cls is ip.user_ns["Net"]
    assert live.origin_of(held).options == {"learning_rate": 0.5}


def test_programs_are_tracked_weakly(ip, trained):
    run(ip, "tmp = Net().Compile(seed=0)")
    tmp = weakref.ref(ip.user_ns["tmp"])
    assert any(p is tmp() for p in live.live_programs())
    run(ip, "del tmp")
    gc.collect()
    assert tmp() is None
    ours = [p for p in live.live_programs() if live.origin_of(p).cls.__module__ ==
            ip.user_ns["__name__"]]
    assert ours == [trained]


def test_a_redefined_class_of_another_name_leaves_programs_alone(ip, trained):
    run(ip, NET_CELL.replace("class Net(", "class Net2("))
    assert reports(ip) == []


def test_reader_position_survives_an_edit(ip, tmp_path):
    path = tmp_path / "data.recordio"
    run(ip, "import numpy as np")
    run(ip, f"""
xs = np.arange(40, dtype="float32").reshape(20, 2)
fluid.recordio.write_arrays({str(path)!r}, (xs,))
""")
    cell = f'''
class Reading(fluid.Program):
    @fluid.network()
    def next_batch(self):
        reader = fluid.batch_reader(file={str(path)!r}, batch_size=4, shape=[[2]],
                                    dtype=["float32"])
        x = reader.next_item()
        return fluid.layers.scale(x, scale=1.0)
'''
    run(ip, cell)
    run(ip, "r = Reading().Compile()\nfirst = r.next_batch()\nsecond = r.next_batch()")
    run(ip, cell)
    assert "kept 1" in reports(ip)[0]
    third = ip.user_ns["r"].next_batch()
    np.testing.assert_array_equal(third[:, 0], [16, 18, 20, 22])


ADAM_CELL = NET_CELL.replace("fluid.optimizer.SGD(learning_rate=self.learning_rate)",
                             "fluid.optimizer.Adam(learning_rate=self.learning_rate)")


def test_a_reinitialised_parameter_restarts_its_adam_state_bias_correction_included(ip):
    run(ip, ADAM_CELL)
    run(ip, DATA_CELL)
    run(ip, "net = Net(hidden=5).Compile(seed=1)\nfor _ in range(50): net.train_step(X, Y)")
    net = ip.user_ns["net"]
    w0, w1 = "net/fc_0.w_0", "net/fc_1.w_0"
    np.testing.assert_allclose(net.get_var(f"{w0}_beta1_pow_acc_0"), [0.9 ** 51], rtol=1e-5)
    # one more hidden unit: fc_0's weight and bias and fc_1's weight change shape, fc_1's
    # bias keeps its [1]
    wider = ADAM_CELL.replace('size=self.hidden, act="relu"', 'size=self.hidden + 1, act="relu"')
    run(ip, wider + "\nnet2 = Net(hidden=5).Compile(seed=2)")
    (text,) = reports(ip)
    for param in (w0, w1, "net/fc_0.b_0"):
        for acc in ("moment1", "moment2", "beta1_pow_acc", "beta2_pow_acc"):
            assert f"{param}_{acc}_0" not in text.split("kept")[1].split("added")[0]
        np.testing.assert_array_equal(net.get_var(f"{param}_beta1_pow_acc_0"),
                                      np.float32([0.9]))
        np.testing.assert_array_equal(net.get_var(f"{param}_beta2_pow_acc_0"),
                                      np.float32([0.999]))
        assert not net.get_var(f"{param}_moment1_0").any()
    # the bias that kept its shape keeps its trained value and all its optimizer state
    np.testing.assert_allclose(net.get_var("net/fc_1.b_0_beta1_pow_acc_0"), [0.9 ** 51],
                               rtol=1e-5)
    # so its first step is exactly a fresh program's first step for the restarted params
    fresh = ip.user_ns["net2"]
    fresh.set_parameters({n: net.get_var(n) for n in fresh.parameters()})
    for name in fresh.var_names():
        if "fc_1.b_0" in name:
            fresh.set_var(name, net.get_var(name))
    net.train_step(ip.user_ns["X"], ip.user_ns["Y"])
    fresh.train_step(ip.user_ns["X"], ip.user_ns["Y"])
    for name in (w0, w1):
        np.testing.assert_array_equal(net.get_var(name), fresh.get_var(name))


def test_the_new_program_runs_below_the_class_statement_in_the_same_cell(ip, trained):
    cell = deeper_net(extra_layer=False, features=True).replace("hidden = 4", "hidden = 5")
    result, out, err = run_capture(ip, cell + "\nshape = net.features(X).shape\n"
                                              "methods = list(net.methods)\n")
    assert result.success, err
    assert ip.user_ns["shape"] == (16, 5)
    assert ip.user_ns["methods"] == ["train_step", "infer", "features"]


def test_an_edit_shows_what_changed_and_an_unchanged_rerun_does_not(ip, trained):
    result, out, err = run_capture(ip, deeper_net(extra_layer=False, learning_rate=0.05))
    assert result.success
    assert "what changed in net" in out
    assert "learning_rate_0: starts again: its initialiser's value changed from 0.1 to 0.05" \
        in out
    assert "~ learning_rate_0:f32[1] = fill_constant()" not in out     # ops on demand only
    result, out, err = run_capture(ip, deeper_net(extra_layer=False, learning_rate=0.05))
    assert "what changed" not in out and out.strip() == reports(ip)[0]


def test_a_class_defined_inside_a_function_replaces_nothing(ip, trained):
    run(ip, "def make():\n" + "\n".join("    " + line for line in NET_CELL.splitlines())
        + "\n    return Net\nLocal = make()")
    assert reports(ip) == []
    assert live.origin_of(trained).cls is ip.user_ns["Net"]


def test_history_and_rewind_magics(ip, trained):
    assert trained.history.enabled                    # on in a notebook by default
    X, Y = ip.user_ns["X"], ip.user_ns["Y"]
    before = {n: trained.get_var(n) for n in trained.var_names()}
    losses = [trained.train_step(X, Y) for _ in range(3)]
    table = ip.run_line_magic("fluid", "history")
    assert table.column("what")[:3] == ["train_step"] * 3
    assert table.column("n")[:3] == ["1", "2", "3"]
    assert table.column("loss")[0] == f"{losses[-1]:.6g}"
    assert table.title.startswith("net: history on, 8 change(s)")
    result, out, err = run_capture(ip, "%fluid rewind 3")
    assert result.success, out
    assert out.startswith("fluid: rewound net by 3 change(s) (train_step x3)")
    for name, value in before.items():
        np.testing.assert_array_equal(trained.get_var(name), value)
    run(ip, "other = Net().Compile(seed=3)\nother.train_step(X, Y)")
    from IPython.core.error import UsageError
    with pytest.raises(UsageError, match="several programs have a history"):
        ip.run_line_magic("fluid", "rewind")
    ip.run_line_magic("fluid", "rewind other")
    with pytest.raises(UsageError, match="rewind other: cannot rewind 5 change.s.: the history "
                                         "of Net holds 0"):
        ip.run_line_magic("fluid", "rewind 5 other")
    with pytest.raises(UsageError, match="a count and a program"):
        ip.run_line_magic("fluid", "rewind 1 2")
    with pytest.raises(UsageError, match="unexpected argument"):
        ip.run_line_magic("fluid", "vars net extra")


def test_rewinding_past_an_edit_in_the_shell(ip, trained):
    X = ip.user_ns["X"]
    infer_before = trained.infer(X)
    run(ip, deeper_net(extra_layer=True, features=True))
    assert list(trained.methods) == ["train_step", "infer", "features"]
    result, out, err = run_capture(ip, "%fluid rewind 1")
    assert "runs the earlier program of Net again" in out
    assert list(trained.methods) == ["train_step", "infer"]
    np.testing.assert_array_equal(trained.infer(X), infer_before)


def test_a_diff_displays_as_text_and_a_drawing(ip, trained):
    run(ip, "d = fluid.diff(net, Net(hidden=6))")
    bundle = ip.display_formatter.format(ip.user_ns["d"])[0]
    text = bundle["text/plain"].splitlines()
    assert len(text) <= 6 and "  net/fc_0 (fc): size 5 → 6; re-initialised w_0, b_0" in text
    html = bundle["text/html"]
    assert html.startswith('<div class="fluid-diff">') and "size 5 → 6" in html
    # every op, one click away: the op-level text in a <details>
    ops = html[html.index('<details class="fluid-diff-ops"'):]
    assert "op by op (" in ops and "reinitialised net/fc_0.w_0: shape [3,5] -&gt; [3,6]" in ops
    import shutil
    if shutil.which("dot"):
        assert "<svg" in html
        assert 'class="fluid-graph-layer" data-node="e0"' in html   # the box opens op by op
    run(ip, "d_ops = fluid.diff(net, Net(hidden=6), detail='ops')")
    bundle = ip.display_formatter.format(ip.user_ns["d_ops"])[0]
    assert "  block 0 (state and its initialisers): 3 changed; 2 unchanged" in \
        bundle["text/plain"].splitlines()
    assert "fluid-diff-ops" not in bundle["text/html"]


def test_a_redefinition_with_the_distributed_variables_set_starts_no_job(ip, monkeypatch):
    """A user who runs the role commands from a notebook has FLUID_DISTRIBUTED set: the
    class cell's first run distributes (Compile() is the verb that may), but running it
    again recompiles the live single-process program and starts nothing."""
    import importlib
    launching = importlib.import_module("fluid_interactive.distributed.launch")

    launched = []
    real_launch = launching.launch
    monkeypatch.setattr(launching, "launch",
                        lambda *a, **k: launched.append(1) or real_launch(*a, **k))
    run(ip, NET_CELL)
    run(ip, DATA_CELL)
    run(ip, "net = Net(hidden=5).Compile(seed=1)")             # before the variables are set
    monkeypatch.setenv("FLUID_DISTRIBUTED", "main=train_step,pservers=1")
    run(ip, "dist = Net(hidden=5).Compile(seed=1)\nfirst = dist.train_step(X, Y)")
    assert len(launched) == 1
    result, out, err = run_capture(ip, NET_CELL.replace("learning_rate = 0.1",
                                                        "learning_rate = 0.2"))
    assert result.success, out + err
    assert len(launched) == 1                       # nothing distributed again
    assert [r for r in reports(ip) if r.startswith("fluid: recompiled net from the new Net")]
    assert "could not recompile" not in out + err
    assert ip.user_ns["net"].origin.source_class is ip.user_ns["Net"]
    dist = ip.user_ns["dist"]
    assert np.isfinite(dist.train_step(ip.user_ns["X"], ip.user_ns["Y"]))   # the job runs on
    dist.close()
