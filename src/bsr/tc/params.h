#pragma once
// Kernel-level parameters of the block-sparse tensor-core kernels (plain types: shared by the CUDA
// launchers, the dispatcher in bsr_cuda.cu and the host emulation test).
#include <cstdint>

namespace sparsekern::bsr::tc {

/// One launch of a dds-family kernel (C = A · Bop, Bop block-sparse, one CTA per 128-row panel of
/// A and one BN-wide slice of a block column of Bop) or of the sdd kernel (one CTA per block).
/// Strides are in elements; which dim of each dense operand is unit-stride is fixed by the kernel.
struct TcParams {
  // dds: A is m × k with unit column stride (K-major), row stride `lda`.
  // sdd: A is m × k with unit row stride (M-major), column stride `lda`.
  const void* a = nullptr;
  std::int64_t lda = 0;
  // sdd only: B is k × n with unit column stride (N-major), row stride `ldb`.
  const void* b = nullptr;
  std::int64_t ldb = 0;
  // dds only: C is m × n, row-major (c_col_major = false: unit column stride, row stride `ldc`) or
  // column-major (unit row stride, column stride `ldc`).
  void* c = nullptr;
  std::int64_t ldc = 0;
  bool c_col_major = false;
  const void* bias = nullptr;  ///< dds, row-major C only: n values added to every row (or null)

  // Block-sparse operand of dds: the entries of block column j of Bop are e in
  // [offsets[j], offsets[j+1]); entry e is the block at block row indices[e], stored in
  // values[value_index ? value_index[e] : e] (b × b, row-major). kBKMajor kernels read each stored
  // block transposed (Bop = Sᵀ), the others as stored (Bop = S).
  const void* values = nullptr;
  const std::int32_t* offsets = nullptr;
  const std::int32_t* indices = nullptr;
  const std::int32_t* value_index = nullptr;

  // sdd: block p of the output is at (block_rows[p], block_cols[p]) and is written to
  // out_values + p·b·b (row-major).
  const std::int32_t* block_rows = nullptr;
  const std::int32_t* block_cols = nullptr;
  void* out_values = nullptr;

  std::int64_t m = 0;  ///< dds: rows of A and C
  std::int64_t a_cols = 0;  ///< dds: columns of A (k); read by the sm_90 path's TMA descriptor
  std::int64_t nnz = 0;     ///< dds: stored blocks in `values`, read by the sm_90 path; sdd: blocks of the pattern
  // dds on sm_90a: a device int the launcher zeroes on the stream, from which the persistent
  // kernels hand out their output tiles (null: static round-robin tiles), and the order in which
  // they are handed out (sm90::Schedule).
  int* tile_counter = nullptr;
  int schedule = 0;
  // dds on sm_90a, 16-bit output of the grouped kernel: store C through shared memory and TMA where
  // C admits a descriptor (false: from registers; SPARSEKERN_BSR_TMA_STORE=0, for comparisons).
  bool tma_store = true;
  // sdd, split K (SM80 kernel; few tiles over a long K): `splits` > 1 CTAs per tile, CTA split s
  // reducing k-steps [s · split_steps, (s + 1) · split_steps) of the kernel's BK into fp32 partials
  // at partial + s · nnz · b² (the layout of out_values, nnz = p.nnz); tc::sdd_split_reduce sums them
  // in split order (deterministic) into out_values. splits = 1: out_values written directly.
  int splits = 1;
  int split_steps = 0;
  float* partial = nullptr;
  // sdd, fused row sums of A (SddParams::a_row_sums; SM80 kernel): where row_partial is set, the
  // first CTA of each block row (blk == block_row_offsets[block_rows[blk]]; every tile of its
  // first tile column) adds up the A fragments of its warps of warp column 0, and each lane writes
  // its fp32 sum over its k residues at row_partial[(split · row_stride + row) · 4 + lane % 4]
  // (sdd_row_sums_finish adds the four lanes and the splits, in that order).
  float* row_partial = nullptr;
  const std::int32_t* block_row_offsets = nullptr;
  std::int64_t row_stride = 0;  ///< rows of A (m)
  int k = 0;           ///< sdd: inner dimension
  int block = 0;       ///< b
  bool bf16 = false;   ///< 16-bit kernels: the data is bf16 (else fp16)
};

}  // namespace sparsekern::bsr::tc
