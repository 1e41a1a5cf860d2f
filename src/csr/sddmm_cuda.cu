// CUDA backend of the CSR SDDMM: cuSPARSE's generic cusparseSDDMM behind a plan (descriptors and
// workspace size made once; data pointers rebound with host-only setters on each run).
//
// beta = 0 is implemented as a memset of the output values followed by products with beta = 1, so
// correctness never depends on how cuSPARSE treats beta = 0 (NaN in the output must not leak); the
// batch sum is the same loop with beta = 1 after the first entry. cusparseSDDMM_preprocess is not
// used, for the reason given in spmm_cuda.cu (its buffer binds later calls to the same pointers).

#include <memory>
#include <vector>

#include "../common/handles_internal.h"
#include "cusparse_util.h"

namespace sparsekern::csr::detail {

using sparsekern::detail::concat;

struct CudaSddmmState {
  int device = 0;
  bool noop = false;   // no stored entries: nothing to write
  bool empty = false;  // t = 0 or batch = 0: values = beta·values without cuSPARSE
  DnMat x, y;
  SpMat c;
  cusparseOperation_t op_x = CUSPARSE_OPERATION_NON_TRANSPOSE;
  cusparseOperation_t op_y = CUSPARSE_OPERATION_NON_TRANSPOSE;
  cudaDataType_t compute = CUDA_R_32F;
  std::size_t workspace = 0;
  const void* bound_crow = nullptr;
  const void* bound_col = nullptr;
  const void* bound_values = nullptr;
};

CudaSddmmState* sddmm_cuda_create(const SddmmParams& p) {
  sparsekern::detail::require_cuda_device(p.device.index);
  sparsekern::detail::DeviceGuard guard(p.device.index);
  auto s = std::make_unique<CudaSddmmState>();
  s->device = p.device.index;
  s->compute = compute_type(p.dtype);
  const std::int64_t m = p.pattern.rows, n = p.pattern.cols, t = p.x.cols;
  const auto x_order = natural_order(m, t, p.x.row_stride, p.x.col_stride);
  const auto y_order = natural_order(t, n, p.y.row_stride, p.y.col_stride);
  SK_EXPECTS(layout_in(x_order, m, t, p.x.row_stride, p.x.col_stride).ok,
             "`x` must have a unit stride along one of its dims on CUDA; got strides (", p.x.row_stride,
             ", ", p.x.col_stride, ") for shape ", m, "x", t);
  SK_EXPECTS(layout_in(y_order, t, n, p.y.row_stride, p.y.col_stride).ok,
             "`y` must have a unit stride along one of its dims on CUDA; got strides (", p.y.row_stride,
             ", ", p.y.col_stride, ") for shape ", t, "x", n);
  if (p.pattern.nnz == 0) {
    s->noop = true;
    return s.release();
  }
  if (t == 0 || p.batch == 0) {
    s->empty = true;
    return s.release();
  }

  const cudaDataType_t vt = value_type(p.dtype);
  s->c.create_csr(p.pattern, p.out_values, vt);
  s->bound_crow = p.pattern.crow_indices;
  s->bound_col = p.pattern.col_indices;
  s->bound_values = p.out_values;

  // Layout candidates: each operand as stored; then both in one order (one of them described as
  // a transpose), for cuSPARSE versions that want matching orders.
  struct Candidate { cusparseOrder_t x, y; };
  std::vector<Candidate> candidates = {{x_order, y_order}};
  if (x_order != y_order) {
    candidates.push_back({x_order, x_order});
    candidates.push_back({y_order, y_order});
  }
  cusparseHandle_t handle = sparsekern::detail::cusparse_handle(s->device, nullptr);
  SK_CUSPARSE_TRY(cusparseSetPointerMode(handle, CUSPARSE_POINTER_MODE_HOST));
  const float alpha32 = 1.f, beta32 = 1.f;
  const double alpha64 = 1.0, beta64 = 1.0;
  const void* alpha = s->compute == CUDA_R_64F ? (const void*)&alpha64 : &alpha32;
  const void* beta = s->compute == CUDA_R_64F ? (const void*)&beta64 : &beta32;
  cusparseStatus_t last = CUSPARSE_STATUS_SUCCESS;
  for (const Candidate& cand : candidates) {
    const DenseLayout xl = layout_in(cand.x, m, t, p.x.row_stride, p.x.col_stride);
    const DenseLayout yl = layout_in(cand.y, t, n, p.y.row_stride, p.y.col_stride);
    if (!xl.ok || !yl.ok) continue;
    s->x.create(xl, p.x.data, vt);
    s->y.create(yl, p.y.data, vt);
    std::size_t bytes = 0;
    counters().buffer_size_queries.fetch_add(1);
    last = cusparseSDDMM_bufferSize(handle, xl.op, yl.op, alpha, s->x.h, s->y.h, beta, s->c.h, s->compute,
                                    CUSPARSE_SDDMM_ALG_DEFAULT, &bytes);
    if (last == CUSPARSE_STATUS_SUCCESS) {
      s->op_x = xl.op;
      s->op_y = yl.op;
      s->workspace = bytes;
      return s.release();
    }
    if (!unsupported(last))
      sparsekern::detail::throw_cusparse_error(last, "cusparseSDDMM_bufferSize", __FILE__, __LINE__);
  }
  // The Python layer catches this (RuntimeError containing "not supported by cuSPARSE") and
  // retries in fp32 for the half types.
  throw BackendUnavailable(concat("csr sddmm: this problem is not supported by cuSPARSE (", dtype_name(p.dtype),
                                  ", x ", m, "x", t, ", y ", t, "x", n, ", nnz=", p.pattern.nnz, "): ",
                                  cusparseGetErrorName(last), " (", cusparseGetErrorString(last), ")"));
}

void sddmm_cuda_destroy(CudaSddmmState* s) noexcept { delete s; }

std::size_t sddmm_cuda_workspace_size(const CudaSddmmState* s) { return s->workspace; }

void sddmm_cuda_run(CudaSddmmState* s, const SddmmParams& p, Workspace workspace, Stream stream_ptr) {
  if (s->noop) return;
  sparsekern::detail::DeviceGuard guard(s->device);
  auto stream = static_cast<cudaStream_t>(stream_ptr);
  if (s->empty) {
    scale_strided(p.dtype, p.out_values, 1, 1, p.pattern.nnz, 0, 0, 1, p.beta, stream);
    return;
  }
  if (p.beta == 0.0) {
    SK_CUDA_TRY(cudaMemsetAsync(p.out_values, 0, static_cast<std::size_t>(p.pattern.nnz) * dtype_size(p.dtype),
                                stream));
  }
  cusparseHandle_t handle = sparsekern::detail::cusparse_handle(s->device, stream_ptr);
  SK_CUSPARSE_TRY(cusparseSetPointerMode(handle, CUSPARSE_POINTER_MODE_HOST));
  if (p.pattern.crow_indices != s->bound_crow || p.pattern.col_indices != s->bound_col ||
      p.out_values != s->bound_values) {
    SK_CUSPARSE_TRY(cusparseCsrSetPointers(s->c.h, const_cast<void*>(p.pattern.crow_indices),
                                           const_cast<void*>(p.pattern.col_indices), p.out_values));
    s->bound_crow = p.pattern.crow_indices;
    s->bound_col = p.pattern.col_indices;
    s->bound_values = p.out_values;
  }
  for (std::int64_t bi = 0; bi < p.batch; ++bi) {
    const double beta = (bi == 0 && p.beta != 0.0) ? p.beta : 1.0;
    const float alpha32 = static_cast<float>(p.alpha), beta32 = static_cast<float>(beta);
    const double alpha64 = p.alpha;
    const void* alpha_ptr = s->compute == CUDA_R_64F ? (const void*)&alpha64 : &alpha32;
    const void* beta_ptr = s->compute == CUDA_R_64F ? (const void*)&beta : &beta32;
    SK_CUSPARSE_TRY(cusparseDnMatSetValues(s->x.h, const_cast<void*>(offset(p.x.data, bi * p.x.batch_stride, p.dtype))));
    SK_CUSPARSE_TRY(cusparseDnMatSetValues(s->y.h, const_cast<void*>(offset(p.y.data, bi * p.y.batch_stride, p.dtype))));
    SK_CUSPARSE_TRY(cusparseSDDMM(handle, s->op_x, s->op_y, alpha_ptr, s->x.h, s->y.h, beta_ptr, s->c.h,
                                  s->compute, CUSPARSE_SDDMM_ALG_DEFAULT, s->workspace ? workspace.data : nullptr));
  }
}

}  // namespace sparsekern::csr::detail
