"""What `transpile` produces, recorded: every program of a plan in the canonical text form
and every fact the plan answers (summary, `pserver_info`, `edges`, `received`, `locate`),
and a digest of each program's JSON form (every field, the text form shows most), compared
with golden files. The transpiler's output must stay the same when its code
changes for another reason (speed, structure): programs saved or launched from an earlier
plan keep meaning the same.

The deep MLP sits at the top of this file on purpose: its ops carry ``test_transpile_golden.py:
<line>`` and the golden files record those lines, so tests added further down never move
them (the other programs come from ``tests/distributed/nets.py``, whose lines they record
too). After an intended change of the transpiler's output, regenerate the files with
``FLUID_UPDATE_GOLDEN=1 python3 -m pytest tests/passes/test_transpile_golden.py`` and
review the diff.
"""
import hashlib
import os
import warnings

import pytest

import fluid


class DeepMLP(fluid.Program):
    """The scale benchmark's network (fc layers with Adam), small."""
    layers = 3
    width = 32

    @fluid.network("x", "y")
    def train_step(self, x, y):
        h = fluid.layers.data(name="x", shape=[self.width], dtype="float32")
        y = fluid.layers.data(name="y", shape=[1], dtype="int64")
        for _ in range(self.layers - 1):
            h = fluid.layers.fc(h, size=self.width, act="relu")
        logits = fluid.layers.fc(h, size=10)
        loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, y))
        fluid.optimizer.Adam(learning_rate=1e-3).minimize(loss)
        return loss


from distributed.nets import MLP, FedRate, FitALine, TwoHeads, with_lr_schedule  # noqa: E402
from frontend.test_gan import GAN  # noqa: E402
from golden import check_golden  # noqa: E402

from fluid_interactive.ir import program_to_json  # noqa: E402
from fluid_interactive.passes.transpiler import transpile  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
GOLDEN = os.path.join(HERE, "golden")


def _plans():
    yield "deep_mlp_2x4", lambda: transpile(DeepMLP().Compile(seed=0), trainers=2,
                                            pservers=4)
    yield "deep_mlp_split_hash", lambda: transpile(DeepMLP().Compile(seed=0), trainers=3,
                                                   pservers=3, split_method="hash",
                                                   min_block_size=64)
    yield "fit_a_line_async", lambda: transpile(FitALine().Compile(seed=0), trainers=2,
                                                pservers=2, mode="async", min_block_size=4)
    yield "mlp_momentum_l1", lambda: transpile(MLP(optimizer="momentum").Compile(seed=0),
                                               trainers=2, pservers=3, min_block_size=16)
    yield "mlp_adam_whole", lambda: transpile(MLP().Compile(seed=0), trainers=1, pservers=2,
                                              slice_var_up=False, min_block_size=1)
    yield "two_optimizers", lambda: transpile(TwoHeads().Compile(seed=0), trainers=2,
                                              pservers=2, min_block_size=4)
    yield "fed_rate", lambda: transpile(FedRate().Compile(seed=0), main="train", trainers=2,
                                        pservers=2, min_block_size=4)
    yield "gan", lambda: transpile(GAN().Compile(seed=0), main=("train_d", "train_g",
                                                                "train_d_real"),
                                   trainers=2, pservers=3, min_block_size=4)
    yield "lr_schedule", lambda: transpile(with_lr_schedule(FitALine().Compile(seed=0)),
                                           trainers=2, pservers=2, min_block_size=4)
    yield "idle_server", lambda: transpile(FitALine().Compile(seed=0), trainers=1,
                                           pservers=4)


def describe(plan) -> str:
    """Everything a plan says, as text."""
    parts = [repr(plan), plan.summary(), plan.text()]
    for name, prog in plan.programs().items():
        # Source locations hold absolute paths: the digest is of the checkout-relative form.
        form = program_to_json(prog).replace(ROOT, "<root>")
        parts.append(f"{name} JSON sha256 {hashlib.sha256(form.encode()).hexdigest()}")
    for ep in plan.endpoints:
        parts.append(f"pserver_info({ep!r}) = {plan.pserver_info(ep)!r}")
    for i in range(plan.trainers):
        parts.append(f"edges({i}) = {plan.edges(i)!r}")
    for m in plan.main:
        parts.append(f"received({m!r}) = {plan.received(m)!r}")
    parts.append(f"distributed_params() = {plan.distributed_params()!r}")
    for name in plan.program.global_block().vars:
        parts.append(f"locate({name!r}) = {plan.locate(name)!r}")
    return "\n\n".join(parts) + "\n"


@pytest.mark.parametrize("name,make", list(_plans()), ids=[n for n, _ in _plans()])
def test_transpile_output_matches_the_golden_file(name, make):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # the idle-server warning is tested elsewhere
        text = describe(make())
    check_golden(os.path.join(GOLDEN, f"transpile_{name}.txt"), text, "transpile output")
