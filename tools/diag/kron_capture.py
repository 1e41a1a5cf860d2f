"""Which part of a kron forward + backward fails under CUDA graph capture (session 6: the bench's
device-time backward rows failed with cudaErrorStreamCaptureInvalidated). Captures, each in a
fresh graph: ours fwd (grad-requiring inputs), ours fwd+bwd (fused and steps backward), v2 fwd+bwd;
in the default ("global") and "relaxed" capture error modes. Prints one line per attempt."""
import os, math, traceback, torch
import sparsekern
from sparsekern.kron import kron_matmul, kron_reference

dev = torch.device("cuda")


def attempt(name, fn, mode):
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(g, capture_error_mode=mode):
            fn()
        g.replay()
        torch.cuda.synchronize()
        print(f"{name:34s} {mode:8s} ok", flush=True)
    except Exception as e:  # noqa: BLE001
        tb = traceback.format_exc().strip().splitlines()
        where = [l.strip() for l in tb if "sparsekern" in l and "File" in l][-2:]
        print(f"{name:34s} {mode:8s} FAIL {type(e).__name__}: {str(e).splitlines()[0][:90]} | {where}", flush=True)
        torch.cuda.synchronize()


for batch, sizes in [(1024, [32, 32]), (32, [128, 128]), (1024, [8, 8, 8, 8])]:
    P = math.prod(sizes)
    x = torch.randn(batch, P, device=dev, requires_grad=True)
    fs = [(torch.randn(s, s, device=dev) / math.sqrt(s)).requires_grad_() for s in sizes]
    gy = torch.randn(batch, P, device=dev)
    tag = f"{batch}x{sizes}"
    for mode in ("global", "relaxed"):
        attempt(f"{tag} ours fwd", lambda: kron_matmul(x, fs), mode)
        for bwd in ("fused", "steps"):
            os.environ["SPARSEKERN_KRON_BWD"] = bwd
            attempt(f"{tag} ours fwd+bwd {bwd}", lambda: torch.autograd.grad(kron_matmul(x, fs), [x, *fs], gy), mode)
        os.environ.pop("SPARSEKERN_KRON_BWD", None)
        attempt(f"{tag} v2 fwd+bwd", lambda: torch.autograd.grad(kron_reference(x, fs), [x, *fs], gy), mode)
