// Bindings of the dense family (sparsekern/dense.h).
#include <sparsekern/dense.h>

#include "common.h"

namespace sparsekern::bindings {

namespace {

/// c ← alpha·a·b + beta·c on 2-D or 3-D (batched) arrays; a/b may be any strided views.
void gemm(const AnyArray& a, const AnyArray& b, const AnyArray& c, double alpha, double beta,
          bool allow_tf32, bool allow_reduced_precision, const nb::object& workspace,
          std::uintptr_t stream) {
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
  const BatchedMatrix am = matrix_of(a, "a"), bm = matrix_of(b, "b"), cm = matrix_of(c, "out");
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
  p.workspace = workspace_of(workspace);
  dense::gemm(p, as_stream(stream));
}

}  // namespace

void register_dense(nb::module_& m) {
  m.def("gemm", &gemm, nb::arg("a"), nb::arg("b"), nb::arg("out"), nb::arg("alpha") = 1.0,
        nb::arg("beta") = 0.0, nb::arg("allow_tf32") = false,
        nb::arg("allow_reduced_precision") = true, nb::arg("workspace") = nb::none(),
        nb::arg("stream") = 0,
        "out ← alpha·a·b + beta·out (2-D, or 3-D batched with broadcast batch stride 0)");
  m.def("gemm_workspace_size", [](int device_type, int index) {
          return dense::gemm_workspace_size(Device{DeviceType(device_type), index});
        }, nb::arg("device_type"), nb::arg("index"));
}

}  // namespace sparsekern::bindings
