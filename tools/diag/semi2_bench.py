"""Diagnostics of the 2:4 (semi) family on the GPU, one configuration per process (see semi3.sh).

usage: python3 semi2_bench.py torch|ours|backward|sanitize|info [dtype]
Times with CUDA events (median of 7 x 20 calls after warm-up), rel errors against float64.
"""
from __future__ import annotations

import json
import os
import sys
import time

import torch
import torch.nn.functional as F

from diag_timing import burst_ms

M, K, N = 8192, 4096, 4096


def med_ms(fn, iters=20, reps=7):
    return burst_ms(fn, calls=iters, reps=reps)


def once_ms(fn):
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    fn()
    b.record()
    b.synchronize()
    return a.elapsed_time(b)


def rel(y, ref):
    return ((y.double() - ref).norm() / ref.norm()).item()


def problem(dtype, m=M, k=K, n=N, seed=0):
    import sparsekern as sk
    torch.manual_seed(seed)
    layer = sk.SemiStructuredLinear(k, n, device="cuda", dtype=dtype).requires_grad_(False)
    x = torch.randn(m, k, device="cuda", dtype=dtype)
    w = (layer.weight * layer.mask).contiguous()
    ref = F.linear(x.double(), w.double(), layer.bias.double())
    return layer, x, w, ref


def row(**kw):
    print("ROW " + json.dumps(kw), flush=True)


def run_torch(dtype):
    layer, x, w, ref = problem(dtype)
    b = layer.bias
    t_dense = med_ms(lambda: F.linear(x, w, b))
    row(cfg="torch dense F.linear", dtype=str(dtype), ms=t_dense, rel_err=rel(F.linear(x, w, b), ref))
    try:
        c = torch._cslt_compress(w)
        for tr in (False, True):
            def f(tr=tr, alg=0):
                r = torch._cslt_sparse_mm(c, x.t(), b, transpose_result=tr, alg_id=alg)
                return r.t() if not tr else r
            y = f()
            cfg = f"torch _cslt_sparse_mm(c, x.t(), bias) transpose_result={tr} alg 0"
            one = once_ms(f)
            if one > 10 * t_dense:  # fp16 transpose_result=True took 165 ms per call on an H200: no median
                row(cfg=cfg + " (one call; too slow for a median)", dtype=str(dtype), ms=one, rel_err=rel(y, ref),
                    vs_dense=one / t_dense)
                continue
            t = med_ms(f)
            row(cfg=cfg, dtype=str(dtype), ms=t, rel_err=rel(y, ref), vs_dense=t / t_dense)
            if not tr:
                f3 = lambda: f().contiguous()  # noqa: E731 - what a contiguous result costs on top
                t3 = med_ms(f3)
                row(cfg=cfg + " + .t().contiguous()", dtype=str(dtype), ms=t3, vs_dense=t3 / t_dense)
        try:
            alg = torch._cslt_sparse_mm_search(c, x.t(), b)
            f = lambda: torch._cslt_sparse_mm(c, x.t(), b, alg_id=alg).t()  # noqa: E731
            t = med_ms(f)
            row(cfg=f"torch _cslt_sparse_mm searched alg {alg}", dtype=str(dtype), ms=t,
                rel_err=rel(f(), ref), vs_dense=t / t_dense)
        except Exception as e:  # noqa: BLE001
            row(cfg="torch _cslt_sparse_mm_search", dtype=str(dtype), error=repr(e))
    except Exception as e:  # noqa: BLE001
        row(cfg="torch _cslt", dtype=str(dtype), error=repr(e))
    from torch.sparse import SparseSemiStructuredTensor, to_sparse_semi_structured
    for force_cutlass in (False, True):
        try:
            SparseSemiStructuredTensor._FORCE_CUTLASS = force_cutlass
            ws = to_sparse_semi_structured(w)
            f = lambda: F.linear(x, ws, b)  # noqa: E731
            row(cfg=f"torch to_sparse_semi_structured+F.linear ({type(ws).__name__})", dtype=str(dtype),
                ms=med_ms(f), rel_err=rel(f(), ref), vs_dense=med_ms(f) / t_dense)
        except Exception as e:  # noqa: BLE001
            row(cfg=f"torch to_sparse_semi_structured force_cutlass={force_cutlass}", dtype=str(dtype), error=repr(e))


def run_ours(dtype, m=M):
    from sparsekern import semi
    layer, x, w, ref = problem(dtype, m=m)
    t0 = time.perf_counter()
    y = layer(x)
    torch.cuda.synchronize()
    first = time.perf_counter() - t0
    t_dense = med_ms(lambda: F.linear(x, w, layer.bias))
    t = med_ms(lambda: layer(x))
    yt_buf = torch.empty(y.shape[1], y.shape[0], dtype=dtype, device="cuda")
    t_copy = med_ms(lambda: yt_buf.t().contiguous())
    print(f"  output transpose copy alone ({y.shape[1]}x{y.shape[0]} -> contiguous): {t_copy:.4f} ms; "
          f"output contiguous: {y.is_contiguous()}", flush=True)
    env = {k: v for k, v in os.environ.items() if k.startswith("SPARSEKERN_SEMI")}
    rep = semi.search_report()
    chosen = rep[-1]["chosen"] if rep else "?"
    row(cfg=f"ours {env}", dtype=str(dtype), m=m, ms=t, dense_ms=t_dense, vs_dense=t / t_dense, rel_err=rel(y, ref),
        first_call_s=first, chosen=chosen, stats=semi.semi_plan_stats())
    if rep:
        cands = sorted([c for c in rep[-1]["candidates"] if "ms" in c], key=lambda c: c["ms"])[:10]
        print("  fastest candidates:", flush=True)
        for c in cands:
            print("   ", json.dumps(c), flush=True)
        defaults = [c for c in rep[-1]["candidates"] if c.get("default")]
        print("  default configurations (alg = the id cuSPARSELt's default settled on):", json.dumps(defaults), flush=True)
        errs = [c for c in rep[-1]["candidates"] if "error" in c]
        print(f"  {len(rep[-1]['candidates'])} candidates, {len(errs)} with errors:", flush=True)
        for c in errs[:30]:
            print("   ", json.dumps(c)[:400], flush=True)


def run_backward(dtype):
    import sparsekern as sk
    torch.manual_seed(0)
    layer = sk.SemiStructuredLinear(K, N, device="cuda", dtype=dtype)
    dw = (layer.weight.detach() * layer.mask).clone().requires_grad_()
    db = layer.bias.detach().clone().requires_grad_()
    x = torch.randn(M, K, device="cuda", dtype=dtype, requires_grad=True)
    go = torch.randn(M, N, device="cuda", dtype=dtype)
    ours = lambda: torch.autograd.grad(layer(x), (x, layer.weight, layer.bias), go)  # noqa: E731
    dense = lambda: torch.autograd.grad(F.linear(x, dw, db), (x, dw, db), go)  # noqa: E731
    gx, gw, gb = ours()
    rx, rw, rb = torch.autograd.grad(F.linear(x.double(), dw.double(), db.double()), (x, dw, db), go.double())
    t_o, t_d = med_ms(ours, iters=5), med_ms(dense, iters=5)
    row(cfg="fwd+bwd ours vs dense", dtype=str(dtype), ms=t_o, dense_ms=t_d, vs_dense=t_o / t_d,
        rel_err_gx=rel(gx, rx.double()), rel_err_gw=rel(gw, (rw * layer.mask).double()), rel_err_gb=rel(gb, rb.double()))


def run_sanitize():
    for dtype in (torch.float16, torch.bfloat16):
        layer, x, w, ref = problem(dtype, m=40, k=96, n=48)
        row(cfg="sanitize small", dtype=str(dtype), rel_err=rel(layer(x), ref))
    torch.cuda.synchronize()


def info():
    import sparsekern as sk
    from sparsekern import _C, semi
    print("torch", torch.__version__, "cuda", torch.version.cuda, "cusparselt(torch)",
          torch.backends.cusparselt.version() if hasattr(torch.backends, "cusparselt") else "?")
    print("sparsekern at", os.path.dirname(sk.__file__), "built_with_cusparselt", _C.semi_built_with_cusparselt())
    print("cusparselt_enabled (default backend)", semi.cusparselt_enabled(), "load error:", semi._load_error)
    print("cuSPARSELt loaded version", _C.semi_cusparselt_version(), "header version", _C.semi_cusparselt_header_version())
    with open("/proc/self/maps") as f:
        libs = sorted({ln.split()[-1] for ln in f if "cusparseLt" in ln})
    print("libcusparseLt mapped:", libs)


if __name__ == "__main__":
    what = sys.argv[1]
    dt = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(sys.argv[2] if len(sys.argv) > 2 else "fp16")
    if what == "info":
        info()
    elif what == "torch":
        run_torch(dt)
    elif what == "ours":
        run_ours(dt, m=int(sys.argv[3]) if len(sys.argv) > 3 else M)
    elif what == "backward":
        run_backward(dt)
    elif what == "sanitize":
        run_sanitize()
