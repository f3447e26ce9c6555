"""`fluid.layers`: functions that append ops to the method being traced."""
from .activations import (abs, exp, leaky_relu, log, relu, sigmoid, softmax, sqrt, square,
                          tanh)
from .io import data
from .loss import square_error_cost
from .math import (clip, elementwise_add, elementwise_div, elementwise_max, elementwise_min,
                   elementwise_mul, elementwise_pow, elementwise_sub, matmul, mean, mul, pow,
                   scale, sums)

__all__ = [
    "abs", "exp", "leaky_relu", "log", "relu", "sigmoid", "softmax", "sqrt", "square", "tanh",
    "data", "square_error_cost", "clip", "elementwise_add", "elementwise_div",
    "elementwise_max", "elementwise_min", "elementwise_mul", "elementwise_pow",
    "elementwise_sub", "matmul", "mean", "mul", "pow", "scale", "sums", "fc",
]

from .nn import fc  # noqa: E402
