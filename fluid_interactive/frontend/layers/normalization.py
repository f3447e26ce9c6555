"""The normalisation layers beside batch_norm and layer_norm: group_norm, instance_norm,
lrn, data_norm, spectral_norm and affine_channel."""
from __future__ import annotations

from math import prod
from typing import Any

from ...errors import OpArgumentError, ShapeError
from ...ir.text import short_type
from ..initializer import Constant, Normal
from ..param_attr import ParamAttr
from ..tracing import error_at
from ..variable import Variable
from .helpers import LayerHelper
from .norm import _float_input, _is_int, _state_var


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _layout(layer: str, what: str, value: Any) -> str:
    if value not in ("NCHW", "NHWC"):
        raise error_at(OpArgumentError, f"{layer}: {what} must be 'NCHW' or 'NHWC', got "
                                        f"{value!r}")
    return str(value)


def _channels(layer: str, x: Variable, layout: str) -> int:
    if len(x.shape) < 2:
        raise error_at(ShapeError, f"{layer}: input {x.name}:{short_type(x.desc)} needs a "
                                   f"batch and a channel dim")
    c = x.shape[-1] if layout == "NHWC" else x.shape[1]
    if c < 0:
        raise error_at(ShapeError, f"{layer}: input {x.name}:{short_type(x.desc)} has an "
                                   f"unknown channel count")
    return c


def group_norm(input: Variable, groups: int, epsilon: float = 1e-5, param_attr: Any = None,
               bias_attr: Any = None, act: str | None = None, data_layout: str = "NCHW",
               name: str | None = None) -> Variable:
    """Group normalisation: the channels of ``input`` ``[N, C, ...]`` (``data_layout=
    'NHWC'``: C last) fall into ``groups`` groups of ``C / groups``; each sample's group is
    normalised by its own mean and variance over those channels and all positions.

    As in Paddle 1.8, a scale ``[C]`` (starting at 1) exists only when ``param_attr`` is
    given (e.g. ``fluid.ParamAttr()`` or a name), and a bias ``[C]`` (at 0) only when
    ``bias_attr`` is; with neither the layer has no parameters. Output: input's shape.
    """
    layer = "group_norm"
    helper = LayerHelper(layer, name)
    x = _float_input(layer, input)
    layout = _layout(layer, "data_layout", data_layout)
    c = _channels(layer, x, layout)
    if not _is_int(groups) or not 1 <= groups <= c or c % groups:
        raise error_at(OpArgumentError, f"group_norm: groups must be a positive int dividing "
                                        f"the {c} channels of input {x.name}:"
                                        f"{short_type(x.desc)}, got {groups!r}")
    helper.context = f" (input {x.name}:{short_type(x.desc)})"
    inputs: dict[str, Any] = {"X": x}
    # Paddle 1.8 makes the scale and the bias only when their attrs are given
    pattr = helper.param_attr(param_attr, "param_attr") if param_attr else None
    battr = helper.param_attr(bias_attr, "bias_attr") if bias_attr else None
    if pattr is not None:
        inputs["Scale"] = helper.create_parameter(pattr, [c], x.dtype,
                                                  default_initializer=Constant(1.0))
    if battr is not None:
        inputs["Bias"] = helper.create_parameter(battr, [c], x.dtype, is_bias=True)
    y = helper.append(layer, inputs, {"epsilon": float(epsilon), "groups": groups,
                                      "data_layout": layout}, final=act is None)["Y"][0]
    return helper.activation(y, act)


def instance_norm(input: Variable, epsilon: float = 1e-5, param_attr: Any = None,
                  bias_attr: Any = None, name: str | None = None) -> Variable:
    """Instance normalisation: each sample's channel of ``input`` ``[N, C, ...]`` is
    normalised by its own mean and variance over its positions, then times a scale
    ``[C]`` (starts at 1) plus a bias ``[C]`` (at 0). Output: input's shape."""
    layer = "instance_norm"
    helper = LayerHelper(layer, name)
    x = _float_input(layer, input)
    c = _channels(layer, x, "NCHW")
    pattr = helper.param_attr(param_attr, "param_attr")
    battr = helper.param_attr(bias_attr, "bias_attr")
    if pattr is None or battr is None:
        raise error_at(OpArgumentError, "instance_norm always has a scale and a bias; "
                                        "param_attr=False / bias_attr=False are not allowed")
    helper.context = f" (input {x.name}:{short_type(x.desc)})"
    scale = helper.create_parameter(pattr, [c], x.dtype, default_initializer=Constant(1.0))
    bias = helper.create_parameter(battr, [c], x.dtype, is_bias=True)
    return helper.append(layer, {"X": x, "Scale": scale, "Bias": bias},
                         {"epsilon": float(epsilon)})["Y"][0]


def lrn(input: Variable, n: int = 5, k: float = 1.0, alpha: float = 1e-4, beta: float = 0.75,
        name: str | None = None, data_format: str = "NCHW") -> Variable:
    """Local response normalisation across channels of a 4-D image batch:
    ``out = x / (k + alpha * s)^beta`` with ``s`` the sum of ``x^2`` over the ``n``
    channels around each (those past the ends left out). Paddle's alpha multiplies the
    sum (PyTorch's local_response_norm divides it by n first)."""
    layer = "lrn"
    x = _float_input(layer, input)
    fmt = _layout(layer, "data_format", data_format)
    if len(x.shape) != 4:
        raise error_at(ShapeError, f"lrn: input {x.name}:{short_type(x.desc)} must be a 4-D "
                                   f"{fmt} image batch")
    if not _is_int(n) or n < 1:
        raise error_at(OpArgumentError, f"lrn: n must be a positive int, got {n!r}")
    for what, v in (("k", k), ("alpha", alpha), ("beta", beta)):
        if not _is_number(v):
            raise error_at(OpArgumentError, f"lrn: {what} must be a number, got {v!r}")
    helper = LayerHelper(layer, name)
    return helper.append(layer, {"X": x}, {"n": n, "k": float(k), "alpha": float(alpha),
                                           "beta": float(beta), "data_format": fmt})["Out"][0]


def affine_channel(x: Variable, scale: Variable | None = None, bias: Variable | None = None,
                   data_layout: str = "NCHW", name: str | None = None,
                   act: str | None = None) -> Variable:
    """``act(x * scale + bias)`` per channel of ``x`` ``[N, C, ...]`` (``'NHWC'``: C
    last), with ``scale`` and ``bias`` float Variables ``[C]`` (often a frozen batch
    norm's, folded)."""
    layer = "affine_channel"
    x = _float_input(layer, x, "x")
    layout = _layout(layer, "data_layout", data_layout)
    c = _channels(layer, x, layout)
    params = {}
    for what, v in (("scale", scale), ("bias", bias)):
        if v is None:
            raise error_at(OpArgumentError, f"affine_channel: {what} must be given, a float "
                                            f"Variable [C] = [{c}]")
        params[what] = _float_input(layer, v, what)
    helper = LayerHelper(layer, name)
    out = helper.append_one(layer, {"X": x, "Scale": params["scale"], "Bias": params["bias"]},
                            {"data_layout": layout}, final=act is None)
    return helper.activation(out, act)


def spectral_norm(weight: Variable, dim: int = 0, power_iters: int = 1, eps: float = 1e-12,
                  name: str | None = None) -> Variable:
    """``weight / sigma``, sigma the largest singular value of ``weight`` seen as a matrix
    ``[h, w]`` (``h`` its dim ``dim``, ``w`` the product of the others), estimated by
    ``power_iters`` rounds of power iteration from vectors ``u [h]`` and ``v [w]``.

    As in Paddle 1.8, u and v are non-trainable parameters drawn from Normal(0, 1) when
    the program compiles; each call iterates from them afresh and leaves them as they
    are. The gradient reaches ``weight`` only."""
    layer = "spectral_norm"
    w = _float_input(layer, weight, "weight")
    if not 2 <= len(w.shape) <= 5 or any(d < 0 for d in w.shape):
        raise error_at(ShapeError, f"spectral_norm: weight {w.name}:{short_type(w.desc)} "
                                   f"must have 2 to 5 known dims")
    if not _is_int(dim) or not 0 <= dim < len(w.shape):
        raise error_at(OpArgumentError, f"spectral_norm: dim must be an int in [0, "
                                        f"{len(w.shape) - 1}], got {dim!r}")
    if not _is_int(power_iters) or power_iters < 0:
        raise error_at(OpArgumentError, f"spectral_norm: power_iters must be a non-negative "
                                        f"int, got {power_iters!r}")
    if not isinstance(eps, float):
        raise error_at(OpArgumentError, f"spectral_norm: eps must be a float, got {eps!r}")
    helper = LayerHelper(layer, name)
    h = w.shape[dim]
    frozen = ParamAttr(initializer=Normal(0.0, 1.0), trainable=False)
    u = helper.create_parameter(frozen, [h], w.dtype)
    v = helper.create_parameter(frozen, [prod(w.shape) // h], w.dtype)
    return helper.append_one(layer, {"Weight": w, "U": u, "V": v},
                             {"dim": dim, "power_iters": power_iters, "eps": eps})


_STAT_DEFAULTS = (("batch_size", "batch_size", 1e4), ("batch_sum", "batch_sum", 0.0),
                  ("batch_square_sum", "batch_square", 1e4))


def data_norm(input: Variable, act: str | None = None, epsilon: float = 1e-5,
              param_attr: Any = None, data_layout: str = "NCHW", in_place: bool = False,
              name: str | None = None, moving_mean_name: str | None = None,
              moving_variance_name: str | None = None,
              do_model_average_for_mean_and_var: bool = True, slot_dim: int = -1,
              sync_stats: bool = False, summary_decay_rate: float = 0.9999999,
              enable_scale_and_shift: bool = False) -> Variable:
    """Normalisation by accumulated statistics, for sparse features: ``input [N, C]``
    becomes ``(x - batch_sum / batch_size) * sqrt(batch_size / batch_square_sum)`` per
    column (then ``* scale_w + bias`` with ``enable_scale_and_shift``).

    The statistics are persistable state ``[C]`` named ``<name>.batch_size``,
    ``.batch_sum`` and ``.batch_square_sum`` (``name`` defaults to ``'dn'``, as in Paddle,
    so unnamed data_norm layers share them), starting at 1e4, 0 and 1e4 or at the
    ``batch_size``, ``batch_sum`` and ``batch_square`` entries of a dict ``param_attr``.
    A training step adds the batch's statistics to ``summary_decay_rate`` times them. With
    ``slot_dim`` > 0 the columns are slots whose first value is a show count: a slot not
    shown gives zeros and is not counted. ``scale_w`` and ``bias`` (trainable, named
    ``<name>.scale_w`` / ``.bias``, from the dict's ``scale_w`` / ``bias`` or 1 and 0).
    """
    layer = "data_norm"
    x = _float_input(layer, input)
    _layout(layer, "data_layout", data_layout)
    if len(x.shape) != 2 or x.shape[1] < 0:
        raise error_at(ShapeError, f"data_norm: input {x.name}:{short_type(x.desc)} must be "
                                   f"2-D [N, C] with C known")
    if not _is_int(slot_dim) or (slot_dim > 0 and x.shape[1] % slot_dim):
        raise error_at(OpArgumentError, f"data_norm: slot_dim must be an int dividing the "
                                        f"{x.shape[1]} columns (or <= 0), got {slot_dim!r}")
    attrs = param_attr if isinstance(param_attr, dict) else {}
    helper = LayerHelper(layer)
    stem = helper.trace.names.prefix + (name or "dn")
    c = x.shape[1]
    inputs: dict[str, Any] = {"X": x}
    inputs.update({
        slot: _state_var(helper, f"{stem}.{suffix}", [c], x.dtype,
                         float(attrs.get(key, default)))
        for slot, (suffix, key, default) in zip(("BatchSize", "BatchSum", "BatchSquareSum"),
                                                _STAT_DEFAULTS)})
    if enable_scale_and_shift:
        for slot, default in (("scale_w", 1.0), ("bias", 0.0)):
            init = Constant(float(attrs.get(slot, default)))
            inputs[slot] = helper.create_parameter(ParamAttr(name=f"{stem}.{slot}",
                                                             initializer=init), [c], x.dtype)
    op_attrs = {"epsilon": float(epsilon), "slot_dim": slot_dim,
                "summary_decay_rate": float(summary_decay_rate),
                "enable_scale_and_shift": bool(enable_scale_and_shift),
                "data_layout": data_layout, "sync_stats": bool(sync_stats)}
    outputs = {f"{slot}Out": [inputs[slot].name] for slot in ("BatchSize", "BatchSum",
                                                              "BatchSquareSum")}
    y = helper.append(layer, inputs, op_attrs, outputs=outputs, final=act is None)["Y"][0]
    return helper.activation(y, act)


__all__ = ["group_norm", "instance_norm", "lrn", "affine_channel", "spectral_norm",
           "data_norm"]
