"""Normalisation, dropout, embedding and the other neural-network layers: batch_norm,
layer_norm, dropout, embedding, one_hot, gelu, elu, swish, flatten, pad.

Whether batch_norm and dropout run in training or inference mode is the runtime's call by
default (a method that runs an optimizer trains, the others infer); their ``is_test``
argument overrides it when given as True or False.
"""
from __future__ import annotations

from collections.abc import Sequence
from math import prod
from typing import Any

from ...errors import NameConflictError, OpArgumentError, ShapeError
from ...ir.records import FLOAT_DTYPES, INT_DTYPES, VarDesc, canonical_dtype
from ...ir.text import short_type
from ..initializer import Constant
from ..tracing import error_at
from ..variable import Variable
from .helpers import LayerHelper, append_simple, as_variable


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _float_input(layer: str, value: Any, what: str = "input") -> Variable:
    x = as_variable(value, f"{layer} {what}")
    if x.dtype not in FLOAT_DTYPES:
        raise error_at(OpArgumentError, f"{layer}: {what} {x.name} is {x.dtype}; it must be "
                                        f"float (cast it first)")
    return x


def _mode_attr(attrs: dict, is_test: Any, layer: str) -> None:
    """``is_test`` None leaves the mode to the runtime; True/False forces it."""
    if is_test is None:
        return
    if not isinstance(is_test, bool):
        raise error_at(OpArgumentError, f"{layer}: is_test must be None, True or False, got "
                                        f"{is_test!r}")
    attrs["is_test"] = is_test


def _state_var(helper: LayerHelper, name: str | None, shape: Sequence[int], dtype: str,
               value: float) -> Variable:
    """Persistable, non-trainable state of a layer (batch_norm's moving statistics): a var
    in block 0 filled with ``value`` when the program compiles, named ``name`` or
    ``<layer>.w_<k>``. A method that builds the same layer again reuses it by name."""
    trace = helper.trace
    name = name or helper._next("w")
    existing = trace.find(name)
    if existing is not None:
        if not existing.persistable or existing.is_parameter or \
                tuple(existing.shape) != tuple(shape) or existing.dtype != dtype:
            raise error_at(NameConflictError,
                           f"{helper.layer_type}: state {name!r} already exists as "
                           f"{short_type(existing)}{' (a parameter)' * existing.is_parameter}"
                           f" but this layer needs persistable state "
                           f"{short_type(VarDesc(name, tuple(shape), dtype))}; give it "
                           f"another name")
        return Variable(trace, name)
    trace.declare(VarDesc(name, tuple(shape), dtype, persistable=True, stop_gradient=True),
                  in_global=True)
    trace.append_op("fill_constant", {}, {"Out": [name]},
                    {"shape": list(shape), "dtype": dtype, "value": float(value)},
                    in_global=True)
    return Variable(trace, name)


def batch_norm(input: Variable, act: str | None = None, is_test: bool | None = None,
               momentum: float | Variable = 0.9, epsilon: float = 1e-5,
               param_attr: Any = None, bias_attr: Any = None, data_layout: str = "NCHW",
               in_place: bool = False, name: str | None = None,
               moving_mean_name: str | None = None,
               moving_variance_name: str | None = None,
               do_model_average_for_mean_and_var: bool = True,
               use_global_stats: bool = False) -> Variable:
    """Batch normalisation: ``act((x - mean) / sqrt(var + epsilon) * scale + bias)`` per
    channel.

    Shapes: input ``[N, C, ...]`` (NCHW; ``data_layout='NHWC'`` puts C last) -> output of
    the same shape. Parameters ``scale [C]`` (starts at 1) and ``bias [C]`` (starts at 0);
    state ``moving mean [C]`` (0) and ``moving variance [C]`` (1), persistable but not
    parameters, named ``moving_mean_name`` / ``moving_variance_name`` or ``<layer>.w_1`` /
    ``.w_2``.

    Training uses the batch's mean and variance and updates the moving statistics as
    ``momentum * moving + (1 - momentum) * batch``; ``momentum`` may be a float Variable
    of shape [1] (a schedule). Inference uses the moving statistics. ``is_test=None``
    (where Paddle's default is False) lets the runtime decide, as Paddle's
    ``clone(for_test=True)`` does: a method that runs an optimizer trains; True/False
    forces it. ``use_global_stats`` normalises with the moving statistics in training too.
    ``in_place`` and ``do_model_average_for_mean_and_var`` are accepted for Paddle
    compatibility.
    """
    helper, y = _batch_norm("batch_norm", input, is_test, momentum, epsilon, param_attr,
                            bias_attr, data_layout, name, moving_mean_name,
                            moving_variance_name, use_global_stats, final=act is None)
    return helper.activation(y, act)


def _momentum(layer: str, momentum: Any) -> tuple[dict, dict]:
    """(inputs, attrs) of batch_norm for a float momentum or a [1] float Variable."""
    if isinstance(momentum, Variable):
        if momentum.dtype not in FLOAT_DTYPES or tuple(momentum.shape) != (1,):
            raise error_at(OpArgumentError, f"{layer}: momentum as a Variable must be a float "
                                            f"[1], got {momentum.name}:"
                                            f"{short_type(momentum.desc)}")
        return {"MomentumTensor": momentum}, {}
    if isinstance(momentum, bool) or not isinstance(momentum, (int, float)):
        raise error_at(OpArgumentError, f"{layer}: momentum must be a float or a [1] float "
                                        f"Variable, got {type(momentum).__name__}")
    return {}, {"momentum": float(momentum)}


def _batch_norm(layer: str, input: Any, is_test: Any, momentum: Any, epsilon: float,
                param_attr: Any, bias_attr: Any, data_layout: str, name: str | None,
                moving_mean_name: str | None, moving_variance_name: str | None,
                use_global_stats: bool, final: bool) -> tuple[LayerHelper, Variable]:
    """The batch_norm op of a layer with its parameters and state: (its helper, Y)."""
    helper = LayerHelper(layer, name)
    x = _float_input(layer, input)
    if data_layout not in ("NCHW", "NHWC"):
        raise error_at(OpArgumentError, f"{layer}: data_layout must be 'NCHW' or 'NHWC', "
                                        f"got {data_layout!r}")
    if len(x.shape) < 2:
        raise error_at(ShapeError, f"{layer}: input {x.name}:{short_type(x.desc)} needs a "
                                   f"batch and a channel dim")
    c = x.shape[1] if data_layout == "NCHW" or len(x.shape) == 2 else x.shape[-1]
    if c < 0:
        raise error_at(ShapeError, f"{layer}: input {x.name}:{short_type(x.desc)} has an "
                                   f"unknown channel count")
    extra, attrs = _momentum(layer, momentum)
    pattr = helper.param_attr(param_attr, "param_attr")
    battr = helper.param_attr(bias_attr, "bias_attr")
    if pattr is None or battr is None:
        raise error_at(OpArgumentError, f"{layer} always has a scale and a bias; "
                                        f"param_attr=False / bias_attr=False are not allowed")
    helper.context = f" (input {x.name}:{short_type(x.desc)})"
    scale = helper.create_parameter(pattr, [c], x.dtype, default_initializer=Constant(1.0))
    bias = helper.create_parameter(battr, [c], x.dtype, is_bias=True)
    mean = _state_var(helper, moving_mean_name, [c], x.dtype, 0.0)
    variance = _state_var(helper, moving_variance_name, [c], x.dtype, 1.0)
    attrs.update({"epsilon": float(epsilon), "data_layout": data_layout,
                  "use_global_stats": bool(use_global_stats)})
    _mode_attr(attrs, is_test, layer)
    outs = helper.append("batch_norm", {"X": x, "Scale": scale, "Bias": bias, "Mean": mean,
                                        "Variance": variance, **extra}, attrs,
                         outputs={"MeanOut": [mean.name], "VarianceOut": [variance.name]},
                         final=final)
    return helper, outs["Y"][0]


_ABN_ACTS = (None, "identity", "leaky_relu", "elu")


def inplace_abn(input: Variable, act: str | None = None, is_test: bool | None = None,
                momentum: float | Variable = 0.9, epsilon: float = 1e-5,
                param_attr: Any = None, bias_attr: Any = None, data_layout: str = "NCHW",
                name: str | None = None, moving_mean_name: str | None = None,
                moving_variance_name: str | None = None,
                do_model_average_for_mean_and_var: bool = True,
                use_global_stats: bool = False, act_alpha: float = 1.0) -> Variable:
    """Batch normalisation followed by an activation, as Paddle's in-place activated
    batch norm computes it: ``act`` is None / ``'identity'`` (none), ``'leaky_relu'``
    (slope ``act_alpha`` below 0) or ``'elu'`` (``act_alpha * (exp(x) - 1)`` below 0).
    Everything else, parameters and state included, is batch_norm's. Paddle's saving of
    memory by working in place is the planner's business here (it reuses buffers)."""
    if act not in _ABN_ACTS:
        raise error_at(OpArgumentError, f"inplace_abn: act must be None, 'identity', "
                                        f"'leaky_relu' or 'elu', got {act!r}")
    if isinstance(act_alpha, bool) or not isinstance(act_alpha, (int, float)):
        raise error_at(OpArgumentError, f"inplace_abn: act_alpha must be a number, got "
                                        f"{act_alpha!r}")
    plain = act in (None, "identity")
    helper, y = _batch_norm("inplace_abn", input, is_test, momentum, epsilon, param_attr,
                            bias_attr, data_layout, name, moving_mean_name,
                            moving_variance_name, use_global_stats, final=plain)
    if plain:
        return y
    return helper.append_one(str(act), {"X": y}, {"alpha": float(act_alpha)})


def layer_norm(input: Variable, scale: bool = True, shift: bool = True,
               begin_norm_axis: int = 1, epsilon: float = 1e-5, param_attr: Any = None,
               bias_attr: Any = None, act: str | None = None,
               name: str | None = None) -> Variable:
    """Layer normalisation: each sample's values from ``begin_norm_axis`` on are
    normalised by their own mean and variance, then ``* scale + bias``.

    Shapes: input ``[d_0, ..., d_{r-1}]`` -> output of the same shape; with ``D =
    d_{begin_norm_axis} * ... * d_{r-1}`` the parameters are ``scale [D]`` (starts at 1,
    none when ``scale=False``) and ``bias [D]`` (starts at 0, none when ``shift=False``).
    """
    layer = "layer_norm"
    helper = LayerHelper(layer, name)
    x = _float_input(layer, input)
    rank = len(x.shape)
    if not _is_int(begin_norm_axis) or not 1 <= begin_norm_axis < rank:
        raise error_at(OpArgumentError, f"layer_norm: begin_norm_axis must be an int in [1, "
                                        f"{rank - 1}] for input {x.name}:{short_type(x.desc)},"
                                        f" got {begin_norm_axis!r}")
    inner = x.shape[begin_norm_axis:]
    if any(d < 0 for d in inner):
        raise error_at(ShapeError, f"layer_norm: input {x.name}:{short_type(x.desc)} has "
                                   f"unknown dims from begin_norm_axis={begin_norm_axis} on")
    d = prod(inner)
    helper.context = f" (input {x.name}:{short_type(x.desc)})"
    inputs: dict[str, Any] = {"X": x}
    if scale:
        pattr = helper.param_attr(param_attr, "param_attr")
        if pattr is not None:
            inputs["Scale"] = helper.create_parameter(pattr, [d], x.dtype,
                                                      default_initializer=Constant(1.0))
    if shift:
        battr = helper.param_attr(bias_attr, "bias_attr")
        if battr is not None:
            inputs["Bias"] = helper.create_parameter(battr, [d], x.dtype, is_bias=True)
    outs = helper.append(layer, inputs, {"begin_norm_axis": begin_norm_axis,
                                         "epsilon": float(epsilon)}, final=act is None)
    return helper.activation(outs["Y"][0], act)


_IMPLEMENTATIONS = ("downgrade_in_infer", "upscale_in_train")


def dropout(x: Variable, dropout_prob: float, is_test: bool | None = None,
            seed: int | None = None, name: str | None = None,
            dropout_implementation: str = "downgrade_in_infer") -> Variable:
    """Randomly zero elements with probability ``dropout_prob`` while training.

    Shapes: ``x`` -> output of the same shape (the op's 0/1 ``Mask`` is a temporary).
    ``'downgrade_in_infer'`` (Paddle's default) keeps the kept values as they are in
    training and scales by ``1 - dropout_prob`` at inference; ``'upscale_in_train'``
    divides the kept values by ``1 - dropout_prob`` in training and is the identity at
    inference. ``is_test=None`` lets the runtime decide; ``seed`` gives this layer its own
    reproducible random stream.
    """
    layer = "dropout"
    x = _float_input(layer, x, "x")
    p = dropout_prob
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 <= p <= 1.0:
        raise error_at(OpArgumentError, f"dropout: dropout_prob must be a number in [0, 1], "
                                        f"got {dropout_prob!r}")
    if dropout_implementation not in _IMPLEMENTATIONS:
        raise error_at(OpArgumentError, f"dropout: dropout_implementation must be one of "
                                        f"{', '.join(map(repr, _IMPLEMENTATIONS))}, got "
                                        f"{dropout_implementation!r}")
    if seed is not None and not _is_int(seed):
        raise error_at(OpArgumentError, f"dropout: seed must be an int or None, got {seed!r}")
    attrs: dict[str, Any] = {"dropout_prob": float(p),
                             "dropout_implementation": dropout_implementation,
                             "fix_seed": seed is not None, "seed": int(seed or 0)}
    _mode_attr(attrs, is_test, layer)
    helper = LayerHelper(layer, name)
    return helper.append(layer, {"X": x}, attrs)["Out"][0]


def embedding(input: Variable, size: Sequence[int], is_sparse: bool = False,
              is_distributed: bool = False, padding_idx: int | None = None,
              param_attr: Any = None, dtype: str = "float32") -> Variable:
    """Look up rows of a learnt table (op ``lookup_table``).

    Shapes: ``input`` int64 ids ``[..., 1]``; table ``W [vocab, dim]`` (``size``, Xavier by
    default); output ``[..., dim]``. Ids equal to ``padding_idx`` (negative counts from the
    end) give zero rows and leave their table row untouched.

    The table's gradient is dense by default. With ``is_sparse=True`` it is rows only: a
    `fluid.SelectedRows` holding the ids the batch looked up (``rows``), their gradient
    rows (``values``) and the table's height, so a step costs what its rows cost
    (docs/sparse.md). ``padding_idx`` lookups are left out of the rows.
    ``is_distributed=True`` keeps the table on the parameter servers; its gradient is
    rows only too.
    """
    layer = "embedding"
    helper = LayerHelper(layer)
    ids = as_variable(input, "embedding input")
    if ids.dtype not in INT_DTYPES:
        raise error_at(OpArgumentError, f"embedding: input {ids.name} is {ids.dtype}; ids "
                                        f"must be int64 (declare them with dtype='int64')")
    if not ids.shape or ids.shape[-1] != 1:
        raise error_at(ShapeError, f"embedding: input {ids.name}:{short_type(ids.desc)} must "
                                   f"end in a dim of 1 ([..., 1]); declare the ids with "
                                   f"shape=[1] per position")
    if not isinstance(size, (list, tuple)) or len(size) != 2 or not all(
            _is_int(v) and v > 0 for v in size):
        raise error_at(OpArgumentError, f"embedding: size must be [vocab_size, dim], got "
                                        f"{size!r}")
    vocab = size[0]
    if padding_idx is None:
        pad = -1
    elif not _is_int(padding_idx) or not -vocab <= padding_idx < vocab:
        raise error_at(OpArgumentError, f"embedding: padding_idx must be None or an int in "
                                        f"[{-vocab}, {vocab - 1}], got {padding_idx!r}")
    else:
        pad = padding_idx % vocab
    pattr = helper.param_attr(param_attr, "param_attr")
    if pattr is None:
        raise error_at(OpArgumentError, "embedding needs a table; param_attr=False is not "
                                        "allowed")
    w = helper.create_parameter(pattr, list(size), canonical_dtype(dtype))
    return helper.append_one("lookup_table", {"W": w, "Ids": ids},
                             {"padding_idx": pad, "is_sparse": bool(is_sparse),
                              "is_distributed": bool(is_distributed)})


def one_hot(input: Variable, depth: int, allow_out_of_range: bool = False) -> Variable:
    """One-hot rows: int ids ``[..., 1]`` -> float32 ``[..., depth]``. An id outside
    ``[0, depth)`` is an error, or a zero row with ``allow_out_of_range``. No gradient."""
    if not _is_int(depth) or depth < 1:
        raise error_at(OpArgumentError, f"one_hot: depth must be a positive int, got {depth!r}")
    return append_simple("one_hot", {"X": input},
                         {"depth": depth, "allow_out_of_range": bool(allow_out_of_range)})


def gelu(x: Variable, approximate: bool = False, name: str | None = None) -> Variable:
    """``x * Phi(x)`` elementwise (Phi the standard normal CDF); ``approximate`` uses
    ``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))``. Same shape as ``x``."""
    return append_simple("gelu", {"X": _float_input("gelu", x, "x")},
                         {"approximate": bool(approximate)}, name=name)


def elu(x: Variable, alpha: float = 1.0, name: str | None = None) -> Variable:
    """``x if x > 0 else alpha * (exp(x) - 1)`` elementwise. Same shape as ``x``."""
    return append_simple("elu", {"X": _float_input("elu", x, "x")}, {"alpha": float(alpha)},
                         name=name)


def swish(x: Variable, beta: float = 1.0, name: str | None = None) -> Variable:
    """``x * sigmoid(beta * x)`` elementwise. Same shape as ``x``."""
    return append_simple("swish", {"X": _float_input("swish", x, "x")}, {"beta": float(beta)},
                         name=name)


def flatten(x: Variable, axis: int = 1, name: str | None = None) -> Variable:
    """Reshape to 2-D: ``[d_0 * ... * d_{axis-1}, d_axis * ... * d_{r-1}]`` (``axis`` in
    ``[0, rank]``; 0 gives ``[1, all]``). A view: no copy is made."""
    x = as_variable(x, "flatten x")
    if not _is_int(axis) or not 0 <= axis <= len(x.shape):
        raise error_at(OpArgumentError, f"flatten: axis must be an int in [0, {len(x.shape)}] "
                                        f"for x {x.name}:{short_type(x.desc)}, got {axis!r}")
    return append_simple("flatten", {"X": x}, {"axis": axis}, name=name)


def pad(x: Variable, paddings: Sequence[int], pad_value: float = 0.0,
        name: str | None = None) -> Variable:
    """Pad with ``pad_value``: ``paddings = [before_0, after_0, before_1, after_1, ...]``,
    two per dim; dim i grows by ``before_i + after_i``."""
    x = as_variable(x, "pad x")
    pads = list(paddings) if isinstance(paddings, (list, tuple)) else None
    if pads is None or len(pads) != 2 * len(x.shape) or not all(_is_int(p) and p >= 0
                                                                for p in pads):
        raise error_at(OpArgumentError, f"pad: paddings must be {2 * len(x.shape)} "
                                        f"non-negative ints (before and after each dim of x "
                                        f"{x.name}:{short_type(x.desc)}), got {paddings!r}")
    return append_simple("pad", {"X": x}, {"paddings": pads, "pad_value": float(pad_value)},
                         name=name)


__all__ = ["batch_norm", "inplace_abn", "layer_norm", "dropout", "embedding", "one_hot",
           "gelu", "elu", "swish", "flatten", "pad"]
