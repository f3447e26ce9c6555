"""Tables on parameter servers (is_sparse / is_distributed embeddings): the trainer program
prefetches rows and never holds the table, sync training equals one process, rows are made
as ids are first seen up to the capacity, inference reads zeros for unknown ids, and
checkpoints open as one process or on any number of servers."""
import numpy as np
import pytest
from distributed.table_nets import Wide, table_batches

import fluid
from fluid_interactive.distributed import launch, transpile
from fluid_interactive.distributed.table_store import TableFull
from fluid_interactive.errors import KernelError, ProgramDefinitionError
from fluid_interactive.ir.text import format_program

TOL = 1e-5


def wide(**options):
    return Wide(**options).Compile(seed=0)


def reference_for(dist, single, table="emb"):
    """Give the one-process program the rows the servers start from (they draw each
    row alone when it is first used)."""
    first = dist.table_first_rows(table, np.arange(single.get_var(table).shape[0]))
    for name, rows in first.items():
        single.set_var(name, rows)


# --- the programs ---------------------------------------------------------------------------------

def test_the_trainer_prefetches_rows_and_never_declares_the_table():
    plan = transpile(wide(), trainers=2, pservers=2)
    assert plan.tables() == ["emb"]
    trainer = plan.trainer_program(0)
    assert "emb" not in trainer.global_block().vars
    text = format_program(trainer)
    assert "= prefetch(Comm=@COMMUNICATOR@, Ids=ids)" in text
    assert "prefetch_grad(" in text and "send_rows(" in text
    assert "lookup_table" not in text
    assert [p.name for p in plan.table_shards("emb")] == ["emb.shard0", "emb.shard1"]
    for ep in plan.endpoints:   # no server initialises the table whole
        startup = format_program(plan.startup_program(ep))
        assert "emb" not in startup
    assert "emb.shard0: table of 60 x 4, ids % 2 == 0" in str(plan)


def test_is_sparse_alone_cuts_row_ranges():
    plan = transpile(wide(distributed=False), trainers=1, pservers=2)
    assert plan.table_rule("emb") == "range"
    assert [(p.start, p.rows) for p in plan.table_shards("emb")] == [(0, 30), (30, 30)]


def test_a_table_read_whole_is_refused():
    class Reads(Wide):   # the table read outside lookups: a sum over it
        def net(self, ids, x):
            out = super().net(ids, x)
            table = fluid.layers.create_parameter([self.vocab, self.dim], "float32",
                                                  attr=fluid.ParamAttr(name="emb"))
            return out + fluid.layers.reduce_sum(table)
    with pytest.raises(ProgramDefinitionError, match="reads it whole"):
        transpile(Reads().Compile(seed=0), trainers=1, pservers=2)


# --- sync equals one process ---------------------------------------------------------------------

@pytest.mark.parametrize("optimizer,distributed,padding", [
    ("sgd", True, None), ("adam", True, None), ("momentum", False, None),
    ("adagrad", True, 3)])
def test_sync_equals_one_process(optimizer, distributed, padding):
    """The averaging rule: each server averages the trainers' row gradients, a row a
    trainer did not touch counting as zero, which is the whole batch's gradient."""
    options = {"optimizer": optimizer, "distributed": distributed, "padding_idx": padding}
    single = wide(served=False, **options)   # one process with its table dense
    plan = transpile(wide(**options), trainers=2, pservers=2)
    with launch(plan) as dist:
        reference_for(dist, single)
        for ids, x, y in table_batches(12):
            assert abs(single.train_step(ids, x, y) - dist.train_step(ids, x, y)) < TOL
        rows = dist.table("emb")
        table = single.get_var("emb")
        np.testing.assert_allclose(rows["emb"], table[rows["ids"]], atol=TOL)
        for name, value in dist.parameters().items():
            np.testing.assert_allclose(value, single.get_var(name), atol=TOL)
        ids, x, _ = next(table_batches(1, seed=5))
        np.testing.assert_allclose(dist.infer(ids, x), single.infer(ids, x), atol=TOL)
        if padding is not None:
            assert padding not in rows["ids"]


def test_exact_adam_decays_every_live_row_and_adagrad_only_the_batch():
    """Adam's moments of a row outside the batch still move it (one process updates every
    row); Adagrad's do not, so its shards read the batch's rows alone."""
    for optimizer, moves in (("adam", True), ("adagrad", False)):
        plan = transpile(wide(optimizer=optimizer), trainers=1, pservers=1)
        with launch(plan) as dist:
            batches = table_batches(2, vocab=10)
            dist.train_step(*next(batches))
            before = dist.table("emb")
            ids, x, y = next(table_batches(1, seed=9))
            ids[:] = before["ids"][0]          # the second step touches one row only
            dist.train_step(ids, x, y)
            after = dist.table("emb")
            rest = before["ids"] != before["ids"][0]
            changed = not np.array_equal(before["emb"][rest], after["emb"][rest])
            assert changed == moves, optimizer


# --- rows made as ids are first seen -------------------------------------------------------------

def test_hashed_ids_make_rows_up_to_the_capacity_then_a_clear_error():
    rng = np.random.default_rng(0)
    hashed = rng.integers(-2**62, 2**62, size=200)
    plan = transpile(wide(vocab=40), trainers=2, pservers=2)
    with launch(plan) as dist:
        dist.train_step(*next(table_batches(1, ids=hashed[:6])))
        seen = dist.table("emb")
        assert set(seen["ids"]) <= set(hashed[:6]) and seen["ids"].size > 0
        with pytest.raises(TableFull, match=r"table 'emb' is full on shard \d of 2 "
                                            r"\(emb.shard\d\).*of its 20 rows.*size\[0\] = 40"):
            for batch in table_batches(20, ids=hashed, seed=1):
                dist.train_step(*batch)
        # the failed step changed nothing; known ids still train
        full = dist.table("emb")
        dist.train_step(*next(table_batches(1, ids=full["ids"])))
        assert np.array_equal(dist.table("emb")["ids"], full["ids"])


def test_inference_reads_zeros_for_unknown_ids_and_makes_no_row():
    plan = transpile(wide(), trainers=2, pservers=2)
    with launch(plan) as dist:
        dist.train_step(*next(table_batches(1, vocab=10)))
        live = dist.table_stats()
        ids = np.full((2, 2, 1), 10**12, dtype=np.int64)   # never seen
        x = np.ones((2, 3), np.float32)
        head = dist.parameters()    # the embedding's part of the input is zero
        expected = x @ head["head/fc_0.w_0"][4:] + head["head/fc_0.b_0"]
        np.testing.assert_allclose(dist.infer(ids, x), expected, atol=TOL)
        assert dist.table_stats() == live


def test_trainers_hold_no_table():
    plan = transpile(wide(), trainers=2, pservers=2)
    with launch(plan) as dist:
        dist.train_step(*next(table_batches(1)))
        for t in dist.trainers:
            state = t.tensor_state()
            assert not any(n.startswith("emb") for n in state), sorted(state)


def test_async_mode_trains():
    plan = transpile(wide(optimizer="adam"), trainers=2, pservers=2, mode="async")
    with launch(plan) as dist:
        losses = [dist.train_step(*b) for b in table_batches(60, seed=2)]
    assert np.mean(losses[-10:]) < 0.5 * np.mean(losses[:10])


# --- checkpoints ----------------------------------------------------------------------------------

def test_a_checkpoint_opens_as_one_process_and_reshards(tmp_path):
    """Hashed ids: the loaded program predicts exactly what the cluster predicted (unknown
    ids read zeros there too); a job of three servers loads it and predicts the same."""
    rng = np.random.default_rng(1)
    hashed = rng.integers(-2**62, 2**62, size=30)
    plan = transpile(wide(optimizer="adam", vocab=100), trainers=2, pservers=2)
    ids, x, _ = next(table_batches(1, ids=np.concatenate([hashed, [7, 8]]), seed=3))
    with launch(plan) as dist:
        for batch in table_batches(10, ids=hashed):
            dist.train_step(*batch)
        expected = dist.infer(ids, x)
        rows = dist.table("emb")
        dist.save(str(tmp_path / "ckpt"))
    single = fluid.load(str(tmp_path / "ckpt"))
    np.testing.assert_array_equal(single.infer(ids, x), expected)
    np.testing.assert_array_equal(single.get_var("emb@IDS"), rows["ids"])
    with pytest.raises(KernelError, match="id 12345 is not among them"):
        single.train_step(np.full((1, 2, 1), 12345, np.int64), x[:1], np.zeros((1, 1), "f4"))
    three = transpile(wide(optimizer="adam", vocab=100), trainers=1, pservers=3)
    with launch(three) as dist:
        dist.load(str(tmp_path / "ckpt"))
        np.testing.assert_array_equal(dist.infer(ids, x), expected)
        again = dist.table("emb")
        for name in rows:
            np.testing.assert_array_equal(again[name], rows[name])
        stats = dist.table_stats()
        assert sum(s[0] for ep in stats.values() for s in ep.values()) == rows["ids"].size


def test_the_split_draws_the_prefetch_and_the_rows_sent():
    from fluid_interactive.render.dot import split_to_dot
    plan = transpile(wide(), trainers=2, pservers=2)
    edges = plan.edges()
    assert ("pserver 127.0.0.1:6175", "emb.shard1", "trainer 0", "emb@PREFETCH.ids") in edges
    assert ("trainer 0", "emb@GRAD", "pserver 127.0.0.1:6174", "emb@GRAD.shard0.trainer_0") \
        in edges
    programs = {"trainer 0": plan.trainer_program(0),
                **{f"pserver {ep}": plan.pserver_program(ep) for ep in plan.endpoints}}
    assert "emb.shard1" in split_to_dot(programs, edges)


def test_a_server_restarted_from_its_state_directory_has_its_shard(tmp_path):
    """What a restarted Ray server reads: the state file holds each shard's live rows."""
    from fluid_interactive.distributed import LocalEngine, ParameterServer, pserver_spec

    class Kept(LocalEngine):
        def start_pserver(self, job, endpoint):
            return ParameterServer(pserver_spec(job.plan, endpoint), seed=job.seed,
                                   device="cpu", timeout=job.timeout,
                                   state_dir=str(tmp_path / endpoint.replace(":", "_")))

    plan = transpile(wide(optimizer="adam"), trainers=2, pservers=2)
    with launch(plan, Kept(), seed=0) as dist:
        for batch in table_batches(5):
            dist.train_step(*batch)
        rows = dist.table("emb")
        stats = dist.table_stats()
    ep = plan.endpoints[1]
    again = ParameterServer(pserver_spec(plan, ep), seed=0,
                            state_dir=str(tmp_path / ep.replace(":", "_")))
    assert again.restored and again.table_stats() == stats[ep]
    got = again.table_rows(["emb.shard1"])[0]
    mine = np.isin(rows["ids"], got["ids"])
    np.testing.assert_array_equal(np.sort(got["ids"]), rows["ids"][mine])
