#pragma once
// Per-thread scratch for the CPU kernels' OpenMP regions, allocated before the region.
//
// An exception may not leave an OpenMP parallel region: a std::bad_alloc thrown by a buffer made
// inside one terminates the process (seen with a broadcast input of ~2^40 elements: softmax, the
// batched GEMM and the CSR SpMM aborted instead of raising). Made outside, the allocation throws
// to the caller like any other, and each thread takes its slice of one buffer.

#include <cstddef>
#include <vector>

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace sparsekern::detail {

/// Threads a region `#pragma omp parallel if (parallel)` may run, and the caller's index in it.
inline std::size_t region_threads(bool parallel) {
#if defined(_OPENMP)
  return parallel ? std::size_t(omp_get_max_threads()) : 1;
#else
  (void)parallel;
  return 1;
#endif
}
inline std::size_t region_thread_index() {
#if defined(_OPENMP)
  return std::size_t(omp_get_thread_num());
#else
  return 0;
#endif
}

template <class T>
class ThreadScratch {
 public:
  /// `per_thread` elements for each thread of a region that runs in parallel when `parallel`.
  ThreadScratch(std::size_t per_thread, bool parallel)
      : per_thread_(per_thread), buf_(per_thread * region_threads(parallel)) {}

  /// The calling thread's slice (inside the region).
  T* get() { return buf_.data() + per_thread_ * region_thread_index(); }

 private:
  std::size_t per_thread_;
  std::vector<T> buf_;
};

/// One object per thread of such a region (e.g. an emulated block's register files), each built
/// from the same arguments before the region.
template <class T>
class PerThread {
 public:
  template <class... Args>
  explicit PerThread(bool parallel, const Args&... args) {
    const std::size_t n = region_threads(parallel);
    items_.reserve(n);
    for (std::size_t i = 0; i < n; ++i) items_.emplace_back(args...);
  }
  T& get() { return items_[region_thread_index()]; }

 private:
  std::vector<T> items_;
};

}  // namespace sparsekern::detail
