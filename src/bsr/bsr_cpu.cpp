// CPU backend of the block-sparse products (every dtype; accumulation in fp32, fp64 for fp64), on
// the register-tiled micro-kernel of common/cpu_gemm.h (a 4 × NR block of C in registers across a
// k loop; NR = 16 floats or 8 doubles, so a block of b ≥ 16 columns is b / NR whole panels).
// dds: the stored blocks of Bop packed once into NR-column panels; tiles of up to 16 groups of four
// rows of C in parallel, each packing its rows of A once (k-interleaved per group, so the rows of
// A a block reads are one contiguous run) and, block column by block column, adding each stored
// block's product into the tile's rows (the block read once per tile, then from L1).
// sdd: B packed once into panels; tasks of up to four stored blocks of one block row in parallel,
// each packing the block row's rows of A once and walking k in chunks (a chunk of a B panel stays
// in L1 for the block's groups of rows).
#include <algorithm>
#include <vector>

#include "../common/check.h"
#include "../common/cpu_gemm.h"
#include "../common/dispatch.h"
#include "../common/thread_scratch.h"
#include "bsr_internal.h"

namespace sparsekern::bsr::detail {
namespace {

using sparsekern::detail::acc_type;
using sparsekern::detail::gemm_micro;
using sparsekern::detail::gemm_micro_add;
using sparsekern::detail::gemm_pack_a;
using sparsekern::detail::gemm_pack_b;
using sparsekern::detail::gemm_packed_b_size;
using sparsekern::detail::gemm_tile_groups;
using sparsekern::detail::kGemmChunk;
using sparsekern::detail::kGemmMR;
using sparsekern::detail::kGemmNR;
using sparsekern::detail::ThreadScratch;

template <typename T>
void dds_cpu_typed(const DdsProblem& p) {
  using Acc = typename acc_type<T>::type;
  constexpr int NR = kGemmNR<Acc>;
  const SparseOperand& s = p.s;
  const std::int64_t m = p.a.rows, n = p.c.cols, b = s.block, k = s.k_blocks * b;
  SK_EXPECTS(b % NR == 0, "bsr (cpu): block size ", b, " is not a multiple of ", NR);
  const std::int64_t panels = b / NR, psize = b * b;  // per block
  const auto* A = static_cast<const T*>(p.a.data);
  const auto* V = static_cast<const T*>(s.values);
  const auto* bias = static_cast<const T*>(p.bias);
  auto* C = static_cast<T*>(p.c.data);

  // Every stored block as Bop(kk, nn) (b × b), packed into b / NR panels of b rows × NR.
  std::vector<Acc> blocks(static_cast<std::size_t>(s.nnz_blocks * psize));
  const std::int64_t brs = s.transposed_blocks ? 1 : b, bcs = s.transposed_blocks ? b : 1;
  for (std::int64_t v = 0; v < s.nnz_blocks; ++v) gemm_pack_b<T, Acc>(V + v * psize, brs, bcs, b, b, blocks.data() + v * psize);

  // Tiles of G groups of four rows: a block column's blocks are read once per tile (then from L1
  // for the tile's other groups), the tile's rows of A packed once. G up to 16 (64 rows), smaller
  // where that leaves too few tiles for the threads.
  const std::int64_t groups = (m + kGemmMR - 1) / kGemmMR;
  const std::int64_t g_per_tile = gemm_tile_groups(groups);
  const std::int64_t tiles = (groups + g_per_tile - 1) / g_per_tile;
  const std::int64_t panel_elems = kGemmMR * NR;  // one 4 × NR panel of C
  const bool parallel = m * s.nnz_blocks * psize > (1 << 16);
  // Per thread (made here: a bad_alloc inside the region would terminate the process):
  // the tile's rows of A, group g's four rows k-interleaved at ap + g · 4k; and C's tile rows in
  // one block column, group g's panel q at acc + (g · panels + q) · 4 · NR.
  ThreadScratch<Acc> ap_scratch(static_cast<std::size_t>(g_per_tile * std::max<std::int64_t>(k, 1) * kGemmMR),
                                parallel);
  // Two sets of C tiles per thread: the running total (bias first) and the sum of the current
  // chunk of blocks. The blocks of a column are summed kGemmChunk of k at a time into a fresh
  // chunk, added to the total at its end, as the dense CPU GEMM chunks k: one running fp32 sum
  // over every block of a column grew its rounding error with the column's block count
  // (session 30: 2.4x torch's error at K = 16384, b = 32).
  const std::int64_t tile_elems = g_per_tile * panels * panel_elems;
  const std::int64_t chunk_blocks = std::max<std::int64_t>(1, kGemmChunk / b);
  ThreadScratch<Acc> acc_scratch(static_cast<std::size_t>(2 * tile_elems), parallel);
#if defined(_OPENMP)
#pragma omp parallel if (parallel)
#endif
  {
    Acc* const ap = ap_scratch.get();
    Acc* const acc = acc_scratch.get();
    Acc* const part = acc + tile_elems;
#if defined(_OPENMP)
#pragma omp for schedule(static)
#endif
    for (std::int64_t t = 0; t < tiles; ++t) {
      const std::int64_t g0 = t * g_per_tile, ng = std::min(g_per_tile, groups - g0);
      const std::int64_t used = ng * panels * panel_elems;
      gemm_pack_a<T, Acc>(A, p.a.row_stride, p.a.col_stride, m, k, g0 * kGemmMR, ng, ap);
      for (std::int64_t jb = 0; jb < s.n_blocks; ++jb) {
        for (std::int64_t g = 0; g < ng; ++g)
          for (std::int64_t q = 0; q < panels; ++q)
            for (int i = 0; i < kGemmMR; ++i)
              for (int j = 0; j < NR; ++j)
                acc[(g * panels + q) * panel_elems + i * NR + j] =
                    bias ? static_cast<Acc>(bias[jb * b + q * NR + j]) : Acc(0);
        const std::int32_t e0 = s.offsets[jb], e1 = s.offsets[jb + 1];
        for (std::int32_t c0 = e0; c0 < e1; c0 += static_cast<std::int32_t>(chunk_blocks)) {
          const std::int32_t c1 = static_cast<std::int32_t>(std::min<std::int64_t>(e1, c0 + chunk_blocks));
          // A column of one chunk (every column at b ≥ kGemmChunk) goes straight into the total.
          Acc* const dst = c0 == e0 && c1 == e1 ? acc : part;
          if (dst == part) std::fill(part, part + used, Acc(0));
          for (std::int32_t e = c0; e < c1; ++e) {
            const std::int64_t v = s.value_index ? s.value_index[e] : e;
            const Acc* blk = blocks.data() + v * psize;
            const std::int64_t a_off = std::int64_t(s.indices[e]) * b * kGemmMR;
            for (std::int64_t g = 0; g < ng; ++g)
              for (std::int64_t q = 0; q < panels; ++q)
                gemm_micro_add(ap + g * k * kGemmMR + a_off, blk + q * b * NR, b,
                               dst + (g * panels + q) * panel_elems);
          }
          if (dst == part)
            for (std::int64_t i = 0; i < used; ++i) acc[i] += part[i];
        }
        for (std::int64_t g = 0; g < ng; ++g) {
          const std::int64_t i0 = (g0 + g) * kGemmMR;
          const int rows = static_cast<int>(std::min<std::int64_t>(kGemmMR, m - i0));
          for (int i = 0; i < rows; ++i) {
            T* crow = C + (i0 + i) * p.c.row_stride + jb * b * p.c.col_stride;
            for (std::int64_t j = 0; j < b; ++j)
              crow[j * p.c.col_stride] = static_cast<T>(acc[(g * panels + j / NR) * panel_elems + i * NR + j % NR]);
          }
        }
      }
    }
  }
}

template <typename T>
void sdd_cpu_typed(const SddParams& p) {
  using Acc = typename acc_type<T>::type;
  constexpr int NR = kGemmNR<Acc>;
  constexpr std::int64_t kChunk = 256;  // k steps per pass: a chunk of a B panel stays in L1
  const BlockSparseView& s = p.pattern;
  const std::int64_t b = s.block_size, bb = b * b, k = p.a.cols, n = p.b.cols;
  SK_EXPECTS(b % NR == 0 && b % kGemmMR == 0, "bsr (cpu): block size ", b, " is not a multiple of ", NR);
  const std::int64_t groups = b / kGemmMR, panels = b / NR, panel_elems = kGemmMR * NR;
  const auto* A = static_cast<const T*>(p.a.data);
  const auto* B = static_cast<const T*>(p.b.data);
  auto* out = static_cast<T*>(p.out_values);

  // B (k × n) packed into n / NR panels of k × NR: the block in column c reads panels c·b / NR on.
  std::vector<Acc> bp(gemm_packed_b_size<Acc>(k, n));
  const std::int64_t n_panels = n / NR;
#if defined(_OPENMP)
#pragma omp parallel for schedule(static) if (k * n > (1 << 16))
#endif
  for (std::int64_t q = 0; q < n_panels; ++q)
    gemm_pack_b<T, Acc>(B + q * NR * p.b.col_stride, p.b.row_stride, p.b.col_stride, k, NR, bp.data() + q * k * NR);

  // Tasks: up to four consecutive stored blocks of one block row (the coordinate list is in BSR
  // order, so a block row's blocks are consecutive; any other order still gives right results, in
  // shorter tasks), each packing the block row's b rows of A once for its blocks.
  std::vector<std::int64_t> starts;
  for (std::int64_t e = 0; e < s.nnz_blocks; ++e)
    if (e == 0 || s.block_row_indices[e] != s.block_row_indices[e - 1] || e - starts.back() == 4) starts.push_back(e);
  starts.push_back(s.nnz_blocks);
  const std::int64_t n_tasks = std::int64_t(starts.size()) - 1;

  const bool parallel = s.nnz_blocks * bb * k > (1 << 16);
  ThreadScratch<Acc> ap_scratch(static_cast<std::size_t>(b * std::max<std::int64_t>(k, 1)), parallel);
  ThreadScratch<Acc> acc_scratch(static_cast<std::size_t>(bb), parallel);  // group g's panel q at (g · panels + q) · 4 · NR
#if defined(_OPENMP)
#pragma omp parallel if (parallel)
#endif
  {
    Acc* const ap = ap_scratch.get();
    Acc* const acc = acc_scratch.get();
#if defined(_OPENMP)
#pragma omp for schedule(dynamic, 1)
#endif
    for (std::int64_t t = 0; t < n_tasks; ++t) {
      const std::int64_t r0 = std::int64_t(s.block_row_indices[starts[t]]) * b;
      gemm_pack_a<T, Acc>(A, p.a.row_stride, p.a.col_stride, r0 + b, k, r0, groups, ap);
      for (std::int64_t e = starts[t]; e < starts[t + 1]; ++e) {
        const Acc* bcol = bp.data() + (std::int64_t(s.block_col_indices[e]) * b / NR) * k * NR;
        std::fill(acc, acc + bb, Acc(0));
        for (std::int64_t k0 = 0; k0 < k; k0 += kChunk) {
          const std::int64_t kc = std::min(kChunk, k - k0);
          for (std::int64_t q = 0; q < panels; ++q)
            for (std::int64_t g = 0; g < groups; ++g)
              gemm_micro_add(ap + (g * k + k0) * kGemmMR, bcol + (q * k + k0) * NR, kc,
                             acc + (g * panels + q) * panel_elems);
        }
        T* dst = out + e * bb;
        for (std::int64_t g = 0; g < groups; ++g)
          for (std::int64_t q = 0; q < panels; ++q)
            for (int i = 0; i < kGemmMR; ++i)
              for (int j = 0; j < NR; ++j)
                dst[(g * kGemmMR + i) * b + q * NR + j] = static_cast<T>(acc[(g * panels + q) * panel_elems + i * NR + j]);
      }
    }
  }
}

}  // namespace

void dds_cpu(const DdsProblem& p) {
  if (p.a.rows == 0 || p.c.cols == 0) return;
  SK_DTYPE_SWITCH(p.dtype, T, [&] { dds_cpu_typed<T>(p); });
}

/// r[i] = Σ_j a[i, j] (SddParams::a_row_sums), accumulated in the op's accumulator type.
template <class T>
void sdd_row_sums_cpu_typed(const SddParams& p) {
  // Sums in double: in fp32 a sum over thousands of rows (the bias gradient) was up to 17x less
  // accurate than torch's g.sum(0).
  using Acc = typename acc_type<T>::type;
  const std::int64_t m = p.a.rows, k = p.a.cols;
  const auto* A = static_cast<const T*>(p.a.data);
  auto* out = static_cast<T*>(p.a_row_sums);
  const std::int64_t rs = p.a.row_stride, cs = p.a.col_stride;
  if (cs == 1 || rs != 1) {
    for (std::int64_t i = 0; i < m; ++i) {
      double sum = 0;
      for (std::int64_t j = 0; j < k; ++j) sum += static_cast<double>(static_cast<Acc>(A[i * rs + j * cs]));
      out[i] = static_cast<T>(sum);
    }
    return;
  }
  // A column-major `a` (the weight gradient's ∂ℓ/∂yᵀ): along its columns, the same order of terms.
  std::vector<double> sums(static_cast<std::size_t>(m), 0.0);
  for (std::int64_t j = 0; j < k; ++j)
    for (std::int64_t i = 0; i < m; ++i) sums[i] += static_cast<double>(static_cast<Acc>(A[i + j * cs]));
  for (std::int64_t i = 0; i < m; ++i) out[i] = static_cast<T>(sums[i]);
}

void sdd_cpu(const SddParams& p) {
  if (p.a_row_sums != nullptr) SK_DTYPE_SWITCH(p.dtype, T, [&] { sdd_row_sums_cpu_typed<T>(p); });
  if (p.pattern.nnz_blocks == 0) return;
  SK_DTYPE_SWITCH(p.dtype, T, [&] { sdd_cpu_typed<T>(p); });
}

}  // namespace sparsekern::bsr::detail
