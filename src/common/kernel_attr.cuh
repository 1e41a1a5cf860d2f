#pragma once
// Per-kernel launch attributes shared by the CUDA families (include from .cu files only).
#include <cuda_runtime_api.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "cuda_check.h"

namespace sparsekern::detail {

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

}  // namespace sparsekern::detail
