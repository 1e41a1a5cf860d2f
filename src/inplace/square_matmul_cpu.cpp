// CPU backend of square_matmul's copy-back: rows of the product panel over rows of X, adding the
// bias (in fp32, or fp64 for f64) when there is one.
#include <cstring>

#include "../common/dispatch.h"
#include "inplace_internal.h"

namespace sparsekern::inplace::detail {
namespace {

template <typename T>
void copy_panel_typed(const SquareMatmulParams& p, std::int64_t row0, std::int64_t rows, const void* panel) {
  using Acc = typename sparsekern::detail::acc_type<T>::type;
  const std::int64_t n = p.x.cols;
  T* x = static_cast<T*>(p.x.data) + row0 * p.x.row_stride;
  const T* src = static_cast<const T*>(panel);
  const T* bias = static_cast<const T*>(p.bias);
#if defined(_OPENMP)
#pragma omp parallel for schedule(static) if (rows * n > (1 << 16))
#endif
  for (std::int64_t r = 0; r < rows; ++r) {
    T* dst = x + r * p.x.row_stride;
    const T* s = src + r * n;
    if (bias == nullptr) {
      std::memcpy(dst, s, static_cast<std::size_t>(n) * sizeof(T));
    } else {
      for (std::int64_t j = 0; j < n; ++j) dst[j] = T(static_cast<Acc>(s[j]) + static_cast<Acc>(bias[j]));
    }
  }
}

}  // namespace

void copy_panel_cpu(const SquareMatmulParams& p, std::int64_t row0, std::int64_t rows, const void* panel) {
  SK_DTYPE_SWITCH(p.dtype, T, [&] { copy_panel_typed<T>(p, row0, rows, panel); });
}

}  // namespace sparsekern::inplace::detail
