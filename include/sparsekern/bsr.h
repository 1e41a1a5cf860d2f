#pragma once
/// @file bsr.h
/// @brief Block-sparse matrix products (BSR layout, square b × b blocks, b ∈ {16, 32, 64, 128}):
///        dsd (dense = sparse · dense), dds (dense = dense · sparse) and sdd (sparse = dense · dense
///        on a block pattern), each with the sparse operand optionally transposed.
///
/// CUDA: tensor-core kernels for fp16, bf16, and fp32 when TF32 is allowed: TMA + wgmma on
/// compute capability 9.0 (16-bit dds with row-major C, b ≥ 32; 16-bit sdd, b ≥ 64) when built for
/// sm_90a, CuTe HMMA + cp.async otherwise; fp32 without TF32 and fp64 run a correct SIMT kernel
/// (slower). CPU: every dtype.

#include <sparsekern/dense.h>  // dense::Fp32Math
#include <sparsekern/types.h>

#include <cstdint>

namespace sparsekern::bsr {

/// A non-owning view of a block-sparse matrix S (rows × cols) and the three index sets the kernels
/// use. All index arrays are int32 on the device of `values`.
///
/// - Values: `nnz_blocks` blocks of b × b elements, each row-major and contiguous, one after the
///   other, ordered by block row then block column (BSR order).
/// - Row-wise index set (BSR): the blocks of block row i are values[block_row_offsets[i] ..
///   block_row_offsets[i+1]), in block columns block_col_indices[...] (strictly increasing).
/// - Coordinate list: block p sits at (block_row_indices[p], block_col_indices[p]).
/// - Column-wise index set (CSC of the pattern + a permutation into the values, so that Sᵀ needs
///   no data movement): the blocks of block column j, by increasing block row, are entries
///   e ∈ [block_col_offsets[j], block_col_offsets[j+1]) with block row block_rows_by_col[e] and
///   value index blocks_by_col[e].
///
/// Each op reads only the index sets it needs (documented per op); the others may be null.
/// The index sets must be valid (sorted, in range, consistent): CPU calls check them, CUDA calls
/// trust them (checking would need a host synchronisation); sparsekern.BlockSparseMatrix builds
/// and validates them.
struct BlockSparseView {
  std::int64_t rows = 0;        ///< rows of S (a multiple of block_size)
  std::int64_t cols = 0;        ///< columns of S (a multiple of block_size)
  std::int64_t block_size = 0;  ///< b: 16, 32, 64 or 128
  std::int64_t nnz_blocks = 0;  ///< number of stored blocks
  const void* values = nullptr;
  const std::int32_t* block_row_offsets = nullptr;  ///< rows/b + 1
  const std::int32_t* block_col_indices = nullptr;  ///< nnz_blocks
  const std::int32_t* block_row_indices = nullptr;  ///< nnz_blocks
  const std::int32_t* block_col_offsets = nullptr;  ///< cols/b + 1
  const std::int32_t* block_rows_by_col = nullptr;  ///< nnz_blocks
  const std::int32_t* blocks_by_col = nullptr;      ///< nnz_blocks
};

/// C = op(S) · B, op(S) = S or Sᵀ (`transpose_s`); B dense k × n, C dense m × n.
///
/// Reads the row-wise index set (op = S) or the column-wise one (op = Sᵀ). On CUDA, `b` must have
/// a unit row stride (column-major) and `c` a unit stride along one of its dims, with the other
/// strides multiples of 16 bytes and 16-byte aligned data, for the tensor-core path; other layouts
/// run the SIMT kernel. The Python layer arranges the fast layouts.
struct DsdParams {
  DType dtype = DType::f32;
  Device device{};
  BlockSparseView s{};
  bool transpose_s = false;
  MatrixView b{};         ///< k × n
  MutableMatrixView c{};  ///< m × n, write-only (its old contents, even NaN, are ignored)
  dense::Fp32Math fp32_math = dense::Fp32Math::ieee;
};

/// C = A · op(S) (+ bias), op(S) = S or Sᵀ; A dense m × k, C dense m × n, bias (optional) n values
/// added to every row of C.
///
/// Reads the column-wise index set (op = S) or the row-wise one (op = Sᵀ). On CUDA, the
/// tensor-core path needs `a` with a unit column stride and `c` with a unit column stride, row
/// strides multiples of 16 bytes and 16-byte aligned data; other layouts run the SIMT kernel.
struct DdsParams {
  DType dtype = DType::f32;
  Device device{};
  MatrixView a{};  ///< m × k
  BlockSparseView s{};
  bool transpose_s = false;
  const void* bias = nullptr;  ///< n elements of `dtype`, or null
  MutableMatrixView c{};       ///< m × n, write-only
  dense::Fp32Math fp32_math = dense::Fp32Math::ieee;
  /// Optional scratch on the device (CUDA only; ignored on the CPU): null, or at least
  /// kDdsWorkspaceBytes, 4-byte aligned. With it, the Hopper kernels hand out their output tiles
  /// from an atomic counter kept there (zeroed on `stream` before each launch), each row panel's
  /// heaviest block columns first, so that SMs given light columns take more tiles; without it
  /// every CTA takes a fixed round-robin share, which leaves SMs idle when the block columns hold
  /// unequal numbers of blocks (e.g. any random pattern). Used where each SM gets several tiles
  /// (see sm90::use_dynamic_tiles); small problems keep the round-robin share. Like a cuBLAS workspace, it must not be
  /// in use by another operation that may run at the same time (one buffer per stream is safe).
  /// With dds_workspace_bytes(p) bytes, 16-byte aligned, an fp32 (TF32) product with op(S) = S on a
  /// Hopper GPU also copies the blocks there transposed, so that it runs the wgmma kernel (which
  /// reads tf32 blocks K-major only) instead of the SM80 one: the input gradient of a linear layer.
  /// A smaller workspace keeps the SM80 kernel for those products.
  /// With dds_dense_workspace_bytes(p) > 0 bytes, 256-byte aligned (16-bit or TF32, small blocks at
  /// a density where the block-sparse kernels are slower than a dense product, enough rows, on a
  /// compute capability 9.0 GPU), op(S) is written dense into the workspace (k × n elements, the
  /// size of the dense matrix) and multiplied with cuBLAS; the bias is written into C first and
  /// accumulated (beta = 1). Needs `a` with a unit stride along one dim and `c` row-major.
  /// SPARSEKERN_BSR_DDS_DENSE=0 turns this off (1: wherever the dtype allows, for comparisons).
  Workspace workspace{};
};

/// Bytes of DdsParams::workspace that enable the dynamic tile schedule.
constexpr std::size_t kDdsWorkspaceBytes = 16;

/// Bytes of DdsParams::workspace that give `p` its fastest kernel: dds_dense_workspace_bytes(p)
/// where the dense path applies; else kDdsWorkspaceBytes, plus room for the transposed blocks where
/// the product takes them (fp32 with TF32, op(S) = S, b ∈ {64, 128}, at least 1.5 blocks per block
/// column of S on average, a compute capability 9.0 GPU and a build with sm_90a). Reads p's dtype,
/// fp32_math, transpose_s, device, a.rows, s.block_size, s.rows, s.cols and s.nnz_blocks; queries
/// the device's compute capability once (no synchronisation).
std::size_t dds_workspace_bytes(const DdsParams& p);

/// Bytes of DdsParams::workspace with which `p` takes the dense path above (then also what
/// dds_workspace_bytes returns), 0 where the block-sparse kernels run. Reads p's dtype, fp32_math,
/// transpose_s, device, a.rows, s.block_size, s.rows, s.cols and s.nnz_blocks.
std::size_t dds_dense_workspace_bytes(const DdsParams& p);

/// values[p] = (A · B) restricted to block p of `pattern`, for every stored block: a sampled dense
/// product (the gradient of dsd/dds with respect to the sparse values).
///
/// Reads the coordinate list; `pattern.values` is ignored, the result goes to `out_values`
/// (nnz_blocks × b × b, BSR order, write-only). On CUDA, the tensor-core path needs `a` with a unit
/// row stride (column-major) and `b` with a unit column stride (row-major), the other strides
/// multiples of 16 bytes and 16-byte aligned data; other layouts run the SIMT kernel.
struct SddParams {
  DType dtype = DType::f32;
  Device device{};
  MatrixView a{};  ///< m × k
  MatrixView b{};  ///< k × n
  BlockSparseView pattern{};  ///< m × n
  void* out_values = nullptr;
  dense::Fp32Math fp32_math = dense::Fp32Math::ieee;
  /// Optional device scratch (CUDA only): null, or sdd_workspace_bytes(p) bytes, 16-byte aligned.
  /// wgmma reads tf32 operands K-major only, so with fp32 (TF32) on a Hopper GPU the product copies
  /// `a` and `b` transposed into it (unless they already are: `a` row-major and `b` column-major)
  /// and runs the wgmma kernel; without it (or with fewer bytes), the SM80 (mma.sync) kernel.
  /// With sdd_dense_workspace_bytes(p) > 0 bytes, 256-byte aligned (16-bit or TF32 at a density
  /// where the sampled kernels are slower than the dense product they sample, on a compute
  /// capability 9.0 GPU; `a` and `b` with a unit stride along one dim), the product is computed
  /// whole with cuBLAS into the workspace and the pattern's blocks copied out: a transient buffer
  /// of m × n elements (plus cuBLAS's workspace), the size of the dense matrix; in TF32 also room
  /// for the smaller operand transposed (min(m, n) × k floats), which cuBLAS's TF32 kernels then
  /// read K-major where `a` is column-major and `b` row-major (a weight gradient's layouts; 30%
  /// faster on an H100). A workspace without that room runs the product on the operands as given.
  /// SPARSEKERN_BSR_SDD_DENSE=0 turns this off (1: wherever the dtype allows, for comparisons).
  /// Split K: where the pattern gives the GPU too few tiles for a long K (fp16 / bf16 with blocks of
  /// 64 or 128 on a compute capability 9.0 GPU in an sm_90a build: fewer 64-row block slices than
  /// SMs; the SM80 kernels, tf32 included: about a wave of tiles or less, or a short last wave), the
  /// kernel splits K and writes fp32 partials (splits · nnz_blocks · b² floats) into the workspace,
  /// which a second kernel sums in split order (deterministic) into out_values; without the room
  /// (sdd_split_workspace_bytes(p)), no split. SPARSEKERN_BSR_SDD_SPLIT=0 never splits, N ≥ 2
  /// forces N splits (comparisons, tests).
  /// Stream-ordered like DdsParams::workspace.
  Workspace workspace{};
  /// Optional: `a_row_sums` (m values of the dtype, write-only) receives r[i] = Σ_j a[i, j], summed
  /// in fp32 and rounded once. With `a` = ∂ℓ/∂yᵀ this is the bias gradient of the linear layer
  /// y = x · Wᵀ + bias whose weight gradient the product computes (`b` = x): one pass over ∂ℓ/∂y
  /// instead of a separate reduction. On CUDA the SM80 (mma.sync) kernel sums the operand tiles it
  /// loads anyway: the first CTA of each block row, its warps of the first warp column, from their
  /// A fragments. Rows of empty block rows, and the other kernels (dense path, wgmma, SIMT), take a
  /// column-sum pass over `a` instead. Needs the row-wise index set (block_row_offsets) and, on
  /// CUDA, `row_sums_workspace` of sdd_row_sums_workspace_bytes(p) bytes (16-byte aligned,
  /// stream-ordered like `workspace`, separate from it).
  void* a_row_sums = nullptr;
  Workspace row_sums_workspace{};
};

/// Whether the kernel that runs `p` on CUDA sums a's rows itself when a_row_sums is set: the
/// HMMA sdd (weight-gradient layouts: `a` column-major, `b` row-major), ungrouped, without the
/// dense path's workspace. Elsewhere a_row_sums costs a separate column-sum pass over `a`, as a
/// caller's own reduction would. Reads p's device, dtype, fp32_math, a.rows, a.cols, b.cols,
/// pattern.block_size and pattern.nnz_blocks; false on the CPU.
bool sdd_row_sums_fused(const SddParams& p);

/// Bytes of SddParams::row_sums_workspace for `p` with a_row_sums set (0 on the CPU): fp32 partial
/// sums of the fused kernel per split and of the column-sum pass per chunk of k, and one counter
/// per group of rows. Reads p's device, dtype, fp32_math, a.rows, a.cols, pattern.block_size and
/// pattern.nnz_blocks.
std::size_t sdd_row_sums_workspace_bytes(const SddParams& p);

/// Bytes of SddParams::workspace with which `p` takes the dense path above, 0 where the sampled
/// kernels run. Reads the same fields as sdd_workspace_bytes; queries the device's compute
/// capability once (no synchronisation).
std::size_t sdd_dense_workspace_bytes(const SddParams& p);

/// Bytes of SddParams::workspace for `p` (0 where no kernel uses one): sdd_dense_workspace_bytes(p)
/// where the dense path applies, else the transposed copies of an fp32 (TF32) product's operands
/// with b ∈ {64, 128} on a compute capability 9.0 GPU (sm_90a build), where the pattern holds
/// enough blocks for the faster kernel to repay the copies (see bsr.cpp), or the split-K partials
/// (sdd_split_workspace_bytes), whichever is larger. Reads p's dtype, fp32_math, device,
/// pattern.block_size, pattern.nnz_blocks, a.rows, a.cols and b.cols.
std::size_t sdd_workspace_bytes(const SddParams& p);

/// Bytes of SddParams::workspace for the split-K partials of `p` where its kernel splits K (see
/// SddParams::workspace), 0 where it does not. Reads the same fields as sdd_workspace_bytes;
/// queries the device's compute capability and the kernel's occupancy once (no synchronisation).
std::size_t sdd_split_workspace_bytes(const SddParams& p);

/// Whether fp32 (TF32) products with blocks of `block_size` run the sm_90a wgmma kernels on
/// `device` when their operands are K-major (sdd: `a` row-major, `b` column-major, read without
/// copies): a build with sm_90a, a compute capability 9.0 GPU, b ∈ {64, 128},
/// SPARSEKERN_BSR_SM90 not 0. False on the CPU and in a build without CUDA.
bool tf32_wgmma(Device device, std::int64_t block_size);

/// Validates `p` and runs dsd on `p.device` (CPU, or CUDA on `stream`). Throws InvalidArgument /
/// TypeMismatch / BackendUnavailable / CudaError; never synchronises the host.
void dsd(const DsdParams& p, Stream stream);

/// Validates `p` and runs dds on `p.device`. Same errors as dsd().
void dds(const DdsParams& p, Stream stream);

/// Validates `p` and runs sdd on `p.device`. Same errors as dsd().
void sdd(const SddParams& p, Stream stream);

/// Checks the index sets of `s` (offsets monotone and consistent with nnz_blocks, indices in
/// range, strictly increasing within each block row / column, the three sets describing the same
/// pattern; a set that is given with its companions: row offsets with column indices, row indices
/// with column indices, column offsets with both column-wise arrays). Null arrays are not checked.
/// The arrays must be host-accessible. Throws InvalidArgument naming the broken array.
void validate_pattern(const BlockSparseView& s);

}  // namespace sparsekern::bsr
