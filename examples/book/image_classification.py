"""image_classification: Paddle 1.8's book test of the same name (ResNet-32 for CIFAR and
VGG16 with batch_norm and dropout) as a `fluid.Program`, on synthetic 32x32 colour images.

    python examples/book/image_classification.py [--net resnet|vgg] [--steps N]

The networks are the book's `resnet_cifar10(depth=32)` (basic blocks of 16, 32 and 64
channels, batch_norm after every conv, an 8x8 average pool) and `vgg16_bn_drop` (five
`img_conv_group`s of 64 to 512 channels, dropout, two fc of 4096 with a batch_norm
between), each followed by an fc of 10 with softmax, cross_entropy and accuracy, trained
by Adam(0.001) on batches of 128 (book_common.ImageClassifier). Images are float32
[3, 32, 32] in [0, 1], labels int64 [1].

The book's VGG head (an fc of 4096 straight into the fc of 10, no activation between)
makes Adam's first steps overshoot: the loss jumps to 10-20, as the same head does in
PyTorch; at the book's size on this synthetic data the softmax then saturates within about
ten steps (a zero probability's cross entropy is Paddle's 1e20, and its gradient
overflows, as Paddle's unfused softmax and cross_entropy would). The thinner VGG of the
tests trains.

`depth`, `resnet_channels`, `vgg_channels` and `vgg_fc` are options: the tests
(tests/test_examples_book.py) build the same structure thinner (and ResNet-8: one basic
block per stage) so that a step takes a fraction of a second on a CPU.
"""
from __future__ import annotations

from collections.abc import Iterator

import numpy as np
from book_common import ImageClassifier, command_line, image_batches, train

import fluid

IMAGE = (3, 32, 32)
CLASSES = 10


def conv_bn_layer(input, ch_out, filter_size, stride, padding, act="relu", bias_attr=False):
    tmp = fluid.layers.conv2d(input=input, filter_size=filter_size, num_filters=ch_out,
                              stride=stride, padding=padding, act=None, bias_attr=bias_attr)
    return fluid.layers.batch_norm(input=tmp, act=act)


def shortcut(input, ch_in, ch_out, stride):
    if ch_in != ch_out:
        return conv_bn_layer(input, ch_out, 1, stride, 0, None)
    return input


def basicblock(input, ch_in, ch_out, stride):
    tmp = conv_bn_layer(input, ch_out, 3, stride, 1)
    tmp = conv_bn_layer(tmp, ch_out, 3, 1, 1, act=None, bias_attr=True)
    short = shortcut(input, ch_in, ch_out, stride)
    return fluid.layers.elementwise_add(x=tmp, y=short, act="relu")


def layer_warp(block_func, input, ch_in, ch_out, count, stride):
    tmp = block_func(input, ch_in, ch_out, stride)
    for _ in range(1, count):
        tmp = block_func(tmp, ch_out, ch_out, 1)
    return tmp


def resnet_cifar10(input, depth=32, channels=(16, 32, 64)):
    """The book's ResNet for CIFAR: ``(depth - 2) / 6`` basic blocks per stage."""
    if (depth - 2) % 6:
        raise ValueError(f"resnet_cifar10: depth - 2 must be a multiple of 6, got {depth}")
    n = (depth - 2) // 6
    c1, c2, c3 = channels
    conv1 = conv_bn_layer(input=input, ch_out=c1, filter_size=3, stride=1, padding=1)
    res1 = layer_warp(basicblock, conv1, c1, c1, n, 1)
    res2 = layer_warp(basicblock, res1, c1, c2, n, 2)
    res3 = layer_warp(basicblock, res2, c2, c3, n, 2)
    return fluid.layers.pool2d(input=res3, pool_size=8, pool_type="avg", pool_stride=1)


def vgg16_bn_drop(input, channels=(64, 128, 256, 512, 512), fc_size=4096):
    def conv_block(input, num_filter, groups, dropouts):
        return fluid.nets.img_conv_group(
            input=input, pool_size=2, pool_stride=2, conv_num_filter=[num_filter] * groups,
            conv_filter_size=3, conv_act="relu", conv_with_batchnorm=True,
            conv_batchnorm_drop_rate=dropouts, pool_type="max")

    c1, c2, c3, c4, c5 = channels
    conv1 = conv_block(input, c1, 2, [0.3, 0])
    conv2 = conv_block(conv1, c2, 2, [0.4, 0])
    conv3 = conv_block(conv2, c3, 3, [0.4, 0.4, 0])
    conv4 = conv_block(conv3, c4, 3, [0.4, 0.4, 0])
    conv5 = conv_block(conv4, c5, 3, [0.4, 0.4, 0])

    drop = fluid.layers.dropout(x=conv5, dropout_prob=0.5)
    fc1 = fluid.layers.fc(input=drop, size=fc_size, act=None)
    bn = fluid.layers.batch_norm(input=fc1, act="relu")
    drop2 = fluid.layers.dropout(x=bn, dropout_prob=0.5)
    return fluid.layers.fc(input=drop2, size=fc_size, act=None)


class ImageClassification(ImageClassifier):
    image_shape = IMAGE
    net = "resnet"            # or "vgg"
    depth = 32
    resnet_channels = (16, 32, 64)
    vgg_channels = (64, 128, 256, 512, 512)
    vgg_fc = 4096

    def features(self, images):
        if self.net == "vgg":
            return vgg16_bn_drop(images, self.vgg_channels, self.vgg_fc)
        return resnet_cifar10(images, self.depth, self.resnet_channels)


def batches(seed: int, batch_size: int) -> Iterator[dict[str, np.ndarray]]:
    return image_batches(seed, batch_size, IMAGE, classes=CLASSES, noise=0.5)


def main(net: str = "resnet", steps: int = 5, batch_size: int = 128, seed: int = 0,
         **sizes) -> list[float]:
    """Train ``steps`` steps of the book's network (``sizes``: thinner options, as the
    tests use); return the losses."""
    prog = ImageClassification(net=net, **sizes).Compile(seed=seed)
    losses = train(prog.train_step, batches(seed, batch_size), steps, name=f"{net}: ")
    test_loss, test_acc = prog.test(**next(batches(seed + 1, batch_size)))
    print(f"{net}: test loss {test_loss:.4f}  accuracy {test_acc:.3f}")
    return losses


if __name__ == "__main__":
    args = command_line(__doc__, steps=5, net=("resnet", "vgg"))
    main(args.net, args.steps, seed=args.seed)
