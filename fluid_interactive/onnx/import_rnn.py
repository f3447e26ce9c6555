"""Import rules of ONNX ``LSTM`` and ``GRU`` nodes (as ``torch.onnx.export`` writes
``nn.LSTM`` and ``nn.GRU``): each direction becomes an fc-style projection (``mul`` plus
``elementwise_add``, weights [I, 4H] / [I, 3H]) and one ``lstm`` / ``gru`` op.

The node's W, R, B (and P) must be initializers: they are split per direction, their gates
reordered to ours, and declared as new parameters named after them (``<W>.fw``,
``<R>.bw``, ...), starting at the file's values, so the imported model fine-tunes like any
other program. ONNX's GRU keeps the old state by its update gate, as our
``origin_mode=True``; ``linear_before_reset`` maps to the op attr of that name, with the
candidate's recurrent bias inside the reset as the op's Bias. R's gate rows, transposed,
are [W_ur | W_c]; the gru op's Weight holds them in Paddle's layout (`ops/gru.py`).

PyTorch writes a zero initial state as ``ConstantOfShape`` of a shape computed from the
input (Shape, Gather, Unsqueeze, Concat); `drop_zero_initial_states` reads those as "no
initial state" (ours start at zero) and removes the shape arithmetic before the graph is
replayed; `require_fixed_weights` says up front when W, R or B are computed by other nodes,
which the import does not read. A W that only reorders the gates (this package's export of
an op whose input comes projected; for a GRU, also negating the update gate of
``origin_mode=False``) adds no projection: the op takes the input as it is.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import OnnxError
from ..ops.gru import weight_from_blocks
from .import_graph import GRAPH_REWRITES
from .import_registry import NodeImport, import_rule

_ACTS = {"Sigmoid": "sigmoid", "Tanh": "tanh", "Relu": "relu"}
#: For each of our LSTM gate blocks (c~, i, f, o), the ONNX block (i, o, f, c) it is.
_LSTM_FROM_ONNX = (3, 0, 2, 1)
_DIRECTIONS = {"forward": (False,), "reverse": (True,), "bidirectional": (False, True)}


def _rows(blocks: tuple[int, ...], h: int) -> list[int]:
    return [r for k in blocks for r in range(k * h, (k + 1) * h)]


def _static(n: NodeImport, i: int, what: str) -> np.ndarray | None:
    if not n.has_input(i):
        return None
    value = n.static(i)
    if value is None:
        n.fail(f"needs its {what} (input {i}) as an initializer")
    return value


def _weight(n: NodeImport, i: int, what: str) -> np.ndarray:
    value = _static(n, i, what)
    if value is None:
        n.fail(f"has no {what} (input {i})")
    assert value is not None
    return value


def _check_attrs(n: NodeImport) -> tuple[int, list[bool], list[str]]:
    for name in ("clip", "activation_alpha", "activation_beta"):
        if n.attr(name) is not None:
            n.fail(f"has the attribute {name}, which the import does not support")
    if int(n.attr("input_forget", 0)):
        n.fail("couples the input and forget gates (input_forget=1), which the import does "
               "not support")
    direction = n.attr("direction", "forward")
    if direction not in _DIRECTIONS:
        n.fail(f"has direction={direction!r}")
    reverses = list(_DIRECTIONS[direction])
    per_dir = 3 if n.node.op_type == "LSTM" else 2
    acts = n.attr("activations") or (["Sigmoid", "Tanh", "Tanh"][:per_dir] * len(reverses))
    unknown = sorted({a for a in acts if a not in _ACTS})
    if unknown:
        n.fail(f"uses the activations {unknown}; the import knows {', '.join(_ACTS)}")
    return int(n.attr("hidden_size")), reverses, [_ACTS[a] for a in acts]


def _batch_major(n: NodeImport) -> str:
    """The input as [B, T, I]: taken from before PyTorch's Transpose where there is one."""
    if int(n.attr("layout", 0)) == 1:
        return n.var(0)
    producer = n.replay.graph.producers().get(n.input_name(0))
    if producer is not None and producer.op_type == "Transpose" and \
            list(producer.attrs.get("perm", [])) == [1, 0, 2]:
        return n.replay.var(producer.inputs[0], f"the input of {producer.label}")
    return n.op("transpose", {"X": n.var(0)}, {"axis": [1, 0, 2]}, name=f"{_stem(n)}.x")


def _stem(n: NodeImport) -> str:
    return next(o for o in n.node.outputs if o)


def _state(n: NodeImport, i: int, d: int, dirs: int) -> str | None:
    """Initial state input ``i`` [dirs, B, H] for direction ``d``, as [B, H]."""
    if not n.has_input(i):
        return None
    s = n.var(i)
    if dirs > 1:
        s = n.op("slice", {"X": s}, {"axes": [0], "starts": [d], "ends": [d + 1]},
                 name=f"{_stem(n)}.state{i}_{d}")
    return n.op("squeeze", {"X": s}, {"axes": [0]}, name=f"{_stem(n)}.state{i}_{d}")


def _lengths(n: NodeImport) -> str | None:
    if not n.has_input(4):
        return None
    return n.op("cast", {"X": n.var(4)}, {"out_dtype": "int64"}, name=f"{_stem(n)}.lengths")


def _project(n: NodeImport, x: str, w: np.ndarray, bias: np.ndarray, tag: str) -> str:
    """x [B, T, I] @ w [I, G] + bias [G], as fc records it."""
    names = n.input_name(1), n.input_name(3) if n.has_input(3) else n.input_name(1) + ".b"
    wv = n.replay.declare_state(f"{names[0]}.{tag}", w, parameter=True)
    bv = n.replay.declare_state(f"{names[1]}.{tag}", bias.astype(w.dtype), parameter=True)
    stem = f"{_stem(n)}.{tag}"
    product = n.op("mul", {"X": x, "Y": wv}, {"x_num_col_dims": 2, "y_num_col_dims": 1},
                   name=f"{stem}.proj")
    return n.op("elementwise_add", {"X": product, "Y": bv}, {"axis": 2}, name=f"{stem}.gates")


def _outputs(n: NodeImport, seqs: list[tuple[str, bool]], lengths: str | None,
             out: int) -> None:
    """Bind node output ``out`` from each direction's [B, T, H] sequence: 0 is Y
    [T, dirs, B, H], 1 and 2 the last state [dirs, B, H] (the last valid step of a forward
    run, position 0 of a reversed one)."""
    readers = {i for node in n.replay.graph.nodes for i in node.inputs} | \
        set(n.replay.graph.outputs)
    if out >= len(n.node.outputs) or n.node.outputs[out] not in readers:
        return
    stem, parts = f"{n.node.outputs[out]}", []
    for k, (seq, reverse) in enumerate(seqs):
        if out == 0:
            t = n.op("transpose", {"X": seq}, {"axis": [1, 0, 2]}, name=f"{stem}.tm{k}")
            parts.append(n.op("unsqueeze", {"X": t}, {"axes": [1]}, name=f"{stem}.d{k}"))
        else:
            inputs: dict[str, str | list[str]] = {"X": seq}
            if lengths is not None:
                inputs["Lengths"] = lengths
            last = n.op("sequence_pool", inputs, {"pooltype": "FIRST" if reverse else "LAST"},
                        name=f"{stem}.last{k}")
            parts.append(n.op("unsqueeze", {"X": last}, {"axes": [0]}, name=f"{stem}.d{k}"))
    if len(parts) == 1:
        n.op("assign", {"X": parts[0]}, {}, out=out)
    else:
        n.op("concat", {"X": parts}, {"axis": 1 if out == 0 else 0}, out=out)


@import_rule("LSTM")
def _lstm(n: NodeImport) -> None:
    h, reverses, acts = _check_attrs(n)
    w, r = _weight(n, 1, "input weight W"), _weight(n, 2, "recurrent weight R")
    bias = _static(n, 3, "bias B")
    peep = _static(n, 7, "peephole weights P")
    x, lengths = _batch_major(n), _lengths(n)
    rows = _rows(_LSTM_FROM_ONNX, h)
    hiddens, cells = [], []
    for d, reverse in enumerate(reverses):
        tag = _tag(reverse, len(reverses))
        b = np.zeros(8 * h, w.dtype) if bias is None else bias[d]
        gate_w, gate_b = w[d][rows].T, (b[:4 * h] + b[4 * h:])[rows]
        direct = np.array_equal(gate_w, np.eye(4 * h))   # the input comes projected
        gates = x if direct else _project(n, x, gate_w.copy(), gate_b, tag)
        weight = n.replay.declare_state(f"{n.input_name(2)}.{tag}", r[d][rows].T.copy(),
                                        parameter=True)
        inputs: dict[str, Any] = {"Input": gates, "Weight": weight,
                                  "H0": _state(n, 5, d, len(reverses)),
                                  "C0": _state(n, 6, d, len(reverses)), "Lengths": lengths}
        parts = [gate_b if direct else np.zeros(4 * h, w.dtype)]
        if peep is not None:   # ONNX's i, o, f -> our W_ic, W_fc, W_oc after the bias
            p = peep[d].reshape(3, h)
            parts += [p[0], p[2], p[1]]
        if peep is not None or (direct and bias is not None):
            source = n.input_name(3) if direct and bias is not None else n.input_name(7)
            inputs["Bias"] = n.replay.declare_state(
                f"{source}.{tag}", np.concatenate(parts).astype(w.dtype)[None], parameter=True)
        attrs = {"use_peepholes": peep is not None, "is_reverse": reverse,
                 "gate_activation": acts[3 * d], "candidate_activation": acts[3 * d + 1],
                 "cell_activation": acts[3 * d + 2]}
        hidden = n.op("lstm", {k: v for k, v in inputs.items() if v is not None}, attrs,
                      name=f"{_stem(n)}.{tag}.hidden")
        cell = n.replay.trace.block.ops[-1].output("Cell")[0]
        hiddens.append((hidden, reverse))
        cells.append((cell, reverse))
    for out, seqs in ((0, hiddens), (1, hiddens), (2, cells)):
        _outputs(n, seqs, lengths, out)


def _tag(reverse: bool, dirs: int) -> str:
    return "bw" if reverse and dirs > 1 else ("rev" if reverse else "fw")


def _gru_signs(w: np.ndarray, b: np.ndarray, h: int, lbr: bool,
               gate_act: str) -> np.ndarray | None:
    """When input weight W only negates the update gate or nothing (this package's export
    of an input that comes projected: negated for ``origin_mode=False``, whose update gate
    is 1 - ONNX's with a sigmoid), the sign of each gate column; None otherwise (or when the
    candidate has an input bias outside the reset, which our linear_before_reset lacks)."""
    signs = np.diag(w) if w.shape == (3 * h, 3 * h) else np.zeros(0)
    if not signs.size or not np.array_equal(w, np.diag(signs)) or \
            not np.array_equal(signs[h:], np.ones(2 * h)) or \
            not (np.all(signs[:h] == 1) or (np.all(signs[:h] == -1) and gate_act == "sigmoid")):
        return None
    if lbr and b[2 * h:3 * h].any():
        return None
    return signs


@import_rule("GRU")
def _gru(n: NodeImport) -> None:
    h, reverses, acts = _check_attrs(n)
    w, r = _weight(n, 1, "input weight W"), _weight(n, 2, "recurrent weight R")
    bias = _static(n, 3, "bias B")
    lbr = bool(int(n.attr("linear_before_reset", 0)))
    x, lengths = _batch_major(n), _lengths(n)
    hiddens = []
    for d, reverse in enumerate(reverses):
        tag = _tag(reverse, len(reverses))
        b = np.zeros(6 * h, w.dtype) if bias is None else bias[d]
        signs = _gru_signs(w[d], b, h, lbr, acts[2 * d])
        if signs is not None:   # the input comes projected: the op as it was
            inputs, origin = _gru_direct(n, x, r[d], b, signs, tag, bias is not None), \
                bool(signs[0] > 0)
        else:
            inputs, origin = _gru_projected(n, x, w[d], r[d], b, lbr, tag), True
        inputs.update({"H0": _state(n, 5, d, len(reverses)), "Lengths": lengths})
        attrs = {"is_reverse": reverse, "origin_mode": origin, "linear_before_reset": lbr,
                 "gate_activation": acts[2 * d], "activation": acts[2 * d + 1]}
        hiddens.append((n.op("gru", {k: v for k, v in inputs.items() if v is not None},
                             attrs, name=f"{_stem(n)}.{tag}.hidden"), reverse))
    for out in (0, 1):
        _outputs(n, hiddens, lengths, out)


def _gru_direct(n: NodeImport, x: str, r: np.ndarray, b: np.ndarray, signs: np.ndarray,
                tag: str, has_bias: bool) -> dict[str, Any]:
    """Weight and Bias of a gru taking the input as it is, the update gate's signs undone
    (its input and recurrent biases summed: ours adds the candidate's inside the reset
    with linear_before_reset, where ONNX's input bias there is zero)."""
    h = r.shape[1]
    inputs: dict[str, Any] = {"Input": x, "Weight": n.replay.declare_state(
        f"{n.input_name(2)}.{tag}", weight_from_blocks((r.T * signs).astype(r.dtype)),
        parameter=True)}
    if has_bias:
        total = (b[:3 * h] + b[3 * h:]) * signs
        inputs["Bias"] = n.replay.declare_state(f"{n.input_name(3)}.{tag}",
                                                total.astype(r.dtype)[None], parameter=True)
    return inputs


def _gru_projected(n: NodeImport, x: str, w: np.ndarray, r: np.ndarray, b: np.ndarray,
                   lbr: bool, tag: str) -> dict[str, Any]:
    """Inputs of a gru (origin_mode) after a projection by W with the input biases (and
    the recurrent ones outside the reset)."""
    h = r.shape[1]
    inside = np.concatenate([np.zeros(2 * h, w.dtype), b[5 * h:]]) if lbr else None
    outside = b[:3 * h] + b[3 * h:] - (0 if inside is None else inside)
    inputs: dict[str, Any] = {
        "Input": _project(n, x, w.T.copy(), outside, tag),
        "Weight": n.replay.declare_state(f"{n.input_name(2)}.{tag}", weight_from_blocks(r.T),
                                         parameter=True)}
    if inside is not None:
        inputs["Bias"] = n.replay.declare_state(f"{n.input_name(3)}.{tag}.inside",
                                                inside[None], parameter=True)
    return inputs


# --- PyTorch's zero initial states ----------------------------------------------------------

def _is_zero_fill(node: Any) -> bool:
    if node.op_type != "ConstantOfShape":
        return False
    from .proto import onnx_module
    for attr in node.attribute:
        if attr.name == "value":
            return not onnx_module().numpy_helper.to_array(attr.t).any()
    return True        # no value: zeros


def drop_zero_initial_states(graph: Any) -> None:
    """Blank the initial-state inputs of RNN nodes that a zero ``ConstantOfShape`` fills,
    and remove the nodes that only computed them."""
    producers = {o: node for node in graph.node for o in node.output}
    dropped = []
    for node in graph.node:
        if node.op_type not in ("LSTM", "GRU"):
            continue
        for i in (5, 6):
            if i < len(node.input) and node.input[i] and \
                    _is_zero_fill(producers.get(node.input[i], _NONE)):
                dropped.append(producers[node.input[i]])
                node.input[i] = ""
    _remove_dead(graph, dropped)


class _NoNode:
    op_type = ""


_NONE = _NoNode()


def _remove_dead(graph: Any, candidates: list) -> None:
    """Remove the candidates and the nodes feeding them, while nothing else reads them."""
    stack = list(candidates)
    while stack:
        node = stack.pop()
        read = {i for other in graph.node for i in other.input} | \
            {o.name for o in graph.output}
        if node not in graph.node or any(o in read for o in node.output if o):
            continue
        graph.node.remove(node)
        producers = {o: other for other in graph.node for o in other.output}
        stack.extend(producers[i] for i in node.input if i in producers)


_WEIGHTS = {1: "input weight W", 2: "recurrent weight R", 3: "bias B", 7: "peephole weights P"}


def require_fixed_weights(graph: Any) -> None:
    """An RNN node's weights must be initializers (or Constants): checked before any node
    is replayed, so the error names the cause rather than a node computing them."""
    fixed = {t.name for t in graph.initializer} | \
        {o for node in graph.node if node.op_type == "Constant" for o in node.output}
    for node in graph.node:
        if node.op_type not in ("LSTM", "GRU"):
            continue
        for i, what in _WEIGHTS.items():
            if i < len(node.input) and node.input[i] and node.input[i] not in fixed:
                raise OnnxError(
                    f"ONNX {node.op_type} node {node.name[:80]!r} needs its {what} (input "
                    f"{i}) as an initializer, as PyTorch's and fluid_interactive's exports "
                    f"have it; here other nodes compute it")


GRAPH_REWRITES.extend([drop_zero_initial_states, require_fixed_weights])
