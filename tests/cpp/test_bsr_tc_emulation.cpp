// Runs the block-sparse tensor-core kernel bodies (src/bsr/tc/kernel.cuh), for every configuration
// the dispatcher instantiates, on the host emulator of bsr_tc_emulator.h, and checks them against
// float64 references: tiling, swizzled shared-memory layouts, ldmatrix/mma fragment addressing,
// predicates, the cp.async pipeline (with copies landing as late and as early as the hardware
// allows), the epilogue (row- and column-major C, bias, partial tiles) and every address the
// kernels touch. Needs no GPU; built in CUDA builds (CUTLASS headers) and run by ctest.
//
// The emulator's fragment layouts are first checked against CuTe's own MMA and ldmatrix traits,
// so the kernels are tested against the hardware's documented behaviour twice over.
#include "bsr_tc_emulator.h"

#include <cute/atom/copy_traits_sm75.hpp>
#include <cute/atom/mma_traits_sm80.hpp>
#include <cute/tensor.hpp>

#include <cmath>
#include <random>

#include "bsr/tc/configs.cuh"
#include "test_util.h"

namespace tc = sparsekern::bsr::tc;
using tc::emu::CopyMode;

namespace {

// ------------------------------------------------------------------------------------------------
// 1. The emulator's PTX fragment formulas agree with CuTe's traits.
// ------------------------------------------------------------------------------------------------
template <class Traits>
void check_mma_traits(const char* name, int k_atom) {
  using namespace cute;
  typename Traits::ALayout a_layout;
  typename Traits::BLayout b_layout;
  typename Traits::CLayout c_layout;
  const bool half = k_atom == 16;
  for (int thr = 0; thr < 32; ++thr) {
    const int g = thr / 4, t = thr % 4;
    for (int v = 0; v < int(size<1>(a_layout)); ++v) {
      const int idx = a_layout(thr, v);  // column-major (M=16, K)
      const int m = idx % 16, k = idx / 16;
      // Emulator: 16-bit a_v is (reg v/2, half v%2) with m = g + 8(reg%2), k = 2t + v%2 + 8(reg/2);
      // tf32 a_v: m = g + 8(v%2), k = t + 4(v/2).
      const int em = half ? g + 8 * ((v / 2) % 2) : g + 8 * (v % 2);
      const int ek = half ? 2 * t + v % 2 + 8 * (v / 4) : t + 4 * (v / 2);
      SK_CHECK(m == em && k == ek, name, " A thr ", thr, " val ", v, ": cute (", m, ",", k, ") emu (", em, ",", ek, ")");
    }
    for (int v = 0; v < int(size<1>(b_layout)); ++v) {
      const int idx = b_layout(thr, v);  // column-major (N=8, K)
      const int n = idx % 8, k = idx / 8;
      const int ek = half ? 2 * t + v % 2 + 8 * (v / 2) : t + 4 * v;
      SK_CHECK(n == g && k == ek, name, " B thr ", thr, " val ", v, ": cute (", n, ",", k, ")");
    }
    for (int v = 0; v < 4; ++v) {
      const int idx = c_layout(thr, v);  // column-major (M=16, N=8)
      const int m = idx % 16, n = idx / 16;
      SK_CHECK(m == g + 8 * (v / 2) && n == 2 * t + v % 2, name, " C thr ", thr, " val ", v);
    }
  }
}

void check_ldmatrix_traits() {
  using namespace cute;
  // Non-transposed x4: destination bit (thr, (bit, reg)) = reg·1024 + thr·32 + bit of four 8×8 b16
  // matrices stored row-major: register reg of lane l is the word (l/4, l%4) of matrix reg.
  typename Copy_Traits<SM75_U32x4_LDSM_N>::DstLayout n_dst;
  typename Copy_Traits<SM75_U32x4_LDSM_N>::SrcLayout n_src;
  for (int thr = 0; thr < 32; ++thr) {
    for (int reg = 0; reg < 4; ++reg) {
      const int bit = n_dst(thr, make_coord(0, reg));
      const int mat = bit / 1024, row = (bit % 1024) / 128, col16 = (bit % 128) / 16;
      SK_CHECK(mat == reg && row == thr / 4 && col16 == 2 * (thr % 4), "LDSM_N dst thr ", thr, " reg ", reg);
    }
    const int sbit = n_src(thr, 0);  // lane thr gives the address of row thr%8 of matrix thr/8
    SK_CHECK(sbit / 1024 == thr / 8 && (sbit % 1024) / 128 == thr % 8, "LDSM_N src thr ", thr);
  }
  typename Copy_Traits<SM75_U16x8_LDSM_T>::DstLayout t_dst;
  for (int thr = 0; thr < 32; ++thr) {
    for (int reg = 0; reg < 4; ++reg) {
      for (int h = 0; h < 2; ++h) {
        const int bit = t_dst(thr, make_coord(0, h, reg));
        const int mat = bit / 1024, row = (bit % 1024) / 128, col16 = (bit % 128) / 16;
        // .trans: half h of register reg of lane l is element (2(l%4)+h, l/4) of matrix reg.
        SK_CHECK(mat == reg && row == 2 * (thr % 4) + h && col16 == thr / 4, "LDSM_T dst thr ", thr,
                 " reg ", reg, " half ", h);
      }
    }
  }
}

// ------------------------------------------------------------------------------------------------
// 2. Kernel runs
// ------------------------------------------------------------------------------------------------
std::mt19937 rng(1234);

/// Element storage of a test: fp16 / bf16 bits or fp32 values.
struct Elem {
  int kind;  // 0 fp16, 1 bf16, 2 fp32 (tf32 kernels)
  int bytes() const { return kind == 2 ? 4 : 2; }
  double round(double x) const {
    if (kind == 0) return double(float(cute::half_t(float(x))));
    if (kind == 1) return double(float(cute::bfloat16_t(float(x))));
    return double(float(x));
  }
  void store(void* p, std::size_t i, double x) const {
    if (kind == 2) static_cast<float*>(p)[i] = float(x);
    else if (kind == 1) static_cast<std::uint16_t*>(p)[i] = cute::bfloat16_t(float(x)).raw();
    else static_cast<std::uint16_t*>(p)[i] = cute::half_t(float(x)).raw();
  }
  double load(const void* p, std::size_t i) const {
    if (kind == 2) return static_cast<const float*>(p)[i];
    const std::uint16_t b = static_cast<const std::uint16_t*>(p)[i];
    return kind == 1 ? double(float(cute::bfloat16_t::bitcast(b))) : double(float(cute::half_t::bitcast(b)));
  }
  /// Tolerance on ‖out − ref‖/‖ref‖: output rounding (fp16, bf16) or tf32 input truncation.
  double tol() const { return kind == 0 ? 2e-3 : kind == 1 ? 1e-2 : 4e-3; }
  const char* name() const { return kind == 0 ? "fp16" : kind == 1 ? "bf16" : "tf32"; }
  /// The reference sees what the tensor cores see: tf32 keeps the top 19 bits of each input.
  double as_input(double x) const {
    if (kind != 2) return x;
    float f = float(x);
    std::uint32_t u;
    std::memcpy(&u, &f, 4);
    u &= 0xffffe000u;
    std::memcpy(&f, &u, 4);
    return f;
  }
};

/// A 16-byte aligned buffer of `n` elements with a guard region on both sides, filled with a
/// sentinel pattern; guard_ok() says whether anything wrote outside [0, n).
struct Buffer {
  static constexpr std::size_t kGuard = 256;
  std::vector<unsigned char> raw;
  std::size_t bytes;
  unsigned char* data;
  Buffer(std::size_t n, int elem_bytes) : raw(n * elem_bytes + 2 * kGuard + 16, 0xA5), bytes(n * elem_bytes) {
    data = raw.data() + kGuard + (16 - reinterpret_cast<std::uintptr_t>(raw.data() + kGuard) % 16) % 16;
  }
  bool guard_ok() const {
    for (const unsigned char* p = raw.data(); p < data; ++p)
      if (*p != 0xA5) return false;
    for (const unsigned char* p = data + bytes; p < raw.data() + raw.size(); ++p)
      if (*p != 0xA5) return false;
    return true;
  }
};

double uniform() { return std::uniform_real_distribution<double>(-1.0, 1.0)(rng); }

struct RunResult {
  double rel_err = 0;
  bool finite = true;
};

/// The 32-bit fragment loads (tf32 operands with M/N-major tiles) ran, and without bank conflicts;
/// no other configuration issues them.
template <class Cfg>
void check_lds32(const std::string& what, const tc::emu::Stats& stats) {
  constexpr bool scalar = Cfg::A::kScalarReads || Cfg::B::kScalarReads;
  SK_CHECK((stats.lds32_loads > 0) == scalar, what, ": ", stats.lds32_loads, " 32-bit fragment loads");
  SK_CHECK(stats.lds32_conflicted == 0, what, ": ", stats.lds32_conflicted, " of ", stats.lds32_loads,
           " 32-bit fragment loads have bank conflicts");
}

/// dds: C (m × n) = A (m × k, K-major, row stride lda) · Bop (+ bias). Returns after checking
/// errors, guards and unwritten output elements.
template <class Cfg, bool kBKMajor>
void run_dds(const char* cfg_name, Elem el, int b, std::int64_t m, bool col_major, bool with_bias,
             CopyMode mode) {
  const int kb_count = 3, nb_count = 3;
  const int k = kb_count * b, n = nb_count * b;
  // Pattern of Bop by block column: column 1 empty, column 0 dense, column 2 one block.
  std::vector<std::vector<int>> col_blocks = {{0, 1, 2}, {}, {1}};
  std::vector<std::int32_t> offsets{0}, indices, value_index;
  for (auto& c : col_blocks) {
    for (int kb : c) indices.push_back(kb);
    offsets.push_back(std::int32_t(indices.size()));
  }
  const int nnz = int(indices.size());
  for (int e = 0; e < nnz; ++e) value_index.push_back((e * 3 + 1) % nnz);  // a permutation (nnz = 4)
  const bool use_perm = !kBKMajor;  // the dispatcher passes a permutation only for Bop = S

  const std::int64_t lda = k + 8, ldc = col_major ? ((m + 7) / 8) * 8 + 8 : n + 8;
  Buffer A(std::size_t(m * lda), el.bytes()), V(std::size_t(nnz) * b * b, el.bytes());
  Buffer C(std::size_t(col_major ? n * ldc : m * ldc), el.bytes()), Bias(n, el.bytes());
  std::vector<double> a(std::size_t(m * k)), v(std::size_t(nnz) * b * b), bias(n);
  for (std::int64_t i = 0; i < m; ++i)
    for (int j = 0; j < k; ++j) {
      const double x = el.round(uniform());
      a[i * k + j] = x;
      el.store(A.data, std::size_t(i * lda + j), x);
    }
  for (std::size_t i = 0; i < v.size(); ++i) {
    v[i] = el.round(uniform());
    el.store(V.data, i, v[i]);
  }
  for (int j = 0; j < n; ++j) {
    bias[j] = el.round(uniform());
    el.store(Bias.data, j, bias[j]);
  }
  // Reference C = A · Bop (+ bias) in float64 on the values the tensor cores see.
  std::vector<double> ref(std::size_t(m * n), 0.0);
  for (int j = 0; j < nb_count; ++j) {
    for (int e = offsets[j]; e < offsets[j + 1]; ++e) {
      const int kbk = indices[e], vi = use_perm ? value_index[e] : e;
      for (std::int64_t i = 0; i < m; ++i)
        for (int kk = 0; kk < b; ++kk) {
          const double av = el.as_input(a[i * k + kbk * b + kk]);
          for (int nn = 0; nn < b; ++nn) {
            const double bv = kBKMajor ? v[std::size_t(vi) * b * b + nn * b + kk] : v[std::size_t(vi) * b * b + kk * b + nn];
            ref[i * n + j * b + nn] += av * el.as_input(bv);
          }
        }
    }
  }
  if (with_bias)
    for (std::int64_t i = 0; i < m; ++i)
      for (int j = 0; j < n; ++j) ref[i * n + j] += bias[j];

  tc::TcParams p;
  p.a = A.data;
  p.lda = lda;
  p.c = C.data;
  p.ldc = ldc;
  p.c_col_major = col_major;
  p.bias = with_bias ? Bias.data : nullptr;
  p.values = V.data;
  p.offsets = offsets.data();
  p.indices = indices.data();
  p.value_index = use_perm ? value_index.data() : nullptr;
  p.m = m;
  p.block = b;
  p.bf16 = el.kind == 1;

  tc::emu::Problem prob;
  prob.add(A.data, A.bytes);
  prob.add(V.data, V.bytes);
  prob.add(C.data, C.bytes);
  tc::emu::Stats stats;
  const int n_tiles = nb_count * (b / Cfg::kBN);
  const int m_tiles = int((m + Cfg::kBM - 1) / Cfg::kBM);
  for (int tm = 0; tm < m_tiles; ++tm) {
    for (int tn = 0; tn < n_tiles; ++tn) {
      tc::emu::Block block(Cfg::kThreads, Cfg::kSmemBytes, mode, prob, stats);
      block.run([&](int tid) { tc::dds_body<Cfg, kBKMajor>(p, tid, tn, tm, block.smem()); });
    }
  }
  double num = 0, den = 0;
  bool finite = true;
  for (std::int64_t i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      const double out = el.load(C.data, std::size_t(col_major ? j * ldc + i : i * ldc + j));
      finite &= std::isfinite(out);
      num += (out - ref[i * n + j]) * (out - ref[i * n + j]);
      den += ref[i * n + j] * ref[i * n + j];
    }
  const double err = std::sqrt(num / den);
  const std::string what = sk_test::str(cfg_name, " ", el.name(), " b=", b, " m=", m,
                                        col_major ? " col-major" : " row-major", with_bias ? " +bias" : "",
                                        mode == CopyMode::kDeferred ? " deferred" : " immediate");
  for (const auto& e : stats.errors) SK_CHECK(false, what, ": ", e);
  SK_CHECK(finite, what, ": non-finite output (an element was not written, or garbage was read)");
  SK_CHECK(err <= el.tol(), what, ": rel error ", err, " > ", el.tol());
  SK_CHECK(A.guard_ok() && V.guard_ok() && C.guard_ok(), what, ": write outside a buffer");
  // Padding between rows/columns of C (ldc > extent) must be untouched too.
  bool pad_ok = true;
  for (std::int64_t i = 0; i < (col_major ? n : m); ++i)
    for (std::int64_t j = col_major ? m : n; j < ldc; ++j) {
      const unsigned char* q = C.data + (i * ldc + j) * el.bytes();
      for (int byte = 0; byte < el.bytes(); ++byte) pad_ok &= q[byte] == 0xA5;
    }
  SK_CHECK(pad_ok, what, ": wrote into the padding of C");
  SK_CHECK(stats.ldmatrix_conflicted_phases == 0, what, ": ", stats.ldmatrix_conflicted_phases, " of ",
           stats.ldmatrix_phases, " ldmatrix phases have bank conflicts");
  check_lds32<Cfg>(what, stats);
  SK_CHECK(stats.mma > 0 && stats.cp_async > 0, what, ": no MMA ran");
}

/// sdd: out[p] = (A · B)[block p], A (rows × k) M-major (column stride lda), B (k × cols) N-major.
/// kG > 0: the grouped kernel (sdd_group_body with kT = Cfg::kBM segments) on a pattern whose rows
/// hold 4, 1 and 3 blocks (groups cut by block rows and by the aligned chunks of kG / (b / kT)).
///
/// splits > 1 (kG = 0): split K, each split's CTAs writing fp32 partials that sdd_split_reduce_range
/// sums into out, as the CUDA launcher's second kernel does.
template <class Cfg, int kG = 0>
void run_sdd(const char* cfg_name, Elem el, int b, int k, CopyMode mode, int splits = 1, bool row_sums = true) {
  // kG = 0: block rows 0 and 2 hold two blocks each, block row 1 none (the fused row sums must
  // skip it: sdd_row_sums_finish sums it from A).
  const int rb = 3, cb = kG > 0 ? 5 : 3, rows = rb * b, cols = cb * b;
  const std::vector<std::int32_t> brow = kG > 0 ? std::vector<std::int32_t>{0, 0, 0, 0, 1, 2, 2, 2}
                                                : std::vector<std::int32_t>{0, 0, 2, 2};
  const std::vector<std::int32_t> row_offsets = kG > 0 ? std::vector<std::int32_t>{0, 4, 5, 8}
                                                       : std::vector<std::int32_t>{0, 2, 2, 4};
  const std::vector<std::int32_t> bcol = kG > 0 ? std::vector<std::int32_t>{0, 1, 3, 4, 2, 0, 2, 3}
                                                : std::vector<std::int32_t>{0, 2, 1, 2};
  const int nnz = int(brow.size());
  const std::int64_t lda = rows + 8, ldb = cols + 8;
  Buffer A(std::size_t(std::max(k, 1) * lda), el.bytes()), B(std::size_t(std::max(k, 1) * ldb), el.bytes());
  Buffer O(std::size_t(nnz) * b * b, el.bytes());
  Buffer P(std::size_t(std::max(splits, 1)) * nnz * b * b, 4);  // split-K partials (fp32)
  // The fused row sums' per-lane partials ([split][row][4] fp32), NaN where nothing may write.
  Buffer R(std::size_t(std::max(splits, 1)) * rows * 4, 4);
  for (std::size_t i = 0; i < R.bytes / 4; ++i) reinterpret_cast<float*>(R.data)[i] = std::nanf("");
  std::vector<double> a(std::size_t(rows) * k), bm(std::size_t(k) * cols);
  for (int q = 0; q < k; ++q) {
    for (int r = 0; r < rows; ++r) {
      a[r * k + q] = el.round(uniform());
      el.store(A.data, std::size_t(q * lda + r), a[r * k + q]);
    }
    for (int c = 0; c < cols; ++c) {
      bm[q * cols + c] = el.round(uniform());
      el.store(B.data, std::size_t(q * ldb + c), bm[q * cols + c]);
    }
  }
  tc::TcParams p;
  p.a = A.data;
  p.lda = lda;
  p.b = B.data;
  p.ldb = ldb;
  p.out_values = O.data;
  p.block_rows = brow.data();
  p.block_cols = bcol.data();
  p.k = k;
  p.block = b;
  p.bf16 = el.kind == 1;
  tc::emu::Problem prob;
  prob.add(A.data, A.bytes);
  prob.add(B.data, B.bytes);
  prob.add(O.data, O.bytes);
  prob.add(P.data, P.bytes);
  prob.add(R.data, R.bytes);
  tc::emu::Stats stats;
  p.nnz = nnz;
  const bool with_rows = kG == 0 && row_sums;
  if (with_rows) {  // the one-tile-per-CTA kernel sums A's rows of its block rows' first blocks
    p.row_partial = reinterpret_cast<float*>(R.data);
    p.block_row_offsets = row_offsets.data();
    p.row_stride = rows;
  }
  if (splits > 1) {  // as sdd_tc_split_steps: k-steps of 32 per split
    const int nk = (k + 31) / 32;
    p.split_steps = (nk + splits - 1) / splits;
    p.splits = splits;
    p.partial = reinterpret_cast<float*>(P.data);
  }
  // (b/T)² tiles per block, or (grouped) one CTA per block and sub-row; times the splits
  const int ctas = nnz * (kG > 0 ? b / Cfg::kBM : (b / Cfg::kBM) * (b / Cfg::kBM)) * std::max(splits, 1);
  for (int cta = 0; cta < ctas; ++cta) {
    tc::emu::Block block(Cfg::kThreads, Cfg::kSmemBytes, mode, prob, stats);
    block.run([&](int tid) {
      if constexpr (kG > 0)
        tc::sdd_group_body<Cfg, Cfg::kBM, kG>(p, tid, cta, block.smem());
      else if (with_rows)
        tc::sdd_body<Cfg, true>(p, tid, cta, block.smem());
      else
        tc::sdd_body<Cfg, false>(p, tid, cta, block.smem());
    });
  }
  if (splits > 1) {  // the reduce kernel's work, in 4-element pieces
    const std::int64_t count = std::int64_t(nnz) * b * b;
    for (std::int64_t i = 0; i < count; i += 4)
      tc::sdd_split_reduce_range<Cfg::kTf32>(p.partial, splits, count, O.data, p.bf16, i, i + 4);
  }
  double num = 0, den = 0;
  bool finite = true;
  for (int e = 0; e < nnz; ++e)
    for (int r = 0; r < b; ++r)
      for (int c = 0; c < b; ++c) {
        double ref = 0;
        for (int q = 0; q < k; ++q)
          ref += el.as_input(a[(brow[e] * b + r) * k + q]) * el.as_input(bm[q * cols + bcol[e] * b + c]);
        const double out = el.load(O.data, std::size_t(e) * b * b + r * b + c);
        finite &= std::isfinite(out);
        num += (out - ref) * (out - ref);
        den += ref * ref;
      }
  const std::string what = sk_test::str(cfg_name, " ", el.name(), " b=", b, " k=", k,
                                        mode == CopyMode::kDeferred ? " deferred" : " immediate",
                                        splits > 1 ? sk_test::str(" splits=", splits) : std::string(),
                                        with_rows ? " row sums" : "");
  for (const auto& e : stats.errors) SK_CHECK(false, what, ": ", e);
  SK_CHECK(finite, what, ": non-finite output");
  if (k == 0) {
    SK_CHECK(num == 0, what, ": an empty product must be exactly zero");
  } else {
    SK_CHECK(std::sqrt(num / den) <= el.tol(), what, ": rel error ", std::sqrt(num / den));
  }
  if (with_rows) {
    // Row r of a block row that holds a block: its 4 · splits partials add up to Σ_q A[r, q] (as
    // the finish pass adds them: splits, then lanes). Rows of the empty block row: untouched.
    const float* rp = reinterpret_cast<const float*>(R.data);
    for (int r = 0; r < rows; ++r) {
      const bool has = row_offsets[r / b + 1] > row_offsets[r / b];
      double ref = 0, mag = 0, got = 0;
      bool untouched = true;
      for (int sp = 0; sp < std::max(splits, 1); ++sp)
        for (int l = 0; l < 4; ++l) {
          const float v = rp[(std::size_t(sp) * rows + r) * 4 + l];
          untouched &= std::isnan(v);
          got += v;
        }
      for (int q = 0; q < k; ++q) {
        ref += a[r * k + q];
        mag += std::fabs(a[r * k + q]);
      }
      if (has) {
        SK_CHECK(std::fabs(got - ref) <= 1e-5 * (mag + 1), what, ": row sum of row ", r, " is ", got, ", expected ", ref);
      } else {
        SK_CHECK(untouched, what, ": a row of an empty block row got a fused row sum (row ", r, ")");
      }
    }
  }
  SK_CHECK(A.guard_ok() && B.guard_ok() && O.guard_ok() && P.guard_ok() && R.guard_ok(), what,
           ": write outside a buffer");
  SK_CHECK(stats.ldmatrix_conflicted_phases == 0, what, ": ", stats.ldmatrix_conflicted_phases,
           " ldmatrix phases have bank conflicts");
  if (k > 0) check_lds32<Cfg>(what, stats);
}

template <bool kTf32, int kTile, bool kBKMajor>
void dds_config(const char* name) {
  using Cfg = typename tc::DdsConfig<kTf32, kTile, kBKMajor>::type;
  const std::vector<int> blocks = kTile == 64 ? std::vector<int>{64, 128} : std::vector<int>{kTile};
  const std::vector<Elem> elems = kTf32 ? std::vector<Elem>{{2}} : std::vector<Elem>{{0}, {1}};
  for (CopyMode mode : {CopyMode::kDeferred, CopyMode::kImmediate}) {
    for (const Elem& el : elems) {
      for (int b : blocks) {
        // Two row panels, the second partial; row-major C with bias (dds) and column-major C
        // with a partial final vector (the dsd form).
        run_dds<Cfg, kBKMajor>(name, el, b, 150, false, true, mode);
        if (mode == CopyMode::kDeferred) run_dds<Cfg, kBKMajor>(name, el, b, 37, true, false, mode);
      }
    }
  }
  run_dds<Cfg, kBKMajor>(name, elems[0], blocks[0], 1, false, false, CopyMode::kDeferred);
}

template <bool kTf32, int kTile>
void sdd_config(const char* name, int block = kTile) {
  using Cfg = typename tc::SddConfig<kTf32, kTile>::type;
  const std::vector<Elem> elems = kTf32 ? std::vector<Elem>{{2}} : std::vector<Elem>{{0}, {1}};
  for (CopyMode mode : {CopyMode::kDeferred, CopyMode::kImmediate})
    for (const Elem& el : elems)  // 32 + a 13-row tail; the fused row sums in one mode, not the other
      run_sdd<Cfg>(name, el, block, 45, mode, 1, mode == CopyMode::kDeferred);
  run_sdd<Cfg>(name, elems[0], block, 0, CopyMode::kDeferred);
  run_sdd<Cfg>(name, elems[0], block, 96, CopyMode::kDeferred, 1, false);
  // Split K: 200 = 6 full k-steps + 8 rows in 3 splits of 3 steps (the last one short, a tail);
  // 4 splits of 2 steps over 7 steps (the last split one step); every dtype rounds the sums.
  for (const Elem& el : elems) run_sdd<Cfg>(name, el, block, 200, CopyMode::kDeferred, 3);
  run_sdd<Cfg>(name, elems.back(), block, 224, CopyMode::kImmediate, 4, false);
}

template <bool kTf32, int kT, int kG>
void sdd_group_config(const char* name, int block = kT) {
  using Cfg = typename tc::SddGroupConfig<kTf32, kT, kG>::type;
  const std::vector<Elem> elems = kTf32 ? std::vector<Elem>{{2}} : std::vector<Elem>{{0}, {1}};
  for (CopyMode mode : {CopyMode::kDeferred, CopyMode::kImmediate})
    for (const Elem& el : elems) run_sdd<Cfg, kG>(name, el, block, 45, mode);
  run_sdd<Cfg, kG>(name, elems[0], block, 0, CopyMode::kDeferred);
}

}  // namespace

int main() {
  check_mma_traits<cute::MMA_Traits<cute::SM80_16x8x16_F32F16F16F32_TN>>("m16n8k16 f16", 16);
  check_mma_traits<cute::MMA_Traits<cute::SM80_16x8x16_F32BF16BF16F32_TN>>("m16n8k16 bf16", 16);
  check_mma_traits<cute::MMA_Traits<cute::SM80_16x8x8_F32TF32TF32F32_TN>>("m16n8k8 tf32", 8);
  check_ldmatrix_traits();

  // Every instantiation of tools/gen_bsr_kernels.py.
  dds_config<false, 16, true>("dds h16 16 Bt");
  dds_config<false, 16, false>("dds h16 16 B");
  dds_config<false, 32, true>("dds h16 32 Bt");
  dds_config<false, 32, false>("dds h16 32 B");
  dds_config<false, 64, true>("dds h16 64 Bt");
  dds_config<false, 64, false>("dds h16 64 B");
  dds_config<true, 16, true>("dds tf32 16 Bt");
  dds_config<true, 16, false>("dds tf32 16 B");
  dds_config<true, 32, true>("dds tf32 32 Bt");
  dds_config<true, 32, false>("dds tf32 32 B");
  dds_config<true, 64, true>("dds tf32 64 Bt");
  dds_config<true, 64, false>("dds tf32 64 B");
  sdd_config<false, 16>("sdd h16 16");
  sdd_config<false, 32>("sdd h16 32");
  sdd_config<false, 64>("sdd h16 64");
  sdd_config<false, 128>("sdd h16 128");
  sdd_config<true, 16>("sdd tf32 16");
  sdd_config<true, 32>("sdd tf32 32");
  sdd_config<true, 64>("sdd tf32 64");
  sdd_config<true, 64>("sdd tf32 64 (b=128)", 128);  // tf32 blocks of 128 run four 64-tiles
  sdd_group_config<false, 32, 4>("sdd h16 32 g4");
  return sk_test::summary("test_bsr_tc_emulation");
}
