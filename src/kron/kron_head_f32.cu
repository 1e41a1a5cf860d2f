// The natural split's mode-0 pass (kron_head.h) as a CUDA kernel: 256 threads, A in shared
// memory, one four-column chunk per thread (a grid-stride loop past 2^20 blocks).
#include <cuda_runtime_api.h>

#include <algorithm>

#include "../common/cuda_check.h"
#include "kron_fused.cuh"
#include "kron_head.h"

namespace sparsekern::kron::detail {
namespace {

constexpr int kHeadThreads = 256;

template <int PM>
__global__ void __launch_bounds__(kHeadThreads) kron_head_kernel(const __grid_constant__ HeadArgs h) {
  __shared__ float sa[kHeadMaxP * kHeadMaxP];
  head_load_a(h, sa, threadIdx.x, kHeadThreads);
  __syncthreads();
  const long long chunks = h.M * (h.L >> 2);
  for (long long c = blockIdx.x * static_cast<long long>(kHeadThreads) + threadIdx.x; c < chunks;
       c += static_cast<long long>(gridDim.x) * kHeadThreads)
    head_chunk<PM>(h, sa, c);
}

template <int PM>
void launch_head(const HeadArgs& h, int device, cudaStream_t stream) {
  (void)device;  // the caller's DeviceGuard made it current
  const long long chunks = h.M * (h.L >> 2);
  // A chunk per thread; past 2^20 blocks the loop takes the rest.
  const long long grid = std::max<long long>(1, std::min<long long>((chunks + kHeadThreads - 1) / kHeadThreads,
                                                                    1LL << 20));
  kron_head_kernel<PM><<<static_cast<unsigned>(grid), kHeadThreads, 0, stream>>>(h);
  SK_CUDA_CHECK_LAUNCH();
}

}  // namespace

void head_pass_f32(const HeadArgs& h, int device, cudaStream_t stream) {
  if (h.M == 0 || h.L == 0) return;
  with_pmax(h.p, [&](auto pm) { launch_head<decltype(pm)::value>(h, device, stream); });
}

}  // namespace sparsekern::kron::detail
