"""An MLP on scikit-learn's 8x8 digits, read from RecordIO inside the program.

    python examples/digits_mlp.py [--epochs N]      (needs the `examples` extra)

Prints test accuracy after every epoch and a final figure.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "extension"), os.path.dirname(__file__)]

from digits_data import run_epochs, write_recordio  # noqa: E402

import fluid  # noqa: E402


class DigitsMLP(fluid.Program):
    train_file = "train.recordio"
    test_file = "test.recordio"
    batch_size = 64
    hidden = 128
    learning_rate = 0.001

    def classifier(self, image):
        with fluid.var_scope("mlp"):
            h = fluid.layers.fc(input=image, size=self.hidden, num_flatten_dims=1, act="relu")
            h = fluid.layers.fc(input=h, size=self.hidden // 2, act="relu")
            return fluid.layers.fc(input=h, size=10)

    @fluid.network()
    def train(self):
        reader = fluid.batch_reader(file=self.train_file, batch_size=self.batch_size,
                                    shape=[[1, 8, 8], [1]], dtype=["float32", "int64"],
                                    shuffle=True, seed=1)
        image, label = reader.next_item()
        logits = self.classifier(fluid.layers.reshape(image, [-1, 64]))
        loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, label))
        fluid.optimizer.Adam(learning_rate=self.learning_rate).minimize(loss)
        return loss

    @fluid.network()
    def evaluate(self):
        reader = fluid.batch_reader(file=self.test_file, batch_size=1000,
                                    shape=[[1, 8, 8], [1]], dtype=["float32", "int64"])
        image, label = reader.next_item()
        logits = self.classifier(fluid.layers.reshape(image, [-1, 64]))
        return fluid.layers.accuracy(fluid.layers.softmax(logits), label)

    @fluid.network("image")
    def infer(self, image):
        image = fluid.layers.data(name="image", shape=[1, 8, 8], dtype="float32")
        return fluid.layers.argmax(self.classifier(fluid.layers.reshape(image, [-1, 64])),
                                   axis=1)


def main(epochs: int = 30, seed: int = 0) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        train_file, test_file = write_recordio(tmp)
        prog = DigitsMLP(train_file=train_file, test_file=test_file).Compile(seed=seed)
        accuracy = run_epochs(prog, epochs)
        prog.close()
    print(f"final test accuracy: {accuracy:.4f}")
    return accuracy


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=30)
    main(ap.parse_args().epochs)
