"""The peer suite's sequence workloads stay runnable and agree: fluid's and hand NumPy's
workers report the same losses for the LSTM (W5) and the Transformer encoder block (W6)
from the same data and initial parameters."""
import json
import os
import subprocess
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PEERS = os.path.join(ROOT, "benchmarks", "bench_peers.py")


def _check(framework: str) -> dict:
    out = subprocess.run([sys.executable, PEERS, "--worker", framework, "--mode", "check",
                          "--workloads", "W5,W6"],
                         capture_output=True, text=True, timeout=600, check=True)
    line = next(s for s in out.stdout.splitlines() if s.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])


def test_sequence_workloads_fluid_and_hand_numpy_agree():
    fluid, numpy = _check("fluid"), _check("numpy")
    assert set(fluid) == set(numpy) == {"W5", "W6"}
    for name in fluid:
        np.testing.assert_allclose(fluid[name], numpy[name], rtol=2e-3, atol=1e-5)
        assert fluid[name][-1] < fluid[name][0]          # it learns
