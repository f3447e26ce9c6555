"""The losses' ONNX export: each exported method passes onnx.checker, runs in onnxruntime
with the outputs of ``infer`` (batches of 1 and 6), and imports back to a program that
gives them too; the losses that pick by label (hard-label softmax_with_cross_entropy and
cross_entropy, bpr_loss, dice_loss through one_hot) included."""
from __future__ import annotations

import numpy as np
import pytest

import fluid
from tests.onnx_io.helpers import check_exported, one_method

L = fluid.layers
F32 = "float32"


def _pointwise(x, y, w):
    return (L.huber_loss(x, y, delta=0.4), L.smooth_l1(x, y),
            L.smooth_l1(x, y, inside_weight=w, outside_weight=w, sigma=2.0),
            L.mse_loss(x, y), L.kldiv_loss(L.log_softmax(x), L.softmax(y)),
            L.kldiv_loss(x, y - 0.2, reduction="none"), L.kldiv_loss(x, y, reduction="sum"),
            L.kldiv_loss(x, y, reduction="batchmean"))


def _probabilities(p, lab, z):
    prob = L.sigmoid(p)
    return (L.log_loss(prob, lab), L.teacher_student_sigmoid_loss(p, z),
            L.rank_loss(lab, p, z), L.margin_rank_loss(lab * 2.0 - 1.0, p, z, margin=0.3),
            L.sigmoid_cross_entropy_with_logits(p, lab),
            L.sigmoid_cross_entropy_with_logits(p, L.elementwise_min(lab * 4.0 - 2.0, z),
                                                ignore_index=-1, normalize=True))


def _classes(x, onehot):
    return (L.label_smooth(onehot, epsilon=0.2),
            L.label_smooth(onehot, prior_dist=L.softmax(L.reduce_mean(x, dim=0,
                                                                     keep_dim=True)),
                           epsilon=0.1),
            L.softmax_with_cross_entropy(x, L.softmax(onehot * 3.0), soft_label=True,
                                         return_softmax=True)[0])


def _labels(x, ids):
    probs = L.softmax(x)
    return (L.softmax_with_cross_entropy(x, ids),
            L.softmax_with_cross_entropy(x, ids, ignore_index=2, return_softmax=True)[0],
            L.softmax_with_cross_entropy(L.transpose(x, [1, 0]), L.transpose(ids, [1, 0]),
                                         axis=0),
            L.cross_entropy(probs, ids), L.cross_entropy(probs * 0.0 + 0.2, ids, ignore_index=0),
            L.cross_entropy(probs, L.one_hot(ids, 5), soft_label=True),
            L.cross_entropy(L.relu(x), L.softmax(x * 2.0), soft_label=True),
            L.bpr_loss(x, ids), L.dice_loss(probs, ids))


CASES = {
    "pointwise": (_pointwise, {"x": ((4,), F32), "y": ((4,), F32), "w": ((4,), F32)}),
    "probabilities": (_probabilities, {"p": ((1,), F32), "lab": ((1,), F32),
                                       "z": ((1,), F32)}),
    "classes": (_classes, {"x": ((5,), F32), "onehot": ((5,), F32)}),
    "labels": (_labels, {"x": ((5,), F32), "ids": ((1,), "int64")}),
}


def _feeds(case, batch, rng):
    _, spec = CASES[case]
    out = {n: rng.standard_normal((batch,) + s).astype(d) for n, (s, d) in spec.items()}
    if case == "probabilities":
        out["lab"] = rng.integers(0, 2, (batch, 1)).astype(F32)
        out["z"] = rng.choice([-2.0, -1.0, 0.3, 1.6], (batch, 1)).astype(F32)
    if case == "classes":
        out["onehot"] = np.eye(5, dtype=F32)[rng.integers(0, 5, batch)]
    if case == "pointwise":
        out["w"] = np.abs(out["w"])
    if case == "labels":
        out["ids"] = rng.integers(0, 5, (batch, 1)).astype("int64")
    return out


@pytest.mark.parametrize("case", sorted(CASES))
def test_losses_export_run_in_onnxruntime_and_import_back(case, tmp_path):
    build, spec = CASES[case]
    net = one_method(build, spec, name=case.title())().Compile(seed=0)
    rng = np.random.default_rng(0)
    check_exported(net, str(tmp_path / f"{case}.onnx"),
                   [_feeds(case, batch, rng) for batch in (1, 6)])


