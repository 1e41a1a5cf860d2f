// The in-place family through its C++ API on the CPU: results against double-precision references
// computed here, the panel loop of square_matmul (ragged last panel, pitched rows), and validation:
// aliasing and too-small workspaces are refused with the argument named and nothing written.
#include <sparsekern/sparsekern.h>

#include <cmath>
#include <limits>
#include <vector>

#include "test_util.h"

namespace sk = sparsekern;
namespace ip = sparsekern::inplace;

namespace {

std::vector<float> ramp(std::size_t n, float scale) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = scale * std::sin(0.37f * float(i) + 0.1f);
  return v;
}

ip::RowsView rows_of(std::vector<float>& v, std::int64_t rows, std::int64_t cols) {
  ip::RowsView r;
  r.data = v.data();
  r.inner = rows;
  r.inner_stride = cols;
  r.cols = cols;
  return r;
}

void softmax_and_backward() {
  const std::int64_t rows = 3, cols = 5;
  std::vector<float> x = ramp(rows * cols, 4.0f);
  x[5] = x[6] = x[7] = x[8] = x[9] = -std::numeric_limits<float>::infinity();  // row 1 fully masked
  const std::vector<float> x0 = x;
  ip::SoftmaxParams p;
  p.x = rows_of(x, rows, cols);
  ip::softmax(p, nullptr);
  for (std::int64_t r = 0; r < rows; ++r) {
    double m = -INFINITY, s = 0;
    for (std::int64_t j = 0; j < cols; ++j) m = std::max(m, double(x0[r * cols + j]));
    for (std::int64_t j = 0; j < cols; ++j) s += std::isinf(m) ? 0 : std::exp(double(x0[r * cols + j]) - m);
    for (std::int64_t j = 0; j < cols; ++j) {
      const double want = std::isinf(m) ? 0.0 : std::exp(double(x0[r * cols + j]) - m) / s;
      SK_CHECK(std::fabs(x[r * cols + j] - want) < 1e-6, "softmax[", r, ",", j, "] = ", x[r * cols + j],
               " want ", want);
    }
  }
  // backward from y = x: g ← y·(g − Σ g·y)
  std::vector<float> g = ramp(rows * cols, 1.0f);
  const std::vector<float> g0 = g;
  ip::SoftmaxBackwardParams b;
  b.grad = rows_of(g, rows, cols);
  b.y = rows_of(x, rows, cols);
  ip::softmax_backward(b, nullptr);
  for (std::int64_t r = 0; r < rows; ++r) {
    double dot = 0;
    for (std::int64_t j = 0; j < cols; ++j) dot += double(g0[r * cols + j]) * x[r * cols + j];
    for (std::int64_t j = 0; j < cols; ++j) {
      const double want = x[r * cols + j] * (g0[r * cols + j] - dot);
      SK_CHECK(std::fabs(g[r * cols + j] - want) < 1e-6, "softmax_backward[", r, ",", j, "]");
    }
  }
  // grad overlapping y is refused, grad untouched
  const std::vector<float> before = g;
  b.y = rows_of(g, rows, cols);
  SK_EXPECT_THROW(sk::InvalidArgument, ip::softmax_backward(b, nullptr), "`grad`");
  SK_CHECK(g == before, "a refused softmax_backward wrote grad");
}

void norms() {
  const std::int64_t rows = 4, cols = 7;
  std::vector<float> x = ramp(rows * cols, 3.0f), w = ramp(cols, 1.0f), bias = ramp(cols, 0.5f);
  for (auto& v : x) v += 100.0f;  // a large mean: the two-pass variance must not cancel
  const std::vector<float> x0 = x;
  ip::NormParams p;
  p.x = rows_of(x, rows, cols);
  p.weight = w.data();
  p.bias = bias.data();
  p.eps = 1e-5;
  ip::layer_norm(p, nullptr);
  for (std::int64_t r = 0; r < rows; ++r) {
    double mean = 0, var = 0;
    for (std::int64_t j = 0; j < cols; ++j) mean += x0[r * cols + j];
    mean /= cols;
    for (std::int64_t j = 0; j < cols; ++j) var += (x0[r * cols + j] - mean) * (x0[r * cols + j] - mean);
    var /= cols;
    for (std::int64_t j = 0; j < cols; ++j) {
      const double want = (x0[r * cols + j] - mean) / std::sqrt(var + 1e-5) * w[j] + bias[j];
      SK_CHECK(std::fabs(x[r * cols + j] - want) < 1e-4, "layer_norm[", r, ",", j, "] = ", x[r * cols + j],
               " want ", want);
    }
  }
  // rms_norm refuses a bias; a weight inside x is refused; x stays as it was
  std::vector<float> y = x0;
  p.x = rows_of(y, rows, cols);
  SK_EXPECT_THROW(sk::InvalidArgument, ip::rms_norm(p, nullptr), "`bias`");
  p.bias = nullptr;
  p.weight = y.data() + cols;
  SK_EXPECT_THROW(sk::InvalidArgument, ip::rms_norm(p, nullptr), "`weight`");
  p.weight = w.data();
  p.x.col_stride = 2;
  SK_EXPECT_THROW(sk::InvalidArgument, ip::layer_norm(p, nullptr), "`x`");
  SK_CHECK(y == x0, "a refused norm wrote x");
}

void square_matmul_panels() {
  // x: 11 rows of n = 6 with a pitch of 9 (the last 3 columns of each row must stay untouched)
  const std::int64_t rows = 11, n = 6, pitch = 9;
  std::vector<float> x = ramp(rows * pitch, 1.0f), w = ramp(n * n, 0.5f), bias = ramp(n, 2.0f);
  const std::vector<float> x0 = x;
  std::vector<float> ws(4 * n);  // 4 rows per panel: panels of 4, 4, 3
  ip::SquareMatmulParams p;
  p.x = {x.data(), rows, n, pitch, 1, 0};
  p.w = {w.data(), n, n, n, 1, 0};
  p.transpose_w = true;
  p.bias = bias.data();
  p.workspace = {ws.data(), ws.size() * sizeof(float)};
  ip::square_matmul(p, nullptr);
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t j = 0; j < n; ++j) {
      double want = bias[j];
      for (std::int64_t k = 0; k < n; ++k) want += double(x0[r * pitch + k]) * w[j * n + k];  // x·wᵀ
      SK_CHECK(std::fabs(x[r * pitch + j] - want) < 1e-4, "square_matmul[", r, ",", j, "] = ",
               x[r * pitch + j], " want ", want);
    }
    for (std::int64_t j = n; j < pitch; ++j)
      SK_CHECK(x[r * pitch + j] == x0[r * pitch + j], "square_matmul wrote past the row at ", r, ",", j);
  }
  // refusals: w inside x, a workspace under one row, a non-square w; x untouched each time
  const std::vector<float> before = x;
  p.w = {x.data() + 2 * pitch, n, n, pitch, 1, 0};
  SK_EXPECT_THROW(sk::InvalidArgument, ip::square_matmul(p, nullptr), "`w`");
  p.w = {w.data(), n, n, n, 1, 0};
  p.workspace.bytes = (n - 1) * sizeof(float);
  SK_EXPECT_THROW(sk::InvalidArgument, ip::square_matmul(p, nullptr), "`workspace`");
  p.workspace.bytes = ws.size() * sizeof(float);
  p.w.cols = n - 1;
  SK_EXPECT_THROW(sk::InvalidArgument, ip::square_matmul(p, nullptr), "`w`");
  SK_CHECK(x == before, "a refused square_matmul wrote x");
  // the size query: whole rows, within max(2% of x, 64 MiB), never more than x
  SK_CHECK(ip::square_matmul_workspace_size(sk::DType::f32, rows, n) == std::size_t(rows * n * 4),
           "a small x gets a one-panel workspace");
  const std::int64_t big_rows = 1 << 22, big_n = 4096;  // 32 GiB of fp16
  const std::size_t big = ip::square_matmul_workspace_size(sk::DType::f16, big_rows, big_n);
  SK_CHECK(big <= std::size_t(double(big_rows) * big_n * 2 * 0.02) && big % (big_n * 2 * 256) == 0,
           "a large x gets at most 2% of x in whole 256-row panels; got ", big);
}

}  // namespace

int main() {
  softmax_and_backward();
  norms();
  square_matmul_panels();
  return sk_test::summary("test_inplace");
}
