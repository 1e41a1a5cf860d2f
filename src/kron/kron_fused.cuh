#pragma once
// CUDA kernels of the fused Kronecker groups: the block programs of kron_tile.h run with
// threadIdx.x and __syncthreads() between phases. Each (direction, dtype) is instantiated in its own
// kron_fused_{fwd,bwd}_<dtype>.cu, both register-tile widths in each.

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <atomic>
#include <cstddef>

#include "../common/cuda_check.h"
#include "kron_tile.h"

namespace sparsekern::kron::detail {

/// Element operations of the kernels (see kron_tile.h): storage type, fp32/fp64 accumulator and
/// 16-byte vector loads/stores (the callers guarantee 16-byte alignment).
template <typename TT>
struct DeviceOps;

template <>
struct DeviceOps<float> {
  using T = float;
  using Acc = float;
  static constexpr int V = 4;
  __device__ __forceinline__ static Acc to_acc(T v) { return v; }
  __device__ __forceinline__ static T from_acc(Acc v) { return v; }
  __device__ __forceinline__ static void load_vec(const T* p, Acc* o) {
    const float4 t = *reinterpret_cast<const float4*>(p);
    o[0] = t.x; o[1] = t.y; o[2] = t.z; o[3] = t.w;
  }
  __device__ __forceinline__ static void store_vec(T* p, const Acc* v) {
    *reinterpret_cast<float4*>(p) = make_float4(v[0], v[1], v[2], v[3]);
  }
};

template <>
struct DeviceOps<double> {
  using T = double;
  using Acc = double;
  static constexpr int V = 2;
  __device__ __forceinline__ static Acc to_acc(T v) { return v; }
  __device__ __forceinline__ static T from_acc(Acc v) { return v; }
  __device__ __forceinline__ static void load_vec(const T* p, Acc* o) {
    const double2 t = *reinterpret_cast<const double2*>(p);
    o[0] = t.x; o[1] = t.y;
  }
  __device__ __forceinline__ static void store_vec(T* p, const Acc* v) {
    *reinterpret_cast<double2*>(p) = make_double2(v[0], v[1]);
  }
};

template <>
struct DeviceOps<__half> {
  using T = __half;
  using Acc = float;
  static constexpr int V = 8;
  __device__ __forceinline__ static Acc to_acc(T v) { return __half2float(v); }
  __device__ __forceinline__ static T from_acc(Acc v) { return __float2half_rn(v); }
  __device__ __forceinline__ static void load_vec(const T* p, Acc* o) {
    const uint4 raw = *reinterpret_cast<const uint4*>(p);
    const __half2* h = reinterpret_cast<const __half2*>(&raw);
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const float2 f = __half22float2(h[k]);
      o[2 * k] = f.x;
      o[2 * k + 1] = f.y;
    }
  }
  __device__ __forceinline__ static void store_vec(T* p, const Acc* v) {
    uint4 raw;
    __half2* h = reinterpret_cast<__half2*>(&raw);
#pragma unroll
    for (int k = 0; k < 4; ++k) h[k] = __floats2half2_rn(v[2 * k], v[2 * k + 1]);
    *reinterpret_cast<uint4*>(p) = raw;
  }
};

template <>
struct DeviceOps<__nv_bfloat16> {
  using T = __nv_bfloat16;
  using Acc = float;
  static constexpr int V = 8;
  __device__ __forceinline__ static Acc to_acc(T v) { return __bfloat162float(v); }
  __device__ __forceinline__ static T from_acc(Acc v) { return __float2bfloat16_rn(v); }
  __device__ __forceinline__ static void load_vec(const T* p, Acc* o) {
    const uint4 raw = *reinterpret_cast<const uint4*>(p);
    const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&raw);
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const float2 f = __bfloat1622float2(h[k]);
      o[2 * k] = f.x;
      o[2 * k + 1] = f.y;
    }
  }
  __device__ __forceinline__ static void store_vec(T* p, const Acc* v) {
    uint4 raw;
    __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&raw);
#pragma unroll
    for (int k = 0; k < 4; ++k) h[k] = __floats2bfloat162_rn(v[2 * k], v[2 * k + 1]);
    *reinterpret_cast<uint4*>(p) = raw;
  }
};

/// One phase = the function on every thread, then a block barrier.
struct DeviceExec {
  __device__ __forceinline__ int nthreads() const { return static_cast<int>(blockDim.x); }
  template <class F>
  __device__ __forceinline__ void phase(F&& f) {
    f(static_cast<int>(threadIdx.x));
    __syncthreads();
  }
};

/// At most two resident blocks per SM are planned for (kron_plan.cpp), so 128 registers per thread
/// are available; the register tiles need about 80.
template <class Ops, int RN, bool Backward>
__global__ void __launch_bounds__(kThreads, 2) kron_fused_kernel(const __grid_constant__ FusedArgs a) {
  extern __shared__ __align__(16) unsigned char kron_smem[];
  DeviceExec ex;
  auto* sm = reinterpret_cast<typename Ops::Acc*>(kron_smem);
  if constexpr (Backward)
    fused_backward_program<Ops, RN>(a, ex, sm, blockIdx.x, gridDim.x);
  else
    fused_forward_program<Ops, RN>(a, ex, sm, blockIdx.x, gridDim.x);
}

template <class Ops, int RN, bool Backward>
void launch_fused_rn(const FusedArgs& a, long long grid, std::size_t smem, int device, cudaStream_t stream) {
  auto kernel = kron_fused_kernel<Ops, RN, Backward>;
  // Above 48 KB a kernel must opt in to its dynamic shared memory, once per device; the largest
  // size configured so far is remembered so the attribute call stays off the common path.
  constexpr int kMaxDevices = 64;
  static std::atomic<std::size_t> configured[kMaxDevices] = {};
  if (smem > (48u << 10) && (device >= kMaxDevices || configured[device].load() < smem)) {
    SK_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     static_cast<int>(smem)));
    if (device < kMaxDevices) configured[device].store(smem);
  }
  kernel<<<static_cast<unsigned>(grid), kThreads, smem, stream>>>(a);
  SK_CUDA_CHECK_LAUNCH();
}

template <class Ops, bool Backward>
void launch_fused(int rn, const FusedArgs& a, long long grid, std::size_t smem, int device,
                  cudaStream_t stream) {
  if (rn == 4)
    launch_fused_rn<Ops, 4, Backward>(a, grid, smem, device, stream);
  else
    launch_fused_rn<Ops, 8, Backward>(a, grid, smem, device, stream);
}

// Defined one per file in kron_fused_{fwd,bwd}_<dtype>.cu.
#define SK_KRON_DECLARE_FUSED(NAME) \
  void NAME(int rn, const FusedArgs& a, long long grid, std::size_t smem, int device, cudaStream_t stream);
SK_KRON_DECLARE_FUSED(fused_forward_f16)
SK_KRON_DECLARE_FUSED(fused_forward_bf16)
SK_KRON_DECLARE_FUSED(fused_forward_f32)
SK_KRON_DECLARE_FUSED(fused_forward_f64)
SK_KRON_DECLARE_FUSED(fused_backward_f16)
SK_KRON_DECLARE_FUSED(fused_backward_bf16)
SK_KRON_DECLARE_FUSED(fused_backward_f32)
SK_KRON_DECLARE_FUSED(fused_backward_f64)
#undef SK_KRON_DECLARE_FUSED
// The two fp32 forwards below launch as programmatic dependents of the kernel before them where
// `pdl` (kron_launch.cuh).
// Defined in kron_fast_fwd_f32.cu: the register-tile fp32 forward (kron_fast.h).
void fast_forward_f32(int tile, int threads, const FastArgs& a, long long grid, std::size_t smem, int device,
                      cudaStream_t stream, bool pdl);
/// The fiber-per-thread fp32 forward for small square factors (kron_small.h, kron_small_fwd_f32.cu).
void small_forward_f32(int threads, const SmallArgs& a, long long grid, std::size_t smem, int device,
                       cudaStream_t stream, bool pdl);
/// The fiber-per-thread fp32 backward for small square factors (kron_small_bwd.h, kron_small_bwd_f32.cu).
void small_backward_f32(int threads, const SmallBwdArgs& a, long long grid, std::size_t smem, int device,
                        cudaStream_t stream);
/// The natural split's mode-0 pass (kron_head.h, kron_head_f32.cu).
void head_pass_f32(const HeadArgs& h, int device, cudaStream_t stream);
void head_grad_f32(const HeadGradArgs& h, long long grid, int device, cudaStream_t stream);
/// The two-factor register-tile backward (kron_fast_bwd.h, kron_fast_bwd_f32.cu): tile 8 or 4.
void fast_backward2_f32(int tile, const FastBwdArgs& a, long long grid, std::size_t smem, int device,
                        cudaStream_t stream);

}  // namespace sparsekern::kron::detail
