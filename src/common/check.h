#pragma once
// Argument checks and error helpers shared by every op family (host code only, no CUDA types).

#include <sparsekern/error.h>
#include <sparsekern/types.h>

#include <string>
#include <string_view>
#include <type_traits>

namespace sparsekern::detail {

// Message building without iostreams: the library must not depend on iostream/locale state, which a
// toolchain that links libstdc++ statically into a shared object can leave uninitialised (seen on
// the GPU machine: std::ostringstream crashed there inside libsparsekern.so).
inline void append(std::string& s, std::string_view v) { s.append(v.data(), v.size()); }
inline void append(std::string& s, const char* v) { s.append(v ? v : "(null)"); }
inline void append(std::string& s, char v) { s.push_back(v); }
template <typename T, std::enable_if_t<std::is_arithmetic_v<T> && !std::is_same_v<T, char>, int> = 0>
void append(std::string& s, T v) {
  if constexpr (std::is_same_v<T, bool>) s.append(v ? "true" : "false");
  else s.append(std::to_string(v));
}
template <typename T, std::enable_if_t<std::is_enum_v<T>, int> = 0>
void append(std::string& s, T v) { s.append(std::to_string(static_cast<long long>(v))); }

template <typename... Args>
std::string concat(const Args&... args) {
  std::string s;
  (append(s, args), ...);
  return s;
}

inline const char* device_type_name(DeviceType t) { return t == DeviceType::cpu ? "cpu" : "cuda"; }

inline std::string device_name(Device d) {
  return d.type == DeviceType::cpu ? std::string("cpu") : concat("cuda:", d.index);
}

}  // namespace sparsekern::detail

/// Throws sparsekern::InvalidArgument with the streamed message when `cond` is false. The message
/// names the argument and says what was expected and what came.
#define SK_EXPECTS(cond, ...)                                                        \
  do {                                                                               \
    if (!(cond)) throw ::sparsekern::InvalidArgument(::sparsekern::detail::concat(__VA_ARGS__)); \
  } while (0)

/// Like SK_EXPECTS but for element-type problems (maps to TypeError in Python).
#define SK_EXPECTS_TYPE(cond, ...)                                                   \
  do {                                                                               \
    if (!(cond)) throw ::sparsekern::TypeMismatch(::sparsekern::detail::concat(__VA_ARGS__)); \
  } while (0)

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <utility>

namespace sparsekern::detail {

/// Whether `t` is one of the DType enumerators (an int cast to DType may not be).
inline bool valid_dtype(DType t) {
  return t == DType::f16 || t == DType::bf16 || t == DType::f32 || t == DType::f64;
}

/// Product of non-negative sizes, or -1 when it does not fit in int64 (a wrapped product of 0
/// once let null pointers of "2^32 x 2^32" views through to the kernels).
inline std::int64_t checked_product(std::initializer_list<std::int64_t> sizes) {
  std::int64_t p = 1;
  for (std::int64_t s : sizes) {
    if (s < 0) return -1;
    if (s != 0 && p > INT64_MAX / s) {
      // An overflowing product is still 0 if a later size is 0.
      for (std::int64_t t : sizes) if (t == 0) return 0;
      return -1;
    }
    p *= s;
  }
  return p;
}

/// One dim of a strided view: its size and its stride in elements (both non-negative).
struct Dim {
  std::int64_t size;
  std::int64_t stride;
};

/// Elements a view spans from its first to its last element plus one (0 when empty), or -1 when
/// that does not fit in int64 bytes of `elem_size`-byte elements or a size or a stride (of a dim of
/// more than one element) is negative. A dim of size 1 adds nothing, whatever its stride.
inline std::int64_t span_elements(std::initializer_list<Dim> dims, std::int64_t elem_size) {
  std::int64_t last = 0;
  for (const Dim& d : dims) {
    if (d.size == 0) return 0;
    if (d.size < 0 || (d.stride < 0 && d.size > 1)) return -1;
    if (d.size > 1 && d.stride > (INT64_MAX - last) / (d.size - 1)) return -1;
    last += (d.size - 1) * d.stride;
  }
  if (last >= INT64_MAX / std::max<std::int64_t>(elem_size, 1)) return -1;
  return last + 1;
}

/// Whether no two index tuples of the view reach one element. Conservative: sorted by stride,
/// each dim must step past everything the smaller-stride dims span (true of every row- or
/// column-major view, slices and transposes included; refuses interleaved layouts).
inline bool self_disjoint(std::initializer_list<Dim> dims) {
  Dim ds[8];
  int n = 0;
  for (const Dim& d : dims) {
    if (d.size == 0) return true;
    if (d.size > 1 && n < 8) ds[n++] = d;
  }
  std::sort(ds, ds + n, [](const Dim& a, const Dim& b) { return a.stride < b.stride; });
  std::int64_t span = 1;
  for (int i = 0; i < n; ++i) {
    if (ds[i].stride < span) return false;
    span = ds[i].stride * (ds[i].size - 1) + span;
  }
  return true;
}

/// Whether the byte ranges [a, a + a_elems·elem) and [b, b + b_elems·elem) intersect.
inline bool ranges_overlap(const void* a, std::int64_t a_elems, const void* b, std::int64_t b_elems,
                           std::int64_t elem) {
  if (a == nullptr || b == nullptr || a_elems <= 0 || b_elems <= 0) return false;
  const auto pa = reinterpret_cast<std::uintptr_t>(a), pb = reinterpret_cast<std::uintptr_t>(b);
  return pa < pb + std::uintptr_t(b_elems * elem) && pb < pa + std::uintptr_t(a_elems * elem);
}

}  // namespace sparsekern::detail
