"""The sparse paths of the update ops: a gradient of kind ``selected_rows`` (a
`SelectedRows`, ops/lookup_table.py).

Every path first merges duplicate ids (`merge_rows`: each row's parts summed in the order
the batch looked them up, as a dense gradient's scatter-add sums them), then computes
with the very arithmetic of the dense update, so it gives the dense update's values bit
for bit wherever it is exact:

* rows only, exact: ``sgd`` and ``adagrad`` change nothing outside the gradient's rows
  (a zero gradient leaves a row as it was), so updating the listed rows *is* the dense
  update;
* rows only, by choice: ``adam`` with ``lazy_mode`` updates the moments and the
  parameter of the batch's rows alone (the other rows' moments do not decay that step);
* every row, exact: ``adam`` without ``lazy_mode`` decays every row's moments and moves
  every row, as dense Adam on the dense gradient does, at the cost of the whole table.

Rows-only paths write the rows into the table and its state in place, noting what they
held in the plan's `RowJournal` (ops/row_journal.py); without a journal they make new
arrays. The other update ops (momentum, rmsprop, ...) decay every row, and are handed the
gradient densified (ops/apply.py).
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..ir.records import SELECTED_ROWS
from ..util.selected_rows import SelectedRows, merge_rows
from .row_journal import RowJournal
from .spec import KernelContext


def merged(xp: Any, grad: SelectedRows) -> tuple[Any, Any]:
    """(unique rows, summed values) of a rows-only gradient."""
    return merge_rows(xp, grad.rows, grad.values)


def _writable(array: Any) -> bool:
    flags = getattr(array, "flags", None)
    return bool(getattr(flags, "writeable", True))


def rows_target(journal: RowJournal | None, array: Any, rows: Any) -> tuple[Any, Any]:
    """(the array to write rows ``rows`` into, what those rows hold now). With a journal,
    that is ``array`` itself (its rows noted first), or a copy when ``array`` is read-only
    (a checkpoint's memory map); without one, always a copy, so the caller's array never
    changes."""
    if journal is None or not _writable(array):
        array = array.copy()
        if journal is None:
            return array, array[rows]
    journal.note(array, rows)
    return array, journal.records[-1].values


def sparse_kernel(dense: Callable[[KernelContext], Callable],
                  sparse: Callable[[KernelContext], Callable],
                  slot: str = "Grad") -> Callable[[KernelContext], Callable]:
    """A kernel factory taking ``sparse``'s kernel when ``slot`` holds rows only."""
    def kernel(ctx: KernelContext) -> Callable:
        return sparse(ctx) if ctx.input(slot).kind == SELECTED_ROWS else dense(ctx)
    return kernel


def rows_in_place(*pairs: tuple[str, str], when: Callable[[Mapping[str, Any]], bool]
                  = lambda attrs: True, slot: str = "Grad"
                  ) -> Callable[[Mapping[str, Any], Mapping[str, str]],
                                tuple[tuple[str, str], ...]]:
    """`OpSpec.row_writes` of an update whose sparse path writes ``pairs`` by rows when
    ``slot`` holds rows only and ``when(attrs)``."""
    def row_writes(attrs: Mapping[str, Any], kinds: Mapping[str, str]
                   ) -> tuple[tuple[str, str], ...]:
        return pairs if kinds.get(slot) == SELECTED_ROWS and when(attrs) else ()
    return row_writes


# --- sgd ------------------------------------------------------------------------------------

def sparse_sgd(sgd_update: Callable) -> Callable[[KernelContext], Callable]:
    """Param[r] -= lr * Grad[r] for the merged rows r (``sgd_update``: the dense step)."""
    def kernel(ctx: KernelContext) -> Callable:
        xp, journal = ctx.xp, ctx.state.journal

        def sgd_rows(param, grad, lr):
            rows, values = merged(xp, grad)
            out, old = rows_target(journal, param, rows)
            out[rows] = sgd_update(xp, old, values, lr, None, xp.empty_like(values))
            return out
        return sgd_rows
    return kernel


# --- adagrad --------------------------------------------------------------------------------

def sparse_adagrad(adagrad_update: Callable) -> Callable[[KernelContext], Callable]:
    """Moment[r] += Grad[r]^2; Param[r] -= lr * Grad[r] / (sqrt(Moment[r]) + eps)
    (``adagrad_update``: the dense step)."""
    def kernel(ctx: KernelContext) -> Callable:
        xp, journal = ctx.xp, ctx.state.journal
        eps = float(ctx.attrs["epsilon"])

        def adagrad_rows(param, grad, lr, moment):
            rows, values = merged(xp, grad)
            p_out, p_old = rows_target(journal, param, rows)
            m_out, m_old = rows_target(journal, moment, rows)
            p_rows, m_rows = adagrad_update(xp, eps, p_old, values, m_old, lr, None, None,
                                            xp.empty_like(values))
            p_out[rows], m_out[rows] = p_rows, m_rows
            return p_out, m_out
        return adagrad_rows
    return kernel


# --- adam -----------------------------------------------------------------------------------

def lazy(attrs: Mapping[str, Any]) -> bool:
    return bool(attrs.get("lazy_mode"))


class AdamArithmetic:
    """The dense Adam steps the sparse paths reuse (ops/optim.py)."""

    def __init__(self, update: Callable, direction: Callable, rate: Callable):
        self.update, self.direction, self.rate = update, direction, rate


def sparse_adam(dense: AdamArithmetic) -> Callable[[KernelContext], Callable]:
    """Adam on a rows-only gradient: lazily (the batch's rows) or exactly (every row)."""
    def kernel(ctx: KernelContext) -> Callable:
        xp = ctx.xp
        b1, b2 = float(ctx.attrs["beta1"]), float(ctx.attrs["beta2"])
        eps = float(ctx.attrs["epsilon"])
        rate_of = dense.rate(xp, ctx.input("Param").dtype)
        step = (_lazy_adam(xp, ctx.state.journal, dense.update, b1, b2, eps)
                if lazy(ctx.attrs) else _exact_adam(xp, dense.direction, b1, b2, eps))

        def adam_rows(param, grad, lr, m1, m2, b1p, b2p):
            rows, values = merged(xp, grad)
            rate = rate_of(lr, b1p, b2p)
            return step(param, rows, values, m1, m2, rate) + (xp.multiply(b1p, b1),
                                                              xp.multiply(b2p, b2))
        return adam_rows
    return kernel


def _lazy_adam(xp: Any, journal: RowJournal | None, adam_update: Callable, b1: float,
               b2: float, eps: float) -> Callable[..., tuple]:
    def lazy_rows(param, rows, values, m1, m2, rate):
        p_out, p_old = rows_target(journal, param, rows)
        m1_out, m1_old = rows_target(journal, m1, rows)
        m2_out, m2_old = rows_target(journal, m2, rows)
        new = adam_update(xp, b1, b2, eps, p_old, values, m1_old, m2_old, rate, None, None,
                          None, xp.empty_like(values))
        p_out[rows], m1_out[rows], m2_out[rows] = new
        return p_out, m1_out, m2_out
    return lazy_rows


def _exact_adam(xp: Any, adam_direction: Callable, b1: float, b2: float, eps: float
                ) -> Callable[..., tuple]:
    """Dense Adam's arithmetic without the dense gradient: outside the gradient's rows the
    dense update adds (1 - b) * 0 to each decayed moment, which changes nothing, so the
    moments are decayed everywhere and the gradient's terms added on its rows alone."""
    def every_row(param, rows, values, m1, m2, rate):
        m1n = xp.multiply(m1, b1)
        m1n[rows] = xp.add(m1n[rows], xp.multiply(values, 1.0 - b1))
        m2n = xp.multiply(m2, b2)
        square = xp.multiply(values, values)
        m2n[rows] = xp.add(m2n[rows], xp.multiply(square, 1.0 - b2, out=square))
        step = adam_direction(xp, eps, m1n, m2n, xp.empty_like(m1n))
        return xp.subtract(param, xp.multiply(step, rate, out=step)), m1n, m2n
    return every_row
