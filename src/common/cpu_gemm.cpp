// The micro-kernels of cpu_gemm.h, written with GCC/Clang vector extensions. On x86-64 each exists
// three times: for the baseline (SSE2, 16-byte vectors; the 4 × NR block in two halves of 2 rows,
// which fit its 16 registers), for AVX2+FMA (32-byte vectors, all 4 rows at once) and for AVX-512F
// (a row per 64-byte vector, even and odd k steps in two sets of accumulators); the first call
// picks the widest the CPU has with __builtin_cpu_supports (SPARSEKERN_CPU_GEMM=base or =avx2 caps
// it). Other compilers get the plain loops. 32768 × 128 × 128 fp32 on one core of this CPU
// machine: 76 GFLOP/s (AVX2), against 12 for the plain loops (which GCC vectorised across k, with
// spills).
#include "cpu_gemm.h"

#include <cstdlib>
#include <cstring>

namespace sparsekern::detail {
namespace {

// Each micro-kernel sums k in chunks of kGemmChunk (cpu_gemm.h) into fresh accumulators and adds
// each chunk's sums to the running total (which starts at c for the _add form). With the _add form
// each call's k (a block of a block-sparse product) is its own chunk.

#if defined(__GNUC__) || defined(__clang__)
#define SK_GEMM_VEC 1
#define SK_GEMM_INLINE inline __attribute__((always_inline))

/// Rows [R0, R0 + R) of the 4 × NR block with vectors of BYTES bytes (added to c's when ADD).
template <typename Acc, bool ADD, int BYTES, int R0, int R>
SK_GEMM_INLINE void micro_rows(const Acc* __restrict ap, const Acc* __restrict bp, long long k, Acc* __restrict c) {
  typedef Acc V __attribute__((vector_size(BYTES)));
  typedef Acc VU __attribute__((vector_size(BYTES), aligned(sizeof(Acc))));  // unaligned loads/stores
  constexpr int NR = kGemmNR<Acc>;
  constexpr int NV = NR * static_cast<int>(sizeof(Acc)) / BYTES;  // vectors per row of the block
  V tot[R][NV] = {};
  if constexpr (ADD) {
    for (int i = 0; i < R; ++i)
      for (int v = 0; v < NV; ++v) tot[i][v] = *reinterpret_cast<const VU*>(c + (R0 + i) * NR + v * (BYTES / sizeof(Acc)));
  }
  for (long long r0 = 0; r0 < k; r0 += kGemmChunk) {  // partial sums per chunk of k (see kGemmChunk)
    V acc[R][NV] = {};
    const long long r1 = r0 + kGemmChunk < k ? r0 + kGemmChunk : k;
    for (long long r = r0; r < r1; ++r) {
      V b[NV];
      for (int v = 0; v < NV; ++v) b[v] = *reinterpret_cast<const VU*>(bp + r * NR + v * (BYTES / sizeof(Acc)));
      const Acc* a = ap + r * kGemmMR + R0;
      for (int i = 0; i < R; ++i)
        for (int v = 0; v < NV; ++v) acc[i][v] += b[v] * a[i];
    }
    for (int i = 0; i < R; ++i)
      for (int v = 0; v < NV; ++v) tot[i][v] += acc[i][v];
  }
  for (int i = 0; i < R; ++i)
    for (int v = 0; v < NV; ++v) *reinterpret_cast<VU*>(c + (R0 + i) * NR + v * (BYTES / sizeof(Acc))) = tot[i][v];
}

template <typename Acc, bool ADD>
void micro_base(const Acc* ap, const Acc* bp, long long k, Acc* c) {
  micro_rows<Acc, ADD, 16, 0, 2>(ap, bp, k, c);
  micro_rows<Acc, ADD, 16, 2, 2>(ap, bp, k, c);
}
#else
template <typename Acc, bool ADD>
void micro_base(const Acc* ap, const Acc* bp, long long k, Acc* c) {
  constexpr int NR = kGemmNR<Acc>;
  Acc tot[kGemmMR][NR] = {};
  if constexpr (ADD) {
    for (int i = 0; i < kGemmMR; ++i)
      for (int j = 0; j < NR; ++j) tot[i][j] = c[i * NR + j];
  }
  for (long long r0 = 0; r0 < k; r0 += kGemmChunk) {
    Acc acc[kGemmMR][NR] = {};
    const long long r1 = r0 + kGemmChunk < k ? r0 + kGemmChunk : k;
    for (long long r = r0; r < r1; ++r)
      for (int i = 0; i < kGemmMR; ++i)
        for (int j = 0; j < NR; ++j) acc[i][j] += ap[r * kGemmMR + i] * bp[r * NR + j];
    for (int i = 0; i < kGemmMR; ++i)
      for (int j = 0; j < NR; ++j) tot[i][j] += acc[i][j];
  }
  for (int i = 0; i < kGemmMR; ++i)
    for (int j = 0; j < NR; ++j) c[i * NR + j] = tot[i][j];
}
#endif

#if defined(SK_GEMM_VEC) && defined(__x86_64__)
#define SK_GEMM_X86 1
template <typename Acc, bool ADD>
__attribute__((target("avx2,fma"))) void micro_avx2(const Acc* ap, const Acc* bp, long long k, Acc* c) {
  micro_rows<Acc, ADD, 32, 0, 4>(ap, bp, k, c);
}

/// AVX-512: a row of the 4 × NR block is one 64-byte vector, so four accumulators would leave the
/// FMA units waiting on their latency; even and odd k steps go to two sets (eight chains), added
/// at the end. 1024³ fp32 on one core of the CPU machine (session 27, with gemm_batched's row tiles):
/// 35-43 ms with the AVX2 kernel, 23 with this one (torch: 13.5-14).
template <typename Acc, bool ADD>
__attribute__((target("avx512f"))) void micro_avx512(const Acc* __restrict ap, const Acc* __restrict bp, long long k,
                                                     Acc* __restrict c) {
  typedef Acc V __attribute__((vector_size(64)));
  typedef Acc VU __attribute__((vector_size(64), aligned(sizeof(Acc))));
  constexpr int NR = kGemmNR<Acc>;
  static_assert(NR * sizeof(Acc) == 64, "one vector per row of the block");
  V tot[kGemmMR] = {};
  if constexpr (ADD) {
    for (int i = 0; i < kGemmMR; ++i) tot[i] = *reinterpret_cast<const VU*>(c + i * NR);
  }
  for (long long r0 = 0; r0 < k; r0 += kGemmChunk) {
    const long long r1 = r0 + kGemmChunk < k ? r0 + kGemmChunk : k;
    V even[kGemmMR] = {}, odd[kGemmMR] = {};
    long long r = r0;
    for (; r + 1 < r1; r += 2) {
      const V b0 = *reinterpret_cast<const VU*>(bp + r * NR), b1 = *reinterpret_cast<const VU*>(bp + (r + 1) * NR);
      const Acc* a = ap + r * kGemmMR;
      for (int i = 0; i < kGemmMR; ++i) {
        even[i] += b0 * a[i];
        odd[i] += b1 * a[kGemmMR + i];
      }
    }
    if (r < r1) {
      const V b0 = *reinterpret_cast<const VU*>(bp + r * NR);
      for (int i = 0; i < kGemmMR; ++i) even[i] += b0 * ap[r * kGemmMR + i];
    }
    for (int i = 0; i < kGemmMR; ++i) tot[i] += even[i] + odd[i];
  }
  for (int i = 0; i < kGemmMR; ++i) *reinterpret_cast<VU*>(c + i * NR) = tot[i];
}

template <typename Acc>
using MicroFn = void (*)(const Acc*, const Acc*, long long, Acc*);

/// The widest kernel the CPU runs: AVX-512F, else AVX2+FMA, else the baseline.
/// SPARSEKERN_CPU_GEMM=base or =avx2 caps it (read at the first product of each type and form:
/// the tests run every kernel the machine has).
template <typename Acc, bool ADD>
MicroFn<Acc> pick() {
  const char* force = std::getenv("SPARSEKERN_CPU_GEMM");
  const bool cap_base = force != nullptr && std::strcmp(force, "base") == 0;
  const bool cap_avx2 = force != nullptr && std::strcmp(force, "avx2") == 0;
  if (cap_base) return &micro_base<Acc, ADD>;
  __builtin_cpu_init();
  if (!cap_avx2 && __builtin_cpu_supports("avx512f")) return &micro_avx512<Acc, ADD>;
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? &micro_avx2<Acc, ADD> : &micro_base<Acc, ADD>;
}
#endif

/// The kernel this CPU runs (picked once per type and form).
template <typename Acc, bool ADD>
void micro(const Acc* ap, const Acc* bp, long long k, Acc* c) {
#if defined(SK_GEMM_X86)
  static const MicroFn<Acc> fn = pick<Acc, ADD>();
  fn(ap, bp, k, c);
#else
  micro_base<Acc, ADD>(ap, bp, k, c);
#endif
}

}  // namespace

void gemm_micro(const float* ap, const float* bp, long long k, float* c) { micro<float, false>(ap, bp, k, c); }
void gemm_micro(const double* ap, const double* bp, long long k, double* c) { micro<double, false>(ap, bp, k, c); }
void gemm_micro_add(const float* ap, const float* bp, long long k, float* c) { micro<float, true>(ap, bp, k, c); }
void gemm_micro_add(const double* ap, const double* bp, long long k, double* c) { micro<double, true>(ap, bp, k, c); }

}  // namespace sparsekern::detail
