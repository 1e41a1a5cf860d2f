// CPU Kronecker products (sparsekern::kron::matmul / matmul_backward on host memory) against an
// explicit Kronecker matrix in float64, for every dtype: factor sets that give one fused group,
// several groups and cuBLAS-style GEMM steps, transposed factor views, padded rows of X and Y, a
// strided ∂ℓ/∂F output, and skipped gradients. Outputs are poisoned first so unwritten elements
// show. Also: argument validation (messages name the argument) and the kernels' fast division.
#include <sparsekern/error.h>
#include <sparsekern/kron.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <random>
#include <vector>

#include "common/half.h"
#include "kron/kron_internal.h"
#include "test_util.h"

namespace sk = sparsekern;
using sk::detail::bfloat16_t;
using sk::detail::half_t;
using sk::InvalidArgument;

namespace {

int g_saved_cases = 0;  // cases whose forward kept states for the backward (must be some)
int g_t0_cases = 0;  // two-factor fp32 cases whose forward kept T0 for the register-tile backward

template <typename T> struct Traits;
// Relative Frobenius error allowed (inputs are rounded to T first, so only the op's own rounding
// counts): fp64/fp32 accumulate in their own precision; f16/bf16 round intermediates between groups.
template <> struct Traits<double> { static constexpr sk::DType dtype = sk::DType::f64; static constexpr double tol = 1e-12; };
template <> struct Traits<float> { static constexpr sk::DType dtype = sk::DType::f32; static constexpr double tol = 1e-5; };
template <> struct Traits<half_t> { static constexpr sk::DType dtype = sk::DType::f16; static constexpr double tol = 4e-3; };
template <> struct Traits<bfloat16_t> { static constexpr sk::DType dtype = sk::DType::bf16; static constexpr double tol = 3e-2; };

using sk_test::to_d;
using sk_test::to_t;

struct Shape {
  long long p, q;
};

double rel_err(const std::vector<double>& got, const std::vector<double>& want) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i])) return std::numeric_limits<double>::infinity();
    num += (got[i] - want[i]) * (got[i] - want[i]);
    den += want[i] * want[i];
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

/// Explicit K = F1 ⊗ … ⊗ Fn (P × Q, row-major) from row-major factors.
std::vector<double> kron_matrix(const std::vector<std::vector<double>>& fs, const std::vector<Shape>& sh) {
  std::vector<double> k{1.0};
  long long P = 1, Q = 1;
  for (std::size_t t = 0; t < fs.size(); ++t) {
    const long long p = sh[t].p, q = sh[t].q;
    std::vector<double> next(static_cast<std::size_t>(P * p * Q * q));
    for (long long i = 0; i < P; ++i)
      for (long long j = 0; j < Q; ++j)
        for (long long a = 0; a < p; ++a)
          for (long long b = 0; b < q; ++b)
            next[(i * p + a) * (Q * q) + j * q + b] = k[i * Q + j] * fs[t][a * q + b];
    k.swap(next);
    P *= p;
    Q *= q;
  }
  return k;
}

template <typename T>
void check_case(long long M, const std::vector<Shape>& sh, bool transposed_factors, std::mt19937& rng) {
  std::normal_distribution<double> nd;
  const int n = static_cast<int>(sh.size());
  long long P = 1, Q = 1;
  for (const Shape& s : sh) { P *= s.p; Q *= s.q; }
  const long long ldx = P + 3, ldy = Q + 5;  // padded rows: non-contiguous views
  std::vector<T> x(static_cast<std::size_t>(M * ldx)), g(static_cast<std::size_t>(M * ldy));
  std::vector<double> x64(static_cast<std::size_t>(M * P)), g64(static_cast<std::size_t>(M * Q));
  for (long long m = 0; m < M; ++m) {
    for (long long i = 0; i < P; ++i) { x[m * ldx + i] = to_t<T>(nd(rng)); x64[m * P + i] = to_d(x[m * ldx + i]); }
    for (long long j = 0; j < Q; ++j) { g[m * ldy + j] = to_t<T>(nd(rng)); g64[m * Q + j] = to_d(g[m * ldy + j]); }
  }
  std::vector<std::vector<T>> fbuf(n);
  std::vector<std::vector<double>> f64(n);
  std::vector<sk::MatrixView> fv(n);
  for (int t = 0; t < n; ++t) {
    const long long p = sh[t].p, q = sh[t].q;
    fbuf[t].resize(static_cast<std::size_t>(p * q));
    f64[t].resize(static_cast<std::size_t>(p * q));
    for (long long a = 0; a < p; ++a)
      for (long long b = 0; b < q; ++b) {
        const double v = nd(rng) / std::sqrt(double(p));
        // Transposed: stored as Fᵀ (q × p row-major), viewed through swapped strides.
        T& slot = transposed_factors ? fbuf[t][b * p + a] : fbuf[t][a * q + b];
        slot = to_t<T>(v);
        f64[t][a * q + b] = to_d(slot);
      }
    fv[t] = transposed_factors ? sk::MatrixView{fbuf[t].data(), p, q, 1, p, 0}
                               : sk::MatrixView{fbuf[t].data(), p, q, q, 1, 0};
  }
  const std::vector<double> K = kron_matrix(f64, sh);
  const std::string what = sk_test::str(Traits<T>::dtype == sk::DType::f64 ? "f64" : "T", " M=", M, " n=", n,
                                        " P=", P, " Q=", Q, transposed_factors ? " (Fᵀ views)" : "");

  // Forward.
  const T nan = to_t<T>(std::numeric_limits<double>::quiet_NaN());
  std::vector<T> y(static_cast<std::size_t>(M * ldy), nan);
  sk::kron::MatmulParams fp;
  fp.dtype = Traits<T>::dtype;
  fp.x = sk::MatrixView{x.data(), M, P, ldx, 1, 0};
  fp.factors = fv.data();
  fp.num_factors = n;
  fp.y = sk::MutableMatrixView{y.data(), M, Q, ldy, 1, 0};
  std::vector<unsigned char> ws(sk::kron::matmul_workspace_size(fp), 0xff);
  fp.workspace = sk::Workspace{ws.data(), ws.size()};
  sk::kron::matmul(fp, nullptr);
  std::vector<double> y_got(static_cast<std::size_t>(M * Q)), y_ref(static_cast<std::size_t>(M * Q), 0.0);
  for (long long m = 0; m < M; ++m) {
    for (long long j = 0; j < Q; ++j) y_got[m * Q + j] = to_d(y[m * ldy + j]);
    for (long long i = 0; i < P; ++i)
      for (long long j = 0; j < Q; ++j) y_ref[m * Q + j] += x64[m * P + i] * K[i * Q + j];
  }
  const double ey = rel_err(y_got, y_ref);
  SK_CHECK(ey <= Traits<T>::tol, what, ": forward rel. error ", ey);
  bool pad_ok = true;  // the padding between rows is not part of Y: left as it was
  for (long long m = 0; m < M; ++m)
    for (long long j = Q; j < ldy; ++j) pad_ok = pad_ok && std::isnan(to_d(y[m * ldy + j]));
  SK_CHECK(pad_ok, what, ": wrote outside Y's view");

  // Backward: ∂ℓ/∂X = G·Kᵀ; ∂ℓ/∂K = Xᵀ·G, and ∂ℓ/∂F_t[a, b] = Σ ∂ℓ/∂K[I, J] · Π_{u≠t} F_u[i_u, j_u].
  std::vector<T> gx(static_cast<std::size_t>(M * ldx), nan);
  std::vector<std::vector<T>> gf(n);
  std::vector<sk::MutableMatrixView> gfv(n);
  for (int t = 0; t < n; ++t) {
    const long long p = sh[t].p, q = sh[t].q;
    gf[t].assign(static_cast<std::size_t>(p * (q + 2)), nan);  // strided: row stride q + 2
    gfv[t] = (t == 1) ? sk::MutableMatrixView{} : sk::MutableMatrixView{gf[t].data(), p, q, q + 2, 1, 0};
  }
  sk::kron::MatmulBackwardParams bp;
  bp.dtype = Traits<T>::dtype;
  bp.x = fp.x;
  bp.factors = fv.data();
  bp.num_factors = n;
  bp.grad_y = sk::MatrixView{g.data(), M, Q, ldy, 1, 0};
  bp.grad_x = sk::MutableMatrixView{gx.data(), M, P, ldx, 1, 0};
  bp.grad_factors = gfv.data();
  std::vector<unsigned char> bws(sk::kron::matmul_backward_workspace_size(bp), 0xff);
  bp.workspace = sk::Workspace{bws.data(), bws.size()};
  sk::kron::matmul_backward(bp, nullptr);

  std::vector<double> gx_got(static_cast<std::size_t>(M * P)), gx_ref(static_cast<std::size_t>(M * P), 0.0);
  std::vector<double> gK(static_cast<std::size_t>(P * Q), 0.0);
  for (long long m = 0; m < M; ++m) {
    for (long long i = 0; i < P; ++i) {
      gx_got[m * P + i] = to_d(gx[m * ldx + i]);
      for (long long j = 0; j < Q; ++j) {
        gx_ref[m * P + i] += g64[m * Q + j] * K[i * Q + j];
        gK[i * Q + j] += x64[m * P + i] * g64[m * Q + j];
      }
    }
  }
  const double egx = rel_err(gx_got, gx_ref);
  SK_CHECK(egx <= 2 * Traits<T>::tol, what, ": grad_x rel. error ", egx);
  for (int t = 0; t < n; ++t) {
    if (t == 1) continue;  // not requested
    const long long p = sh[t].p, q = sh[t].q;
    std::vector<double> want(static_cast<std::size_t>(p * q), 0.0), got(static_cast<std::size_t>(p * q));
    for (long long I = 0; I < P; ++I) {
      for (long long J = 0; J < Q; ++J) {
        double w = gK[I * Q + J];
        long long ii = I, jj = J;
        int a = 0, b = 0;
        for (int u = n - 1; u >= 0; --u) {  // digits of I and J, last mode first
          const int iu = static_cast<int>(ii % sh[u].p), ju = static_cast<int>(jj % sh[u].q);
          ii /= sh[u].p;
          jj /= sh[u].q;
          if (u == t) { a = iu; b = ju; } else { w *= f64[u][iu * sh[u].q + ju]; }
        }
        want[a * q + b] += w;
      }
    }
    bool pad = true;
    for (long long a = 0; a < p; ++a) {
      for (long long b = 0; b < q; ++b) got[a * q + b] = to_d(gf[t][a * (q + 2) + b]);
      pad = pad && std::isnan(to_d(gf[t][a * (q + 2) + q]));
    }
    const double ef = rel_err(got, want);
    SK_CHECK(ef <= 4 * Traits<T>::tol, what, ": grad_factors[", t, "] rel. error ", ef);
    SK_CHECK(pad, what, ": wrote outside grad_factors[", t, "]'s view");
  }

  // A forward that keeps its intermediate states and a backward that reads them: the same Y and
  // ∂ℓ/∂X as above (same kernels, same data), no forward workspace, less backward workspace.
  const std::size_t sbytes = sk::kron::matmul_saved_states_size(fp);
  if (sbytes > 0) {
    ++g_saved_cases;
    std::vector<unsigned char> states(sbytes, 0xff);
    std::vector<T> y2(y.size(), nan);
    sk::kron::MatmulParams fp2 = fp;
    fp2.y = sk::MutableMatrixView{y2.data(), M, Q, ldy, 1, 0};
    fp2.workspace = sk::Workspace{};
    fp2.saved_states = sk::Workspace{states.data(), states.size()};
    SK_CHECK(sk::kron::matmul_workspace_size(fp2) == 0, what, ": a forward keeping its states needs a workspace");
    sk::kron::matmul(fp2, nullptr);
    std::vector<T> gx2(gx.size(), nan);
    sk::kron::MatmulBackwardParams bp2 = bp;
    bp2.grad_x = sk::MutableMatrixView{gx2.data(), M, P, ldx, 1, 0};
    bp2.grad_factors = nullptr;
    bp2.saved_states = fp2.saved_states;
    std::vector<unsigned char> bws2(sk::kron::matmul_backward_workspace_size(bp2), 0xff);
    // Two fp32 factors of the register-tile kernels keep T0 = X·(I ⊗ F2) apart from the workspace;
    // other plans keep the states the backward's workspace would hold.
    const bool t0 = sk::kron::describe_plan(fp, true).find("regtile-bwd") != std::string::npos;
    if (t0) {
      SK_CHECK(sbytes >= static_cast<std::size_t>(M * sh[0].p * sh[1].q) * sizeof(float), what, ": T0 of ", sbytes,
               " bytes");
      SK_CHECK(bws2.size() == bws.size(), what, ": backward workspace with T0 kept ", bws2.size(), " != ",
               bws.size());
    } else {
      SK_CHECK(bws2.size() + sbytes == bws.size(), what, ": backward workspace with saved states ", bws2.size(),
               " + ", sbytes, " != ", bws.size());
    }
    bp2.workspace = sk::Workspace{bws2.data(), bws2.size()};
    std::vector<std::vector<T>> gf2(n);
    std::vector<sk::MutableMatrixView> gfv2(n);
    if (t0) {  // ∂ℓ/∂F from the kept T0 as well (another summation order: compared within tolerance)
      for (int t = 0; t < n; ++t) {
        gf2[t].assign(static_cast<std::size_t>(sh[t].p * sh[t].q), nan);
        gfv2[t] = sk::MutableMatrixView{gf2[t].data(), sh[t].p, sh[t].q, sh[t].q, 1, 0};
      }
      bp2.grad_factors = gfv2.data();
    }
    sk::kron::matmul_backward(bp2, nullptr);
    if (t0) {
      for (int t = 0; t < n; ++t) {
        std::vector<double> a(gf2[t].size()), b(gf2[t].size());
        for (long long i = 0; i < sh[t].p; ++i)
          for (long long j = 0; j < sh[t].q; ++j) {
            a[i * sh[t].q + j] = to_d(gf2[t][i * sh[t].q + j]);
            b[i * sh[t].q + j] = t == 1 ? a[i * sh[t].q + j] : to_d(gf[t][i * (sh[t].q + 2) + j]);
          }
        const double e = rel_err(a, b);
        SK_CHECK(e <= 4 * Traits<T>::tol, what, ": grad_factors[", t, "] from the kept T0, rel. difference ", e);
      }
      ++g_t0_cases;
    }
    bool same = true;
    for (long long m = 0; m < M; ++m) {
      for (long long j = 0; j < Q; ++j) same = same && to_d(y2[m * ldy + j]) == to_d(y[m * ldy + j]);
      for (long long i = 0; i < P; ++i) same = same && to_d(gx2[m * ldx + i]) == to_d(gx[m * ldx + i]);
    }
    SK_CHECK(same, what, ": Y or grad_x differ when the forward keeps its states");
    bp2.saved_states.bytes = sbytes - 1;
    SK_EXPECT_THROW(InvalidArgument, sk::kron::matmul_backward(bp2, nullptr), "`saved_states`");
  }
}

template <typename T>
void check_dtype(std::mt19937& rng) {
  const std::vector<std::pair<long long, std::vector<Shape>>> cases = {
      {1, {{5, 3}}},                                       // one factor: a GEMM
      {3, {{2, 3}, {3, 2}}},                               // one fused group
      {5, {{3, 5}, {7, 2}, {2, 4}}},                       // non-square, odd sizes
      {4, {{3, 3}, {4, 4}, {5, 5}, {2, 2}, {3, 2}}},       // five factors
      {2, {{8, 8}, {8, 8}, {6, 6}, {5, 5}}},               // f64 backward: several groups
      {3, {{70, 3}, {2, 5}}},                              // a factor > 64: GEMM steps
      {2, {{4, 2}, {66, 1}, {3, 3}}},                      // GEMM step between fused groups
      {5, {{32, 8}, {4, 12}}},                             // f32: register-tile forward and backward
  };
  for (const auto& c : cases) {
    check_case<T>(c.first, c.second, false, rng);
    check_case<T>(c.first, c.second, true, rng);
  }
}

/// The opt-in small-factor backward (set_backward_kernel("small"); kron_small_bwd.h) through the C++
/// API: square fp32 factors of 4 … 32 with 1024 ≤ Π p ≤ 8192, the plan naming it.
void check_small_backward(std::mt19937& rng) {
  sk::kron::set_backward_kernel("small");
  SK_CHECK(sk::kron::backward_kernel() == "small", "backward_kernel() = ", sk::kron::backward_kernel());
  const std::vector<Shape> sh = {{8, 8}, {4, 4}, {32, 32}};
  std::vector<float> x(3 * 1024), f0(64), f1(16), f2(1024);
  sk::MatrixView fs[3] = {{f0.data(), 8, 8, 8, 1, 0}, {f1.data(), 4, 4, 4, 1, 0}, {f2.data(), 32, 32, 32, 1, 0}};
  sk::kron::MatmulParams fp;
  fp.dtype = sk::DType::f32;
  fp.x = sk::MatrixView{x.data(), 3, 1024, 1024, 1, 0};
  fp.factors = fs;
  fp.num_factors = 3;
  fp.y = sk::MutableMatrixView{x.data(), 3, 1024, 1024, 1, 0};
  const std::string plan = sk::kron::describe_plan(fp, true);
  SK_CHECK(plan.find("kernel=small-bwd") != std::string::npos, "small-factor backward not planned: ", plan);
  check_case<float>(3, sh, false, rng);
  check_case<float>(2, sh, true, rng);
  sk::kron::set_backward_kernel("");
}

void check_validation() {
  std::vector<float> x(4 * 6, 1.0f), y(4 * 6), f0(2 * 3, 1.0f), f1(3 * 2, 1.0f);
  sk::MatrixView fs[2] = {{f0.data(), 2, 3, 3, 1, 0}, {f1.data(), 3, 2, 2, 1, 0}};
  auto params = [&] {
    sk::kron::MatmulParams p;
    p.x = sk::MatrixView{x.data(), 4, 6, 6, 1, 0};
    p.factors = fs;
    p.num_factors = 2;
    p.y = sk::MutableMatrixView{y.data(), 4, 6, 6, 1, 0};
    return p;
  };
  sk::kron::matmul(params(), nullptr);  // the valid baseline
  { auto p = params(); p.num_factors = 0; SK_EXPECT_THROW(InvalidArgument, sk::kron::matmul(p, nullptr), "`factors`"); }
  { auto p = params(); p.x.cols = 5; SK_EXPECT_THROW(InvalidArgument, sk::kron::matmul(p, nullptr), "`x`"); }
  { auto p = params(); p.y.cols = 7; SK_EXPECT_THROW(InvalidArgument, sk::kron::matmul(p, nullptr), "`y`"); }
  { auto p = params(); p.x.col_stride = 2; SK_EXPECT_THROW(InvalidArgument, sk::kron::matmul(p, nullptr), "`x`"); }
  {
    sk::MatrixView bad[2] = {fs[0], {f1.data(), 3, 0, 2, 1, 0}};
    auto p = params();
    p.factors = bad;
    SK_EXPECT_THROW(InvalidArgument, sk::kron::matmul(p, nullptr), "`factors[1]`");
  }
  {
    sk::MatrixView bad[2] = {{f0.data(), 2, 3, 6, 2, 0}, fs[1]};  // no unit stride
    auto p = params();
    p.factors = bad;
    SK_EXPECT_THROW(InvalidArgument, sk::kron::matmul(p, nullptr), "`factors[0]`");
  }
  { auto p = params(); p.y.data = x.data(); SK_EXPECT_THROW(InvalidArgument, sk::kron::matmul(p, nullptr), "`y`"); }
  {
    sk::kron::MatmulBackwardParams p;
    p.x = params().x;
    p.factors = fs;
    p.num_factors = 2;
    p.grad_y = sk::MatrixView{y.data(), 4, 6, 6, 1, 0};
    std::vector<float> gf(6);
    sk::MutableMatrixView gfs[2] = {{gf.data(), 3, 2, 2, 1, 0}, {}};  // wrong shape for factor 0
    p.grad_factors = gfs;
    SK_EXPECT_THROW(InvalidArgument, sk::kron::matmul_backward(p, nullptr), "`grad_factors[0]`");
  }
#if !SPARSEKERN_TEST_WITH_CUDA
  {
    auto p = params();
    p.device = sk::Device{sk::DeviceType::cuda, 0};
    SK_EXPECT_THROW(sk::BackendUnavailable, sk::kron::matmul(p, nullptr), "without CUDA");
  }
#endif
}

/// The kernels divide by run-time sizes with a multiply-high and a shift: exact for every 31-bit
/// dividend (checked at the ends of the range and at random in between).
void check_fast_division(std::mt19937& rng) {
  using sk::kron::detail::FastDiv;
  std::uniform_int_distribution<int> any(0, std::numeric_limits<int>::max());
  int bad = 0;
  for (long long d = 1; d < (1LL << 31); d = d < 4096 ? d + 1 : d * 5 / 3 + 1) {
    const FastDiv f(d);
    for (int i = 0; i < 512; ++i) {
      const int nval = i < 128 ? i : i < 256 ? std::numeric_limits<int>::max() - (i - 128) : any(rng);
      bad += f.div(nval) != static_cast<int>(nval / d);
    }
  }
  SK_CHECK(bad == 0, bad, " wrong quotients");
}

/// SPARSEKERN_KRON_CPU for the plans that follow (read by the CPU backend at every plan).
void set_kron_cpu(const char* mode) {
#if defined(_WIN32)
  _putenv_s("SPARSEKERN_KRON_CPU", mode);
#else
  setenv("SPARSEKERN_KRON_CPU", mode, 1);
#endif
}

}  // namespace

int main() {
  std::mt19937 rng(5);
  // The fused GPU programs' CPU emulation (the CPU's default plan is GEMM steps, checked below).
  set_kron_cpu("emulate");
  check_dtype<double>(rng);
  check_dtype<float>(rng);
  check_dtype<half_t>(rng);
  check_dtype<bfloat16_t>(rng);
  check_small_backward(rng);
  check_validation();
  check_fast_division(rng);
  SK_CHECK(g_saved_cases > 0, "no case kept forward states for the backward");
  SK_CHECK(g_t0_cases > 0, "no case kept T0 for the register-tile backward");
  // The CPU's own plan: every mode one GEMM step.
  set_kron_cpu("gemm");
  check_dtype<double>(rng);
  check_dtype<float>(rng);
  check_dtype<bfloat16_t>(rng);
  return sk_test::summary("test_kron");
}
