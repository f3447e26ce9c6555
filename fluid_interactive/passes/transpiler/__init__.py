"""The distribute transpiler: a pure pass from one training program to trainer programs
and parameter-server programs (DESIGN §3 Distributed; docs/distributed.md).

Steps, one module each: `roles` (which ops go where, from op roles alone), `slicing` (row
blocks), `placement` (which server gets a block), `layout` (the names both sides share),
`trainer` and `pserver` (the programs), `plan` (`transpile` and `TranspilePlan`).
"""
from ...ops import dist as _dist  # noqa: F401  (registers send / recv / barriers)
from .placement import SPLIT_METHODS, dispatch, endpoints_from, stable_hash
from .plan import Location, Piece, TranspilePlan, transpile
from .pserver import JointBlock, OptimizeBlock, PServerInfo, RowInit, ServedShard, TableBlock
from .slicing import VarBlock, slice_rows

__all__ = ["transpile", "TranspilePlan", "Piece", "Location", "PServerInfo",
           "OptimizeBlock", "JointBlock", "TableBlock", "ServedShard", "RowInit", "slice_rows",
           "VarBlock", "dispatch", "stable_hash", "endpoints_from", "SPLIT_METHODS"]
