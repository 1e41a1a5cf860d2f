#pragma once
// Backend entry points behind the csr dispatch (spmm.cpp, sddmm.cpp). Parameters reaching them are
// validated. The CUDA state is opaque here so that no CUDA type leaks into CPU-only builds.
#include <sparsekern/csr.h>

#include <atomic>

namespace sparsekern::csr::detail {

/// Process-wide planning counters (see PlanCounters).
struct Counters {
  std::atomic<std::int64_t> plans_created{0};
  std::atomic<std::int64_t> buffer_size_queries{0};
  std::atomic<std::int64_t> preprocess_calls{0};
  std::atomic<std::int64_t> runs{0};
};
Counters& counters();

/// Reads entry `i` of an index array of type `t` (host memory).
inline std::int64_t index_at(const void* p, IndexType t, std::int64_t i) {
  return t == IndexType::i32 ? static_cast<const std::int32_t*>(p)[i]
                             : static_cast<const std::int64_t*>(p)[i];
}

/// check_structure() with the messages naming the operand `name`.
void check_structure(const char* name, const CsrView& a);

void spmm_cpu(const SpmmParams& p);
void sddmm_cpu(const SddmmParams& p);

struct CudaSpmmState;
struct CudaSddmmState;
/// Create the cuSPARSE descriptors of `p`, pick the algorithm, query the workspace size.
CudaSpmmState* spmm_cuda_create(const SpmmParams& p, SpmmAlgorithm algorithm);
void spmm_cuda_destroy(CudaSpmmState* s) noexcept;
std::size_t spmm_cuda_workspace_size(const CudaSpmmState* s);
SpmmAlgorithm spmm_cuda_algorithm(const CudaSpmmState* s);
void spmm_cuda_run(CudaSpmmState* s, const SpmmParams& p, Workspace workspace, Stream stream);

CudaSddmmState* sddmm_cuda_create(const SddmmParams& p);
void sddmm_cuda_destroy(CudaSddmmState* s) noexcept;
std::size_t sddmm_cuda_workspace_size(const CudaSddmmState* s);
void sddmm_cuda_run(CudaSddmmState* s, const SddmmParams& p, Workspace workspace, Stream stream);

}  // namespace sparsekern::csr::detail
