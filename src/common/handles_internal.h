#pragma once
// Internal access to the per-(device, thread) library handles. Only for CUDA-backend sources.

#include <cublas_v2.h>
#include <cusparse.h>

#include <sparsekern/types.h>

namespace sparsekern::detail {

/// The calling thread's cuBLAS handle for `device`, created on first use, bound to `stream`
/// and to `workspace` (cublasSetStream resets the workspace, so both are set on every call).
/// `device` must be current.
cublasHandle_t cublas_handle(int device, Stream stream, Workspace workspace);

/// The calling thread's cuSPARSE handle for `device`, created on first use, bound to `stream`.
cusparseHandle_t cusparse_handle(int device, Stream stream);

}  // namespace sparsekern::detail
