#pragma once
// Backend entry points of the in-place family, behind the dispatchers in rows.cpp and
// square_matmul.cpp. Arguments are already validated there.
#include <sparsekern/inplace.h>

namespace sparsekern::inplace::detail {

void softmax_cpu(const SoftmaxParams& p);
void softmax_backward_cpu(const SoftmaxBackwardParams& p);
void layer_norm_cpu(const NormParams& p);
void rms_norm_cpu(const NormParams& p);
/// Rows [row0, row0 + rows) of x ← panel (+ bias), panel row-major with `p.x.cols` columns.
void copy_panel_cpu(const SquareMatmulParams& p, std::int64_t row0, std::int64_t rows, const void* panel);

void softmax_cuda(const SoftmaxParams& p, Stream stream);
void softmax_backward_cuda(const SoftmaxBackwardParams& p, Stream stream);
void layer_norm_cuda(const NormParams& p, Stream stream);
void rms_norm_cuda(const NormParams& p, Stream stream);
void copy_panel_cuda(const SquareMatmulParams& p, std::int64_t row0, std::int64_t rows, const void* panel,
                     Stream stream);

}  // namespace sparsekern::inplace::detail
