#pragma once
// Building blocks of the row-wise in-place CUDA kernels (softmax_cuda.cu, norm_cuda.cu).
//
// A row is handled by a group of TPR threads: a sub-warp (8/16 threads) or a warp for short rows,
// several groups per 128-thread block; a whole block (64…1024 threads) for long rows. Each thread
// owns N elements of its row, loaded as 16-byte vectors (V = 16/sizeof(T) elements) at vector
// indices t, t + TPR, t + 2·TPR, … so that a group's loads are contiguous, and keeps them in
// registers in the accumulator type (fp32; fp64 for f64): the row is read once and written once.
// Rows longer than the largest register tile (16K elements) go to a streaming kernel that reads the
// row twice from global memory (the second read mostly hits L2) and writes it once.
// 16-bit rows of 257…4096 elements (multiples of 8, 16-byte aligned) take the warp-row kernels
// instead ("Warp rows" below): one warp per row, raw 16-byte words in registers, shuffles only
// (the norms on sm_90+: four warps per row of 1025…4096 elements, see norm_cuda.cu).

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#include "../common/cuda_check.h"
#include <sparsekern/inplace.h>

namespace sparsekern::inplace::detail {

template <typename T> struct AccOf { using type = float; };
template <> struct AccOf<double> { using type = double; };
template <typename T> using acc_t = typename AccOf<T>::type;

/// Elements per 16-byte vector.
template <typename T> constexpr int kVec = 16 / int(sizeof(T));

__device__ __forceinline__ float to_acc(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_acc(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float to_acc(float v) { return v; }
__device__ __forceinline__ double to_acc(double v) { return v; }

template <typename T> __device__ __forceinline__ T from_acc(acc_t<T> v);
template <> __device__ __forceinline__ __half from_acc<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 from_acc<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }
template <> __device__ __forceinline__ float from_acc<float>(float v) { return v; }
template <> __device__ __forceinline__ double from_acc<double>(double v) { return v; }

/// exp for the softmax: the fast SFU exponential for 16-bit outputs (its error is far below their
/// rounding), the accurate one for fp32/fp64 (fp32 results are checked at 1e-5).
template <typename T> __device__ __forceinline__ acc_t<T> softmax_exp(acc_t<T> v) {
  if constexpr (std::is_same_v<T, double>) return exp(v);
  else if constexpr (std::is_same_v<T, float>) return expf(v);
  else return __expf(v);
}

template <typename T, int V>
struct alignas(16) Pack {
  T v[V];
};

/// Loads the V elements [e0, e0 + V) of `row` into out[0..V); those at or past `cols` become `fill`.
/// `aligned`: the row start is 16-byte aligned, so whole vectors are single 16-byte loads.
template <typename T, typename A>
__device__ __forceinline__ void load_vec(const T* row, std::int64_t e0, std::int64_t cols, bool aligned,
                                         A* out, A fill) {
  constexpr int V = kVec<T>;
  if (aligned && e0 + V <= cols) {
    const Pack<T, V> pk = *reinterpret_cast<const Pack<T, V>*>(row + e0);
#pragma unroll
    for (int k = 0; k < V; ++k) out[k] = to_acc(pk.v[k]);
  } else {
#pragma unroll
    for (int k = 0; k < V; ++k) out[k] = e0 + k < cols ? to_acc(row[e0 + k]) : fill;
  }
}

/// load_vec for data no thread writes during the kernel (weights, biases): through the read-only
/// (non-coherent) cache, which keeps them resident across the rows an SM processes.
template <typename T, typename A>
__device__ __forceinline__ void load_vec_ro(const T* p, std::int64_t e0, std::int64_t cols, bool aligned,
                                            A* out, A fill) {
  constexpr int V = kVec<T>;
  if (aligned && e0 + V <= cols) {
    const uint4 raw = __ldg(reinterpret_cast<const uint4*>(p + e0));
    Pack<T, V> pk;
    memcpy(&pk, &raw, 16);
#pragma unroll
    for (int k = 0; k < V; ++k) out[k] = to_acc(pk.v[k]);
  } else {
#pragma unroll
    for (int k = 0; k < V; ++k) out[k] = e0 + k < cols ? to_acc(p[e0 + k]) : fill;
  }
}

template <typename T, typename A>
__device__ __forceinline__ void store_vec(T* row, std::int64_t e0, std::int64_t cols, bool aligned, const A* in) {
  constexpr int V = kVec<T>;
  if (aligned && e0 + V <= cols) {
    Pack<T, V> pk;
#pragma unroll
    for (int k = 0; k < V; ++k) pk.v[k] = from_acc<T>(in[k]);
    *reinterpret_cast<Pack<T, V>*>(row + e0) = pk;
  } else {
#pragma unroll
    for (int k = 0; k < V; ++k)
      if (e0 + k < cols) row[e0 + k] = from_acc<T>(in[k]);
  }
}

/// Geometry of the rows (see RowsView); row r is (r / inner, r % inner).
struct RowGeom {
  std::int64_t rows, inner, cols, outer_stride, inner_stride;
  __device__ __forceinline__ std::int64_t offset(std::int64_t r) const {
    return (r / inner) * outer_stride + (r % inner) * inner_stride;
  }
};

inline RowGeom geom_of(const RowsView& v) {
  return RowGeom{v.rows(), v.inner > 0 ? v.inner : 1, v.cols, v.outer_stride, v.inner_stride};
}

/// Whether every row start of `v` is 16-byte aligned (then whole vectors load in one instruction).
template <typename T>
bool rows_aligned(const RowsView& v) {
  constexpr std::int64_t V = kVec<T>;
  return reinterpret_cast<std::uintptr_t>(v.data) % 16 == 0 && (v.outer <= 1 || v.outer_stride % V == 0) &&
         (v.inner <= 1 || v.inner_stride % V == 0);
}

struct SumOp {
  template <typename A> __device__ __forceinline__ A operator()(A a, A b) const { return a + b; }
};
struct MaxOp {
  template <typename A> __device__ __forceinline__ A operator()(A a, A b) const { return a > b ? a : b; }
};

/// Reduces `v` over the TPR threads of a row group and returns the result to all of them. For
/// TPR > 32 the group is the whole block and `smem` holds one value per warp; every thread of the
/// block must call it (the same number of times).
template <int TPR, typename A, typename Op>
__device__ __forceinline__ A group_allreduce(A v, A* smem, Op op) {
  constexpr int W = TPR < 32 ? TPR : 32;
#pragma unroll
  for (int off = W / 2; off > 0; off >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, off, W));
  if constexpr (TPR > 32) {
    __syncthreads();  // earlier readers of smem are done
    if (threadIdx.x % 32 == 0) smem[threadIdx.x / 32] = v;
    __syncthreads();
    v = smem[0];
#pragma unroll
    for (int w = 1; w < TPR / 32; ++w) v = op(v, smem[w]);
  }
  return v;
}

/// Threads per block of the register-tile kernels: one block per row for TPR ≥ 64, else 128-thread
/// blocks of 128/TPR rows (small blocks keep many rows in flight per SM).
template <int TPR> constexpr int block_threads() { return TPR >= 64 ? TPR : 128; }
/// Threads per row (= per block) of the streaming kernel for long rows: enough 16-byte loads in
/// flight to cover latency with one or two resident rows per SM.
constexpr int kStreamThreads = 512;
/// Threads per block of the strided kernels (one thread per row).
constexpr int kStridedThreads = 256;

/// Picks the register tile (threads per row TPR, elements per thread N) for rows of `cols`
/// elements and calls fn(integral_constant<TPR>, integral_constant<N>); returns false when the row
/// is longer than the largest tile (use the streaming kernel). N ≤ 16 keeps two cached rows (the
/// softmax backward holds grad and y) within 64 registers, so 1024-thread blocks do not spill.
/// The smallest tile that holds the row wins: fewer idle lanes, more rows resident per SM.
template <typename Fn>
bool with_row_tile(std::int64_t cols, Fn&& fn) {
  using std::integral_constant;
  if (cols <= 64) return fn(integral_constant<int, 8>{}, integral_constant<int, 8>{}), true;
  if (cols <= 128) return fn(integral_constant<int, 16>{}, integral_constant<int, 8>{}), true;
  if (cols <= 256) return fn(integral_constant<int, 32>{}, integral_constant<int, 8>{}), true;
  if (cols <= 512) return fn(integral_constant<int, 32>{}, integral_constant<int, 16>{}), true;
  if (cols <= 1024) return fn(integral_constant<int, 64>{}, integral_constant<int, 16>{}), true;
  if (cols <= 2048) return fn(integral_constant<int, 128>{}, integral_constant<int, 16>{}), true;
  if (cols <= 4096) return fn(integral_constant<int, 256>{}, integral_constant<int, 16>{}), true;
  if (cols <= 8192) return fn(integral_constant<int, 512>{}, integral_constant<int, 16>{}), true;
  if (cols <= 16384) return fn(integral_constant<int, 1024>{}, integral_constant<int, 16>{}), true;
  return false;
}

/// Blocks for `rows` rows at `rows_per_block`: one row (group) per block up to the grid limit; the
/// kernels loop over the rest (grid-stride), uniformly across a block.
inline unsigned grid_for(std::int64_t rows, int rows_per_block) {
  const std::int64_t blocks = (rows + rows_per_block - 1) / rows_per_block;
  return static_cast<unsigned>(blocks < (std::int64_t(1) << 30) ? blocks : (std::int64_t(1) << 30));
}

// ---------------------------------------------------------------------------------------------
// Warp rows: the 16-bit register tile for 256 < cols ≤ 4096 (cols a multiple of 8, rows 16-byte
// aligned). One warp per row, 4 warps per block, a persistent grid-stride loop over rows. Each lane
// keeps its VPW vectors as raw 16-byte words (4 registers per 8 elements, half the registers of the
// fp32 copy) and converts them each time it reads them, so a 4096-element row fits in one warp:
// every reduction is 5 shuffles, no __syncthreads, and all VPW loads are issued before the first
// use. Short rows also load the warp's next row while reducing this one (see prefetch_next_row).
// The block-per-row tile needed two block-wide reductions per 4096-element row and reached only
// 50-57% of the copy bandwidth for 16-bit norms on the H200 (fp32: 92%).
// ---------------------------------------------------------------------------------------------
constexpr int kWarpRowsThreads = 128;
constexpr int kWarpRowsWarps = kWarpRowsThreads / 32;
/// Minimum resident blocks per SM asked of the compiler (__launch_bounds__): 4 caps the kernels at
/// 128 registers, i.e. ≥ 16 rows in flight per SM (ptxas -v: 40-111 registers, no spills, for
/// every instantiation on sm_90a). Each pass over the words tests `vi < nvec` per word: that branch
/// keeps one word's unpacked floats local to it; without it ptxas converted a whole 4096-element
/// row at once (160-190 registers, or spills under the cap).
constexpr int kWarpRowsMinBlocks = 4;

/// Whether the warp-row kernels handle element type T at all: the 16-bit types (fp32 rows already
/// reach 92-100% of the copy bandwidth with the block tile; fp64 is not a speed target).
template <typename T> constexpr bool kWarpRowsType = sizeof(T) == 2;

/// Whether a lane also holds the warp's next row (`raw_vecs` = 16-byte words per lane per row,
/// summed over the tensors read): the next row's loads then overlap this row's reductions and
/// stores. Above 8 words the two copies need > 64 data registers and cut occupancy more than the
/// overlap gains.
constexpr bool prefetch_next_row(int raw_vecs) { return raw_vecs <= 8; }

/// Diagnostic switch: SPARSEKERN_INPLACE_WARP_ROWS=0 in the environment sends every row back to the
/// block tile, so one run can time both paths (tools/diag/inplace2.sh). Read once per process.
bool warp_rows_enabled();

/// Calls fn(integral_constant<VPW>) with VPW ≤ kMaxVpw 16-byte vectors per lane when the warp-row kernels
/// take rows of `cols` elements of T (the caller checks alignment and cols % kVec<T> == 0);
/// returns false otherwise. Rows of ≤ 256 elements stay with the sub-warp groups of
/// with_row_tile, which fill more lanes.
template <typename T, int kMaxVpw, typename Fn>
bool with_warp_rows(std::int64_t cols, Fn&& fn) {
  using std::integral_constant;
  if constexpr (!kWarpRowsType<T>) {
    return false;
  } else {
    constexpr std::int64_t W = 32 * kVec<T>;  // elements per warp-wide vector
    if (cols <= W || cols % kVec<T> != 0 || !warp_rows_enabled()) return false;
    if (cols <= 2 * W) return fn(integral_constant<int, 2>{}), true;
    if (cols <= 4 * W) return fn(integral_constant<int, 4>{}), true;
    if constexpr (kMaxVpw >= 8) {
      if (cols <= 8 * W) return fn(integral_constant<int, 8>{}), true;
    }
    if constexpr (kMaxVpw >= 16) {
      if (cols <= 16 * W) return fn(integral_constant<int, 16>{}), true;
    }
    return false;
  }
}

/// Unpacks the 16-byte word `raw` into kVec<T> accumulator values.
template <typename T>
__device__ __forceinline__ void unpack_vec(const uint4& raw, acc_t<T>* out) {
  Pack<T, kVec<T>> pk;
  memcpy(&pk, &raw, 16);
#pragma unroll
  for (int k = 0; k < kVec<T>; ++k) out[k] = to_acc(pk.v[k]);
}

template <typename T>
__device__ __forceinline__ uint4 pack_vec(const acc_t<T>* in) {
  Pack<T, kVec<T>> pk;
#pragma unroll
  for (int k = 0; k < kVec<T>; ++k) pk.v[k] = from_acc<T>(in[k]);
  uint4 raw;
  memcpy(&raw, &pk, 16);
  return raw;
}

/// Loads lane `lane`'s VPW words of a row of `nvec` 16-byte vectors (word k is vector k·32 + lane);
/// words past the row are zero bits (0.0 in every type).
template <int VPW>
__device__ __forceinline__ void load_row_words(const void* row, std::int64_t nvec, int lane, uint4* raw) {
  const uint4* p = static_cast<const uint4*>(row);
#pragma unroll
  for (int k = 0; k < VPW; ++k) {
    const std::int64_t vi = std::int64_t(k) * 32 + lane;
    raw[k] = vi < nvec ? p[vi] : make_uint4(0u, 0u, 0u, 0u);
  }
}

/// Tells the compiler the words may have changed (an empty asm, no instruction): the next pass must
/// unpack them again instead of keeping 8·VPW floats of the previous pass live, which is the point
/// of holding raw words.
template <int VPW>
__device__ __forceinline__ void launder_words(uint4* raw) {
#pragma unroll
  for (int k = 0; k < VPW; ++k) asm volatile("" : "+r"(raw[k].x), "+r"(raw[k].y), "+r"(raw[k].z), "+r"(raw[k].w));
}

/// Σ p[0..N) as a pairwise tree (log2 N dependent adds instead of N − 1).
template <int N, typename A>
__device__ __forceinline__ A sum_slots(const A* p) {
  static_assert(N > 0 && (N & (N - 1)) == 0, "a power of two");
  if constexpr (N == 1) {
    return p[0];
  } else {
    return sum_slots<N / 2>(p) + sum_slots<N / 2>(p + N / 2);
  }
}

template <typename A, typename Op>
__device__ __forceinline__ A warp_allreduce(A v, Op op) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;
}

/// Grid of a persistent grid-stride kernel: no more blocks than fit on the device at once (each
/// block then loops over rows instead of the hardware launching one short block per row group),
/// and no more than the rows need.
template <typename Kernel>
unsigned persistent_grid(Kernel kernel, int threads, std::size_t smem_bytes, std::int64_t rows, int rows_per_block) {
  int device = 0, sms = 0, per_sm = 0;
  SK_CUDA_TRY(cudaGetDevice(&device));
  SK_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  SK_CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, smem_bytes));
  const std::int64_t resident = std::int64_t(sms) * (per_sm > 0 ? per_sm : 1);
  const unsigned need = grid_for(rows, rows_per_block);
  return static_cast<std::int64_t>(need) < resident ? need : static_cast<unsigned>(resident);
}

template <typename T> struct TypeTag { using type = T; };

/// Calls fn(TypeTag<T>{}) with T the device element type of `dtype` (__half, __nv_bfloat16, float,
/// double): the CUDA-side counterpart of SK_DTYPE_SWITCH, whose host types kernels cannot use.
template <typename Fn>
void cuda_dtype_switch(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::f16: return fn(TypeTag<__half>{});
    case DType::bf16: return fn(TypeTag<__nv_bfloat16>{});
    case DType::f32: return fn(TypeTag<float>{});
    case DType::f64: return fn(TypeTag<double>{});
  }
  throw TypeMismatch("unsupported dtype");
}


}  // namespace sparsekern::inplace::detail
