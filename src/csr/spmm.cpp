// Dispatch point of the CSR SpMM: argument validation, the structure check, the plan object (a CPU
// plan holds nothing; a CUDA plan holds the cuSPARSE state), and the planning counters.
#include <algorithm>

#include "validate.h"

namespace sparsekern::csr {
namespace detail {

Counters& counters() {
  static Counters* c = new Counters();  // leaked: read from atexit handlers after statics die
  return *c;
}

}  // namespace detail

namespace {

using sparsekern::detail::concat;
using sparsekern::detail::device_name;
using namespace sparsekern::csr::detail;

void validate(const SpmmParams& p) {
  check_csr_fields("a", p.a);
  SK_EXPECTS(p.batch >= 0, "spmm: `batch` must be non-negative; got ", p.batch);
  const std::int64_t m = p.transpose_a ? p.a.cols : p.a.rows;
  const std::int64_t k = p.transpose_a ? p.a.rows : p.a.cols;
  const std::int64_t n = p.b.cols;
  check_view("b", p.b, k, n, p.batch, p.transpose_a ? "the rows of `a`, transposed" : "the columns of `a`");
  check_out("out", p.c, m, n, p.batch);
  const auto elem = static_cast<std::int64_t>(dtype_size(p.dtype));
  const std::int64_t c_span = span3(p.batch, m, n, p.c.batch_stride, p.c.row_stride, p.c.col_stride);
  SK_EXPECTS(p.c.data == nullptr ||
                 (p.c.data != p.b.data && p.c.data != p.a.values &&
                  !sparsekern::detail::ranges_overlap(p.c.data, c_span, p.b.data,
                                                      span3(p.batch, k, n, p.b.batch_stride, p.b.row_stride,
                                                            p.b.col_stride), elem) &&
                  !sparsekern::detail::ranges_overlap(p.c.data, c_span, p.a.values, p.a.nnz, elem)),
             "`out` must not share memory with `b` or the values of `a`");
  SK_EXPECTS(p.a.nnz == 0 || p.a.values != nullptr, "`values` of `a` is a null pointer but nnz=",
             p.a.nnz);
}

bool same_shape(const SpmmParams& x, const SpmmParams& y) {
  auto same_view = [](const MatrixView& u, const MatrixView& v) {
    return u.rows == v.rows && u.cols == v.cols && u.row_stride == v.row_stride &&
           u.col_stride == v.col_stride && u.batch_stride == v.batch_stride;
  };
  auto same_out = [](const MutableMatrixView& u, const MutableMatrixView& v) {
    return u.rows == v.rows && u.cols == v.cols && u.row_stride == v.row_stride &&
           u.col_stride == v.col_stride && u.batch_stride == v.batch_stride;
  };
  return x.dtype == y.dtype && x.device == y.device && x.batch == y.batch &&
         x.a.rows == y.a.rows && x.a.cols == y.a.cols && x.a.nnz == y.a.nnz &&
         x.a.index_type == y.a.index_type && x.transpose_a == y.transpose_a &&
         same_view(x.b, y.b) && same_out(x.c, y.c);
}

std::string describe(const SpmmParams& p) {
  return concat(dtype_name(p.dtype), " on ", device_name(p.device), ", batch ", p.batch, ", a ",
                p.a.rows, "x", p.a.cols, " nnz=", p.a.nnz, p.transpose_a ? " (transposed)" : "",
                ", b ", p.b.rows, "x", p.b.cols, " strides (", p.b.batch_stride, ", ", p.b.row_stride,
                ", ", p.b.col_stride, "), out strides (", p.c.batch_stride, ", ", p.c.row_stride,
                ", ", p.c.col_stride, ")");
}

}  // namespace

namespace detail {

void check_structure(const char* name, const CsrView& a) {
  check_csr_fields(name, a);
  auto crow = [&](std::int64_t i) { return detail::index_at(a.crow_indices, a.index_type, i); };
  SK_EXPECTS(crow(0) == 0, "`crow_indices` must start at 0; got ", crow(0));
  SK_EXPECTS(crow(a.rows) == a.nnz, "`crow_indices` must end at nnz = ", a.nnz, "; got ",
             crow(a.rows));
  for (std::int64_t i = 0; i < a.rows; ++i) {
    const std::int64_t begin = crow(i), end = crow(i + 1);
    SK_EXPECTS(begin <= end && end <= a.nnz, "`crow_indices` must be non-decreasing and at most nnz = ",
               a.nnz, "; got ", begin, " then ", end, " at row ", i);
    std::int64_t previous = -1;
    for (std::int64_t e = begin; e < end; ++e) {
      const std::int64_t j = detail::index_at(a.col_indices, a.index_type, e);
      SK_EXPECTS(j >= 0 && j < a.cols, "`col_indices` must be in [0, ", a.cols, "); got ", j,
                 " at position ", e, " (row ", i, ")");
      SK_EXPECTS(j > previous, "`col_indices` must be sorted and unique within each row; row ", i,
                 " has ", j, " after ", previous, " at position ", e);
      previous = j;
    }
  }
}

}  // namespace detail

void check_structure(const CsrView& a) { detail::check_structure("a", a); }

PlanCounters plan_counters() {
  auto& c = detail::counters();
  return PlanCounters{c.plans_created.load(), c.buffer_size_queries.load(), c.preprocess_calls.load(),
                      c.runs.load()};
}

// ---------------------------------------------------------------------------------------------
// SpmmPlan
// ---------------------------------------------------------------------------------------------
struct SpmmPlan::Impl {
  SpmmParams planned;  // shape/strides/dtype the plan was made for (pointers ignored)
  detail::CudaSpmmState* cuda = nullptr;
  std::int64_t runs = 0;
};

SpmmPlan::SpmmPlan(const SpmmParams& p, SpmmAlgorithm algorithm) : impl_(new Impl) {
  validate(p);
  impl_->planned = p;
  detail::counters().plans_created.fetch_add(1);
  if (p.device.type == DeviceType::cpu) return;
#if SPARSEKERN_WITH_CUDA
  impl_->cuda = detail::spmm_cuda_create(p, algorithm);
#else
  (void)algorithm;
  throw BackendUnavailable("csr spmm: operands are on " + device_name(p.device) +
                           " but sparsekern was built without CUDA (CPU-only build)");
#endif
}

SpmmPlan::~SpmmPlan() {
#if SPARSEKERN_WITH_CUDA
  if (impl_ && impl_->cuda) detail::spmm_cuda_destroy(impl_->cuda);
#endif
}

std::size_t SpmmPlan::workspace_size() const {
#if SPARSEKERN_WITH_CUDA
  if (impl_->cuda) return detail::spmm_cuda_workspace_size(impl_->cuda);
#endif
  return 0;
}

SpmmAlgorithm SpmmPlan::algorithm() const {
#if SPARSEKERN_WITH_CUDA
  if (impl_->cuda) return detail::spmm_cuda_algorithm(impl_->cuda);
#endif
  return SpmmAlgorithm::automatic;
}

std::int64_t SpmmPlan::runs() const { return impl_->runs; }

void SpmmPlan::run(const SpmmParams& p, Workspace workspace, Stream stream) {
  validate(p);
  SK_EXPECTS(same_shape(p, impl_->planned), "spmm: parameters do not match the plan: planned ",
             describe(impl_->planned), "; got ", describe(p));
  if (p.device.type == DeviceType::cpu) {
    detail::check_structure("a", p.a);
    ++impl_->runs;
    detail::counters().runs.fetch_add(1);
    detail::spmm_cpu(p);
    return;
  }
#if SPARSEKERN_WITH_CUDA
  SK_EXPECTS(workspace.bytes >= workspace_size(), "spmm: `workspace` must hold ", workspace_size(),
             " bytes; got ", workspace.bytes);
  ++impl_->runs;
  detail::counters().runs.fetch_add(1);
  detail::spmm_cuda_run(impl_->cuda, p, workspace, stream);
#else
  (void)workspace;
  (void)stream;
#endif
}

}  // namespace sparsekern::csr
