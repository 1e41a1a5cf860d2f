// CUDA backend of the in-place LayerNorm and RMSNorm with the affine fused into the same pass (see
// rows_cuda.cuh for the kernel layout). Register tile: exact two-pass mean/variance over the cached
// row (no cancellation for rows with a large mean). Streaming kernel for rows over 16K elements:
// per-thread Chan/Welford merges of 16-byte vectors, combined across the block, then a second read
// of the row to write it. weight/bias come through the read-only cache. fp64: streaming only.
// 16-bit rows of 257…4096 elements: the warp-row kernel (weight/bias staged in shared memory).

#include <cmath>
#include <cstddef>

#include "rows_cuda.cuh"
#include "inplace_internal.h"

namespace sparsekern::inplace::detail {
namespace {

template <typename A> __device__ __forceinline__ A rsqrt_acc(A v);
template <> __device__ __forceinline__ float rsqrt_acc(float v) { return rsqrtf(v); }
template <> __device__ __forceinline__ double rsqrt_acc(double v) { return 1.0 / sqrt(v); }

/// What every norm kernel needs besides the rows.
template <typename T>
struct Affine {
  const T* weight;  // nullptr = 1
  const T* bias;    // nullptr = 0
  bool aligned;     // both (when present) start on a 16-byte boundary
};

/// out[k] = (v[k] − mean) · rstd · w + b for the vector at e0.
template <typename T>
__device__ __forceinline__ void normalize_vec(acc_t<T>* v, std::int64_t e0, std::int64_t cols, acc_t<T> mean,
                                              acc_t<T> rstd, const Affine<T>& af) {
  using A = acc_t<T>;
  constexpr int V = kVec<T>;
  A w[V], b[V];
  if (af.weight) load_vec_ro(af.weight, e0, cols, af.aligned, w, A(1));
  if (af.bias) load_vec_ro(af.bias, e0, cols, af.aligned, b, A(0));
#pragma unroll
  for (int k = 0; k < V; ++k) {
    A o = (v[k] - mean) * rstd;
    if (af.weight) o *= w[k];
    if (af.bias) o += b[k];
    v[k] = o;
  }
}

template <typename T, bool kRms, int TPR, int N>
__global__ void __launch_bounds__(block_threads<TPR>())
norm_tile_kernel(T* x, RowGeom g, bool aligned, Affine<T> af, acc_t<T> eps) {
  using A = acc_t<T>;
  constexpr int V = kVec<T>, VPT = N / V, RPB = block_threads<TPR>() / TPR;
  static_assert(N % V == 0, "a thread's elements are whole vectors");
  __shared__ A smem[32];
  const int t = threadIdx.x % TPR;
  const A inv_cols = A(1) / static_cast<A>(g.cols);
  for (std::int64_t base = std::int64_t(blockIdx.x) * RPB; base < g.rows; base += std::int64_t(gridDim.x) * RPB) {
    const std::int64_t r = base + threadIdx.x / TPR;
    const std::int64_t cols = r < g.rows ? g.cols : 0;
    T* row = x + (r < g.rows ? g.offset(r) : 0);
    A v[N];
#pragma unroll
    for (int k = 0; k < VPT; ++k) load_vec(row, (std::int64_t(k) * TPR + t) * V, cols, aligned, v + k * V, A(0));
    A mean = 0;
    if constexpr (!kRms) {
      A s = 0;
#pragma unroll
      for (int e = 0; e < N; ++e) s += v[e];
      mean = group_allreduce<TPR>(s, smem, SumOp{}) * inv_cols;
    }
    A ss = 0;
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
#pragma unroll
      for (int e = 0; e < V; ++e) {
        const A d = (std::int64_t(k) * TPR + t) * V + e < cols ? v[k * V + e] - mean : A(0);
        ss += d * d;
      }
    }
    const A rstd = rsqrt_acc(group_allreduce<TPR>(ss, smem, SumOp{}) * inv_cols + eps);
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
      const std::int64_t e0 = (std::int64_t(k) * TPR + t) * V;
      if (e0 < cols) {
        normalize_vec(v + k * V, e0, cols, mean, rstd, af);
        store_vec(row, e0, cols, aligned, v + k * V);
      }
    }
  }
}

template <typename T, bool kRms>
__global__ void __launch_bounds__(kStreamThreads)
norm_stream_kernel(T* x, RowGeom g, bool aligned, Affine<T> af, acc_t<T> eps) {
  using A = acc_t<T>;
  constexpr int V = kVec<T>;
  constexpr std::int64_t kStep = std::int64_t(kStreamThreads) * V;
  __shared__ A smem[32];
  const A inv_cols = A(1) / static_cast<A>(g.cols);
  for (std::int64_t r = blockIdx.x; r < g.rows; r += gridDim.x) {
    T* row = x + g.offset(r);
    // This thread's count, mean and Σ(x − mean)² (Chan et al.'s pairwise update per vector).
    A n = 0, mean = 0, m2 = 0;
    for (std::int64_t e0 = std::int64_t(threadIdx.x) * V; e0 < g.cols; e0 += kStep) {
      A v[V];
      load_vec(row, e0, g.cols, aligned, v, A(0));
      const std::int64_t left = g.cols - e0;
      const A cnt = static_cast<A>(left < V ? left : V);
      if constexpr (kRms) {
#pragma unroll
        for (int k = 0; k < V; ++k) m2 += v[k] * v[k];  // padding is 0
      } else {
        A cs = 0;
#pragma unroll
        for (int k = 0; k < V; ++k) cs += v[k];
        const A cmean = cs / cnt;
        A cm2 = 0;
#pragma unroll
        for (int k = 0; k < V; ++k) {
          const A d = k < left ? v[k] - cmean : A(0);
          cm2 += d * d;
        }
        const A total = n + cnt, delta = cmean - mean;
        mean += delta * cnt / total;
        m2 += cm2 + delta * delta * n * cnt / total;
        n = total;
      }
    }
    A row_mean = 0;
    if constexpr (!kRms) {
      row_mean = group_allreduce<kStreamThreads>(n * mean, smem, SumOp{}) * inv_cols;
      m2 += n * (mean - row_mean) * (mean - row_mean);  // this thread's part of Σ(x − row_mean)²
    }
    const A rstd = rsqrt_acc(group_allreduce<kStreamThreads>(m2, smem, SumOp{}) * inv_cols + eps);
    for (std::int64_t e0 = std::int64_t(threadIdx.x) * V; e0 < g.cols; e0 += kStep) {
      A v[V];
      load_vec(row, e0, g.cols, aligned, v, A(0));
      normalize_vec(v, e0, g.cols, row_mean, rstd, af);
      store_vec(row, e0, g.cols, aligned, v);
    }
  }
}

/// Warp-row LayerNorm/RMSNorm (see "Warp rows" in rows_cuda.cuh): one warp per row, exact two-pass
/// mean and variance over the raw words in registers. weight and bias are staged once per block in
/// shared memory (dynamic, VPW·32 words each, present ones only), so each row reads them as 16-byte
/// shared loads instead of through L1, where the streamed rows would evict them.
template <typename T, bool kRms, int VPW>
__global__ void __launch_bounds__(kWarpRowsThreads, kWarpRowsMinBlocks)
norm_warp_kernel(T* x, RowGeom g, const T* weight, const T* bias, acc_t<T> eps) {
  using A = acc_t<T>;
  constexpr int V = kVec<T>, kWords = VPW * 32;
  constexpr bool kPrefetch = prefetch_next_row(VPW);
  extern __shared__ uint4 affine_words[];
  uint4* w_words = affine_words;
  uint4* b_words = affine_words + (weight ? kWords : 0);
  for (std::int64_t i = threadIdx.x; i < g.cols; i += blockDim.x) {
    if (weight) reinterpret_cast<T*>(w_words)[i] = weight[i];
    if (bias) reinterpret_cast<T*>(b_words)[i] = bias[i];
  }
  __syncthreads();

  const int lane = threadIdx.x % 32;
  const std::int64_t nvec = g.cols / V;
  const A inv_cols = A(1) / static_cast<A>(g.cols);
  const std::int64_t step = std::int64_t(gridDim.x) * kWarpRowsWarps;
  std::int64_t r = std::int64_t(blockIdx.x) * kWarpRowsWarps + threadIdx.x / 32;
  uint4 cur[VPW];
  if (kPrefetch && r < g.rows) load_row_words<VPW>(x + g.offset(r), nvec, lane, cur);
  for (; r < g.rows; r += step) {
    uint4 next[VPW];
    if constexpr (kPrefetch) {
      if (r + step < g.rows) load_row_words<VPW>(x + g.offset(r + step), nvec, lane, next);
    } else {
      load_row_words<VPW>(x + g.offset(r), nvec, lane, cur);
    }
    A mean = 0;
    if constexpr (!kRms) {
      A s = 0;  // words past the row are zeros
#pragma unroll
      for (int k = 0; k < VPW; ++k) {
        if (std::int64_t(k) * 32 + lane < nvec) {
          A f[V];
          unpack_vec<T>(cur[k], f);
#pragma unroll
          for (int e = 0; e < V; ++e) s += f[e];
        }
      }
      launder_words<VPW>(cur);
      mean = warp_allreduce(s, SumOp{}) * inv_cols;
    }
    A ss = 0;
#pragma unroll
    for (int k = 0; k < VPW; ++k) {
      if (std::int64_t(k) * 32 + lane < nvec) {
        A f[V];
        unpack_vec<T>(cur[k], f);
#pragma unroll
        for (int e = 0; e < V; ++e) ss += (f[e] - mean) * (f[e] - mean);
      }
    }
    launder_words<VPW>(cur);
    const A rstd = rsqrt_acc(warp_allreduce(ss, SumOp{}) * inv_cols + eps);
    uint4* out = reinterpret_cast<uint4*>(x + g.offset(r));
#pragma unroll
    for (int k = 0; k < VPW; ++k) {
      const int vi = k * 32 + lane;
      if (vi < nvec) {
        A f[V], w[V], b[V];
        unpack_vec<T>(cur[k], f);
        if (weight) unpack_vec<T>(w_words[vi], w);
        if (bias) unpack_vec<T>(b_words[vi], b);
#pragma unroll
        for (int e = 0; e < V; ++e) {
          A o = (f[e] - mean) * rstd;
          if (weight) o *= w[e];
          if (bias) o += b[e];
          f[e] = o;
        }
        out[vi] = pack_vec<T>(f);
      }
    }
    if constexpr (kPrefetch) {
#pragma unroll
      for (int k = 0; k < VPW; ++k) cur[k] = next[k];
    }
  }
}

template <typename T, bool kRms>
void launch_norm(const NormParams& p, cudaStream_t stream) {
  using A = acc_t<T>;
  const RowGeom g = geom_of(p.x);
  T* x = static_cast<T*>(p.x.data);
  const auto aligned16 = [](const void* q) { return reinterpret_cast<std::uintptr_t>(q) % 16 == 0; };
  const Affine<T> af{static_cast<const T*>(p.weight), static_cast<const T*>(p.bias),
                     aligned16(p.weight) && aligned16(p.bias)};
  const bool aligned = rows_aligned<T>(p.x);
  const A eps = static_cast<A>(p.eps);
  if (aligned && with_warp_rows<T, 16>(g.cols, [&](auto vpw) {
        constexpr int VPW = decltype(vpw)::value;
        const auto kernel = norm_warp_kernel<T, kRms, VPW>;
        const std::size_t smem = std::size_t(VPW) * 32 * 16 * ((af.weight ? 1 : 0) + (af.bias ? 1 : 0));
        kernel<<<persistent_grid(kernel, kWarpRowsThreads, smem, g.rows, kWarpRowsWarps), kWarpRowsThreads, smem,
                 stream>>>(x, g, af.weight, af.bias, eps);
      }))
    return;
  bool tiled = false;
  if constexpr (!std::is_same_v<T, double>) {
    tiled = with_row_tile(g.cols, [&](auto tpr, auto n) {
      constexpr int TPR = decltype(tpr)::value, N = decltype(n)::value, B = block_threads<TPR>();
      norm_tile_kernel<T, kRms, TPR, N><<<grid_for(g.rows, B / TPR), B, 0, stream>>>(x, g, aligned, af, eps);
    });
  }
  if (!tiled) norm_stream_kernel<T, kRms><<<grid_for(g.rows, 1), kStreamThreads, 0, stream>>>(x, g, aligned, af, eps);
}

template <bool kRms>
void norm_cuda(const NormParams& p, Stream stream) {
  sparsekern::detail::require_cuda_device(p.device.index);
  sparsekern::detail::DeviceGuard guard(p.device.index);
  cuda_dtype_switch(p.dtype, [&](auto tag) {
    launch_norm<typename decltype(tag)::type, kRms>(p, static_cast<cudaStream_t>(stream));
  });
  SK_CUDA_CHECK_LAUNCH();
}

}  // namespace

void layer_norm_cuda(const NormParams& p, Stream stream) { norm_cuda<false>(p, stream); }
void rms_norm_cuda(const NormParams& p, Stream stream) { norm_cuda<true>(p, stream); }

}  // namespace sparsekern::inplace::detail
