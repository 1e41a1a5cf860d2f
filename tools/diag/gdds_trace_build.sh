#!/usr/bin/env bash
# Builds tools/diag/gdds_trace.cu on this (CPU) machine into .diagbin/NAME (carried to the device
# with `carry: [".diagbin"]`): nvcc with the CUTLASS headers of the nvidia-cutlass wheel and the
# CUDA headers of the nvidia-cu13 wheels found in PYTHON's site-packages. Extra arguments go to nvcc.
#   tools/diag/gdds_trace_build.sh NAME [nvcc flags]     (PYTHON defaults to /work/venv/bin/python)
set -euo pipefail
cd "$(dirname "$0")/../.."
name=$1; shift
site=$(${PYTHON:-/work/venv/bin/python} -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
mkdir -p .diagbin
/usr/local/cuda/bin/nvcc -std=c++17 -O3 --expt-relaxed-constexpr "--generate-code=arch=compute_90a,code=[sm_90a]" \
  -Xcudafe --diag_suppress=esa_on_defaulted_function_ignored -Xptxas -v -Iinclude -I"$site/nvidia/cu13/include" \
  -isystem "$site/cutlass_library/source/include" "$@" -o ".diagbin/$name" tools/diag/gdds_trace.cu \
  > ".diagbin/$name.log" 2>&1 || { grep -E "error" ".diagbin/$name.log" | head; exit 1; }
echo "$name built; ptxas spills: $(grep -cE '[1-9][0-9]* bytes spill stores' ".diagbin/$name.log") of $(grep -c 'spill stores' ".diagbin/$name.log") kernels"
