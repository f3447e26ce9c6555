"""`fluid.nets`: compositions of layers. `scaled_dot_product_attention` with `layers.fc` and
`layers.layer_norm` is enough for a Transformer encoder block::

    def encoder_block(x, mask, d=128, heads=4):          # x [B, T, d], mask [B, T]
        a = fluid.nets.scaled_dot_product_attention(x, x, x, num_heads=heads, mask=mask)
        a = fluid.layers.fc(a, size=d, num_flatten_dims=2)
        x = fluid.layers.layer_norm(x + a, begin_norm_axis=2)
        f = fluid.layers.fc(x, size=4 * d, num_flatten_dims=2, act="relu")
        f = fluid.layers.fc(f, size=d, num_flatten_dims=2)
        return fluid.layers.layer_norm(x + f, begin_norm_axis=2)
"""
from __future__ import annotations

from typing import Any

from ..errors import OpArgumentError, ShapeError
from ..ir.records import FLOAT_DTYPES
from ..ir.text import short_type
from . import layers
from .layers.helpers import as_variable
from .nets_image import img_conv_group, simple_img_conv_pool
from .tracing import error_at
from .variable import Variable

__all__ = ["scaled_dot_product_attention", "simple_img_conv_pool", "img_conv_group",
           "sequence_conv_pool", "glu"]

#: What a masked-out key adds to its attention logit: exp of it is 0 in float32 and 64.
MASKED_LOGIT = -1e9


def _check(name: str, v: Variable, num_heads: int) -> None:
    if len(v.shape) != 3:
        raise error_at(ShapeError, f"scaled_dot_product_attention: {name} {v.name}:"
                                   f"{short_type(v.desc)} must be [B, T, d]")
    if v.shape[2] < 0 or v.shape[2] % num_heads:
        raise error_at(ShapeError, f"scaled_dot_product_attention: the last dim of {name} "
                                   f"{v.name}:{short_type(v.desc)} must be known and divisible "
                                   f"by num_heads={num_heads}")


def _split_heads(x: Variable, num_heads: int) -> Variable:
    """[B, T, d] -> [B, heads, T, d / heads]."""
    if num_heads == 1:
        return layers.unsqueeze(x, [1])
    x = layers.reshape(x, [0, 0, num_heads, x.shape[2] // num_heads])
    return layers.transpose(x, [0, 2, 1, 3])


def _combine_heads(x: Variable) -> Variable:
    """[B, heads, T, d'] -> [B, T, heads * d']."""
    if x.shape[1] == 1:
        return layers.squeeze(x, [1])
    x = layers.transpose(x, [0, 2, 1, 3])
    return layers.reshape(x, [0, 0, x.shape[2] * x.shape[3]])


def _key_mask_bias(mask: Variable, dtype: str) -> Variable:
    """A key-padding mask [B, Tk] (1 = attend) as logit offsets [B, 1, 1, Tk]: 0 where a
    key is kept, `MASKED_LOGIT` where it is padding."""
    if len(mask.shape) != 2:
        raise error_at(ShapeError, f"scaled_dot_product_attention: mask {mask.name}:"
                                   f"{short_type(mask.desc)} must be a key-padding mask [B, Tk] "
                                   f"(fluid.layers.sequence_mask(lengths, maxlen=Tk))")
    m = mask if mask.dtype == dtype else layers.cast(mask, dtype)
    bias = layers.scale(m, scale=-MASKED_LOGIT, bias=MASKED_LOGIT)
    return layers.unsqueeze(bias, [1, 2])


def scaled_dot_product_attention(queries: Variable, keys: Variable, values: Variable,
                                 num_heads: int = 1, dropout_rate: float = 0.0,
                                 mask: Variable | None = None) -> Variable:
    """``softmax(Q K^T / sqrt(d_k)) V`` for ``queries [B, Tq, d]``, ``keys [B, Tk, d]`` and
    ``values [B, Tk, dv]``; returns ``[B, Tq, dv]``.

    With ``num_heads > 1`` the queries, keys and values first go through their own
    ``fc`` (size kept), are split into ``num_heads`` heads that attend separately, and the
    heads' results are concatenated (as Paddle's). ``mask`` ``[B, Tk]`` (from
    `fluid.layers.sequence_mask`; 1 = attend, 0 = padding) keeps every query from
    attending to padded keys. ``dropout_rate`` drops attention weights while training.
    """
    if isinstance(num_heads, bool) or not isinstance(num_heads, int) or num_heads < 1:
        raise error_at(OpArgumentError, f"scaled_dot_product_attention: num_heads must be a "
                                        f"positive int, got {num_heads!r}")
    for name, v in (("queries", queries), ("keys", keys), ("values", values)):
        _check(name, v, num_heads)
    if queries.dtype not in FLOAT_DTYPES:
        raise error_at(OpArgumentError, f"scaled_dot_product_attention: queries must be "
                                        f"float, got {queries.dtype}")
    if queries.shape[2] != keys.shape[2]:
        raise error_at(ShapeError, f"scaled_dot_product_attention: queries "
                                   f"{short_type(queries.desc)} and keys "
                                   f"{short_type(keys.desc)} must have the same last dim")
    if num_heads > 1:
        queries, keys, values = (layers.fc(v, size=v.shape[2], num_flatten_dims=2)
                                 for v in (queries, keys, values))
    q, k, v = (_split_heads(x, num_heads) for x in (queries, keys, values))
    key_dim = keys.shape[2] // num_heads
    logits = layers.matmul(q, k, transpose_y=True, alpha=key_dim ** -0.5)
    if mask is not None:
        logits = logits + _key_mask_bias(mask, logits.dtype)
    weights = layers.softmax(logits)
    if dropout_rate:
        weights = layers.dropout(weights, dropout_prob=dropout_rate)
    return _combine_heads(layers.matmul(weights, v))


def sequence_conv_pool(input: Variable, num_filters: int, filter_size: int,
                       param_attr: Any = None, act: str = "sigmoid", pool_type: str = "max",
                       bias_attr: Any = None, lengths: Variable | None = None) -> Variable:
    """`layers.sequence_conv` then `layers.sequence_pool`: ``[B, T, D] -> [B,
    num_filters]``, each row pooled over its valid steps (``pool_type``: 'max', 'sum',
    'average', 'sqrt', 'first' or 'last')."""
    conv = layers.sequence_conv(input, num_filters, filter_size, param_attr=param_attr,
                                bias_attr=bias_attr, act=act, lengths=lengths)
    return layers.sequence_pool(conv, pool_type, lengths=lengths)


def glu(input: Variable, dim: int = -1) -> Variable:
    """The gated linear unit: ``input`` cut in two halves ``a, b`` along ``dim`` (its size
    must be even), then ``a * sigmoid(b)``."""
    x = as_variable(input, "glu: input")
    size = x.shape[dim] if -len(x.shape) <= dim < len(x.shape) else None
    if size is None or size < 0 or size % 2:
        raise error_at(ShapeError, f"glu: dim {dim} of {x.name}:{short_type(x.desc)} must be "
                                   f"known and even, to cut it in two halves")
    a, b = layers.split(x, 2, dim=dim)
    return layers.elementwise_mul(a, layers.sigmoid(b))
