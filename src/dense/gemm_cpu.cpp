// CPU backend of the dense product. Each batch entry's operands are first packed into contiguous
// row-major accumulator-type panels (one conversion per element instead of one per multiply-add,
// and unit-stride inner loops the compiler vectorises), then C rows are computed in parallel with
// an i-k-j loop order that streams through B.
#include <vector>

#include "../common/dispatch.h"
#include "gemm_internal.h"

namespace sparsekern::dense::detail {
namespace {

using sparsekern::detail::acc_type;

template <typename T>
void gemm_cpu_typed(const GemmParams& p) {
  using Acc = typename acc_type<T>::type;
  const std::int64_t m = p.a.rows, k = p.a.cols, n = p.b.cols;
  const auto* A = static_cast<const T*>(p.a.data);
  const auto* B = static_cast<const T*>(p.b.data);
  auto* C = static_cast<T*>(p.c.data);
  const Acc alpha = static_cast<Acc>(p.alpha), beta = static_cast<Acc>(p.beta);

  std::vector<Acc> b_panel(static_cast<std::size_t>(k * n));
  for (std::int64_t bi = 0; bi < p.batch; ++bi) {
    const T* a = A + bi * p.a.batch_stride;
    const T* b = B + bi * p.b.batch_stride;
    T* c = C + bi * p.c.batch_stride;
    if (bi == 0 || p.b.batch_stride != 0) {
      for (std::int64_t r = 0; r < k; ++r)
        for (std::int64_t j = 0; j < n; ++j)
          b_panel[r * n + j] = static_cast<Acc>(b[r * p.b.row_stride + j * p.b.col_stride]);
    }
#if defined(_OPENMP)
#pragma omp parallel if (m * n * k > (1 << 16))
#endif
    {
      std::vector<Acc> acc(static_cast<std::size_t>(n));
      std::vector<Acc> a_row(static_cast<std::size_t>(k));
#if defined(_OPENMP)
#pragma omp for schedule(static)
#endif
      for (std::int64_t i = 0; i < m; ++i) {
        for (std::int64_t r = 0; r < k; ++r)
          a_row[r] = static_cast<Acc>(a[i * p.a.row_stride + r * p.a.col_stride]);
        std::fill(acc.begin(), acc.end(), Acc(0));
        for (std::int64_t r = 0; r < k; ++r) {
          const Acc air = a_row[r];
          const Acc* brow = b_panel.data() + r * n;
          for (std::int64_t j = 0; j < n; ++j) acc[j] += air * brow[j];
        }
        T* crow = c + i * p.c.row_stride;
        for (std::int64_t j = 0; j < n; ++j) {
          Acc v = alpha * acc[j];
          // beta == 0 means "write only": never read C, so NaN garbage in it cannot leak through.
          if (beta != Acc(0)) v += beta * static_cast<Acc>(crow[j * p.c.col_stride]);
          crow[j * p.c.col_stride] = static_cast<T>(v);
        }
      }
    }
  }
}

}  // namespace

void gemm_cpu(const GemmParams& p) {
  if (p.batch == 0 || p.a.rows == 0 || p.b.cols == 0) return;
  SK_DTYPE_SWITCH(p.dtype, T, [&] { gemm_cpu_typed<T>(p); });
}

}  // namespace sparsekern::dense::detail
