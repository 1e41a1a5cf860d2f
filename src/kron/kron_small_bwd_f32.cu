// The fiber-per-thread fused backward for small square factors (fp32, one group over every mode):
// the CUDA kernels of the block program in kron_small_bwd.h, 256 or 128 threads per block.
#include <cuda_runtime_api.h>

#include <cstddef>

#include "../common/cuda_check.h"
#include "kron_small_bwd.h"

namespace sparsekern::kron::detail {
namespace {

/// Residency as the forward's kernels (kron_small_fwd_f32.cu): ≤ 128 registers for two 256-thread
/// or four 128-thread blocks per SM, half that with p = 32; shared memory (several tile buffers per
/// block) usually caps it lower (the planner's grid follows both).
/// LEAN: the lean buffer pool (SmallBwdArgs::lean; opt-in), its own instantiation.
/// UP, NF > 0: the uniform-shape instantiations (with_small_shape in kron_small.h).
template <int NT, int PMAX, bool LEAN, int UP, int NF>
__global__ void __launch_bounds__(NT, (NT == 256 ? 2 : 4) / (PMAX == 32 ? 2 : 1))
    kron_small_bwd_kernel(const __grid_constant__ SmallBwdArgs a) {
  extern __shared__ __align__(16) unsigned char kron_small_bwd_smem[];
  FastDeviceExec<SmallBwdRegs> ex;
  small_backward_program<PMAX, LEAN, UP, NF, (UP > 0 ? NT : 0)>(
      a, ex, reinterpret_cast<float*>(kron_small_bwd_smem), blockIdx.x, gridDim.x);
}

template <int NT, int PMAX, bool LEAN, int UP = 0, int NF = 0>
void launch_bwd_pl(const SmallBwdArgs& a, long long grid, std::size_t smem, int device, cudaStream_t stream) {
  fast_opt_in_smem<kron_small_bwd_kernel<NT, PMAX, LEAN, UP, NF>>(smem, device);
  kron_small_bwd_kernel<NT, PMAX, LEAN, UP, NF><<<static_cast<unsigned>(grid), NT, smem, stream>>>(a);
  SK_CUDA_CHECK_LAUNCH();
}

template <int NT>
void launch_bwd(const SmallBwdArgs& a, long long grid, std::size_t smem, int device, cudaStream_t stream) {
  if (a.lean != 0) {
    with_pmax(a.a.pmax, [&](auto pm) { launch_bwd_pl<NT, decltype(pm)::value, true>(a, grid, smem, device, stream); });
    return;
  }
  with_small_shape(a.a, [&](auto pm, auto up, auto nf) {
    launch_bwd_pl<NT, decltype(pm)::value, false, decltype(up)::value, decltype(nf)::value>(a, grid, smem, device,
                                                                                              stream);
  });
}

}  // namespace

void small_backward_f32(int threads, const SmallBwdArgs& a, long long grid, std::size_t smem, int device,
                        cudaStream_t stream) {
  if (threads == 128)
    launch_bwd<128>(a, grid, smem, device, stream);
  else
    launch_bwd<256>(a, grid, smem, device, stream);
}

}  // namespace sparsekern::kron::detail
