// cuSPARSELt backend of the semi family, loaded at run time.
//
// Why dlopen: cuSPARSELt is a large optional library (its own wheel, nvidia-cusparselt-cu13).
// Linking it would make libsparsekern fail to load wherever it is missing, including CPU-only
// users of a CUDA wheel. We compile against its header only and resolve the ~20 functions we use
// with dlsym the first time a 2:4 op runs; without the library, only the 2:4 ops fail, with an
// error that names the package to install.
//
// Opaque objects: cuSPARSELt's handle, descriptors and plans are fixed-size byte arrays whose size
// is set by the header (1024 bytes in 0.2-0.6, 512 with 16-byte alignment in 0.8 and later). We
// compile against one header and may load another release, so every such object lives in a slot
// with spare room after it (Slot<T>): a library that writes more than our header's size writes into
// our slack instead of the neighbouring object. The loaded and the compiled-against versions are
// both reported (cusparselt_version / cusparselt_header_version) for diagnosis.
//
// Handles: one cusparseLtHandle_t per device for the whole process (cuSPARSELt takes the stream
// per call, so a handle carries no per-call state and is shared by all threads). They are never
// destroyed: at process exit the CUDA runtime may already be gone.

#include <cusparseLt.h>
#include <dlfcn.h>
#include <library_types.h>

#include <array>
#include <memory>
#include <mutex>
#include <string>

#include "../common/check.h"
#include "../common/cuda_check.h"
#include "semi_internal.h"

namespace sparsekern::semi::detail {
namespace {

using sparsekern::detail::concat;

constexpr const char* kInstallHint =
    "install it with `pip install nvidia-cusparselt-cu13` (sparsekern loads libcusparseLt.so.0 at run "
    "time from that wheel or from the library search path), or point SPARSEKERN_CUSPARSELT_PATH at the file";

struct Api {
  decltype(&cusparseLtInit) Init = nullptr;
  decltype(&cusparseLtGetProperty) GetProperty = nullptr;
  decltype(&cusparseLtGetErrorName) GetErrorName = nullptr;
  decltype(&cusparseLtGetErrorString) GetErrorString = nullptr;
  decltype(&cusparseLtDenseDescriptorInit) DenseDescriptorInit = nullptr;
  decltype(&cusparseLtStructuredDescriptorInit) StructuredDescriptorInit = nullptr;
  decltype(&cusparseLtMatDescriptorDestroy) MatDescriptorDestroy = nullptr;
  decltype(&cusparseLtMatmulDescriptorInit) MatmulDescriptorInit = nullptr;
  decltype(&cusparseLtMatmulDescSetAttribute) MatmulDescSetAttribute = nullptr;
  decltype(&cusparseLtMatmulAlgSelectionInit) MatmulAlgSelectionInit = nullptr;
  decltype(&cusparseLtMatmulAlgSelectionDestroy) MatmulAlgSelectionDestroy = nullptr;  // optional (newer versions)
  decltype(&cusparseLtMatmulAlgGetAttribute) MatmulAlgGetAttribute = nullptr;
  decltype(&cusparseLtMatmulAlgSetAttribute) MatmulAlgSetAttribute = nullptr;
  decltype(&cusparseLtMatmulGetWorkspace) MatmulGetWorkspace = nullptr;
  decltype(&cusparseLtMatmulPlanInit) MatmulPlanInit = nullptr;
  decltype(&cusparseLtMatmulPlanDestroy) MatmulPlanDestroy = nullptr;
  decltype(&cusparseLtMatmul) Matmul = nullptr;
  decltype(&cusparseLtMatmulSearch) MatmulSearch = nullptr;
  decltype(&cusparseLtSpMMACompressedSize2) SpMMACompressedSize2 = nullptr;
  decltype(&cusparseLtSpMMACompress2) SpMMACompress2 = nullptr;
  int version = 0;
};

std::mutex& load_mutex() {
  static std::mutex* m = new std::mutex();
  return *m;
}
std::atomic<const Api*> g_api{nullptr};

template <typename F>
void resolve(void* lib, const char* name, F& fn, bool required, const std::string& from) {
  fn = reinterpret_cast<F>(dlsym(lib, name));
  if (!fn && required)
    throw BackendUnavailable(concat("cuSPARSELt loaded from ", from, " lacks ", name,
                                    " (sparsekern needs cuSPARSELt >= 0.6); ", kInstallHint));
}

const Api& api() {
  const Api* a = g_api.load(std::memory_order_acquire);
  if (!a) {
    lt_load("");
    a = g_api.load(std::memory_order_acquire);
  }
  return *a;
}

[[noreturn]] void throw_lt(cusparseStatus_t st, const char* call, const char* file, int line,
                           cudaError_t pending = cudaSuccess) {
  const Api& a = api();
  throw CudaError(concat("cuSPARSELt error ", a.GetErrorName(st), " (", a.GetErrorString(st), ") in ", call,
                         " at ", file, ":", line,
                         pending != cudaSuccess
                             ? concat("; pending CUDA error ", cudaGetErrorName(pending), " (",
                                      cudaGetErrorString(pending), ")")
                             : std::string()));
}

#define SK_LT_TRY(call)                                                   \
  do {                                                                    \
    cusparseStatus_t sk_st_ = (call);                                     \
    if (sk_st_ != CUSPARSE_STATUS_SUCCESS) throw_lt(sk_st_, #call, __FILE__, __LINE__); \
  } while (0)

// For the calls that launch kernels (compress, search, matmul). A kernel launch that fails inside
// cuSPARSELt leaves a pending (non-sticky) error in the runtime's last-error slot, which the next
// launch check anywhere in the process would report as its own failure, and which makes cuSPARSELt's
// own next call return CUSPARSE_STATUS_INTERNAL_ERROR (one failed configuration would poison the
// ones timed after it). So the slot is consumed right after the call: its error is reported with
// this call's failure, or makes a call that returned SUCCESS fail here, where it happened.
#define SK_LT_LAUNCH(call)                                                                      \
  do {                                                                                          \
    cusparseStatus_t sk_st_ = (call);                                                           \
    cudaError_t sk_pending_ = cudaGetLastError();                                               \
    if (sk_st_ != CUSPARSE_STATUS_SUCCESS) throw_lt(sk_st_, #call, __FILE__, __LINE__, sk_pending_); \
    if (sk_pending_ != cudaSuccess)                                                             \
      ::sparsekern::detail::throw_cuda_error(sk_pending_, #call, __FILE__, __LINE__);           \
  } while (0)

// An opaque cuSPARSELt object with 1 KiB of slack after it (see the file comment: header and
// library may disagree on its size; 1 KiB covers every size any release has used).
template <typename T>
struct Slot {
  T value{};
  alignas(16) unsigned char slack[1024] = {};
  T* get() { return &value; }
  const T* get() const { return &value; }
};

constexpr int kMaxDevices = 64;

const cusparseLtHandle_t* lt_handle(int device) {
  SK_EXPECTS(device >= 0 && device < kMaxDevices, "device index ", device, " out of range");
  static std::mutex* mutex = new std::mutex();
  static auto* handles = new std::array<Slot<cusparseLtHandle_t>*, kMaxDevices>{};  // leaked, see the file comment
  std::lock_guard<std::mutex> lock(*mutex);
  Slot<cusparseLtHandle_t>*& h = (*handles)[device];
  if (!h) {
    const Api& a = api();
    auto fresh = std::make_unique<Slot<cusparseLtHandle_t>>();
    sparsekern::detail::DeviceGuard guard(device);  // a cuSPARSELt handle is tied to the current device
    SK_LT_TRY(a.Init(fresh->get()));
    h = fresh.release();
  }
  return h->get();
}

cudaDataType_t lt_type(DType t) { return t == DType::f16 ? CUDA_R_16F : CUDA_R_16BF; }

// cuSPARSELt's documented minimum alignment of every operand, in bytes.
constexpr std::uint32_t kAlignment = 16;

}  // namespace

void lt_load(const std::string& path) {
  std::lock_guard<std::mutex> lock(load_mutex());
  if (g_api.load()) return;
  const std::string from = path.empty() ? std::string("libcusparseLt.so.0") : path;
  void* lib = dlopen(from.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* err = dlerror();
    throw BackendUnavailable(concat("cuSPARSELt could not be loaded from ", from, " (", err ? err : "unknown error",
                                    "): ", kInstallHint));
  }
  auto a = std::make_unique<Api>();
  try {
    resolve(lib, "cusparseLtInit", a->Init, true, from);
    resolve(lib, "cusparseLtGetProperty", a->GetProperty, true, from);
    resolve(lib, "cusparseLtGetErrorName", a->GetErrorName, true, from);
    resolve(lib, "cusparseLtGetErrorString", a->GetErrorString, true, from);
    resolve(lib, "cusparseLtDenseDescriptorInit", a->DenseDescriptorInit, true, from);
    resolve(lib, "cusparseLtStructuredDescriptorInit", a->StructuredDescriptorInit, true, from);
    resolve(lib, "cusparseLtMatDescriptorDestroy", a->MatDescriptorDestroy, true, from);
    resolve(lib, "cusparseLtMatmulDescriptorInit", a->MatmulDescriptorInit, true, from);
    resolve(lib, "cusparseLtMatmulDescSetAttribute", a->MatmulDescSetAttribute, true, from);
    resolve(lib, "cusparseLtMatmulAlgSelectionInit", a->MatmulAlgSelectionInit, true, from);
    resolve(lib, "cusparseLtMatmulAlgSelectionDestroy", a->MatmulAlgSelectionDestroy, false, from);
    resolve(lib, "cusparseLtMatmulAlgGetAttribute", a->MatmulAlgGetAttribute, true, from);
    resolve(lib, "cusparseLtMatmulAlgSetAttribute", a->MatmulAlgSetAttribute, true, from);
    resolve(lib, "cusparseLtMatmulGetWorkspace", a->MatmulGetWorkspace, true, from);
    resolve(lib, "cusparseLtMatmulPlanInit", a->MatmulPlanInit, true, from);
    resolve(lib, "cusparseLtMatmulPlanDestroy", a->MatmulPlanDestroy, true, from);
    resolve(lib, "cusparseLtMatmul", a->Matmul, true, from);
    resolve(lib, "cusparseLtMatmulSearch", a->MatmulSearch, true, from);
    resolve(lib, "cusparseLtSpMMACompressedSize2", a->SpMMACompressedSize2, true, from);
    resolve(lib, "cusparseLtSpMMACompress2", a->SpMMACompress2, true, from);
    int major = 0, minor = 0, patch = 0;
    if (a->GetProperty(MAJOR_VERSION, &major) != CUSPARSE_STATUS_SUCCESS ||
        a->GetProperty(MINOR_VERSION, &minor) != CUSPARSE_STATUS_SUCCESS ||
        a->GetProperty(PATCH_LEVEL, &patch) != CUSPARSE_STATUS_SUCCESS)
      throw BackendUnavailable(concat("cuSPARSELt loaded from ", from, " does not report its version; ", kInstallHint));
    a->version = major * 10000 + minor * 100 + patch;
    // 0.6 is the first release with the compute-type enum and the *2 compression API of our header.
    if (a->version < 600)
      throw BackendUnavailable(concat("cuSPARSELt ", major, ".", minor, ".", patch, " loaded from ", from,
                                      " is too old (sparsekern needs >= 0.6); ", kInstallHint));
  } catch (...) {
    dlclose(lib);
    throw;
  }
  g_api.store(a.release(), std::memory_order_release);  // never unloaded: plans may outlive any owner
}

int lt_version() {
  const Api* a = g_api.load(std::memory_order_acquire);
  return a ? a->version : 0;
}

int lt_header_version() { return CUSPARSELT_VER_MAJOR * 10000 + CUSPARSELT_VER_MINOR * 100 + CUSPARSELT_VER_PATCH; }

CompressedSize lt_compressed_size(const WeightShape& w) {
  sparsekern::detail::require_cuda_device(w.device.index);
  const cusparseLtHandle_t* h = lt_handle(w.device.index);
  const Api& a = api();
  Slot<cusparseLtMatDescriptor_t> desc;
  SK_LT_TRY(a.StructuredDescriptorInit(h, desc.get(), w.rows, w.cols, w.cols, kAlignment, lt_type(w.dtype),
                                       CUSPARSE_ORDER_ROW, CUSPARSELT_SPARSITY_50_PERCENT));
  CompressedSize out;
  const cusparseStatus_t st = a.SpMMACompressedSize2(h, desc.get(), &out.compressed_bytes, &out.buffer_bytes);
  (void)a.MatDescriptorDestroy(desc.get());
  SK_LT_TRY(st);
  return out;
}

void lt_compress(const WeightShape& w, const void* dense, void* compressed, Workspace buffer, Stream stream) {
  const CompressedSize need = lt_compressed_size(w);
  SK_EXPECTS(buffer.bytes >= need.buffer_bytes, "semi compress: `buffer` must hold ", need.buffer_bytes,
             " bytes; got ", buffer.bytes);
  sparsekern::detail::DeviceGuard guard(w.device.index);
  const cusparseLtHandle_t* h = lt_handle(w.device.index);
  const Api& a = api();
  Slot<cusparseLtMatDescriptor_t> desc;
  SK_LT_TRY(a.StructuredDescriptorInit(h, desc.get(), w.rows, w.cols, w.cols, kAlignment, lt_type(w.dtype),
                                       CUSPARSE_ORDER_ROW, CUSPARSELT_SPARSITY_50_PERCENT));
  // isSparseA = 1, op = N: the layout the plans below use (W is the structured A operand, row-major,
  // in both output layouts), so one compressed weight serves every plan.
  const cusparseStatus_t st = a.SpMMACompress2(h, desc.get(), 1, CUSPARSE_OPERATION_NON_TRANSPOSE, dense,
                                               compressed, buffer.bytes ? buffer.data : nullptr,
                                               static_cast<cudaStream_t>(stream));
  (void)a.MatDescriptorDestroy(desc.get());
  SK_LT_LAUNCH(st);
  atomic_counters().compressions.fetch_add(1);
}

// ---------------------------------------------------------------------------------------------
// Plans. Both layouts make W the structured A operand (n × k, row-major, op N: what compress()
// produced) and describe X as what it is, the row-major m × k matrix B with op(B) = Bᵀ (k × m):
//   y_transposed = false: D = A · op(B) is n × m COLUMN-major with ld n, the same memory as the
//                         row-major m × n Y (torch's _cslt_sparse_mm(..., transpose_result=True));
//   y_transposed = true:  D is n × m ROW-major with ld m, i.e. Yᵀ (torch's default, what its
//                         to_sparse_semi_structured + F.linear runs, followed by a transpose).
// alpha and beta are float: the compute type of 16-bit inputs is CUSPARSE_COMPUTE_32F.
// ---------------------------------------------------------------------------------------------
struct LtPlan {
  int device = 0;
  const cusparseLtHandle_t* handle = nullptr;
  Slot<cusparseLtMatDescriptor_t> a, b, c;
  bool have_a = false, have_b = false, have_c = false;
  Slot<cusparseLtMatmulDescriptor_t> matmul;
  Slot<cusparseLtMatmulAlgSelection_t> selection;
  bool have_selection = false;
  Slot<cusparseLtMatmulPlan_t> plan;
  bool have_plan = false;
  int max_algorithm_id = 0;
  std::size_t workspace = 0;

  ~LtPlan() {
    const Api* api_ptr = g_api.load();
    if (!api_ptr) return;
    if (have_plan) (void)api_ptr->MatmulPlanDestroy(plan.get());
    if (have_selection && api_ptr->MatmulAlgSelectionDestroy) (void)api_ptr->MatmulAlgSelectionDestroy(selection.get());
    if (have_c) (void)api_ptr->MatDescriptorDestroy(c.get());
    if (have_b) (void)api_ptr->MatDescriptorDestroy(b.get());
    if (have_a) (void)api_ptr->MatDescriptorDestroy(a.get());
  }
};

LtPlan* lt_plan_create(const LinearParams& p, const PlanOptions& options) {
  sparsekern::detail::require_cuda_device(p.device.index);
  sparsekern::detail::DeviceGuard guard(p.device.index);
  auto s = std::make_unique<LtPlan>();
  s->device = p.device.index;
  s->handle = lt_handle(p.device.index);
  const Api& a = api();
  const cudaDataType_t type = lt_type(p.dtype);
  SK_LT_TRY(a.StructuredDescriptorInit(s->handle, s->a.get(), p.n, p.k, p.k, kAlignment, type, CUSPARSE_ORDER_ROW,
                                       CUSPARSELT_SPARSITY_50_PERCENT));
  s->have_a = true;
  SK_LT_TRY(a.DenseDescriptorInit(s->handle, s->b.get(), p.m, p.k, p.k, kAlignment, type, CUSPARSE_ORDER_ROW));
  s->have_b = true;
  if (p.y_transposed)
    SK_LT_TRY(a.DenseDescriptorInit(s->handle, s->c.get(), p.n, p.m, p.m, kAlignment, type, CUSPARSE_ORDER_ROW));
  else
    SK_LT_TRY(a.DenseDescriptorInit(s->handle, s->c.get(), p.n, p.m, p.n, kAlignment, type, CUSPARSE_ORDER_COL));
  s->have_c = true;
  SK_LT_TRY(a.MatmulDescriptorInit(s->handle, s->matmul.get(), CUSPARSE_OPERATION_NON_TRANSPOSE,
                                   CUSPARSE_OPERATION_TRANSPOSE, s->a.get(), s->b.get(), s->c.get(), s->c.get(),
                                   CUSPARSE_COMPUTE_32F));
  if (p.bias) {
    // The bias (one entry per row of D = per output feature, in both layouts) is fused into the
    // epilogue; its pointer is bound here, at plan time, which is why a plan belongs to one bias.
    const void* bias = p.bias;
    SK_LT_TRY(a.MatmulDescSetAttribute(s->handle, s->matmul.get(), CUSPARSELT_MATMUL_BIAS_POINTER, &bias,
                                       sizeof(bias)));
  }
  SK_LT_TRY(a.MatmulAlgSelectionInit(s->handle, s->selection.get(), s->matmul.get(), CUSPARSELT_MATMUL_ALG_DEFAULT));
  s->have_selection = true;
  SK_LT_TRY(a.MatmulAlgGetAttribute(s->handle, s->selection.get(), CUSPARSELT_MATMUL_ALG_CONFIG_MAX_ID,
                                    &s->max_algorithm_id, sizeof(s->max_algorithm_id)));
  if (options.algorithm >= 0) {
    SK_EXPECTS(options.algorithm < s->max_algorithm_id, "semi LinearPlan: `algorithm` must be below ",
               s->max_algorithm_id, " (cuSPARSELt's configurations for this problem); got ", options.algorithm);
    const int id = options.algorithm;
    SK_LT_TRY(a.MatmulAlgSetAttribute(s->handle, s->selection.get(), CUSPARSELT_MATMUL_ALG_CONFIG_ID, &id, sizeof(id)));
  }
  SK_LT_TRY(a.MatmulPlanInit(s->handle, s->plan.get(), s->matmul.get(), s->selection.get()));
  s->have_plan = true;
  atomic_counters().plans_created.fetch_add(1);
  // Asked after plan init: the workspace belongs to the configuration the plan settled on.
  SK_LT_TRY(a.MatmulGetWorkspace(s->handle, s->plan.get(), &s->workspace));
  return s.release();
}

void lt_plan_destroy(LtPlan* plan) noexcept { delete plan; }

std::size_t lt_plan_workspace_size(const LtPlan* plan) { return plan->workspace; }

int lt_plan_algorithm_id(const LtPlan* plan) {
  int id = 0;
  SK_LT_TRY(api().MatmulAlgGetAttribute(plan->handle, plan->selection.get(), CUSPARSELT_MATMUL_ALG_CONFIG_ID, &id,
                                        sizeof(id)));
  return id;
}

int lt_plan_max_algorithm_id(const LtPlan* plan) { return plan->max_algorithm_id; }

void lt_plan_search(LtPlan* s, const LinearParams& p, Workspace workspace, Stream stream_ptr) {
  sparsekern::detail::DeviceGuard guard(s->device);
  const Api& a = api();
  cudaStream_t stream = static_cast<cudaStream_t>(stream_ptr);
  const float alpha = 1.f, beta = 0.f;
  SK_LT_LAUNCH(a.MatmulSearch(s->handle, s->plan.get(), &alpha, p.weight, p.x, &beta, p.y, p.y,
                           workspace.bytes ? workspace.data : nullptr, &stream, 1));
  atomic_counters().searches.fetch_add(1);
  atomic_counters().runs.fetch_add(1);
  // The search updated the plan in place; the configuration it kept may need a different
  // workspace (split-K buffers), which the caller re-queries before the next run().
  SK_LT_TRY(a.MatmulGetWorkspace(s->handle, s->plan.get(), &s->workspace));
}

void lt_plan_run(LtPlan* s, const LinearParams& p, Workspace workspace, Stream stream_ptr) {
  sparsekern::detail::DeviceGuard guard(s->device);
  const Api& a = api();
  cudaStream_t stream = static_cast<cudaStream_t>(stream_ptr);
  const float alpha = 1.f, beta = 0.f;
  SK_LT_LAUNCH(a.Matmul(s->handle, s->plan.get(), &alpha, p.weight, p.x, &beta, p.y, p.y,
                     workspace.bytes ? workspace.data : nullptr, &stream, 1));
  atomic_counters().runs.fetch_add(1);
}

}  // namespace sparsekern::semi::detail
