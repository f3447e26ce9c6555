"""`fluid.clip`: gradient clipping, as Paddle 1.8 spells it.

Give a clip to an optimizer (``fluid.optimizer.Adam(1e-3, grad_clip=clip)``), or to some
parameters (``fluid.clip.set_gradient_clip(clip, param_list)`` inside the traced method,
before ``minimize``; or ``ParamAttr(gradient_clip=clip)``); an optimizer's own clip wins.

* `GradientClipByValue(max, min=-max)`: each gradient element into [min, max];
* `GradientClipByNorm(clip_norm)`: each gradient scaled by ``clip_norm / max(norm,
  clip_norm)``, its own L2 norm;
* `GradientClipByGlobalNorm(clip_norm)`: every gradient scaled by ``clip_norm /
  max(global_norm, clip_norm)``, the L2 norm of all the gradients together (per
  ``group_name`` when parameters carry their own clips);
* `ErrorClipByValue(max, min=-max)`: clips the gradient flowing back through one var
  (``var._set_error_clip(clip)``), before the ops that read it use it.

A rows-only gradient (``embedding(is_sparse=True)``) stays rows only, as in Paddle 1.8:
by value, its merged rows are clipped; by norm and by global norm, its norm is that of its
merged rows, and its rows are scaled.

Every clip takes ``need_clip``: a function of the parameter (a Variable) saying whether to
clip its gradient. The clip ops have role Optimize and the ``op_role_var`` of the
gradient they read (a global norm's ops read them all, and list every pair), so the
distribute transpiler places them: see docs/distributed.md.
"""
from __future__ import annotations

import warnings
import weakref
from collections.abc import Callable, Sequence
from numbers import Real
from typing import Any

from ..errors import OpArgumentError
from ..ir.records import SELECTED_ROWS, OpRole
from .tracing import TraceContext, current_trace, error_at
from .variable import Variable

__all__ = ["set_gradient_clip", "ErrorClipByValue", "GradientClipByValue",
           "GradientClipByNorm", "GradientClipByGlobalNorm", "GradientClipBase"]

#: per trace: parameter -> the clip set_gradient_clip gave it; var -> its error clip
_PARAM_CLIPS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_ERROR_CLIPS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _bound(value: Any, what: str) -> float:
    if not isinstance(value, Real) or isinstance(value, bool) or value != value:
        raise error_at(OpArgumentError, f"{what} must be a number, got {value!r}")
    return float(value)


def _min_max(cls: str, max: Any, min: Any) -> tuple[float, float]:
    high = _bound(max, f"{cls}(max=...)")
    low = -high if min is None else _bound(min, f"{cls}(min=...)")
    if low > high:
        raise error_at(OpArgumentError, f"{cls}: min ({low}) must not exceed max ({high})")
    return low, high


def _positive(value: Any, what: str) -> float:
    v = _bound(value, what)
    if not v > 0:
        raise error_at(OpArgumentError, f"{what} must be a positive number, got {value!r}")
    return v


class _Emit:
    """Appends the clip ops of one (param, grad) pair, or of several (``role_var`` lists
    every pair the op reads)."""

    def __init__(self, trace: TraceContext, role_var: tuple[str, ...]):
        self.trace, self.role_var = trace, role_var

    def __call__(self, type: str, inputs: dict[str, list[str]], hint: str,
                 attrs: dict | None = None) -> str:
        out = self.trace.unique_in_block(hint)
        self.trace.append_op(type, inputs, {"Out": [out]}, attrs, role=OpRole.OPTIMIZE,
                             role_var=self.role_var)
        return out


class GradientClipBase:
    """A gradient clip; ``need_clip(param)`` (a function of the parameter's Variable)
    says which gradients it clips (default: all)."""

    def __init__(self, need_clip: Callable[[Variable], bool] | None = None):
        if need_clip is not None and not callable(need_clip):
            raise error_at(OpArgumentError, f"need_clip must be a function of a parameter "
                                            f"returning True or False, got {need_clip!r}")
        self._need_clip_func = need_clip

    def _wanted(self, trace: TraceContext, pairs: Sequence[tuple[str, str]]
                ) -> list[tuple[str, str]]:
        if self._need_clip_func is None:
            return list(pairs)
        return [(p, g) for p, g in pairs if self._need_clip_func(Variable(trace, p))]

    def _static_clip(self, trace: TraceContext, pairs: Sequence[tuple[str, str]]
                     ) -> dict[str, str]:
        """Append the clip ops of ``pairs``; returns param -> its clipped gradient."""
        raise NotImplementedError


class GradientClipByValue(GradientClipBase):
    """Clips each gradient element into [min, max] (``min`` defaults to ``-max``)."""

    def __init__(self, max: float, min: float | None = None,
                 need_clip: Callable[[Variable], bool] | None = None):
        super().__init__(need_clip)
        self.min, self.max = _min_max("GradientClipByValue", max, min)

    def _static_clip(self, trace, pairs):
        return {p: _Emit(trace, (p, g))("clip", {"X": [g]}, f"{g}@CLIP",
                                        {"min": self.min, "max": self.max})
                for p, g in self._wanted(trace, pairs)}

    def __repr__(self) -> str:
        return f"GradientClipByValue(max={self.max}, min={self.min})"


def _scaled(emit: _Emit, squares: list[str], clip_norm: float, dtype: str, hint: str) -> str:
    """The scale ``clip_norm / max(sqrt(sum(squares)), clip_norm)``: 1 when the norm is
    within the bound."""
    total = squares[0] if len(squares) == 1 else emit("sum", {"X": squares}, f"{hint}_sq")
    norm = emit("sqrt", {"X": [total]}, f"{hint}_norm")
    bound = emit("fill_constant", {}, f"{hint}_max",
                 {"shape": [], "dtype": dtype, "value": clip_norm})
    larger = emit("elementwise_max", {"X": [norm], "Y": [bound]}, f"{hint}_larger")
    return emit("elementwise_div", {"X": [bound], "Y": [larger]}, f"{hint}_scale")


def _square_sum(emit: _Emit, g: str) -> str:
    x = g
    if emit.trace.type_of(g).kind == SELECTED_ROWS:   # rows only: the norm of its rows
        merged = emit("merge_selected_rows", {"X": [g]}, f"{g}@MERGED")
        x = emit("get_tensor_from_selected_rows", {"X": [merged]}, f"{g}@ROWS")
    return emit("reduce_sum", {"X": [emit("square", {"X": [x]}, f"{g}@CLIP_SQUARE")]},
                f"{g}@CLIP_SQUARE_SUM", {"reduce_all": True})


class GradientClipByNorm(GradientClipBase):
    """Scales each gradient whose L2 norm exceeds ``clip_norm`` down to that norm."""

    def __init__(self, clip_norm: float, need_clip: Callable[[Variable], bool] | None = None):
        super().__init__(need_clip)
        self.clip_norm = _positive(clip_norm, "GradientClipByNorm(clip_norm=...)")

    def _static_clip(self, trace, pairs):
        out = {}
        for p, g in self._wanted(trace, pairs):
            emit = _Emit(trace, (p, g))
            scale = _scaled(emit, [_square_sum(emit, g)], self.clip_norm,
                            trace.type_of(g).dtype, f"{g}@CLIP")
            out[p] = emit("elementwise_mul", {"X": [g], "Y": [scale]}, f"{g}@CLIP")
        return out

    def __repr__(self) -> str:
        return f"GradientClipByNorm(clip_norm={self.clip_norm})"


class GradientClipByGlobalNorm(GradientClipBase):
    """Scales every gradient by ``clip_norm / max(global_norm, clip_norm)``, where
    ``global_norm`` is the L2 norm of all the clipped gradients together."""

    def __init__(self, clip_norm: float, group_name: str = "default_group",
                 need_clip: Callable[[Variable], bool] | None = None):
        super().__init__(need_clip)
        self.clip_norm = _positive(clip_norm, "GradientClipByGlobalNorm(clip_norm=...)")
        if not isinstance(group_name, str):
            raise error_at(OpArgumentError, f"group_name must be a str, got {group_name!r}")
        self.group_name = group_name

    def _static_clip(self, trace, pairs):
        pairs = self._wanted(trace, pairs)
        if not pairs:
            return {}
        squares = [_square_sum(_Emit(trace, (p, g)), g) for p, g in pairs]
        joint = _Emit(trace, tuple(n for pair in pairs for n in pair))
        scale = _scaled(joint, squares, self.clip_norm, trace.type_of(pairs[0][1]).dtype,
                        trace.unique_in_block(f"{self.group_name}@GLOBAL_NORM"))
        return {p: _Emit(trace, (p, g))("elementwise_mul", {"X": [g], "Y": [scale]},
                                        f"{g}@CLIP") for p, g in pairs}

    def __repr__(self) -> str:
        return (f"GradientClipByGlobalNorm(clip_norm={self.clip_norm}, "
                f"group_name={self.group_name!r})")


class ErrorClipByValue:
    """Clips the gradient flowing back through one var into [min, max] (``min`` defaults
    to ``-max``): ``var._set_error_clip(ErrorClipByValue(1.0))`` before ``minimize``."""

    def __init__(self, max: float, min: float | None = None):
        self.min, self.max = _min_max("ErrorClipByValue", max, min)

    def __repr__(self) -> str:
        return f"ErrorClipByValue(max={self.max}, min={self.min})"


# --- what the optimizers call ----------------------------------------------------------------

def check_grad_clip(value: Any) -> GradientClipBase | None:
    """``value`` if it is a gradient clip (or None); anything else is an error at the
    user's line."""
    if value is None or isinstance(value, GradientClipBase):
        return value
    hint = (": that is an optimizer" if hasattr(value, "minimize") else
            ": ErrorClipByValue clips one var's gradient, see Variable._set_error_clip"
            if isinstance(value, ErrorClipByValue) else "")
    raise error_at(OpArgumentError, f"grad_clip must be a fluid.clip gradient clip "
                                    f"(GradientClipByValue, GradientClipByNorm or "
                                    f"GradientClipByGlobalNorm) or None, got {value!r}{hint}")


def _param_clip(trace: TraceContext, param: str) -> GradientClipBase | None:
    clip = _PARAM_CLIPS.get(trace, {}).get(param)
    if clip is None:
        attr = trace.param_attrs.get(param)
        clip = getattr(attr, "gradient_clip", None)
        check_grad_clip(clip)
    return clip


def clip_gradients(trace: TraceContext, pairs: Sequence[tuple[str, str]],
                   grad_clip: GradientClipBase | None) -> dict[str, str]:
    """Append the clip ops for ``pairs`` (sorted by parameter): ``grad_clip`` for all, or
    else each parameter's own clip (global norms per group name); returns param -> its
    clipped gradient for the parameters clipped."""
    own = {p: c for p, _ in pairs if (c := _param_clip(trace, p)) is not None}
    if grad_clip is not None:
        if own:
            warnings.warn("the optimizer's grad_clip is used; the clips set on parameters "
                          "(set_gradient_clip, ParamAttr(gradient_clip=...)) are not",
                          stacklevel=4)
        return grad_clip._static_clip(trace, pairs)
    groups: dict[Any, list[tuple[str, str]]] = {}
    clips: dict[Any, GradientClipBase] = {}
    for p, g in pairs:
        clip = own.get(p)
        if clip is None:
            continue
        key = ("global", clip.group_name) if isinstance(clip, GradientClipByGlobalNorm) \
            else ("own", p)
        first = clips.setdefault(key, clip)
        if isinstance(clip, GradientClipByGlobalNorm) and \
                isinstance(first, GradientClipByGlobalNorm) and first.clip_norm != clip.clip_norm:
            raise error_at(OpArgumentError,
                           f"the parameters of global-norm group {clip.group_name!r} have "
                           f"clips of different clip_norm ({first.clip_norm} and "
                           f"{clip.clip_norm}); give one group one clip_norm")
        groups.setdefault(key, []).append((p, g))
    out: dict[str, str] = {}
    for key, members in groups.items():
        out.update(clips[key]._static_clip(trace, members))
    return out


def set_gradient_clip(clip: GradientClipBase, param_list: Sequence[Any] | None = None,
                      program: Any = None) -> None:
    """Clip the gradients of ``param_list`` (Variables or names; default: every parameter
    of the program so far) with ``clip``, unless the optimizer has its own ``grad_clip``.
    Call it in the traced method, after the layers and before ``minimize``."""
    trace = current_trace("fluid.clip.set_gradient_clip")
    if not isinstance(clip, GradientClipBase):
        check_grad_clip(clip)
        raise error_at(OpArgumentError, f"clip must be a fluid.clip gradient clip, got "
                                        f"{clip!r}")
    if program is not None:
        raise error_at(OpArgumentError, "set_gradient_clip: program has no meaning here (it "
                                        "clips in the program being traced); leave it out")
    if any(op.role & OpRole.OPTIMIZE for op in trace.block.ops):
        warnings.warn("set_gradient_clip after minimize clips nothing in this method: call "
                      "it before minimize", stacklevel=2)
    if param_list is None:
        names = [n for n, v in trace.program.global_block().vars.items() if v.is_parameter]
    else:
        names = [p if isinstance(p, str) else str(getattr(p, "name", p)) for p in param_list]
    clips = _PARAM_CLIPS.setdefault(trace, {})
    for name in names:
        var = trace.find(name) if isinstance(name, str) else None
        if var is None or not var.is_parameter:
            raise error_at(OpArgumentError, f"set_gradient_clip: param_list names {name!r}, "
                                            f"which is not a parameter of this program")
        clips[name] = clip


def set_error_clip(trace: TraceContext, var: str, clip: ErrorClipByValue) -> None:
    """Record ``clip`` for the gradient of ``var`` (`Variable._set_error_clip`)."""
    if not isinstance(clip, ErrorClipByValue):
        raise error_at(OpArgumentError, f"an error clip must be a "
                                        f"fluid.clip.ErrorClipByValue, got {clip!r}")
    _ERROR_CLIPS.setdefault(trace, {})[var] = clip


def append_error_clips(trace: TraceContext, grads: dict[str, str]) -> None:
    """After a backward pass: clip the gradient of each var with an error clip right after
    the op that completes it (role Backward), and let the ops after read the clipped one."""
    block = trace.block
    for var, clip in _ERROR_CLIPS.get(trace, {}).items():
        g = grads.get(var)
        if g is None:
            continue
        at = max(i for i, op in enumerate(block.ops) if g in op.output_names())
        out = trace.unique_in_block(f"{g}@ERROR_CLIP")
        op = trace.append_op("clip", {"X": [g]}, {"Out": [out]},
                             {"min": clip.min, "max": clip.max}, role=OpRole.BACKWARD)
        block.ops.pop()
        block.ops.insert(at + 1, op)
        for later in block.ops[at + 2:]:
            later.inputs = {s: [out if n == g else n for n in ns] for s, ns in later.inputs.items()}
        grads[var] = out


ClipByValue = GradientClipByValue
ClipByNorm = GradientClipByNorm
ClipByGlobalNorm = GradientClipByGlobalNorm
