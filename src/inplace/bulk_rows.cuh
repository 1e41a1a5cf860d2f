#pragma once
// Shared pieces of the in-place row kernels for 16-bit warp rows: the register-only warp-row kernel
// (any architecture) and the Hopper copy-engine helpers (cp.async.bulk into shared memory, completion
// on an mbarrier: "TMA" without a tensor map) that norm_cuda.cu's block-row kernel stages rows with.
//
// The copy engine decouples the bytes in flight from registers: thread 0 of a block keeps the next
// rows' copies in flight into a ring of shared-memory buffers while the block reduces and writes the
// current row from registers. Only the reads go through shared memory; results go straight from
// registers to global memory with 16-byte stores. In place is safe: a block's rows are disjoint from
// every other block's, and a row is written only by the block that read it, after its copy completed.
// The helpers need sm_90; a kernel using them traps if it runs from code built for an older
// architecture, and bulk_kernel_usable() keeps the dispatchers from launching it there.

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "rows_cuda.cuh"

namespace sparsekern::inplace::detail {

/// Largest number of row buffers in one block's ring.
constexpr int kBulkMaxStages = 8;
/// Bytes of row buffers each block aims to keep in its ring (stages = this / row bytes, 2..8).
constexpr std::size_t kBulkBytesPerBlock = 24 * 1024;

/// Bytes of row buffers in the ring of a LayerNorm block-row block (norm_lean_kernel) for rows of
/// 2049-4096 16-bit elements: 6 rows of 8 KB instead of 3. Its 128 registers per thread leave 4
/// blocks per SM (RMSNorm: 5), so it keeps fewer rows in flight per SM at the default; on the H200
/// (session 6, 16384 x 4096, % of the copy bandwidth, fp16 / bf16) 24 KB gave 84.1 / 84.2, 32 KB
/// 84.5 / 84.2, 48 KB 85.5 / 85.5. RMSNorm went the other way (87.1 at 24 KB, 85.0 at 48 KB), and
/// rows of 2048 lost with it (bf16 LayerNorm 81.6 -> 78.7), so only this case takes it.
constexpr std::size_t kLayerNormLongRowBytesPerBlock = 48 * 1024;

/// The ring bytes per block: `fallback` unless SPARSEKERN_INPLACE_BULK_BYTES (a diagnostic
/// override for every block-row kernel, read once per process) is set to 512 B-1 MiB.
std::size_t bulk_bytes_per_block(std::size_t fallback);

inline int bulk_stages(std::size_t row_bytes, std::size_t fallback) {
  const std::size_t s = bulk_bytes_per_block(fallback) / row_bytes;
  return s < 2 ? 2 : (s > std::size_t(kBulkMaxStages) ? kBulkMaxStages : int(s));
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define SPARSEKERN_BULK_DEVICE 1
__device__ __forceinline__ std::uint32_t smem_u32(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void bulk_barrier_init(std::uint64_t* bar) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_u32(bar)) : "memory");
}
/// Makes the initialised barriers visible to the copy engine (the async proxy).
__device__ __forceinline__ void bulk_barrier_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}
/// Orders the block's earlier shared-memory reads of a buffer (after a barrier) before the copy
/// engine's next write into it.
__device__ __forceinline__ void bulk_proxy_fence() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }
/// One thread: arm `bar` for `bytes` and start copying them from global `src` into shared `dst`.
__device__ __forceinline__ void bulk_load(void* dst, const void* src, std::uint32_t bytes, std::uint64_t* bar) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_u32(bar)), "r"(bytes) : "memory");
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                   smem_u32(dst)),
               "l"(src), "r"(bytes), "r"(smem_u32(bar))
               : "memory");
}
/// Waits for the phase `parity` of the barrier at shared-memory address `bar` (smem_u32 of it).
__device__ __forceinline__ void bulk_wait(std::uint32_t bar, std::uint32_t parity) {
  asm volatile(
      "{\n\t.reg .pred p;\n"
      "BULK_WAIT:\n\t"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n\t"
      "@!p bra BULK_WAIT;\n\t}" ::"r"(bar),
      "r"(parity)
      : "memory");
}
__device__ __forceinline__ void bulk_wait(std::uint64_t* bar, std::uint32_t parity) { bulk_wait(smem_u32(bar), parity); }
#endif

/// Warp-row kernel reading rows straight into registers (any architecture): one warp per row, the
/// op (NormRowOp) reduces and writes it; the warp's next row is loaded during this one when it fits
/// (prefetch_next_row). The op provides shared_bytes() (host and device), stage(words) (fills
/// them; every thread calls it) and row(cur, out, nvec, lane, words).
template <typename T, int VPW, class Op>
__global__ void __launch_bounds__(kWarpRowsThreads, kWarpRowsMinBlocks) warp_rows_kernel(T* x, RowGeom g, Op op) {
  extern __shared__ uint4 warp_rows_words[];
  constexpr bool kPrefetch = prefetch_next_row(VPW);
  op.stage(warp_rows_words);
  __syncthreads();
  const int lane = threadIdx.x % 32;
  const std::int64_t nvec = g.cols / kVec<T>;
  const std::int64_t step = std::int64_t(gridDim.x) * kWarpRowsWarps;
  std::int64_t r = std::int64_t(blockIdx.x) * kWarpRowsWarps + threadIdx.x / 32;
  uint4 cur[VPW];
  if (kPrefetch && r < g.rows) load_row_words<VPW>(x + g.offset(r), nvec, lane, cur);
  for (; r < g.rows; r += step) {
    uint4 next[VPW];
    if constexpr (kPrefetch) {
      if (r + step < g.rows) load_row_words<VPW>(x + g.offset(r + step), nvec, lane, next);
    } else {
      load_row_words<VPW>(x + g.offset(r), nvec, lane, cur);
    }
    op.row(cur, reinterpret_cast<uint4*>(x + g.offset(r)), nvec, lane, warp_rows_words);
    if constexpr (kPrefetch) {
#pragma unroll
      for (int k = 0; k < VPW; ++k) cur[k] = next[k];
    }
  }
}

/// Diagnostic switch: SPARSEKERN_INPLACE_BULK=0 keeps the register-only warp-row kernels on Hopper
/// too, so one run can time both (tools/diag/inplace2.py). Read once per process.
bool bulk_rows_enabled();

/// Whether kernel kKernel (one using the helpers above) runs real code on the current device: the device is sm_90 or
/// newer and the code the runtime picked for it was compiled for sm_90 or newer (a build for sm_80
/// only runs its sm_80 code there, where the kernel is a trap). Queried once per kernel and device.
template <auto kKernel>
bool bulk_kernel_usable() {
  static std::atomic<std::uint64_t> known{0}, usable{0};  // bit d: device d (d < 64)
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess || device >= 64) return false;
  const std::uint64_t bit = std::uint64_t(1) << device;
  if (known.load(std::memory_order_acquire) & bit) return (usable.load(std::memory_order_acquire) & bit) != 0;
  cudaFuncAttributes attr{};
  int major = 0;
  bool ok = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) == cudaSuccess && major >= 9 &&
            cudaFuncGetAttributes(&attr, kKernel) == cudaSuccess && attr.binaryVersion >= 90 && attr.ptxVersion >= 90;
  int optin = 0;
  ok = ok && cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) == cudaSuccess &&
       cudaFuncSetAttribute(kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, optin) == cudaSuccess;
  if (ok) usable.fetch_or(bit, std::memory_order_acq_rel);
  known.fetch_or(bit, std::memory_order_acq_rel);
  return ok;
}

/// Runs `op` over the rows of x (16-bit, contiguous rows starting 16-byte aligned, cols a multiple of
/// kVec<T>, VPW·32 words per row at most) with warp_rows_kernel.
template <typename T, int VPW, class Op>
void launch_warp_rows(T* x, const RowGeom& g, const Op& op, cudaStream_t stream) {
  constexpr auto kernel = warp_rows_kernel<T, VPW, Op>;
  const std::size_t smem = op.shared_bytes();
  kernel<<<persistent_grid(kernel, kWarpRowsThreads, smem, g.rows, kWarpRowsWarps), kWarpRowsThreads, smem, stream>>>(
      x, g, op);
}

}  // namespace sparsekern::inplace::detail
