"""The peer suite's workloads and one implementation of each per framework.

Every implementation module has ``make(workload, params)`` returning a `Contender`; the
driver (``benchmarks/bench_peers.py``) runs each framework in its own process."""
