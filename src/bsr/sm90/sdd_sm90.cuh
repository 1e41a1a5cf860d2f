#pragma once
// Block-sparse sdd on Hopper: values[p] = (A · B)[block p] for the blocks p of a pattern, A (m × k)
// M-major and B (k × n) N-major (the layouts of dYᵀ and X in a weight gradient, read in place), or,
// with kKMajor, both K-major (A row-major, B column-major): wgmma reads tf32 operands K-major only,
// so the tf32 weight gradient runs on transposed copies of dY and X (see sdd_cuda in bsr_cuda.cu).
//
// Same structure as dds_sm90.cuh (persistent, a TMA producer warpgroup, two ping-pong wgmma
// consumer warpgroups with one stage ring each), with a dense K loop: a consumer tile is a
// 64-row slice of one block (64 × b), so that a pattern of few blocks still gives enough tiles to
// fill the GPU (a 128-block at density 0.1 of a 4096² weight is 102 blocks for 132 SMs: 204
// slices), at 43 FLOP per byte of shared-memory fill for b = 128 in 16 bits (21 in tf32); or,
// with kTM = 128 (tf32 blocks of 128), the whole block: 32 FLOP per byte in tf32.
#include "../tc/launch.h"
#include "common.cuh"

namespace sparsekern::bsr::sm90 {

template <Elem kElem, int kBlock, bool kKMajor = false, int kTMRows = 64>
struct SddConfig {
  using T = typename ElemT<kElem>::type;
  static_assert(kTMRows == 64 || (kTMRows == 128 && kBlock == 128), "sdd tiles: 64 rows, or whole blocks of 128");
  static constexpr int kThreads = 384;
  // Rows per consumer tile: 64 (b / 64 tiles per block), or 128 for whole blocks of 128, which
  // load each k-slice of B once per block instead of twice (a third fewer shared-memory fill bytes
  // per FLOP) but give half as many tiles (see sdd_tf32_sm90 in bsr_cuda.cu).
  static constexpr int kTM = kTMRows;
  static constexpr int kBN = kBlock;   // the whole block width
  static constexpr int kElemBytes = int(sizeof(T));
  static constexpr int kBK = 128 / kElemBytes;  // one 128-byte line of k per stage (SW128)
  static constexpr int kStageBytes = (kTM + kBN) * kBK * kElemBytes;
  // Two rings (one per consumer, see Rings) in ~200 KB, at most 6 stages each: long K loops.
  static constexpr int kPerRing = std::min(6, (200 * 1024) / (2 * kStageBytes));
  static constexpr int kStages = 2 * kPerRing;
  static constexpr GMMA::Major kMajor = kKMajor ? GMMA::Major::K : GMMA::Major::MN;
  using MmaAtom = decltype(GMMA::ss_op_selector<T, T, float, Shape<_64, Int<kBN>, Int<kBK>>, kMajor, kMajor>());
  using TiledMma = decltype(make_tiled_mma(MmaAtom{}));
  using AtomA = decltype(smem_atom<T, kKMajor, (kKMajor ? kBK : kTM) * kElemBytes>());
  using AtomB = decltype(smem_atom<T, kKMajor, (kKMajor ? kBK : kBN) * kElemBytes>());
  using Order = std::conditional_t<kKMajor, Step<_1, _2, _3>, Step<_2, _1, _3>>;
  using SmemLayoutA = decltype(tile_to_shape(AtomA{}, make_shape(Int<kTM>{}, Int<kBK>{}, Int<kStages>{}), Order{}));
  using SmemLayoutB = decltype(tile_to_shape(AtomB{}, make_shape(Int<kBN>{}, Int<kBK>{}, Int<kStages>{}), Order{}));
  struct Shared {
    alignas(1024) T a[cosize_v<SmemLayoutA>];
    alignas(1024) T b[cosize_v<SmemLayoutB>];
    Rings<kPerRing> rings;
  };
  static constexpr std::size_t kSmemBytes = sizeof(Shared);
};

struct SddArgs {
  void* out;
  const std::int32_t* block_rows;
  const std::int32_t* block_cols;
  int n_tiles;  // nnz · (b / kTM) · splits
  int k;
  // Split K (few blocks, long K: see sdd_splits in bsr_cuda.cu): tile t computes split t % splits
  // of its block slice, k-steps [s · steps_per_split, (s + 1) · steps_per_split) ∩ [0, nk), into
  // partial[s][block][row][col] (fp32, nnz · b² per split); tc::sdd_split_reduce sums them in split
  // order (deterministic) and rounds into out. splits = 1: no partials, the tile writes out.
  int splits;
  int steps_per_split;
  float* partial;
};

/// A: m × k with unit row stride (column stride lda); B viewed as n × k with unit stride along n
/// (row stride ldb of the k × n matrix). Both in CuTe's (M or N, K) operand convention. K-major
/// (kKMajor): A with unit column stride (row stride lda), B with unit row stride (column stride ldb).
template <class Cfg>
auto sdd_a_view(const void* a, int m, int k, std::int64_t lda) {
  const auto* t = static_cast<const typename Cfg::T*>(a);
  if constexpr (Cfg::kMajor == GMMA::Major::K) return make_tensor(make_gmem_ptr(t), make_shape(m, k), make_stride(lda, Int<1>{}));
  else return make_tensor(make_gmem_ptr(t), make_shape(m, k), make_stride(Int<1>{}, lda));
}
template <class Cfg>
auto sdd_b_view(const void* b, int n, int k, std::int64_t ldb) {
  const auto* t = static_cast<const typename Cfg::T*>(b);
  if constexpr (Cfg::kMajor == GMMA::Major::K) return make_tensor(make_gmem_ptr(t), make_shape(n, k), make_stride(ldb, Int<1>{}));
  else return make_tensor(make_gmem_ptr(t), make_shape(n, k), make_stride(Int<1>{}, ldb));
}
template <class Cfg>
using SddTmaA = decltype(make_tma_atom(SM90_TMA_LOAD{}, sdd_a_view<Cfg>(nullptr, 1, 1, 8),
                                       typename Cfg::SmemLayoutA{}(_, _, 0),
                                       make_shape(Int<Cfg::kTM>{}, Int<Cfg::kBK>{})));
template <class Cfg>
using SddTmaB = decltype(make_tma_atom(SM90_TMA_LOAD{}, sdd_b_view<Cfg>(nullptr, 1, 1, 8),
                                       typename Cfg::SmemLayoutB{}(_, _, 0),
                                       make_shape(Int<Cfg::kBN>{}, Int<Cfg::kBK>{})));

template <class Cfg, class TA, class TB>
__global__ void __launch_bounds__(Cfg::kThreads, 1)
    sdd_kernel(const __grid_constant__ TA tma_a, const __grid_constant__ TB tma_b, SddArgs p, int a_rows,
               int b_rows) {
#if defined(SPARSEKERN_SM90A_DEVICE)
  using T = typename Cfg::T;
  using State = cutlass::PipelineState<Cfg::kPerRing>;
  constexpr int kTM = Cfg::kTM, kBN = Cfg::kBN, kBK = Cfg::kBK, kPerRing = Cfg::kPerRing;
  constexpr int kSlices = kBN / kTM;

  extern __shared__ __align__(1024) char smem_raw[];
  auto& S = *reinterpret_cast<typename Cfg::Shared*>(smem_raw);
  const int wg = int(threadIdx.x) / 128;
  S.rings.init();
  __syncthreads();

  const int nk = (p.k + kBK - 1) / kBK;
  Tensor sA = make_tensor(make_smem_ptr(S.a), typename Cfg::SmemLayoutA{});
  Tensor sB = make_tensor(make_smem_ptr(S.b), typename Cfg::SmemLayoutB{});

  if (wg == 0) {
    cutlass::arch::warpgroup_reg_dealloc<40>();
    const int ring = int(threadIdx.x) / 32;
    if (ring >= 2 || threadIdx.x % 32 != 0) return;  // one thread of producer warp r fills ring r
    Tensor gA = local_tile(tma_a.get_tma_tensor(make_shape(a_rows, p.k)), make_shape(Int<kTM>{}, Int<kBK>{}),
                           make_coord(_, _));
    Tensor gB = local_tile(tma_b.get_tma_tensor(make_shape(b_rows, p.k)), make_shape(Int<kBN>{}, Int<kBK>{}),
                           make_coord(_, _));
    auto [tAgA, tAsA] = tma_partition(tma_a, Int<0>{}, Layout<_1>{}, group_modes<0, 2>(sA), group_modes<0, 2>(gA));
    auto [tBgB, tBsB] = tma_partition(tma_b, Int<0>{}, Layout<_1>{}, group_modes<0, 2>(sB), group_modes<0, 2>(gB));
    State state(0, 1, 0);
    int parity = 0;
    for (int tile = blockIdx.x; tile < p.n_tiles; tile += gridDim.x, parity ^= 1) {
      if (parity != ring) continue;
      const int base = tile / p.splits, split = tile - base * p.splits;
      const int blk = base / kSlices, slice = base % kSlices;
      const int mt = p.block_rows[blk] * kSlices + slice, nt = p.block_cols[blk];
      const int k0 = split * p.steps_per_split, k1 = min(nk, k0 + p.steps_per_split);
      for (int k = k0; k < k1; ++k) {
        wait_barrier(S.rings.empty[ring][state.index()], state.phase(), "empty", state.index(), tile);
        auto& full = S.rings.full[ring][state.index()];
        full.arrive_and_expect_tx(Cfg::kStageBytes);
        auto& bar = *reinterpret_cast<std::uint64_t*>(&full);
        const int stage = ring * kPerRing + state.index();
        copy(tma_a.with(bar), tAgA(_, mt, k), tAsA(_, stage));
        copy(tma_b.with(bar), tBgB(_, nt, k), tBsB(_, stage));
        ++state;
      }
    }
    for (int i = 0; i < kPerRing; ++i, ++state) {
      wait_barrier(S.rings.empty[ring][state.index()], state.phase(), "empty (tail)", state.index(), -1);
    }
  } else {
    cutlass::arch::warpgroup_reg_alloc<232>();
    const int ring = wg - 1;
    typename Cfg::TiledMma mma;
    auto thr = mma.get_thread_slice(int(threadIdx.x) % 128);
    Tensor tCrA = thr.make_fragment_A(thr.partition_A(sA));
    Tensor tCrB = thr.make_fragment_B(thr.partition_B(sB));
    Tensor acc = partition_fragment_C(mma, Shape<Int<kTM>, Int<kBN>>{});
    Tensor tCcC = thr.partition_C(make_identity_tensor(Shape<Int<kTM>, Int<kBN>>{}));
    T* out = static_cast<T*>(p.out);

    State state;
    int parity = 0;
    for (int tile = blockIdx.x; tile < p.n_tiles; tile += gridDim.x, parity ^= 1) {
      if (parity != ring) continue;
      const int base = tile / p.splits, split = tile - base * p.splits;
      const int k0 = split * p.steps_per_split, k1 = min(nk, k0 + p.steps_per_split);
      consume_tile(S.rings, ring, state, max(k1 - k0, 0), tile, mma, tCrA, tCrB, acc);

      const int blk = base / kSlices, slice = base % kSlices;
      const std::int64_t offset = std::int64_t(blk) * kBN * kBN + std::int64_t(slice) * kTM * kBN;
      if (p.splits > 1) {  // fp32 partial of this split, column pairs as 8-byte vectors
        float* dst = p.partial + std::int64_t(split) * (p.n_tiles / p.splits) * kTM * kBN + offset;
        CUTE_UNROLL
        for (int i = 0; i < size(acc); i += 2) {
          const auto rc = tCcC(i);
          *reinterpret_cast<float2*>(dst + get<0>(rc) * kBN + get<1>(rc)) = make_float2(acc(i), acc(i + 1));
        }
        continue;
      }
      T* dst = out + offset;
      CUTE_UNROLL
      for (int i = 0; i < size(acc); i += 2) {
        const auto rc = tCcC(i);
        if constexpr (sizeof(T) == 4) {  // tf32: fp32 values, column pairs as 8-byte vectors
          *reinterpret_cast<float2*>(dst + get<0>(rc) * kBN + get<1>(rc)) = make_float2(acc(i), acc(i + 1));
        } else {
          store_pair(dst + get<0>(rc) * kBN + get<1>(rc), acc(i), acc(i + 1));
        }
      }
    }
  }
#else
  __trap();
#endif
}

/// `splits` > 1: split K over that many tiles per block slice, with nnz · b² · splits floats of
/// fp32 partials at `partial` (16-byte aligned; the caller's workspace), summed by a second kernel.
template <Elem kElem, int kBlock, bool kKMajor, int kTM>
bool sdd_launch(const tc::TcParams& p, int nnz_blocks, int a_rows, int b_cols, int num_sms, void* stream,
                int splits, float* partial) {
  using Cfg = SddConfig<kElem, kBlock, kKMajor, kTM>;
  using TA = SddTmaA<Cfg>;
  using TB = SddTmaB<Cfg>;
  SK_EXPECTS(p.k > 0 && nnz_blocks > 0 && a_rows > 0 && b_cols > 0, "bsr (sm90 sdd): unsupported problem");
  {
    using T = typename Cfg::T;
    constexpr std::uint64_t E = sizeof(T);
    const bool ok =
        kKMajor ? tma_encodable<T>(p.a, std::uint64_t(p.k), std::uint64_t(a_rows), std::uint64_t(p.lda) * E, Cfg::kBK, Cfg::kTM) &&
                      tma_encodable<T>(p.b, std::uint64_t(p.k), std::uint64_t(b_cols), std::uint64_t(p.ldb) * E, Cfg::kBK, Cfg::kBN)
                : tma_encodable<T>(p.a, std::uint64_t(a_rows), std::uint64_t(p.k), std::uint64_t(p.lda) * E, 64, Cfg::kBK) &&
                      tma_encodable<T>(p.b, std::uint64_t(b_cols), std::uint64_t(p.k), std::uint64_t(p.ldb) * E, 64, Cfg::kBK);
    if (!ok) return false;
  }
  TA tma_a = make_tma_atom(SM90_TMA_LOAD{}, sdd_a_view<Cfg>(p.a, a_rows, p.k, p.lda),
                           typename Cfg::SmemLayoutA{}(_, _, 0), make_shape(Int<Cfg::kTM>{}, Int<Cfg::kBK>{}));
  TB tma_b = make_tma_atom(SM90_TMA_LOAD{}, sdd_b_view<Cfg>(p.b, b_cols, p.k, p.ldb),
                           typename Cfg::SmemLayoutB{}(_, _, 0), make_shape(Int<Cfg::kBN>{}, Int<Cfg::kBK>{}));
  const int nk = (p.k + Cfg::kBK - 1) / Cfg::kBK;
  splits = partial == nullptr ? 1 : std::clamp(splits, 1, nk);
  const int steps = (nk + splits - 1) / splits;
  splits = (nk + steps - 1) / steps;  // no empty split
  const std::int64_t n_tiles = std::int64_t(nnz_blocks) * (kBlock / Cfg::kTM) * splits;
  SK_EXPECTS(n_tiles < (std::int64_t(1) << 31), "bsr (sm90 sdd): too many tiles");
  SddArgs args{p.out_values, p.block_rows, p.block_cols, int(n_tiles), p.k, splits, steps, partial};
  constexpr auto kernel = sdd_kernel<Cfg, TA, TB>;
  allow_smem<kernel>(Cfg::kSmemBytes);
  const int grid = int(std::min<std::int64_t>(n_tiles, std::max(num_sms, 1)));
  kernel<<<grid, Cfg::kThreads, Cfg::kSmemBytes, static_cast<cudaStream_t>(stream)>>>(tma_a, tma_b, args, a_rows,
                                                                                     b_cols);
  SK_CUDA_CHECK_LAUNCH();
  if (splits > 1) {
    tc::sdd_split_reduce(partial, splits, std::int64_t(nnz_blocks) * kBlock * kBlock, p.out_values,
                         kElem == Elem::tf32, kElem == Elem::bf16, 8 * std::max(num_sms, 1), stream);
  }
  return true;
}

}  // namespace sparsekern::bsr::sm90
