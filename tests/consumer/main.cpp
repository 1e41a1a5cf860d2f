// Consumer of the installed package: only public headers, only the public CPU API. Checks
// sparsekern::dense::gemm against a naive double loop (fp32 and fp64, including a transposed-stride
// view of A) and that a bad call throws sparsekern::InvalidArgument naming the argument.
// Prints one line per check; exits nonzero if any failed.
#include <sparsekern/sparsekern.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

namespace sk = sparsekern;

namespace {

int failures = 0;

void report(bool ok, const std::string& what) {
  std::printf("%s %s\n", ok ? "ok  " : "FAIL", what.c_str());
  if (!ok) ++failures;
}

template <typename T> constexpr sk::DType dtype_of();
template <> constexpr sk::DType dtype_of<float>() { return sk::DType::f32; }
template <> constexpr sk::DType dtype_of<double>() { return sk::DType::f64; }

// C = A·B with A m×k stored row-major, or (transpose_a) stored as its k×m transpose and viewed
// through swapped strides; B k×n row-major; C m×n row-major.
template <typename T>
void check_gemm(std::int64_t m, std::int64_t k, std::int64_t n, bool transpose_a, double tol) {
  std::mt19937 rng(static_cast<unsigned>(m * 10007 + k * 101 + n + (transpose_a ? 7 : 0)));
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  std::vector<T> a(m * k), b(k * n), c(m * n, T(-999));  // poisoned: beta = 0 must overwrite it
  for (auto& x : a) x = static_cast<T>(dist(rng));
  for (auto& x : b) x = static_cast<T>(dist(rng));

  const std::int64_t a_rs = transpose_a ? 1 : k, a_cs = transpose_a ? m : 1;
  sk::dense::GemmParams p;
  p.dtype = dtype_of<T>();
  p.a = {a.data(), m, k, a_rs, a_cs, 0};
  p.b = {b.data(), k, n, n, 1, 0};
  p.c = {c.data(), m, n, n, 1, 0};
  sk::dense::gemm(p, nullptr);

  double max_err = 0;
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      double ref = 0, scale = 0;
      for (std::int64_t r = 0; r < k; ++r) {
        const double prod = double(a[i * a_rs + r * a_cs]) * double(b[r * n + j]);
        ref += prod;
        scale += std::fabs(prod);
      }
      max_err = std::fmax(max_err, std::fabs(double(c[i * n + j]) - ref) / (scale + 1e-30));
    }
  char line[160];
  std::snprintf(line, sizeof line, "gemm %s m=%lld k=%lld n=%lld%s: max rel err %.2e (tol %.0e)",
                sk::dtype_name(p.dtype), (long long)m, (long long)k, (long long)n,
                transpose_a ? " (A transposed view)" : "", max_err, tol);
  report(max_err <= tol, line);
}

void check_bad_call() {
  std::vector<float> a(6), b(6), c(4);
  sk::dense::GemmParams p;
  p.a = {a.data(), 2, 3, 3, 1, 0};
  p.b = {b.data(), 2, 3, 3, 1, 0};  // 2x3 cannot follow a 2x3 A
  p.c = {c.data(), 2, 2, 2, 1, 0};
  try {
    sk::dense::gemm(p, nullptr);
    report(false, "mismatched shapes: no exception");
  } catch (const sk::InvalidArgument& e) {
    const std::string msg = e.what();
    report(msg.find("`b`") != std::string::npos, "mismatched shapes throw InvalidArgument: " + msg);
  } catch (const std::exception& e) {
    report(false, std::string("mismatched shapes: wrong exception type: ") + e.what());
  }
}

}  // namespace

int main() {
  std::printf("sparsekern %s (CUDA backend: %s)\n", sk::version(), sk::built_with_cuda() ? "yes" : "no");
  for (bool t : {false, true}) {
    check_gemm<float>(13, 17, 11, t, 1e-5);
    check_gemm<double>(13, 17, 11, t, 1e-13);
    check_gemm<float>(70, 33, 65, t, 1e-5);  // large enough for the parallel path
  }
  check_bad_call();
  std::printf(failures ? "%d check(s) FAILED\n" : "all checks passed\n", failures);
  return failures ? 1 : 0;
}
