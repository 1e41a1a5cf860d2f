#pragma once
// __global__ wrappers and launchers of the block-sparse tensor-core kernels. Included only by the
// generated instantiation files in gen/.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>

#include "../../common/cuda_check.h"
#include "configs.cuh"
#include "launch.h"

namespace sparsekern::bsr::tc {

template <class Cfg, bool kBKMajor>
__global__ void __launch_bounds__(Cfg::kThreads) dds_kernel(TcParams p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  extern __shared__ __align__(128) char smem[];
  dds_body<Cfg, kBKMajor>(p, int(threadIdx.x), int(blockIdx.x), int(blockIdx.y), smem);
#endif
}

template <class Cfg>
__global__ void __launch_bounds__(Cfg::kThreads) sdd_kernel(TcParams p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  extern __shared__ __align__(128) char smem[];
  sdd_body<Cfg>(p, int(threadIdx.x), int(blockIdx.x), smem);
#endif
}

/// Raises the kernel's dynamic shared-memory limit on the current device, once per (kernel, device).
/// The kernel is a template argument so that each kernel gets its own flag: keyed on the function
/// pointer's type instead, every kernel of one signature shared a flag, and only the first got its
/// limit raised (cudaErrorInvalidValue at launch for the >48 KB tiles on the H200).
template <auto kKernel>
void allow_smem(std::size_t bytes) {
  static std::atomic<std::uint64_t> done_mask{0};  // bit d: done on device d (d < 64)
  int device = 0;
  SK_CUDA_TRY(cudaGetDevice(&device));
  const std::uint64_t bit = device < 64 ? (std::uint64_t(1) << device) : 0;
  if (bit != 0 && (done_mask.load(std::memory_order_acquire) & bit)) return;
  SK_CUDA_TRY(cudaFuncSetAttribute(kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)));
  done_mask.fetch_or(bit, std::memory_order_acq_rel);
}

template <bool kTf32, int kTile, bool kBKMajor>
void dds_launch(const TcParams& params, int n_block_cols, void* stream) {
  using Cfg = typename DdsConfig<kTf32, kTile, kBKMajor>::type;
  constexpr std::int64_t kBytes = Cfg::kOutBytes;  // A and C have the same element size
  constexpr auto kernel = dds_kernel<Cfg, kBKMajor>;
  allow_smem<kernel>(Cfg::kSmemBytes);
  const int n_tiles = n_block_cols * (params.block / Cfg::kBN);
  // gridDim.y is limited to 65535: very tall problems run as several launches of row panels.
  constexpr std::int64_t kMaxRowsPerLaunch = std::int64_t(65535) * Cfg::kBM;
  for (std::int64_t m_start = 0; m_start < params.m; m_start += kMaxRowsPerLaunch) {
    TcParams p = params;
    p.m = std::min(params.m - m_start, kMaxRowsPerLaunch);
    p.a = static_cast<const char*>(params.a) + m_start * params.lda * kBytes;
    p.c = static_cast<char*>(params.c) + (params.c_col_major ? m_start : m_start * params.ldc) * kBytes;
    const dim3 grid(unsigned(n_tiles), unsigned((p.m + Cfg::kBM - 1) / Cfg::kBM));
    kernel<<<grid, Cfg::kThreads, Cfg::kSmemBytes, static_cast<cudaStream_t>(stream)>>>(p);
    SK_CUDA_CHECK_LAUNCH();
  }
}

template <bool kTf32, int kTile>
void sdd_launch(const TcParams& p, int nnz_blocks, void* stream) {
  using Cfg = typename SddConfig<kTf32, kTile>::type;
  constexpr auto kernel = sdd_kernel<Cfg>;
  allow_smem<kernel>(Cfg::kSmemBytes);
  const std::int64_t per_block = std::int64_t(p.block / kTile) * (p.block / kTile);
  const std::int64_t ctas = std::int64_t(nnz_blocks) * per_block;
  if (ctas == 0) return;
  SK_EXPECTS(ctas <= 0x7fffffff, "sdd: too many blocks for one launch (", nnz_blocks, ")");
  kernel<<<unsigned(ctas), Cfg::kThreads, Cfg::kSmemBytes, static_cast<cudaStream_t>(stream)>>>(p);
  SK_CUDA_CHECK_LAUNCH();
}

}  // namespace sparsekern::bsr::tc
