#pragma once
/// @file semi.h
/// @brief 2:4 semi-structured sparse products on the sparse tensor cores of Ampere and Hopper,
///        through cuSPARSELt or (sm_90) the library's own CUTLASS kernels: Y = X · Wᵀ (+ bias)
///        with W pruned so that every group of 4 consecutive entries of a row holds at most 2
///        non-zeros. The two backends compress W into different formats; the CUTLASS functions
///        are at the end of this file.
///
/// cuSPARSELt is loaded at run time (dlopen of libcusparseLt.so.0, shipped by the
/// `nvidia-cusparselt-cu13` wheel), so neither libsparsekern nor a wheel links it. The flow is:
/// compress W once (compressed_size() + compress()), make a LinearPlan per input height m (and
/// output layout and kernel configuration), run it. Choosing the configuration is the caller's
/// job: either LinearPlan::search() (cusparseLtMatmulSearch) or timing one plan per configuration
/// id (0 .. max_algorithm_id() - 1), which is what the Python layer does. CUDA only: the CPU
/// counterpart is a dense product with the masked weight (the Python layer does that).

#include <sparsekern/types.h>

#include <cstdint>
#include <memory>
#include <string>

namespace sparsekern::semi {

/// Whether this build has the cuSPARSELt backend (cusparseLt.h was found at build time).
bool built_with_cusparselt();

/// Loads libcusparseLt and resolves the functions sparsekern uses. `path`: a file to dlopen, or
/// empty for the dynamic loader's search (LD_LIBRARY_PATH, the RUNPATH of libsparsekern, which
/// points into the nvidia wheels). Idempotent once a load succeeded. Throws BackendUnavailable
/// naming the `nvidia-cusparselt-cu13` package when the library cannot be loaded, or is older
/// than 0.6.
void load_cusparselt(const std::string& path = "");

/// Version of the loaded cuSPARSELt as major·1000 + minor·100 + patch (0 when none is loaded).
int cusparselt_version();

/// Version of the cusparseLt.h this library was compiled against (same encoding; 0 without it).
/// The opaque cuSPARSELt structs are sized by that header, so it should match the loaded library.
int cusparselt_header_version();

/// A dense row-major rows × cols weight (leading dimension cols) that is 2:4 along its rows.
/// cuSPARSELt constraints: dtype f16 or bf16, rows and cols multiples of 16, data 16-byte aligned.
struct WeightShape {
  DType dtype = DType::f16;
  Device device{DeviceType::cuda, 0};
  std::int64_t rows = 0;
  std::int64_t cols = 0;
};

struct CompressedSize {
  std::size_t compressed_bytes = 0;  ///< size of the compressed weight (values + metadata)
  std::size_t buffer_bytes = 0;      ///< scratch compress() needs
};

/// Sizes of the compressed form of a weight of shape `w` and of compress()'s scratch buffer.
CompressedSize compressed_size(const WeightShape& w);

/// Compresses the 2:4 weight at `dense` into `compressed` (compressed_bytes) on `stream`, using
/// `buffer` (buffer_bytes) as scratch. Entries that break the 2:4 pattern are not detected: prune
/// first (SemiStructuredLinear multiplies by its 2:4 mask).
void compress(const WeightShape& w, const void* dense, void* compressed, Workspace buffer, Stream stream);

/// Y = X · Wᵀ + bias: X is m × k row-major (leading dimension k), W the compressed n × k weight,
/// bias has n entries (or is null). Accumulation in fp32. `y` holds Y as m × n row-major (leading
/// dimension n), or, with `y_transposed`, Yᵀ = W · Xᵀ as n × m row-major (leading dimension m):
/// the two layouts run different cuSPARSELt kernels (cuSPARSELt's D is column-major n × m in the
/// first case, row-major in the second), and which is faster depends on the GPU and shape.
/// Constraints: f16/bf16, m, n, k multiples of 16, pointers 16-byte aligned.
struct LinearParams {
  DType dtype = DType::f16;
  Device device{DeviceType::cuda, 0};
  std::int64_t m = 0;
  std::int64_t n = 0;
  std::int64_t k = 0;
  const void* x = nullptr;
  const void* weight = nullptr;  ///< compressed by compress() from an n × k weight of `dtype`
  const void* bias = nullptr;    ///< optional; fixed for the lifetime of a plan
  void* y = nullptr;
  bool y_transposed = false;     ///< `y` holds Yᵀ (n × m row-major) instead of Y (m × n row-major)
};

/// How a plan picks its kernel.
struct PlanOptions {
  /// cuSPARSELt kernel configuration (CUSPARSELT_MATMUL_ALG_CONFIG_ID), 0 .. max_algorithm_id()-1,
  /// or -1 for cuSPARSELt's default for the problem.
  int algorithm = -1;
};

/// Process-wide counters, for tests and benchmarks.
struct Counters {
  std::int64_t plans_created = 0;  ///< cusparseLtMatmulPlanInit calls (one per plan + one after its search)
  std::int64_t searches = 0;       ///< cusparseLtMatmulSearch calls
  std::int64_t compressions = 0;   ///< compress() calls
  std::int64_t runs = 0;           ///< LinearPlan::run / search calls
};
Counters counters();

/// A cuSPARSELt matmul plan for one (dtype, m, n, k, output layout, bias pointer, configuration).
/// Not thread-safe.
class LinearPlan {
 public:
  explicit LinearPlan(const LinearParams& p, const PlanOptions& options = PlanOptions{});
  ~LinearPlan();
  LinearPlan(const LinearPlan&) = delete;
  LinearPlan& operator=(const LinearPlan&) = delete;

  /// Device workspace run() needs; it may change after search().
  std::size_t workspace_size() const;
  /// Times cuSPARSELt's kernel configurations on this problem (cusparseLtMatmulSearch), keeps the
  /// fastest and writes Y. Synchronises `stream` (it times kernels); call it once, before any
  /// CUDA-graph capture. The configurations it tries may need more workspace than this plan's
  /// own: pass at least the largest workspace_size() over all configurations (one plan per id).
  /// Re-query workspace_size() afterwards.
  void search(const LinearParams& p, Workspace workspace, Stream stream);
  /// Y = X · Wᵀ + bias with the plan's configuration; never synchronises the host.
  void run(const LinearParams& p, Workspace workspace, Stream stream);

  bool searched() const;
  /// The kernel configuration in use (CUSPARSELT_MATMUL_ALG_CONFIG_ID).
  int algorithm_id() const;
  /// Number of kernel configurations cuSPARSELt has for this problem (CUSPARSELT_MATMUL_ALG_CONFIG_MAX_ID).
  int max_algorithm_id() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};


// ---------------------------------------------------------------------------------------------
// CUTLASS sm90 2:4 kernels (compiled into the library: no run-time dependency)
// ---------------------------------------------------------------------------------------------
/// Whether this build holds the CUTLASS sm90 2:4 kernels (a CUDA build with an sm_90a target).
bool built_with_cutlass_sm90();
/// Whether they run on `device`: built with them and the device is sm_90 (Hopper). Throws
/// BackendUnavailable for a bad device index.
bool cutlass_sm90_usable(Device device);
/// Sizes of CUTLASS's compressed form of a weight of shape `w`: its values (rows × cols/2 elements)
/// and metadata, and the scratch cutlass_compress() needs. Constraints as compressed_size(), and
/// cols a multiple of 64.
struct CutlassSizes {
  std::size_t values_bytes = 0;
  std::size_t metadata_bytes = 0;
  std::size_t buffer_bytes = 0;
};
CutlassSizes cutlass_compressed_size(const WeightShape& w);
/// Compresses the 2:4 weight at `dense` (rows × cols row-major) into `values` and `metadata` on
/// `stream`, using `buffer` as scratch (sizes from cutlass_compressed_size()).
void cutlass_compress(const WeightShape& w, const void* dense, void* values, void* metadata, Workspace buffer,
                      Stream stream);
/// Number of tile configurations of the CUTLASS kernel (0 .. n−1; which is fastest depends on the
/// shape: time them, as SemiStructuredLinear does). 0 without the kernels.
int cutlass_linear_configs();
/// Device workspace of cutlass_linear() for `p` (p.weight: the compressed values) and `config`.
std::size_t cutlass_linear_workspace_size(const LinearParams& p, int config = 0);
/// Y = X · Wᵀ + bias (Y row-major m × n; `y_transposed` must be false) with the compressed values
/// in p.weight and their `metadata`, tile configuration `config`; never synchronises the host.
/// Constraints as LinearParams, k a multiple of 64. Every configuration reads the same compressed form.
void cutlass_linear(const LinearParams& p, const void* metadata, Workspace workspace, Stream stream, int config = 0);

}  // namespace sparsekern::semi
