// Dispatch point of the semi family: argument validation (cuSPARSELt's shape, type and alignment
// rules, checked here so a bad call is a clear exception instead of a cuSPARSELt status), then the
// cuSPARSELt backend, which exists only in CUDA builds that found cusparseLt.h.
#include <cstdint>

#include "../common/check.h"
#include "semi_internal.h"

namespace sparsekern::semi {
namespace detail {

AtomicCounters& atomic_counters() {
  static AtomicCounters* c = new AtomicCounters();  // leaked: may be read from atexit handlers
  return *c;
}

}  // namespace detail

namespace {

using sparsekern::detail::concat;
using sparsekern::detail::device_name;

[[noreturn]] void unavailable(const char* what, Device device) {
  if (device.type == DeviceType::cpu)
    throw BackendUnavailable(concat(what, ": 2:4 products run on CUDA through cuSPARSELt; on the CPU "
                                          "use a dense product with the masked weight"));
  throw BackendUnavailable(concat(what, ": operands are on ", device_name(device),
                                  " but sparsekern was built without cuSPARSELt support (cusparseLt.h "
                                  "was not found at build time: pip install nvidia-cusparselt-cu13 and rebuild)"));
}

bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

void check_type(DType t, const char* name) {
  SK_EXPECTS_TYPE(t == DType::f16 || t == DType::bf16, "`", name,
                  "` must be float16 or bfloat16 for cuSPARSELt's 2:4 kernels; got ", dtype_name(t));
}

void check_dim(const char* name, std::int64_t v, const char* what) {
  SK_EXPECTS(v > 0 && v % 16 == 0, "`", name, "` ", what, " must be a positive multiple of 16 for cuSPARSELt; got ", v);
}

void validate(const WeightShape& w) {
  check_type(w.dtype, "weight");
  check_dim("weight", w.rows, "rows (out_features)");
  check_dim("weight", w.cols, "columns (in_features)");
}

void validate(const LinearParams& p) {
  check_type(p.dtype, "x");
  check_dim("x", p.m, "rows");
  check_dim("weight", p.n, "rows (out_features)");
  check_dim("x", p.k, "columns (in_features)");
  SK_EXPECTS(p.x && p.weight && p.y, "semi linear: `x`, `weight` and `y` must not be null");
  SK_EXPECTS(aligned16(p.x), "`x` must be 16-byte aligned for cuSPARSELt");
  SK_EXPECTS(aligned16(p.weight), "`weight` (compressed) must be 16-byte aligned for cuSPARSELt");
  SK_EXPECTS(aligned16(p.y), "`y` must be 16-byte aligned for cuSPARSELt");
  SK_EXPECTS(!p.bias || aligned16(p.bias), "`bias` must be 16-byte aligned for cuSPARSELt");
  SK_EXPECTS(p.y != p.x && p.y != p.weight, "`y` must not alias `x` or `weight`");
}

}  // namespace

bool built_with_cusparselt() { return SPARSEKERN_WITH_CUSPARSELT != 0; }

void load_cusparselt(const std::string& path) {
#if SPARSEKERN_WITH_CUSPARSELT
  detail::lt_load(path);
#else
  (void)path;
  unavailable("load_cusparselt", Device{DeviceType::cuda, 0});
#endif
}

int cusparselt_version() {
#if SPARSEKERN_WITH_CUSPARSELT
  return detail::lt_version();
#else
  return 0;
#endif
}

int cusparselt_header_version() {
#if SPARSEKERN_WITH_CUSPARSELT
  return detail::lt_header_version();
#else
  return 0;
#endif
}

Counters counters() {
  auto& c = detail::atomic_counters();
  return Counters{c.plans_created.load(), c.searches.load(), c.compressions.load(), c.runs.load()};
}

CompressedSize compressed_size(const WeightShape& w) {
  validate(w);
#if SPARSEKERN_WITH_CUSPARSELT
  if (w.device.type == DeviceType::cuda) return detail::lt_compressed_size(w);
#endif
  unavailable("semi compressed_size", w.device);
}

void compress(const WeightShape& w, const void* dense, void* compressed, Workspace buffer, Stream stream) {
  validate(w);
  SK_EXPECTS(dense && compressed, "semi compress: `dense` and `compressed` must not be null");
  SK_EXPECTS(aligned16(dense) && aligned16(compressed), "semi compress: `dense` and `compressed` must be 16-byte aligned");
#if SPARSEKERN_WITH_CUSPARSELT
  if (w.device.type == DeviceType::cuda) {
    detail::lt_compress(w, dense, compressed, buffer, stream);
    return;
  }
#endif
  (void)buffer;
  (void)stream;
  unavailable("semi compress", w.device);
}

struct LinearPlan::Impl {
  LinearParams planned;
  detail::LtPlan* plan = nullptr;
  bool searched = false;
};

LinearPlan::LinearPlan(const LinearParams& p, const PlanOptions& options) : impl_(new Impl) {
  validate(p);
  SK_EXPECTS(options.algorithm >= -1, "semi LinearPlan: `algorithm` must be -1 (cuSPARSELt's default) or a "
             "configuration id >= 0; got ", options.algorithm);
  impl_->planned = p;
#if SPARSEKERN_WITH_CUSPARSELT
  if (p.device.type == DeviceType::cuda) {
    impl_->plan = detail::lt_plan_create(p, options);
    return;
  }
#endif
  unavailable("semi LinearPlan", p.device);
}

LinearPlan::~LinearPlan() {
#if SPARSEKERN_WITH_CUSPARSELT
  if (impl_ && impl_->plan) detail::lt_plan_destroy(impl_->plan);
#endif
}

std::size_t LinearPlan::workspace_size() const {
#if SPARSEKERN_WITH_CUSPARSELT
  return detail::lt_plan_workspace_size(impl_->plan);
#else
  return 0;
#endif
}

bool LinearPlan::searched() const { return impl_->searched; }

int LinearPlan::max_algorithm_id() const {
#if SPARSEKERN_WITH_CUSPARSELT
  return detail::lt_plan_max_algorithm_id(impl_->plan);
#else
  return 0;
#endif
}

int LinearPlan::algorithm_id() const {
#if SPARSEKERN_WITH_CUSPARSELT
  return detail::lt_plan_algorithm_id(impl_->plan);
#else
  return 0;
#endif
}

namespace {

void check_matches(const LinearParams& p, const LinearParams& planned, std::size_t ws_needed, Workspace ws) {
  validate(p);
  SK_EXPECTS(p.dtype == planned.dtype && p.device == planned.device && p.m == planned.m && p.n == planned.n &&
                 p.k == planned.k && p.y_transposed == planned.y_transposed,
             "semi linear: parameters do not match the plan (planned ", dtype_name(planned.dtype), " ",
             planned.m, "x", planned.k, " · (", planned.n, "x", planned.k, ")ᵀ on ", device_name(planned.device),
             planned.y_transposed ? " into yᵀ" : "", "; got ", dtype_name(p.dtype), " ", p.m, "x", p.k, " · (",
             p.n, "x", p.k, ")ᵀ on ", device_name(p.device), p.y_transposed ? " into yᵀ" : "", ")");
  SK_EXPECTS(p.bias == planned.bias, "semi linear: `bias` must be the pointer the plan was made with "
                                     "(cuSPARSELt binds it at plan time); make a new plan for a new bias");
  SK_EXPECTS(ws.bytes >= ws_needed, "semi linear: `workspace` must hold ", ws_needed, " bytes; got ", ws.bytes);
}

}  // namespace

void LinearPlan::search(const LinearParams& p, Workspace workspace, Stream stream) {
  check_matches(p, impl_->planned, workspace_size(), workspace);
#if SPARSEKERN_WITH_CUSPARSELT
  detail::lt_plan_search(impl_->plan, p, workspace, stream);
  impl_->searched = true;
#else
  (void)stream;
#endif
}

void LinearPlan::run(const LinearParams& p, Workspace workspace, Stream stream) {
  check_matches(p, impl_->planned, workspace_size(), workspace);
#if SPARSEKERN_WITH_CUSPARSELT
  detail::lt_plan_run(impl_->plan, p, workspace, stream);
#else
  (void)stream;
#endif
}

}  // namespace sparsekern::semi

// --- CUTLASS sm90 2:4 kernels -----------------------------------------------------------------
namespace sparsekern::semi {
namespace {

void validate_cutlass(const WeightShape& w) {
  validate(w);
  SK_EXPECTS(w.cols % 64 == 0, "`weight` columns (in_features) must be a multiple of 64 for the CUTLASS 2:4 "
             "kernels; got ", w.cols);
  SK_EXPECTS(w.device.type == DeviceType::cuda, "semi (CUTLASS): `weight` must be on a CUDA device; got ",
             device_name(w.device));
}

[[noreturn]] void no_cutlass(const char* what) {
  throw BackendUnavailable(concat(what, ": sparsekern was built without the CUTLASS sm90 2:4 kernels (a CUDA "
                                        "build with the 90a architecture has them)"));
}

}  // namespace

bool built_with_cutlass_sm90() { return SPARSEKERN_WITH_CUTLASS_SM90 != 0; }

bool cutlass_sm90_usable(Device device) {
  if (device.type != DeviceType::cuda) return false;
#if SPARSEKERN_WITH_CUTLASS_SM90
  return detail::cutlass_device_ok(device.index);
#else
  return false;
#endif
}

CutlassSizes cutlass_compressed_size(const WeightShape& w) {
  validate_cutlass(w);
#if SPARSEKERN_WITH_CUTLASS_SM90
  return detail::cutlass_sizes(w);
#else
  no_cutlass("semi cutlass_compressed_size");
#endif
}

void cutlass_compress(const WeightShape& w, const void* dense, void* values, void* metadata, Workspace buffer,
                      Stream stream) {
  validate_cutlass(w);
  SK_EXPECTS(dense && values && metadata, "semi cutlass_compress: `dense`, `values` and `metadata` must not be null");
  SK_EXPECTS(aligned16(dense) && aligned16(values) && aligned16(metadata),
             "semi cutlass_compress: `dense`, `values` and `metadata` must be 16-byte aligned");
#if SPARSEKERN_WITH_CUTLASS_SM90
  SK_EXPECTS(cutlass_sm90_usable(w.device), "semi (CUTLASS): the 2:4 kernels need an sm_90 (Hopper) device; ",
             device_name(w.device), " is not one");
  const CutlassSizes s = detail::cutlass_sizes(w);
  SK_EXPECTS(buffer.bytes >= s.buffer_bytes, "semi cutlass_compress: `buffer` must hold ", s.buffer_bytes,
             " bytes; got ", buffer.bytes);
  detail::cutlass_compress(w, dense, values, metadata, buffer, stream);
#else
  (void)buffer;
  (void)stream;
  no_cutlass("semi cutlass_compress");
#endif
}

namespace {
void validate_cutlass(const LinearParams& p) {
  validate(p);
  SK_EXPECTS(!p.y_transposed, "semi (CUTLASS): the 2:4 kernels write Y (m × n), not Yᵀ");
  SK_EXPECTS(p.k % 64 == 0, "`x` columns (in_features) must be a multiple of 64 for the CUTLASS 2:4 kernels; got ",
             p.k);
  SK_EXPECTS(p.m <= INT32_MAX && p.n <= INT32_MAX && p.k <= INT32_MAX,
             "semi (CUTLASS): dims must fit in 32 bits");
}
}  // namespace

int cutlass_linear_configs() {
#if SPARSEKERN_WITH_CUTLASS_SM90
  return detail::cutlass_configs();
#else
  return 0;
#endif
}

std::size_t cutlass_linear_workspace_size(const LinearParams& p, int config) {
  validate_cutlass(p);
#if SPARSEKERN_WITH_CUTLASS_SM90
  return detail::cutlass_workspace_size(p, config);
#else
  (void)config;
  no_cutlass("semi cutlass_linear_workspace_size");
#endif
}

void cutlass_linear(const LinearParams& p, const void* metadata, Workspace workspace, Stream stream, int config) {
  validate_cutlass(p);
  SK_EXPECTS(metadata && aligned16(metadata), "semi cutlass_linear: `metadata` must be non-null and 16-byte aligned");
#if SPARSEKERN_WITH_CUTLASS_SM90
  SK_EXPECTS(cutlass_sm90_usable(p.device), "semi (CUTLASS): the 2:4 kernels need an sm_90 (Hopper) device; ",
             device_name(p.device), " is not one");
  detail::cutlass_run(p, metadata, workspace, stream, config);  // checks the workspace size
#else
  (void)config;
  (void)workspace;
  (void)stream;
  no_cutlass("semi cutlass_linear");
#endif
}

}  // namespace sparsekern::semi
