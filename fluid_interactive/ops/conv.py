"""Convolution and pooling ops: conv2d, conv2d_transpose, pool2d."""
