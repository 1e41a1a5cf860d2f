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
