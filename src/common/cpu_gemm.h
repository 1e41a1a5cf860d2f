#pragma once
// A register-tiled CPU GEMM for the CPU backends (kron's GEMM steps): B packed into NR-column panels,
// A four rows at a time, a 4 × NR block of C in registers across the whole k loop (one load of B
// per four multiply-adds, none of C). The micro-kernel is compiled twice on x86-64 (baseline and
// AVX2+FMA, chosen at load time), so a portable wheel still runs 8-wide FMAs where the CPU has them.
#include <algorithm>
#include <cstddef>

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

}  // namespace sparsekern::detail
