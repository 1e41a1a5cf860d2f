// The two-factor register-tile fused backward (fp32): the CUDA kernels of the block program in
// kron_fast_bwd.h, 8 × 8 or 4 × 4 step tiles with 256 threads.
#include <cuda_runtime_api.h>

#include <atomic>
#include <cstddef>

#include "../common/cuda_check.h"
#include "kron_fast_bwd.h"

namespace sparsekern::kron::detail {
namespace {

/// One thread's registers across barriers live in the kernel's frame (every index into them is a
/// compile-time constant, so they stay in registers).
template <class Regs>
struct FastBwdDeviceExec {
  Regs regs;
  __device__ __forceinline__ int nthreads() const { return static_cast<int>(blockDim.x); }
  template <class F>
  __device__ __forceinline__ void phase(F&& f) {
    f(static_cast<int>(threadIdx.x), regs);
    __syncthreads();
  }
  template <class F>
  __device__ __forceinline__ void phase_nosync(F&& f) {
    f(static_cast<int>(threadIdx.x), regs);
  }
};

/// 8 × 8 step tiles: one block per SM, up to 255 registers (64 step accumulators, 32 ∂ℓ/∂F
/// accumulators, operands). 4 × 4: up to two blocks per SM (≤ 128 registers).
template <int TILE>
__global__ void __launch_bounds__(256, TILE == 8 ? 1 : 2) kron_fast_bwd_kernel(const __grid_constant__ FastBwdArgs a) {
  extern __shared__ __align__(16) unsigned char kron_fast_bwd_smem[];
  FastBwdDeviceExec<FastBwdRegs<TILE>> ex;
  fast_backward2_program<TILE>(a, ex, reinterpret_cast<float*>(kron_fast_bwd_smem), blockIdx.x, gridDim.x);
}

template <int TILE>
void launch_fast_bwd(const FastBwdArgs& a, long long grid, std::size_t smem, int device, cudaStream_t stream) {
  auto kernel = kron_fast_bwd_kernel<TILE>;
  // Opt-in shared memory above 48 KB, once per device and size (as in kron_fused.cuh).
  constexpr int kMaxDevices = 64;
  static std::atomic<std::size_t> configured[kMaxDevices] = {};
  if (smem > (48u << 10) && (device >= kMaxDevices || configured[device].load() < smem)) {
    SK_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
    if (device < kMaxDevices) configured[device].store(smem);
  }
  kernel<<<static_cast<unsigned>(grid), 256, smem, stream>>>(a);
  SK_CUDA_CHECK_LAUNCH();
}

}  // namespace

void fast_backward2_f32(int tile, const FastBwdArgs& a, long long grid, std::size_t smem, int device,
                        cudaStream_t stream) {
  if (tile == 4)
    launch_fast_bwd<4>(a, grid, smem, device, stream);
  else
    launch_fast_bwd<8>(a, grid, smem, device, stream);
}

}  // namespace sparsekern::kron::detail
