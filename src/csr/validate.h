#pragma once
// Argument checks shared by the SpMM and SDDMM dispatch (host code, no CUDA types).
#include <cstdint>

#include "../common/check.h"
#include "csr_internal.h"

namespace sparsekern::csr::detail {

inline void check_csr_fields(const char* name, const CsrView& a) {
  SK_EXPECTS(a.rows >= 0 && a.cols >= 0 && a.nnz >= 0, "`", name,
             "` must have non-negative rows, cols and nnz; got ", a.rows, "x", a.cols, ", nnz=", a.nnz);
  SK_EXPECTS(a.index_type == IndexType::i32 || a.index_type == IndexType::i64, "`", name,
             "` index type must be int32 or int64");
  SK_EXPECTS(a.crow_indices != nullptr, "`crow_indices` of `", name, "` is a null pointer");
  SK_EXPECTS(a.nnz == 0 || a.col_indices != nullptr, "`col_indices` of `", name,
             "` is a null pointer but nnz=", a.nnz);
  SK_EXPECTS(a.index_type == IndexType::i64 || (a.nnz <= INT32_MAX && a.cols <= INT32_MAX),
             "`", name, "` has int32 indices but nnz=", a.nnz, " / cols=", a.cols,
             " do not fit in int32; use int64 indices");
}

/// Elements a (batch ×) rows × cols view spans, -1 on 64-bit overflow (checked by the callers).
inline std::int64_t span3(std::int64_t batch, std::int64_t rows, std::int64_t cols, std::int64_t bs, std::int64_t rs,
                          std::int64_t cs) {
  return sparsekern::detail::span_elements({{batch, bs}, {rows, rs}, {cols, cs}}, 8);
}

inline void check_view(const char* name, const MatrixView& v, std::int64_t rows, std::int64_t cols,
                std::int64_t batch, const char* rows_why) {
  SK_EXPECTS(rows >= 0 && cols >= 0, "`", name, "` sizes must be non-negative; got ", rows, "x", cols);
  SK_EXPECTS(v.rows == rows, "`", name, "` must have ", rows, " rows (", rows_why, "); got ",
             v.rows, "x", v.cols);
  SK_EXPECTS(v.cols == cols, "`", name, "` must have ", cols, " columns; got ", v.rows, "x", v.cols);
  SK_EXPECTS(v.row_stride >= 0 && v.col_stride >= 0 && v.batch_stride >= 0, "`", name,
             "` must have non-negative strides; got (", v.batch_stride, ", ", v.row_stride, ", ",
             v.col_stride, ")");
  SK_EXPECTS(sparsekern::detail::checked_product({rows, cols, batch}) >= 0 &&
                 span3(batch, rows, cols, v.batch_stride, v.row_stride, v.col_stride) >= 0,
             "`", name, "`: ", batch, " x ", rows, "x", cols, " overflows 64-bit sizes or offsets");
  SK_EXPECTS(v.data != nullptr || rows * cols * batch == 0, "`", name,
             "` has a null data pointer but ", rows, "x", cols, " elements");
}

inline void check_out(const char* name, const MutableMatrixView& c, std::int64_t m, std::int64_t n,
               std::int64_t batch) {
  SK_EXPECTS(c.rows == m && c.cols == n, "`", name, "` must be ", m, "x", n, "; got ", c.rows, "x",
             c.cols);
  SK_EXPECTS(c.row_stride >= 0 && c.col_stride >= 0 && c.batch_stride >= 0, "`", name,
             "` must have non-negative strides");
  SK_EXPECTS(m >= 0 && n >= 0, "`", name, "` sizes must be non-negative; got ", m, "x", n);
  SK_EXPECTS(sparsekern::detail::checked_product({m, n, batch}) >= 0 &&
                 span3(batch, m, n, c.batch_stride, c.row_stride, c.col_stride) >= 0,
             "`", name, "`: ", batch, " x ", m, "x", n, " overflows 64-bit sizes or offsets");
  SK_EXPECTS(c.data != nullptr || m * n * batch == 0, "`", name, "` has a null data pointer");
  SK_EXPECTS(sparsekern::detail::self_disjoint({{batch, c.batch_stride}, {m, c.row_stride}, {n, c.col_stride}}),
             "`", name, "` must not overlap itself: strides (", c.batch_stride, ", ", c.row_stride, ", ",
             c.col_stride, ") for ", batch, " x ", m, "x", n);
  // Stricter than self_disjoint: each batch entry must lie in its own address range (entries
  // interleaved with one another are refused; the batched kernels step from entry to entry).
  const std::int64_t one = sparsekern::detail::span_elements({{m, c.row_stride}, {n, c.col_stride}}, 8);
  SK_EXPECTS(batch <= 1 || one == 0 || c.batch_stride >= one, "`", name,
             "` batch entries must not overlap (batch stride ", c.batch_stride, " < ", one, ")");
}

}  // namespace sparsekern::csr::detail
