"""`fluid.metrics`: Python-side accumulators with Paddle 1.8's ``update`` / ``eval`` /
``reset``, fed with the NumPy values a compiled method returns::

    auc = fluid.metrics.Auc("auc")
    for x, y in batches:
        out = prog.train_step(x, y)                 # returns {"loss": ..., "prob": [N, 2]}
        auc.update(preds=out["prob"], labels=y)
    print(auc.eval())

`fluid.train` shows them beside the loss (``metrics=``, see docs/getting-started.md).
Each update is vectorised over the batch. The in-graph ops (``layers.auc``,
``layers.chunk_eval``) compute what some of these take as input.

Left out: ``DetectionMAP``, which builds ``detection_map`` ops into the program (SSD's
mean average precision over boxes); this project has no detection ops.
"""
from __future__ import annotations

import copy
from numbers import Integral, Real
from typing import Any

import numpy as np

from ..errors import FeedError
from .tracing import error_at

__all__ = ["MetricBase", "CompositeMetric", "Precision", "Recall", "Accuracy",
           "ChunkEvaluator", "EditDistance", "Auc"]


def _array(value: Any, what: str, metric: str) -> np.ndarray:
    if not isinstance(value, (np.ndarray, np.generic)):
        raise error_at(FeedError, f"{metric}.update: {what} must be a NumPy array (a value a "
                                  f"compiled method returned), got {type(value).__name__}")
    return np.asarray(value)


def _number(value: Any, what: str, metric: str) -> float:
    """A number, or a NumPy array holding one."""
    if isinstance(value, np.ndarray) and value.size == 1:
        value = value.reshape(()).item()
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, Real):
        raise error_at(FeedError, f"{metric}.update: {what} must be a number, got {value!r}")
    return float(value)


def _column(value: np.ndarray, what: str, metric: str) -> np.ndarray:
    """``[N]`` or ``[N, 1]`` as ``[N]``."""
    if value.ndim == 2 and value.shape[1] == 1:
        return value[:, 0]
    if value.ndim != 1:
        raise error_at(FeedError, f"{metric}.update: {what} must have shape [N] or [N, 1], "
                                  f"got {list(value.shape)}")
    return value


class MetricBase:
    """A metric's state lives in its public attributes; `reset` zeroes them (ints to 0,
    floats to 0.0, arrays to zeros, anything else to None), `get_config` copies them."""

    def __init__(self, name: str | None = None):
        self._name = str(name) if name is not None else type(self).__name__

    def __str__(self) -> str:
        return self._name

    def _states(self) -> dict[str, Any]:
        return {k: v for k, v in vars(self).items() if not k.startswith("_")}

    def reset(self) -> None:
        for attr, value in self._states().items():
            if isinstance(value, bool):
                setattr(self, attr, None)
            elif isinstance(value, Integral):
                setattr(self, attr, 0)
            elif isinstance(value, float):
                setattr(self, attr, 0.0)
            elif isinstance(value, (np.ndarray, np.generic)):
                setattr(self, attr, np.zeros_like(value))
            else:
                setattr(self, attr, None)

    def get_config(self) -> dict[str, Any]:
        return {"name": self._name, "states": copy.deepcopy(self._states())}

    def update(self, *args: Any, **kwargs: Any) -> None:
        raise NotImplementedError(f"{type(self).__name__} is a base class: use a metric "
                                  f"that extends it")

    def eval(self) -> Any:
        raise NotImplementedError(f"{type(self).__name__} is a base class: use a metric "
                                  f"that extends it")

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self._name!r}: {self._states()}>"


class CompositeMetric(MetricBase):
    """Several metrics updated with the same ``(preds, labels)``; `eval` lists theirs."""

    def __init__(self, name: str | None = None):
        super().__init__(name)
        self._metrics: list[MetricBase] = []

    def add_metric(self, metric: MetricBase) -> None:
        if not isinstance(metric, MetricBase):
            raise error_at(FeedError, f"CompositeMetric.add_metric takes a metric of "
                                      f"fluid.metrics, got {metric!r}")
        self._metrics.append(metric)

    def update(self, preds: Any, labels: Any) -> None:
        for m in self._metrics:
            m.update(preds, labels)

    def eval(self) -> list[Any]:
        return [m.eval() for m in self._metrics]

    def reset(self) -> None:
        for m in self._metrics:
            m.reset()


def _binary(preds: Any, labels: Any, metric: str) -> tuple[np.ndarray, np.ndarray]:
    """Predictions rounded to 0/1 (``[N]`` or ``[N, 1]``) and labels of the same count."""
    p = np.rint(_column(_array(preds, "preds", metric), "preds", metric)).astype(np.int64)
    y = _column(_array(labels, "labels", metric), "labels", metric)
    if p.shape[0] != y.shape[0]:
        raise error_at(FeedError, f"{metric}.update: {p.shape[0]} predictions for "
                                  f"{y.shape[0]} labels")
    return p, y


class _BinaryRate(MetricBase):
    """tp / (tp + the other count) of binary predictions (``preds`` rounded)."""

    _other = ""   # the attribute counting the other outcome

    def __init__(self, name: str | None = None):
        super().__init__(name)
        self.tp = 0
        setattr(self, self._other, 0)

    def _outcomes(self, predicted: np.ndarray, actual: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError

    def update(self, preds: Any, labels: Any) -> None:
        p, y = _binary(preds, labels, type(self).__name__)
        hit, other = self._outcomes(p == 1, y == 1)
        self.tp += int(np.count_nonzero(hit))
        setattr(self, self._other, getattr(self, self._other) + int(np.count_nonzero(other)))

    def eval(self) -> float:
        total = self.tp + getattr(self, self._other)
        return self.tp / total if total else 0.0


class Precision(_BinaryRate):
    """Of the samples predicted 1 (``preds`` rounded), the fraction labelled 1: tp / (tp +
    fp), for binary classification."""

    _other = "fp"

    def _outcomes(self, predicted, actual):
        return predicted & actual, predicted & ~actual


class Recall(_BinaryRate):
    """Of the samples labelled 1, the fraction predicted 1 (``preds`` rounded): tp / (tp +
    fn), for binary classification."""

    _other = "fn"

    def _outcomes(self, predicted, actual):
        return actual & predicted, actual & ~predicted


class Accuracy(MetricBase):
    """The weighted mean of per-batch accuracies: ``update(value, weight)`` with the
    batch's accuracy (``layers.accuracy``'s result) and its weight (the batch size)."""

    def __init__(self, name: str | None = None):
        super().__init__(name)
        self.value = 0.0
        self.weight = 0.0

    def update(self, value: Any, weight: Any) -> None:
        v = _number(value, "value", "Accuracy")
        w = _number(weight, "weight", "Accuracy")
        if w < 0:
            raise error_at(FeedError, f"Accuracy.update: weight must not be negative, got {w}")
        self.value += v * w
        self.weight += w

    def eval(self) -> float:
        if self.weight == 0:
            raise error_at(FeedError, "Accuracy.eval: no data yet; update it with each "
                                      "batch's accuracy and size first")
        return self.value / self.weight


class ChunkEvaluator(MetricBase):
    """Precision, recall and F1 of chunks (named entities, phrases): ``update`` with the
    counts of chunks found, labelled and found correctly (``layers.chunk_eval``'s
    results); `eval` gives ``(precision, recall, f1)``."""

    def __init__(self, name: str | None = None):
        super().__init__(name)
        self.num_infer_chunks = 0
        self.num_label_chunks = 0
        self.num_correct_chunks = 0

    def update(self, num_infer_chunks: Any, num_label_chunks: Any,
               num_correct_chunks: Any) -> None:
        counts = [_number(v, w, "ChunkEvaluator") for v, w in (
            (num_infer_chunks, "num_infer_chunks"), (num_label_chunks, "num_label_chunks"),
            (num_correct_chunks, "num_correct_chunks"))]
        self.num_infer_chunks += int(counts[0])
        self.num_label_chunks += int(counts[1])
        self.num_correct_chunks += int(counts[2])

    def eval(self) -> tuple[float, float, float]:
        precision = (self.num_correct_chunks / self.num_infer_chunks
                     if self.num_infer_chunks else 0.0)
        recall = (self.num_correct_chunks / self.num_label_chunks
                  if self.num_label_chunks else 0.0)
        f1 = (2 * precision * recall / (precision + recall)
              if self.num_correct_chunks else 0.0)
        return precision, recall, f1


class EditDistance(MetricBase):
    """The mean edit distance of sequences and the fraction that are not exact:
    ``update(distances, seq_num)`` with a batch's distances (``[N]`` or ``[N, 1]``) and
    its number of sequences; `eval` gives ``(avg_distance, avg_instance_error)``."""

    def __init__(self, name: str | None = None):
        super().__init__(name)
        self.total_distance = 0.0
        self.seq_num = 0
        self.instance_error = 0

    def update(self, distances: Any, seq_num: Any) -> None:
        d = _array(distances, "distances", "EditDistance")
        n = int(_number(seq_num, "seq_num", "EditDistance"))
        self.seq_num += n
        self.instance_error += n - int(np.count_nonzero(d == 0))
        self.total_distance += float(np.sum(d))

    def eval(self) -> tuple[float, float]:
        if self.seq_num == 0:
            raise error_at(FeedError, "EditDistance.eval: no data yet; update it with each "
                                      "batch's distances first")
        return self.total_distance / self.seq_num, self.instance_error / self.seq_num


class Auc(MetricBase):
    """The area under the ROC curve of binary predictions, from ``num_thresholds + 1``
    buckets of the predicted probability of class 1: ``update(preds, labels)`` with
    ``preds`` the ``[N, 2]`` class probabilities (softmax output) and ``labels`` ``[N]``
    or ``[N, 1]`` (nonzero: positive). Ties within a bucket count half, as equal scores
    do in scikit-learn's ``roc_auc_score``."""

    def __init__(self, name: str | None = None, curve: str = "ROC",
                 num_thresholds: int = 4095):
        super().__init__(name)
        if curve != "ROC":
            raise error_at(FeedError, f"Auc: curve {curve!r} is not supported; Paddle 1.8's "
                                      f"Auc metric computes 'ROC'")
        if isinstance(num_thresholds, bool) or not isinstance(num_thresholds, Integral) or \
                num_thresholds < 1:
            raise error_at(FeedError, f"Auc: num_thresholds must be a positive int, got "
                                      f"{num_thresholds!r}")
        self._curve = curve
        self._num_thresholds: int = int(num_thresholds)
        self._stat_pos: np.ndarray = np.zeros(self._num_thresholds + 1)
        self._stat_neg: np.ndarray = np.zeros(self._num_thresholds + 1)

    def update(self, preds: Any, labels: Any) -> None:
        p = _array(preds, "preds", "Auc")
        y = _column(_array(labels, "labels", "Auc"), "labels", "Auc")
        if p.ndim != 2 or p.shape[1] != 2 or p.shape[0] != y.shape[0]:
            raise error_at(FeedError, f"Auc.update: preds must be the [N, 2] probabilities of "
                                      f"class 0 and class 1 for the {y.shape[0]} labels, got "
                                      f"shape {list(p.shape)}; for one probability per "
                                      f"sample p, pass np.stack([1 - p, p], axis=1)")
        score = p[:, 1]
        if not np.all((score >= 0) & (score <= 1)):
            raise error_at(FeedError, "Auc.update: preds must be probabilities in [0, 1] "
                                      "(a softmax output), not logits")
        bins = (score * self._num_thresholds).astype(np.int64)
        positive = y != 0
        size = self._num_thresholds + 1
        self._stat_pos += np.bincount(bins[positive], minlength=size)
        self._stat_neg += np.bincount(bins[~positive], minlength=size)

    def reset(self) -> None:
        self._stat_pos[:] = 0
        self._stat_neg[:] = 0

    def eval(self) -> float:
        # walk the buckets from the highest score down: trapezoids under (fpr, tpr)
        pos = np.cumsum(self._stat_pos[::-1])
        neg = np.cumsum(self._stat_neg[::-1])
        tot_pos, tot_neg = pos[-1], neg[-1]
        if tot_pos <= 0 or tot_neg <= 0:
            return 0.0
        prev_pos = np.concatenate([[0.0], pos[:-1]])
        prev_neg = np.concatenate([[0.0], neg[:-1]])
        area = np.sum((neg - prev_neg) * (pos + prev_pos) / 2.0)
        return float(area / tot_pos / tot_neg)
