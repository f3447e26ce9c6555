"""Tables on parameter servers run by Ray: the shards live in the server actors, rows
travel as rows (through Ray's object store), the result equals the in-process engine's bit
for bit, and a killed server restarts with its shard."""
import numpy as np
import pytest
from distributed.ray_support import kill, needs_ray, private_cluster
from distributed.table_nets import Wide, table_batches

from fluid_interactive.distributed import launch, transpile

ray = needs_ray()


@pytest.fixture(scope="module")
def cluster():
    with private_cluster() as head:
        yield head


def test_tables_on_ray_equal_the_in_process_engine_and_survive_a_killed_server(cluster):
    rng = np.random.default_rng(0)
    hashed = rng.integers(-2**62, 2**62, size=50)
    plan = transpile(Wide(optimizer="adam", vocab=200).Compile(seed=0), trainers=2,
                     pservers=2)
    with launch(plan, engine="ray", timeout=60) as on_ray, launch(plan) as local:
        first = on_ray.pservers[plan.endpoints[0]]
        victim = first.pid()
        for step, batch in enumerate(table_batches(16, ids=hashed)):
            assert on_ray.train_step(*batch) == local.train_step(*batch)
            if step == 7:
                kill(victim)
        assert first.pid() != victim and first.status().restored
        for name, rows in local.table("emb").items():
            np.testing.assert_array_equal(on_ray.table("emb")[name], rows)
        for name, value in local.parameters().items():
            np.testing.assert_array_equal(on_ray.parameters()[name], value)
        ids, x, _ = next(table_batches(1, ids=hashed, seed=4))
        np.testing.assert_array_equal(on_ray.infer(ids, x), local.infer(ids, x))
        assert on_ray.table_stats() == local.table_stats()
