#pragma once
// A register-tiled CPU GEMM for the CPU backends (dense products, kron's GEMM steps, bsr's
// products): B packed into NR-column panels, A four rows at a time in tiles of up to 16 such
// groups, a 4 × NR block of C in registers across the whole k loop (one load of B per four
// multiply-adds, none of C). The micro-kernel is compiled three times on x86-64 (baseline,
// AVX2+FMA, AVX-512F; chosen at load time), so a portable wheel still runs 8- or 16-wide FMAs where
// the CPU has them.
#include <algorithm>
#include <cstddef>
#include <vector>
#if defined(_OPENMP)
#include <omp.h>
#endif

#include "thread_scratch.h"

namespace sparsekern::detail {

constexpr int kGemmMR = 4;
/// The k that the micro-kernels (and the block-sparse CPU products, across blocks) sum into fresh
/// accumulators before adding to the running total: the rounding error of a long fp32 sum then
/// grows with chunk + k / chunk terms, not k (one sum over K = 16384 was 6-10x less accurate than
/// torch's BLAS, which blocks K the same way).
constexpr long long kGemmChunk = 256;
/// Columns of a C block: 64 bytes of the accumulator type (16 floats, 8 doubles).
template <typename Acc>
constexpr int kGemmNR = static_cast<int>(64 / sizeof(Acc));

/// c[r·NR + j] = Σ_kk ap[kk·4 + r] · bp[kk·NR + j] for r < 4, j < NR (c overwritten).
void gemm_micro(const float* ap, const float* bp, long long k, float* c);
void gemm_micro(const double* ap, const double* bp, long long k, double* c);
/// The same, added to c: c[r·NR + j] += Σ_kk ap[kk·4 + r] · bp[kk·NR + j].
void gemm_micro_add(const float* ap, const float* bp, long long k, float* c);
void gemm_micro_add(const double* ap, const double* bp, long long k, double* c);

/// Elements of the packed B for k × n.
template <typename Acc>
std::size_t gemm_packed_b_size(long long k, long long n) {
  const long long nr = kGemmNR<Acc>;
  return static_cast<std::size_t>((n + nr - 1) / nr * nr * k);
}

/// Packs B (k × n, element (r, j) at b[r·rs + j·cs]) into column panels of NR:
/// bp[(jb·k + r)·NR + jj] = B[r, jb·NR + jj], zero past n.
template <typename T, typename Acc>
void gemm_pack_b(const T* b, long long rs, long long cs, long long k, long long n, Acc* bp) {
  constexpr int NR = kGemmNR<Acc>;
  for (long long j0 = 0; j0 < n; j0 += NR) {
    Acc* panel = bp + (j0 / NR) * k * NR;
    const int w = static_cast<int>(std::min<long long>(NR, n - j0));
    for (long long r = 0; r < k; ++r) {
      Acc* dst = panel + r * NR;
      for (int jj = 0; jj < w; ++jj) dst[jj] = static_cast<Acc>(b[r * rs + (j0 + jj) * cs]);
      for (int jj = w; jj < NR; ++jj) dst[jj] = Acc(0);
    }
  }
}

/// Groups of four rows in a tile of gemm_batched: B's panels are read once per tile (then from
/// cache for the tile's other groups) rather than once per four rows. 1024³ fp32 on one core of
/// the CPU machine (session 27): 48-53 ms with one group per pass, see docs/PERF_NOTES.md.
constexpr long long kGemmTileGroups = 16;

/// Groups per tile for `groups` groups of four rows shared out over the threads: up to
/// kGemmTileGroups, fewer where that would leave fewer than four tiles per thread.
inline long long gemm_tile_groups(long long groups) {
#if defined(_OPENMP)
  const long long threads = omp_get_max_threads();
#else
  const long long threads = 1;
#endif
  return std::clamp<long long>(groups / (4 * threads), 1, kGemmTileGroups);
}

/// Rows [i0, i0 + 4·ng) of A (m × k, element (i, r) at a[i·rs + r·cs]) as ng groups of four
/// rows, each k-interleaved as gemm_micro reads them: ap[(g·k + r)·4 + i] = A[i0 + 4g + i, r], 0
/// for rows at or past m. Reads along A's unit-stride dimension: row by row for a row-major A,
/// else a step of k at a time across the rows (a transposed view, such as a weight gradient's
/// ∂ℓ/∂yᵀ).
template <typename T, typename Acc>
void gemm_pack_a(const T* a, long long rs, long long cs, long long m, long long k, long long i0, long long ng,
                 Acc* ap) {
  const long long rows = std::min<long long>(kGemmMR * ng, m - i0);
  auto at = [&](long long ii, long long r) -> Acc& { return ap[((ii / kGemmMR) * k + r) * kGemmMR + ii % kGemmMR]; };
  if (cs == 1) {
    for (long long ii = 0; ii < rows; ++ii)
      for (long long r = 0; r < k; ++r) at(ii, r) = static_cast<Acc>(a[(i0 + ii) * rs + r]);
  } else {
    for (long long r = 0; r < k; ++r)
      for (long long ii = 0; ii < rows; ++ii) at(ii, r) = static_cast<Acc>(a[(i0 + ii) * rs + r * cs]);
  }
  for (long long ii = rows; ii < kGemmMR * ng; ++ii)
    for (long long r = 0; r < k; ++r) at(ii, r) = Acc(0);
}

/// Rows [i0, min(i0 + 4·ng, m)) of C = A · B with B packed by gemm_pack_b (i0 + 4·(ng − 1) < m):
/// A's element (i, r) at a[i·a_rs + r·a_cs]; `ap` holds ng·4·k accumulators (scratch);
/// store(i, j, value) writes C.
template <typename T, typename Acc, class Store>
void gemm_rows_tile(const T* a, long long a_rs, long long a_cs, long long m, long long k, long long n, long long i0,
                    long long ng, const Acc* bp, Acc* ap, Store&& store) {
  constexpr int NR = kGemmNR<Acc>;
  gemm_pack_a<T, Acc>(a, a_rs, a_cs, m, k, i0, ng, ap);
  alignas(64) Acc c[kGemmMR * NR];
  for (long long j0 = 0; j0 < n; j0 += NR) {
    const int w = static_cast<int>(std::min<long long>(NR, n - j0));
    for (long long g = 0; g < ng; ++g) {
      const long long r0 = i0 + g * kGemmMR;
      const int rows = static_cast<int>(std::min<long long>(kGemmMR, m - r0));
      gemm_micro(ap + g * kGemmMR * k, bp + (j0 / NR) * k * NR, k, c);
      for (int i = 0; i < rows; ++i)
        for (int jj = 0; jj < w; ++jj) store(r0 + i, j0 + jj, c[i * NR + jj]);
    }
  }
}

/// C[b] = A[b] · B[b] for b < batch (A[b] m × k at a + b·a_bs with strides a_rs, a_cs; B[b] k × n
/// likewise), each element of C handed to store(b, i, j, value). B is packed once per batch entry,
/// or once in all when shared (batch 1 or b_bs = 0: then the row tiles of every entry run in
/// parallel; otherwise the entries do, each thread packing its own).
template <typename T, typename Acc, class Store>
void gemm_batched(long long batch, long long m, long long n, long long k, const T* a, long long a_bs,
                  long long a_rs, long long a_cs, const T* b, long long b_bs, long long b_rs, long long b_cs,
                  Store&& store) {
  if (batch <= 0 || m <= 0 || n <= 0) return;
  const std::size_t psize = gemm_packed_b_size<Acc>(k, n);
  const long long mblocks = (m + kGemmMR - 1) / kGemmMR;
  const bool parallel = batch * m * n * k > (1 << 16);
  // Shared B: the tiles of every entry share the threads; else each entry is one thread's.
  const long long tile_groups = (batch == 1 || b_bs == 0) ? gemm_tile_groups(batch * mblocks)
                                                          : std::min<long long>(kGemmTileGroups, mblocks);
  const long long tiles = (mblocks + tile_groups - 1) / tile_groups;
  const std::size_t asize = static_cast<std::size_t>(tile_groups * kGemmMR * std::max<long long>(k, 1));
  auto tile = [&](long long e, long long t, const Acc* bp, Acc* ap) {
    const long long g0 = t * tile_groups;
    gemm_rows_tile<T, Acc>(a + e * a_bs, a_rs, a_cs, m, k, n, g0 * kGemmMR, std::min(tile_groups, mblocks - g0), bp,
                           ap, [&](long long i, long long j, Acc v) { store(e, i, j, v); });
  };
  // Per-thread buffers made before the regions (ThreadScratch: an allocation failure inside one
  // would terminate the process).
  ThreadScratch<Acc> aps(asize, parallel);
  if (batch == 1 || b_bs == 0) {
    std::vector<Acc> bp(psize);
    gemm_pack_b<T, Acc>(b, b_rs, b_cs, k, n, bp.data());
#if defined(_OPENMP)
#pragma omp parallel if (parallel)
#endif
    {
      Acc* ap = aps.get();
#if defined(_OPENMP)
#pragma omp for schedule(static)
#endif
      for (long long t = 0; t < batch * tiles; ++t) tile(t / tiles, t % tiles, bp.data(), ap);
    }
    return;
  }
  ThreadScratch<Acc> bps(psize, parallel);
#if defined(_OPENMP)
#pragma omp parallel if (parallel)
#endif
  {
    Acc* bp = bps.get();
    Acc* ap = aps.get();
#if defined(_OPENMP)
#pragma omp for schedule(static)
#endif
    for (long long e = 0; e < batch; ++e) {
      gemm_pack_b<T, Acc>(b + e * b_bs, b_rs, b_cs, k, n, bp);
      for (long long t = 0; t < tiles; ++t) tile(e, t, bp, ap);
    }
  }
}

}  // namespace sparsekern::detail
