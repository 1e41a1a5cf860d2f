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
  kStatic = 0,      ///< CTA c takes tiles c, c + gridDim.x, … (no counter needed)
  kDynamic = 1,     ///< tiles from an atomic counter, row panel by row panel (rotated columns)
  kHeavyFirst = 2,  ///< as kDynamic, each row panel's columns (or groups) heaviest first
  kAuto = 3         ///< kHeavyFirst where use_dynamic_tiles says so, else kStatic (the default)
};

/// The kAuto rule: dynamic tiles where every tile-taking warp gets at least 6 tiles and the
/// columns hold at least one block each on average. Measured on an H200 (session 9, kernel µs,
/// bf16, M = 8192, dynamic vs static): 4096 → 4096 b = 128 (7.75 tiles per consumer) 47 / 63 /
/// 120 / 205 vs 58 / 72 / 126 / 227 at d = 0.05 / 0.1 / 0.25 / 0.5, b = 64 and 32 equal or
/// faster; but 3072 → 768 b = 128 (1.45 tiles per consumer) 17.7 / 43.8 vs 15.1 / 36.8 at d = 0.1
/// / 0.5, and 768 → 3072 (5.8 tiles per consumer, 0.6 / 3 blocks per column) 31.2 / 47.5 vs
/// 28.3 / 46.8 (likely the counter round trip per handed-out tile and an empty column's stage
/// hand-off, which the static schedule does not pay; not profiled). The thresholds are not swept.
inline bool use_dynamic_tiles(long long n_tiles, int workers, long long nnz, int n_block_cols) {
  return n_tiles >= 6LL * (workers > 0 ? workers : 1) && nnz >= n_block_cols;
}

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
/// stride (row stride p.ldb), out written row-major per block. kKMajor: A with unit column stride
/// (row stride p.lda) and B with unit row stride (column stride p.ldb) instead (the only layouts
/// wgmma reads tf32 from; instantiated for tf32). kBlock ∈ {64, 128}; requirements as for
/// dds_launch (p.k > 0, 16-byte alignment, sizes below 2³¹). kTM: rows per consumer tile, 64, or
/// 128 for whole blocks of 128 (instantiated for tf32). `splits` > 1 with `partial` (splits · nnz ·
/// kBlock² floats, 16-byte aligned): K split that many ways (fewer where K has fewer 128-byte
/// steps), fp32 partials summed into out by a second kernel on the same stream.
template <Elem kElem, int kBlock, bool kKMajor, int kTM = 64>
bool sdd_launch(const tc::TcParams& p, int nnz_blocks, int a_rows, int b_cols, int num_sms, void* stream,
                int splits = 1, float* partial = nullptr);

}  // namespace sparsekern::bsr::sm90
