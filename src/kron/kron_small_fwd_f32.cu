// The fiber-per-thread fused forward for small square factors (fp32, one group over every mode): the
// CUDA kernels of the block program in kron_small.h, 256 or 128 threads per block.
#include <cuda_runtime_api.h>

#include <cstddef>

#include "../common/cuda_check.h"
#include "kron_launch.cuh"
#include "kron_small.h"

namespace sparsekern::kron::detail {
namespace {

/// Two 256-thread blocks per SM (≤ 128 registers: 32 inputs and 32 outputs per thread and pass,
/// plus addresses), four of 128: the blocks' passes and copies overlap each other's barriers.
/// PMAX: the largest factor width the instantiation handles (8, 16 or 32; see with_small_p). With
/// p = 32 a pass needs more than 128 registers without spills (32 inputs, 32 outputs, a factor
/// row): half the blocks per SM there (the planner's grid follows).
/// UP, NF > 0: the uniform-shape instantiations (with_small_shape in kron_small.h), whose copy
/// loops also take NT as a constant, and VY (0 / 1, −1 elsewhere) fixes a.vec_y, the final pass's
/// store form, at compile time: the other form's stores no longer issue predicated off beside it.
template <int NT, int PMAX, int UP, int NF, int VY>
__global__ void __launch_bounds__(NT, (NT == 256 ? 2 : 4) / (PMAX == 32 ? 2 : 1)) kron_small_kernel(const __grid_constant__ SmallArgs a) {
  extern __shared__ __align__(16) unsigned char kron_small_smem[];
  pdl_wait();
  FastDeviceExec<SmallRegs> ex;
  small_forward_program<PMAX, UP, NF, (UP > 0 ? NT : 0), VY>(a, ex, reinterpret_cast<float*>(kron_small_smem),
                                                            blockIdx.x, gridDim.x);
}

template <int NT, int PMAX, int UP, int NF, int VY>
void launch_small_k(const SmallArgs& a, long long grid, std::size_t smem, int device, cudaStream_t stream, bool pdl) {
  fast_opt_in_smem<kron_small_kernel<NT, PMAX, UP, NF, VY>>(smem, device);
  kron_launch(kron_small_kernel<NT, PMAX, UP, NF, VY>, dim3(static_cast<unsigned>(grid)), dim3(NT), smem, stream, pdl,
              a);
}

template <int NT>
void launch_small(const SmallArgs& a, long long grid, std::size_t smem, int device, cudaStream_t stream, bool pdl) {
  with_small_shape(a, [&](auto pm, auto up, auto nf) {
    with_small_store_form<decltype(up)::value>(a, [&](auto vy) {
      launch_small_k<NT, decltype(pm)::value, decltype(up)::value, decltype(nf)::value, decltype(vy)::value>(
          a, grid, smem, device, stream, pdl);
    });
  });
}

}  // namespace

void small_forward_f32(int threads, const SmallArgs& a, long long grid, std::size_t smem, int device,
                       cudaStream_t stream, bool pdl) {
  if (threads == 128)
    launch_small<128>(a, grid, smem, device, stream, pdl);
  else
    launch_small<256>(a, grid, smem, device, stream, pdl);
}

}  // namespace sparsekern::kron::detail
