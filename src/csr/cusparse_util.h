#pragma once
// Helpers shared by the cuSPARSE-backed csr sources: type mapping, dense-matrix layout
// description, and RAII holders for the generic-API descriptors. CUDA-backend sources only.
#include <cusparse.h>

#include <algorithm>
#include <cstdint>

#include "../common/cuda_check.h"
#include "csr_internal.h"

namespace sparsekern::csr::detail {

inline cudaDataType_t value_type(DType t) {
  switch (t) {
    case DType::f16: return CUDA_R_16F;
    case DType::bf16: return CUDA_R_16BF;
    case DType::f32: return CUDA_R_32F;
    case DType::f64: return CUDA_R_64F;
  }
  throw TypeMismatch("unsupported dtype");
}

/// fp32 accumulation for the 16- and 32-bit types (torch's choice for matmuls), fp64 for fp64.
inline cudaDataType_t compute_type(DType t) { return t == DType::f64 ? CUDA_R_64F : CUDA_R_32F; }

inline cusparseIndexType_t index_type(IndexType t) {
  return t == IndexType::i32 ? CUSPARSE_INDEX_32I : CUSPARSE_INDEX_64I;
}

/// A strided matrix as cuSPARSE sees it: `op` applied to the rows×cols matrix stored in `order`
/// with leading dimension `ld`.
struct DenseLayout {
  bool ok = false;
  cusparseOrder_t order = CUSPARSE_ORDER_ROW;
  cusparseOperation_t op = CUSPARSE_OPERATION_NON_TRANSPOSE;
  std::int64_t rows = 0, cols = 0, ld = 0;
};

/// Whether a rows×cols view with these strides is row-major (or column-major) with some leading
/// dimension; strides of size-1 dims carry no information and are ignored.
inline bool is_row_major(std::int64_t rows, std::int64_t cols, std::int64_t rs, std::int64_t cs) {
  return (cs == 1 || cols <= 1) && (rs >= std::max<std::int64_t>(cols, 1) || rows <= 1);
}
inline bool is_col_major(std::int64_t rows, std::int64_t cols, std::int64_t rs, std::int64_t cs) {
  return (rs == 1 || rows <= 1) && (cs >= std::max<std::int64_t>(rows, 1) || cols <= 1);
}

/// Describes the view in `order`: as itself (op N) when it is stored that way, else as the
/// transpose of the matrix its memory holds in that order (op T). ok = false when neither fits.
inline DenseLayout layout_in(cusparseOrder_t order, std::int64_t rows, std::int64_t cols,
                             std::int64_t rs, std::int64_t cs) {
  DenseLayout l;
  l.order = order;
  const bool row = is_row_major(rows, cols, rs, cs), col = is_col_major(rows, cols, rs, cs);
  if (order == CUSPARSE_ORDER_ROW) {
    if (row) {
      l = {true, order, CUSPARSE_OPERATION_NON_TRANSPOSE, rows, cols,
           rows <= 1 ? std::max<std::int64_t>(cols, 1) : rs};
    } else if (col) {  // memory holds Mᵀ (cols×rows) row-major with ld = cs
      l = {true, order, CUSPARSE_OPERATION_TRANSPOSE, cols, rows,
           cols <= 1 ? std::max<std::int64_t>(rows, 1) : cs};
    }
  } else {
    if (col) {
      l = {true, order, CUSPARSE_OPERATION_NON_TRANSPOSE, rows, cols,
           cols <= 1 ? std::max<std::int64_t>(rows, 1) : cs};
    } else if (row) {  // memory holds Mᵀ (cols×rows) column-major with ld = rs
      l = {true, order, CUSPARSE_OPERATION_TRANSPOSE, cols, rows,
           rows <= 1 ? std::max<std::int64_t>(cols, 1) : rs};
    }
  }
  return l;
}

/// The view's own storage order (row-major preferred when both fit, e.g. a single row).
inline cusparseOrder_t natural_order(std::int64_t rows, std::int64_t cols, std::int64_t rs,
                                     std::int64_t cs) {
  return is_row_major(rows, cols, rs, cs) ? CUSPARSE_ORDER_ROW : CUSPARSE_ORDER_COL;
}

struct DnMat {
  cusparseDnMatDescr_t h = nullptr;
  DnMat() = default;
  DnMat(const DnMat&) = delete;
  DnMat& operator=(const DnMat&) = delete;
  ~DnMat() { reset(); }
  void reset() noexcept {
    if (h) (void)cusparseDestroyDnMat(h);
    h = nullptr;
  }
  void create(const DenseLayout& l, const void* data, cudaDataType_t type) {
    reset();
    SK_CUSPARSE_TRY(cusparseCreateDnMat(&h, l.rows, l.cols, l.ld, const_cast<void*>(data), type, l.order));
  }
};

struct SpMat {
  cusparseSpMatDescr_t h = nullptr;
  SpMat() = default;
  SpMat(const SpMat&) = delete;
  SpMat& operator=(const SpMat&) = delete;
  ~SpMat() { reset(); }
  void reset() noexcept {
    if (h) (void)cusparseDestroySpMat(h);
    h = nullptr;
  }
  void create_csr(const CsrView& a, const void* values, cudaDataType_t type) {
    reset();
    SK_CUSPARSE_TRY(cusparseCreateCsr(&h, a.rows, a.cols, a.nnz, const_cast<void*>(a.crow_indices),
                                      const_cast<void*>(a.col_indices), const_cast<void*>(values),
                                      index_type(a.index_type), index_type(a.index_type),
                                      CUSPARSE_INDEX_BASE_ZERO, type));
  }
};

/// Statuses that mean "this combination (algorithm, layout, type) is not available": the plan
/// tries the next candidate instead of failing.
inline bool unsupported(cusparseStatus_t st) {
  return st == CUSPARSE_STATUS_NOT_SUPPORTED || st == CUSPARSE_STATUS_INVALID_VALUE ||
         st == CUSPARSE_STATUS_ARCH_MISMATCH;
}

/// dst[b][r][c] = beta · dst[b][r][c] on `stream`; beta = 0 writes zeros without reading
/// (spmm_cuda.cu). Used where a product has no terms and cuSPARSE is not called.
void scale_strided(DType dtype, void* dst, std::int64_t batch, std::int64_t rows, std::int64_t cols,
                   std::int64_t bs, std::int64_t rs, std::int64_t cs, double beta, cudaStream_t stream);

/// Byte offset helper for batch entries.
inline const void* offset(const void* p, std::int64_t elements, DType t) {
  return static_cast<const char*>(p) + elements * static_cast<std::int64_t>(dtype_size(t));
}
inline void* offset(void* p, std::int64_t elements, DType t) {
  return static_cast<char*>(p) + elements * static_cast<std::int64_t>(dtype_size(t));
}

}  // namespace sparsekern::csr::detail
