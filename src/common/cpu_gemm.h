#pragma once
// A register-tiled CPU GEMM for the CPU backends (kron's GEMM steps): B packed into NR-column panels,
// A four rows at a time, a 4 × NR block of C in registers across the whole k loop (one load of B
// per four multiply-adds, none of C). The micro-kernel is compiled twice on x86-64 (baseline and
// AVX2+FMA, chosen at load time), so a portable wheel still runs 8-wide FMAs where the CPU has them.
#include <algorithm>
#include <cstddef>
#include <vector>

namespace sparsekern::detail {

constexpr int kGemmMR = 4;
/// Columns of a C block: 64 bytes of the accumulator type (16 floats, 8 doubles).
template <typename Acc>
constexpr int kGemmNR = static_cast<int>(64 / sizeof(Acc));

/// c[r·NR + j] = Σ_kk ap[kk·4 + r] · bp[kk·NR + j] for r < 4, j < NR (c overwritten).
void gemm_micro(const float* ap, const float* bp, long long k, float* c);
void gemm_micro(const double* ap, const double* bp, long long k, double* c);

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

/// Rows [i0, min(i0 + 4, m)) of C = A · B with B packed by gemm_pack_b: A's element (i, r) at
/// a[i·a_rs + r·a_cs]; `ap` holds 4·k accumulators (scratch); store(i, j, value) writes C.
template <typename T, typename Acc, class Store>
void gemm_rows4(const T* a, long long a_rs, long long a_cs, long long m, long long k, long long n, long long i0,
                const Acc* bp, Acc* ap, Store&& store) {
  constexpr int NR = kGemmNR<Acc>;
  const int rows = static_cast<int>(std::min<long long>(kGemmMR, m - i0));
  for (long long r = 0; r < k; ++r)
    for (int i = 0; i < kGemmMR; ++i)
      ap[r * kGemmMR + i] = i < rows ? static_cast<Acc>(a[(i0 + i) * a_rs + r * a_cs]) : Acc(0);
  alignas(64) Acc c[kGemmMR * NR];
  for (long long j0 = 0; j0 < n; j0 += NR) {
    gemm_micro(ap, bp + (j0 / NR) * k * NR, k, c);
    const int w = static_cast<int>(std::min<long long>(NR, n - j0));
    for (int i = 0; i < rows; ++i)
      for (int jj = 0; jj < w; ++jj) store(i0 + i, j0 + jj, c[i * NR + jj]);
  }
}

/// C[b] = A[b] · B[b] for b < batch (A[b] m × k at a + b·a_bs with strides a_rs, a_cs; B[b] k × n
/// likewise), each element of C handed to store(b, i, j, value). B is packed once per batch entry,
/// or once in all when shared (batch 1 or b_bs = 0: then the row blocks of every entry run in
/// parallel; otherwise the entries do, each thread packing its own).
template <typename T, typename Acc, class Store>
void gemm_batched(long long batch, long long m, long long n, long long k, const T* a, long long a_bs,
                  long long a_rs, long long a_cs, const T* b, long long b_bs, long long b_rs, long long b_cs,
                  Store&& store) {
  if (batch <= 0 || m <= 0 || n <= 0) return;
  const std::size_t psize = gemm_packed_b_size<Acc>(k, n);
  const std::size_t asize = static_cast<std::size_t>(kGemmMR * std::max<long long>(k, 1));
  const long long mblocks = (m + kGemmMR - 1) / kGemmMR;
  const bool parallel = batch * m * n * k > (1 << 16);
  auto rows4 = [&](long long e, long long ib, const Acc* bp, Acc* ap) {
    gemm_rows4<T, Acc>(a + e * a_bs, a_rs, a_cs, m, k, n, ib * kGemmMR, bp, ap,
                       [&](long long i, long long j, Acc v) { store(e, i, j, v); });
  };
  if (batch == 1 || b_bs == 0) {
    std::vector<Acc> bp(psize);
    gemm_pack_b<T, Acc>(b, b_rs, b_cs, k, n, bp.data());
#if defined(_OPENMP)
#pragma omp parallel if (parallel)
#endif
    {
      std::vector<Acc> ap(asize);
#if defined(_OPENMP)
#pragma omp for schedule(static)
#endif
      for (long long t = 0; t < batch * mblocks; ++t) rows4(t / mblocks, t % mblocks, bp.data(), ap.data());
    }
    return;
  }
#if defined(_OPENMP)
#pragma omp parallel if (parallel)
#endif
  {
    std::vector<Acc> bp(psize), ap(asize);
#if defined(_OPENMP)
#pragma omp for schedule(static)
#endif
    for (long long e = 0; e < batch; ++e) {
      gemm_pack_b<T, Acc>(b + e * b_bs, b_rs, b_cs, k, n, bp.data());
      for (long long ib = 0; ib < mblocks; ++ib) rows4(e, ib, bp.data(), ap.data());
    }
  }
}

}  // namespace sparsekern::detail
