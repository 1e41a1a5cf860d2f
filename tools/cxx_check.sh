#!/usr/bin/env bash
# C++ check: configure libsparsekern with its ctest suite, build, run ctest (C++ tests of the CPU
# API + the installed-package consumer). .ci/run calls it once, CPU-only (its pip install of the
# package compiles the CUDA sources):
#   SPARSEKERN_CUDA=OFF tools/cxx_check.sh    CPU-only library
#   SPARSEKERN_CUDA=ON  tools/cxx_check.sh    compiles the CUDA sources too (no GPU needed: the
#                                             tests exercise the CPU path of a CUDA-enabled build)
# Environment: SPARSEKERN_CUDA (AUTO|ON|OFF, default AUTO), CMAKE_CUDA_ARCHITECTURES (default
# 90a-real: one arch is enough to catch compile errors and keeps CI fast), BUILD_DIR, JOBS (default
# 2), PYTHON (the interpreter whose nvidia-* / nvidia-cutlass wheels a CUDA build uses). Extra
# arguments go to the configure step, e.g. tools/cxx_check.sh -DBUILD_SHARED_LIBS=OFF.
set -euo pipefail
cd "$(dirname "$0")/.."
CUDA=${SPARSEKERN_CUDA:-AUTO}
BUILD_DIR=${BUILD_DIR:-build/cxx-${CUDA}}
JOBS=${JOBS:-2}
PY=${PYTHON:-$(command -v python3 || command -v python)}
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)

cmake -S . -B "$BUILD_DIR" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DSPARSEKERN_BUILD_TESTS=ON -DSPARSEKERN_BUILD_PYTHON=OFF \
  -DSPARSEKERN_CUDA="$CUDA" \
  -DCMAKE_CUDA_ARCHITECTURES="${CMAKE_CUDA_ARCHITECTURES:-90a-real}" \
  -DPython_EXECUTABLE="$PY" "$@"
cmake --build "$BUILD_DIR" -j"$JOBS"
ctest --test-dir "$BUILD_DIR" --output-on-failure -j"$JOBS"
