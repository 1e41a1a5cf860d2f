#!/usr/bin/env bash
# Session 29, call 2: every CUDA test again with this tree's Python package at the end of the
# session (the audit fixes: forward AD / torch.func refused, in-place ops under compile and their
# version counters, bsr checkpoints and patcher, kron arguments), the two new CPU-only test files
# against the CUDA build, and the compiled in-place ops' gradients on the GPU with inductor.
source "$(dirname "$0")/lib.sh"
diag_begin_wheel
SP=$(python3 -c "import sparsekern,os;print(os.path.dirname(sparsekern.__file__))"); cp $R/python/sparsekern/*.py $SP/
T=$R/tests/python
diag_all_cuda_tests 560
timeout $(cap 560) python3 -m pytest $T/test_api_edges.py $T/test_bsr_edges.py -q -p no:cacheprovider > $OUT/edges_tests.txt 2>&1 &
timeout $(cap 300) python3 - > $OUT/compile_inplace.txt 2>&1 <<'PY' &
import torch, sparsekern as sk
torch.manual_seed(0)
w = torch.randn(256, 256, device="cuda")
for name, fn, ref in [("inplace_softmax", lambda t: sk.inplace_softmax(t * 1), lambda t: torch.softmax(t, -1)),
                      ("square_matmul", lambda t: sk.square_matmul(t * 1, w), lambda t: t @ w)]:
    for fullgraph in (False, True):
        x = torch.randn(64, 256, device="cuda", requires_grad=True)
        g = torch.randn(64, 256, device="cuda")
        torch._dynamo.reset()
        y = torch.compile(fn, fullgraph=fullgraph)(x)  # inductor
        (y * g).sum().backward()
        x2 = x.detach().double().requires_grad_()
        (ref(x2) * g.double()).sum().backward() if name == "inplace_softmax" else (x2 @ w.double() * g.double()).sum().backward()
        err = ((x.grad.double() - x2.grad).norm() / x2.grad.norm()).item()
        print(f"{name} inductor fullgraph={fullgraph}: grad rel err vs float64 {err:.2e}", "ok" if err < 1e-2 else "WRONG")
PY
wait
diag_all_cuda_tests_report
echo "edges_tests: $(tail -1 $OUT/edges_tests.txt)"; grep -E "^FAILED|^ERROR" $OUT/edges_tests.txt | head -8
cat $OUT/compile_inplace.txt | grep -v Warn | tail -6
echo "total $((SECONDS - T0))s"
