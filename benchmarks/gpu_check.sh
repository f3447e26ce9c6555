#!/usr/bin/env bash
# The CuPy path on a machine with an NVIDIA GPU, in under 5 minutes:
#   1. every op kernel, forward and gradient, on CuPy against the NumPy results
#      (tests/ops with FLUID_TEST_DEVICE=cupy), plus the device tests of tests/backend;
#   2. W2 (MLP, SGD and Adam) and W3 (LeNet) trained and run by fluid on CuPy against
#      PyTorch on CUDA, losses checked first (benchmarks/bench_peers.py --device gpu).
# It installs nothing: the interpreter ($PYTHON, default python3) must already have
# numpy, pytest, hypothesis, cupy and torch with CUDA. It fails, loudly, without CuPy.
#
#   bash benchmarks/gpu_check.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PY=${PYTHON:-python3}

if ! "$PY" - <<'PYCODE'
import sys
try:
    import cupy
    n = cupy.cuda.runtime.getDeviceCount()
except Exception as e:  # ImportError, or a CUDA runtime error
    sys.exit(f"cannot use CuPy: {type(e).__name__}: {e}")
if n < 1:
    sys.exit("CuPy sees no GPU")
print(f"CuPy {cupy.__version__}, {n} GPU(s): "
      f"{cupy.cuda.runtime.getDeviceProperties(0)['name'].decode()}")
PYCODE
then
  echo "gpu_check: FAILED: CuPy with a visible GPU is required (install the 'gpu' extra," >&2
  echo "           the cupy-cudaXXx wheel matching the driver, on a machine with CUDA)" >&2
  exit 1
fi
if ! "$PY" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)'; then
  echo "gpu_check: FAILED: PyTorch with CUDA is required for the W2/W3 comparison" >&2
  exit 1
fi

export PYTHONPATH="$PWD:$PWD/extension${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
echo "== 1. op kernels on CuPy (forward and gradient), device tests"
FLUID_TEST_DEVICE=cupy timeout 150 "$PY" -m pytest -q -p no:cacheprovider -x \
  tests/ops tests/backend
echo "== 2. W2 and W3: fluid on CuPy against PyTorch on CUDA"
timeout 150 "$PY" benchmarks/bench_peers.py --device gpu --frameworks fluid,torch \
  --workloads W2-sgd,W2-adam,W2-infer,W3,W3-infer --rounds 3 --blocks 2
echo "gpu_check: OK"
