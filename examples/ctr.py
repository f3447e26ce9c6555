"""Click-through prediction, Wide & Deep, with its tables on parameter servers.

    python examples/ctr.py
    fluid run examples/ctr.py --distributed main=train_step --trainers 2 --pservers 2

Each sample has 26 categorical slots and 13 dense features. A slot's values follow a Zipf
law; each (slot, value) is hashed to an int64 id, as CTR pipelines hash features, so the
ids are spread over the whole int64 range. The click probability is known: a logistic
model of a weight per (slot, value), a few pairwise interactions and the dense features,
so the best possible AUC on the test samples (the Bayes AUC: ranking by the true
probability) is known too.

The model: a wide part (one weight per id, a table of dim 1) plus a deep part (an
embedding of dim 8 per id, concatenated with the dense features, through two hidden
layers). Both tables are ``is_distributed=True`` embeddings: on parameter servers they are
kept in shards by ``id % servers``, each row made when its id is first seen, up to the
capacity ``size[0]``; trainers prefetch the rows of their batch and send back those rows'
gradients only.

Run as a script, it trains three ways on the same data and prints each one's test AUC
beside the Bayes AUC: one process, 2 trainers x 2 servers in sync mode, and the same in
async mode. Under ``fluid run ... --distributed`` each trainer reads its shard of the data
file and trainer 0 prints the AUC at the end. Sizes: ``CTR_SAMPLES`` (training samples,
default 60000), ``CTR_TEST`` (test samples, 10000), ``CTR_EPOCHS`` (1).
"""
from __future__ import annotations

import os
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "extension")]  # run from a checkout without installing

import fluid  # noqa: E402

SLOTS, DENSE = 26, 13
VALUES = 2000            # distinct values of a slot
CAPACITY = 2 ** 16       # rows each table may hold (size[0]): above the ids ever seen
EMBED = 8


# --- the data -----------------------------------------------------------------------------------

def hashed_id(slot: np.ndarray, value: np.ndarray) -> np.ndarray:
    """A (slot, value) feature as a 64-bit id (SplitMix64 of slot and value): any int64."""
    z = (slot.astype(np.uint64) << np.uint64(32)) + value.astype(np.uint64)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return (z ^ (z >> np.uint64(31))).view(np.int64)


class Truth:
    """The click model the data is drawn from (seeded, so every process agrees)."""

    def __init__(self, seed: int = 7):
        rng = np.random.default_rng(seed)
        self.weights = rng.normal(0.0, 0.6, size=(SLOTS, VALUES))
        self.dense = rng.normal(0.0, 0.4, size=DENSE)
        self.pairs = [(0, 1), (2, 3), (4, 5)]
        self.pair_weights = rng.normal(0.0, 0.8, size=(len(self.pairs), 16, 16))
        self.bias = -1.2

    def sample(self, n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray,
                                                 np.ndarray]:
        """(ids [n, 26, 1] int64, dense [n, 13], clicks [n, 1], true probabilities [n])."""
        rng = np.random.default_rng(seed)
        values = np.minimum(rng.zipf(1.3, size=(n, SLOTS)) - 1, VALUES - 1)
        dense = rng.normal(size=(n, DENSE)).astype(np.float32)
        logit = self.bias + self.weights[np.arange(SLOTS), values].sum(axis=1) * 0.5
        for k, (a, b) in enumerate(self.pairs):
            logit += self.pair_weights[k, values[:, a] % 16, values[:, b] % 16]
        logit += dense @ self.dense
        p = 1.0 / (1.0 + np.exp(-logit))
        clicks = (rng.uniform(size=n) < p).astype(np.float32)[:, None]
        ids = hashed_id(np.arange(SLOTS)[None, :], values)[..., None]
        return ids, dense, clicks, p


def auc(labels: np.ndarray, scores: np.ndarray) -> float:
    """The area under the ROC curve (ties count a half), by ranks."""
    labels = np.asarray(labels).ravel() > 0.5
    scores = np.asarray(scores, dtype=np.float64).ravel()
    order = np.argsort(scores, kind="mergesort")
    ranks = np.empty(scores.size)
    sorted_scores = scores[order]
    starts = np.r_[0, np.flatnonzero(np.diff(sorted_scores)) + 1]
    ends = np.r_[starts[1:], scores.size]
    ranks[order] = np.repeat((starts + ends + 1) / 2.0, ends - starts)
    pos = labels.sum()
    return float((ranks[labels].sum() - pos * (pos + 1) / 2) / (pos * (labels.size - pos)))


# --- the model ----------------------------------------------------------------------------------

class CTR(fluid.Program):
    """Wide & Deep over hashed ids, fed by arguments: ``slots`` ids and ``dense`` features
    a sample."""
    capacity = CAPACITY
    learning_rate = 0.05
    slots = SLOTS
    dense = DENSE

    def logit(self, ids, dense):
        wide = fluid.layers.embedding(ids, size=[self.capacity, 1], is_distributed=True,
                                      param_attr=fluid.ParamAttr(
                                          name="wide", initializer=fluid.initializer.Constant(0.0)))
        deep = fluid.layers.embedding(ids, size=[self.capacity, EMBED], is_distributed=True,
                                      param_attr=fluid.ParamAttr(
                                          name="deep",
                                          initializer=fluid.initializer.Normal(0.0, 0.05)))
        wide_part = fluid.layers.reduce_sum(wide, dim=1)                      # [B, 1]
        h = fluid.layers.concat([fluid.layers.reshape(deep, [-1, self.slots * EMBED]), dense],
                                axis=1)
        with fluid.var_scope("deep"):
            h = fluid.layers.fc(h, size=64, act="relu")
            h = fluid.layers.fc(h, size=32, act="relu")
            deep_part = fluid.layers.fc(h, size=1)
        return wide_part + deep_part

    def loss(self, ids, dense, click):
        cost = fluid.layers.sigmoid_cross_entropy_with_logits(self.logit(ids, dense), click)
        avg = fluid.layers.mean(cost)
        fluid.optimizer.Adagrad(learning_rate=self.learning_rate).minimize(avg)
        return avg

    @fluid.network("ids", "dense", "click")
    def train_step(self, ids, dense, click):
        ids = fluid.layers.data(name="ids", shape=[self.slots, 1], dtype="int64")
        dense = fluid.layers.data(name="dense", shape=[self.dense], dtype="float32")
        click = fluid.layers.data(name="click", shape=[1], dtype="float32")
        return self.loss(ids, dense, click)

    @fluid.network("ids", "dense")
    def predict(self, ids, dense):
        ids = fluid.layers.data(name="ids", shape=[self.slots, 1], dtype="int64")
        dense = fluid.layers.data(name="dense", shape=[self.dense], dtype="float32")
        return fluid.layers.sigmoid(self.logit(ids, dense))


class CTRFromFile(CTR):
    """The same model reading its batches from a RecordIO file (each trainer its shard)."""
    DATA = "./ctr.recordio"
    batch_size = 256
    epochs = 1

    @fluid.network()
    def train_step(self):
        reader = fluid.batch_reader(file=self.DATA, batch_size=self.batch_size,
                                    shape=[[self.slots, 1], [self.dense], [1]],
                                    dtype=["int64", "float32", "float32"],
                                    format="recordio", epochs=self.epochs, drop_last=True)
        ids, dense, click = reader.next_item()
        return self.loss(ids, dense, click)


# --- training -----------------------------------------------------------------------------------

def sizes() -> tuple[int, int, int]:
    return (int(os.environ.get("CTR_SAMPLES", 60_000)), int(os.environ.get("CTR_TEST", 10_000)),
            int(os.environ.get("CTR_EPOCHS", 1)))


def batches(data, batch: int, epochs: int):
    ids, dense, clicks, _ = data
    for _ in range(epochs):
        for start in range(0, len(ids) - batch + 1, batch):
            yield ids[start:start + batch], dense[start:start + batch], clicks[start:start + batch]


def train_and_score(program, data, test, batch: int, epochs: int) -> tuple[float, float]:
    """(the last 50 steps' mean loss, the test AUC) of ``program`` (one process or a
    distributed program) trained on ``data``."""
    losses = [program.train_step(*b) for b in batches(data, batch, epochs)]
    scores = np.concatenate([program.predict(test[0][i:i + 2000], test[1][i:i + 2000])
                             for i in range(0, len(test[0]), 2000)])
    return float(np.mean(losses[-50:])), auc(test[2], scores)


def compare(samples: int, test_n: int, epochs: int, batch: int = 256) -> dict[str, float]:
    """Train one process, then 2 trainers x 2 servers sync and async; the AUCs."""
    truth = Truth()
    data, test = truth.sample(samples, seed=1), truth.sample(test_n, seed=2)
    results = {"bayes": auc(test[2], test[3])}
    print(f"{samples} training samples, {test_n} test samples, {SLOTS} hashed slots + "
          f"{DENSE} dense features; Bayes AUC {results['bayes']:.4f}")
    # A compiled program's own table is dense and takes ids in [0, size[0]); hashed ids
    # need a table that makes rows as ids come: "local" is 1 trainer and 1 server.
    for name, trainers, pservers, mode in (("local", 1, 1, "sync"), ("sync", 2, 2, "sync"),
                                           ("async", 2, 2, "async")):
        plan = fluid.transpile(CTR().Compile(seed=0), trainers=trainers, pservers=pservers,
                               mode=mode)
        with fluid.distributed.launch(plan) as dist:
            loss, results[name] = train_and_score(dist, data, test, batch, epochs)
            live = sum(s[0] for ep in dist.table_stats().values() for s in ep.values())
        print(f"  {trainers} x {pservers} {mode:5s}  loss {loss:.4f}  AUC {results[name]:.4f}  "
              f"({live} table rows made on the servers)")
    return results


def run_job() -> None:
    """Under ``--distributed``: every role runs this; trainers read their shard."""
    samples, test_n, epochs = sizes()
    truth = Truth()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "ctr.recordio")
        ids, dense, clicks, _ = truth.sample(samples, seed=1)
        fluid.recordio.write_arrays(path, (ids, dense, clicks))
        ctr = CTRFromFile(DATA=path, epochs=epochs).Compile(seed=0)
        step = 0
        while True:
            try:
                loss = ctr.train_step()
            except fluid.EOFException:
                break
            if step % 50 == 0:
                print(f"step {step:4d}  loss {loss:.5f}", flush=True)
            step += 1
        test = truth.sample(test_n, seed=2)
        scores = ctr.predict(test[0], test[1])
        print(f"test AUC {auc(test[2], scores):.4f}  (Bayes AUC {auc(test[2], test[3]):.4f})")
        ctr.close()


def distributed_run() -> bool:
    return any(a == "--distributed" or a.startswith("--distributed=") for a in sys.argv) or \
        bool(os.environ.get("FLUID_DISTRIBUTED"))


if __name__ == "__main__":
    if distributed_run():
        run_job()
    else:
        compare(*sizes())
