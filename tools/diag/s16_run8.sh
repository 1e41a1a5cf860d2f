#!/usr/bin/env bash
# Session 16, call 8: SPARSEKERN_BSR_TMA_STORE read through bsr_cuda.cu's auto/0/1 parser and passed
# in tc::TcParams (the grouped dds's epilogue branch now an if constexpr): the bsr dds CUDA tests
# (forced kernels, register epilogue, malformed switches included), then the kernel A/B against the
# previous build (gdds_trace_s10) to show the restructure costs nothing.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
timeout $(cap 240) python3 -m pytest $R/tests/python/test_bsr.py -q -p no:cacheprovider -m cuda -k "dds or grouped or panels or env_switch" > $OUT/bsr_tests.txt 2>&1
echo "bsr cuda tests: $(tail -1 $OUT/bsr_tests.txt)"; grep -E "^FAILED|^ERROR" $OUT/bsr_tests.txt | head -5
cd $R
BINS="gdds_trace_s10 gdds_trace_s11" SHAPES="8192 4096 4096 128 0.1 2;8192 4096 4096 128 0.25 2;8192 4096 4096 64 0.25 2" \
  timeout $(cap 330) bash tools/diag/s16_run4.sh | grep -v samples
echo "total $((SECONDS - T0))s after install"
