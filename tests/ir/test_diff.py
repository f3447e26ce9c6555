"""fluid.diff: by layer, one short line per layer an edit changes; by op, the ops it adds,
removes and changes, per method; and what a recompilation keeps of the state; for classes,
compiled programs and checkpoints."""
import numpy as np
import pytest

import fluid
from fluid_interactive.ir.diff import GLOBAL, diff_programs, optimizer_state_of
from tests.render.models import MLP3


class Net(fluid.Program):
    learning_rate = 0.1
    hidden = 4
    act = "relu"
    layers = 1
    optimizer = "adam"

    def body(self, x):
        with fluid.var_scope("net"):
            h = x
            for _ in range(self.layers):
                h = fluid.layers.fc(input=h, size=self.hidden, act=self.act)
            return fluid.layers.fc(input=h, size=1)

    @fluid.network("x", "y")
    def train_step(self, x, y):
        x = fluid.layers.data(name="x", shape=[3], dtype="float32")
        y = fluid.layers.data(name="y", shape=[1], dtype="float32")
        cost = fluid.layers.mean(fluid.layers.square_error_cost(input=self.body(x), label=y),
                                 name="cost")
        opt = (fluid.optimizer.Adam if self.optimizer == "adam" else fluid.optimizer.SGD)
        opt(learning_rate=self.learning_rate).minimize(cost)
        return cost

    @fluid.network("x")
    def infer(self, x):
        x = fluid.layers.data(name="x", shape=[3], dtype="float32")
        return self.body(x)


def edited(diff, block):
    """(kind, old type, new type) of each op that differs in ``block``."""
    return [(c.kind, c.old.type if c.old else None, c.new.type if c.new else None)
            for c in diff.block(block).ops]


def test_the_same_class_twice_differs_in_nothing():
    d = fluid.diff(Net, Net())
    assert not d.changed
    assert all(b.status == "same" for b in d.blocks)
    assert d.kept == [v.name for v in fluid.diff(Net, Net).new.global_block().vars.values()
                      if v.persistable]
    assert "train_step: unchanged" in d.text(detail="ops")
    assert str(d).splitlines() == ["diff Net (a) → Net (b): no differences", "  state: all 21 kept"]


def test_an_activation_and_a_learning_rate_edit_list_exactly_the_edited_ops():
    d = fluid.diff(Net(), Net(act="tanh", learning_rate=0.05))
    assert edited(d, "train_step") == [("changed", "relu", "tanh"),
                                       ("changed", "relu_grad", "tanh_grad")]
    assert edited(d, "infer") == [("changed", "relu", "tanh")]
    assert edited(d, GLOBAL) == [("changed", "fill_constant", "fill_constant")]
    (lr,) = d.block(GLOBAL).ops
    assert lr.new.output("Out") == ["learning_rate_0"]
    assert lr.details == ["attr value: 0.1 -> 0.05"]
    assert d.block("train_step").ops[0].details == ["type relu -> tanh"]
    assert d.reinitialised == ["learning_rate_0"] and not d.added and not d.dropped
    text = d.text(detail="ops")
    assert "~ net/fc_0.tmp_2:f32[?,4] = tanh(X=net/fc_0.tmp_1)" in text
    assert "reinitialised learning_rate_0: its initialiser's value changed from 0.1 to 0.05" \
        in text


def test_an_inserted_layer_shows_as_inserted_ops():
    d = fluid.diff(Net(optimizer="sgd"), Net(optimizer="sgd", layers=2))
    # names follow the layers' order: the inserted layer takes the names fc_1 (its mul and
    # add are the old output layer's, now [?,4] wide) and the output layer is the new fc_2
    assert edited(d, "infer") == [("changed", "mul", "mul"),
                                  ("changed", "elementwise_add", "elementwise_add"),
                                  ("added", None, "relu"), ("added", None, "mul"),
                                  ("added", None, "elementwise_add")]
    mul = d.block("infer").ops[0]
    assert mul.details == ["input Y net/fc_1.w_0: f32[4,1] -> f32[4,4]",
                           "output Out net/fc_1.tmp_0: f32[?,1] -> f32[?,4]"]
    assert d.block("infer").unchanged == 3
    assert d.block("infer").signature == ["returns net/fc_1.tmp_1 -> net/fc_2.tmp_1"]
    assert d.added == ["net/fc_2.w_0", "net/fc_2.b_0"]
    assert d.reinitialised == ["net/fc_1.w_0", "net/fc_1.b_0"]


def test_methods_added_and_removed_and_signatures():
    class More(Net):
        @fluid.network("x")
        def features(self, x):
            x = fluid.layers.data(name="x", shape=[3], dtype="float32")
            return fluid.layers.fc(input=x, size=2)

        @fluid.network("x", "z")
        def infer(self, x, z):
            x = fluid.layers.data(name="x", shape=[3], dtype="float32")
            z = fluid.layers.data(name="z", shape=[3], dtype="float32")
            return self.body(x + z)

    d = fluid.diff(Net, More)
    assert d.block("features").status == "added"
    assert d.block("infer").signature == [
        "arguments (x:f32[?,3]) -> (x:f32[?,3], z:f32[?,3])"]
    assert d.added == ["fc_0.w_0", "fc_0.b_0"]
    back = fluid.diff(More, Net)
    assert back.block("features").status == "removed" and back.dropped == d.added


def test_a_reinitialised_parameter_takes_all_its_optimizer_state_with_it():
    d = fluid.diff(Net(), Net(hidden=5))
    w = "net/fc_0.w_0"
    tied = optimizer_state_of(d.new, w)
    assert sorted(tied) == sorted(f"{w}_{k}_0" for k in ("moment1", "moment2",
                                                         "beta1_pow_acc", "beta2_pow_acc"))
    status = {s.name: s for s in d.state}
    for name in tied:
        assert status[name].status == "reinitialised", name
    assert status[f"{w}_beta1_pow_acc_0"].reason == f"optimizer state of {w}, which starts again"
    # the output layer's bias keeps its shape, its value and its optimizer state
    assert status["net/fc_1.b_0"].status == "kept"
    assert all(status[n].status == "kept" for n in optimizer_state_of(d.new, "net/fc_1.b_0"))


def test_compiled_programs_and_checkpoints_compare_values_too(tmp_path, rng):
    a = Net().Compile(seed=0)
    b = Net().Compile(seed=0)
    x = rng.standard_normal((8, 3)).astype(np.float32)
    y = rng.standard_normal((8, 1)).astype(np.float32)
    assert not fluid.diff(a, b).changed
    b.train_step(x, y)
    d = fluid.diff(a, b.train_step)        # a method stands for its program
    assert not any(blk.status != "same" for blk in d.blocks) and d.changed
    notes = {s.name: s.values for s in d.state if s.values}
    assert "net/fc_0.w_0" in notes and notes["net/fc_0.w_0"].startswith("values differ")
    a.save(str(tmp_path / "a"))
    b.save(str(tmp_path / "b"))
    from_disk = fluid.diff(str(tmp_path / "a"), str(tmp_path / "b"))
    assert {s.name: s.values for s in from_disk.state if s.values} == notes
    assert from_disk.old_label == "a" and from_disk.new_label == "b"


def test_a_program_desc_and_bad_arguments():
    desc = Net().Compile(seed=0).program
    assert not fluid.diff(desc, Net).changed
    with pytest.raises(TypeError, match="fluid.diff compares programs"):
        fluid.diff(desc, 42)


def test_diff_programs_ignores_source_lines():
    a = Net().Compile(seed=0).program
    b = a.clone()
    for block in b.blocks:
        for op in block.ops:
            op.loc = None
    assert not diff_programs(a, b).changed


# --- by layer ----------------------------------------------------------------------------------

def test_a_size_change_is_two_short_lines_one_per_layer():
    """The issue's edit: a hidden layer 64 -> 48 wide (MLP3: 64 -> 128 -> 64 -> 10, Adam)."""
    d = fluid.diff(MLP3, MLP3(hidden=48))
    assert str(d).splitlines() == [
        "diff MLP3 (a) → MLP3 (b): 2 layers changed",
        "  mlp/fc_1 (fc): size 64 → 48; re-initialised w_0, b_0 with their adam state",
        "  mlp/fc_2 (fc): input follows mlp/fc_1; re-initialised w_0 with its adam state",
        "  state: 16 kept, 15 start again",
        "  op by op: 24 ops differ, 4 of them only following the lines above; "
        "text(detail='ops') lists them"]
    # the op level is still there, on demand: ~100 lines for this one-number edit
    assert len(d.text(detail="ops").splitlines()) > 90
    assert str(fluid.diff(MLP3, MLP3(hidden=48), detail="ops")) == d.text(detail="ops")
    fc1, fc2 = d.layers
    assert (fc1.kind, fc1.name, fc1.status, fc1.layer_type) == ("layer", "mlp/fc_1", "changed",
                                                                "fc")
    assert fc1.methods == ["train_step", "infer"]
    assert sorted(s.name for s in fc2.state) == sorted(
        ["mlp/fc_2.w_0"] + optimizer_state_of(d.new, "mlp/fc_2.w_0"))
    assert {c.op.type for _, c in fc1.ops} >= {"mul", "elementwise_add", "relu", "adam"}


def test_an_activation_edit_is_a_few_lines():
    d = fluid.diff(MLP3, MLP3(act="tanh"))
    assert str(d).splitlines() == [
        "diff MLP3 (a) → MLP3 (b): 2 layers changed; backward pass changed",
        "  mlp/fc_0 (fc): relu → tanh",
        "  mlp/fc_1 (fc): relu → tanh",
        "  backward pass: relu_grad → tanh_grad",
        "  state: all 31 kept",
        "  op by op: 6 ops differ; text(detail='ops') lists them"]


def test_by_layer_an_inserted_layer_a_learning_rate_and_an_optimizer():
    d = fluid.diff(Net(optimizer="sgd"), Net(optimizer="sgd", layers=2, learning_rate=0.05))
    lines = str(d).splitlines()
    assert lines[1:6] == [
        "  net/fc_1 (fc): size 1 → 4; adds relu; re-initialised w_0, b_0",
        "  net/fc_2 (fc): new layer, output f32[?,1]; new w_0, b_0",
        "  square_error_cost_0 (square_error_cost): input from net/fc_2 (was net/fc_1)",
        "  infer: returns net/fc_1.tmp_1 → net/fc_2.tmp_1",
        "  learning_rate_0: starts again: its initialiser's value changed from 0.1 to 0.05"]
    assert [e.status for e in d.layers[:2]] == ["changed", "added"]
    back = fluid.diff(Net(optimizer="sgd", layers=2), Net(optimizer="sgd"))
    assert "  net/fc_2 (fc): removed; drops w_0, b_0" in str(back).splitlines()
    opt = fluid.diff(Net(optimizer="sgd"), Net())
    assert str(opt).splitlines()[:3] == ["diff Net (a) → Net (b): optimizer changed",
                                         "  optimizer: sgd → adam; 16 new state vars",
                                         "  unchanged methods: infer"]


def test_by_layer_methods_added_and_removed():
    class More(Net):
        @fluid.network("x")
        def features(self, x):
            x = fluid.layers.data(name="x", shape=[3], dtype="float32")
            return fluid.layers.fc(input=x, size=2)

    lines = str(fluid.diff(Net, More)).splitlines()
    assert "  fc_0 (fc): new layer; new w_0, b_0" in lines
    assert "  features: new method, 2 ops (fc_0)" in lines
    assert "  unchanged methods: train_step, infer" in lines
    assert "  features: method removed, 2 ops (fc_0)" in str(fluid.diff(More, Net)).splitlines()


def test_by_layer_values_that_differ(rng):
    a, b = MLP3().Compile(seed=0), MLP3().Compile(seed=0)
    b.train_step(rng.standard_normal((8, 64)).astype(np.float32), np.zeros((8, 1), np.int64))
    lines = str(fluid.diff(a, b)).splitlines()
    assert lines[0] == "diff MLP3 (a) → MLP3 (b): values differ"
    assert lines[-1].startswith("  values differ: mlp/fc_0 (w_0, b_0); mlp/fc_1 (w_0, b_0); "
                                "mlp/fc_2 (w_0, b_0); optimizer (")


def test_detail_must_be_known():
    with pytest.raises(ValueError, match="detail must be 'layers'"):
        fluid.diff(Net, Net, detail="op")
    with pytest.raises(ValueError, match="detail must be 'layers'"):
        fluid.diff(Net, Net).text(detail="layer")


def test_by_layer_state_no_layer_reads_goes_with_its_accumulators():
    """A parameter server's parameters are read by no forward op: each is one line, its
    Adam accumulators with it."""
    from tests.render.models import DigitsMLP
    compiled = DigitsMLP().Compile(seed=0)
    two, one = (fluid.transpile(compiled, main="train", trainers=2, pservers=n,
                                min_block_size=1024) for n in (2, 1))
    d = fluid.diff(two.pserver_program(two.endpoints[0]), one.pserver_program(one.endpoints[0]))
    lines = str(d).splitlines()
    assert "  mlp/fc_1.w_0: new with its adam state" in lines
    assert "  mlp/fc_0.w_0.block1: dropped with its adam state" in lines
    assert not any("moment" in line for line in lines)


def test_layers_that_changed_alike_are_one_line():
    deep = {"layers": 6, "optimizer": "sgd"}
    assert str(fluid.diff(Net(**deep), Net(act="tanh", **deep))).splitlines()[1] == \
        "  net/fc_0 … net/fc_5 (6 fc layers): relu → tanh"
    lines = str(fluid.diff(Net(**deep), Net(hidden=3, **deep))).splitlines()
    assert lines[1:4] == [
        "  net/fc_0 (fc): size 4 → 3; re-initialised w_0, b_0",
        "  net/fc_1 … net/fc_5 (5 fc layers): size 4 → 3; input follows the layer before; "
        "re-initialised w_0, b_0",
        "  net/fc_6 (fc): input follows net/fc_5; re-initialised w_0"]
    two = str(fluid.diff(Net(layers=2, optimizer="sgd"), Net(layers=2, act="tanh",
                                                             optimizer="sgd")))
    assert "  net/fc_0 (fc): relu → tanh" in two.splitlines()    # two alike: two lines
