// Dispatch point of the dense product: validates once, then picks the CPU or CUDA backend.
#include <climits>

#include "../common/check.h"
#include "gemm_internal.h"

namespace sparsekern::dense {
namespace {

using sparsekern::detail::device_name;

void check_view(const char* name, const MatrixView& v, std::int64_t rows, std::int64_t cols,
                std::int64_t batch) {
  SK_EXPECTS(v.rows == rows && v.cols == cols, "`", name, "` must be ", rows, "x", cols,
             " to chain with the other operands; got ", v.rows, "x", v.cols);
  SK_EXPECTS(v.row_stride >= 0 && v.col_stride >= 0 && v.batch_stride >= 0, "`", name,
             "` must have non-negative strides; got (", v.batch_stride, ", ", v.row_stride, ", ",
             v.col_stride, ")");
  SK_EXPECTS(v.data != nullptr || rows * cols * batch == 0, "`", name,
             "` has a null data pointer but ", rows, "x", cols, " elements");
}

}  // namespace

void gemm(const GemmParams& p, Stream stream) {
  const std::int64_t m = p.a.rows, k = p.a.cols, n = p.b.cols;
  SK_EXPECTS(p.batch >= 0 && m >= 0 && k >= 0 && n >= 0, "gemm: sizes must be non-negative; got batch=",
             p.batch, " m=", m, " k=", k, " n=", n);
  SK_EXPECTS(p.b.rows == k, "`b` must have ", k, " rows (the columns of `a`); got ", p.b.rows);
  check_view("a", p.a, m, k, p.batch);
  check_view("b", p.b, k, n, p.batch);
  SK_EXPECTS(p.c.rows == m && p.c.cols == n, "`c` must be ", m, "x", n, "; got ", p.c.rows, "x",
             p.c.cols);
  SK_EXPECTS(p.c.row_stride >= 0 && p.c.col_stride >= 0 && p.c.batch_stride >= 0,
             "`c` must have non-negative strides");
  SK_EXPECTS(p.c.data != nullptr || m * n * p.batch == 0, "`c` has a null data pointer");
  SK_EXPECTS(p.batch <= 1 || p.c.batch_stride >= m * n || m * n == 0,
             "`c` batch entries must not overlap (batch_stride ", p.c.batch_stride, " < m*n = ",
             m * n, ")");
  SK_EXPECTS(m * n * p.batch == 0 || (p.c.data != p.a.data && p.c.data != p.b.data),
             "`c` must not alias `a` or `b` (the product is not computed in place)");

  if (p.device.type == DeviceType::cpu) {
    detail::gemm_cpu(p);
    return;
  }
#if SPARSEKERN_WITH_CUDA
  SK_EXPECTS(m <= INT_MAX && n <= INT_MAX && k <= INT_MAX && p.batch <= INT_MAX,
             "gemm: each of m, n, k and batch must fit in 32 bits for cuBLAS; got m=", m, " n=", n,
             " k=", k, " batch=", p.batch);
  detail::gemm_cuda(p, stream);
#else
  (void)stream;
  throw BackendUnavailable("gemm: operands are on " + device_name(p.device) +
                           " but sparsekern was built without CUDA (CPU-only build)");
#endif
}

std::size_t gemm_workspace_size(Device device) {
  if (device.type == DeviceType::cpu) return 0;
#if SPARSEKERN_WITH_CUDA
  return detail::gemm_workspace_size_cuda(device.index);
#else
  throw BackendUnavailable("gemm_workspace_size: sparsekern was built without CUDA");
#endif
}

}  // namespace sparsekern::dense
