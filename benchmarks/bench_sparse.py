"""Sparse embeddings: what a training step costs when the table's gradient is rows only
(``embedding(is_sparse=True)``), in sections, each a function printing its figures:

* `local_scaling`: one process, SGD; the sparse step at V = 1,000,000 against the dense
  step at the same V (target <= 0.2x) and against the sparse step at V = 100,000 (target
  <= 1.2x: a step costs its rows, not the table);
* `against_torch`: the same model and data in PyTorch, ``nn.Embedding(sparse=True)`` with
  ``optim.SGD``, and with ``optim.SparseAdam`` against fluid's ``Adam(lazy_mode=True)``
  (target <= 1.0x PyTorch's step).

The model: a batch of B ids looks up rows of a V x 32 table, a linear layer maps each row
to a prediction, the loss is the mean squared error. Times are CPU time of the calling
thread (one BLAS / intra-op thread for both frameworks), medians of interleaved blocks,
so the ratios hold under load. Run:

    python benchmarks/bench_sparse.py [--quick]
"""
from __future__ import annotations

import gc
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE), os.path.join(os.path.dirname(HERE), "extension")]

from collections.abc import Callable  # noqa: E402

from _timing import interleaved_us  # noqa: E402

import fluid  # noqa: E402

DIM = 32
BATCH = 1024
BIG, SMALL = 1_000_000, 100_000


def batches(vocab: int, count: int = 16, seed: int = 0) -> list[tuple[np.ndarray, np.ndarray]]:
    """``count`` batches of BATCH ids (uniform over the table, some repeated) and targets."""
    rng = np.random.default_rng(seed)
    return [(rng.integers(0, vocab, (BATCH, 1)).astype(np.int64),
             rng.standard_normal((BATCH, 1)).astype(np.float32)) for _ in range(count)]


def fluid_program(vocab: int, sparse: bool, optimizer: Callable[[], object]
                  ) -> fluid.CompiledProgram:
    class Embed(fluid.Program):
        @fluid.network("ids", "y")
        def train_step(self, ids, y):
            ids = fluid.layers.data(name="ids", shape=[1], dtype="int64")
            y = fluid.layers.data(name="y", shape=[1], dtype="float32")
            e = fluid.layers.embedding(ids, size=[vocab, DIM], is_sparse=sparse,
                                       param_attr=fluid.ParamAttr(
                                           name="table",
                                           initializer=fluid.initializer.Uniform(-0.05, 0.05)))
            p = fluid.layers.fc(e, size=1)
            loss = fluid.layers.mean(fluid.layers.square_error_cost(p, y))
            optimizer().minimize(loss)
            return loss
    return Embed().Compile(seed=0)


def stepper(step: Callable[[np.ndarray, np.ndarray], object], data: list) -> Callable[[], None]:
    """A call that runs one step on the next batch (cycling)."""
    state = {"i": 0}

    def one() -> None:
        ids, y = data[state["i"] % len(data)]
        state["i"] += 1
        step(ids, y)
    return one


def load() -> str:
    return f"load {os.getloadavg()[0]:.1f} ({os.cpu_count() or 1} cores)"


# --- section: one process, SGD ----------------------------------------------------------------

def local_scaling(rounds: int = 7, calls: int = 20) -> dict[str, float]:
    """us per SGD step: sparse at V=1e6 and 1e5, dense at V=1e6; prints the ratios."""
    sgd = lambda: fluid.optimizer.SGD(0.1)  # noqa: E731
    big, small = batches(BIG), batches(SMALL)
    remembered = fluid_program(BIG, True, sgd)
    remembered.keep_history()   # as in a notebook: each step keeps the rows it overwrote
    contenders = {
        "sparse_1M": stepper(fluid_program(BIG, True, sgd).train_step, big),
        "sparse_100k": stepper(fluid_program(SMALL, True, sgd).train_step, small),
        "sparse_1M_history": stepper(remembered.train_step, big),
        "dense_1M": stepper(fluid_program(BIG, False, sgd).train_step, big),
    }
    # the dense step is ~1000x dearer: time it in blocks of its own size
    sparse = interleaved_us({k: v for k, v in contenders.items() if k != "dense_1M"},
                            calls=calls * 10, rounds=rounds, clock=time.thread_time)
    dense = interleaved_us({"dense_1M": contenders["dense_1M"]}, calls=max(2, calls // 4),
                           rounds=rounds, clock=time.thread_time)
    us = {**sparse, **dense}
    print(f"[local] V x {DIM}, batch {BATCH}, SGD, {load()}")
    print(f"  sparse step V=1M   {us['sparse_1M']:10.1f} us")
    print(f"  sparse step V=100k {us['sparse_100k']:10.1f} us")
    print(f"  sparse step V=1M, history on {us['sparse_1M_history']:10.1f} us "
          f"({remembered.history.nbytes / len(remembered.history) / 1024:.0f} KiB kept per "
          f"step)")
    print(f"  dense  step V=1M   {us['dense_1M']:10.1f} us")
    print(f"  sparse/dense at 1M:      {us['sparse_1M'] / us['dense_1M']:.4f}x (target <= 0.2)")
    print(f"  sparse 1M / sparse 100k: {us['sparse_1M'] / us['sparse_100k']:.3f}x "
          f"(target <= 1.2)")
    del contenders
    gc.collect()
    return us


# --- section: against PyTorch's sparse embeddings ---------------------------------------------

def torch_step(vocab: int, adam: bool) -> Callable[[np.ndarray, np.ndarray], None]:
    import torch
    torch.manual_seed(0)
    emb = torch.nn.Embedding(vocab, DIM, sparse=True)
    lin = torch.nn.Linear(DIM, 1)
    with torch.no_grad():
        emb.weight.uniform_(-0.05, 0.05)
    if adam:
        opts = [torch.optim.SparseAdam(list(emb.parameters()), lr=1e-3),
                torch.optim.Adam(list(lin.parameters()), lr=1e-3)]
    else:
        opts = [torch.optim.SGD(list(emb.parameters()) + list(lin.parameters()), lr=0.1)]

    def step(ids: np.ndarray, y: np.ndarray) -> None:
        for o in opts:
            o.zero_grad()
        pred = lin(emb(torch.from_numpy(ids[:, 0])))
        loss = torch.mean((pred - torch.from_numpy(y)) ** 2)
        loss.backward()
        for o in opts:
            o.step()
        loss.item()
    return step


def against_torch(rounds: int = 7, calls: int = 200, vocab: int = BIG) -> dict[str, float]:
    """us per step, fluid against PyTorch on the same model and data: SGD, and lazy Adam
    against SparseAdam."""
    try:
        import torch
    except ImportError:
        print("[torch] PyTorch is not installed: skipped")
        return {}
    torch.set_num_threads(1)
    data = batches(vocab)
    us: dict[str, float] = {}
    pairs = {"sgd": (lambda: fluid.optimizer.SGD(0.1), False),
             "adam": (lambda: fluid.optimizer.Adam(1e-3, lazy_mode=True), True)}
    print(f"[torch] V={vocab} x {DIM}, batch {BATCH}, torch {torch.__version__}, {load()}")
    for name, (opt, adam) in pairs.items():
        mine = stepper(fluid_program(vocab, True, opt).train_step, data)
        theirs = stepper(torch_step(vocab, adam), data)
        got = interleaved_us({"fluid": mine, "torch": theirs}, calls=calls, rounds=rounds,
                             clock=time.thread_time)
        label = "SGD" if name == "sgd" else "Adam(lazy_mode) / SparseAdam"
        print(f"  {label:30s} fluid {got['fluid']:8.1f} us, torch {got['torch']:8.1f} us: "
              f"{got['fluid'] / got['torch']:.3f}x (target <= 1.0)")
        us.update({f"fluid_{name}": got["fluid"], f"torch_{name}": got["torch"]})
        del mine, theirs
        gc.collect()
    return us


def main() -> None:
    quick = "--quick" in sys.argv
    fluid.set_threads(1)
    local_scaling(rounds=3 if quick else 7, calls=4 if quick else 20)
    against_torch(rounds=3 if quick else 7, calls=20 if quick else 200)


if __name__ == "__main__":
    main()
