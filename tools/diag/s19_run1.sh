#!/usr/bin/env bash
# Session 19, call 1: the register-tile forward with a block's first X tile in parts along k
# (split=1/2/4) against the previous wheel, interleaved twice; the kron CUDA tests; memcheck and
# racecheck over the forward's plan variants (tools/diag/kron_race.py, now with split cases).
source "$(dirname "$0")/lib.sh"
CASES=("1024 32,32" "1024 64,64" "4096 64,64" "2048 64,64" "128 32,32,32" "16 32,32")
ab() {
  local sels="new"
  python3 -c "import sparsekern._C as C; C.kron_set_forward_kernel('new:split=2')" 2>/dev/null && sels="new:split=1;new:split=2;new:split=4;auto"
  timeout $(cap 260) python3 $R/tools/diag/kron_sel_times.py --sel "$sels" --rounds 1 --save "${CASES[@]}"
}
diag_ab_wheels ab
diag_kron_cuda_tests 520
timeout $(cap 560) compute-sanitizer --tool memcheck python3 $R/tools/diag/kron_race.py > /tmp/san_m.txt 2>&1
echo "memcheck: $(grep -E 'ERROR SUMMARY|kron_race:' /tmp/san_m.txt | tr '\n' ' ')"
timeout $(cap 590) compute-sanitizer --tool racecheck python3 $R/tools/diag/kron_race.py > /tmp/san_r.txt 2>&1
echo "racecheck: $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY|kron_race:' /tmp/san_r.txt | tr '\n' ' ')"
grep BAD /tmp/san_m.txt /tmp/san_r.txt | head
echo "total $((SECONDS - T0))s"
