#pragma once
// Block-sparse dds on Hopper for blocks of 32 and 64 (16-bit; tf32 with blocks of 64 and Bop = Sᵀ):
// C = A · Bop (+ bias), A dense (m × k, K-major), Bop block-sparse, with output tiles that span
// several block columns.
//
// Why: dds_sm90.cuh gives each consumer a tile of one block column (256 × 32 or 128 × 64). A
// block b × b multiplies a b-wide slice of A, so every A tile loaded into shared memory serves
// 2·b FLOP per byte (b = 32: 256 × 32 tiles reach 28 FLOP/B of L2 → shared-memory traffic), and
// the measured 8192 × 4096 × 4096 products ran at that traffic's ceiling (~8 TB/s out of L2, E =
// 0.34 at b = 32, 0.54 at b = 64; docs/PERF_NOTES.md). Here a tile is 256 rows × kG block
// columns (kG · b = 128 columns) and its k loop walks the union of the k blocks of those kG
// columns: each A tile is loaded once for every block column of the group that has a block at that
// k, and each block of Bop is loaded once per 256 rows (not 128). Per k step the loads are the A
// tile plus only the blocks that exist; the wgmma of an absent block is skipped, so no work is
// spent on zeros. Expected traffic per useful FLOP falls by 1.2-1.9x over densities 0.1-0.5 for
// b = 32 (more union hits at higher density) and ~1.2-1.5x for b = 64. Measured (H200): faster
// for b = 64 at d ≥ 0.25, slower for b = 32 and at low density, where the single producer warp
// does not keep the stages full; bsr_cuda.cu's use_grouped picks it accordingly.
//
// Blocks of 128 (kG = 1): the tile is 256 rows of one block column, the two consumers sharing
// each block slice. L2 → shared-memory traffic per FLOP: a 128 × 128 one-column tile loads
// (128 + 128) · kBK elements per 2 · 128 · 128 · kBK FLOP (64 FLOP per byte in 16-bit), this tile
// (256 + 128) · kBK per 2 · 256 · 128 · kBK (85 FLOP per byte): at the ~9 TB/s that the one-column
// kernels sustained out of L2, a ceiling of ~770 instead of ~580 TFLOP/s. The price: no
// ping-pong, so the epilogue of a tile does not overlap the next tile's MMAs (it matters when a
// column has few blocks). With 16-bit output the consumers only write the tile into shared memory
// and a TMA store drains it while they run the next tile's MMAs (see the epilogue below); fp32
// output is still stored from registers.
//
// Structure (shared with dds_sm90.cuh: persistent CTAs, TMA + mbarrier pipeline, wgmma from
// swizzled shared memory): one producer warp merges the kG sorted index lists of the tile's block
// columns on the fly (a window of 32 entries per list in registers, refilled by one coalesced load)
// and issues per k step one TMA load of the 256-row A tile and one per existing block,
// then writes the step's block mask next to the stage (read by the consumers after the stage's full
// barrier, whose arrive orders it). Two consumer warpgroups work on the same tile ("cooperative"):
// consumer w owns rows 128·w..128·w+127 and kG accumulators of 128 × b (128 fp32 registers per
// thread in all). A step's mask carries a "last" bit, so the consumers need no count; a tile whose
// block columns are all empty gets one step with an empty mask (no load, its output is the bias).
#include "common.cuh"
#include "dds_sm90.cuh"

namespace sparsekern::bsr::sm90 {

using namespace cute;

template <Elem kElem, int kBlock, bool kBKMajor>
struct GddsConfig {
  using T = typename ElemT<kElem>::type;
  static_assert(kBlock == 32 || kBlock == 64 || kBlock == 128, "grouped dds: blocks of 32, 64 or 128");
  static_assert(kElem != Elem::tf32 || (kBlock >= 64 && kBKMajor),
                "grouped dds, tf32: blocks of 64/128 and Bop = Sᵀ (wgmma reads tf32 K-major only)");
  static constexpr int kThreads = 384;  // producer warpgroup + two consumer warpgroups
  static constexpr int kBN = kBlock;    // one MMA N extent = one block column
  // Block columns per tile: 128 output columns. For b = 128 a tile is one block column of 256
  // rows: no union, but each block slice feeds 256 rows instead of the one-column kernel's 128
  // (see the b = 128 note at the top).
  static constexpr int kG = 128 / kBlock;
  static constexpr int kWgM = 128;      // rows per consumer; a tile is 2 · kWgM rows
  static constexpr int kElemBytes = int(sizeof(T));
  static constexpr int kBK = kBlock < 128 / kElemBytes ? kBlock : 128 / kElemBytes;
  static constexpr int kKSteps = kBlock / kBK;
  static constexpr int kHalfBytes = kWgM * kBK * kElemBytes;     // one consumer's A rows per step
  static constexpr int kBlockBytes = kBN * kBK * kElemBytes;     // one block's slice per step
  static constexpr int kStageBytesMax = 2 * kHalfBytes + kG * kBlockBytes;
  // As many stages as fit in ~200 KB, at most 8 (b = 32: 24 KB stages → 8; b = 64 and 128: 48 KB
  // → 4).
  static constexpr int kStages = std::min(8, (200 * 1024) / kStageBytesMax);
  static constexpr std::uint32_t kLast = 1u << 31;  // mask bit: the tile's last step
  static constexpr std::uint32_t kStop = 1u << 30;  // mask bit: no tile left, the consumers stop

  static constexpr GMMA::Major kMajorB = kBKMajor ? GMMA::Major::K : GMMA::Major::MN;
  using MmaAtom = decltype(GMMA::ss_op_selector<T, T, float, Shape<_64, Int<kBN>, Int<kBK>>,
                                                GMMA::Major::K, kMajorB>());
  using TiledMma = decltype(make_tiled_mma(MmaAtom{}));  // one warpgroup, kWgM / 64 atoms along M

  using AtomA = decltype(smem_atom<T, true, kBK * kElemBytes>());
  using AtomB = decltype(smem_atom<T, kBKMajor, (kBKMajor ? kBK : kBN) * kElemBytes>());
  // A: slot 2·stage + w holds consumer w's rows; B: slot kG·stage + j holds block column j's block.
  using SmemLayoutA = decltype(tile_to_shape(AtomA{}, make_shape(Int<kWgM>{}, Int<kBK>{}, Int<2 * kStages>{}),
                                             Step<_1, _2, _3>{}));
  using SmemLayoutB = decltype(tile_to_shape(
      AtomB{}, make_shape(Int<kBN>{}, Int<kBK>{}, Int<kG * kStages>{}),
      std::conditional_t<kBKMajor, Step<_1, _2, _3>, Step<_2, _1, _3>>{}));

  // The producer's A loads: both consumers' rows of a step in one TMA box of 2 · kWgM rows (slots
  // 2·stage and 2·stage + 1 are its halves, back to back), one TMA issue per step instead of two.
  // Kernel µs against two boxes (bf16, 8192 × 4096 → 4096, H100, tools/diag/s17_run4.sh): b = 32
  // 374 → 343 and 524 → 485 at d = 0.25 / 0.5, b = 64 94.5 → 92.7 at d = 0.1, equal at b = 64,
  // d = 0.5 and at b = 128.
  static constexpr int kABoxM = 2 * kWgM;
  using SmemLayoutABox = decltype(tile_to_shape(AtomA{}, make_shape(Int<kABoxM>{}, Int<kBK>{}, Int<kStages>{}),
                                                Step<_1, _2, _3>{}));  // slot s: A slots 2s, 2s + 1

  // Block column j's accumulators inside the kernel's one fragment of all kG columns (acc_all):
  // wgmma's C layout per 64-row atom is ((2, 2, N / 8) values) with the 8-column groups outermost,
  // so block j's columns are values [j · b / 2, (j + 1) · b / 2) of each atom, atoms kG · b / 2 apart.
  using AccBlockLayout = Layout<Shape<Shape<_2, _2, Int<kBN / 8>>, Int<kWgM / 64>, _1>,
                                Stride<Stride<_1, _2, _4>, Int<kG * kBN / 2>, _0>>;

  // 16-bit output: each consumer stages its 128 rows of the tile in shared memory, 64 columns at a
  // time (16 KB, 128-byte swizzle), and a TMA store writes them out while the consumer goes on to
  // the next tile's MMAs (fp32 output, tf32: stored from registers, store_tile; 32 KB per half
  // would not fit next to the stages).
  static constexpr bool kTmaStore = kElemBytes == 2;
  static constexpr int kCCols = 64;  // columns per staged half (one 128-byte swizzle line)
  using SmemLayoutC = decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<T>{},
                                             make_shape(Int<kWgM>{}, Int<kCCols>{}, Int<2>{})));

  struct Shared {
    alignas(1024) T a[cosize_v<SmemLayoutA>];
    alignas(1024) T b[cosize_v<SmemLayoutB>];
    alignas(1024) T c[kTmaStore ? cosize_v<SmemLayoutC> : 1];  // slot w: consumer w's staged half
    cutlass::arch::ClusterTransactionBarrier full[kStages];  // loads landed (1 arrival + bytes)
    cutlass::arch::ClusterBarrier empty[kStages];            // both consumers done (256 arrivals)
    std::uint32_t mask[kStages];                             // blocks present in the stage (+ kLast, kStop)
    std::uint32_t tile[kStages];                             // the stage's output tile
    TileOrder order;
  };
  static constexpr std::size_t kSmemBytes = sizeof(Shared);
  static_assert(kSmemBytes <= 227 * 1024, "grouped dds: shared memory over a Hopper CTA's 227 KB");
};

/// C (m × n, row-major, ldc) as the TMA store's global view.
template <class Cfg>
auto gdds_c_view(void* c, int m, int n, std::int64_t ldc) {
  using T = typename Cfg::T;
  return make_tensor(make_gmem_ptr(static_cast<T*>(c)), make_shape(m, n), make_stride(ldc, Int<1>{}));
}
template <class Cfg>
using GddsTmaC = decltype(make_tma_atom(SM90_TMA_STORE{}, gdds_c_view<Cfg>(nullptr, 1, 1, 8),
                                        typename Cfg::SmemLayoutC{}(_, _, 0),
                                        make_shape(Int<Cfg::kWgM>{}, Int<Cfg::kCCols>{})));

/// Row panels per chunk of the heaviest-first schedule (gdds_schedule_coords). Measured with 8 too:
/// equal at b = 128, 12% slower at b = 64, d = 0.1 (8192 × 4096 → 4096, H100).
constexpr int kPanelChunk = 4;

/// Handed-out tile v → (group g, row panel mt). Heaviest first (`heavy`): in chunks of
/// kPanelChunk row panels, a chunk's tiles in the order of their group's weight (heaviest first),
/// a group's panels in a row. Every row panel has the same weights (the groups'), so the last tiles
/// handed out are the lightest of a whole chunk, not of one panel: with one panel at a time the
/// last CTA finished 6-10 µs after the median one, with chunks of four 2-3 µs (8192 × 4096 → 4096,
/// b = 64 and 128, H100), while a chunk's A rows (kPanelChunk × 256 rows) stay in L2. Otherwise the
/// rotated order of tile_coords.
__device__ __forceinline__ void gdds_schedule_coords(int v, int n, int m_tiles, bool heavy, const TileOrder& order,
                                                     int& g, int& mt) {
  if (!heavy) {
    tile_coords(v, n, g, mt);
    return;
  }
  const int c = v / (kPanelChunk * n);
  const int p0 = c * kPanelChunk;
  const int q = min(kPanelChunk, m_tiles - p0);  // panels in this chunk
  const int r = v - c * kPanelChunk * n;         // rank in the chunk, < q · n
  g = order.order[r / q];
  mt = p0 + r % q;
}

/// One block column's sorted index list as the producer warp sees it: a window of its next 32
/// entries spread over the lanes (lane l holds entry pos + l: k block and value index; k = INT_MAX
/// past the end). pos and end are warp-uniform.
struct ListWindow {
  int pos, end;
  int k, v;

  __device__ __forceinline__ void load(const std::int32_t* indices, const std::int32_t* value_index, int lane) {
    const int e = pos + lane;
    k = INT_MAX, v = 0;
    if (e < end) {
      k = indices[e];
      v = value_index != nullptr ? value_index[e] : e;
    }
  }
  __device__ __forceinline__ void start(const std::int32_t* offsets, const std::int32_t* indices,
                                        const std::int32_t* value_index, int col, int n_cols, int lane) {
    pos = col < n_cols ? offsets[col] : 0;
    end = col < n_cols ? offsets[col + 1] : 0;
    load(indices, value_index, lane);
  }
  /// The k blocks k0 … k0 + 31 of this list as a bit set (bit l: block k0 + l present), given
  /// that every entry of the window is ≥ k0. They are the window's first popc(bits) entries, in
  /// order (the list is sorted and holds each k once), so lane l's value index, when bit l is set,
  /// is window entry popc(bits below l): returned in `vi` (any value where bit l is clear).
  __device__ __forceinline__ std::uint32_t chunk(int k0, int lane, int& vi) const {
    const int d = k - k0;  // ≥ 0; INT_MAX − k0 past the end
    const std::uint32_t bits = __reduce_or_sync(0xffffffffu, d < 32 ? 1u << d : 0u);
    vi = __shfl_sync(0xffffffffu, v, __popc(bits & ((1u << lane) - 1u)));
    return bits;
  }
};

/// Where a CTA's time goes, for tools/diag/gdds_trace.cu only (kernels instantiated with kTrace;
/// the library's never are, and their code does not change). Per CTA: kHead words (globaltimer
/// and clock64 at the start, clock64 and globaltimer when consumer 0 leaves), then kFields words
/// per tile for its first kTiles tiles, clock64 values of the CTA's SM (fields below).
struct GddsTrace {
  static constexpr int kHead = 4, kTiles = 64, kFields = 16;
  static constexpr int kPerCta = kHead + kTiles * kFields;
  // Producer (lane 0 of warp 0): tile claimed from, index windows read by (the first chunk's mask
  // known), first step's loads issued by, cycles spent waiting on empty stages, steps, tile.
  static constexpr int kClaim = 0, kListed = 1, kIssued = 2, kEmptyWait = 3, kSteps = 4, kTile = 5;
  // Consumer 0 (thread 128): starts waiting for the tile's first stage, has it, cycles spent in
  // the later full waits, its MMAs done, its epilogue done.
  static constexpr int kWait = 6, kFirst = 7, kFullWait = 8, kMmaDone = 9, kEpiDone = 10;
  // Its TMA-store epilogue, per half h: slot free and the consumer's threads synchronised, then
  // the half written and its store issued.
  static constexpr int kEpiFree = 11, kEpiIssued = 13;  // + h
};

__device__ __forceinline__ std::uint64_t global_ns() {
  std::uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

/// Block column j's accumulators: a view into the fragment of all kG block columns.
template <class Cfg, class AccAll>
__device__ __forceinline__ auto gdds_acc_view(AccAll& acc_all, int j) {
  return make_tensor(acc_all.data() + j * (Cfg::kBN / 2), typename Cfg::AccBlockLayout{});
}

/// The wgmmas of the compile-time block mask kMask, block column J on (stage s, consumer w).
template <class Cfg, std::uint32_t kMask, int J, class Mma, class AccAll, class FragA, class FragB>
__device__ __forceinline__ void gdds_blocks_from(Mma& mma, AccAll& acc_all, const FragA& tCrA, const FragB& tCrB,
                                                 int s, int w) {
  if constexpr (J < Cfg::kG) {
    if constexpr (((kMask >> J) & 1u) != 0) {
      auto acc = gdds_acc_view<Cfg>(acc_all, J);
      CUTE_UNROLL
      for (int kb = 0; kb < size<2>(tCrA); ++kb) gemm(mma, tCrA(_, _, kb, 2 * s + w), tCrB(_, _, kb, Cfg::kG * s + J), acc);
    }
    gdds_blocks_from<Cfg, kMask, J + 1>(mma, acc_all, tCrA, tCrB, s, w);
  }
}

/// A step's wgmmas for block mask `mask` (kG low bits; 0: none): the runtime mask selects a case
/// whose blocks are known at compile time, one warpgroup arrive and then the present blocks' wgmmas
/// with no branch between them. Against a loop over the block columns with a branch, fence and
/// arrive per present block, kernel µs (bf16, 8192 × 4096 → 4096, H100, tools/diag/s17_run2.sh):
/// b = 32 378 → 370, 494 → 480, 545 → 524, 630 → 588 at d = 0.25 / 0.4 / 0.5 / 0.75; b = 64 equal
/// (266 at d = 0.5). An absent block's wgmma is skipped (issuing every block column's wgmma, absent
/// ones reading a zero block, measured slower in session 5: 0.87 vs 0.81 ms at b = 32, d = 0.5).
///
/// Tried and dropped: one wgmma of N = L · b for each run of L adjacent present blocks (their B
/// slots are back to back in shared memory and the K-major descriptor does not encode N), to read
/// each A slice once per run instead of once per block. ptxas serialises every wgmma of the kernel
/// (C7511, "insufficient register resources for the wgmma pipeline") as soon as wgmmas of different
/// N share accumulator registers; serialised, b = 64 got 3-4% slower and b = 32 2-3% faster than
/// this at d ≤ 0.5 and 7% slower at d = 0.75 (s17_run1.sh, s17_run2.sh).
template <class Cfg, std::uint32_t kMask = 1u, class Mma, class AccAll, class FragA, class FragB>
__device__ __forceinline__ void gdds_issue_blocks(std::uint32_t mask, Mma& mma, AccAll& acc_all, const FragA& tCrA,
                                                  const FragB& tCrB, int s, int w) {
  if constexpr (kMask < (1u << Cfg::kG)) {
    if (mask == kMask) {
      warpgroup_fence_operand(acc_all);
      warpgroup_arrive();
      gdds_blocks_from<Cfg, kMask, 0>(mma, acc_all, tCrA, tCrB, s, w);
      warpgroup_fence_operand(acc_all);
      return;
    }
    gdds_issue_blocks<Cfg, kMask + 1>(mask, mma, acc_all, tCrA, tCrB, s, w);
  }
}

template <class Cfg, bool kBKMajor, class TA, class TB, class TC, bool kTrace = false>
__global__ void __launch_bounds__(Cfg::kThreads, 1)
    gdds_kernel(const __grid_constant__ TA tma_a, const __grid_constant__ TB tma_b, const __grid_constant__ TC tma_c,
                DdsArgs p, int a_rows, int a_cols, int nnz, bool tma_store, std::uint64_t* trace) {
#if defined(SPARSEKERN_SM90A_DEVICE)
  using T = typename Cfg::T;
  using State = cutlass::PipelineState<Cfg::kStages>;
  constexpr int kWgM = Cfg::kWgM, kBN = Cfg::kBN, kBK = Cfg::kBK, kKSteps = Cfg::kKSteps, kG = Cfg::kG;
  constexpr int kStages = Cfg::kStages;

  extern __shared__ __align__(1024) char smem_raw[];
  auto& S = *reinterpret_cast<typename Cfg::Shared*>(smem_raw);
  const int wg = int(threadIdx.x) / 128;
  const int lane = int(threadIdx.x) % 32;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      S.full[s].init(1);
      S.empty[s].init(256);
    }
  }
  cutlass::arch::fence_barrier_init();
  Tensor sA = make_tensor(make_smem_ptr(S.a), typename Cfg::SmemLayoutA{});  // (kWgM, kBK, 2 · stages)
  Tensor sB = make_tensor(make_smem_ptr(S.b), typename Cfg::SmemLayoutB{});  // (kBN, kBK, kG · stages)
  __syncthreads();  // barriers initialised before anyone waits on them

  const int n_groups = (p.n_cols + kG - 1) / kG;
  const int n_tiles = p.m_tiles * n_groups;
  const bool heavy = heavy_first(p, n_groups);  // CTA-uniform
  if (heavy) heavy_first_order(p.offsets, p.n_cols, kG, n_groups, S.order);
  std::uint64_t* tr = nullptr;  // this CTA's trace (kTrace only)
  if constexpr (kTrace) {
    tr = trace + std::int64_t(blockIdx.x) * GddsTrace::kPerCta;
    if (threadIdx.x == 0) tr[0] = global_ns(), tr[1] = clock64();
  }
  // The tile record of iteration `it` (null past kTiles or without kTrace).
  auto rec = [&](int it) -> std::uint64_t* {
    if constexpr (kTrace) return it < GddsTrace::kTiles ? tr + GddsTrace::kHead + it * GddsTrace::kFields : nullptr;
    else return nullptr;
  };

  if (wg == 0) {
    // 72 + 2 · 216 per thread triple: the consumers' increase (2 · 128 · 48) must equal what the
    // producer gives back (128 · (168 − 72)), the CTA's pool being the 168 · 384 registers of its
    // launch; a larger producer budget leaves the consumers' setmaxnreg waiting forever.
    cutlass::arch::warpgroup_reg_dealloc<72>();
    if (threadIdx.x >= 32) return;  // one producer warp
    if (lane == 0) {
      cute::prefetch_tma_descriptor(tma_a.get_tma_descriptor());
      cute::prefetch_tma_descriptor(tma_b.get_tma_descriptor());
    }
    Tensor sA_box = make_tensor(make_smem_ptr(S.a), typename Cfg::SmemLayoutABox{});  // (kABoxM, kBK, slots)
    auto [tAgA, tAsA, tBgB, tBsB] = dds_tma_views<Cfg, kBKMajor>(tma_a, tma_b, sA_box, sB, a_rows, a_cols, nnz);

    State state(0, 1, 0);  // phase 1: the first wait on each (fresh) empty barrier passes
    for (int it = 0;; ++it) {
      std::uint64_t* trec = rec(it);
      std::uint64_t empty_wait = 0, n_steps = 0;
      bool issued = false, listed = false;
      if constexpr (kTrace) if (trec && lane == 0) trec[GddsTrace::kClaim] = clock64();
      const int v = next_tile(p.counter, blockIdx.x + it * int(gridDim.x), lane);
      if (v >= n_tiles) {  // no tile left: one stage without loads whose mask stops the consumers
        wait_barrier(S.empty[state.index()], state.phase(), "empty", state.index(), -1);
        if (lane == 0) {
          st_shared_u32(&S.mask[state.index()], Cfg::kStop);
          S.full[state.index()].arrive();
        }
        __syncwarp();
        ++state;
        break;
      }
      int g, mt;
      gdds_schedule_coords(v, n_groups, p.m_tiles, heavy, S.order, g, mt);
      const int tile = mt * n_groups + g;  // what the consumers decode
      ListWindow lists[kG];
      CUTE_UNROLL
      for (int j = 0; j < kG; ++j) lists[j].start(p.offsets, p.indices, p.value_index, g * kG + j, p.n_cols, lane);
      // The union of the lists, 32 k blocks at a time: lane l takes k block k0 + l (its mask of
      // block columns and their value indices, in registers), and the steps are issued in k order,
      // each by the lane that holds it. No per-step shuffles: per chunk the warp does one
      // OR-reduction and one shuffle per list, and reloads the windows (their latency is covered by
      // the chunk's steps). A tile whose columns hold no block gets one empty step (its output is
      // the bias).
      bool first = true;
      while (true) {
        int k0 = INT_MAX;
        CUTE_UNROLL
        for (int j = 0; j < kG; ++j) k0 = min(k0, __shfl_sync(0xffffffffu, lists[j].k, 0));
        if (k0 == INT_MAX && !first) break;
        const bool empty_tile = k0 == INT_MAX;  // warp-uniform
        first = false;
        std::uint32_t my_mask = 0;  // block columns holding k block k0 + lane
        int vi[kG];
        bool done = true;  // every list ends within this chunk
        CUTE_UNROLL
        for (int j = 0; j < kG; ++j) {
          vi[j] = 0;
          if (!empty_tile) {
            const std::uint32_t bits = lists[j].chunk(k0, lane, vi[j]);
            if ((bits >> lane) & 1u) my_mask |= 1u << j;
            if (bits != 0) {
              lists[j].pos += __popc(bits);
              lists[j].load(p.indices, p.value_index, lane);  // the next window, for the next chunk
            }
            done = done && lists[j].pos >= lists[j].end;
          }
        }
        std::uint32_t rem = empty_tile ? 1u : __ballot_sync(0xffffffffu, my_mask != 0);
        if constexpr (kTrace) {
          if (trec && lane == 0 && !listed) trec[GddsTrace::kListed] = clock64();
          listed = true;
        }
        const int steps = empty_tile ? 1 : kKSteps;  // k steps per union step
        while (rem != 0) {
          const int l = __ffs(rem) - 1;  // the step of k block k0 + l, issued by lane l
          rem &= rem - 1u;
          const bool last_step = done && rem == 0;
          const int n_blocks = __popc(my_mask);
          for (int kk = 0; kk < steps; ++kk) {
            std::uint64_t t0 = 0;
            if constexpr (kTrace) t0 = clock64();
            wait_barrier(S.empty[state.index()], state.phase(), "empty", state.index(), tile);
            if constexpr (kTrace) empty_wait += clock64() - t0, ++n_steps;
            if (lane == l) {
              const int s = state.index();
              // A volatile asm store: it stays above the arrive below (CUTLASS's barrier asm has
              // no memory clobber; a clobber here instead would also force every value the
              // compiler keeps in memory to be reloaded after it).
              st_shared_u32(&S.tile[s], std::uint32_t(tile));
              st_shared_u32(&S.mask[s], my_mask | (last_step && kk == steps - 1 ? Cfg::kLast : 0u));
              auto& full = S.full[s];
              if (my_mask == 0) {
                full.arrive();
              } else {
                auto& bar = *reinterpret_cast<std::uint64_t*>(&full);
                const int kt = (k0 + l) * kKSteps + kk;
                // One A box for both halves: rows past m arrive as zeros and count in the bytes.
                full.arrive_and_expect_tx(2 * Cfg::kHalfBytes + n_blocks * Cfg::kBlockBytes);
                copy(tma_a.with(bar), tAgA(_, mt, kt), tAsA(_, s));
                CUTE_UNROLL
                for (int j = 0; j < kG; ++j) {
                  if (my_mask & (1u << j)) {
                    if constexpr (kBKMajor) copy(tma_b.with(bar), tBgB(_, vi[j], kk), tBsB(_, kG * s + j));
                    else copy(tma_b.with(bar), tBgB(_, 0, vi[j] * kKSteps + kk), tBsB(_, kG * s + j));
                  }
                }
              }
            }
            __syncwarp();
            if constexpr (kTrace) {
              if (trec && lane == 0 && !issued) trec[GddsTrace::kIssued] = clock64();
              issued = true;
            }
            ++state;
          }
        }
        if (done) break;
      }
      if constexpr (kTrace) {
        if (trec && lane == 0) {
          trec[GddsTrace::kEmptyWait] = empty_wait;
          trec[GddsTrace::kSteps] = n_steps;
          trec[GddsTrace::kTile] = std::uint64_t(tile);
        }
      }
    }
    // Retire only after the consumers released every stage (no TMA write may land after exit).
    for (int i = 0; i < kStages; ++i, ++state) {
      wait_barrier(S.empty[state.index()], state.phase(), "empty (tail)", state.index(), -1);
    }
  } else {
    cutlass::arch::warpgroup_reg_alloc<216>();
    const int w = wg - 1;  // consumer w: rows 128·w.. of every tile
    typename Cfg::TiledMma mma;
    auto thr = mma.get_thread_slice(int(threadIdx.x) % 128);
    Tensor tCrA = thr.make_fragment_A(thr.partition_A(sA));  // (MMA, MMA_M, MMA_K, 2 · stages)
    Tensor tCrB = thr.make_fragment_B(thr.partition_B(sB));  // (MMA, 1, MMA_K, kG · stages)
    // All kG block columns' accumulators in one fragment (wgmma's C layout of N = kG · b);
    // acc_view(j) is block column j's, laid out as the N = b fragment of partition_fragment_C.
    Tensor acc_all = make_tensor<float>(Layout<Shape<Shape<_2, _2, Int<kG * kBN / 8>>, Int<kWgM / 64>, _1>>{});
    static_assert(std::is_same_v<decltype(partition_fragment_C(mma, Shape<Int<kWgM>, Int<kBN>>{}).shape()),
                                 decltype(gdds_acc_view<Cfg>(acc_all, 0).shape())>,
                  "grouped dds: the accumulator views assume wgmma's C fragment layout");
    auto acc_view = [&](int j) { return gdds_acc_view<Cfg>(acc_all, j); };
    Tensor tCcC = thr.partition_C(make_identity_tensor(Shape<Int<kWgM>, Int<kBN>>{}));
    T* c = static_cast<T*>(p.c);
    const T* bias = static_cast<const T*>(p.bias);
    Tensor sC = make_tensor(make_smem_ptr(S.c), typename Cfg::SmemLayoutC{});  // (kWgM, 64, 2)
    auto tma_c_views = [&] {
      if constexpr (Cfg::kTmaStore) {
        Tensor mC = tma_c.get_tma_tensor(make_shape(a_rows, p.n_cols * kBN));
        Tensor gC = local_tile(mC, make_shape(Int<kWgM>{}, Int<Cfg::kCCols>{}), make_coord(_, _));  // (M,N,mt,nt)
        return tma_partition(tma_c, Int<0>{}, Layout<_1>{}, group_modes<0, 2>(sC), group_modes<0, 2>(gC));
      } else {
        return cute::make_tuple(0, 0);
      }
    };
    auto [tCgC, tCsC] = tma_c_views();
    (void)c;
    (void)tCgC;
    (void)tCsC;

    State state;  // stage 0, phase 0
    const bool tracer = kTrace && threadIdx.x == 128;  // consumer 0's first thread records
    for (int it = 0;; ++it) {
      std::uint64_t* trec = tracer ? rec(it) : nullptr;
      std::uint64_t full_wait = 0;
      if constexpr (kTrace) if (trec) trec[GddsTrace::kWait] = clock64();
      // The tile comes with its first stage (the step loop below waits on that stage again: it passes).
      wait_barrier(S.full[state.index()], state.phase(), "full", state.index(), -1);
      if constexpr (kTrace) if (trec) trec[GddsTrace::kFirst] = clock64();
      if (ld_shared_u32(&S.mask[state.index()]) & Cfg::kStop) {
        S.empty[state.index()].arrive();
        break;
      }
      const int tile = int(ld_shared_u32(&S.tile[state.index()]));
      const int mt = tile / n_groups, g = tile - mt * n_groups;
      // The tile's bias pairs for the TMA epilogue (16 words per thread), loaded early so that
      // their latency overlaps the tile's wgmmas: loaded in the epilogue they cost 0.6-1 µs per
      // tile (H100). With one block column per tile they are loaded as the tile starts (1-3%
      // faster than before its last wait, 8192 × 4096 → 4096, b = 128); with two or more, before
      // the last wait (loading them at the start was 3% slower at b = 64, d = 0.1).
      std::uint32_t bias_words[Cfg::kTmaStore ? kG * (kBN / 8) : 1];
      auto load_bias = [&] {
        if constexpr (Cfg::kTmaStore) {
          const bool pairs32 = (reinterpret_cast<std::uintptr_t>(bias) & 3u) == 0;  // CTA-uniform
          CUTE_UNROLL
          for (int j = 0; j < kG; ++j) {
            const int col = g * kG + j;
            CUTE_UNROLL
            for (int gq = 0; gq < kBN / 8; ++gq) {
              std::uint32_t bw = 0;
              if (tma_store && bias != nullptr && col < p.n_cols) {
                const int cc = get<1>(tCcC(make_coord(make_coord(0, 0, gq), 0, 0)));  // even
                const auto* b16 = reinterpret_cast<const std::uint16_t*>(bias) + std::int64_t(col) * kBN + cc;
                bw = pairs32 ? *reinterpret_cast<const std::uint32_t*>(b16)
                             : std::uint32_t(b16[0]) | std::uint32_t(b16[1]) << 16;
              }
              bias_words[j * (kBN / 8) + gq] = bw;
            }
          }
        }
      };
      if constexpr (kG == 1) load_bias();
      clear(acc_all);
      warpgroup_fence_operand(acc_all);
      mma.accumulate_ = GMMA::ScaleOut::One;
      State prev = state;
      bool have_prev = false;
      while (true) {
        std::uint64_t t0 = 0;
        if constexpr (kTrace) t0 = clock64();
        wait_barrier(S.full[state.index()], state.phase(), "full", state.index(), tile);
        if constexpr (kTrace) full_wait += clock64() - t0;
        const int s = state.index();
        const std::uint32_t mask = ld_shared_u32(&S.mask[s]);  // volatile asm: after the wait
        if constexpr (kG == 1) {
          // One block column: every step but an empty tile's holds its block, so the branch goes
          // around the whole batch (a branch between the arrive and a wgmma makes ptxas inject
          // another warpgroup.arrive before it, warning C7519).
          if (mask & 1u) {
            warpgroup_arrive();
            CUTE_UNROLL
            for (int kb = 0; kb < size<2>(tCrA); ++kb) gemm(mma, tCrA(_, _, kb, 2 * s + w), tCrB(_, _, kb, s), acc_all);
            warpgroup_commit_batch();
          }
        } else {
          gdds_issue_blocks<Cfg>(mask & ((1u << kG) - 1u), mma, acc_all, tCrA, tCrB, s, w);
          warpgroup_commit_batch();
        }
        warpgroup_wait<1>();  // the previous step's wgmma is done: its stage can be refilled
        if (have_prev) S.empty[prev.index()].arrive();
        prev = state;
        have_prev = true;
        ++state;
        if (mask & Cfg::kLast) break;
      }
      if constexpr (kG > 1) load_bias();
      warpgroup_wait<0>();
      S.empty[prev.index()].arrive();
      warpgroup_fence_operand(acc_all);
      if constexpr (kTrace) if (trec) trec[GddsTrace::kMmaDone] = clock64(), trec[GddsTrace::kFullWait] = full_wait;

      bool stored = false;  // by the shared-memory + TMA epilogue
      if constexpr (Cfg::kTmaStore) {
        if (tma_store) {
          // Through shared memory: per half h (tile columns 64h … 64h + 63), wait until this
          // consumer's previous store has read its slot, write the rounded sums (+ bias) as pairs
          // (the swizzle keeps a pair in one 16-byte chunk and a warp's 8 rows in 8 chunks: no bank
          // conflicts), make them visible to the async proxy, and let one thread issue the store.
          // TMA clips rows past m and columns past n (a group's absent last columns).
          const int tid = int(threadIdx.x) % 128;
          CUTE_UNROLL
          for (int h = 0; h < 2; ++h) {
            if (tid == 0) tma_store_wait<0>();
            cutlass::arch::NamedBarrier::sync(128, 1 + w);  // ids 9, 10 after CUTLASS's reserved 8
            if constexpr (kTrace) if (trec) trec[GddsTrace::kEpiFree + h] = clock64();
            CUTE_UNROLL
            for (int j = 0; j < kG; ++j) {
              CUTE_UNROLL
              for (int gq = 0; gq < kBN / 8; ++gq) {
                if ((j * kBN + 8 * gq) / Cfg::kCCols != h) continue;  // compile-time
                const int cc = get<1>(tCcC(make_coord(make_coord(0, 0, gq), 0, 0)));  // column in block column j
                const int tc = j * kBN + cc - h * Cfg::kCCols;                         // column in the half
                const float2 bv = unpack_pair<T>(bias_words[j * (kBN / 8) + gq]);  // zeros without bias
                CUTE_UNROLL
                for (int mm = 0; mm < kWgM / 64; ++mm) {
                  CUTE_UNROLL
                  for (int r2 = 0; r2 < 2; ++r2) {
                    const auto i0 = make_coord(make_coord(0, r2, gq), mm, 0);
                    const auto i1 = make_coord(make_coord(1, r2, gq), mm, 0);
                    const int r = get<0>(tCcC(i0));
                    st_shared_u32(reinterpret_cast<std::uint32_t*>(&sC(r, tc, w)),
                                  pack_pair<T>(acc_view(j)(i0) + bv.x, acc_view(j)(i1) + bv.y));
                  }
                }
              }
            }
            cutlass::arch::fence_view_async_shared();
            cutlass::arch::NamedBarrier::sync(128, 1 + w);  // ids 9, 10 after CUTLASS's reserved 8
            if (tid == 0) {
              copy(tma_c, tCsC(_, w), tCgC(_, 2 * mt + w, 2 * g + h));
              tma_store_arrive();
            }
            if constexpr (kTrace) if (trec) trec[GddsTrace::kEpiIssued + h] = clock64();
          }
          stored = true;
        }
      }
      if (!stored) {  // from registers: fp32 output, SPARSEKERN_BSR_TMA_STORE=0, or no TMA descriptor for C
        const std::int64_t row0 = std::int64_t(mt) * (2 * kWgM) + w * kWgM;
        CUTE_UNROLL
        for (int j = 0; j < kG; ++j) {
          const int col = g * kG + j;
          if (col < p.n_cols) store_tile<kBN>(acc_view(j), tCcC, c, p.ldc, p.m, row0, std::int64_t(col) * kBN, bias, lane);
        }
      }
      if constexpr (kTrace) if (trec) trec[GddsTrace::kEpiDone] = clock64();
    }
    if constexpr (kTrace) if (tracer) tr[2] = clock64(), tr[3] = global_ns();
    // The last stores must have read shared memory before the CTA exits.
    if (Cfg::kTmaStore && tma_store && int(threadIdx.x) % 128 == 0) tma_store_wait<0>();
  }
#else
  __trap();  // never launched without sm_90a code (see dds_kernel)
#endif
}

/// gdds_launch, and with kTrace the traced kernel writing GddsTrace records into `trace`
/// (grid · GddsTrace::kPerCta words; tools/diag/gdds_trace.cu). Returns the grid (0: not launched).
template <Elem kElem, int kBlock, bool kBKMajor, bool kTrace>
int gdds_launch_impl(const tc::TcParams& p, int n_block_cols, int num_sms, void* stream, std::uint64_t* trace) {
  using Cfg = GddsConfig<kElem, kBlock, kBKMajor>;
  const auto tmas = dds_tmas<Cfg, kBKMajor>(p, "bsr (sm90 grouped dds)");
  if (!tmas) return 0;
  DdsArgs args{p.c, p.ldc, p.bias, p.offsets, p.indices, p.value_index, p.m,
               int((p.m + 2 * Cfg::kWgM - 1) / (2 * Cfg::kWgM)), n_block_cols, nullptr, kStatic};
  const std::int64_t n_tiles = std::int64_t(args.m_tiles) * ((n_block_cols + Cfg::kG - 1) / Cfg::kG);
  // Below 2³¹ − #SMs: the producer's static tile numbers and the counter stay below 2³¹.
  SK_EXPECTS(n_tiles < (std::int64_t(1) << 30), "bsr (sm90 grouped dds): too many tiles");
  using TC = std::conditional_t<Cfg::kTmaStore, GddsTmaC<Cfg>, int>;
  TC tma_c{};
  bool tma_store = false;  // else the register epilogue (also where C admits no TMA descriptor)
  if constexpr (Cfg::kTmaStore) {
    const int n = n_block_cols * kBlock;
    tma_store = p.tma_store &&
                tma_encodable<typename Cfg::T>(p.c, std::uint64_t(n), std::uint64_t(p.m),
                                               std::uint64_t(p.ldc) * sizeof(typename Cfg::T), Cfg::kCCols, Cfg::kWgM);
    if (tma_store)
      tma_c = make_tma_atom(SM90_TMA_STORE{}, gdds_c_view<Cfg>(p.c, int(p.m), n, p.ldc),
                            typename Cfg::SmemLayoutC{}(_, _, 0), make_shape(Int<Cfg::kWgM>{}, Int<Cfg::kCCols>{}));
  }
  constexpr auto kernel = gdds_kernel<Cfg, kBKMajor, DdsTmaA<Cfg, kBKMajor>, DdsTmaB<Cfg, kBKMajor>, TC, kTrace>;
  allow_smem<kernel>(Cfg::kSmemBytes);
  const int grid = int(std::min<std::int64_t>(n_tiles, std::max(num_sms, 1)));
  set_schedule(args, p, n_tiles, grid, stream);  // one tile-taking producer per CTA
  kernel<<<grid, Cfg::kThreads, Cfg::kSmemBytes, static_cast<cudaStream_t>(stream)>>>(
      tmas->first, tmas->second, tma_c, args, int(p.m), int(p.a_cols), int(p.nnz), tma_store, trace);
  SK_CUDA_CHECK_LAUNCH();
  return grid;
}

template <Elem kElem, int kBlock, bool kBKMajor>
bool gdds_launch(const tc::TcParams& p, int n_block_cols, int num_sms, void* stream) {
  return gdds_launch_impl<kElem, kBlock, kBKMajor, false>(p, n_block_cols, num_sms, stream, nullptr) > 0;
}

}  // namespace sparsekern::bsr::sm90
