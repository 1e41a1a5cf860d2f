#pragma once
// Hopper (sm_90a) path of the block-sparse dds product: TMA loads + wgmma, warp-specialized and
// persistent. One explicit instantiation per (element, block size, B major) in sm90/gen/.
#include <cstdint>

#include "../tc/params.h"

namespace sparsekern::bsr::sm90 {

/// Element tags (the kernels use CUTLASS's half_t / bfloat16_t / tfloat32_t internally; tf32 is
/// fp32 data multiplied on tf32 tensor cores, dds with Bop = Sᵀ only: wgmma takes tf32 operands
/// K-major only).
enum class Elem { f16, bf16, tf32 };

/// Tile schedules of the persistent dds kernels (tc::TcParams::schedule). The dynamic ones need
/// tc::TcParams::tile_counter; without it the kernels run kStatic.
enum Schedule : int {
  kStatic = 0,     ///< CTA c takes tiles c, c + gridDim.x, … (no counter needed)
  kDynamic = 1,    ///< tiles from an atomic counter, row panel by row panel (rotated columns)
  kHeavyFirst = 2  ///< as kDynamic, each row panel's columns (or groups) heaviest first
};

/// Whether this build holds the sm_90a kernels (CMAKE_CUDA_ARCHITECTURES names 90a).
bool built();

/// C (m × n, row-major, ldc) = A (m × k, row-major, lda) · Bop (+ bias), Bop block-sparse with
/// blocks of kBlock (column-wise index set in p.offsets/indices/value_index, as for tc::dds_launch).
/// kBKMajor: Bop = Sᵀ (stored blocks read transposed). Requirements (checked by the caller):
/// compute capability 9.0, p.c_col_major == false, 16-byte aligned A/C/values with 16-byte
/// aligned row strides, p.nnz > 0, m and k below 2³¹. `stream` is a cudaStream_t. Returns false
/// (nothing launched) when the driver refuses a TMA descriptor: the caller runs the SM80 kernel.
template <Elem kElem, int kBlock, bool kBKMajor>
bool dds_launch(const tc::TcParams& p, int n_block_cols, int num_sms, void* stream);

/// As dds_launch (16-bit: kBlock ∈ {32, 64, 128}; tf32: 64, 128 with Bop = Sᵀ): output tiles of
/// 256 rows × 128 / kBlock block columns, whose k loop walks the union of those columns' k blocks
/// (see gdds_sm90.cuh).
template <Elem kElem, int kBlock, bool kBKMajor>
bool gdds_launch(const tc::TcParams& p, int n_block_cols, int num_sms, void* stream);

/// values[p] = (A · B)[block p] for the `nnz_blocks` blocks of the pattern (p.block_rows/block_cols),
/// A (a_rows × p.k) with unit row stride (column stride p.lda), B (p.k × b_cols) with unit column
/// stride (row stride p.ldb), out written row-major per block. kBlock ∈ {64, 128}; requirements
/// as for dds_launch (p.k > 0, 16-byte alignment, sizes below 2³¹).
template <Elem kElem, int kBlock>
bool sdd_launch(const tc::TcParams& p, int nnz_blocks, int a_rows, int b_cols, int num_sms, void* stream);

}  // namespace sparsekern::bsr::sm90
