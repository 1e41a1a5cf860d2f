// The micro-kernels of cpu_gemm.h, written with GCC/Clang vector extensions. On x86-64 each exists
// twice: for the baseline (SSE2, 16-byte vectors; the 4 × NR block in two halves of 2 rows, which fit its 16 registers) and
// for AVX2+FMA (32-byte vectors, all 4 rows at once); the first call picks one with
// __builtin_cpu_supports (SPARSEKERN_CPU_GEMM=base forces the baseline). Other compilers get the
// plain loops. 32768 × 128 × 128 fp32 on one core of this CPU machine: 76 GFLOP/s, against 12 for
// the plain loops (which GCC vectorised across k, with spills).
#include "cpu_gemm.h"

#include <cstdlib>
#include <cstring>

namespace sparsekern::detail {
namespace {

#if defined(__GNUC__) || defined(__clang__)
#define SK_GEMM_VEC 1
#define SK_GEMM_INLINE inline __attribute__((always_inline))

/// Rows [R0, R0 + R) of the 4 × NR block with vectors of BYTES bytes.
template <typename Acc, int BYTES, int R0, int R>
SK_GEMM_INLINE void micro_rows(const Acc* __restrict ap, const Acc* __restrict bp, long long k, Acc* __restrict c) {
  typedef Acc V __attribute__((vector_size(BYTES)));
  typedef Acc VU __attribute__((vector_size(BYTES), aligned(sizeof(Acc))));  // unaligned loads/stores
  constexpr int NR = kGemmNR<Acc>;
  constexpr int NV = NR * static_cast<int>(sizeof(Acc)) / BYTES;  // vectors per row of the block
  V acc[R][NV] = {};
  for (long long r = 0; r < k; ++r) {
    V b[NV];
    for (int v = 0; v < NV; ++v) b[v] = *reinterpret_cast<const VU*>(bp + r * NR + v * (BYTES / sizeof(Acc)));
    const Acc* a = ap + r * kGemmMR + R0;
    for (int i = 0; i < R; ++i)
      for (int v = 0; v < NV; ++v) acc[i][v] += b[v] * a[i];
  }
  for (int i = 0; i < R; ++i)
    for (int v = 0; v < NV; ++v) *reinterpret_cast<VU*>(c + (R0 + i) * NR + v * (BYTES / sizeof(Acc))) = acc[i][v];
}

template <typename Acc>
void micro_base(const Acc* ap, const Acc* bp, long long k, Acc* c) {
  micro_rows<Acc, 16, 0, 2>(ap, bp, k, c);
  micro_rows<Acc, 16, 2, 2>(ap, bp, k, c);
}
#else
template <typename Acc>
void micro_base(const Acc* ap, const Acc* bp, long long k, Acc* c) {
  constexpr int NR = kGemmNR<Acc>;
  Acc acc[kGemmMR][NR] = {};
  for (long long r = 0; r < k; ++r)
    for (int i = 0; i < kGemmMR; ++i)
      for (int j = 0; j < NR; ++j) acc[i][j] += ap[r * kGemmMR + i] * bp[r * NR + j];
  for (int i = 0; i < kGemmMR; ++i)
    for (int j = 0; j < NR; ++j) c[i * NR + j] = acc[i][j];
}
#endif

#if defined(SK_GEMM_VEC) && defined(__x86_64__)
#define SK_GEMM_X86 1
template <typename Acc>
__attribute__((target("avx2,fma"))) void micro_avx2(const Acc* ap, const Acc* bp, long long k, Acc* c) {
  micro_rows<Acc, 32, 0, 4>(ap, bp, k, c);
}

template <typename Acc>
using MicroFn = void (*)(const Acc*, const Acc*, long long, Acc*);

/// AVX2+FMA where the CPU has both, unless SPARSEKERN_CPU_GEMM=base asks for the baseline kernel
/// (read at the first product of each type: the tests check the baseline on machines with AVX2).
template <typename Acc>
MicroFn<Acc> pick() {
  const char* force = std::getenv("SPARSEKERN_CPU_GEMM");
  if (force != nullptr && std::strcmp(force, "base") == 0) return &micro_base<Acc>;
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? &micro_avx2<Acc> : &micro_base<Acc>;
}
#endif

/// The kernel this CPU runs (picked once per type).
template <typename Acc>
void micro(const Acc* ap, const Acc* bp, long long k, Acc* c) {
#if defined(SK_GEMM_X86)
  static const MicroFn<Acc> fn = pick<Acc>();
  fn(ap, bp, k, c);
#else
  micro_base(ap, bp, k, c);
#endif
}

}  // namespace

void gemm_micro(const float* ap, const float* bp, long long k, float* c) { micro(ap, bp, k, c); }
void gemm_micro(const double* ap, const double* bp, long long k, double* c) { micro(ap, bp, k, c); }

}  // namespace sparsekern::detail
