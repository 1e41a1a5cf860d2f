#pragma once
// Internal form of the block-sparse products. dsd and dds are both computed as a "dds problem"
// C = A · Bop with Bop block-sparse and described by block column (dsd(op(S), B) is the transposed
// problem Cᵀ = Bᵀ · op(S)ᵀ, expressed with swapped strides, no copies); sdd keeps its own form.
#include <sparsekern/bsr.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace sparsekern::bsr::detail {

/// Bop (k × n, block-sparse) by block column: the entries of block column j are
/// e ∈ [offsets[j], offsets[j+1]), in block row indices[e], stored in
/// values[value_index ? value_index[e] : e]; with transposed_blocks, Bop's block is the transpose
/// of the stored one.
struct SparseOperand {
  std::int64_t k_blocks = 0;
  std::int64_t n_blocks = 0;
  std::int64_t block = 0;
  std::int64_t nnz_blocks = 0;
  const void* values = nullptr;
  const std::int32_t* offsets = nullptr;
  const std::int32_t* indices = nullptr;
  const std::int32_t* value_index = nullptr;
  bool transposed_blocks = false;
};

/// C (m × n) = A (m × k) · Bop (+ bias per column of C). Views are validated and consistent.
struct DdsProblem {
  DType dtype = DType::f32;
  Device device{};
  dense::Fp32Math fp32_math = dense::Fp32Math::ieee;
  MatrixView a{};
  SparseOperand s{};
  const void* bias = nullptr;
  MutableMatrixView c{};
  int* tile_counter = nullptr;  ///< from DdsParams::workspace (CUDA), or null
  /// From DdsParams::workspace when it holds dds_workspace_bytes(): room for the nnz_blocks blocks
  /// transposed (fp32, Bop = S on Hopper; see dds_cuda), 16-byte aligned; else null.
  void* block_scratch = nullptr;
  /// From DdsParams::workspace when it holds dds_dense_bytes() > 0: room for Bop written dense
  /// (k × n, row-major) and cuBLAS's workspace behind it (the dense path, see dds_dense in
  /// bsr_cuda.cu); else null.
  void* dense_scratch = nullptr;
  std::size_t dense_scratch_bytes = 0;
};

/// Offset of the transposed blocks in DdsParams::workspace (after the tile counter).
constexpr std::size_t kDdsScratchOffset = 256;

/// Where SddParams::workspace holds the K-major copies of a tf32 sdd's operands: `a` (m × k) as
/// row-major lines of ldk floats from offset 0, `b` (k × n) as column-major lines of ldk floats
/// from b_offset (256-byte aligned); k is padded to ldk so that every line starts 16-byte aligned.
struct SddCopies {
  std::int64_t ldk;
  std::size_t b_offset, bytes;
};
inline SddCopies sdd_copies(std::int64_t m, std::int64_t k, std::int64_t n) {
  const std::int64_t ldk = (k + 3) / 4 * 4;
  const std::size_t b_offset = (std::size_t(m) * std::size_t(ldk) * sizeof(float) + 255) / 256 * 256;
  return {ldk, b_offset, b_offset + std::size_t(n) * std::size_t(ldk) * sizeof(float)};
}

/// Bytes of DdsParams::workspace for the tile counter and, where they pay, the transposed tf32
/// blocks (kDdsWorkspaceBytes otherwise).
std::size_t dds_copy_bytes(const DdsParams& p);

/// Bytes of SddParams::workspace for the tf32 K-major copies (see sdd_copies), 0 where they would
/// not pay or do not apply.
std::size_t sdd_copy_bytes(const SddParams& p);

/// Bytes of SddParams::workspace for the fp32 partials of a split-K sdd (the sm_90a 16-bit kernel:
/// sdd_splits in bsr_cuda.cu; the SM80 kernel: sdd_tc_splits), 0 where it does not split (or in a
/// build without CUDA).
std::size_t sdd_split_bytes(const SddParams& p);

/// An auto | 0 | 1 switch from the environment variable `name`: -1 (unset, empty or auto), 0 or 1;
/// anything else throws, naming the variable.
int auto_off_on(const char* name);

/// Bytes of a dense m × n matrix (row-major, rows of n elements) at the start of a dense path's
/// scratch (the whole product of sdd, Bop of dds), rounded up to 256 so that cuBLAS's workspace
/// behind it is aligned.
inline std::size_t dense_matrix_bytes(std::int64_t m, std::int64_t n, DType dtype) {
  return (std::size_t(m) * std::size_t(n) * dtype_size(dtype) + 255) / 256 * 256;
}

/// Bytes of SddParams::workspace with which the sdd computes the whole product with cuBLAS and
/// copies out the pattern's blocks (C, in TF32 the transposed operand of sdd_dense_copy_bytes, then
/// cuBLAS's workspace), 0 where the sampled kernels run
/// (CPU, a build without CUDA, SPARSEKERN_BSR_SDD_DENSE=0, or below the measured density).
std::size_t sdd_dense_bytes(const SddParams& p);

/// Bytes of DdsParams::workspace with which the dds writes Bop dense and multiplies with cuBLAS
/// (the tile-counter area, Bop, cuBLAS's workspace), 0 where the block-sparse kernels run (CPU, a
/// build without CUDA, SPARSEKERN_BSR_DDS_DENSE=0, few rows, or below the measured density).
std::size_t dds_dense_bytes(const DdsParams& p);

/// Whether fp32 (TF32) products with blocks of `block` run the sm_90a wgmma kernels on CUDA device
/// `device` when their operands are K-major: a build with sm_90a, compute capability 9.0,
/// b ∈ {64, 128}, SPARSEKERN_BSR_SM90 not 0. False in a build without CUDA.
bool tf32_wgmma(int device, std::int64_t block);

/// SddParams::row_sums_workspace (CUDA): the fused kernel's per-lane partials ([split][row][4
/// lanes] fp32, tc::TcParams::row_partial), the column-sum pass's partials ([chunk][row] fp32,
/// chunks of `chunk_lines` lines of k, at most kRowSumMaxChunks) and one int counter per group of
/// kRowSumGroup rows (the pass's last CTA of a group adds the chunks up), each 256-byte aligned.
constexpr int kRowSumGroup = 128;      // rows per CTA of the column-sum pass (32 lanes × 4)
constexpr int kRowSumMinLines = 128;   // lines of k per chunk, at least (16 per warp: loads in flight)
constexpr int kRowSumMaxChunks = 64;
struct RowSumsLayout {
  int splits = 1, chunks = 1, chunk_lines = kRowSumMinLines;
  std::int64_t groups = 0;
  std::size_t chunk_off = 0, counter_off = 0, bytes = 0;
};
inline RowSumsLayout row_sums_layout(std::int64_t m, std::int64_t k, int splits) {
  auto up256 = [](std::size_t x) { return (x + 255) / 256 * 256; };
  RowSumsLayout l;
  l.splits = splits > 1 ? splits : 1;
  const std::int64_t per_chunk = (k + kRowSumMaxChunks - 1) / kRowSumMaxChunks;
  l.chunk_lines = int(std::max<std::int64_t>(kRowSumMinLines, (per_chunk + 7) / 8 * 8));
  l.chunks = int(std::max<std::int64_t>(1, (k + l.chunk_lines - 1) / l.chunk_lines));
  l.groups = (m + kRowSumGroup - 1) / kRowSumGroup;
  l.chunk_off = up256(std::size_t(l.splits) * std::size_t(m) * 4 * sizeof(float));
  l.counter_off = l.chunk_off + up256(std::size_t(l.chunks) * std::size_t(m) * sizeof(float));
  l.bytes = l.counter_off + up256(std::size_t(l.groups) * sizeof(int));
  return l;
}

/// Whether the SM80 (HMMA) sdd, ungrouped, runs `p` when its operands have the weight-gradient
/// layouts and no dense-path workspace is given (sdd_row_sums_fused; false without CUDA).
bool sdd_sm80_ungrouped(const SddParams& p);

/// The split count the SM80 sdd would use for `p` (1 where it does not split or does not run).
int sdd_row_sum_splits(const SddParams& p);

/// r = Σ_j a[i, j] into p.a_row_sums (see SddParams::a_row_sums): rows of block rows that hold a
/// block from the fused kernel's partials when `fused` (l.splits of them per row, in split order),
/// every other row by a column-sum pass over `a`. Zeroes the counters first (cudaMemsetAsync);
/// `stream` is a cudaStream_t.
void sdd_row_sums_finish(const SddParams& p, const RowSumsLayout& l, bool fused, void* stream);

void dds_cpu(const DdsProblem& p);
void sdd_cpu(const SddParams& p);
void dds_cuda(const DdsProblem& p, Stream stream);
void sdd_cuda(const SddParams& p, Stream stream);

}  // namespace sparsekern::bsr::detail
