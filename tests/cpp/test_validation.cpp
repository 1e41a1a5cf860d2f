// Argument validation of the public API: bad calls throw the documented exception type, with a
// message that names the offending argument, and never write the output.
#include <sparsekern/sparsekern.h>

#include <cmath>
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

void backends() {
  SK_CHECK(std::strcmp(sk::version(), SPARSEKERN_TEST_VERSION) == 0, "version() = ", sk::version(),
           ", the build says ", SPARSEKERN_TEST_VERSION);
  SK_CHECK(std::strcmp(sk::dtype_name(sk::DType::bf16), "bfloat16") == 0, "dtype_name(bf16)");
  SK_CHECK(sk::dense::gemm_workspace_size(sk::Device{}) == 0, "the CPU needs no workspace");
  const int devices = sk::cuda_device_count();  // never throws, even without a driver
  SK_CHECK(devices >= 0, "cuda_device_count() = ", devices);
  SK_CHECK(sk::built_with_cuda() == (SPARSEKERN_TEST_WITH_CUDA != 0), "built_with_cuda() = ",
           sk::built_with_cuda());
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
  backends();
  return sk_test::summary("test_validation");
}
