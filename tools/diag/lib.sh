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
# diag_start: starts the clock of cap N (seconds left until N after the start, at least 5: a
# timeout for the next step that keeps the whole call within N).
diag_start() { T0=$SECONDS; }
cap() { local c=$(( $1 - (SECONDS - T0) )); [ $c -lt 5 ] && c=5; echo $c; }
# diag_kron_cuda_tests LIMIT: every kron CUDA test, count and failures.
diag_kron_cuda_tests() {
  timeout $(cap $1) python3 -m pytest $R/tests/python/test_kron.py -q -p no:cacheprovider -m cuda > $OUT/kron_tests.txt 2>&1
  echo "kron cuda tests: $(tail -1 $OUT/kron_tests.txt)"
  grep -E "^FAILED" $OUT/kron_tests.txt | head -5
}
# diag_kron_bench LIMIT: `sparsekern bench --full --family kron` into $OUT/kron.json, a line per row.
diag_kron_bench() {
  timeout $(cap $1) python3 -m sparsekern.cli bench --full --family kron --json $OUT/kron.json > $OUT/kron_bench.txt 2>&1
  echo "kron bench exit $?"
  python3 - <<'PY'
import json, os
d = json.load(open(os.environ["OUT"] + "/kron.json"))
for r in d["rows"]:
    print(f"{r['op'][12:]:4s} {r['shape']:18s} eager {1e3*r['ours']:7.1f} v2 {1e3*r['anchor_time']:7.1f} | device {1e3*r.get('device_ms_ours', float('nan')):7.1f} v2 {1e3*r.get('device_ms_anchor', float('nan')):7.1f} | roof {1e3*r.get('roofline_ms', float('nan')):6.1f}")
PY
}
# diag_begin: the usual start of a call: build (stopping on failure), empty $OUT, the GPU and
# versions, work from /tmp, start the clock.
diag_begin() {
  diag_build /tmp/build_step.log
  rm -f $OUT/*
  diag_env
  cd /tmp
  diag_start
}
# diag_stk: installs stk 0.7.1 from the carried .whl/ (for the bsr bench's side-by-side rows).
diag_stk() {
  python3 -m pip install --no-deps --no-index -q $R/.whl/stanford_stk-*.whl > /tmp/stk_install.txt 2>&1 || tail -3 /tmp/stk_install.txt
}
# diag_bsr_cuda_tests LIMIT [pytest -k expression]: the bsr CUDA tests, count and failures.
diag_bsr_cuda_tests() {
  timeout $(cap $1) python3 -m pytest $R/tests/python/test_bsr.py -q -p no:cacheprovider -m cuda ${2:+-k "$2"} > $OUT/bsr_tests.txt 2>&1
  echo "bsr cuda tests: $(tail -1 $OUT/bsr_tests.txt)"; grep -E "^FAILED" $OUT/bsr_tests.txt | head -5
}
# diag_bsr_bench LIMIT: the issue-3 target bench (`SPARSEKERN_BENCH_BSR=targets sparsekern bench
# --full --family bsr`) into $OUT/bsr.json, its rows in $OUT/bsr_bench_rows.txt, and the summary.
diag_bsr_bench() {
  SPARSEKERN_BENCH_BSR=targets timeout $(cap $1) python3 -m sparsekern.cli bench --full --family bsr --json $OUT/bsr.json > /tmp/bsr_bench.txt 2> $OUT/bsr_bench_rows.txt
  echo "bsr bench exit $?"
  python3 -m sparsekern.bench.bsr $OUT/bsr.json > $OUT/bsr_summary.txt 2>&1
  grep -E "ERROR" $OUT/bsr_bench_rows.txt | cut -c1-200 | head -4
}
