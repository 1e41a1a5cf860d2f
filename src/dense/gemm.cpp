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
  SK_EXPECTS(::sparsekern::detail::checked_product({rows, cols, batch}) >= 0, "`", name, "`: ", batch, " x ", rows, "x", cols,
             " elements overflow 64-bit sizes");
  SK_EXPECTS(v.data != nullptr || rows * cols * batch == 0, "`", name,
             "` has a null data pointer but ", rows, "x", cols, " elements");
}

/// Elements spanned by a (batch ×) rows × cols view; checked not to overflow.
std::int64_t span_of(const char* name, const void* data, std::int64_t batch, std::int64_t rows, std::int64_t cols,
                     std::int64_t bs, std::int64_t rs, std::int64_t cs, DType t) {
  const std::int64_t span = ::sparsekern::detail::span_elements({{batch, bs}, {rows, rs}, {cols, cs}},
                                                  static_cast<std::int64_t>(dtype_size(t)));
  SK_EXPECTS(span >= 0, "`", name, "`: its strides reach past 64-bit byte offsets");
  (void)data;
  return span;
}

}  // namespace

void gemm(const GemmParams& p, Stream stream) {
  const std::int64_t m = p.a.rows, k = p.a.cols, n = p.b.cols;
  SK_EXPECTS_TYPE(::sparsekern::detail::valid_dtype(p.dtype), "gemm: `dtype` ", static_cast<int>(p.dtype),
                  " is not a DType");
  SK_EXPECTS(p.fp32_math == Fp32Math::ieee || p.fp32_math == Fp32Math::tf32, "gemm: `fp32_math` ",
             static_cast<int>(p.fp32_math), " is not an Fp32Math");
  SK_EXPECTS(p.batch >= 0 && m >= 0 && k >= 0 && n >= 0, "gemm: sizes must be non-negative; got batch=",
             p.batch, " m=", m, " k=", k, " n=", n);
  SK_EXPECTS(p.b.rows == k, "`b` must have ", k, " rows (the columns of `a`); got ", p.b.rows);
  check_view("a", p.a, m, k, p.batch);
  check_view("b", p.b, k, n, p.batch);
  SK_EXPECTS(p.c.rows == m && p.c.cols == n, "`c` must be ", m, "x", n, "; got ", p.c.rows, "x",
             p.c.cols);
  SK_EXPECTS(p.c.row_stride >= 0 && p.c.col_stride >= 0 && p.c.batch_stride >= 0,
             "`c` must have non-negative strides");
  SK_EXPECTS(::sparsekern::detail::checked_product({m, n, p.batch}) >= 0, "`c`: ", p.batch, " x ", m, "x", n,
             " elements overflow 64-bit sizes");
  SK_EXPECTS(p.c.data != nullptr || m * n * p.batch == 0, "`c` has a null data pointer");
  // Every element of c written once: no two (batch, row, col) may reach one address (a batch
  // stride of m·n with a row stride past n overwrote rows of entry 0 with entry 1).
  SK_EXPECTS(::sparsekern::detail::self_disjoint({{p.batch, p.c.batch_stride}, {m, p.c.row_stride}, {n, p.c.col_stride}}),
             "`c` must not overlap itself: strides (", p.c.batch_stride, ", ", p.c.row_stride, ", ",
             p.c.col_stride, ") for ", p.batch, " x ", m, "x", n);
  const std::int64_t elem = static_cast<std::int64_t>(dtype_size(p.dtype));
  const std::int64_t a_span = span_of("a", p.a.data, p.batch, m, k, p.a.batch_stride, p.a.row_stride,
                                      p.a.col_stride, p.dtype);
  const std::int64_t b_span = span_of("b", p.b.data, p.batch, k, n, p.b.batch_stride, p.b.row_stride,
                                      p.b.col_stride, p.dtype);
  const std::int64_t c_span = span_of("c", p.c.data, p.batch, m, n, p.c.batch_stride, p.c.row_stride,
                                      p.c.col_stride, p.dtype);
  SK_EXPECTS(!::sparsekern::detail::ranges_overlap(p.c.data, c_span, p.a.data, a_span, elem) &&
                 !::sparsekern::detail::ranges_overlap(p.c.data, c_span, p.b.data, b_span, elem),
             "`c` must not share memory with `a` or `b` (the product is not computed in place)");

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
