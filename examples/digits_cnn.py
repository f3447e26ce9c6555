"""A small CNN (conv, batch_norm, max-pool, dropout, fc) on scikit-learn's 8x8 digits,
read from RecordIO inside the program, trained with Adam under a cosine learning-rate
schedule.

    python examples/digits_cnn.py [--epochs N]      (needs the `examples` extra)

Same data and split as examples/digits_mlp.py (digits_data.load_split). Prints test
accuracy after every epoch and a final figure.
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "extension"), os.path.dirname(__file__)]

from digits_data import run_epochs, write_recordio  # noqa: E402

import fluid  # noqa: E402

SHAPES, DTYPES = [[1, 8, 8], [1]], ["float32", "int64"]


class DigitsCNN(fluid.Program):
    train_file = "train.recordio"
    test_file = "test.recordio"
    batch_size = 64
    learning_rate = 0.003      # the cosine schedule's start; it falls towards 0 over `epochs`
    epochs = 20
    train_size = 1437          # training images (digits_data's split); sets steps per epoch
    dropout = 0.25
    channels = (32, 64)
    hidden = 128

    def conv_bn(self, x, filters):
        """3x3 conv (same padding, no bias: batch_norm's own bias takes its place) ->
        batch_norm -> relu."""
        x = fluid.layers.conv2d(x, num_filters=filters, filter_size=3, padding=1,
                                bias_attr=False)
        return fluid.layers.batch_norm(x, act="relu")

    def classifier(self, image):
        """[N, 1, 8, 8] images -> [N, 10] logits."""
        with fluid.var_scope("cnn"):
            c1, c2 = self.channels
            h = self.conv_bn(image, c1)                                # c1 x 8 x 8
            h = self.conv_bn(h, c1)
            h = fluid.layers.pool2d(h, pool_size=2, pool_stride=2)     # c1 x 4 x 4
            h = self.conv_bn(h, c2)
            h = self.conv_bn(h, c2)
            h = fluid.layers.pool2d(h, pool_size=2, pool_stride=2)     # c2 x 2 x 2
            h = fluid.layers.dropout(h, self.dropout, seed=1,
                                     dropout_implementation="upscale_in_train")
            h = fluid.layers.fc(h, size=self.hidden, act="relu")
            h = fluid.layers.dropout(h, self.dropout, seed=2,
                                     dropout_implementation="upscale_in_train")
            return fluid.layers.fc(h, size=10)

    @fluid.network()
    def train(self):
        reader = fluid.batch_reader(file=self.train_file, batch_size=self.batch_size,
                                    shape=SHAPES, dtype=DTYPES, shuffle=True, seed=1)
        image, label = reader.next_item()
        logits = self.classifier(image)
        loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, label))
        lr = fluid.layers.cosine_decay(self.learning_rate, epochs=self.epochs,
                                       step_each_epoch=math.ceil(self.train_size /
                                                                 self.batch_size))
        fluid.optimizer.Adam(learning_rate=lr).minimize(loss)
        return loss

    # No optimizer runs here, so the runtime traces this method in inference mode:
    # batch_norm normalises with the moving statistics that `train` accumulated (and
    # leaves them unchanged), and dropout passes everything through. `infer` likewise.
    @fluid.network()
    def evaluate(self):
        reader = fluid.batch_reader(file=self.test_file, batch_size=1000, shape=SHAPES,
                                    dtype=DTYPES)
        image, label = reader.next_item()
        return fluid.layers.accuracy(fluid.layers.softmax(self.classifier(image)), label)

    @fluid.network("image")
    def infer(self, image):
        image = fluid.layers.data(name="image", shape=[1, 8, 8], dtype="float32")
        return fluid.layers.argmax(self.classifier(image), axis=1)


def main(epochs: int = 20, seed: int = 0) -> float:
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        train_file, test_file = write_recordio(tmp)
        train_size = sum(c.num_records for c in fluid.recordio.chunk_index(train_file))
        prog = DigitsCNN(train_file=train_file, test_file=test_file, epochs=epochs,
                         train_size=train_size).Compile(seed=seed)
        accuracy = run_epochs(prog, epochs)
        prog.close()
    print(f"final test accuracy: {accuracy:.4f}  ({time.perf_counter() - t0:.1f} s)")
    return accuracy


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    main(args.epochs, args.seed)
