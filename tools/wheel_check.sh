#!/usr/bin/env bash
# Builds one wheel (CUDA backend compiled), shows auditwheel's view of it, then installs THE SAME
# wheel file into fresh venvs with different torch versions and runs the CPU test suite in each.
# The extension links neither libtorch nor torch headers (arrays cross as DLPack), so it must pass
# with every torch. Usage: tools/wheel_check.sh [torch versions...]   (default: 2.13.0 2.14.1)
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)
WORK=${WORK:-/tmp/sk-wheel-check}
versions=("$@"); [ ${#versions[@]} -gt 0 ] || versions=(2.13.0 2.14.1)
PY=${PYTHON:-python3}
rm -rf "$WORK" && mkdir -p "$WORK/dist"

echo "=== build the wheel (pip wheel, CUDA backend, sm_80 + sm_90a)"
SPARSEKERN_CUDA=ON $PY -m pip wheel --no-build-isolation --no-deps -w "$WORK/dist" . \
  -Ccmake.define.CMAKE_CUDA_ARCHITECTURES="80-real;90a-real" -Cbuild-dir=build/wheel-check -q
wheel=$(ls "$WORK"/dist/sparsekern-*.whl)
ls -la "$wheel"; sha256sum "$wheel"

echo "=== auditwheel show"
$PY -m pip install -q auditwheel
$PY -m auditwheel show "$wheel" || true

for v in "${versions[@]}"; do
  echo "=== fresh venv with torch $v"
  venv="$WORK/venv-$v"
  $PY -m venv "$venv"
  "$venv/bin/python" -m pip install -q "torch==$v" pytest "transformers>=4.48" numpy
  "$venv/bin/python" -m pip install -q "$wheel"
  (cd "$WORK" && "$venv/bin/python" -c "import torch, sparsekern; print('torch', torch.__version__, 'sparsekern', sparsekern.__version__, 'cuda build', sparsekern.built_with_cuda())")
  (cd "$WORK" && "$venv/bin/python" -m pytest "$REPO/tests/python" -q -p no:cacheprovider 2>&1 | tail -3)
done
