"""The benchmark scripts stay runnable: the peer suite's workers for fluid and hand NumPy
report the same losses on a small workload, and gpu_check.sh refuses to run, saying why,
where CuPy is missing."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PEERS = os.path.join(ROOT, "benchmarks", "bench_peers.py")


def _check(framework: str, workloads: str = "W1,W2-sgd,W1-infer-list") -> dict:
    out = subprocess.run([sys.executable, PEERS, "--worker", framework, "--mode", "check",
                          "--workloads", workloads],
                         capture_output=True, text=True, timeout=600, check=True)
    line = next(s for s in out.stdout.splitlines() if s.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])


def test_peer_suite_fluid_and_hand_numpy_agree():
    fluid, numpy = _check("fluid"), _check("numpy")
    assert set(fluid) == set(numpy) == {"W1", "W2-sgd", "W1-infer-list"}
    for name in fluid:
        np.testing.assert_allclose(fluid[name], numpy[name], rtol=2e-3, atol=1e-5)
    assert fluid["W2-sgd"][-1] < fluid["W2-sgd"][0]          # it learns


def test_sequence_workloads_fluid_and_hand_numpy_agree():
    """The LSTM (W5) and the Transformer encoder block (W6), from the same data and initial
    parameters."""
    fluid, numpy = _check("fluid", "W5,W6"), _check("numpy", "W5,W6")
    assert set(fluid) == set(numpy) == {"W5", "W6"}
    for name in fluid:
        np.testing.assert_allclose(fluid[name], numpy[name], rtol=2e-3, atol=1e-5)
        assert fluid[name][-1] < fluid[name][0]          # it learns


@pytest.mark.skipif(sys.platform == "win32", reason="a bash script")
def test_gpu_check_fails_loudly_without_cupy():
    try:
        import cupy  # noqa: F401
        pytest.skip("CuPy is installed here: the script would run")
    except ImportError:
        pass
    out = subprocess.run(["bash", os.path.join(ROOT, "benchmarks", "gpu_check.sh")],
                         capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYTHON": sys.executable})
    assert out.returncode == 1
    assert "gpu_check: FAILED" in out.stderr and "CuPy" in out.stderr


def test_scale_benchmark_hand_numpy_step_trains_as_fluid_does():
    """bench_scale's hand-written deep MLP is the same network and Adam step as fluid's:
    from the same parameters both report the same losses."""
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    try:
        import bench_scale
    finally:
        sys.path.pop(0)
    layers, rng = 4, np.random.default_rng(1)
    x = rng.standard_normal((bench_scale.BATCH, bench_scale.WIDTH)).astype(np.float32)
    y = rng.integers(0, 10, (bench_scale.BATCH, 1)).astype(np.int64)
    hand = bench_scale.DeepNumpy(layers, rng)
    prog = bench_scale.deep_mlp(layers)().Compile(seed=0)
    prog.set_parameters({f"fc_{i}.{k}_0": value.copy() for i, pair in enumerate(hand.layers)
                         for k, (value, _) in zip("wb", pair)})
    ours = [prog.train_step(x, y) for _ in range(8)]
    theirs = [hand.step(x, y) for _ in range(8)]
    np.testing.assert_allclose(ours, theirs, rtol=1e-4)
    assert ours[-1] < ours[0]


def test_blas_pin_benchmark_runs_its_workers_pinned_and_unpinned(monkeypatch):
    """bench_blas_pin's workers see OPENBLAS_CORETYPE=Haswell, or neither pin variable;
    the driver's own environment is as it was after each."""
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    try:
        import bench_blas_pin
        import bench_peers
    finally:
        sys.path.pop(0)
    monkeypatch.setenv("OPENBLAS_CORETYPE", "Prescott")
    monkeypatch.setenv("OPENBLAS_L2_SIZE", "512")
    seen = []
    monkeypatch.setattr(bench_peers, "run_worker", lambda f, mode, names, base_env: seen.append(
        {k: base_env.get(k) for k in bench_peers.BLAS_PINS}) or {})
    bench_blas_pin.timed("numpy", ["W2-gemm"], pinned=True)
    bench_blas_pin.timed("numpy", ["W2-gemm"], pinned=False)
    assert seen == [{"OPENBLAS_CORETYPE": "Haswell", "OPENBLAS_L2_SIZE": "512"},
                    {"OPENBLAS_CORETYPE": None, "OPENBLAS_L2_SIZE": None}]
    assert os.environ["OPENBLAS_CORETYPE"] == "Prescott"
    assert os.environ["OPENBLAS_L2_SIZE"] == "512"


def test_op_benchmark_cases_compute_what_their_numpy_expressions_do():
    """bench_ops.py times each op against a NumPy expression: both must give the same
    values, or the ratio it prints means nothing."""
    out = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "bench_ops.py"),
                          "--check"], capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "cases agree with their NumPy expressions" in out.stdout
