#pragma once
// Pieces shared by the sm_90a block-sparse kernels (dds_sm90.cuh, sdd_sm90.cuh).
#include <cuda_runtime_api.h>

#include <cute/tensor.hpp>
#include <cute/arch/copy_sm90_tma.hpp>
#include <cute/atom/copy_traits_sm90_tma.hpp>
#include <cute/atom/mma_traits_sm90_gmma.hpp>
#include <cutlass/arch/barrier.h>
#include <cutlass/arch/reg_reconfig.h>
#include <cutlass/numeric_types.h>
#include <cutlass/pipeline/sm90_pipeline.hpp>

#include <cuda.h>  // CUtensorMap types only: the encoder is reached through the runtime's entry point
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <type_traits>

#include "../../common/check.h"
#include "../../common/cuda_check.h"
#include "../../common/kernel_attr.cuh"
#include "dds_sm90.h"

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define SPARSEKERN_SM90A_DEVICE 1
#endif

namespace sparsekern::bsr::sm90 {

using namespace cute;

template <Elem kElem> struct ElemT;
template <> struct ElemT<Elem::f16> { using type = cutlass::half_t; };
template <> struct ElemT<Elem::bf16> { using type = cutlass::bfloat16_t; };
template <> struct ElemT<Elem::tf32> { using type = cutlass::tfloat32_t; };

/// Shared-memory layout atom for an operand whose contiguous extent is `kBytes` per line:
/// the widest GMMA swizzle that the extent fills (128-byte lines: SW128; 64: SW64).
template <class T, bool kKMajor, int kBytes>
auto smem_atom() {
  if constexpr (kKMajor) {
    if constexpr (kBytes % 128 == 0) return GMMA::Layout_K_SW128_Atom<T>{};
    else return GMMA::Layout_K_SW64_Atom<T>{};
  } else {
    if constexpr (kBytes % 128 == 0) return GMMA::Layout_MN_SW128_Atom<T>{};
    else return GMMA::Layout_MN_SW64_Atom<T>{};
  }
}

template <class T>
__device__ __forceinline__ void store_pair(T* dst, float v0, float v1) {
  if constexpr (std::is_same_v<T, cutlass::half_t>) {
    *reinterpret_cast<__half2*>(dst) = __floats2half2_rn(v0, v1);
  } else {
    *reinterpret_cast<__nv_bfloat162*>(dst) = __floats2bfloat162_rn(v0, v1);
  }
}

/// A 32-bit shared-memory store and load as volatile asm: the producer writes a stage's side data
/// (block mask, tile) before the arrive on the stage's full barrier, which orders it (CUTLASS's
/// barrier asm has no memory clobber; a clobber instead would also force every value the compiler
/// keeps in memory to be reloaded after it); the consumers read it after their wait.
__device__ __forceinline__ void st_shared_u32(std::uint32_t* p, std::uint32_t v) {
  asm volatile("st.shared.u32 [%0], %1;" ::"r"(static_cast<std::uint32_t>(__cvta_generic_to_shared(p))), "r"(v));
}
__device__ __forceinline__ std::uint32_t ld_shared_u32(const std::uint32_t* p) {
  std::uint32_t v;
  asm volatile("ld.shared.u32 %0, [%1];" : "=r"(v) : "r"(static_cast<std::uint32_t>(__cvta_generic_to_shared(p))));
  return v;
}

/// A dds ring stage's info when it carries no tile: the consumer stops (the grouped kernel says so
/// with a mask bit, GddsConfig::kStop).
constexpr std::uint32_t kNoTile = 0xffffffffu;
/// The most columns (or column groups) a CTA orders heaviest first (above: the rotated order).
constexpr int kMaxOrder = 256;

/// The heaviest-first order of a row panel's columns, in shared memory (2 KB).
struct TileOrder {
  int weight[kMaxOrder];
  int order[kMaxOrder];  ///< order[r] = the column (group) of rank r
};

/// Fills `o` for n groups of `span` block columns (group g = columns g·span … min((g+1)·span,
/// n_cols) − 1, its weight the number of blocks they hold, from the index set's offsets): rank
/// by weight, heaviest first, ties by index. Called by the whole CTA (it synchronises); O(n²/
/// threads) shared-memory reads, ~1 µs at n = 256. With tiles handed out in this order the last
/// ones of the kernel are the lightest, close to a longest-processing-time-first schedule.
__device__ __forceinline__ void heavy_first_order(const std::int32_t* offsets, int n_cols, int span, int n,
                                                  TileOrder& o) {
  for (int g = int(threadIdx.x); g < n; g += int(blockDim.x))
    o.weight[g] = offsets[min((g + 1) * span, n_cols)] - offsets[g * span];
  __syncthreads();
  for (int g = int(threadIdx.x); g < n; g += int(blockDim.x)) {
    const int w = o.weight[g];
    int r = 0;
    for (int h = 0; h < n; ++h) {
      const int wh = o.weight[h];
      r += (wh > w) | ((wh == w) & (h < g));
    }
    o.order[r] = g;
  }
  __syncthreads();
}

/// The two stage rings of a ping-pong kernel: consumer warpgroup r (r = 0, 1) owns every other tile
/// of its CTA and reads only ring r, filled by producer warp r. Separate rings (not one shared
/// ring that each consumer skips through) because an mbarrier wait matches a phase by parity only:
/// a consumer skipping the other's stages could wait on a barrier two phases ahead of its data,
/// take the other tile's stage and corrupt the pipeline (this hung the first version).
/// Ring r's stage s is physical stage r · kPerRing + s of the shared-memory operand buffers.
template <int kPerRing>
struct Rings {
  cutlass::arch::ClusterTransactionBarrier full[2][kPerRing];  // TMA landed (1 arrival + bytes)
  cutlass::arch::ClusterBarrier empty[2][kPerRing];            // consumer done (128 arrivals)
  std::uint32_t info[2][kPerRing];  // dds: the stage's output tile, or kNoTile (see dds_kernel)

  __device__ void init() {
    if (threadIdx.x == 0) {
      for (int r = 0; r < 2; ++r) {
        for (int s = 0; s < kPerRing; ++s) {
          full[r][s].init(1);
          empty[r][s].init(128);
        }
      }
    }
    cutlass::arch::fence_barrier_init();
  }
};

/// Waits until phase `phase` of an mbarrier completes. Built with SPARSEKERN_SM90_WATCHDOG (a
/// debugging aid), a wait longer than ~2³³ cycles (seconds) prints which barrier and traps instead
/// of hanging the GPU.
template <class Bar>
__device__ __forceinline__ void wait_barrier(Bar& bar, std::uint32_t phase, const char* what, int stage, int tile) {
#if defined(SPARSEKERN_SM90_WATCHDOG)
  const long long t0 = clock64();
  while (!bar.try_wait(phase)) {
    if (clock64() - t0 > (1ll << 33)) {
      printf("sparsekern sm90 watchdog: block %d thread %d stuck on %s barrier, stage %d phase %u, tile %d\n",
             int(blockIdx.x), int(threadIdx.x), what, stage, phase, tile);
      __trap();
    }
  }
#else
  (void)what, (void)stage, (void)tile;
  bar.wait(phase);
#endif
}

/// Two fp32 values rounded to 16 bits and packed into one 32-bit word (low half = v0).
template <class T>
__device__ __forceinline__ std::uint32_t pack_pair(float v0, float v1) {
  if constexpr (std::is_same_v<T, cutlass::half_t>) {
    __half2 h = __floats2half2_rn(v0, v1);
    return *reinterpret_cast<std::uint32_t*>(&h);
  } else {
    __nv_bfloat162 h = __floats2bfloat162_rn(v0, v1);
    return *reinterpret_cast<std::uint32_t*>(&h);
  }
}

/// The inverse of pack_pair (exact).
template <class T>
__device__ __forceinline__ float2 unpack_pair(std::uint32_t w) {
  if constexpr (std::is_same_v<T, cutlass::half_t>) {
    return make_float2(__half2float(__ushort_as_half((unsigned short)(w & 0xffffu))),
                       __half2float(__ushort_as_half((unsigned short)(w >> 16))));
  } else {
    return make_float2(__uint_as_float(w << 16), __uint_as_float(w & 0xffff0000u));
  }
}

/// Whether cuTensorMapEncodeTiled accepts a 2-D tiled map with these parameters (the ones CuTe's
/// make_tma_atom derives for our tiles). Checked before building the real descriptors because
/// CuTe reports an encoding failure by printing to std::cerr and carrying on with a garbage
/// descriptor: in a wheel whose libstdc++ is linked statically that print crashed the process
/// (seen on the H200 in a benchmark), and a garbage descriptor would hang the kernel. On false the
/// caller runs the SM80 kernel instead.
template <class T>
bool tma_encodable(const void* addr, std::uint64_t dim0, std::uint64_t dim1, std::uint64_t stride1_bytes,
                   std::uint32_t box0, std::uint32_t box1) {
  using Encode = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                              const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                              CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
  // A pending error of an earlier asynchronous call is returned by the next runtime call, which
  // makes CUTLASS's own entry-point lookup (inside make_tma_atom) fail: leave such a state alone
  // (its owner reports it) and take the SM80 kernel.
  if (cudaPeekAtLastError() != cudaSuccess) return false;
  static std::atomic<Encode> cached{nullptr};
  Encode encode = cached.load(std::memory_order_acquire);
  if (encode == nullptr) {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult status{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &status) !=
            cudaSuccess ||
        status != cudaDriverEntryPointSuccess || fn == nullptr) {
      return false;  // not cached: tried again next time
    }
    encode = reinterpret_cast<Encode>(fn);
    cached.store(encode, std::memory_order_release);
  }
  constexpr std::uint32_t kElem = sizeof(T);
  const CUtensorMapDataType type = std::is_same_v<T, cutlass::half_t>       ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
                                   : std::is_same_v<T, cutlass::bfloat16_t> ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                                                                            : CU_TENSOR_MAP_DATA_TYPE_TFLOAT32;
  const CUtensorMapSwizzle swizzle =
      box0 * kElem >= 128 ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_64B;
  alignas(64) CUtensorMap map;
  const cuuint64_t dims[2] = {dim0, dim1};
  const cuuint64_t strides[1] = {stride1_bytes};
  const cuuint32_t box[2] = {box0, box1};
  const cuuint32_t elem_strides[2] = {1, 1};
  return encode(&map, type, 2, const_cast<void*>(addr), dims, strides, box, elem_strides,
                CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

/// One consumer tile's main loop (dds and sdd): acc = Σ over the next `nk` stages of ring `ring`
/// (from `state`, which is advanced past them) of A_stage · B_stage on wgmma. One wgmma batch stays
/// in flight; a stage is released as soon as the batch that read it has finished.
template <int kPerRing, class State, class Mma, class FragA, class FragB, class Acc>
__device__ __forceinline__ void consume_tile(Rings<kPerRing>& rings, int ring, State& state, int nk, int tile, Mma& mma,
                                             FragA& tCrA, FragB& tCrB, Acc& acc) {
  clear(acc);
  mma.accumulate_ = GMMA::ScaleOut::One;
  warpgroup_fence_operand(acc);
  State prev = state;
  for (int k = 0; k < nk; ++k) {
    wait_barrier(rings.full[ring][state.index()], state.phase(), "full", state.index(), tile);
    const int stage = ring * kPerRing + state.index();
    warpgroup_arrive();
    CUTE_UNROLL
    for (int kb = 0; kb < size<2>(tCrA); ++kb) {
      gemm(mma, tCrA(_, _, kb, stage), tCrB(_, _, kb, stage), acc);
    }
    warpgroup_commit_batch();
    warpgroup_wait<1>();  // the previous k-step's wgmma is done: its stage can be refilled
    if (k > 0) rings.empty[ring][prev.index()].arrive();
    prev = state;
    ++state;
  }
  warpgroup_wait<0>();
  if (nk > 0) rings.empty[ring][prev.index()].arrive();
  warpgroup_fence_operand(acc);
}

/// The epilogue of a consumer tile (dds kernels): C[row0 + r, col0 + c] = acc(r, c) (+ bias[col0 + c])
/// for the rows below m. `tCcC` maps each accumulator to its (row, column) in the tile.
template <int kBN, class T, class Acc, class CoordC>
__device__ __forceinline__ void store_tile(const Acc& acc, const CoordC& tCcC, T* c, std::int64_t ldc, std::int64_t m,
                                           std::int64_t row0, std::int64_t col0, const T* bias, int lane) {
  if constexpr (sizeof(T) == 4) {
    // tf32 path, fp32 output: each thread's column pairs stored as 8-byte vectors (a warp
    // writes whole 32-byte sectors: 4 lanes × 8 bytes per row); the bias pair of an 8-column
    // group is loaded once for all of the thread's rows.
    float* cf = reinterpret_cast<float*>(c);
    const float* biasf = reinterpret_cast<const float*>(bias);
    CUTE_UNROLL
    for (int g = 0; g < kBN / 8; ++g) {
      const int col = get<1>(tCcC(make_coord(make_coord(0, 0, g), 0, 0)));
      const float2 bv = biasf != nullptr ? make_float2(biasf[col0 + col], biasf[col0 + col + 1])
                                         : make_float2(0.f, 0.f);
      CUTE_UNROLL
      for (int mm = 0; mm < size<1>(acc); ++mm) {
        CUTE_UNROLL
        for (int r2 = 0; r2 < 2; ++r2) {
          const auto i0 = make_coord(make_coord(0, r2, g), mm, 0);
          const auto i1 = make_coord(make_coord(1, r2, g), mm, 0);
          const std::int64_t row = row0 + get<0>(tCcC(i0));
          if (row < m) {
            *reinterpret_cast<float2*>(cf + row * ldc + col0 + col) =
                make_float2(acc(i0) + bv.x, acc(i1) + bv.y);
          }
        }
      }
    }
  } else {
    // Epilogue: fp32 accumulators (+ bias) rounded to 16 bits and stored from registers as full
    // 16-byte vectors. The wgmma fragment gives lane l of a quad the column pair 2·(l % 4) of
    // every 8-column group of its row; a 4 × 4 transpose of packed pairs inside the quad (three
    // xor-shuffles) gives lane q all 8 columns of group 4t + q, so each row is written in whole
    // 64-byte runs. (4-byte pair stores ran at ~1.3 TB/s: ~50 µs of every 8192 × 4096 call.)
    const int q = lane & 3;
    constexpr int kGroups = kBN / 8;
    static_assert(kGroups % 4 == 0, "whole quads of 8-column groups");
    // The bias of this thread's columns (the same for every row), loaded once per tile as packed
    // pairs: per-element loads inside the loops below cost ~18 µs per 8192 × 4096 call.
    std::uint32_t bias_pairs[kGroups];
    CUTE_UNROLL
    for (int g = 0; g < kGroups; ++g) {
      bias_pairs[g] = 0;
      if (bias != nullptr) {
        const std::uint16_t* bp = reinterpret_cast<const std::uint16_t*>(bias) + col0 + 8 * g + 2 * q;
        bias_pairs[g] = std::uint32_t(bp[0]) | (std::uint32_t(bp[1]) << 16);
      }
    }
    CUTE_UNROLL
    for (int mm = 0; mm < size<1>(acc); ++mm) {
      CUTE_UNROLL
      for (int r2 = 0; r2 < 2; ++r2) {
        const std::int64_t row = row0 + get<0>(tCcC(make_coord(make_coord(0, r2, 0), mm, 0)));
        CUTE_UNROLL
        for (int t = 0; t < kGroups / 4; ++t) {
          std::uint32_t P[4];
          CUTE_UNROLL
          for (int u = 0; u < 4; ++u) {
            const auto i0 = make_coord(make_coord(0, r2, 4 * t + u), mm, 0);
            const auto i1 = make_coord(make_coord(1, r2, 4 * t + u), mm, 0);
            const float2 bv = unpack_pair<T>(bias_pairs[4 * t + u]);  // zeros without bias
            P[u] = pack_pair<T>(acc(i0) + bv.x, acc(i1) + bv.y);
          }
          std::uint32_t R[4] = {P[0], P[1], P[2], P[3]};
          CUTE_UNROLL
          for (int k = 1; k < 4; ++k) {
            const int other = q ^ k;  // lane q sends its pair of group `other`, receives pair `other` of its group
            const std::uint32_t send = other == 0 ? P[0] : other == 1 ? P[1] : other == 2 ? P[2] : P[3];
            const std::uint32_t recv = __shfl_xor_sync(0xffffffffu, send, k);
            R[0] = other == 0 ? recv : R[0];
            R[1] = other == 1 ? recv : R[1];
            R[2] = other == 2 ? recv : R[2];
            R[3] = other == 3 ? recv : R[3];
          }
          // R[q] stays P[q]: lane q's own pair of group 4t + q.
          R[0] = q == 0 ? P[0] : R[0];
          R[1] = q == 1 ? P[1] : R[1];
          R[2] = q == 2 ? P[2] : R[2];
          R[3] = q == 3 ? P[3] : R[3];
          if (row < m) {
            uint4 v;
            v.x = R[0], v.y = R[1], v.z = R[2], v.w = R[3];
            *reinterpret_cast<uint4*>(c + row * ldc + col0 + 8 * (4 * t + q)) = v;
          }
        }
      }
    }
  }
}

using sparsekern::detail::allow_smem;

}  // namespace sparsekern::bsr::sm90
