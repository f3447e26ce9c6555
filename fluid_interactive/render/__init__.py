"""DOT text for programs, blocks and the trainer/pserver split; SVG when the graphviz `dot`
binary exists. Imports only `ir`.

    program_to_dot(program, methods=None, forward_only=False, collapse_grads=False,
                   show_global=True, legend=True, *, detail="layers", expand=None,
                   stack_methods=False) -> str
    block_to_dot(program, block, ...) -> str
    split_to_dot({"trainer": p0, "pserver0": p1}, [("trainer", "w@GRAD", "pserver0", "w@GRAD")])
    layer_drawings(program, methods=None) -> [(node id, label, dot)]   # what each box opens into
    dot_to_svg(dot_text) -> str | None        # None without graphviz
    dots_to_svgs([dot_text, ...]) -> [str] | None
    has_dot() -> bool

``detail="layers"`` (the default) draws one node per layer (see `groups`), ``"ops"`` one
node per op. Every drawing, the difference of two programs (`diff_dot`) included, writes its
DOT through one builder (`builder`), which quotes and escapes whatever comes from a program.
"""
from .dot import DETAILS, block_to_dot, program_to_dot, split_to_dot
from .expansions import layer_drawings
from .style import OP_STYLES, VAR_STYLES, op_kind
from .svg import DotError, dot_to_svg, dots_to_svgs, has_dot

__all__ = ["program_to_dot", "block_to_dot", "split_to_dot", "layer_drawings", "dot_to_svg",
           "dots_to_svgs", "has_dot", "DotError", "DETAILS", "OP_STYLES", "VAR_STYLES",
           "op_kind"]
