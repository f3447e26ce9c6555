"""A GAN-shaped program: generator and discriminator built under their own var_scope by
helper methods, shared by every network of the class, each trained by its own network
that updates only its side through ``parameter_list``."""
import numpy as np
import pytest

import fluid
from fluid_interactive.ir.records import OpRole

NOISE, HIDDEN, DATA = 4, 8, 2
G_LR = 0.1


class GAN(fluid.Program):
    def generator(self, z):
        with fluid.var_scope("generator"):
            h = fluid.layers.fc(input=z, size=HIDDEN, act="relu")
            return fluid.layers.fc(input=h, size=DATA)

    def discriminator(self, x):
        with fluid.var_scope("discriminator"):
            h = fluid.layers.fc(input=x, size=HIDDEN, act="relu")
            return fluid.layers.fc(input=h, size=1, act="sigmoid")

    @fluid.network("real", "noise")
    def train_d(self, real, noise):
        real = fluid.layers.data(name="real", shape=[DATA])
        noise = fluid.layers.data(name="noise", shape=[NOISE])
        d_real = self.discriminator(real)
        d_fake = self.discriminator(self.generator(noise))
        loss = (-fluid.layers.mean(fluid.layers.log(d_real + 1e-6))
                - fluid.layers.mean(fluid.layers.log(1.0 - d_fake + 1e-6)))
        # Vars in the list: only the discriminator learns here.
        fluid.optimizer.Adam(learning_rate=0.01).minimize(
            loss, parameter_list=fluid.parameters("discriminator"))
        return loss

    @fluid.network("noise")
    def train_g(self, noise):
        noise = fluid.layers.data(name="noise", shape=[NOISE])
        d_fake = self.discriminator(self.generator(noise))
        loss = -fluid.layers.mean(fluid.layers.log(d_fake + 1e-6))
        # Names in the list: only the generator learns here.
        fluid.optimizer.SGD(learning_rate=G_LR).minimize(
            loss, parameter_list=[p.name for p in fluid.parameters("generator")])
        return loss

    @fluid.network("real")
    def train_d_real(self, real):
        real = fluid.layers.data(name="real", shape=[DATA])
        loss = -fluid.layers.mean(fluid.layers.log(self.discriminator(real) + 1e-6))
        # Every parameter is listed; the generator's are not reached by this loss.
        fluid.optimizer.Momentum(learning_rate=0.01, momentum=0.9).minimize(
            loss, parameter_list=fluid.parameters())
        return loss

    @fluid.network("noise")
    def generate(self, noise):
        noise = fluid.layers.data(name="noise", shape=[NOISE])
        return self.generator(noise)

    @fluid.network("x")
    def score(self, x):
        x = fluid.layers.data(name="x", shape=[DATA])
        return self.discriminator(x)


G_PARAMS = sorted(f"generator/fc_{i}.{k}_0" for i in (0, 1) for k in "wb")
D_PARAMS = sorted(f"discriminator/fc_{i}.{k}_0" for i in (0, 1) for k in "wb")


@pytest.fixture
def gan():
    return GAN().Compile(seed=2024)


@pytest.fixture
def data():
    rng = np.random.default_rng(5)
    real = (rng.standard_normal((16, DATA)) * 0.5 + [2.0, -1.0]).astype(np.float32)
    noise = rng.standard_normal((16, NOISE)).astype(np.float32)
    return real, noise


# --- NumPy forward of the same model --------------------------------------------------------

def fc(p, scope, i, x):
    return x @ p[f"{scope}/fc_{i}.w_0"] + p[f"{scope}/fc_{i}.b_0"]


def np_generator(p, z):
    return fc(p, "generator", 1, np.maximum(fc(p, "generator", 0, z), 0.0))


def np_discriminator(p, x):
    return 1.0 / (1.0 + np.exp(-fc(p, "discriminator", 1,
                                    np.maximum(fc(p, "discriminator", 0, x), 0.0))))


def np_g_loss(p, z):
    return -np.mean(np.log(np_discriminator(p, np_generator(p, z)) + 1e-6))


# --- the parameters ---------------------------------------------------------------------------

def test_one_set_of_parameters_in_two_scopes(gan):
    assert sorted(gan.parameters()) == sorted(G_PARAMS + D_PARAMS)
    for method in ("train_d", "train_g", "train_d_real", "generate", "score"):
        block = gan.program.block(method)
        assert not any(v.is_parameter for v in block.vars.values()), method


def test_all_methods_compute_with_the_same_parameters(gan, data):
    real, noise = data
    p = {k: v.astype(np.float64) for k, v in gan.parameters().items()}
    np.testing.assert_allclose(gan.generate(noise), np_generator(p, noise), rtol=1e-5,
                               atol=1e-6)
    np.testing.assert_allclose(gan.score(real), np_discriminator(p, real), rtol=1e-5)
    np.testing.assert_allclose(gan.train_g(noise), np_g_loss(p, noise), rtol=1e-5)
    # After the generator step, the other methods see the generator's new values.
    p = {k: v.astype(np.float64) for k, v in gan.parameters().items()}
    np.testing.assert_allclose(gan.generate(noise), np_generator(p, noise), rtol=1e-5,
                               atol=1e-6)


# --- each network trains only its side ------------------------------------------------------

def test_train_g_changes_only_the_generator(gan, data):
    _, noise = data
    before = gan.parameters()
    score_before = gan.score(data[0])
    for _ in range(3):
        gan.train_g(noise)
    after = gan.parameters()
    for name in D_PARAMS:
        assert after[name].tobytes() == before[name].tobytes(), name
    for name in G_PARAMS:
        assert not np.array_equal(after[name], before[name]), name
    assert gan.score(data[0]).tobytes() == score_before.tobytes()


def test_train_d_changes_only_the_discriminator(gan, data):
    real, noise = data
    before = gan.parameters()
    fake_before = gan.generate(noise)
    for _ in range(3):
        gan.train_d(real, noise)
    after = gan.parameters()
    for name in G_PARAMS:
        assert after[name].tobytes() == before[name].tobytes(), name
    for name in D_PARAMS:
        assert not np.array_equal(after[name], before[name]), name
    assert gan.generate(noise).tobytes() == fake_before.tobytes()


def test_a_listed_parameter_the_loss_does_not_reach_is_left_alone(gan, data):
    real, _ = data
    before = gan.parameters()
    gan.train_d_real(real)
    after = gan.parameters()
    for name in G_PARAMS:
        assert after[name].tobytes() == before[name].tobytes(), name
    assert any(not np.array_equal(after[n], before[n]) for n in D_PARAMS)
    ops = gan.program.block("train_d_real").ops
    updated = sorted(op.inputs["Param"][0] for op in ops if op.type == "momentum")
    assert updated == D_PARAMS
    # No optimizer state for the generator either.
    velocities = sorted(n for n in gan.var_names() if n.endswith("_velocity_0"))
    assert velocities == sorted(f"{n}_velocity_0" for n in D_PARAMS)


def test_the_generator_step_is_the_gradient_through_the_discriminator(gan, data):
    """One SGD step of train_g against central differences of the NumPy loss."""
    _, noise = data
    p = {k: v.astype(np.float64) for k, v in gan.parameters().items()}
    gan.train_g(noise)
    after = gan.parameters()
    for name in G_PARAMS:
        numeric = np.zeros_like(p[name])
        for i in range(p[name].size):
            plus = {**p, name: p[name].copy()}
            minus = {**p, name: p[name].copy()}
            plus[name].flat[i] += 1e-6
            minus[name].flat[i] -= 1e-6
            numeric.flat[i] = (np_g_loss(plus, noise) - np_g_loss(minus, noise)) / 2e-6
        step = (p[name] - after[name]) / G_LR
        np.testing.assert_allclose(step, numeric, rtol=1e-3, atol=2e-5, err_msg=name)


def test_alternating_training_moves_the_fakes_toward_the_data(data):
    gan = GAN().Compile(seed=7)
    real, noise = data
    start = np.linalg.norm(gan.generate(noise).mean(0) - real.mean(0))
    for _ in range(150):
        gan.train_d(real, noise)
        gan.train_g(noise)
    end = np.linalg.norm(gan.generate(noise).mean(0) - real.mean(0))
    assert end < 0.5 * start


# --- what minimize recorded -----------------------------------------------------------------

def test_update_ops_and_state_per_network(gan):
    d_ops = [op for op in gan.program.block("train_d").ops if op.role == OpRole.OPTIMIZE]
    g_ops = [op for op in gan.program.block("train_g").ops if op.role == OpRole.OPTIMIZE]
    assert [op.inputs["Param"][0] for op in d_ops if op.type == "adam"] == D_PARAMS
    assert [op.inputs["Param"][0] for op in g_ops if op.type == "sgd"] == G_PARAMS
    assert all(op.role_var[0] in D_PARAMS for op in d_ops)
    assert all(op.role_var[0] in G_PARAMS for op in g_ops)
    # Backward stops at what was listed: no gradient var for the other side's weights.
    d_block = gan.program.block("train_d")
    assert not any(n.startswith("generator/") and n.endswith("@GRAD") and
                   n.split("@")[0] in G_PARAMS for n in d_block.vars)
    state = [n for n in gan.var_names() if n not in G_PARAMS + D_PARAMS]
    assert sorted(n for n in state if n.startswith("learning_rate")) == [
        "learning_rate_0", "learning_rate_1", "learning_rate_2"]
    moments = sorted(n for n in state if "_moment1_" in n)
    assert moments == sorted(f"{n}_moment1_0" for n in D_PARAMS)
    fluid.check_program(gan.program)


def test_parameter_list_names_and_vars_give_the_same_program():
    def make(as_names):
        class Net(fluid.Program):
            @fluid.network("x")
            def train(self, x):
                x = fluid.layers.data(name="x", shape=[3])
                with fluid.var_scope("a"):
                    h = fluid.layers.fc(input=x, size=3)
                with fluid.var_scope("b"):
                    out = fluid.layers.fc(input=h, size=1)
                loss = fluid.layers.mean(out * out)
                params = fluid.parameters("b")
                fluid.optimizer.SGD(0.1).minimize(
                    loss, parameter_list=[p.name for p in params] if as_names else params)
                return loss
        return Net().Compile(seed=0)

    by_name, by_var = make(True), make(False)
    assert by_name.train.text == by_var.train.text
    updated = [op.inputs["Param"][0] for op in by_name.program.block("train").ops
               if op.type == "sgd"]
    assert updated == ["b/fc_0.b_0", "b/fc_0.w_0"]


def test_parameter_list_rejects_what_is_not_a_parameter():
    def make(parameter_list):
        class Net(fluid.Program):
            @fluid.network("x")
            def train(self, x):
                x = fluid.layers.data(name="x", shape=[3])
                loss = fluid.layers.mean(fluid.layers.fc(input=x, size=1))
                fluid.optimizer.SGD(0.1).minimize(loss, parameter_list=parameter_list)
                return loss
        return Net().Compile()

    with pytest.raises(fluid.OpArgumentError, match="'nope'.*not a variable"):
        make(["nope"])
    with pytest.raises(fluid.OpArgumentError, match="'x'.*not a parameter"):
        make(["x"])
    with pytest.raises(fluid.OpArgumentError, match=r"test_gan\.py"):
        make(["fc_0.w_0", "nope"])
