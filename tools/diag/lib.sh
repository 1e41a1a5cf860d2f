# Sourced by the session scripts in this folder (bash): goes to the repository root (R), makes
# Python unbuffered, and defines diag_build [LOG]: the build step of tools/device_check.sh (its
# environment: CUDA_FLAGS, CMAKE_CUDA_ARCHITECTURES), stopping the script with the log's tail if
# it fails, else printing its "build ok" line.
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
R=$(pwd)
export PYTHONUNBUFFERED=1
diag_build() {
  local log=${1:-$OUT/build_step.log}
  STAGES="build" bash tools/device_check.sh > "$log" 2>&1 || { tail -40 "$log"; exit 1; }
  grep -E "build ok" "$log"
}
diag_env() {  # the GPU, its clocks, and the versions the scripts run against
  nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv
  python3 -c "import torch, sparsekern; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'sparsekern', sparsekern.__version__)"
}
