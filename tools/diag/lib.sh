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
# diag_check LIMIT: `sparsekern check` (every op, on the GPU) into $OUT/check.txt, its exit and totals.
diag_check() {
  timeout $(cap $1) python3 -m sparsekern.cli check > $OUT/check.txt 2>&1
  echo "sparsekern check exit $?: $(tail -1 $OUT/check.txt)"
  grep -E "FAIL" $OUT/check.txt | head -5
}
# diag_ncu_kron_bwd_src LIMIT BATCH P1,P2,...: ncu SourceCounters of the small-factor backward into
# $OUT/src_bwd_P1xP2....csv (gzip it at the end for offline reading), summed per stall reason and
# opcode (ncu_sass_mix.py).
diag_ncu_kron_bwd_src() {
  local f=$OUT/src_bwd_${3//,/x}.csv
  timeout $(cap $1) ncu --section SourceCounters --section WarpStateStats --kernel-name regex:kron_small_bwd \
    --launch-skip 2 --launch-count 1 --import-source no --page source --csv --print-source sass \
    python3 $R/tools/diag/kron_bwd_one.py $2 $3 > $f 2>/dev/null
  echo "== bwd $2 $3"; python3 $R/tools/diag/ncu_sass_mix.py $f 12
}
# diag_kron_bench LIMIT: `sparsekern bench --full --family kron` into $OUT/kron.json, a line per row.
diag_kron_bench() {
  timeout $(cap $1) python3 -m sparsekern.cli bench --full --family kron --json $OUT/kron.json > $OUT/kron_bench.txt 2>&1
  echo "kron bench exit $?"
  python3 - <<'PY'
import json, os
d = json.load(open(os.environ["OUT"] + "/kron.json"))
for r in d["rows"]:
    a = "v2" if r["anchor"].endswith("(v2)") else r["anchor"][:8]
    print(f"{r['op'][12:]:4s} {r['shape']:18s} eager {1e3*r['ours']:7.1f} {a} {1e3*r['anchor_time']:7.1f} | device {1e3*r.get('device_ms_ours', float('nan')):7.1f} {a} {1e3*r.get('device_ms_anchor', float('nan')):7.1f} | roof {1e3*r.get('roofline_ms', float('nan')):6.1f}")
PY
}
# diag_install_wheel: installs the wheel built on the CPU machine by tools/build_device_wheel.sh
# (carried in .whl312/) instead of building here, and lets the loader find CUDA's libraries.
diag_install_wheel() {
  python3 -m pip install -q --no-deps --no-index --force-reinstall $R/.whl312/sparsekern-*.whl > /tmp/inst.txt 2>&1 || { tail -5 /tmp/inst.txt; exit 1; }
  export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  echo "installed $(ls $R/.whl312/)"
}
# diag_copy_package: this tree's whole Python package (subpackages included, no .so) over the
# installed wheel's, so that Python-only changes run without a new wheel.
diag_copy_package() {
  python3 - <<PY
import shutil, sparsekern, os
shutil.copytree("$R/python/sparsekern", os.path.dirname(sparsekern.__file__), dirs_exist_ok=True,
                ignore=shutil.ignore_patterns("*.so", "__pycache__"))
PY
}
# diag_begin_ab: the start of a call that installs its wheels itself (diag_ab_wheel_list): empty
# $OUT, the GPU, work from /tmp, the clock, the toolkit's libraries first on the loader's path.
diag_begin_ab() {
  rm -f $OUT/*
  diag_env
  cd /tmp
  diag_start
  export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
}
# diag_begin_wheel: diag_begin with the carried wheel instead of a build.
diag_begin_wheel() {
  diag_install_wheel
  rm -f $OUT/*
  diag_env
  cd /tmp
  diag_start
}
# diag_ab_wheels CMD [ARG...]: runs CMD four times, alternating the previous commit's wheel
# (carried in .whl312_old/) and this one's (.whl312/): old, new, old, new, an interleaved A/B on one
# warm machine. The first install also empties $OUT, prints the GPU and starts the clock (cap);
# AB_ROUND (1 or 2) tells CMD which round it is in. CMD is typically a function of the script
# that wraps its command in `timeout $(cap N)`.
diag_ab_wheels() {
  local w
  for AB_ROUND in 1 2; do
    for w in old new; do
      if [ $w = old ]; then
        python3 -m pip install -q --no-deps --no-index --force-reinstall $R/.whl312_old/sparsekern-*.whl > /tmp/inst.txt 2>&1 || { tail -3 /tmp/inst.txt; exit 1; }
      else
        diag_install_wheel > /dev/null
      fi
      [ $AB_ROUND = 1 ] && [ $w = old ] && { rm -f $OUT/*; diag_env; cd /tmp; diag_start; }
      echo "== round $AB_ROUND, $w wheel"
      "$@"
    done
  done
}
# diag_ab_wheel_list "NAME..." CMD [ARG...]: diag_ab_wheels over more than two wheels: for each of two
# rounds, installs .whl312_NAME (NAME "new": .whl312) for every NAME in order and runs CMD (session
# 39's three-wheel A/Bs). The caller empties $OUT and starts the clock first.
diag_ab_wheel_list() {
  local names=$1 w d
  shift
  for AB_ROUND in 1 2; do
    for w in $names; do
      d=$R/.whl312_$w; [ $w = new ] && d=$R/.whl312
      python3 -m pip install -q --no-deps --no-index --force-reinstall $d/sparsekern-*.whl > /tmp/inst.txt 2>&1 || { tail -3 /tmp/inst.txt; exit 1; }
      echo "== round $AB_ROUND, $w wheel ($((SECONDS - T0))s)"
      "$@"
    done
  done
}
# diag_kron_bwd_sanitize LIMIT_M LIMIT_R: compute-sanitizer memcheck (every case) and racecheck
# (the small ones) of the register-tile backward (tools/diag/kron_bwd_fast_check.py), a line each.
diag_kron_bwd_sanitize() {
  timeout $(cap $1) compute-sanitizer --tool memcheck --error-exitcode 3 python3 $R/tools/diag/kron_bwd_fast_check.py > /tmp/san_m.txt 2>&1
  echo "memcheck exit $?: $(grep -E 'ERROR SUMMARY' /tmp/san_m.txt) $(grep -c ' ok$' /tmp/san_m.txt) ok $(grep -c WRONG /tmp/san_m.txt) wrong"
  timeout $(cap $2) compute-sanitizer --tool racecheck --error-exitcode 3 python3 $R/tools/diag/kron_bwd_fast_check.py small > /tmp/san_r.txt 2>&1
  echo "racecheck exit $?: $(grep -E 'RACECHECK SUMMARY' /tmp/san_r.txt) $(grep -c ' ok$' /tmp/san_r.txt) ok $(grep -c WRONG /tmp/san_r.txt) wrong"
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
  echo "bsr cuda tests: $(tail -1 $OUT/bsr_tests.txt)"; grep -E "^FAILED|^ERROR" $OUT/bsr_tests.txt | head -5
}
# diag_bsr_grouped_sanitize LIMIT TOOL KEXPR: compute-sanitizer TOOL over the bsr CUDA tests that
# match KEXPR with the grouped dds forced (SPARSEKERN_BSR_GROUPED=1), its summary and the tests' line.
diag_bsr_grouped_sanitize() {
  SPARSEKERN_BSR_GROUPED=1 timeout $(cap $1) compute-sanitizer --tool $2 --print-limit 5 python3 -m pytest $R/tests/python/test_bsr.py -q -p no:cacheprovider -m cuda -k "$3" > $OUT/san_$2.txt 2>&1
  echo "$2, grouped forced: $(grep -E 'ERROR SUMMARY' $OUT/san_$2.txt | tail -1) | $(tail -1 $OUT/san_$2.txt)"
}
# diag_bsr_bench LIMIT: the issue-3 target bench (`SPARSEKERN_BENCH_BSR=targets sparsekern bench
# --full --family bsr`) into $OUT/bsr.json, its rows in $OUT/bsr_bench_rows.txt, and the summary.
diag_bsr_bench() {
  SPARSEKERN_BENCH_BSR=targets timeout $(cap $1) python3 -m sparsekern.cli bench --full --family bsr --json $OUT/bsr.json > /tmp/bsr_bench.txt 2> $OUT/bsr_bench_rows.txt
  echo "bsr bench exit $?"
  python3 -m sparsekern.bench.bsr $OUT/bsr.json > $OUT/bsr_summary.txt 2>&1
  grep -E "ERROR" $OUT/bsr_bench_rows.txt | cut -c1-200 | head -4
}
# diag_ncu_kron_bwd LIMIT BATCH P1,P2,... SEL KERNEL_REGEX: as diag_ncu_kron_fwd, for one native
# backward (tools/diag/kron_bwd_one.py); the stall-sampled SASS csv stays in /tmp.
diag_ncu_kron_bwd() {
  local f=$OUT/ncu_bwd_$2_${3//,/x}_${4//[:=,]/_} c=/tmp/ncu_bwd_$2_${3//,/x}.src.csv
  timeout $(cap $1) ncu --section SpeedOfLight --section WarpStateStats --section Occupancy --section SchedulerStats --section MemoryWorkloadAnalysis_Tables --section LaunchStats --section InstructionStats --kernel-name regex:$5 --launch-skip 2 --launch-count 1 python3 $R/tools/diag/kron_bwd_one.py $2 $3 $4 > $f.txt 2>&1
  echo "== bwd $2 $3 $4"
  grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|DRAM Throughput|Issue Slots Busy|Achieved Occupancy|Registers Per|Warp Cycles Per Issued|One or More Eligible|Executed Ipc A|Bank|bank|Grid Size|Block Size|Local" $f.txt | sed 's/  */ /g' | cut -c1-200 | head -24
  timeout $(cap $1) ncu --section SourceCounters --section WarpStateStats --kernel-name regex:$5 --launch-skip 2 --launch-count 1 --import-source no --page source --csv --print-source sass python3 $R/tools/diag/kron_bwd_one.py $2 $3 $4 > $c 2>/dev/null
  python3 $R/tools/diag/ncu_stalls.py $c 14 | cut -c1-180
}
# diag_sanitize LIMIT PYFILE: compute-sanitizer memcheck and racecheck of a Python script (which
# prints "cases ok" at its end), one summary line each; the reports stay in /tmp.
diag_sanitize() {
  local tool
  for tool in memcheck racecheck; do
    timeout $(cap $1) compute-sanitizer --tool $tool python3 $2 > /tmp/san_$tool.txt 2>&1
    echo "$tool: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|cases ok' /tmp/san_$tool.txt | tr '\n' ' ')"
  done
}
# diag_kron_fwd_times LIMIT "BATCH P1,P2,... SEL" ...: device time of one kron forward per case under
# the forward kernel selection SEL (tools/diag/kron_fwd_one.py --time), next to a copy of x.
diag_kron_fwd_times() {
  local lim=$1; shift
  for c in "$@"; do
    set -- $c
    timeout $(cap $lim) python3 $R/tools/diag/kron_fwd_one.py $1 $2 $3 --time
  done
}
# diag_kron_small_tests LIMIT: the kron CUDA tests of the forward kernels (small-factor, register-tile,
# kept T0, selection).
diag_kron_small_tests() {
  timeout $(cap $1) python3 -m pytest $R/tests/python/test_kron.py -q -p no:cacheprovider -m cuda -k "small or forward_kernels or kept_t0 or forward_kernel_choice" > $OUT/kron_small_tests.txt 2>&1
  echo "kron small cuda tests: $(tail -1 $OUT/kron_small_tests.txt)"; grep -E "^FAILED" $OUT/kron_small_tests.txt | head -5
}
# diag_kron_small_sanitize LIMIT TOOL [SCRIPT]: compute-sanitizer TOOL (memcheck|racecheck) over
# tools/diag/SCRIPT (kron_small_check.py), its summary and the count of checked cases.
diag_kron_small_sanitize() {
  local s=${3:-kron_small_check.py}
  timeout $(cap $1) compute-sanitizer --tool $2 --error-exitcode 3 python3 $R/tools/diag/$s > $OUT/$2_${s%.py}.txt 2>&1
  echo "$2 ($s) exit $?: $(grep -E "RACECHECK SUMMARY|ERROR SUMMARY" $OUT/$2_${s%.py}.txt | tail -1); $(grep -c ' ok$' $OUT/$2_${s%.py}.txt) ok, $(grep -c WRONG $OUT/$2_${s%.py}.txt) wrong"
}
# diag_kron_memcheck_tests LIMIT EXPR: compute-sanitizer memcheck over the kron CUDA tests that
# `-k EXPR` selects (session 38: the dependent-launch and capture tests), its summary and counts.
diag_kron_memcheck_tests() {
  timeout $(cap $1) compute-sanitizer --tool memcheck --error-exitcode 3 python3 -m pytest $R/tests/python/test_kron.py -q \
    -p no:cacheprovider -m cuda -k "$2" > /tmp/san_pdl.txt 2>&1
  echo "memcheck (-k \"$2\") exit $?: $(grep -E 'ERROR SUMMARY' /tmp/san_pdl.txt | tail -1); $(grep -E 'passed|failed' /tmp/san_pdl.txt | tail -1)"
}
# diag_kron_small_sanitize_both LIMIT: memcheck and racecheck over the small forward's and the small
# backward's check scripts (session 38).
diag_kron_small_sanitize_both() {
  local s t
  for s in kron_small_check.py kron_small_bwd_check.py; do
    for t in memcheck racecheck; do diag_kron_small_sanitize $1 $t $s; done
  done
}
# diag_ncu_kron_fwd LIMIT BATCH P1,P2,... SEL KERNEL_REGEX: ncu sections of one kron forward kernel
# (a summary of its lines), then its stall-sampled SASS (top lines, tools/diag/ncu_stalls.py).
diag_ncu_kron_fwd() {
  local f=$OUT/ncu_fwd_$2_${3//,/x}_${4//[:=,]/_}
  timeout $(cap $1) ncu --section SpeedOfLight --section WarpStateStats --section Occupancy --section SchedulerStats --section MemoryWorkloadAnalysis_Tables --section LaunchStats --kernel-name regex:$5 --launch-skip 2 --launch-count 1 python3 $R/tools/diag/kron_fwd_one.py $2 $3 $4 > $f.txt 2>&1
  echo "== fwd $2 $3 $4"
  grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|DRAM Throughput|Issue Slots Busy|Achieved Occupancy|Registers Per|Warp Cycles Per Issued|One or More Eligible|Executed Ipc A|Bank|bank|Grid Size|Block Size" $f.txt | sed 's/  */ /g' | cut -c1-200 | head -20
  timeout $(cap $1) ncu --section SourceCounters --section WarpStateStats --kernel-name regex:$5 --launch-skip 2 --launch-count 1 --import-source no --page source --csv --print-source sass python3 $R/tools/diag/kron_fwd_one.py $2 $3 $4 > $f.src.csv 2>/dev/null
  python3 $R/tools/diag/ncu_stalls.py $f.src.csv 10 | cut -c1-180
}
# diag_bsr_cuda_tests_half LIMIT: the bsr CUDA tests of half $HALF (1 or 2, default 1) of the
# collected ids, into $OUT/bsr_tests_half$HALF.txt, count and failures.
diag_bsr_cuda_tests_half() {
  python3 -m pytest $R/tests/python/test_bsr.py -q -p no:cacheprovider -m cuda --collect-only 2>/dev/null | grep "::" | sed "s|^|$R/|;s|^$R/$R/|$R/|" > /tmp/ids.txt
  local n h
  n=$(wc -l < /tmp/ids.txt); h=$(( (n + 1) / 2 ))
  if [ "${HALF:-1}" = 1 ]; then sed -n "1,${h}p" /tmp/ids.txt > /tmp/mine.txt; else sed -n "$((h + 1)),${n}p" /tmp/ids.txt > /tmp/mine.txt; fi
  echo "$n cuda tests, this half: $(wc -l < /tmp/mine.txt)"
  timeout $(cap $1) python3 -m pytest -q -p no:cacheprovider $(cat /tmp/mine.txt) > $OUT/bsr_tests_half${HALF:-1}.txt 2>&1
  echo "half ${HALF:-1}: $(tail -1 $OUT/bsr_tests_half${HALF:-1}.txt)"; grep -E "^FAILED|^ERROR" $OUT/bsr_tests_half${HALF:-1}.txt | head -5
}
# diag_bsr_sanitize LIMIT TOOL KEXPR NAME: compute-sanitizer TOOL (memcheck, racecheck) over the bsr
# CUDA tests matching KEXPR into $OUT/san_NAME.txt, its summary and the tests' line.
diag_bsr_sanitize() {
  timeout $(cap $1) compute-sanitizer --tool $2 --print-limit 5 python3 -m pytest $R/tests/python/test_bsr.py -q \
    -p no:cacheprovider -m cuda -k "$3" > $OUT/san_$4.txt 2>&1
  echo "$2 ($3): $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' $OUT/san_$4.txt | tail -1) | $(tail -1 $OUT/san_$4.txt)"
}
# diag_bsr_halves_start LIMIT: every bsr CUDA test, the two halves of the collected ids as two
# background processes on the one GPU (the tests are mostly host-bound), into
# $OUT/bsr_tests_half{1,2}.txt; the caller waits, then diag_bsr_halves_report prints them.
diag_bsr_halves_start() {
  python3 -m pytest $R/tests/python/test_bsr.py -q -p no:cacheprovider -m cuda --collect-only 2>/dev/null | grep "::" | sed "s|^|$R/|;s|^$R/$R/|$R/|" > /tmp/ids.txt
  local n h k
  n=$(wc -l < /tmp/ids.txt); h=$(( (n + 1) / 2 ))
  sed -n "1,${h}p" /tmp/ids.txt > /tmp/h1.txt; sed -n "$((h + 1)),${n}p" /tmp/ids.txt > /tmp/h2.txt
  echo "$n bsr cuda tests"
  for k in 1 2; do
    timeout $(cap $1) python3 -m pytest -q -p no:cacheprovider $(cat /tmp/h$k.txt) > $OUT/bsr_tests_half$k.txt 2>&1 &
  done
}
diag_bsr_halves_report() {
  local k
  for k in 1 2; do echo "bsr half $k: $(tail -1 $OUT/bsr_tests_half$k.txt)"; grep -E "^FAILED|^ERROR" $OUT/bsr_tests_half$k.txt | head -5; done
}
# diag_cuda_tests LIMIT NAME KEXPR FILE...: the CUDA tests of FILEs (under tests/python) matching
# KEXPR into $OUT/NAME.txt, their count and the first failures.
diag_cuda_tests() {
  local limit=$1 name=$2 kexpr=$3; shift 3
  timeout $(cap $limit) python3 -m pytest $(printf "$R/tests/python/%s " "$@") -q -p no:cacheprovider -m cuda \
    -k "$kexpr" > $OUT/$name.txt 2>&1
  echo "$name: $(tail -1 $OUT/$name.txt)"
  grep -E "^FAILED|^E  " $OUT/$name.txt | head -10
}
# diag_old_wheel_and_fresh_script: the wheel in .whl312_old/ unpacked into /tmp/oldpkg (run a
# command against it with PYTHONPATH=/tmp/oldpkg), and test_bsr.py's _FRESH_THREAD_CODE as
# /tmp/fresh.py (session 27).
diag_old_wheel_and_fresh_script() {
  python3 - > /tmp/fresh.py <<PY
import re; s = open("$R/tests/python/test_bsr.py").read()
print(re.search(r'_FRESH_THREAD_CODE = r"""(.*?)"""', s, re.S).group(1))
PY
  python3 -m pip install -q --no-deps --no-index --target /tmp/oldpkg $R/.whl312_old/sparsekern-*.whl > /tmp/old_inst.txt 2>&1 || tail -3 /tmp/old_inst.txt
}
# diag_all_cuda_tests LIMIT [FILE...]: every CUDA test on the one GPU, four processes: the bsr
# suite in two halves, kron, and the other files (plus FILEs under tests/python); the caller
# waits, then diag_all_cuda_tests_report prints each process's count and first failures.
diag_all_cuda_tests() {
  local limit=$1 T=$R/tests/python; shift
  diag_bsr_halves_start $limit
  timeout $(cap $limit) python3 -m pytest $T/test_kron.py -q -p no:cacheprovider -m cuda > $OUT/kron_tests.txt 2>&1 &
  timeout $(cap $limit) python3 -m pytest $T/test_dense.py $T/test_csr.py $T/test_semi.py $T/test_inplace.py \
    $T/test_autocast.py $T/test_dlpack_interop.py $T/test_integrations_bert.py $T/test_cpu_gemm.py \
    $T/test_bindings.py $T/test_capture.py ${1:+$(printf "$T/%s " "$@")} -q -p no:cacheprovider -m cuda -rs \
    > $OUT/other_tests.txt 2>&1 &
}
diag_all_cuda_tests_report() {
  local f
  diag_bsr_halves_report
  for f in kron_tests other_tests; do echo "$f: $(tail -1 $OUT/$f.txt)"; grep -E "^FAILED|^ERROR" $OUT/$f.txt | head -8; done
}
# diag_pytest NAME LIMIT ARGS...: pytest ARGS (paths under tests/python are given in full) into
# $OUT/NAME.txt within the cap LIMIT; diag_pytest_report NAME: its last line and first failures.
diag_pytest() {
  local name=$1 limit=$2; shift 2
  timeout $(cap $limit) python3 -m pytest -q -p no:cacheprovider "$@" > $OUT/$name.txt 2>&1
}
diag_pytest_report() {
  echo "$1: $(tail -1 $OUT/$1.txt)"; grep -E "^FAILED|^ERROR" $OUT/$1.txt | head -8 | cut -c1-200
}
# KRON_BWD_CASES: the small-factor products session 33 timed its backward changes on.
KRON_BWD_CASES=("1024 8,8,8,8" "1024 16,16,16" "4096 8,8,8,8" "4096 16,16,16" "1024 4,4,4,4,4" "1024 16,8,8"
                "256 16,16,16,16" "64 8,8,8,8,8")
# diag_kron_bwd_ab LIMIT CASE...: kron_bwd_times.py (forward and backward device µs) over the cases,
# with the previous wheel (.whl312_old) and this one alternated (diag_ab_wheels).
diag_kron_bwd_ab() {
  local lim=$1; shift
  KRON_AB_CASES=("$@")
  _kron_bwd_times() { (cd $R/tools/diag && timeout $(cap $lim) python3 kron_bwd_times.py "${KRON_AB_CASES[@]}"); }
  diag_ab_wheels _kron_bwd_times
}
# diag_kron_small_natural_tests LIMIT: the kron CUDA tests of the small-factor kernels and the natural
# split, count and failures.
diag_kron_small_natural_tests() {
  timeout $(cap $1) python3 -m pytest $R/tests/python/test_kron.py -q -p no:cacheprovider -m cuda -k "small or natural" \
    > $OUT/kron_small_tests.txt 2>&1
  echo "kron small/natural cuda tests: $(tail -1 $OUT/kron_small_tests.txt)"
  grep -E "^FAILED" $OUT/kron_small_tests.txt | head -5
}
# diag_all_cuda_tests_and_check LIMIT: diag_all_cuda_tests with `sparsekern check` (diag_check) as a
# fifth process beside them, then every report (session 35's full device runs).
diag_all_cuda_tests_and_check() {
  diag_all_cuda_tests $1
  diag_check $1 &
  wait
  diag_all_cuda_tests_report
}
# diag_ncu_kron_bwd_kept_src LIMIT CASE...: ncu source counters (csv into $OUT) of the kept-T0
# register-tile backward (kron_fast_bwd) per "BATCH P1,P2" case, and each one's opcode mix
# (session 36; tools/diag/ncu_regions.py groups such a csv by SASS region).
diag_ncu_kron_bwd_kept_src() {
  local lim=$1 c f; shift
  for c in "$@"; do
    f=$OUT/src_bwdkept_${c// /_}.csv; f=${f//,/x}
    timeout $(cap $lim) ncu --section SourceCounters --section WarpStateStats --kernel-name regex:kron_fast_bwd \
      --launch-skip 2 --launch-count 1 --import-source no --page source --csv --print-source sass \
      python3 $R/tools/diag/kron_bwd_kept.py $c > $f 2>/dev/null
    echo "== $c"; python3 $R/tools/diag/ncu_sass_mix.py $f 10 2>/dev/null | head -8
  done
}
# diag_kron_fast_ab_and_checks: session 36's A/B of the register-tile kernels (plain and training
# forwards, kept backward; .whl312_old against .whl312, alternated), then every kron CUDA test and
# memcheck / racecheck of the register-tile backward at the new wheel.
diag_kron_fast_ab_and_checks() {
  _kron_fast_times() {
    timeout $(cap 120) python3 $R/tools/diag/kron_fwd_times.py "1024 64,64" "4096 64,64" "1024 32,32" "16 32,32" \
      "32 64,64" "2048 32,32" "128 32,32,32" --save
  }
  diag_ab_wheels _kron_fast_times
  diag_kron_cuda_tests 250
  diag_kron_bwd_sanitize 400 520
}
