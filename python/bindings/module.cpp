// sparsekern._C: module definition, exception mapping and the shared DLPack conversions.
#include <sparsekern/handles.h>

#include "common.h"

namespace sparsekern::bindings {

DType dtype_of(const AnyArray& a, const char* name) {
  const nb::dlpack::dtype t = a.dtype();
  if (t.code == uint8_t(nb::dlpack::dtype_code::Float) && t.lanes == 1) {
    if (t.bits == 16) return DType::f16;
    if (t.bits == 32) return DType::f32;
    if (t.bits == 64) return DType::f64;
  }
  if (t.code == uint8_t(nb::dlpack::dtype_code::Bfloat) && t.bits == 16 && t.lanes == 1)
    return DType::bf16;
  static const char* codes[] = {"int", "uint", "float", "opaque", "bfloat", "complex", "bool"};
  const char* code = t.code < 7 ? codes[t.code] : "unknown";
  throw TypeMismatch("`" + std::string(name) +
                     "` must be float16, bfloat16, float32 or float64; got " + code +
                     std::to_string(t.bits));
}

Device device_of(const AnyArray& a, const char* name) {
  const int type = a.device_type();
  if (type == nb::device::cpu::value) return Device{DeviceType::cpu, 0};
  if (type == nb::device::cuda::value) return Device{DeviceType::cuda, a.device_id()};
  throw InvalidArgument("`" + std::string(name) + "` must be on the CPU or a CUDA device; got DLPack device type " +
                        std::to_string(type));
}

BatchedMatrix matrix_of(const AnyArray& a, const char* name) {
  BatchedMatrix out;
  if (a.ndim() == 2) {
    out.view = MatrixView{a.data(), std::int64_t(a.shape(0)), std::int64_t(a.shape(1)),
                          a.stride(0), a.stride(1), 0};
  } else if (a.ndim() == 3) {
    out.batch = std::int64_t(a.shape(0));
    out.view = MatrixView{a.data(), std::int64_t(a.shape(1)), std::int64_t(a.shape(2)),
                          a.stride(1), a.stride(2), a.stride(0)};
  } else {
    throw InvalidArgument("`" + std::string(name) + "` must be 2-D or 3-D (batch, rows, cols); got " +
                          std::to_string(a.ndim()) + "-D");
  }
  return out;
}

}  // namespace sparsekern::bindings

NB_MODULE(_C, m) {
  namespace nb = nanobind;
  using namespace sparsekern;
  m.doc() = "sparsekern native module: libsparsekern ops on DLPack arrays (CPU and CUDA)";

  // Map the library's exceptions to the Python ones users expect.
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const InvalidArgument& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const TypeMismatch& e) {
      PyErr_SetString(PyExc_TypeError, e.what());
    } catch (const Error& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what());
    }
  });

  m.def("version", &sparsekern::version, "libsparsekern version");
  m.def("built_with_cuda", &built_with_cuda, "whether the CUDA backend was compiled");
  m.def("cuda_device_count", &cuda_device_count,
        "CUDA devices visible to libsparsekern (0 without a driver, never raises)");
  m.def("init_cublas", [](int device) { handles::init_cublas(Device{DeviceType::cuda, device}); },
        nb::arg("device"), "create this thread's cuBLAS handle for `device` now");
  m.def("set_cpu_threads", &set_cpu_threads, nb::arg("n"),
        "threads of the CPU ops that the calling thread makes from now on (OpenMP team size)");
  m.def("cpu_threads", &cpu_threads, "team size of the calling thread's next CPU op");
  m.def("destroy_handles", &handles::destroy_all, "destroy every pooled cuBLAS/cuSPARSE handle");
  m.def("live_handle_count", &handles::live_handle_count);

  bindings::register_dense(m);
  bindings::register_csr(m);
  bindings::register_semi(m);
  bindings::register_inplace(m);
  bindings::register_kron(m);
  bindings::register_bsr(m);
}
