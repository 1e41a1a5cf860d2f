// C++ test of the block-sparse CPU API (sparsekern/bsr.h): dsd / dds / sdd in both orientations of
// the sparse operand against naive references, strided views, and argument validation.
#include <sparsekern/bsr.h>
#include <sparsekern/error.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "test_util.h"

using namespace sparsekern;

namespace {

/// A 3 × 4 block grid (b = 16) with an empty block row and an empty block column.
struct Pattern {
  static constexpr int b = 16, rb = 3, cb = 4;
  std::vector<std::int32_t> row_offsets{0, 2, 2, 4}, col_indices{0, 2, 2, 3}, row_indices{0, 0, 2, 2};
  std::vector<std::int32_t> col_offsets{0, 1, 1, 3, 4}, rows_by_col{0, 0, 2, 2}, blocks_by_col{0, 1, 2, 3};
  std::vector<double> values;
  Pattern() {
    std::mt19937 g(7);
    std::uniform_real_distribution<double> u(-1, 1);
    values.resize(4 * b * b);
    for (auto& v : values) v = u(g);
  }
  bsr::BlockSparseView view() const {
    bsr::BlockSparseView s;
    s.rows = rb * b;
    s.cols = cb * b;
    s.block_size = b;
    s.nnz_blocks = 4;
    s.values = values.data();
    s.block_row_offsets = row_offsets.data();
    s.block_col_indices = col_indices.data();
    s.block_row_indices = row_indices.data();
    s.block_col_offsets = col_offsets.data();
    s.block_rows_by_col = rows_by_col.data();
    s.blocks_by_col = blocks_by_col.data();
    return s;
  }
  double dense(int r, int c) const {  // S(r, c)
    const int br = r / b, bc = c / b;
    for (int e = row_offsets[br]; e < row_offsets[br + 1]; ++e)
      if (col_indices[e] == bc) return values[std::size_t(e) * b * b + (r % b) * b + c % b];
    return 0.0;
  }
};

std::vector<double> random_vec(std::size_t n, unsigned seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<double> v(n);
  for (auto& x : v) x = u(g);
  return v;
}

void test_products() {
  const Pattern pat;
  const int R = Pattern::rb * Pattern::b, C = Pattern::cb * Pattern::b;
  for (bool t : {false, true}) {
    const int k = t ? R : C;  // dsd: op(S) is m × k
    const int m = t ? C : R;
    const int n = 5;
    // dsd with a column-major B (row stride 1, column stride k)
    auto bv = random_vec(std::size_t(k) * n, 1);
    std::vector<double> c(std::size_t(m) * n, NAN);
    bsr::DsdParams p;
    p.dtype = DType::f64;
    p.s = pat.view();
    p.transpose_s = t;
    p.b = MatrixView{bv.data(), k, n, 1, k, 0};
    p.c = MutableMatrixView{c.data(), m, n, n, 1, 0};
    bsr::dsd(p, nullptr);
    double err = 0;
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < n; ++j) {
        double ref = 0;
        for (int q = 0; q < k; ++q) ref += (t ? pat.dense(q, i) : pat.dense(i, q)) * bv[q + std::size_t(j) * k];
        err = std::max(err, std::abs(ref - c[std::size_t(i) * n + j]));
      }
    SK_CHECK(err < 1e-12, "dsd transpose=", t, " max error ", err);

    // dds with a bias and a row-padded A
    const int mm = 7, kk = t ? C : R, nn = t ? R : C;
    auto a = random_vec(std::size_t(mm) * (kk + 3), 2);
    auto bias = random_vec(std::size_t(nn), 3);
    std::vector<double> out(std::size_t(mm) * nn, NAN);
    bsr::DdsParams q;
    q.dtype = DType::f64;
    q.a = MatrixView{a.data(), mm, kk, kk + 3, 1, 0};
    q.s = pat.view();
    q.transpose_s = t;
    q.bias = bias.data();
    q.c = MutableMatrixView{out.data(), mm, nn, nn, 1, 0};
    bsr::dds(q, nullptr);
    err = 0;
    for (int i = 0; i < mm; ++i)
      for (int j = 0; j < nn; ++j) {
        double ref = bias[j];
        for (int x = 0; x < kk; ++x) ref += a[std::size_t(i) * (kk + 3) + x] * (t ? pat.dense(j, x) : pat.dense(x, j));
        err = std::max(err, std::abs(ref - out[std::size_t(i) * nn + j]));
      }
    SK_CHECK(err < 1e-12, "dds transpose=", t, " max error ", err);
  }
  // sdd: values of (A · B) on the pattern, A column-major.
  const int K = 9;
  auto a = random_vec(std::size_t(R) * K, 4), bm = random_vec(std::size_t(K) * C, 5);
  std::vector<double> vals(4 * Pattern::b * Pattern::b, NAN);
  bsr::SddParams s;
  s.dtype = DType::f64;
  s.a = MatrixView{a.data(), R, K, 1, R, 0};
  s.b = MatrixView{bm.data(), K, C, C, 1, 0};
  s.pattern = pat.view();
  s.out_values = vals.data();
  {  // SddParams::workspace: 16-byte aligned when given; none is used on the CPU.
    alignas(16) unsigned char ws[32] = {};
    s.workspace = Workspace{ws + 4, 16};
    SK_EXPECT_THROW(InvalidArgument, bsr::sdd(s, nullptr), "`workspace` must be 16-byte aligned");
    s.workspace = Workspace{ws, 16};
    SK_CHECK(bsr::sdd_workspace_bytes(s) == 0, "sdd_workspace_bytes on the CPU");
    bsr::DdsParams d;
    d.dtype = DType::f32;
    d.fp32_math = dense::Fp32Math::tf32;
    d.s = pat.view();
    SK_CHECK(bsr::dds_workspace_bytes(d) == bsr::kDdsWorkspaceBytes, "dds_workspace_bytes on the CPU");
    // The dense paths are CUDA only: no workspace for them on the CPU, even for a dense pattern of
    // small blocks in 16 bits (where a Hopper GPU would take them).
    bsr::SddParams s16 = s;
    s16.dtype = DType::bf16;
    SK_CHECK(bsr::sdd_dense_workspace_bytes(s16) == 0, "sdd_dense_workspace_bytes on the CPU");
    bsr::DdsParams d16 = d;
    d16.dtype = DType::bf16;
    d16.a.rows = 8192;
    SK_CHECK(bsr::dds_dense_workspace_bytes(d16) == 0, "dds_dense_workspace_bytes on the CPU");
#if !SPARSEKERN_TEST_WITH_CUDA
    d16.device = Device{DeviceType::cuda, 0};  // a build without CUDA: never
    s16.device = d16.device;
    SK_CHECK(bsr::dds_dense_workspace_bytes(d16) == 0 && bsr::sdd_dense_workspace_bytes(s16) == 0,
             "dense-path workspaces in a build without CUDA");
#endif
  }
  bsr::sdd(s, nullptr);
  double err = 0;
  for (int e = 0; e < 4; ++e)
    for (int r = 0; r < Pattern::b; ++r)
      for (int c = 0; c < Pattern::b; ++c) {
        const int gr = pat.row_indices[e] * Pattern::b + r, gc = pat.col_indices[e] * Pattern::b + c;
        double ref = 0;
        for (int q = 0; q < K; ++q) ref += a[gr + std::size_t(q) * R] * bm[std::size_t(q) * C + gc];
        err = std::max(err, std::abs(ref - vals[std::size_t(e) * 256 + r * 16 + c]));
      }
  SK_CHECK(err < 1e-12, "sdd max error ", err);
  // SddParams::a_row_sums (the bias gradient next to the weight gradient): Σ_q A[r, q] for every
  // row, blocks or not; needs the row-wise index set; no workspace on the CPU.
  std::vector<double> sums(R, NAN);
  s.a_row_sums = sums.data();
  SK_CHECK(bsr::sdd_row_sums_workspace_bytes(s) == 0, "sdd_row_sums_workspace_bytes on the CPU");
  SK_CHECK(!bsr::sdd_row_sums_fused(s), "sdd_row_sums_fused on the CPU");
  bsr::SddParams no_offsets = s;
  no_offsets.pattern.block_row_offsets = nullptr;
  SK_EXPECT_THROW(InvalidArgument, bsr::sdd(no_offsets, nullptr), "`block_row_offsets` is required");
  bsr::sdd(s, nullptr);
  err = 0;
  for (int r = 0; r < R; ++r) {
    double ref = 0;
    for (int q = 0; q < K; ++q) ref += a[r + std::size_t(q) * R];
    err = std::max(err, std::abs(ref - sums[r]));
  }
  SK_CHECK(err < 1e-12, "sdd row sums max error ", err);
}

void test_validation() {
  Pattern pat;
  std::vector<double> a(16 * 64), c(16 * 64);
  auto dds = [&](bsr::BlockSparseView s, std::int64_t k) {
    bsr::DdsParams q;
    q.dtype = DType::f64;
    q.a = MatrixView{a.data(), 16, k, k, 1, 0};
    q.s = s;
    q.c = MutableMatrixView{c.data(), 16, s.cols, s.cols, 1, 0};
    bsr::dds(q, nullptr);
  };
  auto s = pat.view();
  s.block_size = 24;
  SK_EXPECT_THROW(InvalidArgument, dds(s, 48), "block_size");
  s = pat.view();
  s.cols = 60;
  SK_EXPECT_THROW(InvalidArgument, dds(s, 48), "divide");
  SK_EXPECT_THROW(InvalidArgument, dds(pat.view(), 40), "`a`");
  pat.rows_by_col[1] = 5;  // out of range
  SK_EXPECT_THROW(InvalidArgument, dds(pat.view(), 48), "block_rows_by_col");
  pat.rows_by_col[1] = 0;
  pat.col_indices[1] = 0;  // not increasing within block row 0
  SK_EXPECT_THROW(InvalidArgument, bsr::validate_pattern(pat.view()), "block_col_indices");
  pat.col_indices[1] = 2;
  pat.row_offsets[3] = 3;  // last offset != nnz
  SK_EXPECT_THROW(InvalidArgument, bsr::validate_pattern(pat.view()), "block_row_offsets");
  pat.row_offsets[3] = 4;
  pat.blocks_by_col[2] = 1;  // not a permutation
  SK_EXPECT_THROW(InvalidArgument, bsr::validate_pattern(pat.view()), "blocks_by_col");
  pat.blocks_by_col[2] = 2;
  bsr::validate_pattern(pat.view());
  ++sk_test::checks();
  // DdsParams::workspace: checked whenever given (too small, misaligned), ignored on the CPU.
  {
    alignas(16) unsigned char ws[2 * bsr::kDdsWorkspaceBytes] = {};
    auto dds_ws = [&](void* data, std::size_t bytes) {
      bsr::DdsParams q;
      q.dtype = DType::f64;
      q.a = MatrixView{a.data(), 16, 48, 48, 1, 0};
      q.s = pat.view();
      q.c = MutableMatrixView{c.data(), 16, 64, 64, 1, 0};
      q.workspace = Workspace{data, bytes};
      bsr::dds(q, nullptr);
    };
    SK_EXPECT_THROW(InvalidArgument, dds_ws(ws, bsr::kDdsWorkspaceBytes - 1), "`workspace` must hold at least");
    SK_EXPECT_THROW(InvalidArgument, dds_ws(ws + 2, bsr::kDdsWorkspaceBytes), "`workspace` must be 4-byte aligned");
    dds_ws(ws, bsr::kDdsWorkspaceBytes);
    ++sk_test::checks();
  }
  // sdd reads no values: bsr.h says pattern.values is ignored (it was refused when null).
  {
    std::vector<std::int32_t> ro{0, 1}, ci{0}, ri{0};
    std::vector<double> sa(16 * 8), sb(8 * 16), out(256, -1.0);
    for (std::size_t i = 0; i < sa.size(); ++i) sa[i] = 0.25 * double(i % 7) - 0.5;
    for (std::size_t i = 0; i < sb.size(); ++i) sb[i] = 0.125 * double(i % 5) - 0.25;
    bsr::SddParams q;
    q.dtype = DType::f64;
    q.pattern.rows = 16, q.pattern.cols = 16, q.pattern.block_size = 16, q.pattern.nnz_blocks = 1;
    q.pattern.block_row_offsets = ro.data(), q.pattern.block_col_indices = ci.data();
    q.pattern.block_row_indices = ri.data();
    q.a = MatrixView{sa.data(), 16, 8, 8, 1, 0};
    q.b = MatrixView{sb.data(), 8, 16, 16, 1, 0};
    q.out_values = out.data();
    bsr::sdd(q, nullptr);
    double err = 0;
    for (int i = 0; i < 16; ++i)
      for (int j = 0; j < 16; ++j) {
        double ref = 0;
        for (int t = 0; t < 8; ++t) ref += sa[i * 8 + t] * sb[t * 16 + j];
        err = std::max(err, std::abs(out[i * 16 + j] - ref));
      }
    SK_CHECK(err < 1e-12, "sdd without values: max error ", err);
  }
#if !SPARSEKERN_TEST_WITH_CUDA
  bsr::DdsParams q;
  q.dtype = DType::f32;
  q.device = Device{DeviceType::cuda, 0};
  q.s = pat.view();
  q.a = MatrixView{a.data(), 16, 48, 48, 1, 0};
  q.c = MutableMatrixView{c.data(), 16, 64, 64, 1, 0};
  SK_EXPECT_THROW(BackendUnavailable, bsr::dds(q, nullptr), "without CUDA");
#endif
}

}  // namespace

int main() {
  test_products();
  test_validation();
  return sk_test::summary("test_bsr");
}
