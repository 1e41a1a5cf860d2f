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

using sparsekern::detail::allow_smem;

}  // namespace sparsekern::bsr::sm90
