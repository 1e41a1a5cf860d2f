// Fused Kronecker backward kernels for __nv_bfloat16 (register tiles 4 and 8 columns wide); see kron_fused.cuh.
#include "kron_fused.cuh"

namespace sparsekern::kron::detail {

void fused_backward_bf16(int rn, const FusedArgs& a, long long grid, std::size_t smem, int device,
                         cudaStream_t stream) {
  launch_fused<DeviceOps<__nv_bfloat16>, true>(rn, a, grid, smem, device, stream);
}

}  // namespace sparsekern::kron::detail
