#pragma once
// __global__ wrappers and launchers of the block-sparse tensor-core kernels. Included only by the
// generated instantiation files in gen/.
#include <cuda_runtime_api.h>

#include <algorithm>

#include "../../common/cuda_check.h"
#include "../../common/kernel_attr.cuh"
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

template <class Cfg, bool kRowSums>
__global__ void __launch_bounds__(Cfg::kThreads) sdd_kernel(TcParams p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  extern __shared__ __align__(128) char smem[];
  sdd_body<Cfg, kRowSums>(p, int(threadIdx.x), int(blockIdx.x), smem);
#endif
}

template <class Cfg, int kT, int kG>
__global__ void __launch_bounds__(Cfg::kThreads) sdd_group_kernel(TcParams p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  extern __shared__ __align__(128) char smem[];
  sdd_group_body<Cfg, kT, kG>(p, int(threadIdx.x), int(blockIdx.x), smem);
#endif
}

using sparsekern::detail::allow_smem;

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
  // With the fused row sums (p.row_partial) the kernel instantiated with them, else the plain one.
  constexpr auto kernel = sdd_kernel<Cfg, false>;
  constexpr auto kernel_rs = sdd_kernel<Cfg, true>;
  allow_smem<kernel>(Cfg::kSmemBytes);
  allow_smem<kernel_rs>(Cfg::kSmemBytes);
  const std::int64_t per_block = std::int64_t(p.block / kTile) * (p.block / kTile);
  const int splits = p.splits > 1 ? p.splits : 1;
  const std::int64_t ctas = std::int64_t(nnz_blocks) * per_block * splits;
  if (ctas == 0) return;
  SK_EXPECTS(ctas <= 0x7fffffff, "sdd: too many blocks for one launch (", nnz_blocks, ")");
  SK_EXPECTS(splits == 1 || (p.partial != nullptr && p.split_steps > 0 && p.nnz == nnz_blocks),
             "sdd: internal split-K launch without partials");
  SK_EXPECTS(p.row_partial == nullptr || (p.block_row_offsets != nullptr && p.row_stride > 0),
             "sdd: internal row-sum launch without the row offsets");
  auto s = static_cast<cudaStream_t>(stream);
  if (p.row_partial != nullptr) kernel_rs<<<unsigned(ctas), Cfg::kThreads, Cfg::kSmemBytes, s>>>(p);
  else kernel<<<unsigned(ctas), Cfg::kThreads, Cfg::kSmemBytes, s>>>(p);
  SK_CUDA_CHECK_LAUNCH();
  if (splits > 1)  // nnz · b² is a multiple of 4 (b ≥ 16)
    sdd_split_reduce(p.partial, splits, std::int64_t(nnz_blocks) * p.block * p.block, p.out_values, kTf32, p.bf16,
                     2048, stream);
}

/// The grouped sdd (sdd_group_body): one CTA per (block, sub-row), of which only the groups' first
/// blocks work; p.nnz must be nnz_blocks.
template <bool kTf32, int kT, int kG>
void sdd_group_launch(const TcParams& p, int nnz_blocks, void* stream) {
  using Cfg = typename SddGroupConfig<kTf32, kT, kG>::type;
  constexpr auto kernel = sdd_group_kernel<Cfg, kT, kG>;
  allow_smem<kernel>(Cfg::kSmemBytes);
  const std::int64_t ctas = std::int64_t(nnz_blocks) * (p.block / kT);
  if (ctas == 0) return;
  SK_EXPECTS(ctas <= 0x7fffffff, "sdd: too many blocks for one launch (", nnz_blocks, ")");
  SK_EXPECTS(p.nnz == nnz_blocks && p.block % kT == 0 && kG % (p.block / kT) == 0,
             "sdd: internal grouped launch with nnz ", p.nnz, ", block ", p.block);
  kernel<<<unsigned(ctas), Cfg::kThreads, Cfg::kSmemBytes, static_cast<cudaStream_t>(stream)>>>(p);
  SK_CUDA_CHECK_LAUNCH();
}

}  // namespace sparsekern::bsr::tc
