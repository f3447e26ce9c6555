"""Import rules of ONNX sequences as tensor arrays (`ops/tensor_array.py`), so that what
`export_array` writes comes back as the array ops it came from:

``SequenceEmpty``        ``create_array`` of its dtype
``SequenceAt``           ``read_from_array``
``SequenceLength``       ``lod_array_length``, reshaped to ONNX's 0-d length
``ConcatFromSequence``   ``tensor_array_to_tensor`` (``new_axis`` stacks)
``SequenceInsert``       without a position, ``write_to_array`` at the length (an append)

and two ``If`` forms the export writes for one op each:

- on ``I < SequenceLength(S)``: ``SequenceErase(S, I)`` then ``SequenceInsert`` of X at I,
  else ``SequenceInsert(S, X, I)``: that is ``write_to_array`` (element I set, or X
  appended when I is the length);
- on ``SequenceLength(S) == 0``: a Constant of zeros, else ``ConcatFromSequence(S)``: that
  is ``tensor_array_to_tensor``, whose kernel makes an empty array's tensor itself.

An insert at a position elsewhere moves the elements after it, and an erase on its own
shortens the sequence, which no array op does: both are an `OnnxError` naming the node.
"""
from __future__ import annotations

from .import_control import IF_FORMS
from .import_graph import Node, OnnxGraph
from .import_registry import NodeImport, import_rule
from .proto import dtype_from_onnx


def _index(n: NodeImport, value: str) -> str:
    """The 0-d position ``value`` as the int64 [1] index our array ops take."""
    var = n.replay.var(value, f"the position {n.node.label} reads")
    at = n.op("reshape", {"X": var}, {"shape": [1]}, name=f"{n.node.outputs[0]}.at")
    if n.dtype(at) == "int64":
        return at
    return n.op("cast", {"X": at}, {"out_dtype": "int64"}, name=f"{n.node.outputs[0]}.at64")


@import_rule("SequenceEmpty")
def _sequence_empty(n: NodeImport) -> None:
    dtype = n.attr("dtype")
    n.op("create_array", {}, {"dtype": "float32" if dtype is None else
                              dtype_from_onnx(int(dtype), n.node.label)})


@import_rule("SequenceAt")
def _sequence_at(n: NodeImport) -> None:
    n.op("read_from_array", {"X": n.var(0), "I": _index(n, n.input_name(1))}, {})


@import_rule("SequenceLength")
def _sequence_length(n: NodeImport) -> None:
    length = n.op("lod_array_length", {"X": n.var(0)}, {},
                  name=f"{n.node.outputs[0]}.length")
    n.op("reshape", {"X": length}, {"shape": []})


@import_rule("ConcatFromSequence")
def _concat_from_sequence(n: NodeImport) -> None:
    n.op("tensor_array_to_tensor", {"X": n.var(0)},
         {"axis": int(n.attr("axis")), "use_stack": bool(n.attr("new_axis", 0))})


@import_rule("SequenceInsert")
def _sequence_insert(n: NodeImport) -> None:
    if n.has_input(2):
        n.fail("inserts at a given position, which moves the elements after it; only an "
               "append (no position) or the If of an array write reads back as a tensor "
               "array op")
    array = n.var(0)
    at = n.op("lod_array_length", {"X": array}, {}, name=f"{n.node.outputs[0]}.at")
    n.op("write_to_array", {"X": n.var(1), "I": at, "Array": array}, {})


@import_rule("SequenceErase")
def _sequence_erase(n: NodeImport) -> None:
    n.fail("erases an element, which shortens the sequence: only the If of an array write "
           "(erase and insert at one position) reads back as a tensor array op")


# --- the If forms of one op ---------------------------------------------------------------

def _only(graph: OnnxGraph, op_type: str, count: int = 1) -> list[Node] | None:
    """The nodes of a branch that holds ``count`` nodes, the last of type ``op_type``
    giving its one output; None otherwise."""
    nodes = list(graph.nodes)
    if len(nodes) != count or graph.inputs or len(graph.outputs) != 1 or \
            nodes[-1].op_type != op_type or nodes[-1].outputs[:1] != graph.outputs:
        return None
    return nodes


def _producer(n: NodeImport, name: str, op_type: str) -> Node | None:
    node = n.replay.graph.producers().get(name)
    return node if node is not None and node.op_type == op_type else None


def _array_write(n: NodeImport) -> bool:
    """The If of ``write_to_array``: erase and insert at I when I < the length, else
    insert at I (the length)."""
    then = _only(n.attr("then_branch"), "SequenceInsert", 2)
    other = _only(n.attr("else_branch"), "SequenceInsert")
    less = _producer(n, n.input_name(0), "Less")
    if then is None or other is None or less is None:
        return False
    erase, insert = then
    array, x, at = (other[0].inputs + ["", "", ""])[:3]
    length = _producer(n, less.inputs[1], "SequenceLength")
    if erase.op_type != "SequenceErase" or erase.inputs != [array, at] or \
            insert.inputs != [erase.outputs[0], x, at] or less.inputs[0] != at or \
            length is None or length.inputs != [array] or not at:
        return False
    n.op("write_to_array", {"X": n.replay.var(x, "the element an array write writes"),
                            "I": _index(n, at),
                            "Array": n.replay.var(array, "the array an array write writes")},
         {})
    return True


def _array_to_tensor(n: NodeImport) -> bool:
    """The If of ``tensor_array_to_tensor``: zeros for an empty array, else the elements
    joined by ConcatFromSequence."""
    zeros = _only(n.attr("then_branch"), "Constant")
    joined = _only(n.attr("else_branch"), "ConcatFromSequence")
    empty = _producer(n, n.input_name(0), "Equal")
    if zeros is None or joined is None or empty is None:
        return False
    length = _producer(n, empty.inputs[0], "SequenceLength")
    concat = joined[0]
    none = n.replay.graph.constants.get(empty.inputs[1])
    if length is None or length.inputs != concat.inputs[:1] or none is None or \
            none.size != 1 or none.reshape(-1)[0] != 0:
        return False
    n.op("tensor_array_to_tensor",
         {"X": n.replay.var(concat.inputs[0], "the array a ConcatFromSequence joins")},
         {"axis": int(concat.attrs.get("axis", 0)),
          "use_stack": bool(concat.attrs.get("new_axis", 0))})
    return True


IF_FORMS.extend([_array_write, _array_to_tensor])
