// CPU backend of the dense product: the packed, register-tiled GEMM of src/common/cpu_gemm.h
// (1024³ fp32 on the 2-core CPU machine: 19 ms; 53 with the earlier i-k-j row loop; torch 13).
#include <cstdint>

#include "../common/cpu_gemm.h"
#include "../common/dispatch.h"
#include "gemm_internal.h"

namespace sparsekern::dense::detail {
namespace {

using sparsekern::detail::acc_type;

template <typename T>
void gemm_cpu_typed(const GemmParams& p) {
  using Acc = typename acc_type<T>::type;
  auto* C = static_cast<T*>(p.c.data);
  const Acc alpha = static_cast<Acc>(p.alpha), beta = static_cast<Acc>(p.beta);
  sparsekern::detail::gemm_batched<T, Acc>(
      p.batch, p.a.rows, p.b.cols, p.a.cols, static_cast<const T*>(p.a.data), p.a.batch_stride, p.a.row_stride,
      p.a.col_stride, static_cast<const T*>(p.b.data), p.b.batch_stride, p.b.row_stride, p.b.col_stride,
      [&](std::int64_t b, std::int64_t i, std::int64_t j, Acc v) {
        T* cij = C + b * p.c.batch_stride + i * p.c.row_stride + j * p.c.col_stride;
        Acc out = alpha * v;
        // beta == 0 means "write only": never read C, so NaN garbage in it cannot leak through.
        if (beta != Acc(0)) out += beta * static_cast<Acc>(*cij);
        *cij = static_cast<T>(out);
      });
}

}  // namespace

void gemm_cpu(const GemmParams& p) {
  if (p.batch == 0 || p.a.rows == 0 || p.b.cols == 0) return;
  SK_DTYPE_SWITCH(p.dtype, T, [&] { gemm_cpu_typed<T>(p); });
}

}  // namespace sparsekern::dense::detail
