// CUDA backend of the CSR SpMM: cuSPARSE's generic cusparseSpMM behind a plan.
//
// Plan time (once per pattern size / shape / layout / dtype): the CSR and dense descriptors are
// created, the algorithm is chosen and cusparseSpMM_bufferSize is asked for the workspace size.
// Run time: the data pointers are rebound on the existing descriptors (cusparseCsrSetPointers /
// cusparseDnMatSetValues, host-only setters) and cusparseSpMM runs on the caller's workspace, so a
// warm call makes no planning call and no allocation. cusparseSpMM_preprocess is not used: its
// "active buffer" contract ties later calls to the exact parameters of the preprocess call, and our
// dense operands change pointers on every call.
//
// The batch (one A, many B) is a loop of SpMM calls over the batch entries rather than cuSPARSE's
// strided-batch mode, so batch strides of any value (including 0 = broadcast) are valid.

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <climits>
#include <memory>
#include <vector>

#include "../common/handles_internal.h"
#include "cusparse_util.h"

namespace sparsekern::csr::detail {

using sparsekern::detail::concat;

// ---------------------------------------------------------------------------------------------
// dst[b][r][c] = beta · dst[b][r][c] (beta = 0 writes zeros without reading): the result of a
// product with no stored entries, where cuSPARSE is not called.
// ---------------------------------------------------------------------------------------------
namespace {

template <typename T>
__global__ void scale_kernel(T* dst, std::int64_t batch, std::int64_t rows, std::int64_t cols,
                             std::int64_t bs, std::int64_t rs, std::int64_t cs, float beta) {
  const std::int64_t total = batch * rows * cols;
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < total;
       i += std::int64_t(gridDim.x) * blockDim.x) {
    const std::int64_t b = i / (rows * cols), r = (i / cols) % rows, c = i % cols;
    T* e = dst + b * bs + r * rs + c * cs;
    *e = beta == 0.f ? T(0.f) : T(float(*e) * beta);
  }
}

__global__ void scale_kernel_f64(double* dst, std::int64_t batch, std::int64_t rows, std::int64_t cols,
                                 std::int64_t bs, std::int64_t rs, std::int64_t cs, double beta) {
  const std::int64_t total = batch * rows * cols;
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < total;
       i += std::int64_t(gridDim.x) * blockDim.x) {
    const std::int64_t b = i / (rows * cols), r = (i / cols) % rows, c = i % cols;
    double* e = dst + b * bs + r * rs + c * cs;
    *e = beta == 0.0 ? 0.0 : *e * beta;
  }
}

}  // namespace

void scale_strided(DType dtype, void* dst, std::int64_t batch, std::int64_t rows, std::int64_t cols,
                   std::int64_t bs, std::int64_t rs, std::int64_t cs, double beta, cudaStream_t stream) {
  const std::int64_t total = batch * rows * cols;
  if (total == 0) return;
  const int threads = 256;
  // Grid-stride loop: a few thousand blocks fill any current GPU; more only add launch overhead.
  const int blocks = static_cast<int>(std::min<std::int64_t>((total + threads - 1) / threads, 4096));
  const float beta32 = static_cast<float>(beta);
  switch (dtype) {
    case DType::f16:
      scale_kernel<<<blocks, threads, 0, stream>>>(static_cast<__half*>(dst), batch, rows, cols, bs, rs, cs, beta32);
      break;
    case DType::bf16:
      scale_kernel<<<blocks, threads, 0, stream>>>(static_cast<__nv_bfloat16*>(dst), batch, rows, cols, bs, rs, cs, beta32);
      break;
    case DType::f32:
      scale_kernel<<<blocks, threads, 0, stream>>>(static_cast<float*>(dst), batch, rows, cols, bs, rs, cs, beta32);
      break;
    case DType::f64:
      scale_kernel_f64<<<blocks, threads, 0, stream>>>(static_cast<double*>(dst), batch, rows, cols, bs, rs, cs, beta);
      break;
  }
  SK_CUDA_CHECK_LAUNCH();
}

// ---------------------------------------------------------------------------------------------
// Plan state
// ---------------------------------------------------------------------------------------------
struct CudaSpmmState {
  int device = 0;
  DType dtype = DType::f32;
  bool noop = false;   // batch, m or n is 0: nothing to write
  bool empty = false;  // no stored entries: C = beta·C without cuSPARSE
  SpMat a;
  DnMat b, c;
  cusparseOperation_t op_a = CUSPARSE_OPERATION_NON_TRANSPOSE;
  cusparseOperation_t op_b = CUSPARSE_OPERATION_NON_TRANSPOSE;
  cusparseSpMMAlg_t alg = CUSPARSE_SPMM_ALG_DEFAULT;
  SpmmAlgorithm chosen = SpmmAlgorithm::automatic;
  cudaDataType_t compute = CUDA_R_32F;
  std::size_t workspace = 0;
  const void* bound_crow = nullptr;
  const void* bound_col = nullptr;
  const void* bound_values = nullptr;
};

namespace {

cusparseSpMMAlg_t to_cusparse(SpmmAlgorithm a) {
  switch (a) {
    case SpmmAlgorithm::csr_alg1: return CUSPARSE_SPMM_CSR_ALG1;
    case SpmmAlgorithm::csr_alg2: return CUSPARSE_SPMM_CSR_ALG2;
    case SpmmAlgorithm::csr_alg3: return CUSPARSE_SPMM_CSR_ALG3;
    case SpmmAlgorithm::automatic: break;
  }
  return CUSPARSE_SPMM_ALG_DEFAULT;
}

const char* order_name(cusparseOrder_t o) { return o == CUSPARSE_ORDER_ROW ? "row-major" : "column-major"; }

/// Host scalars of the compute type (fp32, or fp64 for f64).
struct Scalars {
  float f[2];
  double d[2];
  Scalars(double alpha, double beta) : f{float(alpha), float(beta)}, d{alpha, beta} {}
  const void* alpha(cudaDataType_t compute) const { return compute == CUDA_R_64F ? (const void*)&d[0] : &f[0]; }
  const void* beta(cudaDataType_t compute) const { return compute == CUDA_R_64F ? (const void*)&d[1] : &f[1]; }
};

}  // namespace

CudaSpmmState* spmm_cuda_create(const SpmmParams& p, SpmmAlgorithm algorithm) {
  sparsekern::detail::require_cuda_device(p.device.index);
  sparsekern::detail::DeviceGuard guard(p.device.index);
  auto s = std::make_unique<CudaSpmmState>();
  s->device = p.device.index;
  s->dtype = p.dtype;
  s->compute = compute_type(p.dtype);
  s->chosen = algorithm;
  const std::int64_t m = p.c.rows, n = p.c.cols, k = p.b.rows;

  // C fixes the order; B is described in the same order (as its transpose with op T when it is
  // stored the other way), the combination every cuSPARSE SpMM algorithm takes.
  const cusparseOrder_t order = natural_order(m, n, p.c.row_stride, p.c.col_stride);
  const DenseLayout cl = layout_in(order, m, n, p.c.row_stride, p.c.col_stride);
  SK_EXPECTS(cl.ok && cl.op == CUSPARSE_OPERATION_NON_TRANSPOSE,
             "`out` must be row- or column-major (a unit stride along one dim) on CUDA; got strides (",
             p.c.row_stride, ", ", p.c.col_stride, ") for shape ", m, "x", n);
  const DenseLayout bl = layout_in(order, k, n, p.b.row_stride, p.b.col_stride);
  SK_EXPECTS(bl.ok, "`b` must have a unit stride along one of its dims (with the other stride at least "
                    "that dim's size) on CUDA; got strides (", p.b.row_stride, ", ", p.b.col_stride,
             ") for shape ", k, "x", n);
  if (p.batch == 0 || m == 0 || n == 0) {
    s->noop = true;
    return s.release();
  }
  if (p.a.nnz == 0) {
    s->empty = true;
    return s.release();
  }

  const cudaDataType_t vt = value_type(p.dtype);
  s->a.create_csr(p.a, p.a.values, vt);
  s->bound_crow = p.a.crow_indices;
  s->bound_col = p.a.col_indices;
  s->bound_values = p.a.values;
  s->b.create(bl, p.b.data, vt);
  s->c.create(cl, p.c.data, vt);
  s->op_a = p.transpose_a ? CUSPARSE_OPERATION_TRANSPOSE : CUSPARSE_OPERATION_NON_TRANSPOSE;
  s->op_b = bl.op;

  // Candidates, best first. ALG2 is cuSPARSE's row-major algorithm (torch.sparse.mm's choice);
  // ALG1 is the column-major one and the one documented for a transposed A. The default
  // algorithm is the last resort. An explicit choice is tried alone.
  std::vector<SpmmAlgorithm> candidates;
  if (algorithm != SpmmAlgorithm::automatic) {
    candidates = {algorithm};
  } else if (order == CUSPARSE_ORDER_ROW && !p.transpose_a) {
    candidates = {SpmmAlgorithm::csr_alg2, SpmmAlgorithm::csr_alg1, SpmmAlgorithm::automatic};
  } else {
    candidates = {SpmmAlgorithm::csr_alg1, SpmmAlgorithm::csr_alg2, SpmmAlgorithm::automatic};
  }
  cusparseHandle_t handle = sparsekern::detail::cusparse_handle(s->device, nullptr);
  SK_CUSPARSE_TRY(cusparseSetPointerMode(handle, CUSPARSE_POINTER_MODE_HOST));
  const Scalars scalars(1.0, 0.0);
  cusparseStatus_t last = CUSPARSE_STATUS_SUCCESS;
  for (SpmmAlgorithm cand : candidates) {
    std::size_t bytes = 0;
    counters().buffer_size_queries.fetch_add(1);
    last = cusparseSpMM_bufferSize(handle, s->op_a, s->op_b, scalars.alpha(s->compute), s->a.h, s->b.h,
                                   scalars.beta(s->compute), s->c.h, s->compute, to_cusparse(cand), &bytes);
    if (last == CUSPARSE_STATUS_SUCCESS) {
      s->alg = to_cusparse(cand);
      s->chosen = cand;
      s->workspace = bytes;
      return s.release();
    }
    if (!unsupported(last)) sparsekern::detail::throw_cusparse_error(last, "cusparseSpMM_bufferSize", __FILE__, __LINE__);
  }
  throw BackendUnavailable(concat(
      "cuSPARSE SpMM does not support this problem (", dtype_name(p.dtype), ", a ", p.a.rows, "x",
      p.a.cols, " nnz=", p.a.nnz, p.transpose_a ? " transposed" : "", ", b ", order_name(order),
      bl.op == CUSPARSE_OPERATION_TRANSPOSE ? " (transposed)" : "", ", out ", order_name(order),
      "): ", cusparseGetErrorName(last), " (", cusparseGetErrorString(last), ")"));
}

void spmm_cuda_destroy(CudaSpmmState* s) noexcept { delete s; }

std::size_t spmm_cuda_workspace_size(const CudaSpmmState* s) { return s->workspace; }

SpmmAlgorithm spmm_cuda_algorithm(const CudaSpmmState* s) { return s->chosen; }

void spmm_cuda_run(CudaSpmmState* s, const SpmmParams& p, Workspace workspace, Stream stream_ptr) {
  if (s->noop) return;
  sparsekern::detail::DeviceGuard guard(s->device);
  auto stream = static_cast<cudaStream_t>(stream_ptr);
  if (s->empty) {
    scale_strided(p.dtype, p.c.data, p.batch, p.c.rows, p.c.cols, p.c.batch_stride, p.c.row_stride,
                  p.c.col_stride, p.beta, stream);
    return;
  }
  cusparseHandle_t handle = sparsekern::detail::cusparse_handle(s->device, stream_ptr);
  SK_CUSPARSE_TRY(cusparseSetPointerMode(handle, CUSPARSE_POINTER_MODE_HOST));
  if (p.a.crow_indices != s->bound_crow || p.a.col_indices != s->bound_col || p.a.values != s->bound_values) {
    SK_CUSPARSE_TRY(cusparseCsrSetPointers(s->a.h, const_cast<void*>(p.a.crow_indices),
                                           const_cast<void*>(p.a.col_indices), const_cast<void*>(p.a.values)));
    s->bound_crow = p.a.crow_indices;
    s->bound_col = p.a.col_indices;
    s->bound_values = p.a.values;
  }
  const Scalars scalars(p.alpha, p.beta);
  for (std::int64_t bi = 0; bi < p.batch; ++bi) {
    SK_CUSPARSE_TRY(cusparseDnMatSetValues(s->b.h, const_cast<void*>(offset(p.b.data, bi * p.b.batch_stride, p.dtype))));
    SK_CUSPARSE_TRY(cusparseDnMatSetValues(s->c.h, offset(p.c.data, bi * p.c.batch_stride, p.dtype)));
    SK_CUSPARSE_TRY(cusparseSpMM(handle, s->op_a, s->op_b, scalars.alpha(s->compute), s->a.h, s->b.h,
                                 scalars.beta(s->compute), s->c.h, s->compute, s->alg,
                                 s->workspace ? workspace.data : nullptr));
  }
}

}  // namespace sparsekern::csr::detail
