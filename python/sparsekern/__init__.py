"""sparsekern: structured and sparse matrix products for deep learning, on CPU and CUDA.

The native library (libsparsekern) is reached through the private ``sparsekern._C`` module; this
package adds autograd, ``torch.library`` custom ops, modules and the ``sparsekern`` CLI.
"""
from __future__ import annotations

import atexit as _atexit

import torch as _torch  # noqa: F401  (loads the CUDA libraries torch ships before ours)

from . import _C, bsr, compat, integrations, nn
from .bsr import BlockSparseMatrix
from .csr import CSRMatrix, SparseLinear, csr_clear_cache, csr_matmul, csr_plan_stats, csr_sddmm
from .dense import matmul, matmul_transb
from .inplace import (
    inplace_layer_norm,
    inplace_linear,
    inplace_rms_norm,
    inplace_softmax,
    inplace_softmax_backward,
    square_matmul,
    square_matmul_workspace_size,
)
from .kron import KronLinear, kron_matmul
from .nn import BlockSparseLinear, BlockSparseModelPatcher
from .semi import SemiStructuredLinear, prune_2to4, semi_plan_stats

__version__ = _C.version()

__all__ = ["matmul", "matmul_transb", "built_with_cuda", "cuda_available", "__version__",
           "CSRMatrix", "csr_matmul", "csr_sddmm", "SparseLinear", "csr_plan_stats", "csr_clear_cache",
           "SemiStructuredLinear", "prune_2to4", "semi_plan_stats",
           "inplace_softmax", "inplace_softmax_backward", "inplace_layer_norm", "inplace_rms_norm",
           "square_matmul", "square_matmul_workspace_size", "inplace_linear",
           "kron_matmul", "KronLinear",
           "bsr", "nn", "BlockSparseMatrix", "BlockSparseLinear", "BlockSparseModelPatcher"]


def built_with_cuda() -> bool:
    """Whether this build has the CUDA backend."""
    return bool(_C.built_with_cuda())


def cuda_available() -> bool:
    """Whether CUDA ops can run here: a CUDA build and at least one visible device."""
    return built_with_cuda() and _C.cuda_device_count() > 0


def _release_at_exit() -> None:
    import gc

    from . import _core, csr, semi

    # Plans hold cuSPARSE / cuSPARSELt state: release them before the handles, and before nanobind
    # checks for leaked instances at interpreter teardown. Each step runs even if an earlier one
    # raised (e.g. after a sticky CUDA error), so no cached plan outlives the module.
    for step in (csr_clear_cache, csr.release_graph_buffers, semi._clear, gc.collect, _core.release_workspaces,
                 _C.destroy_handles):
        try:
            step()
        except Exception:  # noqa: BLE001 - at exit there is no caller left to report to
            pass


_atexit.register(_release_at_exit)
