// CPU backend of the row-wise in-place ops. Each row is converted once into an accumulator-type
// buffer (fp32, or fp64 for f64), reduced exactly in two passes over that buffer, and written back;
// rows run in parallel. The buffer is host memory owned by the worker thread. Row sums accumulate in
// fp64 whatever the dtype: a sequential fp32 sum over 10^5 elements drifts by ~1e-5 relative, the
// fp32 tolerance, while the GPU's tree reductions do not (and fp64 adds cost nothing measurable here).
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "../common/dispatch.h"
#include "../common/thread_scratch.h"
#include "inplace_internal.h"

namespace sparsekern::inplace::detail {
namespace {

using sparsekern::detail::acc_type;

/// Parallel loop over the rows of `v`: fn(element offset of the row, per-thread buffer of cols).
template <typename Acc, typename Fn>
void for_each_row(const RowsView& v, Fn&& fn) {
  const std::int64_t rows = v.rows();
  const bool big = rows > 1 && rows * v.cols > (std::int64_t(1) << 15);  // below this, threads cost more than they save
  (void)big;
  ::sparsekern::detail::ThreadScratch<Acc> scratch(static_cast<std::size_t>(v.cols), big);
#if defined(_OPENMP)
#pragma omp parallel if (big)
#endif
  {
    Acc* buf = scratch.get();
#if defined(_OPENMP)
#pragma omp for schedule(static)
#endif
    for (std::int64_t r = 0; r < rows; ++r) {
      const std::int64_t off = (r / v.inner) * v.outer_stride + (r % v.inner) * v.inner_stride;
      fn(off, buf);
    }
  }
}

template <typename T>
void softmax_typed(const RowsView& v) {
  using Acc = typename acc_type<T>::type;
  T* base = static_cast<T*>(v.data);
  const std::int64_t n = v.cols, cs = v.col_stride;
  for_each_row<Acc>(v, [&](std::int64_t off, Acc* buf) {
    T* row = base + off;
    Acc m = -std::numeric_limits<Acc>::infinity();
    for (std::int64_t j = 0; j < n; ++j) {
      buf[j] = static_cast<Acc>(row[j * cs]);
      m = std::max(m, buf[j]);
    }
    // A fully masked row (all -inf) gives exp(-inf - 0) = 0 everywhere: zeros, not NaN.
    if (m == -std::numeric_limits<Acc>::infinity()) m = 0;
    double s = 0;
    for (std::int64_t j = 0; j < n; ++j) {
      buf[j] = std::exp(buf[j] - m);
      s += buf[j];
    }
    const Acc inv = s == 0 ? Acc(0) : static_cast<Acc>(1 / s);  // NaN inputs propagate, as in torch
    for (std::int64_t j = 0; j < n; ++j) row[j * cs] = T(buf[j] * inv);
  });
}

template <typename T>
void softmax_backward_typed(const SoftmaxBackwardParams& p) {
  using Acc = typename acc_type<T>::type;
  T* g = static_cast<T*>(p.grad.data);
  const T* y = static_cast<const T*>(p.y.data);
  const std::int64_t n = p.grad.cols, gs = p.grad.col_stride, ys = p.y.col_stride;
  const RowsView& gv = p.grad;
  const RowsView& yv = p.y;
  const std::int64_t rows = gv.rows();
  const bool big = rows > 1 && rows * n > (std::int64_t(1) << 15);
  (void)big;
#if defined(_OPENMP)
#pragma omp parallel for schedule(static) if (big)
#endif
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t o = r / gv.inner, i = r % gv.inner;
    T* grow = g + o * gv.outer_stride + i * gv.inner_stride;
    const T* yrow = y + o * yv.outer_stride + i * yv.inner_stride;
    double sum = 0;
    for (std::int64_t j = 0; j < n; ++j)
      sum += static_cast<Acc>(grow[j * gs]) * static_cast<Acc>(yrow[j * ys]);
    const Acc dot = static_cast<Acc>(sum);
    for (std::int64_t j = 0; j < n; ++j) {
      const Acc yj = static_cast<Acc>(yrow[j * ys]);
      grow[j * gs] = T(yj * (static_cast<Acc>(grow[j * gs]) - dot));
    }
  }
}

/// layer_norm (kRms = false) or rms_norm (kRms = true) over contiguous rows.
template <typename T, bool kRms>
void norm_typed(const NormParams& p) {
  using Acc = typename acc_type<T>::type;
  T* base = static_cast<T*>(p.x.data);
  const T* w = static_cast<const T*>(p.weight);
  const T* b = static_cast<const T*>(p.bias);
  const std::int64_t n = p.x.cols;
  const double eps = p.eps;
  for_each_row<Acc>(p.x, [&](std::int64_t off, Acc* buf) {
    T* row = base + off;
    double sum = 0;
    for (std::int64_t j = 0; j < n; ++j) {
      buf[j] = static_cast<Acc>(row[j]);
      sum += buf[j];
    }
    const Acc mean = kRms ? Acc(0) : static_cast<Acc>(sum / static_cast<double>(n));
    double ss = 0;  // Σ (x - mean)² (two passes: exact, no cancellation for large means)
    for (std::int64_t j = 0; j < n; ++j) {  // squared in double: (1e20)² overflowed fp32 into a zero row
      const double d = static_cast<double>(buf[j]) - static_cast<double>(mean);
      ss += d * d;
    }
    const Acc rstd = static_cast<Acc>(1 / std::sqrt(ss / static_cast<double>(n) + static_cast<double>(eps)));
    for (std::int64_t j = 0; j < n; ++j) {
      Acc v = (buf[j] - mean) * rstd;
      if (w) v *= static_cast<Acc>(w[j]);
      if (b) v += static_cast<Acc>(b[j]);
      row[j] = T(v);
    }
  });
}

}  // namespace

void softmax_cpu(const SoftmaxParams& p) {
  SK_DTYPE_SWITCH(p.dtype, T, [&] { softmax_typed<T>(p.x); });
}

void softmax_backward_cpu(const SoftmaxBackwardParams& p) {
  SK_DTYPE_SWITCH(p.dtype, T, [&] { softmax_backward_typed<T>(p); });
}

void layer_norm_cpu(const NormParams& p) {
  SK_DTYPE_SWITCH(p.dtype, T, [&] { norm_typed<T, false>(p); });
}

void rms_norm_cpu(const NormParams& p) {
  SK_DTYPE_SWITCH(p.dtype, T, [&] { norm_typed<T, true>(p); });
}

}  // namespace sparsekern::inplace::detail
