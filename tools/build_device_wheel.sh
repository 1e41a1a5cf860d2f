#!/usr/bin/env bash
# Builds the CUDA wheel that a device call installs instead of building there (a build on the GPU
# machine costs ~150 s of the session's 30 minutes of device time): cp312 abi3 (the GPU machine runs
# Python 3.12), SPARSEKERN_CUDA=ON, sm_90a only unless CMAKE_CUDA_ARCHITECTURES says otherwise, into
# .whl312/ (ignored by git: name it in the device call's carry). About 10 minutes on 2 cores.
# The GPU machine's toolkit is CUDA 13.0 like nvcc here, so the kernels are the ones a build there
# would produce; the wheel finds cuBLAS/cuSPARSE through its RUNPATH or LD_LIBRARY_PATH
# (tools/diag/lib.sh: diag_install_wheel).
set -euo pipefail
cd "$(dirname "$0")/.."
PY312=${PY312:-$(command -v python3.12 || ls /root/.pyenv/versions/3.12*/bin/python3.12 2>/dev/null | head -1)}
[ -x "$PY312" ] || { echo "needs a Python 3.12 (PY312=...)"; exit 1; }
VENV=${VENV312:-/tmp/sparsekern-venv312}
[ -x "$VENV/bin/python" ] || {
  "$PY312" -m venv "$VENV"
  "$VENV/bin/pip" install -q -r requirements/build.txt
  "$VENV/bin/pip" install -q --no-deps "nvidia-cutlass==4.2.0.0"
}
command -v nvcc >/dev/null || export PATH=/usr/local/cuda/bin:$PATH
rm -rf .whl312 && mkdir -p .whl312
SPARSEKERN_CUDA=ON "$VENV/bin/pip" wheel --no-build-isolation --no-deps . -w .whl312 \
  -Ccmake.define.CMAKE_CUDA_ARCHITECTURES="${CMAKE_CUDA_ARCHITECTURES:-90a-real}" -Cbuild-dir=build/wheel312
ls -la .whl312
