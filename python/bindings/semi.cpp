// Bindings of the semi family (sparsekern/semi.h): cuSPARSELt loading, weight compression and the
// LinearPlan class that Python caches per (compressed weight, input height, bias).
#include <nanobind/stl/string.h>

#include <sparsekern/semi.h>

#include "common.h"

namespace sparsekern::bindings {

namespace {

semi::WeightShape weight_shape_of(const AnyArray& w) {
  if (w.ndim() != 2) throw InvalidArgument("`weight` must be 2-D (out_features, in_features)");
  if (w.shape(1) > 1 && w.stride(1) != 1) throw InvalidArgument("`weight` must be row-major contiguous");
  if (w.shape(0) > 1 && w.stride(0) != std::int64_t(w.shape(1)))
    throw InvalidArgument("`weight` must be row-major contiguous");
  semi::WeightShape s;
  s.dtype = dtype_of(w, "weight");
  s.device = device_of(w, "weight");
  s.rows = std::int64_t(w.shape(0));
  s.cols = std::int64_t(w.shape(1));
  return s;
}

void check_contiguous_2d(const AnyArray& a, const char* name, std::int64_t rows, std::int64_t cols) {
  if (a.ndim() != 2 || std::int64_t(a.shape(0)) != rows || std::int64_t(a.shape(1)) != cols)
    throw InvalidArgument("`" + std::string(name) + "` must be " + std::to_string(rows) + "x" + std::to_string(cols));
  if ((cols > 1 && a.stride(1) != 1) || (rows > 1 && a.stride(0) != cols))
    throw InvalidArgument("`" + std::string(name) + "` must be row-major contiguous");
}

/// Y = X · Wᵀ + bias parameters: x (m×k), y (m×n, or n×m holding Yᵀ when `y_transposed`)
/// contiguous; compressed weight as a byte buffer.
/// `y` is written by run / search / semi_cutlass_linear (a plan's constructor and the workspace
/// query only read its shape).
semi::LinearParams linear_params(const InArray& x_in, const InArray& compressed_in, std::int64_t n,
                                 const nb::object& bias, const AnyArray& y, bool y_transposed, Held& held) {
  const AnyArray x(x_in), compressed(compressed_in);
  semi::LinearParams p;
  if (x.ndim() != 2) throw InvalidArgument("`x` must be 2-D (m, in_features)");
  p.dtype = dtype_of(x, "x");
  p.device = device_of(x, "x");
  p.m = std::int64_t(x.shape(0));
  p.k = std::int64_t(x.shape(1));
  p.n = n;
  check_contiguous_2d(x, "x", p.m, p.k);
  p.y_transposed = y_transposed;
  if (y_transposed)
    check_contiguous_2d(y, "y", p.n, p.m);
  else
    check_contiguous_2d(y, "y", p.m, p.n);
  if (dtype_of(y, "y") != p.dtype) throw TypeMismatch("`y` must have the dtype of `x`");
  if (device_of(y, "y") != p.device || device_of(compressed, "weight") != p.device)
    throw InvalidArgument("`x`, `weight` and `y` must be on the same device");
  p.x = x.data();
  p.y = y.data();
  p.weight = compressed.data();
  if (!bias.is_none()) {
    const AnyArray& b = hold(held, bias);
    if (b.ndim() != 1 || std::int64_t(b.shape(0)) != n || (n > 1 && b.stride(0) != 1))
      throw InvalidArgument("`bias` must be a contiguous vector of " + std::to_string(n) + " entries");
    if (dtype_of(b, "bias") != p.dtype) throw TypeMismatch("`bias` must have the dtype of `x`");
    if (device_of(b, "bias") != p.device) throw InvalidArgument("`bias` must be on the device of `x`");
    p.bias = b.data();
  }
  return p;
}

}  // namespace

void register_semi(nb::module_& m) {
  m.def("semi_built_with_cusparselt", &semi::built_with_cusparselt,
        "whether this build has the cuSPARSELt (2:4) backend");
  m.def("semi_load_cusparselt", &semi::load_cusparselt, nb::arg("path") = "",
        "dlopen libcusparseLt (a file path, or '' for the loader's search); raises naming the wheel to install");
  m.def("semi_cusparselt_version", &semi::cusparselt_version, "version of the loaded libcusparseLt (0: none)");
  m.def("semi_cusparselt_header_version", &semi::cusparselt_header_version,
        "version of the cusparseLt.h sparsekern was compiled against (0: none)");
  m.def("semi_compressed_size", [](const InArray& w) {
          const semi::CompressedSize s = semi::compressed_size(weight_shape_of(AnyArray(w)));
          return nb::make_tuple(s.compressed_bytes, s.buffer_bytes);
        }, nb::arg("weight"), "(compressed bytes, compress buffer bytes) of a 2:4 weight");
  m.def("semi_compress", [](const InArray& w_in, const nb::object& compressed_obj, std::uintptr_t buffer_ptr,
                            std::size_t buffer_bytes, std::uintptr_t stream) {
          const AnyArray w(w_in);
          Held held;
          const AnyArray compressed = hold_out(held, compressed_obj, "compressed");
          semi::compress(weight_shape_of(w), w.data(), compressed.data(),
                         Workspace{reinterpret_cast<void*>(buffer_ptr), buffer_bytes}, as_stream(stream));
        }, nb::arg("weight"), nb::arg("compressed"), nb::arg("buffer_ptr") = 0, nb::arg("buffer_bytes") = 0,
        nb::arg("stream") = 0,
        "compress a pruned (2:4) row-major weight into `compressed` (bytes from semi_compressed_size)");
  m.def("semi_built_with_cutlass_sm90", &semi::built_with_cutlass_sm90,
        "whether this build has the CUTLASS sm90 2:4 kernels");
  m.def("semi_cutlass_usable", [](int device) { return semi::cutlass_sm90_usable(Device{DeviceType::cuda, device}); },
        nb::arg("device"), "whether the CUTLASS sm90 2:4 kernels run on CUDA device `device`");
  m.def("semi_cutlass_sizes", [](const InArray& w) {
          const semi::CutlassSizes s = semi::cutlass_compressed_size(weight_shape_of(AnyArray(w)));
          return nb::make_tuple(s.values_bytes, s.metadata_bytes, s.buffer_bytes);
        }, nb::arg("weight"), "(values bytes, metadata bytes, compress buffer bytes) for the CUTLASS 2:4 kernels");
  m.def("semi_cutlass_compress", [](const InArray& w_in, const nb::object& values_obj, const nb::object& metadata_obj,
                                    std::uintptr_t buffer_ptr, std::size_t buffer_bytes, std::uintptr_t stream) {
          const AnyArray w(w_in);
          Held held;
          const AnyArray values = hold_out(held, values_obj, "values"), metadata = hold_out(held, metadata_obj, "metadata");
          semi::cutlass_compress(weight_shape_of(w), w.data(), values.data(), metadata.data(),
                                 Workspace{reinterpret_cast<void*>(buffer_ptr), buffer_bytes}, as_stream(stream));
        }, nb::arg("weight"), nb::arg("values"), nb::arg("metadata"), nb::arg("buffer_ptr") = 0,
        nb::arg("buffer_bytes") = 0, nb::arg("stream") = 0,
        "compress a pruned (2:4) row-major weight into CUTLASS's values + metadata");
  m.def("semi_cutlass_configs", &semi::cutlass_linear_configs, "tile configurations of the CUTLASS 2:4 kernel");
  m.def("semi_cutlass_workspace_size", [](const InArray& x, const InArray& values, std::int64_t n,
                                          const nb::object& bias, const InArray& y, int config) {
          Held held;
          return semi::cutlass_linear_workspace_size(linear_params(x, values, n, bias, AnyArray(y), false, held), config);
        }, nb::arg("x"), nb::arg("values"), nb::arg("n"), nb::arg("bias").none(), nb::arg("y"), nb::arg("config") = 0);
  m.def("semi_cutlass_linear", [](const InArray& x, const InArray& values, const InArray& metadata, std::int64_t n,
                                  const nb::object& bias, const nb::object& y_obj, std::uintptr_t workspace_ptr,
                                  std::size_t workspace_bytes, std::uintptr_t stream, int config) {
          if (device_of(AnyArray(metadata), "metadata") != device_of(AnyArray(x), "x"))
            throw InvalidArgument("`metadata` must be on the device of `x`");
          Held held;
          const AnyArray y = hold_out(held, y_obj, "y");
          semi::cutlass_linear(linear_params(x, values, n, bias, y, false, held), metadata.data(),
                               Workspace{reinterpret_cast<void*>(workspace_ptr), workspace_bytes}, as_stream(stream),
                               config);
        }, nb::arg("x"), nb::arg("values"), nb::arg("metadata"), nb::arg("n"), nb::arg("bias").none(), nb::arg("y"),
        nb::arg("workspace_ptr") = 0, nb::arg("workspace_bytes") = 0, nb::arg("stream") = 0, nb::arg("config") = 0,
        "y = x·Wᵀ + bias with the CUTLASS sm90 2:4 kernel (W compressed by semi_cutlass_compress)");
  m.def("semi_counters", [] {
    const semi::Counters c = semi::counters();
    nb::dict d;
    d["plans_created"] = c.plans_created;
    d["searches"] = c.searches;
    d["compressions"] = c.compressions;
    d["runs"] = c.runs;
    return d;
  });

  nb::class_<semi::LinearPlan>(m, "SemiLinearPlan", "a cuSPARSELt plan for y = x·Wᵀ + bias (one m, n, k, bias)")
      .def("__init__",
           [](semi::LinearPlan* self, const InArray& x, const InArray& compressed, std::int64_t n,
              const nb::object& bias, const InArray& y, bool y_transposed, int algorithm) {
             semi::PlanOptions options;
             options.algorithm = algorithm;
             Held held;
             new (self) semi::LinearPlan(linear_params(x, compressed, n, bias, AnyArray(y), y_transposed, held), options);
           },
           nb::arg("x"), nb::arg("compressed"), nb::arg("n"), nb::arg("bias").none(), nb::arg("y"),
           nb::arg("y_transposed") = false, nb::arg("algorithm") = -1)
      .def_prop_ro("workspace_size", &semi::LinearPlan::workspace_size)
      .def_prop_ro("searched", &semi::LinearPlan::searched)
      .def_prop_ro("algorithm_id", &semi::LinearPlan::algorithm_id)
      .def_prop_ro("max_algorithm_id", &semi::LinearPlan::max_algorithm_id)
      .def("search",
           [](semi::LinearPlan& plan, const InArray& x, const InArray& compressed, std::int64_t n,
              const nb::object& bias, const nb::object& y_obj, std::uintptr_t workspace_ptr,
              std::size_t workspace_bytes, std::uintptr_t stream, bool y_transposed) {
             Held held;
             const AnyArray y = hold_out(held, y_obj, "y");
             plan.search(linear_params(x, compressed, n, bias, y, y_transposed, held),
                       Workspace{reinterpret_cast<void*>(workspace_ptr), workspace_bytes}, as_stream(stream));
           },
           nb::arg("x"), nb::arg("compressed"), nb::arg("n"), nb::arg("bias").none(), nb::arg("y"),
           nb::arg("workspace_ptr") = 0, nb::arg("workspace_bytes") = 0, nb::arg("stream") = 0,
           nb::arg("y_transposed") = false)
      .def("run",
           [](semi::LinearPlan& plan, const InArray& x, const InArray& compressed, std::int64_t n,
              const nb::object& bias, const nb::object& y_obj, std::uintptr_t workspace_ptr,
              std::size_t workspace_bytes, std::uintptr_t stream, bool y_transposed) {
             Held held;
             const AnyArray y = hold_out(held, y_obj, "y");
             plan.run(linear_params(x, compressed, n, bias, y, y_transposed, held),
                       Workspace{reinterpret_cast<void*>(workspace_ptr), workspace_bytes}, as_stream(stream));
           },
           nb::arg("x"), nb::arg("compressed"), nb::arg("n"), nb::arg("bias").none(), nb::arg("y"),
           nb::arg("workspace_ptr") = 0, nb::arg("workspace_bytes") = 0, nb::arg("stream") = 0,
           nb::arg("y_transposed") = false);
}

}  // namespace sparsekern::bindings
