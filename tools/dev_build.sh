#!/usr/bin/env bash
# Developer build without pip: configures and builds libsparsekern + sparsekern._C in $BUILD_DIR and
# copies _C next to the Python sources, so that `PYTHONPATH=python python -m pytest tests/python`
# runs against the fresh build. CPU-only by default (fast); SPARSEKERN_CUDA=ON compiles the CUDA
# sources too (for CMAKE_CUDA_ARCHITECTURES, default 90a-real) to catch compile errors.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build/dev-${SPARSEKERN_CUDA:-OFF}}
PY=${PYTHON:-$(command -v python3)}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DSPARSEKERN_BUILD_PYTHON=ON -DSPARSEKERN_BUILD_TESTS=${SPARSEKERN_BUILD_TESTS:-OFF} \
  -DSPARSEKERN_CUDA="${SPARSEKERN_CUDA:-OFF}" \
  -DCMAKE_CUDA_ARCHITECTURES="${CMAKE_CUDA_ARCHITECTURES:-90a-real}" \
  -DPython_EXECUTABLE="$PY" >/dev/null
cmake --build "$BUILD_DIR" -j"${JOBS:-2}"
rm -f python/sparsekern/_C*.so
cp "$BUILD_DIR"/python/bindings/_C*.so python/sparsekern/
echo "built $BUILD_DIR; run: PYTHONPATH=python $PY -m pytest tests/python"
