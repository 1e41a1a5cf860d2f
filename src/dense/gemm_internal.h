#pragma once
#include <sparsekern/dense.h>

namespace sparsekern::dense::detail {

/// Backend entry points behind sparsekern::dense::gemm(); `p` is already validated.
void gemm_cpu(const GemmParams& p);
void gemm_cuda(const GemmParams& p, Stream stream);
std::size_t gemm_workspace_size_cuda(int device);

}  // namespace sparsekern::dense::detail
