// The natural split's mode-0 pass (kron_head.h) as a CUDA kernel: 256 threads, A in shared
// memory, one four-column chunk per thread (a grid-stride loop past 2^20 blocks). And the head's
// ∂ℓ/∂F partial sums (kron_head_grad_kernel; kron_head_grad_wide_kernel for 16 × 32 to 32 × 32).
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

/// ∂ℓ/∂F of heads of 16 or 32 by 16 or 32 (head_grad_wide). In the pass above, 32 × 32
/// has 64 blocks of 4 × 4, so every vector of X and G is loaded by 8 threads through L1 for 64
/// FMAs each: 42.7 µs at 128 × (32⊗32⊗32) (H100, session 18), against ~11 µs for its 32 MB, and
/// cuBLAS's strided-batched GEMMs took 40.9. Here a work item is (row m, kc columns): its p + q
/// rows of X_m and G_m are staged in shared memory by 16-byte cp.async, two items ahead, and a
/// thread owns an 8 × 8 block of ∂ℓ/∂F (nb = p·q / 64 blocks, S = 128 / nb slices of the columns,
/// 8 to 32; kc = 4·S so that each slice takes one 16-byte column vector per row): per item 8 + 8 vector
/// loads from shared memory for 256 FMAs. A warp's blocks share their X rows (consecutive blocks
/// along j), so its X loads are broadcasts. 157 registers: three blocks per SM (capped for four,
/// ptxas spilled). The grid is persistent (items blockIdx.x + k·grid); the slices' sums meet in
/// shared memory and are added in a fixed order. H100, session 24: 20.4-20.7 µs at 128 ×
/// (32⊗32⊗32), 56.0 at 512 rows (cuBLAS 40.9 at 128 rows); four items ahead (five stages) measured
/// 21.3 and 60.8-61.1.
constexpr int kWideThreads = kHeadGradWideThreads;
constexpr int kWideStages = 3;
constexpr int kWideRedPitch = 65;  // one thread's 64 sums, padded

/// Floats of one stage: (p + q) rows of kc + 4 (32 × 32: 64 × 36; 16 × 32: 48 × 68; 16 × 16: 32 × 132).
int wide_stage_floats(int p, int q) {
  return (p + q) * (head_grad_wide_cols(p, q) + 4);
}
/// Dynamic shared memory of the pass: the stages, or the slices' sums if more (32 × 32).
std::size_t wide_smem(int p, int q) {
  return sizeof(float) * static_cast<std::size_t>(std::max(kWideStages * wide_stage_floats(p, q),
                                                           kWideThreads * kWideRedPitch));
}

__global__ void __launch_bounds__(kWideThreads, kHeadGradWideBlocksPerSM) kron_head_grad_wide_kernel(const __grid_constant__ HeadGradArgs h) {
  extern __shared__ __align__(16) float st[];
  const int tid = static_cast<int>(threadIdx.x);
  const int qb = h.q >> 3, nb = (h.p >> 3) * qb;
  const int S = kWideThreads / nb;  // 8 (32 × 32), 16 or 32 (16 × 16)
  const int ls = S == 8 ? 3 : S == 16 ? 4 : 5;
  const int kc = 4 * S, pitch = kc + 4, rows = h.p + h.q, stage = rows * pitch;  // head_grad_wide_cols
  const int t = tid >> ls, s = tid & (S - 1);
  const int i0 = (t / qb) * 8, j0 = (t - (t / qb) * qb) * 8;
  const long long L = h.L;
  const int chunks = (h.L + kc - 1) / kc;
  const long long items = h.M * chunks;
  const long long grid = gridDim.x;
  // Item `it` into stage buffer `buf`: row r < p of X_m, else row r − p of G_m; vector v of a row is
  // columns c0 + 4v … (L is a multiple of 4: a vector is all in or all out, out reads as zeros).
  auto issue = [&](long long it, float* buf) {
    const long long m = it / chunks;
    const int c0 = static_cast<int>(it - m * chunks) * kc;
    const float* const xr = h.x + m * h.ldx + c0;
    const float* const gr = h.g + m * h.ldg + c0;
    for (int e = tid; e < (rows << ls); e += kWideThreads) {
      const int r = e >> ls, v = e & (S - 1);
      const bool valid = c0 + 4 * v < h.L;
      const float* src = (r < h.p ? xr + r * L : gr + (r - h.p) * L) + 4 * v;
      copy16_async(buf + r * pitch + 4 * v, valid ? src : h.x, valid);
    }
  };
  float acc[8][8];
#pragma unroll
  for (int u = 0; u < 8; ++u) {
#pragma unroll
    for (int w = 0; w < 8; ++w) acc[u][w] = 0.0f;
  }
  long long it = blockIdx.x;
#pragma unroll
  for (int k = 0; k + 1 < kWideStages; ++k) {
    if (it + k * grid < items) issue(it + k * grid, st + k * stage);
    async_commit();
  }
  for (int k = 0; it < items; ++k, it += grid) {
    // This item's copies have landed (each thread waits for its own, the barrier for all), and
    // every thread is done with the previous item, whose buffer the next copy refills.
    async_wait<kWideStages - 2>();
    __syncthreads();
    const long long nx = it + (kWideStages - 1) * grid;
    if (nx < items) issue(nx, st + ((k + kWideStages - 1) % kWideStages) * stage);
    async_commit();
    const float* const buf = st + (k % kWideStages) * stage + 4 * s;
    float4 gv[8];
#pragma unroll
    for (int w = 0; w < 8; ++w) gv[w] = *reinterpret_cast<const float4*>(buf + (h.p + j0 + w) * pitch);
#pragma unroll
    for (int u = 0; u < 8; ++u) {
      const float4 xv = *reinterpret_cast<const float4*>(buf + (i0 + u) * pitch);
#pragma unroll
      for (int w = 0; w < 8; ++w) {
        acc[u][w] += xv.x * gv[w].x;
        acc[u][w] += xv.y * gv[w].y;
        acc[u][w] += xv.z * gv[w].z;
        acc[u][w] += xv.w * gv[w].w;
      }
    }
  }
  async_wait<0>();
  __syncthreads();  // every stage read: the scratch below reuses them
  float* const red = st;
#pragma unroll
  for (int u = 0; u < 8; ++u) {
#pragma unroll
    for (int w = 0; w < 8; ++w) red[tid * kWideRedPitch + u * 8 + w] = acc[u][w];
  }
  __syncthreads();
  const int pq = h.p * h.q;
  float* const part = h.partial + static_cast<long long>(blockIdx.x) * pq;
  for (int e = tid; e < pq; e += kWideThreads) {
    const int i = e / h.q, j = e - i * h.q;
    const int tt = (i >> 3) * qb + (j >> 3), kk = ((i & 7) << 3) | (j & 7);
    float sum = 0.0f;
    for (int k = 0; k < S; ++k) sum += red[((tt << ls) + k) * kWideRedPitch + kk];
    part[e] = sum;
  }
}

}  // namespace

void head_grad_f32(const HeadGradArgs& h, long long grid, int device, cudaStream_t stream) {
  if (grid <= 0) return;
  if (head_grad_wide(h.p, h.q)) {
    const std::size_t smem = wide_smem(h.p, h.q);  // 16 × 16: 50.7 KB
    fast_opt_in_smem<kron_head_grad_wide_kernel>(smem, device);
    kron_head_grad_wide_kernel<<<static_cast<unsigned>(grid), kWideThreads, smem, stream>>>(h);
  } else {
    kron_head_grad_kernel<<<static_cast<unsigned>(grid), kGradThreads, 0, stream>>>(h);
  }
  SK_CUDA_CHECK_LAUNCH();
}

void head_pass_f32(const HeadArgs& h, int device, cudaStream_t stream) {
  if (h.M == 0 || h.L == 0) return;
  with_pmax(h.p, [&](auto pm) { launch_head<decltype(pm)::value>(h, device, stream); });
}

}  // namespace sparsekern::kron::detail
