#pragma once
/// @file error.h
/// @brief Exceptions thrown by sparsekern. Bindings map them to Python exceptions:
///        InvalidArgument -> ValueError, TypeMismatch -> TypeError, everything else -> RuntimeError.

#include <stdexcept>
#include <string>

namespace sparsekern {

/// Base class of every exception sparsekern throws.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// An argument has the wrong shape, layout, device or value. The message names the argument.
class InvalidArgument : public Error {
 public:
  using Error::Error;
};

/// An argument has an unsupported or mismatched element type. The message names the argument.
class TypeMismatch : public Error {
 public:
  using Error::Error;
};

/// The requested backend is not available (e.g. a CUDA operand in a CPU-only build, or no driver).
class BackendUnavailable : public Error {
 public:
  using Error::Error;
};

/// A CUDA, cuBLAS or cuSPARSE call failed; the message carries file:line and the library's error.
class CudaError : public Error {
 public:
  using Error::Error;
};

}  // namespace sparsekern
