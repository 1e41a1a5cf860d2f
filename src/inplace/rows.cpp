// Dispatch points of the row-wise in-place ops (softmax, its backward, layer_norm, rms_norm):
// validate once, then run the CPU or CUDA backend. Nothing is written before validation passes,
// so a refused call leaves its input unchanged.
#include <cmath>

#include "../common/check.h"
#include "inplace_internal.h"

namespace sparsekern::inplace {
namespace {

using sparsekern::detail::device_name;

void check_rows(const char* op, const char* name, const RowsView& v, bool written = true) {
  SK_EXPECTS(v.outer >= 0 && v.inner >= 0 && v.cols >= 0, op, ": `", name,
             "` sizes must be non-negative; got outer=", v.outer, " inner=", v.inner, " cols=", v.cols);
  SK_EXPECTS(v.outer_stride >= 0 && v.inner_stride >= 0 && v.col_stride >= 0, op, ": `", name,
             "` must have non-negative strides; got (", v.outer_stride, ", ", v.inner_stride, ", ",
             v.col_stride, ")");
  SK_EXPECTS(::sparsekern::detail::checked_product({v.outer, v.inner, v.cols}) >= 0 &&
                 ::sparsekern::detail::span_elements(
                     {{v.outer, v.outer_stride}, {v.inner, v.inner_stride}, {v.cols, v.col_stride}}, 8) >= 0,
             op, ": `", name, "`: sizes (", v.outer, ", ", v.inner, ", ", v.cols, ") or strides overflow 64-bit offsets");
  // Written in place row by row: no two (outer, inner, col) may reach one element.
  SK_EXPECTS(!written || ::sparsekern::detail::self_disjoint(
                 {{v.outer, v.outer_stride}, {v.inner, v.inner_stride}, {v.cols, v.col_stride}}),
             op, ": `", name, "` must not reach an element twice: strides (", v.outer_stride, ", ", v.inner_stride,
             ", ", v.col_stride, ") for sizes (", v.outer, ", ", v.inner, ", ", v.cols, ")");
  SK_EXPECTS(v.data != nullptr || v.rows() * v.cols == 0, op, ": `", name,
             "` has a null data pointer but ", v.rows(), "x", v.cols, " elements");
}

/// Elements a row view spans (check_rows has refused views whose span overflows).
std::int64_t span_of(const RowsView& v) {
  return ::sparsekern::detail::span_elements(
      {{v.outer, v.outer_stride}, {v.inner, v.inner_stride}, {v.cols, v.col_stride}}, 8);
}

/// Whether a view and a vector of `n` elements, or two views, share a byte.
bool overlap(const RowsView& a, const void* b, std::int64_t n, DType t) {
  return ::sparsekern::detail::ranges_overlap(a.data, span_of(a), b, n, static_cast<std::int64_t>(dtype_size(t)));
}
bool overlap(const RowsView& a, const RowsView& b, DType t) { return overlap(a, b.data, span_of(b), t); }

[[noreturn]] void no_cuda(const char* op, Device d) {
  throw BackendUnavailable(std::string(op) + ": operands are on " + device_name(d) +
                           " but sparsekern was built without CUDA (CPU-only build)");
}

void check_norm(const char* op, const NormParams& p, bool allow_bias) {
  check_rows(op, "x", p.x);
  SK_EXPECTS(p.x.col_stride == 1 || p.x.cols <= 1, op,
             ": `x` must be contiguous over the normalised dims (unit stride); got element stride ",
             p.x.col_stride);
  SK_EXPECTS(std::isfinite(p.eps) && p.eps >= 0, op, ": `eps` must be finite and >= 0; got ", p.eps);
  SK_EXPECTS(allow_bias || p.bias == nullptr, op, ": `bias` is not supported (RMSNorm has no bias)");
  SK_EXPECTS(p.weight == nullptr || !overlap(p.x, p.weight, p.x.cols, p.dtype), op,
             ": `weight` must not share memory with `x` (x is overwritten)");
  SK_EXPECTS(p.bias == nullptr || !overlap(p.x, p.bias, p.x.cols, p.dtype), op,
             ": `bias` must not share memory with `x` (x is overwritten)");
}

}  // namespace

void softmax(const SoftmaxParams& p, Stream stream) {
  check_rows("softmax", "x", p.x);
  if (p.x.rows() * p.x.cols == 0) return;
  if (p.device.type == DeviceType::cpu) return detail::softmax_cpu(p);
#if SPARSEKERN_WITH_CUDA
  detail::softmax_cuda(p, stream);
#else
  (void)stream;
  no_cuda("softmax", p.device);
#endif
}

void softmax_backward(const SoftmaxBackwardParams& p, Stream stream) {
  check_rows("softmax_backward", "grad", p.grad);
  check_rows("softmax_backward", "y", p.y, /*written=*/false);
  SK_EXPECTS(p.y.outer == p.grad.outer && p.y.inner == p.grad.inner && p.y.cols == p.grad.cols,
             "softmax_backward: `y` must have the rows of `grad` (", p.grad.rows(), "x", p.grad.cols,
             "); got ", p.y.rows(), "x", p.y.cols);
  SK_EXPECTS(!overlap(p.grad, p.y, p.dtype),
             "softmax_backward: `grad` must not share memory with `y` (grad is overwritten)");
  if (p.grad.rows() * p.grad.cols == 0) return;
  if (p.device.type == DeviceType::cpu) return detail::softmax_backward_cpu(p);
#if SPARSEKERN_WITH_CUDA
  detail::softmax_backward_cuda(p, stream);
#else
  (void)stream;
  no_cuda("softmax_backward", p.device);
#endif
}

void layer_norm(const NormParams& p, Stream stream) {
  check_norm("layer_norm", p, true);
  if (p.x.rows() * p.x.cols == 0) return;
  if (p.device.type == DeviceType::cpu) return detail::layer_norm_cpu(p);
#if SPARSEKERN_WITH_CUDA
  detail::layer_norm_cuda(p, stream);
#else
  (void)stream;
  no_cuda("layer_norm", p.device);
#endif
}

void rms_norm(const NormParams& p, Stream stream) {
  check_norm("rms_norm", p, false);
  if (p.x.rows() * p.x.cols == 0) return;
  if (p.device.type == DeviceType::cpu) return detail::rms_norm_cpu(p);
#if SPARSEKERN_WITH_CUDA
  detail::rms_norm_cuda(p, stream);
#else
  (void)stream;
  no_cuda("rms_norm", p.device);
#endif
}

}  // namespace sparsekern::inplace
