#pragma once
// Block-sparse dds on Hopper: C = A · Bop (+ bias), A dense (m × k, K-major), Bop block-sparse.
//
// Why a separate kernel: the SM80 path (src/bsr/tc) runs mma.sync, which on an H100/H200 reaches
// about half of what wgmma does, and its one-tile-per-CTA grid spends most of a short sparse
// column in pipeline fill and epilogue (measured: ~75 µs of fixed cost at 8192×4096×4096, see
// docs/PERF_NOTES.md). This kernel:
//   - is persistent: gridDim.x ≤ #SMs CTAs walk the output tiles (tile t → row panel t / n_cols,
//     block column t % n_cols: CTAs running at the same time share A's row panels in L2);
//   - is warp-specialized: warpgroup 0 is the producer (one thread issues TMA loads of the A tile at
//     the gathered k offset of each non-zero block, and of the block itself), warpgroups 1 and 2
//     are consumers that take alternate tiles of the CTA ("ping-pong"), so one consumer's epilogue
//     overlaps the other's wgmma main loop and the producer's loads for the next tiles;
//   - multiplies with wgmma (HGMMA in SASS) from 128-byte-swizzled shared memory, fp32 accumulators
//     in registers, a multistage TMA/mbarrier pipeline (one stage ring per consumer, see Rings in common.cuh).
// Tiles are handed out dynamically when the caller passes a tile counter (DdsArgs::counter): each
// producer warp takes its consumer's next tile from an atomic counter when it starts loading it,
// in heaviest-column-first order within each row panel (kHeavyFirst), so that SMs whose tiles had
// few blocks take more tiles and the last tiles handed out are the lightest. With a static
// round-robin share, block columns of unequal block counts (any random pattern) leave the SMs
// that drew the light ones idle at the end: simulated makespans 1.2-1.8x the balanced one at
// 8192 × 4096 → 4096 (tools/diag/bsr_schedule_sim.py). Small problems (few tiles per SM) keep
// the static share: see use_dynamic_tiles in dds_sm90.h.
// The tile of one consumer is kWgM × b (a whole block column of C), so each non-zero block is
// b / kBK k-steps of its main loop. The index sets are read by the producer warp 32 entries at a
// time (one coalesced load per lane, then warp shuffles), keeping global-load latency off the
// TMA issue path.
#include <optional>
#include <utility>

#include "common.cuh"
#include "dds_sm90.h"

namespace sparsekern::bsr::sm90 {

using namespace cute;

/// Tile configuration per block size (each choice's reason on its line).
template <Elem kElem, int kBlock, bool kBKMajor>
struct DdsConfig {
  using T = typename ElemT<kElem>::type;
  static constexpr int kThreads = 384;  // producer warpgroup + two consumer warpgroups
  static constexpr int kBN = kBlock;    // a consumer tile spans one whole block column of C
  static constexpr int kElemBytes = int(sizeof(T));
  // One 128-byte line of a block per k-step (SW128, conflict-free); 16-bit blocks of 32 use 64 B.
  static constexpr int kBK = kBlock < 128 / kElemBytes ? kBlock : 128 / kElemBytes;
  // Rows per consumer tile: 128 for blocks of 64 and 128 (128 × 128: 128 fp32 accumulators per
  // thread, the most a consumer holds without spilling at 232 registers; 128 × 64 keeps 4 stages
  // per ring in 192 KB); 256 for blocks of 32, so that each A tile feeds 32 columns of 256 rows.
  static constexpr int kWgM = kBlock == 32 ? 256 : 128;
  static constexpr int kStageBytes = (kWgM + kBN) * kBK * kElemBytes;
  // Two rings (one per consumer) of as many stages as fit in ~200 KB of the 227 KB a Hopper CTA
  // may use, at most 5 each: sparse columns are short, so the producers must run ahead across
  // tile boundaries.
  static constexpr int kPerRing = std::min(5, (200 * 1024) / (2 * kStageBytes));
  static constexpr int kStages = 2 * kPerRing;
  static constexpr int kKSteps = kBlock / kBK;  // k-steps per non-zero block

  static constexpr GMMA::Major kMajorB = kBKMajor ? GMMA::Major::K : GMMA::Major::MN;
  using MmaAtom = decltype(GMMA::ss_op_selector<T, T, float, Shape<_64, Int<kBN>, Int<kBK>>,
                                                GMMA::Major::K, kMajorB>());
  using TiledMma = decltype(make_tiled_mma(MmaAtom{}));  // one warpgroup; kWgM / 64 atoms along M

  using AtomA = decltype(smem_atom<T, true, kBK * kElemBytes>());
  using AtomB = decltype(smem_atom<T, kBKMajor, (kBKMajor ? kBK : kBN) * kElemBytes>());
  using SmemLayoutA = decltype(tile_to_shape(AtomA{}, make_shape(Int<kWgM>{}, Int<kBK>{}, Int<kStages>{}),
                                             Step<_1, _2, _3>{}));
  using SmemLayoutB = decltype(tile_to_shape(
      AtomB{}, make_shape(Int<kBN>{}, Int<kBK>{}, Int<kStages>{}),
      std::conditional_t<kBKMajor, Step<_1, _2, _3>, Step<_2, _1, _3>>{}));
  // The producer's A loads: one consumer tile (kWgM rows) per TMA box.
  static constexpr int kABoxM = kWgM;
  using SmemLayoutABox = SmemLayoutA;

  struct Shared {
    alignas(1024) T a[cosize_v<SmemLayoutA>];
    alignas(1024) T b[cosize_v<SmemLayoutB>];
    Rings<kPerRing> rings;
    TileOrder order;
  };
  static constexpr std::size_t kSmemBytes = sizeof(Shared);
};

/// Kernel arguments besides the TMA descriptors.
struct DdsArgs {
  void* c;
  std::int64_t ldc;
  const void* bias;
  const std::int32_t* offsets;
  const std::int32_t* indices;
  const std::int32_t* value_index;
  std::int64_t m;
  int m_tiles;
  int n_cols;
  int* counter;  ///< zeroed tile counter (dynamic schedule), or null (static round-robin)
  int schedule;  ///< Schedule: kDynamic or kHeavyFirst when counter is set
};

/// The global (gmem) views the TMA descriptors are built from: shapes (rows, cols) in the
/// (M or N, K) convention of CuTe's GEMM operands.
template <class Cfg>
auto dds_a_view(const void* a, int m, int k, std::int64_t lda) {
  using T = typename Cfg::T;
  return make_tensor(make_gmem_ptr(static_cast<const T*>(a)), make_shape(m, k), make_stride(lda, Int<1>{}));
}
template <class Cfg, bool kBKMajor>
auto dds_b_view(const void* values, int nnz) {
  using T = typename Cfg::T;
  constexpr int b = Cfg::kBN;
  const T* v = static_cast<const T*>(values);
  // Stored block e is b × b row-major. Bop = Sᵀ: element (n, k) of block e at e·b² + n·b + k, a
  // (nnz·b) × b K-major matrix. Bop = S: element (k, n) at e·b² + k·b + n, a b × (nnz·b) N-major one.
  if constexpr (kBKMajor) return make_tensor(make_gmem_ptr(v), make_shape(nnz * b, b), make_stride(Int<b>{}, Int<1>{}));
  else return make_tensor(make_gmem_ptr(v), make_shape(b, nnz * b), make_stride(Int<1>{}, Int<b>{}));
}

template <class Cfg, bool kBKMajor>
using DdsTmaA = decltype(make_tma_atom(SM90_TMA_LOAD{}, dds_a_view<Cfg>(nullptr, 1, 1, 8),
                                    typename Cfg::SmemLayoutABox{}(_, _, 0),
                                    make_shape(Int<Cfg::kABoxM>{}, Int<Cfg::kBK>{})));
template <class Cfg, bool kBKMajor>
using DdsTmaB = decltype(make_tma_atom(SM90_TMA_LOAD{}, dds_b_view<Cfg, kBKMajor>(nullptr, 1),
                                    typename Cfg::SmemLayoutB{}(_, _, 0),
                                    make_shape(Int<Cfg::kBN>{}, Int<Cfg::kBK>{})));

/// Output tile `tile` → (block column j, row panel mt). Row panel mt's tiles are consecutive (CTAs
/// working at the same time share its A rows in L2), its columns rotated by mt: with a plain
/// t % n_cols, the stride between one consumer's tiles (2 · gridDim.x) shares factors with n_cols
/// (264 and 32 on an H200 with b = 128), so every consumer saw the same 4 columns again and again,
/// and the consumers that drew the densest columns set the kernel's time.
__device__ __forceinline__ void tile_coords(int tile, int n_cols, int& j, int& mt) {
  mt = tile / n_cols;
  j = (tile % n_cols + mt) % n_cols;
}

/// The producer warp's next tile (warp-uniform): from the counter when there is one (lane 0's
/// atomicAdd, broadcast), else `static_tile` (its round-robin share).
__device__ __forceinline__ int next_tile(int* counter, int static_tile, int lane) {
  if (counter == nullptr) return static_tile;
  int v = 0;
  if (lane == 0) v = atomicAdd(counter, 1);
  return __shfl_sync(0xffffffffu, v, 0);
}

/// Whether the CTA orders each row panel's columns (or column groups) heaviest first: dynamic
/// tiles, the kHeavyFirst schedule, and at most kMaxOrder of them (the order is computed per CTA).
__device__ __forceinline__ bool heavy_first(const DdsArgs& p, int n) {
  return p.counter != nullptr && p.schedule == kHeavyFirst && n <= kMaxOrder;
}

/// Handed-out tile v → (column or group j, row panel mt): row panels in order; within one, the
/// heaviest columns first (`heavy`) or the rotated order of tile_coords.
__device__ __forceinline__ void schedule_coords(int v, int n, bool heavy, const TileOrder& order, int& j, int& mt) {
  if (heavy) {
    mt = v / n;
    j = order.order[v - mt * n];
  } else {
    tile_coords(v, n, j, mt);
  }
}

/// The launch's schedule (kAuto resolved by use_dynamic_tiles) in args.counter / args.schedule;
/// a dynamic one gets its tile counter set to zero on `stream`.
inline void set_schedule(DdsArgs& args, const tc::TcParams& p, long long n_tiles, int workers, void* stream) {
  int mode = p.tile_counter == nullptr ? int(kStatic) : p.schedule;
  if (mode == kAuto) mode = use_dynamic_tiles(n_tiles, workers, p.nnz, args.n_cols) ? int(kHeavyFirst) : int(kStatic);
  args.counter = mode == kStatic ? nullptr : p.tile_counter;
  args.schedule = mode;
  if (args.counter != nullptr)
    SK_CUDA_TRY(cudaMemsetAsync(args.counter, 0, sizeof(int), static_cast<cudaStream_t>(stream)));
}

/// The producer's TMA views (both dds kernels): A's kABoxM × kBK tiles, indexed (row tile, k tile),
/// and the stored blocks' kBN × kBK slices, indexed (block, k step) for Bop = Sᵀ or
/// (0, block · kKSteps + k step) for Bop = S; each paired with the shared-memory slots it fills
/// (the last mode of sA, laid out as Cfg::SmemLayoutABox, and of sB).
template <class Cfg, bool kBKMajor, class TA, class TB, class SA, class SB>
__device__ __forceinline__ auto dds_tma_views(const TA& tma_a, const TB& tma_b, SA& sA, SB& sB, int a_rows,
                                              int a_cols, int nnz) {
  constexpr int kABoxM = Cfg::kABoxM, kBN = Cfg::kBN, kBK = Cfg::kBK;
  Tensor mA = tma_a.get_tma_tensor(make_shape(a_rows, a_cols));
  Tensor gA = local_tile(mA, make_shape(Int<kABoxM>{}, Int<kBK>{}), make_coord(_, _));  // (M,K,mt,kt)
  auto [tAgA, tAsA] = tma_partition(tma_a, Int<0>{}, Layout<_1>{}, group_modes<0, 2>(sA), group_modes<0, 2>(gA));
  Tensor mB = [&] {
    if constexpr (kBKMajor) return tma_b.get_tma_tensor(make_shape(nnz * kBN, kBN));
    else return tma_b.get_tma_tensor(make_shape(kBN, nnz * kBN));
  }();
  Tensor gB = local_tile(mB, make_shape(Int<kBN>{}, Int<kBK>{}), make_coord(_, _));  // (N,K,nt,kt)
  auto [tBgB, tBsB] = tma_partition(tma_b, Int<0>{}, Layout<_1>{}, group_modes<0, 2>(sB), group_modes<0, 2>(gB));
  return cute::make_tuple(tAgA, tAsA, tBgB, tBsB);
}

template <class Cfg, bool kBKMajor, class TA, class TB>
__global__ void __launch_bounds__(Cfg::kThreads, 1)
    dds_kernel(const __grid_constant__ TA tma_a, const __grid_constant__ TB tma_b, DdsArgs p, int a_rows,
               int a_cols, int nnz) {
#if defined(SPARSEKERN_SM90A_DEVICE)
  using T = typename Cfg::T;
  using State = cutlass::PipelineState<Cfg::kPerRing>;
  constexpr int kWgM = Cfg::kWgM, kBN = Cfg::kBN, kBK = Cfg::kBK, kKSteps = Cfg::kKSteps;
  constexpr int kPerRing = Cfg::kPerRing;

  extern __shared__ __align__(1024) char smem_raw[];
  auto& S = *reinterpret_cast<typename Cfg::Shared*>(smem_raw);
  const int wg = int(threadIdx.x) / 128;
  const int lane = int(threadIdx.x) % 32;
  S.rings.init();
  __syncthreads();  // barriers initialised before anyone waits on them

  const int n_tiles = p.m_tiles * p.n_cols;
  const bool heavy = heavy_first(p, p.n_cols);  // CTA-uniform
  if (heavy) heavy_first_order(p.offsets, p.n_cols, 1, p.n_cols, S.order);
  Tensor sA = make_tensor(make_smem_ptr(S.a), typename Cfg::SmemLayoutA{});  // (kWgM, kBK, stages)
  Tensor sB = make_tensor(make_smem_ptr(S.b), typename Cfg::SmemLayoutB{});  // (kBN, kBK, stages)

  if (wg == 0) {
    cutlass::arch::warpgroup_reg_dealloc<40>();
    const int ring = int(threadIdx.x) / 32;  // producer warp r fills ring r
    if (ring >= 2) return;
    auto [tAgA, tAsA, tBgB, tBsB] = dds_tma_views<Cfg, kBKMajor>(tma_a, tma_b, sA, sB, a_rows, a_cols, nnz);

    State state(0, 1, 0);  // phase 1: the first wait on each (fresh) empty barrier passes
    for (int it = 0;; ++it) {
      // Static: this CTA's tiles blockIdx.x + i · gridDim.x, ring r taking those with i ≡ r mod 2.
      const int v = next_tile(p.counter, blockIdx.x + (2 * it + ring) * int(gridDim.x), lane);
      int j = 0, mt = 0;
      if (v < n_tiles) schedule_coords(v, p.n_cols, heavy, S.order, j, mt);
      const int tile = v < n_tiles ? mt * p.n_cols + j : -1;
      const int e0 = tile < 0 ? 0 : p.offsets[j], e1 = tile < 0 ? 0 : p.offsets[j + 1];
      if (e0 == e1) {
        // No tile left (kNoTile: the consumer stops), or an empty column: one stage without
        // loads that tells the consumer which tile it writes (the bias alone).
        wait_barrier(S.rings.empty[ring][state.index()], state.phase(), "empty", state.index(), tile);
        if (lane == 0) {
          st_shared_u32(&S.rings.info[ring][state.index()], tile < 0 ? kNoTile : std::uint32_t(tile));
          S.rings.full[ring][state.index()].arrive();
        }
        __syncwarp();
        ++state;
        if (tile < 0) break;
        continue;
      }
      for (int base = e0; base < e1; base += 32) {
        int kb = 0, vi = 0;
        if (base + lane < e1) {
          kb = p.indices[base + lane];
          vi = p.value_index ? p.value_index[base + lane] : base + lane;
        }
        const int count = min(32, e1 - base);
        for (int i = 0; i < count; ++i) {
          const int kbi = __shfl_sync(0xffffffffu, kb, i);
          const int vii = __shfl_sync(0xffffffffu, vi, i);
          CUTE_UNROLL
          for (int kk = 0; kk < kKSteps; ++kk) {
            wait_barrier(S.rings.empty[ring][state.index()], state.phase(), "empty", state.index(), tile);
            if (lane == 0) {
              auto& full = S.rings.full[ring][state.index()];
              st_shared_u32(&S.rings.info[ring][state.index()], std::uint32_t(tile));  // ordered by the arrive
              full.arrive_and_expect_tx(Cfg::kStageBytes);
              auto& bar = *reinterpret_cast<std::uint64_t*>(&full);
              const int stage = ring * kPerRing + state.index();
              copy(tma_a.with(bar), tAgA(_, mt, kbi * kKSteps + kk), tAsA(_, stage));
              if constexpr (kBKMajor) copy(tma_b.with(bar), tBgB(_, vii, kk), tBsB(_, stage));
              else copy(tma_b.with(bar), tBgB(_, 0, vii * kKSteps + kk), tBsB(_, stage));
            }
            __syncwarp();
            ++state;
          }
        }
      }
    }
    // Retire only after the consumer released every stage (no TMA write may land after exit).
    for (int i = 0; i < kPerRing; ++i, ++state) {
      wait_barrier(S.rings.empty[ring][state.index()], state.phase(), "empty (tail)", state.index(), -1);
    }
  } else {
    cutlass::arch::warpgroup_reg_alloc<232>();
    const int ring = wg - 1;  // consumer 0 takes the CTA's even tiles, consumer 1 the odd ones
    typename Cfg::TiledMma mma;
    auto thr = mma.get_thread_slice(int(threadIdx.x) % 128);
    Tensor tCrA = thr.make_fragment_A(thr.partition_A(sA));  // (MMA, MMA_M, MMA_K, stages)
    Tensor tCrB = thr.make_fragment_B(thr.partition_B(sB));  // (MMA, MMA_N, MMA_K, stages)
    Tensor acc = partition_fragment_C(mma, Shape<Int<kWgM>, Int<kBN>>{});  // (MMA, MMA_M, MMA_N)
    Tensor tCcC = thr.partition_C(make_identity_tensor(Shape<Int<kWgM>, Int<kBN>>{}));
    T* c = static_cast<T*>(p.c);
    const T* bias = static_cast<const T*>(p.bias);

    State state;  // stage 0, phase 0
    while (true) {
      // The tile comes with its first stage (consume_tile waits on that stage again: it passes).
      wait_barrier(S.rings.full[ring][state.index()], state.phase(), "full", state.index(), -1);
      const std::uint32_t info = ld_shared_u32(&S.rings.info[ring][state.index()]);  // after the wait
      if (info == kNoTile) {
        S.rings.empty[ring][state.index()].arrive();
        break;
      }
      const int tile = int(info);
      const int mt = tile / p.n_cols, j = tile - mt * p.n_cols;
      const int nk = (p.offsets[j + 1] - p.offsets[j]) * kKSteps;
      if (nk == 0) {  // an empty column's stage carried only the tile
        S.rings.empty[ring][state.index()].arrive();
        ++state;
      }
      consume_tile(S.rings, ring, state, nk, tile, mma, tCrA, tCrB, acc);

      store_tile<kBN>(acc, tCcC, c, p.ldc, p.m, std::int64_t(mt) * kWgM, std::int64_t(j) * kBN, bias, lane);
    }
  }
#else
  // Built without sm_90a (e.g. a PTX-only sm_90 pass): never launched (the dispatcher checks
  // built() and the device), and must not silently do nothing if it were.
  __trap();
#endif
}

/// The checks and TMA descriptors shared by the dds launchers (dds_launch here, gdds_launch in
/// gdds_sm90.cuh): A (m × k) and the stored blocks, boxes of Cfg's tiles. Empty when the driver
/// refuses a descriptor (nothing launched: the caller runs the SM80 kernel).
template <class Cfg, bool kBKMajor>
std::optional<std::pair<DdsTmaA<Cfg, kBKMajor>, DdsTmaB<Cfg, kBKMajor>>> dds_tmas(const tc::TcParams& p,
                                                                                   const char* what) {
  using T = typename Cfg::T;
  constexpr int kBlock = Cfg::kBN;
  SK_EXPECTS(p.m > 0 && p.m < (std::int64_t(1) << 31) && p.a_cols > 0 && p.a_cols < (std::int64_t(1) << 31) &&
                 p.nnz > 0 && p.nnz * kBlock < (std::int64_t(1) << 31) && !p.c_col_major,
             what, ": unsupported problem");
  const int m = int(p.m), k = int(p.a_cols), nnz = int(p.nnz);
  constexpr std::uint64_t E = sizeof(T);
  constexpr std::uint32_t kMnBox = std::min<int>(Cfg::kBN, int(128 / E));  // MN-major: one swizzle span
  const bool a_ok = tma_encodable<T>(p.a, std::uint64_t(k), std::uint64_t(m), std::uint64_t(p.lda) * E,
                                     Cfg::kBK, Cfg::kABoxM);
  const bool b_ok = kBKMajor ? tma_encodable<T>(p.values, kBlock, std::uint64_t(nnz) * kBlock, kBlock * E,
                                                Cfg::kBK, Cfg::kBN)
                             : tma_encodable<T>(p.values, kBlock, std::uint64_t(nnz) * kBlock, kBlock * E,
                                                kMnBox, Cfg::kBK);
  if (!a_ok || !b_ok) return std::nullopt;
  return std::make_pair(
      make_tma_atom(SM90_TMA_LOAD{}, dds_a_view<Cfg>(p.a, m, k, p.lda), typename Cfg::SmemLayoutABox{}(_, _, 0),
                    make_shape(Int<Cfg::kABoxM>{}, Int<Cfg::kBK>{})),
      make_tma_atom(SM90_TMA_LOAD{}, dds_b_view<Cfg, kBKMajor>(p.values, nnz), typename Cfg::SmemLayoutB{}(_, _, 0),
                    make_shape(Int<Cfg::kBN>{}, Int<Cfg::kBK>{})));
}

template <Elem kElem, int kBlock, bool kBKMajor>
bool dds_launch(const tc::TcParams& p, int n_block_cols, int num_sms, void* stream) {
  using Cfg = DdsConfig<kElem, kBlock, kBKMajor>;
  const auto tmas = dds_tmas<Cfg, kBKMajor>(p, "bsr (sm90 dds)");
  if (!tmas) return false;
  DdsArgs args{p.c, p.ldc, p.bias, p.offsets, p.indices, p.value_index, p.m,
            int((p.m + Cfg::kWgM - 1) / Cfg::kWgM), n_block_cols, nullptr, kStatic};
  const std::int64_t n_tiles = std::int64_t(args.m_tiles) * n_block_cols;
  // Below 2³¹ − 2 · #SMs: the producers' static tile numbers and the counter stay below 2³¹.
  SK_EXPECTS(n_tiles < (std::int64_t(1) << 30), "bsr (sm90 dds): too many tiles");
  constexpr auto kernel = dds_kernel<Cfg, kBKMajor, DdsTmaA<Cfg, kBKMajor>, DdsTmaB<Cfg, kBKMajor>>;
  allow_smem<kernel>(Cfg::kSmemBytes);
  const int grid = int(std::min<std::int64_t>(n_tiles, std::max(num_sms, 1)));
  set_schedule(args, p, n_tiles, 2 * grid, stream);  // two consumers per CTA
  kernel<<<grid, Cfg::kThreads, Cfg::kSmemBytes, static_cast<cudaStream_t>(stream)>>>(
      tmas->first, tmas->second, args, int(p.m), int(p.a_cols), int(p.nnz));
  SK_CUDA_CHECK_LAUNCH();
  return true;
}

}  // namespace sparsekern::bsr::sm90
