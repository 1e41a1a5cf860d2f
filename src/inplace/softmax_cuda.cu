// CUDA backend of the in-place softmax and softmax backward (see rows_cuda.cuh for the layout of
// the kernels). Three kernels per op: a register tile (row read once, written once) for rows up to
// 16K elements, a streaming block-per-row kernel for longer rows, and a thread-per-row kernel for
// rows whose elements are strided (softmax over a non-innermost dim, coalesced across rows).
// The backward of 16-bit rows of 257…2048 elements takes a fourth, the warp-row kernel.
// fp64 uses only the streaming and strided kernels: it is here for completeness, not speed, and
// instantiating the tile table for it would double the compile time for no target.

#include <cmath>
#include <cstdlib>

#include "rows_cuda.cuh"
#include "inplace_internal.h"

namespace sparsekern::inplace::detail {
namespace {

template <typename A> __device__ __forceinline__ A neg_inf() { return -static_cast<A>(INFINITY); }

// ---------------------------------------------------------------------------------------------
// softmax
// ---------------------------------------------------------------------------------------------
template <typename T, int TPR, int N>
__global__ void __launch_bounds__(block_threads<TPR>())
softmax_tile_kernel(T* x, RowGeom g, bool aligned) {
  using A = acc_t<T>;
  constexpr int V = kVec<T>, VPT = N / V, RPB = block_threads<TPR>() / TPR;
  static_assert(N % V == 0, "a thread's elements are whole vectors");
  __shared__ A smem[32];
  const int t = threadIdx.x % TPR;
  for (std::int64_t base = std::int64_t(blockIdx.x) * RPB; base < g.rows; base += std::int64_t(gridDim.x) * RPB) {
    const std::int64_t r = base + threadIdx.x / TPR;
    // Groups past the last row still take part in the (warp-wide) shuffles, with no elements.
    const std::int64_t cols = r < g.rows ? g.cols : 0;
    T* row = x + (r < g.rows ? g.offset(r) : 0);
    A v[N];
#pragma unroll
    for (int k = 0; k < VPT; ++k) load_vec(row, (std::int64_t(k) * TPR + t) * V, cols, aligned, v + k * V, neg_inf<A>());
    A m = v[0];
#pragma unroll
    for (int e = 1; e < N; ++e) m = m > v[e] ? m : v[e];
    m = group_allreduce<TPR>(m, smem, MaxOp{});
    const A shift = m == neg_inf<A>() ? A(0) : m;  // fully masked row: exp(-inf) = 0, zeros not NaN
    A s = 0;
#pragma unroll
    for (int e = 0; e < N; ++e) {
      v[e] = softmax_exp<T>(v[e] - shift);
      s += v[e];
    }
    s = group_allreduce<TPR>(s, smem, SumOp{});
    const A inv = s == A(0) ? A(0) : A(1) / s;  // 0 only for a fully masked row; NaN propagates
#pragma unroll
    for (int e = 0; e < N; ++e) v[e] *= inv;
#pragma unroll
    for (int k = 0; k < VPT; ++k) store_vec(row, (std::int64_t(k) * TPR + t) * V, cols, aligned, v + k * V);
  }
}

/// Folds a block of values into a running (max m, Σ exp(x − m)) pair; m stays −inf while every
/// value seen is −inf (then s stays 0).
template <typename T, int V>
__device__ __forceinline__ void online_max_sum(const acc_t<T>* v, acc_t<T>& m, acc_t<T>& s) {
  using A = acc_t<T>;
  A cm = v[0];
#pragma unroll
  for (int k = 1; k < V; ++k) cm = cm > v[k] ? cm : v[k];
  if (cm > m) {
    s = m == neg_inf<A>() ? A(0) : s * softmax_exp<T>(m - cm);
    m = cm;
  }
  if (m != neg_inf<A>()) {
#pragma unroll
    for (int k = 0; k < V; ++k) s += softmax_exp<T>(v[k] - m);
  }
}

template <typename T>
__global__ void __launch_bounds__(kStreamThreads) softmax_stream_kernel(T* x, RowGeom g, bool aligned) {
  using A = acc_t<T>;
  constexpr int V = kVec<T>;
  constexpr std::int64_t kStep = std::int64_t(kStreamThreads) * V;
  __shared__ A smem[32];
  for (std::int64_t r = blockIdx.x; r < g.rows; r += gridDim.x) {
    T* row = x + g.offset(r);
    A m = neg_inf<A>(), s = 0;
    for (std::int64_t e0 = std::int64_t(threadIdx.x) * V; e0 < g.cols; e0 += kStep) {
      A v[V];
      load_vec(row, e0, g.cols, aligned, v, neg_inf<A>());
      online_max_sum<T, V>(v, m, s);
    }
    const A row_max = group_allreduce<kStreamThreads>(m, smem, MaxOp{});
    const A shift = row_max == neg_inf<A>() ? A(0) : row_max;
    const A total = group_allreduce<kStreamThreads>(m == neg_inf<A>() ? A(0) : s * softmax_exp<T>(m - shift), smem, SumOp{});
    const A inv = total == A(0) ? A(0) : A(1) / total;
    for (std::int64_t e0 = std::int64_t(threadIdx.x) * V; e0 < g.cols; e0 += kStep) {
      A v[V];
      load_vec(row, e0, g.cols, aligned, v, neg_inf<A>());
#pragma unroll
      for (int k = 0; k < V; ++k) v[k] = softmax_exp<T>(v[k] - shift) * inv;
      store_vec(row, e0, g.cols, aligned, v);
    }
  }
}

template <typename T>
__global__ void __launch_bounds__(kStridedThreads) softmax_strided_kernel(T* x, RowGeom g, std::int64_t cs) {
  using A = acc_t<T>;
  for (std::int64_t r = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; r < g.rows;
       r += std::int64_t(gridDim.x) * blockDim.x) {
    T* row = x + g.offset(r);
    A m = neg_inf<A>(), s = 0;
    for (std::int64_t j = 0; j < g.cols; ++j) {
      const A v = to_acc(row[j * cs]);
      online_max_sum<T, 1>(&v, m, s);
    }
    const A shift = m == neg_inf<A>() ? A(0) : m;
    const A inv = s == A(0) ? A(0) : A(1) / s;  // 0 only for a fully masked row; NaN propagates
    for (std::int64_t j = 0; j < g.cols; ++j)
      row[j * cs] = from_acc<T>(softmax_exp<T>(to_acc(row[j * cs]) - shift) * inv);
  }
}

// No warp-row kernel for the forward softmax: measured on the H200 it ran (32,12,512,512) fp16 at
// 74% of the copy bandwidth and (64,1024,1032) at 55%, against 83-86% for the row-tile kernel
// below (tools/diag/run5.sh, 2026-11-22). The backward keeps its warp rows (89-90% vs 83%).

template <typename T>
void launch_softmax(const SoftmaxParams& p, cudaStream_t stream) {
  const RowGeom g = geom_of(p.x);
  T* x = static_cast<T*>(p.x.data);
  if (p.x.col_stride != 1 && p.x.cols > 1) {
    softmax_strided_kernel<T><<<grid_for(g.rows, kStridedThreads), kStridedThreads, 0, stream>>>(x, g, p.x.col_stride);
    return;
  }
  const bool aligned = rows_aligned<T>(p.x);
  bool tiled = false;
  if constexpr (!std::is_same_v<T, double>) {
    tiled = with_row_tile(g.cols, [&](auto tpr, auto n) {
      constexpr int TPR = decltype(tpr)::value, N = decltype(n)::value, B = block_threads<TPR>();
      softmax_tile_kernel<T, TPR, N><<<grid_for(g.rows, B / TPR), B, 0, stream>>>(x, g, aligned);
    });
  }
  if (!tiled) softmax_stream_kernel<T><<<grid_for(g.rows, 1), kStreamThreads, 0, stream>>>(x, g, aligned);
}

// ---------------------------------------------------------------------------------------------
// softmax backward: g ← y · (g − Σ g·y)
// ---------------------------------------------------------------------------------------------
template <typename T, int TPR, int N>
__global__ void __launch_bounds__(block_threads<TPR>())
softmax_backward_tile_kernel(T* grad, RowGeom gg, const T* y, RowGeom yg, bool aligned) {
  using A = acc_t<T>;
  constexpr int V = kVec<T>, VPT = N / V, RPB = block_threads<TPR>() / TPR;
  static_assert(N % V == 0, "a thread's elements are whole vectors");
  __shared__ A smem[32];
  const int t = threadIdx.x % TPR;
  for (std::int64_t base = std::int64_t(blockIdx.x) * RPB; base < gg.rows; base += std::int64_t(gridDim.x) * RPB) {
    const std::int64_t r = base + threadIdx.x / TPR;
    const bool valid = r < gg.rows;
    const std::int64_t cols = valid ? gg.cols : 0;
    T* grow = grad + (valid ? gg.offset(r) : 0);
    const T* yrow = y + (valid ? yg.offset(r) : 0);
    A gv[N], yv[N];
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
      const std::int64_t e0 = (std::int64_t(k) * TPR + t) * V;
      load_vec(grow, e0, cols, aligned, gv + k * V, A(0));
      load_vec(yrow, e0, cols, aligned, yv + k * V, A(0));
    }
    A dot = 0;
#pragma unroll
    for (int e = 0; e < N; ++e) dot += gv[e] * yv[e];
    dot = group_allreduce<TPR>(dot, smem, SumOp{});
#pragma unroll
    for (int e = 0; e < N; ++e) gv[e] = yv[e] * (gv[e] - dot);
#pragma unroll
    for (int k = 0; k < VPT; ++k) store_vec(grow, (std::int64_t(k) * TPR + t) * V, cols, aligned, gv + k * V);
  }
}

template <typename T>
__global__ void __launch_bounds__(kStreamThreads)
softmax_backward_stream_kernel(T* grad, RowGeom gg, const T* y, RowGeom yg, bool aligned) {
  using A = acc_t<T>;
  constexpr int V = kVec<T>;
  constexpr std::int64_t kStep = std::int64_t(kStreamThreads) * V;
  __shared__ A smem[32];
  for (std::int64_t r = blockIdx.x; r < gg.rows; r += gridDim.x) {
    T* grow = grad + gg.offset(r);
    const T* yrow = y + yg.offset(r);
    A dot = 0;
    for (std::int64_t e0 = std::int64_t(threadIdx.x) * V; e0 < gg.cols; e0 += kStep) {
      A gv[V], yv[V];
      load_vec(grow, e0, gg.cols, aligned, gv, A(0));
      load_vec(yrow, e0, gg.cols, aligned, yv, A(0));
#pragma unroll
      for (int k = 0; k < V; ++k) dot += gv[k] * yv[k];
    }
    dot = group_allreduce<kStreamThreads>(dot, smem, SumOp{});
    for (std::int64_t e0 = std::int64_t(threadIdx.x) * V; e0 < gg.cols; e0 += kStep) {
      A gv[V], yv[V];
      load_vec(grow, e0, gg.cols, aligned, gv, A(0));
      load_vec(yrow, e0, gg.cols, aligned, yv, A(0));
#pragma unroll
      for (int k = 0; k < V; ++k) gv[k] = yv[k] * (gv[k] - dot);
      store_vec(grow, e0, gg.cols, aligned, gv);
    }
  }
}

template <typename T>
__global__ void __launch_bounds__(kStridedThreads)
softmax_backward_strided_kernel(T* grad, RowGeom gg, std::int64_t gs, const T* y, RowGeom yg, std::int64_t ys) {
  using A = acc_t<T>;
  for (std::int64_t r = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; r < gg.rows;
       r += std::int64_t(gridDim.x) * blockDim.x) {
    T* grow = grad + gg.offset(r);
    const T* yrow = y + yg.offset(r);
    A dot = 0;
    for (std::int64_t j = 0; j < gg.cols; ++j) dot += to_acc(grow[j * gs]) * to_acc(yrow[j * ys]);
    for (std::int64_t j = 0; j < gg.cols; ++j)
      grow[j * gs] = from_acc<T>(to_acc(yrow[j * ys]) * (to_acc(grow[j * gs]) - dot));
  }
}

/// g ← y·(g − Σ g·y) for one row held as raw words by a warp.
template <typename T, int VPW>
__device__ __forceinline__ void softmax_backward_warp_row(uint4* graw, uint4* yraw, T* grow,
                                                          std::int64_t nvec) {
  using A = acc_t<T>;
  constexpr int V = kVec<T>;
  const int lane = threadIdx.x % 32;
  A part[V] = {};  // one partial sum per element slot: V short chains instead of one long one
#pragma unroll
  for (int k = 0; k < VPW; ++k) {
    if (std::int64_t(k) * 32 + lane < nvec) {
      A gf[V], yf[V];
      unpack_vec<T>(graw[k], gf);
      unpack_vec<T>(yraw[k], yf);
#pragma unroll
      for (int e = 0; e < V; ++e) part[e] += gf[e] * yf[e];
    }
  }
  launder_words<VPW>(graw);
  launder_words<VPW>(yraw);
  const A dot = warp_allreduce(sum_slots<V>(part), SumOp{});
  uint4* out = reinterpret_cast<uint4*>(grow);
#pragma unroll
  for (int k = 0; k < VPW; ++k) {
    const std::int64_t vi = std::int64_t(k) * 32 + lane;
    if (vi < nvec) {
      A gf[V], yf[V];
      unpack_vec<T>(graw[k], gf);
      unpack_vec<T>(yraw[k], yf);
#pragma unroll
      for (int e = 0; e < V; ++e) gf[e] = yf[e] * (gf[e] - dot);
      out[vi] = pack_vec<T>(gf);
    }
  }
}

template <typename T, int VPW>
__global__ void __launch_bounds__(kWarpRowsThreads, kWarpRowsMinBlocks)
softmax_backward_warp_kernel(T* grad, RowGeom gg, const T* y, RowGeom yg) {
  constexpr bool kPrefetch = prefetch_next_row(2 * VPW);
  const int lane = threadIdx.x % 32;
  const std::int64_t nvec = gg.cols / kVec<T>;
  const std::int64_t step = std::int64_t(gridDim.x) * kWarpRowsWarps;
  std::int64_t r = std::int64_t(blockIdx.x) * kWarpRowsWarps + threadIdx.x / 32;
  uint4 gcur[VPW], ycur[VPW];
  if (kPrefetch && r < gg.rows) {
    load_row_words<VPW>(grad + gg.offset(r), nvec, lane, gcur);
    load_row_words<VPW>(y + yg.offset(r), nvec, lane, ycur);
  }
  for (; r < gg.rows; r += step) {
    uint4 gnext[VPW], ynext[VPW];
    if constexpr (kPrefetch) {
      if (r + step < gg.rows) {
        load_row_words<VPW>(grad + gg.offset(r + step), nvec, lane, gnext);
        load_row_words<VPW>(y + yg.offset(r + step), nvec, lane, ynext);
      }
    } else {
      load_row_words<VPW>(grad + gg.offset(r), nvec, lane, gcur);
      load_row_words<VPW>(y + yg.offset(r), nvec, lane, ycur);
    }
    softmax_backward_warp_row<T, VPW>(gcur, ycur, grad + gg.offset(r), nvec);
    if constexpr (kPrefetch) {
#pragma unroll
      for (int k = 0; k < VPW; ++k) gcur[k] = gnext[k], ycur[k] = ynext[k];
    }
  }
}

template <typename T>
void launch_softmax_backward(const SoftmaxBackwardParams& p, cudaStream_t stream) {
  const RowGeom gg = geom_of(p.grad), yg = geom_of(p.y);
  T* grad = static_cast<T*>(p.grad.data);
  const T* y = static_cast<const T*>(p.y.data);
  if (p.grad.cols > 1 && (p.grad.col_stride != 1 || p.y.col_stride != 1)) {
    softmax_backward_strided_kernel<T><<<grid_for(gg.rows, kStridedThreads), kStridedThreads, 0, stream>>>(
        grad, gg, p.grad.col_stride, y, yg, p.y.col_stride);
    return;
  }
  const bool aligned = rows_aligned<T>(p.grad) && rows_aligned<T>(p.y);
  // At most 8 words per lane per tensor: grad and y together then fit in 64 data registers.
  if (aligned && with_warp_rows<T, 8>(gg.cols, [&](auto vpw) {
        constexpr int VPW = decltype(vpw)::value;
        const auto kernel = softmax_backward_warp_kernel<T, VPW>;
        kernel<<<persistent_grid(kernel, kWarpRowsThreads, 0, gg.rows, kWarpRowsWarps), kWarpRowsThreads, 0,
                 stream>>>(grad, gg, y, yg);
      }))
    return;
  bool tiled = false;
  if constexpr (!std::is_same_v<T, double>) {
    tiled = with_row_tile(gg.cols, [&](auto tpr, auto n) {
      constexpr int TPR = decltype(tpr)::value, N = decltype(n)::value, B = block_threads<TPR>();
      softmax_backward_tile_kernel<T, TPR, N><<<grid_for(gg.rows, B / TPR), B, 0, stream>>>(grad, gg, y, yg, aligned);
    });
  }
  if (!tiled)
    softmax_backward_stream_kernel<T><<<grid_for(gg.rows, 1), kStreamThreads, 0, stream>>>(grad, gg, y, yg, aligned);
}

}  // namespace

bool warp_rows_enabled() {
  static const bool enabled = [] {
    const char* v = std::getenv("SPARSEKERN_INPLACE_WARP_ROWS");
    return v == nullptr || v[0] != '0';
  }();
  return enabled;
}

void softmax_cuda(const SoftmaxParams& p, Stream stream) {
  sparsekern::detail::require_cuda_device(p.device.index);
  sparsekern::detail::DeviceGuard guard(p.device.index);
  cuda_dtype_switch(p.dtype, [&](auto tag) {
    launch_softmax<typename decltype(tag)::type>(p, static_cast<cudaStream_t>(stream));
  });
  SK_CUDA_CHECK_LAUNCH();
}

void softmax_backward_cuda(const SoftmaxBackwardParams& p, Stream stream) {
  sparsekern::detail::require_cuda_device(p.device.index);
  sparsekern::detail::DeviceGuard guard(p.device.index);
  cuda_dtype_switch(p.dtype, [&](auto tag) {
    launch_softmax_backward<typename decltype(tag)::type>(p, static_cast<cudaStream_t>(stream));
  });
  SK_CUDA_CHECK_LAUNCH();
}

}  // namespace sparsekern::inplace::detail
