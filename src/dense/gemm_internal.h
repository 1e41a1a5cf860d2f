#pragma once
#include <sparsekern/dense.h>

namespace sparsekern::dense::detail {

/// Backend entry points behind sparsekern::dense::gemm(); `p` is already validated.
void gemm_cpu(const GemmParams& p);
void gemm_cuda(const GemmParams& p, Stream stream);
std::size_t gemm_workspace_size_cuda(int device);
/// Behind sparsekern::dense::transpose(); `p` is already validated.
void transpose_cpu(const TransposeParams& p);
void transpose_cuda(const TransposeParams& p, Stream stream);

}  // namespace sparsekern::dense::detail
