// CPU backend of the CSR SpMM. Each output row is the sum of the rows of B picked by the stored
// entries of the matching row of op(A), accumulated in a row-sized accumulator (fp32 or fp64) and
// written once. Rows are independent, so they run in parallel; Aᵀ is walked through a CSC index
// built once per call (a counting sort, O(nnz + rows)), so the transposed product is not a scatter.
#include <algorithm>
#include <vector>

#include "../common/dispatch.h"
#include "../common/thread_scratch.h"
#include "csr_internal.h"

namespace sparsekern::csr::detail {
namespace {

using sparsekern::detail::acc_type;

/// The rows of op(A): for output row r, entries [offsets[r], offsets[r+1]) hold the column of B
/// to read (`cols`) and where the value sits in A's value array (`source`, identity for op = N).
template <typename I>
struct RowIndex {
  const I* offsets = nullptr;
  const I* cols = nullptr;
  const std::int64_t* source = nullptr;  // nullptr: value e is values[e]
  std::vector<I> offsets_storage, cols_storage;
  std::vector<std::int64_t> source_storage;
};

/// CSC of A (= CSR of Aᵀ) by a stable counting sort over the columns.
template <typename I>
void transpose_index(const CsrView& a, RowIndex<I>& t) {
  const auto* crow = static_cast<const I*>(a.crow_indices);
  const auto* col = static_cast<const I*>(a.col_indices);
  t.offsets_storage.assign(static_cast<std::size_t>(a.cols + 1), I(0));
  for (std::int64_t e = 0; e < a.nnz; ++e) ++t.offsets_storage[static_cast<std::size_t>(col[e]) + 1];
  for (std::int64_t j = 0; j < a.cols; ++j) t.offsets_storage[j + 1] += t.offsets_storage[j];
  t.cols_storage.resize(static_cast<std::size_t>(a.nnz));
  t.source_storage.resize(static_cast<std::size_t>(a.nnz));
  std::vector<I> next(t.offsets_storage.begin(), t.offsets_storage.end() - 1);
  for (std::int64_t i = 0; i < a.rows; ++i) {
    for (I e = crow[i]; e < crow[i + 1]; ++e) {
      const I slot = next[col[e]]++;
      t.cols_storage[slot] = static_cast<I>(i);
      t.source_storage[slot] = e;
    }
  }
  t.offsets = t.offsets_storage.data();
  t.cols = t.cols_storage.data();
  t.source = t.source_storage.data();
}

template <typename T, typename I>
void spmm_typed(const SpmmParams& p) {
  using Acc = typename acc_type<T>::type;
  const std::int64_t m = p.c.rows, n = p.c.cols;
  RowIndex<I> rows;
  if (p.transpose_a) {
    transpose_index(p.a, rows);
  } else {
    rows.offsets = static_cast<const I*>(p.a.crow_indices);
    rows.cols = static_cast<const I*>(p.a.col_indices);
  }
  const auto* values = static_cast<const T*>(p.a.values);
  const Acc alpha = static_cast<Acc>(p.alpha), beta = static_cast<Acc>(p.beta);
  const std::int64_t bcs = p.b.col_stride;

  for (std::int64_t bi = 0; bi < p.batch; ++bi) {
    const T* B = static_cast<const T*>(p.b.data) + bi * p.b.batch_stride;
    T* C = static_cast<T*>(p.c.data) + bi * p.c.batch_stride;
    const std::int64_t work = p.a.nnz * n;
    // Below ~32k multiply-adds the threads' start-up costs more than the work itself.
    ::sparsekern::detail::ThreadScratch<Acc> scratch(static_cast<std::size_t>(n), work > (1 << 15));
#if defined(_OPENMP)
#pragma omp parallel if (work > (1 << 15))
#endif
    {
      Acc* acc = scratch.get();
      // Rows hold very different numbers of entries (power-law patterns), so hand them out in
      // small dynamic chunks rather than equal static slices.
#if defined(_OPENMP)
#pragma omp for schedule(dynamic, 16)
#endif
      for (std::int64_t r = 0; r < m; ++r) {
        std::fill(acc, acc + n, Acc(0));
        for (I q = rows.offsets[r]; q < rows.offsets[r + 1]; ++q) {
          const Acc v = static_cast<Acc>(values[rows.source ? rows.source[q] : q]);
          const T* brow = B + static_cast<std::int64_t>(rows.cols[q]) * p.b.row_stride;
          if (bcs == 1) {
            for (std::int64_t j = 0; j < n; ++j) acc[j] += v * static_cast<Acc>(brow[j]);
          } else {
            for (std::int64_t j = 0; j < n; ++j) acc[j] += v * static_cast<Acc>(brow[j * bcs]);
          }
        }
        T* crow_out = C + r * p.c.row_stride;
        for (std::int64_t j = 0; j < n; ++j) {
          Acc out = alpha * acc[j];
          // beta == 0 means write-only: never read C, so NaN garbage in it cannot leak through.
          if (beta != Acc(0)) out += beta * static_cast<Acc>(crow_out[j * p.c.col_stride]);
          crow_out[j * p.c.col_stride] = static_cast<T>(out);
        }
      }
    }
  }
}

}  // namespace

void spmm_cpu(const SpmmParams& p) {
  if (p.batch == 0 || p.c.rows == 0 || p.c.cols == 0) return;
  SK_DTYPE_SWITCH(p.dtype, T, [&] {
    if (p.a.index_type == IndexType::i32)
      spmm_typed<T, std::int32_t>(p);
    else
      spmm_typed<T, std::int64_t>(p);
  });
}

}  // namespace sparsekern::csr::detail
