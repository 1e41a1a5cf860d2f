// CUDA backend of the in-place LayerNorm and RMSNorm with the affine fused into the same pass (see
// rows_cuda.cuh for the kernel layout). Register tile: exact two-pass mean/variance over the cached
// row (no cancellation for rows with a large mean). Streaming kernel for rows over 16K elements:
// per-thread Chan/Welford merges of 16-byte vectors, combined across the block, then a second read
// of the row to write it. weight/bias come through the read-only cache. fp64: streaming only.
// 16-bit rows of 257…4096 elements (NormRowOp: single-pass statistics shifted by the row's first
// element): one warp per row (warp_rows_kernel, weight/bias as fp32 planes in shared memory); on
// sm_90+ rows of 1025…4096 elements take a block-row kernel instead (norm_lean_kernel by default:
// four warps per row over 2048 elements, two up to 2048, rows staged through shared memory by the
// copy engine, see bulk_rows.cuh; norm_bulk_kernel holds the earlier variants).

#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstdlib>

#include "bulk_rows.cuh"
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

/// Warp-row LayerNorm/RMSNorm (see "Warp rows" in rows_cuda.cuh), run by warp_rows_kernel (bulk_rows.cuh:
/// one warp per row, the row held as raw 16-bit words in registers); its statistics and output
/// steps also serve norm_bulk_kernel below.
///
/// The 16-bit rows are bound by instruction issue, not by memory, once they are in registers:
/// every 16-bit element converted to fp32 costs an instruction, and the first version converted
/// each element five times (mean pass, variance pass, output pass, weight, bias) and reached 71-75%
/// of the copy bandwidth at 16384 x 4096 on an H200, against 92% for fp32 rows. So:
/// - mean and variance come from one pass over shifted values d = x − c, with c the row's first
///   element (broadcast from lane 0): Σd and Σd² reduced together, var = Σd²/n − (Σd/n)². The shift
///   keeps the cancellation small: the relative error of var is about 2⁻²⁴ · (mean − c)²/var, which
///   is at most ~n · 2⁻²⁴ even when c is an extreme outlier (2.4e-4 at n = 4096, below 16-bit
///   rounding), and a constant row gives exactly 0;
/// - weight and bias are staged once per block in shared memory already converted to fp32, in two
///   planes per tensor (elements 0-3 and 4-7 of each 8-element word) so that a warp's 16-byte
///   shared loads are contiguous (no bank conflicts).
/// That leaves two conversions per element (stats pass, output pass).

/// Most warps per row (block) of norm_bulk_kernel.
constexpr int kNormBulkMaxWarps = 16;
/// Bytes before the weight/bias planes in norm_bulk_kernel's shared memory: barriers and partial sums.
constexpr std::size_t kNormBulkHead = (kBulkMaxStages * 8 + kBulkMaxStages * kNormBulkMaxWarps * 8 + 127) / 128 * 128;

/// Where NormRowOp reads weight and bias from: fp32 planes staged in shared memory, or the 16-bit
/// tensors through the read-only cache (__ldg: 16-byte words, converted per use; needs both
/// 16-byte aligned). The rows staged by the copy engine do not pass through L1, so there the
/// weight and bias stay cached.
enum class AffineFrom { kSmem, kLdg };

template <typename T, bool kRms, int VPW, AffineFrom kFrom = AffineFrom::kSmem>
struct NormRowOp {
  using A = acc_t<T>;
  static constexpr int V = kVec<T>, kWords = VPW * 32;
  static_assert(V == 8, "16-bit rows: 8 elements per 16-byte word");
  const T* weight;
  const T* bias;
  std::int64_t cols;
  A inv_cols, eps;

  /// float4 planes: weight lo, weight hi, bias lo, bias hi (present tensors only), kWords each.
  __host__ __device__ std::size_t shared_bytes() const {
    if (kFrom == AffineFrom::kLdg) return 0;
    return std::size_t(kWords) * 2 * sizeof(float4) * ((weight ? 1 : 0) + (bias ? 1 : 0));
  }
  __device__ void stage(uint4* words) const {
    if constexpr (kFrom == AffineFrom::kLdg) return;
    float* w = reinterpret_cast<float*>(words);
    float* b = w + (weight ? 2 * kWords * 4 : 0);
    // element i = 8·vi + e goes to plane e / 4, float4 vi, component e % 4; zeros past the row
    for (int i = threadIdx.x; i < kWords * 8; i += blockDim.x) {
      const int vi = i / 8, e = i % 8;
      const int at = (e / 4) * kWords * 4 + vi * 4 + e % 4;
      if (weight) w[at] = i < cols ? to_acc(weight[i]) : 0.f;
      if (bias) b[at] = i < cols ? to_acc(bias[i]) : 0.f;
    }
  }
  /// Adds the shifted sums of `n` words (word k valid when ok(k)) to s / ss (V slots each).
  template <int N, class Ok>
  __device__ __forceinline__ static void accumulate(const uint4* cur, Ok ok, A c, A* s, A* ss) {
#pragma unroll
    for (int k = 0; k < N; ++k) {
      if (ok(k)) {
        A f[V];
        unpack_vec<T>(cur[k], f);
#pragma unroll
        for (int e = 0; e < V; ++e) {
          const A d = f[e] - c;
          if constexpr (!kRms) s[e] += d;
          ss[e] += d * d;
        }
      }
    }
  }
  /// (mean, rstd) from the row totals of the shifted sums.
  __device__ __forceinline__ void finish_stats(A c, A sum, A sumsq, A& mean, A& rstd) const {
    const A dmean = kRms ? A(0) : sum * inv_cols;  // mean − c
    mean = kRms ? A(0) : c + dmean;
    A var = sumsq * inv_cols - dmean * dmean;
    var = var > A(0) ? var : A(0);  // rounding can leave a tiny negative for a constant row
    rstd = rsqrt_acc(var + eps);
  }
  /// Weight and bias of word `vi` as fp32 (1 and 0 where absent).
  __device__ __forceinline__ void affine_word(int vi, const uint4* words, float* wv, float* bv) const {
    const float4* w4 = reinterpret_cast<const float4*>(words);
    const float4* b4 = w4 + (weight ? 2 * kWords : 0);
    if constexpr (kFrom == AffineFrom::kLdg) {
      if (weight) unpack_vec<T>(__ldg(reinterpret_cast<const uint4*>(weight) + vi), wv);
      if (bias) unpack_vec<T>(__ldg(reinterpret_cast<const uint4*>(bias) + vi), bv);
    } else if (weight) {
      const float4 lo = w4[vi], hi = w4[kWords + vi];
      wv[0] = lo.x, wv[1] = lo.y, wv[2] = lo.z, wv[3] = lo.w, wv[4] = hi.x, wv[5] = hi.y, wv[6] = hi.z, wv[7] = hi.w;
    }
    if (kFrom == AffineFrom::kSmem && bias) {
      const float4 lo = b4[vi], hi = b4[kWords + vi];
      bv[0] = lo.x, bv[1] = lo.y, bv[2] = lo.z, bv[3] = lo.w, bv[4] = hi.x, bv[5] = hi.y, bv[6] = hi.z, bv[7] = hi.w;
    }
  }
  /// f ← (f − mean)·rstd·w + b, packed back to 16 bits.
  __device__ __forceinline__ uint4 apply(A* f, const float* wv, const float* bv, A mean, A rstd) const {
#pragma unroll
    for (int e = 0; e < V; ++e) {
      A o = (f[e] - mean) * rstd;
      if (weight) o *= wv[e];
      if (bias) o += bv[e];
      f[e] = o;
    }
    return pack_vec<T>(f);
  }
  /// The normalised, affine-mapped word `vi` of the row.
  __device__ __forceinline__ uint4 out_word(const uint4& raw, int vi, A mean, A rstd, const uint4* words) const {
    A f[V];
    unpack_vec<T>(raw, f);
    float wv[V], bv[V];
    affine_word(vi, words, wv, bv);
    return apply(f, wv, bv, mean, rstd);
  }

  __device__ __forceinline__ void row(uint4 (&cur)[VPW], uint4* out, std::int64_t nvec, int lane,
                                      const uint4* words) const {
    A c = 0;  // the shift (LayerNorm only): the row's first element
    if constexpr (!kRms) {
      A f0[V];
      unpack_vec<T>(cur[0], f0);
      c = __shfl_sync(0xffffffffu, f0[0], 0);
    }
    // V partial sums per lane (one per element slot), added pairwise at the end: V short
    // dependency chains instead of one of 8·VPW adds. Words past the row are skipped.
    A s[V] = {}, ss[V] = {};
    accumulate<VPW>(cur, [&](int k) { return std::int64_t(k) * 32 + lane < nvec; }, c, s, ss);
    launder_words<VPW>(cur);
    A sum = kRms ? A(0) : sum_slots<V>(s), sumsq = sum_slots<V>(ss);
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
      if constexpr (!kRms) sum += __shfl_xor_sync(0xffffffffu, sum, off);
      sumsq += __shfl_xor_sync(0xffffffffu, sumsq, off);
    }
    A mean, rstd;
    finish_stats(c, sum, sumsq, mean, rstd);
#pragma unroll
    for (int k = 0; k < VPW; ++k) {
      const int vi = k * 32 + lane;
      if (vi < nvec) out[vi] = out_word(cur[k], vi, mean, rstd, words);
    }
  }
};

/// Variants of the block-row kernels (kFlags bits), compared on the H200 in session 4
/// (benchmarks/results/inplace-norm-variants-*): kKeepFloats unpacks each word once per row and
/// keeps the fp32 values for the output pass (more registers, fewer conversions); kHoldAffine loads
/// this thread's weight/bias words once per block, before the row loop, and keeps them in
/// registers (its columns are the same in every row). Flag 4 (no constant: it selects the op
/// instead) takes the weight/bias planes in shared memory (AffineFrom::kSmem).
///
/// kLeanRows (8, on its own) runs norm_lean_kernel instead: the same ring of rows and one block
/// barrier per row, with the instructions per element cut and the arithmetic still fp32 with one
/// rounding to 16 bits at the end (see the kernel). SASS of the row loop, instructions one
/// thread issues per row of (16384, 4096) divided by its elements (sm_90a, CUDA 13.0; the path a
/// thread other than 0 takes through a contiguous tensor's row: tools/diag/sass_loop_count.py):
///                      LN fp16  LN bf16  RMS fp16  RMS bf16   registers (LN / RMS)
///   8x3 (old LN)        21.0     21.5                          80 / -
///   4x0 (old RMS)                          15.1      17.1      - / 64
///   4x8 (lean)           9.2      9.2       6.5       6.5      128 / 90
///   8x8 (lean)          12.6     12.6       8.6       8.6       72 / 54
/// and at (16384, 2048): old 4x1 LayerNorm 23.4 / 24.9, old 4x0 RMSNorm 19.3 / 21.3; lean 2x8
/// 9.0 / 9.0 and 6.5 / 6.5 (128 / 90 registers), 4x8 11.9 / 11.9 and 8.3 / 8.3 (72 / 52).
/// (ncu, session 4: the 16-bit norms were bound by instruction issue and latency, 64% of the
/// issue slots busy at ~20 instructions per element.)
///
/// Diagnostic builds (-DSPARSEKERN_NORM_VARIANTS) pick a variant with
/// SPARSEKERN_INPLACE_NORM_VARIANT=WxF (W warps per row, F the flags: "4x8", "8x3", "4x5"),
/// coded W·100 + F in norm_bulk_variant (W·10 + F until flag 8: "4x11" would have been 51).
/// Available: 4x0-4x3, 8x0-8x3 (each + 4: the shared-memory planes), 2x8 (rows of 1025-2048;
/// longer rows run the default), 4x8, 8x8.
// (norm_bulk_kernel and its flags only run in a -DSPARSEKERN_NORM_VARIANTS build)
[[maybe_unused]] constexpr int kKeepFloats = 1, kHoldAffine = 2;
constexpr int kLeanRows = 8;

/// Hopper block-row LayerNorm/RMSNorm for 16-bit rows of 1025…4096 elements (sm_90+; see
/// bulk_rows.cuh for the copy-engine helpers). A block of W warps normalises one row at a time,
/// each thread holding LW words of it (word vi = k·32W + threadIdx.x), while thread 0 keeps the
/// block's next `stages` rows in flight into a shared-memory ring with bulk copies.
///
/// Why not a warp per row: holding a whole 4096-element row in one warp took ~120 registers per
/// thread, so only 8-16 warps fit per SM, and each warp's row was a long dependent sequence
/// (ncu on the H200: 40% of issue slots busy, no eligible warp 56% of the time, 51-61% of DRAM
/// bandwidth; 64-75% in the benchmark, with or without staging the rows through shared memory).
/// Several warps per row cut the per-row latency and the registers to LW·4 data registers;
/// one block barrier per row (single-pass shifted statistics, see NormRowOp) combines the warps'
/// partial sums and also tells thread 0 that the row's buffer has been read.
template <typename T, bool kRms, int LW, AffineFrom kFrom, int W, int kFlags>
__global__ void __launch_bounds__(W * 32)
norm_bulk_kernel(T* x, RowGeom g, int stages, NormRowOp<T, kRms, LW * W, kFrom> op) {
#ifdef SPARSEKERN_BULK_DEVICE
  using A = acc_t<T>;
  using Op = NormRowOp<T, kRms, LW * W, kFrom>;
  constexpr int V = kVec<T>, kThreads = W * 32;
  constexpr bool kKeep = (kFlags & kKeepFloats) != 0, kHold = (kFlags & kHoldAffine) != 0;
  static_assert(W <= kNormBulkMaxWarps, "partial sums sized for kNormBulkMaxWarps");
  static_assert(!kHold || kFrom == AffineFrom::kLdg, "held weight/bias come from the 16-bit tensors");
  extern __shared__ __align__(128) unsigned char norm_bulk_smem[];
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const std::int64_t nvec = g.cols / V;
  const std::uint32_t row_bytes = static_cast<std::uint32_t>(g.cols * std::int64_t(sizeof(T)));
  const std::size_t buf_stride = (std::size_t(row_bytes) + 127) / 128 * 128;
  // layout: barriers (kBulkMaxStages), partial sums (kBulkMaxStages x warps float2), the op's
  // weight/bias planes, then the ring (128-byte aligned)
  std::uint64_t* bars = reinterpret_cast<std::uint64_t*>(norm_bulk_smem);
  float2* part = reinterpret_cast<float2*>(norm_bulk_smem + kBulkMaxStages * 8);
  uint4* words = reinterpret_cast<uint4*>(norm_bulk_smem + kNormBulkHead);
  unsigned char* bufs = norm_bulk_smem + (kNormBulkHead + op.shared_bytes() + 127) / 128 * 128;

  if (tid == 0) {
    for (int s = 0; s < stages; ++s) bulk_barrier_init(&bars[s]);
    bulk_barrier_init_fence();
    for (int s = 0; s < stages; ++s) {
      const std::int64_t r = blockIdx.x + std::int64_t(s) * gridDim.x;
      if (r < g.rows) bulk_load(bufs + s * buf_stride, x + g.offset(r), row_bytes, &bars[s]);
    }
  }
  op.stage(words);
  uint4 wh[kHold ? LW : 1], bh[kHold ? LW : 1];
  if constexpr (kHold) {
#pragma unroll
    for (int k = 0; k < LW; ++k) {
      const std::int64_t vi = std::int64_t(k) * kThreads + tid;
      const uint4 one = make_uint4(0u, 0u, 0u, 0u);
      wh[k] = op.weight && vi < nvec ? __ldg(reinterpret_cast<const uint4*>(op.weight) + vi) : one;
      bh[k] = op.bias && vi < nvec ? __ldg(reinterpret_cast<const uint4*>(op.bias) + vi) : one;
    }
  }
  __syncthreads();

  int s = 0;
  std::uint32_t parity = 0;
  for (std::int64_t r = blockIdx.x; r < g.rows; r += gridDim.x) {
    bulk_wait(&bars[s], parity);
    const unsigned char* buf = bufs + s * buf_stride;
    const A c = kRms ? A(0) : to_acc(*reinterpret_cast<const T*>(buf));  // the shift: the row's first element
    const auto ok = [&](int k) { return std::int64_t(k) * kThreads + tid < nvec; };
    uint4 cur[LW];
#pragma unroll
    for (int k = 0; k < LW; ++k) cur[k] = ok(k) ? reinterpret_cast<const uint4*>(buf)[k * kThreads + tid] : make_uint4(0u, 0u, 0u, 0u);
    A fl[kKeep ? LW * V : 1];
    A sv[V] = {}, ssv[V] = {};
    if constexpr (kKeep) {
#pragma unroll
      for (int k = 0; k < LW; ++k) {
        unpack_vec<T>(cur[k], fl + k * V);  // zero words past the row unpack to 0.0
#pragma unroll
        for (int e = 0; e < V; ++e) {
          const A d = ok(k) ? fl[k * V + e] - c : A(0);
          if constexpr (!kRms) sv[e] += d;
          ssv[e] += d * d;
        }
      }
    } else {
      Op::template accumulate<LW>(cur, ok, c, sv, ssv);
    }
    A sum = kRms ? A(0) : sum_slots<V>(sv), sumsq = sum_slots<V>(ssv);
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
      if constexpr (!kRms) sum += __shfl_xor_sync(0xffffffffu, sum, off);
      sumsq += __shfl_xor_sync(0xffffffffu, sumsq, off);
    }
    if (lane == 0) part[s * W + warp] = make_float2(sum, sumsq);
    __syncthreads();  // partial sums visible; every thread has read this row's buffer
    if (tid == 0) {
      const std::int64_t next = r + std::int64_t(stages) * gridDim.x;
      if (next < g.rows) {
        bulk_proxy_fence();
        bulk_load(bufs + s * buf_stride, x + g.offset(next), row_bytes, &bars[s]);
      }
    }
    sum = 0, sumsq = 0;
#pragma unroll
    for (int w = 0; w < W; ++w) {
      const float2 p = part[s * W + w];
      sum += p.x, sumsq += p.y;
    }
    A mean, rstd;
    op.finish_stats(c, sum, sumsq, mean, rstd);
    uint4* out = reinterpret_cast<uint4*>(x + g.offset(r));
#pragma unroll
    for (int k = 0; k < LW; ++k) {
      const int vi = k * kThreads + tid;
      if (vi < nvec) {
        A f[V];
        if constexpr (kKeep) {
#pragma unroll
          for (int e = 0; e < V; ++e) f[e] = fl[k * V + e];
        } else {
          unpack_vec<T>(cur[k], f);
        }
        float wv[V], bv[V];
        if constexpr (kHold) {
          if (op.weight) unpack_vec<T>(wh[k], wv);
          if (op.bias) unpack_vec<T>(bh[k], bv);
        } else {
          op.affine_word(vi, words, wv, bv);
        }
        out[vi] = op.apply(f, wv, bv, mean, rstd);
      }
    }
    if (++s == stages) s = 0, parity ^= 1u;
  }
#else
  __trap();  // built for an architecture without cp.async.bulk: never launched (bulk_kernel_usable)
#endif
}

/// Two adjacent 16-bit elements of a 32-bit word (the first in the low half) as fp32, one
/// instruction each: fp16 through the converting add (HADD2.F32), bf16 by moving its bits to the
/// top of an fp32 word (a shift for the low one, a mask for the high one; the generic conversion
/// spends a PRMT and a shift on the high one).
template <typename T> __device__ __forceinline__ float2 unpack_pair(std::uint32_t w);
template <> __device__ __forceinline__ float2 unpack_pair<__half>(std::uint32_t w) {
  __half2 h;
  memcpy(&h, &w, 4);
  return __half22float2(h);
}
template <> __device__ __forceinline__ float2 unpack_pair<__nv_bfloat16>(std::uint32_t w) {
  return make_float2(__uint_as_float(w << 16), __uint_as_float(w & 0xffff0000u));
}
/// (lo, hi) each rounded to T once (round to nearest even) and packed into one word: one paired
/// conversion (F2FP.PACK_AB) instead of two conversions and a byte permute.
template <typename T> __device__ __forceinline__ std::uint32_t pack_pair(float lo, float hi);
template <> __device__ __forceinline__ std::uint32_t pack_pair<__half>(float lo, float hi) {
  const __half2 h = __floats2half2_rn(lo, hi);
  std::uint32_t w;
  memcpy(&w, &h, 4);
  return w;
}
template <> __device__ __forceinline__ std::uint32_t pack_pair<__nv_bfloat16>(float lo, float hi) {
  const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
  std::uint32_t w;
  memcpy(&w, &h, 4);
  return w;
}

/// norm_bulk_kernel's lean variant (kLeanRows, see the flags above): the same ring of rows staged by
/// the copy engine and one block barrier per row, with fewer instructions per element and the
/// same fp32 arithmetic:
/// - each element is converted to fp32 once, shifted by the row's first element c (LayerNorm, as
///   NormRowOp does) and kept as d = x − c in registers for the output step; Σd and Σd²
///   accumulate in two chains each, with no per-element test. Rows shorter than the block's LW·W
///   words take a second copy of the row loop: words wholly past the row are skipped per warp, and
///   the lanes past the end of a warp's last word read c instead, so their d is exactly 0;
/// - the output is y = fma(fma(d, rstd, −(mean − c)·rstd), w, b): two FFMAs, one rounding to T at
///   the end. norm_bulk_kernel rounds mean = c + (mean − c), x − mean, ·rstd, ·w and +b one by
///   one; here d is exact for all but widely spread rows, and the rounding of the constant
///   −(mean − c)·rstd (relative 2⁻²⁴) is of the order of that of the mean there. RMSNorm:
///   y = (x·rstd)·w as before;
/// - weight and bias are converted to fp32 once per block and held in registers (1 and −0 where
///   absent: x̂·1 + (−0) is x̂ exactly, so one code path serves every affine combination);
/// - the warps' partial sums: one shuffle exchange splits Σd and Σd² between the two half-warps,
///   then four shuffle levels each (5 shuffles instead of 10);
/// - row addresses advance by a constant when the rows are evenly spaced (no 64-bit division by
///   `inner` per row), the mbarrier addresses are computed once.
/// Registers: LW·8 values plus LW·8 weights and (LayerNorm) LW·8 biases per thread; 1-4 words per
/// thread (LW) are instantiated.
template <typename T, bool kRms, int LW, int W, AffineFrom kFrom>
__global__ void __launch_bounds__(W * 32)
norm_lean_kernel(T* x, RowGeom g, int stages, NormRowOp<T, kRms, LW * W, kFrom> op) {
#ifdef SPARSEKERN_BULK_DEVICE
  constexpr int V = kVec<T>, kThreads = W * 32, N = LW * V;
  static_assert(V == 8, "16-bit rows: 8 elements per 16-byte word");
  static_assert(W <= kNormBulkMaxWarps && (W == 2 || W % 4 == 0), "partial sums: read as float2/float4");
  // Words k < kSure lie inside every row of this instantiation: it takes rows of more than
  // LW·W·16 words (with_warp_rows picks the smallest VPW = LW·W that holds the row).
  constexpr int kSure = LW / 2;
  extern __shared__ __align__(128) unsigned char norm_bulk_smem[];
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const std::int64_t nvec = g.cols / V;
  const std::uint32_t row_bytes = static_cast<std::uint32_t>(g.cols * std::int64_t(sizeof(T)));
  const std::size_t buf_stride = (std::size_t(row_bytes) + 127) / 128 * 128;
  // layout as norm_bulk_kernel's without the weight/bias planes: barriers, partial sums, the ring
  std::uint64_t* bars = reinterpret_cast<std::uint64_t*>(norm_bulk_smem);
  float* part = reinterpret_cast<float*>(norm_bulk_smem + kBulkMaxStages * 8);
  unsigned char* bufs = norm_bulk_smem + kNormBulkHead;
  // Evenly spaced rows (one of the two row dimensions trivial, e.g. any contiguous tensor): row r
  // starts at r·rstride, and each row pointer advances by `step` elements per iteration.
  const bool linear = g.inner == 1 || g.rows <= g.inner;
  const std::int64_t rstride = g.inner == 1 ? g.outer_stride : g.inner_stride;
  const std::int64_t step = std::int64_t(gridDim.x) * rstride;
  const auto row_offset = [&](std::int64_t r) { return linear ? r * rstride : g.offset(r); };

  if (tid == 0) {
    for (int s = 0; s < stages; ++s) bulk_barrier_init(&bars[s]);
    bulk_barrier_init_fence();
    for (int s = 0; s < stages; ++s) {
      const std::int64_t r = blockIdx.x + std::int64_t(s) * gridDim.x;
      if (r < g.rows) bulk_load(bufs + s * buf_stride, x + row_offset(r), row_bytes, &bars[s]);
    }
  }
  // This thread's weight and bias (the same columns in every row), fp32, once per block.
  float wf[N], bf[kRms ? 1 : N];
#pragma unroll
  for (int k = 0; k < LW; ++k) {
    const std::int64_t vi = std::int64_t(k) * kThreads + tid;
    const bool in = vi < nvec;
    uint4 wr = make_uint4(0u, 0u, 0u, 0u), br = wr;
    if constexpr (kFrom == AffineFrom::kLdg) {  // 16-byte aligned tensors
      if (op.weight && in) wr = __ldg(reinterpret_cast<const uint4*>(op.weight) + vi);
      if (!kRms && op.bias && in) br = __ldg(reinterpret_cast<const uint4*>(op.bias) + vi);
    } else {  // any alignment: element by element (once per block)
      T wt[V] = {}, bt[V] = {};
#pragma unroll
      for (int e = 0; e < V; ++e) {
        if (op.weight && in) wt[e] = op.weight[vi * V + e];
        if (!kRms && op.bias && in) bt[e] = op.bias[vi * V + e];
      }
      memcpy(&wr, wt, 16);
      memcpy(&br, bt, 16);
    }
    const std::uint32_t wu[4] = {wr.x, wr.y, wr.z, wr.w}, bu[4] = {br.x, br.y, br.z, br.w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const float2 wp = unpack_pair<T>(wu[j]);
      wf[k * V + 2 * j] = op.weight ? wp.x : 1.f;
      wf[k * V + 2 * j + 1] = op.weight ? wp.y : 1.f;
      if constexpr (!kRms) {
        const float2 bp = unpack_pair<T>(bu[j]);
        bf[k * V + 2 * j] = op.bias ? bp.x : -0.f;
        bf[k * V + 2 * j + 1] = op.bias ? bp.y : -0.f;
      }
    }
  }
  __syncthreads();

  // The row loop, for rows of exactly LW·W words (kFull: no word is ever past the row) or shorter.
  const std::uint32_t bar0 = smem_u32(bars);
  const std::int64_t step_bytes = step * std::int64_t(sizeof(T));
  const auto run = [&](auto full) {
    constexpr bool kFull = decltype(full)::value;
    // Word k of this warp holds at least one element of the row (warp-uniform: words wholly past
    // the row are skipped, not computed on fill).
    const auto warp_has = [&](int k) { return kFull || k < kSure || std::int64_t(k) * kThreads + warp * 32 < nvec; };
    int s = 0;
    std::uint32_t parity = 0;
    char* row = reinterpret_cast<char*>(x + (linear ? std::int64_t(blockIdx.x) * rstride : 0));
    for (std::int64_t r = blockIdx.x; r < g.rows; r += gridDim.x, row += step_bytes) {
      bulk_wait(bar0 + 8 * s, parity);
      const unsigned char* buf = bufs + s * buf_stride;
      const uint4* src = reinterpret_cast<const uint4*>(buf) + tid;
      float c = 0.f;         // the shift (LayerNorm): the row's first element
      std::uint32_t cw = 0;  // two copies of its bits: the fill of words past the row
      if constexpr (!kRms) {
        std::uint16_t c16;
        memcpy(&c16, buf, 2);
        c = unpack_pair<T>(c16).x;
        if constexpr (!kFull) cw = std::uint32_t(c16) * 0x10001u;
      }
      float d[N];
      // Σd (LayerNorm) and Σd², two chains each, started at −0 (x + −0 is x: the first add folds away)
      [[maybe_unused]] float sa[2] = {-0.f, -0.f};
      float qa[2] = {-0.f, -0.f};
#pragma unroll
      for (int k = 0; k < LW; ++k) {
        if (!warp_has(k)) continue;
        uint4 raw;
        if (kFull || k < kSure) {
          raw = src[k * kThreads];
        } else {
          raw = make_uint4(cw, cw, cw, cw);
          if (std::int64_t(k) * kThreads + tid < nvec) raw = src[k * kThreads];
        }
        const std::uint32_t ru[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const float2 f = unpack_pair<T>(ru[j]);
          const int e = k * V + 2 * j;
          d[e] = kRms ? f.x : f.x - c;
          d[e + 1] = kRms ? f.y : f.y - c;
          // Opaque to the compiler: it would otherwise recompute cheap bf16 unpacks in the output
          // step (keeping the raw words instead of the floats), one more instruction per element.
          asm("" : "+f"(d[e]), "+f"(d[e + 1]));
          if constexpr (!kRms) sa[0] += d[e], sa[1] += d[e + 1];
          qa[0] = fmaf(d[e], d[e], qa[0]), qa[1] = fmaf(d[e + 1], d[e + 1], qa[1]);
        }
      }
      if constexpr (kRms) {
        const float mine = warp_allreduce(qa[0] + qa[1], SumOp{});
        if (lane == 0) part[s * W + warp] = mine;
      } else {
        // Lanes 0-15 keep Σd, lanes 16-31 Σd²: each sends its partner the sum the partner keeps.
        const bool hi = (lane & 16) != 0;
        const float sum = sa[0] + sa[1], sq = qa[0] + qa[1];
        float mine = (hi ? sq : sum) + __shfl_xor_sync(0xffffffffu, hi ? sum : sq, 16);
#pragma unroll
        for (int off = 8; off > 0; off >>= 1) mine += __shfl_xor_sync(0xffffffffu, mine, off);
        if ((lane & 15) == 0) part[(s * W + warp) * 2 + (hi ? 1 : 0)] = mine;
      }
      __syncthreads();  // partial sums visible; every thread has read this row's buffer
      if (tid == 0) {
        const std::int64_t next = r + std::int64_t(stages) * gridDim.x;
        if (next < g.rows) {
          bulk_proxy_fence();
          bulk_load(bufs + s * buf_stride, x + row_offset(next), row_bytes, &bars[s]);
        }
      }
      float rstd, shift;
      if constexpr (kRms) {
        float t;
        if constexpr (W == 2) {
          const float2 p = *reinterpret_cast<const float2*>(part + s * W);
          t = p.x + p.y;
        } else {
          const float4* p4 = reinterpret_cast<const float4*>(part + s * W);
          float4 p = p4[0];
          t = (p.x + p.y) + (p.z + p.w);
#pragma unroll
          for (int i = 1; i < W / 4; ++i) {
            p = p4[i];
            t += (p.x + p.y) + (p.z + p.w);
          }
        }
        rstd = rsqrtf(t * op.inv_cols + op.eps);
        shift = 0.f;
      } else {
        const float4* p4 = reinterpret_cast<const float4*>(part + s * W * 2);  // (Σd, Σd²) per warp
        float4 p = p4[0];
        float sum = p.x + p.z, sq = p.y + p.w;
#pragma unroll
        for (int i = 1; i < W / 2; ++i) {
          p = p4[i];
          sum += p.x + p.z, sq += p.y + p.w;
        }
        const float dmean = sum * op.inv_cols;  // mean − c
        float var = fmaf(-dmean, dmean, sq * op.inv_cols);
        var = var > 0.f ? var : 0.f;  // rounding can leave a tiny negative for a constant row
        rstd = rsqrtf(var + op.eps);
        shift = -dmean * rstd;
      }
      char* dst = linear ? row : reinterpret_cast<char*>(x + g.offset(r));
      uint4* out = reinterpret_cast<uint4*>(dst) + tid;
#pragma unroll
      for (int k = 0; k < LW; ++k) {
        if (!warp_has(k)) continue;
        if (kFull || k < kSure || std::int64_t(k) * kThreads + tid < nvec) {
          std::uint32_t o[4];
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            const int e = k * V + 2 * j;
            float y0, y1;
            if constexpr (kRms) {
              y0 = d[e] * rstd * wf[e], y1 = d[e + 1] * rstd * wf[e + 1];
            } else {
              y0 = fmaf(fmaf(d[e], rstd, shift), wf[e], bf[e]);
              y1 = fmaf(fmaf(d[e + 1], rstd, shift), wf[e + 1], bf[e + 1]);
            }
            o[j] = pack_pair<T>(y0, y1);
          }
          out[k * kThreads] = make_uint4(o[0], o[1], o[2], o[3]);
        }
      }
      if (++s == stages) s = 0, parity ^= 1u;
    }
  };
  if (nvec == std::int64_t(LW) * kThreads) {
    run(std::true_type{});
  } else {
    run(std::false_type{});
  }
#else
  __trap();  // built for an architecture without cp.async.bulk: never launched (bulk_kernel_usable)
#endif
}

/// Diagnostic: SPARSEKERN_INPLACE_NORM_VARIANT=WARPSxFLAGS (e.g. 8x3, 4x8) picks the block-row
/// kernel's warps per row and flags in a build with -DSPARSEKERN_NORM_VARIANTS (tools/diag); read
/// once. Returns WARPS·100 + FLAGS (see kKeepFloats), 0 when unset.
#ifdef SPARSEKERN_NORM_VARIANTS
int norm_bulk_variant() {
  static const int v = [] {
    const char* e = std::getenv("SPARSEKERN_INPLACE_NORM_VARIANT");  // "WxF", e.g. "8x2"
    int w = 0, f = 0;
    return e && std::sscanf(e, "%dx%d", &w, &f) == 2 ? w * 100 + f : 0;
  }();
  return v;
}
#endif


/// The kernel of variant (W, kFlags): norm_lean_kernel for kLeanRows, else norm_bulk_kernel.
template <typename T, bool kRms, int VPW, AffineFrom kFrom, int W, int kFlags>
constexpr auto norm_bulk_kernel_for() {
  if constexpr ((kFlags & kLeanRows) != 0) {
    return norm_lean_kernel<T, kRms, VPW / W, W, kFrom>;
  } else {
    return norm_bulk_kernel<T, kRms, VPW / W, kFrom, W, kFlags>;
  }
}

template <typename T, bool kRms, int VPW, AffineFrom kFrom, int W, int kFlags>
bool launch_norm_bulk_as(T* x, const RowGeom& g, const NormRowOp<T, kRms, VPW, kFrom>& op, cudaStream_t stream) {
  constexpr bool kLean = (kFlags & kLeanRows) != 0;
  // norm_lean_kernel takes either op (it reads weight/bias once per block itself) and 1-4 words per
  // thread (more: over 128 registers of values, weights and biases).
  if constexpr (kLean ? VPW < W || VPW > 4 * W || kFlags != kLeanRows
                      : VPW < W * 2 || (kFlags & kHoldAffine && kFrom != AffineFrom::kLdg)) {
    return false;
  } else {
    constexpr auto kernel = norm_bulk_kernel_for<T, kRms, VPW, kFrom, W, kFlags>();
    if (!bulk_rows_enabled() || g.rows == 0 || !bulk_kernel_usable<kernel>()) return false;
    // norm_lean_kernel relies on with_warp_rows' choice of VPW: more than VPW·16 words per row.
    if (kLean && (g.cols / kVec<T> <= VPW * 16 || g.cols / kVec<T> > VPW * 32)) return false;
    const std::size_t row_bytes = std::size_t(g.cols) * sizeof(T);
    const int stages = bulk_stages(row_bytes, kLean && !kRms && row_bytes > 4096 ? kLayerNormLongRowBytesPerBlock
                                                                                : kBulkBytesPerBlock);
    const std::size_t head = kLean ? kNormBulkHead : (kNormBulkHead + op.shared_bytes() + 127) / 128 * 128;
    const std::size_t smem = head + std::size_t(stages) * ((row_bytes + 127) / 128 * 128);
    kernel<<<persistent_grid(kernel, W * 32, smem, g.rows, 1), W * 32, smem, stream>>>(x, g, stages, op);
    return true;
  }
}

/// Launches a block-row kernel for rows of VPW·32 words at most (VPW 8 or 16) when the device and
/// the build allow it; returns false otherwise (the caller runs the warp-row kernel).
///
/// Default: norm_lean_kernel for both ops with 4 words (32 elements) per thread: 4 warps per row
/// for rows of 2049-4096 (4x8), 2 for 1025-2048 (2x8). Chosen from the SASS counts (see
/// kKeepFloats; at 4096: 9.2 instructions per element for LayerNorm against 21 for the old
/// default, 6.5 for RMSNorm against 15-17; at 2048: 9.0 / 6.5 against 23-25 / 19-21, where 4
/// warps of 2 words would issue 11.9 / 8.3). 128 registers for LayerNorm: 16 warps per SM, which
/// the issue budget leaves room for (a 4096-element row costs ~300 issue cycles per SM against
/// ~1100 cycles of memory time at 90% of the copy bandwidth). NOT YET TIMED when written:
/// compare with 8x8 and with the old defaults (tools/diag/s5_norm.sh).
/// Old defaults, from the variants timed on the H200 (session 4, 16384 rows; % of the copy
/// bandwidth, back-to-back calls; benchmarks/results/inplace-norm-variants-*), still selectable:
/// - LayerNorm, rows of 2049-4096: 8 warps, fp32 values kept between the passes, weight and bias
///   held in registers (8x3): fp16 79% / bf16 79% at 4096 against 76% / 72% for 4 warps without
///   them (LayerNorm does more arithmetic per element than RMSNorm: the conversions saved matter);
/// - LayerNorm, rows of 1025-2048: 4 warps, fp32 values kept (4x1): 69% / 65% against 68% / 64%;
/// - RMSNorm: 4 warps, raw words only (4x0; 83% / 81% at 4096; the other variants 76-82%).
/// 16 warps per row was slower everywhere (64-74%).
template <typename T, bool kRms, int VPW, AffineFrom kFrom>
bool launch_norm_bulk(T* x, const RowGeom& g, const NormRowOp<T, kRms, VPW, kFrom>& op, cudaStream_t stream) {
  if constexpr (VPW < 8) {
    return false;
  } else {
#ifdef SPARSEKERN_NORM_VARIANTS
    const int v = norm_bulk_variant();  // flag 4: weight/bias planes in shared memory (kSmem op)
    if (v != 0 && (v % 100) & 4 && kFrom == AffineFrom::kLdg) return false;
    switch (v - ((v % 100) & 4)) {
      case 400: return launch_norm_bulk_as<T, kRms, VPW, kFrom, 4, 0>(x, g, op, stream);
      case 401: return launch_norm_bulk_as<T, kRms, VPW, kFrom, 4, 1>(x, g, op, stream);
      case 402: return launch_norm_bulk_as<T, kRms, VPW, kFrom, 4, 2>(x, g, op, stream);
      case 403: return launch_norm_bulk_as<T, kRms, VPW, kFrom, 4, 3>(x, g, op, stream);
      case 800: return launch_norm_bulk_as<T, kRms, VPW, kFrom, 8, 0>(x, g, op, stream);
      case 801: return launch_norm_bulk_as<T, kRms, VPW, kFrom, 8, 1>(x, g, op, stream);
      case 802: return launch_norm_bulk_as<T, kRms, VPW, kFrom, 8, 2>(x, g, op, stream);
      case 803: return launch_norm_bulk_as<T, kRms, VPW, kFrom, 8, 3>(x, g, op, stream);
      // lean variants: rows they do not take (2x8 over 2048 elements) run the default
      case 208:
        if constexpr (VPW <= 8) return launch_norm_bulk_as<T, kRms, VPW, kFrom, 2, kLeanRows>(x, g, op, stream);
        break;
      case 408: return launch_norm_bulk_as<T, kRms, VPW, kFrom, 4, kLeanRows>(x, g, op, stream);
      case 808: return launch_norm_bulk_as<T, kRms, VPW, kFrom, 8, kLeanRows>(x, g, op, stream);
      default: break;
    }
#endif
    return launch_norm_bulk_as<T, kRms, VPW, kFrom, VPW / 4, kLeanRows>(x, g, op, stream);
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
        const auto op_from = [&](auto from) {
          return NormRowOp<T, kRms, VPW, decltype(from)::value>{af.weight, af.bias, g.cols,
                                                                A(1) / static_cast<A>(g.cols), eps};
        };
        // The block-row kernel reads weight/bias through the read-only cache (the fp32 planes cost
        // 32 KB of shared memory per block: 3 blocks per SM instead of 5-6, 63% instead of 77% of
        // the copy bandwidth for fp16 LayerNorm at 16384 x 4096 on the H200); the warp-row kernel
        // keeps the planes (80% against 73% at 65536 x 768). norm_lean_kernel (the default) reads
        // them once per block into registers and takes either op: the kSmem one for weight/bias
        // that are not 16-byte aligned.
        if (af.aligned &&
            launch_norm_bulk(x, g, op_from(std::integral_constant<AffineFrom, AffineFrom::kLdg>{}), stream))
          return;
        const auto op = op_from(std::integral_constant<AffineFrom, AffineFrom::kSmem>{});
        if (!launch_norm_bulk(x, g, op, stream)) launch_warp_rows<T, VPW>(x, g, op, stream);
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

bool bulk_rows_enabled() {
  static const bool enabled = [] {
    const char* v = std::getenv("SPARSEKERN_INPLACE_BULK");
    return v == nullptr || v[0] != '0';
  }();
  return enabled;
}

std::size_t bulk_bytes_per_block(std::size_t fallback) {
  static const std::size_t bytes = [] {  // 0: not set
    const char* v = std::getenv("SPARSEKERN_INPLACE_BULK_BYTES");
    const long long n = v ? std::atoll(v) : 0;
    return n >= 512 && n <= (1 << 20) ? std::size_t(n) : std::size_t(0);
  }();
  return bytes != 0 ? bytes : fallback;
}

void layer_norm_cuda(const NormParams& p, Stream stream) { norm_cuda<false>(p, stream); }
void rms_norm_cuda(const NormParams& p, Stream stream) { norm_cuda<true>(p, stream); }

}  // namespace sparsekern::inplace::detail
