#!/usr/bin/env bash
# Build + test + sanitize + benchmark on the GPU machine, in one call of the device tool:
#   run(command="bash tools/device_check.sh", carry=[".whl"])
# .whl/ holds the nvidia-cutlass wheel (that machine has no network). Results go to $OUT:
# build.log, pytest.log, junit.xml, sanitizer.log, check.log, bench JSON, sass.txt.
# STAGES selects what runs (default: all); CUDA_FLAGS adds nvcc flags (e.g.
# -DSPARSEKERN_SM90_WATCHDOG: the Hopper kernels trap with a message instead of hanging); PYTEST_K, SANITIZE_K (pytest -k expressions) and
# BENCH_FAMILIES narrow the slow stages.
set -uo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)
OUT=${OUT:-/tmp/sk-out}
mkdir -p "$OUT"
STAGES=${STAGES:-"build test sanitize check bench"}
PY="${PYTHON:-python3} -X faulthandler"  # a crash prints the Python stack
export PYTHONUNBUFFERED=1 CMAKE_BUILD_PARALLEL_LEVEL=${JOBS:-16}
status=0
has() { [[ " $STAGES " == *" $1 "* ]]; }
step() { echo; echo "=== $* ($(date +%T))"; }

step "environment"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.max.sm --format=csv | tee "$OUT/gpu.txt"
$PY -c "import torch, sys; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda)" | tee -a "$OUT/gpu.txt"

if has build; then
  step "build (CUTLASS headers from the carried wheel)"
  rm -rf /tmp/cutlass && mkdir -p /tmp/cutlass
  $PY -m zipfile -e "$REPO"/.whl/nvidia_cutlass-*.whl /tmp/cutlass >/dev/null
  CUTLASS_DIR=/tmp/cutlass/cutlass_library/source/include
  ARCHS=${CMAKE_CUDA_ARCHITECTURES:-90a-real}
  t0=$(date +%s)
  $PY -m pip install --no-build-isolation --no-deps -v . \
      -Ccmake.define.SPARSEKERN_CUTLASS_DIR=$CUTLASS_DIR \
      -Ccmake.define.CMAKE_CUDA_ARCHITECTURES="$ARCHS" \
      -Ccmake.define.SPARSEKERN_CUDA=ON ${CUDA_FLAGS:+-Ccmake.define.CMAKE_CUDA_FLAGS="$CUDA_FLAGS"} \
      > "$OUT/build.log" 2>&1 || { tail -60 "$OUT/build.log"; exit 1; }
  echo "build ok in $(( $(date +%s) - t0 )) s ($ARCHS)"
  grep -E "sparsekern:" "$OUT/build.log" | head
  # libsparsekern is linked statically into the extension module in a wheel build: dump that.
  lib=$($PY -c "import sparsekern._C as c; print(c.__file__)")
  # Which matrix instructions did the kernels compile to? (HMMA on sm_80, HGMMA for wgmma on sm_90a)
  cuobjdump --dump-sass "$lib" 2>/dev/null | awk '/Function :/ {fn=$3} /HGMMA|HMMA|QGMMA|IMMA/ {split($2,a,"."); c[fn" "a[1]]++} END {for (k in c) print c[k], k}' \
      | sort -k2 > "$OUT/sass.txt"
  echo "matrix instructions per kernel: $(wc -l < "$OUT/sass.txt") kernel/op pairs (sass.txt)"
fi
cd /tmp  # import the installed package, not the source tree

if has test; then
  step "pytest (CPU + CUDA cases)"
  $PY -m pytest "$REPO/tests/python" -q -p no:cacheprovider --junitxml="$OUT/junit.xml" \
      ${PYTEST_K:+-k "$PYTEST_K"} > "$OUT/pytest.log" 2>&1 || status=1
  tail -25 "$OUT/pytest.log"
fi

if has sanitize; then
  step "compute-sanitizer memcheck (CUDA cases)"
  compute-sanitizer --tool memcheck --error-exitcode 99 --print-limit 20 \
      $PY -m pytest "$REPO/tests/python" -q -p no:cacheprovider -m cuda \
      -k "${SANITIZE_K:-not compile and not threads}" > "$OUT/sanitizer.log" 2>&1
  rc=$?; [ $rc -ne 0 ] && status=1
  echo "sanitizer exit $rc"; grep -E "ERROR SUMMARY|passed|failed" "$OUT/sanitizer.log" | tail -5
fi

if has check; then
  step "sparsekern check"
  $PY -m sparsekern.cli check > "$OUT/check.log" 2>&1 || status=1
  tail -3 "$OUT/check.log"
fi

if has bench; then
  step "sparsekern bench --full"
  fams=""
  for f in ${BENCH_FAMILIES:-}; do fams="$fams --family $f"; done
  $PY -m sparsekern.cli bench --full $fams --json "$OUT/bench.json" 2> "$OUT/bench.err" | tee "$OUT/bench.txt" || status=1
fi
exit $status
