// Dispatch point of the CSR SDDMM: validation, then the CPU kernel or the planned cuSPARSE call.
#include "validate.h"

namespace sparsekern::csr {
namespace {

using sparsekern::detail::device_name;
using namespace sparsekern::csr::detail;

void validate(const SddmmParams& p) {
  check_csr_fields("pattern", p.pattern);
  SK_EXPECTS(p.batch >= 0, "sddmm: `batch` must be non-negative; got ", p.batch);
  const std::int64_t m = p.pattern.rows, n = p.pattern.cols, t = p.x.cols;
  check_view("x", p.x, m, t, p.batch, "the rows of `pattern`");
  check_view("y", p.y, t, n, p.batch, "the columns of `x`");
  SK_EXPECTS(p.y.cols == n, "`y` must have ", n, " columns (the columns of `pattern`); got ", p.y.cols);
  SK_EXPECTS(p.out_values != nullptr || p.pattern.nnz == 0, "`out_values` is a null pointer but nnz=",
             p.pattern.nnz);
  SK_EXPECTS(p.out_values == nullptr || (p.out_values != p.x.data && p.out_values != p.y.data),
             "`out_values` must not alias `x` or `y`");
}

bool same_shape(const SddmmParams& u, const SddmmParams& v) {
  auto same_view = [](const MatrixView& a, const MatrixView& b) {
    return a.rows == b.rows && a.cols == b.cols && a.row_stride == b.row_stride &&
           a.col_stride == b.col_stride && a.batch_stride == b.batch_stride;
  };
  return u.dtype == v.dtype && u.device == v.device && u.batch == v.batch &&
         u.pattern.rows == v.pattern.rows && u.pattern.cols == v.pattern.cols &&
         u.pattern.nnz == v.pattern.nnz && u.pattern.index_type == v.pattern.index_type &&
         same_view(u.x, v.x) && same_view(u.y, v.y);
}

}  // namespace

struct SddmmPlan::Impl {
  SddmmParams planned;
  detail::CudaSddmmState* cuda = nullptr;
  std::int64_t runs = 0;
};

SddmmPlan::SddmmPlan(const SddmmParams& p) : impl_(new Impl) {
  validate(p);
  impl_->planned = p;
  detail::counters().plans_created.fetch_add(1);
  if (p.device.type == DeviceType::cpu) return;
#if SPARSEKERN_WITH_CUDA
  impl_->cuda = detail::sddmm_cuda_create(p);
#else
  throw BackendUnavailable("csr sddmm: operands are on " + device_name(p.device) +
                           " but sparsekern was built without CUDA (CPU-only build)");
#endif
}

SddmmPlan::~SddmmPlan() {
#if SPARSEKERN_WITH_CUDA
  if (impl_ && impl_->cuda) detail::sddmm_cuda_destroy(impl_->cuda);
#endif
}

std::size_t SddmmPlan::workspace_size() const {
#if SPARSEKERN_WITH_CUDA
  if (impl_->cuda) return detail::sddmm_cuda_workspace_size(impl_->cuda);
#endif
  return 0;
}

std::int64_t SddmmPlan::runs() const { return impl_->runs; }

void SddmmPlan::run(const SddmmParams& p, Workspace workspace, Stream stream) {
  validate(p);
  SK_EXPECTS(same_shape(p, impl_->planned),
             "sddmm: parameters do not match the plan (shape, strides, nnz, dtype or device changed)");
  if (p.device.type == DeviceType::cpu) {
    detail::check_structure("pattern", p.pattern);
    ++impl_->runs;
    detail::counters().runs.fetch_add(1);
    detail::sddmm_cpu(p);
    return;
  }
#if SPARSEKERN_WITH_CUDA
  SK_EXPECTS(workspace.bytes >= workspace_size(), "sddmm: `workspace` must hold ", workspace_size(),
             " bytes; got ", workspace.bytes);
  ++impl_->runs;
  detail::counters().runs.fetch_add(1);
  detail::sddmm_cuda_run(impl_->cuda, p, workspace, stream);
#else
  (void)workspace;
  (void)stream;
#endif
}

}  // namespace sparsekern::csr
