// CPU dense gemm (sparsekern::dense::gemm on host memory) against a float64 reference computed from
// the same (already rounded) inputs, for every dtype, layout and edge case the dispatcher accepts:
// transposed and padded views, a strided output, batches with a broadcast (stride 0) operand,
// alpha/beta, k = 0 and empty outputs. Outputs are poisoned first so unwritten elements show, and
// elements outside the output view must be left alone.
#include <sparsekern/dense.h>
#include <sparsekern/error.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "common/half.h"
#include "test_util.h"

namespace sk = sparsekern;
using sk::detail::bfloat16_t;
using sk::detail::half_t;

namespace {

template <typename T> struct Traits;
// tol: bound on |C - ref| / (|alpha|·Σ|a||b| + |beta·c0|). fp32/fp64: k·u of the accumulator for
// the largest k tested (80); f16/bf16 (fp32 accumulation): one rounding of the output, u = 2^-11 or
// 2^-8, with 2x headroom.
template <> struct Traits<float> { static constexpr sk::DType dtype = sk::DType::f32; static constexpr double tol = 1e-5; };
template <> struct Traits<double> { static constexpr sk::DType dtype = sk::DType::f64; static constexpr double tol = 1e-13; };
template <> struct Traits<half_t> { static constexpr sk::DType dtype = sk::DType::f16; static constexpr double tol = 1e-3; };
template <> struct Traits<bfloat16_t> { static constexpr sk::DType dtype = sk::DType::bf16; static constexpr double tol = 8e-3; };

using sk_test::to_d;
using sk_test::to_t;

// How one operand is laid out in its buffer.
struct Layout {
  bool transposed = false;  // stored as the transpose (column-major), viewed through swapped strides
  std::int64_t pad = 0;     // extra elements per stored row: a non-contiguous view
  bool broadcast = false;   // batch stride 0: one matrix for every batch entry
};

struct Case {
  std::int64_t batch, m, k, n;
  Layout a, b, c;
  double alpha = 1.0, beta = 0.0;
};

struct View {
  std::int64_t rows, cols, row_stride, col_stride, batch_stride, size;
  std::int64_t at(std::int64_t bi, std::int64_t r, std::int64_t c) const {
    return bi * batch_stride + r * row_stride + c * col_stride;
  }
};

View make_view(std::int64_t batch, std::int64_t rows, std::int64_t cols, const Layout& l) {
  const std::int64_t ld = (l.transposed ? rows : cols) + l.pad;
  const std::int64_t per_matrix = (l.transposed ? cols : rows) * ld;
  View v{rows, cols, l.transposed ? 1 : ld, l.transposed ? ld : 1, l.broadcast ? 0 : per_matrix, 0};
  v.size = (l.broadcast ? 1 : batch) * per_matrix;
  return v;
}

template <typename T>
void run_case(const Case& cs, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  const View va = make_view(cs.batch, cs.m, cs.k, cs.a), vb = make_view(cs.batch, cs.k, cs.n, cs.b),
             vc = make_view(cs.batch, cs.m, cs.n, cs.c);
  // One spare element each, so empty operands still get distinct non-null pointers.
  std::vector<T> a(va.size + 1), b(vb.size + 1), c(vc.size + 1);
  for (auto& x : a) x = to_t<T>(dist(rng));
  for (auto& x : b) x = to_t<T>(dist(rng));
  const T sentinel = to_t<T>(7.0);  // outside the view of C: must survive
  for (auto& x : c) x = sentinel;
  std::vector<double> c0(vc.size + 1, 0.0);
  for (std::int64_t bi = 0; bi < cs.batch; ++bi)
    for (std::int64_t i = 0; i < cs.m; ++i)
      for (std::int64_t j = 0; j < cs.n; ++j) {
        const std::int64_t o = vc.at(bi, i, j);
        // beta == 0: C is write-only, so NaN in it must not leak into the result.
        c[o] = cs.beta == 0 ? to_t<T>(NAN) : to_t<T>(dist(rng));
        c0[o] = to_d(c[o]);
      }

  sk::dense::GemmParams p;
  p.dtype = Traits<T>::dtype;
  p.batch = cs.batch;
  p.a = {a.data(), cs.m, cs.k, va.row_stride, va.col_stride, va.batch_stride};
  p.b = {b.data(), cs.k, cs.n, vb.row_stride, vb.col_stride, vb.batch_stride};
  p.c = {c.data(), cs.m, cs.n, vc.row_stride, vc.col_stride, vc.batch_stride};
  p.alpha = cs.alpha;
  p.beta = cs.beta;
  const std::string name = sk_test::str(sk::dtype_name(p.dtype), " batch=", cs.batch, " m=", cs.m,
                                        " k=", cs.k, " n=", cs.n, " aT=", cs.a.transposed, " bT=",
                                        cs.b.transposed, " cT=", cs.c.transposed, " a_bcast=",
                                        cs.a.broadcast, " b_bcast=", cs.b.broadcast, " alpha=",
                                        cs.alpha, " beta=", cs.beta);
  try {
    sk::dense::gemm(p, nullptr);
  } catch (const std::exception& e) {
    SK_CHECK(false, name, ": threw ", e.what());
    return;
  }

  std::vector<bool> in_view(vc.size + 1, false);
  int bad = 0;
  double worst = 0;
  for (std::int64_t bi = 0; bi < cs.batch; ++bi)
    for (std::int64_t i = 0; i < cs.m; ++i)
      for (std::int64_t j = 0; j < cs.n; ++j) {
        double ref = 0, scale = 0;
        for (std::int64_t r = 0; r < cs.k; ++r) {
          const double prod = to_d(a[va.at(bi, i, r)]) * to_d(b[vb.at(bi, r, j)]);
          ref += prod;
          scale += std::fabs(prod);
        }
        const std::int64_t o = vc.at(bi, i, j);
        in_view[o] = true;
        const double beta_c0 = cs.beta == 0 ? 0.0 : cs.beta * c0[o];  // c0 is NaN when beta == 0
        ref = cs.alpha * ref + beta_c0;
        scale = std::fabs(cs.alpha) * scale + std::fabs(beta_c0);
        const double err = std::fabs(to_d(c[o]) - ref);
        const double rel = err / (scale > 0 ? scale : 1.0);
        if (!(err <= Traits<T>::tol * scale) && bad++ == 0)  // !(<=) also catches NaN
          SK_CHECK(false, name, ": C[", bi, ",", i, ",", j, "] = ", to_d(c[o]), ", reference ", ref,
                   " (scale ", scale, ")");
        if (rel > worst) worst = rel;
      }
  SK_CHECK(bad == 0, name, ": ", bad, " wrong elements, worst relative error ", worst, " (tol ",
           Traits<T>::tol, ")");
  int clobbered = 0;
  for (std::int64_t o = 0; o < vc.size + 1; ++o)
    if (!in_view[o] && to_d(c[o]) != 7.0) ++clobbered;
  SK_CHECK(clobbered == 0, name, ": ", clobbered, " elements outside the view of C were written");
}

template <typename T>
void all_cases() {
  unsigned seed = 1234;
  const Layout plain{}, trans{true, 0, false}, padded{false, 3, false}, trans_padded{true, 2, false};
  // Shapes: 1, primes, a size above the parallel threshold (m·n·k > 2^16).
  const std::int64_t shapes[][3] = {{1, 1, 1}, {7, 13, 5}, {17, 3, 31}, {64, 65, 33}};
  for (const auto& s : shapes)
    for (const Layout& la : {plain, trans, padded})
      for (const Layout& lb : {plain, trans_padded})
        for (const Layout& lc : {plain, trans_padded}) {
          run_case<T>({1, s[0], s[1], s[2], la, lb, lc}, seed++);
          run_case<T>({1, s[0], s[1], s[2], la, lb, lc, 0.5, -2.0}, seed++);
        }

  // Batches: plain, A broadcast, B broadcast, with beta reading C.
  Layout a_bcast = plain, b_bcast = trans;
  a_bcast.broadcast = true;
  b_bcast.broadcast = true;
  run_case<T>({3, 5, 7, 4, plain, plain, plain}, seed++);
  run_case<T>({3, 5, 7, 4, a_bcast, plain, padded, 1.0, 1.0}, seed++);
  run_case<T>({4, 9, 6, 11, trans, b_bcast, plain}, seed++);
  run_case<T>({2, 16, 70, 80, a_bcast, trans, trans_padded, -1.0, 0.25}, seed++);

  // k = 0: the product is empty, so C = beta·C (zeros for beta = 0, over NaN poison).
  run_case<T>({1, 6, 0, 5, plain, plain, plain}, seed++);
  run_case<T>({2, 6, 0, 5, plain, plain, padded, 1.0, 2.0}, seed++);
  // Empty outputs: nothing to compute, nothing may be written.
  run_case<T>({1, 0, 4, 5, plain, plain, plain}, seed++);
  run_case<T>({1, 4, 4, 0, plain, plain, plain}, seed++);
  run_case<T>({0, 4, 4, 5, plain, plain, plain}, seed++);
  run_case<T>({3, 0, 0, 0, plain, plain, plain}, seed++);
}

// k = 0 with null A and B: an empty operand may have no storage at all (torch gives such tensors a
// null data pointer); the result is still the zero matrix.
void k0_null_operands() {
  std::vector<float> c(6, NAN);
  sk::dense::GemmParams p;
  p.a = {nullptr, 2, 0, 0, 1, 0};
  p.b = {nullptr, 0, 3, 3, 1, 0};
  p.c = {c.data(), 2, 3, 3, 1, 0};
  sk::dense::gemm(p, nullptr);
  bool zeros = true;
  for (float x : c) zeros = zeros && x == 0.0f;
  SK_CHECK(zeros, "k=0 with null A/B must give zeros");
}

}  // namespace

/// dense::transpose on the CPU: odd sizes, padded row strides on both sides (padding untouched),
/// and the argument checks.
void transpose_cases() {
  for (const auto& [rows, cols, pad] : std::vector<std::array<std::int64_t, 3>>{{1, 1, 0}, {7, 33, 2}, {65, 31, 0}}) {
    std::vector<double> in(static_cast<std::size_t>(rows * (cols + pad)));
    for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<double>(i);
    std::vector<double> out(static_cast<std::size_t>(cols * (rows + pad)), -1.0);
    sk::dense::TransposeParams p;
    p.dtype = sk::DType::f64;
    p.in = sk::MatrixView{in.data(), rows, cols, cols + pad, 1, 0};
    p.out = sk::MutableMatrixView{out.data(), cols, rows, rows + pad, 1, 0};
    sk::dense::transpose(p, nullptr);
    bool ok = true;
    for (std::int64_t c = 0; c < cols; ++c)
      for (std::int64_t r = 0; r < rows + pad; ++r)
        ok = ok && out[c * (rows + pad) + r] == (r < rows ? in[r * (cols + pad) + c] : -1.0);
    SK_CHECK(ok, "transpose ", rows, "x", cols, " pad ", pad);
  }
  std::vector<float> a(24), b(24);
  sk::dense::TransposeParams p;
  p.in = sk::MatrixView{a.data(), 6, 4, 4, 1, 0};
  p.out = sk::MutableMatrixView{b.data(), 6, 4, 4, 1, 0};
  SK_EXPECT_THROW(sk::InvalidArgument, sk::dense::transpose(p, nullptr), "`out` must be 4x6");
  p.out = sk::MutableMatrixView{a.data() + 2, 4, 6, 6, 1, 0};
  SK_EXPECT_THROW(sk::InvalidArgument, sk::dense::transpose(p, nullptr), "must not overlap");
}

int main() {
  transpose_cases();
  all_cases<float>();
  all_cases<double>();
  all_cases<half_t>();
  all_cases<bfloat16_t>();
  k0_null_operands();
  return sk_test::summary("test_dense_gemm");
}
