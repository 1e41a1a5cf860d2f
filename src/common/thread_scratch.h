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

template <class T>
class ThreadScratch {
 public:
  /// `per_thread` elements for each thread of a region that runs in parallel when `parallel`.
  ThreadScratch(std::size_t per_thread, bool parallel)
      : per_thread_(per_thread), buf_(per_thread * max_threads(parallel)) {}

  /// The calling thread's slice (inside the region).
  T* get() { return buf_.data() + per_thread_ * thread_index(); }

 private:
  static std::size_t max_threads(bool parallel) {
#if defined(_OPENMP)
    return parallel ? std::size_t(omp_get_max_threads()) : 1;
#else
    (void)parallel;
    return 1;
#endif
  }
  static std::size_t thread_index() {
#if defined(_OPENMP)
    return std::size_t(omp_get_thread_num());
#else
    return 0;
#endif
  }

  std::size_t per_thread_;
  std::vector<T> buf_;
};

}  // namespace sparsekern::detail
