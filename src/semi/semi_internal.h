#pragma once
// Backend of the semi family (cusparselt.cpp, built when cusparseLt.h was found). The dispatch in
// linear.cpp validates the arguments; the state behind a plan is opaque here so that no cuSPARSELt
// type leaks into builds without it.
#include <sparsekern/semi.h>

#include <atomic>

namespace sparsekern::semi::detail {

struct AtomicCounters {
  std::atomic<std::int64_t> plans_created{0};
  std::atomic<std::int64_t> searches{0};
  std::atomic<std::int64_t> compressions{0};
  std::atomic<std::int64_t> runs{0};
};
AtomicCounters& atomic_counters();

void lt_load(const std::string& path);
int lt_version();
int lt_header_version();
CompressedSize lt_compressed_size(const WeightShape& w);
void lt_compress(const WeightShape& w, const void* dense, void* compressed, Workspace buffer, Stream stream);

struct LtPlan;
LtPlan* lt_plan_create(const LinearParams& p, const PlanOptions& options);
void lt_plan_destroy(LtPlan* plan) noexcept;
std::size_t lt_plan_workspace_size(const LtPlan* plan);
void lt_plan_search(LtPlan* plan, const LinearParams& p, Workspace workspace, Stream stream);
void lt_plan_run(LtPlan* plan, const LinearParams& p, Workspace workspace, Stream stream);
int lt_plan_algorithm_id(const LtPlan* plan);
int lt_plan_max_algorithm_id(const LtPlan* plan);

}  // namespace sparsekern::semi::detail

namespace sparsekern::semi::detail {
// CUTLASS sm90 2:4 kernels (cutlass_sm90.cu, CUDA builds with the sm_90a target); linear.cpp checks
// the arguments and the device first.
bool cutlass_device_ok(int device);  // sm_90 and the kernel's sm_90a code loads there
CutlassSizes cutlass_sizes(const WeightShape& w);  // public counterparts in semi.h
void cutlass_compress(const WeightShape& w, const void* dense, void* values, void* metadata, Workspace buffer,
                      Stream stream);
int cutlass_configs();
std::size_t cutlass_workspace_size(const LinearParams& p, int config);
void cutlass_run(const LinearParams& p, const void* metadata, Workspace workspace, Stream stream, int config);  // checks the workspace size
}  // namespace sparsekern::semi::detail
