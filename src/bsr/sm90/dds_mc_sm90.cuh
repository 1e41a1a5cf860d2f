#pragma once
// Block-sparse dds on Hopper with clusters of CTAs that share each block's loads (TMA multicast):
// the ping-pong kernel of dds_sm90.cuh (one block column per consumer tile, 128 × b), run by
// clusters of kCluster CTAs that work on the same block column of kCluster consecutive row panels
// at the same time.
//
// Why: the one-column kernel loads, per k-step, a 128 × kBK slice of A and a b × kBK slice of the
// block: (128 + b) · kBK elements for 2 · 128 · b · kBK FLOP, 64 FLOP per byte of L2 → shared
// memory traffic at b = 128 in 16 bits. The measured kernels ran at that traffic's ceiling (~9 TB/s
// out of L2 on an H200: 580 TFLOP/s at d = 0.5, where cuBLAS's dense product reaches ~750;
// docs/PERF_NOTES.md). CTAs of one cluster walk the same column, so they need the same block
// slices in the same order: each CTA loads 1/kCluster of every block slice and the TMA multicast
// writes it into the shared memory of all of them. L2 reads per k-step and CTA fall from
// (128 + b) · kBK to (128 + b / kCluster) · kBK elements: 85 FLOP per byte at b = 128 with pairs,
// as for the grouped kernel's 256-row tiles, but keeping the ping-pong (one consumer's epilogue
// overlaps the other's main loop), which the grouped kernel gives up.
//
// What changes against dds_kernel:
//   - tiles are (row panel pair, block column); rank r of the cluster takes row panel
//     kCluster · pair + r (a panel past the last loads no A and stores nothing: its consumer's
//     MMAs run on stale shared memory and its rows are masked out by store_tile);
//   - a stage's empty barrier counts its own consumer's 128 threads and one arrival from the same
//     ring's consumer of every other CTA of the cluster (their block slices land in this CTA's
//     stage, and this CTA's slice in theirs, so no producer may refill a stage before every
//     consumer of the cluster released it);
//   - dynamic tiles: rank 0's producer warp takes the next tile from the counter and hands it to
//     the other ranks' producer warps of the same ring through their shared memory (st.async with
//     a transaction barrier; a second barrier on rank 0 says that every rank has read it);
//   - the cluster synchronises after the barriers' initialisation (remote arrivals and multicast
//     writes need initialised barriers) and before exiting (none may target an exited CTA).
#include "dds_mc_sm90.h"
#include "dds_sm90.cuh"

#include <cute/arch/cluster_sm90.hpp>

namespace sparsekern::bsr::sm90 {

template <class Cfg, bool kBKMajor, int kCluster>
using DdsMcTmaB = decltype(make_tma_atom(SM90_TMA_LOAD_MULTICAST{}, dds_b_view<Cfg, kBKMajor>(nullptr, 1),
                                         typename Cfg::SmemLayoutB{}(_, _, 0),
                                         make_shape(Int<Cfg::kBN>{}, Int<Cfg::kBK>{}), Int<kCluster>{}));

/// The tile hand-off of the dynamic schedule (one slot per ring): rank 0 writes the tile into the
/// other ranks' `slot` with st.async, which completes their `full` transaction barrier; each of
/// them then arrives on rank 0's `empty` (kCluster − 1 arrivals) once it has read its slot.
struct McHandoff {
  cutlass::arch::ClusterTransactionBarrier full[2];
  cutlass::arch::ClusterBarrier empty[2];
  std::uint32_t slot[2];
};

template <class Cfg>
struct McShared {
  typename Cfg::Shared s;
  McHandoff h;
};

/// The shared::cluster address of `p` (a shared-memory address of this CTA) in CTA `rank`.
__device__ __forceinline__ std::uint32_t cluster_addr(const void* p, int rank) {
  std::uint32_t r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;"
               : "=r"(r)
               : "r"(static_cast<std::uint32_t>(__cvta_generic_to_shared(p))), "r"(rank));
  return r;
}

/// Stores v at CTA-cluster address `addr` and completes 4 bytes of the transaction barrier at `bar`
/// (both in the same CTA of the cluster).
__device__ __forceinline__ void st_async_u32(std::uint32_t addr, std::uint32_t v, std::uint32_t bar) {
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.u32 [%0], %1, [%2];" ::"r"(addr), "r"(v),
               "r"(bar)
               : "memory");
}

/// consume_tile (common.cuh) with the cluster's releases: the consumer's 128 threads arrive on their
/// own stage's empty barrier, and its first thread on the same stage's barrier in every other CTA
/// of the cluster (after warpgroup_wait: the wgmma that read the stage, a warpgroup-wide operation,
/// has completed).
template <int kCluster, int kPerRing>
__device__ __forceinline__ void mc_release(Rings<kPerRing>& rings, int ring, int idx, int rank) {
  rings.empty[ring][idx].arrive();
  if (int(threadIdx.x) % 128 == 0) {
    CUTE_UNROLL
    for (int r = 0; r < kCluster; ++r)
      if (r != rank) rings.empty[ring][idx].arrive(std::uint32_t(r), 1u);
  }
}

template <int kCluster, int kPerRing, class State, class Mma, class FragA, class FragB, class Acc>
__device__ __forceinline__ void mc_consume_tile(Rings<kPerRing>& rings, int ring, int rank, State& state, int nk,
                                                int tile, Mma& mma, FragA& tCrA, FragB& tCrB, Acc& acc) {
  clear(acc);
  mma.accumulate_ = GMMA::ScaleOut::One;
  warpgroup_fence_operand(acc);
  State prev = state;
  for (int k = 0; k < nk; ++k) {
    wait_barrier(rings.full[ring][state.index()], state.phase(), "full", state.index(), tile);
    const int stage = ring * kPerRing + state.index();
    warpgroup_arrive();
    CUTE_UNROLL
    for (int kb = 0; kb < size<2>(tCrA); ++kb) gemm(mma, tCrA(_, _, kb, stage), tCrB(_, _, kb, stage), acc);
    warpgroup_commit_batch();
    warpgroup_wait<1>();
    if (k > 0) mc_release<kCluster>(rings, ring, prev.index(), rank);
    prev = state;
    ++state;
  }
  warpgroup_wait<0>();
  if (nk > 0) mc_release<kCluster>(rings, ring, prev.index(), rank);
  warpgroup_fence_operand(acc);
}

template <class Cfg, bool kBKMajor, int kCluster, class TA, class TB>
__global__ void __launch_bounds__(Cfg::kThreads, 1)
    dds_mc_kernel(const __grid_constant__ TA tma_a, const __grid_constant__ TB tma_b, DdsArgs p, int a_rows,
                  int a_cols, int nnz) {
#if defined(SPARSEKERN_SM90A_DEVICE)
  using State = cutlass::PipelineState<Cfg::kPerRing>;
  constexpr int kWgM = Cfg::kWgM, kBN = Cfg::kBN, kBK = Cfg::kBK, kKSteps = Cfg::kKSteps;
  constexpr int kPerRing = Cfg::kPerRing;
  constexpr std::uint32_t kABytes = kWgM * kBK * Cfg::kElemBytes;
  constexpr std::uint32_t kBBytes = kBN * kBK * Cfg::kElemBytes;  // every rank's slices together
  static_assert(Cfg::kStageBytes == int(kABytes + kBBytes), "stage = A tile + block slice");

  extern __shared__ __align__(1024) char smem_raw[];
  auto& M = *reinterpret_cast<McShared<Cfg>*>(smem_raw);
  auto& S = M.s;
  const int wg = int(threadIdx.x) / 128;
  const int lane = int(threadIdx.x) % 32;
  const int rank = int(cute::block_rank_in_cluster());
  if (threadIdx.x == 0) {
    for (int r = 0; r < 2; ++r) {
      for (int s = 0; s < kPerRing; ++s) {
        S.rings.full[r][s].init(1);
        S.rings.empty[r][s].init(128 + kCluster - 1);
      }
      M.h.full[r].init(1);
      M.h.empty[r].init(kCluster - 1);
    }
  }
  cutlass::arch::fence_barrier_init();
  const int n_pairs = (p.m_tiles + kCluster - 1) / kCluster;  // row panel groups
  const int n_tiles = n_pairs * p.n_cols;
  const bool heavy = heavy_first(p, p.n_cols);  // CTA-uniform, the same order in every CTA
  if (heavy) heavy_first_order(p.offsets, p.n_cols, 1, p.n_cols, S.order);  // synchronises the CTA
  cute::cluster_arrive_relaxed();
  cute::cluster_wait();  // every CTA's barriers initialised before any remote arrival or multicast
  Tensor sA = make_tensor(make_smem_ptr(S.a), typename Cfg::SmemLayoutA{});
  Tensor sB = make_tensor(make_smem_ptr(S.b), typename Cfg::SmemLayoutB{});

  if (wg == 0) {
    cutlass::arch::warpgroup_reg_dealloc<40>();
    const int ring = int(threadIdx.x) / 32;
    if (ring < 2) {
      Tensor mA = tma_a.get_tma_tensor(make_shape(a_rows, a_cols));
      Tensor gA = local_tile(mA, make_shape(Int<kWgM>{}, Int<kBK>{}), make_coord(_, _));
      auto [tAgA, tAsA] = tma_partition(tma_a, Int<0>{}, Layout<_1>{}, group_modes<0, 2>(sA), group_modes<0, 2>(gA));
      Tensor mB = [&] {
        if constexpr (kBKMajor) return tma_b.get_tma_tensor(make_shape(nnz * kBN, kBN));
        else return tma_b.get_tma_tensor(make_shape(kBN, nnz * kBN));
      }();
      Tensor gB = local_tile(mB, make_shape(Int<kBN>{}, Int<kBK>{}), make_coord(_, _));
      // This rank's 1/kCluster of each block slice, multicast to every CTA of the cluster.
      auto [tBgB, tBsB] =
          tma_partition(tma_b, rank, Layout<Int<kCluster>>{}, group_modes<0, 2>(sB), group_modes<0, 2>(gB));
      constexpr std::uint16_t kMask = std::uint16_t((1u << kCluster) - 1);
      const int cluster = int(blockIdx.x) / kCluster, n_clusters = int(gridDim.x) / kCluster;

      State state(0, 1, 0);
      for (int it = 0;; ++it) {
        int v = cluster + (2 * it + ring) * n_clusters;  // static: the cluster's round-robin share
        if (p.counter != nullptr) {
          if (rank == 0) {
            v = next_tile(p.counter, 0, lane);
            if (lane == 0) {
              // The other ranks have read the previous hand-off (phase parity of a fresh barrier:
              // the wait on parity 1 passes at once).
              wait_barrier(M.h.empty[ring], std::uint32_t((it & 1) ^ 1), "hand-off empty", ring, it);
              for (int r = 1; r < kCluster; ++r)
                st_async_u32(cluster_addr(&M.h.slot[ring], r), std::uint32_t(v), cluster_addr(&M.h.full[ring], r));
            }
            __syncwarp();
          } else {
            std::uint32_t got = 0;
            if (lane == 0) {
              M.h.full[ring].arrive_and_expect_tx(4);
              wait_barrier(M.h.full[ring], std::uint32_t(it & 1), "hand-off full", ring, it);
              got = ld_shared_u32(&M.h.slot[ring]);
            }
            v = int(__shfl_sync(0xffffffffu, got, 0));  // the slot read has completed
            if (lane == 0) {
              // Release at cluster scope: rank 0 may overwrite the slot once this lands.
              asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];" ::"r"(
                               cluster_addr(&M.h.empty[ring], 0))
                           : "memory");
            }
          }
        }
        int j = 0, mp = 0;
        if (v < n_tiles) schedule_coords(v, p.n_cols, heavy, S.order, j, mp);
        const int mt = mp * kCluster + rank;
        const bool a_live = mt < p.m_tiles;  // the last group's missing panels load no A
        const int tile = v < n_tiles ? mt * p.n_cols + j : -1;
        const int e0 = tile < 0 ? 0 : p.offsets[j], e1 = tile < 0 ? 0 : p.offsets[j + 1];
        if (e0 == e1) {
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
                st_shared_u32(&S.rings.info[ring][state.index()], std::uint32_t(tile));
                full.arrive_and_expect_tx(a_live ? kABytes + kBBytes : kBBytes);
                auto& bar = *reinterpret_cast<std::uint64_t*>(&full);
                const int stage = ring * kPerRing + state.index();
                if (a_live) copy(tma_a.with(bar), tAgA(_, mt, kbi * kKSteps + kk), tAsA(_, stage));
                if constexpr (kBKMajor) copy(tma_b.with(bar, kMask), tBgB(_, vii, kk), tBsB(_, stage));
                else copy(tma_b.with(bar, kMask), tBgB(_, 0, vii * kKSteps + kk), tBsB(_, stage));
              }
              __syncwarp();
              ++state;
            }
          }
        }
      }
      for (int i = 0; i < kPerRing; ++i, ++state)
        wait_barrier(S.rings.empty[ring][state.index()], state.phase(), "empty (tail)", state.index(), -1);
    }
  } else {
    cutlass::arch::warpgroup_reg_alloc<232>();
    const int ring = wg - 1;
    typename Cfg::TiledMma mma;
    auto thr = mma.get_thread_slice(int(threadIdx.x) % 128);
    Tensor tCrA = thr.make_fragment_A(thr.partition_A(sA));
    Tensor tCrB = thr.make_fragment_B(thr.partition_B(sB));
    Tensor acc = partition_fragment_C(mma, Shape<Int<kWgM>, Int<kBN>>{});
    Tensor tCcC = thr.partition_C(make_identity_tensor(Shape<Int<kWgM>, Int<kBN>>{}));
    using T = typename Cfg::T;
    T* c = static_cast<T*>(p.c);
    const T* bias = static_cast<const T*>(p.bias);

    State state;
    while (true) {
      wait_barrier(S.rings.full[ring][state.index()], state.phase(), "full", state.index(), -1);
      const std::uint32_t info = ld_shared_u32(&S.rings.info[ring][state.index()]);
      if (info == kNoTile) {
        mc_release<kCluster>(S.rings, ring, state.index(), rank);
        break;
      }
      const int tile = int(info);
      const int mt = tile / p.n_cols, j = tile - mt * p.n_cols;
      const int nk = (p.offsets[j + 1] - p.offsets[j]) * kKSteps;
      if (nk == 0) {
        mc_release<kCluster>(S.rings, ring, state.index(), rank);
        ++state;
      }
      mc_consume_tile<kCluster>(S.rings, ring, rank, state, nk, tile, mma, tCrA, tCrB, acc);
      // Rows past m (all of them for a panel past the last) are not stored.
      store_tile<kBN>(acc, tCcC, c, p.ldc, p.m, std::int64_t(mt) * kWgM, std::int64_t(j) * kBN, bias, lane);
    }
  }
  // No CTA leaves while another may still arrive on its barriers or hand it a tile.
  cute::cluster_arrive();
  cute::cluster_wait();
#else
  __trap();
#endif
}

/// Clusters of kCluster CTAs that fit the device at once for this kernel (cached per device).
template <auto kKernel>
int max_active_clusters(int cluster, std::size_t smem, int threads) {
  static std::atomic<int> cached[64];  // zero-initialised (static storage)
  int device = 0;
  SK_CUDA_TRY(cudaGetDevice(&device));
  if (device < 64) {
    const int c = cached[device].load(std::memory_order_relaxed);
    if (c > 0) return c;
  }
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(unsigned(cluster), 1, 1);
  cfg.blockDim = dim3(unsigned(threads), 1, 1);
  cfg.dynamicSmemBytes = smem;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = unsigned(cluster);
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  int n = 0;
  SK_CUDA_TRY(cudaOccupancyMaxActiveClusters(&n, kKernel, &cfg));
  n = std::max(n, 1);
  if (device < 64) cached[device].store(n, std::memory_order_relaxed);
  return n;
}

template <Elem kElem, int kBlock, bool kBKMajor>
bool dds_mc_launch(const tc::TcParams& p, int n_block_cols, int num_sms, void* stream) {
  using Cfg = DdsConfig<kElem, kBlock, kBKMajor>;
  constexpr int kCluster = 2;
  using TA = DdsTmaA<Cfg, kBKMajor>;
  using TB = DdsMcTmaB<Cfg, kBKMajor, kCluster>;
  const auto tmas = dds_tmas<Cfg, kBKMajor>(p, "bsr (sm90 dds, clusters)");  // checks + A's descriptor
  if (!tmas) return false;
  const TB tma_b = make_tma_atom(SM90_TMA_LOAD_MULTICAST{}, dds_b_view<Cfg, kBKMajor>(p.values, int(p.nnz)),
                                 typename Cfg::SmemLayoutB{}(_, _, 0), make_shape(Int<Cfg::kBN>{}, Int<Cfg::kBK>{}),
                                 Int<kCluster>{});
  DdsArgs args{p.c, p.ldc, p.bias, p.offsets, p.indices, p.value_index, p.m,
               int((p.m + Cfg::kWgM - 1) / Cfg::kWgM), n_block_cols, nullptr, kStatic};
  const std::int64_t n_tiles = std::int64_t((args.m_tiles + kCluster - 1) / kCluster) * n_block_cols;
  SK_EXPECTS(n_tiles < (std::int64_t(1) << 30), "bsr (sm90 dds, clusters): too many tiles");
  constexpr auto kernel = dds_mc_kernel<Cfg, kBKMajor, kCluster, TA, TB>;
  constexpr std::size_t kSmem = sizeof(McShared<Cfg>);
  allow_smem<kernel>(kSmem);
  const int fit = max_active_clusters<kernel>(kCluster, kSmem, Cfg::kThreads);
  const int clusters = int(std::min<std::int64_t>(n_tiles, std::min(fit, std::max(num_sms, kCluster) / kCluster)));
  set_schedule(args, p, n_tiles, 2 * clusters, stream);  // two consumers per cluster tile stream
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(unsigned(clusters * kCluster), 1, 1);
  cfg.blockDim = dim3(unsigned(Cfg::kThreads), 1, 1);
  cfg.dynamicSmemBytes = kSmem;
  cfg.stream = static_cast<cudaStream_t>(stream);
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = unsigned(kCluster);
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  SK_CUDA_TRY(cudaLaunchKernelEx(&cfg, kernel, tmas->first, tma_b, args, int(p.m), int(p.a_cols), int(p.nnz)));
  return true;
}

}  // namespace sparsekern::bsr::sm90
