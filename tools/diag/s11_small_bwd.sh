#!/usr/bin/env bash
# Session 11 (about 3 minutes of device time left, too little for a build on the GPU machine): the
# small-factor backward (kron_small_bwd.h) from a cp312 abi3 wheel built on the CPU machine for
# sm_90a (`pip wheel --no-build-isolation --no-deps . -Ccmake.define.CMAKE_CUDA_ARCHITECTURES=90a-real`
# under Python 3.12, with SPARSEKERN_CUDA=ON), carried in .whl312/: its CUDA tests, its times next
# to the default backward's (tools/diag/kron_bwd_small.py), and compute-sanitizer memcheck and
# racecheck over two of its cases.
source "$(dirname "$0")/lib.sh"
python3 -m pip install -q --no-deps --no-index --force-reinstall $R/.whl312/sparsekern-*.whl > /tmp/inst.txt 2>&1 || { tail -5 /tmp/inst.txt; exit 1; }
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
cd /tmp
diag_start
diag_env
timeout $(cap 40) python3 -m pytest $R/tests/python/test_kron.py -q -p no:cacheprovider -m cuda -k "backward_small" > $OUT/small_bwd_tests.txt 2>&1
echo "small bwd cuda tests: $(tail -1 $OUT/small_bwd_tests.txt)"; grep -E "^FAILED|Error" $OUT/small_bwd_tests.txt | head -5
cd $R/tools/diag && timeout $(cap 80) python3 kron_bwd_small.py $OUT/kron_bwd_small.json; cd /tmp
cat > /tmp/san.py <<'PY'
import torch
from sparsekern import _C, kron as K
_C.kron_set_backward_kernel("small:grid=5")
for b, ps in [(37, [8, 8, 8, 8]), (9, [32, 32])]:
    x = torch.randn(b, 1024, device="cuda"); fs = [torch.randn(p, p, device="cuda") for p in ps]
    g = torch.randn(b, 1024, device="cuda")
    out = K._backward(x, fs, g, [True] * (len(fs) + 1))
    torch.cuda.synchronize()
print("cases ok")
PY
for tool in memcheck racecheck; do
  timeout $(cap 110) compute-sanitizer --tool $tool python3 /tmp/san.py > $OUT/san_$tool.txt 2>&1
  echo "$tool: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|cases ok' $OUT/san_$tool.txt | tr '\n' ' ')"
done
echo "total $((SECONDS - T0))s"
