#pragma once
/// @file inplace.h
/// @brief In-place ops for memory-lean inference: softmax (and its backward), LayerNorm, RMSNorm
///        and the square product X ← X·W, each overwriting its input instead of allocating an output.

#include <sparsekern/dense.h>
#include <sparsekern/types.h>

namespace sparsekern::inplace {

/// The rows a row-wise op transforms: element j (0 ≤ j < cols) of row (o, i), 0 ≤ o < outer,
/// 0 ≤ i < inner, lives at `data + o*outer_stride + i*inner_stride + j*col_stride` (strides in
/// elements). Two row indices cover any tensor whose non-reduced dims collapse into at most two
/// strided dims; rows are independent, so their order does not matter. Rows must not overlap.
struct RowsView {
  void* data = nullptr;
  std::int64_t outer = 1;
  std::int64_t inner = 1;
  std::int64_t cols = 0;
  std::int64_t outer_stride = 0;
  std::int64_t inner_stride = 0;
  std::int64_t col_stride = 1;

  std::int64_t rows() const { return outer * inner; }
};

/// Parameters of the in-place softmax along each row of `x`:
///   x[r, j] ← exp(x[r, j] − m_r) / Σ_k exp(x[r, k] − m_r),   m_r = max_k x[r, k].
/// Accumulation in fp32 (fp64 for f64). A row whose entries are all −inf (fully masked) becomes
/// zeros, not NaN.
struct SoftmaxParams {
  DType dtype = DType::f32;
  Device device{};
  RowsView x{};
};

/// Runs the in-place softmax on `p.device` (CPU, or CUDA on `stream`). Throws InvalidArgument /
/// TypeMismatch / BackendUnavailable / CudaError; never synchronises the host.
void softmax(const SoftmaxParams& p, Stream stream);

/// Parameters of the in-place softmax backward, from the softmax output y:
///   g[r, j] ← y[r, j] · (g[r, j] − Σ_k g[r, k] · y[r, k])
/// (g holds dL/dy on entry and dL/dx on exit). `y` is read only and has the same outer, inner and
/// cols as `grad` (its own strides); the two must not overlap.
struct SoftmaxBackwardParams {
  DType dtype = DType::f32;
  Device device{};
  RowsView grad{};
  RowsView y{};
};

void softmax_backward(const SoftmaxBackwardParams& p, Stream stream);

/// Parameters of the in-place LayerNorm / RMSNorm over each row (the normalised dims, which must be
/// contiguous: `x.col_stride == 1`), with the elementwise affine applied in the same pass:
///   layer_norm: x ← (x − μ) / sqrt(σ² + eps) · weight + bias,  μ, σ² the row's mean and biased variance
///   rms_norm:   x ← x / sqrt(mean(x²) + eps) · weight
/// `weight` and `bias` are optional (nullptr = 1 and 0), contiguous vectors of `x.cols` elements of
/// `dtype` on `device`. rms_norm takes no bias.
struct NormParams {
  DType dtype = DType::f32;
  Device device{};
  RowsView x{};
  const void* weight = nullptr;
  const void* bias = nullptr;
  double eps = 1e-5;
};

void layer_norm(const NormParams& p, Stream stream);
void rms_norm(const NormParams& p, Stream stream);

/// Parameters of the in-place square product, one panel of rows at a time:
///   X ← X · W      (or X · Wᵀ with transpose_w), then X ← X + bias (broadcast over rows) if given.
/// X is rows × n, row-major (unit column stride, row stride ≥ n); W is n × n (any strides with a unit
/// stride along one dim). For each panel of `panel_rows` rows the product goes into the caller's
/// workspace, then is copied back over those rows of X; X's other rows are untouched until their
/// turn, and W must not overlap X.
struct SquareMatmulParams {
  DType dtype = DType::f32;
  Device device{};
  MutableMatrixView x{};      ///< rows × n, batch fields ignored
  MatrixView w{};             ///< n × n, batch fields ignored
  bool transpose_w = false;
  const void* bias = nullptr; ///< optional, n contiguous elements of `dtype`
  dense::Fp32Math fp32_math = dense::Fp32Math::ieee;
  bool allow_reduced_precision_reduction = true;  ///< as in dense::GemmParams
  Workspace workspace{};      ///< the panel buffer, ≥ square_matmul_workspace_size(dtype, rows, n)
  Workspace blas_workspace{}; ///< optional cuBLAS workspace (see dense::gemm_workspace_size)
};

void square_matmul(const SquareMatmulParams& p, Stream stream);

/// Bytes of the panel workspace square_matmul needs for X of rows × n: whole rows, at most
/// max(2% of X, 64 MiB) and never more than X itself (0 when X is empty).
std::size_t square_matmul_workspace_size(DType dtype, std::int64_t rows, std::int64_t n);

/// Rows per panel for that workspace: square_matmul_workspace_size() / (n · dtype_size).
std::int64_t square_matmul_panel_rows(DType dtype, std::int64_t rows, std::int64_t n);

}  // namespace sparsekern::inplace
