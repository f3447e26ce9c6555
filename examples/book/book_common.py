"""What the book's examples share: synthetic batches with a pattern to learn, a training
loop that prints the loss, and the command line.

Paddle's book feeds each network from a dataset it downloads (MNIST, CIFAR-10, PTB,
MovieLens, IMDB, CoNLL-05) through a reader and a `DataFeeder`. These examples feed arrays
of the same shapes and dtypes made up on the spot, each with a rule linking the inputs to
the label so that the loss has something to fall towards. A sequence (Paddle's LoD
tensor) is a padded batch `[B, T, 1]` of ids plus its int64 lengths `[B]`
(docs/sequences.md).
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
for _path in (ROOT, os.path.join(ROOT, "extension")):   # run from a checkout, uninstalled
    if _path not in sys.path:
        sys.path.insert(0, _path)

import fluid  # noqa: E402  (after the path above)


class ImageClassifier(fluid.Program):
    """The book's image classifiers as one program: `features` (a subclass's network)
    then an fc of `classes` with softmax, cross_entropy and accuracy (the book's
    loss_net); `train_step` trains with Adam(`learning_rate`), `test` runs the same net
    with no optimizer (the book's test program: batch_norm uses its moving statistics,
    dropout passes everything), `infer` gives the class probabilities. Images are fed
    as ``image``, labels (int64 [1]) as ``label``."""
    image_shape: tuple[int, ...] = (1, 28, 28)
    classes = 10
    learning_rate = 0.001

    def features(self, image: Any) -> Any:
        raise NotImplementedError("a subclass gives the network")

    def loss_net(self, image: Any, label: Any) -> tuple[Any, Any, Any]:
        """(prediction, avg_loss, acc)."""
        with fluid.var_scope("classifier"):   # the same parameter names in every method
            prediction = fluid.layers.fc(input=self.features(image), size=self.classes,
                                         act="softmax")
        loss = fluid.layers.cross_entropy(input=prediction, label=label)
        avg_loss = fluid.layers.mean(loss)
        acc = fluid.layers.accuracy(input=prediction, label=label)
        return prediction, avg_loss, acc

    def inputs(self) -> tuple[Any, Any]:
        image = fluid.layers.data(name="image", shape=list(self.image_shape), dtype="float32")
        label = fluid.layers.data(name="label", shape=[1], dtype="int64")
        return image, label

    @fluid.network("image", "label")
    def train_step(self, image, label):
        _, avg_loss, acc = self.loss_net(*self.inputs())
        fluid.optimizer.Adam(learning_rate=self.learning_rate).minimize(avg_loss)
        return avg_loss, acc

    @fluid.network("image", "label")
    def test(self, image, label):
        _, avg_loss, acc = self.loss_net(*self.inputs())
        return avg_loss, acc

    @fluid.network("image")
    def infer(self, image):
        image = fluid.layers.data(name="image", shape=list(self.image_shape), dtype="float32")
        label = fluid.layers.fill_constant_batch_size_like(image, [-1, 1], "int64", 0)
        return self.loss_net(image, label)[0]


def image_batches(seed: int, batch_size: int, shape: tuple[int, ...], **pattern: Any
                  ) -> Iterator[dict[str, np.ndarray]]:
    """Endless batches ``{"image", "label"}`` of `class_images`."""
    rng = np.random.default_rng(seed)
    while True:
        image, label = class_images(rng, batch_size, shape, **pattern)
        yield {"image": image, "label": label}


def class_images(rng: np.random.Generator, batch: int, shape: tuple[int, ...],
                 classes: int = 10, low: float = 0.0, high: float = 1.0,
                 noise: float = 0.3) -> tuple[np.ndarray, np.ndarray]:
    """Images float32 ``[batch, *shape]`` in ``[low, high]`` and labels int64
    ``[batch, 1]``: each class has its own fixed pattern (seeded by the class), blurred
    by noise."""
    labels = rng.integers(0, classes, batch)
    patterns = np.stack([np.random.default_rng(1000 + c).random(shape) for c in range(classes)])
    x = (1 - noise) * patterns[labels] + noise * rng.random((batch, *shape))
    x = low + (high - low) * x
    return x.astype(np.float32), labels.reshape(-1, 1).astype(np.int64)


def id_sequences(rng: np.random.Generator, batch: int, vocab: int, min_len: int,
                 max_len: int) -> tuple[np.ndarray, np.ndarray]:
    """Ids int64 ``[batch, max_len, 1]`` below ``vocab``, zero past each row's length, and
    the lengths int64 ``[batch]`` (at least ``min_len``, the longest row ``max_len``)."""
    lengths = rng.integers(min_len, max_len + 1, batch)
    lengths[0] = max_len
    ids = rng.integers(0, vocab, (batch, max_len))
    ids[np.arange(max_len)[None, :] >= lengths[:, None]] = 0
    return ids[:, :, None].astype(np.int64), lengths.astype(np.int64)


def train(step: Callable[..., Any], batches: Iterator[dict[str, np.ndarray]], steps: int,
          every: int = 1, name: str = "") -> list[float]:
    """Call ``step(**batch)`` ``steps`` times on the batches given; print the loss (the
    first value the method returns) every ``every`` steps and the last; return them all."""
    losses: list[float] = []
    t0 = time.perf_counter()
    for k in range(1, steps + 1):
        out = step(**next(batches))
        losses.append(float(np.mean(out[0] if isinstance(out, tuple) else out)))
        if k == 1 or k % every == 0 or k == steps:
            print(f"{name}step {k:4d}  loss {losses[-1]:.4f}  "
                  f"({time.perf_counter() - t0:.1f} s)", flush=True)
    return losses


def command_line(doc: str, steps: int, **options: Any) -> argparse.Namespace:
    """``--steps N`` and ``--seed S``, plus ``--<name>`` for each of ``options``: a tuple
    of choices (its first entry the default) or a number (the default, and its type)."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--steps", type=int, default=steps)
    ap.add_argument("--seed", type=int, default=0)
    for name, value in options.items():
        flag = "--" + name.replace("_", "-")
        if isinstance(value, tuple):
            ap.add_argument(flag, choices=value, default=value[0])
        else:
            ap.add_argument(flag, type=type(value), default=value)
    return ap.parse_args()
