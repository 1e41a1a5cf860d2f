// Dispatch point and CPU implementation of the dense transpose (out = inᵀ).
#include <algorithm>
#include <cstring>

#include "../common/check.h"
#include "gemm_internal.h"

namespace sparsekern::dense {

using sparsekern::detail::device_name;

void transpose(const TransposeParams& p, Stream stream) {
  const std::int64_t rows = p.in.rows, cols = p.in.cols;
  SK_EXPECTS(rows >= 0 && cols >= 0, "transpose: `in` must have non-negative sizes; got ", rows, "x", cols);
  SK_EXPECTS_TYPE(::sparsekern::detail::valid_dtype(p.dtype),
                  "transpose: `dtype` ", static_cast<int>(p.dtype), " is not a DType");
  SK_EXPECTS(::sparsekern::detail::span_elements({{rows, p.in.row_stride}, {cols, p.in.col_stride}}, 8) >= 0 &&
                 ::sparsekern::detail::span_elements({{cols, p.out.row_stride}, {rows, p.out.col_stride}}, 8) >= 0,
             "transpose: strides of `in` or `out` overflow 64-bit offsets");
  SK_EXPECTS(p.out.rows == cols && p.out.cols == rows, "`out` must be ", cols, "x", rows,
             " (the transpose of `in`); got ", p.out.rows, "x", p.out.cols);
  if (rows * cols == 0) return;
  SK_EXPECTS(p.in.col_stride == 1 && p.in.row_stride >= cols, "`in` must have a unit column stride and a row "
             "stride of at least its ", cols, " columns; got strides (", p.in.row_stride, ", ", p.in.col_stride, ")");
  SK_EXPECTS(p.out.col_stride == 1 && p.out.row_stride >= rows, "`out` must have a unit column stride and a "
             "row stride of at least its ", rows, " columns; got strides (", p.out.row_stride, ", ",
             p.out.col_stride, ")");
  SK_EXPECTS(p.in.data != nullptr && p.out.data != nullptr, "transpose: null data pointer");
  {  // no overlap: the two byte ranges are disjoint
    const std::size_t es = dtype_size(p.dtype);
    const char* a = static_cast<const char*>(p.in.data);
    const char* b = static_cast<const char*>(p.out.data);
    const std::size_t na = static_cast<std::size_t>((rows - 1) * p.in.row_stride + cols) * es;
    const std::size_t nb = static_cast<std::size_t>((cols - 1) * p.out.row_stride + rows) * es;
    SK_EXPECTS(a + na <= b || b + nb <= a, "`out` must not overlap `in`");
  }
  if (p.device.type == DeviceType::cpu) {
    detail::transpose_cpu(p);
    return;
  }
#if SPARSEKERN_WITH_CUDA
  detail::transpose_cuda(p, stream);
#else
  (void)stream;
  throw BackendUnavailable("transpose: operands are on " + device_name(p.device) +
                           " but sparsekern was built without CUDA (CPU-only build)");
#endif
}

namespace detail {

void transpose_cpu(const TransposeParams& p) {
  const std::size_t es = dtype_size(p.dtype);
  const char* in = static_cast<const char*>(p.in.data);
  char* out = static_cast<char*>(p.out.data);
  constexpr std::int64_t kTile = 32;  // blocked, so that both sides stay in cache
  for (std::int64_t r0 = 0; r0 < p.in.rows; r0 += kTile)
    for (std::int64_t c0 = 0; c0 < p.in.cols; c0 += kTile)
      for (std::int64_t r = r0; r < std::min(r0 + kTile, p.in.rows); ++r)
        for (std::int64_t c = c0; c < std::min(c0 + kTile, p.in.cols); ++c)
          std::memcpy(out + static_cast<std::size_t>(c * p.out.row_stride + r) * es,
                      in + static_cast<std::size_t>(r * p.in.row_stride + c) * es, es);
}

}  // namespace detail
}  // namespace sparsekern::dense
