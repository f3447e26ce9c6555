"""The 8x8 handwritten digits that scikit-learn ships (1,797 images, no download), split
with a fixed seed and written to RecordIO with the project's own writer.

Needs the `examples` extra (scikit-learn): ``pip install -e .[examples]``.
"""
from __future__ import annotations

import os

import numpy as np

import fluid


def load_split(test_fraction: float = 0.2, seed: int = 0
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(x_train, y_train, x_test, y_test): images as float32 [N, 1, 8, 8] scaled to [0, 1],
    labels int64 [N, 1]."""
    from sklearn.datasets import load_digits  # the `examples` extra
    digits = load_digits()
    x = (digits.images / 16.0).astype(np.float32)[:, None, :, :]
    y = digits.target.astype(np.int64).reshape(-1, 1)
    order = np.random.default_rng(seed).permutation(len(x))
    n_test = int(len(x) * test_fraction)
    test, train = order[:n_test], order[n_test:]
    return x[train], y[train], x[test], y[test]


def write_recordio(folder: str, seed: int = 0) -> tuple[str, str]:
    """Write train.recordio and test.recordio into ``folder``; return their paths."""
    x_train, y_train, x_test, y_test = load_split(seed=seed)
    paths = (os.path.join(folder, "train.recordio"), os.path.join(folder, "test.recordio"))
    fluid.recordio.write_arrays(paths[0], (x_train, y_train))
    fluid.recordio.write_arrays(paths[1], (x_test, y_test))
    return paths


def run_epochs(prog, epochs: int) -> float:
    """Train on every batch of the train file, then evaluate, once per epoch; print and
    return the last test accuracy. ``train`` raises EOFException at the end of its data."""
    accuracy = 0.0
    for epoch in range(epochs):
        losses = []
        while True:
            try:
                losses.append(prog.train())
            except fluid.EOFException:
                break
        accuracy = prog.evaluate()
        prog.reset_readers()
        print(f"epoch {epoch + 1:2d}  loss {sum(losses) / len(losses):.4f}  "
              f"test accuracy {accuracy:.4f}", flush=True)
    return accuracy
