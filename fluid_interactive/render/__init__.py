"""DOT text for programs, blocks and the trainer/pserver split; SVG when the graphviz `dot`
binary exists. Imports only `ir`.

    program_to_dot(program, methods=None, forward_only=False, collapse_grads=False,
                   show_global=True, legend=True) -> str
    block_to_dot(program, block, ...) -> str
    split_to_dot({"trainer": p0, "pserver0": p1}, [("trainer", "w@GRAD", "pserver0", "w@GRAD")])
    dot_to_svg(dot_text) -> str | None        # None without graphviz
    has_dot() -> bool
"""
from .dot import block_to_dot, program_to_dot, split_to_dot
from .style import OP_STYLES, VAR_STYLES, op_kind
from .svg import DotError, dot_to_svg, has_dot

__all__ = ["program_to_dot", "block_to_dot", "split_to_dot", "dot_to_svg", "has_dot",
           "DotError", "OP_STYLES", "VAR_STYLES", "op_kind"]
