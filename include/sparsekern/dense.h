#pragma once
/// @file dense.h
/// @brief Dense (batched) matrix products through cuBLAS on CUDA and a blocked kernel on the CPU.

#include <sparsekern/types.h>

namespace sparsekern::dense {

/// How fp32 products may use the tensor cores.
enum class Fp32Math : int {
  ieee = 0,  ///< full fp32 arithmetic (torch.backends.cuda.matmul.allow_tf32 == False)
  tf32 = 1,  ///< TF32 tensor cores allowed (allow_tf32 == True)
};

/// Parameters of C[b] = alpha · A[b] · B[b] + beta · C[b] for b in [0, batch).
///
/// A is m×k, B is k×n, C is m×n; all three share `dtype` and `device`. Operands are strided views
/// (see MatrixView), so a transposed operand is expressed by swapping its strides, not by a copy.
/// On CUDA, each of A and B must have a unit stride along one of its two dims; C must be row-major
/// with a unit column stride. Accumulation is in fp32 for f16/bf16/f32 and fp64 for f64.
struct GemmParams {
  DType dtype = DType::f32;
  Device device{};
  std::int64_t batch = 1;
  MatrixView a{};         ///< m × k
  MatrixView b{};         ///< k × n
  MutableMatrixView c{};  ///< m × n
  double alpha = 1.0;
  double beta = 0.0;      ///< 0 means C is write-only (its old contents, even NaN, are ignored)
  Fp32Math fp32_math = Fp32Math::ieee;
  /// f16/bf16 only: allow cuBLAS reduced-precision split-K reductions (torch's
  /// allow_fp16_reduced_precision_reduction / allow_bf16_reduced_precision_reduction).
  bool allow_reduced_precision_reduction = true;
  Workspace workspace{};  ///< optional cuBLAS workspace, see gemm_workspace_size()
};

/// Validates `p` and runs the product on `p.device` (CPU, or CUDA on `stream`). Throws
/// InvalidArgument / TypeMismatch / BackendUnavailable / CudaError; never synchronises the host.
void gemm(const GemmParams& p, Stream stream);

/// Workspace size (bytes) that lets cuBLAS pick its fastest algorithms on `device` (the same
/// size PyTorch gives cuBLAS on that architecture). 0 for the CPU.
std::size_t gemm_workspace_size(Device device);

/// Parameters of out = inᵀ: `in` is rows × cols, `out` cols × rows, both with a unit column stride
/// (row strides ≥ their row lengths; batch_stride ignored), any dtype, not overlapping. The
/// transposed copy that a layout change needs (e.g. the Kronecker backward's ∂ℓ/∂yᵀ), at close to
/// copy bandwidth on CUDA (32 × 32 tiles through shared memory; a strided elementwise copy reads
/// or writes with a stride and runs several times slower).
struct TransposeParams {
  DType dtype = DType::f32;
  Device device{};
  MatrixView in{};
  MutableMatrixView out{};
};

/// Validates `p` and writes the transpose on `p.device` (CPU, or CUDA on `stream`). Throws like
/// gemm(); never synchronises the host.
void transpose(const TransposeParams& p, Stream stream);

}  // namespace sparsekern::dense
