"""The top-level inputs of Paddle 1.8 (``paddle.fluid.input`` and ``fluid.data``):
`data` declares exactly the shape it is given, and `embedding` and `one_hot` take ids of
any shape, without the trailing dim of 1 that ``fluid.layers.embedding`` and
``fluid.layers.one_hot`` want, and append a dim::

    ids = fluid.data(name='ids', shape=[None, 20], dtype='int64')     # [?, 20], nothing added
    emb = fluid.embedding(ids, size=[10000, 64])                      # [?, 20, 64]
    hot = fluid.one_hot(ids, depth=10000)                             # [?, 20, 10000]
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..errors import OpArgumentError
from ..ir.records import INT_DTYPES
from ..ir.text import short_type
from . import layers
from .layers.helpers import as_variable
from .tracing import error_at
from .variable import Variable

__all__ = ["data", "embedding", "one_hot"]


def data(name: str, shape: Sequence[int | None], dtype: str = "float32",
         lod_level: int = 0) -> Variable:
    """Declare the data var ``name`` of the traced method with exactly ``shape``: no batch
    dim is added; ``None`` or -1 marks a dim known only when the method runs (the batch
    dim, usually). A method argument mapped to ``name`` feeds it."""
    return layers.data(name, shape, dtype, append_batch_size=False, lod_level=lod_level)


def _ids(input: Any, layer: str) -> Variable:
    ids = as_variable(input, f"fluid.{layer}: input")
    if ids.dtype not in INT_DTYPES:
        raise error_at(OpArgumentError, f"fluid.{layer}: input {ids.name}:"
                                        f"{short_type(ids.desc)} must hold int ids (int64)")
    return ids


def embedding(input: Variable, size: Sequence[int], is_sparse: bool = False,
              is_distributed: bool = False, padding_idx: int | None = None,
              param_attr: Any = None, dtype: str = "float32") -> Variable:
    """The rows of a table ``[vocab, dim]`` (``size``) for int64 ids of any shape:
    ``[..., dim]``. Ids equal to ``padding_idx`` (negative counts from the end) give zeros
    and leave their row untouched; see ``fluid.layers.embedding``, which this is but for
    the trailing dim of 1 it wants."""
    ids = _ids(input, "embedding")
    column = layers.unsqueeze(ids, [len(ids.shape)])
    return layers.embedding(column, size, is_sparse, is_distributed, padding_idx, param_attr,
                            dtype)


def one_hot(input: Variable, depth: int, allow_out_of_range: bool = False) -> Variable:
    """One-hot rows for int ids of any shape: ``[...] -> [..., depth]``, float32. An id
    outside ``[0, depth)`` is an error, or a row of zeros with ``allow_out_of_range``."""
    ids = _ids(input, "one_hot")
    return layers.one_hot(layers.unsqueeze(ids, [len(ids.shape)]), depth, allow_out_of_range)
