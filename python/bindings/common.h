#pragma once
// Conversion of DLPack arrays (nb::ndarray) into sparsekern's plain views, with argument-naming
// errors. Shared by every family's binding file.

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <sparsekern/error.h>
#include <sparsekern/types.h>

#include <cstdint>
#include <string>

namespace sparsekern::bindings {

namespace nb = nanobind;
using Array = nb::ndarray<nb::device::cpu, nb::device::cuda>;  // any dtype, any strides
using AnyArray = nb::ndarray<>;

/// dtype of `a`, or TypeMismatch naming `name` for anything but f16/bf16/f32/f64.
DType dtype_of(const AnyArray& a, const char* name);

/// Device of `a`; InvalidArgument naming `name` for devices other than CPU and CUDA.
Device device_of(const AnyArray& a, const char* name);

/// A 2-D array as a single matrix, or a 3-D array as a batch (batch, rows, cols).
struct BatchedMatrix {
  std::int64_t batch = 1;
  MatrixView view{};
};
BatchedMatrix matrix_of(const AnyArray& a, const char* name);

inline MutableMatrixView mutable_view(const BatchedMatrix& m) {
  return MutableMatrixView{const_cast<void*>(m.view.data), m.view.rows, m.view.cols,
                           m.view.row_stride, m.view.col_stride, m.view.batch_stride};
}

inline Stream as_stream(std::uintptr_t s) { return reinterpret_cast<Stream>(s); }

void register_dense(nb::module_& m);
void register_csr(nb::module_& m);   // csr.cpp: CSR SpMM / SDDMM plans
void register_semi(nb::module_& m);  // semi.cpp: 2:4 semi-structured (cuSPARSELt)
void register_inplace(nb::module_& m);  // inplace.cpp: in-place softmax / norms / square matmul
void register_kron(nb::module_& m);  // kron.cpp: Kronecker-factored products
void register_bsr(nb::module_& m);   // bsr.cpp: block-sparse dsd / dds / sdd

}  // namespace sparsekern::bindings
