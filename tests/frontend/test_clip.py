"""fluid.clip: each gradient clip against torch.nn.utils (clip_grad_value_,
clip_grad_norm_ per parameter and over all of them), both of Paddle's spellings (the
optimizer's grad_clip, set_gradient_clip with a parameter list, ParamAttr), need_clip,
global-norm groups, the error clip of a var's gradient, and the errors."""
import numpy as np
import pytest
import torch
from frontend.test_optimizers import ALL, batches, forward_backward

import fluid

NAMES = ["fc_0.w_0", "fc_0.b_0", "fc_1.w_0", "fc_1.b_0"]
LR = 0.1


def net(clip=None, before_minimize=None, w0_attr=None, optimizer=fluid.optimizer.SGD):
    """x[?,3] -> fc(4, tanh) -> fc(1) -> mean squared error, in float64."""
    class Net(fluid.Program):
        @fluid.network("x", "y")
        def train(self, x, y):
            x = fluid.layers.data(name="x", shape=[3], dtype="float64")
            y = fluid.layers.data(name="y", shape=[1], dtype="float64")
            h = fluid.layers.fc(input=x, size=4, act="tanh", param_attr=w0_attr)
            loss = fluid.layers.mean(fluid.layers.square_error_cost(
                fluid.layers.fc(input=h, size=1), y))
            if before_minimize is not None:
                before_minimize(h)
            optimizer(LR, grad_clip=clip).minimize(loss)
            return loss
    return Net


def run(cls, steps=3):
    prog = cls().Compile(seed=4)
    start = prog.parameters()
    for x, y in batches(n=steps, dtype=np.float64):
        prog.train(x, y)
    return prog.parameters(), start


def torch_sgd(start, clip, steps=3):
    """The same steps in PyTorch: gradients, ``clip(params)``, then SGD."""
    params = [torch.tensor(start[n], requires_grad=True) for n in NAMES]
    for x, y in batches(n=steps, dtype=np.float64):
        x, y = torch.tensor(x), torch.tensor(y)
        h = torch.tanh(x @ params[0] + params[1])
        loss = torch.mean((h @ params[2] + params[3] - y) ** 2)
        for p in params:
            p.grad = None
        loss.backward()
        clip(params)
        with torch.no_grad():
            for p in params:
                p -= LR * p.grad
    return {n: p.detach().numpy() for n, p in zip(NAMES, params)}


def each_norm(limit):
    def clip(params):
        for p in params:
            torch.nn.utils.clip_grad_norm_([p], limit)
    return clip


CASES = {
    # clip_grad_value_ is symmetric: an asymmetric range clamps the gradients as it does
    "value": (fluid.clip.GradientClipByValue(max=0.05, min=-0.02),
              lambda ps: [p.grad.clamp_(-0.02, 0.05) for p in ps]),
    "value_symmetric": (fluid.clip.GradientClipByValue(0.05),
                        lambda ps: torch.nn.utils.clip_grad_value_(ps, 0.05)),
    "norm": (fluid.clip.GradientClipByNorm(clip_norm=0.2), each_norm(0.2)),
    "norm_inactive": (fluid.clip.GradientClipByNorm(clip_norm=100.0), each_norm(100.0)),
    "global_norm": (fluid.clip.GradientClipByGlobalNorm(clip_norm=0.3),
                    lambda ps: torch.nn.utils.clip_grad_norm_(ps, 0.3)),
    "global_norm_inactive": (fluid.clip.GradientClipByGlobalNorm(clip_norm=100.0),
                             lambda ps: torch.nn.utils.clip_grad_norm_(ps, 100.0)),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_clip_equals_torch(case):
    clip, theirs = CASES[case]
    got, start = run(net(clip))
    expected = torch_sgd(start, theirs)
    for name in NAMES:
        np.testing.assert_allclose(got[name], expected[name], rtol=1e-5, atol=1e-9,
                                   err_msg=name)


def test_clip_ops_have_role_optimize_and_the_pairs_they_read():
    prog = net(fluid.clip.GradientClipByGlobalNorm(0.3))().Compile()
    ops = [op for op in prog.program.block("train").ops if "CLIP" in "".join(
        op.output_names()) or "GLOBAL_NORM" in "".join(op.output_names())]
    assert ops and all(op.role == fluid.OpRole.OPTIMIZE for op in ops)
    joint = [op for op in ops if len(op.role_var) == 8]
    assert {op.type for op in joint} == {"sum", "sqrt", "fill_constant", "elementwise_max",
                                          "elementwise_div"}
    assert all(len(op.role_var) == 2 for op in ops if op not in joint)
    sgd = [op for op in prog.program.block("train").ops if op.type == "sgd"]
    assert all(op.inputs["Grad"][0].endswith("@GRAD@CLIP") for op in sgd)
    assert all(op.role_var == (op.inputs["Param"][0], op.inputs["Param"][0] + "@GRAD")
               for op in sgd)


def test_set_gradient_clip_and_param_attr_are_the_other_spelling():
    clip = fluid.clip.GradientClipByGlobalNorm(0.3)
    by_optimizer, start = run(net(clip))
    listed, _ = run(net(before_minimize=lambda h: fluid.clip.set_gradient_clip(clip)))
    for name in NAMES:
        np.testing.assert_array_equal(listed[name], by_optimizer[name])
    # only the listed parameters, by name or by Variable
    some, start = run(net(before_minimize=lambda h: fluid.clip.set_gradient_clip(
        fluid.clip.GradientClipByNorm(0.2), param_list=["fc_0.w_0", "fc_1.w_0"])))
    expected = torch_sgd(start, lambda ps: [torch.nn.utils.clip_grad_norm_([ps[i]], 0.2)
                                            for i in (0, 2)])
    attr, _ = run(net(w0_attr=fluid.ParamAttr(gradient_clip=fluid.clip.GradientClipByNorm(0.2)),
                      before_minimize=lambda h: fluid.clip.set_gradient_clip(
                          fluid.clip.GradientClipByNorm(0.2), param_list=["fc_1.w_0"])))
    for name in NAMES:
        np.testing.assert_allclose(some[name], expected[name], rtol=1e-5, err_msg=name)
        np.testing.assert_array_equal(attr[name], some[name])


def test_the_optimizers_clip_wins_over_the_parameters_and_says_so():
    with pytest.warns(UserWarning, match="the clips set on parameters .* are not"):
        both, _ = run(net(fluid.clip.GradientClipByValue(0.05), lambda h:
                          fluid.clip.set_gradient_clip(fluid.clip.GradientClipByNorm(1e-3))))
    only, _ = run(net(fluid.clip.GradientClipByValue(0.05)))
    for name in NAMES:
        np.testing.assert_array_equal(both[name], only[name])


def test_need_clip_and_global_norm_groups():
    wanted = fluid.clip.GradientClipByGlobalNorm(0.3, need_clip=lambda p: p.name.endswith("w_0"))
    got, start = run(net(wanted))
    expected = torch_sgd(start, lambda ps: torch.nn.utils.clip_grad_norm_([ps[0], ps[2]], 0.3))
    for name in NAMES:
        np.testing.assert_allclose(got[name], expected[name], rtol=1e-5, err_msg=name)

    def two_groups(h):
        fluid.clip.set_gradient_clip(fluid.clip.GradientClipByGlobalNorm(0.3, "a"),
                                     ["fc_0.w_0", "fc_0.b_0"])
        fluid.clip.set_gradient_clip(fluid.clip.GradientClipByGlobalNorm(0.2, "b"),
                                     ["fc_1.w_0", "fc_1.b_0"])
    got, start = run(net(before_minimize=two_groups))
    expected = torch_sgd(start, lambda ps: (torch.nn.utils.clip_grad_norm_(ps[:2], 0.3),
                                            torch.nn.utils.clip_grad_norm_(ps[2:], 0.2)))
    for name in NAMES:
        np.testing.assert_allclose(got[name], expected[name], rtol=1e-5, err_msg=name)


def test_an_error_clip_clips_the_gradient_flowing_back_through_its_var():
    got, start = run(net(before_minimize=lambda h: h._set_error_clip(
        fluid.clip.ErrorClipByValue(max=0.01))), steps=1)
    params = {k: v.astype(np.float64) for k, v in start.items()}
    x, y = next(batches(n=1, dtype=np.float64))
    h = np.tanh(x @ params["fc_0.w_0"] + params["fc_0.b_0"])
    pred = h @ params["fc_1.w_0"] + params["fc_1.b_0"]
    dpred = 2.0 * (pred - y) / pred.size
    dh = np.clip(dpred @ params["fc_1.w_0"].T, -0.01, 0.01) * (1.0 - h * h)
    _, grads = forward_backward(params, x, y)
    grads.update({"fc_0.w_0": x.T @ dh, "fc_0.b_0": dh.sum(0)})
    for name in ALL:
        np.testing.assert_allclose(got[name], params[name] - LR * grads[name], rtol=1e-9,
                                   err_msg=name)


def test_clip_errors_name_the_users_line():
    with pytest.raises(TypeError, match="grad_clip must be a fluid.clip gradient clip") as e:
        fluid.optimizer.Adam(0.1, grad_clip=0.5)
    assert "test_clip.py" in str(e.value)
    with pytest.raises(fluid.OpArgumentError, match="ErrorClipByValue clips one var"):
        fluid.optimizer.SGD(0.1, grad_clip=fluid.clip.ErrorClipByValue(1.0))
    with pytest.raises(fluid.OpArgumentError, match="positive"):
        fluid.clip.GradientClipByNorm(0)
    with pytest.raises(fluid.OpArgumentError, match="min .* must not exceed max"):
        fluid.clip.GradientClipByValue(max=-1.0, min=1.0)
    with pytest.raises(fluid.FluidError, match="set_gradient_clip can only be used inside"):
        fluid.clip.set_gradient_clip(fluid.clip.GradientClipByNorm(1.0))
    with pytest.raises(fluid.OpArgumentError, match="that is an optimizer"):
        run(net(before_minimize=lambda h: fluid.clip.set_gradient_clip(
            fluid.optimizer.SGD(0.1))))
    with pytest.raises(fluid.OpArgumentError, match="'nope', which is not a parameter"):
        run(net(before_minimize=lambda h: fluid.clip.set_gradient_clip(
            fluid.clip.GradientClipByNorm(1.0), ["nope"])))
