#!/usr/bin/env bash
# cibuildwheel `before-build` (runs inside the manylinux_2_28 container, once per Python, with the
# build's `python` on PATH). Two jobs:
#  1. A CUDA 13 toolchain from NVIDIA's PyPI wheels in $CUDA_WHEELS_PREFIX (default /opt/cuda-wheels):
#     nvcc + its pieces (nvvm/cicc, crt headers), cudart (static, for CMake's default) and the CCCL
#     headers. The wheels all unpack into nvidia/cu13/, which already has a toolkit's shape (bin/,
#     include/, lib/, nvvm/), so that tree is moved to be the prefix itself (not symlinked: nvcc
#     finds its pieces through "bin/..", which the kernel resolves from a symlink's target), plus
#     lib64 -> lib and libcudart.so -> libcudart.so.13. CMake's CUDA detection and FindCUDAToolkit
#     then see an ordinary toolkit. The CUDA versions are pinned together: nvcc, nvvm and crt must
#     match exactly. Installed once per container (stamp file).
#  2. The build requirements into the build's Python (build frontend runs with --no-isolation):
#     requirements/build.txt (cmake, ninja, nanobind, scikit-build-core, cuBLAS/cuSPARSE wheels)
#     and the pinned CUTLASS headers (nvidia-cutlass, without its Python dependencies).
# Usable outside the container too, e.g. CUDA_WHEELS_PREFIX=/tmp/cuda-wheels to try the toolchain.
set -euo pipefail
PROJECT=$(cd "$(dirname "$0")/.." && pwd)
PREFIX=${CUDA_WHEELS_PREFIX:-/opt/cuda-wheels}
PY=${PYTHON:-python}

# CUDA 13.0: the release nvcc's CUTLASS 4.2 is tested with. The cuBLAS/cuSPARSE *runtime* wheels are
# not pinned here (requirements/build.txt): their SONAMEs are stable across 13.x.
CUDA_WHEELS=(
  nvidia-cuda-nvcc==13.0.88
  nvidia-nvvm==13.0.88
  nvidia-cuda-crt==13.0.88
  nvidia-cuda-runtime==13.0.96
  nvidia-cuda-cccl==13.0.85
)
CUTLASS=nvidia-cutlass==4.2.0.0

if [[ "$(cat "$PREFIX/.installed" 2>/dev/null)" != "${CUDA_WHEELS[*]}" ]]; then
  echo "cibw_before_build: installing the CUDA toolchain wheels into $PREFIX"
  rm -rf "$PREFIX"
  mkdir -p "$PREFIX"
  # --no-deps: nvcc's own dependencies (nvvm, crt, runtime) are unpinned; ours are pinned above.
  "$PY" -m pip install --disable-pip-version-check --no-deps --only-binary=:all: \
    --target "$PREFIX/site" "${CUDA_WHEELS[@]}"
  for d in bin include lib nvvm; do
    [[ -d "$PREFIX/site/nvidia/cu13/$d" ]] || { echo "cibw_before_build: no $d/ in the wheels" >&2; exit 1; }
    mv "$PREFIX/site/nvidia/cu13/$d" "$PREFIX/$d"
  done
  rm -rf "$PREFIX/site"
  ln -s lib "$PREFIX/lib64"  # nvcc.profile links from lib64/
  # The wheel ships only the versioned runtime; FindCUDAToolkit looks for libcudart.so.
  ln -s libcudart.so.13 "$PREFIX/lib/libcudart.so"
  echo "${CUDA_WHEELS[*]}" > "$PREFIX/.installed"
fi
"$PREFIX/bin/nvcc" --version | tail -n 2

"$PY" -m pip install --disable-pip-version-check -r "$PROJECT/requirements/build.txt"
"$PY" -m pip install --disable-pip-version-check --no-deps "$CUTLASS"
