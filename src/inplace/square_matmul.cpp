// Dispatch point of the in-place square product X ← X·W (+ bias). X is processed one panel of rows
// at a time: the panel's product goes into the caller's workspace through dense::gemm (cuBLAS on
// CUDA, the blocked kernel on the CPU), then the backend copies it back over the panel's rows.
// Row i of the result depends only on row i of X, so overwriting finished panels is safe.
#include <algorithm>
#include <climits>

#include "../common/check.h"
#include "inplace_internal.h"

namespace sparsekern::inplace {
namespace {

using sparsekern::detail::device_name;

// The bound of the issue: a panel may take max(2% of X, 64 MiB), never a full-size copy of a large X.
constexpr std::int64_t kMinPanelBytes = std::int64_t(64) << 20;
// cuBLAS's Hopper/Ampere tiles span 128 or 256 rows of X: a panel of whole 256-row tiles leaves the
// ragged tile to the last panel only, instead of one partial wave per panel.
constexpr std::int64_t kPanelRowMultiple = 256;

std::int64_t panel_rows_for(std::int64_t rows, std::int64_t row_bytes, std::int64_t budget_bytes) {
  std::int64_t panel = std::min(rows, std::max<std::int64_t>(1, budget_bytes / row_bytes));
  panel = std::min<std::int64_t>(panel, INT_MAX);  // cuBLAS takes int sizes
  if (panel < rows && panel >= kPanelRowMultiple) panel -= panel % kPanelRowMultiple;
  return panel;
}

}  // namespace

std::int64_t square_matmul_panel_rows(DType dtype, std::int64_t rows, std::int64_t n) {
  SK_EXPECTS(rows >= 0 && n >= 0, "square_matmul_workspace_size: `rows` and `n` must be non-negative; got ",
             rows, " and ", n);
  if (rows == 0 || n == 0) return 0;
  SK_EXPECTS(::sparsekern::detail::checked_product({rows, n, static_cast<std::int64_t>(dtype_size(dtype))}) >= 0,
             "square_matmul_workspace_size: ", rows, " rows of ", n, " elements overflow 64-bit byte counts");
  const std::int64_t row_bytes = n * static_cast<std::int64_t>(dtype_size(dtype));
  return panel_rows_for(rows, row_bytes, std::max(rows * row_bytes / 50, kMinPanelBytes));
}

std::size_t square_matmul_workspace_size(DType dtype, std::int64_t rows, std::int64_t n) {
  return static_cast<std::size_t>(square_matmul_panel_rows(dtype, rows, n) * n) * dtype_size(dtype);
}

void square_matmul(const SquareMatmulParams& p, Stream stream) {
  const std::int64_t rows = p.x.rows, n = p.x.cols;
  const std::int64_t elem = static_cast<std::int64_t>(dtype_size(p.dtype));
  SK_EXPECTS(rows >= 0 && n >= 0, "square_matmul: `x` sizes must be non-negative; got ", rows, "x", n);
  SK_EXPECTS(p.w.rows == n && p.w.cols == n, "square_matmul: `w` must be square ", n, "x", n,
             " (the last dim of `x`); got ", p.w.rows, "x", p.w.cols);
  SK_EXPECTS(p.x.col_stride == 1 || n <= 1,
             "square_matmul: `x` must have a unit stride along its last dim; got stride ", p.x.col_stride);
  SK_EXPECTS(p.x.row_stride >= n || rows <= 1, "square_matmul: `x` rows must not overlap (row stride ",
             p.x.row_stride, " < ", n, ")");
  SK_EXPECTS(p.w.row_stride >= 0 && p.w.col_stride >= 0, "square_matmul: `w` must have non-negative strides");
  if (rows == 0 || n == 0) return;
  SK_EXPECTS(p.x.data != nullptr && p.w.data != nullptr, "square_matmul: `x` or `w` has a null data pointer");

  using ::sparsekern::detail::ranges_overlap;
  using ::sparsekern::detail::span_elements;
  const std::int64_t x_span = span_elements({{rows, p.x.row_stride}, {n, 1}}, elem);
  const std::int64_t w_span = span_elements({{n, p.w.row_stride}, {n, p.w.col_stride}}, elem);
  SK_EXPECTS(x_span >= 0 && w_span >= 0, "square_matmul: `x` (", rows, "x", n, ", row stride ", p.x.row_stride,
             ") or `w` (strides ", p.w.row_stride, ", ", p.w.col_stride, ") overflows 64-bit byte offsets");
  const std::int64_t x_bytes = x_span * elem, w_bytes = w_span * elem;
  const auto overlap = [](const void* a, std::int64_t a_bytes, const void* b, std::int64_t b_bytes) {
    return ranges_overlap(a, a_bytes, b, b_bytes, 1);
  };
  SK_EXPECTS(!overlap(p.x.data, x_bytes, p.w.data, w_bytes),
             "square_matmul: `w` must not share memory with `x` (x is overwritten while w is read)");
  SK_EXPECTS(p.bias == nullptr || !overlap(p.x.data, x_bytes, p.bias, n * elem),
             "square_matmul: `bias` must not share memory with `x`");
  const std::int64_t row_bytes = n * elem;
  const auto ws_bytes = static_cast<std::int64_t>(p.workspace.bytes);
  SK_EXPECTS(p.workspace.data != nullptr && ws_bytes >= row_bytes, "square_matmul: `workspace` must hold at least one row of `x` (",
             row_bytes, " bytes; square_matmul_workspace_size() gives the recommended size); got ", ws_bytes,
             " bytes");
  SK_EXPECTS(!overlap(p.workspace.data, ws_bytes, p.x.data, x_bytes) &&
                 !overlap(p.workspace.data, ws_bytes, p.w.data, w_bytes),
             "square_matmul: `workspace` must not share memory with `x` or `w`");
  SK_EXPECTS(p.bias == nullptr || !overlap(p.workspace.data, ws_bytes, p.bias, n * elem),
             "square_matmul: `bias` must not share memory with `workspace`");
#if !SPARSEKERN_WITH_CUDA
  if (p.device.type != DeviceType::cpu)
    throw BackendUnavailable("square_matmul: operands are on " + device_name(p.device) +
                             " but sparsekern was built without CUDA (CPU-only build)");
#endif

  const std::int64_t panel = panel_rows_for(rows, row_bytes, ws_bytes);
  dense::GemmParams g;
  g.dtype = p.dtype;
  g.device = p.device;
  g.batch = 1;
  // op(W) as a k × n view: Wᵀ is W with its strides swapped (no copy).
  g.b = p.transpose_w ? MatrixView{p.w.data, n, n, p.w.col_stride, p.w.row_stride, 0}
                      : MatrixView{p.w.data, n, n, p.w.row_stride, p.w.col_stride, 0};
  g.fp32_math = p.fp32_math;
  g.allow_reduced_precision_reduction = p.allow_reduced_precision_reduction;
  g.workspace = p.blas_workspace;
  for (std::int64_t row0 = 0; row0 < rows; row0 += panel) {
    const std::int64_t h = std::min(panel, rows - row0);
    g.a = MatrixView{static_cast<const char*>(p.x.data) + row0 * p.x.row_stride * elem, h, n,
                     h > 1 ? p.x.row_stride : n, 1, 0};
    g.c = MutableMatrixView{p.workspace.data, h, n, n, 1, 0};
    dense::gemm(g, stream);
    if (p.device.type == DeviceType::cpu) {
      detail::copy_panel_cpu(p, row0, h, p.workspace.data);
    } else {
#if SPARSEKERN_WITH_CUDA
      detail::copy_panel_cuda(p, row0, h, p.workspace.data, stream);
#endif
    }
  }
}

}  // namespace sparsekern::inplace
