#pragma once
// The whole C++ test "framework": SK_CHECK records a failure with file:line and a streamed message
// and carries on (one run shows every broken case); expect_throw checks the exception type and that
// its message names the argument; main() returns sk_test::summary(). No dependency to download.

#include <cstdio>
#include <exception>
#include <sstream>
#include <string>
#include <utility>

namespace sk_test {

inline int& failures() { static int n = 0; return n; }
inline int& checks() { static int n = 0; return n; }

template <typename... Args>
std::string str(Args&&... args) {
  std::ostringstream os;
  os.precision(17);
  (os << ... << std::forward<Args>(args));
  return os.str();
}

inline void fail(const char* file, int line, const std::string& what) {
  ++failures();
  // Past 50 failures the rest only add noise; the count at the end still says how many.
  if (failures() <= 50) std::fprintf(stderr, "%s:%d: FAILED: %s\n", file, line, what.c_str());
}

/// Runs `fn`; passes if it throws exactly `E` (or a subclass) whose message contains `needle`.
template <typename E, typename F>
void expect_throw(const char* file, int line, const char* what, F&& fn, const std::string& needle) {
  ++checks();
  try {
    fn();
  } catch (const E& e) {
    const std::string msg = e.what();
    if (msg.find(needle) == std::string::npos)
      fail(file, line, str(what, ": message does not mention ", needle, ": \"", msg, "\""));
    return;
  } catch (const std::exception& e) {
    fail(file, line, str(what, ": wrong exception type: \"", e.what(), "\""));
    return;
  }
  fail(file, line, str(what, ": no exception thrown"));
}

inline int summary(const char* name) {
  std::printf("%s: %d checks, %d failed\n", name, checks(), failures());
  return failures() == 0 ? 0 : 1;
}

/// Element conversions for the reference computations: every storage type goes through float
/// (half_t / bfloat16_t convert explicitly), double stays exact.
template <typename T> T to_t(double v) { return static_cast<T>(static_cast<float>(v)); }
template <> inline double to_t<double>(double v) { return v; }
template <typename T> double to_d(T v) { return static_cast<double>(static_cast<float>(v)); }
template <> inline double to_d<double>(double v) { return v; }

}  // namespace sk_test

#define SK_CHECK(cond, ...)                                                                  \
  do {                                                                                       \
    ++::sk_test::checks();                                                                   \
    if (!(cond)) ::sk_test::fail(__FILE__, __LINE__, ::sk_test::str(#cond, " -- ", __VA_ARGS__)); \
  } while (0)

#define SK_EXPECT_THROW(E, stmt, needle) \
  ::sk_test::expect_throw<E>(__FILE__, __LINE__, #stmt, [&] { stmt; }, needle)
