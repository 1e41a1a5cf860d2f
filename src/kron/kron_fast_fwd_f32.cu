// The register-tile fused forward (fp32, one group over every mode): the CUDA kernels of the block
// program in kron_fast.h: 8×8 register tiles with 256 or 128 threads, 4×4 with 256.
#include <cuda_runtime_api.h>

#include <cstddef>

#include "../common/cuda_check.h"
#include "kron_fast.h"
#include "kron_launch.cuh"

namespace sparsekern::kron::detail {
namespace {

/// 8×8 tiles, 256 threads: one block per SM (the planner sizes shared memory for that), so up to 255
/// registers per thread: 64 accumulators and the next k's operands stay in registers without
/// spills. 8×8 with 128 threads: two blocks per SM, each with its own tile pipeline. 4×4 tiles:
/// two blocks per SM (≤ 128 registers).
template <int TILE, int NT>
__global__ void __launch_bounds__(NT, TILE == 8 && NT == 256 ? 1 : 2) kron_fast_kernel(const __grid_constant__ FastArgs a) {
  extern __shared__ __align__(16) unsigned char kron_fast_smem[];
  pdl_wait();
  FastDeviceExec<FastRegs<TILE, TILE>> ex;
  fast_forward_program<TILE, TILE>(a, ex, reinterpret_cast<float*>(kron_fast_smem), blockIdx.x, gridDim.x);
}

template <int TILE, int NT>
void launch_fast(const FastArgs& a, long long grid, std::size_t smem, int device, cudaStream_t stream, bool pdl) {
  fast_opt_in_smem<kron_fast_kernel<TILE, NT>>(smem, device);
  kron_launch(kron_fast_kernel<TILE, NT>, dim3(static_cast<unsigned>(grid)), dim3(NT), smem, stream, pdl, a);
}

}  // namespace

void fast_forward_f32(int tile, int threads, const FastArgs& a, long long grid, std::size_t smem, int device,
                      cudaStream_t stream, bool pdl) {
  if (tile == 4)
    launch_fast<4, 256>(a, grid, smem, device, stream, pdl);
  else if (threads == 128)
    launch_fast<8, 128>(a, grid, smem, device, stream, pdl);
  else
    launch_fast<8, 256>(a, grid, smem, device, stream, pdl);
}

}  // namespace sparsekern::kron::detail
