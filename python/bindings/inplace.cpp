// Bindings of the in-place family (sparsekern/inplace.h). Each function takes whole arrays plus the
// dim(s) the op reduces over and maps the other dims onto the library's row views itself: they are
// sorted by stride and merged where contiguous (rows are independent, so their order is free);
// layouts that still need more than two row indices (or one, for square_matmul) are covered by one
// library call per leading index.
#include <sparsekern/inplace.h>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "common.h"

namespace sparsekern::bindings {

namespace {

/// A non-reduced dim shared by one or two arrays of the same shape (x; or grad and y).
struct Dim {
  std::int64_t size;
  std::int64_t stride[2];
};

/// The non-reduced dims (all but [first, first + count)) of `a` and, if given, `b` (same shape):
/// size-1 dims dropped, sorted by decreasing stride of `a`, and merged where one dim steps exactly
/// over the next in both arrays. `empty` is set when a size is 0.
std::vector<Dim> row_dims(const AnyArray& a, const AnyArray* b, std::size_t first, std::size_t count,
                          bool& empty) {
  std::vector<Dim> dims;
  empty = false;
  for (std::size_t i = 0; i < a.ndim(); ++i) {
    if (a.shape(i) == 0) empty = true;
    if (i >= first && i < first + count) continue;
    if (a.shape(i) > 1) dims.push_back({std::int64_t(a.shape(i)), {a.stride(i), b ? b->stride(i) : 0}});
  }
  std::stable_sort(dims.begin(), dims.end(), [](const Dim& l, const Dim& r) { return l.stride[0] > r.stride[0]; });
  std::vector<Dim> merged;
  for (const Dim& d : dims) {
    if (!merged.empty() && merged.back().stride[0] == d.stride[0] * d.size &&
        merged.back().stride[1] == d.stride[1] * d.size) {
      merged.back().size *= d.size;
      merged.back().stride[0] = d.stride[0];
      merged.back().stride[1] = d.stride[1];
    } else {
      merged.push_back(d);
    }
  }
  return merged;
}

/// Calls fn(offsets, groups, n) for every combination of indices of all but the last `keep` groups
/// of `dims` (offsets[k]: element offset into array k); `groups` are the last n = min(keep, size).
void for_each_slice(const std::vector<Dim>& dims, std::size_t keep,
                    const std::function<void(const std::int64_t*, const Dim*, std::size_t)>& fn) {
  const std::size_t kept = std::min(keep, dims.size());
  const std::size_t loops = dims.size() - kept;
  std::vector<std::int64_t> idx(loops, 0);
  while (true) {
    std::int64_t off[2] = {0, 0};
    for (std::size_t i = 0; i < loops; ++i) {
      off[0] += idx[i] * dims[i].stride[0];
      off[1] += idx[i] * dims[i].stride[1];
    }
    fn(off, dims.data() + loops, kept);
    std::size_t i = loops;
    while (i > 0 && ++idx[i - 1] == dims[i - 1].size) idx[--i] = 0;
    if (i == 0) return;
  }
}

/// The array written in place must not reach one element through two index tuples: the ops
/// run slice by slice and row by row, so such rows would be read after another row overwrote
/// them. Conservative: with the dims sorted by stride, each stride must step past everything the
/// smaller-stride dims span (true of every view torch's slicing, transposes and permutes make;
/// refuses e.g. overlapping `unfold` windows, and the rare interleaved `as_strided` layouts too).
void check_no_internal_overlap(const AnyArray& a, const char* name) {
  std::vector<std::pair<std::int64_t, std::int64_t>> dims;  // (stride, size) of dims of size > 1
  for (std::size_t i = 0; i < a.ndim(); ++i) {
    if (a.shape(i) == 0) return;  // nothing is written
    if (a.shape(i) > 1) dims.emplace_back(std::abs(std::int64_t(a.stride(i))), std::int64_t(a.shape(i)));
  }
  std::sort(dims.begin(), dims.end());
  std::int64_t span = 1;  // elements spanned by the dims so far
  for (const auto& [stride, size] : dims) {
    if (stride < span)
      throw InvalidArgument(std::string("`") + name + "` is written in place and must not reach an element "
                            "twice (its strides make rows overlap or interleave); pass a copy "
                            "(e.g. .contiguous())");
    span = stride * (size - 1) + span;
  }
}

inline void* advance(void* p, std::int64_t elements, DType t) {
  return static_cast<char*>(p) + elements * static_cast<std::int64_t>(dtype_size(t));
}

/// Row views of `a` (and `b`, same shape) reduced over dims [first, first + count): `cols` elements
/// per row, `col_stride[k]` apart in array k. Calls fn(view of a, view of b) once per slice.
void for_each_rows(const AnyArray& a, const AnyArray* b, DType dtype, std::size_t first, std::size_t count,
                   std::int64_t cols, const std::int64_t col_stride[2],
                   const std::function<void(const inplace::RowsView&, const inplace::RowsView&)>& fn) {
  bool empty = false;
  const std::vector<Dim> dims = row_dims(a, b, first, count, empty);
  if (empty) return;
  for_each_slice(dims, 2, [&](const std::int64_t* off, const Dim* g, std::size_t n) {
    inplace::RowsView v[2];
    for (int k = 0; k < 2; ++k) {
      const AnyArray* arr = k == 0 ? &a : b;
      if (arr == nullptr) continue;
      v[k].data = advance(arr->data(), off[k], dtype);
      v[k].cols = cols;
      v[k].col_stride = col_stride[k];
      if (n == 2) {
        v[k].outer = g[0].size, v[k].outer_stride = g[0].stride[k];
        v[k].inner = g[1].size, v[k].inner_stride = g[1].stride[k];
      } else if (n == 1) {  // inner: consecutive rows, coalesced in the strided kernels
        v[k].inner = g[0].size, v[k].inner_stride = g[0].stride[k];
      }
    }
    fn(v[0], v[1]);
  });
}

std::size_t checked_dim(const AnyArray& a, std::int64_t dim, const char* name) {
  const auto nd = static_cast<std::int64_t>(a.ndim());
  if (dim < 0 || dim >= std::max<std::int64_t>(nd, 1))
    throw InvalidArgument("`dim` " + std::to_string(dim) + " is out of range for `" + name + "` with " +
                          std::to_string(nd) + " dims");
  return static_cast<std::size_t>(dim);
}

void check_same(const AnyArray& a, const char* name, DType dtype, Device device, const char* ref) {
  if (dtype_of(a, name) != dtype)
    throw TypeMismatch(std::string("`") + name + "` must have the dtype of `" + ref + "` (" + dtype_name(dtype) +
                       "); got " + dtype_name(dtype_of(a, name)));
  if (device_of(a, name) != device)
    throw InvalidArgument(std::string("`") + name + "` must be on the device of `" + ref + "`");
}

/// A C-contiguous array of exactly `n` elements (weight, bias), or nullptr for None.
/// It must not share memory with `x` anywhere (checked on the whole of x, before any slice runs).
const void* vector_of(const nb::object& obj, const char* name, std::int64_t n, DType dtype, Device device,
                      Held& held, const AnyArray& x) {
  if (obj.is_none()) return nullptr;
  const AnyArray a = hold(held, obj);
  check_same(a, name, dtype, device, "x");
  check_no_overlap(x, "x", a, name);
  std::int64_t expect = 1, count = 1;
  for (std::size_t i = a.ndim(); i-- > 0;) {
    count *= std::int64_t(a.shape(i));
    if (a.shape(i) > 1 && a.stride(i) != expect)
      throw InvalidArgument(std::string("`") + name + "` must be contiguous");
    expect *= std::int64_t(a.shape(i));
  }
  if (count != n)
    throw InvalidArgument(std::string("`") + name + "` must have " + std::to_string(n) + " elements (the normalised "
                          "dims of `x`); got " + std::to_string(count));
  return a.data();
}

void softmax(const nb::object& x_obj, std::int64_t dim, std::uintptr_t stream) {
  const AnyArray x = out_array(x_obj, "x");
  inplace::SoftmaxParams p;
  p.dtype = dtype_of(x, "x");
  p.device = device_of(x, "x");
  check_no_broadcast(x, "x");
  check_no_internal_overlap(x, "x");
  if (x.ndim() == 0) {  // a scalar is a row of one element
    p.x.data = x.data(), p.x.cols = 1;
    nb::gil_scoped_release nogil;  // the kernels touch no Python object (see common.h)
    return inplace::softmax(p, as_stream(stream));
  }
  const std::size_t d = checked_dim(x, dim, "x");
  const std::int64_t cs[2] = {x.shape(d) > 1 ? x.stride(d) : 1, 0};
  nb::gil_scoped_release nogil;  // the kernels touch no Python object (see common.h)
  for_each_rows(x, nullptr, p.dtype, d, 1, std::int64_t(x.shape(d)), cs,
                [&](const inplace::RowsView& v, const inplace::RowsView&) {
                  p.x = v;
                  inplace::softmax(p, as_stream(stream));
                });
}

void softmax_backward(const nb::object& grad_obj, const InArray& y_in, std::int64_t dim, std::uintptr_t stream) {
  const AnyArray grad = out_array(grad_obj, "grad"), y(y_in);
  inplace::SoftmaxBackwardParams p;
  p.dtype = dtype_of(grad, "grad");
  p.device = device_of(grad, "grad");
  check_no_broadcast(grad, "grad");
  check_same(y, "y", p.dtype, p.device, "grad");
  bool same_shape = grad.ndim() == y.ndim();
  for (std::size_t i = 0; same_shape && i < grad.ndim(); ++i) same_shape = grad.shape(i) == y.shape(i);
  if (!same_shape) throw InvalidArgument("`y` must have the shape of `grad`");
  // Whole arrays, before the first slice runs: the library checks each slice's pair, which misses
  // a y that overlaps another slice of grad, and a refusal there would leave earlier slices written.
  check_no_internal_overlap(grad, "grad");
  check_no_overlap(grad, "grad", y, "y");
  if (grad.ndim() == 0) {
    p.grad.data = grad.data(), p.grad.cols = 1;
    p.y.data = y.data(), p.y.cols = 1;
    return inplace::softmax_backward(p, as_stream(stream));
  }
  const std::size_t d = checked_dim(grad, dim, "grad");
  const bool unit = grad.shape(d) <= 1;
  const std::int64_t cs[2] = {unit ? 1 : grad.stride(d), unit ? 1 : y.stride(d)};
  nb::gil_scoped_release nogil;  // the kernels touch no Python object (see common.h)
  for_each_rows(grad, &y, p.dtype, d, 1, std::int64_t(grad.shape(d)), cs,
                [&](const inplace::RowsView& g, const inplace::RowsView& yv) {
                  p.grad = g;
                  p.y = yv;
                  inplace::softmax_backward(p, as_stream(stream));
                });
}

/// layer_norm / rms_norm over the last `normalized_ndim` dims of x, which must be contiguous.
void norm(bool rms, const nb::object& x_obj, std::int64_t normalized_ndim, const nb::object& weight,
          const nb::object& bias, double eps, std::uintptr_t stream) {
  Held held;
  const AnyArray x = out_array(x_obj, "x");
  inplace::NormParams p;
  p.dtype = dtype_of(x, "x");
  p.device = device_of(x, "x");
  check_no_broadcast(x, "x");
  p.eps = eps;
  const auto nd = static_cast<std::int64_t>(x.ndim());
  if (normalized_ndim < 1 || normalized_ndim > nd)
    throw InvalidArgument("`normalized_shape` must name 1 to " + std::to_string(nd) + " trailing dims of `x`; got " +
                          std::to_string(normalized_ndim));
  const std::size_t first = std::size_t(nd - normalized_ndim);
  std::int64_t cols = 1, expect = 1;
  for (std::size_t i = x.ndim(); i-- > first;) {
    if (x.shape(i) > 1 && x.stride(i) != expect)
      throw InvalidArgument("`x` must be contiguous over the normalised dims (its last " +
                            std::to_string(normalized_ndim) + "); got a non-contiguous view");
    expect *= std::int64_t(x.shape(i));
    cols *= std::int64_t(x.shape(i));
  }
  check_no_internal_overlap(x, "x");
  p.weight = vector_of(weight, "weight", cols, p.dtype, p.device, held, x);
  p.bias = vector_of(bias, "bias", cols, p.dtype, p.device, held, x);
  const std::int64_t cs[2] = {1, 0};
  nb::gil_scoped_release nogil;  // the kernels touch no Python object (see common.h)
  for_each_rows(x, nullptr, p.dtype, first, std::size_t(normalized_ndim), cols, cs,
                [&](const inplace::RowsView& v, const inplace::RowsView&) {
                  p.x = v;
                  rms ? inplace::rms_norm(p, as_stream(stream)) : inplace::layer_norm(p, as_stream(stream));
                });
}

void square_matmul(const nb::object& x_obj, const InArray& w_in, bool transpose_w, const nb::object& bias,
                   bool allow_tf32, bool allow_reduced_precision, const nb::object& workspace,
                   std::uintptr_t blas_workspace_ptr, std::size_t blas_workspace_bytes, std::uintptr_t stream) {
  Held held;
  const AnyArray x = out_array(x_obj, "x"), w(w_in);
  inplace::SquareMatmulParams p;
  p.dtype = dtype_of(x, "x");
  p.device = device_of(x, "x");
  check_no_broadcast(x, "x");
  check_same(w, "w", p.dtype, p.device, "x");
  if (x.ndim() < 1) throw InvalidArgument("`x` must have at least 1 dim");
  if (w.ndim() != 2) throw InvalidArgument("`w` must be 2-D; got " + std::to_string(w.ndim()) + "-D");
  const std::size_t last = x.ndim() - 1;
  const std::int64_t n = std::int64_t(x.shape(last));
  if (std::int64_t(w.shape(0)) != n || std::int64_t(w.shape(1)) != n)
    throw InvalidArgument("`w` must be square " + std::to_string(n) + "x" + std::to_string(n) +
                          " (the last dim of `x`); got " + std::to_string(w.shape(0)) + "x" +
                          std::to_string(w.shape(1)));
  if (n > 1 && x.stride(last) != 1)
    throw InvalidArgument("`x` must have a unit stride along its last dim; got stride " +
                          std::to_string(x.stride(last)));
  // Whole-array checks before the first slice runs (the library checks each slice on its own).
  check_no_internal_overlap(x, "x");
  check_no_overlap(x, "x", w, "w");
  p.w = MatrixView{w.data(), n, n, w.stride(0), w.stride(1), 0};
  p.transpose_w = transpose_w;
  p.bias = vector_of(bias, "bias", n, p.dtype, p.device, held, x);
  p.fp32_math = allow_tf32 ? dense::Fp32Math::tf32 : dense::Fp32Math::ieee;
  p.allow_reduced_precision_reduction = allow_reduced_precision;
  if (!workspace.is_none()) {  // an array, so that its device is checked like the operands'
    const AnyArray ws = hold_out(held, workspace, "workspace");
    if (device_of(ws, "workspace") != p.device)
      throw InvalidArgument("`workspace` must be on the device of `x`");
    // Its bytes as one run: a strided or broadcast view's nbytes() counts elements it does not own.
    if (ws.ndim() != 1 || (ws.shape(0) > 1 && ws.stride(0) != 1))
      throw InvalidArgument("`workspace` must be a contiguous 1-D tensor");
    check_no_overlap(x, "x", ws, "workspace");
    check_no_overlap(ws, "workspace", w, "w");
    p.workspace = Workspace{ws.data(), ws.nbytes()};
  }
  p.blas_workspace = Workspace{reinterpret_cast<void*>(blas_workspace_ptr), blas_workspace_bytes};
  bool empty = false;
  const std::vector<Dim> dims = row_dims(x, nullptr, last, 1, empty);
  if (empty) return;
  nb::gil_scoped_release nogil;  // the kernels touch no Python object (see common.h)
  for_each_slice(dims, 1, [&](const std::int64_t* off, const Dim* g, std::size_t k) {
    p.x = MutableMatrixView{advance(x.data(), off[0], p.dtype), k ? g[0].size : 1, n, k ? g[0].stride[0] : n, 1, 0};
    inplace::square_matmul(p, as_stream(stream));
  });
}

}  // namespace

void register_inplace(nb::module_& m) {
  m.def("inplace_softmax", &softmax, nb::arg("x"), nb::arg("dim"), nb::arg("stream") = 0,
        "x ← softmax(x) along `dim` (non-negative), in place");
  m.def("inplace_softmax_backward", &softmax_backward, nb::arg("grad"), nb::arg("y"), nb::arg("dim"),
        nb::arg("stream") = 0, "grad ← y·(grad − Σ grad·y) along `dim`, in place");
  m.def("inplace_layer_norm",
        [](const nb::object& x, std::int64_t nd, const nb::object& w, const nb::object& b, double eps,
           std::uintptr_t s) { norm(false, x, nd, w, b, eps, s); },
        nb::arg("x"), nb::arg("normalized_ndim"), nb::arg("weight").none(), nb::arg("bias").none(),
        nb::arg("eps"), nb::arg("stream") = 0, "LayerNorm over the last `normalized_ndim` dims, in place");
  m.def("inplace_rms_norm",
        [](const nb::object& x, std::int64_t nd, const nb::object& w, double eps, std::uintptr_t s) {
          norm(true, x, nd, w, nb::none(), eps, s);
        },
        nb::arg("x"), nb::arg("normalized_ndim"), nb::arg("weight").none(), nb::arg("eps"),
        nb::arg("stream") = 0, "RMSNorm over the last `normalized_ndim` dims, in place");
  m.def("square_matmul", &square_matmul, nb::arg("x"), nb::arg("w"), nb::arg("transpose_w"),
        nb::arg("bias").none(), nb::arg("allow_tf32"), nb::arg("allow_reduced_precision"),
        nb::arg("workspace").none(), nb::arg("blas_workspace_ptr") = 0, nb::arg("blas_workspace_bytes") = 0,
        nb::arg("stream") = 0,
        "x ← x·op(w) (+ bias) in place, one panel of rows at a time through `workspace` (an array on x's "
        "device); the cuBLAS workspace is a raw device buffer owned by the caller, as in gemm()");
  m.def("square_matmul_workspace_size",
        [](int dtype, std::int64_t rows, std::int64_t n) {
          return inplace::square_matmul_workspace_size(DType(dtype), rows, n);
        },
        nb::arg("dtype"), nb::arg("rows"), nb::arg("n"),
        "panel workspace bytes for x of rows × n (dtype: 0 f16, 1 bf16, 2 f32, 3 f64)");
}

}  // namespace sparsekern::bindings
