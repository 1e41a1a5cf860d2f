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
