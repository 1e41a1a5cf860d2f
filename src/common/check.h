#pragma once
// Argument checks and error helpers shared by every op family (host code only, no CUDA types).

#include <sparsekern/error.h>
#include <sparsekern/types.h>

#include <sstream>
#include <string>
#include <utility>

namespace sparsekern::detail {

template <typename... Args>
std::string concat(Args&&... args) {
  std::ostringstream os;
  (os << ... << std::forward<Args>(args));
  return os.str();
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
