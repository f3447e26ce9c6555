"""The compiled form of an elementwise chain: one loop nest over the output that reads
each element once, applies every member's scalar expression (`OpSpec.scalar`) in turn, and
writes the result once. The module text is generated per chain and readable::

    def chain(x, y0, out):
        for i0 in range(out.shape[0]):
            for i1 in range(out.shape[1]):
                h = x[i0, i1]
                h = h + y0[0, i1]  # elementwise_add
                h = h if h > C0 else (h if h != h else C0)  # relu
                out[i0, i1] = h
"""
from __future__ import annotations

import re
from collections.abc import Sequence

from .build import KernelSource, module_text


def chain_source(members: Sequence[tuple[str, str, bool]], rank: int,
                 side_shapes: Sequence[tuple[int, ...]], constants: Sequence[float],
                 dtype: str) -> KernelSource:
    """``members``: (op type, expression over ``x`` and ``y``, reads a side input) in
    order; ``side_shapes``: each side input's shape aligned to the output's rank (1 where
    it broadcasts); ``constants``: the values the expressions name ``C0``, ``C1``, ...;
    the arrays are of ``dtype``."""
    loops = [f"i{d}" for d in range(rank)]
    body = ["def chain(x, " + "".join(f"y{k}, " for k in range(len(side_shapes))) + "out):"]
    for d, var in enumerate(loops):
        body.append("    " * (d + 1) + f"for {var} in range(out.shape[{d}]):")
    pad = "    " * (rank + 1)
    body.append(f"{pad}h = x[{', '.join(loops)}]")
    side = iter(range(len(side_shapes)))
    for op_type, expr, has_side in members:
        if has_side:
            k = next(side)
            index = ", ".join("0" if n == 1 else loops[d]
                              for d, n in enumerate(side_shapes[k]))
            expr = re.sub(r"\by\b", f"y{k}[{index}]", expr)
        expr = re.sub(r"\bx\b", "h", expr)
        body.append(f"{pad}h = {expr}  # {op_type}")
    body.append(f"{pad}out[{', '.join(loops)}] = h")
    consts = [f"C{i} = np.{dtype}(float.fromhex({float(v).hex()!r}))"
              for i, v in enumerate(constants)]
    text = "import numpy as np\n\n" + "\n".join(consts) + "\n\n\n" + "\n".join(body) + "\n"
    args = (("array", dtype, rank),) * (1 + len(side_shapes) + 1)
    return KernelSource("chain", module_text(text, ["chain"]), "chain", args)
