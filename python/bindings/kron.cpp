// Bindings of the Kronecker family (sparsekern/kron.h).
#include <sparsekern/kron.h>

#include <nanobind/stl/string.h>

#include <vector>

#include "common.h"

namespace sparsekern::bindings {

namespace {

/// The operands of one call, converted and checked against `x`'s dtype and device.
struct KronOperands {
  DType dtype{};
  Device device{};
  MatrixView x{};
  std::vector<AnyArray> factor_arrays;  // keep the DLPack owners alive for the call
  std::vector<MatrixView> factors;
};

MatrixView matrix2d(const AnyArray& a, const std::string& name, DType dtype, Device device) {
  if (dtype_of(a, name.c_str()) != dtype)
    throw TypeMismatch("`" + name + "` must have the dtype of `x` (" + dtype_name(dtype) + "); got " +
                       dtype_name(dtype_of(a, name.c_str())));
  if (device_of(a, name.c_str()) != device)
    throw InvalidArgument("`" + name + "` must be on the same device as `x`");
  if (a.ndim() != 2)
    throw InvalidArgument("`" + name + "` must be 2-D; got " + std::to_string(a.ndim()) + "-D");
  return matrix_of(a, name.c_str()).view;
}

KronOperands operands(const InArray& x_in, const nb::sequence& factors) {
  const AnyArray x(x_in);
  KronOperands o;
  o.dtype = dtype_of(x, "x");
  o.device = device_of(x, "x");
  o.x = matrix2d(x, "x", o.dtype, o.device);
  const std::size_t n = nb::len(factors);
  o.factor_arrays.reserve(n);
  o.factors.reserve(n);
  for (std::size_t k = 0; k < n; ++k) {
    o.factor_arrays.push_back(AnyArray(nb::cast<InArray>(factors[k])));
    o.factors.push_back(
        matrix2d(o.factor_arrays.back(), "factors[" + std::to_string(k) + "]", o.dtype, o.device));
  }
  return o;
}

kron::MatmulParams forward_params(const KronOperands& o, const AnyArray& out, bool allow_tf32,
                                  Workspace blas_workspace) {
  kron::MatmulParams p;
  p.dtype = o.dtype;
  p.device = o.device;
  p.x = o.x;
  p.factors = o.factors.data();
  p.num_factors = static_cast<int>(o.factors.size());
  p.y = mutable_view(BatchedMatrix{1, matrix2d(out, "out", o.dtype, o.device)});
  p.fp32_math = allow_tf32 ? dense::Fp32Math::tf32 : dense::Fp32Math::ieee;
  p.blas_workspace = blas_workspace;
  return p;
}

/// Backward parameters; `grad_views` receives the ∂ℓ/∂F views (data == nullptr where None).
kron::MatmulBackwardParams backward_params(const KronOperands& o, const InArray& grad_y,
                                           const nb::object& grad_x, const nb::sequence& grad_factors,
                                           std::vector<AnyArray>& keep,
                                           std::vector<MutableMatrixView>& grad_views, bool allow_tf32,
                                           Workspace blas_workspace) {
  kron::MatmulBackwardParams p;
  p.dtype = o.dtype;
  p.device = o.device;
  p.x = o.x;
  p.factors = o.factors.data();
  p.num_factors = static_cast<int>(o.factors.size());
  p.grad_y = matrix2d(AnyArray(grad_y), "grad_y", o.dtype, o.device);
  if (!grad_x.is_none()) {
    hold_out(keep, grad_x, "grad_x");
    p.grad_x = mutable_view(BatchedMatrix{1, matrix2d(keep.back(), "grad_x", o.dtype, o.device)});
  }
  const std::size_t n = nb::len(grad_factors);
  if (n != o.factors.size())
    throw InvalidArgument("`grad_factors` must have one entry (or None) per factor; got " +
                          std::to_string(n) + " for " + std::to_string(o.factors.size()) + " factors");
  keep.reserve(keep.size() + n);
  grad_views.assign(n, MutableMatrixView{});
  for (std::size_t k = 0; k < n; ++k) {
    nb::object item = grad_factors[k];
    if (item.is_none()) continue;
    const std::string name = "grad_factors[" + std::to_string(k) + "]";
    hold_out(keep, item, name.c_str());
    grad_views[k] = mutable_view(BatchedMatrix{1, matrix2d(keep.back(), name, o.dtype, o.device)});
  }
  p.grad_factors = grad_views.data();
  p.fp32_math = allow_tf32 ? dense::Fp32Math::tf32 : dense::Fp32Math::ieee;
  p.blas_workspace = blas_workspace;
  return p;
}

Workspace raw_workspace(std::uintptr_t ptr, std::size_t bytes) {
  return Workspace{reinterpret_cast<void*>(ptr), bytes};
}

/// The op's workspace, when it needs one, from the caller's allocator: `alloc(nbytes)` returns
/// (pointer, bytes, owner) — e.g. a torch uint8 tensor's data_ptr, its size, and the tensor. The
/// returned object owns the memory and must outlive the call that uses it.
struct Allocation {
  nb::object owner;
  Workspace ws{};
};

Allocation allocate(const nb::object& alloc, std::size_t nbytes) {
  Allocation a;
  if (nbytes == 0 || alloc.is_none()) return a;
  a.owner = alloc(nbytes);
  nb::sequence t = nb::cast<nb::sequence>(a.owner);
  a.ws = raw_workspace(nb::cast<std::uintptr_t>(t[0]), nb::cast<std::size_t>(t[1]));
  return a;
}

}  // namespace

void register_kron(nb::module_& m) {
  m.def(
      "kron_matmul",
      [](const InArray& x, const nb::sequence& factors, const nb::object& out_obj, const nb::object& alloc,
         std::uintptr_t blas_ptr, std::size_t blas_bytes, bool allow_tf32, std::uintptr_t stream,
         const nb::object& save) -> nb::object {
        const KronOperands o = operands(x, factors);
        const AnyArray out = out_array(out_obj, "out");
        kron::MatmulParams p = forward_params(o, out, allow_tf32, raw_workspace(blas_ptr, blas_bytes));
        Allocation saved;
        if (!save.is_none()) {
          saved = allocate(save, kron::matmul_saved_states_size(p));
          p.saved_states = saved.ws;
        }
        const Allocation ws = allocate(alloc, kron::matmul_workspace_size(p));
        p.workspace = ws.ws;
        {
          nb::gil_scoped_release nogil;  // the kernels touch no Python object (see common.h)
          kron::matmul(p, as_stream(stream));
        }
        return saved.owner.is_valid() ? saved.owner : nb::none();
      },
      nb::arg("x"), nb::arg("factors"), nb::arg("out"), nb::arg("alloc") = nb::none(),
      nb::arg("blas_workspace_ptr") = 0, nb::arg("blas_workspace_bytes") = 0,
      nb::arg("allow_tf32") = false, nb::arg("stream") = 0, nb::arg("save") = nb::none(),
      "out ← x · (factors[0] ⊗ … ⊗ factors[n−1]); x (M, P), out (M, Q). When the op needs a "
      "workspace, `alloc(nbytes)` returns (pointer, bytes, owner) of a buffer on the operands' "
      "device; the blas workspace is cuBLAS scratch for steps with large factors. With `save` (an "
      "allocator like `alloc`), the intermediate states the backward would recompute are kept in a "
      "buffer from it, whose (pointer, bytes, owner) is returned (None when there is nothing to keep): "
      "pass pointer and bytes to kron_matmul_backward as saved_states_ptr / saved_states_bytes");
  m.def(
      "kron_matmul_workspace_size",
      [](const InArray& x, const nb::sequence& factors, const InArray& out) {
        const KronOperands o = operands(x, factors);
        return kron::matmul_workspace_size(forward_params(o, AnyArray(out), false, Workspace{}));
      },
      nb::arg("x"), nb::arg("factors"), nb::arg("out"));
  m.def(
      "kron_matmul_backward",
      [](const InArray& x, const nb::sequence& factors, const InArray& grad_y, const nb::object& grad_x,
         const nb::sequence& grad_factors, const nb::object& alloc, std::uintptr_t blas_ptr,
         std::size_t blas_bytes, bool allow_tf32, std::uintptr_t stream, std::uintptr_t saved_ptr,
         std::size_t saved_bytes) {
        const KronOperands o = operands(x, factors);
        std::vector<AnyArray> keep;
        std::vector<MutableMatrixView> views;
        kron::MatmulBackwardParams p = backward_params(o, grad_y, grad_x, grad_factors, keep, views,
                                                       allow_tf32, raw_workspace(blas_ptr, blas_bytes));
        p.saved_states = raw_workspace(saved_ptr, saved_bytes);
        const Allocation ws = allocate(alloc, kron::matmul_backward_workspace_size(p));
        p.workspace = ws.ws;
        {
          nb::gil_scoped_release nogil;  // the kernels touch no Python object (see common.h)
          kron::matmul_backward(p, as_stream(stream));
        }
      },
      nb::arg("x"), nb::arg("factors"), nb::arg("grad_y"), nb::arg("grad_x").none(), nb::arg("grad_factors"),
      nb::arg("alloc") = nb::none(), nb::arg("blas_workspace_ptr") = 0, nb::arg("blas_workspace_bytes") = 0,
      nb::arg("allow_tf32") = false, nb::arg("stream") = 0, nb::arg("saved_states_ptr") = 0,
      nb::arg("saved_states_bytes") = 0,
      "grad_x ← grad_y · (F1ᵀ ⊗ … ⊗ Fnᵀ) and grad_factors[k] ← ∂ℓ/∂Fk (None entries are skipped); "
      "saved_states_ptr/bytes: the buffer a kron_matmul(..., save=) of the same operands returned "
      "(0: the backward recomputes the intermediate states)");
  m.def(
      "kron_matmul_backward_workspace_size",
      [](const InArray& x, const nb::sequence& factors, const InArray& grad_y, const nb::object& grad_x,
         const nb::sequence& grad_factors) {
        const KronOperands o = operands(x, factors);
        std::vector<AnyArray> keep;
        std::vector<MutableMatrixView> views;
        return kron::matmul_backward_workspace_size(
            backward_params(o, grad_y, grad_x, grad_factors, keep, views, false, Workspace{}));
      },
      nb::arg("x"), nb::arg("factors"), nb::arg("grad_y"), nb::arg("grad_x").none(),
      nb::arg("grad_factors"));
  m.def(
      "kron_set_forward_kernel", [](const std::string& name) { kron::set_forward_kernel(name); },
      nb::arg("name"),
      "choose the fused fp32 forward kernel for the process: \"auto\", \"old\", \"new\", \"small\", or \"\" to read "
      "SPARSEKERN_KRON_FWD again (A/B measurements and tests)");
  m.def(
      "kron_set_backward_kernel", [](const std::string& name) { kron::set_backward_kernel(name); },
      nb::arg("name"),
      "choose the fused fp32 backward kernel for the process: \"auto\", \"old\", \"new\", \"small\" (the "
      "small-factor backward, opt-in), or \"\" to read SPARSEKERN_KRON_BWD_KERNEL again (A/B measurements and tests)");
  m.def("kron_selection_epoch", []() { return kron::selection_epoch(); },
        "Changes with every kron_set_forward_kernel / kron_set_backward_kernel: states a forward kept "
        "are handed to the backward only while it is unchanged (see sparsekern/kron.h).");
  m.def("kron_backward_kernel", []() { return kron::backward_kernel(); },
        "the fused fp32 backward kernel in use: \"auto\", \"old\", \"new\" or \"small\" (plus plan overrides)");
  m.def("kron_forward_kernel", []() { return kron::forward_kernel(); },
        "the fused fp32 forward kernel in use: \"auto\", \"old\", \"new\" or \"small\" (plus plan overrides)");
  m.def(
      "kron_describe_plan",
      [](const InArray& x, const nb::sequence& factors, bool backward) {
        const KronOperands o = operands(x, factors);
        kron::MatmulParams p;
        p.dtype = o.dtype;
        p.device = o.device;
        p.x = o.x;
        p.factors = o.factors.data();
        p.num_factors = static_cast<int>(o.factors.size());
        return kron::describe_plan(p, backward);
      },
      nb::arg("x"), nb::arg("factors"), nb::arg("backward") = false,
      "the kernels kron_matmul (or its backward) would run for these shapes on this device");
}

}  // namespace sparsekern::bindings
