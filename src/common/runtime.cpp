// Library-wide queries: version, backend availability, dtype names.
#include <sparsekern/types.h>

#include <sparsekern/error.h>

#include <string>

#if SPARSEKERN_WITH_CUDA
#include <cuda_runtime_api.h>
#endif
#if defined(_OPENMP)
#include <omp.h>
#endif

#ifndef SPARSEKERN_VERSION_STRING
#error "SPARSEKERN_VERSION_STRING must be defined by the build"
#endif

namespace sparsekern {

const char* dtype_name(DType t) {
  switch (t) {
    case DType::f16: return "float16";
    case DType::bf16: return "bfloat16";
    case DType::f32: return "float32";
    case DType::f64: return "float64";
  }
  return "unknown";
}

bool built_with_cuda() { return SPARSEKERN_WITH_CUDA != 0; }

int cuda_device_count() {
#if SPARSEKERN_WITH_CUDA
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();  // no driver / no device is an answer (0), not an error
    return 0;
  }
  return count;
#else
  return 0;
#endif
}

const char* version() { return SPARSEKERN_VERSION_STRING; }

void set_cpu_threads(int n) {
  if (n < 1) throw InvalidArgument("set_cpu_threads: n must be at least 1; got " + std::to_string(n));
#if defined(_OPENMP)
  omp_set_num_threads(n);
#endif
}

int cpu_threads() {
#if defined(_OPENMP)
  return omp_get_max_threads();
#else
  return 1;
#endif
}

}  // namespace sparsekern
