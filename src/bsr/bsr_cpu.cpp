// CPU backend of the block-sparse products (every dtype; accumulation in fp32, fp64 for fp64).
// dds form: rows of C in parallel; each row gathers the non-zero blocks of every block column of
// Bop (pre-converted once to the accumulator type, oriented so the inner loop is unit-stride).
// sdd: blocks in parallel, each a small dense product of packed panels.
#include <algorithm>
#include <vector>

#include "../common/dispatch.h"
#include "bsr_internal.h"

namespace sparsekern::bsr::detail {
namespace {

using sparsekern::detail::acc_type;

template <typename T>
void dds_cpu_typed(const DdsProblem& p) {
  using Acc = typename acc_type<T>::type;
  const SparseOperand& s = p.s;
  const std::int64_t m = p.a.rows, n = p.c.cols, b = s.block, bb = b * b;
  const auto* A = static_cast<const T*>(p.a.data);
  const auto* V = static_cast<const T*>(s.values);
  const auto* bias = static_cast<const T*>(p.bias);
  auto* C = static_cast<T*>(p.c.data);

  // Blocks of Bop in the accumulator type, row-major as Bop(kk, nn).
  std::vector<Acc> blocks(static_cast<std::size_t>(s.nnz_blocks * bb));
  for (std::int64_t v = 0; v < s.nnz_blocks; ++v) {
    const T* src = V + v * bb;
    Acc* dst = blocks.data() + v * bb;
    for (std::int64_t r = 0; r < b; ++r)
      for (std::int64_t c = 0; c < b; ++c)
        dst[r * b + c] = static_cast<Acc>(s.transposed_blocks ? src[c * b + r] : src[r * b + c]);
  }

#if defined(_OPENMP)
#pragma omp parallel if (m * s.nnz_blocks * bb > (1 << 16))
#endif
  {
    std::vector<Acc> a_row(static_cast<std::size_t>(s.k_blocks * b));
    std::vector<Acc> acc(static_cast<std::size_t>(n));
#if defined(_OPENMP)
#pragma omp for schedule(static)
#endif
    for (std::int64_t i = 0; i < m; ++i) {
      for (std::int64_t kk = 0; kk < s.k_blocks * b; ++kk)
        a_row[kk] = static_cast<Acc>(A[i * p.a.row_stride + kk * p.a.col_stride]);
      for (std::int64_t j = 0; j < n; ++j) acc[j] = bias ? static_cast<Acc>(bias[j]) : Acc(0);
      for (std::int64_t jb = 0; jb < s.n_blocks; ++jb) {
        Acc* out = acc.data() + jb * b;
        for (std::int32_t e = s.offsets[jb]; e < s.offsets[jb + 1]; ++e) {
          const std::int64_t v = s.value_index ? s.value_index[e] : e;
          const Acc* blk = blocks.data() + v * bb;
          const Acc* arow = a_row.data() + std::int64_t(s.indices[e]) * b;
          for (std::int64_t kk = 0; kk < b; ++kk) {
            const Acc av = arow[kk];
            const Acc* brow = blk + kk * b;
            for (std::int64_t nn = 0; nn < b; ++nn) out[nn] += av * brow[nn];
          }
        }
      }
      T* crow = C + i * p.c.row_stride;
      for (std::int64_t j = 0; j < n; ++j) crow[j * p.c.col_stride] = static_cast<T>(acc[j]);
    }
  }
}

template <typename T>
void sdd_cpu_typed(const SddParams& p) {
  using Acc = typename acc_type<T>::type;
  const BlockSparseView& s = p.pattern;
  const std::int64_t b = s.block_size, bb = b * b, k = p.a.cols;
  const auto* A = static_cast<const T*>(p.a.data);
  const auto* B = static_cast<const T*>(p.b.data);
  auto* out = static_cast<T*>(p.out_values);

#if defined(_OPENMP)
#pragma omp parallel if (s.nnz_blocks * bb * k > (1 << 16))
#endif
  {
    std::vector<Acc> a_panel(static_cast<std::size_t>(b * k));  // b × k, row-major
    std::vector<Acc> b_panel(static_cast<std::size_t>(k * b));  // k × b, row-major
    std::vector<Acc> acc(static_cast<std::size_t>(bb));
#if defined(_OPENMP)
#pragma omp for schedule(dynamic, 4)
#endif
    for (std::int64_t blk = 0; blk < s.nnz_blocks; ++blk) {
      const std::int64_t r0 = std::int64_t(s.block_row_indices[blk]) * b;
      const std::int64_t c0 = std::int64_t(s.block_col_indices[blk]) * b;
      for (std::int64_t r = 0; r < b; ++r)
        for (std::int64_t q = 0; q < k; ++q)
          a_panel[r * k + q] = static_cast<Acc>(A[(r0 + r) * p.a.row_stride + q * p.a.col_stride]);
      for (std::int64_t q = 0; q < k; ++q)
        for (std::int64_t c = 0; c < b; ++c)
          b_panel[q * b + c] = static_cast<Acc>(B[q * p.b.row_stride + (c0 + c) * p.b.col_stride]);
      std::fill(acc.begin(), acc.end(), Acc(0));
      for (std::int64_t r = 0; r < b; ++r) {
        Acc* arow = acc.data() + r * b;
        for (std::int64_t q = 0; q < k; ++q) {
          const Acc av = a_panel[r * k + q];
          const Acc* brow = b_panel.data() + q * b;
          for (std::int64_t c = 0; c < b; ++c) arow[c] += av * brow[c];
        }
      }
      T* dst = out + blk * bb;
      for (std::int64_t e = 0; e < bb; ++e) dst[e] = static_cast<T>(acc[e]);
    }
  }
}

}  // namespace

void dds_cpu(const DdsProblem& p) {
  if (p.a.rows == 0 || p.c.cols == 0) return;
  SK_DTYPE_SWITCH(p.dtype, T, [&] { dds_cpu_typed<T>(p); });
}

/// r[i] = Σ_j a[i, j] (SddParams::a_row_sums), accumulated in the op's accumulator type.
template <class T>
void sdd_row_sums_cpu_typed(const SddParams& p) {
  using Acc = typename acc_type<T>::type;
  const std::int64_t m = p.a.rows, k = p.a.cols;
  const auto* A = static_cast<const T*>(p.a.data);
  auto* out = static_cast<T*>(p.a_row_sums);
  for (std::int64_t i = 0; i < m; ++i) {
    Acc sum = 0;
    for (std::int64_t j = 0; j < k; ++j) sum += static_cast<Acc>(A[i * p.a.row_stride + j * p.a.col_stride]);
    out[i] = static_cast<T>(sum);
  }
}

void sdd_cpu(const SddParams& p) {
  if (p.a_row_sums != nullptr) SK_DTYPE_SWITCH(p.dtype, T, [&] { sdd_row_sums_cpu_typed<T>(p); });
  if (p.pattern.nnz_blocks == 0) return;
  SK_DTYPE_SWITCH(p.dtype, T, [&] { sdd_cpu_typed<T>(p); });
}

}  // namespace sparsekern::bsr::detail
