// The second kernel of a split-K sdd, shared by the SM80 (tc::sdd_launch) and the sm_90a
// (sm90::sdd_launch) sdd kernels: sums their fp32 partials in split order and rounds once.
#include <cuda_runtime_api.h>

#include <algorithm>

#include "../../common/cuda_check.h"
#include "kernel.cuh"
#include "launch.h"

namespace sparsekern::bsr::tc {

namespace {

/// Each thread sums one 16-byte vector of partials per grid-stride step (sdd_split_reduce_range,
/// which the host emulation test runs too, on four elements).
template <bool kTf32>
__global__ void __launch_bounds__(256) sdd_split_reduce_kernel(const float* partial, int splits, std::int64_t count,
                                                                void* out, bool bf16) {
  const std::int64_t stride = std::int64_t(gridDim.x) * blockDim.x * 4;
  for (std::int64_t i = (std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x) * 4; i < count; i += stride)
    sdd_split_reduce_range<kTf32>(partial, splits, count, out, bf16, i, i + 4);
}

}  // namespace

void sdd_split_reduce(const float* partial, int splits, std::int64_t count, void* out, bool tf32, bool bf16,
                      int max_blocks, void* stream) {
  if (count <= 0) return;
  const int grid = int(std::min<std::int64_t>((count / 4 + 255) / 256, std::max(max_blocks, 1)));
  auto s = static_cast<cudaStream_t>(stream);
  if (tf32) sdd_split_reduce_kernel<true><<<grid, 256, 0, s>>>(partial, splits, count, out, bf16);
  else sdd_split_reduce_kernel<false><<<grid, 256, 0, s>>>(partial, splits, count, out, bf16);
  SK_CUDA_CHECK_LAUNCH();
}

}  // namespace sparsekern::bsr::tc
