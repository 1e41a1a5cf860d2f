// The natural split's mode-0 pass (kron_head.h) as a CUDA kernel: 256 threads, A in shared
// memory, one four-column chunk per thread (a grid-stride loop past 2^20 blocks). And the head's
// ∂ℓ/∂F partial sums (kron_head_grad_kernel).
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

/// ∂ℓ/∂F of the natural split's head, Σ_m X_m (p × L) · G_mᵀ (L × q): a memory-bound sum (p·q
/// FMAs per p + q loaded values of a column l) that cuBLAS ran as strided-batched GEMMs of tiny
/// outputs and long K at a fraction of the copy bandwidth (H100: 103 µs for 256 × (16 ⊗ 16 ⊗ 16 ⊗
/// 16), whose X and G are 128 MB). Here a thread owns a 4 × 4 block of ∂ℓ/∂F and every S-th 16-byte
/// column vector of its block's rows (S = 256 / blocks of ∂ℓ/∂F: consecutive threads, consecutive
/// vectors, so a warp's loads are runs of 16-byte vectors; the threads of other blocks of ∂ℓ/∂F read
/// the same vectors through L1). Each loaded pair of vectors feeds 64 FMAs. The S sums of a block
/// of ∂ℓ/∂F meet in shared memory and are added in a fixed order (deterministic); the blocks'
/// partials (at most kHeadGradBlocks) go to the usual reduction launch.
constexpr int kGradThreads = 256;

__global__ void __launch_bounds__(kGradThreads) kron_head_grad_kernel(const __grid_constant__ HeadGradArgs h) {
  __shared__ float red[kGradThreads][17];
  const int tid = static_cast<int>(threadIdx.x);
  const int qb = h.q >> 2, S = kGradThreads / ((h.p >> 2) * qb);
  const int t = tid / S, s = tid - t * S;
  const int i0 = (t / qb) * 4, j0 = (t - (t / qb) * qb) * 4;
  const long long L = h.L;
  const int lv = h.L >> 2;
  float acc[4][4];
#pragma unroll
  for (int u = 0; u < 4; ++u) {
#pragma unroll
    for (int w = 0; w < 4; ++w) acc[u][w] = 0.0f;
  }
  // Work items: (row m, chunk of `vc` column vectors); item w = m · h.lc + chunk. Many small items
  // keep many blocks resident, hence many loads in flight: the pass is latency-bound otherwise
  // (one block per row: 83 µs at 128 × (32 ⊗ 32 ⊗ 32), against ~11 µs for its bytes).
  const int vc = (lv + h.lc - 1) / h.lc;
  const long long items = h.M * h.lc;
  for (long long it = blockIdx.x; it < items; it += gridDim.x) {
    const long long m = it / h.lc;
    const int c = static_cast<int>(it - m * h.lc);
    const int v_end = min(lv, (c + 1) * vc);
    const float* const xr = h.x + m * h.ldx + i0 * L;
    const float* const gr = h.g + m * h.ldg + j0 * L;
#pragma unroll 2
    for (int v = c * vc + s; v < v_end; v += S) {
      float4 a[4], b[4];
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        a[u] = __ldg(reinterpret_cast<const float4*>(xr + u * L) + v);
        b[u] = __ldg(reinterpret_cast<const float4*>(gr + u * L) + v);
      }
#pragma unroll
      for (int u = 0; u < 4; ++u) {
#pragma unroll
        for (int w = 0; w < 4; ++w) {
          acc[u][w] += a[u].x * b[w].x;
          acc[u][w] += a[u].y * b[w].y;
          acc[u][w] += a[u].z * b[w].z;
          acc[u][w] += a[u].w * b[w].w;
        }
      }
    }
  }
#pragma unroll
  for (int u = 0; u < 4; ++u) {
#pragma unroll
    for (int w = 0; w < 4; ++w) red[tid][u * 4 + w] = acc[u][w];
  }
  __syncthreads();
  const int pq = h.p * h.q;
  float* const part = h.partial + static_cast<long long>(blockIdx.x) * pq;
  for (int e = tid; e < pq; e += kGradThreads) {
    const int i = e / h.q, j = e - i * h.q;
    const int tt = (i >> 2) * qb + (j >> 2), u = ((i & 3) << 2) | (j & 3);
    float sum = 0.0f;
    for (int k = 0; k < S; ++k) sum += red[tt * S + k][u];
    part[e] = sum;
  }
}

}  // namespace

void head_grad_f32(const HeadGradArgs& h, long long grid, cudaStream_t stream) {
  if (grid <= 0) return;
  kron_head_grad_kernel<<<static_cast<unsigned>(grid), kGradThreads, 0, stream>>>(h);
  SK_CUDA_CHECK_LAUNCH();
}

void head_pass_f32(const HeadArgs& h, int device, cudaStream_t stream) {
  if (h.M == 0 || h.L == 0) return;
  with_pmax(h.p, [&](auto pm) { launch_head<decltype(pm)::value>(h, device, stream); });
}

}  // namespace sparsekern::kron::detail
