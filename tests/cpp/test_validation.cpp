// Argument validation of the public API: bad calls throw the documented exception type, with a
// message that names the offending argument, and never write the output.
#include <sparsekern/sparsekern.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "test_util.h"

namespace sk = sparsekern;
using sk::dense::GemmParams;

namespace {

// A valid 2x3 · 3x4 fp32 product; each check breaks one thing.
struct Operands {
  std::vector<float> a = std::vector<float>(6, 1.0f), b = std::vector<float>(12, 1.0f),
                     c = std::vector<float>(8, -5.0f);
  GemmParams params() {
    GemmParams p;
    p.a = {a.data(), 2, 3, 3, 1, 0};
    p.b = {b.data(), 3, 4, 4, 1, 0};
    p.c = {c.data(), 2, 4, 4, 1, 0};
    return p;
  }
  bool c_untouched() const {
    for (float x : c) if (x != -5.0f) return false;
    return true;
  }
};

void gemm_shapes_and_layouts() {
  using sk::InvalidArgument;
  {
    Operands o;
    auto p = o.params();
    sk::dense::gemm(p, nullptr);
    SK_CHECK(o.c[0] == 3.0f && o.c[7] == 3.0f, "the valid baseline call must work; got ", o.c[0]);
  }
  {
    Operands o;
    auto p = o.params();
    p.b.rows = 2;
    SK_EXPECT_THROW(InvalidArgument, sk::dense::gemm(p, nullptr), "`b`");
    SK_CHECK(o.c_untouched(), "a rejected call wrote C");
  }
  {
    Operands o;
    auto p = o.params();
    p.c.cols = 3;
    SK_EXPECT_THROW(InvalidArgument, sk::dense::gemm(p, nullptr), "`c`");
    p = o.params();
    p.c.rows = 1;
    SK_EXPECT_THROW(InvalidArgument, sk::dense::gemm(p, nullptr), "`c`");
    SK_CHECK(o.c_untouched(), "a rejected call wrote C");
  }
  {
    Operands o;
    auto p = o.params();
    p.a.row_stride = -3;
    SK_EXPECT_THROW(InvalidArgument, sk::dense::gemm(p, nullptr), "`a`");
    p = o.params();
    p.b.col_stride = -1;
    SK_EXPECT_THROW(InvalidArgument, sk::dense::gemm(p, nullptr), "`b`");
    p = o.params();
    p.c.batch_stride = -8;
    SK_EXPECT_THROW(InvalidArgument, sk::dense::gemm(p, nullptr), "`c`");
  }
  {
    Operands o;
    auto p = o.params();
    p.a.data = nullptr;
    SK_EXPECT_THROW(InvalidArgument, sk::dense::gemm(p, nullptr), "`a`");
    p = o.params();
    p.c.data = nullptr;
    SK_EXPECT_THROW(InvalidArgument, sk::dense::gemm(p, nullptr), "`c`");
  }
  {
    Operands o;
    auto p = o.params();
    p.a.rows = -1;
    p.c.rows = -1;
    SK_EXPECT_THROW(InvalidArgument, sk::dense::gemm(p, nullptr), "m=-1");
    p = o.params();
    p.batch = -2;
    SK_EXPECT_THROW(InvalidArgument, sk::dense::gemm(p, nullptr), "batch=-2");
  }
  {
    // C must not alias an input, and batch entries of C must not overlap.
    std::vector<float> buf(64, 1.0f);
    GemmParams p;
    p.a = {buf.data(), 4, 4, 4, 1, 0};
    p.b = {buf.data() + 16, 4, 4, 4, 1, 0};
    p.c = {buf.data(), 4, 4, 4, 1, 0};
    SK_EXPECT_THROW(InvalidArgument, sk::dense::gemm(p, nullptr), "`c`");
    p.c = {buf.data() + 32, 4, 4, 4, 1, 8};
    p.batch = 2;
    SK_EXPECT_THROW(InvalidArgument, sk::dense::gemm(p, nullptr), "`c`");
  }
  {
    Operands o;
    auto p = o.params();
    p.dtype = static_cast<sk::DType>(42);
    SK_EXPECT_THROW(sk::TypeMismatch, sk::dense::gemm(p, nullptr), "dtype");
  }
}

// Hostile sizes and layouts a C++ caller can pass (session 29's audit under ASan / UBSan: each
// crashed, overflowed a signed product, read outside an array or returned a wrong result).
void hostile_sizes_and_aliasing() {
  using sk::InvalidArgument;
  {  // batch · m · k wrapped to 0, so null pointers passed and the CPU kernel dereferenced them
    Operands o;
    auto p = o.params();
    p.batch = std::int64_t(1) << 32;
    p.a = {nullptr, std::int64_t(1) << 32, 1, 1, 1, std::int64_t(1) << 32};
    p.b = {o.b.data(), 1, 1, 0, 0, 0};
    p.c = {nullptr, std::int64_t(1) << 32, 1, 1, 1, std::int64_t(1) << 32};
    SK_EXPECT_THROW(InvalidArgument, sk::dense::gemm(p, nullptr), "overflow");
  }
  {  // c's batch entries interleave: entry 1 overwrote row 1 of entry 0
    std::vector<float> a(8, 1.0f), b(8, 1.0f), c(32, -5.0f);
    GemmParams p;
    p.batch = 2;
    p.a = {a.data(), 2, 2, 2, 1, 4};
    p.b = {b.data(), 2, 2, 2, 1, 4};
    p.c = {c.data(), 2, 2, 10, 1, 10};
    SK_EXPECT_THROW(InvalidArgument, sk::dense::gemm(p, nullptr), "must not overlap itself");
    p.c = {c.data(), 2, 2, 1, 1, 4};  // (1, 1) strides: elements (0, 1) and (1, 0) coincide
    SK_EXPECT_THROW(InvalidArgument, sk::dense::gemm(p, nullptr), "must not overlap itself");
    for (float x : c) SK_CHECK(x == -5.0f, "a rejected call wrote C");
  }
  {  // c starts inside a (not at its first element, which was the only alias caught)
    std::vector<float> buf(64, 1.0f), b(12, 1.0f);
    GemmParams p;
    p.a = {buf.data(), 2, 3, 3, 1, 0};
    p.b = {b.data(), 3, 4, 4, 1, 0};
    p.c = {buf.data() + 3, 2, 4, 4, 1, 0};
    SK_EXPECT_THROW(InvalidArgument, sk::dense::gemm(p, nullptr), "share memory");
  }
  {  // an int cast to DType: transpose read 8-byte elements from a float array
    std::vector<float> in(15, 1.0f), out(15);
    sk::dense::TransposeParams t;
    t.dtype = static_cast<sk::DType>(99);
    t.in = {in.data(), 3, 5, 5, 1, 0};
    t.out = {out.data(), 5, 3, 3, 1, 0};
    SK_EXPECT_THROW(sk::TypeMismatch, sk::dense::transpose(t, nullptr), "DType");
  }
  // The panel size divided by a row byte count that had wrapped to 0.
  SK_EXPECT_THROW(InvalidArgument, sk::inplace::square_matmul_workspace_size(sk::DType::f32, 1, std::int64_t(1) << 62),
                  "overflow");
  {  // negative sizes and a block size that does not divide them: offsets[rows / b] read out of range
    std::vector<std::int32_t> offsets{0, 1}, cols{0};
    sk::bsr::BlockSparseView v;
    v.rows = -16, v.cols = 16, v.block_size = 16, v.nnz_blocks = 1;
    v.block_row_offsets = offsets.data(), v.block_col_indices = cols.data();
    SK_EXPECT_THROW(InvalidArgument, sk::bsr::validate_pattern(v), "non-negative");
    v.rows = 16, v.cols = 16, v.block_size = 7;
    SK_EXPECT_THROW(InvalidArgument, sk::bsr::validate_pattern(v), "must divide");
  }
  {  // rows written in place that share elements: softmax ran over values another row had written
    std::vector<float> x{1.0f, 2.0f, 3.0f};
    sk::inplace::SoftmaxParams sp;
    sp.x.data = x.data(), sp.x.outer = 2, sp.x.outer_stride = 0, sp.x.cols = 3;
    SK_EXPECT_THROW(InvalidArgument, sk::inplace::softmax(sp, nullptr), "element twice");
    SK_CHECK(x[0] == 1.0f && x[2] == 3.0f, "a rejected softmax wrote x");
  }
  {  // w's strides overflowed the byte span of the overlap check (a signed overflow, then a wild read)
    std::vector<float> x(4, 1.0f), w(4, 1.0f), ws(4);
    sk::inplace::SquareMatmulParams sp;
    sp.x = {x.data(), 2, 2, 2, 1, 0};
    sp.w = {w.data(), 2, 2, std::int64_t(1) << 62, 1, 0};
    sp.workspace = {ws.data(), ws.size() * sizeof(float)};
    SK_EXPECT_THROW(InvalidArgument, sk::inplace::square_matmul(sp, nullptr), "overflows");
  }
  {  // a one-row x with a negative row stride: its span was -1, so the alias check let y inside x pass
    std::vector<double> buf(8, 1.0), f{1, 2, 3, 4};
    const sk::MatrixView fs[1] = {{f.data(), 2, 2, 2, 1, 0}};
    sk::kron::MatmulParams kp;
    kp.dtype = sk::DType::f64;
    kp.factors = fs;
    kp.num_factors = 1;
    kp.x = {buf.data(), 1, 2, -1, 1, 0};
    kp.y = {buf.data() + 1, 1, 2, -1, 1, 0};
    SK_EXPECT_THROW(InvalidArgument, sk::kron::matmul(kp, nullptr), "share memory");
    kp.y = {buf.data() + 2, 1, 2, -1, 1, 0};  // apart: the stride of a single row does not matter
    sk::kron::matmul(kp, nullptr);
    SK_CHECK(buf[2] == 1 + 3 && buf[3] == 2 + 4, "kron of a one-row x with a negative row stride: ", buf[2], ", ", buf[3]);
  }
  {  // enumerators out of range: an empty kron product and a CPU gemm returned without an error
    std::vector<double> f{1, 2, 3, 4};
    const sk::MatrixView fs[1] = {{f.data(), 2, 2, 2, 1, 0}};
    sk::kron::MatmulParams kp;
    kp.dtype = static_cast<sk::DType>(77);
    kp.factors = fs;
    kp.num_factors = 1;
    kp.x = {nullptr, 0, 2, 2, 1, 0};
    kp.y = {nullptr, 0, 2, 2, 1, 0};
    SK_EXPECT_THROW(sk::TypeMismatch, sk::kron::matmul(kp, nullptr), "DType");
    SK_EXPECT_THROW(sk::TypeMismatch, (void)sk::kron::matmul_workspace_size(kp), "DType");
    kp.dtype = sk::DType::f64;
    kp.fp32_math = static_cast<sk::dense::Fp32Math>(5);
    SK_EXPECT_THROW(InvalidArgument, sk::kron::matmul(kp, nullptr), "Fp32Math");
    Operands o;
    auto p = o.params();
    p.fp32_math = static_cast<sk::dense::Fp32Math>(5);
    SK_EXPECT_THROW(InvalidArgument, sk::dense::gemm(p, nullptr), "Fp32Math");
  }
  {  // P = 2^21 and Q = 2^40 pass, but the states between the factors hold up to 2^61 per row
    std::vector<double> f(1, 1.0);
    const sk::MatrixView fs[3] = {{f.data(), std::int64_t(1) << 21, 1, 1, 1, 0},
                                  {f.data(), 1, std::int64_t(1) << 20, std::int64_t(1) << 20, 1, 0},
                                  {f.data(), 1, std::int64_t(1) << 20, std::int64_t(1) << 20, 1, 0}};
    sk::kron::MatmulParams kp;
    kp.dtype = sk::DType::f64;
    kp.factors = fs;
    kp.num_factors = 3;
    kp.x = {f.data(), 1, std::int64_t(1) << 21, std::int64_t(1) << 21, 1, 0};
    kp.y = {f.data(), 1, std::int64_t(1) << 40, std::int64_t(1) << 40, 1, 0};
    SK_EXPECT_THROW(InvalidArgument, sk::kron::matmul_workspace_size(kp), "intermediate products");
  }
}

void backends() {
  SK_CHECK(std::strcmp(sk::version(), SPARSEKERN_TEST_VERSION) == 0, "version() = ", sk::version(),
           ", the build says ", SPARSEKERN_TEST_VERSION);
  SK_CHECK(std::strcmp(sk::dtype_name(sk::DType::bf16), "bfloat16") == 0, "dtype_name(bf16)");
  SK_CHECK(sk::dense::gemm_workspace_size(sk::Device{}) == 0, "the CPU needs no workspace");
  const int devices = sk::cuda_device_count();  // never throws, even without a driver
  SK_CHECK(devices >= 0, "cuda_device_count() = ", devices);
  SK_CHECK(sk::built_with_cuda() == (SPARSEKERN_TEST_WITH_CUDA != 0), "built_with_cuda() = ",
           sk::built_with_cuda());
  SK_EXPECT_THROW(sk::InvalidArgument, sk::set_cpu_threads(0), "at least 1");
  const int threads = sk::cpu_threads();
  SK_CHECK(threads >= 1, "cpu_threads() = ", threads);
  sk::set_cpu_threads(3);
  SK_CHECK(sk::cpu_threads() == 3 || sk::cpu_threads() == 1, "cpu_threads() after set_cpu_threads(3) = ",
           sk::cpu_threads(), " (3, or 1 without OpenMP)");
  sk::set_cpu_threads(threads);
  if (sk::built_with_cuda()) return;  // CUDA paths are covered by the Python suite on a GPU

  SK_CHECK(devices == 0, "a CPU-only build must report 0 CUDA devices");
  Operands o;
  auto p = o.params();
  p.device = {sk::DeviceType::cuda, 0};
  SK_EXPECT_THROW(sk::BackendUnavailable, sk::dense::gemm(p, nullptr), "without CUDA");
  SK_CHECK(o.c_untouched(), "a rejected call wrote C");
  SK_EXPECT_THROW(sk::BackendUnavailable, sk::dense::gemm_workspace_size(p.device), "without CUDA");
  SK_EXPECT_THROW(sk::BackendUnavailable, sk::handles::init_cublas(p.device), "without CUDA");
  sk::handles::destroy_all();  // a no-op, but callable
  SK_CHECK(sk::handles::live_handle_count() == 0, "no handles without CUDA");
}

}  // namespace

int main() {
  gemm_shapes_and_layouts();
  hostile_sizes_and_aliasing();
  backends();
  return sk_test::summary("test_validation");
}
