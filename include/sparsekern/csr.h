#pragma once
/// @file csr.h
/// @brief Unstructured sparse (CSR) products: sparse × dense (SpMM) and the sampled dense × dense
///        product (SDDMM) that is its gradient with respect to the sparse values. cuSPARSE's
///        generic API on CUDA, multithreaded kernels on the CPU.
///
/// CUDA calls go through plan objects (SpmmPlan, SddmmPlan): a plan is made once per
/// (pattern size, shapes, layouts, dtype) and holds the cuSPARSE descriptors, the algorithm and the
/// workspace size, so that every later run() makes no cuSPARSE planning call and allocates nothing;
/// the caller allocates the workspace once (workspace_size()) and passes it to each run().

#include <sparsekern/types.h>

#include <cstdint>
#include <memory>

namespace sparsekern::csr {

/// Integer type of `crow_indices` and `col_indices` (both must have the same one, like cuSPARSE).
enum class IndexType : int { i32 = 0, i64 = 1 };

/// A non-owning CSR matrix (rows × cols, nnz stored entries): the entries of row i are positions
/// [crow_indices[i], crow_indices[i+1]) of `col_indices` and `values`. Valid structure:
/// crow_indices[0] = 0, non-decreasing, crow_indices[rows] = nnz; column indices in [0, cols),
/// strictly increasing within each row (sorted, no duplicates). The names are torch's.
struct CsrView {
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::int64_t nnz = 0;
  IndexType index_type = IndexType::i32;
  const void* crow_indices = nullptr;  ///< rows + 1 entries
  const void* col_indices = nullptr;   ///< nnz entries
  const void* values = nullptr;        ///< nnz entries of the op's dtype (ignored where noted)
};

/// Checks the structure of a CSR matrix whose index arrays are in host memory (O(rows + nnz)).
/// Throws InvalidArgument naming `crow_indices` or `col_indices` and the first bad position.
/// The CPU ops call it on every run; CUDA ops cannot read device memory without synchronising
/// the host, so for device patterns the caller validates once (the Python layer does it the
/// first time it sees a pattern).
void check_structure(const CsrView& a);

/// cuSPARSE algorithm of an SpMM plan. `automatic` picks CSR_ALG2 when B and C are row-major
/// (its fast layout, and what torch.sparse.mm uses) and CSR_ALG1 otherwise (column-major B/C and
/// transposed A, which ALG2 does not take).
enum class SpmmAlgorithm : int { automatic = 0, csr_alg1 = 1, csr_alg2 = 2, csr_alg3 = 3 };

/// Parameters of C[b] = alpha · op(A) · B[b] + beta · C[b] for b in [0, batch), A sparse (CSR),
/// op(A) = A or Aᵀ; with op(A) m×k, B[b] is k×n and C[b] is m×n (strided views, strides in
/// elements; a batch stride of 0 in B broadcasts one B over the batch). A is shared by the batch.
/// On CUDA, B and C each need a unit stride along one dim (row- or column-major, any leading
/// dimension); the CPU takes any strides. (The Python layer also hands cuSPARSE 16-byte aligned
/// base pointers, copying the rare misaligned view, so vectorised kernels are always eligible.) Accumulation is fp32 for
/// f16/bf16/f32 and fp64 for f64. beta = 0 makes C write-only (NaN in C is never read).
struct SpmmParams {
  DType dtype = DType::f32;
  Device device{};
  std::int64_t batch = 1;
  CsrView a{};               ///< the sparse operand; its values have `dtype`
  bool transpose_a = false;  ///< op(A) = Aᵀ (the gradient product); no transposed copy is made
  MatrixView b{};
  MutableMatrixView c{};
  double alpha = 1.0;
  double beta = 0.0;
};

/// Parameters of values(C) = alpha · Σ_b (X[b] · Y[b]) ∘ spy(C) + beta · values(C): the products of
/// the dense X[b] (m×t) and Y[b] (t×n) sampled at the stored entries of the m×n CSR `pattern`
/// and summed over the batch (the sum is what the gradient of a batched SpMM needs). X and Y
/// are strided views (on CUDA with a unit stride along one dim).
/// `pattern.values` is ignored; the result goes to `out_values` (nnz entries of `dtype`).
struct SddmmParams {
  DType dtype = DType::f32;
  Device device{};
  std::int64_t batch = 1;
  MatrixView x{};       ///< m × t
  MatrixView y{};       ///< t × n
  CsrView pattern{};    ///< m × n
  void* out_values = nullptr;
  double alpha = 1.0;
  double beta = 0.0;    ///< 0 makes out_values write-only
};

/// Counters of planning work, for tests and benchmarks: a warm plan adds nothing to the first
/// three, whatever the number of runs. Process-wide, all threads and devices.
struct PlanCounters {
  std::int64_t plans_created = 0;       ///< SpmmPlan / SddmmPlan constructions (CPU and CUDA)
  std::int64_t buffer_size_queries = 0; ///< cusparseSpMM_bufferSize / cusparseSDDMM_bufferSize calls
  std::int64_t preprocess_calls = 0;    ///< cusparse*_preprocess calls
  std::int64_t runs = 0;                ///< SpmmPlan::run + SddmmPlan::run calls
};
PlanCounters plan_counters();

/// A planned SpMM: made from the parameters of a first call (their pointers are only used to
/// create the descriptors), then run() any number of times with parameters of the same shape,
/// strides, nnz, dtype, device and index type (data pointers may change; they are rebound
/// without any planning). Not thread-safe: one plan per thread or stream.
class SpmmPlan {
 public:
  explicit SpmmPlan(const SpmmParams& p, SpmmAlgorithm algorithm = SpmmAlgorithm::automatic);
  ~SpmmPlan();
  SpmmPlan(const SpmmPlan&) = delete;
  SpmmPlan& operator=(const SpmmPlan&) = delete;

  /// Bytes of device workspace run() needs (0 on the CPU).
  std::size_t workspace_size() const;
  /// The cuSPARSE algorithm the plan uses: the requested one, or for `automatic` the first of
  /// ALG2/ALG1 that cuSPARSE accepts (`automatic` if only its default algorithm did, and always
  /// on the CPU).
  SpmmAlgorithm algorithm() const;
  /// Validates `p` against the plan and computes it on `stream`. `workspace` must hold at least
  /// workspace_size() bytes on the operands' device. Never synchronises the host.
  void run(const SpmmParams& p, Workspace workspace, Stream stream);
  /// Number of run() calls on this plan.
  std::int64_t runs() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// A planned SDDMM, with the same contract as SpmmPlan.
class SddmmPlan {
 public:
  explicit SddmmPlan(const SddmmParams& p);
  ~SddmmPlan();
  SddmmPlan(const SddmmPlan&) = delete;
  SddmmPlan& operator=(const SddmmPlan&) = delete;

  std::size_t workspace_size() const;
  void run(const SddmmParams& p, Workspace workspace, Stream stream);
  std::int64_t runs() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sparsekern::csr
