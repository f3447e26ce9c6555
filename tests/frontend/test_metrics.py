"""fluid.metrics against scikit-learn (precision, recall, ROC AUC) and against hand counts
(chunks over IOB tags, edit distances), fed batch by batch from NumPy values such as a
compiled method returns; reset, configs, composites, and the errors."""
import numpy as np
import pytest
from sklearn.metrics import precision_score, recall_score, roc_auc_score

import fluid

M = fluid.metrics


def batches_of(*arrays, size=37):
    n = len(arrays[0])
    for start in range(0, n, size):
        yield tuple(a[start:start + size] for a in arrays)


@pytest.fixture
def binary(rng):
    labels = rng.integers(0, 2, 500)
    probs = np.clip(0.3 * labels + rng.uniform(0, 0.7, 500), 0, 1)
    return probs, labels


def test_precision_and_recall_equal_sklearn(binary):
    probs, labels = binary
    precision, recall = M.Precision(), M.Recall("recall")
    for p, y in batches_of(probs.reshape(-1, 1), labels.reshape(-1, 1)):
        precision.update(preds=p, labels=y)
        recall.update(p, y)
    predicted = np.rint(probs).astype(int)
    assert precision.eval() == pytest.approx(precision_score(labels, predicted), abs=1e-12)
    assert recall.eval() == pytest.approx(recall_score(labels, predicted), abs=1e-12)
    assert str(recall) == "recall" and str(precision) == "Precision"
    assert precision.tp + precision.fp == int(predicted.sum())


def test_auc_on_the_bucket_grid_equals_sklearn_exactly(rng):
    labels = rng.integers(0, 2, 400)
    score = (rng.integers(0, 60, 400) + 30 * labels + 0.5) / 100.0   # ties, mid-bucket
    preds = np.stack([1 - score, score], axis=1)
    auc = M.Auc("auc", num_thresholds=100)
    for p, y in batches_of(preds, labels):
        auc.update(preds=p, labels=y)
    assert auc.eval() == pytest.approx(roc_auc_score(labels, score), abs=1e-12)


def test_auc_of_continuous_scores_is_within_the_bucket_width_of_sklearn(binary):
    probs, labels = binary
    auc = M.Auc("auc")
    for p, y in batches_of(np.stack([1 - probs, probs], axis=1), labels.reshape(-1, 1)):
        auc.update(p, y)
    assert auc.eval() == pytest.approx(roc_auc_score(labels, probs), abs=1e-3)
    auc.reset()
    assert auc.eval() == 0.0


class Classifier(fluid.Program):
    """Two classes from four features: a training step returning what metrics take."""

    def scores(self):
        x = fluid.layers.data(name="x", shape=[4])
        label = fluid.layers.data(name="label", shape=[1], dtype="int64")
        prob = fluid.layers.fc(input=x, size=2, act="softmax", param_attr="w", bias_attr="b")
        return prob, label, {"acc": fluid.layers.accuracy(input=prob, label=label),
                             "prob": prob, "label": label}

    @fluid.network("x", "label")
    def train_step(self, x, label):
        prob, label, out = self.scores()
        loss = fluid.layers.mean(fluid.layers.cross_entropy(prob, label))
        fluid.optimizer.Adam(0.05).minimize(loss)
        return {"loss": loss, **out}

    @fluid.network("x", "label")
    def evaluate(self, x, label):
        return self.scores()[2]


def test_accuracy_is_the_weighted_mean_of_what_a_method_returns(rng):
    prog = Classifier().Compile(seed=0)
    x, label = rng.standard_normal((100, 4)).astype(np.float32), rng.integers(0, 2, (100, 1))
    acc = M.Accuracy()
    for xb, yb in batches_of(x, label, size=30):          # the last batch is smaller
        out = prog.evaluate(xb, yb)
        acc.update(value=out["acc"], weight=len(xb))
    right = np.argmax(prog.evaluate(x, label)["prob"], axis=1) == label[:, 0]
    assert acc.eval() == pytest.approx(right.mean(), abs=1e-6)


def iob_chunks(tags):
    """(start, end, type) of every chunk of an IOB tag sequence ('B-X', 'I-X', 'O'), read
    as a person would: a chunk starts at B-X (or at an I-X that does not continue one)."""
    chunks, current = [], None
    for i, tag in enumerate(tags + ["O"]):
        kind = tag[2:] if tag != "O" else None
        continues = tag.startswith("I-") and current is not None and current[2] == kind
        if current is not None and not continues:
            chunks.append((current[0], i, current[2]))
            current = None
        if kind is not None and not continues:
            current = (i, None, kind)
    return set(chunks)


def test_chunk_evaluator_matches_a_hand_count_over_iob_tags():
    sentences = [(inferred.split(), labelled.split()) for inferred, labelled in [
        # (what the model tagged, the labels)
        ("B-PER I-PER O B-LOC O", "B-PER I-PER O B-LOC O"),
        ("B-PER O O B-ORG I-ORG", "B-PER I-PER O B-ORG I-ORG"),
        ("O I-LOC I-LOC O B-PER", "O B-LOC I-LOC O O"),
    ]]
    # by hand: found 2+2+2 chunks, labelled 2+2+1, correct 2+1+1 (PER in sentence 2 is
    # cut short; the I-LOC run starts a LOC chunk like the label's)
    assert [len(iob_chunks(inf)) for inf, _ in sentences] == [2, 2, 2]
    assert [len(iob_chunks(lab)) for _, lab in sentences] == [2, 2, 1]
    chunks = M.ChunkEvaluator()
    for inferred, labelled in sentences:
        found, truth = iob_chunks(inferred), iob_chunks(labelled)
        chunks.update(np.array([len(found)]), np.array([len(truth)]),
                      np.array([len(found & truth)]))
    precision, recall, f1 = chunks.eval()
    assert (precision, recall) == (pytest.approx(4 / 6), pytest.approx(4 / 5))
    assert f1 == pytest.approx(2 * (4 / 6) * (4 / 5) / (4 / 6 + 4 / 5))
    chunks.reset()
    assert chunks.eval() == (0.0, 0.0, 0.0)


def test_edit_distance_and_composite():
    ed = M.EditDistance("ed")
    ed.update(np.array([[0.0], [2.0], [1.0]]), 3)
    ed.update(np.array([0.0, 0.0]), np.array([2]))
    assert ed.eval() == (pytest.approx(3 / 5), pytest.approx(2 / 5))
    both = M.CompositeMetric()
    both.add_metric(M.Precision())
    both.add_metric(M.Recall())
    both.update(np.array([1.0, 1.0, 0.0, 0.2]), np.array([1, 0, 1, 0]))
    assert both.eval() == [0.5, 0.5]
    config = both._metrics[0].get_config()
    assert config == {"name": "Precision", "states": {"tp": 1, "fp": 1}}


def test_reset_zeroes_the_state_by_type():
    acc = M.Accuracy()
    acc.update(0.5, 10)
    acc.reset()
    assert (acc.value, acc.weight) == (0.0, 0.0)
    with pytest.raises(fluid.FeedError, match="no data yet"):
        acc.eval()


def test_auc_fed_probabilities_of_the_wrong_shape_says_what_it_needs():
    auc = M.Auc("auc")
    with pytest.raises(fluid.FeedError, match=r"preds must be the \[N, 2\] probabilities "
                                              r"of class 0 and class 1 for the 4 labels, got "
                                              r"shape \[4\]") as e:
        auc.update(np.array([0.1, 0.9, 0.4, 0.5]), np.array([0, 1, 0, 1]))
    assert "test_metrics.py" in str(e.value)      # the user's line
    with pytest.raises(fluid.FeedError, match="not logits"):
        auc.update(np.array([[2.0, -1.0]]), np.array([1]))
    with pytest.raises(fluid.FeedError, match="must be a NumPy array"):
        auc.update([[0.1, 0.9]], np.array([1]))
    with pytest.raises(fluid.FeedError, match="3 predictions for 2 labels"):
        M.Precision().update(np.ones(3), np.ones(2))


# --- fluid.train shows metrics beside the loss ---------------------------------------------

def test_train_shows_a_returned_value_and_an_accumulated_metric(rng, capsys):
    prog = Classifier().Compile(seed=0)
    x = rng.standard_normal((200, 4)).astype(np.float32)
    label = (x[:, :1] > 0).astype(np.int64)
    data = list(batches_of(x, label, size=50))
    auc = M.Auc("auc")
    history = fluid.train(prog.train_step, 4, data=data, progress="text",
                          metrics={"acc": "acc",
                                   "auc": (auc, lambda r: (r["prob"], r["label"]))})
    assert len(history.metrics["acc"]) == len(history.metrics["auc"]) == 4
    assert history.metrics["auc"][-1] == auc.eval()
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert f"acc {history.metrics['acc'][-1]:.4g}" in last and f"auc {auc.eval():.4g}" in last
    with pytest.raises(TypeError, match="a metric needs a feed"):
        fluid.train(prog.train_step, 1, data=data, progress=False, metrics={"auc": auc})
