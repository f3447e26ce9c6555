"""Every optimizer and gradient clip beyond SGD/Momentum/Adam on 2 trainers x 2 parameter
servers equals one process (1e-5): parameters, every piece of optimizer state and the
averaged weights, with the state cut into row blocks beside its parameter, whole where
the update reads the parameter whole (Lamb, LARS, DP-SGD, a gradient clipped by its
norm), and a global-norm clip computed on each server from every clipped gradient. Then
one Ray job (several optimizers and clips at once) equals one process too."""
import numpy as np
import pytest
from distributed.nets import batches, linear_data

import fluid
from fluid_interactive.distributed import launch, transpile

TOL = 1e-5
CLIP = fluid.clip


def dpsgd():
    opt = fluid.optimizer.Dpsgd(0.05, clip=1.0, batch_size=8.0, sigma=0.1)
    opt._seed = 7    # the same noise wherever the update runs
    return opt


def recompute():
    opt = fluid.optimizer.RecomputeOptimizer(fluid.optimizer.Adam(0.01))
    opt._set_checkpoints(["fc_0.tmp_2"])
    return opt


CASES = {   # optimizer, whether its weights stay whole
    "adagrad": (lambda: fluid.optimizer.Adagrad(0.05), False),
    "decayed_adagrad": (lambda: fluid.optimizer.DecayedAdagrad(0.05), False),
    "rmsprop_centered": (lambda: fluid.optimizer.RMSProp(0.01, momentum=0.3, centered=True),
                         False),
    "adadelta": (lambda: fluid.optimizer.Adadelta(1.0), False),
    "adamax": (lambda: fluid.optimizer.Adamax(0.01), False),
    "ftrl": (lambda: fluid.optimizer.Ftrl(0.05, l1=0.001, l2=0.001), False),
    "lamb": (lambda: fluid.optimizer.Lamb(0.01), True),
    "lars": (lambda: fluid.optimizer.LarsMomentum(0.1, 0.9), True),
    "dpsgd": (dpsgd, True),
    "lookahead": (lambda: fluid.optimizer.LookaheadOptimizer(fluid.optimizer.SGD(0.05), k=3),
                  False),
    "recompute": (recompute, False),
    "clip_value": (lambda: fluid.optimizer.SGD(0.05, grad_clip=CLIP.GradientClipByValue(0.02)),
                   False),
    "clip_norm": (lambda: fluid.optimizer.Adam(0.01, grad_clip=CLIP.GradientClipByNorm(0.1)),
                  True),
    "clip_global_norm": (lambda: fluid.optimizer.Momentum(
        0.05, 0.9, grad_clip=CLIP.GradientClipByGlobalNorm(0.2)), True),
}


def net(optimizer, average=None):
    """x[13] -> fc(16, tanh) -> fc(1); ``average``: 'model' or 'ema' after minimize."""
    class Net(fluid.Program):
        averager = None

        @fluid.network("x", "y")
        def train_step(self, x, y):
            x = fluid.layers.data(name="x", shape=[13])
            y = fluid.layers.data(name="y", shape=[1])
            h = fluid.layers.fc(input=x, size=16, act="tanh")
            loss = fluid.layers.mean(fluid.layers.square_error_cost(
                fluid.layers.fc(input=h, size=1), y))
            optimizer().minimize(loss)
            if average == "model":
                self.averager = fluid.optimizer.ModelAverage(0.5, min_average_window=2,
                                                             max_average_window=4)
            elif average == "ema":
                self.averager = fluid.optimizer.ExponentialMovingAverage(0.9)
                self.averager.update()
            return loss
    return Net


def run_both(cls, engine="local", steps=10):
    """One process and 2 x 2 roles, trained alike; both, after ``steps`` steps."""
    one, two = cls(), cls()
    single = one.Compile(seed=1)
    plan = transpile(two.Compile(seed=1), trainers=2, pservers=2, min_block_size=4)
    dist = launch(plan, engine=engine, timeout=60)
    x, y = linear_data(seed=3)
    for xb, yb in batches(x, y, 16, steps):
        a, b = single.train_step(xb, yb), dist.train_step(xb, yb)
        assert np.allclose(a, b, rtol=TOL, atol=TOL)
    return (one, single), (two, dist), plan


def assert_equal_state(single, dist):
    for name in single.var_names():
        np.testing.assert_allclose(dist.get_var(name), single.get_var(name), rtol=TOL,
                                   atol=TOL, err_msg=name)


@pytest.mark.parametrize("case", sorted(CASES))
def test_two_trainers_two_servers_equal_one_process(case):
    optimizer, whole = CASES[case]
    (_, single), (_, dist), plan = run_both(net(optimizer))
    with dist:
        assert_equal_state(single, dist)
    blocks = {p: len(plan.param_blocks(p)) for p in plan.distributed_params()}
    assert (blocks["fc_0.w_0"] == 1) == whole, blocks      # 13 x 16 is cut unless whole


def test_a_global_norm_runs_on_every_server_holding_a_clipped_parameter():
    plan = transpile(net(CASES["clip_global_norm"][0])().Compile(seed=1), trainers=2,
                     pservers=2, min_block_size=4)
    for ep in plan.endpoints:
        (joint,) = plan.pserver_info(ep).joint_blocks
        assert sorted(joint.params) == sorted(plan.distributed_params())
        assert len(joint.feeds) == 2 * 4          # every gradient, from each trainer
    sends = [op for op in plan.trainer_program(0).block("train_step").ops if op.type == "send"]
    assert all(sorted(op.attrs["epmap"]) == sorted(plan.endpoints) for op in sends)


@pytest.mark.parametrize("average", ["model", "ema"])
def test_averaged_weights_equal_one_process(average):
    (one, single), (two, dist), _ = run_both(net(lambda: fluid.optimizer.Adam(0.01), average))
    with dist:
        assert_equal_state(single, dist)
        expected = one.averager.averaged_parameters(single)
        got = two.averager.averaged_parameters(dist)
        for name, value in expected.items():
            np.testing.assert_allclose(got[name], value, rtol=TOL, atol=TOL, err_msg=name)


# --- one Ray job --------------------------------------------------------------------------

class Mixed(fluid.Program):
    """Four heads on one input, each its own optimizer and clip, and an average of all."""
    averager = None

    def head(self, x, y, scope, make):
        """A head under ``scope`` minimized by ``make(its parameters)``."""
        with fluid.var_scope(scope):
            h = fluid.layers.fc(input=x, size=16, act="tanh")
            loss = fluid.layers.mean(fluid.layers.square_error_cost(
                fluid.layers.fc(input=h, size=1), y))
        make(fluid.parameters(scope)).minimize(loss)
        return loss

    @fluid.network("x", "y")
    def train_step(self, x, y):
        x = fluid.layers.data(name="x", shape=[13])
        y = fluid.layers.data(name="y", shape=[1])
        losses = (
            self.head(x, y, "lamb", lambda ps: fluid.optimizer.Lamb(0.01, parameter_list=ps)),
            self.head(x, y, "rmsprop", lambda ps: fluid.optimizer.RMSProp(
                0.01, centered=True, parameter_list=ps,
                grad_clip=CLIP.GradientClipByGlobalNorm(0.2))),
            self.head(x, y, "lookahead", lambda ps: fluid.optimizer.LookaheadOptimizer(
                fluid.optimizer.Adagrad(0.05, parameter_list=ps), k=3)),
            self.head(x, y, "ftrl", lambda ps: fluid.optimizer.Ftrl(
                0.05, l1=0.001, parameter_list=ps, grad_clip=CLIP.GradientClipByNorm(0.1))))
        self.averager = fluid.optimizer.ExponentialMovingAverage(0.9)
        self.averager.update()
        return losses


def test_one_ray_job_of_several_optimizers_equals_one_process():
    from distributed.ray_support import private_cluster
    with private_cluster():
        (one, single), (two, dist), _ = run_both(Mixed, engine="ray", steps=8)
        with dist:
            assert dist.engine == "ray"
            assert_equal_state(single, dist)
            expected = one.averager.averaged_parameters(single)
            for name, value in two.averager.averaged_parameters(dist).items():
                np.testing.assert_allclose(value, expected[name], rtol=TOL, atol=TOL)
