"""Speech and handwriting recognition: the CTC loss, greedy CTC decoding and the edit
distance of decoded sequences, over padded batches.

Paddle 1.8 took LoD sequences, or padded ones with lengths; here every sequence input is
padded, ``[B, T, ...]``, with its lengths (int64 ``[B]``) in Paddle's own parameters
(``input_length``, ``label_length``). Left out, every row is full length. One difference:
Paddle's padded ``warpctc`` took time-major logits ``[T, B, C]``; here they are batch-major
``[B, T, C]`` like every sequence layer (``fluid.layers.transpose(x, [1, 0, 2])`` converts).
"""
from __future__ import annotations

from ...errors import ShapeError
from ...ir.text import short_type
from ..tracing import error_at
from ..variable import Variable
from .helpers import LayerHelper
from .loss_checks import FLOATS, INTS, flag, int_list, integer, optional_var, var_of

__all__ = ["warpctc", "ctc_greedy_decoder", "edit_distance"]


def _both(layer: str, a: Variable | None, b: Variable | None, names: tuple[str, str]) -> None:
    if (a is None) != (b is None):
        raise error_at(ShapeError, f"{layer}: give both {names[0]} and {names[1]}, or "
                                   f"neither (then every row is full length)")


def _sequences(layer: str, v: Variable, what: str, rank: int) -> None:
    if len(v.shape) != rank:
        shape = "[B, T, C]" if rank == 3 else "[B, T]"
        raise error_at(ShapeError, f"{layer}: {what} {v.name}:{short_type(v.desc)} must be a "
                                   f"padded batch {shape}")


def warpctc(input: Variable, label: Variable, blank: int = 0, norm_by_times: bool = False,
            input_length: Variable | None = None,
            label_length: Variable | None = None) -> Variable:
    """The CTC loss ``[B, 1]``: ``-log p(label | input)`` summed over every alignment of
    each label sequence with the frames, blanks allowed between and around its symbols.

    ``input`` ``[B, T, C]`` holds unnormalised class scores (the softmax is applied
    inside), with ``C`` counting the ``blank`` class; ``label`` ``[B, L]`` (int32 or int64)
    the padded label sequences; ``input_length`` and ``label_length`` (int64 ``[B]``, both
    or neither) their lengths. A label that cannot fit its frames gives loss 0 and no
    gradient. ``norm_by_times`` divides the gradient (not the loss) by each row's frame
    count, as Paddle does."""
    layer = "warpctc"
    x = var_of(layer, input, "input", FLOATS)
    lab = var_of(layer, label, "label", INTS)
    _sequences(layer, x, "input", 3)
    _sequences(layer, lab, "label", 2)
    n = optional_var(layer, input_length, "input_length", INTS)
    m = optional_var(layer, label_length, "label_length", INTS)
    _both(layer, n, m, ("input_length", "label_length"))
    attrs = {"blank": integer(layer, "blank", blank, minimum=0),
             "norm_by_times": flag(layer, "norm_by_times", norm_by_times)}
    helper = LayerHelper(layer)
    outs = helper.append(layer, {"Logits": x, "Label": lab, "LogitsLength": n,
                                 "LabelLength": m}, attrs,
                         outputs={"Alpha": [helper.tmp()], "Loss": [helper.out_name()]},
                         final=False)
    return outs["Loss"][0]


def ctc_greedy_decoder(input: Variable, blank: int, input_length: Variable | None = None,
                       padding_value: int = 0, name: str | None = None
                       ) -> Variable | tuple[Variable, Variable]:
    """Greedy CTC decoding of class probabilities ``input`` ``[B, T, C]``: the best class of
    each frame, repeats merged, ``blank`` dropped. Returns the decoded sequences ``[B, T]``
    (int64, ``padding_value`` after each row's labels) and, when ``input_length`` (int64
    ``[B]``) is given, their lengths ``[B, 1]`` too."""
    layer = "ctc_greedy_decoder"
    x = var_of(layer, input, "input", FLOATS)
    _sequences(layer, x, "input", 3)
    n = optional_var(layer, input_length, "input_length", INTS)
    attrs = {"blank": integer(layer, "blank", blank, minimum=0), "merge_repeated": True,
             "padding_value": integer(layer, "padding_value", padding_value)}
    helper = LayerHelper(layer, name)
    best = helper.append_one("argmax", {"X": x}, {"axis": 2}, final=False)
    outputs = {"Output": [helper.out_name()]}
    if n is not None:
        outputs["OutputLength"] = [helper.tmp()]
    outs = helper.append("ctc_align", {"Input": best, "InputLength": n}, attrs,
                         outputs=outputs, final=False)
    if n is None:
        return outs["Output"][0]
    return outs["Output"][0], outs["OutputLength"][0]


def edit_distance(input: Variable, label: Variable, normalized: bool = True,
                  ignored_tokens: list[int] | None = None,
                  input_length: Variable | None = None,
                  label_length: Variable | None = None) -> tuple[Variable, Variable]:
    """The Levenshtein distance ``[B, 1]`` (float32) from each hypothesis ``input`` to its
    reference ``label`` (int64 ``[B, T]``, with ``input_length`` and ``label_length``, both
    or neither): insertions, deletions and substitutions, divided by the reference's
    length when ``normalized``. ``ignored_tokens`` are taken out of both first. Returns
    ``(distance, sequence_num)``, the latter the number of rows (0-d int64)."""
    layer = "edit_distance"
    hyps = var_of(layer, input, "input", ("int64",))
    refs = var_of(layer, label, "label", ("int64",))
    _sequences(layer, hyps, "input", 2)
    _sequences(layer, refs, "label", 2)
    m = optional_var(layer, input_length, "input_length", INTS)
    n = optional_var(layer, label_length, "label_length", INTS)
    _both(layer, m, n, ("input_length", "label_length"))
    attrs = {"normalized": flag(layer, "normalized", normalized),
             "ignored_tokens": int_list(layer, "ignored_tokens", ignored_tokens)}
    helper = LayerHelper(layer)
    outs = helper.append(layer, {"Hyps": hyps, "Refs": refs, "HypsLength": m,
                                 "RefsLength": n}, attrs, final=True)
    return outs["Out"][0], outs["SequenceNum"][0]
