"""recognize_digits: Paddle 1.8's book test of the same name (an MLP and a small CNN on
MNIST) as a `fluid.Program`, on synthetic 28x28 digits.

    python examples/book/recognize_digits.py [--net mlp|conv] [--steps N]

The layers, sizes and optimizer are the book's: `mlp` is two fc layers of 200 (tanh),
`conv` two `simple_img_conv_pool` blocks (20 and 50 filters of 5x5, max-pool 2, relu)
with a batch_norm between them; both end in an fc of 10 with softmax, cross_entropy and
accuracy, trained by Adam(0.001) on batches of 64 (book_common.ImageClassifier). The
book's test program (a clone for test) is the `test` method: no optimizer runs there, so
batch_norm uses its moving statistics. Images are float32 [1, 28, 28] in [-1, 1] as the
book's reader gives them, labels int64 [1].
"""
from __future__ import annotations

from collections.abc import Iterator

import numpy as np
from book_common import ImageClassifier, command_line, image_batches, train

import fluid

IMAGE = (1, 28, 28)


class RecognizeDigits(ImageClassifier):
    image_shape = IMAGE
    net = "mlp"               # or "conv"

    def features(self, img):
        return self.mlp(img) if self.net == "mlp" else self.conv_net(img)

    def mlp(self, img):
        hidden = fluid.layers.fc(input=img, size=200, act="tanh")
        return fluid.layers.fc(input=hidden, size=200, act="tanh")

    def conv_net(self, img):
        conv_pool_1 = fluid.nets.simple_img_conv_pool(
            input=img, filter_size=5, num_filters=20, pool_size=2, pool_stride=2, act="relu")
        conv_pool_1 = fluid.layers.batch_norm(conv_pool_1)
        return fluid.nets.simple_img_conv_pool(
            input=conv_pool_1, filter_size=5, num_filters=50, pool_size=2, pool_stride=2,
            act="relu")


def batches(seed: int, batch_size: int) -> Iterator[dict[str, np.ndarray]]:
    return image_batches(seed, batch_size, IMAGE, low=-1.0, high=1.0)


def main(net: str = "mlp", steps: int = 20, batch_size: int = 64, seed: int = 0
         ) -> tuple[list[float], float]:
    """Train ``steps`` steps; return the losses and the accuracy of `test` on a fresh
    batch."""
    prog = RecognizeDigits(net=net).Compile(seed=seed)
    losses = train(prog.train_step, batches(seed, batch_size), steps, every=5,
                   name=f"{net}: ")
    test_loss, test_acc = prog.test(**next(batches(seed + 1, 256)))
    print(f"{net}: test loss {test_loss:.4f}  accuracy {test_acc:.3f}")
    return losses, float(test_acc)


if __name__ == "__main__":
    args = command_line(__doc__, steps=20, net=("mlp", "conv"))
    main(args.net, args.steps, seed=args.seed)
