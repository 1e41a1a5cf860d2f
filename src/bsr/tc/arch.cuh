#pragma once
// The SM80 instructions the block-sparse tensor-core kernels use (cp.async, ldmatrix, mma.sync,
// __syncthreads), as thin wrappers over CuTe's atoms.
//
// On the device each wrapper is exactly the CuTe atom it names. Why wrap at all: the kernel body in
// kernel.cuh is a host-device template, and tests/cpp/test_bsr_tc_emulation.cpp compiles it for the
// host with SPARSEKERN_TC_EMULATION defined, which routes these few operations to a warp-level
// emulator (tests/cpp/tc_emulator.h) written from the PTX ISA. That lets the exact kernel body,
// with its tiling, swizzles, predicates, pipeline and epilogue, be run and checked on a machine
// without a GPU. The library itself never defines SPARSEKERN_TC_EMULATION, so its host code can
// never reach the emulation path.

#include <cute/arch/copy_sm75.hpp>
#include <cute/arch/copy_sm80.hpp>
#include <cute/arch/mma_sm80.hpp>
#include <cute/numeric/numeric_types.hpp>
#include <vector_types.h>

#include <cstdint>
#include <cstring>

#if defined(SPARSEKERN_TC_EMULATION) && !defined(__CUDA_ARCH__)
#define SK_TC_EMULATE 1
namespace sparsekern::bsr::tc::emu {
// Implemented by the emulator (tests only). Each call is made by one emulated thread.
void sync_threads();
void cp_async_16(void* smem_dst, const void* gmem_src, bool pred);
void cp_async_fence();
void cp_async_wait(int pending);
void ldmatrix_x4(const void* smem_row, std::uint32_t (&dst)[4], bool trans);
void mma_16816(float (&d)[4], const std::uint32_t (&a)[4], const std::uint32_t (&b)[2],
               const float (&c)[4], bool bf16);
void mma_1688_tf32(float (&d)[4], const std::uint32_t (&a)[4], const std::uint32_t (&b)[2],
                   const float (&c)[4]);
void global_store_16(void* gmem_dst);  // checks a 16-byte global store (alignment, bounds)
std::uint32_t lds_32(const std::uint32_t* smem_src);  // a warp-wide 32-bit load; counts bank conflicts
}  // namespace sparsekern::bsr::tc::emu
#endif

namespace sparsekern::bsr::tc {

/// Block-wide barrier.
CUTE_HOST_DEVICE void sync_threads() {
#if defined(__CUDA_ARCH__)
  __syncthreads();
#elif defined(SK_TC_EMULATE)
  emu::sync_threads();
#endif
}

CUTE_HOST_DEVICE void cp_async_fence() {
#if defined(__CUDA_ARCH__)
  cute::cp_async_fence();
#elif defined(SK_TC_EMULATE)
  emu::cp_async_fence();
#endif
}

/// Waits until at most `N` committed cp.async groups of this thread are still in flight.
template <int N>
CUTE_HOST_DEVICE void cp_async_wait() {
#if defined(__CUDA_ARCH__)
  cute::cp_async_wait<N>();
#elif defined(SK_TC_EMULATE)
  emu::cp_async_wait(N);
#endif
}

/// The bits of a float (for packing outputs).
CUTE_HOST_DEVICE std::uint32_t float_bits(float x) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(x);
#else
  std::uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
#endif
}

/// The float of 32 bits (an fp32 operand register).
CUTE_HOST_DEVICE float bits_float(std::uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float x;
  std::memcpy(&x, &u, 4);
  return x;
#endif
}

/// Marks a 16-byte vector store to global memory (the emulator checks it; nothing on the device).
CUTE_HOST_DEVICE void note_global_store_16(void* gmem_dst) {
#if !defined(__CUDA_ARCH__) && defined(SK_TC_EMULATE)
  emu::global_store_16(gmem_dst);
#else
  (void)gmem_dst;
#endif
}

/// A 32-bit shared-memory load (the tf32 fragments of M/N-major tiles). The emulator runs it as the
/// warp-wide instruction it is and counts its bank conflicts.
CUTE_HOST_DEVICE std::uint32_t lds32(const std::uint32_t* smem_src) {
#if defined(SK_TC_EMULATE)
  return emu::lds_32(smem_src);
#else
  return *smem_src;
#endif
}

/// 16-byte cp.async (L2 only: operands are streamed once per tile) with zero fill when `pred` is
/// false (then nothing is read from `gmem_src`).
struct CpAsync16 {
  using SRegisters = cute::uint128_t[1];
  using DRegisters = cute::uint128_t[1];
  CUTE_HOST_DEVICE static void copy(cute::uint128_t const& gmem_src, cute::uint128_t& smem_dst,
                                    bool pred) {
#if defined(__CUDA_ARCH__)
    cute::SM80_CP_ASYNC_CACHEGLOBAL_ZFILL<cute::uint128_t>::copy(gmem_src, smem_dst, pred);
#elif defined(SK_TC_EMULATE)
    emu::cp_async_16(&smem_dst, &gmem_src, pred);
#endif
  }
};

/// ldmatrix.x4 (four 8x8 b16 matrices), plain or transposed.
template <bool kTrans>
struct Ldsm4 {
  using SRegisters = cute::uint128_t[1];
  using DRegisters = std::uint32_t[4];
  CUTE_HOST_DEVICE static void copy(cute::uint128_t const& smem_src, std::uint32_t& d0,
                                    std::uint32_t& d1, std::uint32_t& d2, std::uint32_t& d3) {
#if defined(__CUDA_ARCH__)
    if constexpr (kTrans) {
      cute::SM75_U16x8_LDSM_T::copy(smem_src, d0, d1, d2, d3);
    } else {
      cute::SM75_U32x4_LDSM_N::copy(smem_src, d0, d1, d2, d3);
    }
#elif defined(SK_TC_EMULATE)
    std::uint32_t d[4];
    emu::ldmatrix_x4(&smem_src, d, kTrans);
    d0 = d[0]; d1 = d[1]; d2 = d[2]; d3 = d[3];
#endif
  }
};

/// mma.sync m16n8k16 with fp32 accumulation, fp16 (kBf16 = false) or bf16 inputs.
template <bool kBf16>
struct Mma16816 {
  using DRegisters = float[4];
  using ARegisters = std::uint32_t[4];
  using BRegisters = std::uint32_t[2];
  using CRegisters = float[4];
  CUTE_HOST_DEVICE static void fma(float& d0, float& d1, float& d2, float& d3,
                                   std::uint32_t const& a0, std::uint32_t const& a1,
                                   std::uint32_t const& a2, std::uint32_t const& a3,
                                   std::uint32_t const& b0, std::uint32_t const& b1,
                                   float const& c0, float const& c1, float const& c2,
                                   float const& c3) {
#if defined(__CUDA_ARCH__)
    if constexpr (kBf16) {
      cute::SM80_16x8x16_F32BF16BF16F32_TN::fma(d0, d1, d2, d3, a0, a1, a2, a3, b0, b1, c0, c1, c2, c3);
    } else {
      cute::SM80_16x8x16_F32F16F16F32_TN::fma(d0, d1, d2, d3, a0, a1, a2, a3, b0, b1, c0, c1, c2, c3);
    }
#elif defined(SK_TC_EMULATE)
    float d[4];
    emu::mma_16816(d, {a0, a1, a2, a3}, {b0, b1}, {c0, c1, c2, c3}, kBf16);
    d0 = d[0]; d1 = d[1]; d2 = d[2]; d3 = d[3];
#endif
  }
};

/// mma.sync m16n8k8 with TF32 inputs and fp32 accumulation.
struct Mma1688Tf32 {
  using DRegisters = float[4];
  using ARegisters = std::uint32_t[4];
  using BRegisters = std::uint32_t[2];
  using CRegisters = float[4];
  CUTE_HOST_DEVICE static void fma(float& d0, float& d1, float& d2, float& d3,
                                   std::uint32_t const& a0, std::uint32_t const& a1,
                                   std::uint32_t const& a2, std::uint32_t const& a3,
                                   std::uint32_t const& b0, std::uint32_t const& b1,
                                   float const& c0, float const& c1, float const& c2,
                                   float const& c3) {
#if defined(__CUDA_ARCH__)
    cute::SM80_16x8x8_F32TF32TF32F32_TN::fma(d0, d1, d2, d3, a0, a1, a2, a3, b0, b1, c0, c1, c2, c3);
#elif defined(SK_TC_EMULATE)
    float d[4];
    emu::mma_1688_tf32(d, {a0, a1, a2, a3}, {b0, b1}, {c0, c1, c2, c3});
    d0 = d[0]; d1 = d[1]; d2 = d[2]; d3 = d[3];
#endif
  }
};

}  // namespace sparsekern::bsr::tc
