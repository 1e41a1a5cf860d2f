#pragma once
// Turn run-time enums into compile-time constants (flash-attention's BOOL_SWITCH idiom), so each op
// writes its body once as a generic lambda instead of an if-ladder per dtype.

#include <sparsekern/error.h>
#include <sparsekern/types.h>

#include "half.h"

namespace sparsekern::detail {

template <DType T>
struct host_type;
template <> struct host_type<DType::f16> { using type = half_t; };
template <> struct host_type<DType::bf16> { using type = bfloat16_t; };
template <> struct host_type<DType::f32> { using type = float; };
template <> struct host_type<DType::f64> { using type = double; };

/// Accumulator type used by the CPU kernels: fp32 for 16/32-bit types, fp64 for fp64.
template <typename T> struct acc_type { using type = float; };
template <> struct acc_type<double> { using type = double; };

}  // namespace sparsekern::detail

/// SK_DTYPE_SWITCH(dtype, T, body): runs `body` with `T` the host element type of `dtype`
/// (half_t / bfloat16_t / float / double). Throws TypeMismatch for anything else.
#define SK_DTYPE_SWITCH(dtype, T, ...)                                                  \
  [&] {                                                                                 \
    switch (dtype) {                                                                    \
      case ::sparsekern::DType::f16: { using T = ::sparsekern::detail::half_t; return __VA_ARGS__(); } \
      case ::sparsekern::DType::bf16: { using T = ::sparsekern::detail::bfloat16_t; return __VA_ARGS__(); } \
      case ::sparsekern::DType::f32: { using T = float; return __VA_ARGS__(); }         \
      case ::sparsekern::DType::f64: { using T = double; return __VA_ARGS__(); }        \
    }                                                                                   \
    throw ::sparsekern::TypeMismatch("unsupported dtype");                              \
  }()

/// SK_BOOL_SWITCH(cond, NAME, body): runs `body` with `constexpr bool NAME` equal to `cond`.
#define SK_BOOL_SWITCH(cond, NAME, ...)          \
  [&] {                                          \
    if (cond) {                                  \
      constexpr bool NAME = true;                \
      return __VA_ARGS__();                      \
    } else {                                     \
      constexpr bool NAME = false;               \
      return __VA_ARGS__();                      \
    }                                            \
  }()
