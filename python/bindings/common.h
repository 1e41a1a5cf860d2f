#pragma once
// Conversion of DLPack arrays (nb::ndarray) into sparsekern's plain views, with argument-naming
// errors. Shared by every family's binding file.

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <sparsekern/error.h>
#include <sparsekern/types.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace sparsekern::bindings {

namespace nb = nanobind;
using Array = nb::ndarray<nb::device::cpu, nb::device::cuda>;  // any dtype, any strides
/// The helpers' array type (writable: what an op writes arrives as this).
using AnyArray = nb::ndarray<>;
/// An operand the op only reads: arrays flagged read-only (a read-only NumPy array, a read-only
/// DLPack export) are accepted too, which nanobind's default (writable) refuses. The binding takes
/// it as `x_in` and works on `const AnyArray x(x_in)`: the same array, never written through.
using InArray = nb::ndarray<nb::ro>;

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

/// An array the op writes must not reach one element through two indices: a broadcast view (a
/// zero stride on a dim of more than one element) would get several results written to one place.
inline void check_no_broadcast(const AnyArray& a, const char* name) {
  for (std::size_t i = 0; i < a.ndim(); ++i)
    if (a.shape(i) > 1 && a.stride(i) == 0)
      throw InvalidArgument(std::string("`") + name + "` is written and must not be a broadcast view (dim " +
                            std::to_string(i) + " has stride 0); pass a copy (e.g. .contiguous())");
}

/// An output must not share memory with an input: the kernels read operands they have partly
/// overwritten (exact aliasing is caught by the library; this catches overlaps of any offset).
/// Conservative: byte ranges that intersect count as sharing, even if the views interleave.
inline void check_no_overlap(const AnyArray& out, const char* out_name, const AnyArray& in, const char* in_name) {
  if (out.size() == 0 || in.size() == 0 || out.device_type() != in.device_type() || out.device_id() != in.device_id())
    return;
  auto range = [](const AnyArray& a) {
    std::int64_t lo = 0, hi = 0;
    for (std::size_t i = 0; i < a.ndim(); ++i) {
      const std::int64_t ext = (std::int64_t(a.shape(i)) - 1) * std::int64_t(a.stride(i));
      (ext < 0 ? lo : hi) += ext;
    }
    const auto base = reinterpret_cast<std::intptr_t>(a.data());
    const std::int64_t item = std::int64_t(a.itemsize());
    return std::pair<std::intptr_t, std::intptr_t>{base + lo * item, base + (hi + 1) * item};
  };
  const auto [o0, o1] = range(out);
  const auto [i0, i1] = range(in);
  if (o0 < i1 && i0 < o1)
    throw InvalidArgument(std::string("`") + out_name + "` must not share memory with `" + in_name + "`");
}

/// The GIL: every op binding drops it (nb::gil_scoped_release) around the library call, after the
/// arguments are converted and before any Python object is touched again, so that other Python
/// threads run during a long CPU kernel (they stalled for the whole op before: an 86 ms CPU matmul
/// held up a 1 ms heartbeat thread for 86 ms). The library is thread-safe (handles per thread,
/// mutexes around its caches); arrays and Python objects live in the binding's scope, released after
/// the GIL is back. The plan objects (csr, semi) keep the GIL: their descriptors are per object.

/// Arrays converted from optional (nb::object) arguments, kept for the duration of a call. A
/// DLPack capsule hands its tensor to the nb::ndarray made from it, and a capsule passed inline
/// (`f(t.__dlpack__())`, a CuPy or JAX array's capsule) may be that tensor's only owner: the
/// ndarray must outlive the kernel's use of the pointer taken from it, or the memory is freed first.
using Held = std::vector<AnyArray>;

/// `obj` (not None), an operand the op only reads (read-only arrays accepted, see InArray), as an
/// array that `held` keeps alive. Returned by value (a second handle on the same array): a
/// reference into `held` would dangle once a later hold() grows the vector.
inline AnyArray hold(Held& held, const nb::object& obj) {
  held.push_back(AnyArray(nb::cast<InArray>(obj)));
  return held.back();
}

/// `obj`, an array the op writes, as a writable array (the returned handle keeps it alive);
/// InvalidArgument naming `name` where it is an array flagged read-only, TypeMismatch where it is
/// no array.
inline AnyArray out_array(const nb::object& obj, const char* name) {
  AnyArray a;
  if (!nb::try_cast<AnyArray>(obj, a)) {
    InArray r;
    if (nb::try_cast<InArray>(obj, r))
      throw InvalidArgument(std::string("`") + name + "` is read-only, and the op writes it; pass a writable array");
    throw TypeMismatch(std::string("`") + name + "` must be an array (DLPack or buffer protocol); got " +
                       nb::type_name(obj.type()).c_str());
  }
  return a;
}

/// out_array, kept alive by `held` as well (for optional outputs converted among other arrays).
inline AnyArray hold_out(Held& held, const nb::object& obj, const char* name) {
  held.push_back(out_array(obj, name));
  return held.back();
}

void register_dense(nb::module_& m);
void register_csr(nb::module_& m);   // csr.cpp: CSR SpMM / SDDMM plans
void register_semi(nb::module_& m);  // semi.cpp: 2:4 semi-structured (cuSPARSELt)
void register_inplace(nb::module_& m);  // inplace.cpp: in-place softmax / norms / square matmul
void register_kron(nb::module_& m);  // kron.cpp: Kronecker-factored products
void register_bsr(nb::module_& m);   // bsr.cpp: block-sparse dsd / dds / sdd

}  // namespace sparsekern::bindings
