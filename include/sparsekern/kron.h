#pragma once
/// @file kron.h
/// @brief Kronecker-factored products Y = X · (F1 ⊗ F2 ⊗ … ⊗ Fn), forward and backward, without
///        ever forming the Kronecker product.
///
/// ## The product
/// X is M × P with P = p1·p2·…·pn, factor Fk is pk × qk, Y is M × Q with Q = q1·q2·…·qn.
/// Column indices are mixed-radix with the first factor most significant, as in torch.kron:
/// column (i1, …, in) of X is i1·(p2…pn) + i2·(p3…pn) + … + in, and
///
///     Y[m, (j1…jn)] = Σ_{i1…in} X[m, (i1…in)] · F1[i1, j1] · F2[i2, j2] · … · Fn[in, jn].
///
/// The left product (F1 ⊗ … ⊗ Fn) · Z equals (Zᵀ · (F1ᵀ ⊗ … ⊗ Fnᵀ))ᵀ: this op on transposed views.
///
/// ## Algorithm (one mode at a time, last mode first: the "shuffle" algorithm)
/// A state T of shape (M, L, p) — p the last mode of the row — becomes T' of shape (M, q, L) with
///
///     T'[m, j, l] = Σ_i T[m, l, i] · F[i, j],
///
/// i.e. the contracted mode moves to the front. Starting from T_{n+1} = X and applying Fn, …, F1
/// gives T_k with layout (j_k, …, j_n, i_1, …, i_{k−1}) and finally T_1 = Y in natural order.
/// Consecutive modes whose factors are small (p, q ≤ 64) are *fused*: a thread block loads the
/// contiguous slice of the state that those modes span (a "chunk") into shared memory, applies all
/// of their factors there, and writes the result once, so the intermediate states never touch
/// global memory. Larger factors run one mode at a time through cuBLAS (strided-batched GEMM).
///
/// ## Backward (G = ∂ℓ/∂Y)
///     ∂ℓ/∂X   = G · (F1ᵀ ⊗ … ⊗ Fnᵀ)
///     ∂ℓ/∂Fk  = Σ_m Σ_l T_{k+1}[m, l, :]ᵀ · G_k[m, :, l]          (pk × qk)
/// where T_{k+1} (M, L_k, pk) is the forward state just before mode k and G_k = ∂ℓ/∂T_k (M, qk, L_k)
/// is G pulled back through modes 1…k−1:
///     G_1 = G,    G_{k+1}[m, l, i] = Σ_j G_k[m, j, l] · Fk[i, j]      and ∂ℓ/∂X = G_{n+1}.
/// Both chains share the index l = (j_{k+1}…j_n, i_1…i_{k−1}), so every ∂ℓ/∂Fk is one contraction
/// of two states. The backward recomputes the forward states (nothing is saved by the forward):
/// inside a fused group they are kept in shared memory; between groups they are stored in the
/// caller's workspace.
///
/// Precision: accumulation and the fused intermediates are fp32 for f16/bf16/f32 and fp64 for f64;
/// states stored between groups have the operands' dtype. The fused kernels never use TF32; cuBLAS
/// steps use it only when `fp32_math` allows.

#include <sparsekern/dense.h>
#include <sparsekern/types.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace sparsekern::kron {

/// Parameters of Y = X · (F1 ⊗ … ⊗ Fn).
///
/// All operands share `dtype` and `device`. Factors are strided views (a transposed factor costs no
/// copy) with a unit stride along one of their two dims; X and Y have a unit column stride.
struct MatmulParams {
  DType dtype = DType::f32;
  Device device{};
  MatrixView x{};                       ///< M × P (batch_stride ignored)
  const MatrixView* factors = nullptr;  ///< `num_factors` views, Fk: pk × qk, pk, qk ≥ 1
  int num_factors = 0;
  MutableMatrixView y{};                ///< M × Q; must not overlap x
  dense::Fp32Math fp32_math = dense::Fp32Math::ieee;  ///< whether cuBLAS steps may use TF32 for f32
  Workspace workspace{};                ///< at least matmul_workspace_size(*this) bytes on `device`
  Workspace blas_workspace{};           ///< optional cuBLAS workspace (see dense::gemm_workspace_size)
  /// Optional (data == nullptr: not kept): a buffer of matmul_saved_states_size(*this) bytes in
  /// which matmul() keeps the intermediate states between its kernels, for a later
  /// matmul_backward() of the same operands to read instead of recomputing them (the training
  /// forward: an activation-sized buffer held until the backward, one recompute pass saved).
  /// With it, matmul() needs no `workspace`.
  Workspace saved_states{};
};

/// Bytes of `saved_states` for these shapes, dtype and device: the intermediate states that
/// matmul_backward() would recompute. For two fp32 factors that run the register-tile forward and
/// backward (see set_backward_kernel), the state T0 = X·(I ⊗ F2) (M × p1·q2), which the forward's
/// first step computes anyway. 0 when there is nothing to keep: one kernel group otherwise (no
/// intermediate state), or a backward whose groups differ from the forward's (it then recomputes
/// its own). Data pointers are not read.
std::size_t matmul_saved_states_size(const MatmulParams& p);

/// Bytes of `workspace` that matmul() needs for these shapes, dtype and device (0 when every
/// factor fits in one fused group). Data pointers are not read.
std::size_t matmul_workspace_size(const MatmulParams& p);

/// Validates `p` and computes Y on `p.device` (CPU, or CUDA on `stream`). Throws InvalidArgument /
/// TypeMismatch / BackendUnavailable / CudaError; never synchronises the host.
void matmul(const MatmulParams& p, Stream stream);

/// Parameters of the backward of Y = X · (F1 ⊗ … ⊗ Fn): ∂ℓ/∂X and ∂ℓ/∂Fk given G = ∂ℓ/∂Y.
struct MatmulBackwardParams {
  DType dtype = DType::f32;
  Device device{};
  MatrixView x{};                       ///< M × P, the forward input
  const MatrixView* factors = nullptr;  ///< as in MatmulParams
  int num_factors = 0;
  MatrixView grad_y{};                  ///< M × Q, unit column stride
  MutableMatrixView grad_x{};           ///< M × P, unit column stride; data == nullptr: not wanted
  /// `num_factors` outputs, ∂ℓ/∂Fk of shape pk × qk with any strides; an entry with
  /// data == nullptr (or a nullptr array) is not wanted. Outputs must not overlap any operand.
  const MutableMatrixView* grad_factors = nullptr;
  dense::Fp32Math fp32_math = dense::Fp32Math::ieee;
  Workspace workspace{};                ///< at least matmul_backward_workspace_size(*this) bytes
  Workspace blas_workspace{};
  /// Optional: the `saved_states` buffer of a matmul() of the same x and factors (on the same
  /// stream, or ordered before this call), at least matmul_saved_states_size bytes (checked against
  /// `saved_states.bytes`); the backward then reads the intermediate states from it instead of
  /// recomputing them, and needs that much less `workspace`. Ignored (recompute) where
  /// matmul_saved_states_size is 0.
  Workspace saved_states{};
};

/// Bytes of `workspace` that matmul_backward() needs (less with `saved_states`).
std::size_t matmul_backward_workspace_size(const MatmulBackwardParams& p);

/// Validates `p` and computes the wanted gradients (each written in full, with no accumulation
/// into the old contents). Throws like matmul().
void matmul_backward(const MatmulBackwardParams& p, Stream stream);

/// Which fused forward kernel fp32 products use when all their factors fuse into one group (every
/// p, q ≤ 64; the register-tile kernel also needs every q to be a multiple of 4; the small-factor
/// kernel square factors with every p ∈ {4, 8, 16, 32} and 1024 ≤ Π p ≤ 8192): "auto" (the
/// default: the small-factor kernel where it fits and every p ≤ 16, else the register-tile kernel
/// where some p ≥ 32, else the generic one, as measured faster on an H200), "small" (the
/// small-factor kernel wherever it fits, factors of 32 included; else as auto), "new" (the
/// register-tile kernel wherever it fits: 8×8 or 4×4 register tiles, a persistent grid, cp.async
/// prefetch of the next tile) or "old" (the generic fused kernel that every other case runs). The
/// environment variable SPARSEKERN_KRON_FWD=auto|old|new|small chooses it, read once at the first
/// plan; set_forward_kernel overrides that for the process ("" reads the environment again).
/// "new:tile=8|4,rows=N,stages=1|2,threads=256|128,grid=N" (any subset) also overrides the
/// register-tile plan's choices where they fit (grid caps the persistent grid, so that small
/// inputs give a block several tiles), "small:threads=128|256,grid=N" the small-factor plan's:
/// measurement and test knobs.
/// For A/B measurements and tests; throws InvalidArgument for any other name. forward_kernel()
/// returns the selection in the same syntax.
void set_forward_kernel(const std::string& name);
std::string forward_kernel();

/// The fused native backward of a two-factor fp32 product whose factors are at most 64 × 64 with
/// sides that are multiples of 4: "auto" or "new" (the default; the register-tile backward, one
/// kernel computing ∂ℓ/∂X and both ∂ℓ/∂F with the ∂ℓ/∂F sums kept in registers) or "old" (the
/// generic fused backward that every other shape runs). SPARSEKERN_KRON_BWD_KERNEL chooses it, read
/// once at the first backward plan; set_backward_kernel overrides that for the process ("" reads
/// the environment again). "new:tile=8,rows=N,stages=1|2,grid=N" overrides the plan's choices (for
/// measurements and tests); any other name throws InvalidArgument. backward_kernel() returns the
/// selection in the same syntax.
/// The fiber-per-thread backward runs the products the small-factor forward takes (fp32, square
/// factors of 4, 8, 16 or 32, 1024 ≤ Π p ≤ 8192): one kernel for ∂ℓ/∂X and every ∂ℓ/∂F, all
/// intermediate states in shared memory. "auto" takes it for three or more factors (1.3-2.6x
/// faster than the generic fused backward on an H100); "small" (or "small:threads=128|256,grid=N")
/// for two as well (32 ⊗ 32, where the register-tile backward is faster); other shapes as "auto".
/// "small:lean=1" (three or more factors; opt-in, measured 4-20% slower on an H100) keeps one tile
/// buffer less per block (X is read again from global memory for mode 0's contraction), so that
/// more blocks fit per SM.
void set_backward_kernel(const std::string& name);
std::string backward_kernel();

/// A number that every set_forward_kernel / set_backward_kernel call changes. matmul_backward
/// plans again with the selection current when it runs, and the layout of the states a forward
/// kept (MatmulParams::saved_states) follows the forward's plan: where the selection changed in
/// between, that buffer holds other states than the backward reads (wrong ∂ℓ/∂F, no error). So a
/// caller keeping states records selection_epoch() at the forward and passes them to the backward
/// only if it is unchanged (else passes none: the backward recomputes them), as the Python layer does.
std::uint64_t selection_epoch();

/// One line per kernel of the execution plan matmul() (or, with `backward`, matmul_backward())
/// would run for these shapes on this device: fused groups with their tiles, cuBLAS steps. For
/// diagnostics and benchmark reports.
std::string describe_plan(const MatmulParams& p, bool backward = false);

}  // namespace sparsekern::kron
