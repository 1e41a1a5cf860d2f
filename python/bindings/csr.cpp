// Bindings of the CSR family (sparsekern/csr.h): the SpMM / SDDMM plan classes, which Python
// caches per (pattern, shape, dtype, stream), and the planning counters.
#include <nanobind/stl/string.h>

#include <sparsekern/csr.h>

#include "common.h"

namespace sparsekern::bindings {

namespace {

csr::IndexType index_type_of(const AnyArray& a, const char* name) {
  const nb::dlpack::dtype t = a.dtype();
  if (t.code == uint8_t(nb::dlpack::dtype_code::Int) && t.lanes == 1) {
    if (t.bits == 32) return csr::IndexType::i32;
    if (t.bits == 64) return csr::IndexType::i64;
  }
  throw TypeMismatch("`" + std::string(name) + "` must be an int32 or int64 tensor");
}

const char* index_name(csr::IndexType t) { return t == csr::IndexType::i32 ? "int32" : "int64"; }

void check_vector(const AnyArray& a, const char* name, std::int64_t size) {
  if (a.ndim() != 1)
    throw InvalidArgument("`" + std::string(name) + "` must be 1-D; got " + std::to_string(a.ndim()) + "-D");
  if (std::int64_t(a.shape(0)) != size)
    throw InvalidArgument("`" + std::string(name) + "` must have " + std::to_string(size) +
                          " entries; got " + std::to_string(a.shape(0)));
  if (a.shape(0) > 1 && a.stride(0) != 1)
    throw InvalidArgument("`" + std::string(name) + "` must be contiguous; got stride " +
                          std::to_string(a.stride(0)));
}

/// The CSR view of (crow_indices, col_indices[, values]) with the shape (rows, cols).
csr::CsrView csr_of(const AnyArray& crow, const AnyArray& col, const AnyArray* values,
                    std::int64_t rows, std::int64_t cols, Device device) {
  csr::CsrView v;
  v.rows = rows;
  v.cols = cols;
  v.index_type = index_type_of(crow, "crow_indices");
  if (index_type_of(col, "col_indices") != v.index_type)
    throw TypeMismatch(std::string("`col_indices` must have the dtype of `crow_indices` (") +
                       index_name(v.index_type) + "); got " +
                       index_name(index_type_of(col, "col_indices")));
  if (col.ndim() != 1) throw InvalidArgument("`col_indices` must be 1-D");
  v.nnz = std::int64_t(col.shape(0));
  check_vector(crow, "crow_indices", rows + 1);
  check_vector(col, "col_indices", v.nnz);
  if (device_of(crow, "crow_indices") != device || device_of(col, "col_indices") != device)
    throw InvalidArgument("`crow_indices` and `col_indices` must be on the device of the values");
  v.crow_indices = crow.data();
  v.col_indices = col.data();
  if (values) {
    check_vector(*values, "values", v.nnz);
    v.values = values->data();
  }
  return v;
}

void check_dtype(const AnyArray& a, const char* name, DType want) {
  const DType got = dtype_of(a, name);
  if (got != want)
    throw TypeMismatch("`" + std::string(name) + "` must have dtype " + dtype_name(want) + "; got " +
                       dtype_name(got));
}

void check_device(const AnyArray& a, const char* name, Device want) {
  if (device_of(a, name) != want)
    throw InvalidArgument("`" + std::string(name) + "` must be on the device of the values");
}

/// `out` is written by a run (a plan's constructor only reads its shape).
csr::SpmmParams spmm_params(const InArray& crow_in, const InArray& col_in, const InArray& values_in,
                            std::int64_t rows, std::int64_t cols, const InArray& b_in, const AnyArray& out,
                            bool transpose_a, double alpha, double beta) {
  const AnyArray crow(crow_in), col(col_in), values(values_in), b(b_in);
  csr::SpmmParams p;
  p.dtype = dtype_of(values, "values");
  p.device = device_of(values, "values");
  check_dtype(b, "b", p.dtype);
  check_dtype(out, "out", p.dtype);
  check_device(b, "b", p.device);
  check_device(out, "out", p.device);
  p.a = csr_of(crow, col, &values, rows, cols, p.device);
  check_no_broadcast(out, "out");
  check_no_overlap(out, "out", b, "b");
  check_no_overlap(out, "out", values, "values");
  const BatchedMatrix bm = matrix_of(b, "b"), cm = matrix_of(out, "out");
  if (b.ndim() != out.ndim() || bm.batch != cm.batch)
    throw InvalidArgument("`b` and `out` must both be 2-D or both 3-D with the same batch size");
  p.batch = cm.batch;
  p.b = bm.view;
  p.c = mutable_view(cm);
  p.transpose_a = transpose_a;
  p.alpha = alpha;
  p.beta = beta;
  return p;
}

/// `out_values` is written by a run (a plan's constructor only reads its shape).
csr::SddmmParams sddmm_params(const InArray& crow_in, const InArray& col_in, std::int64_t rows,
                              std::int64_t cols, const InArray& x_in, const InArray& y_in,
                              const AnyArray& out_values, double alpha, double beta) {
  const AnyArray crow(crow_in), col(col_in), x(x_in), y(y_in);
  csr::SddmmParams p;
  p.dtype = dtype_of(out_values, "out_values");
  p.device = device_of(out_values, "out_values");
  check_dtype(x, "x", p.dtype);
  check_dtype(y, "y", p.dtype);
  check_device(x, "x", p.device);
  check_device(y, "y", p.device);
  p.pattern = csr_of(crow, col, nullptr, rows, cols, p.device);
  check_vector(out_values, "out_values", p.pattern.nnz);
  p.out_values = out_values.data();
  const BatchedMatrix xm = matrix_of(x, "x"), ym = matrix_of(y, "y");
  if (x.ndim() != y.ndim() || xm.batch != ym.batch)
    throw InvalidArgument("`x` and `y` must both be 2-D or both 3-D with the same batch size");
  p.batch = xm.batch;
  p.x = xm.view;
  p.y = ym.view;
  p.alpha = alpha;
  p.beta = beta;
  return p;
}

/// A raw device (or host) scratch buffer owned by the caller, e.g. a torch uint8 tensor's data_ptr.
Workspace workspace_of(std::uintptr_t ptr, std::size_t bytes) {
  return Workspace{reinterpret_cast<void*>(ptr), bytes};
}

const char* algorithm_name(csr::SpmmAlgorithm a) {
  switch (a) {
    case csr::SpmmAlgorithm::csr_alg1: return "csr_alg1";
    case csr::SpmmAlgorithm::csr_alg2: return "csr_alg2";
    case csr::SpmmAlgorithm::csr_alg3: return "csr_alg3";
    case csr::SpmmAlgorithm::automatic: break;
  }
  return "default";
}

}  // namespace

void register_csr(nb::module_& m) {
  nb::class_<csr::SpmmPlan>(m, "CsrSpmmPlan",
                            "A planned CSR SpMM (cuSPARSE descriptors, algorithm, workspace size)")
      .def("__init__",
           [](csr::SpmmPlan* self, const InArray& crow, const InArray& col, const InArray& values,
              std::int64_t rows, std::int64_t cols, const InArray& b, const InArray& out,
              bool transpose_a, int algorithm) {
             new (self) csr::SpmmPlan(spmm_params(crow, col, values, rows, cols, b, AnyArray(out), transpose_a, 1.0, 0.0),
                                      static_cast<csr::SpmmAlgorithm>(algorithm));
           },
           nb::arg("crow_indices"), nb::arg("col_indices"), nb::arg("values"), nb::arg("rows"),
           nb::arg("cols"), nb::arg("b"), nb::arg("out"), nb::arg("transpose_a") = false,
           nb::arg("algorithm") = 0)
      .def_prop_ro("workspace_size", &csr::SpmmPlan::workspace_size)
      .def_prop_ro("algorithm", [](const csr::SpmmPlan& p) { return std::string(algorithm_name(p.algorithm())); })
      .def_prop_ro("runs", &csr::SpmmPlan::runs)
      .def("run",
           [](csr::SpmmPlan& plan, const InArray& crow, const InArray& col, const InArray& values,
              std::int64_t rows, std::int64_t cols, const InArray& b, const nb::object& out_obj,
              bool transpose_a, double alpha, double beta, std::uintptr_t workspace_ptr,
              std::size_t workspace_bytes, std::uintptr_t stream) {
             const AnyArray out = out_array(out_obj, "out");
             plan.run(spmm_params(crow, col, values, rows, cols, b, out, transpose_a, alpha, beta),
                      workspace_of(workspace_ptr, workspace_bytes), as_stream(stream));
           },
           nb::arg("crow_indices"), nb::arg("col_indices"), nb::arg("values"), nb::arg("rows"),
           nb::arg("cols"), nb::arg("b"), nb::arg("out"), nb::arg("transpose_a"), nb::arg("alpha") = 1.0,
           nb::arg("beta") = 0.0, nb::arg("workspace_ptr") = 0, nb::arg("workspace_bytes") = 0,
           nb::arg("stream") = 0,
           "out ← alpha·op(A)·b + beta·out with the planned descriptors");

  nb::class_<csr::SddmmPlan>(m, "CsrSddmmPlan", "A planned CSR SDDMM")
      .def("__init__",
           [](csr::SddmmPlan* self, const InArray& crow, const InArray& col, std::int64_t rows,
              std::int64_t cols, const InArray& x, const InArray& y, const InArray& out_values) {
             new (self) csr::SddmmPlan(sddmm_params(crow, col, rows, cols, x, y, AnyArray(out_values), 1.0, 0.0));
           },
           nb::arg("crow_indices"), nb::arg("col_indices"), nb::arg("rows"), nb::arg("cols"),
           nb::arg("x"), nb::arg("y"), nb::arg("out_values"))
      .def_prop_ro("workspace_size", &csr::SddmmPlan::workspace_size)
      .def_prop_ro("runs", &csr::SddmmPlan::runs)
      .def("run",
           [](csr::SddmmPlan& plan, const InArray& crow, const InArray& col, std::int64_t rows,
              std::int64_t cols, const InArray& x, const InArray& y, const nb::object& out_values_obj,
              double alpha, double beta, std::uintptr_t workspace_ptr, std::size_t workspace_bytes,
              std::uintptr_t stream) {
             const AnyArray out_values = out_array(out_values_obj, "out_values");
             plan.run(sddmm_params(crow, col, rows, cols, x, y, out_values, alpha, beta),
                      workspace_of(workspace_ptr, workspace_bytes), as_stream(stream));
           },
           nb::arg("crow_indices"), nb::arg("col_indices"), nb::arg("rows"), nb::arg("cols"),
           nb::arg("x"), nb::arg("y"), nb::arg("out_values"), nb::arg("alpha") = 1.0,
           nb::arg("beta") = 0.0, nb::arg("workspace_ptr") = 0, nb::arg("workspace_bytes") = 0,
           nb::arg("stream") = 0,
           "out_values ← alpha·Σ_b (x_b·y_b)∘spy(pattern) + beta·out_values");

  m.def("csr_plan_counters", [] {
    const csr::PlanCounters c = csr::plan_counters();
    nb::dict d;
    d["plans_created"] = c.plans_created;
    d["buffer_size_queries"] = c.buffer_size_queries;
    d["preprocess_calls"] = c.preprocess_calls;
    d["runs"] = c.runs;
    return d;
  }, "process-wide planning counters of the CSR family (a warm plan adds only to `runs`)");
}

}  // namespace sparsekern::bindings
