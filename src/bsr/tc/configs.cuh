#pragma once
// The tile configurations of the block-sparse tensor-core kernels: one per (op, element path,
// tile). Each heuristic says why; the numbers are to be re-tuned on the GPU with `sparsekern bench`.
#include "kernel.cuh"

namespace sparsekern::bsr::tc {

/// dds tile: BN = kTile ≤ b (a CTA must stay inside one block column; b/BN CTAs share a column).
/// - BM = 128: the 128-row panel of the dense operand is reused by every non-zero block of the
///   column, and 128×BN fp32 accumulators fit in registers (64 per thread at BN = 64).
/// - BK = one 128-byte line of a block (64 halves / 32 floats), capped at kTile (= b for b ≤ 64):
///   a K-slice never straddles two blocks, and ldmatrix reads are conflict-free with the 128-byte
///   swizzle.
/// - 3 stages for 64-wide tiles (72 KB: 3 CTAs per H100/H200 SM), 4 for the smaller ones whose
///   stages are cheap: sparse columns are short, so a deep prologue matters more than usual.
/// - 2×2 warps (64×BN/2 per warp) for BN ≥ 32, 4×1 for BN = 16; tf32 at BN = 64 uses 4×2 warps
///   (32×32 each): with 64×32 warp tiles its scalar shared loads of N-major B pushed ptxas past
///   255 registers (spills), while 16-bit stays at ~230 registers without spills.
template <bool kTf32, int kTile, bool kBKMajor>
struct DdsConfig {
  static constexpr int kBK = min_int(kTile, kTf32 ? 32 : 64);
  static constexpr int kStages = kTile == 64 ? 3 : 4;
  static constexpr int kWM = kTile == 16 || (kTf32 && kTile == 64) ? 4 : 2;
  static constexpr int kWN = kTile == 16 ? 1 : 2;
  using type = KernelConfig<kTf32, 128, kTile, kBK, kWM, kWN, kStages, Major::K,
                            kBKMajor ? Major::K : Major::MN>;
};

/// sdd tile: T × T with T = kTile ≤ b ((b/T)² CTAs per block, each writing a finished tile, no
/// reduction). T = 128 is the whole block for b = 128 (half the operand traffic of four 64-tiles);
/// tf32 blocks of 128 run four 64-tiles: a 128-wide tf32 tile needed > 255 registers per thread
/// even with 8 warps (its scalar shared loads keep one address per fragment element live).
/// - BK = 32: K is the token dim, often not a multiple of 64; 32 keeps the zero-filled tail small.
/// - 2×2 warps (T/2 × T/2 per warp) for T = 32 and 64; 4×2 warps (32×64 each) for T = 128, where
///   64×64 warp tiles need 128 accumulators per thread and spilled (7.7 KB in tf32); one warp for
///   16×16 tiles.
/// - 4 stages (3 for tf32 128×128: 32 KB per stage) to cover global latency in the long K loop.
template <bool kTf32, int kTile>
struct SddConfig {
  static constexpr int kWM = kTile == 16 ? 1 : kTile == 128 ? 4 : 2;
  static constexpr int kWN = kTile == 16 ? 1 : 2;
  static constexpr int kStages = (kTf32 && kTile == 128) ? 3 : 4;
  using type = KernelConfig<kTf32, kTile, kTile, 32, kWM, kWN, kStages, Major::MN, Major::MN>;
};

/// Grouped sdd tile (sdd_group_body): kT rows × kG segments of kT columns, 2 × kWN warps: 16 × 32
/// warp tiles for kT = 32 (kG per row), 32 × 32 for kT = 64. Instantiated for 16-bit kT = 32,
/// kG = 4 (8 warps, 104 registers): the b = 32 weight gradient, whose 32 × 32 tiles read two k-slices
/// of 32 per 32 × 32 outputs. Measured and not instantiated (H100, session 19): tf32 kT = 32 / kG = 4
/// and kT = 64 / kG = 2 were 7-36% slower than one tile per CTA (the tf32 kernel is not bound by
/// L2 traffic), and tf32 kT = 64 / kG = 4 spilled (255 registers). 4 stages, 3 past 32 KB a stage.
template <bool kTf32, int kT, int kG>
struct SddGroupConfig {
  static_assert(kT == 32 || kT == 64, "grouped sdd tiles: kT = 32 or 64");
  static constexpr int kWM = 2;
  static constexpr int kWN = kT == 64 ? 2 * kG : kG;
  static constexpr int kStageBytes = (kT + kG * kT) * 32 * (kTf32 ? 4 : 2);
  static constexpr int kStages = kStageBytes > 32 * 1024 ? 3 : 4;
  using type = KernelConfig<kTf32, kT, kG * kT, 32, kWM, kWN, kStages, Major::MN, Major::MN>;
};

}  // namespace sparsekern::bsr::tc
