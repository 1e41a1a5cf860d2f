// The two-factor register-tile fused backward (fp32): the CUDA kernels of the block program in
// kron_fast_bwd.h, 8 × 8 or 4 × 4 step tiles with 256 threads.
#include <cuda_runtime_api.h>

#include <cstddef>

#include "../common/cuda_check.h"
#include "kron_fast_bwd.h"

namespace sparsekern::kron::detail {
namespace {

/// 8 × 8 step tiles: one block per SM, up to 255 registers (64 step accumulators, 32 ∂ℓ/∂F
/// accumulators, operands). 4 × 4: up to two blocks per SM (≤ 128 registers).
/// U ≠ 0: every step's width is U (fb_uniform_qpad), each step compiled once (4 × 4 tiles, the
/// planner's choice; 8 × 8 tiles are an override for measurements and keep the generic kernel).
template <int TILE, int U>
__global__ void __launch_bounds__(kThreads, TILE == 8 ? 1 : 2) kron_fast_bwd_kernel(const __grid_constant__ FastBwdArgs a) {
  extern __shared__ __align__(16) unsigned char kron_fast_bwd_smem[];
  FastDeviceExec<FastBwdRegs<TILE>> ex;
  fast_backward2_program<TILE, U>(a, ex, reinterpret_cast<float*>(kron_fast_bwd_smem), blockIdx.x, gridDim.x);
}

template <int TILE, int U>
void launch_fast_bwd(const FastBwdArgs& a, long long grid, std::size_t smem, int device, cudaStream_t stream) {
  fast_opt_in_smem<kron_fast_bwd_kernel<TILE, U>>(smem, device);
  kron_fast_bwd_kernel<TILE, U><<<static_cast<unsigned>(grid), kThreads, smem, stream>>>(a);
  SK_CUDA_CHECK_LAUNCH();
}

}  // namespace

void fast_backward2_f32(int tile, const FastBwdArgs& a, long long grid, std::size_t smem, int device,
                        cudaStream_t stream) {
  if (tile == 4)
    with_fb_width<4>(a, [&](auto u) { launch_fast_bwd<4, decltype(u)::value>(a, grid, smem, device, stream); });
  else
    launch_fast_bwd<8, 0>(a, grid, smem, device, stream);
}

}  // namespace sparsekern::kron::detail
