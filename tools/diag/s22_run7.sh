#!/usr/bin/env bash
# Session 22, call 7: the TF32 dense-path sdd with the smaller operand transposed first (sdd_dense in
# bsr_cuda.cu), against the previous wheel's dense path and the sampled kernels, to re-place the
# TF32 dense thresholds (sdd_dense_min_density): tools/diag/bsr_sdd_dense.py, kernel µs summed
# (copy + cuBLAS + gather), at 4096 → 4096 and the BERT-base shapes, 8192 rows. Then the dense-path
# and workspace tests.
source "$(dirname "$0")/lib.sh"
run() {
  cd $R/tools/diag
  SDD_SHAPES=$1 SDD_BLOCKS=$2 SDD_DENSITIES=$3 SPARSEKERN_BSR_SDD_DENSE=$4 timeout $(cap 540) python3 bsr_sdd_dense.py tf32 2>&1 | grep -v -i warn
  cd /tmp
}
sweep() {
  run 4096x4096 16 0.05,0.1,0.15 $1
  run 4096x4096 32 0.1,0.15,0.2,0.25 $1
  run 4096x4096 64 0.25,0.3,0.35,0.4,0.45 $1
  run 4096x4096 128 0.4,0.5,0.6,0.7 $1
  run 3072x768,768x3072 32 0.1,0.2 $1
  run 3072x768,768x3072 64 0.25,0.4 $1
  run 3072x768,768x3072 128 0.4,0.6 $1
}
python3 -m pip install -q --no-deps --no-index --force-reinstall $R/.whl312_old/sparsekern-*.whl > /tmp/inst.txt 2>&1
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
rm -f $OUT/*; diag_env; cd /tmp; diag_start
echo "== previous wheel, dense path forced"; sweep 1 | tee $OUT/dense_old.txt
diag_install_wheel > /dev/null
echo "== this wheel, dense path forced"; sweep 1 | tee $OUT/dense_new.txt
echo "== this wheel, sampled kernels"; sweep 0 | tee $OUT/sampled.txt
diag_bsr_cuda_tests 150 "sdd_dense or workspace"
echo "total $((SECONDS - T0))s"
