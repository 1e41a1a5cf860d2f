// CPU backend of the CSR SDDMM: one dot product of length t per stored entry (and batch entry),
// rows in parallel. The gradient uses X = dY (row-major) and Y = Bᵀ (a transposed view, so
// column-major): both are unit-stride along t, which is the loop the compiler vectorises.
#include <vector>

#include "../common/dispatch.h"
#include "csr_internal.h"

namespace sparsekern::csr::detail {
namespace {

using sparsekern::detail::acc_type;

template <typename T, typename I>
void sddmm_typed(const SddmmParams& p) {
  using Acc = typename acc_type<T>::type;
  const std::int64_t m = p.pattern.rows, t = p.x.cols;
  const auto* crow = static_cast<const I*>(p.pattern.crow_indices);
  const auto* col = static_cast<const I*>(p.pattern.col_indices);
  const auto* X = static_cast<const T*>(p.x.data);
  const auto* Y = static_cast<const T*>(p.y.data);
  auto* out = static_cast<T*>(p.out_values);
  const Acc alpha = static_cast<Acc>(p.alpha), beta = static_cast<Acc>(p.beta);
  const std::int64_t xcs = p.x.col_stride, yrs = p.y.row_stride;
  const std::int64_t work = p.pattern.nnz * t * p.batch;
#if defined(_OPENMP)
  // Rows hold very different numbers of entries, hence small dynamic chunks; below ~32k
  // multiply-adds the threads' start-up costs more than the work itself.
#pragma omp parallel for schedule(dynamic, 16) if (work > (1 << 15))
#endif
  for (std::int64_t i = 0; i < m; ++i) {
    for (I e = crow[i]; e < crow[i + 1]; ++e) {
      const std::int64_t j = col[e];
      // The dot product summed in double (a float running sum over t = 16384 terms was 13x less
      // accurate than torch.sparse.sampled_addmm's): each term is rounded once, the sum barely.
      double sum = 0;
      for (std::int64_t b = 0; b < p.batch; ++b) {
        const T* xrow = X + b * p.x.batch_stride + i * p.x.row_stride;
        const T* ycol = Y + b * p.y.batch_stride + j * p.y.col_stride;
        if (xcs == 1 && yrs == 1) {
          for (std::int64_t s = 0; s < t; ++s) sum += static_cast<double>(static_cast<Acc>(xrow[s]) * static_cast<Acc>(ycol[s]));
        } else {
          for (std::int64_t s = 0; s < t; ++s)
            sum += static_cast<double>(static_cast<Acc>(xrow[s * xcs]) * static_cast<Acc>(ycol[s * yrs]));
        }
      }
      Acc v = alpha * static_cast<Acc>(sum);
      // beta == 0 means write-only: never read the old values (NaN garbage cannot leak through).
      if (beta != Acc(0)) v += beta * static_cast<Acc>(out[e]);
      out[e] = static_cast<T>(v);
    }
  }
}

}  // namespace

void sddmm_cpu(const SddmmParams& p) {
  if (p.pattern.nnz == 0) return;
  SK_DTYPE_SWITCH(p.dtype, T, [&] {
    if (p.pattern.index_type == IndexType::i32)
      sddmm_typed<T, std::int32_t>(p);
    else
      sddmm_typed<T, std::int64_t>(p);
  });
}

}  // namespace sparsekern::csr::detail
