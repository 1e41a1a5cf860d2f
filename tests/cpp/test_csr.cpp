// The csr and semi families through the C++ API on the CPU: SpMM (plain, transposed, batched with
// a broadcast B, column-major output) and SDDMM (batch sum) against naive references, the
// structure check, plan contracts and counters, and the semi family's validation.
#include <sparsekern/sparsekern.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "test_util.h"

namespace sk = sparsekern;
using sk::csr::CsrView;

namespace {

// A 4x5 matrix with an empty row (row 2):
//   [1 0 2 0 0]
//   [0 3 0 0 4]
//   [0 0 0 0 0]
//   [5 0 0 6 0]
template <typename I>
struct Pattern {
  std::vector<I> crow{0, 2, 4, 4, 6};
  std::vector<I> col{0, 2, 1, 4, 0, 3};
  std::vector<double> values{1, 2, 3, 4, 5, 6};
  CsrView view() const {
    CsrView v;
    v.rows = 4;
    v.cols = 5;
    v.nnz = 6;
    v.index_type = sizeof(I) == 4 ? sk::csr::IndexType::i32 : sk::csr::IndexType::i64;
    v.crow_indices = crow.data();
    v.col_indices = col.data();
    v.values = values.data();
    return v;
  }
  double dense(int i, int j) const {
    for (I e = crow[i]; e < crow[i + 1]; ++e)
      if (col[e] == j) return values[e];
    return 0.0;
  }
};

double value(int b, int r, int c) { return 0.25 * b + 0.5 * r - 0.125 * c + 0.01 * r * c; }

template <typename I>
void spmm_cases() {
  Pattern<I> a;
  const int n = 3, batch = 2;
  // op(A) = A: C[b] (4x3) = A (4x5) · B[b] (5x3), B row-major; C column-major.
  {
    std::vector<double> B(batch * 5 * n), C(batch * 4 * n, NAN);
    for (int b = 0; b < batch; ++b)
      for (int r = 0; r < 5; ++r)
        for (int c = 0; c < n; ++c) B[b * 5 * n + r * n + c] = value(b, r, c);
    sk::csr::SpmmParams p;
    p.dtype = sk::DType::f64;
    p.batch = batch;
    p.a = a.view();
    p.b = {B.data(), 5, n, n, 1, 5 * n};
    p.c = {C.data(), 4, n, 1, 4, 4 * n};  // column-major output
    sk::csr::SpmmPlan plan(p);
    SK_CHECK(plan.workspace_size() == 0, "CPU plans need no workspace");
    plan.run(p, {}, nullptr);
    for (int b = 0; b < batch; ++b)
      for (int i = 0; i < 4; ++i)
        for (int c = 0; c < n; ++c) {
          double ref = 0;
          for (int j = 0; j < 5; ++j) ref += a.dense(i, j) * value(b, j, c);
          const double got = C[b * 4 * n + c * 4 + i];
          SK_CHECK(std::abs(got - ref) < 1e-12, "A·B[", b, "](", i, ",", c, ") = ", got, ", want ", ref);
        }
  }
  // op(A) = Aᵀ: C (5x3) = Aᵀ · B (4x3), B shared by the batch (batch stride 0).
  {
    std::vector<double> B(4 * n), C(batch * 5 * n, NAN);
    for (int r = 0; r < 4; ++r)
      for (int c = 0; c < n; ++c) B[r * n + c] = value(0, r, c);
    sk::csr::SpmmParams p;
    p.dtype = sk::DType::f64;
    p.batch = batch;
    p.a = a.view();
    p.transpose_a = true;
    p.b = {B.data(), 4, n, n, 1, 0};
    p.c = {C.data(), 5, n, n, 1, 5 * n};
    sk::csr::SpmmPlan plan(p);
    plan.run(p, {}, nullptr);
    for (int b = 0; b < batch; ++b)
      for (int j = 0; j < 5; ++j)
        for (int c = 0; c < n; ++c) {
          double ref = 0;
          for (int i = 0; i < 4; ++i) ref += a.dense(i, j) * value(0, i, c);
          const double got = C[b * 5 * n + j * n + c];
          SK_CHECK(std::abs(got - ref) < 1e-12, "Aᵀ·B(", j, ",", c, ") = ", got, ", want ", ref);
        }
  }
}

void sddmm_case() {
  Pattern<std::int32_t> a;
  const int t = 3, batch = 2;
  std::vector<double> X(batch * 4 * t), Y(batch * t * 5), out(6, NAN);
  for (int b = 0; b < batch; ++b) {
    for (int i = 0; i < 4; ++i)
      for (int s = 0; s < t; ++s) X[b * 4 * t + i * t + s] = value(b, i, s);
    for (int s = 0; s < t; ++s)
      for (int j = 0; j < 5; ++j) Y[b * t * 5 + j * t + s] = value(b + 1, j, s);  // column-major Y
  }
  sk::csr::SddmmParams p;
  p.dtype = sk::DType::f64;
  p.batch = batch;
  p.x = {X.data(), 4, t, t, 1, 4 * t};
  p.y = {Y.data(), t, 5, 1, t, t * 5};
  p.pattern = a.view();
  p.out_values = out.data();
  sk::csr::SddmmPlan plan(p);
  plan.run(p, {}, nullptr);
  for (int i = 0; i < 4; ++i)
    for (int e = a.crow[i]; e < a.crow[i + 1]; ++e) {
      double ref = 0;
      for (int b = 0; b < batch; ++b)
        for (int s = 0; s < t; ++s) ref += value(b, i, s) * value(b + 1, a.col[e], s);
      SK_CHECK(std::abs(out[e] - ref) < 1e-12, "sddmm entry ", e, " = ", out[e], ", want ", ref);
    }
}

void structure_and_contracts() {
  using sk::InvalidArgument;
  Pattern<std::int64_t> a;
  sk::csr::check_structure(a.view());  // valid
  {
    auto bad = a;
    bad.col = {2, 0, 1, 4, 0, 3};  // unsorted row 0
    SK_EXPECT_THROW(InvalidArgument, sk::csr::check_structure(bad.view()), "`col_indices`");
    bad.col = {0, 0, 1, 4, 0, 3};  // duplicate
    SK_EXPECT_THROW(InvalidArgument, sk::csr::check_structure(bad.view()), "`col_indices`");
    bad.col = {0, 2, 1, 5, 0, 3};  // out of range
    SK_EXPECT_THROW(InvalidArgument, sk::csr::check_structure(bad.view()), "`col_indices`");
  }
  {
    auto bad = a;
    bad.crow = {0, 2, 1, 4, 6};
    SK_EXPECT_THROW(InvalidArgument, sk::csr::check_structure(bad.view()), "`crow_indices`");
    bad.crow = {1, 2, 4, 4, 6};
    SK_EXPECT_THROW(InvalidArgument, sk::csr::check_structure(bad.view()), "`crow_indices`");
  }
  // A bad structure or a bad shape is rejected before anything is written.
  std::vector<double> B(5 * 2, 1.0), C(4 * 2, -7.0);
  sk::csr::SpmmParams p;
  p.dtype = sk::DType::f64;
  p.a = a.view();
  p.b = {B.data(), 5, 2, 2, 1, 0};
  p.c = {C.data(), 4, 2, 2, 1, 0};
  const auto counters0 = sk::csr::plan_counters();
  sk::csr::SpmmPlan plan(p);
  SK_CHECK(sk::csr::plan_counters().plans_created == counters0.plans_created + 1, "one plan counted");
  auto bad = a;
  bad.col = {0, 2, 1, 9, 0, 3};
  auto q = p;
  q.a = bad.view();
  SK_EXPECT_THROW(InvalidArgument, plan.run(q, {}, nullptr), "`col_indices`");
  q = p;
  q.b.rows = 4;
  SK_EXPECT_THROW(InvalidArgument, plan.run(q, {}, nullptr), "`b`");
  for (double c : C) SK_CHECK(c == -7.0, "a rejected call wrote the output");
  // Same shape, new pointers: fine. Another shape: not this plan.
  std::vector<double> B2(5 * 2, 2.0);
  q = p;
  q.b.data = B2.data();
  plan.run(q, {}, nullptr);
  SK_CHECK(C[0] == 2.0 * (1 + 2), "rebound B; got ", C[0]);
  SK_CHECK(plan.runs() == 1, "runs counted; got ", plan.runs());
  std::vector<double> C3(4 * 3);
  std::vector<double> B3(5 * 3);
  q = p;
  q.b = {B3.data(), 5, 3, 3, 1, 0};
  q.c = {C3.data(), 4, 3, 3, 1, 0};
  SK_EXPECT_THROW(InvalidArgument, plan.run(q, {}, nullptr), "do not match the plan");
  // index types must match
  Pattern<std::int32_t> a32;
  q = p;
  q.a = a32.view();
  SK_EXPECT_THROW(InvalidArgument, plan.run(q, {}, nullptr), "do not match the plan");
#if !SPARSEKERN_TEST_WITH_CUDA
  q = p;
  q.device = {sk::DeviceType::cuda, 0};
  SK_EXPECT_THROW(sk::BackendUnavailable, sk::csr::SpmmPlan{q}, "without CUDA");
#endif
}

void semi_validation() {
  sk::semi::WeightShape w;
  w.dtype = sk::DType::f16;
  w.device = {sk::DeviceType::cpu, 0};
  w.rows = 32;
  w.cols = 20;  // not a multiple of 16
  SK_EXPECT_THROW(sk::InvalidArgument, sk::semi::compressed_size(w), "`weight`");
  w.cols = 32;
  w.dtype = sk::DType::f32;
  SK_EXPECT_THROW(sk::TypeMismatch, sk::semi::compressed_size(w), "`weight`");
  w.dtype = sk::DType::bf16;
  SK_EXPECT_THROW(sk::BackendUnavailable, sk::semi::compressed_size(w), "CPU");

  // The CUTLASS sm90 kernels: shape rules first (in_features a multiple of 64), then the device.
  w.cols = 48;
  SK_EXPECT_THROW(sk::InvalidArgument, sk::semi::cutlass_compressed_size(w), "multiple of 64");
  w.cols = 64;
  SK_EXPECT_THROW(sk::InvalidArgument, sk::semi::cutlass_compressed_size(w), "CUDA device");
  SK_CHECK(!sk::semi::cutlass_sm90_usable(w.device), "the CUTLASS 2:4 kernels never run on the CPU");
  sk::semi::LinearParams p;
  p.dtype = sk::DType::f16;
  p.device = {sk::DeviceType::cpu, 0};
  p.m = 16;
  p.n = 32;
  p.k = 64;
  std::vector<std::uint16_t> x(16 * 64), wc(32 * 32), y(16 * 32), meta(64);
  p.x = x.data();
  p.weight = wc.data();
  p.y = y.data();
  p.y_transposed = true;
  SK_EXPECT_THROW(sk::InvalidArgument, sk::semi::cutlass_linear_workspace_size(p), "not Yᵀ");
  p.y_transposed = false;
  p.k = 48;
  SK_EXPECT_THROW(sk::InvalidArgument, sk::semi::cutlass_linear_workspace_size(p), "multiple of 64");
  p.k = 64;
  SK_EXPECT_THROW(sk::InvalidArgument, sk::semi::cutlass_linear(p, nullptr, sk::Workspace{}, nullptr), "`metadata`");
#if !SPARSEKERN_TEST_WITH_CUDA
  SK_CHECK(sk::semi::cutlass_linear_configs() == 0, "no CUTLASS configurations without CUDA; got ",
           sk::semi::cutlass_linear_configs());
  SK_EXPECT_THROW(sk::BackendUnavailable, sk::semi::cutlass_linear(p, meta.data(), sk::Workspace{}, nullptr),
                  "CUTLASS");
#endif
}

}  // namespace

int main() {
  spmm_cases<std::int32_t>();
  spmm_cases<std::int64_t>();
  sddmm_case();
  structure_and_contracts();
  semi_validation();
  return sk_test::summary("test_csr");
}
