// Bindings of the dense family (sparsekern/dense.h).
#include <sparsekern/dense.h>

#include <string>
#include <utility>

#include "common.h"

namespace sparsekern::bindings {

namespace {

/// c ← alpha·a·b + beta·c on 2-D or 3-D (batched) arrays; a/b may be any strided views.
void gemm(const InArray& a_in, const InArray& b_in, const nb::object& out, double alpha, double beta,
          bool transpose_a, bool transpose_b, bool allow_tf32, bool allow_reduced_precision,
          std::uintptr_t workspace_ptr, std::size_t workspace_bytes, std::uintptr_t stream) {
  const AnyArray a(a_in), b(b_in);
  const AnyArray c = out_array(out, "out");
  dense::GemmParams p;
  p.dtype = dtype_of(a, "a");
  if (dtype_of(b, "b") != p.dtype)
    throw TypeMismatch(std::string("`b` must have the dtype of `a` (") + dtype_name(p.dtype) +
                       "); got " + dtype_name(dtype_of(b, "b")));
  if (dtype_of(c, "out") != p.dtype)
    throw TypeMismatch(std::string("`out` must have the dtype of `a` (") + dtype_name(p.dtype) + ")");
  p.device = device_of(a, "a");
  if (device_of(b, "b") != p.device || device_of(c, "out") != p.device)
    throw InvalidArgument("`a`, `b` and `out` must be on the same device");
  check_no_broadcast(c, "out");
  check_no_overlap(c, "out", a, "a");
  check_no_overlap(c, "out", b, "b");
  const BatchedMatrix cm = matrix_of(c, "out");
  BatchedMatrix am = matrix_of(a, "a"), bm = matrix_of(b, "b");
  // op(x) = xᵀ is the same memory read with swapped dims and strides: Q·Kᵀ and the backward's
  // aᵀ·grad need no transposed copy (and no Python-side view either).
  auto transpose = [](BatchedMatrix& x) {
    std::swap(x.view.rows, x.view.cols);
    std::swap(x.view.row_stride, x.view.col_stride);
  };
  if (transpose_a) transpose(am);
  if (transpose_b) transpose(bm);
  p.batch = cm.batch;
  if ((a.ndim() == 3 && am.batch != p.batch) || (b.ndim() == 3 && bm.batch != p.batch))
    throw InvalidArgument("batch sizes of `a`, `b` and `out` must match");
  p.a = am.view;
  p.b = bm.view;
  p.c = mutable_view(cm);
  p.alpha = alpha;
  p.beta = beta;
  p.fp32_math = allow_tf32 ? dense::Fp32Math::tf32 : dense::Fp32Math::ieee;
  p.allow_reduced_precision_reduction = allow_reduced_precision;
  p.workspace = Workspace{reinterpret_cast<void*>(workspace_ptr), workspace_bytes};
  nb::gil_scoped_release nogil;  // the kernels touch no Python object (see common.h)
  dense::gemm(p, as_stream(stream));
}

/// out ← inᵀ for 2-D arrays with unit column strides.
void transpose(const InArray& in_arr, const nb::object& out_obj, std::uintptr_t stream) {
  const AnyArray in(in_arr);
  const AnyArray out = out_array(out_obj, "out");
  dense::TransposeParams p;
  p.dtype = dtype_of(in, "in");
  if (dtype_of(out, "out") != p.dtype)
    throw TypeMismatch(std::string("`out` must have the dtype of `in` (") + dtype_name(p.dtype) + "); got " +
                       dtype_name(dtype_of(out, "out")));
  p.device = device_of(in, "in");
  if (device_of(out, "out") != p.device) throw InvalidArgument("`in` and `out` must be on the same device");
  if (in.ndim() != 2 || out.ndim() != 2)
    throw InvalidArgument("`in` and `out` must be 2-D; got " + std::to_string(in.ndim()) + "-D and " +
                          std::to_string(out.ndim()) + "-D");
  p.in = matrix_of(in, "in").view;
  p.out = mutable_view(matrix_of(out, "out"));
  nb::gil_scoped_release nogil;  // the kernels touch no Python object (see common.h)
  dense::transpose(p, as_stream(stream));
}

}  // namespace

void register_dense(nb::module_& m) {
  m.def("transpose", &transpose, nb::arg("in"), nb::arg("out"), nb::arg("stream") = 0,
        "out ← inᵀ (2-D, unit column strides, no overlap): a transposed copy through shared-memory tiles");
  m.def("gemm", &gemm, nb::arg("a"), nb::arg("b"), nb::arg("out"), nb::arg("alpha") = 1.0,
        nb::arg("beta") = 0.0, nb::arg("transpose_a") = false, nb::arg("transpose_b") = false,
        nb::arg("allow_tf32") = false,
        nb::arg("allow_reduced_precision") = true, nb::arg("workspace_ptr") = 0,
        nb::arg("workspace_bytes") = 0, nb::arg("stream") = 0,
        "out ← alpha·op(a)·op(b) + beta·out, op(x) = xᵀ if transpose_x (2-D, or 3-D batched; a 2-D "
        "operand is shared by every batch entry). The workspace is a raw device buffer owned by the "
        "caller (e.g. a torch uint8 tensor's data_ptr), used as cuBLAS scratch.");
  m.def("gemm_workspace_size", [](int device_type, int index) {
          return dense::gemm_workspace_size(Device{DeviceType(device_type), index});
        }, nb::arg("device_type"), nb::arg("index"));
}

}  // namespace sparsekern::bindings
