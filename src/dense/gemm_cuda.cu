// CUDA backend of the dense product: one cublasGemmStridedBatchedEx call, with the same compute
// types and math-mode flags PyTorch uses, so our results and speed match torch.matmul's.
//
// cuBLAS is column-major and C is row-major, so we compute the transposed problem
//   Cᵀ (n×m) = Bᵀ (n×k) · Aᵀ (k×m)
// where a row-major matrix is the column-major view of its transpose. An operand whose columns are
// unit-stride is passed as-is (op N); one whose rows are unit-stride is passed as the column-major
// matrix it already is, with op T. Transposed or sliced views therefore cost no copy.

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <climits>

#include "../common/cuda_check.h"
#include "../common/handles_internal.h"
#include "gemm_internal.h"

namespace sparsekern::dense::detail {
namespace {

using sparsekern::detail::concat;

/// A cuBLAS operand: `op` applied to the column-major matrix at `data` with leading dim `ld`.
struct BlasOperand {
  cublasOperation_t op;
  std::int64_t ld;
};

/// Describes Mᵀ (cols × rows) of the row-major view `v` for cuBLAS; throws if neither dim is
/// unit-stride (the Python layer copies such operands first).
BlasOperand transposed_operand(const char* name, std::int64_t rows, std::int64_t cols,
                               std::int64_t row_stride, std::int64_t col_stride) {
  // Strides of size-1 dims carry no information; normalise them so the checks below accept them.
  if (cols <= 1) col_stride = 1;
  if (rows <= 1) row_stride = std::max<std::int64_t>(cols, 1);
  if (row_stride > INT_MAX || col_stride > INT_MAX)
    throw InvalidArgument(concat("`", name, "` strides (", row_stride, ", ", col_stride,
                                 ") exceed cuBLAS's 32-bit leading dimension"));
  if (col_stride == 1 && row_stride >= std::max<std::int64_t>(cols, 1))
    return {CUBLAS_OP_N, row_stride};  // Mᵀ is column-major with ld = row_stride
  if (row_stride == 1 && col_stride >= std::max<std::int64_t>(rows, 1))
    return {CUBLAS_OP_T, col_stride};  // M itself is column-major with ld = col_stride
  throw InvalidArgument(concat("`", name, "` must have a unit stride along one of its last two dims "
                               "(with the other stride at least that dim's size) for cuBLAS; got "
                               "strides (", row_stride, ", ", col_stride, ") for shape ", rows, "x",
                               cols));
}

cudaDataType_t cuda_type(DType t) {
  switch (t) {
    case DType::f16: return CUDA_R_16F;
    case DType::bf16: return CUDA_R_16BF;
    case DType::f32: return CUDA_R_32F;
    case DType::f64: return CUDA_R_64F;
  }
  throw TypeMismatch("unsupported dtype");
}

template <typename T>
__global__ void scale_rows_kernel(T* c, std::int64_t rows, std::int64_t cols, std::int64_t row_stride,
                                  float beta) {
  const std::int64_t total = rows * cols;
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < total;
       i += std::int64_t(gridDim.x) * blockDim.x) {
    T* e = c + (i / cols) * row_stride + (i % cols);
    *e = beta == 0.f ? T(0.f) : T(float(*e) * beta);
  }
}

/// C = beta·C for k == 0 (an empty sum): cuBLAS would reject lda = 0, and beta = 0 must write zeros.
void scale_c(const GemmParams& p, cudaStream_t stream) {
  const std::int64_t m = p.c.rows, n = p.c.cols;
  const bool flat = p.batch <= 1 || p.c.batch_stride == m * p.c.row_stride;
  const std::int64_t rows = flat ? m * p.batch : m;
  const int threads = 256;
  const int blocks = static_cast<int>(std::min<std::int64_t>((rows * n + threads - 1) / threads, 4096));
  for (std::int64_t b = 0; b < (flat ? 1 : p.batch); ++b) {
    void* c = static_cast<char*>(p.c.data) + b * p.c.batch_stride * dtype_size(p.dtype);
    const float beta = static_cast<float>(p.beta);
    switch (p.dtype) {
      case DType::f16: scale_rows_kernel<<<blocks, threads, 0, stream>>>(static_cast<__half*>(c), rows, n, p.c.row_stride, beta); break;
      case DType::bf16: scale_rows_kernel<<<blocks, threads, 0, stream>>>(static_cast<__nv_bfloat16*>(c), rows, n, p.c.row_stride, beta); break;
      case DType::f32: scale_rows_kernel<<<blocks, threads, 0, stream>>>(static_cast<float*>(c), rows, n, p.c.row_stride, beta); break;
      case DType::f64: scale_rows_kernel<<<blocks, threads, 0, stream>>>(static_cast<double*>(c), rows, n, p.c.row_stride, beta); break;
    }
    SK_CUDA_CHECK_LAUNCH();
  }
}

// Overloads so one body serves cublasSgemm* and cublasDgemm*.
cublasStatus_t blas_gemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                         const float* alpha, const float* A, int lda, const float* B, int ldb,
                         const float* beta, float* C, int ldc) {
  return cublasSgemm(h, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
}
cublasStatus_t blas_gemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                         const double* alpha, const double* A, int lda, const double* B, int ldb,
                         const double* beta, double* C, int ldc) {
  return cublasDgemm(h, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
}
cublasStatus_t blas_gemm_strided_batched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb,
                                         int m, int n, int k, const float* alpha, const float* A, int lda,
                                         long long sa, const float* B, int ldb, long long sb,
                                         const float* beta, float* C, int ldc, long long sc, int batch) {
  return cublasSgemmStridedBatched(h, ta, tb, m, n, k, alpha, A, lda, sa, B, ldb, sb, beta, C, ldc, sc, batch);
}
cublasStatus_t blas_gemm_strided_batched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb,
                                         int m, int n, int k, const double* alpha, const double* A, int lda,
                                         long long sa, const double* B, int ldb, long long sb,
                                         const double* beta, double* C, int ldc, long long sc, int batch) {
  return cublasDgemmStridedBatched(h, ta, tb, m, n, k, alpha, A, lda, sa, B, ldb, sb, beta, C, ldc, sc, batch);
}

}  // namespace

std::size_t gemm_workspace_size_cuda(int device) {
  sparsekern::detail::require_cuda_device(device);
  int major = 0;
  SK_CUDA_TRY(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  // PyTorch's defaults (CUBLAS_WORKSPACE_CONFIG unset): 32 MiB on Hopper and newer, where the
  // fastest cuBLAS kernels want it; 4096 KiB x 2 + 16 KiB x 8 before that.
  return major >= 9 ? (std::size_t(32) << 20) : (std::size_t(4096) * 2 + 16 * 8) << 10;
}

void gemm_cuda(const GemmParams& p, Stream stream_ptr) {
  const std::int64_t m = p.a.rows, k = p.a.cols, n = p.b.cols;
  SK_EXPECTS(p.c.col_stride == 1 || n <= 1, "`c` must be row-major (unit column stride) on CUDA; got column stride ",
             p.c.col_stride);
  SK_EXPECTS(p.c.row_stride >= std::max<std::int64_t>(n, 1) || m <= 1,
             "`c` row stride must be at least its column count (", n, "); got ", p.c.row_stride);
  if (p.batch == 0 || m == 0 || n == 0) return;

  sparsekern::detail::require_cuda_device(p.device.index);
  sparsekern::detail::DeviceGuard guard(p.device.index);
  auto stream = static_cast<cudaStream_t>(stream_ptr);
  if (k == 0) {
    scale_c(p, stream);
    return;
  }

  const BlasOperand bt = transposed_operand("b", k, n, p.b.row_stride, p.b.col_stride);
  const BlasOperand at = transposed_operand("a", m, k, p.a.row_stride, p.a.col_stride);
  const std::int64_t ldc = m <= 1 ? std::max<std::int64_t>(n, 1) : p.c.row_stride;

  cublasHandle_t handle = sparsekern::detail::cublas_handle(p.device.index, stream_ptr, p.workspace);

  // The same cuBLAS entry points and math modes torch.matmul uses (ATen's CUDABlas.cpp), so the two
  // get the same kernels from cuBLAS's heuristics: S/Dgemm for fp32/fp64 (TF32 through the handle's
  // math mode), GemmEx with fp32 accumulation for fp16/bf16.
  const int in = static_cast<int>(n), im = static_cast<int>(m), ik = static_cast<int>(k);
  const int ldb = static_cast<int>(bt.ld), lda = static_cast<int>(at.ld), ildc = static_cast<int>(ldc);
  const int batch = static_cast<int>(p.batch);
  SK_CUBLAS_TRY(cublasSetPointerMode(handle, CUBLAS_POINTER_MODE_HOST));
  if (p.dtype == DType::f64 || p.dtype == DType::f32) {
    const bool tf32 = p.dtype == DType::f32 && p.fp32_math == Fp32Math::tf32;
    SK_CUBLAS_TRY(cublasSetMathMode(handle, tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
    auto run = [&](auto tag) {
      using T = decltype(tag);
      const T alpha = static_cast<T>(p.alpha), beta = static_cast<T>(p.beta);
      const auto* B = static_cast<const T*>(p.b.data);
      const auto* A = static_cast<const T*>(p.a.data);
      auto* C = static_cast<T*>(p.c.data);
      if (batch == 1)
        SK_CUBLAS_TRY(blas_gemm(handle, bt.op, at.op, in, im, ik, &alpha, B, ldb, A, lda, &beta, C, ildc));
      else
        SK_CUBLAS_TRY(blas_gemm_strided_batched(handle, bt.op, at.op, in, im, ik, &alpha, B, ldb,
                                                p.b.batch_stride, A, lda, p.a.batch_stride, &beta, C,
                                                ildc, p.c.batch_stride, batch));
    };
    if (p.dtype == DType::f64) run(double{});
    else run(float{});
    return;
  }
  int math = CUBLAS_DEFAULT_MATH;
  if (!p.allow_reduced_precision_reduction) math |= CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION;
  SK_CUBLAS_TRY(cublasSetMathMode(handle, static_cast<cublasMath_t>(math)));
  const cudaDataType_t type = cuda_type(p.dtype);
  const float alpha = static_cast<float>(p.alpha), beta = static_cast<float>(p.beta);
  if (batch == 1) {
    SK_CUBLAS_TRY(cublasGemmEx(handle, bt.op, at.op, in, im, ik, &alpha, p.b.data, type, ldb, p.a.data,
                               type, lda, &beta, p.c.data, type, ildc, CUBLAS_COMPUTE_32F,
                               CUBLAS_GEMM_DEFAULT_TENSOR_OP));
  } else {
    SK_CUBLAS_TRY(cublasGemmStridedBatchedEx(
        handle, bt.op, at.op, in, im, ik, &alpha, p.b.data, type, ldb, p.b.batch_stride, p.a.data,
        type, lda, p.a.batch_stride, &beta, p.c.data, type, ildc, p.c.batch_stride, batch,
        CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT_TENSOR_OP));
  }
}

}  // namespace sparsekern::dense::detail
